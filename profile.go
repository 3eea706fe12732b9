package tsplit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/measure"
	"github.com/tsplit/tsplit/profile"
)

// ProfileOptions configure ProfileFile.
type ProfileOptions struct {
	// Batch and Dims bind the model's symbolic dimensions, and Train
	// builds the training step of a forward model, as in Options.
	Batch int64
	Dims  map[string]int64
	Train TrainOptions
	// Runs and Warmup are the timed and untimed training steps
	// (0: 5 and 1); Seed seeds their input data.
	Runs, Warmup int
	Seed         uint64
	// Name is the profile's name ("": "cpu", or "cpu-emulated" with
	// Emulate).
	Name string
	// Base names the device profile (built-in or file) the memory
	// capacity, reserve and host memory come from ("": titan-rtx, or
	// Emulate's profile).
	Base string
	// Emulate, when set, names the built-in GPU profile whose host link
	// the CPU device emulates for plans made with this profile: its
	// bandwidths scaled by how much slower than its roofline the CPU
	// device computes the step (measure.BuildOptions.Emulate).
	Emulate string
	// Output, when set, is where the profile is written as JSON (the
	// form --device reads), atomically.
	Output string
	// Progress, when set, is told after every step.
	Progress func(Progress)
}

// StageProfile is the stage of the measuring steps.
const StageProfile Stage = "profile"

// ProfileFile reads a model, builds its training step (a forward model)
// and runs it unplanned on the CPU device, timing every op: the device
// profile of the CPU device for this model (measure.Run, measure.Build).
// Planning with it prices every op of the step, recomputation clones
// included, at its measured time. Errors: *UsageError for bad options,
// *InputError for a model that cannot be read, trained or run.
func ProfileFile(ctx context.Context, path string, opts ProfileOptions) (*profile.Profile, error) {
	iopts, err := importOptions(opts.Batch, opts.Dims)
	if err != nil {
		return nil, err
	}
	if err := trainOptions(opts.Train); err != nil {
		return nil, err
	}
	if opts.Runs < 0 {
		return nil, usage("Runs", "must not be negative, got %d", opts.Runs)
	}
	var target *profile.Profile
	if opts.Emulate != "" {
		var err error
		if target, err = profile.Lookup(opts.Emulate); err != nil {
			return nil, &UsageError{Option: "Emulate", Err: err}
		}
		if target.Emulation != nil || target.OpTimes != nil {
			return nil, usage("Emulate", "%s is a measured profile: emulate the GPU it was made for instead", opts.Emulate)
		}
	}
	base := target
	if opts.Base != "" || base == nil {
		var err error
		if base, err = profile.Lookup(opts.Base); err != nil {
			return nil, &UsageError{Option: "Base", Err: err}
		}
	}
	if err := checkOutput(opts.Output, path); err != nil {
		return nil, err
	}
	pr := &progress{fn: opts.Progress}
	m, err := load(ctx, path, iopts, pr)
	if err != nil {
		return nil, err
	}
	ti, err := compiler.ReadTrainingInfo(m)
	if err != nil {
		return nil, inputError(path, err)
	}
	if ti == nil {
		if _, err := train(ctx, m, opts.Train, pr); err != nil {
			return nil, err
		}
	}
	mopts := measure.Options{Runs: opts.Runs, Warmup: opts.Warmup, Seed: opts.Seed, Pacing: true}
	if opts.Progress != nil {
		mopts.Progress = func(done, total int) {
			pr.report(Progress{Stage: StageProfile, Round: done - 1, Fraction: float64(done) / float64(total), Peak: 0})
		}
	}
	meas, err := measure.Run(ctx, m, mopts)
	if err != nil {
		return nil, runError(ctx, path, err)
	}
	p, err := measure.Build(meas, measure.BuildOptions{Name: opts.Name, Base: base, Emulate: target})
	if err != nil {
		return nil, inputError(path, err)
	}
	if opts.Output != "" {
		js, err := MarshalProfile(p)
		if err != nil {
			return nil, err
		}
		if err := backend.WriteBytesContext(ctx, opts.Output, js, path); err != nil {
			var oe *backend.OutputError
			if errors.As(err, &oe) {
				return nil, &UsageError{Option: "Output", Err: err}
			}
			return nil, err
		}
	}
	return p, nil
}

// MarshalProfile is a profile as the JSON file --device reads, indented,
// with op keys as they are ("->" not escaped).
func MarshalProfile(p *profile.Profile) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/internal/units"
)

// importFlags bind a model's symbolic dimensions; every command that
// reads a model takes them.
type importFlags struct {
	batch int64
	dims  []string
}

func (f *importFlags) register(fl *pflag.FlagSet) {
	fl.Int64Var(&f.batch, "batch", 1, "batch size bound to the leading symbolic dimension of the inputs")
	fl.StringArrayVar(&f.dims, "dim", nil, "bind another symbolic dimension, NAME=N (repeatable)")
}

// parse returns the batch and the other dimensions.
func (f *importFlags) parse() (int64, map[string]int64, error) {
	if f.batch <= 0 {
		return 0, nil, usageError{fmt.Errorf("--batch must be positive, got %d", f.batch)}
	}
	dims := map[string]int64{}
	for _, d := range f.dims {
		name, val, ok := strings.Cut(d, "=")
		n, err := strconv.ParseInt(val, 10, 64)
		if !ok || name == "" || err != nil || n < 0 {
			return 0, nil, usageError{fmt.Errorf("--dim %q: want NAME=N with N >= 0", d)}
		}
		dims[name] = n
	}
	return f.batch, dims, nil
}

// options are the library's options with the model's dimensions bound.
func (f *importFlags) options() (tsplit.Options, error) {
	batch, dims, err := f.parse()
	return tsplit.Options{Batch: batch, Dims: dims}, err
}

// trainFlags select the loss and optimizer of a training step.
type trainFlags struct {
	opts tsplit.TrainOptions
}

func (f *trainFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.opts.Loss, "loss", "auto", "loss: auto, cross-entropy, mse or none (auto: cross-entropy on [N,C] or [N,T,V] logits, none on a scalar)")
	fl.StringVar(&f.opts.Optimizer, "optimizer", "sgd", "optimizer: sgd, momentum, adam or none (none: the step outputs gradients)")
	fl.Float64Var(&f.opts.LR, "lr", 0, "learning rate (default 0.01 for sgd/momentum, 0.001 for adam)")
	fl.Float64Var(&f.opts.Momentum, "momentum", 0, "momentum (default 0.9)")
	fl.Float64Var(&f.opts.WeightDecay, "weight-decay", 0, "L2 weight decay")
	fl.BoolVar(&f.opts.KeepGrads, "keep-grads", false, "also output every parameter gradient")
}

// outFlags choose how a command reports: a JSON object on stdout
// instead of the text summary, and no progress bar.
type outFlags struct {
	json  bool
	quiet bool
}

func (f *outFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&f.json, "json", false, "print the summary as one JSON object (snake_case fields) instead of text")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress bar (there is one only when stderr is a terminal)")
}

// writeJSON prints v as one indented JSON object.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// parseBytes reads a size such as 11GiB, 512MB or 1048576 given to flag.
func parseBytes(flag, s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil || n > math.MaxInt64 {
		return 0, usageError{fmt.Errorf("%s %q: want a size such as 11GiB, 512MB or 1048576", flag, s)}
	}
	if n == 0 {
		// The library reads 0 as "the default", which a user writing 0
		// cannot have meant.
		return 0, usageError{fmt.Errorf("%s %q: want a positive size (leave the flag out for the default)", flag, s)}
	}
	return int64(n), nil
}

func bytesStr(n int64) string { return units.Bytes(n) }

// describeDims says how the model's symbolic dimensions were bound.
func describeDims(dims map[string]int64) string {
	if len(dims) == 0 {
		return "static shapes"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(dims)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, dims[k]))
	}
	return strings.Join(parts, ", ")
}

// progressBar draws the library's progress reports of planning and
// running on stderr: nil (no bar) when quiet or when stderr is not a
// terminal, so that logs and the errors tests read stay clean.
func progressBar(quiet bool) (report func(tsplit.Progress), done func()) {
	done = func() {}
	if quiet {
		return nil, done
	}
	if st, err := os.Stderr.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil, done
	}
	const steps = 1000
	var bar *progressbar.ProgressBar
	var stage tsplit.Stage
	done = func() {
		if bar != nil {
			bar.Finish()
		}
	}
	report = func(p tsplit.Progress) {
		if p.Stage != tsplit.StagePlan && p.Stage != tsplit.StageRun {
			return
		}
		if p.Stage != stage {
			done()
			stage = p.Stage
			bar = progressbar.NewOptions(steps, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionClearOnFinish(),
				progressbar.OptionSetDescription(string(p.Stage)), progressbar.OptionSetPredictTime(false))
		}
		switch {
		case p.Stage == tsplit.StagePlan:
			bar.Describe(fmt.Sprintf("planning, round %d, peak %s", p.Round+1, bytesStr(p.Peak)))
		case !math.IsNaN(p.Loss):
			bar.Describe(fmt.Sprintf("training, loss %.5g", p.Loss))
		default:
			bar.Describe(fmt.Sprintf("running, iteration %d", p.Round+1))
		}
		bar.Set(int(p.Fraction * steps))
	}
	return report, done
}

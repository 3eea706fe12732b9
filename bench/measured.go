package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/measure"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/profile"
)

// DefaultMeasuredModels are the measured benchmark's models at
// CI-friendly sizes: the torchvision exports of ResNet-18 and
// MobileNetV2 (make torch-models) and the CI-sized transformer
// (BERT-base's small configuration), as MODEL:BATCH.
var DefaultMeasuredModels = []string{"testdata/torch/resnet18.onnx:2", "testdata/torch/mobilenet_v2.onnx:2", "transformer:16"}

// MeasuredConfig configures RunMeasured.
type MeasuredConfig struct {
	// Models are MODEL:BATCH: an ONNX file (a name ending in .onnx) or a
	// benchmark model (LookupModel) at its CI size.
	Models []string
	// Policies (nil: every registered one, in table order) and Budgets,
	// in percent of the unplanned step's peak (nil: 70 and 50): every
	// policy is planned at every budget.
	Policies []string
	Budgets  []int
	// Emulate is the GPU whose link the CPU device emulates ("":
	// titan-rtx); ProfileRuns the timed steps of each model's profile
	// (0: 5).
	Emulate     string
	ProfileRuns int
	// Rounds: every plan of a model runs one timed step in turn, each
	// right after a step of the unplanned step, Rounds times (0: 4), so
	// that a change of the machine's load falls on every plan alike and
	// each plan's step can be compared with an unplanned step run under
	// the same load.
	Rounds int
	// Repeats is the number of times the whole measurement (profile,
	// plans, runs) is repeated (0: 1): the profile is measured anew
	// each time, under the load of the moment, and the plans made on it.
	Repeats int
	Seed    uint64
	// Progress, when set, receives a line per step of the work.
	Progress io.Writer
	// Command is the command line, for the README.
	Command string
}

// MeasuredCase is one planned (or the unplanned) step, run.
type MeasuredCase struct {
	// Percent is the budget in percent of the unplanned peak (0 for the
	// unplanned step) and Budget in bytes.
	Percent int
	Budget  int64
	Policy  string
	// Err says why the policy could not plan the step ("" when it did).
	Err string
	// Predicted is the plan's simulated step (s), on the profile it was
	// planned with; Repredicted the same plan simulated on the profile
	// re-measured over the whole benchmark (MeasuredModel.Window).
	Predicted   float64
	Repredicted float64
	// Peak is the planned peak and MeasuredPeak the most the runs held
	// (bytes).
	Peak         int64
	MeasuredPeak int64
	Swapped      int
	Recomputed   int
	Split        int
	// Steps and Stalls are the measured step and compute stall (s) of
	// every timed step, in run order; Paired the measured step over the
	// unplanned step run just before it (not for the unplanned step).
	Steps, Stalls, Paired []float64
}

// OK reports whether the policy planned the step.
func (c *MeasuredCase) OK() bool { return c.Err == "" }

// Measured is the median measured step.
func (c *MeasuredCase) Measured() float64 { return quantile(c.Steps, 0.5) }

// Spread is the lower and upper quartile of the measured steps.
func (c *MeasuredCase) Spread() (lo, hi float64) {
	return quantile(c.Steps, 0.25), quantile(c.Steps, 0.75)
}

// Relative is the median of the steps over the unplanned steps run
// just before them: the measured time relative to the unplanned step,
// under the load both met.
func (c *MeasuredCase) Relative() float64 { return quantile(c.Paired, 0.5) }

// Stall is the median measured compute stall.
func (c *MeasuredCase) Stall() float64 { return quantile(c.Stalls, 0.5) }

// Error is (predicted − measured) / measured, for the prediction made
// when planning.
func (c *MeasuredCase) Error() float64 { return relErr(c.Predicted, c.Measured()) }

// WindowError is Error for the plan simulated on the profile of the
// whole benchmark.
func (c *MeasuredCase) WindowError() float64 { return relErr(c.Repredicted, c.Measured()) }

func relErr(pred, meas float64) float64 {
	if meas <= 0 {
		return 0
	}
	return (pred - meas) / meas
}

// MeasuredModel is one model's measured benchmark.
type MeasuredModel struct {
	Name  string
	Batch int64
	// Profile is the profile measured on the model's step (an emulated
	// link) before planning, which the policies planned with; Window
	// the profile re-measured from the unplanned step's runs between
	// the plans' runs, over the whole benchmark of the model, on the
	// same link: the machine's load as the plans met it. Ops is the
	// step's op count.
	Profile *profile.Profile
	Window  *profile.Profile
	Ops     int
	// Base is the unplanned step (Predicted: its simulated time).
	Base  *MeasuredCase
	Cases []*MeasuredCase
}

// Case returns the case of a policy at a budget (nil when absent).
func (m *MeasuredModel) Case(percent int, policy string) *MeasuredCase {
	for _, c := range m.Cases {
		if c.Percent == percent && c.Policy == policy {
			return c
		}
	}
	return nil
}

// MeasuredResults are what RunMeasured measured.
type MeasuredResults struct {
	Config MeasuredConfig
	// Reps[k][i] is model i (Config.Models) in repetition k.
	Reps [][]*MeasuredModel
	// Load is the machine's load average (1, 5, 15 min) before and
	// after the runs, from /proc/loadavg ("" where it cannot be read).
	LoadBefore, LoadAfter string
	Elapsed               time.Duration
}

// Resolve fills the defaults and checks the configuration.
func (c MeasuredConfig) Resolve() (MeasuredConfig, error) {
	if len(c.Models) == 0 {
		c.Models = DefaultMeasuredModels
	}
	if len(c.Policies) == 0 {
		c.Policies = OrderPolicies(policy.Names())
	}
	for _, p := range c.Policies {
		if _, err := policy.Lookup(p); err != nil {
			return c, err
		}
	}
	if len(c.Budgets) == 0 {
		c.Budgets = []int{70, 50}
	}
	for _, b := range c.Budgets {
		if b <= 0 || b > 100 {
			return c, fmt.Errorf("bench: budget %d%% is not in (0, 100]", b)
		}
	}
	if c.Emulate == "" {
		c.Emulate = "titan-rtx"
	}
	if c.ProfileRuns == 0 {
		c.ProfileRuns = 5
	}
	if c.Rounds == 0 {
		c.Rounds = 4
	}
	if c.Repeats == 0 {
		c.Repeats = 1
	}
	if c.ProfileRuns < 0 || c.Rounds < 0 || c.Repeats < 0 {
		return c, fmt.Errorf("bench: profile runs, rounds and iterations must be positive")
	}
	for _, spec := range c.Models {
		if _, _, err := parseMeasuredModel(spec); err != nil {
			return c, err
		}
	}
	return c, nil
}

// parseMeasuredModel splits MODEL:BATCH.
func parseMeasuredModel(spec string) (string, int64, error) {
	i := strings.LastIndex(spec, ":")
	if i < 0 {
		i = len(spec)
	}
	name := spec[:i]
	batch, err := strconv.ParseInt(strings.TrimPrefix(spec[i:], ":"), 10, 64)
	if name == "" || err != nil || batch <= 0 {
		return "", 0, fmt.Errorf("bench: model %q: want MODEL:BATCH (an .onnx file or a benchmark model, and a positive batch)", spec)
	}
	if !strings.HasSuffix(name, ".onnx") {
		if _, err := LookupModel(name); err != nil {
			return "", 0, err
		}
	}
	return name, batch, nil
}

// measuredStep builds the training step of a measured model.
func measuredStep(ctx context.Context, name string, batch int64) (*ir.Model, error) {
	if strings.HasSuffix(name, ".onnx") {
		m, err := tsplit.Load(ctx, name, tsplit.Options{Batch: batch})
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && strings.Contains(name, "testdata/torch") {
				err = fmt.Errorf("%w (make torch-models exports it)", err)
			}
			return nil, err
		}
		if _, err := tsplit.Train(ctx, m, compiler.TrainOptions{Optimizer: "sgd"}); err != nil {
			return nil, err
		}
		return m, nil
	}
	m, _ := LookupModel(name)
	step, _, err := Build(m, batch, 1, true, "sgd")
	return step, err
}

// runner runs one case's step on the CPU device.
type runner struct {
	c     *MeasuredCase
	model *ir.Model
	link  executor.Link
	x     *executor.Executor
	// rec, when set, records the timed steps and a pacing probe's
	// overheads during them (the unplanned step).
	rec *measure.Recorder
}

// RunMeasured measures every model: it profiles the model's unplanned
// training step on the CPU device with the emulated link
// (measure.Run, measure.Build), plans the step with every policy at
// every budget on that profile, then runs every plan that fits, in
// turn, each right after the unplanned step, Rounds times, recording
// the measured step, stall and peak next to the plan's prediction, and
// re-measures the profile from the unplanned step's runs (Window).
// Plans are deterministic; the measurements are not: they are the
// machine's, loaded as it was.
func RunMeasured(ctx context.Context, cfg MeasuredConfig) (*MeasuredResults, error) {
	start := time.Now()
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	target, err := profile.Lookup(cfg.Emulate)
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "measured: "+format+" (%v)\n", append(args, time.Since(start).Round(time.Second))...)
		}
	}
	r := &MeasuredResults{Config: cfg, LoadBefore: loadAverage()}
	for rep := range cfg.Repeats {
		var models []*MeasuredModel
		for _, spec := range cfg.Models {
			mm, err := measureModel(ctx, &cfg, spec, target, func(format string, args ...any) {
				logf("repetition %d: "+format, append([]any{rep + 1}, args...)...)
			})
			if err != nil {
				return nil, err
			}
			models = append(models, mm)
		}
		r.Reps = append(r.Reps, models)
	}
	r.LoadAfter = loadAverage()
	r.Elapsed = time.Since(start)
	return r, nil
}

// measureModel profiles one model, plans it with every policy at every
// budget and runs the plans (RunMeasured).
func measureModel(ctx context.Context, cfg *MeasuredConfig, spec string, target *profile.Profile, logf func(string, ...any)) (*MeasuredModel, error) {
	name, batch, _ := parseMeasuredModel(spec)
	step, err := measuredStep(ctx, name, batch)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", spec, err)
	}
	mm := &MeasuredModel{Name: measuredName(name), Batch: batch, Ops: len(step.Graph.Order())}
	meas, err := measure.Run(ctx, step, measure.Options{Runs: cfg.ProfileRuns, Seed: cfg.Seed, Pacing: true})
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", spec, err)
	}
	if mm.Profile, err = measure.Build(meas, measure.BuildOptions{Emulate: target}); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", spec, err)
	}
	logf("%s at batch %d profiled: step %.4g s, link %.3g MB/s", mm.Name, batch, meas.StepS, mm.Profile.H2D/1e6)
	plan := func(budget int64, pol string) (*tsplit.Result, error) {
		return tsplit.Plan(ctx, step.Clone(), tsplit.Options{Profile: mm.Profile, Budget: budget, Policy: pol})
	}
	base, err := plan(1<<62, "base")
	if err != nil {
		return nil, fmt.Errorf("bench: %s: the unplanned step: %w", spec, err)
	}
	mm.Base = &MeasuredCase{Policy: "unplanned", Predicted: base.BaseStep, Peak: base.BasePeak}
	window := measure.NewRecorder(step)
	window.H2D, window.D2H = meas.H2D, meas.D2H
	runners := []*runner{{c: mm.Base, model: step, rec: window}}
	link := executor.Link{H2D: mm.Profile.Emulation.H2D, D2H: mm.Profile.Emulation.D2H,
		Latency: time.Duration(mm.Profile.Emulation.Latency * float64(time.Second))}
	for _, pct := range cfg.Budgets {
		budget := base.BasePeak * int64(pct) / 100
		for _, pol := range cfg.Policies {
			c := &MeasuredCase{Percent: pct, Budget: budget, Policy: pol}
			res, err := plan(budget, pol)
			if p, perr := point(res, err); perr != nil {
				return nil, fmt.Errorf("bench: %s: %s at %d%%: %w", spec, pol, pct, perr)
			} else if !p.OK {
				c.Err = p.Err
			} else {
				c.Predicted, c.Peak = res.Step, res.Peak
				c.Swapped, c.Recomputed, c.Split = res.Swapped, res.Recomputed, res.Split
				runners = append(runners, &runner{c: c, model: res.Model, link: link})
			}
			mm.Cases = append(mm.Cases, c)
		}
		logf("%s planned at %d%% (%d bytes)", mm.Name, pct, budget)
	}
	inputs, err := compiler.RandomInputs(step, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", spec, err)
	}
	for _, rn := range runners {
		if err := rn.prepare(ctx, inputs); err != nil {
			return nil, fmt.Errorf("bench: %s: %s at %d%%: %w", spec, rn.c.Policy, rn.c.Percent, err)
		}
	}
	plans := runners[1:]
	for round := range cfg.Rounds {
		// Each round starts at another plan, so that no plan always
		// runs first or last in a round.
		for k := range plans {
			rn := plans[(k+round)%len(plans)]
			before, err := runners[0].step(ctx, inputs)
			if err == nil {
				var after float64
				if after, err = rn.step(ctx, inputs); err == nil {
					rn.c.Paired = append(rn.c.Paired, after/before)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("bench: %s: %s at %d%%: %w", spec, rn.c.Policy, rn.c.Percent, err)
			}
		}
		logf("%s round %d of %d run", mm.Name, round+1, cfg.Rounds)
	}
	for _, rn := range runners {
		rn.x = nil // its pool
	}
	if mm.Window, err = measure.Build(window.Measurements(), measure.BuildOptions{Base: mm.Profile, Link: mm.Profile.Emulation}); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", spec, err)
	}
	for _, rn := range runners {
		if rn.c.Repredicted, err = simulate(rn.model, mm.Window); err != nil {
			return nil, fmt.Errorf("bench: %s: %s at %d%%: %w", spec, rn.c.Policy, rn.c.Percent, err)
		}
	}
	return mm, nil
}

// prepare places the step on a CPU device of its own in a static
// layout (the plan's, or for the unplanned step one made for it, as
// its profile was measured: measure.StaticOptions) and runs one untimed
// step, which touches the pool's pages and uploads the weights.
func (rn *runner) prepare(ctx context.Context, inputs map[string][]byte) error {
	xopts, pool, err := measure.StaticOptions(rn.model)
	if err != nil {
		return err
	}
	xopts.Link = rn.link
	dev, err := cpu.New(pool)
	if err != nil {
		return err
	}
	if rn.x, err = executor.New(rn.model, dev, xopts); err != nil {
		return err
	}
	_, err = rn.x.RunContext(ctx, inputs)
	return err
}

// step runs one timed step and records it; it returns the step time.
// The unplanned step's runner records its steps (and a pacing probe's
// overheads during them) for the re-measured profile.
func (rn *runner) step(ctx context.Context, inputs map[string][]byte) (float64, error) {
	var probe *measure.Probe
	if rn.rec != nil {
		var err error
		if probe, err = measure.StartProbe(); err != nil {
			return 0, err
		}
	}
	res, err := rn.x.RunContext(ctx, inputs)
	if probe != nil {
		rn.rec.AddOverheads(probe.Stop())
	}
	if err != nil {
		return 0, err
	}
	if rn.rec != nil {
		rn.rec.Add(res.Timeline)
	}
	s := executor.Summarize(res.Timeline)
	rn.c.Steps = append(rn.c.Steps, s.Step.Seconds())
	rn.c.Stalls = append(rn.c.Stalls, s.Compute.Stall.Seconds())
	rn.c.MeasuredPeak = max(rn.c.MeasuredPeak, res.HighWater)
	return s.Step.Seconds(), nil
}

// simulate is a step's simulated time on a profile, as planning
// predicts it (passes.Simulate over the step's memory model).
func simulate(m *ir.Model, p *profile.Profile) (float64, error) {
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		return 0, err
	}
	return passes.Simulate(m.Graph, mem, p).StepTime, nil
}

// measuredName is a model's name in tables: a file's base name without
// .onnx, or the benchmark name.
func measuredName(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	return strings.TrimSuffix(name, ".onnx")
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// quantile is the q-quantile of xs by linear interpolation (0 for
// none).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

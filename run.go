package tsplit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/backend/native"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/tensorfile"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// RunOptions configure Run and RunFile.
type RunOptions struct {
	// Batch and Dims bind the model's symbolic dimensions (RunFile), as
	// in Options.
	Batch int64
	Dims  map[string]int64
	// Train, when set, builds the training step of a forward model
	// before it runs (nil: the model runs as it is).
	Train *TrainOptions
	// Iters is the number of steps (0: 1). The outputs of a training
	// step fed back as inputs (updated weights and optimizer state)
	// become the next step's inputs.
	Iters int
	// Pool is the capped CPU device's memory in bytes (0: what the model
	// needs: a planned model's layout pool, else its memory model's
	// need). An allocation past it fails the run.
	Pool int64
	// Inputs gives input data by name (raw little-endian bytes of the
	// input's type and shape); InputsFile names a JSON tensor file read
	// on top of them. Inputs given by neither get random data seeded
	// with Seed.
	Inputs     map[string][]byte
	InputsFile string
	Seed       uint64
	// CheckFinite stops the run with an error naming the first op whose
	// output holds a NaN or ±Inf (or the fed input or weight that holds
	// one), instead of finishing with garbage (executor.NonFiniteError).
	// It reads every output once more. tsplitc turns it on for --train.
	CheckFinite bool
	// Output, when set, is where the trained model is written after the
	// last iteration (a training step only): the step itself, planned
	// or not, with every input it feeds back (weights, optimizer state,
	// running statistics) holding its value after the last iteration,
	// as an initializer. Running or planning it goes on from there. It
	// is written as WriteModel writes (only a regular file, never one the
	// model was read from; a *UsageError for Output otherwise).
	Output string
	// SaveOutputs, when set, is a folder (created when missing) where
	// every graph output of the last iteration is written as a numpy
	// .npy file (tensorfile.ReadNPY reads them back), with index.json
	// mapping each output's name to its file.
	SaveOutputs string
	// Adapt moves the swap-in triggers of a planned model between
	// iterations from what each iteration measured (package adapt,
	// Capuchin's feedback-driven prefetch adjustment), within the
	// plan's budget (and Pool, when given). The model given to Run is
	// not changed; Output, when set, writes the adapted plan: the order
	// and layout of the last iteration, with the trained state.
	Adapt bool
	// Report, when set, makes RunResult.Report: the plan's report with
	// its predicted memory timeline and the one the last iteration
	// measured. Device names the profile (a built-in name or a JSON file)
	// the predicted timeline is simulated on; without it the report has
	// no time axis, only op positions.
	Report bool
	Device string
	// Progress, when set, is told after every iteration.
	Progress func(Progress)
}

// RunResult is what running a model measured. Its JSON field names are
// the ones `tsplitc run --json` prints.
type RunResult struct {
	File string `json:"model"`
	// Format is what File holds: "onnx" (a model) or "tsplan" (a native
	// execution plan).
	Format string           `json:"format"`
	Dims   map[string]int64 `json:"dims"`
	Device string           `json:"device"`
	// Pool is the device's memory; Need what the model needs (its
	// layout's pool or its memory model's need); ModelPeak the memory
	// model's peak and Peak the most device bytes the last iteration
	// held at once, measured. A native plan's pool never grows: its Peak
	// is the device's high-water, the highest pool byte its commands
	// touched, and ModelPeak the plan's live peak.
	Pool      int64 `json:"pool_bytes"`
	Need      int64 `json:"need_bytes"`
	ModelPeak int64 `json:"model_peak_bytes"`
	Peak      int64 `json:"peak_bytes"`
	Iters     int   `json:"iters"`
	// TimePerIter is the mean wall time of an iteration: the step, and
	// placing the inputs before it and reading the outputs back after.
	TimePerIter time.Duration `json:"-"`
	// Steps are the measured step times of every iteration, the first
	// op's start to the last op's end: what a plan predicts. Step is
	// their median, the first iteration left out when there are more
	// (it places the weights and warms the caches), and Streams what
	// each stream did in the iteration of that median.
	Steps   []time.Duration  `json:"-"`
	Step    time.Duration    `json:"-"`
	Streams executor.Summary `json:"-"`
	// Plan is what the planned model says about itself (nil for a
	// model that was not planned): the prediction to compare with.
	Plan *PlanSummary `json:"plan"`
	// Link is the emulated host link the copy streams were paced to
	// (the plan's; nil: unpaced).
	Link *profile.Emulation `json:"emulated_link"`
	// Training is the step's description for a training step (nil
	// otherwise) and Losses its loss after every iteration.
	Training *TrainingInfo `json:"-"`
	Losses   []float64     `json:"-"`
	// Outputs are the last iteration's graph outputs, by name.
	Outputs []Output `json:"outputs"`
	// Trained is the file the trained model was written to
	// (RunOptions.Output) and Saved the .npy files of the outputs
	// (RunOptions.SaveOutputs), in the order of Outputs.
	Trained string        `json:"trained_model,omitempty"`
	Saved   []SavedOutput `json:"saved_outputs,omitempty"`
	// Adapted has one entry per iteration of a run with
	// RunOptions.Adapt: what it measured and what moved after it.
	Adapted []AdaptedIter `json:"adapted,omitempty"`
	// Report is the run's report (RunOptions.Report; package report
	// writes it).
	Report *passes.Report `json:"-"`
}

// PlanSummary is a planned model's own account of its plan
// (passes.PlanKey metadata).
type PlanSummary struct {
	Policy string `json:"policy"`
	Device string `json:"device"`
	Budget int64  `json:"budget_bytes"`
	// Peak is the planned peak, Step the predicted step time in seconds
	// and BaseStep the predicted unplanned step's.
	Peak     int64   `json:"planned_peak_bytes"`
	Step     float64 `json:"predicted_step_s"`
	BaseStep float64 `json:"base_step_s"`
	// Measured: the plan was made with a profile measured on the CPU
	// device, so its prediction is this device's (not a GPU's).
	Measured bool `json:"measured_profile"`
}

// planSummary is what a run reports of the plan it ran.
func planSummary(r *passes.Report) *PlanSummary {
	return &PlanSummary{Policy: r.Policy, Device: r.Device, Budget: r.Budget, Peak: r.Peak, Step: r.Time, BaseStep: r.BaseTime, Measured: r.Measured}
}

// readPlan reads the plan summary a planned model carries (nil, nil for
// one without).
func readPlan(m *ir.Model) (*passes.Report, error) {
	s, ok := m.Meta[passes.PlanKey]
	if !ok {
		return nil, nil
	}
	var r passes.Report
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("metadata %s: %v", passes.PlanKey, err)
	}
	if l := r.Link; l != nil && (!(l.H2D > 0) || !(l.D2H > 0) || !(l.Latency >= 0) || l.Latency > 10) {
		return nil, fmt.Errorf("metadata %s: the emulated link needs positive bandwidths and a latency in [0, 10] s", passes.PlanKey)
	}
	return &r, nil
}

// SavedOutput is an output written by RunOptions.SaveOutputs.
type SavedOutput struct {
	Name string `json:"name"`
	File string `json:"file"`
}

// Output is one graph output of a run.
type Output struct {
	Name  string   `json:"name"`
	DType ir.DType `json:"-"`
	Shape ir.Shape `json:"shape"`
	// Data is the raw little-endian data.
	Data []byte `json:"-"`
}

// Values are the output's first n elements as float64 (all when n < 0;
// nil for a type without a plain numeric reading: strings, 4- and 8-bit
// floats, packed 4-bit integers).
func (o *Output) Values(n int) []float64 {
	switch o.DType {
	case ir.Float, ir.Double, ir.Float16, ir.BFloat16, ir.Bool, ir.Int8, ir.Uint8, ir.Int16, ir.Uint16,
		ir.Int32, ir.Uint32, ir.Int64, ir.Uint64:
	default:
		return nil
	}
	size := o.DType.Bits() / 8
	count := len(o.Data) / size
	if n >= 0 && count > n {
		count = n
	}
	t := &ir.Tensor{DType: o.DType, Shape: ir.Shape{int64(count)}, Raw: o.Data[:count*size]}
	return t.Float64s()
}

// jsonNumbers are floats as JSON, with null for NaN and infinities
// (which JSON cannot hold).
func jsonNumbers(xs []float64) []*float64 {
	out := make([]*float64, len(xs))
	for i := range xs {
		if !math.IsNaN(xs[i]) && !math.IsInf(xs[i], 0) {
			out[i] = &xs[i]
		}
	}
	return out
}

// MarshalJSON adds the loss, optimizer and losses of a training step,
// the time per iteration in seconds and the first values of every
// output.
func (r *RunResult) MarshalJSON() ([]byte, error) {
	type plain RunResult
	type output struct {
		Output
		DType string     `json:"dtype"`
		Head  []*float64 `json:"head"`
	}
	type stream struct {
		Tasks int     `json:"tasks"`
		Busy  float64 `json:"busy_s"`
		Idle  float64 `json:"idle_s"`
		Wait  float64 `json:"wait_s"`
		Stall float64 `json:"stall_s"`
	}
	streams := map[string]stream{}
	for name, st := range map[string]executor.StreamStats{executor.Compute: r.Streams.Compute, executor.D2H: r.Streams.D2H,
		executor.H2D: r.Streams.H2D, executor.Host: r.Streams.Host} {
		streams[name] = stream{st.Tasks, st.Busy.Seconds(), st.Idle.Seconds(), st.Wait.Seconds(), st.Stall.Seconds()}
	}
	var steps []float64
	for _, d := range r.Steps {
		steps = append(steps, d.Seconds())
	}
	v := struct {
		*plain
		MeasuredStep  float64           `json:"measured_step_s"`
		Steps         []float64         `json:"steps_s"`
		Stall         float64           `json:"stall_s"`
		Streams       map[string]stream `json:"streams"`
		MeasuredPeak  int64             `json:"measured_peak_bytes"`
		PredictedStep *float64          `json:"predicted_step_s"`
		PlannedPeak   *int64            `json:"planned_peak_bytes"`
		TimePerIter   float64           `json:"time_per_iter_s"`
		Loss          string            `json:"loss_kind,omitempty"`
		Optimizer     string            `json:"optimizer,omitempty"`
		Losses        []*float64        `json:"losses,omitempty"`
		Outputs       []output          `json:"outputs"`
	}{plain: (*plain)(r), TimePerIter: r.TimePerIter.Seconds(), Outputs: []output{}, MeasuredStep: r.Step.Seconds(), Steps: steps,
		Stall: r.Streams.Compute.Stall.Seconds(), Streams: streams, MeasuredPeak: r.Peak}
	if r.Plan != nil {
		v.PredictedStep, v.PlannedPeak = &r.Plan.Step, &r.Plan.Peak
	}
	if r.Training != nil {
		v.Loss, v.Optimizer, v.Losses = r.Training.LossKind, r.Training.Optimizer, jsonNumbers(r.Losses)
	}
	for _, o := range r.Outputs {
		v.Outputs = append(v.Outputs, output{Output: o, DType: o.DType.String(), Head: jsonNumbers(o.Values(6))})
	}
	return json.Marshal(v)
}

// RunFile reads a model and runs it; see Run.
func RunFile(ctx context.Context, path string, opts RunOptions) (*RunResult, error) {
	iopts, err := importOptions(opts.Batch, opts.Dims)
	if err != nil {
		return nil, err
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	if err := checkOutput(opts.Output, path); err != nil {
		return nil, err
	}
	if native.IsPlanFile(path) {
		if opts.Adapt {
			return nil, usage("Adapt", "moves the triggers of a planned ONNX model; %s is a native plan, whose commands are fixed", path)
		}
		if opts.Report {
			return nil, usage("Report", "draws a planned ONNX model's memory timelines; %s is a native plan", path)
		}
		return runPlanFile(ctx, path, opts)
	}
	m, err := load(ctx, path, iopts, nil)
	if err != nil {
		return nil, err
	}
	return Run(ctx, m, opts)
}

func (o *RunOptions) check() error {
	switch {
	case o.Iters < 0:
		return usage("Iters", "must be positive, got %d", o.Iters)
	case o.Pool < 0:
		return usage("Pool", "must not be negative, got %d", o.Pool)
	case o.Train != nil:
		return trainOptions(*o.Train)
	}
	return checkSaveDir(o.SaveOutputs)
}

// Run executes m on the CPU reference device: every kernel computed in
// float32, the copy streams concurrent with the compute stream, every
// allocation past the pool refused. A planned model runs in its static
// layout, so the measured peak equals the plan's; a plan made with a
// profile that emulates a GPU's link (profile.Emulation) runs with its
// copy streams paced to that link, and the result holds the plan's
// prediction next to the measured step (RunResult.Plan, Step, Streams).
// It stops between ops once ctx is done. Errors: *UsageError for bad
// options, *InputError
// for a model the runtime cannot run (an unsupported op, missing or
// mis-sized input data, a pool too small: the error names the op, the
// tensor and the bytes), else the context's error.
func Run(ctx context.Context, m *ir.Model, opts RunOptions) (*RunResult, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	fail := func(err error) (*RunResult, error) { return nil, runError(ctx, m.Path, err) }
	if opts.Train != nil {
		if _, err := train(ctx, m, *opts.Train, nil); err != nil {
			return nil, err
		}
	}
	if opts.Adapt {
		m = m.Clone() // adapting rewrites the order and the layout
	}
	ti, err := compiler.ReadTrainingInfo(m)
	if err != nil {
		return fail(err)
	}
	if opts.Output != "" {
		// Refused before the run, not after it.
		if ti == nil {
			return nil, usage("Output", "writes a trained model, and %s is not a training step (Train, tsplitc's --train, builds one)", m.Path)
		}
		if _, err := backend.CheckOutput(opts.Output, backend.InputFiles(m)...); err != nil {
			return nil, &UsageError{Option: "Output", Err: err}
		}
	}
	xopts, need, err := executor.PlannedOptions(m)
	if err != nil {
		return fail(err)
	}
	plan, err := readPlan(m)
	if err != nil {
		return fail(err)
	}
	if opts.Report {
		// Refused before the run, not after it.
		if plan == nil {
			return nil, usage("Report", "draws a plan's predicted memory timeline under the measured one, and %s is not a planned model", m.Path)
		}
		if opts.Device != "" {
			if _, err := profile.Lookup(opts.Device); err != nil {
				return nil, &UsageError{Option: "Device", Err: err}
			}
		}
	}
	if plan != nil && plan.Link != nil {
		l := plan.Link
		xopts.Link = executor.Link{H2D: l.H2D, D2H: l.D2H, Latency: time.Duration(l.Latency * float64(time.Second))}
	}
	pool := opts.Pool
	if pool == 0 {
		pool = need
	}
	dev, err := cpu.New(pool)
	if err != nil {
		return fail(err)
	}
	xopts.CheckFinite = opts.CheckFinite
	x, err := executor.New(m, dev, xopts)
	if err != nil {
		return fail(err)
	}
	// The pool is allocated but not touched yet; with the host memory
	// the run adds (input data, tensors swapped out) it must fit the
	// machine, or Go's fatal out-of-memory error ends the process.
	if err := checkRunMemory(m, pool, x.Mem.HostPeak); err != nil {
		return fail(err)
	}
	inputs, err := runInputs(m, &opts)
	if err != nil {
		return nil, err
	}
	iters := max(opts.Iters, 1)
	res := &RunResult{File: m.Path, Format: FormatONNX, Dims: m.Dims, Device: dev.Name(), Pool: pool, Need: need, ModelPeak: x.Mem.Peak, Iters: iters, Training: ti}
	if plan != nil {
		res.Plan = planSummary(plan)
		res.Link = plan.Link
	}
	var ad *adapter
	if opts.Adapt {
		if ad, err = newAdapter(m, plan, xopts, opts.Pool); err != nil {
			return nil, err
		}
	}
	var last *executor.Result
	ran := 0
	err = iterate(res, m, ti, inputs, opts, func() (map[string][]byte, time.Duration, []executor.Record, error) {
		var err error
		if last, err = x.RunContext(ctx, inputs); err != nil {
			return nil, 0, nil, err
		}
		if ran++; ad != nil {
			if x, dev, err = ad.after(x, dev, last, ran == iters); err != nil {
				return nil, 0, nil, err
			}
		}
		return last.Outputs, last.Duration, last.Timeline, nil
	})
	if err != nil {
		return fail(err)
	}
	if ad != nil {
		if err := ad.finish(res, x, dev); err != nil {
			return fail(err)
		}
	}
	res.Peak = last.HighWater
	if opts.Report {
		final, err := readPlan(m) // the adapted plan's, with Adapt
		if err != nil {
			return fail(err)
		}
		if res.Report, err = runReport(m, final, x.Mem, last.Timeline, opts.Device); err != nil {
			return nil, err
		}
	}
	if err := finishRun(ctx, res, m, last.Outputs, opts); err != nil {
		return res, err
	}
	if opts.Output != "" {
		if err := write(ctx, trainedModel(m, ti, inputs), opts.Output, nil); err != nil {
			return res, err
		}
		res.Trained = opts.Output
	}
	return res, nil
}

// medianStep is the median step of a run's iterations, the first left
// out when there are more (it uploads the weights and warms the
// caches), and the summary of the iteration it comes from (the lower
// median of an even count).
func medianStep(sums []executor.Summary) (time.Duration, executor.Summary) {
	if len(sums) > 1 {
		sums = sums[1:]
	}
	idx := make([]int, len(sums))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(sums[a].Step, sums[b].Step) })
	med := sums[idx[(len(idx)-1)/2]]
	return med.Step, med
}

// runError is the error of a failed run of the model in file: the
// context's, a *PanicError for a kernel that panicked (tsplit's bug, not
// the model's), else an *InputError.
func runError(ctx context.Context, file string, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return withFile(file, err)
	}
	var oe *executor.OpError
	if errors.As(err, &oe) && oe.Panic {
		return withFile(file, &PanicError{Op: oe.Op.Describe(), Value: oe.Err, Stack: oe.Stack})
	}
	return inputError(file, err)
}

// checkRunMemory checks that the pool, the host memory a run holds
// (swapped-out tensors: host) and m's input data fit the machine, before
// the pool is touched: otherwise Go's fatal out-of-memory error ends the
// process.
func checkRunMemory(m *ir.Model, pool, host int64) error {
	for _, v := range m.Graph.Inputs {
		if v.Kind != ir.KindInit {
			host += v.Bytes()
		}
	}
	return cpu.CheckMemory(pool+host, "the pool with the run's host memory")
}

// iterate runs step res.Iters times as a training loop: the outputs a
// step feeds back (updated weights and optimizer state, ti.Feedback)
// are the next step's inputs. It records each step's time and loss in
// res, reports progress, and sets res.TimePerIter, res.Step and
// res.Streams. Both runners (a planned ONNX model's, a native plan's)
// use it.
func iterate(res *RunResult, m *ir.Model, ti *compiler.TrainingInfo, inputs map[string][]byte, opts RunOptions,
	step func() (outputs map[string][]byte, took time.Duration, tl []executor.Record, err error)) error {
	var summaries []executor.Summary
	var total time.Duration
	for it := range res.Iters {
		outputs, took, tl, err := step()
		if err != nil {
			return err
		}
		total += took
		sum := executor.Summarize(tl)
		summaries = append(summaries, sum)
		res.Steps = append(res.Steps, sum.Step)
		loss := math.NaN()
		if ti != nil {
			for _, fb := range ti.Feedback {
				inputs[fb[1]] = outputs[fb[0]]
			}
			loss = scalar(m.Graph.Lookup(ti.Loss), outputs[ti.Loss])
			res.Losses = append(res.Losses, loss)
		}
		if opts.Progress != nil {
			opts.Progress(Progress{Stage: StageRun, Round: it, Fraction: float64(it+1) / float64(res.Iters), Loss: loss})
		}
	}
	res.TimePerIter = total / time.Duration(res.Iters)
	res.Step, res.Streams = medianStep(summaries)
	return nil
}

// finishRun fills res.Outputs from the last iteration's outputs, by
// name, and saves them (RunOptions.SaveOutputs).
func finishRun(ctx context.Context, res *RunResult, m *ir.Model, outputs map[string][]byte, opts RunOptions) error {
	for _, v := range m.Graph.Outputs {
		res.Outputs = append(res.Outputs, Output{Name: v.Name, DType: v.DType, Shape: v.Shape, Data: outputs[v.Name]})
	}
	slices.SortFunc(res.Outputs, func(a, b Output) int { return strings.Compare(a.Name, b.Name) })
	if opts.SaveOutputs != "" {
		var err error
		if res.Saved, err = saveOutputs(ctx, opts.SaveOutputs, res.Outputs, backend.InputFiles(m)); err != nil {
			return err
		}
	}
	return nil
}

// trainedModel is a copy of the training step m whose fed-back inputs
// hold the state a run ended with (state: the next step's inputs). An
// input that was a graph input (weights given as inputs) becomes an
// initializer and stays a graph input: ONNX reads that as an input
// with a default, which tsplit's import keeps as the initializer.
func trainedModel(m *ir.Model, ti *compiler.TrainingInfo, state map[string][]byte) *ir.Model {
	c := m.Clone()
	g := c.Graph
	for _, fb := range ti.Feedback {
		v := g.Lookup(fb[1])
		if v == nil || v.Kind == ir.KindOp {
			continue // ReadTrainingInfo checked the pairs
		}
		t := &ir.Tensor{DType: v.DType, Shape: slices.Clone(v.Shape), Raw: state[fb[1]]}
		if v.Kind == ir.KindInput {
			v.Kind = ir.KindInit
			g.Inits = append(g.Inits, v)
		}
		// Src is the tensor as read: the writer would copy it.
		v.Const, v.Load, v.Src = t, nil, nil
	}
	return c
}

// tensorTypes maps the tensor file's type names to IR element types.
var tensorTypes = map[string]ir.DType{
	"float32": ir.Float, "float64": ir.Double, "float16": ir.Float16, "int8": ir.Int8, "uint8": ir.Uint8,
	"int16": ir.Int16, "uint16": ir.Uint16, "int32": ir.Int32, "uint32": ir.Uint32,
	"int64": ir.Int64, "uint64": ir.Uint64, "bool": ir.Bool,
}

// runInputs is the data of every graph input: given, read from the
// tensor file, or seeded random data (compiler.RandomInputs).
func runInputs(m *ir.Model, o *RunOptions) (map[string][]byte, error) {
	g := m.Graph
	var given map[string]*tensorfile.Tensor
	if o.InputsFile != "" {
		var err error
		if given, err = tensorfile.ReadTensors(o.InputsFile); err != nil {
			return nil, &InputError{File: o.InputsFile, Reason: err.Error(), Err: err}
		}
	}
	out, err := compiler.RandomInputs(m, o.Seed)
	if err != nil {
		return nil, inputError(m.Path, fmt.Errorf("%v (give it in RunOptions.Inputs or InputsFile)", err))
	}
	for name, data := range o.Inputs {
		if v := g.Lookup(name); v == nil || v.Kind == ir.KindOp {
			return nil, usage("Inputs", "the model has no input %q", name)
		}
		out[name] = data
	}
	for name, t := range given {
		v := g.Lookup(name)
		if v == nil || v.Kind == ir.KindOp {
			return nil, &InputError{File: o.InputsFile, Reason: fmt.Sprintf("the model has no input %q", name)}
		}
		if tensorTypes[t.Type] != v.DType || !ir.Shape(t.Dims).Equal(v.Shape) {
			return nil, &InputError{File: o.InputsFile, Reason: fmt.Sprintf("%q is %s%v, the model wants %v%v", name, t.Type, t.Dims, v.DType, v.Shape)}
		}
		out[name] = t.Data
	}
	return out, nil
}

// scalar reads a one-element float output (NaN when it is missing).
func scalar(v *ir.Value, b []byte) float64 {
	if v == nil || len(b) == 0 {
		return math.NaN()
	}
	t := &ir.Tensor{DType: v.DType, Shape: ir.Shape{1}, Raw: b}
	return t.Float64s()[0]
}

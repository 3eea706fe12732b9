package tsplit

import (
	"context"
	"errors"
	"time"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/backend/native"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
)

// Formats of RunResult.Format.
const (
	FormatONNX   = "onnx"
	FormatNative = "tsplan"
)

// writeNative lowers a planned step to a native plan and writes it.
func writeNative(ctx context.Context, m *ir.Model, path string, pr *progress) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pr.report(Progress{Stage: StageWrite})
	p, err := native.Lower(m)
	if err != nil {
		return inputError(m.Path, err)
	}
	if err := native.WriteFile(ctx, p, path, backend.InputFiles(m)...); err != nil {
		var oe *backend.OutputError
		if errors.As(err, &oe) {
			return &UsageError{Option: "Output", Err: err}
		}
		return err
	}
	pr.report(Progress{Stage: StageWrite, Fraction: 1})
	return nil
}

// runPlanFile runs a native plan (RunFile on a .tsplan file): the
// plan's commands on the capped CPU device, whose pool is the plan's
// (or RunOptions.Pool). The plan's shapes are fixed: Batch and Dims do
// not apply, and neither do Train (it is a step already) and Output
// (the trained model is written as ONNX: run the planned ONNX file).
func runPlanFile(ctx context.Context, path string, opts RunOptions) (*RunResult, error) {
	switch {
	case opts.Train != nil:
		return nil, usage("Train", "%s is a native plan, a training step already", path)
	case opts.Output != "":
		return nil, usage("Output", "writes the trained model as ONNX; %s is a native plan (run the planned ONNX model to write one)", path)
	}
	l, err := native.ReadFile(path)
	if err != nil {
		return nil, inputError(path, err)
	}
	m, prog := l.Model, l.Program
	fail := func(err error) (*RunResult, error) { return nil, runError(ctx, path, err) }
	ti, err := compiler.ReadTrainingInfo(m)
	if err != nil {
		return fail(err)
	}
	// The planned step's own account of its plan travels in the plan's
	// metadata: the prediction to compare with, the link to pace.
	plan, err := readPlan(m)
	if err != nil {
		return fail(err)
	}
	var link executor.Link
	if plan != nil && plan.Link != nil {
		l := plan.Link
		link = executor.Link{H2D: l.H2D, D2H: l.D2H, Latency: time.Duration(l.Latency * float64(time.Second))}
	}
	pool := opts.Pool
	if pool == 0 {
		pool = prog.Pool
	}
	if pool < prog.Pool {
		return nil, usage("Pool", "is %d bytes; the plan %s lays its tensors out in %d", pool, path, prog.Pool)
	}
	dev, err := cpu.New(pool)
	if err != nil {
		return fail(err)
	}
	host := int64(0)
	for _, n := range prog.Host {
		host += n
	}
	if err := checkRunMemory(m, pool, host); err != nil {
		return fail(err)
	}
	inputs, err := runInputs(m, &opts)
	if err != nil {
		return nil, err
	}
	iters := max(opts.Iters, 1)
	res := &RunResult{File: path, Format: FormatNative, Dims: m.Dims, Device: dev.Name(), Pool: pool, Need: prog.Pool,
		ModelPeak: l.Plan.Peak, Iters: iters, Training: ti}
	if plan != nil {
		res.Plan = planSummary(plan)
		res.Link = plan.Link
	}
	var last *executor.ProgramResult
	it := 0
	err = iterate(res, m, ti, inputs, opts, func() (map[string][]byte, time.Duration, []executor.Record, error) {
		run := executor.ProgramRun{Inputs: inputs, Step: int64(it), CheckFinite: opts.CheckFinite, Link: link}
		it++
		var err error
		if last, err = prog.Run(ctx, dev, run); err != nil {
			return nil, 0, nil, err
		}
		return last.Outputs, last.Duration, last.Timeline, nil
	})
	if err != nil {
		return fail(err)
	}
	// The pool never grows: the device's high-water is the highest
	// pool byte a command touched.
	res.Peak = last.Reach
	if err := finishRun(ctx, res, m, last.Outputs, opts); err != nil {
		return res, err
	}
	return res, nil
}

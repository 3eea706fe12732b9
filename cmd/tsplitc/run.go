package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/tensorfile"
	"github.com/tsplit/tsplit/ir"
)

// runFlags are the flags of `tsplitc --run`.
type runFlags struct {
	importFlags
	iters  int
	memory string
	inputs string
	seed   uint64
	quiet  bool
	train  bool
	tf     trainFlags
}

// parseBytes reads a size such as 11GiB, 512MB or 1048576.
func parseBytes(s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil || n > math.MaxInt64 {
		return 0, usageError{fmt.Errorf("--memory %q: want a size such as 11GiB, 512MB or 1048576", s)}
	}
	return int64(n), nil
}

// runModel executes a model on the CPU reference device.
func runModel(w io.Writer, path string, f *runFlags) error {
	opts, err := f.options()
	if err != nil {
		return err
	}
	if f.iters <= 0 {
		return usageError{fmt.Errorf("--iters must be positive, got %d", f.iters)}
	}
	m, err := compiler.Import(path, opts)
	if err != nil {
		return err
	}
	if f.train {
		if _, err := compiler.BuildTrainingStep(m, f.tf.opts); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	ti, err := compiler.ReadTrainingInfo(m)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// A planned model carries its static layout: every tensor at a fixed
	// offset, in a pool of the plan's size.
	xopts, need, err := executor.PlannedOptions(m)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	pool := need
	if f.memory != "" {
		if pool, err = parseBytes(f.memory); err != nil {
			return err
		}
	}
	dev, err := cpu.New(pool)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	x, err := executor.New(m, dev, xopts)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	inputs, err := makeInputs(m, f.inputs, f.seed)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "model        %s (%s)\n", path, describeDims(m))
	fmt.Fprintf(w, "device       %s, pool %s (%d bytes); the model needs %d bytes, peak live %d\n", dev.Name(), bytesStr(pool), pool, need, x.Mem.Peak)
	var bar *progressbar.ProgressBar
	if !f.quiet && f.iters > 1 {
		bar = progressbar.NewOptions(f.iters, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("running"),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	}
	var res *executor.Result
	var total time.Duration
	var losses []float64
	for it := 0; it < f.iters; it++ {
		res, err = x.Run(inputs)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		total += res.Duration
		if ti != nil {
			// Training: updated weights and state become the next inputs.
			for _, fb := range ti.Feedback {
				inputs[fb[1]] = res.Outputs[fb[0]]
			}
			losses = append(losses, scalar(m.Graph.Lookup(ti.Loss).DType, res.Outputs[ti.Loss]))
			if bar != nil {
				bar.Describe(fmt.Sprintf("training, loss %.5g", losses[len(losses)-1]))
			}
		}
		if bar != nil {
			bar.Add(1)
		}
	}
	if bar != nil {
		bar.Finish()
	}
	fmt.Fprintf(w, "time/iter    %v (%d iterations)\n", (total / time.Duration(f.iters)).Round(time.Microsecond), f.iters)
	fmt.Fprintf(w, "peak device  %s measured (%d bytes; memory model %d bytes)\n", bytesStr(res.HighWater), res.HighWater, x.Mem.Peak)
	if ti != nil {
		fmt.Fprintf(w, "loss         first %.6g, last %.6g (%s, optimizer %s)\n", losses[0], losses[len(losses)-1], ti.LossKind, ti.Optimizer)
		if len(losses) > 1 {
			var parts []string
			for _, l := range losses {
				parts = append(parts, fmt.Sprintf("%.6g", l))
			}
			fmt.Fprintf(w, "losses       %s\n", strings.Join(parts, " "))
		}
		return nil
	}
	names := make([]string, 0, len(res.Outputs))
	for n := range res.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := m.Graph.Lookup(n)
		fmt.Fprintf(w, "output       %s %v%v %s\n", n, v.DType, v.Shape, preview(v.DType, res.Outputs[n]))
	}
	return nil
}

func bytesStr(n int64) string { return compiler.FormatBytes(n) }

// describeDims says how the model's symbolic dimensions were bound.
func describeDims(m *ir.Model) string {
	if len(m.Dims) == 0 {
		return "static shapes"
	}
	var parts []string
	for k, v := range m.Dims {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// typeNames maps the tensor-file type names to IR element types.
var typeNames = map[string]ir.DType{
	"float32": ir.Float, "float64": ir.Double, "float16": ir.Float16, "int8": ir.Int8, "uint8": ir.Uint8,
	"int16": ir.Int16, "uint16": ir.Uint16, "int32": ir.Int32, "uint32": ir.Uint32,
	"int64": ir.Int64, "uint64": ir.Uint64, "bool": ir.Bool,
}

// makeInputs reads inputs from a tensor file, and makes seeded random
// data (compiler.RandomInputs) for the inputs it does not give.
func makeInputs(m *ir.Model, file string, seed uint64) (map[string][]byte, error) {
	g := m.Graph
	var given map[string]*tensorfile.Tensor
	if file != "" {
		var err error
		if given, err = tensorfile.ReadTensors(file); err != nil {
			return nil, fmt.Errorf("--inputs %s: %w", file, err)
		}
	}
	out, err := compiler.RandomInputs(m, seed)
	if err != nil {
		return nil, fmt.Errorf("%v (give it with --inputs)", err)
	}
	for name, t := range given {
		v := g.Lookup(name)
		if v == nil || v.Kind == ir.KindOp {
			return nil, fmt.Errorf("--inputs %s: the model has no input %q", file, name)
		}
		if typeNames[t.Type] != v.DType || !ir.Shape(t.Dims).Equal(v.Shape) {
			return nil, fmt.Errorf("--inputs %s: %q is %s%v, the model wants %v%v", file, name, t.Type, t.Dims, v.DType, v.Shape)
		}
		out[name] = t.Data
	}
	return out, nil
}

// scalar reads a one-element float output.
func scalar(dt ir.DType, b []byte) float64 {
	t := &ir.Tensor{DType: dt, Shape: ir.Shape{1}, Raw: b}
	if len(b) == 0 {
		return math.NaN()
	}
	return t.Float64s()[0]
}

// preview shows the first values of an output.
func preview(dt ir.DType, b []byte) string {
	t := &ir.Tensor{DType: dt, Raw: b}
	var n int
	switch dt {
	case ir.Float, ir.Int32:
		n = len(b) / 4
	case ir.Double, ir.Int64:
		n = len(b) / 8
	case ir.Bool, ir.Uint8, ir.Int8:
		n = len(b)
	default:
		return ""
	}
	t.Shape = ir.Shape{int64(n)}
	k := min(n, 6)
	var parts []string
	if dt.IsFloat() {
		for _, f := range t.Float64s()[:k] {
			parts = append(parts, fmt.Sprintf("%.6g", f))
		}
	} else {
		for _, x := range t.Int64s()[:k] {
			parts = append(parts, fmt.Sprint(x))
		}
	}
	s := "[" + strings.Join(parts, " ")
	if n > k {
		s += " …"
	}
	return s + "]"
}

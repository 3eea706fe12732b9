package compiler

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/tsplit/tsplit/autodiff"
	"github.com/tsplit/tsplit/ir"
)

// TrainOptions describe the training step to build.
type TrainOptions struct {
	// Loss is "auto" (or ""), "cross-entropy", "mse" or "none".
	Loss string
	// Optimizer is "sgd" (or ""), "momentum", "adam" or "none".
	Optimizer string
	LR        float64 // default 0.01 (sgd, momentum), 0.001 (adam)
	Momentum  float64 // momentum: default 0.9
	Beta1     float64 // adam: default 0.9
	Beta2     float64 // adam: default 0.999
	Eps       float64 // adam: default 1e-8
	// WeightDecay adds WeightDecay·w to every gradient (L2).
	WeightDecay float64
	// KeepGrads makes every parameter gradient a graph output (always
	// so with optimizer "none").
	KeepGrads bool
}

// Check names the first option that cannot be right (an unknown loss or
// optimizer, a learning rate, momentum or weight decay that is negative
// or not finite) and says why; "" and nil when all are fine. It is the
// caller's mistake, found before any model is read.
func (o TrainOptions) Check() (field string, err error) {
	switch o.Loss {
	case "", "auto", "cross-entropy", "mse", "none":
	default:
		return "Loss", fmt.Errorf("unknown loss %q (auto, cross-entropy, mse, none)", o.Loss)
	}
	switch o.Optimizer {
	case "", "sgd", "momentum", "adam", "none":
	default:
		return "Optimizer", fmt.Errorf("unknown optimizer %q (sgd, momentum, adam, none)", o.Optimizer)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"LR", o.LR}, {"Momentum", o.Momentum}, {"Beta1", o.Beta1}, {"Beta2", o.Beta2}, {"Eps", o.Eps}, {"WeightDecay", o.WeightDecay}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return f.name, fmt.Errorf("must be a finite number >= 0, got %v", f.v)
		}
	}
	return "", nil
}

// TrainingKey is the model metadata key describing a training step
// (a JSON TrainingInfo). The runtime reads it to feed state back.
const TrainingKey = "tsplit.training"

// ParamInputsKey lists graph inputs that are parameters (ir.ParamInputsKey).
const ParamInputsKey = ir.ParamInputsKey

// TrainingInfo is what a training step records about itself.
type TrainingInfo struct {
	Loss      string `json:"loss"`
	LossKind  string `json:"loss_kind"`
	Labels    string `json:"labels,omitempty"`
	Classes   int64  `json:"classes,omitempty"`
	Optimizer string `json:"optimizer"`
	// Feedback pairs an output with the input it replaces in the next
	// step (updated weights, optimizer state, BN running statistics).
	Feedback [][2]string `json:"feedback,omitempty"`
	// Grads maps parameter names to their gradient outputs (KeepGrads).
	Grads map[string]string `json:"grads,omitempty"`
	// Params lists the trained parameters.
	Params []string `json:"params"`
}

// ReadTrainingInfo returns a model's training-step description, or nil
// when it is not a training step. The description comes from the file,
// so every value it names is checked to be in the graph, where the
// runtime will look for it (see check).
func ReadTrainingInfo(m *ir.Model) (*TrainingInfo, error) {
	ti, err := readMeta[TrainingInfo](m, TrainingKey)
	if err != nil || ti == nil {
		return nil, err
	}
	if err := ti.check(m.Graph); err != nil {
		return nil, fmt.Errorf("metadata %s: %v", TrainingKey, err)
	}
	return ti, nil
}

// check says whether the values ti names are where a training step has
// them: the loss and the gradients are graph outputs, the labels a
// graph input, every parameter an input or initializer, and each
// feedback pair an output that replaces an input of the same type.
func (ti *TrainingInfo) check(g *ir.Graph) error {
	isOutput := func(name string) *ir.Value {
		for _, v := range g.Outputs {
			if v.Name == name {
				return v
			}
		}
		return nil
	}
	isInput := func(name string) *ir.Value {
		if v := g.Lookup(name); v != nil && v.Kind != ir.KindOp {
			return v
		}
		return nil
	}
	if v := isOutput(ti.Loss); v == nil {
		return fmt.Errorf("the loss %q is not a graph output", ti.Loss)
	} else if n, _ := v.Shape.NumElements(); n != 1 || !v.DType.IsFloat() {
		return fmt.Errorf("the loss %q is %v%v, not one floating-point value", ti.Loss, v.DType, v.Shape)
	}
	if ti.Labels != "" && isInput(ti.Labels) == nil {
		return fmt.Errorf("the labels %q are not a graph input", ti.Labels)
	}
	for _, p := range ti.Params {
		if isInput(p) == nil {
			return fmt.Errorf("the parameter %q is not a graph input or initializer", p)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ti.Grads)) {
		if isOutput(ti.Grads[name]) == nil {
			return fmt.Errorf("the gradient %q of %q is not a graph output", ti.Grads[name], name)
		}
	}
	for _, fb := range ti.Feedback {
		out, in := isOutput(fb[0]), isInput(fb[1])
		switch {
		case out == nil:
			return fmt.Errorf("the fed-back value %q is not a graph output", fb[0])
		case in == nil:
			return fmt.Errorf("%q is fed back into %q, which is not a graph input or initializer", fb[0], fb[1])
		case out.DType != in.DType || !out.Shape.Equal(in.Shape):
			return fmt.Errorf("%q (%v%v) is fed back into %q of another type (%v%v)", fb[0], out.DType, out.Shape, fb[1], in.DType, in.Shape)
		}
	}
	return nil
}

// readMeta decodes the JSON a pass recorded in the model's metadata
// under key, or returns nil when there is none.
func readMeta[T any](m *ir.Model, key string) (*T, error) {
	s, ok := m.Meta[key]
	if !ok {
		return nil, nil
	}
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("metadata %s is not valid: %v", key, err)
	}
	return &v, nil
}

// Params returns the model's trainable parameters. A model that lists
// them (ParamInputsKey metadata, as zoo models with weights as inputs
// do) gets exactly that list. Otherwise they are the floating-point
// initializers other than BatchNormalization running statistics and
// scalars (rank-0 initializers are constants such as attention scales).
func Params(m *ir.Model) []*ir.Value {
	var out []*ir.Value
	if names, ok := m.Meta[ParamInputsKey]; ok && names != "" {
		for _, n := range strings.Split(names, ",") {
			if v := m.Graph.Lookup(n); v != nil && v.Kind != ir.KindOp && v.DType.IsFloat() && !isBNStat(v) && v.NumUses() > 0 {
				out = append(out, v)
			}
		}
		return out
	}
	for _, v := range m.Graph.Inits {
		if IsParam(v) && len(v.Shape) > 0 {
			out = append(out, v)
		}
	}
	return out
}

func isBNStat(v *ir.Value) bool {
	for _, u := range v.Uses() {
		if u.Op.Type == "BatchNormalization" && u.Op.Domain == "" && (u.Index == 3 || u.Index == 4) {
			return true
		}
	}
	return false
}

// MinTrainOpset is the lowest default-domain opset a training step is
// built for: gradient rules use ScatterElements/ScatterND with
// reduction="add", which opset 16 introduced.
const MinTrainOpset = 16

// BuildTrainingStep turns a forward model into its training step, in
// place: a loss on the model's first output, the backward graph, and
// the optimizer update. Parameters become graph inputs (their data stays
// as initializer defaults) and their updated values graph outputs; the
// pairs are recorded in the TrainingKey metadata.
func BuildTrainingStep(m *ir.Model, opts TrainOptions) (*TrainingInfo, error) {
	if m.Meta == nil {
		m.Meta = map[string]string{}
	}
	if _, done := m.Meta[TrainingKey]; done {
		return nil, fmt.Errorf("the model already is a training step")
	}
	if v := m.Opset(""); v < MinTrainOpset {
		return nil, fmt.Errorf("training needs a model of opset %d or newer, this one imports opset %d (re-export it with a newer opset)", MinTrainOpset, v)
	}
	g := m.Graph
	if len(g.Outputs) == 0 {
		return nil, fmt.Errorf("the model has no outputs")
	}
	for _, op := range g.Order() {
		if op.Phase != ir.Forward {
			return nil, fmt.Errorf("%s is a %v op: the model already contains a training step", op.Describe(), op.Phase)
		}
	}
	params := Params(m)
	if len(params) == 0 {
		return nil, fmt.Errorf("the model has no trainable parameters (floating-point initializers)")
	}
	pred := g.Outputs[0]
	ti := &TrainingInfo{Optimizer: opts.Optimizer}
	if ti.Optimizer == "" {
		ti.Optimizer = "sgd"
	}
	loss, err := addLoss(m, pred, opts.Loss, ti)
	if err != nil {
		return nil, err
	}
	grads, err := autodiff.Grad(m, loss, params)
	if err != nil {
		return nil, err
	}
	outputs := []*ir.Value{loss}
	ti.Loss = loss.Name
	keep := opts.KeepGrads || ti.Optimizer == "none"
	ub := autodiff.NewBuilder(m, ir.Update, "update/")
	for i, p := range params {
		p.Param = true
		ti.Params = append(ti.Params, p.Name)
		if grads[i] == nil {
			return nil, fmt.Errorf("parameter %q does not affect the loss", p.Name)
		}
		if p.Kind == ir.KindInit && !slices.Contains(g.Inputs, p) {
			g.Inputs = append(g.Inputs, p)
		}
	}
	if keep {
		ti.Grads = map[string]string{}
		for i, p := range params {
			gv := grads[i]
			if gv.Kind != ir.KindOp || slices.Contains(outputs, gv) {
				gv = ub.Op("Identity", []*ir.Value{gv})
			}
			outputs = append(outputs, gv)
			ti.Grads[p.Name] = gv.Name
		}
	}
	upd, err := addOptimizer(m, ub, params, grads, opts, ti)
	if err != nil {
		return nil, err
	}
	outputs = append(outputs, upd...)
	outputs = append(outputs, bnRunningStats(m, ub, ti)...)
	if err := ub.Err(); err != nil {
		return nil, err
	}
	g.Outputs = outputs
	m.Specialized = true // gradient rules emitted shapes of this batch
	js, _ := json.Marshal(ti)
	m.Meta[TrainingKey] = string(js)
	if err := ir.Verify(m); err != nil {
		return nil, fmt.Errorf("training step does not verify: %w", err)
	}
	return ti, nil
}

func addLoss(m *ir.Model, pred *ir.Value, kind string, ti *TrainingInfo) (*ir.Value, error) {
	g := m.Graph
	if kind == "" || kind == "auto" {
		switch {
		case len(pred.Shape) == 0 || (len(pred.Shape) == 1 && pred.Shape[0] == 1):
			kind = "none"
		case (len(pred.Shape) == 2 || len(pred.Shape) == 3) && pred.DType.IsFloat():
			kind = "cross-entropy"
		default:
			return nil, fmt.Errorf("cannot choose a loss for output %q of shape %v: give --loss mse or --loss none", pred.Name, pred.Shape)
		}
	}
	ti.LossKind = kind
	b := autodiff.NewBuilder(m, ir.Loss, "loss/")
	var loss *ir.Value
	switch kind {
	case "none":
		if n, _ := pred.Shape.NumElements(); n != 1 || !autodiff.Differentiable(pred.DType) {
			return nil, fmt.Errorf("--loss none needs a scalar floating-point output, %q is %v%v", pred.Name, pred.DType, pred.Shape)
		}
		loss = pred
		if len(pred.Shape) != 0 {
			loss = b.Reshape(pred, ir.Shape{})
		}
	case "cross-entropy":
		if len(pred.Shape) < 2 || !autodiff.Differentiable(pred.DType) {
			return nil, fmt.Errorf("cross-entropy needs logits [N, C] or [N, T, V], %q is %v%v", pred.Name, pred.DType, pred.Shape)
		}
		ti.Labels = freshName(g, "labels")
		ti.Classes = pred.Shape[len(pred.Shape)-1]
		labels, err := g.AddInput(ti.Labels, ir.Int64, pred.Shape[:len(pred.Shape)-1].Clone())
		if err != nil {
			return nil, err
		}
		lsm := b.Op("LogSoftmax", []*ir.Value{pred}, ir.Attr{Name: "axis", Type: ir.AttrInt, Int: -1})
		idx := b.Op("Unsqueeze", []*ir.Value{labels, b.Ints(-1)})
		picked := b.Op("GatherElements", []*ir.Value{lsm, idx}, ir.Attr{Name: "axis", Type: ir.AttrInt, Int: -1})
		mean := b.Op("ReduceMean", []*ir.Value{picked}, ir.Attr{Name: "keepdims", Type: ir.AttrInt, Int: 0})
		loss = b.Neg(mean)
	case "mse":
		if !autodiff.Differentiable(pred.DType) {
			return nil, fmt.Errorf("mse needs a floating-point output, %q is %v", pred.Name, pred.DType)
		}
		ti.Labels = freshName(g, "target")
		target, err := g.AddInput(ti.Labels, pred.DType, pred.Shape.Clone())
		if err != nil {
			return nil, err
		}
		d := b.Sub(pred, target)
		loss = b.Op("ReduceMean", []*ir.Value{b.Mul(d, d)}, ir.Attr{Name: "keepdims", Type: ir.AttrInt, Int: 0})
	default:
		return nil, fmt.Errorf("unknown loss %q (cross-entropy, mse, none)", kind)
	}
	if err := b.Err(); err != nil {
		return nil, err
	}
	if loss != pred {
		loss = renameOutput(b, loss, freshName(g, "loss"))
	}
	return loss, b.Err()
}

// renameOutput gives a value a stable name by passing it through
// Identity (names of emitted values are generated).
func renameOutput(b *autodiff.Builder, v *ir.Value, name string) *ir.Value {
	if v == nil {
		return nil
	}
	op, err := b.G.NewOp("Identity", "", name, []*ir.Value{v}, []string{name}, nil)
	if err != nil {
		b.Fail("%v", err)
		return nil
	}
	op.Phase = b.Phase
	if err := ir.InferAndSet(op, b.M.Opset("")); err != nil {
		b.Fail("%v", err)
		return nil
	}
	return op.Output(0)
}

func freshName(g *ir.Graph, base string) string { return g.FreshName(base) }

// lazyStateBytes is the size above which a parameter's optimizer state
// (zeros) is an initializer loaded on demand (ir.Graph.AddLazyInit).
const lazyStateBytes = 64 << 20

// addOptimizer emits the update of every parameter and returns the new
// outputs (updated parameters, then optimizer state).
func addOptimizer(m *ir.Model, b *autodiff.Builder, params, grads []*ir.Value, o TrainOptions, ti *TrainingInfo) ([]*ir.Value, error) {
	g := m.Graph
	def := func(x, d float64) float64 {
		if x == 0 {
			return d
		}
		return x
	}
	var outs []*ir.Value
	var state []*ir.Value
	feedback := func(in, out *ir.Value) {
		in.Next = out
		ti.Feedback = append(ti.Feedback, [2]string{out.Name, in.Name})
	}
	newState := func(p *ir.Value, what string, zeros bool) (*ir.Value, error) {
		name := freshName(g, "opt."+what+"."+p.Name)
		if zeros && p.Bytes() > lazyStateBytes {
			// The zeros are made when something reads them (a run, a
			// written file): planning a step whose optimizer state is
			// far larger than this machine's memory never does.
			dt, shape := p.DType, p.Shape.Clone()
			v, err := g.AddLazyInit(name, dt, shape, func() (*ir.Tensor, error) {
				b, err := shape.Bytes(dt)
				if err != nil {
					return nil, err
				}
				return ir.NewTensor(dt, shape.Clone(), make([]byte, b))
			})
			if err != nil {
				return nil, err
			}
			g.Inputs = append(g.Inputs, v)
			return v, nil
		}
		// A scalar (the step count) allocates no buffer of p's size.
		t := ir.TensorFromFloat64s(p.DType, ir.Shape{}, []float64{0})
		if zeros {
			var err error
			if t, err = ir.NewTensor(p.DType, p.Shape.Clone(), make([]byte, p.Bytes())); err != nil {
				return nil, err
			}
		}
		v, err := g.AddInit(name, t)
		if err != nil {
			return nil, err
		}
		g.Inputs = append(g.Inputs, v)
		return v, nil
	}
	var step, stepNext *ir.Value
	switch ti.Optimizer {
	case "none":
		return nil, nil
	case "sgd", "momentum":
	case "adam":
		var err error
		if step, err = newState(params[0], "step", false); err != nil {
			return nil, err
		}
		stepNext = renameOutput(b, b.Add(step, b.Scalar(step.DType, 1)), step.Name+".next")
	default:
		return nil, fmt.Errorf("unknown optimizer %q (sgd, momentum, adam, none)", ti.Optimizer)
	}
	for i, p := range params {
		gr := grads[i]
		dt := p.DType
		if o.WeightDecay != 0 {
			gr = b.Add(gr, b.Mul(p, b.Scalar(dt, o.WeightDecay)))
		}
		var next *ir.Value
		switch ti.Optimizer {
		case "sgd":
			next = b.Sub(p, b.Mul(gr, b.Scalar(dt, def(o.LR, 0.01))))
		case "momentum":
			v, err := newState(p, "momentum", true)
			if err != nil {
				return nil, err
			}
			vn := renameOutput(b, b.Add(b.Mul(v, b.Scalar(dt, def(o.Momentum, 0.9))), gr), v.Name+".next")
			next = b.Sub(p, b.Mul(vn, b.Scalar(dt, def(o.LR, 0.01))))
			state = append(state, vn)
			feedback(v, vn)
		case "adam":
			b1, b2 := def(o.Beta1, 0.9), def(o.Beta2, 0.999)
			mv, err := newState(p, "adam_m", true)
			if err != nil {
				return nil, err
			}
			vv, err := newState(p, "adam_v", true)
			if err != nil {
				return nil, err
			}
			mn := renameOutput(b, b.Add(b.Mul(mv, b.Scalar(dt, b1)), b.Mul(gr, b.Scalar(dt, 1-b1))), mv.Name+".next")
			vn := renameOutput(b, b.Add(b.Mul(vv, b.Scalar(dt, b2)), b.Mul(b.Mul(gr, gr), b.Scalar(dt, 1-b2))), vv.Name+".next")
			// Bias corrections 1 − β^t with t the updated step count.
			c1 := b.Sub(b.Scalar(dt, 1), b.Op("Pow", []*ir.Value{b.Scalar(dt, b1), stepNext}))
			c2 := b.Sub(b.Scalar(dt, 1), b.Op("Pow", []*ir.Value{b.Scalar(dt, b2), stepNext}))
			mhat := b.Div(mn, c1)
			vhat := b.Div(vn, c2)
			denom := b.Add(b.Op("Sqrt", []*ir.Value{vhat}), b.Scalar(dt, def(o.Eps, 1e-8)))
			next = b.Sub(p, b.Mul(b.Div(mhat, denom), b.Scalar(dt, def(o.LR, 0.001))))
			state = append(state, mn, vn)
			feedback(mv, mn)
			feedback(vv, vn)
		}
		next = renameOutput(b, next, freshName(g, p.Name+".next"))
		if err := b.Err(); err != nil {
			return nil, err
		}
		outs = append(outs, next)
		feedback(p, next)
	}
	if stepNext != nil {
		state = append(state, stepNext)
		feedback(step, stepNext)
	}
	return append(outs, state...), b.Err()
}

// bnRunningStats makes the running mean and variance that training-mode
// BatchNormalization computes into step outputs fed back as its inputs,
// so they are updated from step to step as in PyTorch.
func bnRunningStats(m *ir.Model, b *autodiff.Builder, ti *TrainingInfo) []*ir.Value {
	g := m.Graph
	var outs []*ir.Value
	for _, op := range g.Order() {
		if op.Type != "BatchNormalization" || op.Domain != "" || op.Phase != ir.Forward || op.AttrInt("training_mode", 0) == 0 {
			continue
		}
		for k := 1; k <= 2; k++ {
			in, out := op.Input(2+k), op.Output(k)
			if in == nil || out == nil || (in.Kind != ir.KindInit && in.Kind != ir.KindInput) {
				continue
			}
			if in.Kind == ir.KindInit && !slices.Contains(g.Inputs, in) {
				g.Inputs = append(g.Inputs, in)
			}
			outs = append(outs, out)
			in.Next = out
			ti.Feedback = append(ti.Feedback, [2]string{out.Name, in.Name})
		}
	}
	return outs
}

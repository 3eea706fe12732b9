package compiler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tsplit/tsplit/autodiff"
	"github.com/tsplit/tsplit/ir"
)

// Sub-batching with gradient accumulation (moDNN, DATE'18, §IV-A): the
// training step of a batch of B samples runs as k sub-batches, one after
// another, so only one sub-batch's feature maps are ever live; the
// parameter gradients of the sub-batches are accumulated and the single
// optimizer update is applied once, at the end.
//
// AccumulateSubBatches builds that step as one ir.Model, unrolled: k
// replicas of the forward+backward step at the sub-batch size, each
// reading its rows of the batch inputs and the labels through a standard
// ONNX Slice, the gradients summed by a chain of Adds (each Add right
// after the replica's gradient, so the schedule frees it at once and only
// the running sum crosses from one replica to the next), then the
// optimizer update of BuildTrainingStep (addOptimizer, the one copy of it)
// on the accumulated gradient. The replicas depend on each other only
// through those running sums (and BatchNormalization's running
// statistics, below), so the depth-first schedule (passes.Schedule)
// runs each one to its end before the next starts: the peak is about the
// sub-batch step's plus the accumulators and the whole batch's inputs,
// not k sub-batch steps' (TestAccumulatedPeak measures it).
//
// Scaling. The losses tsplit builds (cross-entropy, mse) are batch
// means, so the step's loss is Σ_j (n_j/B)·loss_j over sub-batches of
// n_j samples, and every gradient Σ_j (n_j/B)·grad_j: with equal
// sub-batches, the mean of the sub-batch losses and gradients, computed
// as (Σ_j grad_j)·(1/k). Without BatchNormalization this is the
// full-batch step up to float32 reassociation (TestAccumulatedEqualsFullBatch).
// Loss "none" (a scalar the model computes itself) is rejected: its
// reduction over the batch is the model's, and a sum and a mean would
// need different scales.
//
// BatchNormalization in training mode normalizes each sub-batch with
// that sub-batch's own mean and variance — moDNN's semantics, and what
// gradient accumulation does in every framework — so a BN model's loss
// and gradients are those of k smaller batches, not of the whole batch.
// Its running statistics are updated once per sub-batch, in order:
// replica j reads the running mean and variance replica j−1 wrote, so
// the step outputs r_k with r_j = μ·r_{j−1} + (1−μ)·stat_j, k momentum
// updates per step, exactly as PyTorch does when it accumulates
// gradients over k forward passes (TestAccumulatedBatchNorm). Chaining
// also gives every running-statistic tensor a single reader, which
// runtimes that update running statistics in place rely on: ONNX Runtime
// writes a training-mode BatchNormalization's new running mean into its
// input's buffer, so k replicas reading one shared input would each see
// the previous one's update (TestAccumulatedRunsInORT found it). Any
// other op that mixes the samples of a batch likewise sees one
// sub-batch, and random ops (Dropout) draw for each sub-batch.
//
// The batch inputs are the model's non-parameter graph inputs whose
// leading dimension follows the batch the model is built at (compared
// between builds at two sizes), and the labels; other inputs are read
// whole by every replica.

// SubBatchKey is the model metadata key of an accumulated step: a JSON
// SubBatching.
const SubBatchKey = "tsplit.subbatch"

// SubBatching is what an accumulated training step records about its
// sub-batches.
type SubBatching struct {
	// Batch is the step's batch, the sum of Sizes.
	Batch int64 `json:"batch"`
	// Sizes are the sub-batches in the order they run.
	Sizes []int64 `json:"sizes"`
	// Inputs are the graph inputs split along their leading dimension.
	Inputs []string `json:"inputs"`
}

// ReadSubBatching returns a model's sub-batching, or nil when it is not
// an accumulated step.
func ReadSubBatching(m *ir.Model) (*SubBatching, error) {
	sb, err := readMeta[SubBatching](m, SubBatchKey)
	if err != nil || sb == nil {
		return nil, err
	}
	if len(sb.Sizes) == 0 {
		return nil, fmt.Errorf("metadata %s lists no sub-batches", SubBatchKey)
	}
	return sb, nil
}

// EqualSubBatches splits a batch into k sub-batches of equal size. k
// must be between 1 and the batch and divide it.
func EqualSubBatches(batch, k int64) ([]int64, error) {
	switch {
	case batch < 1:
		return nil, fmt.Errorf("sub-batching: the batch is %d, it must be at least 1", batch)
	case k < 1:
		return nil, fmt.Errorf("sub-batching: %d sub-batches: there must be at least one", k)
	case k > batch:
		return nil, fmt.Errorf("sub-batching: a batch of %d cannot run as %d sub-batches: each needs at least one sample", batch, k)
	case batch%k != 0:
		return nil, fmt.Errorf("sub-batching: a batch of %d does not split into %d equal sub-batches (%d is not a multiple of %d); SubBatchesOf allows a smaller last one", batch, k, batch, k)
	}
	out := make([]int64, k)
	for i := range out {
		out[i] = batch / k
	}
	return out, nil
}

// SubBatchesOf splits a batch into sub-batches of b samples, the last
// one smaller when b does not divide the batch (a batch of 10 at b = 4 is
// 4, 4, 2). A b of at least the batch is the batch itself.
func SubBatchesOf(batch, b int64) ([]int64, error) {
	switch {
	case batch < 1:
		return nil, fmt.Errorf("sub-batching: the batch is %d, it must be at least 1", batch)
	case b < 1:
		return nil, fmt.Errorf("sub-batching: a sub-batch of %d samples: it must be at least 1", b)
	case b >= batch:
		return []int64{batch}, nil
	}
	out := make([]int64, 0, (batch+b-1)/b)
	for n := batch; n > 0; n -= b {
		out = append(out, min(n, b))
	}
	return out, nil
}

// ForwardBuilder returns a model's forward (inference) graph with its
// batch bound to batch, as a fresh model each call (compiler.Import with
// Options.Batch, or a zoo build).
type ForwardBuilder func(batch int64) (*ir.Model, error)

// subStep is the training step at one sub-batch size, with optimizer
// "none", that the replicas copy.
type subStep struct {
	m  *ir.Model
	ti *TrainingInfo
	// statOut maps each BatchNormalization running-statistic output to
	// the input it replaces next step.
	statOut map[*ir.Value]string
}

// AccumulateSubBatches builds the training step of the batch Σ sizes as
// len(sizes) sub-batches of those sizes with gradient accumulation (see
// above): the step BuildTrainingStep(build(Σ sizes), opts) would build,
// with the batch split. One size is the plain step. The model build
// returns is built at each distinct size (and, with one distinct size,
// also at that size + 1, to tell batch inputs from others).
func AccumulateSubBatches(build ForwardBuilder, sizes []int64, opts TrainOptions) (*ir.Model, *TrainingInfo, error) {
	if len(sizes) == 0 {
		return nil, nil, fmt.Errorf("sub-batching: no sub-batches")
	}
	var batch int64
	for _, n := range sizes {
		if n < 1 {
			return nil, nil, fmt.Errorf("sub-batching: a sub-batch of %d samples: each must have at least one", n)
		}
		batch += n
	}
	if len(sizes) == 1 {
		m, err := build(batch)
		if err != nil {
			return nil, nil, err
		}
		ti, err := BuildTrainingStep(m, opts)
		return m, ti, err
	}
	if opts.Loss == "none" {
		return nil, nil, errLossNone
	}

	// The forward model at each distinct size, its batch inputs found by
	// comparing two sizes.
	distinct := slices.Compact(slices.Sorted(slices.Values(sizes)))
	fwd := map[int64]*ir.Model{}
	for _, n := range distinct {
		m, err := build(n)
		if err != nil {
			return nil, nil, err
		}
		fwd[n] = m
	}
	a, b := distinct[0], distinct[len(distinct)-1]
	other := fwd[b]
	if a == b {
		b = a + 1
		var err error
		if other, err = build(b); err != nil {
			return nil, nil, fmt.Errorf("sub-batching: building the model at batch %d to find its batch inputs: %w", b, err)
		}
	}
	batchIn, labelsBatched, err := batchInputs(fwd[a], a, other, b)
	if err != nil {
		return nil, nil, err
	}
	// Symbolic dimensions bound to the batch (the model's Dims) become
	// the whole batch.
	var batchDims []string
	for name, n := range fwd[a].Dims {
		if n == a && other.Dims[name] == b {
			batchDims = append(batchDims, name)
		}
	}

	subOpts := opts
	subOpts.Optimizer, subOpts.KeepGrads, subOpts.WeightDecay = "none", true, 0
	steps := map[int64]*subStep{}
	for _, n := range distinct {
		m := fwd[n]
		ti, err := BuildTrainingStep(m, subOpts)
		if err != nil {
			return nil, nil, err
		}
		if ti.LossKind == "none" {
			return nil, nil, errLossNone
		}
		st := &subStep{m: m, ti: ti, statOut: map[*ir.Value]string{}}
		for _, fb := range ti.Feedback {
			if v := m.Graph.Lookup(fb[0]); v != nil {
				st.statOut[v] = fb[1]
			}
		}
		steps[n] = st
	}
	first := steps[sizes[0]]
	if first.ti.Labels != "" {
		if !labelsBatched {
			return nil, nil, fmt.Errorf("sub-batching: the model's first output does not follow the batch, so its labels (%q) cannot be split", first.ti.Labels)
		}
		batchIn[first.ti.Labels] = true
	}
	for n, st := range steps {
		if !slices.Equal(st.ti.Params, first.ti.Params) || st.ti.Labels != first.ti.Labels || st.ti.Loss != first.ti.Loss {
			return nil, nil, fmt.Errorf("sub-batching: the training steps at batches %d and %d differ in their parameters, loss or labels", sizes[0], n)
		}
	}
	acc := &accumulator{batch: batch, sizes: sizes, batchIn: batchIn, batchDims: batchDims}
	return acc.run(steps, opts)
}

var errLossNone = errors.New("sub-batching needs a loss tsplit builds (cross-entropy or mse, batch means it can split exactly); loss \"none\" is the model's own reduction over the batch, which a sum of sub-batch losses cannot reproduce without knowing it")

// batchInputs finds the data inputs of a forward model whose leading
// dimension is the batch: non-parameter graph inputs that have leading
// dimension a in the model built at a and b in the one built at b. It
// also says whether the first output follows the batch (the labels then
// do too).
func batchInputs(ma *ir.Model, a int64, mb *ir.Model, b int64) (map[string]bool, bool, error) {
	params := map[string]bool{}
	for _, p := range Params(ma) {
		params[p.Name] = true
	}
	out := map[string]bool{}
	var names []string
	for _, v := range ma.Graph.Inputs {
		if v.Kind != ir.KindInput || params[v.Name] {
			continue
		}
		names = append(names, v.Name)
		w := mb.Graph.Lookup(v.Name)
		if w == nil || w.Kind != ir.KindInput {
			return nil, false, fmt.Errorf("sub-batching: input %q of the model at batch %d is not an input at batch %d", v.Name, a, b)
		}
		if len(v.Shape) > 0 && len(w.Shape) > 0 && v.Shape[0] == a && w.Shape[0] == b {
			out[v.Name] = true
		}
	}
	if len(out) == 0 {
		return nil, false, fmt.Errorf("sub-batching: no input of the model follows the batch (built at batches %d and %d, its inputs %s keep their leading dimension), so the batch cannot be split", a, b, strings.Join(names, ", "))
	}
	follows := func(m *ir.Model, n int64) bool {
		return len(m.Graph.Outputs) > 0 && len(m.Graph.Outputs[0].Shape) > 0 && m.Graph.Outputs[0].Shape[0] == n
	}
	return out, follows(ma, a) && follows(mb, b), nil
}

// accumulator builds the accumulated step.
type accumulator struct {
	batch     int64
	sizes     []int64
	batchIn   map[string]bool
	batchDims []string

	m      *ir.Model
	g      *ir.Graph
	opset  int64
	shared map[string]*ir.Value // graph inputs and the template's initializers, by name
	full   map[string]*ir.Value // batch inputs at the whole batch
	axes   *ir.Value
	sliceB *autodiff.Builder
	lossB  *autodiff.Builder
	gradB  *autodiff.Builder
	loss   runningSum
	grads  map[string]*runningSum // by parameter
	// stat is the latest value of each running statistic, by the graph
	// input it starts from.
	stat map[string]*ir.Value
}

// runningSum is Σ_j (n_j/B)·x_j built as a chain: a run of sub-batches
// of equal size is summed, then scaled once by n/B.
type runningSum struct {
	total, run *ir.Value
	size       int64
}

func (s *runningSum) add(b *autodiff.Builder, x *ir.Value, size, batch int64) {
	if s.run != nil && size != s.size {
		s.flush(b, batch)
	}
	if s.run == nil {
		s.run, s.size = x, size
		return
	}
	s.run = b.Add(s.run, x)
}

func (s *runningSum) flush(b *autodiff.Builder, batch int64) {
	if s.run == nil {
		return
	}
	scaled := b.Mul(s.run, b.Scalar(s.run.DType, float64(s.size)/float64(batch)))
	s.total = b.Add(s.total, scaled)
	s.run = nil
}

func (s *runningSum) result(b *autodiff.Builder, batch int64) *ir.Value {
	s.flush(b, batch)
	return s.total
}

func (a *accumulator) run(steps map[int64]*subStep, opts TrainOptions) (*ir.Model, *TrainingInfo, error) {
	tmpl := steps[a.sizes[0]]
	tm := tmpl.m
	g := ir.NewGraph(tm.Graph.Name)
	g.Src = tm.Graph.Src
	a.m = &ir.Model{Graph: g, IRVersion: tm.IRVersion, Opsets: maps.Clone(tm.Opsets), Dims: maps.Clone(tm.Dims),
		Meta: maps.Clone(tm.Meta), Specialized: true, Path: tm.Path, Src: tm.Src}
	delete(a.m.Meta, TrainingKey)
	for _, name := range a.batchDims {
		a.m.Dims[name] = a.batch
	}
	a.g, a.opset = g, a.m.Opset("")
	a.shared, a.full = map[string]*ir.Value{}, map[string]*ir.Value{}
	a.grads, a.stat = map[string]*runningSum{}, map[string]*ir.Value{}
	a.sliceB = autodiff.NewBuilder(a.m, ir.Forward, "subbatch/slice/")
	a.lossB = autodiff.NewBuilder(a.m, ir.Loss, "subbatch/loss/")
	a.gradB = autodiff.NewBuilder(a.m, ir.Backward, "subbatch/grad/")

	// Graph inputs in the template's order, batch inputs at the whole
	// batch; then its other initializers.
	var inputs []*ir.Value
	for _, v := range tm.Graph.Inputs {
		var nv *ir.Value
		var err error
		switch {
		case v.Kind == ir.KindInit:
			nv, err = a.copyInit(v, v.Name)
		case a.batchIn[v.Name]:
			shape := v.Shape.Clone()
			shape[0] = a.batch
			nv, err = g.AddInput(v.Name, v.DType, shape)
			a.full[v.Name] = nv
		default:
			nv, err = g.AddInput(v.Name, v.DType, v.Shape.Clone())
		}
		if err != nil {
			return nil, nil, err
		}
		nv.Param = v.Param
		a.shared[v.Name] = nv
		inputs = append(inputs, nv)
	}
	for _, v := range tm.Graph.Inits {
		if a.shared[v.Name] != nil {
			continue
		}
		nv, err := a.copyInit(v, v.Name)
		if err != nil {
			return nil, nil, err
		}
		a.shared[v.Name] = nv
	}
	g.Inputs = inputs
	var err error
	if a.axes, err = g.AddInit(g.FreshName("subbatch/axes"), ir.TensorFromInt64s(ir.Int64, ir.Shape{1}, []int64{0})); err != nil {
		return nil, nil, err
	}

	var offset int64
	for j, n := range a.sizes {
		if err := a.replica(j, steps[n], offset); err != nil {
			return nil, nil, err
		}
		offset += n
	}

	// The step's loss, gradients, update and running statistics.
	ti := &TrainingInfo{LossKind: tmpl.ti.LossKind, Labels: tmpl.ti.Labels, Classes: tmpl.ti.Classes, Optimizer: opts.Optimizer}
	if ti.Optimizer == "" {
		ti.Optimizer = "sgd"
	}
	loss := renameOutput(a.lossB, a.loss.result(a.lossB, a.batch), g.FreshName(tmpl.ti.Loss))
	if err := a.lossB.Err(); err != nil {
		return nil, nil, err
	}
	ti.Loss = loss.Name
	outputs := []*ir.Value{loss}
	var params, grads []*ir.Value
	keep := opts.KeepGrads || ti.Optimizer == "none"
	if keep {
		ti.Grads = map[string]string{}
	}
	for _, p := range tmpl.ti.Params {
		pv := a.shared[p]
		if pv == nil {
			return nil, nil, fmt.Errorf("sub-batching: parameter %q is not an input of the step", p)
		}
		pv.Param = true
		gr := a.grads[p].result(a.gradB, a.batch)
		if keep {
			gr = renameOutput(a.gradB, gr, g.FreshName(tmpl.ti.Grads[p]))
			if gr != nil {
				outputs = append(outputs, gr)
				ti.Grads[p] = gr.Name
			}
		}
		params, grads = append(params, pv), append(grads, gr)
		ti.Params = append(ti.Params, p)
	}
	if err := a.gradB.Err(); err != nil {
		return nil, nil, err
	}
	ub := autodiff.NewBuilder(a.m, ir.Update, "update/")
	upd, err := addOptimizer(a.m, ub, params, grads, opts, ti)
	if err != nil {
		return nil, nil, err
	}
	if err := ub.Err(); err != nil {
		return nil, nil, err
	}
	outputs = append(outputs, upd...)
	for _, fb := range tmpl.ti.Feedback {
		in := fb[1]
		out := a.stat[in]
		if out == nil || out == a.shared[in] {
			return nil, nil, fmt.Errorf("sub-batching: running statistic %q has no update", in)
		}
		a.shared[in].Next = out
		ti.Feedback = append(ti.Feedback, [2]string{out.Name, in})
		outputs = append(outputs, out)
	}
	g.Outputs = outputs

	js, _ := json.Marshal(ti)
	a.m.Meta[TrainingKey] = string(js)
	var split []string
	for _, v := range tm.Graph.Inputs {
		if a.batchIn[v.Name] {
			split = append(split, v.Name)
		}
	}
	js, _ = json.Marshal(SubBatching{Batch: a.batch, Sizes: slices.Clone(a.sizes), Inputs: split})
	a.m.Meta[SubBatchKey] = string(js)
	if err := ir.Verify(a.m); err != nil {
		return nil, nil, fmt.Errorf("sub-batched training step does not verify: %w", err)
	}
	return a.m, ti, nil
}

// copyInit adds an initializer with v's data under name.
func (a *accumulator) copyInit(v *ir.Value, name string) (*ir.Value, error) {
	var nv *ir.Value
	var err error
	if v.Const != nil {
		nv, err = a.g.AddInit(name, v.Const)
	} else {
		nv, err = a.g.AddLazyInit(name, v.DType, v.Shape.Clone(), v.Load)
	}
	if err != nil {
		return nil, err
	}
	if name == v.Name {
		nv.Src = v.Src // the serialized tensor names it
	}
	return nv, nil
}

// sameData reports whether two initializers hold the same constant.
func sameData(x, y *ir.Value) bool {
	if (x.Src != nil && x.Src == y.Src) || (x.Const != nil && x.Const == y.Const) {
		return true
	}
	if x.DType != y.DType || !x.Shape.Equal(y.Shape) {
		return false
	}
	dx, err1 := x.Data()
	dy, err2 := y.Data()
	return err1 == nil && err2 == nil && dx != nil && dy != nil && bytes.Equal(dx.Raw, dy.Raw)
}

// replica copies the sub-batch step st as the j-th sub-batch, reading
// rows [offset, offset+size) of the batch inputs and the running
// statistics the previous replica wrote, and adds its loss and gradients
// to the running sums as soon as each is computed. The last replica's
// running statistics keep the plain step's output names.
func (a *accumulator) replica(j int, st *subStep, offset int64) error {
	g := a.g
	size := a.sizes[j]
	prefix := fmt.Sprintf("subbatch%d/", j)
	vm := map[*ir.Value]*ir.Value{}
	sg := st.m.Graph
	statIn := map[string]bool{}
	for _, in := range st.statOut {
		statIn[in] = true
	}
	last := j == len(a.sizes)-1
	for _, v := range sg.Inputs {
		if statIn[v.Name] {
			if a.stat[v.Name] == nil {
				a.stat[v.Name] = a.shared[v.Name]
			}
			if vm[v] = a.stat[v.Name]; vm[v] == nil {
				return fmt.Errorf("sub-batching: running statistic %q of the step at batch %d is not one at batch %d", v.Name, size, a.sizes[0])
			}
			continue
		}
		if !a.batchIn[v.Name] {
			nv := a.shared[v.Name]
			if nv == nil {
				return fmt.Errorf("sub-batching: input %q of the step at batch %d is not one at batch %d", v.Name, size, a.sizes[0])
			}
			vm[v] = nv
			continue
		}
		starts := a.sliceB.Ints(offset)
		ends := a.sliceB.Ints(offset + size)
		if err := a.sliceB.Err(); err != nil {
			return err
		}
		name := g.FreshName(prefix + v.Name)
		op, err := g.NewOp("Slice", "", name, []*ir.Value{a.full[v.Name], starts, ends, a.axes}, []string{name}, nil)
		if err != nil {
			return err
		}
		if err := ir.InferAndSet(op, a.opset); err != nil {
			return fmt.Errorf("sub-batching: slicing %q: %w", v.Name, err)
		}
		if !op.Output(0).Shape.Equal(v.Shape) {
			return fmt.Errorf("sub-batching: rows %d–%d of %q have shape %v, the step at batch %d reads %v", offset, offset+size, v.Name, op.Output(0).Shape, size, v.Shape)
		}
		vm[v] = op.Output(0)
	}
	for _, v := range sg.Inits {
		if vm[v] != nil {
			continue
		}
		if w := a.shared[v.Name]; w != nil && w.Kind == ir.KindInit && sameData(v, w) {
			vm[v] = w
			continue
		}
		// A constant of another sub-batch size (a shape, say) under a
		// name the first size uses for different data.
		nv, err := a.copyInit(v, g.FreshName(prefix+v.Name))
		if err != nil {
			return err
		}
		vm[v] = nv
	}
	gradOf := map[*ir.Value]string{}
	for p, gname := range st.ti.Grads {
		if v := sg.Lookup(gname); v != nil {
			gradOf[v] = p
		}
	}
	loss := sg.Lookup(st.ti.Loss)
	for _, op := range sg.Order() {
		ins := make([]*ir.Value, len(op.Inputs()))
		for i, v := range op.Inputs() {
			if v == nil {
				continue
			}
			if ins[i] = vm[v]; ins[i] == nil {
				return fmt.Errorf("sub-batching: %s reads %q before it is defined", op.Describe(), v.Name)
			}
		}
		outNames := make([]string, len(op.Outputs()))
		for i, v := range op.Outputs() {
			if _, isStat := st.statOut[v]; v != nil {
				outNames[i] = g.FreshName(prefix + v.Name)
				if isStat && last {
					outNames[i] = g.FreshName(v.Name)
				}
			}
		}
		name := op.Name
		if name != "" {
			name = g.FreshName(prefix + name)
		}
		nop, err := g.NewOp(op.Type, op.Domain, name, ins, outNames, slices.Clone(op.Attrs))
		if err != nil {
			return err
		}
		nop.Phase, nop.Origin, nop.Host, nop.Src = op.Phase, op.Origin, op.Host, op.Src
		for i, v := range op.Outputs() {
			if v == nil {
				continue
			}
			nv := nop.Output(i)
			nv.DType, nv.Shape, nv.Const = v.DType, v.Shape.Clone(), v.Const
			vm[v] = nv
			switch {
			case v == loss:
				a.loss.add(a.lossB, nv, size, a.batch)
			case gradOf[v] != "":
				p := gradOf[v]
				if a.grads[p] == nil {
					a.grads[p] = &runningSum{}
				}
				a.grads[p].add(a.gradB, nv, size, a.batch)
			}
			if in, ok := st.statOut[v]; ok {
				a.stat[in] = nv
			}
		}
	}
	for _, b := range []*autodiff.Builder{a.lossB, a.gradB} {
		if err := b.Err(); err != nil {
			return err
		}
	}
	return nil
}

package passes

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// SplitDecision splits one op into PNum micro-ops as Map says (TSPLIT's
// sTensor config (opt, p_num, dim) for the op's input and output
// sTensors, with opt = swap): along output dimension Map.OutDim with a
// concat merge, or along a contracted dimension with a sum merge.
type SplitDecision struct {
	Op     *ir.Op
	PNum   int
	Map    DimMap
	At     int
	DeltaM int64
	DeltaT float64
}

// Dim is the output dimension the split cuts (-1 for a sum merge, whose
// split dimension is contracted away).
func (d *SplitDecision) Dim() int { return d.Map.OutDim }

// InsertSplit rewrites a split decision into ops. The split activations
// are staged in host memory and come back piece by piece; each output is
// produced piece by piece and each piece leaves at once:
//
//	hX = SwapOut(X)                           (unless X already is on the host)
//	for k: Xk = SwapIn(Slice[host](hX, rk))   micro-tensor k of each split input,
//	                                          rk its range with the halo (σ, δ)
//	       Wk = Slice(W, rk)                  a split weight is sliced on the device
//	       Yk = op'(Xk, Wk, …)                micro-op k (pads, group, shape rewritten)
//	       hYk = SwapOut(Yk)
//	hY = Concat[host](hY1 … hYp)              or Sum[host] for a sum merge
//	Y' = SwapIn(hY)                           before Y's first consumer
//
// so op i needs about two pieces of each split tensor on the device at a
// time. The host-placed Slice, Concat and Sum are standard ONNX ops (a
// plain runtime runs them as such); tsplit's runtime runs them on host
// buffers. A split input that an earlier split left on the host as a
// Concat of pieces is read piece by piece without re-slicing when the
// ranges line up (same p_num and dimension: one consistent sTensor,
// §IV-C); otherwise it is merged and re-split on the host. Later uses of
// a split input read it back through one SwapIn.
func InsertSplit(m *ir.Model, d *SplitDecision) error {
	g := m.Graph
	op := d.Op
	dm := &d.Map
	if err := checkSplit(op, d); err != nil {
		return err
	}
	if g.Index(op) < 0 {
		return fmt.Errorf("split: %s is not in the graph (split twice?)", op.Describe())
	}
	fresh := g.FreshName
	hostState := hasHostState(g)
	at := g.Index
	const beforeOp = -1 // insert's position for "right before op"
	// Ops that go right before op (the micro-ops, their slices, swaps
	// and merges) are appended to the order and moved there in one pass
	// at the end (MoveBefore), in the order they were made: inserting
	// each one in place shifted the order's tail per op, which dominated
	// planning with many splits.
	var before []*ir.Op
	insert := func(pos int, typ, domain, name string, in []*ir.Value, outs []string, attrs []ir.Attr, phase ir.Phase, host bool) (*ir.Op, error) {
		var o *ir.Op
		var err error
		if pos < 0 {
			o, err = g.NewOp(typ, domain, name, in, outs, attrs)
			before = append(before, o)
		} else {
			o, err = g.InsertOp(pos, typ, domain, name, in, outs, attrs)
		}
		if err != nil {
			return nil, err
		}
		o.Phase, o.Host = phase, host
		if err := ir.InferAndSet(o, m.Opset(domain)); err != nil {
			return nil, fmt.Errorf("split %s: %w", op.Describe(), err)
		}
		return o, nil
	}
	ints := func(_ string, vals ...int64) (*ir.Value, error) { return splitConst(g, vals) }
	// slice inserts a Slice of x's [lo, hi) along axis before op.
	slice := func(x *ir.Value, axis int, lo, hi int64, name string, host bool) (*ir.Value, error) {
		s, err1 := ints("starts", lo)
		e, err2 := ints("ends", hi)
		a, err3 := ints("axes", int64(axis))
		if err := firstErr(err1, err2, err3); err != nil {
			return nil, err
		}
		sl, err := insert(beforeOp, "Slice", "", fresh(op.Name+"/slice"), []*ir.Value{x, s, e, a}, []string{fresh(name)}, nil, op.Phase, host)
		if err != nil {
			return nil, err
		}
		sl.Origin = "split"
		return sl.Output(0), nil
	}

	// Stage every split activation on the host; split weights stay on
	// the device and are sliced there.
	hosts := make([]*ir.Value, len(op.Inputs()))
	for j, x := range op.Inputs() {
		if x == nil || dm.Inputs[j].Dim < 0 || memory.Resident(x) {
			continue
		}
		if x.Def != nil && ir.CopyOf(x.Def) == ir.ToDevice {
			hosts[j] = x.Def.Input(0) // restored from the host: use that copy
			continue
		}
		pos := 0
		if x.Def != nil {
			pos = at(x.Def) + 1
		}
		so, err := insert(pos, "SwapOut", ir.Domain, fresh(x.Name+"/split_out"), []*ir.Value{x}, []string{fresh(x.Name + "/host")}, nil, phaseAt(g, pos), false)
		if err != nil {
			return err
		}
		hosts[j] = so.Output(0)
	}

	outs := op.Outputs()
	pieces := make([][]*ir.Value, len(outs))
	for k, pr := range Parts(dm.Extent, d.PNum) {
		lo, hi := pr[0], pr[1]
		in := append([]*ir.Value(nil), op.Inputs()...)
		var start0 int64 // where input 0's range begins (MaxPool indices)
		type pieceKey struct {
			x          *ir.Value
			start, end int64
			dim        int
		}
		got := map[pieceKey]*ir.Value{} // an input read twice comes in once
		for j, x := range op.Inputs() {
			im := dm.Inputs[j]
			switch {
			case x == nil:
				continue
			case im.Once && k > 0:
				in[j] = nil // an additive input only the first micro-op reads
				continue
			case j == 1 && dm.Rewrite == RewriteShape:
				shape := dm.MicroShape(op, lo, hi)
				v, err := ints(op.Name+"/micro_shape", shape...)
				if err != nil {
					return err
				}
				in[j] = v
				continue
			case im.Dim < 0:
				continue
			}
			r := im.Range(lo, hi, x.Shape[im.Dim])
			if j == 0 {
				start0 = r.Start
			}
			key := pieceKey{x, r.Start, r.End, im.Dim}
			if v := got[key]; v != nil {
				in[j] = v
				continue
			}
			if hosts[j] == nil { // a weight: slice it on the device
				v, err := slice(x, im.Dim, r.Start, r.End, fmt.Sprintf("%s/part%d", x.Name, k), false)
				if err != nil {
					return err
				}
				in[j], got[key] = v, v
				continue
			}
			h := hostPiece(hosts[j], im.Dim, r.Start, r.End)
			if h == nil {
				v, err := slice(hosts[j], im.Dim, r.Start, r.End, fmt.Sprintf("%s/%d", hosts[j].Name, k), true)
				if err != nil {
					return err
				}
				h = v
			}
			si, err := insert(beforeOp, "SwapIn", ir.Domain, fresh(op.Name+"/piece_in"), []*ir.Value{h}, []string{fresh(x.Name + fmt.Sprintf("/piece%d", k))}, nil, op.Phase, false)
			if err != nil {
				return err
			}
			in[j], got[key] = si.Output(0), si.Output(0)
		}
		for len(in) > 0 && in[len(in)-1] == nil {
			in = in[:len(in)-1] // absent trailing optional inputs
		}
		attrs, err := dm.MicroAttrs(op, lo, hi)
		if err != nil {
			return err
		}
		names := make([]string, len(outs))
		for i, y := range outs {
			if y != nil {
				names[i] = fresh(fmt.Sprintf("%s/piece%d", y.Name, k))
			}
		}
		mo, err := insert(beforeOp, op.Type, op.Domain, fresh(fmt.Sprintf("%s/micro%d", op.Name, k)), in, names, attrs, op.Phase, false)
		if err != nil {
			return err
		}
		mo.Origin = "split"
		for i, y := range mo.Outputs() {
			if y == nil {
				continue
			}
			so, err := insert(beforeOp, "SwapOut", ir.Domain, fresh(op.Name+"/piece_out"), []*ir.Value{y}, []string{fresh(y.Name + "/host")}, nil, op.Phase, false)
			if err != nil {
				return err
			}
			p := so.Output(0)
			if s := dm.Outputs[i].IndexStride; s != 0 && start0 != 0 {
				// Flat indices count from the micro-input's start.
				c, err := g.AddInit(fresh(op.Name+"/index_base"), ir.TensorFromInt64s(p.DType, ir.Shape{}, []int64{start0 * s}))
				if err != nil {
					return err
				}
				add, err := insert(beforeOp, "Add", "", fresh(op.Name+"/rebase"), []*ir.Value{p, c}, []string{fresh(p.Name + "/rebased")}, nil, op.Phase, true)
				if err != nil {
					return err
				}
				add.Origin = "split"
				p = add.Output(0)
			}
			pieces[i] = append(pieces[i], p)
		}
	}

	merges := make([]*ir.Value, len(outs)) // what replaces each output
	for i, y := range outs {
		if y == nil {
			continue
		}
		var merged *ir.Op
		var err error
		if dm.Merge == MergeSum {
			merged, err = insert(beforeOp, "Sum", "", fresh(op.Name+"/merge"), pieces[i], []string{fresh(y.Name + "/host")}, nil, op.Phase, true)
		} else {
			merged, err = insert(beforeOp, "Concat", "", fresh(op.Name+"/merge"), pieces[i], []string{fresh(y.Name + "/host")},
				[]ir.Attr{{Name: "axis", Type: ir.AttrInt, Int: int64(dm.Outputs[i].Dim)}}, op.Phase, true)
		}
		if err != nil {
			return err
		}
		merged.Origin = "split"
		// A swap-out of Y that only host ops read, or that is a graph
		// output (state offloaded by OffloadState: a gradient the host
		// update reads, an updated weight), is the merge itself: its
		// readers read the merge, under the swap-out's name, and Y does
		// not come back to the device for it.
		// Only where the step keeps state on the host: a plan without
		// it stays the plan it was before issue 14 (with this rule for
		// every plan, resnet18-small b16's sweep broke monotonicity,
		// +12.95 % at 55 % of the peak against +12.63 % at 50 %).
		for _, u := range append([]ir.Use(nil), y.Uses()...) {
			if !hostState || ir.CopyOf(u.Op) != ir.ToHost || !hostOnly(u.Op.Output(0)) {
				continue
			}
			h := u.Op.Output(0)
			name := h.Name
			h.ReplaceAllUsesWith(merged.Output(0))
			if err := g.RemoveOp(u.Op); err != nil {
				return err
			}
			if err := g.Rename(merged.Output(0), name); err != nil {
				return err
			}
		}
		// Y comes back whole before its first consumer (or at the end, for
		// a graph output).
		if len(y.Uses()) > 0 || isOutput(g, y) {
			pos, phase := len(g.Order()), op.Phase
			for _, u := range y.Uses() {
				if p := at(u.Op); p < pos {
					pos, phase = p, u.Op.Phase
				}
			}
			back, err := insert(pos, "SwapIn", ir.Domain, fresh(y.Name+"/merged_in"), []*ir.Value{merged.Output(0)}, []string{fresh(y.Name + "/merged")}, nil, phase, false)
			if err != nil {
				return err
			}
			y.ReplaceAllUsesWith(back.Output(0))
			merges[i] = back.Output(0)
		}
	}
	if err := g.MoveBefore(before, op); err != nil {
		return err
	}
	// Later device uses of a split input read its host copy back (each
	// SwapIn goes after op, which stays where it is).
	opAt := at(op)
	for j, x := range op.Inputs() {
		if hosts[j] == nil || x == nil {
			continue
		}
		var later []ir.Use
		for _, u := range x.Uses() {
			if u.Op != op && at(u.Op) > opAt && ir.CopyOf(u.Op) != ir.ToHost {
				later = append(later, u)
			}
		}
		if len(later) == 0 {
			continue
		}
		first := later[0].Op
		for _, u := range later {
			if at(u.Op) < at(first) {
				first = u.Op
			}
		}
		back, err := insert(at(first), "SwapIn", ir.Domain, fresh(x.Name+"/back_in"), []*ir.Value{hosts[j]}, []string{fresh(x.Name + "/back")}, nil, first.Phase, false)
		if err != nil {
			return err
		}
		for _, u := range later {
			u.Op.SetInput(u.Index, back.Output(0))
		}
	}
	if err := g.RemoveOp(op); err != nil {
		return err
	}
	// Graph outputs keep their names.
	for i, y := range outs {
		if y == nil || !isOutput(g, merges[i]) {
			continue
		}
		if err := g.Rename(merges[i], y.Name); err != nil {
			return err
		}
	}
	// Swap-ins that only fed the split op are dead now, and so are host
	// merges of an earlier split whose pieces this one read directly.
	gone := map[*ir.Op]bool{op: true}
	for _, x := range op.Inputs() {
		if err := removeDead(g, x, gone); err != nil {
			return err
		}
	}
	return nil
}

// splitConst returns a 1-D int64 initializer holding vals, shared by
// every split that needs the same one: it is named after its content, so
// the thousands of slice bounds of a finely split graph cost one
// resident constant per distinct value, not one per slice.
func splitConst(g *ir.Graph, vals []int64) (*ir.Value, error) {
	var sb strings.Builder
	sb.WriteString("split/i64")
	for _, v := range vals {
		fmt.Fprintf(&sb, "_%d", v)
	}
	t := ir.TensorFromInt64s(ir.Int64, ir.Shape{int64(len(vals))}, vals)
	name := sb.String()
	if v := g.Lookup(name); v != nil && v.Kind == ir.KindInit {
		if d, err := v.Data(); err == nil && d.DType == t.DType && d.Shape.Equal(t.Shape) && bytes.Equal(d.Raw, t.Raw) {
			return v, nil
		}
	}
	return g.AddInit(g.FreshName(name), t)
}

// checkSplit rejects decisions InsertSplit cannot realize.
func checkSplit(op *ir.Op, d *SplitDecision) error {
	dm := &d.Map
	switch {
	case d.PNum < 2 || int64(d.PNum) > dm.Extent:
		return fmt.Errorf("split: %s cannot be split %d ways (the split dimension has %d positions)", op.Describe(), d.PNum, dm.Extent)
	case len(dm.Inputs) != len(op.Inputs()) || len(dm.Outputs) != len(op.Outputs()):
		return fmt.Errorf("split: %s: the split map has %d inputs and %d outputs, the op %d and %d", op.Describe(), len(dm.Inputs), len(dm.Outputs), len(op.Inputs()), len(op.Outputs()))
	case dm.Random:
		// Micro-ops would draw other masks than the whole op: the planned
		// step would not equal the unplanned one.
		return fmt.Errorf("split: %s is random; its micro-ops would not reproduce it", op.Describe())
	case slicesPinned(op, dm):
		return fmt.Errorf("split: %s computes or reads a value that must stay a compile-time constant (shape data); splitting it would make it an op result", op.Describe())
	}
	for i, y := range op.Outputs() {
		if y != nil && dm.Merge == MergeConcat && (dm.Outputs[i].Dim < 0 || dm.Outputs[i].Dim >= len(y.Shape)) {
			return fmt.Errorf("split: %s: output %d has no split dimension", op.Describe(), i)
		}
	}
	return nil
}

// hostPiece returns the piece of a host Concat of split pieces (an
// earlier split's merge) that is exactly [lo, hi) of h along axis, or nil.
func hostPiece(h *ir.Value, axis int, lo, hi int64) *ir.Value {
	c := h.Def
	if c == nil || c.Type != "Concat" || !c.Host || c.Origin != "split" {
		return nil
	}
	if c.Attr("axis") == nil || int(c.AttrInt("axis", 0)) != axis {
		return nil
	}
	var pos int64
	for _, p := range c.Inputs() {
		n := p.Shape[axis]
		if pos == lo && pos+n == hi {
			return p
		}
		pos += n
	}
	return nil
}

// removeDead removes v's producer when nothing reads v any more and it
// is a copy or host op a split made redundant, then its inputs' in turn.
// gone holds the ops already removed (an op may read a value twice).
func removeDead(g *ir.Graph, v *ir.Value, gone map[*ir.Op]bool) error {
	if v == nil || v.Def == nil || gone[v.Def] || v.NumUses() > 0 || isOutput(g, v) {
		return nil
	}
	def := v.Def
	if ir.CopyOf(def) != ir.ToDevice && !(def.Host && def.Origin == "split") {
		return nil
	}
	for _, o := range def.Outputs() {
		if o != nil && (o.NumUses() > 0 || isOutput(g, o)) {
			return nil
		}
	}
	if err := g.RemoveOp(def); err != nil {
		return err
	}
	gone[def] = true
	for _, x := range def.Inputs() {
		if err := removeDead(g, x, gone); err != nil {
			return err
		}
	}
	return nil
}

func isOutput(g *ir.Graph, v *ir.Value) bool { return outputIndex(g, v) >= 0 }

// outputIndex is v's index among g's outputs (-1: not an output).
func outputIndex(g *ir.Graph, v *ir.Value) int {
	for k, o := range g.Outputs {
		if o == v {
			return k
		}
	}
	return -1
}

// phaseAt is the phase of the op at pos (Forward at the start).
func phaseAt(g *ir.Graph, pos int) ir.Phase {
	if pos > 0 && pos-1 < len(g.Order()) {
		return g.Order()[pos-1].Phase
	}
	return ir.Forward
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// hostOnly reports whether no swap-in reads v: host ops read it, or
// nothing does (a graph output).
func hostOnly(v *ir.Value) bool {
	for _, u := range v.Uses() {
		if ir.CopyOf(u.Op) != ir.OnHost {
			return false
		}
	}
	return true
}

// hasHostState reports whether g keeps training state on the host
// (OffloadState: a weight only swap-ins read).
func hasHostState(g *ir.Graph) bool {
	for _, v := range g.Inits {
		if memory.HostResident(v) {
			return true
		}
	}
	for _, v := range g.Inputs {
		if memory.HostResident(v) {
			return true
		}
	}
	return false
}

// HostMergeInPlace reports whether splitting op by dm merges output 0 in
// place on the host, where it is merged there at all: InsertSplit merges
// it straight into its host copy where the step keeps state on the host
// and only host ops read the swapped-out value (a weight gradient the
// host update reads). A Concat along the outermost non-unit dimension is
// merged in place (ir.InPlaceConcat) and holds the tensor once; one
// along a strided dimension, or a Sum, holds the pieces and the whole
// tensor at once. A split whose merge does not stay on the host reports
// true.
func HostMergeInPlace(g *ir.Graph, op *ir.Op, dm *DimMap) bool {
	y := op.Output(0)
	if y == nil || !hasHostState(g) {
		return true
	}
	merged := false
	for _, u := range y.Uses() {
		if ir.CopyOf(u.Op) == ir.ToHost && hostOnly(u.Op.Output(0)) {
			merged = true
		}
	}
	if !merged {
		return true
	}
	if dm.Merge == MergeSum || len(dm.Outputs) == 0 || dm.Outputs[0].Dim < 0 {
		return false
	}
	for d := 0; d < dm.Outputs[0].Dim && d < len(y.Shape); d++ {
		if y.Shape[d] != 1 {
			return false
		}
	}
	return true
}

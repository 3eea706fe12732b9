package passes

import (
	"fmt"

	"github.com/tsplit/tsplit/ir"
)

// SplitDecision splits one op into PNum micro-ops along dimension Dim of
// its output (TSPLIT's sTensor config (opt, p_num, dim) for the op's
// input and output sTensors, with opt = swap). InputDims gives, per
// input, the dimension that follows the split (-1: the input is read
// whole, e.g. a weight).
type SplitDecision struct {
	Op        *ir.Op
	PNum      int
	Dim       int
	InputDims []int
	At        int
	DeltaM    int64
	DeltaT    float64
}

// InsertSplit rewrites a split decision into ops. The split input
// sTensors are staged in host memory and come back piece by piece; the
// output is produced piece by piece and each piece leaves at once:
//
//	hX = SwapOut(X)                          (unless X already is on the host)
//	for k: Xk = SwapIn(Slice[host](hX, k))   micro-tensor k of each split input
//	       Yk = op(Xk, W)                    micro-op k
//	       hYk = SwapOut(Yk)
//	hY = Concat[host](hY1 … hYp)             merge in host memory: no device copy
//	Y' = SwapIn(hY)                          before Y's first consumer
//
// so op i needs only about 2/p of its inputs and outputs on the device
// at a time. The host-placed Slice and Concat are standard ONNX ops (a
// plain runtime runs them as such); tsplit's runtime runs them on host
// buffers. Later uses of a split input read it back through one SwapIn.
func InsertSplit(m *ir.Model, d *SplitDecision) error {
	g := m.Graph
	op := d.Op
	if len(op.Outputs()) != 1 || op.Output(0) == nil {
		return fmt.Errorf("split: %s has %d outputs; only single-output ops split", op.Describe(), len(op.Outputs()))
	}
	y := op.Output(0)
	if d.Dim < 0 || d.Dim >= len(y.Shape) || d.PNum < 2 || int64(d.PNum) > y.Shape[d.Dim] {
		return fmt.Errorf("split: %s cannot be split %d ways along dimension %d of %v", op.Describe(), d.PNum, d.Dim, y.Shape)
	}
	fresh := g.FreshName
	at := func(anchor *ir.Op) int { return g.Position()[anchor.ID] }
	insert := func(pos int, typ, domain, name string, in []*ir.Value, outs []string, attrs []ir.Attr, phase ir.Phase, host bool) (*ir.Op, error) {
		o, err := g.InsertOp(pos, typ, domain, name, in, outs, attrs)
		if err != nil {
			return nil, err
		}
		o.Phase, o.Host = phase, host
		if err := ir.InferAndSet(o, m.Opset(domain)); err != nil {
			return nil, fmt.Errorf("split: %w", err)
		}
		return o, nil
	}
	ints := func(name string, vals ...int64) (*ir.Value, error) {
		return g.AddInit(fresh(name), ir.TensorFromInt64s(ir.Int64, ir.Shape{int64(len(vals))}, vals))
	}

	// Stage every split input on the host.
	hosts := make([]*ir.Value, len(op.Inputs()))
	for j, x := range op.Inputs() {
		if x == nil || j >= len(d.InputDims) || d.InputDims[j] < 0 {
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
	n := y.Shape[d.Dim]
	chunk := (n + int64(d.PNum) - 1) / int64(d.PNum)
	var pieces []*ir.Value
	for k := int64(0); k*chunk < n; k++ {
		lo, hi := k*chunk, min((k+1)*chunk, n)
		in := append([]*ir.Value(nil), op.Inputs()...)
		for j, h := range hosts {
			if h == nil {
				continue
			}
			axis := int64(d.InputDims[j])
			s, err1 := ints("split/starts", lo)
			e, err2 := ints("split/ends", hi)
			a, err3 := ints("split/axes", axis)
			if err := firstErr(err1, err2, err3); err != nil {
				return err
			}
			sl, err := insert(at(op), "Slice", "", fresh(op.Name+"/slice"), []*ir.Value{h, s, e, a}, []string{fresh(h.Name + fmt.Sprintf("/%d", k))}, nil, op.Phase, true)
			if err != nil {
				return err
			}
			si, err := insert(at(op), "SwapIn", ir.Domain, fresh(op.Name+"/piece_in"), []*ir.Value{sl.Output(0)}, []string{fresh(in[j].Name + fmt.Sprintf("/piece%d", k))}, nil, op.Phase, false)
			if err != nil {
				return err
			}
			in[j] = si.Output(0)
		}
		attrs := append([]ir.Attr(nil), op.Attrs...)
		mo, err := insert(at(op), op.Type, op.Domain, fresh(fmt.Sprintf("%s/micro%d", op.Name, k)), in, []string{fresh(fmt.Sprintf("%s/piece%d", y.Name, k))}, attrs, op.Phase, false)
		if err != nil {
			return err
		}
		mo.Origin = "split"
		so, err := insert(at(op), "SwapOut", ir.Domain, fresh(op.Name+"/piece_out"), []*ir.Value{mo.Output(0)}, []string{fresh(mo.Output(0).Name + "/host")}, nil, op.Phase, false)
		if err != nil {
			return err
		}
		pieces = append(pieces, so.Output(0))
	}
	merged, err := insert(at(op), "Concat", "", fresh(op.Name+"/merge"), pieces, []string{fresh(y.Name + "/host")},
		[]ir.Attr{{Name: "axis", Type: ir.AttrInt, Int: int64(d.Dim)}}, op.Phase, true)
	if err != nil {
		return err
	}
	// Y comes back whole before its first consumer (or at the end, for a
	// graph output); the op goes.
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
	}
	// Later device uses of a split input read its host copy back.
	for j, x := range op.Inputs() {
		if hosts[j] == nil || x == nil {
			continue
		}
		var later []ir.Use
		for _, u := range x.Uses() {
			if u.Op != op && at(u.Op) > at(op) && ir.CopyOf(u.Op) != ir.ToHost {
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
	// Swap-ins that only fed the split op are dead now.
	gone := map[*ir.Op]bool{}
	for _, x := range op.Inputs() {
		if x != nil && x.Def != nil && !gone[x.Def] && ir.CopyOf(x.Def) == ir.ToDevice && x.NumUses() == 0 && !isOutput(g, x) {
			gone[x.Def] = true
			if err := g.RemoveOp(x.Def); err != nil {
				return err
			}
		}
	}
	return nil
}

func isOutput(g *ir.Graph, v *ir.Value) bool {
	for _, o := range g.Outputs {
		if o == v {
			return true
		}
	}
	return false
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

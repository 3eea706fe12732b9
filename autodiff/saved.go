package autodiff

import (
	"math"

	"github.com/tsplit/tsplit/ir"
)

// What the backward pass keeps from the forward pass. Differentiating op
// by op, each rule reads the forward values its op needs; two things
// make that keep more than PyTorch's autograd does:
//
//   - an op that only copies its input (Identity, a Dropout that is the
//     identity: ratio 0 or not training) has an output equal to its
//     input, and a rule reading the copy keeps a second tensor where
//     PyTorch (whose dropout(p=0) returns its input) keeps one. Backward
//     ops read the original instead (readOriginals), so the copy dies
//     with its last forward reader;
//   - GELU exported before opset 20 is five ops, x·(1 + erf(x/√2))·½,
//     whose rules keep x, x/√2 and 1 + erf(x/√2). Differentiated as one
//     unit (geluUnits), its gradient is dy·(Φ(x) + x·φ(x)) from x alone,
//     what PyTorch's GeluBackward keeps.

// dropoutIdentity reports whether a Dropout computes its input unchanged:
// without training_mode, with training_mode constant false, or with
// ratio constant 0. Its gradient is then dy, and it needs no mask.
func dropoutIdentity(op *ir.Op) bool {
	tm := op.Input(2)
	if train, known := nnConstBool(tm); tm == nil || (known && !train) {
		return true
	}
	r, ok := nnConstFloat(op.Input(1))
	return ok && r == 0
}

// original returns the forward value v copies, following Identity ops
// and identity Dropouts (output 0 only: a Dropout's mask is no copy).
func original(v *ir.Value) *ir.Value {
	for v.Kind == ir.KindOp && v.DefIndex == 0 && v.Def.Domain == "" && v.Def.Phase != ir.Backward {
		op := v.Def
		x := op.Input(0)
		if x == nil || x.DType != v.DType || !x.Shape.Equal(v.Shape) {
			break
		}
		if op.Type != "Identity" && (op.Type != "Dropout" || !dropoutIdentity(op)) {
			break
		}
		v = x
	}
	return v
}

// readOriginals makes the backward ops emitted since op ID first read
// the originals of the forward copies they read (original).
func readOriginals(g *ir.Graph, first ir.OpID) {
	for _, op := range g.Order() {
		if op.ID < first || op.Phase != ir.Backward {
			continue
		}
		for i, v := range op.Inputs() {
			if v == nil || v.Kind != ir.KindOp || v.Def.Phase == ir.Backward {
				continue
			}
			if o := original(v); o != v {
				op.SetInput(i, o)
			}
		}
	}
}

// unit is a group of forward ops differentiated as one: interior ops
// get no rule of their own; the last op's rule gives the gradient of
// the unit's input.
type unit struct {
	in       *ir.Value
	interior []*ir.Op
	grad     func(b *Builder, x, dy *ir.Value) *ir.Value
}

// geluUnits finds the erf-form GELUs of g, keyed by the ID of the op
// that computes y. The forms matched are what exporters write for
// y = x·½·(1 + erf(x/√2)) in any association of the two products:
//
//	a = Div(x, √2) or Mul(x, 1/√2); e = Erf(a); c = Add(e, 1);
//	y = Mul(Mul(x, c), ½) | Mul(Mul(c, ½), x) | Mul(Mul(x, ½), c)
//
// (operands of Add and Mul in either order). Every interior value must
// be read only inside the unit and be no graph output, so nothing else
// needs the gradients the unit does not compute.
func geluUnits(g *ir.Graph) map[ir.OpID]*unit {
	out := map[ir.OpID]*unit{}
	isOut := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		isOut[v] = true
	}
	// only returns the single reader of v, or nil.
	only := func(v *ir.Value) *ir.Op {
		if v == nil || isOut[v] || v.NumUses() != 1 {
			return nil
		}
		return v.Uses()[0].Op
	}
	is := func(op *ir.Op, typ string) bool {
		return op != nil && op.Domain == "" && op.Type == typ && len(op.Inputs()) == 2 && len(op.Outputs()) == 1
	}
	// other returns op's input that is not v (nil if both or neither are).
	other := func(op *ir.Op, v *ir.Value) *ir.Value {
		a, b := op.Input(0), op.Input(1)
		switch {
		case a == v && b != v:
			return b
		case b == v && a != v:
			return a
		}
		return nil
	}
	near := func(v *ir.Value, want float64) bool {
		f, ok := nnConstFloat(v)
		return ok && math.Abs(f-want) <= 1e-6*math.Abs(want)
	}
	for _, e := range g.Order() {
		if e.Domain != "" || e.Type != "Erf" || e.Phase != ir.Forward {
			continue
		}
		a := e.Input(0)
		if a == nil || a.Kind != ir.KindOp || only(a) != e {
			continue
		}
		div := a.Def
		x := div.Input(0)
		switch {
		case is(div, "Div") && near(div.Input(1), math.Sqrt2):
		case is(div, "Mul") && near(other(div, x), 1/math.Sqrt2):
		case is(div, "Mul") && near(div.Input(0), 1/math.Sqrt2):
			x = div.Input(1)
		default:
			continue
		}
		if x == nil || !x.DType.IsFloat() {
			continue
		}
		add := only(e.Output(0))
		if !is(add, "Add") || !near(other(add, e.Output(0)), 1) {
			continue
		}
		c := add.Output(0)
		m1 := only(c)
		if !is(m1, "Mul") {
			continue
		}
		p := other(m1, c)
		var last *ir.Op
		interior := []*ir.Op{div, e, add}
		switch {
		case p == x:
			// Mul(Mul(x, c), ½)
			if m2 := only(m1.Output(0)); is(m2, "Mul") && near(other(m2, m1.Output(0)), 0.5) {
				last, interior = m2, append(interior, m1)
			}
		case near(p, 0.5):
			// Mul(Mul(c, ½), x)
			if m2 := only(m1.Output(0)); is(m2, "Mul") && other(m2, m1.Output(0)) == x {
				last, interior = m2, append(interior, m1)
			}
		case p != nil && p.Kind == ir.KindOp && is(p.Def, "Mul") && only(p) == m1 && near(other(p.Def, x), 0.5):
			// Mul(Mul(x, ½), c)
			last, interior = m1, append(interior, p.Def)
		}
		if last == nil || !last.Output(0).Shape.Equal(x.Shape) || last.Output(0).DType != x.DType {
			continue
		}
		out[last.ID] = &unit{in: x, interior: interior, grad: func(b *Builder, x, dy *ir.Value) *ir.Value {
			return b.Mul(dy, geluExactDeriv(b, x))
		}}
	}
	return out
}

// geluExactDeriv is the derivative of the exact GELU at x: Φ(x) + x·φ(x),
// Φ(x) = (1 + erf(x/√2))/2, φ(x) = exp(-x²/2)/√(2π).
func geluExactDeriv(b *Builder, x *ir.Value) *ir.Value {
	c := func(v float64) *ir.Value { return b.Scalar(x.DType, v) }
	cdf := b.Mul(c(0.5), b.Add(c(1), b.Op("Erf", []*ir.Value{b.Mul(x, c(1/math.Sqrt2))})))
	pdf := b.Mul(c(1/math.Sqrt(2*math.Pi)), b.Op("Exp", []*ir.Value{b.Mul(b.Mul(x, x), c(-0.5))}))
	return b.Add(cdf, b.Mul(x, pdf))
}

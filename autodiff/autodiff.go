package autodiff

import (
	"fmt"

	"github.com/tsplit/tsplit/internal/quote"
	"github.com/tsplit/tsplit/ir"
)

// Rule emits the gradients of op's inputs. dy[i] is the gradient of
// output i (nil when no gradient reaches it); need[i] says whether input
// i needs a gradient. It returns one entry per input (nil where none).
type Rule func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value

// rules is the op registry's gradient slot. Ops deliberately without a
// rule are opted out with the reason (rules_none.go).
var rules = ir.NewSlot[Rule]("gradient")

// Register fills the gradient slot of domain:typ. Duplicates panic.
func Register(domain, typ string, r Rule) { rules.Set(domain, typ, r) }

// registerAll registers the rules of default-domain ops from a table
// (op type → rule).
func registerAll(table map[string]Rule) {
	for t, r := range table {
		Register("", t, r)
	}
}

// HasRule reports whether an op type has a gradient rule.
func HasRule(domain, typ string) bool { _, ok := rules.Lookup(domain, typ); return ok }

// Differentiable reports whether a value of type dt can carry a gradient.
func Differentiable(dt ir.DType) bool {
	return dt == ir.Float || dt == ir.Double || dt == ir.Float16 || dt == ir.BFloat16
}

// Grad appends to m the backward graph of loss (a scalar) with respect
// to wrt, seeding d loss = 1. It returns the gradient of each value in
// wrt (nil for a value the loss does not depend on).
func Grad(m *ir.Model, loss *ir.Value, wrt []*ir.Value) ([]*ir.Value, error) {
	g := m.Graph
	if len(loss.Shape) != 0 && !(len(loss.Shape) == 1 && loss.Shape[0] == 1) {
		return nil, fmt.Errorf("autodiff: loss %q has shape %v, want a scalar", loss.Name, loss.Shape)
	}
	if !Differentiable(loss.DType) {
		return nil, fmt.Errorf("autodiff: loss %q has type %v", loss.Name, loss.DType)
	}
	nv := g.NumValueIDs()
	// active: depends on some wrt value (forward sweep).
	active := make([]bool, nv)
	for _, v := range wrt {
		if !Differentiable(v.DType) {
			return nil, fmt.Errorf("autodiff: cannot differentiate with respect to %q of type %v", v.Name, v.DType)
		}
		active[v.ID] = true
	}
	order := append([]*ir.Op(nil), g.Order()...)
	for _, op := range order {
		for _, in := range op.Inputs() {
			if in != nil && active[in.ID] {
				for _, out := range op.Outputs() {
					if out != nil && Differentiable(out.DType) {
						active[out.ID] = true
					}
				}
				break
			}
		}
	}
	if !active[loss.ID] {
		return nil, fmt.Errorf("autodiff: loss %q does not depend on any parameter", loss.Name)
	}
	// useful: active and the loss depends on it through inputs that
	// carry gradients (backward sweep; ir.Schema.NoGrad).
	useful := make([]bool, nv)
	useful[loss.ID] = true
	for i := len(order) - 1; i >= 0; i-- {
		op := order[i]
		reaches := false
		for _, out := range op.Outputs() {
			if out != nil && useful[out.ID] {
				reaches = true
			}
		}
		if !reaches {
			continue
		}
		for j, in := range op.Inputs() {
			if in != nil && active[in.ID] && carries(op, j) {
				useful[in.ID] = true
			}
		}
	}

	first := ir.OpID(g.NumOpIDs()) // the ops from here on are backward's
	units := geluUnits(g)
	inUnit := make([]bool, g.NumOpIDs())
	for _, u := range units {
		for _, op := range u.interior {
			inUnit[op.ID] = true
		}
	}
	b := NewBuilder(m, ir.Backward, "grad/")
	grads := make([]*ir.Value, nv)
	grads[loss.ID] = b.Op("ConstantOfShape", []*ir.Value{b.Ints(loss.Shape...)},
		ir.Attr{Name: "value", Type: ir.AttrTensor, Tensor: ir.TensorFromFloat64s(loss.DType, ir.Shape{1}, []float64{1})})
	if err := b.Err(); err != nil {
		return nil, err
	}
	for i := len(order) - 1; i >= 0; i-- {
		op := order[i]
		if inUnit[op.ID] {
			continue // differentiated with its unit's last op
		}
		if u := units[op.ID]; u != nil {
			if dy := grads[op.Output(0).ID]; dy != nil && useful[u.in.ID] {
				grads[u.in.ID] = b.Add(grads[u.in.ID], u.grad(b, u.in, dy))
			}
			if err := b.Err(); err != nil {
				return nil, fmt.Errorf("autodiff: gradient of %s: %w", op.Describe(), err)
			}
			continue
		}
		dy := make([]*ir.Value, len(op.Outputs()))
		any := false
		for j, out := range op.Outputs() {
			if out != nil && grads[out.ID] != nil {
				dy[j] = grads[out.ID]
				any = true
			}
		}
		if !any {
			continue
		}
		need := make([]bool, len(op.Inputs()))
		needAny := false
		for j, in := range op.Inputs() {
			if in != nil && useful[in.ID] && carries(op, j) {
				need[j] = true
				needAny = true
			}
		}
		if !needAny {
			continue
		}
		r, ok := rules.Of(op)
		if !ok {
			return nil, fmt.Errorf("autodiff: %s: %w for %s", op.Describe(), ErrNoRule, quote.Name(op.QualifiedType()))
		}
		dx := r(b, op, dy, need)
		if err := b.Err(); err != nil {
			return nil, fmt.Errorf("autodiff: gradient of %s: %w", op.Describe(), err)
		}
		for j, in := range op.Inputs() {
			if in == nil || !need[j] || j >= len(dx) || dx[j] == nil {
				continue
			}
			d := dx[j]
			if !d.Shape.Equal(in.Shape) || d.DType != in.DType {
				return nil, fmt.Errorf("autodiff: rule of %s gave input %d a gradient of %v%v, the input is %v%v",
					op.Describe(), j, d.DType, d.Shape, in.DType, in.Shape)
			}
			grads[in.ID] = b.Add(grads[in.ID], d)
		}
		if err := b.Err(); err != nil {
			return nil, err
		}
	}
	readOriginals(g, first)
	out := make([]*ir.Value, len(wrt))
	for i, v := range wrt {
		out[i] = grads[v.ID]
	}
	return out, nil
}

// carries reports whether input j of op may carry a gradient: not one
// its schema lists in NoGrad.
func carries(op *ir.Op, j int) bool {
	s := ir.LookupSchema(op.Domain, op.Type)
	return s == nil || s.HasGrad(j)
}

// SavedForBackward lists the forward values (graph inputs, weights and
// forward and loss op outputs) that backward ops read: the feature maps a
// training step must keep, or evict and restore, between its forward and
// backward phases. Weights are included; callers that count activations
// filter them out.
func SavedForBackward(g *ir.Graph) []*ir.Value {
	var out []*ir.Value
	for _, v := range g.Values() {
		if v.Kind == ir.KindOp && (v.Def.Phase == ir.Backward || v.Def.Phase == ir.Update) {
			continue
		}
		for _, u := range v.Uses() {
			if u.Op.Phase == ir.Backward {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

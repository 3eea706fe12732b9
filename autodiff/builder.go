package autodiff

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tsplit/tsplit/ir"
)

// Builder emits ops at the end of a graph's order. Its methods record the
// first error and return nil afterwards, so a rule reads as a formula
// and checks b.Err() once.
type Builder struct {
	M     *ir.Model
	G     *ir.Graph
	Phase ir.Phase
	// Prefix names the values and ops the builder makes.
	Prefix string

	n      int
	err    error
	consts map[string]*ir.Value
}

// NewBuilder starts emitting into m with the given phase.
func NewBuilder(m *ir.Model, phase ir.Phase, prefix string) *Builder {
	return &Builder{M: m, G: m.Graph, Phase: phase, Prefix: prefix, consts: map[string]*ir.Value{}}
}

// Err is the first error any method hit.
func (b *Builder) Err() error { return b.err }

// Fail records an error (the first one wins).
func (b *Builder) Fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf(format, args...)
	}
}

// MaxConstElements bounds the elements of a constant a gradient rule
// computes at compile time (MaxPool's per-plane offsets, AveragePool's
// window counts and kernel). Their size follows the model's shapes, so
// without a bound a huge batch (--batch 4294967296 gives 2^33 MaxPool
// planes) makes the compiler allocate hundreds of GiB while it builds
// the training step.
const MaxConstElements = 1 << 24

// Materialize reports whether a rule of op may compute a constant of
// dims' product elements (what names it in the error), recording an
// error otherwise.
func (b *Builder) Materialize(what string, dims ...int64) bool {
	n := int64(1)
	for _, d := range dims {
		if d < 0 || (d > 0 && n > MaxConstElements/d) {
			n = MaxConstElements + 1
			break
		}
		n *= d
	}
	if n > MaxConstElements {
		// The rule's caller names the op ("autodiff: gradient of …").
		b.Fail("needs a compile-time constant (%s) of %s elements, more than the %d tsplit materialises (is the batch or the image absurdly large?)", what, dimsText(dims), int64(MaxConstElements))
		return false
	}
	return true
}

func dimsText(dims []int64) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = strconv.FormatInt(d, 10)
	}
	return strings.Join(s, "×")
}

func (b *Builder) fresh(what string) string {
	b.n++
	return b.G.FreshName(fmt.Sprintf("%s%s_%d", b.Prefix, what, b.n))
}

// Op emits a single-output op.
func (b *Builder) Op(typ string, inputs []*ir.Value, attrs ...ir.Attr) *ir.Value {
	out := b.OpN(typ, 1, inputs, attrs...)
	if out == nil {
		return nil
	}
	return out[0]
}

// OpN emits an op with n outputs (all present).
func (b *Builder) OpN(typ string, n int, inputs []*ir.Value, attrs ...ir.Attr) []*ir.Value {
	return b.OpDomain("", typ, n, inputs, attrs...)
}

// OpDomain emits an op of any domain with n outputs.
func (b *Builder) OpDomain(domain, typ string, n int, inputs []*ir.Value, attrs ...ir.Attr) []*ir.Value {
	if b.err != nil {
		return nil
	}
	names := make([]string, n)
	base := b.fresh(typ)
	for i := range names {
		names[i] = fmt.Sprintf("%s:%d", base, i)
		if n == 1 {
			names[i] = base
		}
	}
	op, err := b.G.NewOp(typ, domain, base, inputs, names, attrs)
	if err != nil {
		b.err = err
		return nil
	}
	op.Phase = b.Phase
	if err := ir.InferAndSet(op, b.M.Opset(domain)); err != nil {
		b.err = fmt.Errorf("autodiff: emitting %s: %w", typ, err)
		return nil
	}
	return op.Outputs()
}

// Const adds (or reuses) an initializer holding t.
func (b *Builder) Const(t *ir.Tensor) *ir.Value {
	if b.err != nil {
		return nil
	}
	key := fmt.Sprintf("%v%v%x", t.DType, t.Shape, t.Raw)
	if v, ok := b.consts[key]; ok && len(t.Raw) <= 1024 {
		return v
	}
	v, err := b.G.AddInit(b.fresh("const"), t)
	if err != nil {
		b.err = err
		return nil
	}
	if len(t.Raw) <= 1024 {
		b.consts[key] = v
	}
	return v
}

// Scalar is a rank-0 constant of type dt.
func (b *Builder) Scalar(dt ir.DType, x float64) *ir.Value {
	return b.Const(ir.TensorFromFloat64s(dt, ir.Shape{}, []float64{x}))
}

// Ints is a 1-D int64 constant (shapes, axes, pads).
func (b *Builder) Ints(vals ...int64) *ir.Value {
	return b.Const(ir.TensorFromInt64s(ir.Int64, ir.Shape{int64(len(vals))}, vals))
}

// Zeros is a constant-filled tensor of a static shape, made with
// ConstantOfShape so no data is stored.
func (b *Builder) Zeros(dt ir.DType, shape ir.Shape) *ir.Value {
	return b.Op("ConstantOfShape", []*ir.Value{b.Ints(shape...)},
		ir.Attr{Name: "value", Type: ir.AttrTensor, Tensor: ir.TensorFromFloat64s(dt, ir.Shape{1}, []float64{0})})
}

// Reshape reshapes v to a static shape (no-op when it already has it).
func (b *Builder) Reshape(v *ir.Value, shape ir.Shape) *ir.Value {
	if v == nil || b.err != nil {
		return nil
	}
	if v.Shape.Equal(shape) {
		return v
	}
	return b.Op("Reshape", []*ir.Value{v, b.Ints(shape...)})
}

// SumTo reduces a broadcast gradient g back to shape: the sum over the
// axes that broadcasting added or stretched.
func (b *Builder) SumTo(g *ir.Value, shape ir.Shape) *ir.Value {
	if g == nil || b.err != nil {
		return nil
	}
	if g.Shape.Equal(shape) {
		return g
	}
	off := len(g.Shape) - len(shape)
	if off < 0 {
		b.Fail("autodiff: cannot reduce gradient of shape %v to %v", g.Shape, shape)
		return nil
	}
	var axes []int64
	for i := range g.Shape {
		if i < off || (shape[i-off] == 1 && g.Shape[i] != 1) {
			axes = append(axes, int64(i))
		}
	}
	r := g
	if len(axes) > 0 {
		r = b.Op("ReduceSum", []*ir.Value{g, b.Ints(axes...)}, ir.Attr{Name: "keepdims", Type: ir.AttrInt, Int: 1})
	}
	return b.Reshape(r, shape)
}

// Add sums two gradients, either of which may be nil.
func (b *Builder) Add(x, y *ir.Value) *ir.Value {
	switch {
	case x == nil:
		return y
	case y == nil:
		return x
	}
	return b.Op("Add", []*ir.Value{x, y})
}

// Mul, Sub, Div and Neg are shorthands for the elementwise ops.
func (b *Builder) Mul(x, y *ir.Value) *ir.Value { return b.Op("Mul", []*ir.Value{x, y}) }

// Sub emits x − y.
func (b *Builder) Sub(x, y *ir.Value) *ir.Value { return b.Op("Sub", []*ir.Value{x, y}) }

// Div emits x / y.
func (b *Builder) Div(x, y *ir.Value) *ir.Value { return b.Op("Div", []*ir.Value{x, y}) }

// Neg emits −x.
func (b *Builder) Neg(x *ir.Value) *ir.Value { return b.Op("Neg", []*ir.Value{x}) }

// ErrNoRule reports an op type without a gradient rule.
var ErrNoRule = errors.New("no gradient rule")

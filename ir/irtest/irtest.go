// Package irtest is a small DSL for building IR graphs in tests:
//
//	b := irtest.New(t)
//	x := b.Input("x", ir.Float, 2, 3)
//	y := b.Op("Relu", x)
//	b.Return(y)
//
// Every op is inferred as it is added, and a failure stops the test.
package irtest

import (
	"fmt"
	"testing"

	"github.com/tsplit/tsplit/ir"
)

// B builds one model.
type B struct {
	T testing.TB
	M *ir.Model
	G *ir.Graph
	n int
}

// New starts an empty model at the newest opset.
func New(t testing.TB) *B {
	g := ir.NewGraph("test")
	return &B{T: t, G: g, M: &ir.Model{Graph: g, IRVersion: 8, Opsets: map[string]int64{"": 17}, Meta: map[string]string{}}}
}

// Input adds a graph input.
func (b *B) Input(name string, dt ir.DType, dims ...int64) *ir.Value {
	b.T.Helper()
	v, err := b.G.AddInput(name, dt, ir.Shape(dims))
	if err != nil {
		b.T.Fatal(err)
	}
	return v
}

// Init adds an initializer.
func (b *B) Init(name string, t *ir.Tensor) *ir.Value {
	b.T.Helper()
	v, err := b.G.AddInit(name, t)
	if err != nil {
		b.T.Fatal(err)
	}
	return v
}

// Ints makes an initializer of int64 values with shape [len].
func (b *B) Ints(name string, vals ...int64) *ir.Value {
	return b.Init(name, ir.TensorFromInt64s(ir.Int64, ir.Shape{int64(len(vals))}, vals))
}

// Op adds a single-output op and returns its output.
func (b *B) Op(typ string, inputs []*ir.Value, attrs ...ir.Attr) *ir.Value {
	b.T.Helper()
	return b.OpN(typ, 1, inputs, attrs...)[0]
}

// OpN adds an op with n outputs.
func (b *B) OpN(typ string, n int, inputs []*ir.Value, attrs ...ir.Attr) []*ir.Value {
	b.T.Helper()
	return b.OpDomain("", typ, n, inputs, attrs...)
}

// OpDomain adds an op of another operator-set domain (tsplit's own ops).
func (b *B) OpDomain(domain, typ string, n int, inputs []*ir.Value, attrs ...ir.Attr) []*ir.Value {
	b.T.Helper()
	b.n++
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d_%d", typ, b.n, i)
	}
	op, err := b.G.NewOp(typ, domain, fmt.Sprintf("%s%d", typ, b.n), inputs, names, attrs)
	if err != nil {
		b.T.Fatal(err)
	}
	if err := ir.InferAndSet(op, b.M.Opset("")); err != nil {
		b.T.Fatal(err)
	}
	return op.Outputs()
}

// Return sets the graph outputs and verifies the model.
func (b *B) Return(vs ...*ir.Value) *ir.Model {
	b.T.Helper()
	b.G.Outputs = vs
	if err := ir.Verify(b.M); err != nil {
		b.T.Fatalf("built graph does not verify: %v", err)
	}
	return b.M
}

// V is shorthand for an input list.
func V(vs ...*ir.Value) []*ir.Value { return vs }

// Int makes an int attribute.
func Int(name string, v int64) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrInt, Int: v} }

// Ints makes an ints attribute.
func Ints(name string, v ...int64) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrInts, Ints: v} }

// Float makes a float attribute.
func Float(name string, v float32) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrFloat, Float: v} }

// String makes a string attribute.
func String(name, v string) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrString, String: v} }

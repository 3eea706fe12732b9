package ir

import (
	"fmt"
	"strings"
	"testing"
)

// Test helpers for the shapes_* inference rules: tiny graphs built with
// Graph.AddInput/AddInit/NewOp, inferred with InferAndSet.

type tgraph struct {
	t     testing.TB
	g     *Graph
	n     int
	opset int64
}

func newTG(t testing.TB, opset int64) *tgraph {
	if opset == 0 {
		opset = 17
	}
	return &tgraph{t: t, g: NewGraph("test"), opset: opset}
}

func (b *tgraph) name(p string) string { b.n++; return fmt.Sprintf("%s%d", p, b.n) }

// in declares a graph input.
func (b *tgraph) in(dt DType, dims ...int64) *Value {
	v, err := b.g.AddInput(b.name("x"), dt, Shape(dims))
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// f32 declares a float input.
func (b *tgraph) f32(dims ...int64) *Value { return b.in(Float, dims...) }

// init declares an initializer.
func (b *tgraph) init(t *Tensor) *Value {
	v, err := b.g.AddInit(b.name("w"), t)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// ints is a 1-D int64 initializer.
func (b *tgraph) ints(vals ...int64) *Value {
	return b.init(TensorFromInt64s(Int64, Shape{int64(len(vals))}, vals))
}

// i64 is a scalar int64 initializer.
func (b *tgraph) i64(v int64) *Value { return b.init(TensorFromInt64s(Int64, Shape{}, []int64{v})) }

// fconst is a float initializer of the given shape.
func (b *tgraph) fconst(shape Shape, vals ...float64) *Value {
	return b.init(TensorFromFloat64s(Float, shape, vals))
}

// op adds a node with nout outputs and runs inference on it.
func (b *tgraph) op(typ string, ins []*Value, nout int, attrs ...Attr) (*Op, error) {
	outs := make([]string, nout)
	for i := range outs {
		outs[i] = b.name("y")
	}
	op, err := b.g.NewOp(typ, "", b.name("n"), ins, outs, attrs)
	if err != nil {
		b.t.Fatal(err)
	}
	return op, InferAndSet(op, b.opset)
}

// must is op that fails the test on an inference error and returns the
// first output.
func (b *tgraph) must(typ string, ins []*Value, attrs ...Attr) *Value {
	b.t.Helper()
	op, err := b.op(typ, ins, 1, attrs...)
	if err != nil {
		b.t.Fatal(err)
	}
	return op.Output(0)
}

func attrI(name string, v int64) Attr { return Attr{Name: name, Type: AttrInt, Int: v} }
func attrIs(name string, v ...int64) Attr {
	return Attr{Name: name, Type: AttrInts, Ints: append([]int64{}, v...)}
}
func attrF(name string, v float32) Attr { return Attr{Name: name, Type: AttrFloat, Float: v} }
func attrS(name, v string) Attr         { return Attr{Name: name, Type: AttrString, String: v} }
func attrT(name string, t *Tensor) Attr { return Attr{Name: name, Type: AttrTensor, Tensor: t} }

// opCase is one table row: an op over inputs built by ins, with the
// output shapes (and optionally dtypes) expected, or an error substring.
type opCase struct {
	name   string
	opset  int64
	typ    string
	ins    func(b *tgraph) []*Value
	nout   int
	attrs  []Attr
	want   []Shape
	wantDT []DType
	err    string
}

func runOpCases(t *testing.T, cases []opCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newTG(t, tc.opset)
			nout := tc.nout
			if nout == 0 {
				nout = max(1, len(tc.want))
			}
			op, err := b.op(tc.typ, tc.ins(b), nout, tc.attrs...)
			if tc.err != "" {
				if err == nil {
					t.Fatalf("want error containing %q, got shapes %v", tc.err, outShapes(op))
				}
				if !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %q does not contain %q", err, tc.err)
				}
				if !strings.Contains(err.Error(), op.Name) {
					t.Fatalf("error %q does not name the node %q", err, op.Name)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				got := op.Output(i)
				if got == nil {
					continue
				}
				if !got.Shape.Equal(w) {
					t.Errorf("output %d: shape %v, want %v", i, got.Shape, w)
				}
				if i < len(tc.wantDT) && got.DType != tc.wantDT[i] {
					t.Errorf("output %d: dtype %v, want %v", i, got.DType, tc.wantDT[i])
				}
			}
		})
	}
}

func outShapes(op *Op) []Shape {
	var s []Shape
	for _, v := range op.Outputs() {
		if v != nil {
			s = append(s, v.Shape)
		}
	}
	return s
}

// constInts returns v's folded value as int64s, failing when v is not
// constant.
func foldedInts(t *testing.T, v *Value) []int64 {
	t.Helper()
	if v.Const == nil {
		t.Fatalf("value %q (%v%v) was not folded", v.Name, v.DType, v.Shape)
	}
	return v.Const.Int64s()
}

func foldedFloats(t *testing.T, v *Value) []float64 {
	t.Helper()
	if v.Const == nil {
		t.Fatalf("value %q (%v%v) was not folded", v.Name, v.DType, v.Shape)
	}
	return v.Const.Float64s()
}

func sameInts(a, b []int64) bool { return Shape(a).Equal(Shape(b)) }

func closeFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		d := a[i] - b[i]
		if d > 1e-6 || d < -1e-6 {
			return false
		}
	}
	return true
}

func shp(d ...int64) Shape { return Shape(d) }

// ins builds an input list from declared shapes (all float).
func fIns(shapes ...Shape) func(b *tgraph) []*Value {
	return func(b *tgraph) []*Value {
		out := make([]*Value, len(shapes))
		for i, s := range shapes {
			out[i] = b.f32(s...)
		}
		return out
	}
}

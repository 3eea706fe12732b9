package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

// checkClose compares got with the float64 reference want: each element
// within tol relative to max(|want[i]|, rms(want), 1e-3). Relative to the
// tensor's RMS, not only the element, because float32 accumulation of a
// long sum errs in proportion to the sum's terms, not to its (possibly
// cancelling) value.
func checkClose(t testing.TB, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var ss float64
	for _, w := range want {
		if !math.IsInf(w, 0) && !math.IsNaN(w) {
			ss += w * w
		}
	}
	rms := math.Sqrt(ss / math.Max(1, float64(len(want))))
	floor := math.Max(rms, 1e-3)
	bad := 0
	for i := range got {
		g, w := float64(got[i]), want[i]
		if math.IsNaN(w) && math.IsNaN(g) || math.IsInf(w, 0) && g == w {
			continue
		}
		if d := math.Abs(g - w); !(d <= tol*math.Max(floor, math.Abs(w))) {
			if bad < 5 {
				t.Errorf("%s: element %d is %v, want %v (diff %.3g, rms %.3g)", what, i, g, w, d, rms)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d elements differ", what, bad, len(got))
	}
}

// ---- building and running one op ----

// opIn is a test input: nil Shape with nil Data marks an absent optional
// input.
type opIn struct {
	shape []int64
	data  []float32
	i64   []int64 // int64 input when set
}

func fin(r *rand.Rand, dims ...int64) opIn {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return opIn{shape: dims, data: randF32(r, n)}
}

// mkOp builds a one-op graph at opset 17 (or opset) and infers it.
// outs lists the outputs: "" marks an absent one.
func mkOp(t testing.TB, opset int64, typ string, ins []opIn, outs []string, attrs ...ir.Attr) *ir.Op {
	t.Helper()
	g := ir.NewGraph("t")
	vals := make([]*ir.Value, len(ins))
	for i, in := range ins {
		if in.shape == nil && in.data == nil && in.i64 == nil {
			continue
		}
		dt := ir.Float
		if in.i64 != nil {
			dt = ir.Int64
		}
		v, err := g.AddInput(fmt.Sprintf("in%d", i), dt, ir.Shape(in.shape))
		if err != nil {
			t.Fatal(err)
		}
		vals[i] = v
	}
	op, err := g.NewOp(typ, "", typ, vals, outs, attrs)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.InferAndSet(op, opset); err != nil {
		t.Fatal(err)
	}
	return op
}

// runOp runs op's kernel on ins through Eval.
func runOp(t testing.TB, op *ir.Op, ins []opIn) []*Tensor {
	t.Helper()
	ts := make([]*Tensor, len(ins))
	for i, in := range ins {
		if op.Input(i) == nil {
			continue
		}
		tt, err := NewTensor(op.Input(i).DType, ir.Shape(in.shape))
		if err != nil {
			t.Fatal(err)
		}
		if in.i64 != nil {
			copy(tt.I64(), in.i64)
		} else {
			copy(tt.F32(), in.data)
		}
		ts[i] = tt
	}
	out, err := Eval(op, ts, 0)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ia(name string, v ...int64) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrInts, Ints: v} }
func ii(name string, v int64) ir.Attr    { return ir.Attr{Name: name, Type: ir.AttrInt, Int: v} }
func fa(name string, v float32) ir.Attr  { return ir.Attr{Name: name, Type: ir.AttrFloat, Float: v} }
func sa(name, v string) ir.Attr          { return ir.Attr{Name: name, Type: ir.AttrString, String: v} }

// ---- index helpers for the float64 references ----

// forEach calls fn with every coordinate of shape in row-major order.
func forEach(shape []int, fn func(c []int)) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	c := make([]int, len(shape))
	for i := 0; i < n; i++ {
		fn(c)
		for d := len(shape) - 1; d >= 0; d-- {
			c[d]++
			if c[d] < shape[d] {
				break
			}
			c[d] = 0
		}
	}
}

// flat is the row-major index of coordinate c in shape.
func flat(shape, c []int) int {
	i := 0
	for d := range shape {
		i = i*shape[d] + c[d]
	}
	return i
}

func ints(s []int64) []int {
	o := make([]int, len(s))
	for i, v := range s {
		o[i] = int(v)
	}
	return o
}

func f64s(s []float32) []float64 {
	o := make([]float64, len(s))
	for i, v := range s {
		o[i] = float64(v)
	}
	return o
}

// ---- ONNX Runtime ----

// ortIO is a tensor of a one-node ONNX test model.
type ortIO struct {
	name  string
	shape []int64
	data  []float32
	i64   bool // output: int64 (Indices)
}

// ortCheck builds a one-node model at the given opset with the inputs as
// graph inputs, runs it through ONNX Runtime, imports it with
// compiler.Import, runs the kernel through Eval and compares every
// output (float32 within tol, int64 exactly). An input with an empty name
// is absent; so is an output.
func ortCheck(t *testing.T, opset int64, node *onnxpb.NodeProto, ins []ortIO, outs []ortIO, tol float64) {
	t.Helper()
	var inVI, outVI []*onnxpb.ValueInfoProto
	feeds := map[string]*oracle.Tensor{}
	for _, in := range ins {
		if in.name == "" {
			node.Input = append(node.Input, "")
			continue
		}
		node.Input = append(node.Input, in.name)
		dims := make([]onnxtest.Dim, len(in.shape))
		for i, d := range in.shape {
			dims[i] = d
		}
		inVI = append(inVI, onnxtest.Input(in.name, onnxtest.Float, dims...))
		feeds[in.name] = oracle.FromFloat32(in.shape, in.data)
	}
	for _, o := range outs {
		node.Output = append(node.Output, o.name)
		if o.name == "" {
			continue
		}
		dt := onnxtest.Float
		if o.i64 {
			dt = onnxtest.Int64
		}
		outVI = append(outVI, &onnxpb.ValueInfoProto{Name: proto.String(o.name), Type: &onnxpb.TypeProto{
			Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(dt)}}}})
	}
	for len(node.Output) > 0 && node.Output[len(node.Output)-1] == "" {
		node.Output = node.Output[:len(node.Output)-1]
	}
	m := onnxtest.Graph([]*onnxpb.NodeProto{node}, inVI, outVI)
	m.OpsetImport[0].Version = proto.Int64(opset)
	path := onnxtest.Write(t, t.TempDir(), "m.onnx", m)
	want := oracle.ORTRun(t, path, feeds, true)

	model, err := compiler.Import(path, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	order := model.Graph.Order()
	if len(order) != 1 {
		t.Fatalf("imported %d ops, want 1", len(order))
	}
	op := order[0]
	var kin []opIn
	for _, in := range ins {
		kin = append(kin, opIn{shape: in.shape, data: in.data})
	}
	got := runOp(t, op, kin)
	for i, o := range outs {
		if o.name == "" {
			continue
		}
		w, ok := want[o.name]
		if !ok {
			t.Fatalf("ONNX Runtime gave no output %q", o.name)
		}
		g := got[i]
		if !ir.Shape(w.Dims).Equal(g.Shape) {
			t.Fatalf("%s output %s: shape %v, ONNX Runtime %v", node.GetOpType(), o.name, g.Shape, w.Dims)
		}
		if o.i64 {
			wi, gi := w.Int64s(), g.I64()
			for j := range wi {
				if wi[j] != gi[j] {
					t.Fatalf("%s output %s: element %d is %d, ONNX Runtime %d (got %v, want %v)", node.GetOpType(), o.name, j, gi[j], wi[j], gi, wi)
				}
			}
			continue
		}
		checkClose(t, node.GetOpType()+" vs ONNX Runtime, output "+o.name, g.F32(), f64s(w.Float32s()), tol)
	}
}

func ortIn(r *rand.Rand, name string, dims ...int64) ortIO {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return ortIO{name: name, shape: dims, data: randF32(r, n)}
}

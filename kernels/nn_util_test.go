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

// nnClose compares got with the float64 reference want: each element
// within tol relative to max(|want[i]|, rms(want), 1e-3). Relative to the
// tensor's RMS, not only the element, because float32 accumulation of a
// long sum errs in proportion to the sum's terms, not to its (possibly
// cancelling) value.
func nnClose[T elemFloat](t testing.TB, what string, got []T, want []float64, tol float64) {
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

// nnIn is a test input: nil Shape with nil Data marks an absent optional
// input.
type nnIn struct {
	shape []int64
	data  []float32
	i64   []int64 // int64 input when set
}

func nnF(r *rand.Rand, dims ...int64) nnIn {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return nnIn{shape: dims, data: nnRand(r, n)}
}

// nnOp builds a one-op graph at opset 17 (or opset) and infers it.
// outs lists the outputs: "" marks an absent one.
func nnOp(t testing.TB, opset int64, typ string, ins []nnIn, outs []string, attrs ...ir.Attr) *ir.Op {
	t.Helper()
	return nnOpDT(t, opset, ir.Float, typ, ins, outs, attrs...)
}

// nnOpDT is nnOp with float inputs of type dt (ir.Float or ir.Double);
// nnRun converts the float32 test data to it.
func nnOpDT(t testing.TB, opset int64, dt ir.DType, typ string, ins []nnIn, outs []string, attrs ...ir.Attr) *ir.Op {
	t.Helper()
	g := ir.NewGraph("t")
	vals := make([]*ir.Value, len(ins))
	for i, in := range ins {
		if in.shape == nil && in.data == nil && in.i64 == nil {
			continue
		}
		idt := dt
		if in.i64 != nil {
			idt = ir.Int64
		}
		v, err := g.AddInput(fmt.Sprintf("in%d", i), idt, ir.Shape(in.shape))
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

// nnRun64 builds typ with float64 inputs (ins' float32 data widened) and
// runs it: the float64 instantiation of the kernel, checked against the
// same float64 references as the float32 one, to a tolerance near
// float64 rounding.
func nnRun64(t testing.TB, opset int64, typ string, ins []nnIn, outs []string, attrs ...ir.Attr) []*Tensor {
	t.Helper()
	op := nnOpDT(t, opset, ir.Double, typ, ins, outs, attrs...)
	for i, v := range op.Outputs() {
		if v != nil && v.DType == ir.Float && i == 0 {
			t.Fatalf("%s: float64 op has a float32 output", typ)
		}
	}
	return nnRunOpset(t, op, opset, ins)
}

// tol64 is the float64 kernels' tolerance against the references.
const tol64 = 1e-12

// nnRun runs op's kernel on ins through Eval.
func nnRun(t testing.TB, op *ir.Op, ins []nnIn) []*Tensor {
	t.Helper()
	return nnRunOpset(t, op, 0, ins)
}

// nnRunOpset runs op's kernel on ins through EvalOpset (opset 0: Eval).
func nnRunOpset(t testing.TB, op *ir.Op, opset int64, ins []nnIn) []*Tensor {
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
		switch {
		case in.i64 != nil:
			copy(tt.I64(), in.i64)
		case tt.DType == ir.Double:
			copy(tt.F64(), nnF64(in.data))
		default:
			copy(tt.F32(), in.data)
		}
		ts[i] = tt
	}
	var out []*Tensor
	var err error
	if opset == 0 {
		out, err = Eval(op, ts, 0)
	} else {
		out, err = EvalOpset(op, opset, ts, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func nnAInts(name string, v ...int64) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrInts, Ints: v} }
func nnAInt(name string, v int64) ir.Attr     { return ir.Attr{Name: name, Type: ir.AttrInt, Int: v} }
func nnAFloat(name string, v float32) ir.Attr {
	return ir.Attr{Name: name, Type: ir.AttrFloat, Float: v}
}
func nnAStr(name, v string) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrString, String: v} }

// ---- index helpers for the float64 references ----

// nnEach calls fn with every coordinate of shape in row-major order.
func nnEach(shape []int, fn func(c []int)) {
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

// nnFlat is the row-major index of coordinate c in shape.
func nnFlat(shape, c []int) int {
	i := 0
	for d := range shape {
		i = i*shape[d] + c[d]
	}
	return i
}

func nnToInt(s []int64) []int {
	o := make([]int, len(s))
	for i, v := range s {
		o[i] = int(v)
	}
	return o
}

func nnF64(s []float32) []float64 {
	o := make([]float64, len(s))
	for i, v := range s {
		o[i] = float64(v)
	}
	return o
}

// ---- ONNX Runtime ----

// nnIO is a tensor of an ONNX Runtime test model.
type nnIO struct {
	name  string
	shape []int64
	data  []float32
	i64   bool // output: int64 (Indices)
}

// nnORTCase is one node of an ONNX Runtime check: its inputs (an empty
// name marks an absent one) and outputs (likewise), compared within tol
// (int64 outputs exactly).
type nnORTCase struct {
	node *onnxpb.NodeProto
	ins  []nnIO
	outs []nnIO
	tol  float64
}

// nnORT checks one node against ONNX Runtime; see nnORTBatch.
func nnORT(t *testing.T, opset int64, node *onnxpb.NodeProto, ins []nnIO, outs []nnIO, tol float64) {
	t.Helper()
	nnORTBatch(t, opset, []nnORTCase{{node, ins, outs, tol}})
}

// nnORTBatch puts every case's node into one model at the given opset,
// all inputs graph inputs (names made unique per case), runs it once
// through ONNX Runtime, imports it with compiler.Import, runs each op's
// kernel through EvalOpset at the model's opset and compares every output with ONNX Runtime's.
func nnORTBatch(t *testing.T, opset int64, cases []nnORTCase) {
	t.Helper()
	var nodes []*onnxpb.NodeProto
	var inVI, outVI []*onnxpb.ValueInfoProto
	feeds := map[string]*oracle.Tensor{}
	uniq := func(ci int, name string) string {
		if name == "" {
			return ""
		}
		return fmt.Sprintf("c%d_%s", ci, name)
	}
	for ci, tc := range cases {
		node := tc.node
		node.Name = proto.String(fmt.Sprintf("n%d", ci))
		node.Input, node.Output = nil, nil
		for _, in := range tc.ins {
			name := uniq(ci, in.name)
			node.Input = append(node.Input, name)
			if name == "" {
				continue
			}
			dims := make([]onnxtest.Dim, len(in.shape))
			for i, d := range in.shape {
				dims[i] = d
			}
			inVI = append(inVI, onnxtest.Input(name, onnxtest.Float, dims...))
			feeds[name] = oracle.FromFloat32(in.shape, in.data)
		}
		for _, o := range tc.outs {
			name := uniq(ci, o.name)
			node.Output = append(node.Output, name)
			if name == "" {
				continue
			}
			dt := onnxtest.Float
			if o.i64 {
				dt = onnxtest.Int64
			}
			outVI = append(outVI, &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{
				Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(dt)}}}})
		}
		for len(node.Output) > 0 && node.Output[len(node.Output)-1] == "" {
			node.Output = node.Output[:len(node.Output)-1]
		}
		nodes = append(nodes, node)
	}
	m := onnxtest.Graph(nodes, inVI, outVI)
	m.OpsetImport[0].Version = proto.Int64(opset)
	path := onnxtest.Write(t, t.TempDir(), "m.onnx", m)
	want := oracle.ORTRun(t, path, feeds, true)

	model, err := compiler.Import(path, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]*ir.Op{}
	for _, op := range model.Graph.Order() {
		ops[op.Name] = op
	}
	for ci, tc := range cases {
		op := ops[fmt.Sprintf("n%d", ci)]
		if op == nil {
			t.Fatalf("case %d: op n%d not imported", ci, ci)
		}
		var kin []nnIn
		for _, in := range tc.ins {
			kin = append(kin, nnIn{shape: in.shape, data: in.data})
		}
		got := nnRunOpset(t, op, model.Opset(""), kin)
		desc := fmt.Sprintf("%s (case %d) vs ONNX Runtime", tc.node.GetOpType(), ci)
		for i, o := range tc.outs {
			if o.name == "" {
				continue
			}
			w, ok := want[uniq(ci, o.name)]
			if !ok {
				t.Fatalf("%s: ONNX Runtime gave no output %q", desc, o.name)
			}
			g := got[i]
			if !ir.Shape(w.Dims).Equal(g.Shape) {
				t.Fatalf("%s, output %s: shape %v, ONNX Runtime %v", desc, o.name, g.Shape, w.Dims)
			}
			if o.i64 {
				wi, gi := w.Int64s(), g.I64()
				for j := range wi {
					if wi[j] != gi[j] {
						t.Fatalf("%s, output %s: element %d is %d, ONNX Runtime %d (got %v, want %v)", desc, o.name, j, gi[j], wi[j], gi, wi)
					}
				}
				continue
			}
			nnClose(t, desc+", output "+o.name, g.F32(), nnF64(w.Float32s()), tc.tol)
		}
	}
}

func nnORTIn(r *rand.Rand, name string, dims ...int64) nnIO {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return nnIO{name: name, shape: dims, data: nnRand(r, n)}
}

// nnPAStr makes a string attribute of an ONNX node.
func nnPAStr(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}

// nnPAFloat makes a float attribute of an ONNX node.
func nnPAFloat(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

package kernels

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

// Every ew_/shape_/reduce_/misc_ kernel against ONNX Runtime. The nodes
// are packed, each with its own inputs and outputs, into a few models
// (one per opset), so that one ORT process checks dozens of ops. Each
// model goes through compiler.Import and Eval, op by op, and every
// output must match ORT's: exactly for integers, bools and moved data,
// within 1e-6 relative for computed floats. It skips where ORT is
// absent (see internal/oracle).

// ktNode is one node of an oracle model.
type ktNode struct {
	op    string
	ins   []ktIn // runtime → graph input, konst → initializer, zero → absent
	nOut  int    // 0 means 1
	attrs []*onnxpb.AttributeProto
	exact bool // compare floats bit for bit (data movement)
	// skip lists outputs not compared, each for a reason given where set.
	skip []int
}

func ktPInt(name string, v int64) *onnxpb.AttributeProto { return onnxtest.Int(name, v) }
func ktPInts(name string, v ...int64) *onnxpb.AttributeProto {
	return onnxtest.Ints(name, v...)
}
func ktPFloat(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}
func ktPStr(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}
func ktPTensor(name string, t *Tensor) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: ktProto("", t)}
}

// ktProto is t as an ONNX tensor with raw data.
func ktProto(name string, t *Tensor) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), Dims: append([]int64{}, t.Shape...), DataType: proto.Int32(int32(t.DType)),
		RawData: append([]byte{}, t.Data...)}
}

var ktORTTypes = map[ir.DType]string{
	ir.Float: "float32", ir.Double: "float64", ir.Float16: "float16", ir.Int8: "int8", ir.Uint8: "uint8",
	ir.Int16: "int16", ir.Uint16: "uint16", ir.Int32: "int32", ir.Uint32: "uint32", ir.Int64: "int64",
	ir.Uint64: "uint64", ir.Bool: "bool",
}

// ktORTModel builds, runs through ORT and through the kernels, and
// compares, the model of nodes at opset.
func ktORTModel(t *testing.T, opset int64, nodes []ktNode) {
	t.Helper()
	var pnodes []*onnxpb.NodeProto
	var inputs, outputs []*onnxpb.ValueInfoProto
	var inits []*onnxpb.TensorProto
	feeds := map[string]*oracle.Tensor{}
	exact := map[string]bool{}
	skipped := map[string]bool{}
	for k, n := range nodes {
		nOut := max(n.nOut, 1)
		// Our own inference gives the output types to declare.
		attrs := make([]ir.Attr, len(n.attrs))
		for i, a := range n.attrs {
			attrs[i] = ktAttrFromProto(t, a)
		}
		op := ktBuild(t, opset, n.op, n.ins, nOut, attrs...)
		pn := &onnxpb.NodeProto{OpType: proto.String(n.op), Name: proto.String(fmt.Sprintf("n%d_%s", k, n.op)), Attribute: n.attrs}
		for j, in := range n.ins {
			if in.t == nil {
				pn.Input = append(pn.Input, "")
				continue
			}
			name := fmt.Sprintf("n%d_in%d", k, j)
			pn.Input = append(pn.Input, name)
			if in.konst {
				inits = append(inits, ktProto(name, in.t))
				continue
			}
			dims := make([]onnxtest.Dim, len(in.t.Shape))
			for i, d := range in.t.Shape {
				dims[i] = d
			}
			inputs = append(inputs, onnxtest.Input(name, int32(in.t.DType), dims...))
			typ, ok := ktORTTypes[in.t.DType]
			if !ok {
				t.Fatalf("node %d (%s): input type %v cannot be fed to ORT", k, n.op, in.t.DType)
			}
			feeds[name] = &oracle.Tensor{Type: typ, Dims: append([]int64{}, in.t.Shape...), Data: in.t.Data}
		}
		for j := 0; j < nOut; j++ {
			name := fmt.Sprintf("n%d_%s_out%d", k, n.op, j)
			pn.Output = append(pn.Output, name)
			outputs = append(outputs, &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{
				Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(op.Output(j).DType))}}}})
			exact[name] = n.exact || !op.Output(j).DType.IsFloat()
			if slices.Contains(n.skip, j) {
				skipped[name] = true
			}
		}
		pnodes = append(pnodes, pn)
	}
	m := onnxtest.Graph(pnodes, inputs, outputs, inits...)
	m.OpsetImport[0].Version = proto.Int64(opset)
	path := onnxtest.Write(t, t.TempDir(), fmt.Sprintf("ops%d.onnx", opset), m)
	want := oracle.ORTRun(t, path, feeds, true)

	model, err := compiler.Import(path, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := model.Graph
	vals := map[*ir.Value]*Tensor{}
	for _, v := range g.Inputs {
		if f, ok := feeds[v.Name]; ok {
			vals[v] = &Tensor{DType: v.DType, Shape: v.Shape, Data: f.Data}
		}
	}
	for _, v := range g.Inits {
		d, err := v.Data()
		if err != nil || d == nil {
			t.Fatalf("initializer %s: %v", v.Name, err)
		}
		vals[v] = FromIR(d)
	}
	for _, op := range g.Order() {
		ins := make([]*Tensor, len(op.Inputs()))
		for i, v := range op.Inputs() {
			if v != nil {
				ins[i] = vals[v]
			}
		}
		out, err := Eval(op, ins, 0)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		for i, v := range op.Outputs() {
			if v != nil {
				vals[v] = out[i]
			}
		}
	}
	compared := 0
	defer func() {
		t.Logf("opset %d: %d nodes, %d outputs compared with ONNX Runtime", opset, len(nodes), compared)
	}()
	for _, v := range g.Outputs {
		got, ok := vals[v]
		if !ok || skipped[v.Name] {
			continue // its op failed, reported above; or not compared
		}
		w := want[v.Name]
		if w == nil {
			t.Errorf("%s: ORT gave no output", v.Name)
			continue
		}
		if w.Type != ktORTTypes[got.DType] || !ir.Shape(w.Dims).Equal(got.Shape) {
			t.Errorf("%s: got %v%v, ORT %s%v", v.Name, got.DType, got.Shape, w.Type, w.Dims)
			continue
		}
		compared++
		wt := &Tensor{DType: got.DType, Shape: got.Shape, Data: w.Data}
		if exact[v.Name] {
			if string(got.Data) != string(w.Data) {
				t.Errorf("%s: got %v, ORT %v", v.Name, ktHead(ktVals(got)), ktHead(ktVals(wt)))
			}
			continue
		}
		gv, wv := ktVals(got), ktVals(wt)
		for i := range gv {
			// 1e-6 relative; near zero, 1e-7 absolute: onnxruntime
			// evaluates formulas such as Selu's alpha*exp(x)-alpha and
			// HardSigmoid's alpha*x+beta in float32, where they cancel,
			// while the kernels compute in float64 and round once.
			if !ktNear(gv[i], wv[i], 1e-6) && math.Abs(gv[i]-wv[i]) > 1e-7 {
				t.Errorf("%s: element %d is %v, ORT %v (got %v, ORT %v)", v.Name, i, gv[i], wv[i], ktHead(gv), ktHead(wv))
				break
			}
		}
	}
}

// ktAttrFromProto converts a test attribute for our own inference.
func ktAttrFromProto(t *testing.T, a *onnxpb.AttributeProto) ir.Attr {
	r := ir.Attr{Name: a.GetName(), Type: ir.AttrType(a.GetType())}
	switch r.Type {
	case ir.AttrInt:
		r.Int = a.GetI()
	case ir.AttrInts:
		r.Ints = a.GetInts()
	case ir.AttrFloat:
		r.Float = a.GetF()
	case ir.AttrString:
		r.String = string(a.GetS())
	case ir.AttrTensor:
		tp := a.GetT()
		r.Tensor = &ir.Tensor{DType: ir.DType(tp.GetDataType()), Shape: ir.Shape(tp.GetDims()), Raw: tp.GetRawData()}
	default:
		t.Fatalf("attribute %s: type %v not handled", r.Name, r.Type)
	}
	return r
}

// ktDomain draws n values in [lo, hi).
func ktDomain(n int, seed uint64, lo, hi float32) []float32 {
	v := ktRand(n, seed)
	for i := range v {
		v[i] = lo + (v[i]+2)/4*(hi-lo)
	}
	return v
}

func TestAgainstORT(t *testing.T) {
	if testing.Short() {
		t.Skip("ONNX Runtime comparisons are not short")
	}
	x := func(seed uint64, shape ...int64) ktIn { return ktR(ktF32(shape, ktRand(ktNumel(shape), seed)...)) }
	dom := func(seed uint64, lo, hi float32, shape ...int64) ktIn {
		return ktR(ktF32(shape, ktDomain(ktNumel(shape), seed, lo, hi)...))
	}
	ints := func(v ...int64) ktIn { return ktC(ktI64(ktS(int64(len(v))), v...)) }
	sh := ktS(2, 3, 4)

	var nodes []ktNode
	// Unary ops, on a domain where each is defined.
	for i, op := range []string{"Relu", "Sigmoid", "Tanh", "Erf", "Neg", "Abs", "Exp", "Floor", "Ceil", "Sign", "Round",
		"Sin", "Cos", "Atan", "Sinh", "Cosh", "Asinh", "Softplus", "Softsign", "HardSwish", "Mish",
		"LeakyRelu", "HardSigmoid", "Elu", "Celu", "ThresholdedRelu", "Selu", "Gelu"} {
		nodes = append(nodes, ktNode{op: op, ins: []ktIn{x(uint64(i), sh...)}})
	}
	for i, op := range []string{"Sqrt", "Log", "Reciprocal"} {
		nodes = append(nodes, ktNode{op: op, ins: []ktIn{dom(uint64(40+i), 0.01, 5, sh...)}})
	}
	for i, op := range []string{"Asin", "Acos", "Atanh", "Tan"} {
		nodes = append(nodes, ktNode{op: op, ins: []ktIn{dom(uint64(50+i), -0.99, 0.99, sh...)}})
	}
	nodes = append(nodes,
		ktNode{op: "Acosh", ins: []ktIn{dom(60, 1, 9, sh...)}},
		ktNode{op: "Gelu", ins: []ktIn{x(61, sh...)}, attrs: []*onnxpb.AttributeProto{ktPStr("approximate", "tanh")}},
		ktNode{op: "LeakyRelu", ins: []ktIn{x(62, sh...)}, attrs: []*onnxpb.AttributeProto{ktPFloat("alpha", 0.2)}},
		ktNode{op: "HardSigmoid", ins: []ktIn{x(63, sh...)}, attrs: []*onnxpb.AttributeProto{ktPFloat("alpha", 0.3), ktPFloat("beta", 0.4)}},
		ktNode{op: "Elu", ins: []ktIn{x(64, sh...)}, attrs: []*onnxpb.AttributeProto{ktPFloat("alpha", 0.7)}},
		ktNode{op: "Neg", ins: []ktIn{ktR(ktI64(ktS(3), -4, 0, 9))}},
		ktNode{op: "Abs", ins: []ktIn{ktR(ktI32(ktS(3), -4, 0, 9))}},
		ktNode{op: "Sigmoid", ins: []ktIn{ktR(ktF64(ktS(3), -1, 0, 2.5))}},
		ktNode{op: "Not", ins: []ktIn{ktR(ktBool(ktS(3), true, false, true))}},
		ktNode{op: "IsNaN", ins: []ktIn{ktR(ktF32(ktS(3), 1, float32(math.NaN()), float32(math.Inf(1))))}},
		ktNode{op: "IsInf", ins: []ktIn{ktR(ktF32(ktS(3), 1, float32(math.Inf(-1)), float32(math.Inf(1))))}, attrs: []*onnxpb.AttributeProto{ktPInt("detect_positive", 0)}},
		ktNode{op: "PRelu", ins: []ktIn{x(65, sh...), x(66, 4)}},
		ktNode{op: "Clip", ins: []ktIn{x(67, sh...), ktR(ktF32(nil, -0.5)), ktR(ktF32(nil, 0.75))}},
		ktNode{op: "Clip", ins: []ktIn{x(68, sh...), {}, ktR(ktF32(nil, 0.25))}},
		ktNode{op: "Clip", ins: []ktIn{ktR(ktI64(ktS(4), -9, 0, 5, 99)), ktR(ktI64(nil, -1)), ktR(ktI64(nil, 6))}},
	)
	// Broadcasting binary and variadic ops.
	for i, op := range []string{"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean",
		"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"} {
		nodes = append(nodes, ktNode{op: op, ins: []ktIn{x(uint64(70+i), 2, 3, 4), x(uint64(90+i), 3, 1)}})
	}
	a64 := ktR(ktI64(ktS(2, 3), -7, 7, -7, 7, 100, -100))
	b64 := ktR(ktI64(ktS(3), 2, -2, 3))
	nodes = append(nodes,
		ktNode{op: "Pow", ins: []ktIn{dom(110, 0.1, 3, sh...), x(111, 4)}},
		ktNode{op: "Pow", ins: []ktIn{x(112, sh...), ktR(ktI64(nil, 3))}},
		ktNode{op: "Pow", ins: []ktIn{ktR(ktI64(ktS(3), 2, -3, 5)), ktR(ktI64(ktS(3), 3, 3, 0))}},
		ktNode{op: "Add", ins: []ktIn{a64, b64}},
		ktNode{op: "Div", ins: []ktIn{a64, b64}},
		ktNode{op: "Mod", ins: []ktIn{a64, b64}},
		ktNode{op: "Mod", ins: []ktIn{a64, b64}, attrs: []*onnxpb.AttributeProto{ktPInt("fmod", 1)}},
		ktNode{op: "Mod", ins: []ktIn{x(113, sh...), ktR(ktF32(ktS(1), 0.7))}, attrs: []*onnxpb.AttributeProto{ktPInt("fmod", 1)}},
		ktNode{op: "Less", ins: []ktIn{a64, b64}},
		ktNode{op: "Equal", ins: []ktIn{a64, b64}},
		ktNode{op: "Max", ins: []ktIn{a64, b64, ktR(ktI64(ktS(2, 1), 0, 50))}},
		ktNode{op: "Sum", ins: []ktIn{x(114, 2, 1), x(115, 3), x(116, 2, 3)}},
		ktNode{op: "Mean", ins: []ktIn{x(117, 2, 3), x(118, 3), x(119, 1)}},
		ktNode{op: "Min", ins: []ktIn{x(120, 5)}},
		ktNode{op: "Equal", ins: []ktIn{ktR(ktBool(ktS(2, 2), true, false, true, false)), ktR(ktBool(ktS(2), true, true))}},
		ktNode{op: "And", ins: []ktIn{ktR(ktBool(ktS(2, 2), true, false, true, false)), ktR(ktBool(ktS(2), true, false))}},
		ktNode{op: "Or", ins: []ktIn{ktR(ktBool(ktS(2, 2), true, false, true, false)), ktR(ktBool(ktS(2, 1), false, true))}},
		ktNode{op: "Xor", ins: []ktIn{ktR(ktBool(ktS(2, 2), true, false, true, false)), ktR(ktBool(ktS(2), true, false))}},
		ktNode{op: "Where", ins: []ktIn{ktR(ktBool(ktS(3, 1), true, false, true)), x(121, 1, 4), x(122, 3, 4)}},
		ktNode{op: "Where", ins: []ktIn{ktR(ktBool(ktS(2), false, true)), ktR(ktI64(ktS(2), 1, 2)), ktR(ktI64(nil, 9))}},
	)
	// Casts.
	cf := ktR(ktF32(ktS(6), -2.75, -0.5, 0, 0.4, 3.9, 200.5))
	for _, to := range []ir.DType{ir.Int64, ir.Int32, ir.Int8, ir.Uint8, ir.Bool, ir.Double, ir.Float16, ir.Int16} {
		nodes = append(nodes, ktNode{op: "Cast", ins: []ktIn{cf}, attrs: []*onnxpb.AttributeProto{ktPInt("to", int64(to))}})
	}
	nodes = append(nodes,
		ktNode{op: "Cast", ins: []ktIn{ktR(ktI64(ktS(3), -5, 1<<40, 7))}, attrs: []*onnxpb.AttributeProto{ktPInt("to", int64(ir.Float))}},
		ktNode{op: "Cast", ins: []ktIn{ktR(ktI64(ktS(3), -5, 1<<40+3, 7))}, attrs: []*onnxpb.AttributeProto{ktPInt("to", int64(ir.Int32))}},
		ktNode{op: "Cast", ins: []ktIn{ktR(ktBool(ktS(2), true, false))}, attrs: []*onnxpb.AttributeProto{ktPInt("to", int64(ir.Float))}},
		ktNode{op: "Cast", ins: []ktIn{ktR(ktT(ir.Float16, ktS(3), []uint16{0x3c00, 0xc500, 0x0001}))}, attrs: []*onnxpb.AttributeProto{ktPInt("to", int64(ir.Float))}},
		ktNode{op: "Cast", ins: []ktIn{ktR(ktF64(ktS(2), 0.1, -1e40))}, attrs: []*onnxpb.AttributeProto{ktPInt("to", int64(ir.Float))}},
		ktNode{op: "CastLike", ins: []ktIn{cf, ktR(ktI32(ktS(1), 0))}},
	)
	// Reductions.
	pos := dom(130, 0.1, 2, 2, 3, 4)
	for _, op := range ktReduceOps {
		nodes = append(nodes,
			ktNode{op: op, ins: []ktIn{pos, ints(0, 2)}},
			ktNode{op: op, ins: []ktIn{pos, ints(-1)}, attrs: []*onnxpb.AttributeProto{ktPInt("keepdims", 0)}},
			ktNode{op: op, ins: []ktIn{pos}, attrs: []*onnxpb.AttributeProto{ktPInt("keepdims", 0)}},
		)
	}
	nodes = append(nodes,
		ktNode{op: "ReduceSum", ins: []ktIn{pos, ktC(ktI64(ktS(0)))}, attrs: []*onnxpb.AttributeProto{ktPInt("noop_with_empty_axes", 1)}},
		ktNode{op: "ReduceSum", ins: []ktIn{a64, ints(1)}},
		ktNode{op: "ReduceMax", ins: []ktIn{a64, ints(0)}, attrs: []*onnxpb.AttributeProto{ktPInt("keepdims", 0)}},
		ktNode{op: "ReduceProd", ins: []ktIn{a64}},
		ktNode{op: "ArgMax", ins: []ktIn{ktR(ktF32(ktS(2, 3), 5, 1, 5, -1, 7, 7))}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 1)}},
		ktNode{op: "ArgMax", ins: []ktIn{ktR(ktF32(ktS(2, 3), 5, 1, 5, -1, 7, 7))}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 1), ktPInt("select_last_index", 1), ktPInt("keepdims", 0)}},
		ktNode{op: "ArgMin", ins: []ktIn{x(131, sh...)}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", -2)}},
		ktNode{op: "ArgMin", ins: []ktIn{a64}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 0), ktPInt("keepdims", 0)}},
		ktNode{op: "Hardmax", ins: []ktIn{x(132, sh...)}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 1)}},
		ktNode{op: "Hardmax", ins: []ktIn{x(133, sh...)}},
		ktNode{op: "InstanceNormalization", ins: []ktIn{x(134, 2, 3, 5), x(135, 3), x(136, 3)}},
	)
	// Data movement: compared bit for bit.
	mv := func(n ktNode) ktNode { n.exact = true; return n }
	big := int64(math.MaxInt64)
	nodes = append(nodes,
		mv(ktNode{op: "Reshape", ins: []ktIn{x(140, sh...), ints(4, -1, 1)}}),
		mv(ktNode{op: "Flatten", ins: []ktIn{x(141, sh...)}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 2)}}),
		mv(ktNode{op: "Squeeze", ins: []ktIn{x(142, 2, 1, 4, 1), ints(-1)}}),
		mv(ktNode{op: "Unsqueeze", ins: []ktIn{x(143, sh...), ints(0, 4)}}),
		mv(ktNode{op: "Identity", ins: []ktIn{a64}}),
		mv(ktNode{op: "Transpose", ins: []ktIn{x(144, sh...)}}),
		mv(ktNode{op: "Transpose", ins: []ktIn{x(145, 2, 3, 4, 5)}, attrs: []*onnxpb.AttributeProto{ktPInts("perm", 0, 2, 3, 1)}}),
		mv(ktNode{op: "Transpose", ins: []ktIn{x(146, 40, 33)}, attrs: []*onnxpb.AttributeProto{ktPInts("perm", 1, 0)}}),
		mv(ktNode{op: "Concat", ins: []ktIn{x(147, 2, 3), x(148, 2, 1), x(149, 2, 2)}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", -1)}}),
		mv(ktNode{op: "Concat", ins: []ktIn{a64, a64}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 0)}}),
		mv(ktNode{op: "Split", ins: []ktIn{x(150, 2, 7), ints(2, 5)}, nOut: 2, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 1)}}),
		mv(ktNode{op: "Split", ins: []ktIn{x(151, 7, 2)}, nOut: 3, attrs: []*onnxpb.AttributeProto{ktPInt("num_outputs", 3)}}),
		mv(ktNode{op: "Slice", ins: []ktIn{x(152, 4, 5, 6), ints(-1, 1), ints(-big, 5), ints(0, 2), ints(-2, 2)}}),
		mv(ktNode{op: "Slice", ins: []ktIn{x(153, 4, 5, 6), ints(10, -3), ints(-10, 0), ints(1, -1), ints(-1, -1)}}),
		mv(ktNode{op: "Slice", ins: []ktIn{a64, ints(1), ints(big)}}),
		mv(ktNode{op: "Pad", ins: []ktIn{x(154, sh...), ints(0, 1, 2, 1, 0, 3), ktR(ktF32(nil, 1.5))}}),
		mv(ktNode{op: "Pad", ins: []ktIn{x(155, sh...), ints(1, 0, -1, 0, 2, 2)}}),
		mv(ktNode{op: "Pad", ins: []ktIn{x(156, sh...), ints(0, 2, 3, 1, 2, 3)}, attrs: []*onnxpb.AttributeProto{ktPStr("mode", "reflect")}}),
		mv(ktNode{op: "Pad", ins: []ktIn{x(157, sh...), ints(1, 2, 0, 3, 0, 5)}, attrs: []*onnxpb.AttributeProto{ktPStr("mode", "edge")}}),
		mv(ktNode{op: "Pad", ins: []ktIn{x(158, sh...), ints(1, 2, 3, 1, 2, 3)}, attrs: []*onnxpb.AttributeProto{ktPStr("mode", "wrap")}}),
		mv(ktNode{op: "Pad", ins: []ktIn{x(159, sh...), ints(2, 1), ktR(ktF32(nil, -1)), ints(-2)}}),
		mv(ktNode{op: "Expand", ins: []ktIn{x(160, 3, 1), ints(2, 3, 4)}}),
		mv(ktNode{op: "Tile", ins: []ktIn{x(161, 2, 3), ints(3, 2)}}),
		mv(ktNode{op: "Gather", ins: []ktIn{x(162, 5, 3), ktR(ktI64(ktS(2, 2), 4, 0, -1, 2))}}),
		mv(ktNode{op: "Gather", ins: []ktIn{x(163, sh...), ktR(ktI32(ktS(3), 2, -1, 0))}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 2)}}),
		mv(ktNode{op: "GatherElements", ins: []ktIn{x(164, 3, 4), ktR(ktI64(ktS(2, 4), 0, 2, -1, 1, 2, 2, 0, 1))}}),
		mv(ktNode{op: "GatherElements", ins: []ktIn{x(165, 3, 4), ktR(ktI64(ktS(3, 2), 3, 0, 1, 1, -4, 2))}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 1)}}),
		mv(ktNode{op: "ScatterElements", ins: []ktIn{x(166, 3, 3), ktR(ktI64(ktS(2, 3), 1, 0, 2, 0, 2, 1)), x(167, 2, 3)}}),
		mv(ktNode{op: "ScatterND", ins: []ktIn{x(168, 4, 2, 2), ktR(ktI64(ktS(2, 1), 3, -4)), x(169, 2, 2, 2)}}),
		mv(ktNode{op: "OneHot", ins: []ktIn{ktR(ktI64(ktS(2, 2), 0, 3, -1, 9)), ktC(ktI64(nil, 5)), ktR(ktF32(ktS(2), -1, 2))}}),
		mv(ktNode{op: "OneHot", ins: []ktIn{ktR(ktI64(ktS(3), 1, 0, 2)), ktC(ktI64(nil, 3)), ktR(ktI64(ktS(2), 0, 7))}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 0)}}),
		ktNode{op: "ScatterElements", ins: []ktIn{x(170, 1, 5), ktR(ktI64(ktS(1, 3), 1, 1, 3)), x(171, 1, 3)}, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 1), ktPStr("reduction", "add")}},
		ktNode{op: "ScatterND", ins: []ktIn{x(172, 2, 2), ktR(ktI64(ktS(3, 2), 0, 1, 1, 0, 0, 1)), x(173, 3)}, attrs: []*onnxpb.AttributeProto{ktPStr("reduction", "add")}},
		ktNode{op: "Shape", ins: []ktIn{x(174, sh...)}},
		ktNode{op: "Shape", ins: []ktIn{x(175, sh...)}, attrs: []*onnxpb.AttributeProto{ktPInt("start", -2)}},
		ktNode{op: "Size", ins: []ktIn{x(176, sh...)}},
		mv(ktNode{op: "Constant", attrs: []*onnxpb.AttributeProto{ktPTensor("value", ktF32(ktS(2, 2), 1, -2, 3.5, 4))}}),
		mv(ktNode{op: "ConstantOfShape", ins: []ktIn{ints(2, 3)}, attrs: []*onnxpb.AttributeProto{ktPTensor("value", ktI64(ktS(1), 7))}}),
		mv(ktNode{op: "Range", ins: []ktIn{ktC(ktF32(nil, 0.1)), ktC(ktF32(nil, 3)), ktC(ktF32(nil, 0.3))}}),
		mv(ktNode{op: "Range", ins: []ktIn{ktC(ktI64(nil, 10)), ktC(ktI64(nil, -3)), ktC(ktI64(nil, -4))}}),
		mv(ktNode{op: "Dropout", ins: []ktIn{x(177, sh...), ktR(ktF32(nil, 0.5)), ktR(ktBool(nil, false))}, nOut: 2}),
		mv(ktNode{op: "Dropout", ins: []ktIn{x(178, sh...), ktR(ktF32(nil, 0)), ktR(ktBool(nil, true))}, nOut: 2}),
	)
	ktORTModel(t, 21, nodes)

	// Opset 11: the attribute forms of axes and split sizes.
	ktORTModel(t, 11, []ktNode{
		{op: "ReduceSum", ins: []ktIn{x(180, sh...)}, attrs: []*onnxpb.AttributeProto{ktPInts("axes", 0, -1)}},
		{op: "ReduceMean", ins: []ktIn{x(181, sh...)}, attrs: []*onnxpb.AttributeProto{ktPInts("axes", 1), ktPInt("keepdims", 0)}},
		{op: "ReduceL2", ins: []ktIn{x(182, sh...)}},
		mv(ktNode{op: "Squeeze", ins: []ktIn{x(183, 2, 1, 4, 1)}, attrs: []*onnxpb.AttributeProto{ktPInts("axes", 1)}}),
		mv(ktNode{op: "Squeeze", ins: []ktIn{x(184, 2, 1, 4, 1)}}),
		mv(ktNode{op: "Unsqueeze", ins: []ktIn{x(185, sh...)}, attrs: []*onnxpb.AttributeProto{ktPInts("axes", -1, 0)}}),
		mv(ktNode{op: "Split", ins: []ktIn{x(186, 2, 6)}, nOut: 3, attrs: []*onnxpb.AttributeProto{ktPInt("axis", 1), ktPInts("split", 1, 2, 3)}}),
		mv(ktNode{op: "Split", ins: []ktIn{x(187, 4, 2)}, nOut: 2}),
		// Dropout before opset 12 is inference-only: the output is a copy.
		// onnxruntime (IdentityOp<true>) fills its mask with false, but
		// the ONNX reference gives all true as at opset >= 12 (which ORT
		// follows there, see above), and a kernel cannot tell the opsets
		// apart: the mask is not compared.
		mv(ktNode{op: "Dropout", ins: []ktIn{x(188, sh...)}, nOut: 2, attrs: []*onnxpb.AttributeProto{ktPFloat("ratio", 0.3)}, skip: []int{1}}),
		{op: "Clip", ins: []ktIn{x(189, sh...), ktR(ktF32(nil, -1)), ktR(ktF32(nil, 1))}},
		{op: "Hardmax", ins: []ktIn{x(190, 3, 5)}},
	})
}

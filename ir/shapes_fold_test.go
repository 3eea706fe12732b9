package ir

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestShapeChainFolds builds the shape subgraph PyTorch writes for
// multi-head attention (x.view(b, s, heads, d // heads)) and checks that
// it folds to a constant so the Reshape gets a static shape, at the
// opset-13+ form (axes as inputs) and the opset-11 form (attributes).
func TestShapeChainFolds(t *testing.T) {
	for _, opset := range []int64{11, 13, 17, 21} {
		b := newTG(t, opset)
		x := b.f32(8, 128, 768)
		unsq := func(v *Value) *Value {
			if opset < 13 {
				return b.must("Unsqueeze", []*Value{v}, attrIs("axes", 0))
			}
			return b.must("Unsqueeze", []*Value{v, b.ints(0)})
		}
		sh := b.must("Shape", []*Value{x})
		batch := b.must("Gather", []*Value{sh, b.i64(0)}, attrI("axis", 0))
		seq := b.must("Gather", []*Value{sh, b.i64(1)}, attrI("axis", 0))
		hidden := b.must("Gather", []*Value{sh, b.i64(-1)}, attrI("axis", 0))
		headDim := b.must("Div", []*Value{hidden, b.i64(12)})
		cat := b.must("Concat", []*Value{unsq(batch), unsq(seq), b.ints(12), unsq(headDim)}, attrI("axis", 0))
		if got := foldedInts(t, cat); !sameInts(got, []int64{8, 128, 12, 64}) {
			t.Fatalf("opset %d: Concat folded to %v", opset, got)
		}
		r := b.must("Reshape", []*Value{x, cat})
		if !r.Shape.Equal(shp(8, 128, 12, 64)) || r.DType != Float {
			t.Fatalf("opset %d: Reshape gave %v%v", opset, r.DType, r.Shape)
		}
		tr := b.must("Transpose", []*Value{r}, attrIs("perm", 0, 2, 1, 3))
		if !tr.Shape.Equal(shp(8, 12, 128, 64)) {
			t.Fatalf("opset %d: Transpose gave %v", opset, tr.Shape)
		}

		// Position ids: Range(0, seq) expanded to (batch, seq).
		seqI := b.must("Cast", []*Value{seq}, attrI("to", int64(Int64)))
		pos := b.must("Range", []*Value{b.i64(0), seqI, b.i64(1)})
		bs := b.must("Concat", []*Value{unsq(batch), unsq(seq)}, attrI("axis", 0))
		ids := b.must("Expand", []*Value{unsq(pos), bs})
		if !ids.Shape.Equal(shp(8, 128)) {
			t.Fatalf("opset %d: Expand gave %v", opset, ids.Shape)
		}

		// Mask construction: ConstantOfShape(Shape[-1:]) and Where.
		last := b.must("Slice", []*Value{sh, b.ints(-1), b.ints(1 << 62)})
		ones := b.must("ConstantOfShape", []*Value{last}, attrT("value", TensorFromInt64s(Int64, Shape{1}, []int64{1})))
		if !ones.Shape.Equal(shp(768)) || ones.DType != Int64 || ones.Const == nil {
			t.Fatalf("opset %d: ConstantOfShape gave %v%v (folded: %v)", opset, ones.DType, ones.Shape, ones.Const != nil)
		}
		eq := b.must("Equal", []*Value{bs, b.ints(-1)})
		fixed := b.must("Where", []*Value{eq, b.ints(1, 1), bs})
		if got := foldedInts(t, fixed); !sameInts(got, []int64{8, 128}) {
			t.Fatalf("opset %d: Where folded to %v", opset, got)
		}

		m := &Model{Graph: b.g, Opsets: map[string]int64{"": opset}}
		if err := Verify(m); err != nil {
			t.Fatalf("opset %d: Verify: %v", opset, err)
		}
	}
}

// TestReshapeNeedsConstantShape: a data-dependent target shape is an
// error that names the node and the input.
func TestReshapeNeedsConstantShape(t *testing.T) {
	b := newTG(t, 17)
	x := b.f32(4, 6)
	n := b.in(Int64, 2)
	sh := b.must("Add", []*Value{n, b.ints(1, 1)})
	op, err := b.g.NewOp("Reshape", "", "attn/reshape", []*Value{x, sh}, []string{"out"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = InferAndSet(op, 17)
	if err == nil {
		t.Fatal("Reshape with a run-time shape was accepted")
	}
	for _, want := range []string{`"attn/reshape"`, "input 1", "not a compile-time constant"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// TestSchemasComplete checks every op the importer needs is in the table
// with an inference rule, and that attribute lists use ONNX types.
func TestSchemasComplete(t *testing.T) {
	ops := []string{
		"Conv", "ConvTranspose", "BatchNormalization", "Clip", "Softmax", "LogSoftmax", "MaxPool", "AveragePool",
		"GlobalAveragePool", "GlobalMaxPool", "Gemm", "MatMul", "Concat", "Split", "Slice", "Pad", "Reshape", "Flatten",
		"Transpose", "Squeeze", "Unsqueeze", "Expand", "Gather", "GatherElements", "Shape", "Size", "Constant",
		"ConstantOfShape", "Cast", "CastLike", "Where", "Range", "LayerNormalization", "ReduceMean", "ReduceSum",
		"ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare", "ArgMax", "ArgMin", "Dropout", "Not",
		"And", "Or", "Max", "Min", "Sum", "Mean", "Mod", "Tile", "ScatterElements", "ScatterND", "OneHot", "Softplus",
		"HardSigmoid", "HardSwish", "Neg", "Identity", "Relu", "Add", "Equal",
	}
	for _, op := range ops {
		s := LookupSchema("", op)
		if s == nil {
			t.Errorf("%s is not registered", op)
			continue
		}
		if LookupSchema("ai.onnx", op) != s {
			t.Errorf("%s is not found under ai.onnx", op)
		}
		for name, at := range s.Attrs {
			if _, ok := attrTypeNames[at]; !ok {
				t.Errorf("%s attribute %s has bad type %v", op, name, at)
			}
		}
	}
}

// TestInferNeverPanics feeds degenerate inputs (scalars, empty tensors,
// rank-1 tensors) to every registered op: inference may fail but must
// not panic.
func TestInferNeverPanics(t *testing.T) {
	shapes := []Shape{{}, {0}, {1}, {3}, {2, 0}, {1, 1, 1}, {2, 3, 4, 5}}
	dts := []DType{Float, Int64, Bool, Float16}
	for _, s := range Schemas() {
		if s.Domain != "" {
			continue // other families' rules (tsplit's own ops) have their own tests
		}
		for _, dt := range dts {
			for _, sh := range shapes {
				for nin := s.MinIn; nin <= s.MinIn+2 && (s.MaxIn < 0 || nin <= s.MaxIn); nin++ {
					func() {
						defer func() {
							if r := recover(); r != nil {
								t.Errorf("%s with %d inputs of %v%v panicked: %v", s.Type, nin, dt, sh, r)
							}
						}()
						b := newTG(t, 17)
						ins := make([]*Value, nin)
						for i := range ins {
							if i == 0 {
								ins[i] = b.in(dt, sh...)
							} else {
								// constants of the same shape, as shape-like inputs
								n := numElems(sh)
								ins[i] = b.init(TensorFromInt64s(Int64, sh, make([]int64, n)))
							}
						}
						b.op(s.Type, ins, max(1, s.MinOut), nil...)
					}()
				}
			}
		}
	}
}

// TestInferFuzz runs every rule on random shapes, constant inputs and
// attributes of the declared types (including hostile values): errors
// are fine, panics are not.
func TestInferFuzz(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []int64{-1 << 62, -5, -2, -1, 0, 1, 2, 3, 4, 7, 1 << 40, math.MaxInt64, math.MinInt64}
	pick := func() int64 { return vals[rng.IntN(len(vals))] }
	dts := []DType{Float, Int64, Int32, Bool, Float16, Uint8, Double}
	randShape := func() Shape {
		s := make(Shape, rng.IntN(5))
		for i := range s {
			s[i] = int64(rng.IntN(5))
		}
		return s
	}
	var schemas []*Schema
	for _, s := range Schemas() {
		if s.Domain == "" {
			schemas = append(schemas, s)
		}
	}
	const iters = 50000
	ok := 0
	for iter := 0; iter < iters; iter++ {
		s := schemas[rng.IntN(len(schemas))]
		nin := s.MinIn + rng.IntN(3)
		if s.MaxIn >= 0 {
			nin = min(nin, s.MaxIn)
		}
		var attrs []Attr
		for name, at := range s.Attrs {
			if rng.IntN(2) == 0 {
				continue
			}
			a := Attr{Name: name, Type: at}
			switch at {
			case AttrInt:
				a.Int = pick()
			case AttrInts:
				for k := rng.IntN(6); k > 0; k-- {
					a.Ints = append(a.Ints, pick())
				}
			case AttrFloat:
				a.Float = float32(pick())
			case AttrFloats:
				a.Floats = []float32{1, 2}
			case AttrString:
				a.String = []string{"NOTSET", "SAME_UPPER", "VALID", "constant", "bogus", ""}[rng.IntN(6)]
			case AttrStrings:
				a.Strings = []string{"a"}
			case AttrTensor:
				if rng.IntN(4) > 0 {
					sh := randShape()
					a.Tensor = TensorFromInt64s(dts[rng.IntN(len(dts))], sh, make([]int64, numElems(sh)))
				}
			}
			attrs = append(attrs, a)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s with attrs %+v panicked: %v", s.Type, attrs, r)
				}
			}()
			b := newTG(t, int64(11+rng.IntN(11)))
			ins := make([]*Value, nin)
			for i := range ins {
				sh := randShape()
				dt := dts[rng.IntN(len(dts))]
				switch {
				case i > 0 && rng.IntN(3) > 0:
					n := numElems(sh)
					iv := make([]int64, n)
					for k := range iv {
						iv[k] = pick()
					}
					if dt == Float16 {
						dt = Int64
					}
					ins[i] = b.init(TensorFromInt64s(dt, sh, iv))
				case i >= s.MinIn && rng.IntN(4) == 0:
					ins[i] = nil
				default:
					ins[i] = b.in(dt, sh...)
				}
			}
			nout := s.MinOut + rng.IntN(3)
			if s.MaxOut >= 0 {
				nout = min(nout, s.MaxOut)
			}
			if _, err := b.op(s.Type, ins, max(nout, 1), attrs...); err == nil {
				ok++
			}
		}()
	}
	t.Logf("%d of %d random nodes inferred without error", ok, iters)
}

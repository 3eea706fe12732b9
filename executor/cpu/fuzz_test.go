package cpu_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
)

// FuzzRun builds a small random graph of supported ops from the fuzzer's
// bytes (shapes with zeros, out-of-range indices, NaN and infinite
// data, any attribute an op accepts) and runs it on the CPU device.
// The run may fail with an error; it must not panic, and no kernel may
// panic (the executor turns a kernel's panic into an *OpError marked
// Panic, which this target reports as a finding). Issue 12: "a runtime
// fuzz target over the executor with random inputs".
func FuzzRun(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("relu softmax gather reduce concat"))
	f.Add([]byte{3, 2, 3, 4, 5, 1, 0, 7, 9, 11, 13, 2, 4, 8, 16, 32, 64, 128, 255, 0xff, 0x7f, 0x80, 0, 0, 0xc0, 0x7f})
	f.Add([]byte{1, 0, 2, 2, 14, 14, 14, 14, 14, 14, 14, 14, 0, 0, 0, 0})
	f.Add([]byte{4, 1, 2, 3, 4, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, inputs := fuzzGraph(data)
		if m == nil {
			return
		}
		probe, err := executor.New(m, mustDevice(t, 0), executor.Options{})
		if err != nil {
			return // an op the device refuses (its element type)
		}
		dev := mustDevice(t, probe.Mem.Need())
		x, err := executor.New(m, dev, executor.Options{})
		if err != nil {
			t.Fatalf("the device of the model's need refuses it: %v", err)
		}
		for range 2 { // a second run reuses the weights left on the device
			if _, err := x.Run(inputs); executor.IsPanic(err) {
				t.Fatalf("a kernel panicked: %v\n%s\n%s", err, panicStack(err), dumpOf(m))
			}
		}
	})
}

func mustDevice(t *testing.T, pool int64) *cpu.Device {
	d, err := cpu.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func panicStack(err error) string {
	var sb []byte
	for e := err; e != nil; {
		if oe, ok := e.(*executor.OpError); ok {
			sb = oe.Stack
			break
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return string(sb)
}

func dumpOf(m *ir.Model) string {
	var b stringWriter
	ir.Dump(&b, m.Graph)
	return string(b)
}

type stringWriter []byte

func (w *stringWriter) Write(p []byte) (int, error) { *w = append(*w, p...); return len(p), nil }

// fuzzBytes hands out the fuzzer's bytes; past the end it gives zeros.
type fuzzBytes struct {
	b []byte
	i int
}

func (s *fuzzBytes) next() byte {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return s.b[s.i-1]
}

func (s *fuzzBytes) intn(n int) int { return int(s.next()) % n }

// dim is a dimension in 0..4, 0 one time in eight.
func (s *fuzzBytes) dim() int64 {
	if v := s.intn(8); v != 0 {
		return int64(v%4 + 1)
	}
	return 0
}

func (s *fuzzBytes) shape(rank int) ir.Shape {
	sh := make(ir.Shape, rank)
	for i := range sh {
		sh[i] = s.dim()
	}
	return sh
}

// fuzzOps are the ops FuzzRun draws: each picks its inputs among the
// values made so far (floats in vals) and its attributes from the
// bytes. Inference refuses what does not fit, and the op is dropped.
var fuzzOps = []func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr){
	unop("Relu"), unop("Sigmoid"), unop("Tanh"), unop("Exp"), unop("Log"), unop("Sqrt"), unop("Neg"),
	unop("Abs"), unop("Erf"), unop("Reciprocal"), unop("Identity"), unop("Floor"),
	binop("Add"), binop("Sub"), binop("Mul"), binop("Div"), binop("Pow"), binop("Max"), binop("Min"), binop("MatMul"),
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		return "Softmax", g.vals1(), []ir.Attr{g.intAttr("axis", -2, 2)}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		return "LogSoftmax", g.vals1(), []ir.Attr{g.intAttr("axis", -2, 2)}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		op := []string{"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceLogSumExp"}[g.s.intn(7)]
		axes := g.ints("axes", int64(g.s.intn(3))-1)
		if op != "ReduceSum" {
			// Reduce* other than ReduceSum take axes as an attribute
			// before opset 18; the graph is at opset 17.
			return op, g.vals1(), []ir.Attr{{Name: "axes", Type: ir.AttrInts, Ints: []int64{int64(g.s.intn(3)) - 1}}, g.intAttr("keepdims", 0, 1)}
		}
		return op, []*ir.Value{g.pick(), axes}, []ir.Attr{g.intAttr("keepdims", 0, 1)}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		return []string{"ArgMax", "ArgMin"}[g.s.intn(2)], g.vals1(), []ir.Attr{g.intAttr("axis", -1, 1), g.intAttr("keepdims", 0, 1)}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		x := g.pick()
		perm := make([]int64, len(x.Shape))
		for i := range perm {
			perm[i] = int64(i)
		}
		for i := len(perm) - 1; i > 0; i-- {
			j := g.s.intn(i + 1)
			perm[i], perm[j] = perm[j], perm[i]
		}
		return "Transpose", []*ir.Value{x}, []ir.Attr{{Name: "perm", Type: ir.AttrInts, Ints: perm}}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		shape := [][]int64{{-1}, {0, -1}, {-1, 2}, {2, -1}, {1, -1, 1}, {-1, 0}}[g.s.intn(6)]
		return "Reshape", []*ir.Value{g.pick(), g.ints("shape", shape...)}, []ir.Attr{g.intAttr("allowzero", 0, 1)}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		return "Flatten", g.vals1(), []ir.Attr{g.intAttr("axis", 0, 2)}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		return "Concat", []*ir.Value{g.pick(), g.pick()}, []ir.Attr{g.intAttr("axis", -1, 1)}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		starts := g.ints("starts", int64(g.s.intn(7))-3)
		ends := g.ints("ends", int64(g.s.intn(9))-4)
		axes := g.ints("axes", int64(g.s.intn(3))-1)
		steps := g.ints("steps", []int64{1, 2, -1, -2}[g.s.intn(4)])
		return "Slice", []*ir.Value{g.pick(), starts, ends, axes, steps}, nil
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		return "Unsqueeze", []*ir.Value{g.pick(), g.ints("axes", int64(g.s.intn(3))-1)}, nil
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		return "Gather", []*ir.Value{g.pick(), g.idx}, []ir.Attr{g.intAttr("axis", -1, 1)}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		x := g.pick()
		ind := g.indices(x.Shape)
		return "GatherElements", []*ir.Value{x, ind}, []ir.Attr{g.intAttr("axis", -1, 1)}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		x := g.pick()
		ind := g.indices(x.Shape)
		upd := g.init(x.DType, ind.Shape)
		return "ScatterElements", []*ir.Value{x, ind, upd}, []ir.Attr{g.intAttr("axis", -1, 1)}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		return "Expand", []*ir.Value{g.pick(), g.ints("shape", g.s.dim(), 1)}, nil
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		x := g.pick()
		reps := make([]int64, len(x.Shape))
		for i := range reps {
			reps[i] = int64(g.s.intn(3))
		}
		return "Tile", []*ir.Value{x, g.ints("repeats", reps...)}, nil
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		x := g.pick()
		pads := make([]int64, 2*len(x.Shape))
		for i := range pads {
			pads[i] = int64(g.s.intn(4)) - 1
		}
		mode := []string{"constant", "reflect", "edge"}[g.s.intn(3)]
		return "Pad", []*ir.Value{x, g.ints("pads", pads...)}, []ir.Attr{{Name: "mode", Type: ir.AttrString, String: mode}}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		x := g.pick()
		c := g.cond(x.Shape)
		if c == nil {
			return "", nil, nil
		}
		return "Where", []*ir.Value{c, x, g.pick()}, nil
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		return "Clip", []*ir.Value{g.pick(), g.scalar(-1), g.scalar(1)}, nil
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		x := g.pick()
		axis := int64(g.s.intn(3)) - 1
		var sc ir.Shape
		if len(x.Shape) > 0 {
			a := axis
			if a < 0 {
				a += int64(len(x.Shape))
			}
			if a >= 0 && a < int64(len(x.Shape)) {
				sc = x.Shape[a:]
			}
		}
		return "LayerNormalization", []*ir.Value{x, g.init(ir.Float, sc), g.init(ir.Float, sc)}, []ir.Attr{{Name: "axis", Type: ir.AttrInt, Int: axis}}
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		x := g.pick()
		if len(x.Shape) != 4 {
			return "", nil, nil
		}
		k := int64(g.s.intn(3) + 1)
		attrs := []ir.Attr{{Name: "kernel_shape", Type: ir.AttrInts, Ints: []int64{k, k}},
			{Name: "strides", Type: ir.AttrInts, Ints: []int64{int64(g.s.intn(2) + 1), 1}},
			{Name: "pads", Type: ir.AttrInts, Ints: []int64{int64(g.s.intn(2)), 0, int64(g.s.intn(2)), 0}}}
		switch g.s.intn(3) {
		case 0:
			return "MaxPool", []*ir.Value{x}, attrs
		case 1:
			return "AveragePool", []*ir.Value{x}, attrs
		}
		w := g.init(ir.Float, ir.Shape{g.s.dim() + 1, x.Shape[1], k, k})
		return "Conv", []*ir.Value{x, w}, attrs
	},
	func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		x := g.pick()
		if len(x.Shape) < 2 {
			return "", nil, nil
		}
		c := ir.Shape{x.Shape[1]}
		return "BatchNormalization", []*ir.Value{x, g.init(ir.Float, c), g.init(ir.Float, c), g.init(ir.Float, c), g.init(ir.Float, c)},
			[]ir.Attr{{Name: "epsilon", Type: ir.AttrFloat, Float: 1e-5}}
	},
}

// fuzzGraphB builds FuzzRun's graph.
type fuzzGraphB struct {
	s    *fuzzBytes
	g    *ir.Graph
	vals []*ir.Value // float values to pick operands from
	idx  *ir.Value   // an int64 graph input: indices given at run time
	n    int
}

func unop(op string) func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
	return func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) { return op, g.vals1(), nil }
}

func binop(op string) func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
	return func(g *fuzzGraphB) (string, []*ir.Value, []ir.Attr) {
		a := g.pick()
		var b *ir.Value
		switch g.s.intn(3) {
		case 0:
			b = g.pick()
		case 1:
			b = g.init(ir.Float, a.Shape) // same shape
		default:
			b = g.init(ir.Float, g.s.shape(g.s.intn(3))) // may broadcast, or not
		}
		return op, []*ir.Value{a, b}, nil
	}
}

// pick is an operand: the newest value more often than older ones.
func (g *fuzzGraphB) pick() *ir.Value {
	if g.s.intn(2) == 0 {
		return g.vals[len(g.vals)-1]
	}
	return g.vals[g.s.intn(len(g.vals))]
}

func (g *fuzzGraphB) vals1() []*ir.Value { return []*ir.Value{g.pick()} }

func (g *fuzzGraphB) intAttr(name string, lo, hi int) ir.Attr {
	return ir.Attr{Name: name, Type: ir.AttrInt, Int: int64(lo + g.s.intn(hi-lo+1))}
}

func (g *fuzzGraphB) name(what string) string {
	g.n++
	return fmt.Sprintf("%s%d", what, g.n)
}

func (g *fuzzGraphB) ints(what string, vals ...int64) *ir.Value {
	v, _ := g.g.AddInit(g.name(what), ir.TensorFromInt64s(ir.Int64, ir.Shape{int64(len(vals))}, vals))
	return v
}

func (g *fuzzGraphB) scalar(x float64) *ir.Value {
	v, _ := g.g.AddInit(g.name("s"), ir.TensorFromFloat64s(ir.Float, ir.Shape{}, []float64{x}))
	return v
}

// init is a constant of the shape with data from the bytes.
func (g *fuzzGraphB) init(dt ir.DType, shape ir.Shape) *ir.Value {
	n, _ := shape.NumElements()
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = float64(int8(g.s.next())) / 16
	}
	v, _ := g.g.AddInit(g.name("c"), ir.TensorFromFloat64s(dt, shape.Clone(), vals))
	return v
}

// indices is an int64 constant of the shape (or a smaller one), with
// values in -5..5 whatever the dimension they index: often out of range.
func (g *fuzzGraphB) indices(shape ir.Shape) *ir.Value {
	sh := shape.Clone()
	for i := range sh {
		if sh[i] > 0 {
			sh[i] = int64(g.s.intn(int(sh[i]))) + 1
		}
	}
	n, _ := sh.NumElements()
	vals := make([]int64, n)
	for i := range vals {
		vals[i] = int64(g.s.intn(11)) - 5
	}
	v, _ := g.g.AddInit(g.name("ind"), ir.TensorFromInt64s(ir.Int64, sh, vals))
	return v
}

// cond is a bool value of the shape: Greater of a constant and 0 (nil
// when it cannot be built).
func (g *fuzzGraphB) cond(shape ir.Shape) *ir.Value {
	op, err := g.g.NewOp("Greater", "", g.name("gt"), []*ir.Value{g.init(ir.Float, shape), g.scalar(0)}, []string{g.name("cond")}, nil)
	if err != nil {
		return nil
	}
	if ir.InferAndSet(op, 17) != nil {
		g.g.RemoveOp(op)
		return nil
	}
	return op.Output(0)
}

// fuzzGraph turns bytes into a model and its input data (nil when the
// bytes give no op at all).
func fuzzGraph(data []byte) (*ir.Model, map[string][]byte) {
	s := &fuzzBytes{b: data}
	g := ir.NewGraph("fuzz")
	m := &ir.Model{Graph: g, IRVersion: 8, Opsets: map[string]int64{"": 17}, Meta: map[string]string{}}
	b := &fuzzGraphB{s: s, g: g}
	for k := range 1 + s.intn(2) {
		x, _ := g.AddInput(fmt.Sprintf("x%d", k), ir.Float, s.shape(1+s.intn(4)))
		b.vals = append(b.vals, x)
	}
	b.idx, _ = g.AddInput("idx", ir.Int64, ir.Shape{s.dim()})
	nops := 1 + s.intn(8)
	var last []*ir.Value
	for range nops {
		typ, ins, attrs := fuzzOps[s.intn(len(fuzzOps))](b)
		if typ == "" {
			continue
		}
		op, err := g.NewOp(typ, "", b.name("op"), ins, []string{b.name(typ)}, attrs)
		if err != nil {
			continue
		}
		if err := ir.InferAndSet(op, 17); err != nil {
			g.RemoveOp(op)
			continue
		}
		y := op.Output(0)
		if y.DType == ir.Float {
			b.vals = append(b.vals, y)
		}
		last = append(last, y)
	}
	if len(last) == 0 {
		return nil, nil
	}
	g.Outputs = last[max(0, len(last)-2):]
	// Input data from the rest of the bytes: raw float32 bit patterns
	// (NaN, infinities, subnormals, huge values), indices in -6..6.
	inputs := map[string][]byte{}
	for _, v := range g.Inputs {
		n, _ := v.Shape.NumElements()
		buf := make([]byte, v.Bytes())
		for i := int64(0); i < n; i++ {
			if v.DType == ir.Int64 {
				binary.LittleEndian.PutUint64(buf[8*i:], uint64(int64(s.intn(13))-6))
				continue
			}
			bits := uint32(s.next()) | uint32(s.next())<<8 | uint32(s.next())<<16 | uint32(s.next())<<24
			binary.LittleEndian.PutUint32(buf[4*i:], bits)
		}
		inputs[v.Name] = buf
	}
	return m, inputs
}

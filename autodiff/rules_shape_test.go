package autodiff

import (
	"math"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/kernels"
)

// oneOp is a gradient case of a single op on fresh float64 inputs of the
// given shapes (all differentiated); extra builds the op's other inputs.
func oneOp(name, typ string, shapes []ir.Shape, extra func(b *irtest.B) []*ir.Value, attrs ...ir.Attr) gradCase {
	return gradCase{name: name, build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		var xs []*ir.Value
		for i, s := range shapes {
			xs = append(xs, b.Input(string(rune('a'+i)), ir.Double, s...))
		}
		ins := append([]*ir.Value(nil), xs...)
		if extra != nil {
			ins = append(ins, extra(b)...)
		}
		return xs, irtest.V(b.Op(typ, ins, attrs...))
	}}
}

func shapes(ss ...ir.Shape) []ir.Shape { return ss }

func i32Tensor(shape ir.Shape, vals []int32) *kernels.Tensor {
	t, _ := kernels.NewTensor(ir.Int32, shape)
	copy(t.I32(), vals)
	return t
}

// atOpset sets the model's default-domain opset before the case builds.
func atOpset(v int64, build func(b *irtest.B) ([]*ir.Value, []*ir.Value)) func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
	return func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		b.M.Opsets[""] = v
		return build(b)
	}
}

func TestConcatSplitGradients(t *testing.T) {
	runGradChecks(t, []gradCase{
		oneOp("Concat/all3", "Concat", shapes(ir.Shape{2, 3, 4}, ir.Shape{2, 1, 4}, ir.Shape{2, 2, 4}), nil, irtest.Int("axis", 1)),
		oneOp("Concat/negaxis", "Concat", shapes(ir.Shape{3, 2}, ir.Shape{3, 5}), nil, irtest.Int("axis", -1)),
		oneOp("Concat/single", "Concat", shapes(ir.Shape{3, 2}), nil, irtest.Int("axis", 0)),
		{name: "Concat/some", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			// Only x and y need gradients: a constant and an input
			// that is not differentiated sit between them.
			x := b.Input("x", ir.Double, 2, 3)
			z := b.Input("z", ir.Double, 1, 3)
			y := b.Input("y", ir.Double, 4, 3)
			c := b.Init("c", constF64(ir.Shape{2, 3}, []float64{1, 2, 3, 4, 5, 6}))
			return irtest.V(x, y), irtest.V(b.Op("Concat", irtest.V(x, c, z, y, x), irtest.Int("axis", 0)))
		}},
		{name: "Concat/opset11", build: atOpset(11, func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 2, 3)
			y := b.Input("y", ir.Double, 2, 2)
			return irtest.V(x, y), irtest.V(b.Op("Concat", irtest.V(x, y), irtest.Int("axis", 1)))
		})},
		{name: "Split/input", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 3, 7)
			return irtest.V(x), b.OpN("Split", 3, irtest.V(x, b.Ints("s", 2, 4, 1)), irtest.Int("axis", -1))
		}},
		{name: "Split/absent", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			// The middle output does not reach the loss: zeros there.
			x := b.Input("x", ir.Double, 6, 2)
			ys := b.OpN("Split", 3, irtest.V(x))
			return irtest.V(x), irtest.V(ys[0], ys[2])
		}},
		{name: "Split/opset11", build: atOpset(11, func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 5, 2)
			ys := b.OpN("Split", 2, irtest.V(x), irtest.Ints("split", 3, 2))
			return irtest.V(x), irtest.V(ys[1])
		})},
		{name: "Split/opset18uneven", build: atOpset(18, func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 2, 7)
			ys := b.OpN("Split", 3, irtest.V(x), irtest.Int("axis", 1), irtest.Int("num_outputs", 3))
			return irtest.V(x), irtest.V(ys[0], ys[2])
		})},
	})
}

func sliceCase(name string, shape ir.Shape, starts, ends, axes, steps []int64) gradCase {
	return gradCase{name: name, build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		x := b.Input("x", ir.Double, shape...)
		ins := irtest.V(x, b.Ints("st", starts...), b.Ints("en", ends...))
		if axes != nil || steps != nil {
			ins = append(ins, b.Ints("ax", axes...))
		}
		if steps != nil {
			ins = append(ins, b.Ints("sp", steps...))
		}
		return irtest.V(x), irtest.V(b.Op("Slice", ins))
	}}
}

func TestSliceGradients(t *testing.T) {
	big, small := int64(math.MaxInt64), int64(math.MinInt64)
	runGradChecks(t, []gradCase{
		sliceCase("step1", ir.Shape{5, 6}, []int64{1, -4}, []int64{4, big}, []int64{0, 1}, nil),
		sliceCase("noaxes", ir.Shape{5, 6}, []int64{1}, []int64{-1}, nil, nil),
		sliceCase("step2", ir.Shape{7, 4}, []int64{1}, []int64{big}, []int64{0}, []int64{2}),
		sliceCase("step3_crop", ir.Shape{8, 3}, []int64{0, 1}, []int64{8, 3}, []int64{0, -1}, []int64{3, 1}),
		sliceCase("reverse", ir.Shape{4, 5}, []int64{-1}, []int64{small}, []int64{1}, []int64{-1}),
		sliceCase("neg_step2", ir.Shape{9, 2}, []int64{7}, []int64{0}, []int64{0}, []int64{-2}),
		sliceCase("neg_step3_clamped", ir.Shape{3, 10}, []int64{100}, []int64{-100}, []int64{1}, []int64{-3}),
		sliceCase("mixed", ir.Shape{6, 5, 4}, []int64{-2, 1, 0}, []int64{small, 5, 3}, []int64{0, 1, 2}, []int64{-2, 3, 1}),
		sliceCase("one_elem_neg", ir.Shape{5, 3}, []int64{3}, []int64{2}, []int64{0}, []int64{-4}),
		sliceCase("empty", ir.Shape{4, 3}, []int64{3}, []int64{1}, []int64{0}, nil),
	})
}

func padCase(name, mode string, shape ir.Shape, pads []int64, axes []int64, opset int64) gradCase {
	return gradCase{name: name, build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		if opset != 0 {
			b.M.Opsets[""] = opset
		}
		x := b.Input("x", ir.Double, shape...)
		ins := irtest.V(x, b.Ints("p", pads...))
		if axes != nil {
			ins = append(ins, nil, b.Ints("ax", axes...))
		}
		return irtest.V(x), irtest.V(b.Op("Pad", ins, irtest.String("mode", mode)))
	}}
}

func TestPadGradients(t *testing.T) {
	cases := []gradCase{
		padCase("constant", "constant", ir.Shape{3, 4}, []int64{1, 0, 2, 3}, nil, 0),
		padCase("constant_crop", "constant", ir.Shape{5, 4}, []int64{-2, 1, 1, -2}, nil, 0),
		padCase("constant_axes18", "constant", ir.Shape{2, 3, 4}, []int64{1, 2, 0, 1}, []int64{-1, 0}, 18),
		{name: "constant_value", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			// The pad value is a parameter: its gradient is the sum of
			// dy over the padding.
			x := b.Input("x", ir.Double, 3, 2)
			v := b.Input("v", ir.Double)
			return irtest.V(x, v), irtest.V(b.Op("Pad", irtest.V(x, b.Ints("p", 1, -1, 0, 2), v)))
		}},
	}
	for _, mode := range []string{"edge", "reflect", "wrap"} {
		cases = append(cases,
			padCase(mode, mode, ir.Shape{3, 4}, []int64{1, 2, 2, 1}, nil, 19),
			padCase(mode+"_1d", mode, ir.Shape{5}, []int64{3, 4}, nil, 19),
			padCase(mode+"_wide", mode, ir.Shape{3, 2}, []int64{0, 5, 0, 4}, nil, 19),
			padCase(mode+"_crop", mode, ir.Shape{6, 2}, []int64{-1, 1, 2, 0}, nil, 19),
			padCase(mode+"_unit", mode, ir.Shape{1, 3}, []int64{2, 0, 1, 0}, nil, 19),
		)
	}
	runGradChecks(t, cases)
}

// An unknown pad mode is reported by name.
func TestPadModeError(t *testing.T) {
	b := NewBuilder(irtest.New(t).M, ir.Backward, "g/")
	x, err := b.G.AddInput("x", ir.Double, ir.Shape{3})
	if err != nil {
		t.Fatal(err)
	}
	padAxisGrad(b, x, 0, "mirror", 1, 2)
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), `no gradient rule for Pad mode "mirror"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestReshapeLikeGradients(t *testing.T) {
	runGradChecks(t, []gradCase{
		oneOp("Reshape", "Reshape", shapes(ir.Shape{2, 3, 4}), func(b *irtest.B) []*ir.Value { return irtest.V(b.Ints("s", 4, -1)) }),
		oneOp("Flatten", "Flatten", shapes(ir.Shape{2, 3, 4}), nil, irtest.Int("axis", -1)),
		oneOp("Squeeze", "Squeeze", shapes(ir.Shape{2, 1, 3, 1}), func(b *irtest.B) []*ir.Value { return irtest.V(b.Ints("k", -1, 1)) }),
		oneOp("Squeeze/all", "Squeeze", shapes(ir.Shape{1, 3, 1}), nil),
		oneOp("Unsqueeze", "Unsqueeze", shapes(ir.Shape{2, 3}), func(b *irtest.B) []*ir.Value { return irtest.V(b.Ints("k", -1, 0)) }),
		oneOp("Transpose", "Transpose", shapes(ir.Shape{2, 3, 4}), nil, irtest.Ints("perm", 1, 2, 0)),
		oneOp("Transpose/default", "Transpose", shapes(ir.Shape{2, 3, 4}), nil),
		oneOp("Expand", "Expand", shapes(ir.Shape{3, 1}), func(b *irtest.B) []*ir.Value { return irtest.V(b.Ints("s", 2, 3, 4)) }),
		oneOp("Expand/same", "Expand", shapes(ir.Shape{2, 3}), func(b *irtest.B) []*ir.Value { return irtest.V(b.Ints("s", 3)) }),
		oneOp("Tile", "Tile", shapes(ir.Shape{2, 3}), func(b *irtest.B) []*ir.Value { return irtest.V(b.Ints("r", 3, 2)) }),
		oneOp("Tile/partial", "Tile", shapes(ir.Shape{2, 1, 3}), func(b *irtest.B) []*ir.Value { return irtest.V(b.Ints("r", 1, 4, 1)) }),
	})
}

func gatherCase(name string, shape ir.Shape, axis int64, ishape ir.Shape, idx []int64, int32idx bool) gradCase {
	feed := i64Tensor(ishape, idx)
	dt := ir.Int64
	if int32idx {
		iv := make([]int32, len(idx))
		for i, v := range idx {
			iv[i] = int32(v)
		}
		feed, dt = i32Tensor(ishape, iv), ir.Int32
	}
	return gradCase{name: name, feeds: map[string]*kernels.Tensor{"i": feed},
		build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, shape...)
			i := b.Input("i", dt, ishape...)
			return irtest.V(x), irtest.V(b.Op("Gather", irtest.V(x, i), irtest.Int("axis", axis)))
		}}
}

func TestGatherGradients(t *testing.T) {
	runGradChecks(t, []gradCase{
		// Embedding: rows looked up repeatedly (and by negative index)
		// accumulate.
		gatherCase("axis0_embedding", ir.Shape{5, 3}, 0, ir.Shape{2, 4}, []int64{0, 4, -1, 2, 0, 0, 3, -5}, false),
		gatherCase("axis0_int32", ir.Shape{4, 2, 2}, 0, ir.Shape{5}, []int64{1, 1, -4, 3, 1}, true),
		gatherCase("axis1_repeat", ir.Shape{2, 4, 3}, 1, ir.Shape{3}, []int64{1, -1, 1}, false),
		gatherCase("axis_neg1", ir.Shape{3, 4}, -1, ir.Shape{2, 3}, []int64{0, 3, 3, -4, 2, 2}, false),
		gatherCase("scalar_index", ir.Shape{3, 4}, 1, ir.Shape{}, []int64{-2}, false),
		{name: "const_indices", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 6, 2)
			return irtest.V(x), irtest.V(b.Op("Gather", irtest.V(x, b.Ints("i", 5, 0, 5, 2))))
		}},
		{name: "GatherElements/axis1", feeds: map[string]*kernels.Tensor{"i": i64Tensor(ir.Shape{2, 6}, []int64{0, 3, 3, -1, 1, 0, 2, 2, 2, -4, 0, 1})},
			build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
				x := b.Input("x", ir.Double, 3, 4)
				i := b.Input("i", ir.Int64, 2, 6)
				return irtest.V(x), irtest.V(b.Op("GatherElements", irtest.V(x, i), irtest.Int("axis", 1)))
			}},
		{name: "GatherElements/axis0", feeds: map[string]*kernels.Tensor{"i": i32Tensor(ir.Shape{4, 2}, []int32{0, 1, 0, 1, 2, -3, 0, 0})},
			build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
				x := b.Input("x", ir.Double, 3, 2)
				i := b.Input("i", ir.Int32, 4, 2)
				return irtest.V(x), irtest.V(b.Op("GatherElements", irtest.V(x, i), irtest.Int("axis", -2)))
			}},
	})
}

// Before opset 16 there is no scatter reduction: the Gather gradient
// says so instead of emitting an invalid op.
func TestGatherGradientNeedsOpset16(t *testing.T) {
	b := irtest.New(t)
	b.M.Opsets[""] = 15
	x := b.Input("x", ir.Double, 4, 2)
	y := b.Op("Gather", irtest.V(x, b.Ints("i", 1, 2)))
	loss := b.Op("ReduceSum", irtest.V(y), irtest.Int("keepdims", 0))
	m := b.Return(loss)
	_, err := Grad(m, loss, irtest.V(x))
	if err == nil || !strings.Contains(err.Error(), "opset >= 16") {
		t.Fatalf("err = %v", err)
	}
}

func TestWhereGradients(t *testing.T) {
	runGradChecks(t, []gradCase{
		{name: "Where/broadcast", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			c := b.Op("Greater", irtest.V(b.Input("c", ir.Double, 3, 1), b.Init("zero", constF64(ir.Shape{}, []float64{0}))))
			x := b.Input("x", ir.Double, 2, 3, 4)
			y := b.Input("y", ir.Double, 4)
			return irtest.V(x, y), irtest.V(b.Op("Where", irtest.V(c, x, y)))
		}},
		{name: "Where/cond_big", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			c := b.Op("Greater", irtest.V(b.Input("c", ir.Double, 2, 3), b.Init("zero", constF64(ir.Shape{}, []float64{0}))))
			x := b.Input("x", ir.Double, 1, 3)
			y := b.Input("y", ir.Double)
			return irtest.V(x, y), irtest.V(b.Op("Where", irtest.V(c, x, y)))
		}},
	})
}

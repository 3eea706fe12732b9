package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/tsplit/tsplit/ir/irtest"
)

// ktSliceIdx lists the indices one axis of size dim takes, written from
// the ONNX Slice specification: negative start/end add dim; then for a
// positive step start and end clamp to [0, dim], for a negative step
// start clamps to [0, dim-1] and end to [-1, dim-1].
func ktSliceIdx(dim, start, end, step int64) []int64 {
	if start < 0 {
		start += dim
	}
	if end < 0 {
		end += dim
	}
	clamp := func(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }
	var out []int64
	if step > 0 {
		start, end = clamp(start, 0, dim), clamp(end, 0, dim)
		for i := start; i < end; i += step {
			out = append(out, i)
		}
	} else {
		start, end = clamp(start, 0, dim-1), clamp(end, -1, dim-1)
		for i := start; i > end; i += step {
			out = append(out, i)
		}
	}
	return out
}

func TestSlice(t *testing.T) {
	shape := ktS(4, 5, 6)
	x := ktSeq(120, 1, 0)
	big := int64(math.MaxInt64)
	cases := []struct{ starts, ends, axes, steps []int64 }{
		{[]int64{1}, []int64{3}, nil, nil},
		{[]int64{0, 1}, []int64{4, 4}, []int64{2, 1}, nil},
		{[]int64{-1}, []int64{-big}, []int64{1}, []int64{-1}},
		{[]int64{3, 10}, []int64{0, -10}, []int64{0, -1}, []int64{-2, -2}},
		{[]int64{1}, []int64{big}, []int64{-1}, []int64{4}},
		{[]int64{2}, []int64{2}, []int64{0}, nil},
		{[]int64{-100, 1, 5}, []int64{100, 5, 0}, []int64{0, 1, 2}, []int64{3, 2, -3}},
		{[]int64{4}, []int64{-6}, []int64{0}, []int64{-1}},
	}
	for _, tc := range cases {
		axes := tc.axes
		if axes == nil {
			for i := range tc.starts {
				axes = append(axes, int64(i))
			}
		}
		steps := tc.steps
		if steps == nil {
			for range tc.starts {
				steps = append(steps, 1)
			}
		}
		idx := make([][]int64, 3)
		for d := range idx {
			for i := int64(0); i < shape[d]; i++ {
				idx[d] = append(idx[d], i)
			}
		}
		for i, a := range axes {
			a = (a + 3) % 3
			idx[a] = ktSliceIdx(shape[a], tc.starts[i], tc.ends[i], steps[i])
		}
		out := ktS(int64(len(idx[0])), int64(len(idx[1])), int64(len(idx[2])))
		var want []float32
		ktCoords(out, func(c []int64) {
			want = append(want, x[ktFlat(shape, []int64{idx[0][c[0]], idx[1][c[1]], idx[2][c[2]]})])
		})
		ins := []ktIn{ktR(ktF32(shape, x...)), ktC(ktI64(ktS(int64(len(tc.starts))), tc.starts...)), ktC(ktI64(ktS(int64(len(tc.ends))), tc.ends...))}
		if tc.axes != nil {
			ins = append(ins, ktC(ktI64(ktS(int64(len(tc.axes))), tc.axes...)))
		}
		if tc.steps != nil {
			if tc.axes == nil {
				ins = append(ins, ktIn{})
			}
			ins = append(ins, ktC(ktI64(ktS(int64(len(tc.steps))), tc.steps...)))
		}
		got := ktRun1(t, "Slice", ins)
		ktSame(t, fmt.Sprintf("Slice %+v", tc), got, ktF32(out, want...))
	}
	// opset-1 attributes; int32 starts/ends inputs; an int64 tensor.
	got := ktRun(t, 9, "Slice", []ktIn{ktR(ktF32(ktS(2, 3), 1, 2, 3, 4, 5, 6))}, 1,
		irtest.Ints("starts", 1), irtest.Ints("ends", 3), irtest.Ints("axes", 1))[0]
	ktSame(t, "Slice attrs", got, ktF32(ktS(2, 2), 2, 3, 5, 6))
	got = ktRun1(t, "Slice", []ktIn{ktR(ktI64(ktS(5), 1, 2, 3, 4, 5)), ktC(ktI32(ktS(1), -1)), ktC(ktI32(ktS(1), 0)), ktC(ktI32(ktS(1), 0)), ktC(ktI32(ktS(1), -2))})
	ktSame(t, "Slice i64 reversed", got, ktI64(ktS(2), 5, 3))
}

// ktPadRef pads x by begin/end per axis in the given mode, by the
// definitions: constant fills, edge repeats the border, wrap repeats
// the tensor periodically, reflect mirrors without repeating the border.
func ktPadRef(shape []int64, x []float32, begin, end []int64, mode string, val float32) ([]int64, []float32) {
	out := make([]int64, len(shape))
	for d := range shape {
		out[d] = shape[d] + begin[d] + end[d]
	}
	var y []float32
	src := make([]int64, len(shape))
	ktCoords(out, func(c []int64) {
		for d := range c {
			i, n := c[d]-begin[d], shape[d]
			switch mode {
			case "constant":
			case "edge":
				i = max(0, min(i, n-1))
			case "wrap":
				for i < 0 {
					i += n
				}
				i %= n
			case "reflect":
				for i < 0 || i >= n {
					if i < 0 {
						i = -i
					}
					if i >= n {
						i = 2*(n-1) - i
					}
				}
			}
			src[d] = i
		}
		for d := range src {
			if src[d] < 0 || src[d] >= shape[d] {
				y = append(y, val)
				return
			}
		}
		y = append(y, x[ktFlat(shape, src)])
	})
	return out, y
}

func TestPad(t *testing.T) {
	// A hand-checked case first.
	x := ktF32(ktS(2, 3), 1, 2, 3, 4, 5, 6)
	pads := ktC(ktI64(ktS(4), 0, 2, 1, 0))
	for mode, want := range map[string][]float32{
		"constant": {0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0, 0, 0, 0},
		"edge":     {1, 1, 1, 2, 3, 4, 4, 4, 5, 6, 4, 4, 4, 5, 6},
		"reflect":  {3, 2, 1, 2, 3, 6, 5, 4, 5, 6, 3, 2, 1, 2, 3},
		"wrap":     {2, 3, 1, 2, 3, 5, 6, 4, 5, 6, 2, 3, 1, 2, 3},
	} {
		got := ktRun1(t, "Pad", []ktIn{ktR(x), pads}, irtest.String("mode", mode))
		ktSame(t, "Pad "+mode, got, ktF32(ktS(3, 5), want...))
	}
	// Random 3-D cases in every mode, including crops (negative pads).
	shape := ktS(3, 4, 5)
	xs := ktRand(60, 2)
	for _, pb := range [][2][]int64{
		{{1, 0, 2}, {0, 3, 1}},
		{{0, 0, 0}, {0, 0, 0}},
		{{2, 3, 4}, {2, 3, 4}},
		{{-1, 1, 0}, {1, -2, 3}},
		{{0, 7, 0}, {0, 6, 9}},
	} {
		for _, mode := range []string{"constant", "edge", "reflect", "wrap"} {
			pv := append(append([]int64{}, pb[0]...), pb[1]...)
			ins := []ktIn{ktR(ktF32(shape, xs...)), ktC(ktI64(ktS(6), pv...))}
			if mode == "constant" {
				ins = append(ins, ktR(ktF32(nil, 2.5)))
			}
			out, want := ktPadRef(shape, xs, pb[0], pb[1], mode, 2.5)
			got := ktRun1(t, "Pad", ins, irtest.String("mode", mode))
			ktSame(t, fmt.Sprintf("Pad %s %v", mode, pb), got, ktF32(out, want...))
		}
	}
	// Axes input (opset 18): pad only the last axis, given as -1.
	got := ktRun1(t, "Pad", []ktIn{ktR(x), ktC(ktI64(ktS(2), 1, 1)), ktR(ktF32(nil, -1)), ktC(ktI64(ktS(1), -1))})
	ktSame(t, "Pad axes", got, ktF32(ktS(2, 5), -1, 1, 2, 3, -1, -1, 4, 5, 6, -1))
	// Opset-2 attributes: pads and value.
	got = ktRun(t, 2, "Pad", []ktIn{ktR(x)}, 1, irtest.Ints("pads", 1, 0, 0, 0), irtest.Float("value", 7))[0]
	ktSame(t, "Pad attrs", got, ktF32(ktS(3, 3), 7, 7, 7, 1, 2, 3, 4, 5, 6))
	// Other types.
	got = ktRun1(t, "Pad", []ktIn{ktR(ktI64(ktS(2), 5, 6)), ktC(ktI64(ktS(2), 1, 2)), ktR(ktI64(nil, -9))})
	ktSame(t, "Pad i64", got, ktI64(ktS(5), -9, 5, 6, -9, -9))
	got = ktRun1(t, "Pad", []ktIn{ktR(ktBool(ktS(2), true, false)), ktC(ktI64(ktS(2), 1, 1))}, irtest.String("mode", "edge"))
	ktSame(t, "Pad bool edge", got, ktBool(ktS(4), true, true, false, false))
}

func TestExpandTile(t *testing.T) {
	x := ktF32(ktS(3, 1), 1, 2, 3)
	got := ktRun1(t, "Expand", []ktIn{ktR(x), ktC(ktI64(ktS(3), 2, 1, 4))})
	want := []float32{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}
	ktSame(t, "Expand", got, ktF32(ktS(2, 3, 4), append(append([]float32{}, want...), want...)...))
	got = ktRun1(t, "Expand", []ktIn{ktR(ktI64(ktS(2), 7, 8)), ktC(ktI64(ktS(1), 1))})
	ktSame(t, "Expand keeps larger dims", got, ktI64(ktS(2), 7, 8))

	y := ktF32(ktS(2, 3), 1, 2, 3, 4, 5, 6)
	got = ktRun1(t, "Tile", []ktIn{ktR(y), ktC(ktI64(ktS(2), 2, 2))})
	ktSame(t, "Tile", got, ktF32(ktS(4, 6),
		1, 2, 3, 1, 2, 3,
		4, 5, 6, 4, 5, 6,
		1, 2, 3, 1, 2, 3,
		4, 5, 6, 4, 5, 6))
	got = ktRun1(t, "Tile", []ktIn{ktR(ktI32(ktS(2), 1, 2)), ktC(ktI64(ktS(1), 3))})
	ktSame(t, "Tile i32", got, ktI32(ktS(6), 1, 2, 1, 2, 1, 2))
	got = ktRun1(t, "Tile", []ktIn{ktR(y), ktC(ktI64(ktS(2), 0, 1))})
	ktSame(t, "Tile zero", got, ktF32(ktS(0, 3)))
}

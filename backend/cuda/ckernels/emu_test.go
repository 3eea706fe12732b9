//go:build cgo

package ckernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/tsplit/tsplit/backend/cuda/launch"
	"github.com/tsplit/tsplit/backend/cuda/ptx"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
)

// maxRelErr is the bound of issue 16: every kernel within 1e-5 of the
// reference kernels.
const maxRelErr = 1e-5

// The largest error seen per kernel and per op type, for the coverage
// check and the log (TestZCoverage, which runs last by name).
var (
	mu        sync.Mutex
	kernelErr = map[string]float64{}
	opErr     = map[string]float64{}
)

// input is one input of a test op: float32 data (f), int64 (i) or bool
// (b); init marks a compile-time constant (an initializer), which shape
// inference needs for Reshape's shape, Slice's starts and the like.
// A nil shape with no data marks an absent optional input.
type input struct {
	shape []int64
	f     []float32
	i     []int64
	b     []bool
	init  bool
}

func (in input) absent() bool { return in.shape == nil && in.f == nil && in.i == nil && in.b == nil }

func (in input) dtype() ir.DType {
	switch {
	case in.i != nil:
		return ir.Int64
	case in.b != nil:
		return ir.Bool
	}
	return ir.Float
}

func (in input) raw() []byte {
	var b []byte
	switch {
	case in.i != nil:
		for _, v := range in.i {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	case in.b != nil:
		for _, v := range in.b {
			if v {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	default:
		for _, v := range in.f {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

func vol(dims []int64) int {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return n
}

// F is uniform float32 data in [-1, 1).
func F(r *rand.Rand, dims ...int64) input {
	v := make([]float32, vol(dims))
	for i := range v {
		v[i] = 2*r.Float32() - 1
	}
	return input{shape: dims, f: v}
}

// Pos is data in [0.5, 1.5): for Sqrt, Log, Reciprocal and divisors.
func Pos(r *rand.Rand, dims ...int64) input {
	in := F(r, dims...)
	for i, v := range in.f {
		in.f[i] = 1 + v/2
	}
	return in
}

// I is an int64 tensor (constant when init).
func I(dims []int64, v ...int64) input { return input{shape: dims, i: v} }

// C is an int64 constant vector.
func C(v ...int64) input { return input{shape: []int64{int64(len(v))}, i: v, init: true} }

// Idx is random indices in [-dim, dim).
func Idx(r *rand.Rand, dim int64, dims ...int64) input {
	v := make([]int64, vol(dims))
	for i := range v {
		v[i] = r.Int64N(2*dim) - dim
	}
	return input{shape: dims, i: v}
}

// B is random bools.
func B(r *rand.Rand, dims ...int64) input {
	v := make([]bool, vol(dims))
	for i := range v {
		v[i] = r.IntN(2) == 1
	}
	return input{shape: dims, b: v}
}

func ints(name string, v ...int64) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrInts, Ints: v} }
func intA(name string, v int64) ir.Attr    { return ir.Attr{Name: name, Type: ir.AttrInt, Int: v} }
func flt(name string, v float32) ir.Attr   { return ir.Attr{Name: name, Type: ir.AttrFloat, Float: v} }
func str(name, v string) ir.Attr           { return ir.Attr{Name: name, Type: ir.AttrString, String: v} }

// tc is one test case: an op at an opset, its inputs and outputs ("":
// absent), attributes, and the workspace to give it (-1: the reference
// kernel's).
type tc struct {
	typ   string
	opset int64
	ins   []input
	outs  []string
	attrs []ir.Attr
	ws    int64
	step  int64
	// scratch is the device scratch's size (0: testScratch, -1: none)
	scratch int64
}

// run builds the op, runs the reference kernel and the launch list on
// the host emulation, and compares every output.
func run(t *testing.T, c tc) {
	t.Helper()
	if c.opset == 0 {
		c.opset = 17
	}
	if c.outs == nil {
		c.outs = []string{"y"}
	}
	g := ir.NewGraph("t")
	vals := make([]*ir.Value, len(c.ins))
	for i, in := range c.ins {
		if in.absent() {
			continue
		}
		name := fmt.Sprintf("in%d", i)
		var err error
		if in.init {
			var tt *ir.Tensor
			if tt, err = ir.NewTensor(in.dtype(), ir.Shape(in.shape), in.raw()); err == nil {
				vals[i], err = g.AddInit(name, tt)
			}
		} else {
			vals[i], err = g.AddInput(name, in.dtype(), ir.Shape(in.shape))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	op, err := g.NewOp(c.typ, "", c.typ, vals, c.outs, c.attrs)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.InferAndSet(op, c.opset); err != nil {
		t.Fatal(err)
	}
	// reference
	refIn := make([]*kernels.Tensor, len(c.ins))
	for i, in := range c.ins {
		if in.absent() {
			continue
		}
		tt, err := kernels.NewTensor(in.dtype(), ir.Shape(in.shape))
		if err != nil {
			t.Fatal(err)
		}
		copy(tt.Data, in.raw())
		refIn[i] = tt
	}
	want, err := kernels.EvalOpset(op, c.opset, refIn, c.step)
	if err != nil {
		t.Fatal(err)
	}
	// the pool: inputs, outputs, workspace, each 256-byte aligned
	ws := c.ws
	if ws < 0 {
		ws = kernels.WorkspaceBytes(op)
	}
	var size int64
	place := func(n int64) int64 { off := size; size += (n + 255) &^ 255; return off }
	inOff := make([]int64, len(c.ins))
	for i, in := range c.ins {
		if !in.absent() {
			inOff[i] = place(int64(len(in.raw())))
		}
	}
	outOff := make([]int64, len(op.Outputs()))
	for j, v := range op.Outputs() {
		if v != nil {
			n, _ := v.Shape.Bytes(v.DType)
			outOff[j] = place(n)
		}
	}
	wsOff := place(ws)
	scratch := c.scratch
	switch scratch {
	case 0:
		scratch = testScratch
	case -1:
		scratch = 0
	}
	scOff := place(scratch)
	pool := NewPool(size)
	defer pool.Free()
	all, _ := pool.Bytes(pool.Addr(0), size)
	for i := range all {
		all[i] = 0x7f // unwritten outputs read as 3.4e38, not as zero
	}
	lo := &launch.Op{Op: op, Opset: c.opset, Workspace: pool.Addr(wsOff), WorkspaceBytes: ws, Step: c.step,
		Scratch: pool.Addr(scOff), ScratchBytes: scratch}
	for i, in := range c.ins {
		var tt *launch.Tensor
		if !in.absent() {
			b, _ := pool.Bytes(pool.Addr(inOff[i]), int64(len(in.raw())))
			copy(b, in.raw())
			tt = &launch.Tensor{Addr: pool.Addr(inOff[i]), DType: in.dtype(), Shape: ir.Shape(in.shape)}
		}
		lo.In = append(lo.In, tt)
	}
	for j, v := range op.Outputs() {
		var tt *launch.Tensor
		if v != nil {
			tt = &launch.Tensor{Addr: pool.Addr(outOff[j]), DType: v.DType, Shape: v.Shape}
		}
		lo.Out = append(lo.Out, tt)
	}
	lo.Host = func(i int) ([]byte, error) {
		return pool.Bytes(lo.In[i].Addr, int64(len(c.ins[i].raw())))
	}
	steps, err := launch.Plan(lo)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Run(steps); err != nil {
		t.Fatalf("%s: %v", op.Describe(), err)
	}
	worst := 0.0
	for j, v := range op.Outputs() {
		if v == nil {
			continue
		}
		n, _ := v.Shape.Bytes(v.DType)
		got, _ := pool.Bytes(lo.Out[j].Addr, n)
		if e := compare(t, fmt.Sprintf("%s output %d", c.typ, j), v.DType, got, want[j].Data); e > worst {
			worst = e
		}
	}
	mu.Lock()
	defer mu.Unlock()
	opErr[c.typ] = math.Max(opErr[c.typ], worst)
	for _, s := range steps {
		if s.Kernel != nil {
			kernelErr[s.Kernel.Name] = math.Max(kernelErr[s.Kernel.Name], worst)
		}
	}
}

// compare returns the largest relative error of got against want:
// |g - w| / max(|w|, rms(want), 1e-6), the tensor's RMS bounding the
// denominator from below so that an element near zero in a sum of
// cancelling terms is judged on the scale of the terms (float32 sums in
// a different order differ by a fraction of the terms, not of the
// result). Non-float outputs must be equal.
func compare(t *testing.T, what string, dt ir.DType, got, want []byte) float64 {
	t.Helper()
	if dt != ir.Float {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: byte %d is %d, want %d", what, i, got[i], want[i])
				return math.Inf(1)
			}
		}
		return 0
	}
	g := unsafe.Slice((*float32)(unsafe.Pointer(&got[0])), len(got)/4)
	w := unsafe.Slice((*float32)(unsafe.Pointer(&want[0])), len(want)/4)
	var ss float64
	for _, v := range w {
		ss += float64(v) * float64(v)
	}
	rms := math.Sqrt(ss / float64(len(w)))
	worst := 0.0
	for i := range w {
		a, b := float64(g[i]), float64(w[i])
		if math.IsNaN(a) && math.IsNaN(b) || a == b {
			continue
		}
		e := math.Abs(a-b) / math.Max(math.Max(math.Abs(b), rms), 1e-6)
		if !(e <= maxRelErr) {
			t.Errorf("%s: element %d is %v, want %v (relative error %.3g)", what, i, a, b, e)
			return math.Inf(1)
		}
		worst = math.Max(worst, e)
	}
	return worst
}

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 16)) }

// absent marks an optional input left out.
var absent = input{}

func TestElementwise(t *testing.T) {
	r := rng(1)
	for _, typ := range []string{"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"} {
		run(t, tc{typ: typ, ins: []input{F(r, 3, 5, 7), Pos(r, 3, 5, 7)}})
		run(t, tc{typ: typ, ins: []input{Pos(r, 2, 1, 7), Pos(r, 5, 1)}}) // both broadcast
		run(t, tc{typ: typ, ins: []input{F(r, 11), Pos(r)}})              // scalar
	}
	for _, typ := range []string{"Add", "Sub", "Mul", "Div"} {
		run(t, tc{typ: typ, ins: []input{I([]int64{2, 3}, 7, -7, 9, 12, 0, -1), I([]int64{3}, 2, 3, -4)}})
	}
	for _, typ := range []string{"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"} {
		a := F(r, 4, 9)
		b := F(r, 9)
		copy(b.f[:3], a.f[:3]) // some ties
		run(t, tc{typ: typ, ins: []input{a, b}})
		run(t, tc{typ: typ, ins: []input{I([]int64{5}, 1, 2, 3, 4, 5), I(nil, 3)}})
	}
	for _, typ := range []string{"And", "Or", "Xor"} {
		run(t, tc{typ: typ, ins: []input{B(r, 3, 4), B(r, 4)}})
	}
	run(t, tc{typ: "Where", ins: []input{B(r, 6, 1), F(r, 6, 5), F(r, 5)}})
	run(t, tc{typ: "Where", ins: []input{B(r, 7), I([]int64{7}, 1, 2, 3, 4, 5, 6, 7), I(nil, -1)}})
	for _, typ := range []string{"Relu", "Neg", "Exp", "Erf", "Tanh", "Sigmoid", "Abs"} {
		run(t, tc{typ: typ, ins: []input{F(r, 3, 17, 5)}})
	}
	for _, typ := range []string{"Sqrt", "Reciprocal", "Log"} {
		run(t, tc{typ: typ, ins: []input{Pos(r, 257)}})
	}
	run(t, tc{typ: "LeakyRelu", ins: []input{F(r, 33)}, attrs: []ir.Attr{flt("alpha", 0.2)}})
	// Both pieces and both ends of the hard activations' middle piece.
	hard := input{shape: []int64{11}, f: []float32{-7, -3.5, -3, -2.5, -0.5, 0, 0.75, 2.5, 3, 3.25, 9}}
	run(t, tc{typ: "HardSwish", ins: []input{hard}})
	run(t, tc{typ: "HardSigmoid", ins: []input{hard}})
	run(t, tc{typ: "HardSigmoid", ins: []input{hard}, attrs: []ir.Attr{flt("alpha", 0.25), flt("beta", 0.4)}})
	clipLo, clipHi := input{shape: []int64{}, f: []float32{-0.25}}, input{shape: []int64{}, f: []float32{0.5}}
	run(t, tc{typ: "Clip", ins: []input{F(r, 4, 31), clipLo, clipHi}, opset: 13})
	run(t, tc{typ: "Clip", ins: []input{F(r, 4, 31), absent, clipHi}, opset: 13})
	run(t, tc{typ: "Clip", ins: []input{F(r, 4, 31)}, opset: 6, attrs: []ir.Attr{flt("min", -0.1), flt("max", 0.3)}})
	run(t, tc{typ: "Cast", ins: []input{I([]int64{4}, 1, -3, 1<<40, 0)}, attrs: []ir.Attr{intA("to", int64(ir.Float))}})
	run(t, tc{typ: "Cast", ins: []input{F(r, 9)}, attrs: []ir.Attr{intA("to", int64(ir.Int64))}})
	run(t, tc{typ: "Cast", ins: []input{B(r, 9)}, attrs: []ir.Attr{intA("to", int64(ir.Float))}})
	run(t, tc{typ: "Cast", ins: []input{F(r, 9)}, attrs: []ir.Attr{intA("to", int64(ir.Bool))}})
}

func TestShapes(t *testing.T) {
	r := rng(2)
	run(t, tc{typ: "Identity", ins: []input{F(r, 3, 3)}})
	run(t, tc{typ: "Reshape", ins: []input{F(r, 2, 3, 4), C(4, -1)}})
	run(t, tc{typ: "Reshape", ins: []input{I([]int64{2, 2}, 1, 2, 3, 4), C(4)}})
	run(t, tc{typ: "Flatten", ins: []input{F(r, 2, 3, 5)}, attrs: []ir.Attr{intA("axis", 2)}})
	run(t, tc{typ: "Unsqueeze", ins: []input{I([]int64{3}, 4, 5, 6), C(0)}})
	run(t, tc{typ: "Squeeze", ins: []input{F(r, 3, 1, 5), C(1)}})
	run(t, tc{typ: "Dropout", ins: []input{F(r, 5, 7)}, outs: []string{"y", "mask"}})
	run(t, tc{typ: "Dropout", ins: []input{F(r, 5, 7), {shape: []int64{}, f: []float32{0.3}, init: true}}, outs: []string{"y", "mask"}})
	// training mode: the reference kernel's masks, over several PCG
	// blocks and an odd tail, at two steps, with and without the mask
	ratio := input{shape: []int64{}, f: []float32{0.3}, init: true}
	train := input{shape: []int64{}, b: []bool{true}, init: true}
	run(t, tc{typ: "Dropout", ins: []input{F(r, 3, 13337), ratio, train}, outs: []string{"y", "mask"}, step: 7})
	run(t, tc{typ: "Dropout", ins: []input{F(r, 3, 13337), ratio, train}, outs: []string{"y", "mask"}, step: 8})
	run(t, tc{typ: "Dropout", ins: []input{F(r, 5, 7), ratio, train}, attrs: []ir.Attr{intA("seed", 42)}})
	run(t, tc{typ: "Transpose", ins: []input{F(r, 2, 3, 5, 7)}, attrs: []ir.Attr{ints("perm", 0, 2, 3, 1)}})
	run(t, tc{typ: "Transpose", ins: []input{F(r, 3, 5, 7)}})
	run(t, tc{typ: "Expand", ins: []input{F(r, 3, 1), C(2, 3, 6)}})
	run(t, tc{typ: "Expand", ins: []input{I([]int64{1}, 9), C(4)}})
	// slices: a tile with its halo, negative steps, clamped ends
	run(t, tc{typ: "Slice", ins: []input{F(r, 2, 3, 13, 11), C(4), C(9), C(2)}})
	run(t, tc{typ: "Slice", ins: []input{F(r, 2, 3, 13, 11), C(-1, 10), C(-100, 1), C(3, 2), C(-1, -3)}})
	run(t, tc{typ: "Slice", ins: []input{F(r, 5, 7), C(1, 0), C(1000, 7), C(0, 1), C(2, 3)}})
	run(t, tc{typ: "Concat", ins: []input{F(r, 2, 3, 5), F(r, 2, 1, 5), F(r, 2, 4, 5)}, attrs: []ir.Attr{intA("axis", 1)}})
	run(t, tc{typ: "Concat", ins: []input{I([]int64{2}, 1, 2), I([]int64{1}, 3)}, attrs: []ir.Attr{intA("axis", 0)}})
	run(t, tc{typ: "Split", ins: []input{F(r, 2, 13, 3), C(6, 7)}, outs: []string{"a", "b"}, attrs: []ir.Attr{intA("axis", 1)}})
	run(t, tc{typ: "Split", ins: []input{F(r, 9, 4)}, outs: []string{"a", "b", "c"}})
	run(t, tc{typ: "Pad", ins: []input{F(r, 2, 3, 5, 7), C(0, 0, 1, 2, 0, 0, 2, 1)}})
	run(t, tc{typ: "Pad", ins: []input{F(r, 2, 3, 5, 7), C(0, 0, -1, 2, 0, 0, 1, -2), {shape: []int64{}, f: []float32{1.5}, init: true}}})
	run(t, tc{typ: "Gather", ins: []input{F(r, 5, 4, 3), Idx(r, 4, 2, 3)}, attrs: []ir.Attr{intA("axis", 1)}})
	run(t, tc{typ: "Gather", ins: []input{I([]int64{4}, 10, 20, 30, 40), I(nil, -1)}})
	run(t, tc{typ: "GatherElements", ins: []input{F(r, 6, 10), Idx(r, 10, 6, 1)}, attrs: []ir.Attr{intA("axis", 1)}})
	run(t, tc{typ: "GatherElements", ins: []input{F(r, 4, 5, 3), Idx(r, 4, 2, 5, 3)}})
	// the cross-entropy gradient's scatter: distinct indices per row
	run(t, tc{typ: "ScatterElements", ins: []input{F(r, 6, 10), Idx(r, 10, 6, 1), F(r, 6, 1)}, attrs: []ir.Attr{intA("axis", 1)}})
	run(t, tc{typ: "ScatterElements", ins: []input{F(r, 6, 10), Idx(r, 10, 6, 4), F(r, 6, 4)}, attrs: []ir.Attr{intA("axis", 1), str("reduction", "add")}})
	run(t, tc{typ: "ScatterND", ins: []input{F(r, 4, 5, 3), I([]int64{2, 2}, 1, 2, 3, -1), F(r, 2, 3)}})
	run(t, tc{typ: "ScatterND", ins: []input{F(r, 8), I([]int64{3, 1}, 1, 1, 7), F(r, 3)}, attrs: []ir.Attr{str("reduction", "add")}})
	run(t, tc{typ: "Constant", attrs: []ir.Attr{{Name: "value", Type: ir.AttrTensor, Tensor: mustTensor(t, ir.Float, []int64{3}, F(r, 3).raw())}}})
	run(t, tc{typ: "Shape", ins: []input{F(r, 2, 7, 3)}})
	run(t, tc{typ: "Shape", opset: 15, ins: []input{F(r, 2, 7, 3, 4)}, attrs: []ir.Attr{intA("start", 1), intA("end", -1)}})
	run(t, tc{typ: "Size", ins: []input{F(r, 2, 7, 3)}})
	run(t, tc{typ: "ConstantOfShape", ins: []input{C(3, 4)}, attrs: []ir.Attr{{Name: "value", Type: ir.AttrTensor, Tensor: mustTensor(t, ir.Float, []int64{1}, input{f: []float32{2.5}}.raw())}}})
	// large and uniform: filled on the device, not uploaded
	run(t, tc{typ: "ConstantOfShape", ins: []input{C(300, 100)}, attrs: []ir.Attr{{Name: "value", Type: ir.AttrTensor, Tensor: mustTensor(t, ir.Float, []int64{1}, input{f: []float32{-2.5}}.raw())}}})
	run(t, tc{typ: "ConstantOfShape", ins: []input{C(90, 100)}, attrs: []ir.Attr{{Name: "value", Type: ir.AttrTensor, Tensor: mustTensor(t, ir.Int64, []int64{1}, input{i: []int64{-7}}.raw())}}})
}

func mustTensor(t *testing.T, dt ir.DType, shape []int64, raw []byte) *ir.Tensor {
	tt, err := ir.NewTensor(dt, ir.Shape(shape), raw)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

// testScratch is the scratch each case gets (the device has 8 MiB):
// small enough that the split reductions below hit its cap.
const testScratch = 64 << 10

func TestReductionsAndNorms(t *testing.T) {
	r := rng(3)
	// split reductions (few outputs, many elements): a batch norm's
	// statistics over (N, H, W), sums over a leading axis, the parts
	// capped by the scratch (8 outputs × 1000 parts would need 64 000
	// bytes; 12 × 700 does not fit), max/min merging their parts
	run(t, tc{typ: "ReduceMean", opset: 13, ins: []input{F(r, 3, 8, 41, 43)}, attrs: []ir.Attr{ints("axes", 0, 2, 3)}})
	run(t, tc{typ: "ReduceSum", opset: 13, ins: []input{F(r, 700, 12), C(0)}})
	run(t, tc{typ: "ReduceSumSquare", opset: 13, ins: []input{F(r, 2, 5, 30, 31)}, attrs: []ir.Attr{ints("axes", 0, 2, 3), intA("keepdims", 0)}})
	run(t, tc{typ: "ReduceMax", opset: 13, ins: []input{F(r, 3, 4, 29, 37)}, attrs: []ir.Attr{ints("axes", 0, 2, 3)}})
	run(t, tc{typ: "ReduceMin", opset: 13, ins: []input{F(r, 3, 4, 29, 37)}, attrs: []ir.Attr{ints("axes", 0, 2, 3)}})
	run(t, tc{typ: "GlobalAveragePool", ins: []input{F(r, 1, 3, 40, 40)}})
	run(t, tc{typ: "ReduceSum", opset: 13, ins: []input{F(r, 4, 33, 5), C(1)}})
	run(t, tc{typ: "ReduceSum", opset: 13, ins: []input{F(r, 4, 33, 5), C(0, 2)}, attrs: []ir.Attr{intA("keepdims", 0)}})
	run(t, tc{typ: "ReduceSum", opset: 13, ins: []input{F(r, 3, 7)}})
	run(t, tc{typ: "ReduceMean", opset: 13, ins: []input{F(r, 6, 5, 9)}, attrs: []ir.Attr{ints("axes", -1)}})
	run(t, tc{typ: "ReduceMean", opset: 13, ins: []input{F(r, 6, 5, 9)}, attrs: []ir.Attr{ints("axes", 0, 1), intA("keepdims", 0)}})
	run(t, tc{typ: "ReduceMax", opset: 13, ins: []input{F(r, 6, 5, 9)}, attrs: []ir.Attr{ints("axes", 1)}})
	run(t, tc{typ: "ReduceMin", opset: 13, ins: []input{F(r, 6, 5, 9)}, attrs: []ir.Attr{ints("axes", 2)}})
	run(t, tc{typ: "ReduceSumSquare", opset: 13, ins: []input{F(r, 6, 5, 9)}, attrs: []ir.Attr{ints("axes", 0)}})
	run(t, tc{typ: "GlobalAveragePool", ins: []input{F(r, 2, 5, 7, 3)}})
	run(t, tc{typ: "GlobalMaxPool", ins: []input{F(r, 2, 5, 7, 3)}})
	for _, typ := range []string{"Softmax", "LogSoftmax"} {
		run(t, tc{typ: typ, opset: 13, ins: []input{F(r, 3, 10, 7)}})
		run(t, tc{typ: typ, opset: 13, ins: []input{F(r, 3, 10, 7)}, attrs: []ir.Attr{intA("axis", 1)}})
		run(t, tc{typ: typ, opset: 11, ins: []input{F(r, 3, 10, 7)}}) // coerced to (3, 70)
	}
	run(t, tc{typ: "LayerNormalization", ins: []input{F(r, 3, 5, 16), F(r, 16), F(r, 16)}, outs: []string{"y", "mean", "inv"}})
	run(t, tc{typ: "LayerNormalization", ins: []input{F(r, 3, 5, 6), F(r, 5, 6)}, attrs: []ir.Attr{intA("axis", 1)}})
	bn := func(c int64) []input {
		v := Pos(r, c)
		return []input{F(r, 3, c, 5, 7), F(r, c), F(r, c), F(r, c), v}
	}
	run(t, tc{typ: "BatchNormalization", opset: 15, ins: bn(6), outs: []string{"y", "rm", "rv"}, attrs: []ir.Attr{intA("training_mode", 1), flt("momentum", 0.8)}})
	run(t, tc{typ: "BatchNormalization", opset: 15, ins: bn(6)})
	run(t, tc{typ: "BatchNormalization", opset: 9, ins: bn(4), outs: []string{"y", "rm", "rv", "sm", "sv"}})
	// large planes: split statistics (ts_bn_partial) and y one element
	// per thread (ts_bn_apply), in both modes
	big := func(c int64) []input {
		return []input{F(r, 3, c, 23, 29), F(r, c), F(r, c), F(r, c), Pos(r, c)}
	}
	run(t, tc{typ: "BatchNormalization", opset: 15, ins: big(5), outs: []string{"y", "rm", "rv"}, attrs: []ir.Attr{intA("training_mode", 1)}})
	run(t, tc{typ: "BatchNormalization", opset: 9, ins: big(3), outs: []string{"y", "rm", "rv", "sm", "sv"}})
	run(t, tc{typ: "BatchNormalization", opset: 15, ins: big(4)})
}

func TestWindows(t *testing.T) {
	r := rng(4)
	// pools: odd sizes, asymmetric (halo-tile) pads, ceil mode
	run(t, tc{typ: "MaxPool", ins: []input{F(r, 2, 3, 11, 9)}, outs: []string{"y", "idx"}, attrs: []ir.Attr{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)}})
	run(t, tc{typ: "MaxPool", ins: []input{F(r, 2, 3, 10, 9)}, attrs: []ir.Attr{ints("kernel_shape", 3, 2), ints("strides", 2, 2), ints("pads", 0, 1, 1, 0), intA("ceil_mode", 1)}})
	run(t, tc{typ: "MaxPool", ins: []input{F(r, 1, 2, 17)}, attrs: []ir.Attr{ints("kernel_shape", 3), ints("dilations", 2)}})
	run(t, tc{typ: "AveragePool", ins: []input{F(r, 2, 3, 11, 9)}, attrs: []ir.Attr{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)}})
	run(t, tc{typ: "AveragePool", ins: []input{F(r, 2, 3, 11, 9)}, attrs: []ir.Attr{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 0, 0, 1), intA("count_include_pad", 1), intA("ceil_mode", 1)}})
	run(t, tc{typ: "AveragePool", ins: []input{F(r, 1, 2, 4, 5, 6)}, attrs: []ir.Attr{ints("kernel_shape", 2, 2, 2)}})
	// convolutions: im2col + GEMM with the reference's scratch, the
	// same with a scratch of one row block and none (direct), 1×1,
	// grouped, depthwise, strided, dilated, halo pads
	conv := []struct {
		x, w []int64
		b    bool
		a    []ir.Attr
	}{
		{[]int64{2, 3, 9, 11}, []int64{4, 3, 3, 3}, true, []ir.Attr{ints("pads", 1, 1, 1, 1)}},
		{[]int64{2, 4, 10, 9}, []int64{6, 2, 3, 3}, false, []ir.Attr{ints("pads", 0, 1, 2, 0), intA("group", 2), ints("strides", 2, 1)}},
		{[]int64{1, 6, 7, 7}, []int64{6, 1, 3, 3}, true, []ir.Attr{ints("pads", 1, 1, 1, 1), intA("group", 6)}},
		{[]int64{3, 5, 6, 7}, []int64{8, 5, 1, 1}, true, nil},
		{[]int64{1, 3, 13, 12}, []int64{2, 3, 3, 2}, false, []ir.Attr{ints("dilations", 2, 3), ints("strides", 2, 2)}},
		{[]int64{2, 3, 8, 8}, []int64{4, 3, 3, 3}, false, []ir.Attr{str("auto_pad", "SAME_UPPER"), ints("strides", 2, 2)}},
		{[]int64{2, 4, 17}, []int64{5, 4, 4}, true, []ir.Attr{ints("pads", 2, 1)}},
	}
	for _, c := range conv {
		ins := []input{F(r, c.x...), F(r, c.w...)}
		if c.b {
			ins = append(ins, F(r, c.w[0]))
		}
		// several images per im2col (the scratch holds them), then one
		// image at a time (no scratch) in the reference's workspace, in
		// row blocks, and with no workspace (direct)
		run(t, tc{typ: "Conv", ins: ins, attrs: c.a, ws: -1})
		run(t, tc{typ: "Conv", ins: ins, attrs: c.a, ws: -1, scratch: -1})
		run(t, tc{typ: "Conv", ins: ins, attrs: c.a, ws: 4 * 7 * 7 * 5, scratch: -1}) // row blocks
		run(t, tc{typ: "Conv", ins: ins, attrs: c.a, ws: 0})
	}
	// long sums, few outputs: the direct kernel split into parts. A
	// depthwise weight gradient's convolution (channels (group, image)
	// of the input, the output gradient as a 24×24 kernel) and a dense
	// one with a 9×9 kernel and a bias on the direct path
	run(t, tc{typ: "Conv", ins: []input{F(r, 1, 24, 26, 26), F(r, 6, 4, 24, 24)}, attrs: []ir.Attr{intA("group", 6)}})
	run(t, tc{typ: "Conv", ins: []input{F(r, 1, 8, 30, 30), F(r, 2, 8, 9, 9), F(r, 2)}, attrs: []ir.Attr{ints("pads", 1, 2, 0, 1)}, ws: 0})
	convT := []struct {
		x, w []int64
		b    bool
		a    []ir.Attr
	}{
		{[]int64{2, 4, 5, 6}, []int64{4, 3, 3, 3}, true, []ir.Attr{ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)}},
		{[]int64{1, 4, 5, 5}, []int64{4, 2, 2, 3}, false, []ir.Attr{ints("strides", 2, 1), intA("group", 2), ints("output_padding", 1, 0)}},
		{[]int64{2, 3, 7, 6}, []int64{3, 5, 3, 3}, false, []ir.Attr{ints("pads", 0, 1, 1, 0), ints("dilations", 2, 1)}},
		// the GEMM path in blocks of 4 of the 6 output channels (the
		// test's 64 KiB scratch holds 4 channels' columns), with a bias
		{[]int64{2, 4, 20, 20}, []int64{4, 6, 3, 3}, true, []ir.Attr{ints("strides", 2, 2), ints("pads", 1, 0, 0, 1)}},
	}
	for _, c := range convT {
		ins := []input{F(r, c.x...), F(r, c.w...)}
		if c.b {
			ins = append(ins, F(r, c.w[1]))
		}
		run(t, tc{typ: "ConvTranspose", ins: ins, attrs: c.a, ws: -1})
	}
}

func TestMatrixProducts(t *testing.T) {
	r := rng(5)
	run(t, tc{typ: "Gemm", ins: []input{F(r, 5, 7), F(r, 7, 3), F(r, 3)}})
	run(t, tc{typ: "Gemm", ins: []input{F(r, 7, 5), F(r, 3, 7), F(r, 5, 1)}, attrs: []ir.Attr{intA("transA", 1), intA("transB", 1), flt("alpha", 0.5), flt("beta", 2)}})
	run(t, tc{typ: "Gemm", ins: []input{F(r, 4, 6), F(r, 6, 9)}})
	run(t, tc{typ: "MatMul", ins: []input{F(r, 3, 5, 7), F(r, 3, 7, 2)}})
	run(t, tc{typ: "MatMul", ins: []input{F(r, 2, 3, 5, 7), F(r, 7, 4)}})
	run(t, tc{typ: "MatMul", ins: []input{F(r, 2, 1, 5, 7), F(r, 3, 7, 4)}}) // broadcast batch
	run(t, tc{typ: "MatMul", ins: []input{F(r, 7), F(r, 2, 7, 4)}})
}

// stepOpTypes records the op types of the training steps
// TestTrainingSteps planned, for TestZCoverage.
var stepOpTypes = map[string]bool{}

// TestTrainingSteps plans, with package launch, every op of the SGD
// training step of the small zoo models (testdata/onnx) and, when
// exported, of the PyTorch models (testdata/torch, TSPLIT_INTEGRATION):
// each must have a launch list (a covered op type in a covered
// variant); TestZCoverage then checks each type ran in a test case of
// this file. Addresses are placeholders: nothing runs.
func TestTrainingSteps(t *testing.T) {
	paths, _ := filepath.Glob("../../../testdata/onnx/*.onnx")
	if os.Getenv("TSPLIT_INTEGRATION") != "" {
		torch, _ := filepath.Glob("../../../testdata/torch/*.onnx")
		paths = append(paths, torch...)
	}
	if len(paths) == 0 {
		t.Fatal("no models in testdata/onnx")
	}
	refused := map[string]int{}
	for _, p := range paths {
		// The *_gap exports have a symbolic image size too (docs/sft.md).
		m, err := compiler.Import(p, compiler.Options{Batch: 2, Dims: map[string]int64{"height": 32, "width": 32}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "sgd"}); err != nil {
			t.Fatal(err)
		}
		for _, op := range m.Graph.Order() {
			stepOpTypes[op.Type] = true
			lo := &launch.Op{Op: op, Opset: m.Opset(op.Domain), Workspace: 1 << 40, WorkspaceBytes: kernels.WorkspaceBytes(op), Scratch: 1 << 41, ScratchBytes: 8 << 20}
			addr := uint64(1 << 20)
			tensor := func(v *ir.Value) *launch.Tensor {
				if v == nil {
					return nil
				}
				addr += 1 << 20
				return &launch.Tensor{Addr: addr, DType: v.DType, Shape: v.Shape}
			}
			for _, v := range op.Inputs() {
				lo.In = append(lo.In, tensor(v))
			}
			for _, v := range op.Outputs() {
				lo.Out = append(lo.Out, tensor(v))
			}
			lo.Host = func(i int) ([]byte, error) {
				d, err := op.Input(i).Data()
				if err != nil {
					return nil, err
				}
				return d.Raw, nil
			}
			if _, err := launch.Plan(lo); err != nil {
				refused[err.Error()[strings.Index(err.Error(), "cuda: "):]]++
				if refused[err.Error()[strings.Index(err.Error(), "cuda: "):]] == 1 {
					t.Errorf("%s: %v", filepath.Base(p), err)
				}
			}
		}
	}
}

// TestZCoverage runs after the others (go test runs tests in source
// order): every kernel of list.h ran at least once, within the bound,
// and the table of worst errors is logged for the docs.
func TestZCoverage(t *testing.T) {
	if got := int(unsafe.Sizeof(launch.Args{})); got != ArgsSize {
		t.Fatalf("launch.Args is %d bytes, ts_args %d", got, ArgsSize)
	}
	if testing.Short() || len(opErr) == 0 {
		t.Skip("needs the other tests of the package to have run")
	}
	var lines []string
	for _, k := range Kernels() {
		e, ok := kernelErr[k]
		if !ok {
			t.Errorf("kernel %s never ran", k)
			continue
		}
		lines = append(lines, fmt.Sprintf("%-24s %.2e", k, e))
	}
	sort.Strings(lines)
	t.Logf("worst relative error per kernel:\n%s", strings.Join(lines, "\n"))
	for typ := range stepOpTypes {
		if _, ok := opErr[typ]; !ok {
			t.Errorf("op type %s of a training step has no test case", typ)
		}
	}
	for _, typ := range launch.Types() {
		if _, ok := opErr[typ]; !ok {
			t.Errorf("op type %s has a launch plan but no test case", typ)
		}
	}
}

// TestPTXKernels: the committed PTX defines exactly the kernels the
// host launcher knows (list.h).
func TestPTXKernels(t *testing.T) {
	got, host := ptx.Kernels(), Kernels()
	slices.Sort(got)
	slices.Sort(host)
	if !slices.Equal(got, host) {
		t.Fatalf("the PTX defines %v, the host launcher (list.h) knows %v", got, host)
	}
}

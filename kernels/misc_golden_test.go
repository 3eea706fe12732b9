package kernels

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

// A bit-exact record of what the kernels compute: every case below runs
// one op on seeded inputs for each of a list of element types, and the
// test compares a hash of every output's bytes (or the error text) with
// testdata/kernel_outputs.golden. The tolerance-based tests against
// ONNX Runtime and PyTorch would not see a rounding change; this one
// sees any changed bit, so a refactor of the kernels (the generic
// element-type dispatch, say) can show it changed nothing.
//
// The golden holds amd64 results: on other architectures the Go
// compiler fuses multiply-adds, which changes float results legitimately.
// Float32 products go through the compiled-in BLAS, or package sgemm's
// kernel on processors with AVX-512; their results are compared where
// gonum computes them (the default build, TSPLIT_SGEMM=blas on such a
// processor) only, since OpenBLAS picks its kernels by CPU model.
// Rewrite with `TSPLIT_SGEMM=blas go test ./kernels -run
// TestKernelOutputsGolden -update` (in the default build).

var ktUpdate = flag.Bool("update", false, "rewrite the golden files of package kernels")

const ktGoldenFile = "testdata/kernel_outputs.golden"

// ktGCase is one op run on each of its element types.
type ktGCase struct {
	name  string
	typ   string
	opset int64
	nOut  int
	dts   []ir.DType
	attrs []ir.Attr
	ins   func(dt ir.DType) []ktIn
	blas  bool // float32 runs go through sgemm
}

// ktKind selects the values ktG generates.
type ktKind int

const (
	ktMixed   ktKind = iota // both signs; small integers
	ktSpecial               // ktMixed with NaN, ±Inf and -0 in float tensors
	ktPos                   // strictly positive (divisors, variances, exponents)
)

// ktG is a tensor of dt and shape with deterministic values of kind
// drawn from seed.
func ktG(dt ir.DType, shape []int64, seed uint64, kind ktKind) *Tensor {
	t, err := NewTensor(dt, ir.Shape(shape))
	if err != nil {
		panic(err)
	}
	x := seed*0x9e3779b97f4a7c15 + 12345
	next := func() uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}
	for i := 0; i < t.Len(); i++ {
		r := next()
		// A float with more bits than float32 holds, in [-3, 3).
		f := float64(r%6000000)/1000000 - 3
		n := int64(r%12) - 6 // integers in [-6, 6)
		if kind == ktPos {
			f = 0.25 + float64(r%3750000)/1000000
			n = int64(r%4) + 1
		}
		if kind == ktSpecial && t.Len() >= 8 && i%5 == 2 {
			f = specials[(i/5)%len(specials)]
		}
		switch dt {
		case ir.Float:
			viewAs[float32](t)[i] = float32(f)
		case ir.Double:
			viewAs[float64](t)[i] = f
		case ir.Float16:
			viewAs[uint16](t)[i] = f32ToHalf(float32(f))
		case ir.BFloat16:
			viewAs[uint16](t)[i] = f32ToBF16(float32(f))
		case ir.Int64:
			viewAs[int64](t)[i] = n
		case ir.Int32:
			viewAs[int32](t)[i] = int32(n)
		case ir.Int16:
			viewAs[int16](t)[i] = int16(n)
		case ir.Int8:
			viewAs[int8](t)[i] = int8(n)
		case ir.Uint8:
			t.Data[i] = uint8(n + 6)
		case ir.Uint16:
			viewAs[uint16](t)[i] = uint16(n + 6)
		case ir.Uint32:
			viewAs[uint32](t)[i] = uint32(n + 6)
		case ir.Uint64:
			viewAs[uint64](t)[i] = uint64(n + 6)
		case ir.Bool:
			t.Data[i] = b2byte(r%2 == 1)
		default:
			panic("ktG: no values for " + dt.String())
		}
	}
	return t
}

// ktGIdx is an int32 or int64 index tensor with values in [-dim, dim).
func ktGIdx(dt ir.DType, shape []int64, seed uint64, dim int64) *Tensor {
	t := ktG(ir.Int64, shape, seed, ktPos)
	v := viewAs[int64](t)
	x := seed + 77
	for i := range v {
		x = x*6364136223846793005 + 1442695040888963407
		v[i] = int64(x>>33)%(2*dim) - dim
	}
	if dt == ir.Int64 {
		return t
	}
	out := ktT[int32](ir.Int32, shape, nil)
	for i, k := range v {
		viewAs[int32](out)[i] = int32(k)
	}
	return out
}

// ktScalar is a scalar of dt holding v (converted as Cast would).
func ktScalar(dt ir.DType, v float64) *Tensor {
	t := ktT[byte](dt, nil, nil)
	ewCastFrom([]float64{v}, t)
	return t
}

var (
	ktGNum   = numTypes
	ktGFloat = []ir.DType{ir.Float, ir.Double}
	ktGBytes = []ir.DType{ir.Uint8, ir.Bool, ir.Float16, ir.Int16, ir.Float, ir.Double, ir.Int64}
	// ktGOff are types most kernels refuse: their errors are recorded.
	ktGOff = []ir.DType{ir.Bool, ir.Float16}
)

func ktJoin(lists ...[]ir.DType) []ir.DType {
	var out []ir.DType
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// ktGCases lists the recorded cases.
func ktGCases() []ktGCase {
	var cs []ktGCase
	add := func(c ktGCase) {
		if c.opset == 0 {
			c.opset = 18
		}
		if c.nOut == 0 {
			c.nOut = 1
		}
		cs = append(cs, c)
	}
	bin := func(sa, sb []int64, kb ktKind) func(ir.DType) []ktIn {
		return func(dt ir.DType) []ktIn {
			return []ktIn{ktR(ktG(dt, sa, 1, ktSpecial)), ktR(ktG(dt, sb, 2, kb))}
		}
	}
	shapes := []struct {
		name   string
		sa, sb []int64
	}{
		{"vv", ktS(4, 6), ktS(4, 6)},
		{"vs", ktS(2, 3, 5), ktS(3, 1)},
		{"sv", ktS(3, 1), ktS(2, 3, 5)},
		{"strided", ktS(2, 1, 5), ktS(1, 3, 1)},
		{"big", ktS(160, 128), ktS(128)},
	}
	// ew_binary
	for _, op := range []string{"Add", "Sub", "Mul", "Div"} {
		for _, s := range shapes {
			add(ktGCase{name: op + "/" + s.name, typ: op, dts: ktJoin(ktGNum, ktGOff), ins: bin(s.sa, s.sb, ktPos)})
		}
	}
	add(ktGCase{name: "Div/zero", typ: "Div", dts: ktGNum, ins: bin(ktS(3, 4), ktS(4), ktMixed)})
	add(ktGCase{name: "Mod/fmod0", typ: "Mod", dts: ktGNum, ins: bin(ktS(3, 4), ktS(4), ktPos)})
	add(ktGCase{name: "Mod/fmod1", typ: "Mod", dts: ktGNum, attrs: []ir.Attr{irtest.Int("fmod", 1)}, ins: bin(ktS(3, 4), ktS(3, 1), ktPos)})
	add(ktGCase{name: "Pow/same", typ: "Pow", dts: ktJoin(ktGNum, ktGOff), ins: bin(ktS(3, 4), ktS(4), ktPos)})
	for _, e := range []float64{1, 2, 0.5} {
		add(ktGCase{name: fmt.Sprintf("Pow/scalar%v", e), typ: "Pow", dts: ktGFloat, ins: func(dt ir.DType) []ktIn {
			return []ktIn{ktR(ktG(dt, ktS(3, 7), 3, ktSpecial)), ktR(ktScalar(dt, e))}
		}})
	}
	for _, et := range []ir.DType{ir.Float, ir.Int64, ir.Int32, ir.Uint8, ir.Uint16} {
		add(ktGCase{name: "Pow/exp-" + et.String(), typ: "Pow", dts: ktGNum, ins: func(dt ir.DType) []ktIn {
			return []ktIn{ktR(ktG(dt, ktS(2, 5), 4, ktMixed)), ktR(ktG(et, ktS(5), 5, ktPos))}
		}})
	}
	for _, op := range []string{"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"} {
		add(ktGCase{name: op, typ: op, dts: ktJoin(ktGNum, []ir.DType{ir.Bool, ir.Float16}), ins: bin(ktS(2, 3, 4), ktS(3, 1), ktMixed)})
	}
	for _, op := range []string{"And", "Or", "Xor"} {
		add(ktGCase{name: op, typ: op, dts: []ir.DType{ir.Bool, ir.Float}, ins: bin(ktS(2, 3, 4), ktS(4), ktMixed)})
	}
	for _, op := range []string{"Sum", "Mean", "Max", "Min"} {
		add(ktGCase{name: op, typ: op, dts: ktJoin(ktGNum, ktGOff), ins: func(dt ir.DType) []ktIn {
			return []ktIn{ktR(ktG(dt, ktS(3, 1), 6, ktSpecial)), ktR(ktG(dt, ktS(2, 3, 4), 7, ktMixed)), ktR(ktG(dt, ktS(4), 8, ktMixed))}
		}})
	}
	add(ktGCase{name: "Where", typ: "Where", dts: ktGBytes, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(ir.Bool, ktS(2, 1, 4), 9, ktMixed)), ktR(ktG(dt, ktS(3, 4), 10, ktMixed)), ktR(ktG(dt, ktS(2, 3, 1), 11, ktMixed))}
	}})

	// ew_unary
	unary := func(shape []int64) func(ir.DType) []ktIn {
		return func(dt ir.DType) []ktIn { return []ktIn{ktR(ktG(dt, shape, 12, ktSpecial))} }
	}
	for _, name := range ktSortedKeys(ewUnaryOps) {
		// Opset 20: Gelu's first.
		add(ktGCase{name: name, typ: name, opset: 20, dts: ktJoin(ktGFloat, []ir.DType{ir.Int64, ir.Int8, ir.Uint8}), ins: unary(ktS(4, 9))})
	}
	add(ktGCase{name: "Relu/big", typ: "Relu", dts: ktGFloat, ins: unary(ktS(200, 100))})
	add(ktGCase{name: "Tanh/big", typ: "Tanh", dts: ktGFloat, ins: unary(ktS(200, 100))})
	add(ktGCase{name: "LeakyRelu/alpha", typ: "LeakyRelu", dts: ktGFloat, attrs: []ir.Attr{irtest.Float("alpha", 0.3)}, ins: unary(ktS(4, 9))})
	add(ktGCase{name: "Gelu/tanh", typ: "Gelu", dts: ktGFloat, opset: 20, attrs: []ir.Attr{irtest.String("approximate", "tanh")}, ins: unary(ktS(4, 9))})
	add(ktGCase{name: "Not", typ: "Not", dts: []ir.DType{ir.Bool, ir.Float}, ins: unary(ktS(3, 5))})
	add(ktGCase{name: "IsNaN", typ: "IsNaN", dts: ktJoin(ktGFloat, ktGOff), ins: unary(ktS(4, 9))})
	add(ktGCase{name: "IsInf", typ: "IsInf", dts: ktJoin(ktGFloat, ktGOff), ins: unary(ktS(4, 9))})
	add(ktGCase{name: "IsInf/neg", typ: "IsInf", dts: ktGFloat, attrs: []ir.Attr{irtest.Int("detect_positive", 0)}, ins: unary(ktS(4, 9))})
	add(ktGCase{name: "PRelu", typ: "PRelu", dts: ktJoin(ktGNum, ktGOff), ins: bin(ktS(2, 3, 4), ktS(3, 1), ktMixed)})
	add(ktGCase{name: "Clip/inputs", typ: "Clip", dts: ktJoin(ktGNum, ktGOff), ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(4, 9), 13, ktSpecial)), ktR(ktScalar(dt, -1)), ktR(ktScalar(dt, 2))}
	}})
	add(ktGCase{name: "Clip/min-only", typ: "Clip", dts: ktGNum, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(4, 9), 14, ktSpecial)), ktR(ktScalar(dt, 1))}
	}})
	add(ktGCase{name: "Clip/max-only", typ: "Clip", dts: ktGNum, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(4, 9), 15, ktSpecial)), {}, ktR(ktScalar(dt, 1))}
	}})
	add(ktGCase{name: "Clip/none", typ: "Clip", dts: ktGNum, ins: unary(ktS(4, 9))})
	add(ktGCase{name: "Clip/attrs", typ: "Clip", opset: 6, dts: ktGFloat,
		attrs: []ir.Attr{irtest.Float("min", -0.5), irtest.Float("max", 1.25)}, ins: unary(ktS(4, 9))})

	// ew_cast
	for _, to := range castTypes {
		add(ktGCase{name: "Cast/to-" + to.String(), typ: "Cast", dts: ktJoin(castTypes, []ir.DType{ir.Float8E4M3FN}),
			attrs: []ir.Attr{irtest.Int("to", int64(to))}, ins: func(dt ir.DType) []ktIn {
				if dt == ir.Float8E4M3FN {
					t := ktT[byte](dt, ktS(4, 9), nil)
					for i := range t.Data {
						t.Data[i] = byte(i * 7)
					}
					return []ktIn{ktR(t)}
				}
				return []ktIn{ktR(ktG(dt, ktS(4, 9), 16, ktSpecial))}
			}})
	}
	add(ktGCase{name: "Cast/big", typ: "Cast", dts: []ir.DType{ir.Float16, ir.BFloat16, ir.Bool, ir.Double},
		attrs: []ir.Attr{irtest.Int("to", int64(ir.Float16))}, ins: unary(ktS(300, 10))})
	add(ktGCase{name: "CastLike", typ: "CastLike", dts: castTypes, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(4, 9), 17, ktSpecial)), ktR(ktG(ir.Int16, ktS(1), 18, ktMixed))}
	}})

	// reductions
	axes := func(a ...int64) ktIn { return ktC(ktI64(ktS(int64(len(a))), a...)) }
	for _, op := range ktSortedKeys(redOps) {
		for _, ax := range []struct {
			name string
			in   []int64
		}{{"mid", []int64{1}}, {"last", []int64{2}}, {"outer", []int64{0, 2}}, {"all", nil}} {
			add(ktGCase{name: op + "/" + ax.name, typ: op, dts: ktJoin(ktGNum, ktGOff), ins: func(dt ir.DType) []ktIn {
				x := ktR(ktG(dt, ktS(3, 4, 5), 19, ktSpecial))
				if ax.in == nil {
					return []ktIn{x}
				}
				return []ktIn{x, axes(ax.in...)}
			}})
		}
		add(ktGCase{name: op + "/noop", typ: op, dts: ktGFloat, attrs: []ir.Attr{irtest.Int("noop_with_empty_axes", 1)}, ins: unary(ktS(3, 4))})
		for _, ax := range []int64{0, 1} {
			add(ktGCase{name: fmt.Sprintf("%s/big%d", op, ax), typ: op, dts: []ir.DType{ir.Float, ir.Int32},
				attrs: []ir.Attr{irtest.Int("keepdims", 0)}, ins: func(dt ir.DType) []ktIn {
					return []ktIn{ktR(ktG(dt, ktS(40, 500), 20, ktMixed)), axes(ax)}
				}})
		}
	}
	add(ktGCase{name: "ReduceSum/opset11", typ: "ReduceSum", opset: 11, dts: ktGFloat,
		attrs: []ir.Attr{irtest.Ints("axes", 0, -1)}, ins: unary(ktS(3, 4, 5))})
	for _, op := range []string{"ArgMax", "ArgMin"} {
		for _, last := range []int64{0, 1} {
			add(ktGCase{name: fmt.Sprintf("%s/last%d", op, last), typ: op, dts: ktJoin(ktGNum, ktGOff),
				attrs: []ir.Attr{irtest.Int("axis", 1), irtest.Int("select_last_index", last)}, ins: unary(ktS(3, 4, 5))})
		}
		add(ktGCase{name: op + "/big", typ: op, dts: ktGFloat, attrs: []ir.Attr{irtest.Int("axis", 0)}, ins: unary(ktS(30, 700))})
	}
	add(ktGCase{name: "Hardmax/13", typ: "Hardmax", opset: 13, dts: ktJoin(ktGFloat, []ir.DType{ir.Int32}), ins: unary(ktS(3, 4, 5))})
	add(ktGCase{name: "Hardmax/11", typ: "Hardmax", opset: 11, dts: ktGFloat, attrs: []ir.Attr{irtest.Int("axis", 1)}, ins: unary(ktS(3, 4, 5))})
	add(ktGCase{name: "InstanceNormalization", typ: "InstanceNormalization", dts: ktJoin(ktGFloat, ktGOff), ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(2, 3, 4, 5), 21, ktMixed)), ktR(ktG(dt, ktS(3), 22, ktMixed)), ktR(ktG(dt, ktS(3), 23, ktMixed))}
	}})

	// indexing
	for _, it := range []ir.DType{ir.Int64, ir.Int32} {
		add(ktGCase{name: "Gather/" + it.String(), typ: "Gather", dts: ktGBytes, attrs: []ir.Attr{irtest.Int("axis", 1)}, ins: func(dt ir.DType) []ktIn {
			return []ktIn{ktR(ktG(dt, ktS(3, 5, 2), 24, ktMixed)), ktR(ktGIdx(it, ktS(2, 3), 25, 5))}
		}})
		add(ktGCase{name: "GatherElements/" + it.String(), typ: "GatherElements", dts: ktGBytes, attrs: []ir.Attr{irtest.Int("axis", 1)}, ins: func(dt ir.DType) []ktIn {
			return []ktIn{ktR(ktG(dt, ktS(3, 5), 26, ktMixed)), ktR(ktGIdx(it, ktS(3, 4), 27, 5))}
		}})
		for _, red := range []string{"none", "add", "mul", "max", "min"} {
			add(ktGCase{name: "ScatterElements/" + it.String() + "/" + red, typ: "ScatterElements", dts: ktJoin(ktGNum, ktGOff),
				attrs: []ir.Attr{irtest.Int("axis", 1), irtest.String("reduction", red)}, ins: func(dt ir.DType) []ktIn {
					return []ktIn{ktR(ktG(dt, ktS(3, 5), 28, ktMixed)), ktR(ktGIdx(it, ktS(3, 4), 29, 5)), ktR(ktG(dt, ktS(3, 4), 30, ktMixed))}
				}})
		}
	}
	for _, red := range []string{"none", "add", "mul", "max", "min"} {
		add(ktGCase{name: "ScatterND/" + red, typ: "ScatterND", dts: ktJoin(ktGNum, ktGOff),
			attrs: []ir.Attr{irtest.String("reduction", red)}, ins: func(dt ir.DType) []ktIn {
				return []ktIn{ktR(ktG(dt, ktS(4, 3), 31, ktMixed)), ktR(ktGIdx(ir.Int64, ktS(3, 1), 32, 4)), ktR(ktG(dt, ktS(3, 3), 33, ktMixed))}
			}})
	}
	add(ktGCase{name: "OneHot", typ: "OneHot", dts: ktJoin(ktGNum, ktGOff), attrs: []ir.Attr{irtest.Int("axis", 1)}, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(2, 3), 34, ktMixed)), ktC(ktI64(nil, 5)), ktR(ktF32(ktS(2), -1, 2.5))}
	}})

	// misc
	for _, r := range [][3]float64{{1, 10, 2}, {10, 1, -3}, {0.5, 3.7, 0.3}} {
		add(ktGCase{name: fmt.Sprintf("Range/%v", r), typ: "Range", dts: ktJoin(ktGNum, ktGOff), ins: func(dt ir.DType) []ktIn {
			return []ktIn{ktC(ktScalar(dt, r[0])), ktC(ktScalar(dt, r[1])), ktC(ktScalar(dt, r[2]))}
		}})
	}
	add(ktGCase{name: "Dropout/train", typ: "Dropout", opset: 13, nOut: 2, dts: ktJoin(ktGFloat, ktGOff),
		attrs: []ir.Attr{irtest.Int("seed", 7)}, ins: func(dt ir.DType) []ktIn {
			return []ktIn{ktR(ktG(dt, ktS(20, 1000), 35, ktMixed)), ktC(ktF32(nil, 0.3)), ktC(ktBool(nil, true))}
		}})
	add(ktGCase{name: "Dropout/infer", typ: "Dropout", opset: 13, nOut: 2, dts: ktGFloat, ins: unary(ktS(3, 4))})

	// data movement, by element width
	add(ktGCase{name: "Transpose/3d", typ: "Transpose", dts: ktGBytes, attrs: []ir.Attr{irtest.Ints("perm", 2, 0, 1)}, ins: unary(ktS(2, 3, 4))})
	add(ktGCase{name: "Transpose/2d", typ: "Transpose", dts: ktGBytes, attrs: []ir.Attr{irtest.Ints("perm", 1, 0)}, ins: unary(ktS(33, 40))})
	add(ktGCase{name: "Slice", typ: "Slice", dts: ktGBytes, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(4, 5), 36, ktMixed)), axes(1, -1), axes(3, -6), axes(0, 1), axes(1, -2)}
	}})
	add(ktGCase{name: "Expand", typ: "Expand", dts: ktGBytes, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(3, 1), 37, ktMixed)), axes(2, 3, 4)}
	}})
	add(ktGCase{name: "Tile", typ: "Tile", dts: ktGBytes, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(2, 3), 38, ktMixed)), axes(2, 2)}
	}})
	for _, mode := range []string{"constant", "reflect", "edge", "wrap"} {
		add(ktGCase{name: "Pad/" + mode, typ: "Pad", opset: 19, dts: ktGBytes, attrs: []ir.Attr{irtest.String("mode", mode)}, ins: func(dt ir.DType) []ktIn {
			ins := []ktIn{ktR(ktG(dt, ktS(3, 4), 39, ktMixed)), axes(1, 2, 2, 1)}
			if mode == "constant" {
				ins = append(ins, ktR(ktG(dt, nil, 40, ktPos)))
			}
			return ins
		}})
	}
	add(ktGCase{name: "Pad/attr", typ: "Pad", opset: 2, dts: ktGBytes,
		attrs: []ir.Attr{irtest.Ints("pads", 1, 0, 0, 2), irtest.Float("value", 1.5)}, ins: unary(ktS(3, 4))})
	add(ktGCase{name: "Concat", typ: "Concat", dts: ktGBytes, attrs: []ir.Attr{irtest.Int("axis", 1)}, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(2, 3), 41, ktMixed)), ktR(ktG(dt, ktS(2, 2), 42, ktMixed))}
	}})
	add(ktGCase{name: "Split", typ: "Split", nOut: 2, dts: ktGBytes, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(6, 4), 43, ktMixed)), axes(2, 4)}
	}})

	// nn
	nnTypes := ktJoin(ktGFloat, []ir.DType{ir.Float16})
	add(ktGCase{name: "Conv", typ: "Conv", dts: nnTypes, blas: true,
		attrs: []ir.Attr{irtest.Ints("pads", 1, 1, 1, 1), irtest.Ints("strides", 2, 2)}, ins: func(dt ir.DType) []ktIn {
			return []ktIn{ktR(ktG(dt, ktS(2, 3, 7, 7), 44, ktMixed)), ktR(ktG(dt, ktS(4, 3, 3, 3), 45, ktMixed)), ktR(ktG(dt, ktS(4), 46, ktMixed))}
		}})
	add(ktGCase{name: "Conv/depthwise", typ: "Conv", dts: nnTypes, blas: true,
		attrs: []ir.Attr{irtest.Int("group", 4), irtest.Ints("pads", 1, 1, 1, 1)}, ins: func(dt ir.DType) []ktIn {
			return []ktIn{ktR(ktG(dt, ktS(1, 4, 6, 6), 47, ktMixed)), ktR(ktG(dt, ktS(4, 1, 3, 3), 48, ktMixed))}
		}})
	add(ktGCase{name: "ConvTranspose", typ: "ConvTranspose", dts: nnTypes, blas: true,
		attrs: []ir.Attr{irtest.Ints("strides", 2, 2), irtest.Ints("pads", 1, 1, 1, 1), irtest.Ints("output_padding", 1, 1)}, ins: func(dt ir.DType) []ktIn {
			return []ktIn{ktR(ktG(dt, ktS(1, 3, 4, 4), 49, ktMixed)), ktR(ktG(dt, ktS(3, 2, 3, 3), 50, ktMixed)), ktR(ktG(dt, ktS(2), 51, ktMixed))}
		}})
	add(ktGCase{name: "Gemm", typ: "Gemm", dts: nnTypes, blas: true,
		attrs: []ir.Attr{irtest.Int("transB", 1), irtest.Float("alpha", 0.5), irtest.Float("beta", 2)}, ins: func(dt ir.DType) []ktIn {
			return []ktIn{ktR(ktG(dt, ktS(3, 4), 52, ktMixed)), ktR(ktG(dt, ktS(5, 4), 53, ktMixed)), ktR(ktG(dt, ktS(5), 54, ktMixed))}
		}})
	add(ktGCase{name: "MatMul", typ: "MatMul", dts: nnTypes, blas: true, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(2, 1, 3, 4), 55, ktMixed)), ktR(ktG(dt, ktS(3, 4, 5), 56, ktMixed))}
	}})
	bn := func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(2, 3, 4, 4), 57, ktMixed)), ktR(ktG(dt, ktS(3), 58, ktMixed)), ktR(ktG(dt, ktS(3), 59, ktMixed)),
			ktR(ktG(dt, ktS(3), 60, ktMixed)), ktR(ktG(dt, ktS(3), 61, ktPos))}
	}
	add(ktGCase{name: "BatchNormalization/infer", typ: "BatchNormalization", opset: 15, dts: nnTypes, ins: bn})
	add(ktGCase{name: "BatchNormalization/train", typ: "BatchNormalization", opset: 15, nOut: 3, dts: ktGFloat,
		attrs: []ir.Attr{irtest.Int("training_mode", 1)}, ins: bn})
	add(ktGCase{name: "BatchNormalization/9", typ: "BatchNormalization", opset: 9, nOut: 5, dts: ktGFloat, ins: bn})
	add(ktGCase{name: "LayerNormalization", typ: "LayerNormalization", opset: 17, nOut: 3, dts: nnTypes, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(2, 3, 4), 62, ktMixed)), ktR(ktG(dt, ktS(4), 63, ktMixed)), ktR(ktG(dt, ktS(4), 64, ktMixed))}
	}})
	add(ktGCase{name: "LayerNormalization/bcast", typ: "LayerNormalization", opset: 17, dts: ktGFloat, attrs: []ir.Attr{irtest.Int("axis", 1)}, ins: func(dt ir.DType) []ktIn {
		return []ktIn{ktR(ktG(dt, ktS(2, 3, 4), 65, ktMixed)), ktR(ktG(dt, ktS(4), 66, ktMixed))}
	}})
	pool := unary(ktS(1, 2, 5, 5))
	add(ktGCase{name: "MaxPool", typ: "MaxPool", opset: 12, nOut: 2, dts: nnTypes,
		attrs: []ir.Attr{irtest.Ints("kernel_shape", 2, 2), irtest.Ints("strides", 2, 2), irtest.Int("ceil_mode", 1)}, ins: pool})
	add(ktGCase{name: "MaxPool/order1", typ: "MaxPool", opset: 12, nOut: 2, dts: ktGFloat,
		attrs: []ir.Attr{irtest.Ints("kernel_shape", 3, 3), irtest.Ints("pads", 1, 1, 1, 1), irtest.Int("storage_order", 1)}, ins: pool})
	for _, inc := range []int64{0, 1} {
		add(ktGCase{name: fmt.Sprintf("AveragePool/pad%d", inc), typ: "AveragePool", opset: 19, dts: nnTypes,
			attrs: []ir.Attr{irtest.Ints("kernel_shape", 3, 3), irtest.Ints("pads", 1, 1, 1, 1), irtest.Int("count_include_pad", inc)}, ins: pool})
	}
	for _, op := range []string{"GlobalAveragePool", "GlobalMaxPool"} {
		add(ktGCase{name: op, typ: op, dts: nnTypes, ins: unary(ktS(2, 3, 4, 4))})
	}
	add(ktGCase{name: "Softmax/13", typ: "Softmax", opset: 13, dts: nnTypes, ins: unary(ktS(2, 3, 5))})
	add(ktGCase{name: "Softmax/11", typ: "Softmax", opset: 11, dts: ktGFloat, attrs: []ir.Attr{irtest.Int("axis", 1)}, ins: unary(ktS(2, 3, 5))})
	add(ktGCase{name: "LogSoftmax/13", typ: "LogSoftmax", opset: 13, dts: ktGFloat, attrs: []ir.Attr{irtest.Int("axis", 1)}, ins: unary(ktS(2, 3, 5))})
	return cs
}

func ktSortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// ktGRun runs a case on one element type and describes the outcome:
// each output's type, shape and the start of the sha256 of its bytes, or
// the error.
func ktGRun(c ktGCase, dt ir.DType) string {
	ins := c.ins(dt)
	op, err := ktBuildErr(c.opset, c.typ, ins, c.nOut, c.attrs...)
	if err != nil {
		return "infer: " + err.Error()
	}
	ts := make([]*Tensor, len(ins))
	for i, in := range ins {
		ts[i] = in.t
	}
	var refused string
	if err := Supported(op); err != nil {
		// Run the kernel anyway: its own checks are recorded too.
		refused = "refused: " + err.Error() + "; "
	}
	out, err := evalKernel(op, c.opset, ts, 3)
	if err != nil {
		return refused + "error: " + err.Error()
	}
	var parts []string
	for _, o := range out {
		if o == nil {
			parts = append(parts, "-")
			continue
		}
		sum := sha256.Sum256(o.Data)
		parts = append(parts, fmt.Sprintf("%v%v %x", o.DType, o.Shape, sum[:8]))
	}
	return refused + strings.Join(parts, "; ")
}

// ktGLines runs every case; skipBLAS leaves out the float32 runs that go
// through sgemm (their key maps to "").
func ktGLines(skipBLAS bool) (keys []string, lines map[string]string) {
	saved := Threads
	Threads = 2 // fixed, so parallel splits are the same on every machine
	defer func() { Threads = saved }()
	lines = map[string]string{}
	for _, c := range ktGCases() {
		for _, dt := range c.dts {
			k := c.name + " " + dt.String()
			if _, dup := lines[k]; dup {
				panic("duplicate golden case " + k)
			}
			keys = append(keys, k)
			if skipBLAS && c.blas && dt == ir.Float {
				lines[k] = ""
				continue
			}
			lines[k] = ktGRun(c, dt)
		}
	}
	return keys, lines
}

func TestKernelOutputsGolden(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the golden holds amd64 results; %s may fuse multiply-adds", runtime.GOARCH)
	}
	skipBLAS := SgemmName() != "gonum"
	keys, got := ktGLines(skipBLAS)
	want := map[string]string{}
	if raw, err := os.ReadFile(ktGoldenFile); err == nil {
		for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
			k, v, ok := strings.Cut(l, ": ")
			if !ok {
				t.Fatalf("%s: malformed line %q", ktGoldenFile, l)
			}
			want[k] = v
		}
	} else if !*ktUpdate {
		t.Fatal(err)
	}
	skipped := 0
	for _, k := range keys {
		if got[k] == "" {
			got[k] = want[k] // not computed in this build: keep the recorded line
			skipped++
		}
	}
	if skipped > 0 {
		t.Logf("%d float32 BLAS cases not compared: this run's sgemm (%s) is not the golden's (gonum)", skipped, SgemmName())
	}
	if *ktUpdate {
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s: %s\n", k, got[k])
		}
		if err := os.WriteFile(ktGoldenFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	bad := 0
	for _, k := range keys {
		if got[k] != want[k] {
			if bad++; bad <= 20 {
				t.Errorf("%s:\n got  %s\n want %s", k, got[k], want[k])
			}
		}
	}
	if len(want) != len(keys) {
		t.Errorf("the golden has %d cases, the test %d: rerun with -update", len(want), len(keys))
	}
	if bad > 20 {
		t.Errorf("... %d differences in all", bad)
	}
}

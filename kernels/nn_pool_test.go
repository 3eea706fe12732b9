package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

type poolCase struct {
	n, c         int
	in, k, s, d  []int
	pads         []int
	autoPad      string
	ceil         bool
	includePad   bool
	storageOrder int
}

func (pc poolCase) String() string {
	return fmt.Sprintf("N%d C%d in%v k%v s%v d%v pads%v auto=%q ceil=%v incl=%v so=%d",
		pc.n, pc.c, pc.in, pc.k, pc.s, pc.d, pc.pads, pc.autoPad, pc.ceil, pc.includePad, pc.storageOrder)
}

func (pc poolCase) attrs(avg bool) []ir.Attr {
	a := []ir.Attr{nnAInts("kernel_shape", i64s(pc.k)...), nnAInts("strides", i64s(pc.s)...), nnAInts("dilations", i64s(pc.d)...)}
	if pc.pads != nil {
		a = append(a, nnAInts("pads", i64s(pc.pads)...))
	}
	if pc.autoPad != "" {
		a = append(a, nnAStr("auto_pad", pc.autoPad))
	}
	if pc.ceil {
		a = append(a, nnAInt("ceil_mode", 1))
	}
	if avg && pc.includePad {
		a = append(a, nnAInt("count_include_pad", 1))
	}
	if !avg && pc.storageOrder != 0 {
		a = append(a, nnAInt("storage_order", int64(pc.storageOrder)))
	}
	return a
}

// refPool computes MaxPool (values and ONNX indices) or AveragePool in
// float64 by visiting every window tap.
func refPool(pc poolCase, avg bool, x []float32) (shape []int, y []float64, idx []int64) {
	nsp := len(pc.in)
	cv := convCase{in: pc.in, k: pc.k, s: pc.s, d: pc.d, pads: pc.pads, autoPad: pc.autoPad}
	pb, pe := refConvPads(cv)
	out := make([]int, nsp)
	for i := range out {
		ek := (pc.k[i]-1)*pc.d[i] + 1
		span := pc.in[i] + pb[i] + pe[i] - ek
		if pc.ceil {
			out[i] = (span+pc.s[i]-1)/pc.s[i] + 1
			if (out[i]-1)*pc.s[i] >= pc.in[i]+pb[i] { // window starting in the end padding
				out[i]--
			}
		} else {
			out[i] = span/pc.s[i] + 1
		}
	}
	shape = append([]int{pc.n, pc.c}, out...)
	xShape := append([]int{pc.n, pc.c}, pc.in...)
	pos := make([]int, nsp)
	nnEach(shape, func(yc []int) {
		best, at := math.Inf(-1), int64(-1)
		var sum float64
		var inside, padded int
		nnEach(pc.k, func(k []int) {
			inPad := true
			in := true
			for i := range k {
				pos[i] = yc[2+i]*pc.s[i] - pb[i] + k[i]*pc.d[i]
				if pos[i] < 0 || pos[i] >= pc.in[i] {
					in = false
				}
				if pos[i] >= pc.in[i]+pe[i] {
					inPad = false
				}
			}
			if inPad {
				padded++
			}
			if !in {
				return
			}
			inside++
			xi := nnFlat(xShape, append([]int{yc[0], yc[1]}, pos...))
			v := float64(x[xi])
			sum += v
			if v > best || at < 0 {
				best = v
				plane := int64((yc[0]*pc.c + yc[1]) * nnVol(ir.Shape(i64s(pc.in))))
				if pc.storageOrder == 1 { // column-major spatial index
					j, mul := 0, 1
					for i := range pos {
						j += pos[i] * mul
						mul *= pc.in[i]
					}
					at = plane + int64(j)
				} else {
					at = int64(xi)
				}
			}
		})
		if avg {
			n := inside
			if pc.includePad {
				n = padded
			}
			y = append(y, sum/float64(n))
		} else {
			y = append(y, best)
			idx = append(idx, at)
		}
	})
	return shape, y, idx
}

func randPoolCase(r *rand.Rand) poolCase {
	for {
		nsp := []int{1, 2, 2, 2, 3}[r.IntN(5)]
		pc := poolCase{n: 1 + r.IntN(2), c: 1 + r.IntN(3), ceil: r.IntN(2) == 0, includePad: r.IntN(2) == 0, storageOrder: r.IntN(2)}
		maxIn := 10
		if nsp == 3 {
			maxIn = 6
		}
		for i := 0; i < nsp; i++ {
			pc.in = append(pc.in, 1+r.IntN(maxIn))
			pc.k = append(pc.k, 1+r.IntN(3))
			pc.s = append(pc.s, 1+r.IntN(3))
			pc.d = append(pc.d, 1+r.IntN(2))
		}
		switch r.IntN(5) {
		case 0:
			pc.autoPad = "VALID"
		case 1:
			pc.autoPad = "SAME_UPPER"
		case 2:
			pc.autoPad = "SAME_LOWER"
		default:
			pc.pads = make([]int, 2*nsp)
			for i := range pc.pads {
				pc.pads[i] = r.IntN(pc.k[i%nsp]) // pads smaller than the kernel
			}
		}
		pb, pe := refConvPads(convCase{in: pc.in, k: pc.k, s: pc.s, d: pc.d, pads: pc.pads, autoPad: pc.autoPad})
		ok := true
		for i := range pc.in {
			if pc.in[i]+pb[i]+pe[i] < (pc.k[i]-1)*pc.d[i]+1 {
				ok = false
			}
		}
		if ok {
			return pc
		}
	}
}

func runPoolCase(t *testing.T, r *rand.Rand, pc poolCase, avg bool) {
	t.Helper()
	x := nnF(r, i64s(append([]int{pc.n, pc.c}, pc.in...))...)
	typ, outs := "MaxPool", []string{"y", "idx"}
	if avg {
		typ, outs = "AveragePool", []string{"y"}
	}
	op := nnOp(t, 19, typ, []nnIn{x}, outs, pc.attrs(avg)...)
	got := nnRun(t, op, []nnIn{x})
	shape, want, idx := refPool(pc, avg, x.data)
	if !got[0].Shape.Equal(ir.Shape(i64s(shape))) {
		t.Fatalf("%s %v: output shape %v, reference %v", typ, pc, got[0].Shape, shape)
	}
	nnClose(t, typ+" "+pc.String(), got[0].F32(), want, 1e-6)
	got64 := nnRun64(t, 19, typ, []nnIn{x}, outs, pc.attrs(avg)...)
	nnClose(t, "float64 "+typ+" "+pc.String(), got64[0].F64(), want, tol64)
	if !avg {
		for _, g := range [][]*Tensor{got, got64} {
			gi := g[1].I64()
			for i := range idx {
				if gi[i] != idx[i] {
					t.Fatalf("MaxPool %v (%v): index %d is %d, want %d", pc, g[0].DType, i, gi[i], idx[i])
				}
			}
		}
	}
}

func TestPoolRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 31))
	for i := 0; i < 300; i++ {
		pc := randPoolCase(r)
		runPoolCase(t, r, pc, i%2 == 0)
	}
}

func TestMaxPoolNoIndices(t *testing.T) {
	r := rand.New(rand.NewPCG(32, 33))
	x := nnF(r, 2, 3, 8, 8)
	op := nnOp(t, 17, "MaxPool", []nnIn{x}, []string{"y"}, nnAInts("kernel_shape", 3, 3), nnAInts("strides", 2, 2), nnAInts("pads", 1, 1, 1, 1))
	got := nnRun(t, op, []nnIn{x})
	pc := poolCase{n: 2, c: 3, in: []int{8, 8}, k: []int{3, 3}, s: []int{2, 2}, d: []int{1, 1}, pads: []int{1, 1, 1, 1}}
	_, want, _ := refPool(pc, false, x.data)
	nnClose(t, "MaxPool", got[0].F32(), want, 0)
	got64 := nnRun64(t, 17, "MaxPool", []nnIn{x}, []string{"y"}, nnAInts("kernel_shape", 3, 3), nnAInts("strides", 2, 2), nnAInts("pads", 1, 1, 1, 1))
	nnClose(t, "float64 MaxPool", got64[0].F64(), want, 0)
}

func TestGlobalPool(t *testing.T) {
	r := rand.New(rand.NewPCG(34, 35))
	for _, dims := range [][]int64{{2, 3, 5, 4}, {1, 4, 7}, {2, 2, 3, 2, 2}, {3, 5}} {
		x := nnF(r, dims...)
		planes, vol := int(dims[0]*dims[1]), nnVol(ir.Shape(dims[2:]))
		wantAvg, wantMax := make([]float64, planes), make([]float64, planes)
		for p := 0; p < planes; p++ {
			wantMax[p] = math.Inf(-1)
			for _, v := range x.data[p*vol : (p+1)*vol] {
				wantAvg[p] += float64(v) / float64(vol)
				wantMax[p] = math.Max(wantMax[p], float64(v))
			}
		}
		for typ, want := range map[string][]float64{"GlobalAveragePool": wantAvg, "GlobalMaxPool": wantMax} {
			op := nnOp(t, 17, typ, []nnIn{x}, []string{"y"})
			got := nnRun(t, op, []nnIn{x})
			nnClose(t, fmt.Sprintf("%s %v", typ, dims), got[0].F32(), want, 1e-6)
			got64 := nnRun64(t, 17, typ, []nnIn{x}, []string{"y"})
			nnClose(t, fmt.Sprintf("float64 %s %v", typ, dims), got64[0].F64(), want, tol64)
		}
	}
}

// ---- ONNX Runtime ----

func TestMaxPoolORT(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(36, 37))
	var cases []nnORTCase
	for _, tc := range []struct {
		x     []int64
		attrs []*onnxpb.AttributeProto
	}{
		{[]int64{2, 3, 9, 8}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 3, 3), onnxtest.Ints("strides", 2, 2), onnxtest.Ints("pads", 1, 0, 1, 2)}},
		{[]int64{1, 2, 10, 9}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 3, 2), onnxtest.Ints("strides", 2, 2), onnxtest.Ints("pads", 1, 1, 0, 1), onnxtest.Int("ceil_mode", 1)}},
		{[]int64{1, 2, 9, 9}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 2, 2), onnxtest.Ints("dilations", 2, 2), onnxtest.Ints("strides", 1, 2)}},
		{[]int64{2, 2, 7, 6}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 3, 3), onnxtest.Ints("strides", 2, 2), onnxtest.Int("storage_order", 1), nnPAStr("auto_pad", "SAME_UPPER")}},
		{[]int64{1, 3, 11}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 4), onnxtest.Ints("strides", 3), onnxtest.Ints("pads", 2, 1)}},
		{[]int64{1, 2, 5, 4, 6}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 2, 2, 3), onnxtest.Ints("strides", 2, 1, 2), onnxtest.Ints("pads", 1, 0, 1, 0, 1, 1)}},
	} {
		cases = append(cases, nnORTCase{onnxtest.Node("MaxPool", "", nil, nil, tc.attrs...), []nnIO{nnORTIn(r, "x", tc.x...)},
			[]nnIO{{name: "y"}, {name: "idx", i64: true}}, 0})
	}
	nnORTBatch(t, 17, cases)
}

func TestAveragePoolORT(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 39))
	var cases []nnORTCase
	for _, tc := range []struct {
		x     []int64
		attrs []*onnxpb.AttributeProto
	}{
		{[]int64{2, 3, 9, 8}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 3, 3), onnxtest.Ints("strides", 2, 2), onnxtest.Ints("pads", 1, 0, 1, 2)}},
		{[]int64{2, 3, 9, 8}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 3, 3), onnxtest.Ints("strides", 2, 2), onnxtest.Ints("pads", 1, 0, 1, 2), onnxtest.Int("count_include_pad", 1)}},
		{[]int64{1, 2, 10, 9}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 3, 2), onnxtest.Ints("strides", 2, 2), onnxtest.Ints("pads", 1, 1, 0, 1), onnxtest.Int("ceil_mode", 1), onnxtest.Int("count_include_pad", 1)}},
		{[]int64{1, 2, 10, 9}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 3, 3), onnxtest.Ints("strides", 2, 2), onnxtest.Int("ceil_mode", 1)}},
		{[]int64{1, 2, 7, 8}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 3, 2), onnxtest.Ints("strides", 2, 3), nnPAStr("auto_pad", "SAME_LOWER"), onnxtest.Int("count_include_pad", 1)}},
		{[]int64{1, 3, 11}, []*onnxpb.AttributeProto{onnxtest.Ints("kernel_shape", 4), onnxtest.Ints("strides", 3), onnxtest.Ints("pads", 2, 1)}},
	} {
		cases = append(cases, nnORTCase{onnxtest.Node("AveragePool", "", nil, nil, tc.attrs...), []nnIO{nnORTIn(r, "x", tc.x...)}, []nnIO{{name: "y"}}, 1e-6})
	}
	// GlobalAveragePool and GlobalMaxPool ride along.
	for _, typ := range []string{"GlobalAveragePool", "GlobalMaxPool"} {
		cases = append(cases, nnORTCase{onnxtest.Node(typ, "", nil, nil), []nnIO{nnORTIn(r, "x", 2, 3, 5, 7)}, []nnIO{{name: "y"}}, 1e-6})
	}
	nnORTBatch(t, 17, cases)
}

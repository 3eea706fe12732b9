package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

// convCase is one Conv / ConvTranspose configuration.
type convCase struct {
	n, c, m, group int
	in, k, s, d    []int
	pads           []int // begin..., end...; nil: attribute absent
	autoPad        string
	opad           []int // ConvTranspose output_padding
	outShape       []int // ConvTranspose output_shape
	bias           bool
}

func (cc convCase) String() string {
	return fmt.Sprintf("N%d C%d M%d g%d in%v k%v s%v d%v pads%v auto=%q opad%v oshape%v bias=%v",
		cc.n, cc.c, cc.m, cc.group, cc.in, cc.k, cc.s, cc.d, cc.pads, cc.autoPad, cc.opad, cc.outShape, cc.bias)
}

func i64s(s []int) []int64 {
	o := make([]int64, len(s))
	for i, v := range s {
		o[i] = int64(v)
	}
	return o
}

func (cc convCase) attrs(transpose bool) []ir.Attr {
	a := []ir.Attr{nnAInts("strides", i64s(cc.s)...), nnAInts("dilations", i64s(cc.d)...), nnAInt("group", int64(cc.group)),
		nnAInts("kernel_shape", i64s(cc.k)...)}
	if cc.pads != nil {
		a = append(a, nnAInts("pads", i64s(cc.pads)...))
	}
	if cc.autoPad != "" {
		a = append(a, nnAStr("auto_pad", cc.autoPad))
	}
	if transpose && cc.opad != nil {
		a = append(a, nnAInts("output_padding", i64s(cc.opad)...))
	}
	if transpose && cc.outShape != nil {
		a = append(a, nnAInts("output_shape", i64s(cc.outShape)...))
	}
	return a
}

// refConvPads is the padding ONNX specifies for Conv: explicit, or
// under SAME_* the total (ceil(in/s)-1)·s + ek - in split with the odd
// element at the end (UPPER) or the beginning (LOWER).
func refConvPads(cc convCase) (pb, pe []int) {
	n := len(cc.in)
	pb, pe = make([]int, n), make([]int, n)
	for i := 0; i < n; i++ {
		switch cc.autoPad {
		case "SAME_UPPER", "SAME_LOWER":
			ek := (cc.k[i]-1)*cc.d[i] + 1
			out := (cc.in[i] + cc.s[i] - 1) / cc.s[i]
			total := max(0, (out-1)*cc.s[i]+ek-cc.in[i])
			if cc.autoPad == "SAME_UPPER" {
				pb[i], pe[i] = total/2, total-total/2
			} else {
				pb[i], pe[i] = total-total/2, total/2
			}
		case "VALID":
		default:
			if cc.pads != nil {
				pb[i], pe[i] = cc.pads[i], cc.pads[i+n]
			}
		}
	}
	return pb, pe
}

// refConv is direct convolution in float64.
func refConv(cc convCase, x, w, b []float32) ([]int, []float64) {
	nsp := len(cc.in)
	pb, pe := refConvPads(cc)
	out := make([]int, nsp)
	for i := range out {
		ek := (cc.k[i]-1)*cc.d[i] + 1
		out[i] = (cc.in[i]+pb[i]+pe[i]-ek)/cc.s[i] + 1
	}
	cg, mg := cc.c/cc.group, cc.m/cc.group
	yShape := append([]int{cc.n, cc.m}, out...)
	xShape := append([]int{cc.n, cc.c}, cc.in...)
	wShape := append([]int{cc.m, cg}, cc.k...)
	y := make([]float64, cc.n*cc.m*nnVol(ir.Shape(i64s(out))))
	pos := make([]int, nsp)
	nnEach(yShape, func(yc []int) {
		n, m, o := yc[0], yc[1], yc[2:]
		var s float64
		if b != nil {
			s = float64(b[m])
		}
		gi := m / mg
		for ci := 0; ci < cg; ci++ {
			nnEach(cc.k, func(k []int) {
				for i := range k {
					pos[i] = o[i]*cc.s[i] - pb[i] + k[i]*cc.d[i]
					if pos[i] < 0 || pos[i] >= cc.in[i] {
						return
					}
				}
				xv := x[nnFlat(xShape, append([]int{n, gi*cg + ci}, pos...))]
				wv := w[nnFlat(wShape, append([]int{m, ci}, k...))]
				s += float64(xv) * float64(wv)
			})
		}
		y[nnFlat(yShape, yc)] = s
	})
	return yShape, y
}

func randConvCase(r *rand.Rand, transpose bool) convCase {
	for {
		nsp := []int{1, 2, 2, 2, 3}[r.IntN(5)]
		cc := convCase{n: 1 + r.IntN(2), bias: r.IntN(2) == 0}
		cg, mg := 1+r.IntN(3), 1+r.IntN(3)
		switch r.IntN(4) {
		case 0, 1:
			cc.group = 1
		case 2:
			cc.group = 2 + r.IntN(2)
		case 3: // depthwise, maybe with a channel multiplier
			cc.group, cg, mg = 2+r.IntN(4), 1, 1+r.IntN(2)
		}
		cc.c, cc.m = cg*cc.group, mg*cc.group
		maxIn := 9
		if nsp == 3 {
			maxIn = 5
		}
		for i := 0; i < nsp; i++ {
			cc.in = append(cc.in, 1+r.IntN(maxIn))
			cc.k = append(cc.k, 1+r.IntN(3))
			cc.s = append(cc.s, 1+r.IntN(3))
			cc.d = append(cc.d, 1+r.IntN(2))
		}
		switch r.IntN(6) {
		case 0:
			cc.autoPad = "VALID"
		case 1:
			cc.autoPad = "SAME_UPPER"
		case 2:
			cc.autoPad = "SAME_LOWER"
		case 3:
		default:
			cc.pads = make([]int, 2*nsp)
			for i := range cc.pads {
				cc.pads[i] = r.IntN(3)
			}
		}
		if transpose {
			cc.opad = make([]int, nsp)
			for i := range cc.opad {
				if lim := max(cc.s[i], cc.d[i]); lim > 1 {
					cc.opad[i] = r.IntN(lim)
				}
			}
			pb, pe := refConvPads(convCase{in: cc.in, pads: cc.pads, autoPad: "NOTSET"})
			ok := true
			for i := range cc.in {
				ek := (cc.k[i]-1)*cc.d[i] + 1
				if cc.s[i]*(cc.in[i]-1)+cc.opad[i]+ek-pb[i]-pe[i] <= 0 {
					ok = false
				}
			}
			if ok {
				return cc
			}
			continue
		}
		pb, pe := refConvPads(cc)
		ok := true
		for i := range cc.in {
			if cc.in[i]+pb[i]+pe[i] < (cc.k[i]-1)*cc.d[i]+1 {
				ok = false
			}
		}
		if ok {
			return cc
		}
	}
}

func runConvCase(t *testing.T, r *rand.Rand, cc convCase) {
	t.Helper()
	x := nnF(r, i64s(append([]int{cc.n, cc.c}, cc.in...))...)
	w := nnF(r, i64s(append([]int{cc.m, cc.c / cc.group}, cc.k...))...)
	b := nnIn{}
	if cc.bias {
		b = nnF(r, int64(cc.m))
	}
	op := nnOp(t, 17, "Conv", []nnIn{x, w, b}, []string{"y"}, cc.attrs(false)...)
	got := nnRun(t, op, []nnIn{x, w, b})
	shape, want := refConv(cc, x.data, w.data, b.data)
	if !got[0].Shape.Equal(ir.Shape(i64s(shape))) {
		t.Fatalf("%v: output shape %v, reference %v", cc, got[0].Shape, shape)
	}
	nnClose(t, cc.String(), got[0].F32(), want, 1e-5)
	got64 := nnRun64(t, 17, "Conv", []nnIn{x, w, b}, []string{"y"}, cc.attrs(false)...)
	nnClose(t, "float64 "+cc.String(), got64[0].F64(), want, tol64)
}

func TestConvRandom(t *testing.T) { eachSgemm(t, testConvRandom) }

func testConvRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	for i := 0; i < 300; i++ {
		runConvCase(t, r, randConvCase(r, false))
	}
}

func TestConvCases(t *testing.T) { eachSgemm(t, testConvCases) }

func testConvCases(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 13))
	for _, cc := range []convCase{
		// 1×1, stride 1: no im2col.
		{n: 2, c: 8, m: 5, group: 1, in: []int{6, 7}, k: []int{1, 1}, s: []int{1, 1}, d: []int{1, 1}, bias: true},
		// 1×1 stride 2 shortcut.
		{n: 2, c: 8, m: 4, group: 1, in: []int{7, 7}, k: []int{1, 1}, s: []int{2, 2}, d: []int{1, 1}},
		// resnet-like 3×3 pad 1, larger than the BLAS threading threshold.
		{n: 2, c: 16, m: 24, group: 1, in: []int{16, 16}, k: []int{3, 3}, s: []int{1, 1}, d: []int{1, 1}, pads: []int{1, 1, 1, 1}, bias: true},
		// 7×7 stride 2 pad 3 stem.
		{n: 1, c: 3, m: 8, group: 1, in: []int{23, 19}, k: []int{7, 7}, s: []int{2, 2}, d: []int{1, 1}, pads: []int{3, 3, 3, 3}},
		// depthwise 3×3 stride 2, asymmetric padding.
		{n: 2, c: 6, m: 6, group: 6, in: []int{9, 8}, k: []int{3, 3}, s: []int{2, 2}, d: []int{1, 1}, pads: []int{1, 0, 0, 2}, bias: true},
		// grouped, dilated, SAME_LOWER.
		{n: 1, c: 6, m: 4, group: 2, in: []int{8, 9}, k: []int{3, 2}, s: []int{2, 1}, d: []int{2, 3}, autoPad: "SAME_LOWER"},
		// 1-D and 3-D.
		{n: 2, c: 3, m: 4, group: 1, in: []int{17}, k: []int{5}, s: []int{2}, d: []int{2}, pads: []int{2, 1}, bias: true},
		{n: 1, c: 4, m: 4, group: 2, in: []int{5, 6, 4}, k: []int{3, 2, 3}, s: []int{1, 2, 1}, d: []int{1, 1, 2}, autoPad: "SAME_UPPER"},
	} {
		runConvCase(t, r, cc)
	}
}

// refConvTranspose scatters every input element through the kernel in
// float64: y[n, m, i·s - pb + k·d] += x[n, c, i]·w[c, m mod (M/g), k].
func refConvTranspose(cc convCase, x, w, b []float32) ([]int, []float64) {
	nsp := len(cc.in)
	pb, out := make([]int, nsp), make([]int, nsp)
	opad := cc.opad
	if opad == nil {
		opad = make([]int, nsp)
	}
	for i := 0; i < nsp; i++ {
		ek := (cc.k[i]-1)*cc.d[i] + 1
		full := cc.s[i]*(cc.in[i]-1) + opad[i] + ek
		switch {
		case cc.outShape != nil || cc.autoPad == "SAME_UPPER" || cc.autoPad == "SAME_LOWER":
			if cc.outShape != nil {
				out[i] = cc.outShape[i]
			} else {
				out[i] = cc.in[i] * cc.s[i]
			}
			total := max(0, full-out[i])
			if cc.autoPad == "SAME_UPPER" { // ONNX: the odd element at the end
				pb[i] = total / 2
			} else {
				pb[i] = total - total/2
			}
		case cc.autoPad == "VALID":
			out[i] = full
		default:
			pe := 0
			if cc.pads != nil {
				pb[i], pe = cc.pads[i], cc.pads[i+nsp]
			}
			out[i] = full - pb[i] - pe
		}
	}
	cg, mg := cc.c/cc.group, cc.m/cc.group
	yShape := append([]int{cc.n, cc.m}, out...)
	xShape := append([]int{cc.n, cc.c}, cc.in...)
	wShape := append([]int{cc.c, mg}, cc.k...)
	y := make([]float64, nnVol(ir.Shape(i64s(yShape))))
	if b != nil {
		nnEach(yShape, func(yc []int) { y[nnFlat(yShape, yc)] = float64(b[yc[1]]) })
	}
	pos := make([]int, nsp)
	nnEach(xShape, func(xc []int) {
		n, c, ip := xc[0], xc[1], xc[2:]
		xv := float64(x[nnFlat(xShape, xc)])
		gi := c / cg
		for mm := 0; mm < mg; mm++ {
			nnEach(cc.k, func(k []int) {
				for i := range k {
					pos[i] = ip[i]*cc.s[i] - pb[i] + k[i]*cc.d[i]
					if pos[i] < 0 || pos[i] >= out[i] {
						return
					}
				}
				wv := float64(w[nnFlat(wShape, append([]int{c, mm}, k...))])
				y[nnFlat(yShape, append([]int{n, gi*mg + mm}, pos...))] += xv * wv
			})
		}
	})
	return yShape, y
}

func runConvTransposeCase(t *testing.T, r *rand.Rand, cc convCase) {
	t.Helper()
	x := nnF(r, i64s(append([]int{cc.n, cc.c}, cc.in...))...)
	w := nnF(r, i64s(append([]int{cc.c, cc.m / cc.group}, cc.k...))...)
	b := nnIn{}
	if cc.bias {
		b = nnF(r, int64(cc.m))
	}
	op := nnOp(t, 17, "ConvTranspose", []nnIn{x, w, b}, []string{"y"}, cc.attrs(true)...)
	got := nnRun(t, op, []nnIn{x, w, b})
	shape, want := refConvTranspose(cc, x.data, w.data, b.data)
	if !got[0].Shape.Equal(ir.Shape(i64s(shape))) {
		t.Fatalf("%v: output shape %v, reference %v", cc, got[0].Shape, shape)
	}
	nnClose(t, "ConvTranspose "+cc.String(), got[0].F32(), want, 1e-5)
	got64 := nnRun64(t, 17, "ConvTranspose", []nnIn{x, w, b}, []string{"y"}, cc.attrs(true)...)
	nnClose(t, "float64 ConvTranspose "+cc.String(), got64[0].F64(), want, tol64)
}

func TestConvTransposeRandom(t *testing.T) { eachSgemm(t, testConvTransposeRandom) }

func testConvTransposeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 15))
	for i := 0; i < 200; i++ {
		cc := randConvCase(r, true)
		if cc.autoPad == "" && r.IntN(4) == 0 { // output_shape instead of pads
			cc.pads = nil
			for i := range cc.in {
				ek := (cc.k[i]-1)*cc.d[i] + 1
				full := cc.s[i]*(cc.in[i]-1) + cc.opad[i] + ek
				cc.outShape = append(cc.outShape, max(1, full-r.IntN(3)))
			}
		}
		runConvTransposeCase(t, r, cc)
	}
}

func TestConvTransposeCases(t *testing.T) { eachSgemm(t, testConvTransposeCases) }

func testConvTransposeCases(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 17))
	for _, cc := range []convCase{
		// 1×1 stride 1: GEMM straight into Y.
		{n: 2, c: 6, m: 4, group: 1, in: []int{5, 6}, k: []int{1, 1}, s: []int{1, 1}, d: []int{1, 1}, bias: true},
		// DCGAN-style 4×4 stride 2 pad 1 upsampling.
		{n: 2, c: 16, m: 8, group: 1, in: []int{7, 7}, k: []int{4, 4}, s: []int{2, 2}, d: []int{1, 1}, pads: []int{1, 1, 1, 1}, bias: true},
		// grouped, output_padding, asymmetric pads.
		{n: 1, c: 4, m: 6, group: 2, in: []int{5, 4}, k: []int{3, 3}, s: []int{3, 2}, d: []int{1, 1}, pads: []int{0, 1, 2, 0}, opad: []int{2, 1}},
		// SAME_UPPER / SAME_LOWER with odd total padding.
		{n: 1, c: 3, m: 2, group: 1, in: []int{4, 5}, k: []int{4, 3}, s: []int{2, 2}, d: []int{1, 1}, autoPad: "SAME_UPPER"},
		{n: 1, c: 3, m: 2, group: 1, in: []int{4, 5}, k: []int{4, 3}, s: []int{2, 2}, d: []int{1, 1}, autoPad: "SAME_LOWER"},
		// output_shape larger than the natural output (zero tail).
		{n: 1, c: 2, m: 2, group: 1, in: []int{3}, k: []int{3}, s: []int{2}, d: []int{1}, outShape: []int{9}, bias: true},
		// 3-D, depthwise.
		{n: 1, c: 3, m: 3, group: 3, in: []int{3, 4, 3}, k: []int{2, 3, 2}, s: []int{2, 1, 2}, d: []int{1, 2, 1}, pads: []int{0, 1, 0, 1, 0, 0}},
	} {
		runConvTransposeCase(t, r, cc)
	}
}

func TestConvWorkspaceBounded(t *testing.T) {
	// The scratch is (a block of) one image and one group's column
	// matrix, whatever the batch.
	r := rand.New(rand.NewPCG(18, 19))
	cc := convCase{n: 8, c: 16, m: 16, group: 2, in: []int{10, 10}, k: []int{3, 3}, s: []int{1, 1}, d: []int{1, 1}, pads: []int{1, 1, 1, 1}}
	x := nnF(r, 8, 16, 10, 10)
	w := nnF(r, 16, 8, 3, 3)
	op := nnOp(t, 17, "Conv", []nnIn{x, w, {}}, []string{"y"}, cc.attrs(false)...)
	if got, want := WorkspaceBytes(op), int64(4*8*9*100); got != want {
		t.Errorf("Conv workspace %d bytes, want %d (one group of one image)", got, want)
	}
	op1 := nnOp(t, 17, "Conv", []nnIn{x, nnF(r, 4, 16, 1, 1), {}}, []string{"y"})
	if got := WorkspaceBytes(op1); got != 0 {
		t.Errorf("1×1 Conv workspace %d bytes, want 0", got)
	}
	xt := nnF(r, 8, 16, 10, 10)
	wt := nnF(r, 16, 4, 3, 3)
	opt := nnOp(t, 17, "ConvTranspose", []nnIn{xt, wt, {}}, []string{"y"}, nnAInts("strides", 2, 2), nnAInt("group", 2))
	if got, want := WorkspaceBytes(opt), int64(4*4*9*100); got != want {
		t.Errorf("ConvTranspose workspace %d bytes, want %d", got, want)
	}
}

// nnRunKernel runs k on op (float32 or float64 inputs, as op declares)
// with exactly k.Workspace(op) bytes of scratch, after checking that one
// byte less is refused: the declared workspace is what Run uses.
func nnRunKernel(t *testing.T, k Kernel, op *ir.Op, ins []nnIn) []*Tensor {
	t.Helper()
	in := make([]*Tensor, len(ins))
	for i, x := range ins {
		v := op.Input(i)
		if v == nil {
			continue
		}
		tt, err := NewTensor(v.DType, v.Shape)
		if err != nil {
			t.Fatal(err)
		}
		if v.DType == ir.Double {
			copy(tt.F64(), nnF64(x.data))
		} else {
			copy(tt.F32(), x.data)
		}
		in[i] = tt
	}
	out := make([]*Tensor, len(op.Outputs()))
	for i, v := range op.Outputs() {
		out[i], _ = NewTensor(v.DType, v.Shape)
	}
	ws := make([]byte, k.Workspace(op))
	if len(ws) > 0 {
		if err := k.Run(&Ctx{Op: op, In: in, Out: out, Workspace: ws[:len(ws)-1]}); err == nil {
			t.Fatalf("%s: ran with %d bytes of scratch, one less than its workspace", op.Describe(), len(ws)-1)
		}
	}
	if err := k.Run(&Ctx{Op: op, In: in, Out: out, Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	return out
}

// nnFixedCap is a scratch bound of capBytes whatever the output.
func nnFixedCap(capBytes int64) nnScratchCap { return func(int64) int64 { return capBytes } }

// TestConvBlocked: random convolutions with scratch bounds from 0 (one
// im2col row a block) to the whole column matrix, so that K is cut into
// blocks of every size, many with a shorter last block; float32 and
// float64 against the direct reference.
func TestConvBlocked(t *testing.T) { eachSgemm(t, testConvBlocked) }

func testConvBlocked(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 31))
	blocked, ragged := 0, 0
	for i := 0; i < 300; i++ {
		cc := randConvCase(r, false)
		x := nnF(r, i64s(append([]int{cc.n, cc.c}, cc.in...))...)
		w := nnF(r, i64s(append([]int{cc.m, cc.c / cc.group}, cc.k...))...)
		b := nnIn{}
		if cc.bias {
			b = nnF(r, int64(cc.m))
		}
		ins := []nnIn{x, w, b}
		_, want := refConv(cc, x.data, w.data, b.data)
		for _, dt := range []ir.DType{ir.Float, ir.Double} {
			op := nnOpDT(t, 17, dt, "Conv", ins, []string{"y"}, cc.attrs(false)...)
			full, _ := planConv(op, nnFixedCap(1<<62))
			kg, rowBytes := full.cg*full.g.kVol(), nnESize(op)*int64(full.g.outVol())
			var capBytes int64 // 0: one row a block
			switch r.IntN(3) {
			case 1: // blocks of 1 to kg rows
				capBytes = rowBytes * (1 + r.Int64N(int64(kg)))
			case 2: // any number of bytes up to the whole matrix
				capBytes = r.Int64N(rowBytes*int64(kg) + 1)
			}
			p, err := planConv(op, nnFixedCap(capBytes))
			if err != nil {
				t.Fatal(err)
			}
			if p.kb < full.kb {
				blocked++
				if kg%p.kb != 0 {
					ragged++
				}
			}
			ws := convWorkspace(op, nnFixedCap(capBytes))
			if ws > convWorkspace(op, nnFixedCap(1<<62)) || ws != nnESize(op)*int64(p.kb*p.g.outVol()) || ws > max(capBytes, rowBytes) {
				t.Fatalf("%v: workspace %d bytes under a bound of %d, rows per block %d", cc, ws, capBytes, p.kb)
			}
			got := nnRunKernel(t, convKernel(nnFixedCap(capBytes)), op, ins)
			what := fmt.Sprintf("%v bound %d (rows %d of %d)", cc, capBytes, p.kb, kg)
			if dt == ir.Double {
				nnClose(t, "float64 "+what, got[0].F64(), want, tol64)
			} else {
				nnClose(t, what, got[0].F32(), want, 1e-5)
			}
		}
	}
	if blocked < 250 || ragged < 20 {
		t.Errorf("K blocked in %d runs, with a shorter last block in %d", blocked, ragged)
	}
}

// TestConvTransposeBlocked is TestConvBlocked for ConvTranspose: the
// column matrix cut into blocks of rows (that may split a channel's
// kernel taps) or of input pixels (that start and end anywhere in an
// input row).
func TestConvTransposeBlocked(t *testing.T) { eachSgemm(t, testConvTransposeBlocked) }

func testConvTransposeBlocked(t *testing.T) {
	r := rand.New(rand.NewPCG(32, 33))
	byRows, byCols, ragged := 0, 0, 0
	for i := 0; i < 200; i++ {
		cc := randConvCase(r, true)
		x := nnF(r, i64s(append([]int{cc.n, cc.c}, cc.in...))...)
		w := nnF(r, i64s(append([]int{cc.c, cc.m / cc.group}, cc.k...))...)
		b := nnIn{}
		if cc.bias {
			b = nnF(r, int64(cc.m))
		}
		ins := []nnIn{x, w, b}
		_, want := refConvTranspose(cc, x.data, w.data, b.data)
		for _, dt := range []ir.DType{ir.Float, ir.Double} {
			op := nnOpDT(t, 17, dt, "ConvTranspose", ins, []string{"y"}, cc.attrs(true)...)
			full, _ := planConvTranspose(op, nnFixedCap(1<<62))
			rows, cols := full.rb, full.pb
			unit := nnESize(op) * int64(min(rows, cols)) // one row or column, whichever is blocked
			var capBytes int64                           // 0: one row or column a block
			switch r.IntN(4) {
			case 1, 2: // blocks of 1 to 7 rows or columns
				capBytes = unit * (1 + r.Int64N(7))
			case 3: // any number of bytes up to the whole matrix
				capBytes = r.Int64N(nnESize(op)*int64(rows*cols) + 1)
			}
			p, err := planConvTranspose(op, nnFixedCap(capBytes))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case p.rb < rows && p.pb < cols:
				t.Fatalf("%v: blocks of %d rows and %d columns", cc, p.rb, p.pb)
			case p.rb < rows:
				byRows++
				if rows%p.rb != 0 {
					ragged++
				}
			case p.pb < cols:
				byCols++
				if cols%p.pb != 0 {
					ragged++
				}
			}
			ws := convTransposeWorkspace(op, nnFixedCap(capBytes))
			if ws > convTransposeWorkspace(op, nnFixedCap(1<<62)) || ws != nnESize(op)*int64(p.rb*p.pb) || ws > max(capBytes, unit) {
				t.Fatalf("%v: workspace %d bytes under a bound of %d, blocks %d × %d", cc, ws, capBytes, p.rb, p.pb)
			}
			got := nnRunKernel(t, convTransposeKernel(nnFixedCap(capBytes)), op, ins)
			what := fmt.Sprintf("ConvTranspose %v bound %d (blocks %d of %d rows × %d of %d columns)", cc, capBytes, p.rb, rows, p.pb, cols)
			if dt == ir.Double {
				nnClose(t, "float64 "+what, got[0].F64(), want, tol64)
			} else {
				nnClose(t, what, got[0].F32(), want, 1e-5)
			}
		}
	}
	if byRows < 60 || byCols < 150 || ragged < 60 {
		t.Errorf("blocked by rows in %d runs, by columns in %d, with a shorter last block in %d", byRows, byCols, ragged)
	}
}

// TestConvBlockedRegistered: the registered kernels block under the real
// bound, nnDefaultCap. A weight-gradient-shaped Conv (K = 61·9·9 = 4941
// rows of 8×8 output pixels, 1.26 MB unblocked) runs in two blocks of
// 2471 and 2470 rows (float32; float64: three); a ConvTranspose whose
// column matrix (400 rows × 1023 input pixels, 1.6 MB) is far larger
// than its output in two blocks of 512 and 511 pixels; and one with more
// rows than columns (81·16 = 1296 rows × 255 pixels, 1.3 MB) in two
// blocks of 648 rows, which split channel 40's taps.
func TestConvBlockedRegistered(t *testing.T) {
	r := rand.New(rand.NewPCG(34, 35))
	cc := convCase{n: 2, c: 61, m: 3, group: 1, in: []int{22, 22}, k: []int{9, 9}, s: []int{1, 1}, d: []int{2, 2}, pads: []int{1, 1, 1, 1}}
	x, w := nnF(r, 2, 61, 22, 22), nnF(r, 3, 61, 9, 9)
	op := nnOp(t, 17, "Conv", []nnIn{x, w, {}}, []string{"y"}, cc.attrs(false)...)
	if got, want := WorkspaceBytes(op), int64(4*2471*64); got != want {
		t.Errorf("Conv workspace %d bytes, want %d (2471 rows)", got, want)
	}
	op64 := nnOpDT(t, 17, ir.Double, "Conv", []nnIn{x, w, {}}, []string{"y"}, cc.attrs(false)...)
	if got, want := WorkspaceBytes(op64), int64(8*1647*64); got != want {
		t.Errorf("float64 Conv workspace %d bytes, want %d (1647 rows)", got, want)
	}
	runConvCase(t, r, cc)

	ct := convCase{n: 1, c: 2, m: 16, group: 1, in: []int{31, 33}, k: []int{5, 5}, s: []int{1, 1}, d: []int{1, 1}, pads: []int{2, 2, 2, 2}, bias: true}
	xt, wt := nnF(r, 1, 2, 31, 33), nnF(r, 2, 16, 5, 5)
	opt := nnOp(t, 17, "ConvTranspose", []nnIn{xt, wt, {}}, []string{"y"}, ct.attrs(true)...)
	if got, want := WorkspaceBytes(opt), int64(4*400*512); got != want {
		t.Errorf("ConvTranspose workspace %d bytes, want %d (512 columns)", got, want)
	}
	runConvTransposeCase(t, r, ct)

	cr := convCase{n: 1, c: 4, m: 81, group: 1, in: []int{15, 17}, k: []int{4, 4}, s: []int{2, 2}, d: []int{1, 1}, pads: []int{1, 1, 1, 1}}
	xr, wr := nnF(r, 1, 4, 15, 17), nnF(r, 4, 81, 4, 4)
	opr := nnOp(t, 17, "ConvTranspose", []nnIn{xr, wr, {}}, []string{"y"}, cr.attrs(true)...)
	if got, want := WorkspaceBytes(opr), int64(4*648*255); got != want {
		t.Errorf("ConvTranspose workspace %d bytes, want %d (648 rows)", got, want)
	}
	runConvTransposeCase(t, r, cr)
}

// TestConvWorkspaceResNet18: the scratch of resnet18's convolutions
// (and of their input gradients, ConvTranspose) is at most nnScratchCap
// of its output block, or the whole column matrix when that is smaller.
func TestConvWorkspaceResNet18(t *testing.T) {
	for _, l := range []struct{ c, m, hw, k, s, p int }{
		{3, 64, 224, 7, 2, 3}, {64, 64, 56, 3, 1, 1}, {64, 128, 56, 3, 2, 1}, {64, 128, 56, 1, 2, 0},
		{128, 128, 28, 3, 1, 1}, {128, 256, 28, 3, 2, 1}, {128, 256, 28, 1, 2, 0}, {256, 256, 14, 3, 1, 1},
		{256, 512, 14, 3, 2, 1}, {256, 512, 14, 1, 2, 0}, {512, 512, 7, 3, 1, 1},
	} {
		pad := int64(l.p)
		attrs := []ir.Attr{nnAInts("strides", int64(l.s), int64(l.s)), nnAInts("pads", pad, pad, pad, pad)}
		x, w := nnIn{shape: []int64{8, int64(l.c), int64(l.hw), int64(l.hw)}}, nnIn{shape: []int64{int64(l.m), int64(l.c), int64(l.k), int64(l.k)}}
		op := nnOp(t, 17, "Conv", []nnIn{x, w, {}}, []string{"y"}, attrs...)
		o := int64(op.Output(0).Shape[2])
		outBytes := 4 * int64(l.m) * o * o
		full := 4 * int64(l.c*l.k*l.k) * o * o
		if l.k == 1 && l.s == 1 {
			full = 0
		}
		got := WorkspaceBytes(op)
		if got > full || got > max(nnScratchMin, outBytes) && got > 4*o*o {
			t.Errorf("conv %+v: workspace %d bytes, unblocked %d, output per image %d", l, got, full, outBytes)
		}
		dx := nnOp(t, 17, "ConvTranspose", []nnIn{{shape: []int64{8, int64(l.m), o, o}}, w, {}}, []string{"y"}, attrs...)
		gotT := WorkspaceBytes(dx)
		unit := 4 * int64(min(l.c*l.k*l.k, int(o*o))) // one row or column of the column matrix
		inBytes := 4 * int64(nnVol(dx.Output(0).Shape[1:]))
		if gotT > full || gotT > max(nnScratchMin, inBytes) && gotT > unit {
			t.Errorf("conv %+v input gradient: workspace %d bytes, unblocked %d", l, gotT, full)
		}
		t.Logf("%3d→%3d %dx%d s%d %3dx%-3d  Conv %9d → %8d B   ConvTranspose (dX) %9d → %8d B", l.c, l.m, l.k, l.k, l.s, l.hw, l.hw, full, got, full, gotT)
	}
}

// ---- ONNX Runtime ----

func TestConvORT(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(20, 21))
	var cases []nnORTCase
	for _, tc := range []struct {
		x, w  []int64
		bias  bool
		attrs []*onnxpb.AttributeProto
	}{
		{[]int64{2, 4, 9, 8}, []int64{6, 4, 3, 3}, true, []*onnxpb.AttributeProto{onnxtest.Ints("pads", 1, 0, 2, 1), onnxtest.Ints("strides", 2, 1)}},
		{[]int64{1, 6, 7, 7}, []int64{6, 1, 3, 3}, false, []*onnxpb.AttributeProto{onnxtest.Int("group", 6), onnxtest.Ints("strides", 2, 1), nnPAStr("auto_pad", "SAME_UPPER")}},
		{[]int64{1, 4, 8, 7}, []int64{4, 2, 2, 3}, true, []*onnxpb.AttributeProto{onnxtest.Int("group", 2), onnxtest.Ints("strides", 2, 2), nnPAStr("auto_pad", "SAME_LOWER")}},
		{[]int64{2, 3, 11}, []int64{5, 3, 4}, true, []*onnxpb.AttributeProto{onnxtest.Ints("strides", 3), onnxtest.Ints("pads", 2, 0)}},
		{[]int64{1, 4, 9, 10}, []int64{2, 4, 3, 2}, false, []*onnxpb.AttributeProto{onnxtest.Ints("dilations", 2, 3), onnxtest.Ints("pads", 0, 2, 1, 1)}},
		{[]int64{1, 2, 3, 5, 4}, []int64{2, 1, 2, 3, 2}, true, []*onnxpb.AttributeProto{onnxtest.Int("group", 2), onnxtest.Ints("pads", 1, 0, 1, 0, 1, 1)}},
	} {
		ins := []nnIO{nnORTIn(r, "x", tc.x...), nnORTIn(r, "w", tc.w...)}
		if tc.bias {
			ins = append(ins, nnORTIn(r, "b", tc.w[0]))
		}
		cases = append(cases, nnORTCase{onnxtest.Node("Conv", "", nil, nil, tc.attrs...), ins, []nnIO{{name: "y"}}, 1e-5})
	}
	nnORTBatch(t, 17, cases)
}

func TestConvTransposeORT(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(22, 23))
	var cases []nnORTCase
	for _, tc := range []struct {
		x, w  []int64
		bias  bool
		attrs []*onnxpb.AttributeProto
	}{
		{[]int64{2, 4, 5, 4}, []int64{4, 3, 3, 3}, true, []*onnxpb.AttributeProto{onnxtest.Ints("strides", 2, 3), onnxtest.Ints("pads", 1, 0, 0, 2), onnxtest.Ints("output_padding", 1, 2)}},
		{[]int64{1, 4, 4, 5}, []int64{4, 1, 4, 3}, false, []*onnxpb.AttributeProto{onnxtest.Int("group", 2), onnxtest.Ints("strides", 2, 2), nnPAStr("auto_pad", "SAME_UPPER")}},
		{[]int64{1, 4, 4, 5}, []int64{4, 1, 4, 3}, false, []*onnxpb.AttributeProto{onnxtest.Int("group", 2), onnxtest.Ints("strides", 2, 2), nnPAStr("auto_pad", "SAME_LOWER")}},
		{[]int64{1, 2, 5}, []int64{2, 3, 4}, true, []*onnxpb.AttributeProto{onnxtest.Ints("strides", 2), onnxtest.Ints("output_shape", 11)}},
		{[]int64{1, 2, 3, 4}, []int64{2, 2, 3, 3}, true, []*onnxpb.AttributeProto{onnxtest.Ints("strides", 2, 2), onnxtest.Ints("dilations", 2, 1), onnxtest.Ints("output_shape", 8, 7)}},
	} {
		ins := []nnIO{nnORTIn(r, "x", tc.x...), nnORTIn(r, "w", tc.w...)}
		if tc.bias {
			ins = append(ins, nnORTIn(r, "b", tc.w[1]*nnGroupOf(tc.attrs)))
		}
		cases = append(cases, nnORTCase{onnxtest.Node("ConvTranspose", "", nil, nil, tc.attrs...), ins, []nnIO{{name: "y"}}, 1e-5})
	}
	nnORTBatch(t, 17, cases)
}

func nnGroupOf(attrs []*onnxpb.AttributeProto) int64 {
	for _, a := range attrs {
		if a.GetName() == "group" {
			return a.GetI()
		}
	}
	return 1
}

// TestNNGuard: tensors that disagree with the op are refused, not read
// out of range.
func TestNNGuard(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 25))
	x, w := nnF(r, 1, 2, 5, 5), nnF(r, 3, 2, 3, 3)
	op := nnOp(t, 17, "Conv", []nnIn{x, w}, []string{"y"})
	k := Lookup("", "Conv")
	good := nnRun(t, op, []nnIn{x, w})
	xt, _ := NewTensor(ir.Float, ir.Shape{1, 2, 4, 5}) // wrong shape
	wt, _ := NewTensor(ir.Float, ir.Shape{3, 2, 3, 3})
	if err := k.Run(&Ctx{Op: op, In: []*Tensor{xt, wt}, Out: good}); err == nil {
		t.Error("Conv accepted an input of the wrong shape")
	}
	short := &Tensor{DType: ir.Float, Shape: ir.Shape{1, 2, 5, 5}, Data: make([]byte, 8)}
	if err := k.Run(&Ctx{Op: op, In: []*Tensor{short, wt}, Out: good}); err == nil {
		t.Error("Conv accepted an input with too few bytes")
	}
	if err := k.Run(&Ctx{Op: op, In: []*Tensor{nil, wt}, Out: good}); err == nil {
		t.Error("Conv accepted a missing input")
	}
}

// TestNNGuardMixedTypes: the nn kernels run float32 or float64, one
// element type per op; a tensor of the other type is refused.
func TestNNGuardMixedTypes(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 27))
	x, w := nnF(r, 1, 2, 5, 5), nnF(r, 3, 2, 3, 3)
	op := nnOpDT(t, 17, ir.Double, "Conv", []nnIn{x, w}, []string{"y"})
	if err := Supported(op); err != nil {
		t.Fatalf("float64 Conv: %v", err)
	}
	k := Lookup("", "Conv")
	good := nnRun(t, op, []nnIn{x, w})
	x64, _ := NewTensor(ir.Double, ir.Shape{1, 2, 5, 5})
	w32, _ := NewTensor(ir.Float, ir.Shape{3, 2, 3, 3})
	if err := k.Run(&Ctx{Op: op, In: []*Tensor{x64, w32}, Out: good, Workspace: make([]byte, WorkspaceBytes(op))}); err == nil {
		t.Error("float64 Conv accepted a float32 weight")
	}
	y32, _ := NewTensor(ir.Float, good[0].Shape)
	w64, _ := NewTensor(ir.Double, ir.Shape{3, 2, 3, 3})
	if err := k.Run(&Ctx{Op: op, In: []*Tensor{x64, w64}, Out: []*Tensor{y32}, Workspace: make([]byte, WorkspaceBytes(op))}); err == nil {
		t.Error("float64 Conv accepted a float32 output")
	}
	// The float64 scratch is twice the float32 one.
	op32 := nnOp(t, 17, "Conv", []nnIn{x, w}, []string{"y"})
	if a, b := WorkspaceBytes(op), WorkspaceBytes(op32); a != 2*b || b == 0 {
		t.Errorf("workspace float64 %d bytes, float32 %d", a, b)
	}
	for _, typ := range []string{"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
		"BatchNormalization", "LayerNormalization", "Gemm", "MatMul", "Softmax", "LogSoftmax"} {
		if kk := Lookup("", typ); kk == nil || len(kk.DTypes) != 2 || kk.DTypes[0] != ir.Float || kk.DTypes[1] != ir.Double {
			t.Errorf("%s: kernel element types %v, want float32 and float64", typ, kk.DTypes)
		}
	}
}

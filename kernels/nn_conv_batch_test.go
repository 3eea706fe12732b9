package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tsplit/tsplit/ir"
	ownblas "github.com/tsplit/tsplit/kernels/internal/sgemm"
)

// TestConvBatched: group-1 convolutions of many images with small
// outputs, shaped like the forward layers (kernel narrower than the
// output: im2col) and like the weight gradients autodiff emits (kernel
// wider than the output: im2colT, strided "dilations"), under scratch
// bounds from one row to the whole column matrix, float32 and float64
// against the direct reference. The test replays convBatchFit as the
// kernel does and asks that every placement of Z and of the column
// block, and groups of one and of several images, were met.
func TestConvBatched(t *testing.T) { eachSgemm(t, testConvBatched) }

func testConvBatched(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 41))
	seen := map[string]int{}
	for i := 0; i < 100; i++ {
		cc := convCase{n: 2 + r.IntN(30), c: 1 + r.IntN(5), m: 1 + r.IntN(9), group: 1, bias: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			// Weight-gradient shape: kernel nearly the input, output 1-4 wide.
			for j := 0; j < 2; j++ {
				o, d := 1+r.IntN(4), 1+r.IntN(2)
				k := 2 + r.IntN(8)
				cc.k = append(cc.k, k)
				cc.s = append(cc.s, 1+r.IntN(2))
				cc.d = append(cc.d, d)
				cc.in = append(cc.in, (k-1)*d+1+(o-1)*cc.s[j])
			}
			cc.pads = []int{r.IntN(2), r.IntN(2), r.IntN(2), r.IntN(2)}
		} else {
			for j := 0; j < 2; j++ {
				cc.in = append(cc.in, 3+r.IntN(9))
				cc.k = append(cc.k, 1+r.IntN(3))
				cc.s = append(cc.s, 1+r.IntN(2))
				cc.d = append(cc.d, 1)
			}
			cc.pads = []int{1, 1, r.IntN(2), r.IntN(2)}
		}
		x := nnF(r, i64s(append([]int{cc.n, cc.c}, cc.in...))...)
		w := nnF(r, i64s(append([]int{cc.m, cc.c}, cc.k...))...)
		b := nnIn{}
		if cc.bias {
			b = nnF(r, int64(cc.m))
		}
		ins := []nnIn{x, w, b}
		_, want := refConv(cc, x.data, w.data, b.data)
		for _, dt := range []ir.DType{ir.Float, ir.Double} {
			op := nnOpDT(t, 17, dt, "Conv", ins, []string{"y"}, cc.attrs(false)...)
			full, err := planConv(op, nnFixedCap(1<<62))
			if err != nil {
				t.Fatal(err)
			}
			if full.noCol || full.direct {
				continue
			}
			k, ov := full.c*full.g.kVol(), full.g.outVol()
			capBytes := nnESize(op) * int64(ov) * (1 + r.Int64N(int64(k)))
			p, err := planConv(op, nnFixedCap(capBytes))
			if err != nil {
				t.Fatal(err)
			}
			for g0 := 0; g0 < p.n; {
				bt := convBatchFit(p.n-g0, ov, p.m*ov, k, p.colFloats())
				if bt.rows < 1 || bt.images < 1 {
					t.Fatalf("%v: convBatchFit gave %+v", cc, bt)
				}
				switch {
				case bt.images == 1:
					seen["one image"]++
				case bt.zInWS:
					seen["Z in workspace"]++
				default:
					seen["Z in Y"]++
				}
				if bt.colInWS {
					seen["columns in workspace"]++
				} else {
					seen["columns in Y"]++
				}
				if bt.rows < k {
					seen["K blocked"]++
				}
				g0 += bt.images
			}
			if full.g.k[2] > full.g.out[2] {
				seen["transposed columns"]++
			} else {
				seen["columns"]++
			}
			got := nnRunKernel(t, convKernel(nnFixedCap(capBytes)), op, ins)
			what := fmt.Sprintf("%v bound %d", cc, capBytes)
			if dt == ir.Double {
				nnClose(t, "float64 "+what, got[0].F64(), want, tol64)
			} else {
				nnClose(t, what, got[0].F32(), want, 1e-5)
			}
		}
	}
	for _, s := range []string{"one image", "Z in workspace", "Z in Y", "columns in workspace", "columns in Y", "K blocked", "transposed columns", "columns"} {
		if seen[s] < 5 {
			t.Errorf("%s: met %d times (%v)", s, seen[s], seen)
		}
	}
}

// eachSgemm runs f as a subtest with the float32 products on the BLAS
// compiled in ("blas") and, where package sgemm is enabled (AVX-512),
// again on it ("own"), where convolutions take the implicit path: each
// machine tests both of the paths it can run.
func eachSgemm(t *testing.T, f func(t *testing.T)) {
	saved := ownblas.Enabled
	defer func() { ownblas.Enabled = saved }()
	ownblas.Enabled = false
	t.Run("blas", f)
	if saved {
		ownblas.Enabled = true
		t.Run("own", f)
	}
}

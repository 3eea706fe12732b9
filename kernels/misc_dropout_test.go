package kernels

import (
	"math"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

// ktDropout runs Dropout (opset 13 inputs) at a step and returns the
// output and the mask.
func ktDropout(t *testing.T, op *ir.Op, ins []ktIn, step int64) (*Tensor, *Tensor) {
	t.Helper()
	out, err := ktEval(op, ins, step)
	if err != nil {
		t.Fatal(err)
	}
	return out[0], out[1]
}

func TestDropout(t *testing.T) {
	const n = 1 << 16
	x := ktF32(ktS(n), ktSeq(n, 0.001, 1)...)
	xs := viewAs[float32](x)
	train := ktBool(nil, true)
	for _, ratio := range []float32{0.1, 0.5, 0.9} {
		ins := []ktIn{ktR(x), ktR(ktF32(nil, ratio)), ktR(train)}
		op := ktBuild(t, 13, "Dropout", ins, 2, irtest.Int("seed", 42))
		y1, m1 := ktDropout(t, op, ins, 7)
		y2, m2 := ktDropout(t, op, ins, 7)
		y3, m3 := ktDropout(t, op, ins, 8)
		// Same step: same mask and output. Another step: another mask.
		ktSame(t, "same step, output", y2, y1)
		ktSame(t, "same step, mask", m2, m1)
		if string(m3.Data) == string(m1.Data) {
			t.Fatalf("ratio %v: steps 7 and 8 drew the same mask", ratio)
		}
		// Kept elements are scaled by 1/(1-ratio), dropped ones are 0, and
		// the output agrees with the mask.
		scale := 1 / (1 - float64(ratio))
		for _, r := range []struct{ y, m *Tensor }{{y1, m1}, {y3, m3}} {
			kept := 0
			ys := viewAs[float32](r.y)
			for i, keep := range r.m.Data {
				want := 0.0
				if keep == 1 {
					kept++
					want = float64(xs[i]) * scale
				} else if keep != 0 {
					t.Fatalf("mask byte %d is %d", i, keep)
				}
				if !ktNear(float64(ys[i]), want, 1e-6) {
					t.Fatalf("ratio %v: element %d is %v, want %v (mask %d)", ratio, i, ys[i], want, keep)
				}
			}
			// The kept fraction is 1-ratio within 5 standard deviations.
			p := 1 - float64(ratio)
			sd := math.Sqrt(p * (1 - p) / n)
			if f := float64(kept) / n; math.Abs(f-p) > 5*sd {
				t.Fatalf("ratio %v: kept fraction %v, want %v ± %v", ratio, f, p, 5*sd)
			}
		}
	}
}

// Without a seed attribute the stream comes from the node name: two
// nodes of different names draw different masks, one name always the
// same.
func TestDropoutNameSeed(t *testing.T) {
	x := ktF32(ktS(4096), ktSeq(4096, 1, 1)...)
	ins := []ktIn{ktR(x), ktR(ktF32(nil, 0.5)), ktR(ktBool(nil, true))}
	op := ktBuild(t, 13, "Dropout", ins, 2)
	_, m1 := ktDropout(t, op, ins, 0)
	_, m2 := ktDropout(t, op, ins, 0)
	ktSame(t, "same name", m2, m1)
	op.Name = "another"
	_, m3 := ktDropout(t, op, ins, 0)
	if string(m3.Data) == string(m1.Data) {
		t.Fatal("two node names drew the same mask")
	}
}

// Ratio 0, inference mode and the opset-10 form are the identity with
// an all-true mask.
func TestDropoutIdentity(t *testing.T) {
	x := ktF32(ktS(3, 5), ktSeq(15, -0.5, 3)...)
	allTrue := ktBool(ktS(3, 5), true, true, true, true, true, true, true, true, true, true, true, true, true, true, true)
	for name, tc := range map[string]struct {
		opset int64
		ins   []ktIn
		attrs []ir.Attr
	}{
		"ratio 0 training": {13, []ktIn{ktR(x), ktR(ktF32(nil, 0)), ktR(ktBool(nil, true))}, nil},
		"inference":        {13, []ktIn{ktR(x), ktR(ktF32(nil, 0.5)), ktR(ktBool(nil, false))}, nil},
		"no training_mode": {13, []ktIn{ktR(x), ktR(ktF32(nil, 0.5))}, nil},
		"opset 10":         {10, []ktIn{ktR(x)}, []ir.Attr{irtest.Float("ratio", 0.3)}},
	} {
		out := ktRun(t, tc.opset, "Dropout", tc.ins, 2, tc.attrs...)
		ktSame(t, name+" output", out[0], x)
		ktSame(t, name+" mask", out[1], allTrue)
	}
	// Mask output absent.
	out := ktRun(t, 13, "Dropout", []ktIn{ktR(x), ktR(ktF32(nil, 0.2)), ktR(ktBool(nil, true))}, 1)
	if len(out) != 1 || out[0].Len() != 15 {
		t.Fatalf("Dropout without mask: %v", out)
	}
}

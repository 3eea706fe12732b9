package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/ir"
)

// refBatchNorm returns y, running mean, running var (as the ONNX
// reference implementation defines them: batch variance biased), batch
// mean and inverse batch standard deviation (opset 9-13's saved_mean and
// saved_var as ONNX Runtime writes them) in float64.
func refBatchNorm(dims []int64, x, scale, b, mean, vr []float32, eps, mom float64, training bool) (y, rm, rv, bm, bv []float64) {
	n, ch, vol := int(dims[0]), int(dims[1]), nnVol(ir.Shape(dims[2:]))
	y = make([]float64, len(x))
	for c := 0; c < ch; c++ {
		m, v := float64(mean[c]), float64(vr[c])
		if training {
			var s, ss float64
			for i := 0; i < n; i++ {
				for _, e := range x[(i*ch+c)*vol:][:vol] {
					s += float64(e)
				}
			}
			cnt := float64(n * vol)
			mu := s / cnt
			for i := 0; i < n; i++ {
				for _, e := range x[(i*ch+c)*vol:][:vol] {
					ss += (float64(e) - mu) * (float64(e) - mu)
				}
			}
			va := ss / cnt
			rm = append(rm, m*mom+mu*(1-mom))
			rv = append(rv, v*mom+va*(1-mom))
			bm, bv = append(bm, mu), append(bv, 1/math.Sqrt(va+eps)) // ONNX Runtime's saved_var
			m, v = mu, va
		}
		for i := 0; i < n; i++ {
			for j := 0; j < vol; j++ {
				k := (i*ch+c)*vol + j
				y[k] = (float64(x[k])-m)/math.Sqrt(v+eps)*float64(scale[c]) + float64(b[c])
			}
		}
	}
	return
}

func positive(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = 0.2 + r.Float32()*2
	}
	return s
}

func TestBatchNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(50, 51))
	for _, dims := range [][]int64{{2, 3, 4, 5}, {4, 6}, {1, 2, 7}, {3, 2, 2, 3, 2}} {
		ch := dims[1]
		x := nnF(r, dims...)
		x.data[0] = 1e3 // large values test the variance's stability
		scale, b, mean := nnF(r, ch), nnF(r, ch), nnF(r, ch)
		vr := nnIn{shape: []int64{ch}, data: positive(r, int(ch))}
		ins := []nnIn{x, scale, b, mean, vr}
		for _, mode := range []struct {
			name   string
			opset  int64
			outs   []string
			attrs  []ir.Attr
			train  bool
			eps    float64
			moment float64
		}{
			{"inference", 15, []string{"y"}, nil, false, 1e-5, 0.9},
			{"inference eps", 15, []string{"y"}, []ir.Attr{nnAFloat("epsilon", 0.01)}, false, 0.01, 0.9},
			{"training", 15, []string{"y", "rm", "rv"}, []ir.Attr{nnAInt("training_mode", 1), nnAFloat("momentum", 0.8)}, true, 1e-5, 0.8},
			{"training y only", 15, []string{"y"}, []ir.Attr{nnAInt("training_mode", 1)}, true, 1e-5, 0.9},
			{"opset 9 training", 9, []string{"y", "rm", "rv", "sm", "sv"}, []ir.Attr{nnAFloat("momentum", 0.7)}, true, 1e-5, 0.7},
		} {
			op := nnOp(t, mode.opset, "BatchNormalization", ins, mode.outs, mode.attrs...)
			got := nnRun(t, op, ins)
			y, rm, rv, bm, bv := refBatchNorm(dims, x.data, scale.data, b.data, mean.data, vr.data, float64(float32(mode.eps)), float64(float32(mode.moment)), mode.train) // the attributes are float32
			what := fmt.Sprintf("BatchNormalization %s %v", mode.name, dims)
			nnClose(t, what+" Y", got[0].F32(), y, 1e-5)
			for i, want := range [][]float64{rm, rv, bm, bv}[:len(got)-1] {
				nnClose(t, fmt.Sprintf("%s output %d", what, i+1), got[i+1].F32(), want, 1e-5)
			}
			got64 := nnRun64(t, mode.opset, "BatchNormalization", ins, mode.outs, mode.attrs...)
			for i, want := range [][]float64{y, rm, rv, bm, bv}[:len(got64)] {
				nnClose(t, fmt.Sprintf("float64 %s output %d", what, i), got64[i].F64(), want, tol64)
			}
		}
	}
}

// refLayerNorm normalises rows of inner elements; scale and bias are
// already expanded to inner.
func refLayerNorm(x []float32, inner int, scale, bias []float64, eps float64) (y, mean, inv []float64) {
	for r := 0; r*inner < len(x); r++ {
		row := x[r*inner : (r+1)*inner]
		var s, ss float64
		for _, e := range row {
			s += float64(e)
		}
		m := s / float64(inner)
		for _, e := range row {
			ss += (float64(e) - m) * (float64(e) - m)
		}
		iv := 1 / math.Sqrt(ss/float64(inner)+eps)
		mean, inv = append(mean, m), append(inv, iv)
		for j, e := range row {
			v := (float64(e) - m) * iv
			if scale != nil {
				v *= scale[j]
			}
			if bias != nil {
				v += bias[j]
			}
			y = append(y, v)
		}
	}
	return
}

// expand broadcasts p (shape ps) to shape to, in float64.
func expand(p []float32, ps, to []int64) []float64 {
	out := make([]float64, nnVol(ir.Shape(to)))
	t := nnToInt(to)
	off := len(to) - len(ps)
	nnEach(t, func(c []int) {
		j := 0
		for i, d := range ps {
			ci := c[off+i]
			if d == 1 {
				ci = 0
			}
			j = j*int(d) + ci
		}
		out[nnFlat(t, c)] = float64(p[j])
	})
	return out
}

func TestLayerNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(52, 53))
	for _, tc := range []struct {
		x      []int64
		axis   int64
		scale  []int64
		bias   []int64 // nil: absent
		stats  bool
		double bool
	}{
		{[]int64{2, 3, 8}, -1, []int64{8}, []int64{8}, true, false},
		{[]int64{2, 3, 4, 5}, 2, []int64{4, 5}, []int64{5}, true, false},
		{[]int64{4, 6}, 0, []int64{1, 6}, nil, false, false},
		{[]int64{3, 7}, 1, []int64{7}, []int64{1}, true, true},
		{[]int64{2, 2, 3}, -2, []int64{3}, []int64{2, 1}, true, false},
	} {
		x := nnF(r, tc.x...)
		ins := []nnIn{x, nnF(r, tc.scale...)}
		if tc.bias != nil {
			ins = append(ins, nnF(r, tc.bias...))
		}
		outs := []string{"y"}
		if tc.stats {
			outs = append(outs, "mean", "inv")
		}
		attrs := []ir.Attr{nnAInt("axis", tc.axis), nnAFloat("epsilon", 1e-3)}
		if tc.double {
			attrs = append(attrs, nnAInt("stash_type", int64(ir.Double)))
		}
		op := nnOp(t, 17, "LayerNormalization", ins, outs, attrs...)
		got := nnRun(t, op, ins)
		axis := tc.axis
		if axis < 0 {
			axis += int64(len(tc.x))
		}
		norm := tc.x[axis:]
		scale := expand(ins[1].data, tc.scale, norm)
		var bias []float64
		if tc.bias != nil {
			bias = expand(ins[2].data, tc.bias, norm)
		}
		y, mean, inv := refLayerNorm(x.data, nnVol(ir.Shape(norm)), scale, bias, float64(float32(1e-3)))
		what := fmt.Sprintf("LayerNormalization %v axis %d", tc.x, tc.axis)
		nnClose(t, what, got[0].F32(), y, 1e-5)
		if tc.stats {
			for i, want := range [][]float64{mean, inv} {
				o := got[1+i]
				if tc.double {
					g := o.F64()
					for j := range g {
						if math.Abs(g[j]-want[j]) > 1e-9*math.Max(1, math.Abs(want[j])) {
							t.Fatalf("%s output %d: %v, want %v", what, i+1, g, want)
						}
					}
					continue
				}
				nnClose(t, fmt.Sprintf("%s output %d", what, i+1), o.F32(), want, 1e-5)
			}
		}
		got64 := nnRun64(t, 17, "LayerNormalization", ins, outs, attrs...)
		nnClose(t, "float64 "+what, got64[0].F64(), y, tol64)
		if tc.stats {
			for i, want := range [][]float64{mean, inv} {
				if o := got64[1+i]; tc.double {
					nnClose(t, fmt.Sprintf("float64 %s output %d", what, i+1), o.F64(), want, tol64)
				} else {
					nnClose(t, fmt.Sprintf("float64 %s output %d (float32 stash)", what, i+1), o.F32(), want, 1e-6)
				}
			}
		}
		if ws := WorkspaceBytes(op); (nnVol(ir.Shape(tc.scale)) != nnVol(ir.Shape(norm)) || tc.bias != nil && nnVol(ir.Shape(tc.bias)) != nnVol(ir.Shape(norm))) != (ws > 0) {
			t.Errorf("%s: workspace %d bytes", what, ws)
		}
	}
}

// ---- ONNX Runtime ----

func TestBatchNormORT(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(54, 55))
	ins := func() []nnIO {
		return []nnIO{nnORTIn(r, "x", 3, 4, 5, 3), nnORTIn(r, "scale", 4), nnORTIn(r, "b", 4), nnORTIn(r, "mean", 4),
			{name: "var", shape: []int64{4}, data: positive(r, 4)}}
	}
	nnORTBatch(t, 15, []nnORTCase{
		// Inference.
		{onnxtest.Node("BatchNormalization", "", nil, nil, nnPAFloat("epsilon", 1e-3)), ins(), []nnIO{{name: "y"}}, 1e-5},
		// Training: batch statistics; running_mean/var = input·momentum +
		// batch·(1 - momentum), batch variance biased.
		{onnxtest.Node("BatchNormalization", "", nil, nil, onnxtest.Int("training_mode", 1), nnPAFloat("momentum", 0.7)),
			ins(), []nnIO{{name: "y"}, {name: "running_mean"}, {name: "running_var"}}, 1e-5},
	})
	// Opset 9-13: training is implied by the extra outputs; saved_var is
	// ONNX Runtime's inverse standard deviation.
	nnORT(t, 9, onnxtest.Node("BatchNormalization", "bn", nil, nil, nnPAFloat("momentum", 0.6)),
		ins(), []nnIO{{name: "y"}, {name: "rm"}, {name: "rv"}, {name: "sm"}, {name: "sv"}}, 1e-5)
}

func TestLayerNormORT(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(56, 57))
	nnORTBatch(t, 17, []nnORTCase{
		{onnxtest.Node("LayerNormalization", "", nil, nil, onnxtest.Int("axis", -2), nnPAFloat("epsilon", 1e-4)),
			[]nnIO{nnORTIn(r, "x", 2, 3, 4, 6), nnORTIn(r, "scale", 4, 6), nnORTIn(r, "b", 4, 6)},
			[]nnIO{{name: "y"}, {name: "mean"}, {name: "inv"}}, 1e-5},
		{onnxtest.Node("LayerNormalization", "", nil, nil),
			[]nnIO{nnORTIn(r, "x", 5, 16), nnORTIn(r, "scale", 16)}, []nnIO{{name: "y"}}, 1e-5},
		{onnxtest.Node("LayerNormalization", "", nil, nil, onnxtest.Int("axis", 1)),
			[]nnIO{nnORTIn(r, "x", 3, 4, 5), nnORTIn(r, "scale", 1, 5), nnORTIn(r, "b", 4, 1)}, []nnIO{{name: "y"}, {name: ""}, {name: "inv"}}, 1e-5},
	})
}

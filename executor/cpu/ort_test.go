package cpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/ir"
)

// ortRelTol bounds max |ours − ORT| over an output tensor, relative to
// the tensor's max |ORT value|.
const ortRelTol = 1e-4

// TestORTAgreement runs exported PyTorch models (opset 17, training
// mode: BatchNormalization normalises with the batch's statistics,
// Dropout keeps its ratio and training_mode inputs) on tsplit's CPU
// runtime and on ONNX Runtime, with graph optimisations off in ORT (it
// would otherwise delete the Dropout nodes), on the same seeded inputs
// at batch 2, and compares every graph output.
//
// vgg16's classifier has two Dropout(0.5) nodes whose masks are random,
// and ORT's and tsplit's random streams differ, so both runtimes get a
// copy of vgg16 with the ratios set to 0 (Dropout still runs, in training
// mode, as in transformer_nodrop). vgg16 (550 MB) is in the integration
// tier (oracle.Integration).
func TestORTAgreement(t *testing.T) {
	for _, name := range []string{"resnet18", "resnet50", "vgg16", "transformer_nodrop"} {
		t.Run(name, func(t *testing.T) {
			if name == "vgg16" {
				oracle.Integration(t, "vgg16 is 550 MB")
			}
			compareWithORT(t, name, 2)
		})
	}
}

func compareWithORT(t *testing.T, name string, batch int64) {
	path := oracle.TorchModel(t, name)
	mp, err := compiler.ReadModelProto(path)
	if err != nil {
		t.Fatal(err)
	}
	// The model ORT runs: the file itself, or a copy whose Dropout
	// ratios were zeroed.
	ortPath := path
	if n := onnxtest.ZeroDropoutRatios(t, mp); n > 0 {
		ortPath = filepath.Join(t.TempDir(), name+"-nodrop.onnx")
		b, err := compiler.EncodeModel(mp)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ortPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: set the ratio of %d Dropout node(s) to 0 for both runtimes", name, n)
	}
	m, err := compiler.FromProto(mp, filepath.Dir(path), compiler.Options{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}

	// Seeded inputs: floats uniform in [-1, 1), int64 token ids in [0, 1000).
	rng := rand.New(rand.NewPCG(2024, uint64(len(name))))
	raw := map[string][]byte{}
	ortIn := map[string]*oracle.Tensor{}
	for _, v := range m.Graph.Inputs {
		if v.Kind != ir.KindInput {
			continue
		}
		n, _ := v.Shape.NumElements()
		switch v.DType {
		case ir.Float:
			f := make([]float32, n)
			for i := range f {
				f[i] = float32(rng.Float64()*2 - 1)
			}
			ortIn[v.Name] = oracle.FromFloat32(v.Shape, f)
		case ir.Int64:
			ids := make([]int64, n)
			for i := range ids {
				ids[i] = rng.Int64N(1000)
			}
			ortIn[v.Name] = oracle.FromInt64(v.Shape, ids)
		default:
			t.Fatalf("%s: input %q is %v%v; the test makes float32 and int64 inputs only", name, v.Name, v.DType, v.Shape)
		}
		raw[v.Name] = ortIn[v.Name].Data
		t.Logf("%s: input %q %v%v", name, v.Name, v.DType, v.Shape)
	}

	start := time.Now()
	want := oracle.ORTRun(t, ortPath, ortIn, true)
	t.Logf("%s: ONNX Runtime (optimisations off) took %v", name, time.Since(start).Round(time.Millisecond))

	probe, err := executor.New(m, mustDev(t, 0), executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	need := probe.Mem.Need()
	probe = nil
	x, err := executor.New(m, mustDev(t, need), executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Run(raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: tsplit CPU runtime took %v (pool %s)", name, res.Duration.Round(time.Millisecond), units.Bytes(need))
	x = nil
	runtime.GC()

	// Every graph output, on both sides. Training-mode BatchNormalization
	// also computes running mean and variance, but these exports do not
	// make them graph outputs; say so, so that a re-export that does is
	// noticed (they would then be compared too).
	var outNames []string
	for _, v := range m.Graph.Outputs {
		outNames = append(outNames, v.Name)
	}
	stats := 0
	for _, op := range m.Graph.Order() {
		if op.Type == "BatchNormalization" {
			for _, v := range op.Outputs()[1:] {
				if v != nil {
					stats++
				}
			}
		}
	}
	t.Logf("%s: graph outputs %q; %d BatchNormalization running-stat outputs inside the graph", name, outNames, stats)
	if len(want) != len(m.Graph.Outputs) {
		t.Errorf("%s: ORT gives %d outputs, tsplit's graph has %d", name, len(want), len(m.Graph.Outputs))
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, out := range names {
		v := m.Graph.Lookup(out)
		got, ok := res.Outputs[out]
		if v == nil || !ok {
			t.Errorf("%s: ORT output %q is not a tsplit graph output", name, out)
			continue
		}
		w := want[out]
		if w.Type != "float32" || v.DType != ir.Float {
			t.Errorf("%s: output %q is %s in ORT and %v in tsplit; want float32", name, out, w.Type, v.DType)
			continue
		}
		if !ir.Shape(w.Dims).Equal(v.Shape) {
			t.Errorf("%s: output %q has shape %v in tsplit, %v in ORT", name, out, v.Shape, w.Dims)
			continue
		}
		rel, worst, err := relErr(got, w.Float32s())
		if err != nil {
			t.Errorf("%s: output %q: %v", name, out, err)
			continue
		}
		t.Logf("%s: output %q %v: max relative error %.3g (worst element %d)", name, out, v.Shape, rel, worst)
		if !(rel <= ortRelTol) {
			t.Errorf("%s: output %q differs from ONNX Runtime: max |diff| / max |ORT| = %.3g > %g", name, out, rel, ortRelTol)
		}
	}
}

// relErr is max |got − want| / max |want| over a float32 tensor, and the
// index of the worst element.
func relErr(got []byte, want []float32) (float64, int, error) {
	if len(got) != 4*len(want) {
		return 0, 0, fmt.Errorf("%d bytes from tsplit, %d values from ORT", len(got), len(want))
	}
	var scale, diff float64
	worst := 0
	for i, w := range want {
		g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:]))
		if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
			return 0, i, fmt.Errorf("element %d is %v in tsplit (ORT %v)", i, g, w)
		}
		scale = max(scale, math.Abs(float64(w)))
		if d := math.Abs(float64(g) - float64(w)); d > diff {
			diff, worst = d, i
		}
	}
	if scale == 0 {
		return diff, worst, nil
	}
	return diff / scale, worst, nil
}

func mustDev(t testing.TB, pool int64) *cpu.Device {
	t.Helper()
	d, err := cpu.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

//go:build cuda

package cuda

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tsplit/tsplit/backend/native"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/policy"
)

// gpuTol bounds the difference of a step's outputs between the GPU and
// the CPU device, normwise (plantest.SameOutput): cuBLAS sums the
// products in another order than the reference GEMM, and the errors of
// a whole training step compound across layers.
const gpuTol = 1e-3

// TestGPUMatchesCPU is make test-gpu: each test model's SGD training
// step, unplanned and planned by tsplit into 60 % of its peak, lowered
// to the native plan and run by the same runtime (executor.Program) on
// the CPU device and on GPU 0. The outputs must agree within gpuTol and
// both runs must reach exactly the plan's pool (the high-water the
// plan promised). It needs a GPU and TSPLIT_GPU=1; without a GPU the
// test binary does not even start (gorgonia.org/cu's init).
func TestGPUMatchesCPU(t *testing.T) {
	if os.Getenv("TSPLIT_GPU") == "" {
		t.Skip("set TSPLIT_GPU=1 on a machine with a GPU (make test-gpu)")
	}
	models := []string{"resnet18-small.onnx", "vgg16-small.onnx", "gpt-small.onnx", "bert-base-small.onnx", "inception-small.onnx"}
	var paths []string
	for _, m := range models {
		paths = append(paths, filepath.Join("../../testdata/onnx", m))
	}
	for _, m := range []string{"resnet18", "mobilenet_v2", "transformer"} {
		if p := filepath.Join("../../testdata/torch", m+".onnx"); fileExists(p) {
			paths = append(paths, p)
		}
	}
	for _, p := range paths {
		for _, frac := range []float64{0, 0.6} {
			t.Run(filepath.Base(p)+map[bool]string{true: "/unplanned", false: "/planned"}[frac == 0], func(t *testing.T) {
				compareDevices(t, p, 2, frac)
			})
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func stepOf(t *testing.T, path string, batch int64) *ir.Model {
	t.Helper()
	m, err := compiler.Import(path, compiler.Options{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "sgd"}); err != nil {
		t.Fatal(err)
	}
	return m
}

func compareDevices(t *testing.T, path string, batch int64, frac float64) {
	m := stepOf(t, path, batch)
	in := plantest.Inputs(t, m)
	if frac > 0 {
		peak := plantest.Peak(t, m)
		if _, err := policy.Plan(context.Background(), m, policy.Tsplit, policy.Options{Budget: int64(float64(peak) * frac)}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := native.Lower(m)
	if err != nil {
		t.Fatal(err)
	}
	data, err := native.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	l, err := native.Load(data, filepath.Base(path)+".tsplan")
	if err != nil {
		t.Fatal(err)
	}
	cdev, err := cpu.New(l.Program.Pool)
	if err != nil {
		t.Fatal(err)
	}
	want, err := l.Program.Run(context.Background(), cdev, executor.ProgramRun{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	gdev, err := New(0, l.Program.Pool)
	if err != nil {
		t.Fatal(err)
	}
	defer gdev.Close()
	// the first run loads the kernels (the driver compiles the PTX);
	// the second is the one measured
	if _, err := l.Program.Run(context.Background(), gdev, executor.ProgramRun{Inputs: in}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Program.Run(context.Background(), gdev, executor.ProgramRun{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range m.Graph.Outputs {
		if err := plantest.SameOutput(m.Graph, v.Name, got.Outputs[v.Name], want.Outputs[v.Name], gpuTol); err != nil {
			t.Errorf("GPU vs CPU: %v", err)
		}
	}
	if got.Reach != l.Program.Pool || want.Reach != l.Program.Pool {
		t.Errorf("high-water: GPU %d, CPU %d, plan's pool %d", got.Reach, want.Reach, l.Program.Pool)
	}
	gs, cs := executor.Summarize(got.Timeline), executor.Summarize(want.Timeline)
	t.Logf("%s b%d (%s): pool %d bytes; step GPU %v (compute busy %v, h2d %v, d2h %v), CPU %v",
		filepath.Base(path), batch, gdev.Name(), l.Program.Pool, gs.Step.Round(time.Microsecond),
		gs.Compute.Busy.Round(time.Microsecond), gs.H2D.Busy.Round(time.Microsecond), gs.D2H.Busy.Round(time.Microsecond),
		cs.Step.Round(time.Millisecond))
}

package executor_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
)

func floats(n int, f func(i int) float32) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f(i)))
	}
	return b
}

// chain: x[64,64] → Relu → MatMul(w) → Add(x) → Relu → y
func chain(t *testing.T) *ir.Model {
	b := New(t)
	x := b.Input("x", ir.Float, 64, 64)
	w := b.Init("w", &ir.Tensor{DType: ir.Float, Shape: ir.Shape{64, 64}, Raw: floats(64*64, func(i int) float32 { return float32(i%7) / 7 })})
	a := b.Op("Relu", V(x))
	m := b.Op("MatMul", V(a, w))
	s := b.Op("Add", V(m, x))
	y := b.Op("Relu", V(s))
	return b.Return(y)
}

func run(t *testing.T, m *ir.Model, pool int64, in map[string][]byte) (*executor.Result, *executor.Executor, error) {
	t.Helper()
	dev, err := cpu.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(m, dev, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Run(in)
	return res, x, err
}

// Below the need the run fails with an error naming the op, the tensor,
// the bytes asked and free and the largest block; at the need it runs
// and the measured high-water mark equals the memory model's peak.
func TestCapacity(t *testing.T) {
	m := chain(t)
	in := map[string][]byte{"x": floats(64*64, func(i int) float32 { return float32(i%13)/13 - 0.5 })}
	probe, err := executor.New(m, mustCPU(t, 0), executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	need := probe.Mem.Need()
	_, _, err = run(t, m, need-1, in)
	var ae *executor.AllocError
	if !errors.As(err, &ae) {
		t.Fatalf("pool of need-1 bytes: want an allocation error, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"out of device memory at node", "tensor", "bytes asked", "bytes free", "largest free block"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	res, x, err := run(t, m, need, in)
	if err != nil {
		t.Fatalf("pool of exactly the need: %v", err)
	}
	if res.HighWater != x.Mem.Peak {
		t.Fatalf("measured high-water %d, memory model peak %d", res.HighWater, x.Mem.Peak)
	}
	if res.Reach > need {
		t.Fatalf("run reached offset %d past the need %d", res.Reach, need)
	}
	for i, r := range res.Timeline {
		if r.Live != x.Mem.Live[i] {
			t.Errorf("op %d: measured live %d, memory model %d", i, r.Live, x.Mem.Live[i])
		}
	}
}

func mustCPU(t *testing.T, n int64) *cpu.Device {
	d, err := cpu.New(n)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// swapN sizes the swap test: big enough that the MatMul after the
// swap-out (≈0.9 GFLOP) and the paced copy (2.4 MB at 64 MB/s, ≈37 ms)
// both last milliseconds, far longer than a goroutine takes to start.
const swapN = 768

// swapped: like chain, but Relu's output is swapped out after MatMul's
// input is ready, a big MatMul runs, and the tensor is swapped back in
// for the Add.
func swapped(t *testing.T, swap bool) *ir.Model {
	b := New(t)
	const n = swapN
	x := b.Input("x", ir.Float, n, n)
	w := b.Init("w", &ir.Tensor{DType: ir.Float, Shape: ir.Shape{n, n}, Raw: floats(n*n, func(i int) float32 { return float32(i%5) / 50 })})
	a := b.Op("Relu", V(x))
	var h *ir.Value
	if swap {
		h = b.OpDomain(ir.Domain, "SwapOut", 1, V(a))[0]
	}
	m1 := b.Op("MatMul", V(x, w))
	m2 := b.Op("MatMul", V(m1, w))
	m3 := b.Op("MatMul", V(m2, w))
	back := a
	if swap {
		back = b.OpDomain(ir.Domain, "SwapIn", 1, V(h))[0]
	}
	s := b.Op("Add", V(m3, back))
	return b.Return(s)
}

// A swap-out runs on the D2H stream while the following compute op runs:
// their recorded intervals overlap. The copy streams are paced to
// 64 MB/s (a slow PCIe link, Options.Link) so the copy lasts long
// enough to see; results are bit-exact with the unswapped graph.
func TestSwapOverlapsCompute(t *testing.T) {
	in := map[string][]byte{"x": floats(swapN*swapN, func(i int) float32 { return float32(i%11)/11 - 0.3 })}
	plain, _, err := run(t, swapped(t, false), 64<<20, in)
	if err != nil {
		t.Fatal(err)
	}
	m := swapped(t, true)
	dev := mustCPU(t, 64<<20)
	x, err := executor.New(m, dev, executor.Options{Link: executor.Link{H2D: 64e6, D2H: 64e6}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	var out, comp *executor.Record
	for i := range res.Timeline {
		r := &res.Timeline[i]
		if r.Op.Type == "SwapOut" {
			out = r
			comp = &res.Timeline[i+1]
		}
	}
	if out.Stream != executor.D2H || comp.Stream != executor.Compute {
		t.Fatalf("streams: swap-out on %s, next op on %s", out.Stream, comp.Stream)
	}
	t.Logf("swap-out %v–%v, %s %v–%v", out.Start, out.End, comp.Op.Type, comp.Start, comp.End)
	if !(out.Start < comp.End && comp.Start < out.End) {
		t.Fatalf("swap-out [%v, %v] and %s [%v, %v] do not overlap", out.Start, out.End, comp.Op.Describe(), comp.Start, comp.End)
	}
	if len(plain.Outputs) != 1 || len(res.Outputs) != 1 {
		t.Fatalf("want one output each")
	}
	for _, want := range plain.Outputs {
		for _, got := range res.Outputs {
			if !bytes.Equal(got, want) {
				t.Fatal("output differs with swapping")
			}
		}
	}
	// Swapping frees the tensor during the later MatMuls.
	_, px, _ := run(t, swapped(t, false), 64<<20, in)
	if a, b := liveAtNth(x, "MatMul", 2), liveAtNth(px, "MatMul", 2); a != b-swapN*swapN*4 {
		t.Fatalf("live at the second MatMul: %d with swap, %d without; want one tensor less", a, b)
	}
	if x.Mem.HostPeak != swapN*swapN*4 {
		t.Fatalf("host peak %d, want %d", x.Mem.HostPeak, swapN*swapN*4)
	}
}

// liveAtNth is the memory model's live bytes at the n-th op of a type.
func liveAtNth(x *executor.Executor, typ string, n int) int64 {
	for i, op := range x.Mem.Order {
		if op.Type == typ {
			if n--; n == 0 {
				return x.Mem.Live[i]
			}
		}
	}
	return -1
}

// Weights stay in the pool between runs; feeding a weight replaces it.
func TestWeightsResidentAcrossRuns(t *testing.T) {
	m := chain(t)
	in := map[string][]byte{"x": floats(64*64, func(i int) float32 { return float32(i%13)/13 - 0.5 })}
	dev := mustCPU(t, 1<<20)
	x, err := executor.New(m, dev, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := x.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := x.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	out := m.Graph.Outputs[0].Name
	if !bytes.Equal(r1.Outputs[out], r2.Outputs[out]) {
		t.Fatal("second run differs")
	}
	in["w"] = floats(64*64, func(int) float32 { return 0 })
	r3, err := x.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(r1.Outputs[out], r3.Outputs[out]) {
		t.Fatal("a fed weight was ignored")
	}
	delete(in, "w")
	r4, err := x.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r1.Outputs[out], r4.Outputs[out]) {
		t.Fatal("the initializer was not restored after a fed weight")
	}
}

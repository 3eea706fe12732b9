package executor_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/kernels"
)

func int64s(vals ...int64) []byte {
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return b
}

// panicking wraps the CPU device and panics in the launch of the op
// named boom: on the stream's goroutine, or on a worker of
// kernels.Parallel (where a panic cannot be recovered by the caller
// unless Parallel carries it back).
type panicking struct {
	*cpu.Device
	boom     string
	parallel bool
}

func (d *panicking) Launch(l *executor.Launch) error {
	if l.Op.Name == d.boom {
		if d.parallel {
			kernels.Parallel(64, func(lo, hi int) {
				if lo == 0 {
					var m map[string]int
					m["x"] = 1 // a nil map write: a runtime error, as a kernel bug would be
				}
			})
		}
		panic("kernel bug")
	}
	return d.Device.Launch(l)
}

// An op that fails at run time, wherever it is in the order, is an
// error naming it, and the ops after it do not run; a kernel that
// panics is an error too, marked as a bug (issue 12, item 7: any op but
// the last failing panicked the executor).
func TestRunFailures(t *testing.T) {
	// gather: table[4,3] indexed by idx[2] → Relu → Relu ... → y.
	gather := func(t *testing.T, tail int) *ir.Model {
		b := New(t)
		table := b.Init("table", &ir.Tensor{DType: ir.Float, Shape: ir.Shape{4, 3}, Raw: floats(12, func(i int) float32 { return float32(i) })})
		idx := b.Input("idx", ir.Int64, 2)
		y := b.Op("Gather", V(table, idx))
		for range tail {
			y = b.Op("Relu", V(y))
		}
		return b.Return(y)
	}
	cases := []struct {
		name   string
		model  func(t *testing.T) *ir.Model
		dev    func(t *testing.T) executor.Device
		inputs map[string][]byte
		want   []string // substrings of the error
		panic  bool
	}{
		{"gather-out-of-range-then-relu", func(t *testing.T) *ir.Model { return gather(t, 1) }, nil,
			map[string][]byte{"idx": int64s(0, 10)}, []string{`node "Gather1" (Gather)`, "10", "out of range"}, false},
		{"gather-out-of-range-then-many", func(t *testing.T) *ir.Model { return gather(t, 40) }, nil,
			map[string][]byte{"idx": int64s(-9, 1)}, []string{`node "Gather1" (Gather)`, "out of range"}, false},
		{"gather-out-of-range-last", func(t *testing.T) *ir.Model { return gather(t, 0) }, nil,
			map[string][]byte{"idx": int64s(4, 1)}, []string{`node "Gather1" (Gather)`, "out of range"}, false},
		{"kernel-panic-mid-chain", chain, func(t *testing.T) executor.Device {
			return &panicking{Device: mustCPU(t, 1<<20), boom: "MatMul2"}
		}, map[string][]byte{"x": floats(64*64, func(i int) float32 { return 1 })},
			[]string{`node "MatMul2" (MatMul)`, "panicked", "kernel bug"}, true},
		{"kernel-panic-in-parallel-worker", chain, func(t *testing.T) executor.Device {
			return &panicking{Device: mustCPU(t, 1<<20), boom: "Relu1", parallel: true}
		}, map[string][]byte{"x": floats(64*64, func(i int) float32 { return 1 })},
			[]string{`node "Relu1" (Relu)`, "panicked", "nil map"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.model(t)
			var dev executor.Device = mustCPU(t, 1<<20)
			if c.dev != nil {
				dev = c.dev(t)
			}
			x, err := executor.New(m, dev, executor.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 { // the executor stays usable after a failed run
				_, err = x.Run(c.inputs)
				if err == nil {
					t.Fatal("the run succeeded, want an error")
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				var oe *executor.OpError
				if !errors.As(err, &oe) || executor.IsPanic(err) != c.panic {
					t.Fatalf("error %v: want an *OpError with Panic %v", err, c.panic)
				}
				if c.panic && len(oe.Stack) == 0 {
					t.Error("a kernel panic carries no stack")
				}
			}
		})
	}
}

// Ops on empty tensors (shapes with a 0) run: an op whose outputs are
// all empty is not launched, and an op reading empty inputs computes
// its non-empty output (issue 12, item 8: Softmax over [4,0] panicked).
func TestRunEmptyTensors(t *testing.T) {
	cases := []struct {
		name   string
		build  func(b *B) *ir.Value
		inputs map[string][]byte
		want   []float32
	}{
		{"softmax-4x0", func(b *B) *ir.Value { return b.Op("Softmax", V(b.Input("x", ir.Float, 4, 0))) }, map[string][]byte{"x": nil}, nil},
		{"relu-0x3", func(b *B) *ir.Value { return b.Op("Relu", V(b.Input("x", ir.Float, 0, 3))) }, map[string][]byte{"x": nil}, nil},
		{"reshape-4x0-to-minus-1", func(b *B) *ir.Value {
			return b.Op("Reshape", V(b.Input("x", ir.Float, 4, 0), b.Ints("shape", -1)))
		}, map[string][]byte{"x": nil}, nil},
		{"reducesum-over-empty", func(b *B) *ir.Value {
			return b.Op("ReduceSum", V(b.Input("x", ir.Float, 0, 3), b.Ints("axes", 0)), ir.Attr{Name: "keepdims", Type: ir.AttrInt, Int: 0})
		}, map[string][]byte{"x": nil}, []float32{0, 0, 0}},
		{"concat-with-empty", func(b *B) *ir.Value {
			return b.Op("Concat", V(b.Input("x", ir.Float, 0, 2), b.Input("y", ir.Float, 2, 2)), ir.Attr{Name: "axis", Type: ir.AttrInt, Int: 0})
		}, map[string][]byte{"x": nil, "y": floats(4, func(i int) float32 { return float32(i) })}, []float32{0, 1, 2, 3}},
		{"matmul-inner-0", func(b *B) *ir.Value {
			return b.Op("MatMul", V(b.Input("x", ir.Float, 2, 0), b.Input("y", ir.Float, 0, 3)))
		}, map[string][]byte{"x": nil, "y": nil}, []float32{0, 0, 0, 0, 0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := New(t)
			y := c.build(b)
			m := b.Return(y)
			probe, err := executor.New(m, mustCPU(t, 0), executor.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, _, err := run(t, m, probe.Mem.Need(), c.inputs)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Outputs[y.Name]
			if len(got) != 4*len(c.want) {
				t.Fatalf("output has %d bytes, want %d", len(got), 4*len(c.want))
			}
			for i, w := range c.want {
				if g := (&kernels.Tensor{DType: ir.Float, Shape: ir.Shape{int64(len(c.want))}, Data: got}).F32()[i]; g != w {
					t.Fatalf("output[%d] = %v, want %v", i, g, w)
				}
			}
		})
	}
}

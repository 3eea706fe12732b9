package kernels

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/tsplit/tsplit/internal/quote"
	"github.com/tsplit/tsplit/ir"
)

// Tensor is a typed view of memory owned by the executor. Data has
// exactly the bytes the shape needs, row-major, little-endian.
type Tensor struct {
	DType ir.DType
	Shape ir.Shape
	Data  []byte
}

// F32 views the data as float32s (no copy).
func (t *Tensor) F32() []float32 { return viewAs[float32](t) }

// F64 views the data as float64s.
func (t *Tensor) F64() []float64 { return viewAs[float64](t) }

// I64 views the data as int64s.
func (t *Tensor) I64() []int64 { return viewAs[int64](t) }

// I32 views the data as int32s.
func (t *Tensor) I32() []int32 { return viewAs[int32](t) }

// Len is the element count.
func (t *Tensor) Len() int {
	n, _ := t.Shape.NumElements()
	return int(n)
}

// Ctx is what a kernel sees: the op (attributes), its input and output
// tensors (nil where absent) and its scratch space.
type Ctx struct {
	Op        *ir.Op
	In        []*Tensor
	Out       []*Tensor
	Workspace []byte
	// Step counts executions of the graph, so random ops (Dropout) draw
	// fresh masks each training step yet stay reproducible.
	Step int64
	// Opset is the operator-set version of the op's domain in its model
	// (a few ops, e.g. Softmax before 13, change meaning with it).
	Opset int64
}

// Errorf makes an error naming the op.
func (c *Ctx) Errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", c.Op.Describe(), fmt.Sprintf(format, args...))
}

// Kernel implements one operator.
type Kernel struct {
	// Run computes the outputs; output tensors are allocated with the
	// shapes the IR inferred.
	Run func(c *Ctx) error
	// Workspace is the scratch the kernel needs, in bytes (nil: none).
	// The memory model counts it as live during the op.
	Workspace func(op *ir.Op) int64
	// DTypes lists the element types Run supports for input 0 (nil:
	// any). An op on another type is refused before running.
	DTypes []ir.DType
}

// CPU is the op registry's slot of the CPU reference kernels. A device
// with kernels of its own (CUDA) declares a slot of its own beside it;
// the memory model sizes an op's scratch from the Workspace of the
// kernel that will run it.
var CPU = ir.NewSlot[*Kernel]("kernel/cpu")

func init() {
	CPU.OptOut("", "LpPool", "not written: no model tsplit runs uses Lp pooling")
	CPU.OptOut("", "GlobalLpPool", "not written: no model tsplit runs uses Lp pooling")
	for _, t := range []string{"SwapOut", "SwapIn"} {
		CPU.OptOut(ir.Domain, t, "a transfer: the executor runs it on a copy stream (Device.ToHost/ToDevice)")
	}
}

// Register fills the CPU slot of domain:typ. Duplicates panic (init-time
// programming error), as do ops outside the registry.
func Register(domain, typ string, k Kernel) {
	if k.Run == nil {
		panic("kernels: kernel " + typ + " has no Run")
	}
	CPU.Set(domain, typ, &k)
}

// Lookup returns the CPU kernel of an op, or nil.
func Lookup(domain, typ string) *Kernel {
	k, _ := CPU.Lookup(domain, typ)
	return k
}

// Supported reports whether op has a kernel that accepts its input type.
func Supported(op *ir.Op) error {
	k := Lookup(op.Domain, op.Type)
	if k == nil {
		return fmt.Errorf("%s: no kernel for %s in the reference runtime", op.Describe(), quote.Name(op.QualifiedType()))
	}
	if len(k.DTypes) > 0 && op.Input(0) != nil {
		dt := op.Input(0).DType
		for _, d := range k.DTypes {
			if d == dt {
				return nil
			}
		}
		return fmt.Errorf("%s: the reference kernel of %s does not support element type %v", op.Describe(), quote.Name(op.QualifiedType()), dt)
	}
	return nil
}

// WorkspaceBytes is the scratch an op needs (0 for none or no kernel).
func WorkspaceBytes(op *ir.Op) int64 {
	if k := Lookup(op.Domain, op.Type); k != nil && k.Workspace != nil {
		return k.Workspace(op)
	}
	return 0
}

// Threads is how many goroutines Parallel uses.
var Threads = runtime.GOMAXPROCS(0)

// Parallel splits [0, n) into at most Threads contiguous chunks and runs
// fn on each concurrently; small n runs inline. A panic in a chunk is
// raised again in the caller once every chunk has ended, as a
// *WorkerPanic: a panic on a worker goroutine would otherwise end the
// process, past any recover of the caller (the executor turns a
// kernel's panic into an error naming the op).
func Parallel(n int, fn func(lo, hi int)) {
	t := Threads
	if t > n {
		t = n
	}
	if t <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first *WorkerPanic
	)
	chunk := (n + t - 1) / t
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					once.Do(func() { first = &WorkerPanic{Value: r, Stack: debug.Stack()} })
				}
			}()
			fn(lo, hi)
		}(lo, hi)
	}
	wg.Wait()
	if first != nil {
		panic(first)
	}
}

// WorkerPanic is a panic of one of Parallel's goroutines, carried to
// the caller with the stack where it happened.
type WorkerPanic struct {
	Value any
	Stack []byte
}

func (p *WorkerPanic) Error() string { return fmt.Sprint(p.Value) }

// NewTensor allocates a zeroed tensor on the Go heap (tests, constants).
func NewTensor(dt ir.DType, shape ir.Shape) (*Tensor, error) {
	n, err := shape.Bytes(dt)
	if err != nil {
		return nil, err
	}
	return &Tensor{DType: dt, Shape: shape.Clone(), Data: make([]byte, n)}, nil
}

// FromIR wraps an ir.Tensor's bytes (no copy).
func FromIR(t *ir.Tensor) *Tensor { return &Tensor{DType: t.DType, Shape: t.Shape, Data: t.Raw} }

// Eval runs one op on heap tensors: outputs get the shapes the IR
// inferred for the op, workspace is allocated as the kernel asks. It is
// the executor-free path used by kernel tests.
func Eval(op *ir.Op, in []*Tensor, step int64) ([]*Tensor, error) {
	return EvalOpset(op, ir.MaxOpset, in, step)
}

// EvalOpset is Eval for an op of a model importing the given opset.
func EvalOpset(op *ir.Op, opset int64, in []*Tensor, step int64) ([]*Tensor, error) {
	if err := Supported(op); err != nil {
		return nil, err
	}
	return evalKernel(op, opset, in, step)
}

// evalKernel is EvalOpset without the element-type check (tests run
// kernels on types they refuse, to see their own errors).
func evalKernel(op *ir.Op, opset int64, in []*Tensor, step int64) ([]*Tensor, error) {
	k := Lookup(op.Domain, op.Type)
	if k == nil {
		return nil, fmt.Errorf("%s: no kernel for %s in the reference runtime", op.Describe(), quote.Name(op.QualifiedType()))
	}
	out := make([]*Tensor, len(op.Outputs()))
	for i, v := range op.Outputs() {
		if v == nil {
			continue
		}
		t, err := NewTensor(v.DType, v.Shape)
		if err != nil {
			return nil, fmt.Errorf("%s: output %q: %v", op.Describe(), v.Name, err)
		}
		out[i] = t
	}
	var ws []byte
	if k.Workspace != nil {
		ws = make([]byte, k.Workspace(op))
	}
	c := &Ctx{Op: op, In: in, Out: out, Workspace: ws, Step: step, Opset: opset}
	if err := k.Run(c); err != nil {
		return nil, err
	}
	return out, nil
}

// Interpret runs a whole model on heap tensors, op by op in order, with
// no memory cap: the reference evaluation used by tests (gradient checks,
// differential tests). feeds gives the graph inputs by name; weights come
// from their initializers. It returns every value computed, by ValueID.
func Interpret(m *ir.Model, feeds map[string]*Tensor, step int64) ([]*Tensor, error) {
	g := m.Graph
	vals := make([]*Tensor, g.NumValueIDs())
	for _, v := range g.Inputs {
		if v.Kind == ir.KindInit {
			continue
		}
		t, ok := feeds[v.Name]
		if !ok {
			return nil, fmt.Errorf("kernels: no data for graph input %q", v.Name)
		}
		vals[v.ID] = t
	}
	for _, v := range g.Inits {
		t, err := v.Data()
		if err != nil || t == nil {
			return nil, fmt.Errorf("kernels: weight %q has no data (%v)", v.Name, err)
		}
		vals[v.ID] = FromIR(t)
	}
	for _, op := range g.Order() {
		in := make([]*Tensor, len(op.Inputs()))
		for i, v := range op.Inputs() {
			if v != nil {
				in[i] = vals[v.ID]
			}
		}
		if k := ir.CopyOf(op); k == ir.ToHost || k == ir.ToDevice {
			vals[op.Output(0).ID] = in[0] // a transfer does not change data
			continue
		}
		out, err := EvalOpset(op, m.Opset(op.Domain), in, step)
		if err != nil {
			return nil, err
		}
		for i, v := range op.Outputs() {
			if v != nil {
				vals[v.ID] = out[i]
			}
		}
	}
	return vals, nil
}

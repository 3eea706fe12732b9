// Package cpu is the CPU reference device: a pool of exactly the
// budget's bytes in host RAM, float32 kernels from package kernels, and
// copies between the pool and host buffers (a memory copy; the
// executor's Link paces its copy streams to an emulated PCIe link so
// that swap timing on the CPU resembles a GPU's). The executor's three
// streams run concurrently on it for real.
package cpu

import (
	"fmt"

	"github.com/dustin/go-humanize"

	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/internal/sysmem"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
)

// MaxPool bounds the pool the CPU device will allocate in host RAM.
const MaxPool = int64(64) << 30

// Device is the CPU reference device.
type Device struct {
	pool []byte
}

// New allocates a pool of poolBytes. A pool larger than the memory the
// machine has available is refused: allocating it would end the process
// with Go's fatal out-of-memory error, which nothing can catch.
func New(poolBytes int64) (*Device, error) {
	if poolBytes < 0 || poolBytes > MaxPool {
		return nil, fmt.Errorf("cpu device: pool of %d bytes is outside 0..%d", poolBytes, MaxPool)
	}
	if err := CheckMemory(poolBytes, "a pool"); err != nil {
		return nil, err
	}
	return &Device{pool: make([]byte, poolBytes)}, nil
}

// CheckMemory is an error when the machine has less memory available
// than n bytes, which what names in the message ("a pool"); nil when it
// has enough or cannot tell. A run checks the pool with the host
// memory it adds (inputs, swapped-out tensors) the same way.
func CheckMemory(n int64, what string) error {
	if avail, ok := available(); ok && n > avail {
		return fmt.Errorf("cpu device: %s of %s (%d bytes) is more than the %s this machine has available", what, humanize.IBytes(uint64(n)), n, humanize.IBytes(uint64(avail)))
	}
	return nil
}

// available is the machine's available memory (sysmem.Available); a
// variable so that a test can pose as a smaller machine.
var available = sysmem.Available

// Name implements executor.Device.
func (d *Device) Name() string { return "cpu (reference kernels)" }

// PoolBytes implements executor.Device.
func (d *Device) PoolBytes() int64 { return int64(len(d.pool)) }

// Check implements executor.Device.
func (d *Device) Check(op *ir.Op) error { return kernels.Supported(op) }

func (d *Device) view(r *executor.Ref) *kernels.Tensor {
	if r == nil {
		return nil
	}
	return &kernels.Tensor{DType: r.DType, Shape: r.Shape, Data: d.pool[r.Off : r.Off+r.Bytes : r.Off+r.Bytes]}
}

// Read implements executor.Reader: the tensor's bytes in the pool.
func (d *Device) Read(r executor.Ref) []byte {
	return d.pool[r.Off : r.Off+r.Bytes : r.Off+r.Bytes]
}

// Launch implements executor.Device.
func (d *Device) Launch(l *executor.Launch) error {
	op := l.Op
	k := kernels.Lookup(op.Domain, op.Type)
	if k == nil {
		return fmt.Errorf("%s: no kernel", op.Describe())
	}
	c := &kernels.Ctx{Op: op, In: make([]*kernels.Tensor, len(l.In)), Out: make([]*kernels.Tensor, len(l.Out)), Step: l.Step, Opset: l.Opset}
	for i, r := range l.In {
		c.In[i] = d.view(r)
	}
	for i, r := range l.Out {
		c.Out[i] = d.view(r)
	}
	if ws := l.Workspace; ws.Bytes > 0 {
		c.Workspace = d.pool[ws.Off : ws.Off+ws.Bytes : ws.Off+ws.Bytes]
	}
	return k.Run(c)
}

// ToHost implements executor.Device.
func (d *Device) ToHost(dst []byte, src executor.Ref) error {
	copy(dst, d.pool[src.Off:src.Off+src.Bytes])
	return nil
}

// ToDevice implements executor.Device.
func (d *Device) ToDevice(dst executor.Ref, src []byte) error {
	copy(d.pool[dst.Off:dst.Off+dst.Bytes], src)
	return nil
}

//go:build cuda

package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tsplit/tsplit/backend/cuda/launch"
	"github.com/tsplit/tsplit/backend/cuda/ptx"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/ir"
)

// StageBytes is the size of each copy stream's page-locked staging
// buffer; a larger transfer goes through it in chunks.
const StageBytes = 64 << 20

// ScratchBytes is the device's scratch beside the pool: the partial
// results of split reductions (launch.Op.Scratch), 8 bytes each, within
// one op's launches. Like cuBLAS's own workspace it is not tensor
// memory, so the plan's pool does not count it.
const ScratchBytes = 8 << 20

// Device is the CUDA device. The executor calls Launch from its compute
// stream, ToDevice from its H2D stream and ToHost from its D2H stream,
// each from its own goroutine; every call queues its work on the
// matching CUDA stream and waits for that stream before it returns,
// because the executor's events (the control edges of the plan) are
// host-side and fire when a call returns. The three CUDA streams still
// run concurrently, so copies overlap compute as the plan intends.
type Device struct {
	name              string
	ctx               cu.CUContext
	pool              cu.DevicePtr
	scratch           cu.DevicePtr
	size              int64
	mod               *module
	blas              *blas
	compute, h2d, d2h cu.Stream
	// one staging buffer per copy direction; the mutexes serialise its
	// users (the D2H stream, and the compute stream when the executor's
	// finite check reads a launch's outputs back)
	stageH2D, stageD2H *pinned
	h2dMu, d2hMu       sync.Mutex
	mu                 sync.Mutex // makes Close idempotent; calls after Close are the caller's error
	closed             bool
}

// New opens GPU ordinal, allocates a pool of poolBytes and loads the
// kernels.
func New(ordinal int, poolBytes int64) (d *Device, err error) {
	if poolBytes <= 0 {
		return nil, fmt.Errorf("cuda: a pool of %d bytes", poolBytes)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	name, err := dev.Name()
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	total, err := dev.TotalMem()
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	if poolBytes > total {
		return nil, fmt.Errorf("cuda: a pool of %d bytes does not fit %s's %d bytes", poolBytes, name, total)
	}
	d = &Device{name: name, size: poolBytes}
	if d.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
		return nil, fmt.Errorf("cuda: context on %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			d.release()
		}
	}()
	if d.pool, err = cu.MemAlloc(poolBytes); err != nil {
		return nil, fmt.Errorf("cuda: allocating the %d-byte pool on %s: %w", poolBytes, name, err)
	}
	if d.scratch, err = cu.MemAlloc(ScratchBytes); err != nil {
		return nil, fmt.Errorf("cuda: allocating the %d-byte scratch on %s: %w", ScratchBytes, name, err)
	}
	for _, s := range []*cu.Stream{&d.compute, &d.h2d, &d.d2h} {
		if *s, err = cu.MakeStream(cu.NonBlocking); err != nil {
			return nil, fmt.Errorf("cuda: creating a stream: %w", err)
		}
	}
	if d.mod, err = loadModule(ptx.Module, ptx.Kernels()); err != nil {
		return nil, err
	}
	if d.blas, err = newBlas(d.compute); err != nil {
		return nil, err
	}
	if d.stageH2D, err = allocPinned(StageBytes); err != nil {
		return nil, err
	}
	if d.stageD2H, err = allocPinned(StageBytes); err != nil {
		return nil, err
	}
	return d, nil
}

// release frees what New got (on the thread holding the context).
func (d *Device) release() {
	if d.stageH2D != nil {
		d.stageH2D.free()
	}
	if d.stageD2H != nil {
		d.stageD2H.free()
	}
	if d.blas != nil {
		d.blas.destroy()
	}
	if d.mod != nil {
		d.mod.unload()
	}
	for _, s := range []*cu.Stream{&d.compute, &d.h2d, &d.d2h} {
		if s.C() != nil {
			s.Destroy()
		}
	}
	if d.pool != 0 {
		cu.MemFree(d.pool)
	}
	if d.scratch != 0 {
		cu.MemFree(d.scratch)
	}
	d.ctx.Destroy()
}

// Close frees the pool, the module and the context.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return err
	}
	d.release()
	return nil
}

// Name describes the device for reports.
func (d *Device) Name() string { return fmt.Sprintf("cuda: %s", d.name) }

// PoolBytes is the size of the one device allocation.
func (d *Device) PoolBytes() int64 { return d.size }

// Check reports whether the kernels cover op.
func (d *Device) Check(op *ir.Op) error { return launch.Supported(op) }

// bound pins the calling goroutine to its thread with the context
// current; the returned func undoes it.
func (d *Device) bound() (func(), error) {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("cuda: making the context current: %w", err)
	}
	return runtime.UnlockOSThread, nil
}

func (d *Device) addr(r executor.Ref) (uint64, error) {
	if r.Off < 0 || r.Off+r.Bytes > d.size {
		return 0, fmt.Errorf("cuda: [%d, +%d) is outside the %d-byte pool", r.Off, r.Bytes, d.size)
	}
	return uint64(d.pool) + uint64(r.Off), nil
}

func (d *Device) tensor(r *executor.Ref) (*launch.Tensor, error) {
	if r == nil {
		return nil, nil
	}
	a, err := d.addr(*r)
	if err != nil {
		return nil, err
	}
	return &launch.Tensor{Addr: a, DType: r.DType, Shape: r.Shape}, nil
}

// Launch runs one op on the compute stream and waits for it.
func (d *Device) Launch(l *executor.Launch) error {
	done, err := d.bound()
	if err != nil {
		return err
	}
	defer done()
	lo := &launch.Op{Op: l.Op, Opset: l.Opset, Step: l.Step, Scratch: uint64(d.scratch), ScratchBytes: ScratchBytes}
	for _, r := range l.In {
		t, err := d.tensor(r)
		if err != nil {
			return fmt.Errorf("%s: %w", l.Op.Describe(), err)
		}
		lo.In = append(lo.In, t)
	}
	for _, r := range l.Out {
		t, err := d.tensor(r)
		if err != nil {
			return fmt.Errorf("%s: %w", l.Op.Describe(), err)
		}
		lo.Out = append(lo.Out, t)
	}
	if l.Workspace.Bytes > 0 {
		a, err := d.addr(l.Workspace)
		if err != nil {
			return fmt.Errorf("%s: workspace: %w", l.Op.Describe(), err)
		}
		lo.Workspace, lo.WorkspaceBytes = a, l.Workspace.Bytes
	}
	lo.Host = func(i int) ([]byte, error) { return d.hostValue(l, i) }
	steps, err := launch.Plan(lo)
	if err != nil {
		return err
	}
	for _, s := range steps {
		switch {
		case s.Kernel != nil:
			err = d.mod.launchKernel(s.Kernel, d.compute)
		case s.Gemm != nil:
			err = d.blas.gemm(s.Gemm)
		case s.Upload != nil:
			// small constants (Shape, Constant): synchronous from Go
			// memory, ordered after the kernels queued before it
			if err = d.compute.Synchronize(); err == nil && len(s.Upload.Data) > 0 {
				err = cu.MemcpyHtoD(cu.DevicePtr(s.Upload.Dst), unsafe.Pointer(&s.Upload.Data[0]), int64(len(s.Upload.Data)))
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", l.Op.Describe(), err)
		}
	}
	if err := d.compute.Synchronize(); err != nil {
		return fmt.Errorf("%s: cuda: %w", l.Op.Describe(), err)
	}
	return nil
}

// hostValue is input i's bytes for a launch decision (Slice's starts, a
// reduction's axes): the constant when the graph knows it, else a
// synchronous read after the compute stream's queued work.
func (d *Device) hostValue(l *executor.Launch, i int) ([]byte, error) {
	if v := l.Op.Input(i); v != nil && v.IsConst() {
		t, err := v.Data()
		if err != nil {
			return nil, err
		}
		return t.Raw, nil
	}
	r := l.In[i]
	if r == nil {
		return nil, fmt.Errorf("input %d is absent", i)
	}
	if err := d.compute.Synchronize(); err != nil {
		return nil, err
	}
	a, err := d.addr(*r)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, r.Bytes)
	if len(buf) == 0 {
		return buf, nil
	}
	if err := cu.MemcpyDtoH(unsafe.Pointer(&buf[0]), cu.DevicePtr(a), r.Bytes); err != nil {
		return nil, err
	}
	return buf, nil
}

// ToHost copies a device tensor to host memory on the D2H stream,
// through its page-locked staging buffer.
func (d *Device) ToHost(dst []byte, src executor.Ref) error {
	done, err := d.bound()
	if err != nil {
		return err
	}
	defer done()
	a, err := d.addr(src)
	if err != nil {
		return err
	}
	if int64(len(dst)) < src.Bytes {
		return fmt.Errorf("cuda: host buffer of %d bytes for a %d-byte tensor", len(dst), src.Bytes)
	}
	d.d2hMu.Lock()
	defer d.d2hMu.Unlock()
	stage := d.stageD2H.bytes()
	for off := int64(0); off < src.Bytes; off += StageBytes {
		n := min(StageBytes, src.Bytes-off)
		if err := cu.MemcpyDtoHAsync(d.stageD2H.p, cu.DevicePtr(a+uint64(off)), n, d.d2h); err != nil {
			return fmt.Errorf("cuda: device to host: %w", err)
		}
		if err := d.d2h.Synchronize(); err != nil {
			return fmt.Errorf("cuda: device to host: %w", err)
		}
		copy(dst[off:off+n], stage[:n])
	}
	return nil
}

// ToDevice copies host memory into a device tensor on the H2D stream,
// through its page-locked staging buffer.
func (d *Device) ToDevice(dst executor.Ref, src []byte) error {
	done, err := d.bound()
	if err != nil {
		return err
	}
	defer done()
	a, err := d.addr(dst)
	if err != nil {
		return err
	}
	if int64(len(src)) < dst.Bytes {
		return fmt.Errorf("cuda: %d host bytes for a %d-byte tensor", len(src), dst.Bytes)
	}
	d.h2dMu.Lock()
	defer d.h2dMu.Unlock()
	stage := d.stageH2D.bytes()
	for off := int64(0); off < dst.Bytes; off += StageBytes {
		n := min(StageBytes, dst.Bytes-off)
		copy(stage[:n], src[off:off+n])
		if err := cu.MemcpyHtoDAsync(cu.DevicePtr(a+uint64(off)), d.stageH2D.p, n, d.h2d); err != nil {
			return fmt.Errorf("cuda: host to device: %w", err)
		}
		if err := d.h2d.Synchronize(); err != nil {
			return fmt.Errorf("cuda: host to device: %w", err)
		}
	}
	return nil
}

var _ executor.Device = (*Device)(nil)

package executor

import "github.com/tsplit/tsplit/ir"

// Ref locates a tensor in the device pool.
type Ref struct {
	DType ir.DType
	Shape ir.Shape
	Off   int64 // offset in the pool
	Bytes int64 // data bytes (the allocation may be larger: alignment)
}

// Device is what the executor needs from a processor.
type Device interface {
	// Name describes the device for reports.
	Name() string
	// PoolBytes is the size of the device memory pool.
	PoolBytes() int64
	// Check reports whether the device can run op (a kernel exists for
	// its type and element type).
	Check(op *ir.Op) error
	// Launch runs a compute op. It is called from the compute stream only.
	Launch(l *Launch) error
	// ToHost copies a device tensor into host memory (D2H stream).
	ToHost(dst []byte, src Ref) error
	// ToDevice copies host memory into a device tensor (H2D stream).
	ToDevice(dst Ref, src []byte) error
}

// Launch is one compute op to run.
type Launch struct {
	Op *ir.Op
	// Opset is the op's operator-set version in its model.
	Opset int64
	// In and Out follow the op's inputs and outputs (nil: absent).
	In, Out []*Ref
	// Workspace is the op's scratch (Bytes 0: none).
	Workspace Ref
	// Step counts runs of the graph (seeds random ops).
	Step int64
}

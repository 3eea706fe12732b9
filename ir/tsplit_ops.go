package ir

// Domain is the operator-set domain of tsplit's own operators. In an
// emitted model each of them is also defined by a model-local ONNX
// function (an Identity body for a swap), so standard runtimes execute
// the file while tsplit's runtime performs the real memory operation.
const Domain = "ai.tsplit"

func init() {
	same := func(c *InferCtx) error {
		x := c.In(0)
		c.SetOut(0, x.DType, x.Shape.Clone())
		return nil
	}
	// SwapOut copies a device tensor to host memory; its output lives on
	// the host. The device copy is released after the op `release` ops
	// after the SwapOut (SwapOutRelease; 1 when absent), the runtime
	// first waiting for the transfer to end, and not before its last
	// device reader has run.
	Register(&Schema{Type: "SwapOut", Domain: Domain, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: map[string]AttrType{ReleaseAttr: AttrInt},
		Infer: same, Copy: ToHost})
	// SwapIn copies a host tensor back into device memory. Its position
	// in the order is its trigger: the transfer starts there and its
	// consumers wait for it.
	Register(&Schema{Type: "SwapIn", Domain: Domain, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Infer: same, Copy: ToDevice})
}

// ReleaseAttr is SwapOut's attribute: how many ops after the SwapOut its
// device copy is released.
const ReleaseAttr = "release"

// SwapOutRelease is how many ops after a SwapOut its input's device copy
// stays, so that these ops hide the transfer before the runtime waits
// for it and frees the copy: the op's release attribute, at least 1.
// The planner sets it (Eq. 3's swap-out window), the memory model, the
// simulator and the runtime read it from here.
func SwapOutRelease(op *Op) int {
	return int(max(op.AttrInt(ReleaseAttr, 1), 1))
}

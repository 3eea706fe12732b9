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
	// the host. The device copy is released once the transfer is done
	// and its last device reader has run.
	Register(&Schema{Type: "SwapOut", Domain: Domain, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Infer: same, Copy: ToHost})
	// SwapIn copies a host tensor back into device memory. Its position
	// in the order is its trigger: the transfer starts there and its
	// consumers wait for it.
	Register(&Schema{Type: "SwapIn", Domain: Domain, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Infer: same, Copy: ToDevice})
}

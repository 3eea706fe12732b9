package kernels

// Ops that only change the shape (Reshape, Flatten, Squeeze, Unsqueeze)
// and Identity: row-major data is unchanged, so the kernel is a copy
// (the executor may alias the buffers later; copy handles overlap).
// Their attributes and shape inputs only determine the output shape,
// which the IR has already computed.

func init() {
	for _, t := range []string{"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"} {
		regOp(t, 1, 1, byteTypes, shCopyRun)
	}
}

func shCopyRun(c *Ctx) error {
	x, y := c.In[0], c.Out[0]
	if x.DType != y.DType || x.Len() != y.Len() {
		return c.Errorf("output %v%v does not hold the %d elements of input %v%v", y.DType, y.Shape, x.Len(), x.DType, x.Shape)
	}
	parCopy(y.Data, x.Data)
	return nil
}

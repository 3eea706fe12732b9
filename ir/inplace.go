package ir

import "slices"

// InPlaceHost returns which input a host-placed elementwise Add, Sub,
// Mul or Div overwrites with its output, or -1 where it writes a buffer
// of its own. The input must be an op's result of the output's type and
// shape (element i of the output reads element i of that input only, so
// writing over it is safe), read by this op alone and not a graph
// output, and own its host buffer: the result of a swap-out, of a host
// op other than a view, or of an in-place merge whose pieces only the
// merge reads. The host optimizer update (docs/offload.md) is such a
// chain: the gradient scaled by the learning rate and subtracted from
// the parameter, each step over the buffer of the one before, so the
// host holds the gradient once instead of three times. The runtimes
// give the output its input's buffer; the memory model counts that
// buffer once, to the last read of the output.
func InPlaceHost(op *Op) int {
	switch op.Type {
	case "Add", "Sub", "Mul", "Div":
	default:
		return -1
	}
	y := op.Output(0)
	if op.Domain != "" || !op.Host || y == nil || len(op.Outputs()) != 1 {
		return -1
	}
	for j, x := range op.Inputs() {
		if x == nil || x.Def == nil || x.IsConst() || x.DType != y.DType || !x.Shape.Equal(y.Shape) || len(x.Uses()) != 1 {
			continue
		}
		if g := x.Graph(); g != nil && slices.Contains(g.Outputs, x) {
			continue
		}
		d := x.Def
		owns := CopyOf(d) == ToHost
		if CopyOf(d) == OnHost {
			_, view := ViewOf(d)
			owns = !view
			if InPlaceConcat(d) {
				for _, p := range d.Inputs() {
					if len(p.Uses()) != 1 {
						owns = false
					}
				}
			}
		}
		if owns {
			return j
		}
	}
	return -1
}

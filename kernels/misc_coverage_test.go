package kernels

import (
	"testing"

	"github.com/tsplit/tsplit/ir"
)

// ktNNOps are the operators whose kernels live in the nn_* files
// (convolution, pooling, normalisation, softmax, matrix products). They
// check their tensors against the op's values (nnGuard), so the sweep
// below, which runs kernels on tensors that disagree with a bare op,
// leaves them out. Which ops have a kernel at all is the op registry's
// coverage test (internal/opcoverage).
var ktNNOps = map[string]bool{
	"Conv": true, "ConvTranspose": true,
	"MaxPool": true, "AveragePool": true, "LpPool": true,
	"GlobalAveragePool": true, "GlobalMaxPool": true, "GlobalLpPool": true,
	"BatchNormalization": true, "LayerNormalization": true,
	"Softmax": true, "LogSoftmax": true,
	"Gemm": true, "MatMul": true,
}

// No kernel panics on inputs that disagree with its op: a fuzz-like
// sweep runs every registered ew_/shape_/reduce_/misc_ kernel directly
// (bypassing Eval's shape set-up) with wrong-sized, wrong-typed or
// missing tensors; any result is fine except a panic.
func TestKernelsDoNotPanic(t *testing.T) {
	cands := []*Tensor{
		nil,
		ktF32(ktS()),
		ktF32(ktS(0)),
		ktF32(ktS(2, 3), 1, 2, 3, 4, 5, 6),
		ktI64(ktS(3), 5, -9, 1<<40),
		ktI32(ktS(2), 7, -7),
		ktBool(ktS(2), true, false),
		{DType: ir.Float, Shape: ir.Shape{4}, Data: make([]byte, 3)}, // short data
	}
	for _, s := range ir.Schemas() {
		if ktNNOps[s.Type] || s.Copy != ir.NoCopy {
			continue
		}
		k := Lookup(s.Domain, s.Type)
		if k == nil {
			continue
		}
		nIn := min(max(s.MinIn, 1), 3)
		if s.MaxIn == 0 {
			nIn = 0
		}
		for _, a := range cands {
			for _, b := range cands {
				for _, o := range cands {
					ins := make([]*Tensor, nIn)
					for i := range ins {
						ins[i] = a
						if i > 0 {
							ins[i] = b
						}
					}
					op := &ir.Op{Type: s.Type, Name: "fuzz"}
					c := &Ctx{Op: op, In: ins, Out: []*Tensor{o}}
					func() {
						defer func() {
							if r := recover(); r != nil {
								t.Errorf("%s panicked on inputs %v, output %v: %v", s.Type, ktDesc(ins), ktDesc([]*Tensor{o}), r)
							}
						}()
						_ = k.Run(c)
					}()
				}
			}
		}
	}
}

func ktDesc(ts []*Tensor) []string {
	var out []string
	for _, t := range ts {
		if t == nil {
			out = append(out, "nil")
			continue
		}
		out = append(out, t.DType.String()+t.Shape.String())
	}
	return out
}

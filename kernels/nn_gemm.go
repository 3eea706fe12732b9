package kernels

import (
	"fmt"

	"github.com/tsplit/tsplit/ir"
)

// Gemm and MatMul, through nnGemm (nn_generic.go): sgemm (blas.go) for
// float32, gonum's Dgemm for float64.

func init() {
	nnReg("Gemm", 2, 1, Kernel{Run: runGemm}, nil)
	nnReg("MatMul", 2, 1, Kernel{Run: runMatMul}, nil)
}

// runGemm: Y = alpha·op(A)·op(B) + beta·C, C broadcast (numpy-style,
// unidirectionally) to (M, N). C is expanded into Y first and the
// product accumulated onto it with BLAS's beta.
func runGemm(c *Ctx) error {
	return nnFloat(c).gemm(c)
}

func (floatK[T]) gemm(c *Ctx) error {
	as, bs := c.In[0].Shape, c.In[1].Shape
	if len(as) != 2 || len(bs) != 2 {
		return c.Errorf("needs 2-D A and B, got %v and %v", as, bs)
	}
	tA, tB := c.Op.AttrInt("transA", 0) != 0, c.Op.AttrInt("transB", 0) != 0
	alpha, beta := c.Op.AttrFloat("alpha", 1), c.Op.AttrFloat("beta", 1)
	m, k := int(as[0]), int(as[1])
	if tA {
		m, k = k, m
	}
	n := int(bs[1])
	if tB {
		n = int(bs[0])
	}
	y := viewAs[T](c.Out[0])
	if len(y) != m*n {
		return c.Errorf("output has %d elements, want %d×%d", len(y), m, n)
	}
	var cb T
	if len(c.In) > 2 && c.In[2] != nil && beta != 0 {
		if err := nnBroadcastTo(y, ir.Shape{int64(m), int64(n)}, viewAs[T](c.In[2]), c.In[2].Shape); err != nil {
			return c.Errorf("input 2 (C): %v", err)
		}
		cb = T(beta)
	}
	nnGemm(tA, tB, m, n, k, T(alpha), viewAs[T](c.In[0]), int(as[1]), viewAs[T](c.In[1]), int(bs[1]), cb, y, n)
	return nil
}

// matmulPlan is MatMul as a batch of m×k·k×n products: output batch
// element i multiplies A at aOff[i] and B at bOff[i] (broadcast batch
// dimensions repeat an operand).
type matmulPlan struct {
	m, n, k    int
	batch      int
	aOff, bOff func(i int) int
	foldM      bool // B shared by the whole batch and A contiguous: one (batch·m)×k product
}

func planMatMul(as, bs ir.Shape) (*matmulPlan, error) {
	if len(as) == 0 || len(bs) == 0 {
		return nil, fmt.Errorf("MatMul needs at least 1-D operands, got %v and %v", as, bs)
	}
	if len(as) == 1 {
		as = ir.Shape{1, as[0]}
	}
	if len(bs) == 1 {
		bs = ir.Shape{bs[0], 1}
	}
	p := &matmulPlan{m: int(as[len(as)-2]), k: int(as[len(as)-1]), n: int(bs[len(bs)-1])}
	if int(bs[len(bs)-2]) != p.k {
		return nil, fmt.Errorf("MatMul inner dimensions differ: %v × %v", as, bs)
	}
	ab, bb := as[:len(as)-2], bs[:len(bs)-2]
	batch, err := ir.Broadcast(ab, bb)
	if err != nil {
		return nil, err
	}
	p.batch = nnVol(batch)
	aStr := nnBatchStrides(ab, batch, p.m*p.k)
	bStr := nnBatchStrides(bb, batch, p.k*p.n)
	dims := make([]int, len(batch))
	for i, d := range batch {
		dims[i] = int(d)
	}
	offset := func(str []int) func(int) int {
		return func(i int) int {
			off := 0
			for d := len(dims) - 1; d >= 0; d-- {
				off += (i % dims[d]) * str[d]
				i /= dims[d]
			}
			return off
		}
	}
	p.aOff, p.bOff = offset(aStr), offset(bStr)
	p.foldM = nnVol(bb) == 1 && nnVol(ab) == p.batch
	return p, nil
}

// nnBatchStrides gives, per dimension of the broadcast batch shape, the
// element stride of an operand with batch shape s and matrices of size
// mat (0 where the operand is broadcast).
func nnBatchStrides(s, batch ir.Shape, mat int) []int {
	st := make([]int, len(batch))
	acc := mat
	for i := len(s) - 1; i >= 0; i-- {
		j := len(batch) - len(s) + i
		if s[i] != 1 {
			st[j] = acc
		}
		acc *= int(s[i])
	}
	return st
}

// runMatMul follows numpy.matmul: 1-D operands are promoted to a row
// (A) or a column (B) matrix, batch dimensions broadcast.
func runMatMul(c *Ctx) error {
	p, err := planMatMul(c.In[0].Shape, c.In[1].Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	nnFloat(c).matMul(p, c.In[0], c.In[1], c.Out[0])
	return nil
}

func (floatK[T]) matMul(p *matmulPlan, at, bt, yt *Tensor) {
	a, b, y := viewAs[T](at), viewAs[T](bt), viewAs[T](yt)
	if len(y) == 0 {
		return
	}
	if p.foldM {
		nnGemm(false, false, p.batch*p.m, p.n, p.k, 1, a, p.k, b, p.n, 0, y, p.n)
		return
	}
	nnGemmBatch(p.batch, false, false, p.m, p.n, p.k, 1, 0, func(i int) ([]T, int, []T, int, []T, int) {
		return a[p.aOff(i):], p.k, b[p.bOff(i):], p.n, y[i*p.m*p.n:], p.n
	})
}

package ir

import (
	"fmt"
	"math"
)

// Helpers shared by the inference rules of the shapes_*.go files: axis
// normalisation, constant inputs, and element movement for folding.

// normAxis maps axis from [-rank, rank-1] to [0, rank-1]; what names the
// attribute or input in the error.
func normAxis(c *InferCtx, what string, axis int64, rank int) (int, error) {
	if axis < -int64(rank) || axis >= int64(rank) {
		return 0, c.Errorf("%s %d is out of range for an input of rank %d (allowed [%d, %d])", what, axis, rank, -rank, rank-1)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}

// normAxes normalises a list of axes and rejects repeats.
func normAxes(c *InferCtx, what string, axes []int64, rank int) ([]int, error) {
	out := make([]int, len(axes))
	seen := make([]bool, rank)
	for i, a := range axes {
		n, err := normAxis(c, what, a, rank)
		if err != nil {
			return nil, err
		}
		if seen[n] {
			return nil, c.Errorf("%s repeats axis %d", what, a)
		}
		seen[n] = true
		out[i] = n
	}
	return out, nil
}

// inName describes input i for errors: its index and value name.
func inName(c *InferCtx, i int) string {
	if v := c.In(i); v != nil && v.Name != "" {
		return fmt.Sprintf("input %d (%q)", i, v.Name)
	}
	return fmt.Sprintf("input %d", i)
}

// constIntsInput returns the integer values of a constant input i, or an
// error saying that the op needs it constant (what explains its role).
func constIntsInput(c *InferCtx, i int, what string) ([]int64, error) {
	if c.In(i) == nil {
		return nil, c.Errorf("input %d (%s) is missing", i, what)
	}
	c.needConstIn(i)
	t := c.Const(i)
	if t == nil {
		return nil, c.Errorf("%s (%s) is not a compile-time constant; %s needs it to infer static shapes", inName(c, i), what, c.Op.Type)
	}
	if !t.DType.IsInt() {
		return nil, c.Errorf("%s (%s) has type %v, want an integer tensor", inName(c, i), what, t.DType)
	}
	if !rawOK(t) {
		return nil, c.Errorf("%s (%s) has %d data bytes, its shape %v needs more", inName(c, i), what, len(t.Raw), t.Shape)
	}
	return t.Int64s(), nil
}

// checkRank1 checks that input i is a 1-D (or, when scalarOK, 0-D) tensor.
func checkRank1(c *InferCtx, i int, what string, scalarOK bool) error {
	v := c.In(i)
	if len(v.Shape) == 1 || (scalarOK && len(v.Shape) == 0) {
		return nil
	}
	return c.Errorf("%s (%s) has rank %d, want a 1-D tensor", inName(c, i), what, len(v.Shape))
}

// sameDType checks that the present inputs idx have input first's dtype.
func sameDType(c *InferCtx, first int, idx ...int) error {
	want := c.In(first).DType
	for _, i := range idx {
		if v := c.In(i); v != nil && v.DType != want {
			return c.Errorf("%s has type %v, input %d has %v; they must match", inName(c, i), v.DType, first, want)
		}
	}
	return nil
}

// hasAttr reports whether the op carries attribute name.
func hasAttr(c *InferCtx, name string) bool { return c.Op.Attr(name) != nil }

// numElems is the element count of a shape already known to be valid
// (input shapes are checked on import); it saturates instead of
// overflowing.
func numElems(s Shape) int64 {
	n, err := s.NumElements()
	if err != nil {
		return math.MaxInt64
	}
	return n
}

// mulDims multiplies non-negative dimensions, failing on overflow.
func mulDims(c *InferCtx, dims ...int64) (int64, error) {
	n := int64(1)
	for _, d := range dims {
		if d < 0 {
			return 0, c.Errorf("negative dimension %d", d)
		}
		if d != 0 && n > math.MaxInt64/d {
			return 0, c.Errorf("dimension product of %v overflows int64", dims)
		}
		n *= d
	}
	return n, nil
}

// ceilDiv is ceil(a/b) for b > 0 without overflow.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a > 0 {
		q++
	}
	return q
}

// elemBytes is the width of one element when it is a whole number of
// bytes (every fixed-size type but the 4-bit ones), else 0.
func elemBytes(dt DType) int {
	b := dt.Bits()
	if b == 0 || b%8 != 0 {
		return 0
	}
	return b / 8
}

// rawOK reports whether t's bytes cover its shape, so element access
// cannot go out of range.
func rawOK(t *Tensor) bool {
	n, err := t.Shape.NumElements()
	if err != nil {
		return false
	}
	eb := elemBytes(t.DType)
	if eb == 0 {
		return false
	}
	return int64(len(t.Raw)) >= n*int64(eb)
}

// numericDType reports whether values of dt can be read with
// Int64s/Float64s and rebuilt with TensorFrom* for compile-time arithmetic.
func numericDType(dt DType) bool {
	switch dt {
	case Float, Double, Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Bool:
		return true
	}
	return false
}

// foldSize reports whether a result of shape s is small enough to fold.
func foldSize(s Shape) bool {
	n, err := s.NumElements()
	return err == nil && n <= MaxFoldElements
}

// pickElems builds a tensor of shape out whose element i is element
// idx[i] of t. t must pass rawOK (foldIn checks it).
func pickElems(t *Tensor, out Shape, idx []int) *Tensor {
	eb := elemBytes(t.DType)
	raw := make([]byte, len(idx)*eb)
	for i, j := range idx {
		copy(raw[i*eb:(i+1)*eb], t.Raw[j*eb:(j+1)*eb])
	}
	return &Tensor{DType: t.DType, Shape: out.Clone(), Raw: raw}
}

// withShape returns a copy of t's data with another shape of the same
// element count (Reshape, Squeeze, Flatten...).
func withShape(t *Tensor, s Shape) *Tensor {
	return &Tensor{DType: t.DType, Shape: s.Clone(), Raw: append([]byte(nil), t.Raw...)}
}

// Strides are the row-major element strides of s.
func (s Shape) Strides() []int64 {
	st := make([]int64, len(s))
	acc := int64(1)
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= s[i]
	}
	return st
}

// mapIndex returns, for every element of shape out in row-major order,
// f(coordinate) — the flat index of the source element. out must be
// small (folding sizes).
func mapIndex(out Shape, f func(coord []int64) int) []int {
	n := numElems(out)
	idx := make([]int, n)
	coord := make([]int64, len(out))
	for i := range idx {
		idx[i] = f(coord)
		for d := len(out) - 1; d >= 0; d-- {
			coord[d]++
			if coord[d] < out[d] {
				break
			}
			coord[d] = 0
		}
	}
	return idx
}

// checkDims checks that every entry of a shape-like vector is >= 0.
func checkDims(c *InferCtx, what string, dims []int64) error {
	for i, d := range dims {
		if d < 0 {
			return c.Errorf("%s has negative dimension %d at position %d", what, d, i)
		}
	}
	return nil
}

// cloneTensor copies t (folded constants must not alias their sources).
func cloneTensor(t *Tensor) *Tensor {
	return &Tensor{DType: t.DType, Shape: t.Shape.Clone(), Raw: append([]byte(nil), t.Raw...)}
}

// attrIntsLen fetches an ints attribute that, when present, must have n
// entries; def fills the absent case.
func attrIntsLen(c *InferCtx, name string, n int, def int64) ([]int64, error) {
	if a := c.Op.Attr(name); a != nil {
		if len(a.Ints) != n {
			return nil, c.Errorf("attribute %s has %d values, want %d", name, len(a.Ints), n)
		}
		return append([]int64(nil), a.Ints...), nil
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = def
	}
	return out, nil
}

// foldIn returns input i's constant when its elements can be moved at
// compile time and it agrees with the value's declared dtype and shape;
// nil otherwise.
func foldIn(c *InferCtx, i int) *Tensor {
	t := c.Const(i)
	v := c.In(i)
	if t == nil || !rawOK(t) || t.DType != v.DType || !t.Shape.Equal(v.Shape) {
		return nil
	}
	return t
}

// numIn is foldIn restricted to dtypes whose values Int64s/Float64s can
// read and TensorFrom* can write.
func numIn(c *InferCtx, i int) *Tensor {
	t := foldIn(c, i)
	if t == nil || !numericDType(t.DType) {
		return nil
	}
	return t
}

// maxDim bounds a single dimension so that sums of dimensions stay
// representable.
const maxDim = int64(1) << 62

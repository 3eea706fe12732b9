package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/tsplit/tsplit/ir"
)

// Test helpers for the ew_*, shape_*, reduce_* and misc_* kernels (the
// kt prefix keeps them apart from the nn_* tests' helpers).

// ktT builds a tensor of dt holding vals (T must match dt's width); no
// values at all means zeros.
func ktT[T any](dt ir.DType, shape []int64, vals []T) *Tensor {
	t, err := NewTensor(dt, ir.Shape(shape))
	if err != nil {
		panic(err)
	}
	if len(vals) > 0 && t.Len() != len(vals) {
		panic(fmt.Sprintf("ktT: shape %v holds %d elements, got %d values", shape, t.Len(), len(vals)))
	}
	copy(viewAs[T](t), vals)
	return t
}

func ktF32(shape []int64, v ...float32) *Tensor { return ktT(ir.Float, shape, v) }
func ktF64(shape []int64, v ...float64) *Tensor { return ktT(ir.Double, shape, v) }
func ktI64(shape []int64, v ...int64) *Tensor   { return ktT(ir.Int64, shape, v) }
func ktI32(shape []int64, v ...int32) *Tensor   { return ktT(ir.Int32, shape, v) }
func ktU8(shape []int64, v ...uint8) *Tensor    { return ktT(ir.Uint8, shape, v) }
func ktBool(shape []int64, v ...bool) *Tensor {
	b := make([]uint8, len(v))
	for i, x := range v {
		if x {
			b[i] = 1
		}
	}
	return ktT(ir.Bool, shape, b)
}

// ktS is a shape literal.
func ktS(d ...int64) []int64 { return d }

// ktSeq is 0, 1, ..., n-1 scaled and shifted, as float32.
func ktSeq(n int, scale, shift float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)*scale + shift
	}
	return v
}

// ktIn is an op input for ktRun: a runtime tensor (graph input) or, with
// konst, an initializer the IR can fold (shape-determining inputs must
// be constants). A zero ktIn is an absent optional input.
type ktIn struct {
	t     *Tensor
	konst bool
}

func ktR(t *Tensor) ktIn { return ktIn{t: t} }
func ktC(t *Tensor) ktIn { return ktIn{t: t, konst: true} }

// ktBuild makes a one-op graph at opset with nOut outputs and infers
// it.
func ktBuild(t testing.TB, opset int64, typ string, ins []ktIn, nOut int, attrs ...ir.Attr) *ir.Op {
	t.Helper()
	op, err := ktBuildErr(opset, typ, ins, nOut, attrs...)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// ktBuildErr is ktBuild returning the error.
func ktBuildErr(opset int64, typ string, ins []ktIn, nOut int, attrs ...ir.Attr) (*ir.Op, error) {
	g := ir.NewGraph("t")
	vals := make([]*ir.Value, len(ins))
	for i, in := range ins {
		if in.t == nil {
			continue
		}
		name := fmt.Sprintf("in%d", i)
		var v *ir.Value
		var err error
		if in.konst {
			v, err = g.AddInit(name, &ir.Tensor{DType: in.t.DType, Shape: in.t.Shape.Clone(), Raw: append([]byte(nil), in.t.Data...)})
		} else {
			v, err = g.AddInput(name, in.t.DType, in.t.Shape.Clone())
		}
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	outs := make([]string, nOut)
	for i := range outs {
		outs[i] = fmt.Sprintf("out%d", i)
	}
	op, err := g.NewOp(typ, "", typ+"_node", vals, outs, attrs)
	if err != nil {
		return nil, err
	}
	if err := ir.InferAndSet(op, opset); err != nil {
		return nil, fmt.Errorf("inference: %v", err)
	}
	return op, nil
}

// ktEval runs op's kernel on the inputs' tensors.
func ktEval(op *ir.Op, ins []ktIn, step int64) ([]*Tensor, error) {
	ts := make([]*Tensor, len(ins))
	for i, in := range ins {
		ts[i] = in.t
	}
	return Eval(op, ts, step)
}

// ktRun builds, infers and runs a one-op graph, failing on any error.
func ktRun(t testing.TB, opset int64, typ string, ins []ktIn, nOut int, attrs ...ir.Attr) []*Tensor {
	t.Helper()
	op := ktBuild(t, opset, typ, ins, nOut, attrs...)
	out, err := ktEval(op, ins, 0)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	return out
}

// ktRun1 is ktRun for a single output at opset 20 (Gelu's first).
func ktRun1(t testing.TB, typ string, ins []ktIn, attrs ...ir.Attr) *Tensor {
	t.Helper()
	return ktRun(t, 20, typ, ins, 1, attrs...)[0]
}

// ktErr builds the op (inference must succeed) and expects its kernel
// to fail with an error (not a panic).
func ktErr(t testing.TB, opset int64, typ string, ins []ktIn, nOut int, attrs ...ir.Attr) error {
	t.Helper()
	op := ktBuild(t, opset, typ, ins, nOut, attrs...)
	_, err := ktEval(op, ins, 0)
	if err == nil {
		t.Fatalf("%s: no error", typ)
	}
	return err
}

// ktVals decodes a tensor's elements as float64 for messages and
// comparisons.
func ktVals(t *Tensor) []float64 {
	n := t.Len()
	out := make([]float64, n)
	for i := range out {
		switch t.DType {
		case ir.Float:
			out[i] = float64(viewAs[float32](t)[i])
		case ir.Double:
			out[i] = viewAs[float64](t)[i]
		case ir.Int64:
			out[i] = float64(viewAs[int64](t)[i])
		case ir.Int32:
			out[i] = float64(viewAs[int32](t)[i])
		case ir.Int16:
			out[i] = float64(viewAs[int16](t)[i])
		case ir.Int8:
			out[i] = float64(viewAs[int8](t)[i])
		case ir.Uint8, ir.Bool:
			out[i] = float64(t.Data[i])
		case ir.Uint16, ir.Float16, ir.BFloat16:
			out[i] = float64(viewAs[uint16](t)[i])
		case ir.Uint32:
			out[i] = float64(viewAs[uint32](t)[i])
		case ir.Uint64:
			out[i] = float64(viewAs[uint64](t)[i])
		}
	}
	return out
}

// ktSame checks got has want's dtype, shape and exact bytes.
func ktSame(t testing.TB, what string, got, want *Tensor) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no output", what)
	}
	if got.DType != want.DType || !got.Shape.Equal(want.Shape) {
		t.Fatalf("%s: got %v%v, want %v%v", what, got.DType, got.Shape, want.DType, want.Shape)
	}
	if string(got.Data) != string(want.Data) {
		t.Fatalf("%s: got %v, want %v", what, ktVals(got), ktVals(want))
	}
}

// ktClose checks a float tensor against float64 expectations within a
// relative tolerance rel (absolute rel near zero); NaNs must match.
func ktClose(t testing.TB, what string, got *Tensor, shape []int64, want []float64, rel float64) {
	t.Helper()
	if !got.Shape.Equal(ir.Shape(shape)) {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape, shape)
	}
	g := ktVals(got)
	if len(g) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(g), len(want))
	}
	for i := range g {
		if !ktNear(g[i], want[i], rel) {
			t.Fatalf("%s: element %d is %v, want %v (got %v, want %v)", what, i, g[i], want[i], ktHead(g), ktHead(want))
		}
	}
}

func ktNear(g, w, rel float64) bool {
	switch {
	case math.IsNaN(w):
		return math.IsNaN(g)
	case math.IsInf(w, 0):
		return g == w
	}
	return math.Abs(g-w) <= rel*max(math.Abs(w), 1e-3)
}

func ktHead(v []float64) []float64 {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}

// ktCoords calls fn with every coordinate of shape in row-major order.
func ktCoords(shape []int64, fn func(c []int64)) {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	c := make([]int64, len(shape))
	for i := int64(0); i < n; i++ {
		rem := i
		for d := len(shape) - 1; d >= 0; d-- {
			c[d] = rem % shape[d]
			rem /= shape[d]
		}
		fn(c)
	}
}

// ktFlat is the row-major flat index of coordinate c in shape.
func ktFlat(shape, c []int64) int {
	f := int64(0)
	for d := range shape {
		f = f*shape[d] + c[d]
	}
	return int(f)
}

// ktRand is a deterministic pseudo-random float32 vector in [-2, 2).
func ktRand(n int, seed uint64) []float32 {
	v := make([]float32, n)
	x := seed*2654435761 + 1
	for i := range v {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[i] = float32(x%4000)/1000 - 2
	}
	return v
}

func ktNumel(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

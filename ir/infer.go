package ir

import (
	"fmt"
	"slices"

	"github.com/tsplit/tsplit/internal/quote"
)

// MaxFoldElements bounds the size of tensors folded at compile time.
// Shape arithmetic is tiny; anything bigger is real computation that
// belongs to the runtime.
const MaxFoldElements = 1 << 12

// InferCtx is what an inference rule sees: the op, the opset version of
// its domain, and its inputs. Rules report results with SetOut and
// SetConst instead of writing values, so the same rule serves the
// frontend (which applies results) and the verifier (which compares).
type InferCtx struct {
	Op    *Op
	Opset int64

	outs []inferred
	// needConst lists the inputs the rule required constant (needConstIn
	// records them); Infer checks them against Schema.ConstIn.
	needConst []int
}

// needConstIn records that the rule cannot infer the output shapes
// without input i's compile-time value.
func (c *InferCtx) needConstIn(i int) { c.needConst = append(c.needConst, i) }

type inferred struct {
	set   bool
	dtype DType
	shape Shape
	cnst  *Tensor
}

// NumIn is the number of inputs, counting absent optional ones.
func (c *InferCtx) NumIn() int { return len(c.Op.inputs) }

// NumOut is the number of outputs, counting absent optional ones.
func (c *InferCtx) NumOut() int { return len(c.Op.outputs) }

// In returns input i, or nil when absent.
func (c *InferCtx) In(i int) *Value { return c.Op.Input(i) }

// HasOut reports whether output i is present.
func (c *InferCtx) HasOut(i int) bool { return c.Op.Output(i) != nil }

// Const returns the compile-time value of input i, or nil when it is
// absent, not constant, or too large to be shape data.
func (c *InferCtx) Const(i int) *Tensor {
	v := c.In(i)
	if v == nil {
		return nil
	}
	if v.Const != nil {
		return v.Const
	}
	if v.Load != nil {
		n, err := v.Shape.NumElements()
		if err != nil || n > MaxFoldElements {
			return nil
		}
		t, err := v.Load()
		if err != nil {
			return nil
		}
		v.Const = t // small: keep it rather than decode it again
		return t
	}
	return nil
}

// ConstInts returns input i's constant value as int64s, or ok=false.
func (c *InferCtx) ConstInts(i int) ([]int64, bool) {
	t := c.Const(i)
	if t == nil {
		return nil, false
	}
	return t.Int64s(), true
}

// SetOut records output i's dtype and shape.
func (c *InferCtx) SetOut(i int, dt DType, shape Shape) {
	if i >= len(c.outs) {
		return
	}
	c.outs[i].set = true
	c.outs[i].dtype = dt
	c.outs[i].shape = shape
}

// SetConst records output i's compile-time value (and its dtype and
// shape). Values with more than MaxFoldElements elements are ignored.
func (c *InferCtx) SetConst(i int, t *Tensor) {
	if i >= len(c.outs) || t == nil || t.Len() > MaxFoldElements {
		return
	}
	c.SetOut(i, t.DType, t.Shape)
	c.outs[i].cnst = t
}

// Errorf makes an error that names the op.
func (c *InferCtx) Errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", c.Op.Describe(), fmt.Sprintf(format, args...))
}

// AllConst reports whether every present input has a compile-time value
// small enough to fold.
func (c *InferCtx) AllConst() bool {
	for i := range c.Op.inputs {
		if c.In(i) != nil && c.Const(i) == nil {
			return false
		}
	}
	return true
}

// Infer runs the op's inference rule and returns, per output, the
// computed dtype, shape and constant (nil when not constant). Outputs
// that are absent have zero entries.
func Infer(op *Op, opset int64) ([]DType, []Shape, []*Tensor, error) {
	s := LookupSchema(op.Domain, op.Type)
	if s == nil {
		return nil, nil, nil, fmt.Errorf("%s: operator %s is not in tsplit's op table", op.Describe(), quote.Name(op.QualifiedType()))
	}
	if err := s.CheckSignature(op); err != nil {
		return nil, nil, nil, err
	}
	if s.Domain == "" && opset < s.Since {
		return nil, nil, nil, fmt.Errorf("%s: %s exists since opset %d; the model imports opset %d", op.Describe(), s.Type, s.Since, opset)
	}
	for i, v := range op.inputs {
		if v != nil && !v.DType.Valid() {
			return nil, nil, nil, fmt.Errorf("%s: input %d (%q) has no type", op.Describe(), i, v.Name)
		}
	}
	c := &InferCtx{Op: op, Opset: opset, outs: make([]inferred, len(op.outputs))}
	err := s.Infer(c)
	for _, i := range c.needConst {
		if !slices.Contains(s.ConstIn, i) {
			// A bug in the op table, not in the model: the planner would
			// evict a value this rule needs constant.
			return nil, nil, nil, fmt.Errorf("%s: the inference rule of %s needs input %d constant, but its schema does not list it in ConstIn (a bug in tsplit's op table)", op.Describe(), s.Name(), i)
		}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	dts := make([]DType, len(op.outputs))
	shapes := make([]Shape, len(op.outputs))
	consts := make([]*Tensor, len(op.outputs))
	for i, v := range op.outputs {
		if v == nil {
			continue
		}
		o := c.outs[i]
		if !o.set {
			return nil, nil, nil, fmt.Errorf("%s: inference gave no shape for output %d (%q)", op.Describe(), i, v.Name)
		}
		if _, err := o.shape.Bytes(o.dtype); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: output %q: %v", op.Describe(), v.Name, err)
		}
		dts[i], shapes[i], consts[i] = o.dtype, o.shape, o.cnst
	}
	return dts, shapes, consts, nil
}

// InferAndSet runs inference for op and stores the results on its
// output values.
func InferAndSet(op *Op, opset int64) error {
	dts, shapes, consts, err := Infer(op, opset)
	if err != nil {
		return err
	}
	for i, v := range op.outputs {
		if v == nil {
			continue
		}
		v.DType, v.Shape, v.Const = dts[i], shapes[i], consts[i]
	}
	return nil
}

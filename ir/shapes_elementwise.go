package ir

import "math"

// Inference rules for elementwise ops. Every file named shapes_*.go
// registers the schemas of one family of operators.

// Every op here is Elementwise. The ones whose output has input 0's
// type are also InPlace: their kernels compute each element from the
// inputs at its own position.
func init() {
	// Unary functions, grouped by the opset that introduced them.
	for _, g := range []struct {
		since int64
		types []string
	}{
		{0, []string{"Relu", "Sigmoid", "Tanh", "Sqrt", "Neg", "Abs", "Exp", "Log", "Reciprocal", "Floor", "Ceil",
			"Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Softplus", "Softsign"}},
		{9, []string{"Erf", "Sign", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"}},
		{11, []string{"Round"}},
		{14, []string{"HardSwish"}},
		{18, []string{"Mish"}},
	} {
		for _, t := range g.types {
			Register(&Schema{Type: t, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Infer: inferUnary(foldUnary(t)),
				Elementwise: true, InPlace: true, Since: g.since})
		}
	}
	Register(&Schema{Type: "Identity", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Infer: inferIdentity,
		Elementwise: true, InPlace: true, View: WholeView})
	// Activations with attributes (alpha, beta, ...), by first opset.
	activation := func(t string, since int64, attrs map[string]AttrType) {
		Register(&Schema{Type: t, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: attrs, Infer: inferUnary(nil),
			Elementwise: true, InPlace: true, Since: since})
	}
	alpha := map[string]AttrType{"alpha": AttrFloat}
	activation("LeakyRelu", 0, alpha)
	activation("Gelu", 20, map[string]AttrType{"approximate": AttrString})
	activation("HardSigmoid", 0, map[string]AttrType{"alpha": AttrFloat, "beta": AttrFloat})
	activation("Elu", 0, alpha)
	activation("Celu", 12, alpha)
	activation("ThresholdedRelu", 10, alpha)
	activation("Selu", 0, map[string]AttrType{"alpha": AttrFloat, "gamma": AttrFloat})
	activation("Shrink", 9, map[string]AttrType{"bias": AttrFloat, "lambd": AttrFloat})
	Register(&Schema{Type: "Not", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Infer: inferNot, Elementwise: true, InPlace: true})
	Register(&Schema{Type: "IsNaN", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Infer: inferIsFloatClass,
		Elementwise: true, Since: 9})
	Register(&Schema{Type: "IsInf", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"detect_negative": AttrInt, "detect_positive": AttrInt}, Infer: inferIsFloatClass,
		Elementwise: true, Since: 10})
	Register(&Schema{Type: "PRelu", MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Infer: inferPRelu, Elementwise: true, InPlace: true})
	// Clip takes min/max as inputs since opset 11; the opset-6 attributes
	// are accepted too. The bounds get no gradient.
	Register(&Schema{Type: "Clip", MinIn: 1, MaxIn: 3, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"min": AttrFloat, "max": AttrFloat}, Infer: inferClip,
		Elementwise: true, InPlace: true, NoGrad: []int{1, 2}})

	binary := func(t string, cmp, inPlace bool, since int64) {
		Register(&Schema{Type: t, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Infer: inferBinary(t, cmp),
			Elementwise: true, InPlace: inPlace, Since: since})
	}
	for _, t := range []string{"Add", "Sub", "Mul", "Div", "Pow"} {
		binary(t, false, true, 0)
	}
	for _, t := range []string{"Equal", "Less", "Greater"} {
		binary(t, true, false, 0)
	}
	binary("LessOrEqual", true, false, 12)
	binary("GreaterOrEqual", true, false, 12)
	for _, t := range []string{"And", "Or", "Xor"} {
		binary(t, true, true, 0)
	}
	Register(&Schema{Type: "Mod", MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"fmod": AttrInt}, Infer: inferBinary("Mod", false),
		Elementwise: true, InPlace: true, Since: 10})
	for _, t := range []string{"Max", "Min", "Sum", "Mean"} {
		Register(&Schema{Type: t, MinIn: 1, MaxIn: -1, MinOut: 1, MaxOut: 1, Infer: inferBinary(t, false),
			Elementwise: true, InPlace: true})
	}
}

func foldUnary(t string) func(float64) float64 {
	switch t {
	case "Relu":
		return func(x float64) float64 { return math.Max(x, 0) }
	case "Sqrt":
		return math.Sqrt
	case "Neg":
		return func(x float64) float64 { return -x }
	case "Abs":
		return math.Abs
	case "Floor":
		return math.Floor
	case "Ceil":
		return math.Ceil
	case "Exp":
		return math.Exp
	case "Log":
		return math.Log
	case "Reciprocal":
		return func(x float64) float64 { return 1 / x }
	case "Sign":
		return func(x float64) float64 {
			switch {
			case x > 0:
				return 1
			case x < 0:
				return -1
			}
			return x // 0 or NaN
		}
	case "Round":
		return math.RoundToEven
	}
	return nil
}

// inferUnary: output has the input's dtype and shape; fold evaluates the
// op on a constant input (nil: never folded).
func inferUnary(fold func(float64) float64) func(c *InferCtx) error {
	return func(c *InferCtx) error {
		x := c.In(0)
		c.SetOut(0, x.DType, x.Shape.Clone())
		t := numIn(c, 0)
		if fold == nil || t == nil || !foldSize(t.Shape) || t.DType == Bool {
			return nil
		}
		if t.DType.IsFloat() {
			vals := t.Float64s()
			for i, v := range vals {
				vals[i] = fold(v)
			}
			c.SetConst(0, TensorFromFloat64s(t.DType, t.Shape, vals))
		} else if t.DType.IsInt() {
			vals := t.Int64s()
			for i, v := range vals {
				vals[i] = int64(fold(float64(v)))
			}
			c.SetConst(0, TensorFromInt64s(t.DType, t.Shape, vals))
		}
		return nil
	}
}

// inferIdentity passes the input through; a constant input of any
// byte-sized type is copied.
func inferIdentity(c *InferCtx) error {
	x := c.In(0)
	c.SetOut(0, x.DType, x.Shape.Clone())
	if t := foldIn(c, 0); t != nil && foldSize(t.Shape) {
		c.SetConst(0, cloneTensor(t))
	}
	return nil
}

func inferNot(c *InferCtx) error {
	x := c.In(0)
	if x.DType != Bool {
		return c.Errorf("input 0 has type %v, Not takes bool", x.DType)
	}
	c.SetOut(0, Bool, x.Shape.Clone())
	if t := numIn(c, 0); t != nil && foldSize(t.Shape) {
		vals := t.Int64s()
		for i, v := range vals {
			if v == 0 {
				vals[i] = 1
			} else {
				vals[i] = 0
			}
		}
		c.SetConst(0, TensorFromInt64s(Bool, t.Shape, vals))
	}
	return nil
}

func inferIsFloatClass(c *InferCtx) error {
	x := c.In(0)
	if !x.DType.IsFloat() {
		return c.Errorf("input 0 has type %v, %s takes a floating-point tensor", x.DType, c.Op.Type)
	}
	c.SetOut(0, Bool, x.Shape.Clone())
	return nil
}

// inferPRelu: slope broadcasts to X (unidirectionally); Y is X's shape.
func inferPRelu(c *InferCtx) error {
	x, slope := c.In(0), c.In(1)
	if err := sameDType(c, 0, 1); err != nil {
		return err
	}
	s, err := Broadcast(x.Shape, slope.Shape)
	if err != nil || !s.Equal(x.Shape) {
		return c.Errorf("input 1 (slope) of shape %v does not broadcast to input 0 of shape %v", slope.Shape, x.Shape)
	}
	c.SetOut(0, x.DType, x.Shape.Clone())
	return nil
}

// inferClip: bounds are optional scalar inputs (opset >= 11) or the
// opset-6 float attributes min/max. Constant inputs are folded.
func inferClip(c *InferCtx) error {
	x := c.In(0)
	for i := 1; i < c.NumIn(); i++ {
		v := c.In(i)
		if v == nil {
			continue
		}
		if v.DType != x.DType {
			return c.Errorf("%s has type %v, input 0 has %v; Clip bounds must match", inName(c, i), v.DType, x.DType)
		}
		if len(v.Shape) > 1 || numElems(v.Shape) != 1 {
			return c.Errorf("%s has shape %v, Clip bounds must be scalars", inName(c, i), v.Shape)
		}
	}
	c.SetOut(0, x.DType, x.Shape.Clone())
	t := numIn(c, 0)
	if t == nil || !foldSize(t.Shape) || t.DType == Bool {
		return nil
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	if a := c.Op.Attr("min"); a != nil {
		lo = float64(a.Float)
	}
	if a := c.Op.Attr("max"); a != nil {
		hi = float64(a.Float)
	}
	for i, b := range []*float64{&lo, &hi} {
		if c.In(i+1) == nil {
			continue
		}
		bt := numIn(c, i+1)
		if bt == nil {
			return nil
		}
		*b = bt.Float64s()[0]
	}
	if t.DType.IsFloat() {
		vals := t.Float64s()
		for i, v := range vals {
			vals[i] = math.Min(math.Max(v, lo), hi)
		}
		c.SetConst(0, TensorFromFloat64s(t.DType, t.Shape, vals))
		return nil
	}
	vals := t.Int64s()
	for i, v := range vals {
		f := math.Min(math.Max(float64(v), lo), hi)
		if f != float64(v) {
			vals[i] = int64(f)
		}
	}
	c.SetConst(0, TensorFromInt64s(t.DType, t.Shape, vals))
	return nil
}

// inferBinary: numpy broadcasting over all inputs (two, or any number for
// the variadic Max/Min/Sum/Mean); comparisons and logical ops give bool.
// Constant inputs are folded, which is how shape arithmetic (Mul of
// dims, Div by head count) becomes static.
func inferBinary(op string, boolOut bool) func(c *InferCtx) error {
	return func(c *InferCtx) error {
		n := c.NumIn()
		shapes := make([]Shape, n)
		for i := 0; i < n; i++ {
			v := c.In(i)
			if v == nil {
				return c.Errorf("input %d is missing", i)
			}
			shapes[i] = v.Shape
		}
		dt := c.In(0).DType
		switch op {
		case "And", "Or", "Xor":
			for i := 0; i < n; i++ {
				if c.In(i).DType != Bool {
					return c.Errorf("input %d has type %v, %s takes bool", i, c.In(i).DType, op)
				}
			}
		case "Pow": // the exponent may have another type
		default:
			for i := 1; i < n; i++ {
				if c.In(i).DType != dt {
					return c.Errorf("input types differ: %v and %v", dt, c.In(i).DType)
				}
			}
		}
		if op == "Mod" && dt.IsFloat() && c.Op.AttrInt("fmod", 0) != 1 {
			return c.Errorf("Mod of floating-point type %v needs attribute fmod=1", dt)
		}
		shape, err := Broadcast(shapes...)
		if err != nil {
			return c.Errorf("%v", err)
		}
		outDT := dt
		if boolOut {
			outDT = Bool
		}
		c.SetOut(0, outDT, shape)

		if !foldSize(shape) {
			return nil
		}
		ts := make([]*Tensor, n)
		idx := make([][]int, n)
		useFloat := false
		for i := range ts {
			ts[i] = numIn(c, i)
			if ts[i] == nil || !foldSize(ts[i].Shape) {
				return nil
			}
			idx[i] = broadcastIndex(ts[i].Shape, shape)
			useFloat = useFloat || ts[i].DType.IsFloat()
		}
		evalOp := op
		if op == "Mod" && c.Op.AttrInt("fmod", 0) == 1 {
			evalOp = "FMod"
		}
		size := numElems(shape)
		if useFloat {
			vals := make([][]float64, n)
			for i, t := range ts {
				vals[i] = t.Float64s()
			}
			out := make([]float64, size)
			for k := range out {
				acc := vals[0][idx[0][k]]
				for i := 1; i < n; i++ {
					acc = evalFloat(evalOp, acc, vals[i][idx[i][k]])
				}
				if op == "Mean" {
					acc /= float64(n)
				}
				out[k] = acc
			}
			// (an integer outDT here is Pow of an integer base by a float
			// exponent: the result truncates)
			c.SetConst(0, TensorFromFloat64s(outDT, shape, out))
			return nil
		}
		vals := make([][]int64, n)
		for i, t := range ts {
			vals[i] = t.Int64s()
		}
		out := make([]int64, size)
		for k := range out {
			acc := vals[0][idx[0][k]]
			for i := 1; i < n; i++ {
				v, err := evalInt(evalOp, acc, vals[i][idx[i][k]])
				if err != nil {
					return c.Errorf("folding: %v", err)
				}
				acc = v
			}
			if op == "Mean" {
				acc /= int64(n)
			}
			out[k] = acc
		}
		c.SetConst(0, TensorFromInt64s(outDT, shape, out))
		return nil
	}
}

func evalFloat(op string, x, y float64) float64 {
	switch op {
	case "Add", "Sum", "Mean":
		return x + y
	case "Sub":
		return x - y
	case "Mul":
		return x * y
	case "Div":
		return x / y
	case "Pow":
		return math.Pow(x, y)
	case "Max":
		return math.Max(x, y)
	case "Min":
		return math.Min(x, y)
	case "FMod", "Mod":
		return math.Mod(x, y)
	case "And":
		return b2f(x != 0 && y != 0)
	case "Or":
		return b2f(x != 0 || y != 0)
	case "Xor":
		return b2f((x != 0) != (y != 0))
	}
	return b2f(compareOp(op, x, y))
}

func evalInt(op string, x, y int64) (int64, error) {
	switch op {
	case "Add", "Sum", "Mean":
		return x + y, nil
	case "Sub":
		return x - y, nil
	case "Mul":
		return x * y, nil
	case "Div":
		if y == 0 {
			return 0, errDivZero
		}
		return x / y, nil
	case "Pow":
		return int64(math.Pow(float64(x), float64(y))), nil
	case "Max":
		return max(x, y), nil
	case "Min":
		return min(x, y), nil
	case "Mod", "FMod":
		if y == 0 {
			return 0, errDivZero
		}
		r := x % y
		if op == "Mod" && r != 0 && (r < 0) != (y < 0) {
			r += y // result takes the divisor's sign
		}
		return r, nil
	case "And":
		return int64(b2f(x != 0 && y != 0)), nil
	case "Or":
		return int64(b2f(x != 0 || y != 0)), nil
	case "Xor":
		return int64(b2f((x != 0) != (y != 0))), nil
	}
	var r bool
	switch op {
	case "Equal":
		r = x == y
	case "Less":
		r = x < y
	case "Greater":
		r = x > y
	case "LessOrEqual":
		r = x <= y
	case "GreaterOrEqual":
		r = x >= y
	}
	return int64(b2f(r)), nil
}

type foldError string

func (e foldError) Error() string { return string(e) }

const errDivZero = foldError("integer division by zero")

func compareOp(op string, x, y float64) bool {
	switch op {
	case "Equal":
		return x == y
	case "Less":
		return x < y
	case "Greater":
		return x > y
	case "LessOrEqual":
		return x <= y
	case "GreaterOrEqual":
		return x >= y
	}
	return false
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// broadcastIndex maps each element of the broadcast shape out to the
// flat index of the corresponding element of a tensor of shape in.
func broadcastIndex(in, out Shape) []int {
	n, _ := out.NumElements()
	idx := make([]int, n)
	off := len(out) - len(in)
	coord := make([]int64, len(out))
	for i := range idx {
		flat, stride := int64(0), int64(1)
		for d := len(in) - 1; d >= 0; d-- {
			c := coord[off+d]
			if in[d] == 1 {
				c = 0
			}
			flat += c * stride
			stride *= in[d]
		}
		idx[i] = int(flat)
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

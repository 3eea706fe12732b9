package ir

import "math"

// Inference rules for reductions. The axes of ReduceSum are an input
// since opset 13, those of the other reductions since opset 18; both
// forms are accepted whatever the opset. noop_with_empty_axes came with
// the input form.

var reduceOps = []string{
	"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
	"ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp",
}

func init() {
	for _, t := range reduceOps {
		Register(&Schema{Type: t, MinIn: 1, MaxIn: 2, MinOut: 1, MaxOut: 1,
			Attrs: map[string]AttrType{"axes": AttrInts, "keepdims": AttrInt, "noop_with_empty_axes": AttrInt},
			Infer: inferReduce, NoGrad: []int{1}, ConstIn: []int{1}})
	}
	for _, t := range []string{"ArgMax", "ArgMin"} {
		Register(&Schema{Type: t, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
			Attrs: map[string]AttrType{"axis": AttrInt, "keepdims": AttrInt, "select_last_index": AttrInt},
			Infer: inferArg})
	}
}

// ReduceAxes says which axes of input 0 a reduction op (Reduce*, with
// axes as attribute or input) reduces; noop reports the identity case
// (empty axes with noop_with_empty_axes). Gradient rules and kernels use
// it so the axis rules live in one place.
func ReduceAxes(op *Op) (red []bool, noop bool, err error) {
	return reduceAxes(&InferCtx{Op: op})
}

func reduceAxes(c *InferCtx) ([]bool, bool, error) {
	x := c.In(0)
	r := len(x.Shape)
	var axes []int64
	if c.In(1) != nil {
		if hasAttr(c, "axes") {
			return nil, false, c.Errorf("axes are given both as attribute and as input 1")
		}
		if err := checkRank1(c, 1, "axes", true); err != nil {
			return nil, false, err
		}
		var err error
		if axes, err = constIntsInput(c, 1, "axes"); err != nil {
			return nil, false, err
		}
	} else {
		axes = c.Op.AttrInts("axes", nil)
	}
	if len(axes) == 0 && c.Op.AttrInt("noop_with_empty_axes", 0) != 0 {
		return nil, true, nil
	}
	red := make([]bool, r)
	if len(axes) == 0 {
		for i := range red {
			red[i] = true
		}
	} else {
		ax, err := normAxes(c, "axes", axes, r)
		if err != nil {
			return nil, false, err
		}
		for _, a := range ax {
			red[a] = true
		}
	}
	return red, false, nil
}

func inferReduce(c *InferCtx) error {
	x := c.In(0)
	red, noop, err := reduceAxes(c)
	if err != nil {
		return err
	}
	keep := c.Op.AttrInt("keepdims", 1) != 0
	if noop {
		c.SetOut(0, x.DType, x.Shape.Clone())
		if t := foldIn(c, 0); t != nil && foldSize(t.Shape) {
			c.SetConst(0, cloneTensor(t))
		}
		return nil
	}
	kept := x.Shape.Clone() // keepdims form
	out := Shape{}
	for i, d := range x.Shape {
		if red[i] {
			kept[i] = 1
			if keep {
				out = append(out, 1)
			}
		} else {
			out = append(out, d)
		}
	}
	c.SetOut(0, x.DType, out)
	t := numIn(c, 0)
	if t == nil || !foldSize(t.Shape) {
		return nil
	}
	if res := foldReduce(c.Op.Type, t, kept); res != nil {
		res.Shape = out
		c.SetConst(0, res)
	}
	return nil
}

// foldReduce evaluates a reduction of t to the keepdims shape kept, or
// returns nil when the result is not well defined at compile time.
func foldReduce(op string, t *Tensor, kept Shape) *Tensor {
	n := int(numElems(kept))
	total := t.Len()
	if total == 0 && (op == "ReduceMax" || op == "ReduceMin" || op == "ReduceMean") {
		return nil
	}
	if t.DType == Bool && op != "ReduceMax" && op != "ReduceMin" {
		return nil
	}
	// Output index of every input element.
	kst := kept.Strides()
	dst := make([]int, total)
	coord := make([]int64, len(t.Shape))
	for i := range dst {
		f := int64(0)
		for d, v := range coord {
			if kept[d] != 1 {
				f += v * kst[d]
			}
		}
		dst[i] = int(f)
		for d := len(coord) - 1; d >= 0; d-- {
			coord[d]++
			if coord[d] < t.Shape[d] {
				break
			}
			coord[d] = 0
		}
	}
	count := int64(total / max(n, 1))
	intArith := !t.DType.IsFloat()
	switch op {
	case "ReduceL2", "ReduceLogSum", "ReduceLogSumExp":
		intArith = false
	}
	if intArith {
		v := t.Int64s()
		acc := make([]int64, n)
		seen := make([]bool, n)
		for i, x := range v {
			j := dst[i]
			switch op {
			case "ReduceSum", "ReduceMean":
				acc[j] += x
			case "ReduceL1":
				if x < 0 {
					x = -x
				}
				acc[j] += x
			case "ReduceSumSquare":
				acc[j] += x * x
			case "ReduceProd":
				if !seen[j] {
					acc[j] = 1
				}
				acc[j] *= x
			case "ReduceMax":
				if !seen[j] || x > acc[j] {
					acc[j] = x
				}
			case "ReduceMin":
				if !seen[j] || x < acc[j] {
					acc[j] = x
				}
			}
			seen[j] = true
		}
		for j := range acc {
			if op == "ReduceProd" && !seen[j] {
				acc[j] = 1
			}
			if op == "ReduceMean" {
				acc[j] /= count
			}
		}
		return TensorFromInt64s(t.DType, kept, acc)
	}
	v := t.Float64s()
	acc := make([]float64, n)
	seen := make([]bool, n)
	for i, x := range v {
		j := dst[i]
		switch op {
		case "ReduceSum", "ReduceMean", "ReduceLogSum":
			acc[j] += x
		case "ReduceL1":
			acc[j] += math.Abs(x)
		case "ReduceL2", "ReduceSumSquare":
			acc[j] += x * x
		case "ReduceLogSumExp":
			acc[j] += math.Exp(x)
		case "ReduceProd":
			if !seen[j] {
				acc[j] = 1
			}
			acc[j] *= x
		case "ReduceMax":
			if !seen[j] || x > acc[j] {
				acc[j] = x
			}
		case "ReduceMin":
			if !seen[j] || x < acc[j] {
				acc[j] = x
			}
		}
		seen[j] = true
	}
	for j := range acc {
		switch op {
		case "ReduceProd":
			if !seen[j] {
				acc[j] = 1
			}
		case "ReduceMean":
			acc[j] /= float64(count)
		case "ReduceL2":
			acc[j] = math.Sqrt(acc[j])
		case "ReduceLogSum", "ReduceLogSumExp":
			acc[j] = math.Log(acc[j])
		}
	}
	return TensorFromFloat64s(t.DType, kept, acc)
}

func inferArg(c *InferCtx) error {
	x := c.In(0)
	r := len(x.Shape)
	if r == 0 {
		return c.Errorf("input 0 is a scalar, %s needs rank >= 1", c.Op.Type)
	}
	axis, err := normAxis(c, "attribute axis", c.Op.AttrInt("axis", 0), r)
	if err != nil {
		return err
	}
	out := Shape{}
	for i, d := range x.Shape {
		if i == axis {
			if c.Op.AttrInt("keepdims", 1) != 0 {
				out = append(out, 1)
			}
			continue
		}
		out = append(out, d)
	}
	c.SetOut(0, Int64, out)
	return nil
}

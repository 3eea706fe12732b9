package profile

import "github.com/tsplit/tsplit/ir"

// The cost of every op, registered per op in the cost slot. The
// estimates are deliberately coarse (the planner compares ops of one
// graph on one device); what matters is that every op has one on
// purpose, and that a new op gets one from its registration or its
// traits, not by accident.

func init() {
	costs.Derive("views: a launch; elementwise: one FLOP per element", func(s *ir.Schema) (Cost, bool) {
		switch {
		case s.View == ir.WholeView:
			return Cost{Launch: true}, true
		case s.Elementwise:
			return Cost{FLOPs: perElement}, true
		}
		return Cost{}, false
	})
	set := func(flops func(op *ir.Op) float64, types ...string) {
		for _, t := range types {
			costs.Set("", t, Cost{FLOPs: flops})
		}
	}
	for _, t := range []string{"Shape", "Size", "Constant"} {
		costs.Set("", t, Cost{Launch: true}) // computed from shapes or attributes
	}
	set(convFLOPs, "Conv")
	set(convTransposeFLOPs, "ConvTranspose")
	set(matMulFLOPs, "MatMul")
	set(gemmFLOPs, "Gemm")
	set(func(op *ir.Op) float64 { return elems(op.Output(0)) * prod(op.AttrInts("kernel_shape", nil)) },
		"MaxPool", "AveragePool")
	set(func(op *ir.Op) float64 { return 8 * elems(op.Input(0)) },
		"BatchNormalization", "LayerNormalization", "InstanceNormalization")
	set(func(op *ir.Op) float64 { return 5 * elems(op.Input(0)) }, "Softmax", "LogSoftmax")
	// Transcendental elementwise functions: a few FLOPs per element.
	set(func(op *ir.Op) float64 { return 4 * elems(op.Output(0)) },
		"Erf", "Exp", "Log", "Tanh", "Sigmoid", "Gelu", "Pow", "Sqrt")
	// Data movement, reductions, the rest of the pools, constants filled
	// from a shape, and tsplit's transfers (which the simulator charges
	// by bandwidth instead): one operation per element.
	set(perElement, "CastLike", "Concat", "Split", "Slice", "Pad", "Transpose", "Expand", "Tile",
		"Gather", "GatherElements", "ScatterElements", "ScatterND", "OneHot",
		"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
		"ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "ArgMin", "Hardmax",
		"LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "Dropout", "ConstantOfShape", "Range")
	for _, t := range []string{"SwapIn", "SwapOut"} {
		costs.Set(ir.Domain, t, Cost{FLOPs: perElement})
	}
}

// perElement is one operation per element of the larger of input 0 and
// output 0.
func perElement(op *ir.Op) float64 { return max(elems(op.Input(0)), elems(op.Output(0))) }

// convFLOPs: 2 · outputs · (C_in / group) · kernel area.
func convFLOPs(op *ir.Op) float64 {
	if wt := op.Input(1); wt != nil && len(wt.Shape) >= 2 {
		return 2 * elems(op.Output(0)) * float64(wt.Shape[1]) * prod(wt.Shape[2:])
	}
	return 0
}

// convTransposeFLOPs: 2 · inputs · (C_out / group) · kernel area.
func convTransposeFLOPs(op *ir.Op) float64 {
	if wt := op.Input(1); wt != nil && len(wt.Shape) >= 2 {
		return 2 * elems(op.Input(0)) * float64(wt.Shape[1]) * prod(wt.Shape[2:])
	}
	return 0
}

// matMulFLOPs: 2 · outputs · K.
func matMulFLOPs(op *ir.Op) float64 {
	if a := op.Input(0); a != nil && len(a.Shape) > 0 {
		return 2 * elems(op.Output(0)) * float64(a.Shape[len(a.Shape)-1])
	}
	return 0
}

// gemmFLOPs: 2 · outputs · K, K from A as transA says.
func gemmFLOPs(op *ir.Op) float64 {
	a := op.Input(0)
	if a == nil || len(a.Shape) != 2 {
		return 0
	}
	k := a.Shape[1]
	if op.AttrInt("transA", 0) != 0 {
		k = a.Shape[0]
	}
	return 2 * elems(op.Output(0)) * float64(k)
}

func elems(v *ir.Value) float64 {
	if v == nil {
		return 0
	}
	n, _ := v.Shape.NumElements()
	return float64(n)
}

func prod(xs []int64) float64 {
	p := 1.0
	for _, x := range xs {
		p *= float64(x)
	}
	return p
}

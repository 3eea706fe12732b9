package policy

import (
	"fmt"
	"sort"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
)

// SuperNeurons (Wang et al., PPoPP'18) as TSPLIT §VI describes it: the
// decision is by layer type. Convolution outputs are the checkpoints and
// are swapped to the host (the Unified Tensor Pool offloads them); the
// feature maps of cheap layers — pooling, batch normalization,
// activations — are dropped after the forward pass and recomputed in the
// backward pass from the nearest checkpoint (cost-aware recomputation);
// other layers' feature maps (fully connected, element-wise joins) stay
// resident. A swapped tensor is prefetched one checkpoint ahead: its
// swap-in starts where the previous one in backward order is needed.
// Decided once, in round 0.

// snSwapTypes are the checkpoint layers SuperNeurons swaps.
var snSwapTypes = map[string]bool{"Conv": true}

// snCheapTypes are the layers SuperNeurons recomputes: pooling,
// normalization and activations.
var snCheapTypes = map[string]bool{
	"MaxPool": true, "AveragePool": true, "GlobalAveragePool": true, "GlobalMaxPool": true, "LpPool": true,
	"BatchNormalization": true, "LRN": true,
	"Relu": true, "LeakyRelu": true, "PRelu": true, "Elu": true, "Selu": true, "Celu": true, "Sigmoid": true,
	"HardSigmoid": true, "Tanh": true, "Softplus": true, "Softsign": true, "Gelu": true, "HardSwish": true,
	"Mish": true, "Clip": true, "ThresholdedRelu": true,
}

// snKeepTypes are never recomputed when a recomputation passes through
// them (expensive layers other than the swapped convolutions).
var snKeepTypes = map[string]bool{"Gemm": true, "MatMul": true, "ConvTranspose": true, "Einsum": true}

// snClass says what SuperNeurons does with a crossing value, from the
// type of the layer that produced its origin: Swap (a convolution
// output), Recompute (a cheap layer), Reside.
func snClass(f *fmaps, v *ir.Value) passes.Option {
	class := passes.Reside
	for _, o := range f.origins(v) {
		if o.Def == nil || o.Def.Domain != "" {
			return passes.Reside
		}
		switch {
		case snSwapTypes[o.Def.Type]:
			if class == passes.Reside {
				class = passes.Swap
			}
		case snCheapTypes[o.Def.Type]:
			class = passes.Recompute
		default:
			return passes.Reside
		}
	}
	return class
}

func superNeuronsPolicy(c *Context) (*passes.Plan, error) {
	if c.Round > 0 {
		return nil, staticRound(c, "superneurons", "swaps every convolution output and recomputes pooling, normalization and activations")
	}
	f, err := newFmaps(c)
	if err != nil {
		return nil, fmt.Errorf("policy superneurons: %w", err)
	}
	var ts []evictTarget
	for _, v := range f.crossing() {
		switch snClass(f, v) {
		case passes.Swap:
			if snSwapTypes[v.Def.Type] && v.Def.Phase == ir.Forward {
				ts = append(ts, evictTarget{v, passes.Swap})
			} else {
				// A hoisted derivative of a convolution output (e.g. the
				// normalized input of the batch norm that follows):
				// recomputed from the swapped convolution output.
				ts = append(ts, evictTarget{v, passes.Recompute})
			}
		case passes.Recompute:
			ts = append(ts, evictTarget{v, passes.Recompute})
		}
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("policy superneurons: the model has no convolution, pooling, normalization or activation feature maps to swap or recompute")
	}
	e := &evictor{f: f, at: max(c.Mem.PeakAt, 0),
		restore: func(w *ir.Value) (passes.Option, bool) {
			if w.Def == nil || w.Def.Domain != "" {
				return passes.Reside, false
			}
			switch {
			case snSwapTypes[w.Def.Type]:
				return passes.Swap, true
			case snKeepTypes[w.Def.Type]:
				return passes.Reside, false
			}
			return passes.Recompute, true
		}}
	ds := e.plan(ts)
	// Prefetch one checkpoint ahead: a swap-in starts where the previous
	// swapped tensor (in backward order) is needed.
	var swaps []*passes.Decision
	for _, d := range ds {
		if d.Option == passes.Swap {
			swaps = append(swaps, d)
		}
	}
	sort.SliceStable(swaps, func(i, j int) bool { return swaps[i].Before < swaps[j].Before })
	prev := -1
	for _, d := range swaps {
		if prev >= 0 {
			d.Trigger = min(max(prev, d.After+2), d.Before)
			d.DeltaT = e.swapCost(d.Value, d.After, d.Trigger, d.Before)
		}
		prev = d.Before
	}
	return &passes.Plan{Budget: c.Budget, Decisions: ds}, nil
}

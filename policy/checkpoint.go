package policy

import (
	"fmt"
	"math"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
)

// Checkpoints (Chen et al. 2016, "Training deep nets with sublinear
// memory cost"), the √n strategy TSPLIT §VI compares with: the n forward
// ops are cut into about √n segments; the tensor at each segment
// boundary (a checkpoint) is kept, and every other feature map the
// backward pass reads is dropped after the forward pass and recomputed
// from its segment's checkpoint when the backward pass reaches the
// segment. Only single-tensor cuts of the forward graph can be segment
// boundaries (on a chain every tensor is one; in a residual block only
// the block's output), so that a segment recomputes from one tensor.
// Decided once, in round 0.

// forwardCuts returns, in order, the forward values that are cuts of the
// forward graph — when they are produced no other feature map is still
// waiting for a forward reader — with the index of their producer among
// the forward ops, and the number of forward ops.
func forwardCuts(order []*ir.Op, isFmap func(v *ir.Value) bool) (cuts []*ir.Value, at []int, n int) {
	idx := map[ir.OpID]int{}
	var fwd []*ir.Op
	for _, op := range order {
		if op.Phase == ir.Forward && ir.CopyOf(op) == ir.NoCopy {
			idx[op.ID] = len(fwd)
			fwd = append(fwd, op)
		}
	}
	n = len(fwd)
	last := func(v *ir.Value) int {
		l := -1
		for _, u := range v.Uses() {
			if j, ok := idx[u.Op.ID]; ok {
				l = max(l, j)
			}
		}
		return l
	}
	// diff[j+1] accumulates to the number of feature maps produced at or
	// before forward op j that a later forward op reads.
	diff := make([]int, n+2)
	add := func(v *ir.Value, d int) {
		if l := last(v); l > d {
			diff[d+1]++
			diff[l+1]--
		}
	}
	seen := map[ir.ValueID]bool{}
	for _, op := range fwd {
		for _, v := range op.Inputs() {
			if v != nil && v.Kind == ir.KindInput && isFmap(v) && !seen[v.ID] {
				seen[v.ID] = true
				add(v, -1)
			}
		}
	}
	for j, op := range fwd {
		for _, v := range op.Outputs() {
			if v != nil && isFmap(v) {
				add(v, j)
			}
		}
	}
	open := 0
	for j, op := range fwd {
		open += diff[j+1]
		if j == 0 {
			open += diff[0]
		}
		if open != 1 {
			continue
		}
		for _, v := range op.Outputs() {
			if v != nil && isFmap(v) && last(v) > j {
				cuts = append(cuts, v)
				at = append(at, j)
			}
		}
	}
	return cuts, at, n
}

// checkpointSegments picks the checkpoints: k = round(√n) segments of
// about n/k forward ops; the m-th boundary is the first cut whose
// producer closes at least m·n/k ops (rounded), so there are at most k
// segments, fewer when cuts are sparse.
func checkpointSegments(cuts []*ir.Value, at []int, n int) []*ir.Value {
	k := max(1, int(math.Round(math.Sqrt(float64(n)))))
	seg := float64(n) / float64(k)
	var out []*ir.Value
	m := 1
	for i, v := range cuts {
		if m >= k || at[i] >= n-1 {
			break
		}
		if float64(at[i]+1) >= float64(m)*seg-0.5 {
			out = append(out, v)
			for m++; m < k && float64(at[i]+1) >= float64(m)*seg-0.5; m++ {
			}
		}
	}
	return out
}

func checkpointPolicy(c *Context) (*passes.Plan, error) {
	if c.Round > 0 {
		return nil, staticRound(c, "checkpoint", "recomputes every feature map but the √n segment boundaries")
	}
	f, err := newFmaps(c)
	if err != nil {
		return nil, fmt.Errorf("policy checkpoint: %w", err)
	}
	cuts, at, n := forwardCuts(f.order, f.evictable)
	ckpt := map[ir.ValueID]bool{}
	for _, v := range checkpointSegments(cuts, at, n) {
		ckpt[v.ID] = true
	}
	var ts []evictTarget
	for _, v := range f.crossing() {
		if !ckpt[v.ID] {
			ts = append(ts, evictTarget{v, passes.Recompute})
		}
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("policy checkpoint: no feature map crosses from the forward to the backward pass: nothing to recompute")
	}
	e := &evictor{f: f, at: max(c.Mem.PeakAt, 0), source: func(w *ir.Value) bool { return ckpt[w.ID] }}
	return &passes.Plan{Budget: c.Budget, Decisions: e.plan(ts)}, nil
}

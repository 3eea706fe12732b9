package passes

import (
	"fmt"
	"slices"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// The backward pass through a fused-tiled segment (SFT §3, Fig. 5,
// backward half). The training step built from InsertFusedTiles' forward
// is already right arithmetically: autodiff walks the forward in reverse,
// which is cell after cell, last cell first; a cell's gradient ops read
// that cell's tiles; the gradient of an input-region Slice pads the
// tile's gradient into the whole checkpoint and adds it to a running sum
// (the overlap-add on the halos), and each weight's gradient is a running
// sum over the cells. What it gets wrong is memory: every cell's forward
// tiles stay live from the forward pass until its gradient ops run, so
// together they weigh as much as the whole activations they replace.
//
// RecomputeTiles makes the forward tiles die within their cell: the ops
// of a cell that its gradient ops read, and the ops those read in turn,
// are cloned right before the cell's first gradient op (recomputed from
// the input checkpoints, which the backward keeps anyway), and the
// gradient ops read the clones. One cell's forward and gradient tiles are
// then live at a time in the backward pass, beside the checkpoints, the
// output's gradient and the running sums.

// RecomputeTiles rewrites the training step m (built from a model
// InsertFusedTiles rewrote, recorded in ft) so that each cell's backward
// reads a recomputation of the cell's forward.
func RecomputeTiles(m *ir.Model, ft *FusedTiles) error {
	g := m.Graph
	live := map[*ir.Op]bool{}
	for _, op := range g.Order() {
		live[op] = true
	}
	for c, ops := range ft.Cells {
		def := map[*ir.Value]*ir.Op{}
		for _, op := range ops {
			if !live[op] {
				return fmt.Errorf("tileback: %s of tile %d is no longer in the graph", op.Describe(), c)
			}
			for _, v := range op.Outputs() {
				if v != nil {
					def[v] = op
				}
			}
		}
		// The cell's values the backward reads, and the first op that
		// reads one.
		pos := g.Position()
		first := -1
		var reads []ir.Use
		var origs []*ir.Value
		need := map[*ir.Op]bool{}
		for _, op := range ops {
			for _, v := range op.Outputs() {
				if v == nil {
					continue
				}
				for _, u := range v.Uses() {
					if u.Op.Phase != ir.Backward {
						continue
					}
					reads = append(reads, u)
					origs = append(origs, v)
					need[op] = true
					if p := pos[u.Op.ID]; first < 0 || p < first {
						first = p
					}
				}
			}
		}
		if first < 0 {
			continue // nothing of this cell is differentiated
		}
		// The ops the recomputation needs: those read, and within the
		// cell what they read (the cell runs in order, so one reverse
		// sweep closes the set).
		for k := len(ops) - 1; k >= 0; k-- {
			if !need[ops[k]] {
				continue
			}
			for _, v := range ops[k].Inputs() {
				if d := def[v]; d != nil {
					need[d] = true
				}
			}
		}
		clone := map[*ir.Value]*ir.Value{}
		at := first
		for _, op := range ops {
			if !need[op] {
				continue
			}
			ins := slices.Clone(op.Inputs())
			for j, v := range ins {
				if w := clone[v]; w != nil {
					ins[j] = w
				}
			}
			outs := make([]string, len(op.Outputs()))
			for k, v := range op.Outputs() {
				if v != nil {
					outs[k] = g.FreshName(v.Name + "/re")
				}
			}
			o, err := g.InsertOp(at, op.Type, op.Domain, g.FreshName(op.Name+"/re"), ins, outs, slices.Clone(op.Attrs))
			if err != nil {
				return fmt.Errorf("tileback: recomputing %s: %w", op.Describe(), err)
			}
			at++
			o.Phase, o.Origin = ir.Backward, "fusetile"
			if err := ir.InferAndSet(o, m.Opset(op.Domain)); err != nil {
				return fmt.Errorf("tileback: %s: %w", o.Describe(), err)
			}
			for k, v := range op.Outputs() {
				if v != nil {
					clone[v] = o.Output(k)
				}
			}
		}
		for i, u := range reads {
			u.Op.SetInput(u.Index, clone[origs[i]])
		}
	}
	return nil
}

// FusedStep is a training step whose forward runs fused tiles.
type FusedStep struct {
	Model *ir.Model
	Fused []*FusedTiles
	// Peak is the memory model's peak of the step (the reference
	// kernels' scratch included).
	Peak int64
	// Layout places the step's tensors in one pool, and Fits says
	// whether the pool is within the budget.
	Layout *memory.Layout
	Fits   bool
}

// FuseForTraining finds the fused-tiled segments of the forward model m
// at budget (FindSegments), rewrites them (InsertFusedTiles), builds
// the training step with build, and recomputes each cell in the
// backward (RecomputeTiles). ChooseTiles sizes tiles for the forward;
// a cell's backward holds its recomputed forward tiles, their
// gradients and the gradient convolutions' scratch, several times more.
// So when the step exceeds the budget the tiles shrink: the next
// attempt allows the largest working set of the last scaled by the
// budget over the step's pool (and strictly less than it), until the step's static layout (memory.Model.MakeLayout: the
// peak and its fragmentation) fits (Fits), no smaller tiling exists, or
// smaller tiles no longer shrink the pool by 1 % (what exceeds the
// budget is then outside the segments); then the last step that did
// shrink it is returned, for the planner to fit the rest by swapping,
// recomputing and splitting (Fits false). m is left
// unchanged; the result is nil when no op needs tiles at this budget.
func FuseForTraining(m *ir.Model, budget int64, build func(*ir.Model) error) (*FusedStep, error) {
	var weights int64
	for _, v := range m.Graph.Values() {
		if memory.Resident(v) {
			weights += memory.Align(v.Bytes())
		}
	}
	avail := budget - weights
	if avail <= 0 {
		return nil, fmt.Errorf("tileback: the weights take %d bytes, the budget is %d", weights, budget)
	}
	avail0 := avail
	// attempt tiles the segments FindSegments finds at segBudget; outside
	// reports a step that smaller tiles did not shrink.
	attempt := func(segBudget int64) (step *FusedStep, outside bool, err error) {
		avail := avail0
		// probe: ChooseTiles on the segments of an untouched copy, to find
		// an avail that tiles before building a step with it.
		pm := m.Clone()
		probe, err := FindSegments(pm, AnalyzeFT(pm), SegmentOptions{Budget: segBudget})
		if err != nil {
			return nil, false, err
		}
		if len(probe) == 0 {
			return nil, false, nil
		}
		tiles := func(avail int64) (int64, bool) {
			var most int64
			for _, seg := range probe {
				tl, err := ChooseTiles(seg, avail)
				if err != nil {
					return 0, false
				}
				most = max(most, tl.WorkingSet())
			}
			return most, true
		}
		// fixed is what a step holds whatever the tiles: the weights and
		// the segments' checkpoints. The rest of its pool grows with the
		// tiles' working set, by a factor the first step measures.
		fixed := weights
		for _, seg := range probe {
			for _, v := range append(slices.Clone(seg.Inputs), seg.Outputs...) {
				fixed += memory.Align(v.Bytes())
			}
		}
		var last *FusedStep
		for {
			c := m.Clone()
			segs, err := FindSegments(c, AnalyzeFT(c), SegmentOptions{Budget: segBudget})
			if err != nil {
				return nil, false, err
			}
			if len(segs) == 0 {
				return nil, false, nil
			}
			step := &FusedStep{Model: c}
			var most int64
			for _, seg := range segs {
				tl, err := ChooseTiles(seg, avail)
				if err != nil {
					if last != nil {
						return last, false, nil // no smaller tiles
					}
					return nil, false, err
				}
				most = max(most, tl.WorkingSet())
				ft, err := InsertFusedTiles(c, tl)
				if err != nil {
					return nil, false, err
				}
				step.Fused = append(step.Fused, ft)
			}
			if err := build(c); err != nil {
				return nil, false, err
			}
			for _, ft := range step.Fused {
				if err := RecomputeTiles(c, ft); err != nil {
					return nil, false, err
				}
			}
			mem, err := memory.Analyze(c.Graph, memory.Options{})
			if err != nil {
				return nil, false, fmt.Errorf("tileback: %w", err)
			}
			step.Peak, step.Layout = mem.Peak, mem.MakeLayout()
			step.Fits = step.Layout.Pool <= budget
			if step.Fits {
				return step, false, nil
			}
			if last != nil && step.Layout.Pool >= last.Layout.Pool-last.Layout.Pool/100 {
				// Smaller tiles did not help: what exceeds the budget is
				// outside the segments, for the planner. Fewer tiles cost
				// less halo and fewer ops.
				return last, true, nil
			}
			last = step
			// The step's pool less the fixed part scales with the tiles'
			// working set less the fixed part: aim the working set where
			// that meets the budget, at least one tiling smaller. Where
			// that asks for less than any tiling needs, take the smallest
			// tiles there are (bisection on avail).
			hi := most - 1
			if _, ok := tiles(hi); !ok {
				return last, false, nil // no smaller tiles
			}
			avail = hi
			if most > fixed && step.Layout.Pool > fixed && budget > fixed {
				k := float64(step.Layout.Pool-fixed) / float64(most-fixed)
				avail = min(hi, fixed+int64(float64(budget-fixed)/max(k, 1)))
			}
			if _, ok := tiles(avail); !ok {
				lo := avail
				for hi-lo > max(hi/1024, memory.Alignment) {
					mid := lo + (hi-lo)/2
					if _, ok := tiles(mid); ok {
						hi = mid
					} else {
						lo = mid
					}
				}
				avail = hi
			}
		}
	}
	// A step that smaller tiles do not shrink exceeds the budget outside
	// its segments: typically the gradient ops of the ops after them,
	// whose scratch (a weight gradient's convolution of the whole
	// activation) the forward's must-tile test does not see. The
	// segments then grow: FindSegments runs again with its budget
	// scaled by the budget over the step's pool, which makes more ops
	// must-tile, a few times at most.
	segBudget := budget
	var best *FusedStep
	for range 3 {
		step, outside, err := attempt(segBudget)
		if err != nil || step == nil {
			if best != nil {
				return best, nil
			}
			return step, err
		}
		if best == nil || step.Layout.Pool < best.Layout.Pool {
			best = step
		}
		if step.Fits || !outside {
			return best, nil
		}
		segBudget = int64(float64(segBudget) * float64(budget) / float64(step.Layout.Pool))
	}
	return best, nil
}

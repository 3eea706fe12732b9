package policy

import (
	"slices"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// TestLinkPricedChainsReadSwapIns checks how a recompute chain treats an
// input its own round swaps (as Run records a swap: decided, back on
// the device at the swap-in's trigger), on the CI-sized BERT encoder:
// the chain of the first forward tensor read in the backward pass at q
// whose input w is read there too. Without the link price
// (passes.Options.LinkPrice) w is recomputed, a chain member; priced,
// a swap-in triggered by q is read where it is, and the chain is
// charged the part of the transfer the compute between the trigger and
// q does not hide (lateAt): some with the trigger one op before q, none
// with it far enough ahead.
func TestLinkPricedChainsReadSwapIns(t *testing.T) {
	m, mem, tl, p := simulatedStep(t, "bert-base", 256)
	pl := newPlanner(m.Graph, mem, tl, p, mem.Peak*30/100)
	// The first forward op whose output v is read in the backward pass,
	// at q, with an input w made by a forward op and read at q or later.
	var v, w *ir.Value
	q := -1
	for _, op := range mem.Order {
		if op.Phase != ir.Forward || v != nil {
			continue
		}
		for _, u := range pl.uses[op.Output(0).ID] {
			if mem.Order[u].Phase != ir.Backward {
				continue
			}
			for _, x := range op.Inputs() {
				if x != nil && mem.ByValue[x.ID] >= 0 && pl.chainClonable(x) && pl.chainClonable(op.Output(0)) &&
					mem.Intervals[mem.ByValue[x.ID]].Kind == memory.Activation && pl.lastUse(x, &mem.Intervals[mem.ByValue[x.ID]]) >= u {
					v, w, q = op.Output(0), x, u
					break
				}
			}
			break
		}
	}
	if v == nil {
		t.Fatal("no forward op read in the backward pass with an input read there too")
	}
	t.Logf("%s (%s) at %d, reading %s (%s)", v.Name, v.Def.Type, q, w.Name, w.Def.Type)
	swapAt := func(trigger int) {
		pl.decided[w.ID], pl.backAt[w.ID], pl.swappedNow[w.ID] = true, int32(trigger), true
	}
	swapAt(q - 1)
	ch, ok := pl.recomputeChain(v, q)
	if !ok || !slices.Contains(ch.members, w) {
		t.Errorf("unpriced: chain ok %v, members %d, want %s recomputed in it", ok, len(ch.members), w.Name)
	}
	pl.LinkPrice = linkPrice
	ch, ok = pl.recomputeChain(v, q)
	if !ok || slices.Contains(ch.members, w) || !slices.Contains(ch.reads, w) {
		t.Fatalf("priced: chain ok %v, %d ops, %d members, want %s read at q", ok, len(ch.ops), len(ch.members), w.Name)
	}
	compute := 0.0
	for _, op := range ch.ops {
		compute += pl.opTime[pl.pos[op.ID]]
	}
	late := p.TransferTime(w.Bytes(), false) - pl.opTime[q-1]
	if late <= 0 {
		t.Fatalf("the transfer (%g s) fits in the op before q: nothing to check", p.TransferTime(w.Bytes(), false))
	}
	if d := ch.time - compute - late; d > 1e-12 || d < -1e-12 {
		t.Errorf("priced, swap-in one op before q: chain time %g s, want its ops' %g s + %g s late", ch.time, compute, late)
	}
	swapAt(pl.pos[w.Def.ID] + 1)
	if ch, _ = pl.recomputeChain(v, q); ch.time != compute {
		t.Errorf("priced, swap-in long before q: chain time %g s, want its ops' %g s", ch.time, compute)
	}
}

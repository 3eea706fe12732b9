package policy

import "github.com/tsplit/tsplit/ir"

// sortOpsByPos sorts ops by their positions (pos, by OpID), which are
// distinct. An insertion sort: the planner sorts a recompute chain's few
// ops for every candidate of every bottleneck, where a generic sort's
// calls through its comparison function were a twentieth of a search's
// time (BERT-large), and the chains arrive mostly in reverse.
func sortOpsByPos(ops []*ir.Op, pos []int) {
	for i := 1; i < len(ops); i++ {
		op, p := ops[i], pos[ops[i].ID]
		j := i
		for ; j > 0 && pos[ops[j-1].ID] > p; j-- {
			ops[j] = ops[j-1]
		}
		ops[j] = op
	}
}

// sortValuesByDef sorts op outputs by their producers' positions, then
// by output index (distinct pairs), as sortOpsByPos does ops.
func sortValuesByDef(vs []*ir.Value, pos []int) {
	before := func(a, b *ir.Value) bool {
		if pa, pb := pos[a.Def.ID], pos[b.Def.ID]; pa != pb {
			return pa < pb
		}
		return a.DefIndex < b.DefIndex
	}
	for i := 1; i < len(vs); i++ {
		v := vs[i]
		j := i
		for ; j > 0 && before(v, vs[j-1]); j-- {
			vs[j] = vs[j-1]
		}
		vs[j] = v
	}
}

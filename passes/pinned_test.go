package passes

import (
	"strings"
	"testing"

	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
)

// A value inference needs as a compile-time constant (ir.Value.Pinned)
// is never offered for splitting and never evicted, even when a policy
// asks: the rewrite would make it an op result and the graph would lose
// its static shapes.
func TestPinnedValuesStayWhole(t *testing.T) {
	b := New(t)
	x := b.Input("x", ir.Float, 4, 6, 8)
	sh := b.Op("Shape", V(x))
	n := b.Op("Gather", V(sh, b.Ints("zero", 0)), Int("axis", 0))
	cat := b.Op("Concat", V(n, b.Ints("rest", 24)), Int("axis", 0))
	// An elementwise op on the shape has splits (every dimension).
	cat = b.Op("Mul", V(cat, b.Ints("scale", 1, 2)))
	r := b.Op("Reshape", V(x, cat))
	y := b.Op("Relu", V(r))
	m := b.Return(y)
	if !cat.Pinned() {
		t.Fatal("Reshape's target shape is not pinned")
	}
	if len(AnalyzeFT(m).Of(cat.Def)) == 0 {
		t.Fatal("the shape Mul has no split at all: the test does not test the filter")
	}
	if got := SplitChoices(m, nil)(cat.Def); len(got) != 0 {
		t.Errorf("SplitChoices offers %v for the shape Mul computing a shape", got)
	}
	for _, d := range AnalyzeFT(m).Of(cat.Def) {
		err := InsertSplit(m, &SplitDecision{Op: cat.Def, PNum: 2, Map: d})
		if err == nil || !strings.Contains(err.Error(), "compile-time constant") {
			t.Errorf("InsertSplit of the shape Mul: %v, want a refusal", err)
		}
	}
	if Clonable(cat) {
		t.Error("the shape Mul is clonable for recomputation")
	}
	pos := m.Graph.Position()
	plan := &Plan{Decisions: []*Decision{{Value: cat, Option: Swap, After: pos[cat.Def.ID], Trigger: pos[y.Def.ID], Before: pos[y.Def.ID]}}}
	if err := InsertSwapRecompute(m, plan); err == nil || !strings.Contains(err.Error(), "compile-time constant") {
		t.Errorf("InsertSwapRecompute of the shape: %v, want a refusal", err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
}

package passes

import "testing"

func TestPipelineOrder(t *testing.T) {
	at := map[*Pass]int{}
	for i, p := range Pipeline {
		if p.Doc == "" || p.Name == "" {
			t.Errorf("pass %d has no name or doc", i)
		}
		at[p] = i
	}
	for _, o := range Order {
		a, okA := at[o.Before]
		b, okB := at[o.After]
		if !okA || !okB || a >= b {
			t.Errorf("%s must run before %s: %s", o.Before.Name, o.After.Name, o.Why)
		}
	}
	for _, p := range Pipeline {
		for _, r := range p.Requires {
			if r.Mutates {
				if _, ok := at[r]; !ok || at[r] >= at[p] {
					t.Errorf("%s requires transformation %s to run first", p.Name, r.Name)
				}
			}
		}
	}
}

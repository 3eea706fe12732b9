package ir

import (
	"strings"
	"testing"
)

// TestPinned checks which values a planner must leave in place: the
// shape chain PyTorch writes for a Reshape, the constant bounds of a
// Slice, and nothing that only feeds computation.
func TestPinned(t *testing.T) {
	b := newTG(t, 17)
	x := b.f32(4, 6, 8)
	sh := b.must("Shape", []*Value{x})
	batch := b.must("Gather", []*Value{sh, b.i64(0)}, attrI("axis", 0))
	unsq := b.must("Unsqueeze", []*Value{batch, b.ints(0)})
	cat := b.must("Concat", []*Value{unsq, b.ints(48)}, attrI("axis", 0))
	r := b.must("Reshape", []*Value{x, cat})
	starts, ends := b.ints(1), b.ints(3)
	s := b.must("Slice", []*Value{x, starts, ends})
	// A small weight's transform folds but only feeds computation.
	w := b.fconst(Shape{8}, 1, 2, 3, 4, 5, 6, 7, 8)
	neg := b.must("Neg", []*Value{w})
	y := b.must("Add", []*Value{x, neg})
	for _, c := range []struct {
		name string
		v    *Value
		want bool
	}{
		{"Shape output (folded, reaches Reshape's shape)", sh, true},
		{"Gather of the shape", batch, true},
		{"Unsqueeze of the batch", unsq, true},
		{"Concat: Reshape's target shape", cat, true},
		{"Slice starts (an initializer read as a constant)", starts, true},
		{"Slice ends", ends, true},
		{"the input", x, false},
		{"Reshape output", r, false},
		{"Slice output", s, false},
		{"a weight that only feeds computation", w, false},
		{"a folded transform of that weight", neg, false},
		{"an activation", y, false},
	} {
		if got := c.v.Pinned(); got != c.want {
			t.Errorf("%s: Pinned() = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestConstInMatchesRules checks that Infer refuses an inference rule
// that needs an input constant its schema does not list in ConstIn, so
// that Value.Pinned cannot miss a shape input: with Reshape's entry
// emptied, inferring a Reshape names the op table's bug.
func TestConstInMatchesRules(t *testing.T) {
	s := LookupSchema("", "Reshape")
	saved := s.ConstIn
	s.ConstIn = nil
	defer func() { s.ConstIn = saved }()
	b := newTG(t, 17)
	x := b.f32(2, 3)
	_, err := b.op("Reshape", []*Value{x, b.ints(3, 2)}, 1)
	if err == nil || !strings.Contains(err.Error(), "ConstIn") {
		t.Fatalf("Infer = %v, want the op table's missing ConstIn named", err)
	}
	s.ConstIn = saved
	if _, err := b.op("Reshape", []*Value{x, b.ints(3, 2)}, 1); err != nil {
		t.Fatal(err)
	}
}

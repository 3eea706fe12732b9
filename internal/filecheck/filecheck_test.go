package filecheck

import (
	"errors"
	"strings"
	"testing"
)

const output = `graph "g"
  %0 = input "x" f32[4]
  %1 = Relu %0 "a" : f32[4]
  %2 = ai.tsplit:SwapOut %1 "a/out" : f32[4]
  %3 = Tanh %0 "b" : f32[4]
  %4 = ai.tsplit:SwapIn %2 "a/in" [backward] : f32[4]
  %5 = Add %4 %3 "c" [backward] : f32[4]
  %6 = Mul %5 %5 "sq" [backward] : f32[4]
  return %6
`

func script(t *testing.T, directives string) *Script {
	t.Helper()
	s, err := Parse("t.ir", []byte("# RUN: schedule\n"+directives))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		name, directives string
		err              string // "" for a match; else a substring of the error
	}{
		{"in order", "# CHECK: Relu\n# CHECK: Tanh\n# CHECK: return", ""},
		{"out of order", "# CHECK: Tanh\n# CHECK: Relu", "t.ir:3: CHECK: Relu: no match after output line 5"},
		{"next", "# CHECK: Relu\n# CHECK-NEXT: SwapOut", ""},
		{"next fails", "# CHECK: Relu\n# CHECK-NEXT: Tanh", "t.ir:3: CHECK-NEXT: Tanh: not on the line after output line 3"},
		{"not between", "# CHECK: Relu\n# CHECK-NOT: Tanh\n# CHECK: SwapIn", "t.ir:3: CHECK-NOT: Tanh: output line 5 matches"},
		{"not elsewhere", "# CHECK: Tanh\n# CHECK-NOT: Relu\n# CHECK: Add", ""},
		{"not at the end", "# CHECK: SwapIn\n# CHECK-NOT: Tanh", ""},
		{"not at the end fails", "# CHECK: SwapOut\n# CHECK-NOT: Tanh", "t.ir:3: CHECK-NOT"},
		{"count", "# CHECK-COUNT-2: ai.tsplit:{{Swap(In|Out)}}\n# CHECK-NOT: ai.tsplit", ""},
		{"count fails", "# CHECK-COUNT-3: ai.tsplit:Swap", "t.ir:2: CHECK: ai.tsplit:Swap: no match after output line 6"},
		{"regex", "# CHECK: %{{[0-9]+}} = Tanh %0", ""},
		{"regex ending in a brace", "# CHECK: {{(%[0-9] ){2}}}\"c\"", ""},
		{"spaces", "# CHECK: =   Tanh", ""},
		{"variables", "# CHECK: [[H:%[0-9]+]] = ai.tsplit:SwapOut [[A:%[0-9]+]]\n# CHECK: SwapIn [[H]]\n# CHECK-NEXT: Add [[IN:%[0-9]]]", ""},
		{"variable mismatch", "# CHECK: [[H:%[0-9]+]] = Relu\n# CHECK: SwapIn [[H]]", "t.ir:3: CHECK: SwapIn [[H]]: no match"},
		{"variable unbound", "# CHECK: SwapIn [[H]]", "variable H is used before a match binds it"},
		{"variable after group", "# CHECK: {{(Relu|Tanh)}} [[V:%[0-9]+]] \"b\"\n# CHECK: Add %4 [[V]]", "t.ir:3"},
		{"variable used in its own pattern", "# CHECK: = {{[A-Za-z]+}} [[X:%[0-9]]] [[X]]\n# CHECK-NEXT: return", ""},
		{"variable used in its own pattern fails", "# CHECK: = Add [[X:%[0-9]]] [[X]]", "t.ir:2: CHECK: = Add [[X:%[0-9]]] [[X]]: no match"},
		{"variable after group ok", "# CHECK: {{(Tanh)}} [[V:%[0-9]+]] \"b\"\n# CHECK: SwapIn", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := script(t, c.directives).Match(output)
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("got %v, want an error containing %q", err, c.err)
			}
		})
	}
}

func TestVariableBinding(t *testing.T) {
	s := script(t, "# CHECK: {{(Tanh)}} [[V:%[0-9]+]] \"b\"")
	_, b, err := s.Checks[0].match(`  %3 = Tanh %0 "b" : f32[4]`, map[string]string{})
	if err != nil || b["V"] != "%0" {
		t.Fatalf("bound %v, %v; want V=%%0", b, err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ src, err string }{
		{"# CHECK: x", "t.ir: no RUN line"},
		{"# RUN: a\n# RUN: b\n# CHECK: x", "t.ir:2: a second RUN line"},
		{"# RUN: a", "would assert nothing"},
		{"# RUN: a\n# CHECK-NXT: x", "t.ir:2: unknown directive CHECK-NXT"},
		{"# RUN: a\n# CHECK x", "t.ir:2: CHECK needs a colon"},
		{"# RUN: a\n# CHECK-NEXT: x", "t.ir:2: CHECK-NEXT must follow"},
		{"# RUN: a\n# CHECK: {{[}}", "t.ir:2: CHECK: bad regex"},
		{"# RUN: a\n# CHECK: [[1x:y]]", "bad variable name"},
		{"# RUN: a\n# CHECK-COUNT-0: x", "the count must be a positive integer"},
		{"# RUN: a\n# CHECK:", "t.ir:2: CHECK: empty pattern"},
		{"# RUN: a\n# CHECK-SAME-AS-INPUT: x", "takes no pattern"},
		{"# RUN: a\n# CHECK: x\n# CHECK-ERROR: y", "t.ir:3: CHECK-ERROR cannot be mixed"},
	} {
		_, err := Parse("t.ir", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.err)
		}
	}
	s, err := Parse("t.ir", []byte("# a comment\n#RUN:  schedule , plan  budget=3 \n# CHECK-SAME-AS-INPUT\n# RUNNING is not a directive: no colon after RUN\n"))
	if err == nil {
		if s.Run != "schedule , plan  budget=3" || s.RunLine != 2 || s.SameAsInput != 3 {
			t.Fatalf("%+v", s)
		}
	} else {
		t.Fatal(err)
	}
}

func TestMatchError(t *testing.T) {
	s := script(t, "# CHECK-ERROR: after pass {{[a-z]+}}\n# CHECK-ERROR: uses \"x\"")
	if err := s.MatchError(errors.New("after pass schedule: ir: node \"a\" uses \"x\" before it is defined")); err != nil {
		t.Fatal(err)
	}
	if err := s.MatchError(nil); err == nil || !strings.Contains(err.Error(), "t.ir:2: CHECK-ERROR: the RUN line succeeded") {
		t.Fatalf("got %v", err)
	}
	if err := s.MatchError(errors.New("something else")); err == nil || !strings.Contains(err.Error(), "t.ir:2: CHECK-ERROR: after pass {{[a-z]+}}: not in the error") {
		t.Fatalf("got %v", err)
	}
}

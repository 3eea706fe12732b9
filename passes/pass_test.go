package passes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
)

// planGolden plans the first golden case (a small CNN) into its budget
// with tsplit and the given debugging hooks.
func planGolden(t *testing.T, hook func(s *passes.State)) (*passes.State, error) {
	t.Helper()
	c := goldenCases[0]
	budget := goldenBudget(t, c)
	s := passes.NewState(c.build(t), &passes.Options{Budget: budget, Policy: policy.Tsplit, Order: passes.OrderDFS})
	if hook != nil {
		hook(s)
	}
	return s, s.Run(passes.Pipeline...)
}

// Planning's rounds run as passes of their own: each is timed under the
// plan pass, before the next top-level pass, in the order run. A round
// either plans and rewrites (decide, insert, then the rewritten graph's
// liveness and simulation) or lays out a plan whose M_i fit (fit); the
// last round is a fit, and a fit that overflows the budget lowers the
// target for the next round (fragmentation).
func TestPlanRoundsArePasses(t *testing.T) {
	s, err := planGolden(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tm := range s.Timings {
		names = append(names, tm.Pass)
	}
	head := []string{"schedule", "plan", "plan/liveness", "plan/simulate"}
	tail := []string{"control-edges", "layout"}
	if len(names) < len(head)+len(tail)+1 || strings.Join(names[:len(head)], " ") != strings.Join(head, " ") ||
		strings.Join(names[len(names)-2:], " ") != strings.Join(tail, " ") {
		t.Fatalf("passes run: %v", names)
	}
	rounds := map[int][]string{}
	last, rewrites := 0, 0
	for _, name := range names[len(head) : len(names)-2] {
		var n int
		var step string
		if _, err := fmt.Sscanf(strings.ReplaceAll(name, "/", " "), "plan round-%d %s", &n, &step); err != nil {
			t.Fatalf("%q is not a round's pass: %v", name, err)
		}
		if n != last && n != last+1 {
			t.Fatalf("round %d after round %d: %v", n, last, names)
		}
		last = n
		rounds[n] = append(rounds[n], step)
	}
	for n := 1; n <= last; n++ {
		switch got := strings.Join(rounds[n], " "); got {
		case "decide insert liveness simulate":
			rewrites = n
		case "fit":
		default:
			t.Errorf("round %d ran %q", n, got)
		}
	}
	if rounds[last][0] != "fit" || rewrites == 0 || rewrites != s.Report.Rounds {
		t.Errorf("last round %v, last rewrite round %d, Report.Rounds %d: %v", rounds[last], rewrites, s.Report.Rounds, names)
	}
	var plan, inner int64
	for _, tm := range s.Timings {
		switch {
		case tm.Pass == "plan":
			plan = int64(tm.Duration)
		case strings.HasPrefix(tm.Pass, "plan/"):
			inner += int64(tm.Duration)
		}
		if tm.Duration <= 0 {
			t.Errorf("%s: no duration recorded", tm.Pass)
		}
	}
	if inner > plan {
		t.Errorf("planning's passes took %d ns, more than the plan pass that ran them (%d ns)", inner, plan)
	}
	var table bytes.Buffer
	if err := passes.WriteTimings(&table, s.Timings); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	if len(lines) != len(names)+1 || !strings.HasPrefix(lines[len(lines)-1], "total") {
		t.Fatalf("timing table:\n%s", table.String())
	}
	if !regexp.MustCompile(`^    decide +\S+ +\d+\.\d%  plan/round-1/decide$`).MatchString(lines[4]) {
		t.Errorf("round 1's decide is not indented under plan: %q", lines[4])
	}
}

// -d dump-after reaches the passes inside planning: by full name, by
// pattern, and by last element (every round).
func TestDumpAfterInnerPasses(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    func() []string
	}{
		{"plan/round-1/insert", func() []string { return []string{"plan/round-1/insert"} }},
		{"insert", nil}, // every round that rewrote
		{"plan/round-1/*", func() []string {
			return []string{"plan/round-1/decide", "plan/round-1/insert", "plan/round-1/liveness", "plan/round-1/simulate"}
		}},
		{"plan", func() []string { return []string{"plan"} }},
	} {
		t.Run(c.pattern, func(t *testing.T) {
			var buf bytes.Buffer
			s, err := planGolden(t, func(s *passes.State) { s.DumpAfter, s.DumpTo = c.pattern, &buf })
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range strings.Split(buf.String(), "\n") {
				if after, ok := strings.CutPrefix(l, "# after "); ok {
					got = append(got, after)
				}
			}
			var want []string
			if c.want != nil {
				want = c.want()
			} else {
				for _, tm := range s.Timings {
					if strings.HasSuffix(tm.Pass, "/insert") {
						want = append(want, tm.Pass)
					}
				}
			}
			if len(want) == 0 || strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("dumped after %v, want %v", got, want)
			}
		})
	}
}

// A cancelled context stops planning between passes with its error, and
// the plan's error text names only the top-level pass.
func TestCancelStopsPlanning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var seen []string
	_, err := planGolden(t, func(s *passes.State) {
		s.Opts.Context = ctx
		s.OnPass = func(tm passes.Timing) {
			seen = append(seen, tm.Pass)
			if tm.Pass == "plan/round-1/decide" {
				cancel()
			}
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if err.Error() != "plan: context canceled" {
		t.Errorf("error %q, want the plan pass's name only", err)
	}
	// The plan pass reports itself when it returns, after decide.
	if got := strings.Join(seen[len(seen)-2:], " "); got != "plan/round-1/decide plan" {
		t.Errorf("passes after the cancel: %v", seen)
	}
}

package bound

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// ErrNoSolver says no MILP solver is installed (make deps installs CBC).
var ErrNoSolver = errors.New("bound: no MILP solver (cbc) on PATH; `make deps` installs coinor-cbc")

// ErrSolverTimeout is MILP's error when CBC ran past twice its time
// limit (it does not check the limit in every phase) and was stopped:
// no bound was proved.
var ErrSolverTimeout = errors.New("bound: cbc did not stop at its time limit and was killed")

// Solver is the MILP solver's command; tests and the CLI look it up
// with exec.LookPath.
const Solver = "cbc"

// Exact is the integer optimum of the model: every gap decided on its
// own, binary, over the same rows as the LP and every link row.
type Exact struct {
	// Added is the optimum in seconds (or, when the solver stopped on
	// its time limit, the best bound it proved: still a lower bound).
	Added float64 `json:"added_s"`
	// Optimal: the solver proved Added optimal.
	Optimal bool `json:"optimal"`
	// Infeasible: no plan of the class fits (see Result).
	Infeasible bool `json:"infeasible,omitempty"`
	// LP is the bound Lower finds on the same graph and budget.
	LP *Result `json:"lp"`
	// Binaries and Rows are the MILP's size.
	Binaries int           `json:"binaries"`
	Rows     int           `json:"rows"`
	Solve    time.Duration `json:"solve_ns"`
}

// ExactOptions tune the MILP.
type ExactOptions struct {
	Options
	// TimeLimit stops the solver (0: 120 s); the bound it proved by then
	// is reported.
	TimeLimit time.Duration
	// Gap stops the solver once its incumbent is within this fraction of
	// the bound it proved (0: 1e-3); Added is that proved bound.
	Gap float64
	// Keep, when set, is a folder where the model and the solver's
	// output are left (for a look at them); otherwise a temporary one is
	// removed.
	Keep string
	// relaxed drops integrality (the disaggregated LP, for comparisons).
	relaxed bool
}

// MILP solves the model as a MILP with CBC, through an LP file. It
// returns ErrNoSolver when cbc is not installed.
func MILP(ctx context.Context, g *ir.Graph, mem *memory.Model, tl *passes.Timeline, prof *profile.Profile, budget int64, opts ExactOptions) (*Exact, error) {
	bin, err := exec.LookPath(Solver)
	if err != nil {
		return nil, ErrNoSolver
	}
	lpRes, err := LowerWith(g, mem, tl, prof, budget, opts.Options)
	if err != nil {
		return nil, err
	}
	ex := &Exact{LP: lpRes}
	if lpRes.Infeasible {
		ex.Added, ex.Infeasible, ex.Optimal = math.Inf(1), true, true
		return ex, nil
	}
	if lpRes.Positions == 0 {
		ex.Optimal = true
		return ex, nil
	}
	t0 := time.Now()
	m, err := build(g, mem, tl, prof, budget)
	if err != nil {
		return nil, err
	}
	o := opts.Options.withDefaults()
	rows := m.pickRows(o.MemRows)
	f := newFormulation(m, rows, o.blocks(len(rows)), o.EndBlocks, m.gapClasses(rows))
	f.boundRows(true)
	for _, l := range f.linkCandidates() {
		f.p.add(f.link(l))
	}
	f.ownRows()
	binary := make([]bool, len(f.p.cost))
	for _, op := range f.options {
		binary[op.col] = !opts.relaxed
	}
	ex.Binaries = len(f.options)
	ex.Rows = len(f.p.rows)
	dir := opts.Keep
	if dir == "" {
		dir, err = os.MkdirTemp("", "tsplit-bound-")
		if err != nil {
			return nil, fmt.Errorf("bound: %v", err)
		}
		defer os.RemoveAll(dir)
	}
	model := filepath.Join(dir, "bound.lp")
	sol := filepath.Join(dir, "bound.sol")
	var buf bytes.Buffer
	if err := f.p.writeLP(&buf, binary); err != nil {
		return nil, err
	}
	if err := os.WriteFile(model, buf.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("bound: %v", err)
	}
	limit := opts.TimeLimit
	if limit <= 0 {
		limit = 120 * time.Second
	}
	gap := opts.Gap
	if gap <= 0 {
		gap = 1e-3
	}
	cctx, cancel := context.WithTimeout(ctx, 2*limit+30*time.Second)
	defer cancel()
	// The limit is wall-clock time (CBC counts CPU time by default,
	// which on a loaded machine runs far past it).
	cmd := exec.CommandContext(cctx, bin, model, "timeMode", "elapsed", "sec", strconv.Itoa(int(math.Ceil(limit.Seconds()))),
		"threads", "1", "ratio", strconv.FormatFloat(gap, 'g', -1, 64), "allow", "0", "solve", "solu", sol)
	out, err := cmd.CombinedOutput()
	if opts.Keep != "" {
		_ = os.WriteFile(filepath.Join(dir, "cbc.log"), out, 0o644)
	}
	if err != nil {
		if cctx.Err() == context.DeadlineExceeded {
			return nil, fmt.Errorf("%w (%v): %s", ErrSolverTimeout, 2*limit+30*time.Second, tail(out))
		}
		return nil, fmt.Errorf("bound: cbc: %v: %s", err, tail(out))
	}
	obj, optimal, err := readCBC(sol, out)
	if err != nil {
		return nil, err
	}
	ex.Added, ex.Optimal = obj*f.timeUnit, optimal
	ex.Solve = time.Since(t0)
	return ex, nil
}

// gapClasses makes one class per gap that holds a row: nothing merged.
func (m *model) gapClasses(rows []int) []class {
	var out []class
	for gi, gp := range m.gaps {
		lo, hi := rowSpan(rows, gp.from, gp.to)
		if lo > hi {
			continue
		}
		out = append(out, class{lo: lo, hi: hi, bytes: float64(gp.bytes), xfer: float64(gp.xfer), first: gp.first,
			def: gp.def, to: gp.to, recompute: gp.recompute, gaps: []int{gi}})
	}
	return out
}

// writeLP writes p in CPLEX LP format; columns marked binary are
// declared so, the others are continuous and non-negative.
func (p *problem) writeLP(w io.Writer, binary []bool) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, `\ tsplit lower bound: swap + recompute on a fixed order (package bound)`)
	fmt.Fprintln(bw, "Minimize")
	fmt.Fprint(bw, " obj:")
	terms := 0
	for j, c := range p.cost {
		if c != 0 {
			fmt.Fprintf(bw, " + %s %s", num(c), p.names[j])
			terms++
			if terms%8 == 0 {
				fmt.Fprint(bw, "\n ")
			}
		}
	}
	if terms == 0 {
		fmt.Fprintf(bw, " 0 %s", p.names[0])
	}
	fmt.Fprintln(bw)
	fmt.Fprintln(bw, "Subject To")
	for _, r := range p.rows {
		fmt.Fprintf(bw, " %s:", r.name)
		for k, c := range r.cols {
			fmt.Fprintf(bw, " + %s %s", num(r.coefs[k]), p.names[c])
			if (k+1)%8 == 0 {
				fmt.Fprint(bw, "\n ")
			}
		}
		op := "<="
		if r.ge {
			op = ">="
		}
		fmt.Fprintf(bw, " %s %s\n", op, num(r.rhs))
	}
	var bins []string
	for j, b := range binary {
		if b {
			bins = append(bins, p.names[j])
		}
	}
	if len(bins) > 0 {
		fmt.Fprintln(bw, "Binaries")
		for k := 0; k < len(bins); k += 10 {
			fmt.Fprintf(bw, " %s\n", strings.Join(bins[k:min(k+10, len(bins))], " "))
		}
	}
	fmt.Fprintln(bw, "End")
	return bw.Flush()
}

// num prints a coefficient exactly enough to read back the same float.
func num(x float64) string {
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if strings.HasPrefix(s, "-") {
		return "- " + s[1:]
	}
	return s
}

var (
	cbcPartial = regexp.MustCompile(`Partial search - best objective \S+ \(best possible (\S+)\)`)
	cbcDone    = regexp.MustCompile(`Search completed - best objective (\S+),`)
)

// printRounding covers the rounding of the numbers CBC prints (eight
// significant digits): a bound read from its log is lowered by it.
const printRounding = 1e-7

// readCBC reads the result from CBC's log and solution file: the
// optimum when the search completed, else the best bound it proved
// ("best possible"), which is still a lower bound.
func readCBC(sol string, log []byte) (float64, bool, error) {
	data, err := os.ReadFile(sol)
	if err != nil {
		return 0, false, fmt.Errorf("bound: cbc wrote no solution: %v: %s", err, tail(log))
	}
	first, _, _ := strings.Cut(string(data), "\n")
	if strings.HasPrefix(first, "Infeasible") {
		return 0, false, fmt.Errorf("bound: cbc found the MILP infeasible though the LP is not: %s", tail(log))
	}
	if m := cbcDone.FindSubmatch(log); m != nil && strings.HasPrefix(first, "Optimal") {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err == nil {
			return math.Max(0, v*(1-printRounding)), true, nil
		}
	}
	if strings.HasPrefix(first, "Optimal") {
		// Solved before the search (by preprocessing): the solution
		// file has the objective.
		if i := strings.LastIndex(first, "objective value"); i >= 0 {
			v, err := strconv.ParseFloat(strings.TrimSpace(first[i+len("objective value"):]), 64)
			if err == nil {
				return math.Max(0, v*(1-printRounding)), true, nil
			}
		}
	}
	if m := cbcPartial.FindSubmatch(log); m != nil {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err == nil {
			return math.Max(0, v*(1-printRounding)), false, nil
		}
	}
	return 0, false, fmt.Errorf("bound: cbc: no optimum or proved bound in its output (%q): %s", first, tail(log))
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}

package bound

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// problem is a linear program in the shape both solvers take: minimize
// Σ cost·x over x ≥ 0, rows Σ a·x ≥ rhs (covering) or ≤ rhs (packing).
// Columns may carry an upper bound of 1 (binary in the MILP, a bound
// row in the LP).
type problem struct {
	names []string
	cost  []float64
	rows  []row
}

type row struct {
	name  string
	cols  []int
	coefs []float64
	ge    bool // Σ ≥ rhs; else Σ ≤ rhs
	rhs   float64
	// What the row is, for reading its dual value back: a memory row
	// (mem: its row index), a link row (link), or the clones row.
	mem    int
	link   *linkRow
	clones bool
}

func (p *problem) col(name string, cost float64) int {
	p.names = append(p.names, name)
	p.cost = append(p.cost, cost)
	return len(p.cost) - 1
}

// add appends a row, merging repeated columns and dropping zeros.
func (p *problem) add(r row) {
	sum := map[int]float64{}
	for k, c := range r.cols {
		sum[c] += r.coefs[k]
	}
	cols := make([]int, 0, len(sum))
	for c, v := range sum {
		if v != 0 {
			cols = append(cols, c)
		}
	}
	sort.Ints(cols)
	r.coefs = r.coefs[:0:0]
	for _, c := range cols {
		r.coefs = append(r.coefs, sum[c])
	}
	r.cols = cols
	if len(cols) > 0 {
		p.rows = append(p.rows, r)
	}
}

// bigM prices the artificial columns that start the simplex: an
// artificial left in the optimal basis means a covering row could not
// be met. Every cost of the scaled problem is a few step times at most.
const bigM = 1e6

// perturb is what row i's right-hand side is moved by so that no two
// vertices of the polytope coincide: gonum's simplex (Dantzig's rule)
// can cycle forever on a degenerate vertex, and the rows here have many
// (zero right-hand sides, equal deficits). The move only loosens a row —
// a covering row asks a little less, a packing row allows a little more
// — so the optimum can only go down, by about 1e-9 of the units, and
// stays a lower bound. The amounts are distinct and deterministic.
func perturb(i int, ge bool) float64 {
	u := 1e-9 * (1 + math.Mod(float64(i)*0.6180339887498949, 1))
	if ge {
		return -u
	}
	return u
}

// solveSimplex solves p with gonum's simplex (optimize/convex/lp) and
// returns the optimum and the columns' values. The standard form has a
// slack per packing row, a surplus and an artificial per covering row;
// the slacks and artificials are the initial basis, so no phase I is
// needed (every packing rhs is ≥ 0, every covering rhs > 0).
func solveSimplex(p *problem) (float64, []float64, error) {
	opt, x, _, err := solveSimplexDuals(p)
	return opt, x, err
}

// solveSimplexDuals is solveSimplex that also returns the rows' dual
// values when it can recover them (nil otherwise): gonum returns the
// optimal point, not its basis, so the basis is taken to be the
// columns with a positive value — exactly m of them at a vertex that is
// not degenerate, which the perturbation makes the rule — and the duals
// solve Bᵀy = c_B. They are only a starting point for Lagrangian
// refinement, which is a bound whatever multipliers it is given.
func solveSimplexDuals(p *problem) (float64, []float64, []float64, error) {
	n := len(p.cost)
	m := len(p.rows)
	if m == 0 {
		return 0, make([]float64, n), nil, nil
	}
	used := make([]bool, n)
	for _, r := range p.rows {
		for _, c := range r.cols {
			used[c] = true
		}
	}
	// Columns in no row are 0 at the optimum (every cost is ≥ 0);
	// gonum refuses all-zero columns, so they are left out.
	idx := make([]int, n)
	k := 0
	for j := 0; j < n; j++ {
		idx[j] = -1
		if used[j] {
			if p.cost[j] < 0 {
				return 0, nil, nil, fmt.Errorf("bound: column %s has a negative cost", p.names[j])
			}
			idx[j] = k
			k++
		}
	}
	extra := 0
	for _, r := range p.rows {
		if r.ge {
			extra += 2
		} else {
			extra++
		}
	}
	cols := k + extra
	A := mat.NewDense(m, cols, nil)
	b := make([]float64, m)
	c := make([]float64, cols)
	for j := 0; j < n; j++ {
		if idx[j] >= 0 {
			c[idx[j]] = p.cost[j]
		}
	}
	basis := make([]int, m)
	next := k
	for i, r := range p.rows {
		for t, j := range r.cols {
			A.Set(i, idx[j], r.coefs[t])
		}
		b[i] = r.rhs + perturb(i, r.ge)
		if r.ge {
			if b[i] <= 0 {
				return 0, nil, nil, fmt.Errorf("bound: covering row %s has rhs %g", r.name, r.rhs)
			}
			A.Set(i, next, -1) // surplus
			A.Set(i, next+1, 1)
			c[next+1] = bigM
			basis[i] = next + 1
			next += 2
		} else {
			if b[i] < 0 {
				return 0, nil, nil, fmt.Errorf("bound: packing row %s has rhs %g", r.name, r.rhs)
			}
			A.Set(i, next, 1) // slack
			basis[i] = next
			next++
		}
	}
	_, x, err := lp.Simplex(c, A, b, 1e-12, basis)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("bound: simplex: %w", err)
	}
	// The artificials must have left the basis: the covering rows were
	// met by real columns.
	next = k
	for i, r := range p.rows {
		if r.ge {
			if x[next+1] > 1e-9*math.Max(1, r.rhs) {
				return 0, nil, nil, fmt.Errorf("bound: covering row %s not met (artificial %g)", r.name, x[next+1])
			}
			next += 2
		} else {
			next++
		}
		_ = i
	}
	out := make([]float64, n)
	opt := 0.0
	for j := 0; j < n; j++ {
		if idx[j] >= 0 {
			out[j] = math.Max(0, x[idx[j]])
			opt += p.cost[j] * out[j]
		}
	}
	return opt, out, duals(A, c, x), nil
}

// duals recovers the dual values of the rows from an optimal point x of
// the standard form (A, c), or returns nil.
func duals(A *mat.Dense, c, x []float64) []float64 {
	m, _ := A.Dims()
	var basis []int
	for j, v := range x {
		if v > 1e-12 {
			basis = append(basis, j)
		}
	}
	if len(basis) != m {
		return nil
	}
	B := mat.NewDense(m, m, nil)
	cb := mat.NewVecDense(m, nil)
	for k, j := range basis {
		for i := 0; i < m; i++ {
			B.Set(i, k, A.At(i, j))
		}
		cb.SetVec(k, c[j])
	}
	var y mat.VecDense
	if err := y.SolveVec(B.T(), cb); err != nil {
		return nil
	}
	out := make([]float64, m)
	for i := range out {
		out[i] = y.AtVec(i)
		if math.IsNaN(out[i]) || math.IsInf(out[i], 0) {
			return nil
		}
	}
	return out
}

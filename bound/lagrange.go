package bound

import (
	"math"
	"sort"
)

// Lagrangian refinement. The LP Lower solves is small because its
// columns are merged into classes, which loosens it. The model with
// every gap on its own (the MILP's columns, over the same rows) has a
// Lagrangian dual that is cheap to evaluate exactly: with multipliers
// λ ≥ 0 for the memory rows, ν ≥ 0 for the clones row and μ ≥ 0 for the
// link rows, and for every segment ν + Σ_{l spans it} μ_l ≤ 1 (else that
// segment's added-time column makes it −∞),
//
//	L = Σ_r λ_r·deficit_r − Σ_l μ_l·window_l + Σ_gaps min(0, min_options rc)
//	rc = ν·cost − save·Σ_{r freed} λ_r + Σ_{l holding it} μ_l·transfer_l
//
// and any such multipliers give a lower bound on that model (weak
// duality), hence on every plan of the class. At the aggregated LP's
// duals it is at least the aggregated LP's optimum — each gap's option
// costs no less, frees no more and moves no less than its class's, so
// its reduced cost is at least its share of the class's — and usually
// well above it: Lower reports the larger. (Projected subgradient steps
// from there did not raise it on the graphs tried: the dual is
// degenerate at the LP's duals, and single subgradients point down; nor
// did steps in one multiplier at a time. Moving the memory and link
// multipliers together, along, does: the full-size resnet50 at 45 % of
// its peak, 28.2 → 41.8 ms.)
type lagrangian struct {
	f      *formulation // per gap: one class per gap
	starts []int        // device-to-host window starts
	ends   []int        // host-to-device window ends
	// rhsD[s][d] and rhsH[a][e] are the windows' lengths (time units),
	// NaN where there is no such window.
	rhsD, rhsH [][]float64
	deficit    []float64 // byte units
	// Per option: the window indices it falls in.
	sidx, eidx []int
	classOf    []int
}

func newLagrangian(f *formulation) *lagrangian {
	g := &lagrangian{f: f}
	g.starts, g.ends = f.windowPoints()
	R := len(f.rows)
	g.deficit = make([]float64, R)
	for r, pos := range f.rows {
		g.deficit[r] = float64(f.m.deficit[pos]) / f.byteUnit
	}
	g.rhsD = grid(len(g.starts), R, math.NaN())
	for s, a := range g.starts {
		for d := range f.rows {
			if a < f.rows[d] {
				g.rhsD[s][d] = f.window(linkRow{toHost: true, a: a, c: d})
			}
		}
	}
	g.rhsH = grid(R, len(g.ends), math.NaN())
	for a := range f.rows {
		for e, c := range g.ends {
			if c > f.rows[a] {
				g.rhsH[a][e] = f.window(linkRow{a: a, c: c})
			}
		}
	}
	for _, o := range f.options {
		// Starts at or before the producer; ends at or after the use.
		g.sidx = append(g.sidx, sort.SearchInts(g.starts, o.def+1)-1)
		g.eidx = append(g.eidx, sort.SearchInts(g.ends, o.to))
		g.classOf = append(g.classOf, o.class)
	}
	return g
}

func grid(a, b int, v float64) [][]float64 {
	out := make([][]float64, a)
	for i := range out {
		out[i] = make([]float64, b)
		for j := range out[i] {
			out[i][j] = v
		}
	}
	return out
}

// mult are the multipliers.
type mult struct {
	lam    []float64
	nu     float64
	mD, mH [][]float64
}

func (g *lagrangian) zero() *mult {
	return &mult{lam: make([]float64, len(g.f.rows)), mD: grid(len(g.starts), len(g.f.rows), 0), mH: grid(len(g.f.rows), len(g.ends), 0)}
}

// fromDuals reads the aggregated LP's duals into multipliers of this
// model (rows it does not have stay 0).
func (g *lagrangian) fromDuals(p *problem, y []float64) *mult {
	u := g.zero()
	si := map[int]int{}
	for k, a := range g.starts {
		si[a] = k
	}
	ei := map[int]int{}
	for k, c := range g.ends {
		ei[c] = k
	}
	for i, r := range p.rows {
		switch {
		case r.ge && r.mem >= 0:
			u.lam[r.mem] = math.Max(0, y[i])
		case r.clones:
			u.nu = math.Max(0, -y[i])
		case r.link != nil && r.link.toHost:
			if s, ok := si[r.link.a]; ok {
				u.mD[s][r.link.c] = math.Max(0, -y[i])
			}
		case r.link != nil:
			if e, ok := ei[r.link.c]; ok {
				u.mH[r.link.a][e] = math.Max(0, -y[i])
			}
		}
	}
	g.project(u)
	return u
}

// project puts u back in the domain: λ, ν, μ ≥ 0, μ = 0 where there
// is no window, and for every segment of the order ν plus the μ of the
// windows that span it at most 1 (else that segment's added-time column
// makes L −∞). Over the limit, ν and every μ are scaled down together.
func (g *lagrangian) project(u *mult) {
	for r := range u.lam {
		u.lam[r] = math.Max(0, u.lam[r])
	}
	u.nu = math.Max(0, u.nu)
	clean := func(m *float64, rhs float64) {
		*m = math.Max(0, *m)
		if math.IsNaN(rhs) {
			*m = 0
		}
	}
	for s := range u.mD {
		for d := range u.mD[s] {
			clean(&u.mD[s][d], g.rhsD[s][d])
		}
	}
	for a := range u.mH {
		for e := range u.mH[a] {
			clean(&u.mH[a][e], g.rhsH[a][e])
		}
	}
	most := 0.0
	for _, l := range g.linkLoad(u) {
		most = math.Max(most, u.nu+l)
	}
	if most <= 1 {
		return
	}
	u.nu /= most
	for s := range u.mD {
		for d := range u.mD[s] {
			u.mD[s][d] /= most
		}
	}
	for a := range u.mH {
		for e := range u.mH[a] {
			u.mH[a][e] /= most
		}
	}
}

// linkLoad is, per segment of the order, the sum of the link
// multipliers of the windows that span it.
func (g *lagrangian) linkLoad(u *mult) []float64 {
	f := g.f
	load := make([]float64, len(f.segs))
	add := func(m float64, l linkRow) {
		if m <= 0 {
			return
		}
		for _, j := range f.segments(f.slots(l)) {
			load[j] += m
		}
	}
	for s := range u.mD {
		for d, m := range u.mD[s] {
			add(m, linkRow{toHost: true, a: g.starts[s], c: d})
		}
	}
	for a := range u.mH {
		for e, m := range u.mH[a] {
			add(m, linkRow{a: a, c: g.ends[e]})
		}
	}
	return load
}

// along raises L along the line through u that scales the memory and
// link multipliers together by s ≥ 0 and gives the clones row what the
// segments leave, ν = 1 − (the most link multiplier over a segment):
// at the aggregated LP's duals the memory rows are priced at its merged
// classes' cheapest recompute per byte, which the gaps alone mostly
// cannot match, so the unmerged model's best multipliers price them
// higher. L is concave and the line is affine in s, so a golden-section
// search over s finds its best point; every point is a bound.
func (g *lagrangian) along(u *mult) float64 {
	f := g.f
	most := 0.0
	for _, l := range g.linkLoad(u) {
		most = math.Max(most, l)
	}
	at := func(s float64) float64 {
		v := &mult{lam: make([]float64, len(u.lam)), nu: math.Max(0, 1-s*most), mD: grid(len(u.mD), len(f.rows), 0), mH: grid(len(f.rows), len(g.ends), 0)}
		for r, x := range u.lam {
			v.lam[r] = s * x
		}
		for i := range u.mD {
			for j, x := range u.mD[i] {
				v.mD[i][j] = s * x
			}
		}
		for i := range u.mH {
			for j, x := range u.mH[i] {
				v.mH[i][j] = s * x
			}
		}
		g.project(v)
		return g.eval(v)
	}
	// s runs from 0 to where ν reaches 0 (to 8 when no link row is
	// priced: past that the clones row alone prices the memory rows).
	hi := 8.0
	if most > 0 {
		hi = math.Min(hi, 1/most)
	}
	best := math.Max(g.eval(u), at(1))
	const phi = 0.6180339887498949
	a, b := 0.0, hi
	x1, x2 := b-phi*(b-a), a+phi*(b-a)
	f1, f2 := at(x1), at(x2)
	for k := 0; k < alongSteps; k++ {
		if f1 < f2 {
			a, x1, f1 = x1, x2, f2
			x2 = a + phi*(b-a)
			f2 = at(x2)
		} else {
			b, x2, f2 = x2, x1, f1
			x1 = b - phi*(b-a)
			f1 = at(x1)
		}
	}
	return math.Max(best, math.Max(f1, f2))
}

// alongSteps is the golden-section steps of along: the interval
// shrinks to 0.618^alongSteps of its length (1e-4 after 20).
const alongSteps = 20

// eval returns L(u).
func (g *lagrangian) eval(u *mult) float64 {
	f := g.f
	R, S, E := len(f.rows), len(g.starts), len(g.ends)
	// Prefix sums: Λ over rows; CD[s][d] = Σ_{s' ≤ s, d' ≥ d} μD;
	// CH[a][e] = Σ_{a' ≤ a, e' ≥ e} μH.
	lam := make([]float64, R+1)
	for r := 0; r < R; r++ {
		lam[r+1] = lam[r] + u.lam[r]
	}
	CD := grid(S, R+1, 0)
	for s := 0; s < S; s++ {
		for d := R - 1; d >= 0; d-- {
			CD[s][d] = CD[s][d+1] + u.mD[s][d]
			if s > 0 {
				CD[s][d] += CD[s-1][d] - CD[s-1][d+1]
			}
		}
	}
	CH := grid(R, E+1, 0)
	for a := 0; a < R; a++ {
		for e := E - 1; e >= 0; e-- {
			CH[a][e] = CH[a][e+1] + u.mH[a][e]
			if a > 0 {
				CH[a][e] += CH[a-1][e] - CH[a-1][e+1]
			}
		}
	}
	best := make([]float64, len(f.classes))
	for k, o := range f.options {
		rc := u.nu*o.cost/f.timeUnit - (o.keep*(lam[o.keepTo]-lam[o.lo])+o.save*(lam[o.hi+1]-lam[o.keepTo]))/f.byteUnit
		if o.toHost > 0 {
			rc += o.toHost / f.m.d2h / f.timeUnit * CD[g.sidx[k]][o.deadline]
		}
		if o.toDev > 0 {
			rc += o.toDev / f.m.h2d / f.timeUnit * CH[o.inFrom][g.eidx[k]]
		}
		if c := g.classOf[k]; rc < best[c] {
			best[c] = rc
		}
	}
	L := 0.0
	for r := 0; r < R; r++ {
		L += u.lam[r] * g.deficit[r]
	}
	for s := range u.mD {
		for d, m := range u.mD[s] {
			if m > 0 {
				L -= m * g.rhsD[s][d]
			}
		}
	}
	for a := range u.mH {
		for e, m := range u.mH[a] {
			if m > 0 {
				L -= m * g.rhsH[a][e]
			}
		}
	}
	for _, b := range best {
		L += b
	}
	return L
}

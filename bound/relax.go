package bound

import (
	"fmt"
	"math"
	"sort"
)

// A formulation is the model written over a chosen set of memory rows
// and eviction classes. The LP groups gaps into a few fluid classes; the
// MILP keeps one class per gap. Both are relaxations of every plan of
// the class (doc.go), so both are lower bounds.
type formulation struct {
	m *model
	// rows are the positions of the memory rows, in order.
	rows []int
	// blockOf maps a row index to its start block: a swap that starts
	// freeing a tensor at some row of a block is charged the block's
	// latest swap-out deadline and earliest swap-in start.
	blockOf    []int
	blockFirst []int
	blockLast  []int
	// endFirst and endLast bound the end blocks, a coarser partition
	// of the rows: a swap whose last row off lies in an end block is
	// charged off through the block's last row and its swap-in after
	// the block's first row starts.
	endFirst, endLast []int
	classes           []class
	// options are the columns: per class, its recompute variants and
	// one swap option per start block and end block.
	options []option
	// segs are the columns of the plan's added time, one per segment of
	// the order: segment j is the slots segAt[j] ≤ i < segAt[j+1], and
	// its column the time the plan adds there (slot i: from op i's start
	// to op i+1's, less op i's time; slot −1: before op 0). They add up
	// to the plan's added time (the objective), which is at least the
	// clones' time (one row); a link window is stretched by the
	// segments it spans, and windows in different segments by different
	// time (doc.go).
	segs  []int
	segAt []int
	p     *problem
	// duals are the rows' dual values at the last optimum (nil: not
	// recovered).
	duals []float64
	// scale converts the problem's units back: bytes are in units of
	// byteUnit, times in units of timeUnit seconds.
	byteUnit, timeUnit float64
}

// class is a set of gaps decided together, as a fluid: a fraction x of
// its bytes is evicted by each option. One gap alone is exact; a merged
// class takes the union of its members' rows and windows and the least
// cost and transfer per byte.
type class struct {
	lo, hi int     // row indices covered (inclusive)
	bytes  float64 // device bytes freed
	xfer   float64 // bytes a swap of all of it moves each way
	first  bool    // its swap-outs count on the device-to-host link
	def    int     // earliest producer position (a swap-out starts after it ends)
	to     int     // latest next use (a swap-in ends before it starts)
	// recompute lists the recomputation variants for all of the class
	// (chainVariants); none when it cannot be recomputed.
	recompute []variant
	gaps      []int
}

// option is one column: evict a class by a swap that frees rows lo..hi,
// or by one recomputation variant. Its link use is for all of the class.
type option struct {
	class  int
	lo, hi int     // rows freed
	save   float64 // bytes freed at each of them
	// keepTo and keep: at rows lo..keepTo-1 the option frees keep
	// instead of save (a chain's input still held there; keepTo = lo
	// for every other option).
	keepTo int
	keep   float64
	cost   float64 // compute added, seconds
	// toHost is the bytes it moves to the host before row deadline
	// (after position def ends); toDev the bytes it moves to the device
	// after row inFrom starts and before position to starts (inFrom is
	// lo for a recomputation, whose chain input may come back after any
	// row the tensor is off at; a swap's restored copy is allocated
	// when its swap-in starts, so that starts after its last row off).
	toHost   float64
	deadline int
	def      int
	toDev    float64
	inFrom   int
	to       int
	col      int
}

// saveAt is what o frees at row r (one of lo..hi).
func (o *option) saveAt(r int) float64 {
	if r < o.keepTo {
		return o.keep
	}
	return o.save
}

// linkRow is a candidate link-capacity row: the swaps whose copies must
// lie in one window of the step.
type linkRow struct {
	toHost bool
	// a is the window's start: for device-to-host rows a position (the
	// swap-outs of tensors made at or after it), for host-to-device
	// rows a row index (swaps that free a row at or after it).
	a int
	// c is the window's end: a row index (device-to-host: swap-outs
	// with a deadline at or before it) or a position (host-to-device:
	// swap-ins for uses at or before it).
	c int
}

// newFormulation lays out rows and options; the link rows are added by
// the caller (all of them, or by separation).
func newFormulation(m *model, rows []int, blocks, ends int, classes []class) *formulation {
	f := newOptions(m, rows, blocks, ends, classes)
	f.writeRows()
	return f
}

// newOptions lays out the columns only (the Lagrangian needs no rows).
func newOptions(m *model, rows []int, blocks, ends int, classes []class) *formulation {
	f := &formulation{m: m, rows: rows, classes: classes, p: &problem{}}
	// Units: bytes in the largest deficit, seconds in the base step, so
	// the simplex sees coefficients near 1.
	f.byteUnit = 1
	for _, r := range rows {
		f.byteUnit = math.Max(f.byteUnit, float64(m.deficit[r]))
	}
	f.timeUnit = m.start[m.n]
	if f.timeUnit <= 0 {
		f.timeUnit = 1
	}
	// Start blocks: consecutive rows, blocks of about equal count.
	nb := max(1, min(blocks, len(rows)))
	f.blockOf = make([]int, len(rows))
	f.blockFirst = make([]int, nb)
	f.blockLast = make([]int, nb)
	for i := range rows {
		b := i * nb / len(rows)
		f.blockOf[i] = b
		if i == 0 || f.blockOf[i-1] != b {
			f.blockFirst[b] = i
		}
		f.blockLast[b] = i
	}
	ne := max(1, min(ends, len(rows)))
	f.endFirst = make([]int, ne)
	f.endLast = make([]int, ne)
	for e := range ne {
		f.endFirst[e] = e * len(rows) / ne
		f.endLast[e] = (e+1)*len(rows)/ne - 1
	}
	p := f.p
	// Segment boundaries: every slot a link window starts or ends at.
	wStarts, wEnds := f.windowPoints()
	at := map[int]bool{-1: true, m.n: true}
	for _, a := range wStarts {
		at[a] = true
	}
	for _, c := range wEnds {
		at[c] = true
	}
	for _, r := range rows {
		at[r] = true
	}
	f.segAt = sortedKeys(at)
	for j := 0; j+1 < len(f.segAt); j++ {
		f.segs = append(f.segs, p.col(fmt.Sprintf("added%d", f.segAt[j]), 1))
	}
	for ci := range classes {
		c := &classes[ci]
		for k, vr := range c.recompute {
			o := option{class: ci, lo: c.lo, hi: c.hi, keepTo: c.lo, save: vr.save, cost: vr.cost, toDev: vr.xfer, inFrom: c.lo, to: c.to}
			if vr.out <= 0 {
				// Its time is counted in the added-time column (clones row).
				o.col = p.col(fmt.Sprintf("r%d_%d", ci, k), 0)
				f.options = append(f.options, o)
				continue
			}
			// Its input's swap-out: one column per start block the input
			// is first off in (doc.go, recomputation chains).
			for b := f.blockOf[c.lo]; b <= f.blockOf[c.hi]; b++ {
				ob := o
				ob.keepTo = max(c.lo, f.blockFirst[b])
				ob.keep = vr.keep
				ob.toHost, ob.def, ob.deadline = vr.out, vr.outDef, min(f.blockLast[b], c.hi)
				ob.inFrom = ob.keepTo
				ob.col = p.col(fmt.Sprintf("r%d_%d_%d", ci, k, b), 0)
				f.options = append(f.options, ob)
			}
		}
		for b := f.blockOf[c.lo]; b <= f.blockOf[c.hi]; b++ {
			lo := max(c.lo, f.blockFirst[b])
			for e := range f.endFirst {
				if f.endLast[e] < lo || f.endFirst[e] > c.hi {
					continue
				}
				o := option{class: ci, lo: lo, hi: min(c.hi, f.endLast[e]), keepTo: lo, save: c.bytes, deadline: min(f.blockLast[b], c.hi),
					def: c.def, toDev: c.xfer, inFrom: max(lo, f.endFirst[e]), to: c.to}
				if c.first {
					o.toHost = c.xfer
				}
				o.col = p.col(fmt.Sprintf("s%d_%d_%d", ci, b, e), 0)
				f.options = append(f.options, o)
			}
		}
	}
	return f
}

// writeRows writes the clones row and the memory rows.
func (f *formulation) writeRows() {
	p, m, rows := f.p, f.m, f.rows
	// The added time is at least the clones' time.
	rec := row{name: "clones", clones: true, mem: -1}
	for _, c := range f.segs {
		rec.cols = append(rec.cols, c)
		rec.coefs = append(rec.coefs, -1)
	}
	for _, o := range f.options {
		if o.cost > 0 {
			rec.cols = append(rec.cols, o.col)
			rec.coefs = append(rec.coefs, o.cost/f.timeUnit)
		}
	}
	p.add(rec)
	// Memory rows: at each row, the evicted bytes cover the deficit.
	cover := make([][]int, len(rows))
	for k, o := range f.options {
		for r := o.lo; r <= o.hi; r++ {
			cover[r] = append(cover[r], k)
		}
	}
	for r, pos := range rows {
		rw := row{name: fmt.Sprintf("mem%d", pos), ge: true, rhs: float64(m.deficit[pos]) / f.byteUnit, mem: r}
		for _, k := range cover[r] {
			o := f.options[k]
			rw.cols = append(rw.cols, o.col)
			rw.coefs = append(rw.coefs, o.saveAt(r)/f.byteUnit)
		}
		p.add(rw)
	}
}

// boundRows adds, per class, that its options evict at most all of it.
// A class whose bytes cover the largest deficit of its rows needs none:
// an optimum never evicts more of it than that (evicting less frees the
// same rows and moves fewer bytes), so the row would not bind.
func (f *formulation) boundRows(all bool) {
	byClass := make([][]int, len(f.classes))
	for _, o := range f.options {
		byClass[o.class] = append(byClass[o.class], o.col)
	}
	for ci, c := range f.classes {
		var need int64
		for r := c.lo; r <= c.hi; r++ {
			need = max(need, f.m.deficit[f.rows[r]])
		}
		if !all && c.bytes >= float64(need) {
			continue
		}
		rw := row{name: fmt.Sprintf("cls%d", ci), rhs: 1, mem: -1}
		for _, col := range byClass[ci] {
			rw.cols = append(rw.cols, col)
			rw.coefs = append(rw.coefs, 1)
		}
		f.p.add(rw)
	}
}

// linkCandidates lists the link rows worth writing: device-to-host
// windows from the step's start or from points of a grid to each row;
// host-to-device windows from each row to the next row, to points of a
// grid past the rows, or to the step's end. Windows start and end on a
// grid (linkGrid points of the order) rather than at every class's
// producer and next use: any set of windows gives a bound, and a grid
// keeps the count independent of the number of tensors.
//
// Swap-out deadlines are rounded up to a start block's last row and
// swap-ins start after a start or end block's first row, so windows
// ending or starting at other rows hold no more swaps than one of these
// and are left out (with a block per row, that leaves none out).
func (f *formulation) linkCandidates() []linkRow {
	starts, ends := f.windowPoints()
	lasts := map[int]bool{}
	for _, d := range f.blockLast {
		lasts[d] = true
	}
	firsts := map[int]bool{}
	for _, a := range f.blockFirst {
		firsts[a] = true
	}
	for _, a := range f.endFirst {
		firsts[a] = true
	}
	var out []linkRow
	for _, a := range starts {
		for d := range f.rows {
			if a < f.rows[d] && lasts[d] {
				out = append(out, linkRow{toHost: true, a: a, c: d})
			}
		}
	}
	for a := range f.rows {
		if !firsts[a] {
			continue
		}
		for _, c := range ends {
			if c > f.rows[a] {
				out = append(out, linkRow{a: a, c: c})
			}
		}
	}
	return out
}

// windowPoints are where device-to-host windows start (-1: the step's
// start) and host-to-device windows end (n: the step's end), sorted.
func (f *formulation) windowPoints() (starts, ends []int) {
	n := f.m.n
	s := map[int]bool{-1: true}
	e := map[int]bool{n: true}
	for k := 1; k < linkGrid; k++ {
		s[k*n/linkGrid] = true
		e[k*n/linkGrid] = true
	}
	for _, r := range f.blockFirst {
		e[f.rows[r]] = true
	}
	return sortedKeys(s), sortedKeys(e)
}

// linkGrid is how many stretches of the order link windows start and
// end on.
const linkGrid = 16

func sortedKeys(s map[int]bool) []int {
	out := make([]int, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// link writes a candidate as a row: the copies that must fall in the
// window take no longer than the window, which a plan stretches by at
// most its added time (its stalls plus its clones' time).
func (f *formulation) link(l linkRow) row {
	m := f.m
	rw := row{mem: -1, link: &l, rhs: f.window(l)}
	if l.toHost {
		rw.name = fmt.Sprintf("d2h_%d_%d", l.a, f.rows[l.c])
	} else {
		rw.name = fmt.Sprintf("h2d_%d_%d", f.rows[l.a], l.c)
	}
	for _, o := range f.options {
		if l.toHost {
			if o.toHost > 0 && o.deadline <= l.c && o.def >= l.a {
				rw.cols = append(rw.cols, o.col)
				rw.coefs = append(rw.coefs, o.toHost/m.d2h/f.timeUnit)
			}
		} else if o.toDev > 0 && o.inFrom >= l.a && o.to <= l.c {
			rw.cols = append(rw.cols, o.col)
			rw.coefs = append(rw.coefs, o.toDev/m.h2d/f.timeUnit)
		}
	}
	if len(rw.cols) == 0 {
		return rw
	}
	// The window stretches by the time the plan adds in its slots.
	lo, hi := f.slots(l)
	f.stretch(&rw, lo, hi)
	return rw
}

// slots is the slot range [lo, hi) a link row's window spans: a
// device-to-host window from the end of op a to the start of row c's
// op spans slots a … row−1 (from the step's start for a = −1); a
// host-to-device window from the start of row a's op to the start of op
// c spans slots row … c−1.
func (f *formulation) slots(l linkRow) (int, int) {
	if l.toHost {
		return l.a, f.rows[l.c]
	}
	return f.rows[l.a], l.c
}

// segments lists the segments that overlap the slots [lo, hi): their
// added time is at least what the plan adds there (all of it when lo
// and hi are boundaries).
func (f *formulation) segments(lo, hi int) []int {
	var out []int
	for j := range f.segs {
		if f.segAt[j] < hi && f.segAt[j+1] > lo {
			out = append(out, j)
		}
	}
	return out
}

// stretch subtracts from rw the added time of the segments over slots
// [lo, hi): the window is that much longer in the plan.
func (f *formulation) stretch(rw *row, lo, hi int) {
	for _, j := range f.segments(lo, hi) {
		rw.cols = append(rw.cols, f.segs[j])
		rw.coefs = append(rw.coefs, -1)
	}
}

// window is the length of a link row's window in the unplanned step,
// in time units: from the end of op a (the step's start for a = -1) to
// the start of row c's op for a device-to-host row; from the start of
// row a's op to the start of op c for a host-to-device row.
func (f *formulation) window(l linkRow) float64 {
	m := f.m
	var w float64
	if l.toHost {
		w = m.tStart(f.rows[l.c]) - m.tEnd(l.a)
		if l.a < 0 {
			w = m.tStart(f.rows[l.c])
		}
	} else {
		w = m.tStart(l.c) - m.tStart(f.rows[l.a])
	}
	return math.Max(0, w) / f.timeUnit
}

// violation is how far x breaks row rw (≤ 0: met).
func violation(rw row, x []float64) float64 {
	s := 0.0
	for k, c := range rw.cols {
		s += rw.coefs[k] * x[c]
	}
	if rw.ge {
		return rw.rhs - s
	}
	return s - rw.rhs
}

// ownRows writes, for each swap column, the link rows of its own two
// windows: its swap-out, from its producer's end to its deadline row,
// and its swap-in, from its first row that may hold the restored copy
// to its next use, each stretched by at most the added time. They are
// link rows like the others, whose windows the grid does not have:
// with one column alone in them, x·(copy time − window) ≤ added.
// Only the rows a column could break are written. (The MILP takes them;
// in the LP, the Lagrangian would need one multiplier per column.)
func (f *formulation) ownRows() {
	m := f.m
	for _, o := range f.options {
		if o.toHost > 0 {
			w := math.Max(0, m.tStart(f.rows[o.deadline])-m.tEnd(o.def))
			if need := o.toHost / m.d2h; need > w {
				rw := row{name: fmt.Sprintf("own_out_%d", o.col), mem: -1, cols: []int{o.col}, coefs: []float64{(need - w) / f.timeUnit}}
				f.stretch(&rw, o.def, f.rows[o.deadline])
				f.p.add(rw)
			}
		}
		if o.toDev > 0 {
			w := math.Max(0, m.tStart(o.to)-m.tStart(f.rows[o.inFrom]))
			if need := o.toDev / m.h2d; need > w {
				rw := row{name: fmt.Sprintf("own_in_%d", o.col), mem: -1, cols: []int{o.col}, coefs: []float64{(need - w) / f.timeUnit}}
				f.stretch(&rw, f.rows[o.inFrom], o.to)
				f.p.add(rw)
			}
		}
	}
}

// Package bound computes a certified lower bound on the step time a
// memory plan adds, for the plan class "swap + recompute on a fixed
// order": plans that keep a training step's ops in one order and add
// swap-outs, swap-ins and recompute clones (what package policy's
// policies make, tsplit without splits; a split plan is outside the
// class). Lower solves it as a linear program in pure Go (gonum's
// optimize/convex/lp); MILP solves the same model with one binary
// decision per tensor and gap through CBC (Debian's coinor-cbc, which
// `make deps` installs), on graphs small enough for it.
//
// # What a plan of the class must do
//
// The step's ops run in order on the compute stream, each taking its
// time in the device profile: the base step T₀ is their sum, op i starts
// at t_i. A plan adds clones (each as long as the op it copies) and
// stalls, so in the planned step op i starts at t'_i ≥ t_i, and the plan
// adds ΔT ≥ (clones' time) + (stalls). The compute stream runs the
// step's ops in order, so the slot of op i — from t'_i to t'_{i+1}, less
// op i's time — is a stretch s_i ≥ 0 (s_{−1} = t'_0 before the first
// op), and ΔT = Σ_i s_i. A window from op a's end (or start) to op c's
// start is longer in the plan by exactly the s_i of the slots it spans,
// so windows over disjoint slots are stretched by disjoint parts of ΔT.
// Copies run on the two links, one at a time each, b bytes taking
// b / bandwidth.
//
// A tensor's memory is held from the start of the task that makes it to
// the end of the last task that touches it, and the runtime never holds
// more than the pool, at most the budget B, at once (the simulator's
// rule — an op after a free waits for the tasks that touched what was
// freed — is such a runtime). Take op r while it runs: the tensors M_r
// of the memory model are there unless the plan has them "off" then —
// no copy held. Hence, for every row r:
//
//	M_r − Σ_{v off at r} bytes(v) ≤ B.                              (memory)
//
// A value v off at r is not read or written by op r; its uses split the
// order into gaps, and r lies inside one, from p_k to p_{k+1}. The copy
// op p_{k+1} reads is made after t'_r (else it would be held at r):
// either by a clone of v's producer (a recompute) or a swap-in, which
// reads a host copy made by a swap-out of a copy of v released before
// t'_r — so that swap-out ended before t'_r and started after v's
// producer ended, and the swap-in runs between t'_r and t'_{p_{k+1}}.
// (If the first copy made after t'_r is itself swapped out and in
// again, follow the chain back to a clone or such a swap-out.) A swap-in
// allocates its copy when it starts, so the swap-in that restores v for
// p_{k+1} starts after the last row of the gap v is off at ends.
//
// A pinned value (shape data, ir.Value.Pinned) is never evicted: the
// rewrite refuses it, so the model has no candidate for it.
//
// # The model
//
// Columns, per gap (v, k) holding a row: "recompute" (cost: v's
// producer's time, shared among its outputs by bytes, since one clone
// restores them all), and "swap, first off at a row of start block s,
// last off at a row of end block e" (cost 0). A plan maps to them: per
// gap, the first and last rows v is off decide the swap column's
// blocks; the column claims v off at every row from the first row of s
// (and of the gap) to the last row of e (and of the gap) — a superset
// of the plan's rows — and the swap-out's deadline at s's last row and
// the swap-in's earliest start at e's first row, both looser than the
// plan's. Recompute if the restore found above is a clone (its column
// claims the whole gap: a clone placed earlier only holds more). The
// start blocks are the rows themselves unless Options.StartBlocks
// groups them; the end blocks are Options.EndBlocks groups of rows (5
// by default: one per row multiplies the columns by the rows). Before
// the end blocks, every swap column claimed v off to the gap's end
// while its swap-in could start at its first row: the restored copy's
// memory was free, and a MILP solution turned into a plan stalled on
// swap-ins queued right before their uses (see "What is left" below).
// Rows:
//
//   - memory, at a chosen set of over-budget positions: the columns
//     covering r free at least M_r − B. Any subset of positions gives a
//     bound; Lower picks the largest deficit in each of a few runs of the
//     over-budget positions.
//   - one column per gap at most (each gap's restore is its own op).
//   - clones: ΔT ≥ Σ cost · x.
//   - added time: ΔT = Σ_j σ_j, one column σ_j per segment of the
//     order between two slots a link window starts or ends at; σ_j is
//     the plan's Σ s_i over the segment's slots. A window is stretched
//     by the σ_j of the segments it spans (by every segment that
//     overlaps it, for a window whose ends are not boundaries: their
//     stretches are ≥ 0, so that is at least its own). Before, every
//     window could be stretched by all of ΔT, so two overloaded windows
//     in different parts of the step cost only the larger overload.
//   - device-to-host link, window from op a to row r: swap-outs of
//     tensors made at or after a with a deadline at or before r take at
//     most t_r − t_a + the window's σ. A value's swap-out may serve
//     several of its gaps, so one gap of each value is charged it (and
//     its other gaps' swaps move nothing here): the gap whose
//     over-budget positions are the most over the budget, summed — any
//     one gap is valid, since a plan restores each gap once. (It was
//     the value's first gap: a residual block's output, read twice in
//     the forward pass, then had its long backward gap swapped for
//     free, and the bound of full-size resnet50 at batch 64 was 0.)
//   - host-to-device link, window from row a to op c: swap-ins that
//     may start at or after a (a swap column's end block's first row, a
//     recompute column's first row) for uses at or before c take at most
//     t_c − t_a + the window's σ (one swap-in per gap).
//   - (MILP only) each swap column's own two windows, which the grid
//     does not have: x·(copy time − window) ≤ ΔT for its swap-out (its
//     producer's end to its deadline row) and its swap-in (its end
//     block's first row to its use), stretched by the σ of the segments
//     they overlap. In the LP they would each need a multiplier of their
//     own in the Lagrangian; it leaves them out.
//
// Minimizing ΔT over the model bounds every plan of the class: each
// plan maps to a feasible point whose ΔT is at most the plan's. Any
// subset of rows, any coarser set of blocks or windows, and any merge of
// columns that widens what they free and the windows they may use and
// lowers their cost per byte are relaxations, and still bounds.
//
// Recomputation chains. A clone reads its producer's inputs. Take an
// input x that is dead before the gap in the unplanned step: either the
// plan keeps x held at every row where v is off (x then occupies what
// it did not in the unplanned step), or x comes back after such a row by
// its own clone or a swap-in. Charging v a share α of x — v's part of
// the bytes all of x's readers produce, so that the shares of one x add
// up to 1 — gives three recompute columns for v's first gap: clone x
// (cost + α·time(x)), swap x in (α·bytes(x) on the host-to-device link)
// or keep x (frees bytes(v) − α·bytes(x)). chainVariants follows one
// such input, the one weighing most.
//
// A swap-in of x reads a host copy of x, so the plan also swapped x
// out. Where x has no gap of its own in the model (no column charges a
// swap of x), the swap-in column is charged α of that swap-out on the
// device-to-host link too, with x's first row off k as its parameter:
// one column per start block k may lie in. Follow the copy of x the
// clone reads back through its swap-ins and swap-outs: if a clone of
// x's producer made one of them, the plan maps to the clone column;
// else they start from the original x, which is gone at row k (x is
// off there and cannot be made again but by a clone), so its swap-out
// ran after x's producer ended and before row k, and the last swap-in
// starts after row k. At the gap's rows before k, x is held where it
// was dead in the unplanned step, so the column frees only max(0,
// bytes(v) − α·bytes(x)) there (the α of one x add up to at most 1 over
// the columns that hold it, so x's bytes are not claimed twice); from k
// on it frees bytes(v). The shares of one swap-out add up to at most 1,
// and no other column is charged it. Without this, a chain that swaps
// its input back in moved nothing off the device: on the full-size
// resnet50 at batch 289, every BatchNormalization + ReLU output was
// free to evict at its ReLU's time (3 µs per MB) as soon as the memory
// rows were priced above that.
//
// What the model leaves out, which only makes the bound lower: the
// memory a restored copy holds between its restore and its use within
// an end block; the inputs of a clone's own clone (chains deeper than
// one); stalls that a plan's order of frees causes; fragmentation of
// the static layout; the host memory limit.
//
// # What is left (measured, docs/planner.md §9)
//
// The MILP is not an achievable plan. Its solution on gpt at batch 256
// and 45 % of the peak (20 memory rows), turned into a plan — each
// chosen swap's SwapOut after its last use with the copy released at
// its first row off, its SwapIn after its last row off, clones before
// their use — and simulated, is over the budget at 89 of 499 positions
// (peak 58 MB against 36.8 MB) and adds 19 %, where the MILP claims
// 0.03–0.05 %; on vgg16 at batch 256 and 60 % (over all 187
// over-budget positions as rows, coarse start blocks) 206 positions are
// over (49 MB against 33 MB). What it relaxes that a plan cannot: memory
// is checked at 20 rows (positions between them, and the early forward
// pass before the first, are free); the link windows start on a
// 16-point grid, so an activation made late in a stretch is charged a
// window from the stretch's start (VGG's first convolutions make
// tensors faster than the link drains them); coarse blocks claim a
// swap off from a block's first row with its swap-out due at its last.
// Each is a valid relaxation, so Lower ≤ MILP ≤ the best plan still
// holds; closing them needs a row per position and a window per
// producer, which CBC does not solve in a minute on these graphs.
//
// Tried and left out (issue 11, the bound3 change): memory rows chosen
// by deficit over link capacity, or the first and last over-budget
// positions as rows, left every case measured unchanged; charging a
// value's swap-out to the gap whose rows reach a window's end last (a
// different gap per window, also valid) gave a lower LP than the gap
// most over the budget (the merged classes lose it) and a Lagrangian
// within 3 % of it, and both kinds of rows together no more; charging
// each value's swap-out once at its earliest swapped gap, exactly, in
// the Lagrangian raised resnet50 b64 at 3 GiB by 4 % only, and would
// make Lower a bound of a tighter model than the MILP's. Still free in
// the model: the swaps of a value's other gaps on the device-to-host
// link (charging every gap, which is not valid, would lift resnet50 b64
// at 4 GiB from 0 to 0.4 % only); at batch 16 on the CI graphs (links
// nearly idle) every bound stays 0 while tsplit's plans add 0.05–2.3 %,
// mostly swap-ins issued right before their use (resnet50-small at
// 45 %: 0.12 of its 0.14 ms), which the model lets start earlier since
// it checks memory at 20 rows only.
//
// Finer models do not close the gap (issue 11, bound4; measured in
// docs/planner.md §9): the Lagrangian of this model with a memory row
// at every over-budget position and every swap's first and last rows
// off exact (a gap's best pair is one pass with a running minimum: tens
// of ms per evaluation on the full-size resnet50) equals the coarse
// Lagrangian at the LP's duals, and projected supergradient steps from
// there found nothing higher; the LP with 2–3× the rows and an end
// block per row moves by −26 % to +38 %. The one optimum of the model
// measured over every position (the MILP, vgg16-small b256 at 60 %) is
// within 2× of Lower, where tsplit's plan is 135× above it (3.5–5× on
// the full-size ResNets, 60× to 2000× on BERT): what is left is what
// the model does not price (the static layout's fragmentation, swaps
// issued in order, deeper chains) or plans far from the class's best,
// not the relaxation's coarseness; on vgg16-small b256 60 % it is the
// plans: tsplit's stalls 6 of its 6.3 ms on swaps the model's solution
// replaces by cheap first-layer recomputes and by evicting the
// weight-gradient operands the forward pass makes; on the full-size
// resnet50 b64 at 3 GiB tsplit clones convolutions for 13 of its 15
// ms, where the bound's LP restores BatchNormalization and ReLU
// outputs from the kept conv outputs for 3.3 ms.
//
// # Solving
//
// gonum's simplex is dense and refactors the basis three times per
// pivot, so the LP Lower solves must stay small (about a hundred rows).
// It takes up to MemRows memory rows; groups gaps with the same rows,
// flags, next-use stretch and cost per byte (within a factor of two)
// into fluid classes, and merges the classes that need an upper-bound
// row (those whose bytes do not cover their rows' deficit: the others
// never bind) until at most Classes do; and adds the most violated link
// rows of a grid of windows, a few per round, up to LinkRows. Each
// row's right-hand side is loosened by about 1e-9 of its unit so that no
// vertex is degenerate (gonum's Dantzig rule can cycle on one), which
// only lowers the optimum. Merging loosens the LP; lagrange.go takes
// the LP's duals (recovered from gonum's optimal vertex) as Lagrange
// multipliers of the unmerged model — every gap on its own, every
// window of the grid — whose dual function is exact and cheap to
// evaluate, and is a bound by weak duality at any multipliers that keep
// every segment's added-time column bounded (ν plus the μ of the windows
// over the segment at most 1; the duals are scaled down together where
// rounding breaks that): at these it is at least the LP's optimum.
// The LP prices its memory rows at its merged classes' cheapest
// recompute per byte, which most gaps alone do not reach, so Lower then
// searches the line that scales the memory and link multipliers
// together by s and leaves the clones row ν = 1 − (the most link
// multiplier over one segment): L is concave and the line affine, so a
// golden-section search over s finds its best point (lagrange.go,
// along), and Lower reports the best value met (Result.LP keeps the
// LP's). On the full-size resnet50 at batch 289 this raised the bound
// at 45 % of the peak from 28.2 to 41.8 ms. Coordinate steps from
// there (each multiplier alone, ν following) found nothing higher. The MILP keeps every gap
// and every window of the grid, over the same rows, with binary
// columns: its optimum is at least its relaxation's, which is at least
// that Lagrangian bound, so Lower ≤ MILP ≤ the best plan of the class.
package bound

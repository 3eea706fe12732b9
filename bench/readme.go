package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/zoo"
)

// readme renders docs/benchmarks/README.md: how the numbers were made,
// the tables, tsplit's ratios over base next to the paper's, and what in
// tsplit's memory model makes them differ.
func readme(r *Results) string {
	var b strings.Builder
	p := r.Profile
	c := r.Config
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Benchmarks: model scale and throughput under a memory budget\n\n")
	w("This folder is generated; do not edit it by hand. It was made by\n\n    %s\n\n", c.Command)
	w("(`make benchmarks` runs that command). Same flags, same files: every number comes from the planner and its " +
		"simulator, never from a clock, and nothing ran on a GPU.\n\n")
	w("Each probe builds the zoo model at the probed batch and width with its weights as graph inputs (no weight data), "+
		"its training step (cross-entropy loss, backward, %s update), and runs tsplit's whole planning pipeline "+
		"(schedule, plan, layout) with one memory policy for the device below. A probe passes when the policy's plan and its "+
		"static layout fit the device budget and what it swaps out fits the host's pinned memory. Maxima are found by "+
		"exponential then binary search (batch ≤ %d, k ≤ %d), which assumes that a policy that fits a size fits every smaller one.\n\n",
		c.Optimizer, c.MaxBatch, c.widthLimit())

	w("## Device\n\n")
	w("%s", mdTable([]string{"Profile", "Memory", "Reserved", "Budget", "Host memory", "H2D / D2H", "FP32 peak × efficiency", "Memory bandwidth"},
		[][]string{{p.Name, units.Bytes(p.Memory), units.Bytes(p.Reserved), units.Bytes(p.Budget()),
			units.Bytes(p.HostMemory), fmt.Sprintf("%.0f / %.0f GB/s", p.H2D/1e9, p.D2H/1e9),
			fmt.Sprintf("%.1f TFLOPS × %.2f", p.FLOPS/1e12, p.Efficiency), fmt.Sprintf("%.0f GB/s", p.MemBW/1e9)}}))
	if c.Small {
		w("\nThe CI-sized variant: the %s profile with every memory size divided by %d, and the zoo's small configurations.\n", c.Device, SmallScale)
	}
	w("\n## Models\n\n")
	var rows [][]string
	for _, m := range r.Models {
		desc, n := modelConfig(r, m)
		rows = append(rows, []string{m.Display, "`" + m.Name + "`", m.Zoo, desc, fmt.Sprintf("%.1f M", float64(n)/1e6)})
	}
	w("%s", mdTable([]string{"Model", "Name", "Zoo family", "Configuration at k = 1", "Parameters at k = 1"}, rows))
	w("\nThe paper's Transformer (IWSLT 2016) is the original encoder–decoder; the zoo has no decoder, so `transformer` is " +
		"its closest stack, BERT-base (at full size 12 layers of the same self-attention + FFN block, hidden 768, 12 heads, " +
		"128 tokens per sample). Its parameter scale k multiplies the hidden size and the head count, so heads keep their " +
		"width; a CNN's multiplies every channel count.\n\n")
	w("Policies (every one registered when the benchmark ran, in table order): %s.\n\n", "`"+strings.Join(r.Policies, "`, `")+"`")
	if r.SubBatched != nil {
		w("Every policy in the tables below plans the same training step, the whole batch at once; `modnn` there is moDNN's "+
			"offloading, prefetching and convolution algorithms without its sub-batching. moDNN with sub-batching runs a "+
			"different step for models with BatchNormalization and has a table of its own: [%s](#modnn-with-sub-batching).\n\n",
			SubBatchedName)
	}
	sweep := BudgetSweepFile
	if c.Small {
		sweep += "_small"
	}
	w("The budget sweeps ([%s.md](%s.md), from `tsplitc bench --budget-sweep`, `make budget-sweep`; not remade by this "+
		"command) give every policy's predicted overhead against the budget at Table IV's base batch, with a **lower bound** "+
		"column: package bound's certified bound on the time any swap + recompute plan in the order of tsplit's plan adds "+
		"(docs/planner.md §9), and tsplit's gap (ΔT − LB) / LB to it, summarized per model.\n\n", sweep, sweep)

	w("## Largest sample scale — Table IV\n\n%s\n", scaleTable(r, r.SampleScale, true))
	w("### tsplit over base, next to the paper\n\n%s\n", paperTable(r, r.SampleScale, true))

	w("## Largest parameter scale at batch %d — Table V\n\n%s\n", c.ParamBatch, scaleTable(r, r.ParamScale, false))
	if !c.Offload && !c.Small {
		w("Host bound k: the largest k at which the parameters, gradients and %s state alone fit the %s of host memory. "+
			"Here every policy keeps the parameters on the device; `make benchmarks` then makes [%s.md](%s.md) alone again "+
			"with `--offload` (tsplit may keep them on the host, docs/offload.md), so that file's Table V differs from this one.\n\n",
			c.Optimizer, units.Bytes(r.Profile.HostMemory), ParamScaleFile, ParamScaleFile)
	}
	w("### tsplit over base, next to the paper\n\n%s\n", paperTable(r, r.ParamScale, false))

	if len(r.Diagnoses) > 0 {
		w("**Where another policy goes further than tsplit** (see [Differences from the paper](#differences-from-the-paper)):\n\n")
		for _, d := range r.Diagnoses {
			w("- %s, %s: %s reaches %d, tsplit %d; %s.\n", d.Table, d.Model, d.Policy, d.Value, d.Tsplit, d.swapOnlyNote())
		}
		w("\n")
	} else if r.column("tsplit") >= 0 {
		w("tsplit reaches at least every other policy's maximum in both tables, on every model.\n\n")
	}

	if r.SubBatched != nil {
		w("%s", subBatchedSection(r))
	}

	if a := r.NonMonotone(); len(a) > 0 {
		w("**Where planning is not monotone in the batch.** The searches assume that a policy that plans a batch plans every " +
			"smaller one. The throughput sweep contradicts that at these points, so for these policies a table gives the boundary " +
			"the search met, which is not the only one:\n\n")
		for _, x := range a {
			w("- %s.\n", x)
		}
		w("\n")
	}

	w("## Throughput against the batch — Fig. 12\n\n")
	w("Samples per second of each policy's planned step (batch / predicted step time) for batches from %d up to the largest "+
		"any policy plans, %d per doubling; the dashed line is the unconstrained step (every tensor resident, memory unlimited). "+
		"A missing point: the policy cannot plan that batch. Numbers, with the throughput relative to the unconstrained step, "+
		"are in [%s.md](%s.md) and [%s.csv](%s.csv).\n\n", c.SweepMin, c.SweepSteps, ThroughputFile, ThroughputFile, ThroughputFile, ThroughputFile)
	for _, m := range r.Models {
		w("![%s](%s%s.png)\n\n", m.Display, PlotPrefix, m.Name)
	}

	w("## Largest batch at x%% of the unconstrained throughput — Fig. 14a\n\n")
	w("The paper's \"x%% of Base throughput\": here a batch qualifies when the plan fits and its predicted throughput is at least "+
		"x%% of the unconstrained step's at the same batch. tsplit against tsplit-nosplit is the effect of tensor split.\n\n%s\n",
		mdTable(thresholdHeader(r), thresholdRows(r)))
	w("%s", behindAtThreshold(r))

	w("## Why the searches stop\n\n")
	w("[%s.md](%s.md) gives, for every search, the first failing probe and the planner's message. For tsplit:\n\n", LimitsFile, LimitsFile)
	rows = nil
	if ts := r.column("tsplit"); ts >= 0 {
		for i, m := range r.Models {
			s, pz := r.SampleScale[i][ts], r.ParamScale[i][ts]
			rows = append(rows, []string{m.Display, fmtScale(s), shortReason(s.Stop), fmtScale(pz), shortReason(pz.Stop)})
		}
		w("%s\n", mdTable([]string{"Model", "max batch", "stops because", "max k", "stops because"}, rows))
	}
	w("%s", differences(r))
	return b.String()
}

func thresholdRows(r *Results) [][]string {
	var rows [][]string
	for i, m := range r.Models {
		row := []string{m.Display}
		for t := range r.Config.Thresholds {
			for j := range r.Config.ThresholdPolicies {
				row = append(row, fmtScale(r.UnderX[t][i][j]))
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// differences explains what in tsplit's memory model makes its numbers
// differ from the paper's. The facts it states are computed from the
// results; the mechanisms are those of the planner and memory model as
// documented in packages passes and memory.
func differences(r *Results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	c := r.Config
	w("## Differences from the paper\n\n")
	if c.Small {
		w("This is the CI-sized variant (small models on a device scaled down by %d): its numbers check the harness and the "+
			"planner's relative standing, and are not comparable with the paper's.\n\n", SmallScale)
	}
	w("The paper measured real training on a TITAN RTX with PyTorch/TensorFlow-style runtimes; these tables are tsplit's " +
		"planner and simulator on a profile of that card. What the memory model counts, and what it does not, moves the " +
		"numbers:\n\n")

	// 1. base.
	lo, hi := spread(r, r.SampleScale, "base", func(m Model) int64 { return m.Paper.SampleScale["base"] })
	w("- **base is a liveness-planned static allocator, not a framework.** Every tensor is allocated just before its op "+
		"and freed after its last reader, in one pool with an offline layout; only the profile's reserved %s stands for the "+
		"CUDA context and libraries, and there is no caching-allocator slack, no cuDNN autotuning workspace and no framework "+
		"bookkeeping. The paper's Base (TensorFlow, PyTorch) keeps far more. ", units.Bytes(r.Profile.Reserved))
	if lo > 0 && !c.Small {
		w("Here base reaches %.1f–%.1f× the paper's Base batch. ", lo, hi)
	}
	w("The denominator of tsplit / base is therefore larger, and the ratios smaller, than the paper's even where tsplit's " +
		"own maximum is close to the paper's")
	if lo2, hi2 := spread(r, r.SampleScale, "tsplit", func(m Model) int64 { return m.Paper.SampleScale["tsplit"] }); lo2 > 0 && !c.Small {
		w(" (tsplit's maxima are %.2f–%.2f× the paper's TSPLIT)", lo2, hi2)
	}
	w(".\n")

	// 2. weights.
	if c.Offload {
		w("- **Parameters on the host (`--offload`).** tsplit and tsplit-nosplit may keep the parameters and optimizer " +
			"state in host memory, swapped in before each use, with the update on the host or the device (docs/offload.md), " +
			"where the step does not fit with them on the device; the other policies keep every parameter resident, so " +
			"their Table V stays bound by resident parameter bytes. tsplit's Table V is then bound by host memory: the " +
			"host bound column is the k at which the parameters, gradients and optimizer state alone fill it.\n")
	} else {
		w("- **Parameters stay on the device.** No policy here swaps, recomputes or splits a parameter: parameters (and any "+
			"optimizer state) are resident for the whole step, and the %s update replaces each one in place (the old value is dead "+
			"after its last read). Parameters grow as k², so Table V is bound by resident parameter bytes, plus the activations "+
			"and gradients that cannot be evicted at the bottleneck", c.Optimizer)
		if !c.Small {
			var parts []string
			if ts := r.column("tsplit"); ts >= 0 {
				for i, m := range r.Models {
					k := r.ParamScale[i][ts].Max + 1
					if r.ParamScale[i][ts].Capped {
						continue
					}
					if n, err := paramCount(r, m, k); err == nil {
						parts = append(parts, fmt.Sprintf("%s at k = %d has %s of parameters", m.Display, k, units.Bytes(4*n)))
					}
				}
			}
			if len(parts) > 0 {
				w(": %s, against a budget of %s", strings.Join(parts, "; "), units.Bytes(r.Profile.Budget()))
			}
		}
		w(". `--offload` lets tsplit keep them on the host.\n")
	}
	w("%s", paperScalesNote(r))

	// 3. optimizer state.
	w("- **Optimizer state.** The training step uses %s", c.Optimizer)
	if c.Optimizer == "sgd" {
		w(", which has no state; momentum would add one more parameter-sized tensor and Adam two, all resident, lowering Table V further")
	}
	w(" (`--optimizer`).\n")

	// 4. workspace.
	w("- **Workspace.** An op's scratch is what the reference kernels declare (for a convolution, its im2col buffer), " +
		"live during that op only and counted in the budget and the layout; the memory model and the simulator know no " +
		"per-op cuDNN algorithm (faster algorithms with bigger workspaces), and the layout's fragmentation is counted (a plan " +
		"whose static pool exceeds the budget fails).\n")

	// 5. host memory.
	host := 0
	for _, l := range limitRows(r) {
		if l.s.Stop != nil && shortReason(l.s.Stop) == "host memory" {
			host++
		}
	}
	w("- **Host memory bounds swapping.** What a plan swaps out must fit the profile's %s of pinned host memory at once; "+
		"%d of the searches here stopped on it (see [%s.md](%s.md)). The paper's server had 256 GB of RAM as well.\n",
		units.Bytes(r.Profile.HostMemory), host, LimitsFile, LimitsFile)

	// 6. split.
	if ts, ns := r.column("tsplit"), r.column("tsplit-nosplit"); ts >= 0 && ns >= 0 {
		var gains []string
		for i, m := range r.Models {
			if a, b := r.SampleScale[i][ts].Max, r.SampleScale[i][ns].Max; a > b {
				gains = append(gains, fmt.Sprintf("%s %d → %d", m.Display, b, a))
			}
		}
		w("- **Split.** tsplit splits an op only at a bottleneck where nothing cheaper frees enough, and only ops the " +
			"FT-compatibility analysis allows; ")
		if len(gains) > 0 {
			w("it raises the largest batch over tsplit-nosplit on %s.\n", strings.Join(gains, ", "))
		} else {
			w("here it never raises the largest batch over tsplit-nosplit.\n")
		}
	}

	// 7. tsplit beaten.
	if len(r.Diagnoses) > 0 {
		w("- **Where tsplit is beaten.** tsplit's planner (Alg. 2) is greedy: it walks the schedule and, at each position " +
			"over the budget, takes the candidate with the smallest ΔT/ΔM and never revisits a decision, so an early cheap choice " +
			"can leave a later bottleneck with too little to evict; and a plan whose peak fits can still fail its static layout " +
			"(fragmentation). At each place listed under the tables, why tsplit's own search stopped, and what tsplit restricted " +
			"to swapping (policy.Options.NoRecompute) does at the other policy's size:\n")
		ts := r.column("tsplit")
		for _, d := range r.Diagnoses {
			i := slices.IndexFunc(r.Models, func(m Model) bool { return m.Name == d.Model })
			t := r.SampleScale
			if d.Table == ParamScaleTable {
				t = r.ParamScale
			}
			w("  - %s, %s: %s reaches %d; tsplit stops at %d (%s); %s.\n", d.Table, d.Model, d.Policy, d.Value, d.Tsplit,
				shortReason(t[i][ts].Stop), d.swapOnlyNote())
		}
	}

	// 8. throughput.
	w("- **Throughput is simulated.** Step times come from the profile's roofline cost model and a three-stream " +
		"simulation of compute, D2H and H2D (swaps overlap compute where the plan lets them); Fig. 12's y axis here is " +
		"samples/s next to the unconstrained step, where the paper plots speedup over vDNN from measured runs.\n")
	w("- **Models.** `transformer` is BERT-base (encoder only), not the paper's encoder–decoder on IWSLT; `inception` is " +
		"the zoo's Inception-V4 (299×299 at full size).\n")
	return b.String()
}

// spread is the range over models with paper numbers of our maximum
// for a policy over the paper's.
func spread(r *Results, t [][]Search, policy string, paper func(Model) int64) (lo, hi float64) {
	j := r.column(policy)
	if j < 0 {
		return 0, 0
	}
	for i, m := range r.Models {
		if m.Paper == nil || paper(m) <= 0 || t[i][j].Max <= 0 {
			continue
		}
		x := float64(t[i][j].Max) / float64(paper(m))
		if lo == 0 || x < lo {
			lo = x
		}
		hi = max(hi, x)
	}
	return lo, hi
}

// paperScalesNote is the arithmetic of why the paper's own Table V
// scales are out of reach at this project's parameter counts: at the
// paper's TSPLIT k, a model's parameters, gradients and optimizer state
// alone exceed the host memory, let alone the device's, on every model
// but those it names.
func paperScalesNote(r *Results) string {
	if r.Config.Small {
		return ""
	}
	var over, under []string
	for _, m := range r.Models {
		if m.Paper == nil || m.Paper.ParamScale["tsplit"] <= 0 {
			continue
		}
		k := m.Paper.ParamScale["tsplit"]
		b, err := stateBytes(r, m, k)
		if err != nil {
			continue
		}
		n := b / (4 * stateCopies(r.Config.Optimizer))
		part := fmt.Sprintf("%s at k = %d: %.1f B parameters, %s", m.Display, k, float64(n)/1e9, units.Bytes(b))
		if b > r.Profile.HostMemory {
			over = append(over, part)
		} else {
			under = append(under, part)
		}
	}
	if len(over) == 0 {
		return ""
	}
	s := fmt.Sprintf("- **The paper's Table V scales exceed the host memory here.** With this project's models (channels or "+
		"hidden size × k, so every weight matrix grows as k²), the paper's TSPLIT scales need, for the parameters, "+
		"gradients and %s state alone (%d fp32 tensors per parameter): %s — more than the %s of host memory of this "+
		"profile (the paper's server had 256 GB), let alone the %s of the card, so no placement of that state, on the "+
		"device or on the host, plans them: the paper's k must scale its models differently from these.",
		r.Config.Optimizer, stateCopies(r.Config.Optimizer), strings.Join(over, "; "), units.Bytes(r.Profile.HostMemory),
		units.Bytes(r.Profile.Memory))
	if len(under) > 0 {
		s += fmt.Sprintf(" Within it: %s.", strings.Join(under, "; "))
	}
	return s + " tsplit's maxima are measured against the host bound instead.\n"
}

// paramCount counts a benchmark model's parameters at scale k.
func paramCount(r *Results, m Model, k int64) (int64, error) {
	zc := zoo.Config{Width: float64(k)}
	if r.Config.Small {
		zc = zoo.SmallConfig(m.Zoo)
		zc.Width *= float64(k)
	}
	return zoo.ParamCount(m.Zoo, zc)
}

// paperTable sets tsplit's and base's maxima of one table (sample or
// parameter scale) next to the paper's.
func paperTable(r *Results, t [][]Search, sample bool) string {
	var rows [][]string
	for i, m := range r.Models {
		bs, _ := scaleOf(r, t, i, "base")
		ts, _ := scaleOf(r, t, i, "tsplit")
		row := []string{m.Display, fmtScale(bs), fmtScale(ts), tsplitOverBase(r, t, i)}
		if m.Paper != nil {
			paper := m.Paper.ParamScale
			if sample {
				paper = m.Paper.SampleScale
			}
			pb, pt := paper["base"], paper["tsplit"]
			row = append(row, fmt.Sprint(pb), fmt.Sprint(pt), paperRatio(m, sample), ratio(bs.Max, pb), ratio(ts.Max, pt))
		} else {
			row = append(row, "—", "—", "—", "—", "—")
		}
		rows = append(rows, row)
	}
	return mdTable([]string{"Model", "base", "tsplit", "tsplit / base", "paper Base", "paper TSPLIT", "paper TSPLIT / Base",
		"base / paper Base", "tsplit / paper TSPLIT"}, rows)
}

// subBatchedSection is the README's account of modnn with sub-batching:
// its table, where it goes further than tsplit and why, and what stops
// it. The facts are computed from the results.
func subBatchedSection(r *Results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	c := r.Config
	w("## modnn with sub-batching\n\n")
	w("moDNN (DATE'18, §IV-A) trains a batch as sub-batches of Eq. 3's size with the gradients accumulated, so only one "+
		"sub-batch's feature maps have to fit. Here that is `policy.PlanSubBatched`: Eq. 1–3 on the plain step (each tensor split "+
		"exactly into what grows with the sub-batch, from the step built at the batch + 1), then the step rebuilt by "+
		"`compiler.AccumulateSubBatches` as k copies of the step at the sub-batch, each reading its rows of the inputs and "+
		"labels, the gradients summed and the one optimizer update applied at the end, and planned with modnn's Alg. 1. "+
		"Where Alg. 1 cannot realize Eq. 3's sub-batch (it cannot offload what the previous task read, nor what was not used "+
		"since it was made, which Eq. 1 does not count), the whole batch is tried, then the sub-batch halved at most %d times "+
		"— additions to the paper, so that sub-batching is never worse than modnn without it.\n\n",
		policy.SubBatchHalvings)
	w("It is not the step the other policies plan when the model has BatchNormalization: each sub-batch is normalized with "+
		"its own mean and variance and updates the running statistics in turn (docs/training.md). Without BatchNormalization "+
		"it is the same step up to float32 rounding (compiler's TestAccumulatedEqualsFullBatch: loss, gradients and updated "+
		"weights within 10⁻⁵). So it is kept out of the tables above; full numbers are in [%s.md](%s.md) and [%s.csv](%s.csv).\n\n",
		SubBatchedFile, SubBatchedFile, SubBatchedFile, SubBatchedFile)
	w("%s\n", subBatchedTable(r))

	ts := r.column("tsplit")
	var beats, beatsBN []string
	for i, m := range r.Models {
		if ts < 0 || r.SubBatched[i].Max <= r.SampleScale[i][ts].Max {
			continue
		}
		x := fmt.Sprintf("%s (%s against %s)", m.Display, fmtSubBatched(r.SubBatched[i]), fmtScale(r.SampleScale[i][ts]))
		if hasBatchNorm(r, m) {
			beatsBN = append(beatsBN, x)
		} else {
			beats = append(beats, x)
		}
	}
	switch {
	case len(beats)+len(beatsBN) == 0 && ts >= 0:
		w("modnn with sub-batching does not plan a larger batch than tsplit on any model here.\n\n")
	case ts >= 0:
		w("**modnn with sub-batching plans larger batches than tsplit** on ")
		if len(beats) > 0 {
			w("%s, models without BatchNormalization, where it trains the same step", strings.Join(beats, ", "))
			if len(beatsBN) > 0 {
				w("; and on ")
			}
		}
		if len(beatsBN) > 0 {
			w("%s, where with statistics per sub-batch it trains a different one", strings.Join(beatsBN, ", "))
		}
		w(". Why: tsplit plans the whole batch's step, in which every feature map of the whole batch exists and must be " +
			"resident, swapped or recomputed, so its largest batch is bounded by what the budget and the host can hold of them; " +
			"a sub-batched step only ever holds one sub-batch's feature maps, and grows with the batch only by the batch's " +
			"inputs, which stay on the device as graph inputs, and the time of k sub-batches. tsplit does not sub-batch; " +
			"nothing in the comparison above says tsplit's splitting beats gradient accumulation at scale — only that, for the " +
			"same step, it goes further than the other planners.\n\n")
	}
	reasons := map[string][]string{}
	var order []string
	for i, m := range r.Models {
		why := shortReason(r.SubBatched[i].Stop)
		if reasons[why] == nil {
			order = append(order, why)
		}
		reasons[why] = append(reasons[why], m.Display)
	}
	w("What stops it: ")
	var parts []string
	for _, why := range order {
		parts = append(parts, fmt.Sprintf("%s — %s", strings.Join(reasons[why], ", "), why))
	}
	w("%s. The unrolled-step cap is the benchmark's (at most %d sub-batches and %d ops; planning time grows faster than "+
		"the step), not memory: moDNN's runtime loops over sub-batches where this step is unrolled. The batch's inputs are "+
		"graph inputs, resident on the device from the start, so the largest batch also stops where one sub-batch's step "+
		"plus the whole batch's inputs no longer fit. The throughput is that of k small sub-batches, the samples/s column, "+
		"against the plain step's unconstrained throughput at the same batch.\n\n", strings.Join(parts, "; "), c.MaxSubBatches, c.MaxSubBatchOps)
	return b.String()
}

// behindAtThreshold lists where another policy plans a larger batch than
// tsplit at no less than x% of the unconstrained throughput. Fig. 14a is
// where the paper shows TSPLIT ahead; here it is not everywhere, and the
// README says so.
func behindAtThreshold(r *Results) string {
	ts := slices.Index(r.Config.ThresholdPolicies, "tsplit")
	if ts < 0 {
		return ""
	}
	var items []string
	for t, x := range r.Config.Thresholds {
		for i, m := range r.Models {
			own := r.UnderX[t][i][ts].Max
			for j, pol := range r.Config.ThresholdPolicies {
				if other := r.UnderX[t][i][j].Max; j != ts && other > own {
					items = append(items, fmt.Sprintf("%s at %d%%: %s %d, tsplit %d", m.Display, x, pol, other, own))
				}
			}
		}
	}
	if len(items) == 0 {
		return "tsplit plans the largest batch of every policy at every threshold.\n\n"
	}
	return "**Where tsplit is behind at a throughput threshold** (" + strings.Join(items, "; ") + "). " +
		"Near these batches tsplit's plans swap more than they recompute, and the swaps do not hide behind " +
		"compute as Alg. 2's Oc estimate predicts; policies that recompute by layer type or by segment " +
		"(checkpoint, capuchin) lose less time there. docs/planner.md §8 has a measured case.\n\n"
}

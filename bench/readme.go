package bench

import (
	"fmt"
	"strings"

	"github.com/tsplit/tsplit/compiler"
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
		[][]string{{p.Name, compiler.FormatBytes(p.Memory), compiler.FormatBytes(p.Reserved), compiler.FormatBytes(p.Budget()),
			compiler.FormatBytes(p.HostMemory), fmt.Sprintf("%.0f / %.0f GB/s", p.H2D/1e9, p.D2H/1e9),
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
		"its closest stack, BERT-base: 12 layers of the same self-attention + FFN block, hidden 768, 128 tokens per sample. " +
		"Its parameter scale multiplies the hidden size (and the head count, so heads stay 64 wide).\n\n")
	w("Policies (every one registered when the benchmark ran, in table order): %s.\n\n", "`"+strings.Join(r.Policies, "`, `")+"`")

	w("## Largest sample scale — Table IV\n\n%s\n", scaleTable(r, r.SampleScale, true))
	w("### tsplit over base, next to the paper\n\n")
	rows = nil
	for i, m := range r.Models {
		row := []string{m.Display}
		bs, _ := scaleOf(r, r.SampleScale, i, "base")
		ts, _ := scaleOf(r, r.SampleScale, i, "tsplit")
		row = append(row, fmtScale(bs), fmtScale(ts), tsplitOverBase(r, r.SampleScale, i))
		if m.Paper != nil {
			row = append(row, fmt.Sprint(m.Paper.SampleScale["base"]), fmt.Sprint(m.Paper.SampleScale["tsplit"]), paperRatio(m, true))
		} else {
			row = append(row, "—", "—", "—")
		}
		rows = append(rows, row)
	}
	w("%s\n", mdTable([]string{"Model", "base", "tsplit", "tsplit / base", "paper base", "paper tsplit", "paper tsplit / base"}, rows))

	w("## Largest parameter scale at batch %d — Table V\n\n%s\n", c.ParamBatch, scaleTable(r, r.ParamScale, false))
	rows = nil
	for i, m := range r.Models {
		row := []string{m.Display}
		bs, _ := scaleOf(r, r.ParamScale, i, "base")
		ts, _ := scaleOf(r, r.ParamScale, i, "tsplit")
		row = append(row, fmtScale(bs), fmtScale(ts), tsplitOverBase(r, r.ParamScale, i))
		if m.Paper != nil {
			row = append(row, fmt.Sprint(m.Paper.ParamScale["base"]), fmt.Sprint(m.Paper.ParamScale["tsplit"]), paperRatio(m, false))
		} else {
			row = append(row, "—", "—", "—")
		}
		rows = append(rows, row)
	}
	w("%s\n", mdTable([]string{"Model", "base", "tsplit", "tsplit / base", "paper base", "paper tsplit", "paper tsplit / base"}, rows))

	if v := r.Violations(); len(v) > 0 {
		w("**Where another policy goes further than tsplit:**\n\n")
		for _, x := range v {
			w("- %s, %s: %s reaches %d, tsplit %d.\n", x.Table, x.Model, x.Policy, x.Value, x.Tsplit)
		}
		w("\n")
	} else {
		w("tsplit reaches at least every other policy's maximum in both tables, on every model.\n\n")
	}

	if a := r.NonMonotone(); len(a) > 0 {
		w("**Where fitting is not monotone in the batch.** The searches assume that a policy that plans a batch plans every " +
			"smaller one. The sweep found these batches planned above the searched maximum, so for these policies the tables give " +
			"the first boundary the search met, not necessarily the largest batch that plans:\n\n")
		for _, x := range a {
			w("- %s, %s: batch %d plans, searched maximum %d.\n", x.Model, x.Policy, x.Batch, x.Max)
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
	w("%s", differences)
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
// differ from the paper's.
const differences = `## Differences from the paper

To be written after the first full run.
`

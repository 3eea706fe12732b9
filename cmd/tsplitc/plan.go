package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/profile"
)

// planFlags are the flags of `tsplitc plan` (and of the root's shortcut).
type planFlags struct {
	*importFlags
	*trainFlags
	*outFlags
	out     string
	dryRun  bool   // --dry-run: plan and summarize, write nothing
	memory  string // the budget
	policy  string
	order   string
	update  string
	offload bool
	params  []string // --policy-param NAME=VALUE[,NAME=VALUE…]
	device  string
	check   bool
	debug   []string
	times   bool   // -d time
	report  string // --report FILE: .html, .svg or .json
	bound   bool   // --bound (implied by --json)
	target  string // --target onnx|native
	// noFused: --no-fused-tiles (tsplit plans without fused-tiled
	// segments, docs/sft.md)
	noFused bool
}

func (f *planFlags) register(fl *pflag.FlagSet) {
	fl.StringVarP(&f.out, "output", "o", "", "write the planned training step here")
	fl.BoolVar(&f.dryRun, "dry-run", false, "plan and print the summary without -o: nothing is written (a step too large to write, such as a 13 B-parameter model's Adam state, which is made only when written; docs/offload.md)")
	fl.StringVar(&f.memory, "memory", "", "device memory budget, e.g. 11GiB (default: the device's memory less what it reserves)")
	fl.StringVar(&f.device, "device", "titan-rtx", "device profile ("+strings.Join(profile.Names(), ", ")+") or a JSON profile file (tsplitc profile lists them)")
	fl.BoolVar(&f.check, "check", false, "run ir.Verify after every pass")
	fl.StringVar(&f.policy, "policy", "tsplit", "memory policy: "+strings.Join(policy.Names(), ", "))
	fl.BoolVar(&f.offload, "offload", false, "tsplit: keep the parameters and optimizer state on the host where they cannot stay on the device (off by default: the host's cost model is not measured yet; docs/offload.md)")
	fl.StringVar(&f.update, "update", "auto", "where a plan that keeps the parameters and optimizer state on the host runs the optimizer update: auto (the faster simulated step), device, host (docs/offload.md)")
	fl.StringVar(&f.order, "order", "auto", "op order to plan under: auto (tsplit plans under every order and keeps the fastest plan; other policies use their own), dfs (TSPLIT Alg. 1), alap (depth-first forward, backward as late as possible), as-built, grad-first (alap with each weight gradient before the data gradient), shrink-early (grad-first with each backward op that reads more forward memory than it makes, such as a ReLU mask, run as soon as it frees it)")
	fl.StringArrayVar(&f.params, "policy-param", nil, "a parameter of the policy, NAME=VALUE (repeatable, or comma-separated: lb=2,ub=8); see the list above")
	fl.StringArrayVarP(&f.debug, "debug", "d", nil, "debug flags: dump-after=PASS (IR text to stderr after a pass: plan, plan/round-2/insert, a pattern, or insert for every round), time (every pass's time to stderr)")
	fl.StringVar(&f.report, "report", "", "also write a plan report: FILE.html (memory timeline, decisions, overhead), FILE.svg (timeline) or FILE.json (data)")
	fl.StringVar(&f.target, "target", "onnx", "what -o holds: onnx (the planned model) or native (a native execution plan, .tsplan: pool, offsets and per-stream commands, which run executes; docs/native-plan.md)")
	fl.BoolVar(&f.noFused, "no-fused-tiles", false, "tsplit: do not plan fused-tiled segments (huge images: the tiles of a run of convolutions and pools never build the whole activations; docs/sft.md)")
	fl.BoolVar(&f.bound, "bound", false, "also compute a lower bound on the step time of any swap + recompute plan in the plan's order, and the plan's gap to it (--json always does)")
}

func newPlanCmd() *cobra.Command {
	f := planFlags{importFlags: &importFlags{}, trainFlags: &trainFlags{}, outFlags: &outFlags{}}
	cmd := &cobra.Command{
		Use:   "plan MODEL -o PLANNED.onnx [--batch N] [--memory SIZE] [--device NAME] [--policy P]",
		Short: "plan a model's training step into a memory budget and write the planned ONNX model",
		Long: "plan reads MODEL (a forward model, whose training step it builds, or a training step), plans the step into\n" +
			"the budget with the memory policy and writes the planned model, which `tsplitc run` executes.\n" +
			"`tsplitc MODEL -o PLANNED.onnx …` is the same command.\n\n" + policyHelp(),
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return planModel(cmd, args[0], &f) },
	}
	fl := cmd.Flags()
	f.importFlags.register(fl)
	f.trainFlags.register(fl)
	f.outFlags.register(fl)
	f.register(fl)
	return cmd
}

// options checks the command line and returns the library's options.
func (f *planFlags) options() (tsplit.Options, error) {
	switch {
	case f.out == "" && !f.dryRun:
		return tsplit.Options{}, usageError{fmt.Errorf("planning needs -o FILE or --dry-run (or use --run, inspect, train)")}
	case f.out != "" && f.dryRun:
		return tsplit.Options{}, usageError{fmt.Errorf("--dry-run writes nothing: it takes no -o")}
	}

	opts, err := f.importFlags.options()
	if err != nil {
		return opts, err
	}
	if f.memory != "" {
		if opts.Budget, err = parseBytes("--memory", f.memory); err != nil {
			return opts, err
		}
	}
	// A budget that does not fit costs a few more plans, and the error
	// then names one that does.
	opts.FindFeasible = true
	if opts.PolicyParams, err = policy.ParseParams(f.params); err != nil {
		return opts, usageError{fmt.Errorf("--policy-param: %w", err)}
	}
	for _, d := range f.debug {
		k, v, _ := strings.Cut(d, "=")
		switch k {
		case "dump-after":
			opts.DumpAfter, opts.DumpTo = v, os.Stderr
		case "time":
			f.times = true
		default:
			return opts, usageError{fmt.Errorf("-d %q: known debug flags: dump-after=PASS (a pass name such as plan/round-1/insert, a pattern, or a last element such as insert), time", d)}
		}
	}
	opts.Train, opts.Device, opts.Policy, opts.Check, opts.Output = f.trainFlags.opts, f.device, f.policy, f.check, f.out
	opts.Order = f.order
	opts.NoFusedTiles = f.noFused
	opts.Update, opts.Offload = f.update, f.offload
	opts.Bound = f.bound || f.json
	switch f.target {
	case tsplit.TargetONNX, tsplit.TargetNative:
		opts.Target = f.target
	default:
		return opts, usageError{fmt.Errorf("--target %q: targets are onnx and native", f.target)}
	}
	return opts, nil
}

// planJSON is `plan --json`'s object: the library's result, the report
// written and the whole command's time.
type planJSON struct {
	*tsplit.Result
	Report string  `json:"report,omitempty"`
	TotalS float64 `json:"total_s"`
}

// describeBound says what the lower bound is and how far the plan is
// from it.
func describeBound(res *tsplit.Result) string {
	b := res.Bound
	if b.Error != "" {
		return "not computed: " + b.Error
	}
	if b.Infeasible {
		return "no swap + recompute plan fits this budget (this plan splits tensors: outside that class)"
	}
	order := "the plan's order"
	if b.Order != "plan" {
		order = "the " + b.Order + " order"
	}
	s := fmt.Sprintf("%.3f ms step (+%.1f%%) for any swap + recompute plan in %s", *res.LowerBoundStep*1e3, 100*b.AddedS/res.BaseStep, order)
	switch {
	case b.OutsideClass:
		s += "; this plan is below it: it splits tensors, outside that class"
	case b.Gap != nil:
		s += fmt.Sprintf("; the plan's gap to it %.0f%%", 100**b.Gap)
	}
	return s
}

// planModel plans a model into the budget, writes the planned model and
// prints what the plan does.
func planModel(cmd *cobra.Command, path string, f *planFlags) error {
	start := time.Now()
	opts, err := f.options()
	if err != nil {
		return err
	}
	if err := checkReportPath(f.report, path); err != nil {
		return err
	}
	var done func()
	opts.Progress, done = progressBar(f.quiet)
	res, err := tsplit.PlanFile(cmd.Context(), path, opts)
	done()
	if f.times && res != nil {
		if err := passes.WriteTimings(cmd.ErrOrStderr(), res.Passes); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if f.report != "" {
		if err := writeReport(cmd.Context(), f.report, res.Report, backend.InputFiles(res.Model)); err != nil {
			return err
		}
	}
	w := cmd.OutOrStdout()
	total := time.Since(start)
	if f.json {
		return writeJSON(w, planJSON{Result: res, Report: f.report, TotalS: total.Seconds()})
	}
	fmt.Fprintf(w, "model         %s (%s, %d ops after planning)\n", path, describeDims(res.Dims), res.Ops)
	fmt.Fprintf(w, "device        %s, policy %s%s\n", res.Device, res.Policy, describeParams(res.PolicyParams))
	fmt.Fprintf(w, "base peak     %s\n", bytesStr(res.BasePeak))
	fmt.Fprintf(w, "budget        %s\n", bytesStr(res.Budget))
	fmt.Fprintf(w, "planned peak  %s (pool %s, host %s)\n", bytesStr(res.Peak), bytesStr(res.Pool), bytesStr(res.HostPeak))
	fmt.Fprintf(w, "tensors       %d swapped, %d recomputed, %d split\n", res.Swapped, res.Recomputed, res.Split)
	if res.Offloaded > 0 {
		where := "the device"
		if res.HostUpdate {
			where = "the host"
		}
		fmt.Fprintf(w, "state         %d weights on the host (parameters, optimizer state), swapped in before each use; update on %s\n", res.Offloaded, where)
	}
	if res.Kept != "" {
		fmt.Fprintf(w, "kept          %s\n", res.Kept)
	}
	if res.FusedTiles != "" {
		fmt.Fprintf(w, "fused tiles   %s\n", res.FusedTiles)
	}
	if sb := res.SubBatching; sb != nil && len(sb.Sizes) > 1 {
		fmt.Fprintf(w, "sub-batches   %d of at most %d samples (Eq. 3: %d), gradients accumulated; unplanned: peak %s, %.3f ms\n",
			len(sb.Sizes), sb.Sizes[0], sb.Eq3, bytesStr(sb.SubBatchedPeak), sb.SubBatchedStep*1e3)
	}
	// The base peak and the unconstrained time are the whole batch's
	// unplanned step's, also for a sub-batched plan.
	fmt.Fprintf(w, "step time     %.3f ms predicted, %.3f ms unconstrained (%+.1f%%)\n", res.Step*1e3, res.BaseStep*1e3, res.Overhead())
	if b := res.Bound; b != nil {
		fmt.Fprintf(w, "lower bound   %s\n", describeBound(res))
	}
	planning := time.Duration(res.PlanningSeconds * float64(time.Second))
	fmt.Fprintf(w, "planning time %v (total %v)\n", planning.Round(time.Microsecond), total.Round(time.Millisecond))
	switch {
	case res.Output == "":
		fmt.Fprintf(w, "wrote         nothing (--dry-run)\n")
	case res.Target == tsplit.TargetNative:
		fmt.Fprintf(w, "wrote         %s (native plan)\n", res.Output)
	default:
		fmt.Fprintf(w, "wrote         %s\n", res.Output)
	}
	if f.report != "" {
		fmt.Fprintf(w, "report        %s\n", f.report)
	}
	return nil
}

// describeParams is " (lb=2, ub=8)" for the summary line, names sorted;
// "" without parameters.
func describeParams(params map[string]string) string {
	if len(params) == 0 {
		return ""
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		kv = append(kv, k+"="+params[k])
	}
	return " (" + strings.Join(kv, ", ") + ")"
}

package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// compileFlags are the flags of `tsplitc MODEL -o planned.onnx`.
type compileFlags struct {
	out    string
	policy string
	params []string // --policy-param NAME=VALUE[,NAME=VALUE…]
	device string
	check  bool
	debug  []string
	report string // --report FILE: .html, .svg or .json
}

// compileModel plans a model into the budget and writes planned.onnx.
func compileModel(w io.Writer, path string, f *compileFlags, rf *runFlags) error {
	if f.out == "" {
		return usageError{fmt.Errorf("compiling needs -o FILE (or use --run, inspect, train)")}
	}
	if err := checkReportPath(f.report); err != nil {
		return err
	}
	// The policy and its parameters are checked before the model is
	// read, so a mistyped parameter fails at once and writes nothing.
	if _, err := passes.LookupPolicy(f.policy); err != nil {
		return usageError{err}
	}
	params, err := passes.ParsePolicyParams(f.params)
	if err != nil {
		return usageError{fmt.Errorf("--policy-param: %w", err)}
	}
	if err := passes.CheckPolicyParams(f.policy, params); err != nil {
		return usageError{fmt.Errorf("--policy-param: %w", err)}
	}
	prof, err := profile.Lookup(f.device)
	if err != nil {
		return usageError{err}
	}
	budget := prof.Budget()
	if rf.memory != "" {
		if budget, err = parseBytes(rf.memory); err != nil {
			return err
		}
	}
	opts, err := rf.options()
	if err != nil {
		return err
	}
	start := time.Now()
	m, err := compiler.Import(path, opts)
	if err != nil {
		return err
	}
	ti, err := compiler.ReadTrainingInfo(m)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if ti == nil {
		if _, err := compiler.BuildTrainingStep(m, rf.tf.opts); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	dumpAfter := ""
	for _, d := range f.debug {
		k, v, _ := strings.Cut(d, "=")
		if k != "dump-after" {
			return usageError{fmt.Errorf("-d %q: known debug flags: dump-after=PASS", d)}
		}
		dumpAfter = v
	}
	setup := func(s *passes.State) {
		s.Check = f.check
		if dumpAfter != "" {
			s.DumpAfter, s.DumpTo = dumpAfter, os.Stderr
		}
	}
	popts := &passes.Options{Budget: budget, Profile: prof, Policy: f.policy, PolicyParams: params}
	planStart := time.Now()
	var s *passes.State
	var sub *passes.ModnnResult
	if f.policy == "modnn" && ti == nil {
		// moDNN's sub-batching rebuilds the step from the model at the
		// sub-batch (passes.PlanModnn).
		forward := func(batch int64) (*ir.Model, error) {
			o := opts
			o.Batch = batch
			return compiler.Import(path, o)
		}
		s, sub, err = passes.PlanModnn(m, passes.ModnnBuild{Forward: forward, Train: rf.tf.opts, Setup: setup}, popts)
		if s != nil {
			m = s.Model
		}
	} else {
		s = passes.NewState(m, popts)
		setup(s)
		err = s.Run(passes.Pipeline...)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	planTime := time.Since(planStart)
	if err := backend.WriteFile(m, f.out); err != nil {
		return err
	}
	r := s.Report
	if f.report != "" {
		if err := writeReport(f.report, r); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "model         %s (%s, %d ops after planning)\n", path, describeDims(m), len(m.Graph.Order()))
	fmt.Fprintf(w, "device        %s, policy %s%s\n", prof.Name, r.Policy, describeParams(params))
	fmt.Fprintf(w, "base peak     %s\n", compiler.FormatBytes(r.BasePeak))
	fmt.Fprintf(w, "budget        %s\n", compiler.FormatBytes(r.Budget))
	fmt.Fprintf(w, "planned peak  %s (pool %s, host %s)\n", compiler.FormatBytes(r.Peak), compiler.FormatBytes(r.Pool), compiler.FormatBytes(r.HostPeak))
	fmt.Fprintf(w, "tensors       %d swapped, %d recomputed, %d split\n", r.Swapped, r.Recomputed, r.Split)
	if r.Chosen != "" {
		fmt.Fprintf(w, "kept          %s\n", r.Chosen)
	}
	if sub != nil && len(sub.SubBatches) > 1 {
		fmt.Fprintf(w, "sub-batches   %d of at most %d samples (Eq. 3: %d), gradients accumulated\n", len(sub.SubBatches), sub.SubBatches[0], sub.SubBatch)
	}
	over := 0.0
	if r.BaseTime > 0 {
		over = 100 * (r.Time/r.BaseTime - 1)
	}
	fmt.Fprintf(w, "step time     %.3f ms predicted, %.3f ms unconstrained (+%.1f%%)\n", r.Time*1e3, r.BaseTime*1e3, over)
	fmt.Fprintf(w, "planning time %v (total %v)\n", planTime.Round(time.Microsecond), time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(w, "wrote         %s\n", f.out)
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

// policyHelp lists every policy and the parameters it declares, for
// `tsplitc --help`.
func policyHelp() string {
	var b strings.Builder
	b.WriteString("Memory policies (--policy) and their parameters (--policy-param NAME=VALUE):\n")
	for _, p := range passes.Policies() {
		specs := passes.PolicyParamSpecs(p)
		if len(specs) == 0 {
			fmt.Fprintf(&b, "  %s (no parameters)\n", p)
			continue
		}
		fmt.Fprintf(&b, "  %s\n", p)
		for _, s := range specs {
			fmt.Fprintf(&b, "      %-16s %s\n", s.Name, s.Doc)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/policy"
)

// The root command keeps the two forms the README documents as
// shortcuts: `tsplitc MODEL -o planned.onnx` is `tsplitc plan` and
// `tsplitc --run MODEL` is `tsplitc run`. It takes the flags of both;
// its --memory is the budget, or with --run the device pool (run's
// --pool, which it takes too).
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "tsplitc [MODEL --batch N --memory SIZE -o PLANNED.onnx | --run MODEL]",
		Short: "tsplit: train networks larger than GPU memory",
		Long: "tsplitc reads an ONNX model, builds its training step and rewrites it to fit a device memory budget.\n\n" +
			"Shortcuts: `tsplitc MODEL -o PLANNED.onnx …` is `tsplitc plan`; `tsplitc --run MODEL …` is `tsplitc run`\n" +
			"(there --memory, the budget of a plan, is the device pool, as --pool).\n\n" + policyHelp(),
		Version:       tsplit.Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("tsplitc {{.Version}}\n")
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	var (
		pf     planFlags
		rf     runFlags
		runArg runShortcut
	)
	pf.importFlags, pf.trainFlags, pf.outFlags = &importFlags{}, &trainFlags{}, &outFlags{}
	rf.importFlags, rf.trainFlags, rf.outFlags = pf.importFlags, pf.trainFlags, pf.outFlags
	fl := root.Flags()
	pf.importFlags.register(fl)
	pf.trainFlags.register(fl)
	pf.outFlags.register(fl)
	pf.register(fl)
	fl.Lookup("memory").Usage = "device memory budget, e.g. 11GiB (default: the device's memory less what it reserves); with --run: the device pool, as run's --pool"
	fl.Lookup("output").Usage = "write the planned training step here; with --run: the trained model, as run's -o"
	rf.register(fl)
	run := fl.VarPF(&runArg, "run", "", "run MODEL on the CPU reference device, as the run command does (--run=MODEL works too)")
	run.NoOptDefVal = "true"
	root.Args = func(cmd *cobra.Command, args []string) error {
		if runArg.model != "" && len(args) > 0 {
			return usageError{fmt.Errorf("--run=%s names the model; unexpected arguments %v", runArg.model, args)}
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if runArg.set {
			if runArg.model != "" {
				args = []string{runArg.model}
			}
			if len(args) != 1 {
				return usageError{fmt.Errorf("--run takes one model, got %d", len(args))}
			}
			rf.memory, rf.out, rf.report = pf.memory, pf.out, pf.report
			if cmd.Flags().Changed("device") {
				rf.device = pf.device
			}
			if err := rf.poolFromMemory(); err != nil {
				return err
			}
			return runModel(cmd, args[0], &rf)
		}
		if len(args) == 0 {
			return cmd.Help()
		}
		if len(args) != 1 {
			return usageError{fmt.Errorf("plan one model at a time, got %d", len(args))}
		}
		return planModel(cmd, args[0], &pf)
	}
	runCmd := newRunCmd()
	root.AddCommand(newPlanCmd(), runCmd, newTrainCmd(), newInspectCmd(), newDumpCmd(), newZooCmd(), newBenchCmd(), newProfileCmd())
	// `tsplitc --run --help` is run's help.
	help := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if cmd == root && runArg.set {
			cmd = runCmd
		}
		help(cmd, args)
	})
	return root
}

// runShortcut is the root's --run: a switch (`--run MODEL`, the model a
// positional argument, so `--run --help` asks for help) that also takes
// the model as its value (`--run=MODEL`).
type runShortcut struct {
	set   bool
	model string
}

func (r *runShortcut) String() string { return r.model }
func (r *runShortcut) Type() string   { return "bool" }

func (r *runShortcut) Set(s string) error {
	r.set = true
	if s != "true" {
		r.model = s
	}
	return nil
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d (see --help)", cmd.Name(), n, len(args))}
		}
		return nil
	}
}

// policyHelp lists every policy and the parameters it declares, for
// `tsplitc --help` and `tsplitc plan --help`.
func policyHelp() string {
	var b strings.Builder
	b.WriteString("Memory policies (--policy) and their parameters (--policy-param NAME=VALUE):\n")
	for _, p := range policy.Names() {
		pol, _ := policy.Lookup(p)
		specs := pol.Params()
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

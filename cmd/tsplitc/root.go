package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "tsplitc",
		Short:         "tsplit: train networks larger than GPU memory",
		Long:          "tsplitc reads an ONNX model, builds its training step and rewrites it to fit a device memory budget.\n\n" + policyHelp(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	var rf runFlags
	var cf compileFlags
	var runPath string
	root.Use = "tsplitc [MODEL --batch N --memory SIZE --device NAME -o PLANNED.onnx]"
	root.Flags().StringVarP(&cf.out, "output", "o", "", "write the planned training step here")
	root.Flags().StringVar(&cf.device, "device", "titan-rtx", "device profile ("+strings.Join(profile.Names(), ", ")+") or a JSON profile file")
	root.Flags().BoolVar(&cf.check, "check", false, "run ir.Verify after every pass")
	root.Flags().StringVar(&cf.policy, "policy", "tsplit", "memory policy: "+strings.Join(passes.Policies(), ", "))
	root.Flags().StringArrayVar(&cf.params, "policy-param", nil, "a parameter of the policy, NAME=VALUE (repeatable, or comma-separated: lb=2,ub=8); see the list above")
	root.Flags().StringArrayVarP(&cf.debug, "debug", "d", nil, "debug flags: dump-after=PASS (IR text to stderr)")
	root.Flags().StringVar(&cf.report, "report", "", "also write a plan report: FILE.html (memory timeline, decisions, overhead), FILE.svg (timeline) or FILE.json (data)")
	root.Flags().StringVar(&runPath, "run", "", "execute MODEL on the bundled runtime (CPU reference device)")
	root.Flags().IntVar(&rf.iters, "iters", 1, "iterations to run (with --run)")
	root.Flags().StringVar(&rf.memory, "memory", "", "device memory budget, e.g. 11GiB (with --run: the pool size; default: what the model needs)")
	root.Flags().StringVar(&rf.inputs, "inputs", "", "JSON tensor file with input data (default: seeded random data)")
	root.Flags().Uint64Var(&rf.seed, "seed", 1, "seed of the random inputs")
	root.Flags().BoolVar(&rf.quiet, "quiet", false, "no progress bar")
	root.Flags().BoolVar(&rf.train, "train", false, "with --run: build the training step of a forward model and run training steps")
	rf.tf.register(root)
	rf.register(root)
	root.Args = func(cmd *cobra.Command, args []string) error {
		if runPath != "" && len(args) > 0 {
			return usageError{fmt.Errorf("--run takes the model as its value; unexpected arguments %v", args)}
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if runPath != "" {
			return runModel(cmd.OutOrStdout(), runPath, &rf)
		}
		if len(args) == 0 {
			return cmd.Help()
		}
		if len(args) != 1 {
			return usageError{fmt.Errorf("compile one model at a time, got %d", len(args))}
		}
		return compileModel(cmd.OutOrStdout(), args[0], &cf, &rf)
	}
	root.AddCommand(newInspectCmd(), newZooCmd(), newDumpCmd(), newTrainCmd(), newBenchCmd())
	return root
}

// importFlags are the flags every command that reads a model takes.
type importFlags struct {
	batch int64
	dims  []string
}

func (f *importFlags) register(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&f.batch, "batch", 1, "batch size bound to the leading symbolic dimension of the inputs")
	cmd.Flags().StringArrayVar(&f.dims, "dim", nil, "bind another symbolic dimension, NAME=N (repeatable)")
}

func (f *importFlags) options() (compiler.Options, error) {
	if f.batch <= 0 {
		return compiler.Options{}, usageError{fmt.Errorf("--batch must be positive, got %d", f.batch)}
	}
	opts := compiler.Options{Batch: f.batch, Dims: map[string]int64{}}
	for _, d := range f.dims {
		name, val, ok := strings.Cut(d, "=")
		n, err := strconv.ParseInt(val, 10, 64)
		if !ok || name == "" || err != nil || n < 0 {
			return opts, usageError{fmt.Errorf("--dim %q: want NAME=N with N >= 0", d)}
		}
		opts.Dims[name] = n
	}
	return opts, nil
}

func (f *importFlags) load(path string) (*compiler.Summary, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	m, err := compiler.Import(path, opts)
	if err != nil {
		return nil, err
	}
	return compiler.Summarize(m), nil
}

func newInspectCmd() *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "inspect MODEL",
		Short: "summarize a model: opsets, op histogram, parameters, activation bytes, largest tensors",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.load(args[0])
			if err != nil {
				return err
			}
			s.Print(cmd.OutOrStdout())
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d (see --help)", cmd.Name(), n, len(args))}
		}
		return nil
	}
}

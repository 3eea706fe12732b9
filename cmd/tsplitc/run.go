package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/backend/native"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/internal/quote"
)

// runFlags are the flags of `tsplitc run` (and of the root's --run).
type runFlags struct {
	*importFlags
	*trainFlags
	*outFlags
	iters  int
	pool   string
	memory string // run's older name of --pool
	inputs string
	seed   uint64
	train  bool
	// finite is --check-finite; its default is --train's value.
	finite bool
	// out is -o, the trained model (run's own flag; the root's -o is
	// the plan's output, which --run takes as this).
	out string
	// saveOutputs is --save-outputs, a folder for the outputs' .npy files.
	saveOutputs string
	// adapt is --adapt: move a plan's stalled swap-ins earlier between
	// iterations.
	adapt bool
	// report is --report FILE (the predicted and measured memory
	// timelines) and device --device, the profile to simulate the
	// prediction on; both run's own flags (the root's are the plan's,
	// which --run takes as these).
	report, device string
}

// register adds run's own flags. --pool's older name --memory is added
// by the run command only: the root's --memory is its budget flag, the
// pool only with --run.
func (f *runFlags) register(fl *pflag.FlagSet) {
	fl.IntVar(&f.iters, "iters", 1, "iterations to run")
	fl.StringVar(&f.inputs, "inputs", "", "JSON tensor file with input data (default: seeded random data)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the random inputs")
	fl.BoolVar(&f.train, "train", false, "build the training step of a forward model and run training steps")
	fl.StringVar(&f.pool, "pool", "", "memory of the capped CPU device, e.g. 2MiB (default: what the model needs: a planned model's pool)")
	fl.StringVar(&f.saveOutputs, "save-outputs", "", "write every output of the last iteration to this folder as a numpy .npy file (index.json maps output names to files)")
	fl.BoolVar(&f.adapt, "adapt", false, "move the trigger of every swap-in that stalled its consumer earlier before the next iteration, within the plan's budget\n"+
		"(Capuchin's feedback: 5% of the copy's time per iteration, docs/measured.md); -o then writes the adapted plan")
	fl.BoolVar(&f.finite, "check-finite", false, "stop with an error naming the first op that computes a NaN or Inf, or the input holding one (default: on with --train)")
}

// poolFromMemory takes --memory as --pool, its older name.
func (f *runFlags) poolFromMemory() error {
	if f.memory == "" {
		return nil
	}
	if f.pool != "" {
		return usageError{fmt.Errorf("--memory is --pool's older name: give one of them")}
	}
	f.pool = f.memory
	return nil
}

func newRunCmd() *cobra.Command {
	f := runFlags{importFlags: &importFlags{}, trainFlags: &trainFlags{}, outFlags: &outFlags{}}
	cmd := &cobra.Command{
		Use:   "run MODEL [--iters N] [--pool SIZE] [--inputs FILE] [--train] [-o TRAINED.onnx] [--save-outputs DIR]",
		Short: "execute a (planned) model on the CPU reference device, which enforces the memory pool",
		Long: "run executes MODEL on the CPU reference device: every kernel computed, the copy streams concurrent with\n" +
			"compute, every allocation past the pool refused. A planned model runs in its static layout, so the measured\n" +
			"peak equals the plan's. A training step runs --iters steps, feeding its updated weights back; -o writes it\n" +
			"with the weights and optimizer state of the last step (the trained model), --save-outputs DIR every output\n" +
			"of the last step as DIR/NAME.npy.\n" +
			"`tsplitc --run MODEL …` is the same command. --memory is --pool's older name.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.poolFromMemory(); err != nil {
				return err
			}
			return runModel(cmd, args[0], &f)
		},
	}
	fl := cmd.Flags()
	f.importFlags.register(fl)
	f.trainFlags.register(fl)
	f.outFlags.register(fl)
	f.register(fl)
	fl.StringVar(&f.memory, "memory", "", "the same as --pool (its older name, kept from tsplitc --run)")
	fl.StringVarP(&f.out, "output", "o", "", "write the trained model here: the training step with its weights and optimizer state after the last iteration")
	fl.StringVar(&f.report, "report", "", "write a report of a planned model's run: FILE.html, FILE.svg or FILE.json, the measured memory timeline of the last iteration over the predicted one")
	fl.StringVar(&f.device, "device", "", "with --report: the profile the plan was made with (a name or a JSON file), to draw the prediction along simulated time (default: op positions only)")
	return cmd
}

// runModel executes a model on the CPU reference device and prints
// what it measured.
func runModel(cmd *cobra.Command, path string, f *runFlags) error {
	batch, dims, err := f.importFlags.parse()
	if err != nil {
		return err
	}
	if f.iters <= 0 {
		return usageError{fmt.Errorf("--iters must be positive, got %d", f.iters)}
	}
	opts := tsplit.RunOptions{Batch: batch, Dims: dims, Iters: f.iters, InputsFile: f.inputs, Seed: f.seed}
	if f.pool != "" {
		if opts.Pool, err = parseBytes("--pool", f.pool); err != nil {
			return err
		}
	}
	if f.train {
		opts.Train = &f.trainFlags.opts
	}
	opts.Output, opts.SaveOutputs, opts.Adapt = f.out, f.saveOutputs, f.adapt
	if f.report != "" {
		if err := checkReportPath(f.report, path); err != nil {
			return err
		}
		opts.Report, opts.Device = true, f.device
	} else if f.device != "" {
		return usageError{fmt.Errorf("--device with --run or run: only with --report (the profile its predicted timeline is simulated on)")}
	}
	opts.CheckFinite = f.finite
	if !cmd.Flags().Changed("check-finite") {
		opts.CheckFinite = f.train
	}
	var done func()
	opts.Progress, done = progressBar(f.quiet || f.iters == 1)
	if native.IsPlanFile(path) {
		for _, name := range []string{"batch", "dim", "train"} {
			if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
				return usageError{fmt.Errorf("--%s: %s is a native plan, whose shapes and training step were fixed when it was made", name, quote.Name(path))}
			}
		}
	}
	res, err := tsplit.RunFile(cmd.Context(), path, opts)
	done()
	if err != nil {
		return err
	}
	if res.Report != nil {
		if err := writeReport(cmd.Context(), f.report, res.Report, []string{path}); err != nil {
			return err
		}
	}
	w := cmd.OutOrStdout()
	if f.json {
		return writeJSON(w, res)
	}
	isPlan := res.Format == tsplit.FormatNative
	what := "model"
	if isPlan {
		what = "native plan"
	}
	fmt.Fprintf(w, "model        %s (%s)\n", path, describeDims(res.Dims))
	fmt.Fprintf(w, "device       %s, pool %s (%d bytes); the %s needs %d bytes, peak live %d\n", res.Device, bytesStr(res.Pool), res.Pool, what, res.Need, res.ModelPeak)
	fmt.Fprintf(w, "time/iter    %v (%d iterations)\n", res.TimePerIter.Round(time.Microsecond), res.Iters)
	printStep(w, res)
	printAdapted(w, res)
	if isPlan {
		fmt.Fprintf(w, "peak device  %s measured (%d bytes: the highest pool byte the commands used; the plan's live peak %d bytes)\n", bytesStr(res.Peak), res.Peak, res.ModelPeak)
	} else {
		fmt.Fprintf(w, "peak device  %s measured (%d bytes; memory model %d bytes", bytesStr(res.Peak), res.Peak, res.ModelPeak)
		if res.Plan != nil {
			fmt.Fprintf(w, "; planned %d bytes", res.Plan.Peak)
		}
		fmt.Fprintln(w, ")")
	}
	if ti := res.Training; ti != nil {
		l := res.Losses
		fmt.Fprintf(w, "loss         first %.6g, last %.6g (%s, optimizer %s)\n", l[0], l[len(l)-1], ti.LossKind, ti.Optimizer)
		if len(l) > 1 {
			var parts []string
			for _, x := range l {
				parts = append(parts, fmt.Sprintf("%.6g", x))
			}
			fmt.Fprintf(w, "losses       %s\n", strings.Join(parts, " "))
		}
	} else {
		for _, o := range res.Outputs {
			fmt.Fprintf(w, "output       %s %v%v %s\n", quote.Name(o.Name), o.DType, o.Shape, preview(&o))
		}
	}
	if len(res.Saved) > 0 {
		fmt.Fprintf(w, "saved        %d outputs to %s (index.json names their files)\n", len(res.Saved), quote.Name(f.saveOutputs))
	}
	if res.Report != nil {
		fmt.Fprintf(w, "report       %s\n", quote.Name(f.report))
	}
	if res.Trained != "" {
		what := "the trained model"
		if len(res.Adapted) > 0 {
			what = "the adapted plan, with the trained state"
		}
		fmt.Fprintf(w, "wrote        %s (%s)\n", quote.Name(res.Trained), what)
	}
	return nil
}

// printStep prints the measured step, the plan's prediction of it and
// what every stream did.
func printStep(w io.Writer, res *tsplit.RunResult) {
	which := "the only iteration"
	if n := len(res.Steps); n > 1 {
		which = fmt.Sprintf("median of %d iterations after the first", n-1)
	}
	fmt.Fprintf(w, "step         %s measured (%s)\n", ms(res.Step), which)
	if p := res.Plan; p != nil {
		pred := ms(time.Duration(p.Step * float64(time.Second)))
		if p.Measured {
			fmt.Fprintf(w, "predicted    %s on %s (%s policy), measured/predicted %.3f\n", pred, quote.Name(p.Device), p.Policy, res.Step.Seconds()/p.Step)
		} else {
			// A GPU's profile: its prediction is for that GPU, not for
			// the CPU device.
			fmt.Fprintf(w, "predicted    %s on %s (%s policy): not this device's (a profile measured with tsplitc profile predicts the CPU device's, docs/measured.md)\n",
				pred, quote.Name(p.Device), p.Policy)
		}
	}
	st := res.Streams
	fmt.Fprintf(w, "streams      compute %s busy, %s stalled (%s waiting for inputs)", ms(st.Compute.Busy), ms(st.Compute.Stall), ms(st.Compute.Wait))
	for _, c := range []struct {
		name string
		s    executor.StreamStats
	}{{"d2h", st.D2H}, {"h2d", st.H2D}, {"host", st.Host}} {
		if c.s.Tasks > 0 {
			fmt.Fprintf(w, "; %s %d ops, %s busy, %s waiting for inputs", c.name, c.s.Tasks, ms(c.s.Busy), ms(c.s.Wait))
		}
	}
	fmt.Fprintln(w)
	if l := res.Link; l != nil {
		fmt.Fprintf(w, "link         emulating %s: %s host to device, %s device to host, %.3g µs per copy\n", quote.Name(l.Of), rate(l.H2D), rate(l.D2H), l.Latency*1e6)
	}
}

// printAdapted prints, for a run with --adapt, one line per iteration:
// what stalled and what moved.
func printAdapted(w io.Writer, res *tsplit.RunResult) {
	for _, it := range res.Adapted {
		fmt.Fprintf(w, "adapt %-6d step %.3f ms, swap-ins stalled %.3f ms (%d of them), compute stall %.3f ms; peak %d of budget %d; moved %d, held %d\n",
			it.Iter, it.Step*1e3, it.SwapInStall*1e3, it.Stalled, it.Stall*1e3, it.Peak, it.Budget, it.Moved, it.Refused)
	}
}

// ms is a duration in milliseconds, three decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", d.Seconds()*1e3) }

// preview shows the first values of an output.
func preview(o *tsplit.Output) string {
	const k = 6
	vals := o.Values(k + 1)
	if vals == nil {
		return ""
	}
	var parts []string
	for _, x := range vals[:min(len(vals), k)] {
		if o.DType.IsFloat() {
			parts = append(parts, fmt.Sprintf("%.6g", x))
		} else {
			parts = append(parts, fmt.Sprint(int64(x)))
		}
	}
	s := "[" + strings.Join(parts, " ")
	if len(vals) > k {
		s += " …"
	}
	return s + "]"
}

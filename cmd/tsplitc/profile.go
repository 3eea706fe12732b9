package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/internal/quote"
	"github.com/tsplit/tsplit/profile"
)

// profileFlags are the flags of `tsplitc profile MODEL.onnx`, the
// measuring mode.
type profileFlags struct {
	*importFlags
	*trainFlags
	out     string
	device  string
	emulate string
	name    string
	runs    int
	warmup  int
	seed    uint64
}

func newProfileCmd() *cobra.Command {
	var of outFlags
	f := profileFlags{importFlags: &importFlags{}, trainFlags: &trainFlags{}}
	cmd := &cobra.Command{
		Use:   "profile [NAME | FILE.json] | profile MODEL.onnx --batch N -o PROFILE.json",
		Short: "list the built-in device profiles, show one, validate a JSON profile file, or measure one on the CPU device",
		Long: "Without an argument, profile lists the built-in device profiles: capacity, planning budget, host link\n" +
			"bandwidths, fp32 throughput and host memory. With a name it shows every field of that profile; with a\n" +
			"JSON file (a path, or a name ending in .json) it reads and validates the file and shows it. The JSON\n" +
			"form (--json) is the file format --device accepts.\n\n" +
			"With a model (a name ending in .onnx) it measures: it runs the model's training step unplanned on the CPU\n" +
			"device (--warmup steps, then --runs timed ones), keeps the median time of every op by its type, shapes and\n" +
			"attributes, the runtime's cost per op and the copy bandwidth, fits the roofline to them for ops it did not\n" +
			"see, and writes the profile (-o) that `tsplitc plan --device PROFILE.json` prices the step with. Memory\n" +
			"capacity and host memory come from --device (docs/measured.md).",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("profile takes at most one profile name, profile file or model, got %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			if len(args) == 1 && isModel(args[0]) {
				return measureProfile(cmd, args[0], &f, &of)
			}
			for _, name := range []string{"output", "batch", "dim", "device", "name", "emulate", "runs", "warmup", "seed", "loss", "optimizer", "lr", "momentum", "weight-decay", "keep-grads"} {
				if cmd.Flags().Changed(name) {
					return usageError{fmt.Errorf("--%s is a flag of profile MODEL.onnx (measuring a profile), not of listing or showing one", name)}
				}
			}
			if len(args) == 0 {
				var all []*profile.Profile
				for _, n := range profile.Names() {
					p, err := profile.Lookup(n)
					if err != nil {
						return err
					}
					all = append(all, p)
				}
				if of.json {
					return writeJSON(w, struct {
						Profiles []*profile.Profile `json:"profiles"`
					}{all})
				}
				listProfiles(w, all)
				return nil
			}
			p, err := profile.Lookup(args[0])
			if err != nil {
				// A built-in name the user mistyped is a wrong command
				// line; a file that does not read or validate is bad input.
				if !isFile(args[0]) {
					return usageError{err}
				}
				return err
			}
			if of.json {
				return writeJSON(w, p)
			}
			if isFile(args[0]) {
				fmt.Fprintf(w, "%s: a valid profile\n", args[0])
			}
			showProfile(w, p)
			return nil
		},
	}
	fl := cmd.Flags()
	of.register(fl)
	f.importFlags.register(fl)
	f.trainFlags.register(fl)
	fl.StringVarP(&f.out, "output", "o", "", "write the measured profile here (JSON, the form --device reads)")
	fl.StringVar(&f.device, "device", "", "profile the measured one takes its memory capacity, reserve and host memory from (default: --emulate's, else titan-rtx)")
	fl.StringVar(&f.emulate, "emulate", "", "emulate this GPU's host link: the CPU device's copies of a plan made with the profile take as large a share of the step as on that GPU (e.g. titan-rtx)")
	fl.StringVar(&f.name, "name", "", "name of the measured profile (default cpu)")
	fl.IntVar(&f.runs, "runs", 5, "timed training steps; every op's time is the median over them")
	fl.IntVar(&f.warmup, "warmup", 1, "untimed training steps before the timed ones")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the random input data")
	return cmd
}

// isModel tells a model to measure from a profile name or file.
func isModel(arg string) bool { return strings.HasSuffix(strings.ToLower(arg), ".onnx") }

// measureProfile is `tsplitc profile MODEL.onnx`.
func measureProfile(cmd *cobra.Command, path string, f *profileFlags, of *outFlags) error {
	batch, dims, err := f.importFlags.parse()
	if err != nil {
		return err
	}
	if f.runs <= 0 {
		return usageError{fmt.Errorf("--runs must be positive, got %d", f.runs)}
	}
	if f.warmup < 0 {
		return usageError{fmt.Errorf("--warmup must not be negative, got %d", f.warmup)}
	}
	if f.out == "" && !of.json {
		return usageError{fmt.Errorf("profile MODEL.onnx needs -o PROFILE.json (or --json to print it)")}
	}
	warmup := f.warmup
	if warmup == 0 {
		warmup = -1 // the library's 0 is its default
	}
	opts := tsplit.ProfileOptions{Batch: batch, Dims: dims, Train: f.trainFlags.opts, Runs: f.runs, Warmup: warmup,
		Seed: f.seed, Name: f.name, Base: f.device, Emulate: f.emulate, Output: f.out}
	var done func()
	opts.Progress, done = progressBar(of.quiet)
	p, err := tsplit.ProfileFile(cmd.Context(), path, opts)
	done()
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if of.json {
		return writeJSON(w, p)
	}
	showMeasured(w, p)
	fmt.Fprintf(w, "wrote %s\n", quote.Name(f.out))
	return nil
}

// showMeasured summarizes a measured profile.
func showMeasured(w io.Writer, p *profile.Profile) {
	m := p.Measured
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\n", p.Name)
	fmt.Fprintf(tw, "model\t%s (%s)\n", quote.Name(m.Model), describeDims(m.Dims))
	fmt.Fprintf(tw, "device\t%s, %d timed steps after %d untimed\n", m.Device, m.Runs, m.Warmup)
	fmt.Fprintf(tw, "step\t%.4g s measured (median), %.4g s of it in kernels\n", m.StepS, m.ComputeS)
	fmt.Fprintf(tw, "ops\t%d kinds timed (type, shapes, attributes); %.3g µs per op besides the kernel\n", len(p.OpTimes), p.Launch*1e6)
	fmt.Fprintf(tw, "roofline\t%.3g GFLOPS, half of it at %.3g FLOP; %s memory\n", p.FLOPS/1e9, p.HalfWork, rate(p.MemBW))
	fmt.Fprintf(tw, "copies\t%s measured\n", rate(m.CopyBytesPerS))
	fmt.Fprintf(tw, "host link\t%s host to device, %s device to host, %.3g µs per copy\n", rate(p.H2D), rate(p.D2H), p.LinkLatency*1e6)
	fmt.Fprintf(tw, "wake-up\t%.3g µs for a task waiting on another stream\n", p.WakeLatency*1e6)
	if e := p.Emulation; e != nil {
		fmt.Fprintf(tw, "emulates\t%s: its roofline takes %.4g of the measured step, so its link is scaled by that; paced copies end %.3g µs late\n",
			e.Of, e.Ratio, e.Overhead*1e6)
	}
	tw.Flush()
}

// isFile tells a profile file from a built-in name, as profile.Lookup
// does.
func isFile(name string) bool { return strings.Contains(name, "/") || strings.HasSuffix(name, ".json") }

func listProfiles(w io.Writer, all []*profile.Profile) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "name\tmemory\tbudget\th2d\td2h\tfp32\thost memory")
	for _, p := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, bytesStr(p.Memory), bytesStr(p.Budget()),
			rate(p.H2D), rate(p.D2H), flops(p.FLOPS), bytesStr(p.HostMemory))
	}
	tw.Flush()
}

func showProfile(w io.Writer, p *profile.Profile) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\n", p.Name)
	fmt.Fprintf(tw, "memory\t%s (%d bytes), %s reserved: budget %s\n", bytesStr(p.Memory), p.Memory, bytesStr(p.Reserved), bytesStr(p.Budget()))
	fmt.Fprintf(tw, "host link\t%s host to device, %s device to host", rate(p.H2D), rate(p.D2H))
	if p.LinkLatency > 0 {
		fmt.Fprintf(tw, ", %.3g µs per copy", p.LinkLatency*1e6)
	}
	fmt.Fprintln(tw)
	if e := p.Emulation; e != nil {
		fmt.Fprintf(tw, "emulates\t%s's link on the CPU device: scaled by %.4g, paced copies end %.3g µs late\n", e.Of, e.Ratio, e.Overhead*1e6)
	}
	if m := p.Measured; m != nil {
		fmt.Fprintf(tw, "measured\t%s (%s) on %s: %d op times, step %.4g s\n", quote.Name(m.Model), describeDims(m.Dims), m.Device, len(p.OpTimes), m.StepS)
	}
	if len(p.TypeScale) > 0 {
		fmt.Fprintf(tw, "op types\t%d with a measured correction of the roofline\n", len(p.TypeScale))
	}
	fmt.Fprintf(tw, "compute\t%s fp32 peak, %.0f%% reached by large kernels, half of that by kernels of %.3g FLOP\n", flops(p.FLOPS), 100*p.Efficiency, p.HalfWork)
	fmt.Fprintf(tw, "memory bandwidth\t%s\n", rate(p.MemBW))
	fmt.Fprintf(tw, "kernel launch\t%.3g µs\n", p.Launch*1e6)
	if p.WakeLatency > 0 {
		fmt.Fprintf(tw, "wake-up\t%.3g µs for a task waiting on another stream\n", p.WakeLatency*1e6)
	}
	fmt.Fprintf(tw, "host memory\t%s pinned for swaps\n", bytesStr(p.HostMemory))
	if p.HostBW > 0 {
		fmt.Fprintf(tw, "host copies\t%s\n", rate(p.HostBW))
	}
	if p.HostFLOPS > 0 {
		fmt.Fprintf(tw, "host compute\t%.3g GFLOPS fp32 (host-placed ops: an offloaded optimizer update)\n", p.HostFLOPS/1e9)
	}
	for _, a := range p.ConvAlgos {
		fmt.Fprintf(tw, "conv algorithm\t%s: time ×%.2f, workspace ×%.2f of the input\n", a.Name, a.Speed, a.Workspace)
	}
	tw.Flush()
}

// rate is a bandwidth in GB/s.
func rate(bytesPerS float64) string { return fmt.Sprintf("%.1f GB/s", bytesPerS/1e9) }

// flops is a throughput in TFLOPS (GFLOPS below one TFLOPS: a CPU).
func flops(f float64) string {
	if f < 1e12 {
		return fmt.Sprintf("%.1f GFLOPS", f/1e9)
	}
	return fmt.Sprintf("%.1f TFLOPS", f/1e12)
}

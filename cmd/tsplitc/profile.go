package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tsplit/tsplit/profile"
)

func newProfileCmd() *cobra.Command {
	var of outFlags
	cmd := &cobra.Command{
		Use:   "profile [NAME | FILE.json]",
		Short: "list the built-in device profiles, show one, or validate a JSON profile file",
		Long: "Without an argument, profile lists the built-in device profiles: capacity, planning budget, host link\n" +
			"bandwidths, fp32 throughput and host memory. With a name it shows every field of that profile; with a\n" +
			"JSON file (a path, or a name ending in .json) it reads and validates the file and shows it. The JSON\n" +
			"form (--json) is the file format --device accepts.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("profile takes at most one profile name or file, got %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
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
	of.register(cmd.Flags())
	return cmd
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
	fmt.Fprintf(tw, "host link\t%s host to device, %s device to host\n", rate(p.H2D), rate(p.D2H))
	fmt.Fprintf(tw, "compute\t%s fp32 peak, %.0f%% reached by large kernels, half of that by kernels of %.3g FLOP\n", flops(p.FLOPS), 100*p.Efficiency, p.HalfWork)
	fmt.Fprintf(tw, "memory bandwidth\t%s\n", rate(p.MemBW))
	fmt.Fprintf(tw, "kernel launch\t%.3g µs\n", p.Launch*1e6)
	fmt.Fprintf(tw, "host memory\t%s pinned for swaps\n", bytesStr(p.HostMemory))
	if p.HostBW > 0 {
		fmt.Fprintf(tw, "host copies\t%s\n", rate(p.HostBW))
	}
	for _, a := range p.ConvAlgos {
		fmt.Fprintf(tw, "conv algorithm\t%s: time ×%.2f, workspace ×%.2f of the input\n", a.Name, a.Speed, a.Workspace)
	}
	tw.Flush()
}

// rate is a bandwidth in GB/s.
func rate(bytesPerS float64) string { return fmt.Sprintf("%.1f GB/s", bytesPerS/1e9) }

// flops is a throughput in TFLOPS.
func flops(f float64) string { return fmt.Sprintf("%.1f TFLOPS", f/1e12) }

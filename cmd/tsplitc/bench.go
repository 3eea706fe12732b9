package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tsplit/tsplit/bench"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/profile"
)

func newBenchCmd() *cobra.Command {
	var (
		cfg        bench.Config
		models     string
		policies   string
		thresholds string
		out        string
		quiet      bool
		budgets    bool
		measured   bool
		mcfg       bench.MeasuredConfig
		mbudgets   string
		tables     string
	)
	cmd := &cobra.Command{
		Use:   "bench [-o DIR]",
		Short: "the paper's scale and throughput benchmarks (Tables IV–V, Figs. 12 and 14a) by real planning",
		Long: "bench finds, by exponential then binary search with the whole planning pipeline per probe, the largest\n" +
			"batch (Table IV) and parameter scale at batch 16 (Table V) each memory policy plans into the device budget,\n" +
			"the simulated throughput of every policy over a range of batches (Fig. 12) and the largest batch at no less\n" +
			"than x% of the unconstrained throughput (Fig. 14a). It prints a summary; with -o DIR it also writes Markdown and\n" +
			"CSV tables, PNG and SVG plots and a README into DIR (`make benchmarks` writes docs/benchmarks). Results are\n" +
			"deterministic: -j changes the wall time only.\n\n" +
			"With --budget-sweep it does none of that and instead plans each model at Table IV's base batch with every policy at\n" +
			"budgets from 100% of the unplanned peak down in 5% steps to the smallest one any policy fits (predicted overhead vs\n" +
			"budget); -o DIR writes budget_sweep.md, .csv and one plot per model (budget_sweep_small* with --small).\n\n" +
			"With --measured it runs plans instead of only predicting them: each model (MODEL:BATCH, an .onnx file or a\n" +
			"benchmark model at its CI size; default " + strings.Join(bench.DefaultMeasuredModels, ", ") + ") is profiled on\n" +
			"the CPU device with --emulate's link (tsplitc profile), planned by every policy at every --budgets percent of its\n" +
			"unplanned peak, and every plan runs a step in turn, each after an unplanned step, --rounds times: measured vs\n" +
			"predicted step time,\n" +
			"their ratio and the measured throughput relative to the unplanned step; -o DIR writes measured.md, .csv, a plot\n" +
			"and the profile of each model (docs/measured.md). Timings are the machine's, as loaded as it was.\n\n" +
			"Models: " + strings.Join(bench.DefaultModels(), ", ") + " (the default), or any zoo family.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if models != "" {
				cfg.Models = splitList(models)
			}
			if policies != "" {
				cfg.Policies = splitList(policies)
			}
			if thresholds != "" {
				cfg.Thresholds = nil
				for _, s := range splitList(thresholds) {
					x, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
					if err != nil {
						return usageError{fmt.Errorf("--thresholds %q: want percentages such as 60,50", thresholds)}
					}
					cfg.Thresholds = append(cfg.Thresholds, x)
				}
			}
			if cfg.Jobs < 1 {
				return usageError{fmt.Errorf("-j must be at least 1, got %d", cfg.Jobs)}
			}
			if tables != "" {
				if budgets || measured {
					return usageError{fmt.Errorf("--tables selects among the tables: not with --budget-sweep or --measured")}
				}
				cfg.Tables = splitList(tables)
				for _, t := range cfg.Tables {
					if !slices.Contains(bench.TableNames, t) {
						return usageError{fmt.Errorf("--tables %q: tables are %s", t, strings.Join(bench.TableNames, ", "))}
					}
				}
			}
			if _, err := profile.Lookup(cfg.Device); err != nil {
				return usageError{err}
			}
			cfg.Command = benchCommand(cmd)
			if !quiet {
				cfg.Progress = os.Stderr
			}
			w := cmd.OutOrStdout()
			if budgets {
				return benchBudgets(cmd, cfg, out)
			}
			if measured {
				mcfg.Models, mcfg.Policies, mcfg.Command, mcfg.Progress = cfg.Models, cfg.Policies, cfg.Command, cfg.Progress
				for _, s := range splitList(mbudgets) {
					x, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
					if err != nil || x <= 0 || x > 100 {
						return usageError{fmt.Errorf("--budgets %q: want percentages in (0, 100] such as 70,50", mbudgets)}
					}
					mcfg.Budgets = append(mcfg.Budgets, x)
				}
				return benchMeasured(cmd, mcfg, out)
			}
			res, err := bench.Run(cfg)
			if err != nil {
				return err
			}
			if out == "" {
				fmt.Fprintf(w, "%d plans in %v on %d workers (no files written: -o DIR writes them)\n", res.Probes, res.Elapsed.Round(time.Millisecond), res.Config.Jobs)
			} else {
				files, err := bench.Write(out, res)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "%d plans in %v on %d workers; wrote %d files into %s\n", res.Probes, res.Elapsed.Round(time.Millisecond), res.Config.Jobs, len(files), out)
			}
			bench.Summary(w, res)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Device, "device", "titan-rtx", "device profile ("+strings.Join(profile.Names(), ", ")+") or a JSON profile file")
	fl.StringVar(&models, "models", "", "comma-separated models (default "+strings.Join(bench.DefaultModels(), ",")+")")
	fl.StringVar(&policies, "policies", "", "comma-separated memory policies (default: every registered one: "+strings.Join(bench.OrderPolicies(policy.Names()), ",")+")")
	fl.IntVarP(&cfg.Jobs, "jobs", "j", runtime.GOMAXPROCS(0), "searches to run at once")
	fl.BoolVar(&cfg.Small, "small", false, "CI-sized: the zoo's small configurations on the device with memory sizes / 1024")
	fl.StringVarP(&out, "output", "o", "", "folder to write the tables, plots and README into (default: none, only the summary)")
	fl.Int64Var(&cfg.MaxBatch, "max-batch", 65536, "cap of the batch searches")
	fl.Int64Var(&cfg.MaxWidth, "max-width", 0, "cap of the parameter-scale searches (0: what the zoo builds)")
	fl.Int64Var(&cfg.ParamBatch, "param-batch", 16, "batch of the parameter-scale table")
	fl.StringVar(&thresholds, "thresholds", "60,50", "throughput thresholds (percent of the unconstrained step) of Fig. 14a")
	fl.Int64Var(&cfg.SweepMin, "sweep-min", 16, "smallest batch of the throughput sweep")
	fl.IntVar(&cfg.SweepSteps, "sweep-steps", 4, "throughput-sweep batches per doubling")
	fl.StringVar(&cfg.Optimizer, "optimizer", "sgd", "optimizer of the training step: sgd, momentum, adam")
	fl.StringVar(&tables, "tables", "", "comma-separated tables to compute and write (default: all): "+strings.Join(bench.TableNames, ", ")+
		" (Table IV with Figs. 12 and 14a; Table V); a subset writes only its own files, never the README or the others")
	fl.BoolVar(&cfg.Offload, "offload", false, "tsplit and tsplit-nosplit may keep the parameters and optimizer state on the host where they do not fit on the device (docs/offload.md); the other policies are unchanged")
	fl.BoolVar(&quiet, "quiet", false, "no progress bar")
	fl.BoolVar(&budgets, "budget-sweep", false, "instead of the tables: every policy's predicted overhead vs budget at Table IV's base batch")
	fl.BoolVar(&measured, "measured", false, "instead of the tables: run every policy's plan on the CPU device with an emulated link, measured vs predicted step")
	fl.StringVar(&mbudgets, "budgets", "70,50", "with --measured: budgets in percent of the unplanned peak")
	fl.StringVar(&mcfg.Emulate, "emulate", "titan-rtx", "with --measured: the GPU whose host link the CPU device emulates")
	fl.IntVar(&mcfg.Rounds, "rounds", 4, "with --measured: rounds in which every plan runs a step in turn, each after an unplanned step")
	fl.IntVar(&mcfg.Repeats, "repeat", 1, "with --measured: repetitions of the whole measurement (profile, plans, runs)")
	fl.IntVar(&mcfg.ProfileRuns, "profile-runs", 5, "with --measured: timed steps of each model's profile")
	return cmd
}

// benchBudgets is `tsplitc bench --budget-sweep`.
func benchBudgets(cmd *cobra.Command, cfg bench.Config, out string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	res, err := bench.RunBudgetSweeps(ctx, cfg)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if out == "" {
		fmt.Fprintf(w, "budget sweeps in %v on %d workers (no files written: -o DIR writes them)\n", res.Elapsed.Round(time.Millisecond), res.Config.Jobs)
	} else {
		files, err := bench.WriteBudgetSweeps(out, res)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "budget sweeps in %v on %d workers; wrote %d files into %s\n", res.Elapsed.Round(time.Millisecond), res.Config.Jobs, len(files), out)
	}
	bench.BudgetSummary(w, res)
	return nil
}

// benchMeasured is `tsplitc bench --measured`.
func benchMeasured(cmd *cobra.Command, cfg bench.MeasuredConfig, out string) error {
	if cfg.Rounds <= 0 || cfg.ProfileRuns <= 0 || cfg.Repeats <= 0 {
		return usageError{fmt.Errorf("--rounds, --repeat and --profile-runs must be positive")}
	}
	if _, err := cfg.Resolve(); err != nil {
		return usageError{err}
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	res, err := bench.RunMeasured(ctx, cfg)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if out == "" {
		fmt.Fprintf(w, "measured in %v (no files written: -o DIR writes them)\n", res.Elapsed.Round(time.Second))
	} else {
		files, err := bench.WriteMeasured(out, res)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "measured in %v; wrote %d files into %s\n", res.Elapsed.Round(time.Second), len(files), out)
	}
	bench.PrintMeasured(w, res)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// benchCommand is the command line as given, flags in a canonical order
// (what the README records).
func benchCommand(cmd *cobra.Command) string {
	parts := []string{"tsplitc", "bench"}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name == "quiet" {
			return
		}
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand
		}
		if f.Value.Type() == "bool" {
			if f.Value.String() == "true" {
				parts = append(parts, name)
			} else {
				parts = append(parts, name+"=false")
			}
			return
		}
		parts = append(parts, name, f.Value.String())
	})
	return strings.Join(parts, " ")
}

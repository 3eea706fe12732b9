// Package bench reproduces the model-scale and throughput evaluation of
// the TSPLIT paper (ICDE'22, §VI) with tsplit's own planner: for every
// benchmark model and every registered memory policy (policy.Names),
//
//   - Table IV: the largest batch (sample scale) the policy plans into
//     the device budget;
//   - Table V: the largest parameter scale k (channels × k for CNNs,
//     hidden size × k for the transformer) at batch 16;
//   - Fig. 12: the simulated throughput (batch / predicted step time) of
//     each policy over a range of batches, next to the unconstrained
//     step (every tensor resident, memory unlimited);
//   - Fig. 14a: the largest batch whose throughput stays at or above x%
//     of the unconstrained step's (tsplit against tsplit-nosplit is the
//     effect of tensor split).
//
// Every probe is real planning: the zoo model is built at the probed
// batch and width with its weights as graph inputs (no weight data), its
// training step is built (compiler.BuildTrainingStep), and the whole
// policy.Plan runs the pipeline with the policy on the device profile. A probe
// passes when planning succeeds: the plan and its static layout fit the
// budget and the swapped bytes fit the profile's host memory. Maxima are
// found by exponential search then binary search (maxPassing), capped
// (batch ≤ 65536 by default) and never limited by wall-clock time, so
// the same Config gives the same Results whatever Config.Jobs.
//
// Probes are memoized: the batch search, the threshold searches and the
// sweep ask for many of the same points. Jobs (one per model and policy
// for the batch and threshold searches, one for the width search, one
// per sweep point) run on Config.Jobs workers.
//
// Where another policy goes further than tsplit (Results.Violations), the
// benchmark plans that size again with tsplit restricted to swapping
// (policy.Options.NoRecompute) and reports the outcome (Diagnosis), so a
// planner weakness is told from a hard limit.
//
// Write renders Markdown and CSV tables, PNG and SVG plots (gonum/plot)
// and a README into a folder; `tsplitc bench` is the command line (it
// writes files only with -o) and `make benchmarks` writes
// docs/benchmarks. Every probe plans through package tsplit (tsplit.Plan),
// as tsplitc does. Config.Small is the CI-sized
// variant: the zoo's small configurations on the device with every
// memory size divided by SmallScale, which the package's tests run.
//
// RunBudgetSweeps (`tsplitc bench --budget-sweep`, `make budget-sweep`)
// is the other view: each model at Table IV's base batch, planned by
// every policy at budgets from 100 % of its unplanned peak down in 5 %
// steps to the smallest budget any policy fits (SweepBudgets), written
// by WriteBudgetSweeps as a table of predicted overheads and one plot
// per model. The package's tests sweep the CI-sized zoo models the same
// way and check that tsplit is never slower than another policy and
// never slower at a larger budget.
//
// The paper's "Transformer" is the zoo's bert-base under the name
// "transformer" (see models); any other zoo family can be benchmarked
// under its zoo name.
package bench

// Package policy holds tsplit's memory policies — what to evict, swap,
// recompute or split when a training step does not fit the device — and
// the entry points that plan a step with one.
//
// A Policy is a value. The table of this package (Names, Lookup) is the
// only list of them: the CLI or the API looks a policy up by name once,
// at the edge, and hands the value on; what a policy is — whether it
// places its own swap-in triggers, which parameters it takes, whether it
// trains with sub-batches — is asked of the value, never of its name.
// The policies:
//
//	tsplit, tsplit-nosplit  TSPLIT's Alg. 2 (tsplit.go, chains.go)
//	base                    keep every tensor
//	vdnn-conv, vdnn-all     vDNN (vdnn.go)
//	checkpoint              √n checkpoints (checkpoint.go)
//	superneurons            SuperNeurons (superneurons.go)
//	capuchin                Capuchin (capuchin.go)
//	modnn                   moDNN's Alg. 1 and Eq. 5 (modnn.go)
//	tflms                   TFLMS (tflms.go)
//
// The baselines share baselines.go's view of the feature maps.
//
// Mechanism is package passes: the schedule, the rounds of planning,
// the insertion of swaps, recomputations and splits, control edges,
// layout, simulation. A policy only chooses: each round it returns a
// passes.Plan, and passes realizes every policy's plan the same way.
// passes knows policies only through its own interface (passes.Policy),
// so it never imports this package.
//
// Plan plans a step with a policy (the pipeline of package passes).
// PlanSubBatched wraps it with moDNN's sub-batching (subbatch.go): Eq.
// 1–3 choose a sub-batch, the step is rebuilt as sub-batches with
// gradients accumulated, and that step is planned — with any policy
// (a test plans tsplit's), though tsplitc and the benchmark use it with
// modnn only.
package policy

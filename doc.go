// Package tsplit is the library behind tsplitc: it reads an ONNX model,
// builds its training step, plans the step into a device memory budget
// by swapping, recomputing and splitting tensors, writes the planned
// model, and runs a step on the capped CPU reference device.
//
//	res, err := tsplit.PlanFile(ctx, "model.onnx", tsplit.Options{Batch: 32, Budget: 8 << 30, Output: "planned.onnx"})
//	run, err := tsplit.RunFile(ctx, "planned.onnx", tsplit.RunOptions{Iters: 3})
//
// Plan and Run take a context: planning checks it before every pass and
// every planning round, running between ops. Options.Progress and
// RunOptions.Progress receive the stage, round and fraction done.
// Errors are typed for errors.As: *UsageError for bad options (reported
// before any file is read), *InputError for a model that cannot be read,
// trained or run (it names the file and the node), *InfeasibleError for
// a budget the policy cannot fit (with the budget and, where the policy
// knows it, the lower bound), *PanicError for a planner that panicked.
//
// The command tsplitc, the benchmark (package bench) and moDNN's
// sub-batching (through Options.Forward) all plan through this package;
// planModel in plan.go is the one place it calls the planner.
package tsplit

// Package native is tsplit's native execution plan: a planned step
// lowered for a device, written as a .tsplan file that a runtime runs
// without the compiler (docs/native-plan.md).
//
// Lower turns a model — a planned step with its static layout, or any
// step, laid out here — into a planpb.Plan: the pool, an offset for
// every tensor (memory.Layout's), host buffers for swapped tensors, the
// ops with their attributes, and one command list per stream (compute,
// d2h, h2d, host) whose events realise every ordering the executor
// would otherwise decide at run time: a consumer waits for its
// producer's stream, and a command writing a block of the pool waits
// for every earlier use of its bytes.
//
// Load reads a plan back and checks it before anything runs: the
// graph's shapes against the op table's inference, every offset inside
// the pool, no two tensors live at once sharing bytes, every wait with a
// record the streams reach, every read after its write, every reuse of
// pool bytes after their earlier uses. A bad file is an *Error naming
// the file and the command or value at fault, never a panic. What it
// returns runs on any executor.Device through executor.Program, with
// the executor's kernels, copies and streams.
package native

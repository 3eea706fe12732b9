// Package profile describes devices and estimates costs. A Profile is
// what the planner knows about a GPU and its host: memory capacity,
// host↔device bandwidth each way, fp32 throughput, memory bandwidth,
// kernel launch cost, how efficiency drops for small kernels (TSPLIT
// Fig. 5), the conv algorithms it can choose from (moDNN Eq. 5), and how
// much pinned host memory swapped tensors may occupy. Built-in profiles
// come from public specifications; a measured profile is a JSON file.
//
// OpTime estimates an op's time from its FLOPs and bytes moved (a
// roofline with a small-kernel efficiency curve); TransferTime a copy's
// from latency, bytes and bandwidth. The planner, the simulator and the
// benchmarks all use these two functions.
//
// A measured profile (package measure, `tsplitc profile MODEL.onnx`)
// is the same cost model with measurements in it: kernel times by op
// key (OpKey: type, shapes, attributes), which OpTime returns instead of
// its estimate, a roofline fitted to them, and per op type the ratio of
// measured to estimated time for ops it did not see. A profile with an
// Emulation describes the CPU device standing in for a GPU: plans made
// with it record the link, and the runtime paces its copies to it.
package profile

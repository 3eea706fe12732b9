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
// from bytes and bandwidth. The planner, the simulator and the
// benchmarks all use these two functions.
package profile

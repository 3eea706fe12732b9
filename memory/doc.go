// Package memory is tsplit's one memory model: which tensors occupy
// device memory during each op of a schedule, how many bytes (aligned),
// and in what order they are allocated and freed. The planner's liveness
// analysis, the simulator and the runtime all take their numbers from
// here, so a plan's predicted peak is the runtime's measured peak.
//
// Rules (positions are indices into the op order):
//   - weights (initializers, and graph inputs marked Param) are resident
//     for the whole step — except one the step replaces (Value.Next: a
//     weight's update, optimizer state), which is dead after its last
//     read, as with an in-place optimizer; a weight that only swap-ins
//     read (HostResident: the plan offloaded it) lives in host memory
//     for the whole step instead, and only its restored copies occupy
//     the device;
//   - graph inputs are resident from the start until their last use;
//   - an op output is allocated just before its op runs and freed after
//     its last reader; unread outputs are freed right after their op;
//     graph outputs are kept to the end of the step;
//   - an op's workspace (kernel scratch) is live during that op only;
//   - outputs of ToHost ops (swap-out) live in host memory, and the
//     device tensor they copy stays live through the op after the
//     swap-out, so the transfer overlaps that op (decoupled swap-out);
//   - every allocation is rounded up to Alignment bytes.
package memory

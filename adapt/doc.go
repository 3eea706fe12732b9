// Package adapt moves a planned step's swap-in triggers from what a run
// measured: Capuchin's feedback-driven prefetch adjustment
// (capuchin-asplos20 §4.4). A swap-in starts when the runtime reaches
// it in the op order (its trigger); when the op that first reads the
// swapped-in tensor on the compute stream had to wait for the copy, the
// trigger moves earlier for the next iteration, by 5 % of the copy's
// measured time (rounded up to whole ops), as far as the device memory
// the earlier copy then holds keeps the plan within its budget. The
// static layout is derived again for the new order, and the budget
// checked on it, through the same memory model the planner and the
// runtime use (package memory).
//
// Measure reads the stalls off an executor timeline; Adjust turns the
// model's order and layout into the next iteration's. Both are pure
// functions of the model and the measurements, so the same run gives
// the same adapted plan.
package adapt

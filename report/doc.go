// Package report renders what the planner did (a passes.Report) for
// people and tools: WriteHTML writes one self-contained page (inline
// CSS, SVG and script, nothing fetched) with the memory timeline before
// and after planning, the predicted overhead and the per-tensor decision
// table; WriteSVG writes the timeline alone; WriteJSON writes the whole
// report, deterministically and indented. FormatOf picks the format
// from a file name, as `tsplitc --report FILE` does.
//
// The timeline is TSPLIT's Fig. 4(b): M_i, the device memory live at
// each op, along the schedule, with the budget, the phases shaded and
// the inserted swaps, recomputations and splits in lanes under it. Its
// x axis is simulated time (both panels on one scale, so the planned
// step is as much longer as planning slows it) or the op index. The SVG
// is written by hand: each curve is a step path max-pooled to one value
// per pixel column, so a graph of any size draws in a few thousand
// points and keeps its peaks. See docs/report.md.
package report

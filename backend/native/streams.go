package native

import (
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/ir"
)

// streamOf is the stream that runs op, and whether a command runs it at
// all. Three kinds of op run nothing, as in the executor: a host view
// (its output is a part of its input's buffer), a host merge done in
// place (its pieces were copied into their parts of its buffer), and a
// compute op whose outputs hold no bytes.
func streamOf(op *ir.Op) (int, bool) {
	switch ir.CopyOf(op) {
	case ir.ToHost:
		return executor.StreamD2H, true
	case ir.ToDevice:
		return executor.StreamH2D, true
	case ir.OnHost:
		if _, view := ir.ViewOf(op); view || ir.InPlaceConcat(op) {
			return executor.StreamHost, false
		}
		return executor.StreamHost, true
	}
	for _, v := range op.Outputs() {
		if v != nil && v.Bytes() > 0 {
			return executor.StreamCompute, true
		}
	}
	return executor.StreamCompute, false
}

// clock is a vector clock over the streams: clock[t] is how many of
// stream t's work commands (launches, copies, host kernels) are known
// to have completed.
type clock [executor.NumStreams]int32

func (c *clock) join(d clock) {
	for t := range c {
		c[t] = max(c[t], d[t])
	}
}

// cmdRef names a work command: its stream and its 1-based number among
// that stream's work commands (0: none).
type cmdRef struct {
	s int
	n int32
}

// before reports whether the work command r has completed whenever a
// command with clock c runs.
func (r cmdRef) before(c clock) bool { return r.n == 0 || c[r.s] >= r.n }

// inheritWriters records, for an op that runs no command (an in-place
// Concat, or a view whose output shares its input's host memory), that
// its output's data is ready when its inputs' writers have completed.
// The lowering and the loader's check must agree on this rule.
func inheritWriters(op *ir.Op, writers [][]cmdRef) {
	if ir.InPlaceConcat(op) {
		var ws []cmdRef
		for _, v := range op.Inputs() {
			ws = append(ws, writers[v.ID]...)
		}
		writers[op.Output(0).ID] = ws
	} else if _, view := ir.ViewOf(op); view && ir.CopyOf(op) == ir.OnHost {
		writers[op.Output(0).ID] = writers[op.Input(0).ID]
	}
}

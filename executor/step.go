package executor

// Steps is how many runs of the graph the executor has finished: the
// step number its random ops (Dropout) are seeded with next.
func (x *Executor) Steps() int64 { return x.step }

// SetSteps sets the step number the next run seeds random ops with, so
// that an executor replacing another one mid-training (a plan adapted
// between iterations, package adapt) draws the same random numbers as
// the one it replaces would have.
func (x *Executor) SetSteps(n int64) { x.step = n }

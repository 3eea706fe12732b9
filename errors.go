package tsplit

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
)

// UsageError is an option the caller got wrong (a negative batch, an
// unknown policy or device, a parameter the policy does not take). It
// is returned before any model is read or file written. Option is the
// Options or RunOptions field, so a command line can name its flag.
type UsageError struct {
	Option string
	Err    error
}

func (e *UsageError) Error() string { return e.Option + ": " + e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usage(option, format string, args ...any) error {
	return &UsageError{Option: option, Err: fmt.Errorf(format, args...)}
}

// InputError is a model that cannot be read, imported, turned into a
// training step or run: a missing, truncated or corrupt file, a cycle,
// an unknown op, an absurd shape, an input of the wrong size.
type InputError struct {
	// File is the model's path ("" for a model built in memory).
	File string
	// Node describes the node at fault, e.g. `node "conv1" (Conv)`; ""
	// when the reason is about the model as a whole.
	Node string
	// Reason says what is wrong, without the file and node.
	Reason string
	// Err is the error as the frontend or the runtime returned it.
	Err error
}

func (e *InputError) Error() string {
	var parts []string
	for _, s := range []string{e.File, e.Node, e.Reason} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ": ")
}

func (e *InputError) Unwrap() error { return e.Err }

// inputError wraps an error about the model in file (which may be "").
// The frontend's errors already name the file and the node; they are
// taken apart so that the message reads the same.
func inputError(file string, err error) error {
	if err == nil {
		return nil
	}
	var ie *InputError
	if errors.As(err, &ie) {
		return err
	}
	var fe *compiler.Error
	if errors.As(err, &fe) && fe == err {
		if fe.File != "" {
			file = fe.File
		}
		return &InputError{File: file, Node: fe.Node, Reason: fe.Err.Error(), Err: err}
	}
	return &InputError{File: file, Reason: err.Error(), Err: err}
}

// InfeasibleError is a budget the policy cannot fit the training step
// into. Its message is the planner's, which says where and by how much.
type InfeasibleError struct {
	// File is the model's path ("" for a model built in memory).
	File   string
	Policy string
	// Budget is the device budget in bytes and BasePeak the unplanned
	// step's peak.
	Budget, BasePeak int64
	// LowerBound is the least budget the policy could fit, when it
	// knows one: tsplit's bound for the graph (weights and kept outputs
	// at its largest op plus what that op needs, split to the limit) or
	// moDNN's Eq. 2; 0 when the policy gives none.
	LowerBound int64
	// At is the node where nothing more could be freed and Need the
	// bytes that stay live there, when the planner says ("", 0 else).
	At   string
	Need int64
	// Feasible is a budget the same policy was seen to plan, when
	// Options.FindFeasible asked for one (0: not searched, or none
	// found); Infeasible is the largest budget seen to fail (at least
	// Budget) and Tries the plans the search made. Planning is not
	// monotonic in the budget, so a budget between the two may plan or
	// not; the lower bound is no such promise.
	Feasible, Infeasible int64
	Tries                int
	// Err is the planner's error.
	Err error
}

func (e *InfeasibleError) Error() string {
	msg := e.Err.Error()
	if e.File != "" {
		msg = e.File + ": " + msg
	}
	if e.Feasible > 0 {
		msg += fmt.Sprintf(" — %d more plans found a budget that fits: %d bytes (%s; %s does not)", e.Tries, e.Feasible, units.Bytes(e.Feasible), units.Bytes(e.Infeasible))
	}
	return msg
}

func (e *InfeasibleError) Unwrap() error { return e.Err }

// PanicError is a planner or policy that panicked, or a kernel that
// panicked while Run executed its op: a bug in tsplit, not in the input.
// Plan and Run report it as an error so that one bad plan does not end a
// program planning many (the benchmark); Stack says where it happened.
type PanicError struct {
	Policy string
	// Op describes the op whose kernel panicked ("" for a planner
	// panic).
	Op    string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	if e.Op != "" {
		return fmt.Sprintf("%s: the kernel panicked: %v", e.Op, e.Value)
	}
	return fmt.Sprintf("policy %s panicked: %v", e.Policy, e.Value)
}

// planError turns a failed plan of the step in file into an
// InfeasibleError when it is about the budget: the planner's own
// infeasibility, moDNN's sub-batch limits, or any policy's failure to
// bring the step under the budget (a policy that stops with its reason
// before its plan fits, or a plan whose swaps overflow the host). Other
// errors (a rewrite that does not verify) are named with the file only.
func planError(file string, err error, pol policy.Policy, res *policy.Result, opts *policy.Options) error {
	var pe *PanicError
	if errors.As(err, &pe) {
		return withFile(file, err)
	}
	e := &InfeasibleError{File: file, Budget: opts.Budget, Err: err}
	var r *passes.Report
	if res != nil {
		r = res.Report
		if r != nil || res.Model != nil {
			e.Policy = pol.Name()
		}
		if res.SubBatching != nil {
			e.LowerBound = res.SubBatching.LowerBound
		}
	}
	if r != nil {
		e.BasePeak = r.BasePeak
	}
	var ie *passes.InfeasibleError
	var lim *policy.SubBatchLimitError
	switch {
	case errors.As(err, &ie):
		e.LowerBound, e.At, e.Need = ie.LowerBound, ie.At, ie.Need
		return e
	case errors.As(err, &lim):
		return e
	case r != nil && r.Planned == nil && r.BasePeak > r.Budget:
		// The plan pass started (it filled the base peak) and ended
		// before a plan fit: the policy gave up.
		return e
	case r != nil && opts.Profile != nil && r.HostPeak > opts.Profile.HostMemory:
		return e
	}
	return withFile(file, err)
}

// withFile prefixes err with the model's file, as every error about a
// model names it.
func withFile(file string, err error) error {
	if file == "" {
		return err
	}
	return fmt.Errorf("%s: %w", file, err)
}

// Command tsplitc is the tsplit compiler: it reads an ONNX model, builds
// its training step, plans it into a device memory budget and runs it
// on the capped CPU device. Every command is a thin caller of package
// tsplit; see the README and docs/ for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/internal/exit"
	"github.com/tsplit/tsplit/internal/quote"
)

func main() {
	os.Exit(exit.Guard(os.Stderr, os.Args, func() int { return execute(newRootCmd(), os.Args, os.Stderr) }))
}

// execute runs the command line args (args[0] the program) with a
// context that SIGINT and SIGTERM cancel, and returns its exit status
// (README, "Exit status"): 0, 1 for bad input or an infeasible budget,
// 2 for a wrong command line, 3 for a bug in tsplit, 128+n after signal
// n.
func execute(root *cobra.Command, args []string, stderr io.Writer) int {
	ctx, stop := exit.Signals(context.Background())
	defer stop()
	root.SetArgs(args[1:])
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exit.OK
	}
	if code, ok := exit.Interrupted(ctx); ok {
		// The step in progress stopped; a file it was writing was
		// removed (files finished before the signal stay).
		fmt.Fprintf(stderr, "tsplitc: %v: stopped\n", context.Cause(ctx))
		return code
	}
	var pe *tsplit.PanicError
	if errors.As(err, &pe) {
		exit.Report(stderr, args, err, pe.Stack)
		return exit.Internal
	}
	msg, code := describeError(err)
	fmt.Fprintln(stderr, "tsplitc:", quote.Controls(msg))
	return code
}

// usageError marks errors in how the command was called (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// describeError is the message and exit status of a failed command: 2
// for a wrong command line (the library's option errors name the flag
// that set the option; an output path tsplit refuses), 1 for everything
// else (bad input, a budget that cannot be fitted, a failed run).
func describeError(err error) (string, int) {
	var ue usageError
	var oe *tsplit.UsageError
	var pe *backend.OutputError
	switch {
	case errors.As(err, &oe):
		return flagOf(oe.Option) + ": " + oe.Err.Error(), exit.Usage
	case errors.As(err, &ue), errors.As(err, &pe):
		return err.Error(), exit.Usage
	}
	return err.Error(), exit.Failure
}

// flagOf is the flag that sets a tsplit option field.
func flagOf(option string) string {
	flags := map[string]string{
		"Batch": "--batch", "Dims": "--dim", "Device": "--device", "Budget": "--memory", "Policy": "--policy",
		"PolicyParams": "--policy-param", "Order": "--order", "Iters": "--iters", "Pool": "--pool", "Inputs": "--inputs", "Output": "-o", "SaveOutputs": "--save-outputs",
		"Train.Loss": "--loss", "Train.Optimizer": "--optimizer", "Train.LR": "--lr", "Train.Momentum": "--momentum",
		"Train.WeightDecay": "--weight-decay",
	}
	if f, ok := flags[option]; ok {
		return f
	}
	return option
}

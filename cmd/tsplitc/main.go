// Command tsplitc is the tsplit compiler: it reads an ONNX model, builds
// its training step, plans it into a device memory budget and runs it
// on the capped CPU device. Every command is a thin caller of package
// tsplit; see the README and docs/ for the commands.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/tsplit/tsplit"
)

func main() {
	err := newRootCmd().Execute()
	if err == nil {
		return
	}
	msg, code := describeError(err)
	fmt.Fprintln(os.Stderr, "tsplitc:", msg)
	os.Exit(code)
}

// usageError marks errors in how the command was called (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// describeError is the message and exit status of a failed command: 2
// for a wrong command line (the library's option errors name the flag
// that set the option), 1 for everything else (bad input, a budget that
// cannot be fitted, a failed run).
func describeError(err error) (string, int) {
	var ue usageError
	var oe *tsplit.UsageError
	switch {
	case errors.As(err, &oe):
		return flagOf(oe.Option) + ": " + oe.Err.Error(), 2
	case errors.As(err, &ue):
		return err.Error(), 2
	}
	return err.Error(), 1
}

// flagOf is the flag that sets a tsplit option field.
func flagOf(option string) string {
	flags := map[string]string{
		"Batch": "--batch", "Dims": "--dim", "Device": "--device", "Budget": "--memory", "Policy": "--policy",
		"PolicyParams": "--policy-param", "Iters": "--iters", "Pool": "--pool", "Inputs": "--inputs",
	}
	if f, ok := flags[option]; ok {
		return f
	}
	return option
}

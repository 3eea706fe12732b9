// Command tsplitc is the tsplit compiler: it reads an ONNX model, builds
// its training step and plans it into a device memory budget. See the
// README and docs/ for the commands.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(os.Stderr, "tsplitc:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "tsplitc:", err)
		os.Exit(1)
	}
}

// usageError marks errors in how the command was called (exit status 2).
type usageError struct{ error }

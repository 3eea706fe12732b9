package compiler

import (
	"fmt"

	"github.com/tsplit/tsplit/internal/quote"
)

// Error is a frontend error: which file, which node (if any), and why.
type Error struct {
	File string
	Node string // node description, e.g. `node "conv1" (Conv)`; empty for model-level errors
	Err  error
}

func (e *Error) Error() string {
	file := e.File
	if file == "" {
		file = "<model>"
	}
	if e.Node != "" {
		return fmt.Sprintf("%s: %s: %v", file, e.Node, e.Err)
	}
	return fmt.Sprintf("%s: %v", file, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func nodeDesc(name, domain, opType string) string {
	t := opType
	if domain != "" && domain != "ai.onnx" {
		t = domain + ":" + opType
	}
	t = quote.Name(t) // from the model, like the name
	if name == "" {
		return fmt.Sprintf("unnamed node (%s)", t)
	}
	return fmt.Sprintf("node %q (%s)", name, t)
}

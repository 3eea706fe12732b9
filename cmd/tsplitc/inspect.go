package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/quote"
	"github.com/tsplit/tsplit/ir"
)

func newInspectCmd() *cobra.Command {
	var f importFlags
	var of outFlags
	cmd := &cobra.Command{
		Use:   "inspect MODEL",
		Short: "summarize a model: opsets, op histogram, parameters, activation bytes, largest tensors",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			m, err := tsplit.Load(cmd.Context(), args[0], opts)
			if err != nil {
				return err
			}
			s := compiler.Summarize(m)
			if of.json {
				return writeJSON(cmd.OutOrStdout(), inspectJSONOf(s))
			}
			// Names and op types come from the model: their control
			// characters are escaped before they reach the terminal.
			var b strings.Builder
			s.Print(&b)
			_, err = io.WriteString(cmd.OutOrStdout(), quote.Controls(b.String()))
			return err
		},
	}
	f.register(cmd.Flags())
	of.register(cmd.Flags())
	return cmd
}

// inspectJSON is `inspect --json`'s object.
type inspectJSON struct {
	Model           string           `json:"model"`
	IRVersion       int64            `json:"ir_version"`
	Opsets          map[string]int64 `json:"opsets"`
	Dims            map[string]int64 `json:"dims"`
	Ops             int              `json:"ops"`
	Values          int              `json:"values"`
	FoldedConstants int              `json:"folded_constants"`
	Parameters      int64            `json:"parameters"`
	ParameterBytes  int64            `json:"parameter_bytes"`
	ActivationBytes int64            `json:"activation_bytes"`
	AllStatic       bool             `json:"all_static"`
	NonStatic       []string         `json:"non_static,omitempty"`
	OpCounts        map[string]int   `json:"op_counts"`
	Largest         []tensorJSON     `json:"largest_tensors"`
}

type tensorJSON struct {
	Name  string   `json:"name"`
	Kind  string   `json:"kind"`
	DType string   `json:"dtype"`
	Shape ir.Shape `json:"shape"`
	Bytes int64    `json:"bytes"`
}

func inspectJSONOf(s *compiler.Summary) inspectJSON {
	opsets := map[string]int64{}
	for d, v := range s.Opsets {
		if d == "" {
			d = "ai.onnx"
		}
		opsets[d] = v
	}
	out := inspectJSON{Model: s.File, IRVersion: s.IRVersion, Opsets: opsets, Dims: s.Dims, Ops: s.NumOps, Values: s.NumValues,
		FoldedConstants: s.FoldedConst, Parameters: s.Params, ParameterBytes: s.ParamBytes, ActivationBytes: s.ActBytes,
		AllStatic: s.AllStatic, NonStatic: s.NonStatic, OpCounts: s.OpCounts, Largest: []tensorJSON{}}
	if out.Dims == nil {
		out.Dims = map[string]int64{}
	}
	for _, v := range s.Largest {
		out.Largest = append(out.Largest, tensorJSON{Name: v.Name, Kind: kindName(v.Kind), DType: v.DType.String(), Shape: v.Shape, Bytes: v.Bytes()})
	}
	return out
}

// kindName says what a value is.
func kindName(k ir.ValueKind) string {
	switch k {
	case ir.KindInput:
		return "input"
	case ir.KindInit:
		return "initializer"
	}
	return "activation"
}

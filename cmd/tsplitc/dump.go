package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/internal/quote"
	"github.com/tsplit/tsplit/ir"
)

func newDumpCmd() *cobra.Command {
	var f importFlags
	var verify bool
	cmd := &cobra.Command{
		Use:   "dump MODEL",
		Short: "print the IR of a model, one line per value",
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
			if verify {
				if err := ir.Verify(m); err != nil {
					return err
				}
			}
			// Op types come from the model unquoted: their control
			// characters are escaped before they reach the terminal
			// (text without them is what ir.Parse reads back).
			var b strings.Builder
			if err := ir.DumpModel(&b, m); err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), quote.Controls(b.String()))
			return err
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&verify, "check", false, "run ir.Verify on the imported graph")
	return cmd
}

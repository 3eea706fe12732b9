package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/tsplit/tsplit"
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
			m, err := tsplit.Load(context.Background(), args[0], opts)
			if err != nil {
				return err
			}
			if verify {
				if err := ir.Verify(m); err != nil {
					return err
				}
			}
			return ir.DumpModel(cmd.OutOrStdout(), m) // ir.Parse reads it back
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&verify, "check", false, "run ir.Verify on the imported graph")
	return cmd
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tsplit/tsplit"
)

func newTrainCmd() *cobra.Command {
	var (
		f   importFlags
		tf  trainFlags
		of  outFlags
		out string
	)
	cmd := &cobra.Command{
		Use:   "train MODEL -o TRAIN.onnx",
		Short: "write the unplanned training step (loss, backward, optimizer update) of a forward model",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError{fmt.Errorf("train needs -o FILE")}
			}
			opts, err := f.options()
			if err != nil {
				return err
			}
			opts.Train, opts.Output = tf.opts, out
			m, ti, err := tsplit.TrainFile(cmd.Context(), args[0], opts)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if of.json {
				return writeJSON(w, struct {
					Model  string `json:"model"`
					Output string `json:"output"`
					Ops    int    `json:"ops"`
					*tsplit.TrainingInfo
				}{args[0], out, len(m.Graph.Order()), ti})
			}
			fmt.Fprintf(w, "wrote %s: %d ops, loss %s (%s), optimizer %s, %d parameters\n",
				out, len(m.Graph.Order()), ti.Loss, ti.LossKind, ti.Optimizer, len(ti.Params))
			return nil
		},
	}
	fl := cmd.Flags()
	f.register(fl)
	tf.register(fl)
	of.register(fl)
	cmd.Flags().StringVarP(&out, "output", "o", "", "output ONNX file")
	return cmd
}

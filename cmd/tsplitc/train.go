package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
)

// trainFlags select the loss and optimizer of a training step.
type trainFlags struct {
	opts compiler.TrainOptions
}

func (f *trainFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.opts.Loss, "loss", "auto", "loss: auto, cross-entropy, mse or none (auto: cross-entropy on [N,C] or [N,T,V] logits, none on a scalar)")
	fl.StringVar(&f.opts.Optimizer, "optimizer", "sgd", "optimizer: sgd, momentum, adam or none (none: the step outputs gradients)")
	fl.Float64Var(&f.opts.LR, "lr", 0, "learning rate (default 0.01 for sgd/momentum, 0.001 for adam)")
	fl.Float64Var(&f.opts.Momentum, "momentum", 0, "momentum (default 0.9)")
	fl.Float64Var(&f.opts.WeightDecay, "weight-decay", 0, "L2 weight decay")
	fl.BoolVar(&f.opts.KeepGrads, "keep-grads", false, "also output every parameter gradient")
}

func newTrainCmd() *cobra.Command {
	var f importFlags
	var tf trainFlags
	var out string
	cmd := &cobra.Command{
		Use:   "train MODEL -o TRAIN.onnx",
		Short: "write the unplanned training step (loss, backward, optimizer update) of a forward model",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError{fmt.Errorf("train needs -o FILE")}
			}
			m, ti, err := loadTraining(&f, &tf, args[0])
			if err != nil {
				return err
			}
			if err := backend.WriteFile(m, out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d ops, loss %s (%s), optimizer %s, %d parameters\n",
				out, len(m.Graph.Order()), ti.Loss, ti.LossKind, ti.Optimizer, len(ti.Params))
			return nil
		},
	}
	f.register(cmd)
	tf.register(cmd)
	cmd.Flags().StringVarP(&out, "output", "o", "", "output ONNX file")
	return cmd
}

// loadTraining imports a forward model and builds its training step.
func loadTraining(f *importFlags, tf *trainFlags, path string) (*ir.Model, *compiler.TrainingInfo, error) {
	opts, err := f.options()
	if err != nil {
		return nil, nil, err
	}
	m, err := compiler.Import(path, opts)
	if err != nil {
		return nil, nil, err
	}
	ti, err := compiler.BuildTrainingStep(m, tf.opts)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, ti, nil
}

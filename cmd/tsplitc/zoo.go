package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/zoo"
)

func newZooCmd() *cobra.Command {
	var (
		cfg   zoo.Config
		small bool
		all   bool
		out   string
	)
	cmd := &cobra.Command{
		Use:   "zoo [NAME] -o FILE",
		Short: "write a model of the built-in zoo as ONNX (" + strings.Join(zoo.Names(), ", ") + ")",
		Long: "Writes a zoo model. --small gives the CI-sized configuration of the family;\n" +
			"--all --small -o DIR writes every family's small model into DIR as NAME-small.onnx.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError{fmt.Errorf("zoo needs -o")}
			}
			if all {
				if len(args) != 0 || !small {
					return usageError{fmt.Errorf("--all takes no model name and needs --small")}
				}
				for _, name := range zoo.Names() {
					path := filepath.Join(out, name+"-small.onnx")
					c := zoo.SmallConfig(name)
					c.WeightsAsInputs = cfg.WeightsAsInputs
					if err := writeZoo(cmd.Context(), name, c, path); err != nil {
						return err
					}
					fmt.Fprintln(cmd.OutOrStdout(), path)
				}
				return nil
			}
			if len(args) != 1 || !slices.Contains(zoo.Names(), args[0]) {
				return usageError{fmt.Errorf("zoo takes one model name (%s)", strings.Join(zoo.Names(), ", "))}
			}
			c := cfg
			if small {
				c = zoo.SmallConfig(args[0])
				c.WeightsAsInputs = cfg.WeightsAsInputs
			}
			return writeZoo(cmd.Context(), args[0], c, out)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "output file (folder with --all)")
	cmd.Flags().BoolVar(&small, "small", false, "the CI-sized configuration of the family")
	cmd.Flags().BoolVar(&all, "all", false, "every family (with --small)")
	cmd.Flags().Int64Var(&cfg.Batch, "batch", 0, "fixed batch (0: symbolic)")
	cmd.Flags().Float64Var(&cfg.Width, "width", 0, "width multiplier (channels × k, hidden × k)")
	cmd.Flags().Int64Var(&cfg.ImageSize, "image", 0, "image size (CNNs)")
	cmd.Flags().Int64Var(&cfg.SeqLen, "seq", 0, "sequence length (transformers)")
	cmd.Flags().IntVar(&cfg.Layers, "layers", 0, "layers (transformers)")
	cmd.Flags().Int64Var(&cfg.Classes, "classes", 0, "classes")
	cmd.Flags().BoolVar(&cfg.WeightsAsInputs, "weights-as-inputs", false, "weights as graph inputs without data")
	cmd.Flags().Int64Var(&cfg.Seed, "seed", 0, "weight seed")
	return cmd
}

func writeZoo(ctx context.Context, name string, cfg zoo.Config, path string) error {
	mp, err := zoo.Build(name, cfg)
	if err != nil {
		return err
	}
	data, err := compiler.EncodeModel(mp)
	if err != nil {
		return err
	}
	return backend.WriteBytesContext(ctx, path, data)
}

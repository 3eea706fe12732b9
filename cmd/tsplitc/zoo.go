package main

import "github.com/spf13/cobra"

func newZooCmd() *cobra.Command {
	return &cobra.Command{Use: "zoo", Short: "write a model of the built-in zoo as ONNX", Hidden: true}
}

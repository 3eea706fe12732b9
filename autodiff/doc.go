// Package autodiff builds the backward graph of a model by reverse-mode
// differentiation over the IR. Each operator has a Rule (registered per
// family in rules_*.go) that, given the gradients of an op's outputs,
// emits ops computing the gradients of its inputs. Rules emit standard
// ONNX operators wherever a faithful expression exists — Conv's input
// gradient as ConvTranspose, its weight gradient as a Conv over
// transposed operands, MaxPool's through its Indices output and
// ScatterElements — so the training graph stays a runnable ONNX model.
//
// Gradients flow only to values that depend on the parameters; integer
// values and constants get none. A value read by several ops gets the
// sum of the contributions. Every op the package emits is marked
// ir.Backward; forward values that backward ops read are the feature
// maps the planner will evict (SavedForBackward).
package autodiff

// Package compiler is tsplit's frontend and pipeline driver. Import
// reads an ONNX model (with external data confined to the model's
// folder), inlines model-local functions, binds symbolic dimensions such
// as the batch, and builds the SSA graph of package ir, inferring a
// static dtype and shape for every value. Shape arithmetic that PyTorch
// exports compute at run time (Shape → Gather → Unsqueeze → Concat →
// Reshape) folds to constants during inference, so the whole graph is
// static once the batch is bound.
//
// Every error names the file, the node and the reason, and no input,
// however malformed, makes the frontend panic.
package compiler

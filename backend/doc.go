// Package backend emits IR as ONNX. Write turns an ir.Model back into a
// ModelProto: ops become nodes in the graph's order, values keep the
// names, types and initializer data they were read with, and whatever
// the IR does not model (doc strings, metadata, unknown fields, model-
// local functions, training_info) is carried over from the source
// model, so an untouched model written back is the same model. Encoding
// is deterministic: the same IR always gives the same bytes.
//
// Every file tsplit writes goes through this package (output.go): only
// regular files are written (folders, devices, FIFOs are refused; a
// symlink is followed to the file it names), never the files the model
// was read from, atomically through a temporary file that an error or
// a cancelled context removes, with the umask's mode. A model with
// external data written to another folder gets its own data file.
//
// backend/cuda holds the native CUDA execution plan and its runtime,
// behind the "cuda" build tag.
package backend

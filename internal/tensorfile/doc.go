// Package tensorfile reads and writes the JSON tensor files tsplit uses for
// run inputs and outputs and for exchanging tensors with the outside
// oracles (ONNX Runtime, PyTorch): an object mapping names to
// {"type", "dims", "data_b64"}, the data being little-endian row-major bytes.
// It also reads and writes one tensor as a numpy .npy file (npy.go), what
// `tsplitc run --save-outputs` writes.
package tensorfile

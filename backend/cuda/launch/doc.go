// Package launch turns one op of a planned step into the work the CUDA
// device does for it: launches of the CUDA C kernels of
// backend/cuda/ckernels (name, grid and the ts_args block they all
// take), matrix products for cuBLAS, and uploads of host-computed
// constants.
//
// It is pure Go and builds without CUDA, so the same launch lists run
// two ways: on a GPU (package backend/cuda, build tag cuda) and on the
// host through the grid emulation of package backend/cuda/ckernels,
// whose tests compare every op with the reference kernels of package
// kernels. A bug in the parameters (strides, offsets, codes) therefore
// shows up without a GPU; only the GPU-side mechanics (module loading,
// cuBLAS's column-major call, streams) need one.
package launch

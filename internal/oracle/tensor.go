package oracle

import "github.com/tsplit/tsplit/internal/tensorfile"

// Tensor is the oracles' tensor, the JSON tensor-file format of package
// tensorfile.
type Tensor = tensorfile.Tensor

// Re-exported so tests need one import for the oracles and their data.
var (
	ElemSize     = tensorfile.ElemSize
	ReadTensors  = tensorfile.ReadTensors
	WriteTensors = tensorfile.WriteTensors
	FromFloat32  = tensorfile.FromFloat32
	FromFloat64  = tensorfile.FromFloat64
	FromInt64    = tensorfile.FromInt64
)

package compiler

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tsplit/tsplit/ir"
)

// RandomInputs makes seeded data for every graph input that has no
// initializer: floats uniform in [-1, 1), a training step's class labels
// in [0, C), other integers in [0, 10), booleans fair coins. The same
// seed gives the same bytes.
func RandomInputs(m *ir.Model, seed uint64) (map[string][]byte, error) {
	ti, err := ReadTrainingInfo(m)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x7473706c6974))
	out := map[string][]byte{}
	for _, v := range m.Graph.Inputs {
		if v.Kind == ir.KindInit {
			continue
		}
		n, _ := v.Shape.NumElements()
		b := make([]byte, v.Bytes())
		switch v.DType {
		case ir.Float:
			for i := int64(0); i < n; i++ {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.Float64()*2-1)))
			}
		case ir.Double:
			for i := int64(0); i < n; i++ {
				binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(rng.Float64()*2-1))
			}
		case ir.Int64, ir.Int32:
			hi := 10
			if ti != nil && v.Name == ti.Labels && ti.Classes > 0 {
				hi = int(ti.Classes)
			}
			for i := int64(0); i < n; i++ {
				if v.DType == ir.Int64 {
					binary.LittleEndian.PutUint64(b[8*i:], uint64(rng.IntN(hi)))
				} else {
					binary.LittleEndian.PutUint32(b[4*i:], uint32(rng.IntN(hi)))
				}
			}
		case ir.Bool, ir.Uint8, ir.Int8:
			for i := int64(0); i < n; i++ {
				b[i] = byte(rng.IntN(2))
			}
		default:
			return nil, fmt.Errorf("input %q: no random data for element type %v", v.Name, v.DType)
		}
		out[v.Name] = b
	}
	return out, nil
}

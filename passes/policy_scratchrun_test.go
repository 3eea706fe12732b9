package passes

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

func runPlanned(t *testing.T, m *ir.Model, pool int64) (*executor.Result, *executor.Executor) {
	t.Helper()
	var xopts executor.Options
	l, err := memory.DecodeLayout(m.Meta[memory.LayoutKey])
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if xopts.Placement, err = mem.Placement(l); err != nil {
		t.Fatal(err)
	}
	dev, err := cpu.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(m, dev, xopts)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := compiler.ReadTrainingInfo(m)
	rng := rand.New(rand.NewPCG(1, 2))
	in := map[string][]byte{}
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
		case ir.Int64:
			hi := 10
			if ti != nil && ti.Classes > 0 {
				hi = int(ti.Classes)
			}
			for i := int64(0); i < n; i++ {
				binary.LittleEndian.PutUint64(b[8*i:], uint64(rng.IntN(hi)))
			}
		}
		in[v.Name] = b
	}
	r, err := x.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return r, x
}

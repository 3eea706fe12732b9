package memory_test

import (
	"testing"

	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
)

// hostChain builds Relu(x) swapped out, then two host Muls by a scalar
// (the host update's shape: the gradient scaled, then combined), the
// second a graph output; with readTwice the swapped-out value is also
// returned, so nothing may write over it.
func hostChain(t *testing.T, readTwice bool) (*ir.Model, []*ir.Op) {
	b := New(t)
	x := b.Input("x", ir.Float, 16, 16) // 1 KiB
	lr := b.Init("lr", &ir.Tensor{DType: ir.Float, Shape: ir.Shape{}, Raw: make([]byte, 4)})
	a := b.Op("Relu", V(x))
	g := b.OpDomain(ir.Domain, "SwapOut", 1, V(a))[0]
	s := b.Op("Mul", V(g, lr))
	y := b.Op("Mul", V(s, lr))
	s.Def.Host, y.Def.Host = true, true
	outs := V(y)
	if readTwice {
		outs = append(outs, g)
	}
	return b.Return(outs...), []*ir.Op{s.Def, y.Def}
}

// A host op that writes over its input holds no host buffer of its own:
// the chain swap-out → Mul → Mul holds one buffer, to the end of the
// step (the last Mul's output is a graph output). Where the swapped-out
// value is read again, the first Mul needs its own buffer.
func TestHostInPlaceChain(t *testing.T) {
	const k = 1024
	for _, tc := range []struct {
		readTwice bool
		over      [2]int
		host      int64
	}{{false, [2]int{0, 0}, k}, {true, [2]int{-1, 0}, 2 * k}} {
		m, muls := hostChain(t, tc.readTwice)
		for i, op := range muls {
			if got := ir.InPlaceHost(op); got != tc.over[i] {
				t.Errorf("read twice %v: %s writes over input %d, want %d", tc.readTwice, op.Describe(), got, tc.over[i])
			}
		}
		mm, err := memory.Analyze(m.Graph, memory.Options{Workspace: func(*ir.Op) int64 { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		if mm.HostPeak != tc.host {
			t.Errorf("read twice %v: host peak %d, want %d", tc.readTwice, mm.HostPeak, tc.host)
		}
	}
}

package memory_test

import (
	"math/rand/v2"
	"testing"

	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
)

func TestBestFitMergesAndPrefersInterior(t *testing.T) {
	b := memory.NewBestFit(1000)
	a, _ := b.Alloc(100) // [0,100)
	c, _ := b.Alloc(300) // [100,400)
	d, _ := b.Alloc(100) // [400,500)
	if a != 0 || c != 100 || d != 400 {
		t.Fatalf("offsets %d %d %d", a, c, d)
	}
	b.Free(c, 300)
	// 250 fits the interior hole [100,400) and the tail [500,1000): the
	// interior wins although the tail is a worse fit only by size.
	e, _ := b.Alloc(250)
	if e != 100 {
		t.Fatalf("alloc 250 at %d, want the interior hole at 100", e)
	}
	b.Free(a, 100)
	b.Free(e, 250)
	b.Free(d, 100)
	if b.Used() != 0 || b.Largest() != 1000 || b.Fragmentation() != 0 {
		t.Fatalf("after freeing all: used %d largest %d frag %v", b.Used(), b.Largest(), b.Fragmentation())
	}
	if _, err := b.Alloc(1001); err == nil {
		t.Fatal("allocated past the pool")
	}
	if b.HighWater() != 500 || b.Reach() != 500 {
		t.Fatalf("high %d reach %d", b.HighWater(), b.Reach())
	}
}

// The offsets of a sequence do not depend on the pool size once the pool
// holds its reach: what makes Need exact.
func TestBestFitPoolIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		type op struct {
			free bool
			idx  int
			size int64
		}
		var seq []op
		var live []int
		n := 0
		for k := 0; k < 60; k++ {
			if len(live) > 0 && rng.IntN(3) == 0 {
				j := rng.IntN(len(live))
				seq = append(seq, op{free: true, idx: live[j]})
				live = append(live[:j], live[j+1:]...)
				continue
			}
			seq = append(seq, op{idx: n, size: int64(1 + rng.IntN(64))})
			live = append(live, n)
			n++
		}
		replay := func(pool int64) ([]int64, int64, bool) {
			b := memory.NewBestFit(pool)
			offs := make([]int64, n)
			sizes := make([]int64, n)
			for _, o := range seq {
				if o.free {
					b.Free(offs[o.idx], sizes[o.idx])
					continue
				}
				off, err := b.Alloc(o.size)
				if err != nil {
					return nil, 0, false
				}
				offs[o.idx], sizes[o.idx] = off, o.size
			}
			return offs, b.Reach(), true
		}
		big, reach, _ := replay(1 << 20)
		exact, _, ok := replay(reach)
		if !ok {
			t.Fatalf("trial %d: sequence fails in a pool of its reach %d", trial, reach)
		}
		for i := range big {
			if big[i] != exact[i] {
				t.Fatalf("trial %d: offset %d differs: %d vs %d", trial, i, big[i], exact[i])
			}
		}
		if _, _, ok := replay(reach - 1); ok {
			t.Fatalf("trial %d: sequence fits below its reach", trial)
		}
	}
}

func TestLiveness(t *testing.T) {
	b := New(t)
	x := b.Input("x", ir.Float, 16, 16) // 1 KiB each, aligned to 1024
	w := b.Init("w", &ir.Tensor{DType: ir.Float, Shape: ir.Shape{16, 16}, Raw: make([]byte, 1024)})
	a := b.Op("Relu", V(x))
	h := b.OpDomain(ir.Domain, "SwapOut", 1, V(a))[0]
	m := b.Op("Add", V(x, w))
	m2 := b.Op("Add", V(m, w))
	back := b.OpDomain(ir.Domain, "SwapIn", 1, V(h))[0]
	y := b.Op("Add", V(m2, back))
	mod := b.Return(y)
	mm, err := memory.Analyze(mod.Graph, memory.Options{Workspace: func(*ir.Op) int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	const k = 1024
	// positions: 0 Relu, 1 SwapOut, 2 Add(m), 3 Add(m2), 4 SwapIn, 5 Add(y)
	want := []int64{
		3 * k, // x w a
		3 * k, // x w a (h is on the host)
		4 * k, // x w a m: a stays through the op after its swap-out
		3 * k, // w m m2 (x freed after pos 2)
		3 * k, // w m2 back
		4 * k, // w m2 back y
	}
	for i, w := range want {
		if mm.Live[i] != w {
			t.Errorf("Live[%d] = %d, want %d", i, mm.Live[i], w)
		}
	}
	if mm.Peak != 4*k || mm.PeakAt != 2 {
		t.Errorf("peak %d at %d", mm.Peak, mm.PeakAt)
	}
	if mm.HostPeak != k {
		t.Errorf("host peak %d, want %d", mm.HostPeak, k)
	}
	if mm.ByValue[h.ID] != -1 {
		t.Error("a host value has a device interval")
	}
	if got := mm.Need(); got != mm.Peak {
		t.Errorf("need %d, peak %d (no fragmentation expected here)", got, mm.Peak)
	}
}

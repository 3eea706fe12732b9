package memory_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
)

// Empty blocks (tensors such as [4,0]) are allocated and freed among
// others; in a pool as large as all blocks together every allocation
// succeeds and no two live blocks with bytes overlap. Before the tail
// was looked for behind zero-size segments, some of these sequences
// failed with a free tail larger than the request (issue 12, item 8:
// planning resnet18 with --dim batch=0 panicked in Replay).
func TestBestFitEmptyBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 8))
	for trial := range 2000 {
		type block struct{ off, size int64 }
		var sizes []int64
		var total int64
		for range 40 {
			s := int64(0)
			if rng.IntN(2) == 0 {
				s = int64(1 + rng.IntN(32))
			}
			sizes = append(sizes, s)
			total += s
		}
		b := memory.NewBestFit(total)
		live := map[int]block{}
		next := 0
		for next < len(sizes) || len(live) > 0 {
			if next < len(sizes) && (len(live) == 0 || rng.IntN(3) > 0) {
				off, err := b.Alloc(sizes[next])
				if err != nil {
					t.Fatalf("trial %d: block %d of %d bytes: %v", trial, next, sizes[next], err)
				}
				if off < 0 || off+sizes[next] > total {
					t.Fatalf("trial %d: block %d at %d+%d outside the %d-byte pool", trial, next, off, sizes[next], total)
				}
				for k, o := range live {
					if sizes[next] > 0 && o.size > 0 && off < o.off+o.size && o.off < off+sizes[next] {
						t.Fatalf("trial %d: block %d [%d,%d) overlaps live block %d [%d,%d)", trial, next, off, off+sizes[next], k, o.off, o.off+o.size)
					}
				}
				live[next] = block{off, sizes[next]}
				next++
				continue
			}
			for k, o := range live { // any live block
				b.Free(o.off, o.size)
				delete(live, k)
				break
			}
		}
		if b.Used() != 0 {
			t.Fatalf("trial %d: %d bytes still used after freeing everything", trial, b.Used())
		}
	}
}

// A pool with no free segment (0 bytes, or all in use) still takes an
// empty block.
func TestBestFitEmptyBlockInFullPool(t *testing.T) {
	for _, pool := range []int64{0, 64} {
		b := memory.NewBestFit(pool)
		if pool > 0 {
			if _, err := b.Alloc(pool); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.Alloc(0); err != nil {
			t.Fatalf("pool %d, full: empty block refused: %v", pool, err)
		}
	}
}

// Graphs of empty tensors have a memory model: no panic in Replay (it
// panicked with "unbounded pool ran out" on Softmax over [4,0]).
func TestEmptyTensorsModel(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *B) *ir.Value
	}{
		{"softmax-4x0", func(b *B) *ir.Value { return b.Op("Softmax", V(b.Input("x", ir.Float, 4, 0))) }},
		{"relu-0", func(b *B) *ir.Value { return b.Op("Relu", V(b.Input("x", ir.Float, 0))) }},
		{"relu-relu-0", func(b *B) *ir.Value { return b.Op("Relu", V(b.Op("Relu", V(b.Input("x", ir.Float, 0))))) }},
		{"empty-then-full", func(b *B) *ir.Value {
			e := b.Op("Relu", V(b.Input("e", ir.Float, 0, 3)))
			r := b.Op("ReduceSum", V(e, b.Ints("axes", 0)))
			return b.Op("Add", V(r, b.Input("x", ir.Float, 3)))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := New(t)
			m := b.Return(c.build(b))
			mm, err := memory.Analyze(m.Graph, memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if need := mm.Need(); need != mm.Peak {
				t.Fatalf("need %d, peak %d", need, mm.Peak)
			}
			l := mm.MakeLayout()
			if _, err := mm.Placement(l); err != nil {
				t.Fatalf("the model's own layout: %v", err)
			}
		})
	}
}

// A crafted layout (a planned model's metadata) with offsets near 2^63
// or a negative pool is an error: off+bytes used to wrap negative and
// pass the bounds check (issue 12, item 9).
func TestLayoutOverflow(t *testing.T) {
	b := New(t)
	x := b.Input("x", ir.Float, 16)
	m := b.Return(b.Op("Relu", V(x)))
	mm, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := mm.MakeLayout()
	cases := []struct {
		name   string
		layout string
		want   string
	}{
		{"offset-near-2^63", `{"pool":1024,"values":{"x":9223372036854775000,"Relu1_0":0}}`, "outside the 1024-byte pool"},
		{"offset-max", `{"pool":1024,"values":{"x":0,"Relu1_0":9223372036854775807}}`, "outside the 1024-byte pool"},
		{"offset-negative", `{"pool":1024,"values":{"x":-256,"Relu1_0":0}}`, "outside the 1024-byte pool"},
		{"pool-negative", `{"pool":-1,"values":{"x":0,"Relu1_0":0}}`, "pool of -1 bytes"},
		{"pool-max-overlap", `{"pool":9223372036854775807,"values":{"x":0,"Relu1_0":0}}`, "overlaps"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := memory.DecodeLayout(c.layout)
			if err == nil {
				_, err = mm.Placement(l)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	if _, err := mm.Placement(good); err != nil || good.Pool > math.MaxInt32 {
		t.Fatalf("the model's own layout: pool %d, %v", good.Pool, err)
	}
}

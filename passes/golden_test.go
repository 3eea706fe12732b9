package passes_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
)

// -update rewrites the golden files of this package. The flag is
// registered in init, after every package-level variable, so another
// test file of the package may define it as a variable instead
// (`var update = flag.Bool("update", ...)`) without a clash.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func goldenUpdate() bool {
	f := flag.Lookup("update")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	b, _ := g.Get().(bool)
	return b
}

// goldenCase is a training graph planned into ratio × its depth-first
// peak.
type goldenCase struct {
	name  string
	ratio float64 // budget = peak after Schedule × ratio
	build func(t *testing.T) *ir.Model
}

// goldenCases are the end-to-end goldens: whole training steps through
// the whole pipeline, one CNN and one transformer. Targeted behaviours
// (the depth-first order, liveness, swap-in triggers, splits,
// recomputation, layout) are pinned by the small tests of testdata/*.ir
// (TestIRCheck), which a change to the dump format leaves alone.
var goldenCases = []goldenCase{
	// A small CNN: Conv, BatchNormalization (training mode), Relu,
	// MaxPool, Flatten, Gemm.
	{name: "convnet", ratio: 0.9, build: func(t *testing.T) *ir.Model {
		b := New(t)
		x := b.Input("x", ir.Float, 8, 3, 16, 16)
		c := b.Op("Conv", V(x, plantest.Weight(b, "conv.weight", 8, 3, 3, 3), plantest.Weight(b, "conv.bias", 8)), Ints("pads", 1, 1, 1, 1))
		bn := b.OpN("BatchNormalization", 3, V(c, plantest.Weight(b, "bn.weight", 8), plantest.Weight(b, "bn.bias", 8),
			b.Init("bn.running_mean", ir.TensorFromFloat64s(ir.Float, ir.Shape{8}, make([]float64, 8))),
			b.Init("bn.running_var", ir.TensorFromFloat64s(ir.Float, ir.Shape{8}, []float64{1, 1, 1, 1, 1, 1, 1, 1}))), Int("training_mode", 1))
		r := b.Op("Relu", V(bn[0]))
		p := b.Op("MaxPool", V(r), Ints("kernel_shape", 2, 2), Ints("strides", 2, 2))
		f := b.Op("Flatten", V(p))
		y := b.Op("Gemm", V(f, plantest.Weight(b, "fc.weight", 10, 512), plantest.Weight(b, "fc.bias", 10)), Int("transB", 1))
		return plantest.Train(t, b.Return(y))
	}},
	// The CI-sized BERT encoder of testdata/onnx (weights as inputs) at
	// batch 4.
	{name: "bert-base-small", ratio: 0.9, build: func(t *testing.T) *ir.Model {
		m, err := compiler.Import(filepath.Join("..", "testdata", "onnx", "bert-base-small.onnx"), compiler.Options{Batch: 4})
		if err != nil {
			t.Fatal(err)
		}
		return plantest.Train(t, m)
	}},
}

// goldenBudget is the case's budget: ratio × its peak after Schedule.
func goldenBudget(t *testing.T, c goldenCase) int64 {
	t.Helper()
	m := c.build(t)
	if err := passes.NewState(m, nil).Run(passes.Schedule); err != nil {
		t.Fatal(err)
	}
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return int64(float64(mem.Peak) * c.ratio)
}

// TestGoldenPasses runs the pipeline on each case up to and including
// each pass, with ir.Verify before the first pass and after every pass,
// and compares the IR dump after the pass (with the plan's report once
// there is one, its decisions after plan, and the static layout after
// layout) with testdata/passes/PASS/CASE.golden; the dump must also
// parse back to itself. Regenerate with
// `go test ./passes -run TestGoldenPasses -update` and review the diff.
func TestGoldenPasses(t *testing.T) {
	for _, c := range goldenCases {
		budget := goldenBudget(t, c)
		for k, p := range passes.Pipeline {
			t.Run(p.Name+"/"+c.name, func(t *testing.T) {
				m := c.build(t)
				if err := ir.Verify(m); err != nil {
					t.Fatalf("before %s: %v", passes.Pipeline[0].Name, err)
				}
				s := passes.NewState(m, &passes.Options{Budget: budget, Policy: policy.Tsplit, Order: passes.OrderDFS})
				s.Check = true // ir.Verify after every pass
				for _, q := range passes.Pipeline[:k+1] {
					if err := s.Run(q); err != nil {
						t.Fatal(err)
					}
				}
				var buf bytes.Buffer
				fmt.Fprintf(&buf, "# case %s after pass %s (budget %d bytes = %.2f × the depth-first peak)\n", c.name, p.Name, budget, c.ratio)
				if err := ir.DumpModel(&buf, m); err != nil {
					t.Fatal(err)
				}
				if s.Report != nil {
					goldenReport(&buf, s.Report, p == passes.PlanMemory)
				}
				if p == passes.Layout {
					if err := layoutText(&buf, m); err != nil {
						t.Fatal(err)
					}
				}
				goldenCompare(t, filepath.Join("..", "testdata", "passes", p.Name, c.name+".golden"), buf.Bytes())
				reparse(t, m)
			})
		}
	}
}

// goldenReport writes the plan's report (no times: floating-point
// results may differ in the last bits between architectures).
func goldenReport(buf *bytes.Buffer, r *passes.Report, decisions bool) {
	fmt.Fprintf(buf, "# report: base peak %d, peak %d, %d swapped, %d recomputed, %d split, %d rounds\n", r.BasePeak, r.Peak, r.Swapped, r.Recomputed, r.Split, r.Rounds)
	if !decisions {
		return
	}
	for _, d := range r.Decisions {
		fmt.Fprintf(buf, "# decision %s %q %d bytes (p_num %d, dim %d) at %s\n", d.Option, d.Tensor, d.Bytes, d.PNum, d.Dim, d.At)
	}
}

func goldenCompare(t *testing.T, path string, got []byte) {
	t.Helper()
	if goldenUpdate() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./passes -run TestGoldenPasses -update)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("%s differs from the output first at line %d:\n got: %s\nwant: %s\n(run go test ./passes -run TestGoldenPasses -update and review the diff)", path, i+1, g, w)
				break
			}
		}
	}
}

// TestGoldenLiveness runs the Liveness analysis on each case after
// Schedule and compares its result — M_i at every op and every tensor's
// interval — with testdata/passes/liveness/CASE.golden. The analysis
// must leave the IR as it was.
func TestGoldenLiveness(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			m := c.build(t)
			s := passes.NewState(m, nil)
			s.Check = true
			if err := s.Run(passes.Schedule); err != nil {
				t.Fatal(err)
			}
			var before, after bytes.Buffer
			if err := ir.Dump(&before, m.Graph); err != nil {
				t.Fatal(err)
			}
			res, err := s.Result(passes.Liveness)
			if err != nil {
				t.Fatal(err)
			}
			mem := res.(*memory.Model)
			if err := ir.Verify(m); err != nil {
				t.Fatal(err)
			}
			if err := ir.Dump(&after, m.Graph); err != nil {
				t.Fatal(err)
			}
			if before.String() != after.String() {
				t.Fatal("the analysis changed the graph")
			}
			var buf bytes.Buffer
			fmt.Fprintf(&buf, "# case %s: liveness after schedule\n", c.name)
			livenessText(&buf, mem)
			goldenCompare(t, filepath.Join("..", "testdata", "passes", "liveness", c.name+".golden"), buf.Bytes())
		})
	}
}

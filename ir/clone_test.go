package ir_test

import (
	"bytes"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
)

func dumpOf(t *testing.T, g *ir.Graph) string {
	t.Helper()
	var b bytes.Buffer
	if err := ir.Dump(&b, g); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A clone prints and verifies like the original, and rewriting it leaves
// the original untouched.
func TestClone(t *testing.T) {
	m, err := compiler.Import("../testdata/onnx/resnet18-small.onnx", compiler.Options{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "sgd"}); err != nil {
		t.Fatal(err)
	}
	// A removed op leaves holes in the ID tables; the clone keeps them.
	g := m.Graph
	tmp, err := g.NewOp("Identity", "", g.FreshName("tmp"), []*ir.Value{g.Order()[0].Output(0)}, []string{g.FreshName("tmp_out")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.InferAndSet(tmp, m.Opset("")); err != nil {
		t.Fatal(err)
	}
	if err := g.RemoveOp(tmp); err != nil {
		t.Fatal(err)
	}
	before := dumpOf(t, g)
	c := m.Clone()
	if err := ir.Verify(c); err != nil {
		t.Fatal(err)
	}
	if got := dumpOf(t, c.Graph); got != before {
		t.Fatal("the clone prints differently")
	}
	if c.Graph.NumValueIDs() != g.NumValueIDs() || c.Graph.NumOpIDs() != g.NumOpIDs() {
		t.Fatal("the clone renumbered values or ops")
	}
	// Rewrite the clone: the first op's output feeds a new op, the
	// second op goes, a value is renamed, metadata changes.
	cg := c.Graph
	first := cg.Order()[0]
	extra, err := cg.InsertOp(1, "Identity", "", cg.FreshName("extra"), []*ir.Value{first.Output(0)}, []string{cg.FreshName("extra_out")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.InferAndSet(extra, c.Opset("")); err != nil {
		t.Fatal(err)
	}
	if err := cg.Rename(first.Output(0), cg.FreshName("renamed")); err != nil {
		t.Fatal(err)
	}
	c.Meta["clone"] = "yes"
	if err := ir.Verify(c); err != nil {
		t.Fatal(err)
	}
	if got := dumpOf(t, g); got != before {
		t.Fatal("rewriting the clone changed the original")
	}
	if _, ok := m.Meta["clone"]; ok {
		t.Fatal("the clone shares the metadata map")
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
}

// Inserting outside the order is an error, not a panic.
func TestInsertOpOutOfRange(t *testing.T) {
	g := ir.NewGraph("g")
	x, err := g.AddInput("x", ir.Float, ir.Shape{2})
	if err != nil {
		t.Fatal(err)
	}
	for _, pos := range []int{-1, 1} {
		if _, err := g.InsertOp(pos, "Relu", "", "r", []*ir.Value{x}, []string{"y"}, nil); err == nil {
			t.Errorf("InsertOp at %d of an empty order succeeded", pos)
		}
	}
}

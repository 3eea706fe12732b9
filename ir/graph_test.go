package ir_test

import (
	"strings"
	"testing"

	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
)

// diamond: x → a(Relu) → b(Sigmoid), c(Tanh) → d(Add) → e(Relu)
func diamond(t *testing.T) (*ir.Model, map[string]*ir.Op) {
	b := New(t)
	x := b.Input("x", ir.Float, 2, 3)
	a := b.Op("Relu", V(x))
	bb := b.Op("Sigmoid", V(a))
	c := b.Op("Tanh", V(a))
	d := b.Op("Add", V(bb, c))
	e := b.Op("Relu", V(d))
	m := b.Return(e)
	ops := map[string]*ir.Op{"a": a.Def, "b": bb.Def, "c": c.Def, "d": d.Def, "e": e.Def}
	return m, ops
}

func TestDominators(t *testing.T) {
	m, ops := diamond(t)
	dom := ir.Dominators(m.Graph)
	pdom := ir.PostDominators(m.Graph)
	want := map[string]string{"b": "a", "c": "a", "d": "a", "e": "d"}
	for k, v := range want {
		if got := dom[ops[k].ID]; got != ops[v] {
			t.Errorf("idom(%s) = %v, want %s", k, got, v)
		}
	}
	if dom[ops["a"].ID] != nil {
		t.Errorf("idom(a) should be the virtual entry")
	}
	wantP := map[string]string{"a": "d", "b": "d", "c": "d", "d": "e"}
	for k, v := range wantP {
		if got := pdom[ops[k].ID]; got != ops[v] {
			t.Errorf("ipdom(%s) = %v, want %s", k, got, v)
		}
	}
}

func TestTopoOrderStable(t *testing.T) {
	m, ops := diamond(t)
	g := m.Graph
	order, err := ir.TopoOrder(g)
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range order {
		if g.Order()[i] != op {
			t.Fatalf("a topological order came back changed at %d", i)
		}
	}
	// Put c before b: still topological, so kept.
	swapped := []*ir.Op{ops["a"], ops["c"], ops["b"], ops["d"], ops["e"]}
	if err := g.SetOrder(swapped); err != nil {
		t.Fatal(err)
	}
	order, _ = ir.TopoOrder(g)
	if order[1] != ops["c"] {
		t.Fatal("tie-break did not follow the current order")
	}
	// A non-topological order is repaired deterministically.
	if err := g.SetOrder([]*ir.Op{ops["e"], ops["d"], ops["c"], ops["b"], ops["a"]}); err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err == nil || !strings.Contains(err.Error(), "before it is defined") {
		t.Fatalf("Verify should reject a use before definition, got %v", err)
	}
	order, _ = ir.TopoOrder(g)
	got := []*ir.Op{ops["a"], ops["c"], ops["b"], ops["d"], ops["e"]}
	for i := range got {
		if order[i] != got[i] {
			t.Fatalf("repaired order wrong at %d: %v", i, order)
		}
	}
}

func TestMutationKeepsUses(t *testing.T) {
	m, ops := diamond(t)
	g := m.Graph
	a := ops["a"].Output(0)
	if a.NumUses() != 2 {
		t.Fatalf("a has %d uses, want 2", a.NumUses())
	}
	x := g.Lookup("x")
	a.ReplaceAllUsesWith(x)
	if a.NumUses() != 0 || x.NumUses() != 3 {
		t.Fatalf("after RAUW: a %d uses, x %d uses", a.NumUses(), x.NumUses())
	}
	if err := g.RemoveOp(ops["d"]); err == nil {
		t.Fatal("removing an op whose output is used must fail")
	}
	if err := g.RemoveOp(ops["a"]); err != nil {
		t.Fatal(err)
	}
	if x.NumUses() != 2 {
		t.Fatalf("x has %d uses after removing a, want 2", x.NumUses())
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCatchesShapeLie(t *testing.T) {
	m, ops := diamond(t)
	ops["b"].Output(0).Shape = ir.Shape{2, 4}
	err := ir.Verify(m)
	if err == nil || !strings.Contains(err.Error(), "inference gives") {
		t.Fatalf("Verify missed a wrong shape: %v", err)
	}
}

func TestDumpFormat(t *testing.T) {
	m, _ := diamond(t)
	var sb strings.Builder
	if err := ir.Dump(&sb, m.Graph); err != nil {
		t.Fatal(err)
	}
	want := `graph "test"
  %0 = input "x" f32[2,3]
  %1 = Relu %0 "Relu1" : f32[2,3]
  %2 = Sigmoid %1 "Sigmoid2" : f32[2,3]
  %3 = Tanh %1 "Tanh3" : f32[2,3]
  %4 = Add %2 %3 "Add4" : f32[2,3]
  %5 = Relu %4 "Relu5" : f32[2,3]
  return %5
`
	if sb.String() != want {
		t.Fatalf("dump:\n%s\nwant:\n%s", sb.String(), want)
	}
}

func TestShapeBytesOverflow(t *testing.T) {
	if _, err := (ir.Shape{1 << 40, 1 << 40}).Bytes(ir.Float); err == nil {
		t.Fatal("overflow not caught")
	}
	if _, err := (ir.Shape{-1}).NumElements(); err == nil {
		t.Fatal("negative dim not caught")
	}
	if n, err := (ir.Shape{2, 3}).Bytes(ir.Float); err != nil || n != 24 {
		t.Fatalf("bytes = %d, %v", n, err)
	}
}

func TestAddOutput(t *testing.T) {
	b := New(t)
	x := b.Input("x", ir.Float, 1, 1, 4, 4)
	y := b.Op("MaxPool", V(x), Ints("kernel_shape", 2, 2), Ints("strides", 2, 2))
	m := b.Return(y)
	op := y.Def
	idx, err := m.Graph.AddOutput(op, 1, "indices", 17)
	if err != nil {
		t.Fatal(err)
	}
	if idx.DType != ir.Int64 || idx.Shape.String() != "[1,1,2,2]" {
		t.Fatalf("indices %v%v", idx.DType, idx.Shape)
	}
	if _, err := m.Graph.AddOutput(op, 1, "again", 17); err == nil {
		t.Fatal("adding an existing output succeeded")
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
}

func TestHalfFloatTensors(t *testing.T) {
	for _, dt := range []ir.DType{ir.Float16, ir.BFloat16} {
		tt := ir.TensorFromFloat64s(dt, ir.Shape{3}, []float64{1, -2.5, 0.375})
		got := tt.Float64s()
		if got[0] != 1 || got[1] != -2.5 || got[2] != 0.375 {
			t.Errorf("%v round trip: %v", dt, got)
		}
	}
}

// FreshName resumes its scan where the last one for the same base
// ended; a freed name must still be handed out again, as a scan from
// the start would.
func TestFreshNameReusesFreedNames(t *testing.T) {
	m, _ := diamond(t)
	g := m.Graph
	x := g.Lookup("x")
	var made []*ir.Op
	for i := 0; i < 4; i++ {
		name := g.FreshName("t")
		want := "t"
		if i > 0 {
			want = "t_" + string(rune('0'+i))
		}
		if name != want {
			t.Fatalf("FreshName #%d = %q, want %q", i, name, want)
		}
		op, err := g.NewOp("Relu", "", name, []*ir.Value{x}, []string{g.FreshName(name + "_y")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, op)
	}
	if got := g.FreshName("t"); got != "t_4" {
		t.Fatalf("FreshName after t … t_3 = %q, want t_4", got)
	}
	if err := g.RemoveOp(made[1]); err != nil { // frees t_1
		t.Fatal(err)
	}
	if got := g.FreshName("t"); got != "t_1" {
		t.Fatalf("FreshName after removing t_1 = %q, want t_1", got)
	}
	y := made[3].Output(0) // named t_3_y
	if got := g.FreshName(y.Name); got != "t_3_y_1" {
		t.Fatalf("FreshName(%q) = %q, want t_3_y_1", y.Name, got)
	}
	if err := g.Rename(y, "renamed"); err != nil {
		t.Fatal(err)
	}
	if got := g.FreshName("t_3_y"); got != "t_3_y" {
		t.Fatalf("FreshName after renaming t_3_y away = %q, want t_3_y", got)
	}
}

// MoveBefore puts appended ops right before their anchor, in the order
// given, and leaves every other op where it was.
func TestMoveBefore(t *testing.T) {
	m, ops := diamond(t)
	g := m.Graph
	x := g.Lookup("x")
	p, err := g.NewOp("Relu", "", "p", []*ir.Value{x}, []string{"p_y"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := g.NewOp("Relu", "", "q", []*ir.Value{p.Output(0)}, []string{"q_y"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []*ir.Op{p, q} {
		if err := ir.InferAndSet(o, m.Opset("")); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.MoveBefore([]*ir.Op{p, q}, ops["c"]); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range g.Order() {
		names = append(names, o.Name)
	}
	want := []string{ops["a"].Name, ops["b"].Name, "p", "q", ops["c"].Name, ops["d"].Name, ops["e"].Name}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("order after MoveBefore = %v, want %v", names, want)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	// Ops before the anchor cannot be moved this way.
	if err := g.MoveBefore([]*ir.Op{ops["a"]}, ops["e"]); err == nil {
		t.Fatal("moving an op that comes before the anchor must fail")
	}
}

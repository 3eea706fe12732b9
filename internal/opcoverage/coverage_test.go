package opcoverage

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"

	_ "github.com/tsplit/tsplit/autodiff" // the gradient slot
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/kernels"
	_ "github.com/tsplit/tsplit/passes"  // the split slot
	_ "github.com/tsplit/tsplit/profile" // the cost slot
)

// The slots every op must account for. A slot declared by a package this
// test does not import would be missing from ir.Slots(): the list makes
// that a failure rather than a silently shorter table.
var wantSlots = []string{"cost", "gradient", "kernel/cpu", "split"}

// TestCoverage fails on any op with a slot that is neither filled,
// derived nor opted out, and prints the table with -v.
func TestCoverage(t *testing.T) {
	slots := ir.Slots()
	var names []string
	for _, s := range slots {
		names = append(names, s.Name())
	}
	if strings.Join(names, " ") != strings.Join(wantSlots, " ") {
		t.Fatalf("slots %v, want %v: import the package that declares a new slot here", names, wantSlots)
	}
	var tab bytes.Buffer
	w := tabwriter.NewWriter(&tab, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "op\t%s\n", strings.Join(names, "\t"))
	count := map[string]map[ir.SlotState]int{}
	for _, n := range names {
		count[n] = map[ir.SlotState]int{}
	}
	var notes []string
	schemas := ir.Schemas()
	for _, sc := range schemas {
		row := []string{sc.Name()}
		for _, s := range slots {
			st, why := s.State(sc)
			count[s.Name()][st]++
			cell := map[ir.SlotState]string{ir.Filled: "yes", ir.Derived: "derived", ir.OptedOut: "opted out", ir.Missing: "MISSING"}[st]
			switch st {
			case ir.Missing:
				t.Errorf("%s has no %s entry: register one, or opt it out with the reason", sc.Name(), s.Name())
			case ir.OptedOut:
				notes = append(notes, fmt.Sprintf("%s %s: %s", sc.Name(), s.Name(), why))
			}
			row = append(row, cell)
		}
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	w.Flush()
	t.Logf("op registry: %d ops × %d slots\n%s", len(schemas), len(slots), tab.String())
	t.Logf("opted out:\n  %s", strings.Join(notes, "\n  "))
	var sum []string
	for _, n := range names {
		c := count[n]
		sum = append(sum, fmt.Sprintf("%s: %d filled, %d derived, %d opted out, %d missing",
			n, c[ir.Filled], c[ir.Derived], c[ir.OptedOut], c[ir.Missing]))
	}
	t.Logf("summary:\n  %s", strings.Join(sum, "\n  "))
}

// The traits are well formed: NoGrad names inputs the op has, Since is
// an opset tsplit reads, and an OffsetView says where (ir.Register
// checks ViewAt).
func TestTraitsWellFormed(t *testing.T) {
	for _, sc := range ir.Schemas() {
		for _, i := range sc.NoGrad {
			if i < 0 || (sc.MaxIn >= 0 && i >= sc.MaxIn) {
				t.Errorf("%s: NoGrad input %d, the op has at most %d", sc.Name(), i, sc.MaxIn)
			}
		}
		if sc.Since > ir.MaxOpset {
			t.Errorf("%s: Since %d is past the newest opset tsplit reads (%d)", sc.Name(), sc.Since, ir.MaxOpset)
		}
		if sc.Since != 0 && sc.Domain != "" {
			t.Errorf("%s: Since applies to the default domain only", sc.Name())
		}
	}
}

// sample builds one op of each type whose traits the tests below check
// and that the generic elementwise sample cannot: views, random ops.
var samples = map[string]func(b *irtest.B) *ir.Value{
	"Reshape": func(b *irtest.B) *ir.Value {
		return b.Op("Reshape", irtest.V(b.Input("x", ir.Float, 2, 3), b.Ints("s", 3, 2)))
	},
	"Flatten": func(b *irtest.B) *ir.Value {
		return b.Op("Flatten", irtest.V(b.Input("x", ir.Float, 2, 3, 2)), irtest.Int("axis", 2))
	},
	"Squeeze": func(b *irtest.B) *ir.Value {
		return b.Op("Squeeze", irtest.V(b.Input("x", ir.Float, 1, 6), b.Ints("a", 0)))
	},
	"Unsqueeze": func(b *irtest.B) *ir.Value {
		return b.Op("Unsqueeze", irtest.V(b.Input("x", ir.Float, 6), b.Ints("a", 0)))
	},
	"Identity": func(b *irtest.B) *ir.Value { return b.Op("Identity", irtest.V(b.Input("x", ir.Float, 2, 3))) },
	// Rows 1 and 2 of a [4, 3]: a contiguous run from byte 12.
	"Slice": func(b *irtest.B) *ir.Value {
		return b.Op("Slice", irtest.V(b.Input("x", ir.Float, 4, 3), b.Ints("s", 1), b.Ints("e", 3), b.Ints("a", 0)))
	},
	"Dropout": func(b *irtest.B) *ir.Value {
		ratio := b.Init("r", ir.TensorFromFloat64s(ir.Float, ir.Shape{}, []float64{0.5}))
		train := b.Init("t", &ir.Tensor{DType: ir.Bool, Shape: ir.Shape{}, Raw: []byte{1}})
		return b.OpN("Dropout", 2, irtest.V(b.Input("x", ir.Float, 4, 8), ratio, train))[0]
	},
}

// newB starts a model at the newest opset, so every op exists.
func newB(t *testing.T) *irtest.B {
	b := irtest.New(t)
	b.M.Opsets[""] = ir.MaxOpset
	return b
}

// build returns the sample op of sc's type.
func build(t *testing.T, sc *ir.Schema) *ir.Op {
	f := samples[sc.Type]
	if f == nil {
		t.Fatalf("%s: no sample op: add one to samples", sc.Name())
	}
	return f(newB(t)).Def
}

// feeds fills every graph input and initializer of op with data:
// distinct, non-zero values (so a lost or moved byte shows).
func feeds(t *testing.T, op *ir.Op) []*kernels.Tensor {
	in := make([]*kernels.Tensor, len(op.Inputs()))
	for i, v := range op.Inputs() {
		if v == nil {
			continue
		}
		if c, err := v.Data(); err == nil && c != nil {
			in[i] = kernels.FromIR(c)
			continue
		}
		x, err := kernels.NewTensor(v.DType, v.Shape)
		if err != nil {
			t.Fatal(err)
		}
		fill(x, i)
		in[i] = x
	}
	return in
}

func fill(x *kernels.Tensor, seed int) {
	for k := range x.Len() {
		f := float64((k*7+seed*3)%11+1) * 0.37
		if k%3 == 1 {
			f = -f
		}
		switch x.DType {
		case ir.Float:
			x.F32()[k] = float32(f)
		case ir.Double:
			x.F64()[k] = f
		case ir.Int64:
			x.I64()[k] = int64(k%5 + 1 + seed)
		case ir.Int32:
			x.I32()[k] = int32(k%5 + 1 + seed)
		case ir.Bool:
			x.Data[k] = byte((k + seed) % 2)
		}
	}
}

func eval(t *testing.T, op *ir.Op, in []*kernels.Tensor, step int64) []*kernels.Tensor {
	t.Helper()
	out, err := kernels.Eval(op, in, step)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A view's output is its input's bytes (from ViewOf's offset), and its
// cost is the view trait's (a launch for a whole-buffer view): the trait
// is the one answer to "is it a view".
func TestViews(t *testing.T) {
	eachWith(t, func(sc *ir.Schema) bool { return sc.View != ir.NotView }, func(t *testing.T, sc *ir.Schema) {
		op := build(t, sc)
		off, ok := ir.ViewOf(op)
		if !ok {
			t.Fatalf("the sample %s is not a view", op.Describe())
		}
		in := feeds(t, op)
		out := eval(t, op, in, 0)
		want := in[0].Data[off : off+int64(len(out[0].Data))]
		if !bytes.Equal(out[0].Data, want) {
			t.Errorf("the kernel's output is not input bytes [%d, %d)", off, off+int64(len(want)))
		}
		if st, _ := costSlot().State(sc); sc.View == ir.WholeView && st != ir.Derived {
			t.Errorf("the cost of a whole-buffer view is %s, want the view trait's (derived)", st)
		}
	})
}

// eachWith runs check as a subtest for every op whose schema has a trait.
func eachWith(t *testing.T, has func(*ir.Schema) bool, check func(t *testing.T, sc *ir.Schema)) {
	for _, sc := range ir.Schemas() {
		if has(sc) {
			t.Run(sc.Type, func(t *testing.T) { check(t, sc) })
		}
	}
}

func costSlot() ir.SlotInfo {
	for _, s := range ir.Slots() {
		if s.Name() == "cost" {
			return s
		}
	}
	panic("no cost slot")
}

// An InPlace op's kernel gives the same bytes when output 0 is input 0's
// buffer as when it is a buffer of its own.
func TestInPlace(t *testing.T) {
	eachWith(t, func(sc *ir.Schema) bool { return sc.InPlace }, func(t *testing.T, sc *ir.Schema) {
		op := elementwiseSample(t, sc)
		in := feeds(t, op)
		want := eval(t, op, in, 0)[0]
		if op.Output(0).DType != op.Input(0).DType {
			t.Fatalf("output 0 is %v, input 0 %v: not in place", op.Output(0).DType, op.Input(0).DType)
		}
		buf := &kernels.Tensor{DType: in[0].DType, Shape: in[0].Shape, Data: bytes.Clone(in[0].Data)}
		shared := append([]*kernels.Tensor{buf}, in[1:]...)
		k := kernels.Lookup(op.Domain, op.Type)
		if err := k.Run(&kernels.Ctx{Op: op, In: shared, Out: []*kernels.Tensor{buf}}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Data, want.Data) {
			t.Errorf("in place the kernel gives other bytes")
		}
	})
}

// elementwiseSample builds an op of an elementwise type on [2, 3]
// inputs of the first element type its kernel takes (float32 when it
// does): MinIn inputs, two for a variadic op.
func elementwiseSample(t *testing.T, sc *ir.Schema) *ir.Op {
	k := kernels.Lookup(sc.Domain, sc.Type)
	if k == nil {
		t.Fatalf("no CPU kernel")
	}
	dt := ir.Float
	if len(k.DTypes) > 0 && !contains(k.DTypes, ir.Float) {
		dt = k.DTypes[0]
	}
	b := newB(t)
	n := max(sc.MinIn, 1)
	if sc.MaxIn < 0 {
		n = 2
	}
	var ins []*ir.Value
	for i := range n {
		ins = append(ins, b.Input(fmt.Sprintf("x%d", i), dt, 2, 3))
	}
	var attrs []ir.Attr
	if sc.Type == "Mod" && dt.IsFloat() {
		attrs = append(attrs, irtest.Int("fmod", 1)) // required for floats
	}
	return b.Op(sc.Type, ins, attrs...).Def
}

func contains(ds []ir.DType, d ir.DType) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

// A Random op's kernel draws the same numbers for the same node and
// step (so a rerun reproduces them) and others at another step.
func TestRandom(t *testing.T) {
	eachWith(t, func(sc *ir.Schema) bool { return sc.Random }, func(t *testing.T, sc *ir.Schema) {
		op := build(t, sc)
		in := feeds(t, op)
		a, b, c := eval(t, op, in, 1), eval(t, op, in, 1), eval(t, op, in, 2)
		if !bytes.Equal(a[0].Data, b[0].Data) {
			t.Errorf("two runs at the same step differ")
		}
		if bytes.Equal(a[0].Data, c[0].Data) {
			t.Errorf("runs at steps 1 and 2 draw the same")
		}
	})
}

package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/onnxpb"
	"github.com/tsplit/tsplit/passes"
)

// Shape tensors (Reshape's target shape, Slice's bounds, Expand's
// shape, ConstantOfShape's input) are compile-time constants the step
// computes, as PyTorch exports them: Shape → Gather → Unsqueeze →
// Concat. No policy may evict them: a restored copy or a clone is not
// constant, and the rewritten graph lost its static shapes ("does not
// verify: … is not a compile-time constant", issue 12 item 1).

// attentionExport is a two-layer self-attention model written the way
// torch.onnx exports nn.MultiheadAttention: every shape the block needs
// is computed from the input's Shape at run time and folded by the
// frontend. x is [batch, 8, 16]; the logits are [batch, 8, 10].
func attentionExport() *onnxpb.ModelProto {
	const t, d, heads, classes = 8, 16, 2, 10
	var nodes []*onnxpb.NodeProto
	node := func(op, name string, in []string, out string, attrs ...*onnxpb.AttributeProto) string {
		nodes = append(nodes, onnxtest.Node(op, name, in, []string{out}, attrs...))
		return out
	}
	var inits []*onnxpb.TensorProto
	ints := func(name string, vals ...int64) string {
		inits = append(inits, onnxtest.Int64Tensor(name, []int64{int64(len(vals))}, vals))
		return name
	}
	scalar := func(name string, v int64) string {
		inits = append(inits, onnxtest.Int64Tensor(name, nil, []int64{v}))
		return name
	}
	weight := func(name string, dims ...int64) string {
		n := int64(1)
		for _, x := range dims {
			n *= x
		}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = float32((i*7919)%97-48) / 400
		}
		inits = append(inits, onnxtest.FloatTensor(name, dims, vals))
		return name
	}
	zero, one, two := scalar("zero", 0), scalar("one", 1), scalar("two", 2)
	axes0 := ints("axes0", 0)
	h := "x"
	for l := range 2 {
		p := fmt.Sprintf("l%d/", l)
		// Shape arithmetic: batch and sequence length from the input.
		s := node("Shape", p+"Shape", []string{h}, p+"shape")
		b := node("Gather", p+"GatherB", []string{s, zero}, p+"b", onnxtest.Int("axis", 0))
		tt := node("Gather", p+"GatherT", []string{s, one}, p+"t", onnxtest.Int("axis", 0))
		dd := node("Gather", p+"GatherD", []string{s, two}, p+"d", onnxtest.Int("axis", 0))
		b1 := node("Unsqueeze", p+"UnsqB", []string{b, axes0}, p+"b1")
		t1 := node("Unsqueeze", p+"UnsqT", []string{tt, axes0}, p+"t1")
		heads4 := node("Concat", p+"Concat4", []string{b1, t1, ints(p+"h", heads), ints(p+"hd", d/heads)}, p+"shape4", onnxtest.Int("axis", 0))
		back3 := node("Concat", p+"Concat3", []string{b1, t1, ints(p+"dm", d)}, p+"shape3", onnxtest.Int("axis", 0))
		// Slice bounds of q, k, v computed from the model dimension.
		d1 := node("Unsqueeze", p+"UnsqD", []string{dd, axes0}, p+"d1")
		d2 := node("Mul", p+"Mul2", []string{d1, ints(p+"c2", 2)}, p+"d2")
		d3 := node("Mul", p+"Mul3", []string{d1, ints(p+"c3", 3)}, p+"d3")
		qkv := node("MatMul", p+"in_proj", []string{h, weight(p+"w_in", d, 3*d)}, p+"qkv")
		ax2 := ints(p+"ax2", 2)
		q := node("Slice", p+"SliceQ", []string{qkv, ints(p+"s0", 0), d1, ax2}, p+"q")
		k := node("Slice", p+"SliceK", []string{qkv, d1, d2, ax2}, p+"k")
		v := node("Slice", p+"SliceV", []string{qkv, d2, d3, ax2}, p+"v")
		q = node("Reshape", p+"ReshapeQ", []string{q, heads4}, p+"q4")
		k = node("Reshape", p+"ReshapeK", []string{k, heads4}, p+"k4")
		v = node("Reshape", p+"ReshapeV", []string{v, heads4}, p+"v4")
		q = node("Transpose", p+"TransQ", []string{q}, p+"qt", onnxtest.Ints("perm", 0, 2, 1, 3))
		k = node("Transpose", p+"TransK", []string{k}, p+"kt", onnxtest.Ints("perm", 0, 2, 3, 1))
		v = node("Transpose", p+"TransV", []string{v}, p+"vt", onnxtest.Ints("perm", 0, 2, 1, 3))
		sc := node("MatMul", p+"Scores", []string{q, k}, p+"scores")
		sm := node("Softmax", p+"Softmax", []string{sc}, p+"attn", onnxtest.Int("axis", -1))
		o := node("MatMul", p+"Context", []string{sm, v}, p+"ctx")
		o = node("Transpose", p+"TransO", []string{o}, p+"ctxt", onnxtest.Ints("perm", 0, 2, 1, 3))
		o = node("Reshape", p+"ReshapeO", []string{o, back3}, p+"ctx3")
		// A position bias expanded to the input's shape, and a mask of
		// ones built from it: Expand and ConstantOfShape read shapes.
		pos := node("Expand", p+"Expand", []string{weight(p+"pos", 1, t, d), s}, p+"posx")
		mask := node("ConstantOfShape", p+"Ones", []string{s}, p+"ones", &onnxpb.AttributeProto{
			Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(),
			T: onnxtest.FloatTensor("", []int64{1}, []float32{1}),
		})
		o = node("Add", p+"AddPos", []string{o, pos}, p+"biased")
		o = node("Mul", p+"Mask", []string{o, mask}, p+"masked")
		o = node("Add", p+"Residual", []string{o, h}, p+"res")
		f := node("MatMul", p+"ff1", []string{o, weight(p+"w1", d, 4*d)}, p+"ff1")
		f = node("Relu", p+"relu", []string{f}, p+"ff1r")
		f = node("MatMul", p+"ff2", []string{f, weight(p+"w2", 4*d, d)}, p+"ff2")
		h = node("Add", p+"Residual2", []string{f, o}, p+"out")
	}
	node("MatMul", "head", []string{h, weight("w_head", d, classes)}, "logits")
	return onnxtest.Graph(nodes,
		[]*onnxpb.ValueInfoProto{onnxtest.Input("x", onnxtest.Float, "batch", t, d)},
		[]*onnxpb.ValueInfoProto{onnxtest.Input("logits", onnxtest.Float, "batch", t, classes)},
		inits...)
}

// planEveryBudget plans the step that step builds with every policy at
// budgets from its unplanned peak down to what stays resident (weights,
// optimizer state, inputs) by tenths of the difference, and checks
// that each plan verifies and reloads from its ONNX file (the loader
// folds the shapes again, so a shape tensor turned into a restored copy
// fails there), and that each failure is about the budget. It returns
// the least budget each policy planned; the policies in mustPlan must
// have planned one below the peak.
func planEveryBudget(t *testing.T, step func() *ir.Model, batch int64, mustPlan ...string) map[string]int64 {
	t.Helper()
	base := step()
	peak := plantest.Peak(t, base)
	mem, err := memory.Analyze(base.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	least := map[string]int64{}
	for _, name := range Names() {
		pol, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for k := int64(9); k >= 1; k-- {
			budget := mem.Resident + (peak-mem.Resident)*k/10
			m := step()
			res, err := Plan(context.Background(), m, pol, Options{Budget: budget})
			if err != nil {
				if !budgetFailure(err, res) {
					t.Errorf("%s at %d bytes: %v", name, budget, err)
				}
				continue
			}
			least[name] = budget
			mp, err := backend.ToProto(m)
			if err != nil {
				t.Fatalf("%s at %d bytes: %v", name, budget, err)
			}
			if _, err := compiler.FromProto(mp, "", compiler.Options{Batch: batch}); err != nil {
				t.Errorf("%s at %d bytes: the planned model does not load: %v", name, budget, err)
			}
		}
	}
	for _, name := range mustPlan {
		if _, ok := least[name]; !ok {
			t.Errorf("%s planned no budget below the peak of %d bytes", name, peak)
		}
	}
	return least
}

// budgetFailure reports whether a failed plan is about the budget (the
// planner's infeasibility, or a policy that stopped with its reason
// before its plan fit), not a broken rewrite.
func budgetFailure(err error, res *Result) bool {
	if strings.Contains(err.Error(), "verify") || strings.Contains(err.Error(), "compile-time constant") {
		return false
	}
	var ie *passes.InfeasibleError
	var lim *SubBatchLimitError
	if errors.As(err, &ie) || errors.As(err, &lim) {
		return true
	}
	r := res.Report
	return r != nil && r.Planned == nil && r.BasePeak > r.Budget
}

func TestShapeTensorsNeverEvicted(t *testing.T) {
	const batch = 16
	step := func() *ir.Model {
		m, err := compiler.FromProto(attentionExport(), "", compiler.Options{Batch: batch})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "adam"}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	pinned := 0
	for _, v := range step().Graph.Values() {
		if v != nil && v.Pinned() {
			pinned++
		}
	}
	if pinned == 0 {
		t.Fatal("the model has no pinned shape tensor: it does not test what it should")
	}
	// Base keeps everything; vDNN-conv and SuperNeurons act around
	// convolutions, which the model has none of.
	least := planEveryBudget(t, step, batch, "tsplit", "tsplit-nosplit", "capuchin", "checkpoint", "modnn", "tflms", "vdnn-all")
	t.Logf("%d pinned values; least budget planned per policy: %v", pinned, least)
}

// TestShapeTensorsNeverEvictedTorch plans the PyTorch TransformerEncoder
// export (testdata/torch/transformer.onnx) with every policy down to its
// smallest feasible budget.
func TestShapeTensorsNeverEvictedTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("plans the transformer export 90 times")
	}
	path := oracle.TorchModel(t, "transformer")
	const batch = 4
	step := func() *ir.Model {
		m, err := compiler.Import(path, compiler.Options{Batch: batch})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "adam"}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// With Adam the weights and their state make the peak: only the
	// policies that evict more than the forward feature maps go below.
	least := planEveryBudget(t, step, batch, "tsplit", "tsplit-nosplit", "modnn")
	t.Logf("least budget planned per policy: %v", least)
}

package ir

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tsplit/tsplit/internal/oracle"
)

// TestAgainstONNXShapeInference compares the inference rules with
// onnx.shape_inference on random valid nodes. It runs only where
// /usr/bin/python3 can import onnx (python3-onnx), and not with -short.
//
// The nodes are chosen where ONNX's own inference is authoritative for
// the opsets the installed onnx knows: pooling with ceil_mode only where
// no window can start in the right padding (older onnx releases lack
// that rule), ConvTranspose SAME only where the spec formula and
// onnx's agree.

type onnxIn struct {
	Name  string    `json:"name"`
	DType int       `json:"dtype"`
	Shape []int64   `json:"shape"`
	Const bool      `json:"const"`
	Data  []float64 `json:"data"`
}

type onnxAttr struct {
	Name string  `json:"name"`
	Kind string  `json:"kind"` // i, is, f, s
	I    int64   `json:"i"`
	Is   []int64 `json:"is"`
	F    float64 `json:"f"`
	S    string  `json:"s"`
}

type onnxSpec struct {
	Op    string     `json:"op"`
	Opset int64      `json:"opset"`
	Ins   []*onnxIn  `json:"ins"`
	Attrs []onnxAttr `json:"attrs"`
	NOut  int        `json:"nout"`

	ours []Shape
}

const onnxScript = `
import json, sys
import onnx
from onnx import helper, shape_inference

specs = json.load(open(sys.argv[1]))
res = []
for sp in specs:
    inputs, inits, names = [], [], []
    for x in sp["ins"]:
        if x is None:
            names.append("")
            continue
        names.append(x["name"])
        if x["const"]:
            data = x["data"] or []
            if x["dtype"] not in (1, 11):
                data = [int(v) for v in data]
            inits.append(helper.make_tensor(x["name"], x["dtype"], x["shape"], data))
        else:
            inputs.append(helper.make_tensor_value_info(x["name"], x["dtype"], x["shape"]))
    attrs = {}
    for a in sp["attrs"] or []:
        attrs[a["name"]] = {"i": a["i"], "is": a["is"], "f": float(a["f"]), "s": a["s"]}[a["kind"]]
    outs = ["out%d" % i for i in range(sp["nout"])]
    node = helper.make_node(sp["op"], names, outs, **attrs)
    g = helper.make_graph([node], "g", inputs, [], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", sp["opset"])])
    try:
        r = shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
    except Exception as e:
        res.append({"err": str(e)})
        continue
    got = {}
    for vi in r.graph.value_info:
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            got[vi.name] = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
    res.append({"shapes": [got.get(o) for o in outs]})
json.dump(res, open(sys.argv[2], "w"))
`

func TestAgainstONNXShapeInference(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	py := oracle.PythonONNX(t)
	specs := onnxSpecs(rand.New(rand.NewPCG(7, 11)))
	// Our side.
	for _, sp := range specs {
		b := newTG(t, sp.Opset)
		ins := make([]*Value, len(sp.Ins))
		for i, x := range sp.Ins {
			switch {
			case x == nil:
			case x.Const:
				ins[i] = b.init(TensorFromFloat64s(DType(x.DType), Shape(x.Shape), x.Data))
			default:
				ins[i] = b.in(DType(x.DType), x.Shape...)
			}
			if x != nil {
				x.Name = ins[i].Name
			}
		}
		var attrs []Attr
		for _, a := range sp.Attrs {
			switch a.Kind {
			case "i":
				attrs = append(attrs, attrI(a.Name, a.I))
			case "is":
				attrs = append(attrs, attrIs(a.Name, a.Is...))
			case "f":
				attrs = append(attrs, attrF(a.Name, float32(a.F)))
			case "s":
				attrs = append(attrs, attrS(a.Name, a.S))
			}
		}
		op, err := b.op(sp.Op, ins, sp.NOut, attrs...)
		if err != nil {
			t.Fatalf("%s: valid node rejected: %v (spec %s)", sp.Op, err, specJSON(sp))
		}
		for _, o := range op.Outputs() {
			sp.ours = append(sp.ours, o.Shape)
		}
	}
	dir := t.TempDir()
	in, out, script := filepath.Join(dir, "in.json"), filepath.Join(dir, "out.json"), filepath.Join(dir, "infer.py")
	data, err := json.Marshal(specs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(onnxScript), 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(py, script, in, out).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, msg)
	}
	var res []struct {
		Err    string    `json:"err"`
		Shapes [][]int64 `json:"shapes"`
	}
	data, err = os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	compared := 0
	for i, sp := range specs {
		r := res[i]
		if r.Err != "" {
			t.Errorf("%s: onnx rejects a node tsplit accepts: %s\n spec %s", sp.Op, r.Err, specJSON(sp))
			continue
		}
		for k, want := range r.Shapes {
			if want == nil {
				continue // onnx could not infer (e.g. needs data it does not propagate)
			}
			if !sp.ours[k].Equal(Shape(want)) {
				t.Errorf("%s output %d: tsplit %v, onnx %v\n spec %s", sp.Op, k, sp.ours[k], want, specJSON(sp))
			}
			compared++
		}
	}
	t.Logf("compared %d outputs of %d nodes with onnx.shape_inference", compared, len(specs))
}

func specJSON(sp *onnxSpec) string {
	b, _ := json.Marshal(sp)
	return string(b)
}

// onnxSpecs generates valid random nodes.
func onnxSpecs(r *rand.Rand) []*onnxSpec {
	var specs []*onnxSpec
	in := func(shape ...int64) *onnxIn { return &onnxIn{DType: int(Float), Shape: shape} }
	cst := func(vals ...int64) *onnxIn {
		f := make([]float64, len(vals))
		for i, v := range vals {
			f[i] = float64(v)
		}
		return &onnxIn{DType: int(Int64), Shape: []int64{int64(len(vals))}, Const: true, Data: f}
	}
	ai := func(n string, v int64) onnxAttr { return onnxAttr{Name: n, Kind: "i", I: v} }
	ais := func(n string, v ...int64) onnxAttr { return onnxAttr{Name: n, Kind: "is", Is: v} }
	as := func(n, v string) onnxAttr { return onnxAttr{Name: n, Kind: "s", S: v} }
	rn := func(lo, hi int) int64 { return int64(lo + r.IntN(hi-lo+1)) }
	add := func(op string, opset int64, nout int, ins []*onnxIn, attrs ...onnxAttr) {
		specs = append(specs, &onnxSpec{Op: op, Opset: opset, Ins: ins, Attrs: attrs, NOut: nout})
	}
	autoPads := []string{"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"}

	for i := 0; i < 150; i++ { // Conv
		ns := int(rn(1, 3))
		group := rn(1, 3)
		cin, m := group*rn(1, 3), group*rn(1, 3)
		k, st, dil, pads, x := make([]int64, ns), make([]int64, ns), make([]int64, ns), make([]int64, 2*ns), []int64{rn(1, 2), cin}
		w := []int64{m, cin / group}
		ap := autoPads[r.IntN(4)]
		for d := 0; d < ns; d++ {
			k[d], st[d], dil[d] = rn(1, 4), rn(1, 3), rn(1, 2)
			if ap == "NOTSET" {
				pads[d], pads[d+ns] = rn(0, 2), rn(0, 2)
			}
			ek := (k[d]-1)*dil[d] + 1
			x = append(x, max(1, ek-pads[d]-pads[d+ns])+rn(0, 9))
			w = append(w, k[d])
		}
		attrs := []onnxAttr{ais("strides", st...), ais("dilations", dil...), ai("group", group)}
		if ap == "NOTSET" {
			attrs = append(attrs, ais("pads", pads...))
		} else {
			attrs = append(attrs, as("auto_pad", ap))
		}
		if r.IntN(2) == 0 {
			attrs = append(attrs, ais("kernel_shape", k...))
		}
		add("Conv", 17, 1, []*onnxIn{in(x...), in(w...)}, attrs...)
	}
	for i := 0; i < 120; i++ { // ConvTranspose
		ns := int(rn(1, 2))
		group := rn(1, 2)
		cin := group * rn(1, 3)
		x, w := []int64{1, cin}, []int64{cin, rn(1, 3)}
		k, st, dil, pads, opad := make([]int64, ns), make([]int64, ns), make([]int64, ns), make([]int64, 2*ns), make([]int64, ns)
		ap := autoPads[r.IntN(4)]
		for d := 0; d < ns; d++ {
			k[d], st[d], dil[d] = rn(1, 4), rn(1, 3), rn(1, 2)
			ek := (k[d]-1)*dil[d] + 1
			if ap == "SAME_UPPER" || ap == "SAME_LOWER" {
				for ek < st[d] {
					k[d]++
					ek = (k[d]-1)*dil[d] + 1
				}
			} else {
				opad[d] = rn(0, int(max(st[d], dil[d])-1))
			}
			if ap == "NOTSET" {
				pads[d], pads[d+ns] = rn(0, 1), rn(0, 1)
			}
			x = append(x, rn(2, 8))
			w = append(w, k[d])
		}
		attrs := []onnxAttr{ais("strides", st...), ais("dilations", dil...), ai("group", group), ais("output_padding", opad...)}
		if ap == "NOTSET" {
			attrs = append(attrs, ais("pads", pads...))
		} else {
			attrs = append(attrs, as("auto_pad", ap))
		}
		add("ConvTranspose", 17, 1, []*onnxIn{in(x...), in(w...)}, attrs...)
	}
	for i := 0; i < 150; i++ { // pooling
		op := []string{"MaxPool", "AveragePool"}[r.IntN(2)]
		ns := int(rn(1, 3))
		k, st, dil, pads, x := make([]int64, ns), make([]int64, ns), make([]int64, ns), make([]int64, 2*ns), []int64{rn(1, 2), rn(1, 4)}
		ap := autoPads[r.IntN(4)]
		ceil := r.IntN(2) == 1
		for d := 0; d < ns; d++ {
			k[d], st[d], dil[d] = rn(1, 4), rn(1, 3), 1
			if op == "MaxPool" {
				dil[d] = rn(1, 2)
			}
			if ceil {
				st[d] = min(st[d], k[d]) // no window can then start in the padding
			}
			if ap == "NOTSET" && !ceil {
				pads[d], pads[d+ns] = rn(0, int(k[d]-1)), rn(0, int(k[d]-1))
			}
			ek := (k[d]-1)*dil[d] + 1
			x = append(x, ek+rn(0, 9))
		}
		attrs := []onnxAttr{ais("kernel_shape", k...), ais("strides", st...)}
		if op == "MaxPool" {
			attrs = append(attrs, ais("dilations", dil...))
		} else {
			attrs = append(attrs, ai("count_include_pad", int64(r.IntN(2))))
		}
		if ceil {
			attrs = append(attrs, ai("ceil_mode", 1))
		}
		if ap == "NOTSET" {
			attrs = append(attrs, ais("pads", pads...))
		} else {
			attrs = append(attrs, as("auto_pad", ap))
		}
		nout := 1
		if op == "MaxPool" {
			nout = int(rn(1, 2))
		}
		add(op, 17, nout, []*onnxIn{in(x...)}, attrs...)
	}
	randShape := func(rank int) []int64 {
		s := make([]int64, rank)
		for i := range s {
			s[i] = rn(1, 5)
		}
		return s
	}
	for i := 0; i < 60; i++ { // MatMul
		ra, rb := int(rn(1, 4)), int(rn(1, 4))
		kk := rn(1, 6)
		a, b := randShape(ra), randShape(rb)
		a[ra-1] = kk
		if rb == 1 {
			b[0] = kk
		} else {
			b[rb-2] = kk
		}
		// make batch dims broadcastable
		for d := 0; d < min(ra, rb)-2; d++ {
			ia, ib := ra-3-d, rb-3-d
			if r.IntN(2) == 0 {
				a[ia] = 1
			} else {
				b[ib] = a[ia]
			}
		}
		add("MatMul", 13, 1, []*onnxIn{in(a...), in(b...)})
	}
	for i := 0; i < 60; i++ { // Slice
		rank := int(rn(1, 4))
		x := randShape(rank)
		for d := range x {
			x[d] = rn(1, 10) // onnx 1.12 gets negative steps over empty dimensions wrong
		}
		n := int(rn(1, rank))
		axes := r.Perm(rank)[:n]
		var st, en, ax, sp []int64
		for _, a := range axes {
			st = append(st, rn(-12, 12))
			en = append(en, []int64{rn(-12, 12), 1 << 40, -(1 << 40)}[r.IntN(3)])
			ax = append(ax, int64(a)-int64(rank*r.IntN(2)))
			s := rn(-3, 3)
			if s == 0 {
				s = 1
			}
			sp = append(sp, s)
		}
		add("Slice", 13, 1, []*onnxIn{in(x...), cst(st...), cst(en...), cst(ax...), cst(sp...)})
	}
	for i := 0; i < 40; i++ { // Reshape
		x := randShape(int(rn(1, 4)))
		total := numElems(Shape(x))
		var target []int64
		rest := total
		for rest > 1 && len(target) < 3 {
			f := rn(1, int(min(rest, 6)))
			for rest%f != 0 {
				f--
			}
			target = append(target, f)
			rest /= f
		}
		target = append(target, rest)
		zero := -1
		if target[0] == x[0] && r.IntN(2) == 0 {
			target[0], zero = 0, 0 // 0 copies input dimension 0
		}
		if j := r.IntN(len(target)); j != zero {
			target[j] = -1
		}
		if numElems(Shape(x)) == 0 {
			continue
		}
		add("Reshape", 14, 1, []*onnxIn{in(x...), cst(target...)})
	}
	for i := 0; i < 60; i++ { // reductions, Transpose, Flatten, Gather, Pad, Split, Squeeze, Unsqueeze, Tile, Expand, Concat
		rank := int(rn(1, 4))
		x := randShape(rank)
		ax := rn(-rank, rank-1)
		switch i % 12 {
		case 0:
			add("ReduceSum", 13, 1, []*onnxIn{in(x...), cst(ax)}, ai("keepdims", int64(r.IntN(2))))
		case 1:
			add("ReduceMean", 17, 1, []*onnxIn{in(x...)}, ais("axes", ax), ai("keepdims", int64(r.IntN(2))))
		case 2:
			perm := r.Perm(rank)
			p := make([]int64, rank)
			for k, v := range perm {
				p[k] = int64(v)
			}
			add("Transpose", 13, 1, []*onnxIn{in(x...)}, ais("perm", p...))
		case 3:
			add("Flatten", 13, 1, []*onnxIn{in(x...)}, ai("axis", rn(-rank, rank)))
		case 4:
			add("Gather", 13, 1, []*onnxIn{in(x...), {DType: int(Int64), Shape: randShape(int(rn(0, 2)))}}, ai("axis", ax))
		case 5:
			pads := make([]int64, 2*rank)
			for k := range pads {
				pads[k] = rn(0, 3)
			}
			add("Pad", 13, 1, []*onnxIn{in(x...), cst(pads...)}, as("mode", "constant"))
		case 6:
			a := int(ax)
			if a < 0 {
				a += rank
			}
			p1 := rn(0, int(x[a]))
			add("Split", 13, 2, []*onnxIn{in(x...), cst(p1, x[a]-p1)}, ai("axis", ax))
		case 7:
			x[int(ax+int64(rank))%rank] = 1
			add("Squeeze", 13, 1, []*onnxIn{in(x...), cst(ax)})
		case 8:
			add("Unsqueeze", 13, 1, []*onnxIn{in(x...), cst(rn(-rank-1, rank))})
		case 9:
			reps := make([]int64, rank)
			for k := range reps {
				reps[k] = rn(1, 3)
			}
			add("Tile", 13, 1, []*onnxIn{in(x...), cst(reps...)})
		case 10:
			tgt := append([]int64{rn(1, 3)}, x...)
			x[0] = 1
			add("Expand", 13, 1, []*onnxIn{in(x...), cst(tgt...)})
		case 11:
			y := append([]int64(nil), x...)
			a := int(ax+int64(rank)) % rank
			y[a] = rn(1, 4)
			add("Concat", 13, 1, []*onnxIn{in(x...), in(y...)}, ai("axis", ax))
		}
	}
	for i := 0; i < 20; i++ { // Gemm
		m, k, n := rn(1, 6), rn(1, 6), rn(1, 6)
		ta, tb := int64(r.IntN(2)), int64(r.IntN(2))
		a, b := []int64{m, k}, []int64{k, n}
		if ta == 1 {
			a = []int64{k, m}
		}
		if tb == 1 {
			b = []int64{n, k}
		}
		ins := []*onnxIn{in(a...), in(b...)}
		if r.IntN(2) == 0 {
			ins = append(ins, in([][]int64{{n}, {m, 1}, {m, n}, {1}}[r.IntN(4)]...))
		}
		add("Gemm", 13, 1, ins, ai("transA", ta), ai("transB", tb))
	}
	return specs
}

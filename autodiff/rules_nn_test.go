package autodiff

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/kernels"
)

// nnAt sets the model's opset (0: leave 17) before the case builds.
func nnAt(opset int64, build func(b *irtest.B) ([]*ir.Value, []*ir.Value)) func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
	return func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		if opset != 0 {
			b.M.Opsets[""] = opset
		}
		return build(b)
	}
}

// ---- Conv and ConvTranspose ----

// convSpec is one Conv or ConvTranspose gradient check: X, W and
// (optionally) B are differentiated.
type convSpec struct {
	x, w      []int64
	bias      bool
	transpose bool
	attrs     []ir.Attr
}

func (s convSpec) name() string {
	typ := "Conv"
	if s.transpose {
		typ = "ConvTranspose"
	}
	var a []string
	for _, at := range s.attrs {
		switch at.Type {
		case ir.AttrInts:
			a = append(a, fmt.Sprintf("%s%v", at.Name, at.Ints))
		case ir.AttrInt:
			a = append(a, fmt.Sprintf("%s=%d", at.Name, at.Int))
		case ir.AttrString:
			a = append(a, fmt.Sprintf("%s=%s", at.Name, at.String))
		}
	}
	return fmt.Sprintf("%s/x%v/w%v/b=%v/%s", typ, s.x, s.w, s.bias, strings.Join(a, ","))
}

func (s convSpec) group() int64 {
	for _, a := range s.attrs {
		if a.Name == "group" {
			return a.Int
		}
	}
	return 1
}

func (s convSpec) gradCase() gradCase {
	return gradCase{name: s.name(), build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		x := b.Input("x", ir.Double, s.x...)
		w := b.Input("w", ir.Double, s.w...)
		wrt := irtest.V(x, w)
		typ, ch := "Conv", s.w[0]
		if s.transpose {
			typ, ch = "ConvTranspose", s.w[1]*s.group()
		}
		ins := irtest.V(x, w)
		if s.bias {
			bias := b.Input("b", ir.Double, ch)
			ins = append(ins, bias)
			wrt = append(wrt, bias)
		}
		return wrt, irtest.V(b.Op(typ, ins, s.attrs...))
	}}
}

func nnAttrInts(name string, v ...int64) ir.Attr { return irtest.Ints(name, v...) }

func TestConvGradients(t *testing.T) {
	var cases []gradCase
	for _, s := range []convSpec{
		// Strides, asymmetric pads, bias.
		{x: []int64{2, 3, 5, 6}, w: []int64{4, 3, 3, 3}, bias: true, attrs: []ir.Attr{nnAttrInts("strides", 2, 1), nnAttrInts("pads", 1, 0, 2, 1)}},
		// Dilations with SAME_UPPER / SAME_LOWER (odd total padding).
		{x: []int64{1, 2, 6, 5}, w: []int64{3, 2, 3, 2}, attrs: []ir.Attr{nnAttrInts("dilations", 2, 1), nnAttrInts("strides", 1, 2), irtest.String("auto_pad", "SAME_UPPER")}},
		{x: []int64{1, 2, 7, 6}, w: []int64{2, 2, 2, 3}, attrs: []ir.Attr{nnAttrInts("strides", 2, 2), irtest.String("auto_pad", "SAME_LOWER")}},
		// VALID with a stride leaving the input's tail unread.
		{x: []int64{2, 2, 8, 7}, w: []int64{3, 2, 2, 2}, bias: true, attrs: []ir.Attr{nnAttrInts("strides", 3, 2), irtest.String("auto_pad", "VALID")}},
		// Grouped, depthwise, depthwise with a channel multiplier.
		{x: []int64{2, 4, 5, 5}, w: []int64{6, 2, 3, 3}, bias: true, attrs: []ir.Attr{irtest.Int("group", 2), nnAttrInts("pads", 1, 1, 0, 1)}},
		{x: []int64{2, 3, 6, 5}, w: []int64{3, 1, 3, 3}, attrs: []ir.Attr{irtest.Int("group", 3), nnAttrInts("strides", 2, 2), nnAttrInts("pads", 1, 1, 1, 1)}},
		{x: []int64{1, 3, 5, 5}, w: []int64{6, 1, 2, 3}, bias: true, attrs: []ir.Attr{irtest.Int("group", 3), nnAttrInts("dilations", 2, 1)}},
		// 1×1 stride 2 shortcut; 1-D; 3-D grouped.
		{x: []int64{2, 3, 5, 5}, w: []int64{4, 3, 1, 1}, attrs: []ir.Attr{nnAttrInts("strides", 2, 2)}},
		{x: []int64{2, 2, 9}, w: []int64{3, 2, 3}, bias: true, attrs: []ir.Attr{nnAttrInts("strides", 2), nnAttrInts("dilations", 2), nnAttrInts("pads", 1, 2)}},
		{x: []int64{1, 2, 4, 3, 4}, w: []int64{2, 1, 2, 2, 2}, attrs: []ir.Attr{irtest.Int("group", 2), nnAttrInts("pads", 1, 0, 0, 0, 1, 1)}},
	} {
		cases = append(cases, s.gradCase())
	}
	cases = append(cases, randomConvSpecs(rand.New(rand.NewPCG(1, 2)), 20, false)...)
	runGradChecks(t, cases)
}

func TestConvTransposeGradients(t *testing.T) {
	var cases []gradCase
	for _, s := range []convSpec{
		// DCGAN-style: stride 2, pads 1, bias.
		{x: []int64{2, 3, 3, 4}, w: []int64{3, 2, 4, 4}, bias: true, attrs: []ir.Attr{nnAttrInts("strides", 2, 2), nnAttrInts("pads", 1, 1, 1, 1)}},
		// output_padding with asymmetric pads; dilations.
		{x: []int64{1, 2, 3, 3}, w: []int64{2, 3, 3, 2}, attrs: []ir.Attr{nnAttrInts("strides", 3, 2), nnAttrInts("pads", 0, 1, 2, 0), nnAttrInts("output_padding", 2, 1)}},
		{x: []int64{1, 2, 4, 3}, w: []int64{2, 2, 2, 3}, bias: true, attrs: []ir.Attr{nnAttrInts("dilations", 2, 1), nnAttrInts("strides", 1, 2), nnAttrInts("pads", 1, 0, 0, 2)}},
		// Grouped and depthwise.
		{x: []int64{2, 4, 3, 3}, w: []int64{4, 3, 3, 3}, bias: true, attrs: []ir.Attr{irtest.Int("group", 2), nnAttrInts("strides", 2, 1)}},
		{x: []int64{1, 3, 4, 3}, w: []int64{3, 1, 3, 3}, attrs: []ir.Attr{irtest.Int("group", 3), nnAttrInts("strides", 2, 2), nnAttrInts("pads", 1, 1, 1, 1)}},
		// auto_pad and output_shape (smaller and larger than natural).
		{x: []int64{1, 2, 3, 4}, w: []int64{2, 2, 4, 3}, attrs: []ir.Attr{nnAttrInts("strides", 2, 2), irtest.String("auto_pad", "SAME_UPPER")}},
		{x: []int64{1, 2, 3, 4}, w: []int64{2, 2, 4, 3}, attrs: []ir.Attr{nnAttrInts("strides", 2, 2), irtest.String("auto_pad", "SAME_LOWER")}},
		{x: []int64{1, 2, 4}, w: []int64{2, 3, 3}, bias: true, attrs: []ir.Attr{nnAttrInts("strides", 2), nnAttrInts("output_shape", 8)}},
		{x: []int64{1, 2, 3}, w: []int64{2, 2, 3}, attrs: []ir.Attr{nnAttrInts("strides", 2), nnAttrInts("output_shape", 9)}},
		// 3-D.
		{x: []int64{1, 2, 2, 3, 2}, w: []int64{2, 1, 2, 2, 3}, attrs: []ir.Attr{irtest.Int("group", 2), nnAttrInts("strides", 2, 1, 2), nnAttrInts("pads", 0, 1, 1, 1, 0, 0)}},
	} {
		s.transpose = true
		cases = append(cases, s.gradCase())
	}
	cases = append(cases, randomConvSpecs(rand.New(rand.NewPCG(3, 4)), 20, true)...)
	runGradChecks(t, cases)
}

// randomConvSpecs draws small Conv or ConvTranspose configurations:
// 1- to 3-D, groups (depthwise too), strides, dilations, explicit or
// automatic padding, output_padding.
func randomConvSpecs(r *rand.Rand, n int, transpose bool) []gradCase {
	var out []gradCase
	for len(out) < n {
		nsp := []int{1, 2, 2, 3}[r.IntN(4)]
		batch := int64(1 + r.IntN(2))
		group, cg, mg := int64(1), int64(1+r.IntN(2)), int64(1+r.IntN(2))
		switch r.IntN(3) {
		case 1:
			group = 2
		case 2:
			group, cg = int64(2+r.IntN(2)), 1
		}
		s := convSpec{bias: r.IntN(2) == 0, transpose: transpose}
		in, k, st, dil := make([]int64, nsp), make([]int64, nsp), make([]int64, nsp), make([]int64, nsp)
		maxIn := 7
		if nsp == 3 {
			maxIn = 4
		}
		for i := range in {
			in[i], k[i], st[i], dil[i] = int64(1+r.IntN(maxIn)), int64(1+r.IntN(3)), int64(1+r.IntN(3)), int64(1+r.IntN(2))
		}
		s.x = append([]int64{batch, cg * group}, in...)
		if transpose {
			s.w = append([]int64{cg * group, mg}, k...)
		} else {
			s.w = append([]int64{mg * group, cg}, k...)
		}
		s.attrs = []ir.Attr{nnAttrInts("strides", st...), nnAttrInts("dilations", dil...)}
		if group > 1 {
			s.attrs = append(s.attrs, irtest.Int("group", group))
		}
		pads := make([]int64, 2*nsp)
		switch r.IntN(4) {
		case 0:
			s.attrs = append(s.attrs, irtest.String("auto_pad", []string{"VALID", "SAME_UPPER", "SAME_LOWER"}[r.IntN(3)]))
		default:
			for i := range pads {
				pads[i] = int64(r.IntN(3))
			}
			s.attrs = append(s.attrs, nnAttrInts("pads", pads...))
		}
		ok := true
		if transpose {
			opad := make([]int64, nsp)
			for i := range opad {
				if lim := max(st[i], dil[i]); lim > 1 {
					opad[i] = int64(r.IntN(int(lim)))
				}
				if st[i]*(in[i]-1)+opad[i]+(k[i]-1)*dil[i]+1-pads[i]-pads[nsp+i] <= 0 {
					ok = false
				}
			}
			s.attrs = append(s.attrs, nnAttrInts("output_padding", opad...))
		} else {
			for i := range in {
				if in[i]+pads[i]+pads[nsp+i] < (k[i]-1)*dil[i]+1 {
					ok = false
				}
			}
		}
		if ok {
			c := s.gradCase()
			c.name = fmt.Sprintf("random%d/%s", len(out), c.name)
			out = append(out, c)
		}
	}
	return out
}

// ---- pooling ----

type poolSpec struct {
	typ   string
	x     []int64
	attrs []ir.Attr
	// outs: MaxPool's outputs in the forward op (1: no Indices).
	outs  int
	opset int64
}

func (s poolSpec) gradCase() gradCase {
	var a []string
	for _, at := range s.attrs {
		switch at.Type {
		case ir.AttrInts:
			a = append(a, fmt.Sprintf("%s%v", at.Name, at.Ints))
		case ir.AttrInt:
			a = append(a, fmt.Sprintf("%s=%d", at.Name, at.Int))
		case ir.AttrString:
			a = append(a, fmt.Sprintf("%s=%s", at.Name, at.String))
		}
	}
	name := fmt.Sprintf("%s/x%v/outs%d/%s", s.typ, s.x, s.outs, strings.Join(a, ","))
	return gradCase{name: name, build: nnAt(s.opset, func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		x := b.Input("x", ir.Double, s.x...)
		n := max(1, s.outs)
		return irtest.V(x), irtest.V(b.OpN(s.typ, n, irtest.V(x), s.attrs...)[0])
	})}
}

func TestMaxPoolGradients(t *testing.T) {
	var cases []gradCase
	for _, s := range []poolSpec{
		{x: []int64{2, 2, 7, 6}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 3, 3), nnAttrInts("strides", 2, 2), nnAttrInts("pads", 1, 1, 1, 1)}, outs: 2},
		// No Indices in the forward op: the rule adds them.
		{x: []int64{2, 2, 7, 6}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 3, 3), nnAttrInts("strides", 2, 2), nnAttrInts("pads", 1, 1, 1, 1)}, outs: 1},
		// ceil_mode, dilations, asymmetric pads.
		{x: []int64{1, 2, 8, 7}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 2, 3), nnAttrInts("strides", 2, 2), nnAttrInts("dilations", 2, 1), nnAttrInts("pads", 1, 0, 0, 2), irtest.Int("ceil_mode", 1)}, outs: 1},
		// storage_order 1 (column-major Indices).
		{x: []int64{2, 2, 5, 6}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 2, 2), nnAttrInts("strides", 1, 2), irtest.Int("storage_order", 1)}, outs: 2},
		{x: []int64{1, 2, 3, 4, 5}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 2, 2, 2), nnAttrInts("strides", 1, 2, 2), irtest.Int("storage_order", 1)}, outs: 1},
		// auto_pad; 1-D; 3-D.
		{x: []int64{1, 3, 7, 5}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 3, 2), nnAttrInts("strides", 2, 2), irtest.String("auto_pad", "SAME_UPPER")}, outs: 1},
		{x: []int64{2, 2, 11}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 4), nnAttrInts("strides", 3), nnAttrInts("pads", 2, 1)}, outs: 2},
		{x: []int64{1, 2, 4, 3, 5}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 2, 2, 3), nnAttrInts("strides", 2, 1, 2), nnAttrInts("pads", 1, 0, 1, 0, 1, 1)}, outs: 1},
		// A window entirely in the padding (Indices -1).
		{x: []int64{1, 2, 5, 4}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 2, 2), nnAttrInts("pads", 2, 0, 0, 0)}, outs: 1},
	} {
		s.typ = "MaxPool"
		cases = append(cases, s.gradCase())
	}
	cases = append(cases, randomPoolSpecs(rand.New(rand.NewPCG(5, 6)), 16, "MaxPool")...)
	runGradChecks(t, cases)
}

func TestAveragePoolGradients(t *testing.T) {
	var cases []gradCase
	for _, s := range []poolSpec{
		// Every window full: a 1/k kernel.
		{x: []int64{2, 2, 6, 4}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 2, 2), nnAttrInts("strides", 2, 2)}},
		// Padding, counted or not.
		{x: []int64{2, 2, 7, 6}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 3, 3), nnAttrInts("strides", 2, 2), nnAttrInts("pads", 1, 0, 1, 2)}},
		{x: []int64{2, 2, 7, 6}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 3, 3), nnAttrInts("strides", 2, 2), nnAttrInts("pads", 1, 0, 1, 2), irtest.Int("count_include_pad", 1)}},
		// ceil_mode windows running past the end, both counts.
		{x: []int64{1, 2, 8, 7}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 3, 2), nnAttrInts("strides", 2, 2), nnAttrInts("pads", 1, 1, 0, 1), irtest.Int("ceil_mode", 1), irtest.Int("count_include_pad", 1)}},
		{x: []int64{1, 2, 8, 7}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 3, 3), nnAttrInts("strides", 2, 2), irtest.Int("ceil_mode", 1)}},
		// Stride leaving the input's tail unread; auto_pad; 1-D; 3-D.
		{x: []int64{1, 2, 8, 8}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 2, 2), nnAttrInts("strides", 3, 3)}},
		{x: []int64{1, 2, 7, 8}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 3, 2), nnAttrInts("strides", 2, 3), irtest.String("auto_pad", "SAME_LOWER"), irtest.Int("count_include_pad", 1)}},
		{x: []int64{1, 2, 7, 8}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 3, 2), nnAttrInts("strides", 2, 3), irtest.String("auto_pad", "SAME_UPPER")}},
		{x: []int64{2, 3, 11}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 4), nnAttrInts("strides", 3), nnAttrInts("pads", 2, 1)}},
		{x: []int64{1, 2, 4, 5, 3}, attrs: []ir.Attr{nnAttrInts("kernel_shape", 2, 3, 2), nnAttrInts("strides", 2, 1, 1), nnAttrInts("pads", 0, 1, 1, 1, 1, 0)}},
		// Dilations (opset 19).
		{x: []int64{1, 2, 9, 7}, opset: 19, attrs: []ir.Attr{nnAttrInts("kernel_shape", 2, 3), nnAttrInts("dilations", 3, 2), nnAttrInts("pads", 1, 1, 1, 0)}},
		{x: []int64{1, 2, 9, 7}, opset: 19, attrs: []ir.Attr{nnAttrInts("kernel_shape", 2, 2), nnAttrInts("dilations", 2, 2), nnAttrInts("strides", 2, 1), irtest.Int("ceil_mode", 1), irtest.Int("count_include_pad", 1), nnAttrInts("pads", 1, 0, 1, 1)}},
	} {
		s.typ = "AveragePool"
		cases = append(cases, s.gradCase())
	}
	cases = append(cases, randomPoolSpecs(rand.New(rand.NewPCG(7, 8)), 16, "AveragePool")...)
	runGradChecks(t, cases)
}

// randomPoolSpecs draws small MaxPool or AveragePool configurations:
// 1- to 3-D, strides, dilations, explicit or automatic padding,
// ceil_mode, count_include_pad, storage_order, with and without Indices.
func randomPoolSpecs(r *rand.Rand, n int, typ string) []gradCase {
	var out []gradCase
	for len(out) < n {
		nsp := []int{1, 2, 2, 3}[r.IntN(4)]
		s := poolSpec{typ: typ, x: []int64{int64(1 + r.IntN(2)), int64(1 + r.IntN(3))}, outs: 1, opset: 19}
		k, st, dil := make([]int64, nsp), make([]int64, nsp), make([]int64, nsp)
		maxIn := 8
		if nsp == 3 {
			maxIn = 5
		}
		for i := range k {
			s.x = append(s.x, int64(1+r.IntN(maxIn)))
			k[i], st[i], dil[i] = int64(1+r.IntN(3)), int64(1+r.IntN(3)), int64(1+r.IntN(2))
		}
		s.attrs = []ir.Attr{nnAttrInts("kernel_shape", k...), nnAttrInts("strides", st...), nnAttrInts("dilations", dil...)}
		pads := make([]int64, 2*nsp)
		if r.IntN(4) == 0 {
			s.attrs = append(s.attrs, irtest.String("auto_pad", []string{"VALID", "SAME_UPPER", "SAME_LOWER"}[r.IntN(3)]))
		} else {
			for i := range pads {
				pads[i] = int64(r.IntN(int(k[i%nsp])))
			}
			s.attrs = append(s.attrs, nnAttrInts("pads", pads...))
		}
		if r.IntN(2) == 0 {
			s.attrs = append(s.attrs, irtest.Int("ceil_mode", 1))
		}
		if typ == "AveragePool" && r.IntN(2) == 0 {
			s.attrs = append(s.attrs, irtest.Int("count_include_pad", 1))
		}
		if typ == "MaxPool" {
			s.outs = 1 + r.IntN(2)
			if r.IntN(3) == 0 {
				s.attrs = append(s.attrs, irtest.Int("storage_order", 1))
			}
		}
		ok := true
		for i := range k {
			if s.x[2+i]+pads[i]+pads[nsp+i] < (k[i]-1)*dil[i]+1 {
				ok = false
			}
		}
		if ok {
			c := s.gradCase()
			c.name = fmt.Sprintf("random%d/%s", len(out), c.name)
			out = append(out, c)
		}
	}
	return out
}

func TestGlobalPoolGradients(t *testing.T) {
	var cases []gradCase
	for _, typ := range []string{"GlobalAveragePool", "GlobalMaxPool"} {
		for _, x := range [][]int64{{2, 3, 4, 5}, {2, 3, 7}, {1, 2, 2, 3, 2}} {
			cases = append(cases, poolSpec{typ: typ, x: x}.gradCase())
		}
	}
	runGradChecks(t, cases)
}

// A plane whose elements tie at the maximum shares the gradient.
func TestGlobalMaxPoolTies(t *testing.T) {
	b := irtest.New(t)
	x := b.Input("x", ir.Double, 1, 2, 2, 2)
	y := b.Op("GlobalMaxPool", irtest.V(x))
	loss := b.Op("ReduceSum", irtest.V(y), irtest.Int("keepdims", 0))
	m := b.Return(loss)
	grads, err := Grad(m, loss, irtest.V(x))
	if err != nil {
		t.Fatal(err)
	}
	feed := f64Tensor(ir.Shape{1, 2, 2, 2}, []float64{1, 3, 3, 2, 5, 5, 5, 5})
	vals, err := kernels.Interpret(m, map[string]*kernels.Tensor{"x": feed}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := vals[grads[0].ID].F64()
	want := []float64{0, 0.5, 0.5, 0, 0.25, 0.25, 0.25, 0.25}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("GlobalMaxPool tie gradient %v, want %v", got, want)
		}
	}
}

// ---- normalisation ----

func TestBatchNormGradients(t *testing.T) {
	bn := func(name string, opset int64, x []int64, outs int, attrs ...ir.Attr) gradCase {
		return gradCase{name: name, build: nnAt(opset, func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			xv := b.Input("x", ir.Double, x...)
			c := x[1]
			scale, bias := b.Input("scale", ir.Double, c), b.Input("bias", ir.Double, c)
			mean := make([]float64, c)
			vr := make([]float64, c)
			for i := range mean {
				mean[i], vr[i] = 0.1*float64(i)-0.2, 0.5+0.3*float64(i)
			}
			m := b.Init("mean", constF64(ir.Shape{c}, mean))
			v := b.Init("var", constF64(ir.Shape{c}, vr))
			y := b.OpN("BatchNormalization", outs, irtest.V(xv, scale, bias, m, v), attrs...)[0]
			return irtest.V(xv, scale, bias), irtest.V(y)
		})}
	}
	runGradChecks(t, []gradCase{
		bn("training/NCHW", 15, []int64{2, 3, 3, 2}, 3, irtest.Int("training_mode", 1), irtest.Float("momentum", 0.8)),
		bn("training/NC", 15, []int64{4, 3}, 1, irtest.Int("training_mode", 1)),
		bn("training/NCD-eps", 15, []int64{2, 2, 5}, 3, irtest.Int("training_mode", 1), irtest.Float("epsilon", 0.01)),
		bn("training/opset12", 12, []int64{3, 2, 2, 2}, 5),
		bn("training/opset18", 18, []int64{2, 3, 2, 2}, 3, irtest.Int("training_mode", 1)),
		bn("inference/NCHW", 15, []int64{2, 3, 3, 2}, 1),
		bn("inference/NC", 15, []int64{4, 3}, 1, irtest.Int("training_mode", 0), irtest.Float("epsilon", 0.1)),
	})
}

func TestLayerNormGradients(t *testing.T) {
	ln := func(name string, opset int64, x []int64, axis int64, scale, bias []int64, outs int, attrs ...ir.Attr) gradCase {
		return gradCase{name: name, build: nnAt(opset, func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			xv := b.Input("x", ir.Double, x...)
			s := b.Input("scale", ir.Double, scale...)
			wrt, ins := irtest.V(xv, s), irtest.V(xv, s)
			if bias != nil {
				bv := b.Input("bias", ir.Double, bias...)
				wrt, ins = append(wrt, bv), append(ins, bv)
			}
			attrs := append([]ir.Attr{irtest.Int("axis", axis)}, attrs...)
			return wrt, irtest.V(b.OpN("LayerNormalization", outs, ins, attrs...)[0])
		})}
	}
	dbl := irtest.Int("stash_type", int64(ir.Double))
	runGradChecks(t, []gradCase{
		ln("last", 17, []int64{3, 5}, -1, []int64{5}, []int64{5}, 1),
		ln("axis1/broadcast", 17, []int64{2, 3, 4}, 1, []int64{3, 4}, []int64{4}, 1, irtest.Float("epsilon", 1e-3)),
		ln("axis1/scale1x4", 17, []int64{2, 3, 4}, 1, []int64{1, 4}, []int64{3, 1}, 1),
		ln("stats/double", 17, []int64{2, 2, 6}, -1, []int64{6}, []int64{6}, 3, dbl),
		ln("stats/float-stash", 17, []int64{2, 2, 6}, -2, []int64{2, 6}, nil, 3),
		ln("nobias/opset18", 18, []int64{3, 2, 4}, 0, []int64{2, 4}, nil, 3, dbl),
	})
}

// LayerNormalization reads its forward Mean and InvStdDev when they are
// at least as precise as X instead of recomputing them.
func TestLayerNormUsesStatistics(t *testing.T) {
	for _, tc := range []struct {
		stash  ir.DType
		reuses bool
	}{{ir.Double, true}, {ir.Float, false}} {
		b := irtest.New(t)
		x := b.Input("x", ir.Double, 2, 6)
		s := b.Input("s", ir.Double, 6)
		outs := b.OpN("LayerNormalization", 3, irtest.V(x, s), irtest.Int("stash_type", int64(tc.stash)))
		loss := b.Op("ReduceSum", irtest.V(outs[0]), irtest.Int("keepdims", 0))
		m := b.Return(loss)
		if _, err := Grad(m, loss, irtest.V(x, s)); err != nil {
			t.Fatal(err)
		}
		reads := outs[1].NumUses() > 0 && outs[2].NumUses() > 0
		if reads != tc.reuses {
			t.Errorf("stash %v: backward reads Mean/InvStdDev = %v, want %v", tc.stash, reads, tc.reuses)
		}
	}
}

// ---- matrix products ----

func TestGemmGradients(t *testing.T) {
	var cases []gradCase
	for _, tc := range []struct {
		tA, tB      int64
		alpha, beta float32
		c           []int64 // nil: no C
	}{
		{0, 0, 1, 1, []int64{5}},
		{1, 0, 0.5, 2, []int64{3, 1}},
		{0, 1, -1.5, 1, []int64{3, 5}},
		{1, 1, 2, -0.5, []int64{}},
		{0, 0, 1, 0, []int64{1, 5}},
		{1, 1, 1, 1, nil},
	} {
		cases = append(cases, gradCase{name: fmt.Sprintf("Gemm/tA%d/tB%d/a%v/b%v/C%v", tc.tA, tc.tB, tc.alpha, tc.beta, tc.c),
			build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
				const M, K, N = 3, 4, 5
				as, bs := []int64{M, K}, []int64{K, N}
				if tc.tA == 1 {
					as = []int64{K, M}
				}
				if tc.tB == 1 {
					bs = []int64{N, K}
				}
				a, bb := b.Input("a", ir.Double, as...), b.Input("b", ir.Double, bs...)
				ins := irtest.V(a, bb)
				if tc.c != nil {
					ins = append(ins, b.Input("c", ir.Double, tc.c...))
				}
				y := b.Op("Gemm", ins, irtest.Int("transA", tc.tA), irtest.Int("transB", tc.tB), irtest.Float("alpha", tc.alpha), irtest.Float("beta", tc.beta))
				return ins, irtest.V(y)
			}})
	}
	runGradChecks(t, cases)
}

func TestMatMulGradients(t *testing.T) {
	var cases []gradCase
	for _, tc := range []struct{ a, b []int64 }{
		{[]int64{3, 4}, []int64{4, 5}},
		{[]int64{2, 3, 4}, []int64{4, 5}},       // shared B: batch folded into Gemm
		{[]int64{2, 3, 4}, []int64{2, 4, 5}},    // batched
		{[]int64{2, 1, 3, 4}, []int64{3, 4, 2}}, // broadcast both ways
		{[]int64{3, 4}, []int64{2, 4, 5}},       // shared A
		{[]int64{1, 3, 4}, []int64{2, 4, 1}},    // size-1 matrix dimension
		{[]int64{4}, []int64{4, 5}},             // 1-D operands
		{[]int64{3, 4}, []int64{4}},
		{[]int64{4}, []int64{4}},
		{[]int64{4}, []int64{2, 4, 3}},
		{[]int64{2, 3, 4}, []int64{4}},
	} {
		cases = append(cases, gradCase{name: fmt.Sprintf("MatMul/%v×%v", tc.a, tc.b), build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			a, bb := b.Input("a", ir.Double, tc.a...), b.Input("b", ir.Double, tc.b...)
			return irtest.V(a, bb), irtest.V(b.Op("MatMul", irtest.V(a, bb)))
		}})
	}
	runGradChecks(t, cases)
}

// ---- softmax, dropout, GELU ----

func TestSoftmaxGradients(t *testing.T) {
	var cases []gradCase
	for _, typ := range []string{"Softmax", "LogSoftmax"} {
		for _, tc := range []struct {
			opset int64
			x     []int64
			axis  *int64
		}{
			{17, []int64{3, 5}, nil},
			{17, []int64{2, 3, 4}, nnPtr(int64(1))},
			{13, []int64{2, 3, 4}, nnPtr(int64(0))},
			{17, []int64{2, 3, 4}, nnPtr(int64(-2))},
			{12, []int64{2, 3, 4}, nil},             // coerced to 2-D at axis 1
			{11, []int64{2, 3, 4}, nnPtr(int64(2))}, // coerced at axis 2 (= the last)
			{12, []int64{2, 3, 4}, nnPtr(int64(0))}, // the whole tensor
		} {
			var attrs []ir.Attr
			if tc.axis != nil {
				attrs = append(attrs, irtest.Int("axis", *tc.axis))
			}
			cases = append(cases, gradCase{name: fmt.Sprintf("%s/opset%d/%v/axis%v", typ, tc.opset, tc.x, attrs), lo: -2, hi: 2,
				build: nnAt(tc.opset, func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
					x := b.Input("x", ir.Double, tc.x...)
					return irtest.V(x), irtest.V(b.Op(typ, irtest.V(x), attrs...))
				})})
		}
	}
	runGradChecks(t, cases)
}

func nnPtr[T any](v T) *T { return &v }

func nnBoolTensor(v bool) *kernels.Tensor {
	t, _ := kernels.NewTensor(ir.Bool, ir.Shape{})
	if v {
		t.Data[0] = 1
	}
	return t
}

func TestDropoutGradients(t *testing.T) {
	boolInit := func(b *irtest.B, v bool) *ir.Value {
		x := int64(0)
		if v {
			x = 1
		}
		return b.Init("train", ir.TensorFromInt64s(ir.Bool, ir.Shape{}, []int64{x}))
	}
	drop := func(name string, outs int, ratio func(b *irtest.B) *ir.Value, train func(b *irtest.B) *ir.Value) func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		return func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 4, 6)
			ins := irtest.V(x, nil, nil)
			if ratio != nil {
				ins[1] = ratio(b)
			}
			if train != nil {
				ins[2] = train(b)
			}
			for len(ins) > 1 && ins[len(ins)-1] == nil {
				ins = ins[:len(ins)-1]
			}
			return irtest.V(x), irtest.V(b.OpN("Dropout", outs, ins, irtest.Int("seed", 5))[0])
		}
	}
	r03 := func(b *irtest.B) *ir.Value { return scalarInit(b, "ratio", 0.3) }
	r0 := func(b *irtest.B) *ir.Value { return scalarInit(b, "ratio", 0) }
	on := func(b *irtest.B) *ir.Value { return boolInit(b, true) }
	off := func(b *irtest.B) *ir.Value { return boolInit(b, false) }
	runGradChecks(t, []gradCase{
		{name: "training/mask", build: drop("m", 2, r03, on)},
		{name: "training/no-mask", build: drop("n", 1, r03, on)},
		{name: "training/default-ratio", build: drop("d", 1, nil, on)},
		{name: "training/ratio0", build: drop("z", 1, r0, on)},
		{name: "inference/constant", build: drop("i", 1, r03, off)},
		{name: "inference/absent", build: drop("a", 2, r03, nil)},
		{name: "inference/opset11", build: nnAt(11, func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 4, 6)
			return irtest.V(x), irtest.V(b.Op("Dropout", irtest.V(x), irtest.Float("ratio", 0.4)))
		})},
		// training_mode and ratio known only at run time.
		{name: "runtime/on", feeds: map[string]*kernels.Tensor{"t": nnBoolTensor(true), "ratio": f64Tensor(ir.Shape{}, []float64{0.25})},
			build: drop("r", 1, func(b *irtest.B) *ir.Value { return b.Input("ratio", ir.Double) }, func(b *irtest.B) *ir.Value { return b.Input("t", ir.Bool) })},
		{name: "runtime/off", feeds: map[string]*kernels.Tensor{"t": nnBoolTensor(false)},
			build: drop("o", 1, r03, func(b *irtest.B) *ir.Value { return b.Input("t", ir.Bool) })},
	})
}

func TestGeluGradients(t *testing.T) {
	runGradChecks(t, []gradCase{
		{name: "Gelu/erf", lo: -3, hi: 3, build: nnAt(20, func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 4, 5)
			return irtest.V(x), irtest.V(b.Op("Gelu", irtest.V(x)))
		})},
		{name: "Gelu/tanh", lo: -3, hi: 3, build: nnAt(20, func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 4, 5)
			return irtest.V(x), irtest.V(b.Op("Gelu", irtest.V(x), irtest.String("approximate", "tanh")))
		})},
	})
}

// ---- what the rules emit ----

// The backward ops of a small CNN are standard ONNX operators; MaxPool
// and Dropout gain their Indices and mask outputs (read by backward ops,
// so saved for backward), and nothing of the forward pass is
// recomputed: no backward MaxPool or Dropout.
func TestNNRulesEmitStandardOps(t *testing.T) {
	b := irtest.New(t)
	x := b.Input("x", ir.Double, 2, 3, 8, 8)
	w := b.Input("w", ir.Double, 4, 3, 3, 3)
	c := b.Op("Conv", irtest.V(x, w), nnAttrInts("pads", 1, 1, 1, 1))
	p := b.Op("MaxPool", irtest.V(c), nnAttrInts("kernel_shape", 2, 2), nnAttrInts("strides", 2, 2))
	d := b.OpN("Dropout", 1, irtest.V(p, scalarInit(b, "ratio", 0.5), b.Init("t", ir.TensorFromInt64s(ir.Bool, ir.Shape{}, []int64{1}))))[0]
	a := b.Op("AveragePool", irtest.V(d), nnAttrInts("kernel_shape", 2, 2), nnAttrInts("strides", 2, 2))
	loss := b.Op("ReduceSum", irtest.V(a), irtest.Int("keepdims", 0))
	m := b.Return(loss)
	if _, err := Grad(m, loss, irtest.V(x, w)); err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	for _, op := range m.Graph.Order() {
		if op.Phase != ir.Backward {
			continue
		}
		if op.Domain != "" {
			t.Errorf("backward op %s is not a standard ONNX op", op.Describe())
		}
		if op.Type == "MaxPool" || op.Type == "Dropout" {
			t.Errorf("backward op %s recomputes the forward pass", op.Describe())
		}
	}
	mp, dr := p.Def, d.Def
	if mp.Output(1) == nil || dr.Output(1) == nil {
		t.Fatalf("MaxPool outputs %v, Dropout outputs %v: Indices and mask were not added", mp.Outputs(), dr.Outputs())
	}
	saved := map[*ir.Value]bool{}
	for _, v := range SavedForBackward(m.Graph) {
		saved[v] = true
	}
	if !saved[mp.Output(1)] || !saved[dr.Output(1)] {
		t.Errorf("Indices and mask are not saved for backward")
	}
	// The forward ops still compute what they did.
	feeds := map[string]*kernels.Tensor{
		"x": f64Tensor(ir.Shape{2, 3, 8, 8}, randVals(rand.New(rand.NewPCG(1, 1)), 384, -1, 1)),
		"w": f64Tensor(ir.Shape{4, 3, 3, 3}, randVals(rand.New(rand.NewPCG(1, 2)), 108, -1, 1)),
	}
	if _, err := kernels.Interpret(m, feeds, 0); err != nil {
		t.Fatal(err)
	}
}

func TestWindowOf(t *testing.T) {
	b := irtest.New(t)
	x := b.Input("x", ir.Double, 1, 2, 7, 8)
	w := b.Input("w", ir.Double, 3, 2, 3, 2)
	conv := b.Op("Conv", irtest.V(x, w), nnAttrInts("strides", 2, 3), irtest.String("auto_pad", "SAME_LOWER")).Def
	win, err := ir.WindowOf(conv)
	if err != nil {
		t.Fatal(err)
	}
	// H: out 4, total (4-1)·2 + 3 - 7 = 2 → 1, 1; W: out 3, total (3-1)·3 + 2 - 8 = 0.
	if !ir.Shape(win.Pads).Equal(ir.Shape{1, 0, 1, 0}) || !ir.Shape(win.Kernel).Equal(ir.Shape{3, 2}) ||
		!ir.Shape(win.Strides).Equal(ir.Shape{2, 3}) || !ir.Shape(win.Dilations).Equal(ir.Shape{1, 1}) {
		t.Errorf("WindowOf(Conv SAME_LOWER) = %+v", win)
	}
	pool := b.Op("AveragePool", irtest.V(x), nnAttrInts("kernel_shape", 2, 2), nnAttrInts("pads", 0, 1, 1, 0)).Def
	if win, err := ir.WindowOf(pool); err != nil || !ir.Shape(win.Pads).Equal(ir.Shape{0, 1, 1, 0}) {
		t.Errorf("WindowOf(AveragePool) = %+v, %v", win, err)
	}
	sm := b.Op("Softmax", irtest.V(x)).Def
	if _, err := ir.WindowOf(sm); err == nil {
		t.Errorf("WindowOf(Softmax) gave no error")
	}
}

// Below opset 16 ScatterElements has no reduction: MaxPool's gradient
// is refused rather than wrong.
func TestMaxPoolGradientNeedsOpset16(t *testing.T) {
	b := irtest.New(t)
	b.M.Opsets[""] = 15
	x := b.Input("x", ir.Double, 1, 1, 4, 4)
	y := b.Op("MaxPool", irtest.V(x), nnAttrInts("kernel_shape", 2, 2))
	loss := b.Op("ReduceSum", irtest.V(y), irtest.Int("keepdims", 0))
	m := b.Return(loss)
	if _, err := Grad(m, loss, irtest.V(x)); err == nil || !strings.Contains(err.Error(), "opset >= 16") {
		t.Fatalf("Grad at opset 15: %v, want an opset error", err)
	}
}

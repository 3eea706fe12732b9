package ir

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Dump writes the graph as text, one line per value: inputs, then
// initializers, then ops in order (an op with several outputs prints
// them on its line). The format is stable, meant for golden files, and
// Parse reads it back:
//
//	%0 = input "x" f32[2,3,8,8]
//	%1 = init "w" f32[4,3,3,3] [param] [next %9]
//	%2 = Conv %0 %1 {pads=[1,1,1,1]} "conv1" : f32[2,4,8,8]
//	%5 = Relu %4 "relu1/re" [backward] [recompute] : f32[2,4,8,8]
//
// An input or initializer line ends with [param] for a trainable
// parameter and [next %N] for the value that replaces it in the next
// step. An op line shows, in brackets after its name, its phase (when
// not forward), its origin (the rewrite that made it) and [host] for a
// host-placed op; then, after the colon, each output's type, with its
// folded value when that is small.
func Dump(w io.Writer, g *Graph) error {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %q\n", g.Name)
	for _, v := range g.Inputs {
		if v.Kind == KindInit {
			continue
		}
		fmt.Fprintf(&b, "  %v = input %q %v%v%s\n", v, v.Name, v.DType, v.Shape, valueFlags(g, v))
	}
	for _, v := range g.Inits {
		fmt.Fprintf(&b, "  %v = init %q %v%v%s%s\n", v, v.Name, v.DType, v.Shape, constSuffix(v.Const), valueFlags(g, v))
	}
	for _, op := range g.order {
		b.WriteString("  ")
		for i, v := range op.outputs {
			if i > 0 {
				b.WriteString(", ")
			}
			if v == nil {
				b.WriteString("_")
			} else {
				b.WriteString(v.String())
			}
		}
		b.WriteString(" = ")
		b.WriteString(op.QualifiedType())
		for _, v := range op.inputs {
			if v == nil {
				b.WriteString(" _")
			} else {
				b.WriteString(" " + v.String())
			}
		}
		if len(op.Attrs) > 0 {
			b.WriteString(" {")
			for i := range op.Attrs {
				if i > 0 {
					b.WriteString(" ")
				}
				b.WriteString(op.Attrs[i].Name + "=" + op.Attrs[i].Format())
			}
			b.WriteString("}")
		}
		if op.Name != "" {
			b.WriteString(" " + strconv.Quote(op.Name))
		}
		if op.Phase != Forward {
			b.WriteString(" [" + op.Phase.String() + "]")
		}
		if op.Origin != "" {
			b.WriteString(" [" + formatOrigin(op.Origin) + "]")
		}
		if op.Host {
			b.WriteString(" [host]")
		}
		b.WriteString(" :")
		for i, v := range op.outputs {
			if i > 0 {
				b.WriteString(",")
			}
			if v == nil {
				b.WriteString(" _")
				continue
			}
			fmt.Fprintf(&b, " %v%v%s", v.DType, v.Shape, constSuffix(v.Const))
		}
		b.WriteString("\n")
	}
	b.WriteString("  return")
	for _, v := range g.Outputs {
		b.WriteString(" " + v.String())
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// DumpModel is Dump preceded by the model's operator-set versions, the
// one model-level fact inference (and so Parse and Verify) depends on:
//
//	opsets ai.onnx=17 ai.tsplit=1
//
// The default domain is written ai.onnx, its official name.
func DumpModel(w io.Writer, m *Model) error {
	var b strings.Builder
	// The default domain's version is the one inference uses (Opset),
	// also when the map leaves it out.
	fmt.Fprintf(&b, "opsets ai.onnx=%d", m.Opset(""))
	for _, d := range slices.Sorted(maps.Keys(m.Opsets)) {
		if d != "" && d != "ai.onnx" {
			fmt.Fprintf(&b, " %s=%d", d, m.Opsets[d])
		}
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return Dump(w, m.Graph)
}

// valueFlags marks a graph input or initializer that is a parameter
// or has a successor in the next step (memory model facts).
func valueFlags(g *Graph, v *Value) string {
	s := ""
	if v.Param {
		s += " [param]"
	}
	if n := v.Next; n != nil && g.Value(n.ID) == n {
		s += " [next " + n.String() + "]"
	}
	return s
}

// reservedFlags are the bracketed words of an op line that are not an
// origin; an origin spelled like one of them, or not a plain word, is
// written origin="…".
var reservedFlags = map[string]bool{"forward": true, "loss": true, "backward": true, "update": true, "host": true, "param": true, "next": true}

func formatOrigin(o string) string {
	if !reservedFlags[o] && isWord(o) {
		return o
	}
	return "origin=" + strconv.Quote(o)
}

// isWord reports whether s is a non-empty run of letters, digits, '_',
// '-' and '.', which the dump writes without quotes.
func isWord(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !isWordChar(c) {
			return false
		}
	}
	return true
}

func isWordChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// constSuffix shows small folded constants, which is what makes shape
// folding visible in golden files.
func constSuffix(t *Tensor) string {
	if t == nil || t.Len() > 8 || t.DType == String {
		return ""
	}
	if t.DType.IsFloat() {
		return fmt.Sprintf("=%v", t.Float64s())
	}
	return fmt.Sprintf("=%v", t.Int64s())
}

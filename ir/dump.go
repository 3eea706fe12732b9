package ir

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Dump writes the graph as text, one line per value: inputs, then
// initializers, then ops in order (an op with several outputs prints
// them on its line). The format is stable and meant for golden files:
//
//	%0 = input "x" f32[2,3,8,8]
//	%1 = init "w" f32[4,3,3,3]
//	%2 = Conv %0 %1 {pads=[1,1,1,1]} "conv1" : f32[2,4,8,8]
func Dump(w io.Writer, g *Graph) error {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %q\n", g.Name)
	for _, v := range g.Inputs {
		if v.Kind == KindInit {
			continue
		}
		fmt.Fprintf(&b, "  %v = input %q %v%v\n", v, v.Name, v.DType, v.Shape)
	}
	for _, v := range g.Inits {
		fmt.Fprintf(&b, "  %v = init %q %v%v%s\n", v, v.Name, v.DType, v.Shape, constSuffix(v.Const))
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
			b.WriteString(" [" + op.Origin + "]")
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

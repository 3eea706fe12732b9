package profile

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/tsplit/tsplit/ir"
)

// maxAttrText is the longest attribute text kept as it is in a key;
// longer ones (a big list, a long string) are replaced by a hash so
// that keys stay readable in a profile file.
const maxAttrText = 64

// OpKey names what an op's time depends on: its qualified type, the
// element type and shape of every input and output, and its attributes
// (sorted by name). Two ops with the same key run the same kernel on
// the same data sizes, so a time measured for one holds for the other:
// a recomputation clone hits the entry of the op it copies, and every
// micro-op of a split hits the entry of any op of its shapes. Node
// names, phases and origins are not part of it.
//
//	Conv(float32[8,3,32,32],float32[16,3,3,3],-)->(float32[8,16,32,32]){group=1,kernel_shape=[3,3],…}
func OpKey(op *ir.Op) string {
	var b strings.Builder
	b.WriteString(op.QualifiedType())
	values := func(vs []*ir.Value) {
		b.WriteByte('(')
		for i, v := range vs {
			if i > 0 {
				b.WriteByte(',')
			}
			if v == nil {
				b.WriteByte('-')
				continue
			}
			b.WriteString(v.DType.String())
			b.WriteString(v.Shape.String())
		}
		b.WriteByte(')')
	}
	values(op.Inputs())
	b.WriteString("->")
	values(op.Outputs())
	if len(op.Attrs) > 0 {
		attrs := make([]string, 0, len(op.Attrs))
		for i := range op.Attrs {
			a := &op.Attrs[i]
			text := a.Format()
			if len(text) > maxAttrText {
				h := fnv.New64a()
				h.Write([]byte(text))
				text = fmt.Sprintf("#%016x", h.Sum64())
			}
			attrs = append(attrs, a.Name+"="+text)
		}
		slices.Sort(attrs)
		b.WriteByte('{')
		b.WriteString(strings.Join(attrs, ","))
		b.WriteByte('}')
	}
	return b.String()
}

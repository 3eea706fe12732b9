package compiler

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/ir"
)

// Summary is what `tsplitc inspect` reports about a model.
type Summary struct {
	File        string
	IRVersion   int64
	Opsets      map[string]int64
	Dims        map[string]int64
	OpCounts    map[string]int
	NumOps      int
	NumValues   int
	Params      int64 // trainable parameter elements
	ParamBytes  int64
	ActBytes    int64 // bytes of all op outputs of one forward pass
	Largest     []*ir.Value
	AllStatic   bool
	NonStatic   []string
	FoldedConst int // op outputs whose value was folded at compile time
}

// IsParam reports whether v is a trainable parameter: a floating-point
// initializer that is not a BatchNormalization running statistic.
func IsParam(v *ir.Value) bool {
	if v.Kind != ir.KindInit || !v.DType.IsFloat() {
		return false
	}
	for _, u := range v.Uses() {
		if u.Op.Type == "BatchNormalization" && u.Op.Domain == "" && (u.Index == 3 || u.Index == 4) {
			return false
		}
	}
	return v.NumUses() > 0
}

// Summarize computes the inspect summary of an imported model.
func Summarize(m *ir.Model) *Summary {
	g := m.Graph
	s := &Summary{File: m.Path, IRVersion: m.IRVersion, Opsets: m.Opsets, Dims: m.Dims,
		OpCounts: map[string]int{}, AllStatic: true}
	for _, op := range g.Order() {
		s.OpCounts[op.QualifiedType()]++
		s.NumOps++
	}
	for _, v := range Params(m) {
		n, _ := v.Shape.NumElements()
		s.Params += n
		s.ParamBytes += v.Bytes()
	}
	var acts []*ir.Value
	for _, v := range g.Values() {
		s.NumValues++
		if v.Kind == ir.KindOp {
			if v.Const != nil {
				s.FoldedConst++
			} else {
				s.ActBytes += v.Bytes()
				acts = append(acts, v)
			}
		}
		if !v.DType.Valid() {
			s.AllStatic = false
			s.NonStatic = append(s.NonStatic, v.Name)
		}
	}
	all := append(acts, paramsAndInputs(g)...)
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].Bytes() != all[j].Bytes() {
			return all[i].Bytes() > all[j].Bytes()
		}
		return all[i].ID < all[j].ID
	})
	if len(all) > 10 {
		all = all[:10]
	}
	s.Largest = all
	return s
}

func paramsAndInputs(g *ir.Graph) []*ir.Value {
	var out []*ir.Value
	for _, v := range g.Values() {
		if v.Kind != ir.KindOp {
			out = append(out, v)
		}
	}
	return out
}

// Print writes the summary as text.
func (s *Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "model        %s\n", s.File)
	var opsets []string
	for d, v := range s.Opsets {
		if d == "" {
			d = "ai.onnx"
		}
		opsets = append(opsets, fmt.Sprintf("%s %d", d, v))
	}
	sort.Strings(opsets)
	fmt.Fprintf(w, "ir version   %d\n", s.IRVersion)
	fmt.Fprintf(w, "opsets       %s\n", strings.Join(opsets, ", "))
	if len(s.Dims) > 0 {
		var dims []string
		for k, v := range s.Dims {
			dims = append(dims, fmt.Sprintf("%s=%d", k, v))
		}
		sort.Strings(dims)
		fmt.Fprintf(w, "bound dims   %s\n", strings.Join(dims, ", "))
	}
	fmt.Fprintf(w, "ops          %d\n", s.NumOps)
	fmt.Fprintf(w, "values       %d (%d folded to constants)\n", s.NumValues, s.FoldedConst)
	fmt.Fprintf(w, "parameters   %s (%s)\n", groupDigits(s.Params), units.Bytes(s.ParamBytes))
	fmt.Fprintf(w, "activations  %s (forward, all op outputs)\n", units.Bytes(s.ActBytes))
	if s.AllStatic {
		fmt.Fprintf(w, "shapes       all static\n")
	} else {
		fmt.Fprintf(w, "shapes       NOT static: %s\n", strings.Join(s.NonStatic, ", "))
	}
	fmt.Fprintf(w, "\nop histogram\n")
	types := make([]string, 0, len(s.OpCounts))
	for t := range s.OpCounts {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		if s.OpCounts[types[i]] != s.OpCounts[types[j]] {
			return s.OpCounts[types[i]] > s.OpCounts[types[j]]
		}
		return types[i] < types[j]
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range types {
		fmt.Fprintf(tw, "  %s\t%d\n", t, s.OpCounts[t])
	}
	tw.Flush()
	fmt.Fprintf(w, "\nlargest tensors\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range s.Largest {
		fmt.Fprintf(tw, "  %s\t%s\t%v%v\t%s\n", v.Name, v.Kind, v.DType, v.Shape, units.Bytes(v.Bytes()))
	}
	tw.Flush()
}

func groupDigits(n int64) string {
	s := fmt.Sprintf("%d", n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

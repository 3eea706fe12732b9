package compiler

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

// maxInlineDepth stops runaway recursion through functions that call
// themselves.
const maxInlineDepth = 32

// MaxNodes bounds the nodes of a graph once its model-local functions
// are inlined. Nesting multiplies: a function calling another ten times,
// nine levels deep, turns a 2 KB file into a billion nodes, so the
// count is taken before anything is copied. The largest real exports
// (BERT-large, GPT-2 XL) have tens of thousands of nodes.
const MaxNodes = 1 << 20

// inliner expands calls of model-local functions into their bodies.
// Functions whose op is in tsplit's op table (tsplit's own domain, for
// instance) are kept as ops: the runtime implements them directly.
type inliner struct {
	funcs map[string]*onnxpb.FunctionProto
	n     int // counter for unique names of inlined values
	// sizes memoizes count per function; active marks the functions
	// being counted (a call to one of them is recursion).
	sizes  map[string]int
	active map[string]bool
}

// callee is the function a node calls, or nil when the node is an op.
func (in *inliner) callee(n *onnxpb.NodeProto) *onnxpb.FunctionProto {
	f := in.funcs[funcKey(n.GetDomain(), n.GetOpType())]
	if f == nil || ir.LookupSchema(n.GetDomain(), n.GetOpType()) != nil {
		return nil
	}
	return f
}

// count is how many nodes nodes become once inlined, saturating just
// past MaxNodes so that it never overflows and stops early.
func (in *inliner) count(nodes []*onnxpb.NodeProto) (int, error) {
	total := 0
	for _, n := range nodes {
		f := in.callee(n)
		if f == nil {
			total++
		} else {
			k := funcKey(f.GetDomain(), f.GetName())
			size, done := in.sizes[k]
			if !done {
				if in.active[k] {
					return 0, fmt.Errorf("%s: model-local function %q calls itself (directly or through other functions), which cannot be inlined", nodeDesc(n.GetName(), n.GetDomain(), n.GetOpType()), f.GetName())
				}
				in.active[k] = true
				var err error
				if size, err = in.count(f.Node); err != nil {
					return 0, err
				}
				delete(in.active, k)
				in.sizes[k] = size
			}
			total += size
		}
		if total > MaxNodes {
			return MaxNodes + 1, nil
		}
	}
	return total, nil
}

// inline expands the graph's function calls after checking that the
// result stays within MaxNodes.
func (in *inliner) inline(nodes []*onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	n, err := in.count(nodes)
	if err != nil {
		return nil, err
	}
	if n > MaxNodes {
		return nil, fmt.Errorf("the graph has more than %d nodes once its model-local functions are inlined (functions calling functions multiply); tsplit refuses it", MaxNodes)
	}
	return in.expand(nodes, 0)
}

func funcKey(domain, name string) string { return domain + ":" + name }

func newInliner(m *onnxpb.ModelProto) *inliner {
	in := &inliner{funcs: map[string]*onnxpb.FunctionProto{}, sizes: map[string]int{}, active: map[string]bool{}}
	for _, f := range m.Functions {
		in.funcs[funcKey(f.GetDomain(), f.GetName())] = f
	}
	return in
}

func (in *inliner) expand(nodes []*onnxpb.NodeProto, depth int) ([]*onnxpb.NodeProto, error) {
	var out []*onnxpb.NodeProto
	for _, n := range nodes {
		f := in.callee(n)
		if f == nil {
			out = append(out, n)
			continue
		}
		if depth >= maxInlineDepth {
			return nil, fmt.Errorf("%s: model-local functions nest deeper than %d (recursive function?)", nodeDesc(n.GetName(), n.GetDomain(), n.GetOpType()), maxInlineDepth)
		}
		body, err := in.instantiate(n, f)
		if err != nil {
			return nil, err
		}
		body, err = in.expand(body, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, body...)
	}
	return out, nil
}

// instantiate copies a function body for one call: formal inputs and
// outputs become the call's actual names, internal values get unique
// names, and attribute references take the call's attribute values (or
// the function's defaults).
func (in *inliner) instantiate(call *onnxpb.NodeProto, f *onnxpb.FunctionProto) ([]*onnxpb.NodeProto, error) {
	desc := nodeDesc(call.GetName(), call.GetDomain(), call.GetOpType())
	if len(call.Input) > len(f.Input) || len(call.Output) > len(f.Output) {
		return nil, fmt.Errorf("%s: call has %d inputs and %d outputs, function %s takes %d and %d",
			desc, len(call.Input), len(call.Output), f.GetName(), len(f.Input), len(f.Output))
	}
	in.n++
	prefix := fmt.Sprintf("%s/inl%d/", f.GetName(), in.n)
	rename := map[string]string{}
	for i, formal := range f.Input {
		actual := ""
		if i < len(call.Input) {
			actual = call.Input[i]
		}
		rename[formal] = actual
	}
	for i, formal := range f.Output {
		actual := ""
		if i < len(call.Output) {
			actual = call.Output[i]
		}
		rename[formal] = actual
	}
	attrs := map[string]*onnxpb.AttributeProto{}
	for _, a := range f.AttributeProto {
		attrs[a.GetName()] = a
	}
	for _, a := range call.Attribute {
		attrs[a.GetName()] = a
	}
	name := func(s string) string {
		if s == "" {
			return ""
		}
		if r, ok := rename[s]; ok {
			return r
		}
		return prefix + s
	}
	var out []*onnxpb.NodeProto
	for _, bn := range f.Node {
		n := proto.Clone(bn).(*onnxpb.NodeProto)
		if n.Name != nil {
			n.Name = proto.String(prefix + n.GetName())
		} else {
			n.Name = proto.String(fmt.Sprintf("%s%d", prefix, len(out)))
		}
		for i, s := range n.Input {
			n.Input[i] = name(s)
		}
		for i, s := range n.Output {
			n.Output[i] = name(s)
		}
		kept := n.Attribute[:0]
		for _, a := range n.Attribute {
			if ref := a.GetRefAttrName(); ref != "" {
				v, ok := attrs[ref]
				if !ok {
					continue // unset optional attribute: the op's default applies
				}
				c := proto.Clone(v).(*onnxpb.AttributeProto)
				c.Name = proto.String(a.GetName())
				a = c
			}
			kept = append(kept, a)
		}
		n.Attribute = kept
		out = append(out, n)
	}
	return out, nil
}

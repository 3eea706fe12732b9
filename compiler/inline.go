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

// inliner expands calls of model-local functions into their bodies.
// Functions whose op is in tsplit's op table (tsplit's own domain, for
// instance) are kept as ops: the runtime implements them directly.
type inliner struct {
	funcs map[string]*onnxpb.FunctionProto
	n     int // counter for unique names of inlined values
}

func funcKey(domain, name string) string { return domain + ":" + name }

func newInliner(m *onnxpb.ModelProto) *inliner {
	in := &inliner{funcs: map[string]*onnxpb.FunctionProto{}}
	for _, f := range m.Functions {
		in.funcs[funcKey(f.GetDomain(), f.GetName())] = f
	}
	return in
}

func (in *inliner) expand(nodes []*onnxpb.NodeProto, depth int) ([]*onnxpb.NodeProto, error) {
	var out []*onnxpb.NodeProto
	for _, n := range nodes {
		f := in.funcs[funcKey(n.GetDomain(), n.GetOpType())]
		if f == nil || ir.LookupSchema(n.GetDomain(), n.GetOpType()) != nil {
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

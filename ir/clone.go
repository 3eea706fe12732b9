package ir

import "maps"

// Clone returns an independent copy of the model: a new graph with the
// same value and op IDs, names, order and use lists, and copies of the
// model's maps. Tensor data (initializers, folded constants, lazy
// loaders), attributes and the serialized source fields are shared:
// passes replace them, never modify them in place. A planner uses it to
// try two plans of one graph and keep the better.
func (m *Model) Clone() *Model {
	c := *m
	c.Graph = m.Graph.Clone()
	c.Opsets = maps.Clone(m.Opsets)
	c.Dims = maps.Clone(m.Dims)
	c.Meta = maps.Clone(m.Meta)
	return &c
}

// Clone returns an independent copy of the graph (see Model.Clone).
func (g *Graph) Clone() *Graph {
	c := &Graph{Name: g.Name, Src: g.Src, byName: make(map[string]*Value, len(g.byName)), opNames: maps.Clone(g.opNames)}
	// The copies live in a few large arrays (slabs) rather than one
	// allocation per value, op, operand list and use list: a search
	// clones the whole training graph for every plan it makes. Each
	// list is a full slice expression of its slab (capacity = length),
	// so an append to one moves it out instead of writing over the next.
	var nValues, nOps, nOperands, nUses, nAttrs int
	for _, v := range g.values {
		if v != nil {
			nValues++
			nUses += len(v.uses)
		}
	}
	for _, o := range g.ops {
		if o != nil {
			nOps++
			nOperands += len(o.inputs) + len(o.outputs)
			nAttrs += len(o.Attrs)
		}
	}
	valueSlab := make([]Value, nValues)
	opSlab := make([]Op, nOps)
	operands := make([]*Value, nOperands)
	useSlab := make([]Use, nUses)
	attrSlab := make([]Attr, nAttrs)
	c.values = make([]*Value, len(g.values))
	for i, v := range g.values {
		if v == nil {
			continue
		}
		nv := &valueSlab[0]
		valueSlab = valueSlab[1:]
		*nv = *v
		nv.g, nv.Def, nv.Next, nv.uses = c, nil, nil, nil
		c.values[i] = nv
		c.byName[nv.Name] = nv
	}
	val := func(v *Value) *Value {
		if v == nil {
			return nil
		}
		return c.values[v.ID]
	}
	// take returns the next n operand slots.
	take := func(n int) []*Value {
		out := operands[:n:n]
		operands = operands[n:]
		return out
	}
	c.ops = make([]*Op, len(g.ops))
	for i, o := range g.ops {
		if o == nil {
			continue
		}
		no := &opSlab[0]
		opSlab = opSlab[1:]
		*no = *o
		no.g = c
		no.Attrs = nil // as a copy of an empty list: nil
		if k := len(o.Attrs); k > 0 {
			no.Attrs = attrSlab[:k:k]
			attrSlab = attrSlab[k:]
			copy(no.Attrs, o.Attrs)
		}
		no.inputs = take(len(o.inputs))
		for j, v := range o.inputs {
			no.inputs[j] = val(v)
		}
		no.outputs = take(len(o.outputs))
		for j, v := range o.outputs {
			no.outputs[j] = val(v)
		}
		c.ops[i] = no
	}
	for i, v := range g.values {
		if v == nil {
			continue
		}
		nv := c.values[i]
		nv.Next = val(v.Next)
		if v.Def != nil {
			nv.Def = c.ops[v.Def.ID]
		}
		k := len(v.uses)
		nv.uses = useSlab[:k:k]
		useSlab = useSlab[k:]
		for j, u := range v.uses {
			nv.uses[j] = Use{Op: c.ops[u.Op.ID], Index: u.Index}
		}
	}
	c.order = make([]*Op, len(g.order))
	for i, o := range g.order {
		c.order[i] = c.ops[o.ID]
	}
	list := func(vs []*Value) []*Value {
		out := make([]*Value, len(vs))
		for i, v := range vs {
			out[i] = val(v)
		}
		return out
	}
	c.Inputs, c.Inits, c.Outputs = list(g.Inputs), list(g.Inits), list(g.Outputs)
	return c
}

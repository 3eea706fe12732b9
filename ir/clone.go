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
	c.values = make([]*Value, len(g.values))
	for i, v := range g.values {
		if v == nil {
			continue
		}
		nv := *v
		nv.g, nv.Def, nv.Next, nv.uses = c, nil, nil, nil
		c.values[i] = &nv
		c.byName[nv.Name] = &nv
	}
	val := func(v *Value) *Value {
		if v == nil {
			return nil
		}
		return c.values[v.ID]
	}
	c.ops = make([]*Op, len(g.ops))
	for i, o := range g.ops {
		if o == nil {
			continue
		}
		no := *o
		no.g = c
		no.Attrs = append([]Attr(nil), o.Attrs...)
		no.inputs = make([]*Value, len(o.inputs))
		for j, v := range o.inputs {
			no.inputs[j] = val(v)
		}
		no.outputs = make([]*Value, len(o.outputs))
		for j, v := range o.outputs {
			no.outputs[j] = val(v)
		}
		c.ops[i] = &no
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
		nv.uses = make([]Use, len(v.uses))
		for k, u := range v.uses {
			nv.uses[k] = Use{Op: c.ops[u.Op.ID], Index: u.Index}
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

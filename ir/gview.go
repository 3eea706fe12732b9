package ir

import (
	"errors"
	"fmt"
	"sort"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/flow"
	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"
)

// DataflowGraph is a gonum view of the op graph: one node per op (node
// ID = OpID), an edge from producer to consumer for every data
// dependency, plus two virtual nodes: Entry, with an edge to every op
// without op predecessors, and Exit, with an edge from every op without
// op successors. With them every op is reachable from Entry and reaches
// Exit, which is what dominator algorithms need.
type DataflowGraph struct {
	*simple.DirectedGraph
	Entry, Exit graph.Node
	g           *Graph
}

// Dataflow builds the gonum view of g.
func Dataflow(g *Graph) *DataflowGraph {
	dg := simple.NewDirectedGraph()
	n := int64(len(g.ops))
	d := &DataflowGraph{DirectedGraph: dg, Entry: simple.Node(n), Exit: simple.Node(n + 1), g: g}
	dg.AddNode(d.Entry)
	dg.AddNode(d.Exit)
	for _, op := range g.order {
		dg.AddNode(simple.Node(op.ID))
	}
	for _, op := range g.order {
		for _, v := range op.inputs {
			if v == nil || v.Def == nil {
				continue
			}
			from, to := int64(v.Def.ID), int64(op.ID)
			if from != to && !dg.HasEdgeFromTo(from, to) {
				dg.SetEdge(dg.NewEdge(simple.Node(from), simple.Node(to)))
			}
		}
	}
	for _, op := range g.order {
		id := int64(op.ID)
		if dg.To(id).Len() == 0 {
			dg.SetEdge(dg.NewEdge(d.Entry, simple.Node(id)))
		}
		if dg.From(id).Len() == 0 {
			dg.SetEdge(dg.NewEdge(simple.Node(id), d.Exit))
		}
	}
	return d
}

// Op maps a gonum node back to its op (nil for Entry and Exit).
func (d *DataflowGraph) Op(n graph.Node) *Op {
	if n == nil {
		return nil
	}
	return d.g.OpByID(OpID(n.ID()))
}

// ErrCycle reports a graph whose ops cannot be ordered.
var ErrCycle = errors.New("ir: the graph has a cycle")

// TopoOrder returns a topological order of the ops. Ties are broken by
// the current position in the graph's order, so an order that already is
// topological comes back unchanged and the result is deterministic. A
// cycle is an error that names the ops on it.
func TopoOrder(g *Graph) ([]*Op, error) {
	d := Dataflow(g)
	pos := g.Position()
	rank := func(n graph.Node) int {
		switch n.ID() {
		case d.Entry.ID():
			return -1
		case d.Exit.ID():
			return len(g.order)
		}
		return pos[n.ID()]
	}
	sorted, err := topo.SortStabilized(d, func(ns []graph.Node) {
		sort.Slice(ns, func(i, j int) bool { return rank(ns[i]) < rank(ns[j]) })
	})
	if err != nil {
		var un topo.Unorderable
		if errors.As(err, &un) && len(un) > 0 {
			var names []string
			for _, n := range un[0] {
				if op := d.Op(n); op != nil {
					names = append(names, op.Describe())
				}
			}
			sort.Strings(names)
			return nil, fmt.Errorf("ir: cycle through %v", names)
		}
		return nil, fmt.Errorf("ir: %v", err)
	}
	out := make([]*Op, 0, len(g.order))
	for _, n := range sorted {
		if op := d.Op(n); op != nil && n.ID() != d.Entry.ID() && n.ID() != d.Exit.ID() {
			out = append(out, op)
		}
	}
	return out, nil
}

// Dominators returns, indexed by OpID, the immediate dominator of each op
// in the dataflow graph (nil when only the virtual entry dominates it):
// every path from the graph's sources to the op passes through its
// dominators. Removed op IDs have nil.
func Dominators(g *Graph) []*Op {
	d := Dataflow(g)
	tree := flow.Dominators(d.Entry, d)
	return d.idoms(func(n graph.Node) graph.Node { return tree.DominatorOf(n.ID()) })
}

// PostDominators returns, indexed by OpID, the immediate post-dominator
// of each op (nil when only the virtual exit post-dominates it): every
// path from the op to the graph's sinks passes through it.
func PostDominators(g *Graph) []*Op {
	d := Dataflow(g)
	// Post-dominators are dominators of the reversed graph rooted at Exit.
	tree := flow.Dominators(d.Exit, reversed{d.DirectedGraph})
	return d.idoms(func(n graph.Node) graph.Node { return tree.DominatorOf(n.ID()) })
}

func (d *DataflowGraph) idoms(of func(graph.Node) graph.Node) []*Op {
	out := make([]*Op, len(d.g.ops))
	for _, op := range d.g.order {
		dom := of(simple.Node(op.ID))
		if dom == nil || dom.ID() == d.Entry.ID() || dom.ID() == d.Exit.ID() {
			continue
		}
		out[op.ID] = d.Op(dom)
	}
	return out
}

// reversed presents a directed graph with every edge turned around.
type reversed struct{ g graph.Directed }

func (r reversed) Node(id int64) graph.Node       { return r.g.Node(id) }
func (r reversed) Nodes() graph.Nodes             { return r.g.Nodes() }
func (r reversed) From(id int64) graph.Nodes      { return r.g.To(id) }
func (r reversed) To(id int64) graph.Nodes        { return r.g.From(id) }
func (r reversed) HasEdgeBetween(x, y int64) bool { return r.g.HasEdgeBetween(x, y) }
func (r reversed) HasEdgeFromTo(u, v int64) bool  { return r.g.HasEdgeFromTo(v, u) }
func (r reversed) Edge(u, v int64) graph.Edge {
	e := r.g.Edge(v, u)
	if e == nil {
		return nil
	}
	return e.ReversedEdge()
}

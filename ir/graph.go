package ir

import (
	"fmt"
	"slices"
)

// Graph is an SSA computation graph with an explicit op order.
type Graph struct {
	Name string

	// Inputs are the graph inputs in declaration order. An initializer
	// may also be listed as an input (ONNX IR < 4 style).
	Inputs []*Value
	// Inits are initializers in declaration order.
	Inits []*Value
	// Outputs are the graph outputs in order.
	Outputs []*Value

	// Src carries the serialized graph's other fields, for lossless writing.
	Src any

	values []*Value // by ID; nil once removed
	ops    []*Op    // by ID; nil once removed
	order  []*Op
	byName map[string]*Value
	// opNames counts ops by name, so passes can make unique node names
	// (ONNX runtimes reject duplicates).
	opNames map[string]int
	// freshFrom is FreshName's hint per base name (nil: none).
	freshFrom map[string]int
}

// NewGraph returns an empty graph.
func NewGraph(name string) *Graph {
	return &Graph{Name: name, byName: map[string]*Value{}, opNames: map[string]int{}}
}

// Model is a graph plus the model-level facts passes need.
type Model struct {
	Graph *Graph
	// IRVersion is the ONNX IR version of the source model.
	IRVersion int64
	// Opsets maps an operator-set domain ("" for ONNX) to its version.
	Opsets map[string]int64
	// Dims binds symbolic dimension names (such as the batch) to sizes.
	Dims map[string]int64
	// Meta is the model's metadata_props (key → value). tsplit records
	// what it adds to a model here (training-step facts, plan summary).
	Meta map[string]string
	// Specialized says the graph's shapes hold only for the bound
	// dimensions (Dims): passes emitted constants such as Reshape targets
	// from them. The writer then declares inputs and outputs with their
	// static shapes instead of the source's symbolic ones.
	Specialized bool
	// Path is the file the model was read from, if any.
	Path string
	// Src carries the serialized model's other fields.
	Src any
}

// Order is the op order: a topological order of the graph that is also
// its execution schedule. The slice must not be modified.
func (g *Graph) Order() []*Op { return g.order }

// NumValueIDs bounds value IDs: every ID is < NumValueIDs.
func (g *Graph) NumValueIDs() int { return len(g.values) }

// NumOpIDs bounds op IDs.
func (g *Graph) NumOpIDs() int { return len(g.ops) }

// Value returns the value with the given ID, or nil.
func (g *Graph) Value(id ValueID) *Value {
	if int(id) < len(g.values) {
		return g.values[id]
	}
	return nil
}

// OpByID returns the op with the given ID, or nil.
func (g *Graph) OpByID(id OpID) *Op {
	if int(id) < len(g.ops) {
		return g.ops[id]
	}
	return nil
}

// Lookup returns the value with the given name, or nil.
func (g *Graph) Lookup(name string) *Value { return g.byName[name] }

// Values returns the live values in ID order.
func (g *Graph) Values() []*Value {
	out := make([]*Value, 0, len(g.values))
	for _, v := range g.values {
		if v != nil {
			out = append(out, v)
		}
	}
	return out
}

func (g *Graph) newValue(name string, kind ValueKind) (*Value, error) {
	if name != "" {
		if _, dup := g.byName[name]; dup {
			return nil, fmt.Errorf("ir: value %q defined twice", name)
		}
	}
	v := &Value{ID: ValueID(len(g.values)), Name: name, Kind: kind, g: g}
	g.values = append(g.values, v)
	if name != "" {
		g.byName[name] = v
	}
	return v, nil
}

// AddInput declares a graph input.
func (g *Graph) AddInput(name string, dt DType, shape Shape) (*Value, error) {
	v, err := g.newValue(name, KindInput)
	if err != nil {
		return nil, err
	}
	v.DType, v.Shape = dt, shape
	g.Inputs = append(g.Inputs, v)
	return v, nil
}

// AddInit declares an initializer holding t.
func (g *Graph) AddInit(name string, t *Tensor) (*Value, error) {
	v, err := g.newValue(name, KindInit)
	if err != nil {
		return nil, err
	}
	v.DType, v.Shape, v.Const = t.DType, t.Shape, t
	g.Inits = append(g.Inits, v)
	return v, nil
}

// AddLazyInit declares an initializer whose data is loaded on demand.
func (g *Graph) AddLazyInit(name string, dt DType, shape Shape, load func() (*Tensor, error)) (*Value, error) {
	v, err := g.newValue(name, KindInit)
	if err != nil {
		return nil, err
	}
	v.DType, v.Shape, v.Load = dt, shape, load
	g.Inits = append(g.Inits, v)
	return v, nil
}

// NewOp creates an op with the given inputs and one new output value per
// name in outNames ("" makes an absent optional output) and appends it
// to the order. Output dtypes and shapes are left for inference.
func (g *Graph) NewOp(typ, domain, name string, inputs []*Value, outNames []string, attrs []Attr) (*Op, error) {
	return g.insertOp(len(g.order), typ, domain, name, inputs, outNames, attrs)
}

// InsertOp is NewOp placing the op at position pos of the order.
func (g *Graph) InsertOp(pos int, typ, domain, name string, inputs []*Value, outNames []string, attrs []Attr) (*Op, error) {
	return g.insertOp(pos, typ, domain, name, inputs, outNames, attrs)
}

func (g *Graph) insertOp(pos int, typ, domain, name string, inputs []*Value, outNames []string, attrs []Attr) (*Op, error) {
	if pos < 0 || pos > len(g.order) {
		return nil, fmt.Errorf("ir: cannot insert node %q at position %d of an order of %d ops", name, pos, len(g.order))
	}
	for _, n := range outNames {
		if n != "" && g.byName[n] != nil {
			return nil, fmt.Errorf("ir: value %q defined twice (second definition by node %q)", n, name)
		}
	}
	op := &Op{ID: OpID(len(g.ops)), Type: typ, Domain: domain, Name: name, Attrs: attrs, g: g}
	g.ops = append(g.ops, op)
	if name != "" {
		g.opNames[name]++
	}
	op.inputs = make([]*Value, len(inputs))
	for i, v := range inputs {
		op.SetInput(i, v)
	}
	op.outputs = make([]*Value, len(outNames))
	for i, n := range outNames {
		if n == "" {
			continue
		}
		v, err := g.newValue(n, KindOp)
		if err != nil {
			return nil, err
		}
		v.Def, v.DefIndex = op, i
		op.outputs[i] = v
	}
	g.order = slices.Insert(g.order, pos, op)
	return op, nil
}

// RemoveOp deletes an op whose outputs are unused and not graph outputs.
func (g *Graph) RemoveOp(op *Op) error {
	if op.removed || op.g != g {
		return fmt.Errorf("ir: cannot remove %s: it is not in the graph", op.Describe())
	}
	for _, v := range op.outputs {
		if v == nil {
			continue
		}
		if v.NumUses() > 0 || slices.Contains(g.Outputs, v) {
			return fmt.Errorf("ir: cannot remove %s: its output %q is still used", op.Describe(), v.Name)
		}
	}
	for i, v := range op.inputs {
		if v != nil {
			v.removeUse(op, i)
		}
	}
	for _, v := range op.outputs {
		if v != nil {
			g.values[v.ID] = nil
			delete(g.byName, v.Name)
		}
	}
	g.order = slices.DeleteFunc(g.order, func(o *Op) bool { return o == op })
	g.ops[op.ID] = nil
	g.forgetNames()
	if op.Name != "" {
		g.opNames[op.Name]--
	}
	op.removed = true
	return nil
}

// RemoveInit deletes an unused initializer that is not a graph input.
func (g *Graph) RemoveInit(v *Value) error {
	if v.Kind != KindInit || v.NumUses() > 0 || slices.Contains(g.Outputs, v) || slices.Contains(g.Inputs, v) {
		return fmt.Errorf("ir: cannot remove initializer %q: it is used", v.Name)
	}
	g.Inits = slices.DeleteFunc(g.Inits, func(w *Value) bool { return w == v })
	g.values[v.ID] = nil
	delete(g.byName, v.Name)
	g.forgetNames()
	return nil
}

// SetOrder replaces the op order with a permutation of the same ops.
func (g *Graph) SetOrder(order []*Op) error {
	if len(order) != len(g.order) {
		return fmt.Errorf("ir: new order has %d ops, graph has %d", len(order), len(g.order))
	}
	seen := make([]bool, len(g.ops))
	for _, o := range order {
		if o.g != g || o.removed || seen[o.ID] {
			return fmt.Errorf("ir: new order is not a permutation of the graph's ops (%s)", o.Describe())
		}
		seen[o.ID] = true
	}
	g.order = slices.Clone(order)
	return nil
}

// Position returns the index of each op in the order, by op ID (-1 for
// removed IDs).
func (g *Graph) Position() []int {
	pos := make([]int, len(g.ops))
	for i := range pos {
		pos[i] = -1
	}
	for i, o := range g.order {
		pos[o.ID] = i
	}
	return pos
}

// MoveBefore moves ops, in their given order, to just before anchor.
// They must all come after anchor in the order, as ops a pass appended
// (NewOp) do: it makes many ops for one place, appends them and moves
// them once, in place over the order's tail after anchor.
func (g *Graph) MoveBefore(ops []*Op, anchor *Op) error {
	if len(ops) == 0 {
		return nil
	}
	a := g.Index(anchor)
	if a < 0 {
		return fmt.Errorf("ir: MoveBefore: %s is not in the order", anchor.Describe())
	}
	moving := make(map[*Op]bool, len(ops))
	for _, o := range ops {
		moving[o] = true
	}
	// Slide the tail's other ops to the end, keeping their order; the
	// k slots freed after anchor take anchor's place and the moved ops.
	w := len(g.order) - 1
	found := 0
	for i := len(g.order) - 1; i > a; i-- {
		if o := g.order[i]; moving[o] {
			found++
		} else {
			g.order[w] = o
			w--
		}
	}
	if found != len(ops) || len(moving) != len(ops) {
		return fmt.Errorf("ir: MoveBefore: the ops to move before %s are not distinct ops after it", anchor.Describe())
	}
	copy(g.order[a:], ops)
	g.order[a+len(ops)] = anchor
	return nil
}

// Index returns op's index in the order (-1 if it is not there). It
// scans the order without allocating: passes that insert ops next to
// an anchor one at a time call it per insertion, where building
// Position's table each time dominated planning on large graphs.
func (g *Graph) Index(op *Op) int {
	for i, o := range g.order {
		if o == op {
			return i
		}
	}
	return -1
}

// AddOutput gives op a new output value at index i, which must be absent
// (past the end, or a nil optional output), and infers its type. It is
// how a gradient rule asks a forward op for an optional output it needs,
// such as MaxPool's Indices or Dropout's mask, instead of recomputing.
func (g *Graph) AddOutput(op *Op, i int, name string, opset int64) (*Value, error) {
	if op.g != g || op.removed {
		return nil, fmt.Errorf("ir: AddOutput: %s is not in this graph", op.Describe())
	}
	if i < len(op.outputs) && op.outputs[i] != nil {
		return nil, fmt.Errorf("ir: AddOutput: %s already has output %d", op.Describe(), i)
	}
	for len(op.outputs) <= i {
		op.outputs = append(op.outputs, nil)
	}
	v, err := g.newValue(name, KindOp)
	if err != nil {
		return nil, err
	}
	v.Def, v.DefIndex = op, i
	op.outputs[i] = v
	if err := InferAndSet(op, opset); err != nil {
		op.outputs[i] = nil
		g.values[v.ID] = nil
		delete(g.byName, name)
		g.forgetNames()
		return nil, err
	}
	return v, nil
}

// Rename gives v a new name, free in the graph. A rewrite that replaces
// a graph output's producer uses it to keep the model's output names
// (and the metadata that refers to them) unchanged.
func (g *Graph) Rename(v *Value, name string) error {
	if v.g != g || g.byName[v.Name] != v {
		return fmt.Errorf("ir: cannot rename %q: it is not in the graph", v.Name)
	}
	if name == v.Name {
		return nil
	}
	if name == "" || g.byName[name] != nil {
		return fmt.Errorf("ir: cannot rename %q to %q: the name is empty or taken", v.Name, name)
	}
	delete(g.byName, v.Name)
	g.forgetNames()
	v.Name = name
	g.byName[name] = v
	return nil
}

// FreshName returns base, or base_N, such that no value and no op of the
// graph has that name.
//
// Passes ask for the same base thousands of times on a large graph, so
// the scan resumes where the last one for base ended: freshFrom[base] =
// i says base and base_1 … base_(i−1) are taken. That holds until a
// name is freed, which drops every hint (forgetNames), so the answer is
// the same as a scan from the start.
func (g *Graph) FreshName(base string) string {
	i := g.freshFrom[base]
	name := base
	if i > 0 {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	for g.byName[name] != nil || g.opNames[name] > 0 {
		i++
		name = fmt.Sprintf("%s_%d", base, i)
	}
	if g.freshFrom == nil {
		g.freshFrom = map[string]int{}
	}
	g.freshFrom[base] = i
	return name
}

// forgetNames drops FreshName's hints: a name was freed, so a lower
// suffix may be free again.
func (g *Graph) forgetNames() { g.freshFrom = nil }

package compiler

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"

	"github.com/tsplit/tsplit/internal/quote"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

// Options control import.
type Options struct {
	// Batch binds the batch dimension: the leading dimension of a graph
	// input when it is symbolic or unknown. 0 means 1.
	Batch int64
	// Dims binds other symbolic dimensions by name.
	Dims map[string]int64
}

// lazyInitBytes: initializers larger than this are decoded only when
// their data is needed, so inspecting or planning a big model never
// holds a second copy of its weights.
const lazyInitBytes = 1 << 16

// Import reads an ONNX file into IR.
func Import(path string, opts Options) (*ir.Model, error) {
	mp, err := ReadModelProto(path)
	if err != nil {
		return nil, err
	}
	m, err := FromProto(mp, filepath.Dir(path), opts)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			fe.File = path
		}
		return nil, err
	}
	m.Path = path
	return m, nil
}

// FromProto builds IR from a decoded model. dir is the folder external
// data is read from ("" for none).
func FromProto(mp *onnxpb.ModelProto, dir string, opts Options) (*ir.Model, error) {
	b := &builder{mp: mp, opts: opts, dims: map[string]int64{}}
	if dir != "" {
		b.src = dirSource{dir: dir}
	}
	m, err := b.build()
	if err != nil {
		return nil, err
	}
	return m, nil
}

type builder struct {
	mp   *onnxpb.ModelProto
	opts Options
	src  dataSource
	dims map[string]int64
	m    *ir.Model
	info map[string]*onnxpb.ValueInfoProto
}

func (b *builder) fail(node string, format string, args ...any) error {
	return &Error{Node: node, Err: fmt.Errorf(format, args...)}
}

func (b *builder) build() (*ir.Model, error) {
	mp := b.mp
	gp := mp.Graph
	m := &ir.Model{IRVersion: mp.GetIrVersion(), Opsets: map[string]int64{}, Dims: b.dims, Src: mp, Meta: map[string]string{}}
	for _, kv := range mp.MetadataProps {
		m.Meta[kv.GetKey()] = kv.GetValue()
	}
	b.m = m
	for _, os := range mp.OpsetImport {
		d := os.GetDomain()
		if d == "ai.onnx" {
			d = ""
		}
		m.Opsets[d] = os.GetVersion()
	}
	if v, ok := m.Opsets[""]; ok && (v < 7 || v > ir.MaxOpset) {
		return nil, b.fail("", "default-domain opset %d is not supported (tsplit reads opsets 7–%d and is tested on %d–%d)", v, ir.MaxOpset, ir.MinOpset, ir.MaxOpset)
	}

	g := ir.NewGraph(gp.GetName())
	g.Src = gp
	m.Graph = g

	b.info = map[string]*onnxpb.ValueInfoProto{}
	for _, vi := range gp.ValueInfo {
		b.info[vi.GetName()] = vi
	}
	for _, vi := range gp.Output {
		if _, ok := b.info[vi.GetName()]; !ok {
			b.info[vi.GetName()] = vi
		}
	}

	initByName := map[string]*onnxpb.TensorProto{}
	for _, tp := range gp.Initializer {
		if tp.GetName() == "" {
			return nil, b.fail("", "an initializer has no name")
		}
		if _, dup := initByName[tp.GetName()]; dup {
			return nil, b.fail("", "initializer %q is defined twice", tp.GetName())
		}
		initByName[tp.GetName()] = tp
	}
	if len(gp.SparseInitializer) > 0 {
		return nil, b.fail("", "sparse initializers are not supported (%d present)", len(gp.SparseInitializer))
	}

	// Inputs first (an input that is also an initializer keeps its data).
	for i, vi := range gp.Input {
		name := vi.GetName()
		if name == "" {
			return nil, b.fail("", "graph input %d has no name", i)
		}
		if tp, ok := initByName[name]; ok {
			v, err := b.addInit(g, tp)
			if err != nil {
				return nil, err
			}
			g.Inputs = append(g.Inputs, v)
			continue
		}
		dt, shape, err := b.valueType(vi, true)
		if err != nil {
			return nil, b.fail("", "graph input %q: %v", name, err)
		}
		if _, err := g.AddInput(name, dt, shape); err != nil {
			return nil, b.fail("", "graph input %q is defined twice", name)
		}
	}
	for _, tp := range gp.Initializer {
		if g.Lookup(tp.GetName()) != nil {
			continue
		}
		if _, err := b.addInit(g, tp); err != nil {
			return nil, err
		}
	}

	nodes, err := newInliner(mp).inline(gp.Node)
	if err != nil {
		return nil, &Error{Err: err}
	}
	nodes, err = b.sortNodes(g, nodes)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if err := b.addNode(g, n); err != nil {
			return nil, err
		}
	}

	for i, vi := range gp.Output {
		v := g.Lookup(vi.GetName())
		if v == nil {
			return nil, b.fail("", "graph output %d %q is never defined", i, vi.GetName())
		}
		if err := b.checkDeclared(vi, v); err != nil {
			return nil, b.fail("", "graph output %q: %v", vi.GetName(), err)
		}
		g.Outputs = append(g.Outputs, v)
	}
	if len(g.Outputs) == 0 {
		return nil, b.fail("", "graph has no outputs")
	}
	if err := markParams(m); err != nil {
		return nil, b.fail("", "%v", err)
	}
	return m, nil
}

func (b *builder) addInit(g *ir.Graph, tp *onnxpb.TensorProto) (*ir.Value, error) {
	dt := ir.DType(tp.GetDataType())
	shape := ir.Shape(append([]int64(nil), tp.GetDims()...))
	if !dt.Valid() {
		return nil, b.fail("", "initializer %q has unknown data type %d", tp.GetName(), tp.GetDataType())
	}
	size, err := shape.Bytes(dt)
	if err != nil {
		return nil, b.fail("", "initializer %q: %v", tp.GetName(), err)
	}
	var v *ir.Value
	if size > lazyInitBytes || tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		src := b.src
		// Check external locations now: a bad path is an import error,
		// not a late surprise.
		if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
			if err := b.checkExternal(tp, size); err != nil {
				return nil, err
			}
		} else if _, err := tensorFromProtoLenOnly(tp, dt, size); err != nil {
			return nil, b.fail("", "initializer %q: %v", tp.GetName(), err)
		}
		v, err = g.AddLazyInit(tp.GetName(), dt, shape, func() (*ir.Tensor, error) { return tensorFromProto(tp, src) })
	} else {
		t, terr := tensorFromProto(tp, b.src)
		if terr != nil {
			return nil, b.fail("", "initializer %q: %v", tp.GetName(), terr)
		}
		v, err = g.AddInit(tp.GetName(), t)
	}
	if err != nil {
		return nil, b.fail("", "initializer %q is defined twice", tp.GetName())
	}
	v.Src = tp
	return v, nil
}

// tensorFromProtoLenOnly checks that an in-file tensor has as much data
// as its shape needs without converting it.
func tensorFromProtoLenOnly(tp *onnxpb.TensorProto, dt ir.DType, size int64) (bool, error) {
	if tp.RawData != nil {
		if int64(len(tp.RawData)) != size {
			return false, fmt.Errorf("needs %d bytes of data, has %d", size, len(tp.RawData))
		}
		return true, nil
	}
	_, err := tensorFromProto(tp, nil)
	return err == nil, err
}

// checkExternal checks an external initializer against its file: the
// location stays in the model's folder and names a regular file that
// holds the size bytes its type and shape need. A tiny model declaring
// gigabytes of weights it does not have fails here, before anything is
// sized after the declaration.
func (b *builder) checkExternal(tp *onnxpb.TensorProto, size int64) error {
	location, offset, err := externalRef(tp, size)
	if err != nil {
		return b.fail("", "initializer %q: %v", tp.GetName(), strings.TrimPrefix(err.Error(), fmt.Sprintf("tensor %q: ", tp.GetName())))
	}
	ds, ok := b.src.(dirSource)
	if !ok {
		return b.fail("", "initializer %q: external data %q but the model was not read from a file", tp.GetName(), location)
	}
	if err := ds.check(location, offset, size); err != nil {
		return b.fail("", "initializer %q: %v", tp.GetName(), err)
	}
	return nil
}

// valueType converts a declared type to a dtype and a static shape,
// binding symbolic dimensions. bindBatch lets an unnamed or unknown
// leading dimension take the batch.
func (b *builder) valueType(vi *onnxpb.ValueInfoProto, bindBatch bool) (ir.DType, ir.Shape, error) {
	tt := vi.GetType().GetTensorType()
	if tt == nil {
		return 0, nil, errors.New("is not a tensor (sequences, maps and optionals are not supported)")
	}
	dt := ir.DType(tt.GetElemType())
	if !dt.Valid() {
		return 0, nil, fmt.Errorf("has unknown element type %d", tt.GetElemType())
	}
	if tt.Shape == nil {
		return 0, nil, errors.New("has no shape (its rank is unknown)")
	}
	shape := make(ir.Shape, len(tt.Shape.Dim))
	for i, d := range tt.Shape.Dim {
		switch x := d.GetValue().(type) {
		case *onnxpb.TensorShapeProto_Dimension_DimValue:
			if x.DimValue < 0 {
				return 0, nil, fmt.Errorf("dimension %d is negative (%d)", i, x.DimValue)
			}
			shape[i] = x.DimValue
		case *onnxpb.TensorShapeProto_Dimension_DimParam:
			n, err := b.bind(x.DimParam, i == 0 && bindBatch)
			if err != nil {
				return 0, nil, fmt.Errorf("dimension %d: %v", i, err)
			}
			shape[i] = n
		default:
			if i == 0 && bindBatch {
				shape[i] = b.batch()
				continue
			}
			return 0, nil, fmt.Errorf("dimension %d is unknown", i)
		}
	}
	if _, err := shape.Bytes(dt); err != nil {
		return 0, nil, err
	}
	return dt, shape, nil
}

func (b *builder) batch() int64 {
	if b.opts.Batch > 0 {
		return b.opts.Batch
	}
	return 1
}

func (b *builder) bind(name string, leading bool) (int64, error) {
	if n, ok := b.dims[name]; ok {
		return n, nil
	}
	if n, ok := b.opts.Dims[name]; ok {
		if n < 0 {
			return 0, fmt.Errorf("symbolic dimension %q bound to negative %d", name, n)
		}
		if n == 0 && leading {
			// Empty tensors are supported (an ONNX shape may hold a 0),
			// but an empty batch is a step over no samples: its loss is
			// 0/0. It is refused like --batch 0.
			return 0, fmt.Errorf("batch dimension %q bound to 0: a step needs at least one sample", name)
		}
		b.dims[name] = n
		return n, nil
	}
	if leading {
		b.dims[name] = b.batch()
		return b.dims[name], nil
	}
	return 0, fmt.Errorf("symbolic dimension %q is not bound (bind it with --dim %s=N)", name, name)
}

// checkDeclared compares a declared static type with the inferred one.
// Symbolic dimensions that bind to a known name must match too.
func (b *builder) checkDeclared(vi *onnxpb.ValueInfoProto, v *ir.Value) error {
	tt := vi.GetType().GetTensorType()
	if tt == nil {
		return nil
	}
	if et := ir.DType(tt.GetElemType()); et != ir.Undefined && et != v.DType {
		return fmt.Errorf("declared element type %v, inferred %v", et, v.DType)
	}
	if tt.Shape == nil {
		return nil
	}
	if len(tt.Shape.Dim) != len(v.Shape) {
		return fmt.Errorf("declared rank %d, inferred shape %v", len(tt.Shape.Dim), v.Shape)
	}
	for i, d := range tt.Shape.Dim {
		want := int64(-1)
		switch x := d.GetValue().(type) {
		case *onnxpb.TensorShapeProto_Dimension_DimValue:
			want = x.DimValue
		case *onnxpb.TensorShapeProto_Dimension_DimParam:
			if n, ok := b.dims[x.DimParam]; ok {
				want = n
			}
		}
		if want >= 0 && want != v.Shape[i] {
			return fmt.Errorf("declared dimension %d is %d, inferred shape %v", i, want, v.Shape)
		}
	}
	return nil
}

// sortNodes returns the nodes in a topological order: the file's order
// when it already is one (the ONNX rule), otherwise a stable sort that
// keeps file order among ready nodes. A cycle or a use of a name that
// nothing defines is an error naming the node.
func (b *builder) sortNodes(g *ir.Graph, nodes []*onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	producer := map[string]int{}
	for i, n := range nodes {
		desc := nodeDesc(n.GetName(), n.GetDomain(), n.GetOpType())
		for _, out := range n.Output {
			if out == "" {
				continue
			}
			if g.Lookup(out) != nil {
				return nil, b.fail(desc, "output %q redefines a graph input or initializer", out)
			}
			if j, dup := producer[out]; dup {
				other := nodes[j]
				return nil, b.fail(desc, "output %q is already defined by %s", out, nodeDesc(other.GetName(), other.GetDomain(), other.GetOpType()))
			}
			producer[out] = i
		}
	}
	sorted := true
	defined := map[string]bool{}
	for _, n := range nodes {
		desc := nodeDesc(n.GetName(), n.GetDomain(), n.GetOpType())
		for _, in := range n.Input {
			if in == "" || g.Lookup(in) != nil {
				continue
			}
			if _, ok := producer[in]; !ok {
				return nil, b.fail(desc, "input %q is never defined (not a graph input, an initializer or a node output)", in)
			}
			if !defined[in] {
				sorted = false
			}
		}
		for _, out := range n.Output {
			defined[out] = true
		}
	}
	if sorted {
		return nodes, nil
	}
	dg := simple.NewDirectedGraph()
	for i := range nodes {
		dg.AddNode(simple.Node(i))
	}
	for i, n := range nodes {
		for _, in := range n.Input {
			if j, ok := producer[in]; ok {
				if j == i {
					return nil, b.fail(nodeDesc(n.GetName(), n.GetDomain(), n.GetOpType()), "reads its own output %q (a cycle)", in)
				}
				if !dg.HasEdgeFromTo(int64(j), int64(i)) {
					dg.SetEdge(dg.NewEdge(simple.Node(j), simple.Node(i)))
				}
			}
		}
	}
	order, err := topo.SortStabilized(dg, func(ns []graph.Node) {
		sort.Slice(ns, func(a, c int) bool { return ns[a].ID() < ns[c].ID() })
	})
	if err != nil {
		var un topo.Unorderable
		if errors.As(err, &un) && len(un) > 0 {
			var names []string
			cyc := un[0]
			sort.Slice(cyc, func(a, c int) bool { return cyc[a].ID() < cyc[c].ID() })
			for _, x := range cyc {
				n := nodes[x.ID()]
				names = append(names, nodeDesc(n.GetName(), n.GetDomain(), n.GetOpType()))
			}
			first := names[0]
			return nil, b.fail(first, "is part of a cycle: %s", strings.Join(names, " → "))
		}
		return nil, &Error{Err: fmt.Errorf("graph cannot be ordered: %v", err)}
	}
	out := make([]*onnxpb.NodeProto, len(order))
	for i, x := range order {
		out[i] = nodes[x.ID()]
	}
	return out, nil
}

func (b *builder) addNode(g *ir.Graph, n *onnxpb.NodeProto) error {
	desc := nodeDesc(n.GetName(), n.GetDomain(), n.GetOpType())
	if n.GetOpType() == "" {
		return b.fail(desc, "node has no op_type")
	}
	inputs := make([]*ir.Value, len(n.Input))
	for i, name := range n.Input {
		if name == "" {
			continue
		}
		inputs[i] = g.Lookup(name)
	}
	attrs := make([]ir.Attr, 0, len(n.Attribute))
	for _, ap := range n.Attribute {
		a, err := attrFromProto(ap, b.src)
		if err != nil {
			return b.fail(desc, "attribute %q: %v", ap.GetName(), err)
		}
		attrs = append(attrs, a)
	}
	domain := n.GetDomain()
	if domain == "ai.onnx" {
		domain = ""
	}
	op, err := g.NewOp(n.GetOpType(), domain, n.GetName(), inputs, n.Output, attrs)
	if err != nil {
		return b.fail(desc, "%v", err)
	}
	op.Src = n
	for _, kv := range n.MetadataProps {
		if kv.GetKey() == ir.PhaseKey {
			p, ok := ir.ParsePhase(kv.GetValue())
			if !ok {
				return b.fail(desc, "metadata %s=%q is not a phase", ir.PhaseKey, kv.GetValue())
			}
			op.Phase = p
		}
		if kv.GetKey() == ir.OriginKey {
			op.Origin = kv.GetValue()
		}
		if kv.GetKey() == ir.HostKey {
			op.Host = kv.GetValue() == "1"
		}
	}
	if ir.LookupSchema(op.Domain, op.Type) != nil {
		if err := ir.InferAndSet(op, b.m.Opset(op.Domain)); err != nil {
			return b.fail(desc, "%v", stripDesc(err, op))
		}
	} else {
		// Unknown op: carried opaquely when value_info gives every output.
		for _, v := range op.Outputs() {
			if v == nil {
				continue
			}
			vi, ok := b.info[v.Name]
			if !ok {
				return b.fail(desc, "operator %s is not supported by tsplit and value_info does not give the type of its output %q", quote.Name(op.QualifiedType()), v.Name)
			}
			dt, shape, err := b.valueType(vi, false)
			if err != nil {
				return b.fail(desc, "operator %s is not supported and the value_info of its output %q is not static: %v", quote.Name(op.QualifiedType()), v.Name, err)
			}
			v.DType, v.Shape = dt, shape
		}
	}
	for _, v := range op.Outputs() {
		if v == nil {
			continue
		}
		if vi, ok := b.info[v.Name]; ok {
			if err := b.checkDeclared(vi, v); err != nil {
				return b.fail(desc, "output %q: %v", v.Name, err)
			}
		}
	}
	return nil
}

// stripDesc removes the op description that ir errors start with, since
// the frontend error names the node itself.
func stripDesc(err error, op *ir.Op) string {
	return strings.TrimPrefix(err.Error(), op.Describe()+": ")
}

func attrFromProto(ap *onnxpb.AttributeProto, src dataSource) (ir.Attr, error) {
	a := ir.Attr{Name: ap.GetName(), Type: ir.AttrType(ap.GetType()), Src: ap}
	if a.Name == "" {
		return a, errors.New("attribute has no name")
	}
	if a.Type == ir.AttrUndefined {
		// Pre-IR-2 models leave the type out; deduce it from the field set.
		a.Type = deduceAttrType(ap)
	}
	switch a.Type {
	case ir.AttrFloat:
		a.Float = ap.GetF()
	case ir.AttrInt:
		a.Int = ap.GetI()
	case ir.AttrString:
		a.String = string(ap.GetS())
	case ir.AttrFloats:
		a.Floats = ap.GetFloats()
	case ir.AttrInts:
		a.Ints = ap.GetInts()
	case ir.AttrStrings:
		for _, s := range ap.GetStrings() {
			a.Strings = append(a.Strings, string(s))
		}
	case ir.AttrTensor:
		if ap.T == nil {
			return a, errors.New("tensor attribute has no tensor")
		}
		t, err := tensorFromProto(ap.T, src)
		if err != nil {
			return a, err
		}
		a.Tensor = t
	case ir.AttrGraph, ir.AttrGraphs, ir.AttrTensors, ir.AttrSparseTensor, ir.AttrSparseTensors, ir.AttrTypeProto, ir.AttrTypeProtos:
		// Carried opaquely in Src.
	default:
		return a, fmt.Errorf("unknown attribute type %d", ap.GetType())
	}
	if a.Type == ir.AttrFloat && math.IsNaN(float64(a.Float)) {
		return a, nil
	}
	return a, nil
}

func deduceAttrType(ap *onnxpb.AttributeProto) ir.AttrType {
	switch {
	case ap.F != nil:
		return ir.AttrFloat
	case ap.I != nil:
		return ir.AttrInt
	case ap.S != nil:
		return ir.AttrString
	case ap.T != nil:
		return ir.AttrTensor
	case ap.G != nil:
		return ir.AttrGraph
	case len(ap.Floats) > 0:
		return ir.AttrFloats
	case len(ap.Ints) > 0:
		return ir.AttrInts
	case len(ap.Strings) > 0:
		return ir.AttrStrings
	}
	return ir.AttrUndefined
}

// markParams flags the parameters a model declares: graph inputs listed
// under ir.ParamInputsKey, and the parameters of a training step, whose
// description must name values of the graph.
func markParams(m *ir.Model) error {
	var names []string
	if s := m.Meta[ir.ParamInputsKey]; s != "" {
		names = strings.Split(s, ",")
	}
	ti, err := ReadTrainingInfo(m)
	if err != nil {
		return err
	}
	if ti != nil {
		names = append(names, ti.Params...)
		for _, fb := range ti.Feedback {
			out, in := m.Graph.Lookup(fb[0]), m.Graph.Lookup(fb[1])
			if out != nil && in != nil {
				in.Next = out
			}
		}
	}
	for _, n := range names {
		if v := m.Graph.Lookup(n); v != nil && v.Kind != ir.KindOp {
			v.Param = true
		}
	}
	return nil
}

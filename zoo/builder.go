package zoo

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

// autoInputsBytes is the weight size above which Build stores weights as
// graph inputs without data even when Config.WeightsAsInputs is false.
const autoInputsBytes = 256 << 20

// maxParams bounds the total number of weight elements of a model: beyond it
// a configuration is considered absurd.
const maxParams = 1 << 40

// initKind says how a weight tensor is initialised.
type initKind int

const (
	initUniform initKind = iota // U(-a, a)
	initFill                    // every element a
)

// weight is a parameter or buffer tensor of the model, created lazily: its
// data (or graph input) is only produced by finish.
type weight struct {
	name string
	dims []int64
	kind initKind
	a    float32
}

func (w *weight) elems() int64 {
	n := int64(1)
	for _, d := range w.dims {
		n *= d
	}
	return n
}

// errBuild is the panic value builders use for configuration errors found
// while building (e.g. a feature map that shrinks to nothing); Build turns
// it back into an error.
type errBuild struct{ err error }

func failf(format string, args ...any) {
	panic(errBuild{fmt.Errorf(format, args...)})
}

// builder accumulates one graph.
type builder struct {
	name    string
	cfg     Config
	nodes   []*onnxpb.NodeProto
	consts  []*onnxpb.TensorProto
	weights []*weight
	inputs  []*onnxpb.ValueInfoProto
	outputs []*onnxpb.ValueInfoProto

	values    map[string]bool // every value name: inputs, initializers, node outputs
	nodeNames map[string]bool
	constKeys map[string]string // structural constant cache: key -> value name

	nparams int64 // total weight elements so far
}

func newBuilder(name string, cfg Config) *builder {
	return &builder{
		name:      name,
		cfg:       cfg,
		values:    map[string]bool{},
		nodeNames: map[string]bool{},
		constKeys: map[string]string{},
	}
}

// claimValue reserves a value name, which must be new.
func (b *builder) claimValue(name string) {
	if b.values[name] {
		panic(fmt.Sprintf("zoo: internal error: duplicate value name %q", name))
	}
	b.values[name] = true
}

// uniqueNode returns name, or name_1, name_2, ... if name is taken as a node
// name or as a value name.
func (b *builder) uniqueNode(name string) string {
	cand := name
	for i := 1; b.nodeNames[cand] || b.values[cand]; i++ {
		cand = name + "_" + strconv.Itoa(i)
	}
	b.nodeNames[cand] = true
	return cand
}

// node appends a node named name (made unique) and returns its outputs. The
// first output is named like the node; further outputs are named
// node/suffix for each of extra.
func (b *builder) node(op, name string, inputs []string, extra []string, attrs ...*onnxpb.AttributeProto) []string {
	n := b.uniqueNode(name)
	outs := []string{n}
	for _, s := range extra {
		outs = append(outs, n+"/"+s)
	}
	for _, o := range outs {
		b.claimValue(o)
	}
	b.nodes = append(b.nodes, &onnxpb.NodeProto{
		Name:      proto.String(n),
		OpType:    proto.String(op),
		Input:     append([]string(nil), inputs...),
		Output:    outs,
		Attribute: attrs,
	})
	return outs
}

// op is node for single-output ops.
func (b *builder) op(op, name string, inputs []string, attrs ...*onnxpb.AttributeProto) string {
	return b.node(op, name, inputs, nil, attrs...)[0]
}

// param declares a weight tensor and returns its name.
func (b *builder) param(name string, dims []int64, kind initKind, a float64) string {
	w := &weight{name: name, dims: append([]int64(nil), dims...), kind: kind, a: float32(a)}
	n := w.elems()
	if n <= 0 {
		failf("%s: weight %s has shape %v", b.name, name, dims)
	}
	if n > maxParams || b.nparams > maxParams-n {
		failf("%s: more than %d weights: configuration too large", b.name, int64(maxParams))
	}
	b.nparams += n
	b.claimValue(name)
	b.weights = append(b.weights, w)
	return name
}

// uniform declares a weight drawn from U(-a, a).
func (b *builder) uniform(name string, dims []int64, a float64) string {
	return b.param(name, dims, initUniform, a)
}

// fill declares a weight whose elements are all v.
func (b *builder) fill(name string, dims []int64, v float64) string {
	return b.param(name, dims, initFill, v)
}

// constant adds (or reuses) a structural constant initializer.
func (b *builder) constant(key, name string, t *onnxpb.TensorProto) string {
	if v, ok := b.constKeys[key]; ok {
		return v
	}
	base := name
	for i := 1; b.values[name]; i++ {
		name = base + "_" + strconv.Itoa(i)
	}
	b.claimValue(name)
	t.Name = proto.String(name)
	b.consts = append(b.consts, t)
	b.constKeys[key] = name
	return name
}

// int64s is a constant int64 tensor of the given shape (nil dims: a 1-D
// tensor of the values).
func (b *builder) int64s(name string, dims []int64, vals ...int64) string {
	if dims == nil {
		dims = []int64{int64(len(vals))}
	}
	raw := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
	}
	key := constKey("i64", name, dims, vals)
	return b.constant(key, name, &onnxpb.TensorProto{
		Dims:     dims,
		DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)),
		RawData:  raw,
	})
}

// float32s is a constant float32 tensor of the given shape (nil dims: a
// scalar when there is one value, else 1-D).
func (b *builder) float32s(name string, dims []int64, vals ...float32) string {
	if dims == nil && len(vals) != 1 {
		dims = []int64{int64(len(vals))}
	}
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	key := constKey("f32", name, dims, vals)
	return b.constant(key, name, &onnxpb.TensorProto{
		Dims:     dims,
		DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
		RawData:  raw,
	})
}

// constKey is the cache key of a constant: small constants are shared by
// value, large ones (position vectors) only by name.
func constKey[T any](typ, name string, dims []int64, vals []T) string {
	if len(vals) > 16 {
		return typ + " " + name
	}
	return fmt.Sprintf("%s%v%v", typ, dims, vals)
}

func itoa(i int) string { return strconv.Itoa(i) }

// shape is a Reshape target constant.
func (b *builder) shape(dims ...int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return b.int64s("const.shape_"+strings.ReplaceAll(strings.Join(parts, "_"), "-", "m"), nil, dims...)
}

// dropout inserts a training-mode Dropout after x when Config.Dropout > 0.
func (b *builder) dropout(name, x string) string {
	if b.cfg.Dropout <= 0 {
		return x
	}
	ratio := b.float32s("dropout.ratio", nil, b.cfg.Dropout)
	mode := b.constant("training_mode", "dropout.training_mode", &onnxpb.TensorProto{
		DataType: proto.Int32(int32(onnxpb.TensorProto_BOOL)),
		RawData:  []byte{1},
	})
	return b.node("Dropout", name, []string{x, ratio, mode}, []string{"mask"})[0]
}

// input declares a graph input.
func (b *builder) input(name string, elem onnxpb.TensorProto_DataType, dims ...int64) string {
	b.claimValue(name)
	b.inputs = append(b.inputs, b.valueInfo(name, elem, dims))
	return name
}

// batchDim is the batch dimension for graph inputs and outputs: -1 stands
// for the symbolic "batch".
func (b *builder) batchDim() int64 {
	if b.cfg.Batch == 0 {
		return -1
	}
	return b.cfg.Batch
}

// valueInfo describes a tensor; a negative dim is the symbolic "batch".
func (b *builder) valueInfo(name string, elem onnxpb.TensorProto_DataType, dims []int64) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		dim := &onnxpb.TensorShapeProto_Dimension{}
		if d < 0 {
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}
		} else {
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}
		}
		shape.Dim = append(shape.Dim, dim)
	}
	return &onnxpb.ValueInfoProto{
		Name: proto.String(name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(elem)),
			Shape:    shape,
		}}},
	}
}

// output renames value x (the first output of the last node producing it)
// to "output" and declares it as the graph output.
func (b *builder) output(x string, dims ...int64) {
	renamed := false
	for i := len(b.nodes) - 1; i >= 0 && !renamed; i-- {
		for j, o := range b.nodes[i].Output {
			if o == x {
				b.nodes[i].Output[j] = "output"
				renamed = true
				break
			}
		}
	}
	if !renamed || b.values["output"] {
		panic(fmt.Sprintf("zoo: internal error: cannot name %q the output", x))
	}
	delete(b.values, x)
	b.values["output"] = true
	for _, n := range b.nodes {
		for j, in := range n.Input {
			if in == x {
				n.Input[j] = "output"
			}
		}
	}
	b.outputs = append(b.outputs, b.valueInfo("output", onnxpb.TensorProto_FLOAT, dims))
}

// weightBytes is the size of all weights as float32.
func (b *builder) weightBytes() int64 { return 4 * b.nparams }

// finish assembles the model: weights become initializers with data, or
// graph inputs without data when asInputs.
func (b *builder) finish(asInputs bool) *onnxpb.ModelProto {
	g := &onnxpb.GraphProto{
		Name:   proto.String(b.name),
		Node:   b.nodes,
		Input:  b.inputs,
		Output: b.outputs,
	}
	var meta []*onnxpb.StringStringEntryProto
	if asInputs {
		names := make([]string, 0, len(b.weights))
		for _, w := range b.weights {
			g.Input = append(g.Input, b.valueInfo(w.name, onnxpb.TensorProto_FLOAT, w.dims))
			names = append(names, w.name)
		}
		g.Initializer = b.consts
		// Say which inputs are the parameters, so tsplit trains them.
		meta = append(meta, &onnxpb.StringStringEntryProto{Key: proto.String(ir.ParamInputsKey), Value: proto.String(strings.Join(names, ","))})
	} else {
		g.Initializer = append(b.materialize(), b.consts...)
	}
	c := b.cfg
	doc := fmt.Sprintf("tsplit zoo model %s: batch=%d width=%g image=%d seq=%d layers=%d classes=%d vocab=%d dropout=%g seed=%d weights_as_inputs=%t",
		b.name, c.Batch, c.Width, c.ImageSize, c.SeqLen, c.Layers, c.Classes, c.Vocab, c.Dropout, c.Seed, asInputs)
	return &onnxpb.ModelProto{
		IrVersion:     proto.Int64(8),
		OpsetImport:   []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		ProducerName:  proto.String("tsplit-zoo"),
		DocString:     proto.String(doc),
		Graph:         g,
		MetadataProps: meta,
	}
}

// materialize generates every weight's data, in parallel; each tensor has
// its own PCG stream, so the result does not depend on scheduling.
func (b *builder) materialize() []*onnxpb.TensorProto {
	out := make([]*onnxpb.TensorProto, len(b.weights))
	work := make(chan int)
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), 8, len(b.weights))
	for range workers {
		wg.Go(func() {
			for i := range work {
				out[i] = b.tensorData(b.weights[i])
			}
		})
	}
	for i := range b.weights {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

func (b *builder) tensorData(w *weight) *onnxpb.TensorProto {
	n := w.elems()
	raw := make([]byte, 4*n)
	switch w.kind {
	case initFill:
		bits := math.Float32bits(w.a)
		for i := int64(0); i < n; i++ {
			binary.LittleEndian.PutUint32(raw[4*i:], bits)
		}
	case initUniform:
		h := fnv.New64a()
		h.Write([]byte(w.name))
		r := rand.New(rand.NewPCG(uint64(b.cfg.Seed), h.Sum64()))
		for i := int64(0); i < n; i++ {
			v := (2*r.Float32() - 1) * w.a
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
	}
	return &onnxpb.TensorProto{
		Name:     proto.String(w.name),
		Dims:     w.dims,
		DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
		RawData:  raw,
	}
}

// Attribute helpers.

func aInt(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func aInts(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

func aFloat(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

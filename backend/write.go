package backend

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

// ToProto converts a model to a ModelProto. Fields of the source model
// that the IR does not represent are copied from m.Src; the result
// shares initializer protos with the source rather than copying weights.
func ToProto(m *ir.Model) (*onnxpb.ModelProto, error) {
	src, _ := m.Src.(*onnxpb.ModelProto)
	out := &onnxpb.ModelProto{}
	if src != nil {
		out.IrVersion = src.IrVersion
		out.OpsetImport = opsets(src.OpsetImport, m.Opsets)
		out.ProducerName = src.ProducerName
		out.ProducerVersion = src.ProducerVersion
		out.Domain = src.Domain
		out.ModelVersion = src.ModelVersion
		out.DocString = src.DocString
		out.MetadataProps = metadata(src.MetadataProps, m.Meta)
		out.TrainingInfo = src.TrainingInfo
		out.Functions = src.Functions
		out.ProtoReflect().SetUnknown(src.ProtoReflect().GetUnknown())
	} else {
		out.IrVersion = proto.Int64(m.IRVersion)
		if m.IRVersion == 0 {
			out.IrVersion = proto.Int64(int64(onnxpb.Version_IR_VERSION))
		}
		out.OpsetImport = opsets(nil, m.Opsets)
		out.MetadataProps = metadata(nil, m.Meta)
	}
	g, err := graphToProto(m.Graph, m.Specialized)
	if err != nil {
		return nil, err
	}
	out.Graph = g
	addTsplitFunctions(m, out)
	return out, nil
}

// Marshal encodes a model deterministically.
func Marshal(m *ir.Model) ([]byte, error) {
	mp, err := ToProto(m)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(mp)
}

// WriteFile writes the model to path atomically: the bytes go to a
// temporary file in the same folder that is renamed into place, so a
// failure never leaves a partial output file. See WriteFileContext.
func WriteFile(m *ir.Model, path string) error {
	return WriteFileContext(context.Background(), m, path)
}

// WriteFileContext writes the model to path (CheckOutput says which
// paths it refuses; the files the model was read from are among them)
// and gives up, leaving nothing behind, once ctx is done. A model whose
// weights are external data and that is written to another folder than
// the one it was read from gets its own data file, path + ".data",
// beside it: locations are relative to the model's folder.
func WriteFileContext(ctx context.Context, m *ir.Model, path string) error {
	inputs := InputFiles(m)
	dst, err := CheckOutput(path, inputs...)
	if err != nil {
		return err
	}
	mp, err := ToProto(m)
	if err != nil {
		return fmt.Errorf("backend: %s: %v", path, err)
	}
	if m.Path != "" && !sameFolder(dst, m.Path) {
		dataPath, err := CheckOutput(dst+".data", inputs...)
		if err != nil {
			return err
		}
		ext, err := relocate(m, mp, filepath.Base(dataPath))
		if err != nil {
			return err
		}
		if len(ext) > 0 {
			if err := writeAtomic(ctx, dataPath, func(w io.Writer) error { return writeData(w, ext) }); err != nil {
				return err
			}
		}
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(mp)
	if err != nil {
		return fmt.Errorf("backend: %s: %v", path, err)
	}
	return writeAtomic(ctx, dst, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// addTsplitFunctions gives every tsplit-domain op the model uses a
// model-local function with a standard body (Identity for the swaps), so
// any ONNX runtime executes the file with the same results while
// tsplit's runtime performs the real memory operation (DESIGN decision 3).
func addTsplitFunctions(m *ir.Model, out *onnxpb.ModelProto) {
	used := map[string]bool{}
	for _, op := range m.Graph.Order() {
		if op.Domain == ir.Domain {
			used[op.Type] = true
		}
	}
	if len(used) == 0 {
		return
	}
	have := map[string]bool{}
	for _, f := range out.Functions {
		if f.GetDomain() == ir.Domain {
			have[f.GetName()] = true
		}
	}
	var types []string
	for t := range used {
		if !have[t] {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	fns := append([]*onnxpb.FunctionProto(nil), out.Functions...)
	for _, t := range types {
		body, ok := tsplitBodies[t]
		if !ok {
			continue
		}
		fns = append(fns, &onnxpb.FunctionProto{
			Name: proto.String(t), Domain: proto.String(ir.Domain),
			Input: []string{"x"}, Output: []string{"y"}, Attribute: tsplitAttrs[t],
			Node:        []*onnxpb.NodeProto{{OpType: proto.String(body), Input: []string{"x"}, Output: []string{"y"}}},
			OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(m.Opset(""))}},
			DocString:   proto.String("tsplit " + t + ": a device↔host transfer in tsplit's runtime; the identity on values"),
		})
	}
	out.Functions = fns
	found := false
	for _, os := range out.OpsetImport {
		if os.GetDomain() == ir.Domain {
			found = true
		}
	}
	if !found {
		out.OpsetImport = append(append([]*onnxpb.OperatorSetIdProto(nil), out.OpsetImport...),
			&onnxpb.OperatorSetIdProto{Domain: proto.String(ir.Domain), Version: proto.Int64(1)})
	}
}

// tsplitBodies is the standard op each tsplit op's function applies.
var tsplitBodies = map[string]string{"SwapOut": "Identity", "SwapIn": "Identity"}

// tsplitAttrs are the attributes each tsplit op's function declares
// (the body ignores them; tsplit's runtime reads them).
var tsplitAttrs = map[string][]string{"SwapOut": {ir.ReleaseAttr}}

// opsets merges the source model's opset imports with the IR's, like
// metadata: an unchanged model keeps its list.
func opsets(src []*onnxpb.OperatorSetIdProto, ops map[string]int64) []*onnxpb.OperatorSetIdProto {
	var out []*onnxpb.OperatorSetIdProto
	seen := map[string]bool{}
	changed := false
	norm := func(d string) string {
		if d == "ai.onnx" {
			return ""
		}
		return d
	}
	for _, os := range src {
		d := norm(os.GetDomain())
		v, ok := ops[d]
		seen[d] = true
		switch {
		case !ok:
			changed = true
		case v != os.GetVersion():
			changed = true
			out = append(out, &onnxpb.OperatorSetIdProto{Domain: proto.String(os.GetDomain()), Version: proto.Int64(v)})
		default:
			out = append(out, os)
		}
	}
	var added []string
	for d := range ops {
		if !seen[d] {
			added = append(added, d)
		}
	}
	if !changed && len(added) == 0 {
		return src
	}
	slices.Sort(added)
	for _, d := range added {
		out = append(out, &onnxpb.OperatorSetIdProto{Domain: proto.String(d), Version: proto.Int64(ops[d])})
	}
	return out
}

// metadata merges the source model's metadata with the IR's: source
// entries keep their order (with the IR's values), deleted keys go, and
// new keys follow in sorted order. An unchanged model keeps its list.
func metadata(src []*onnxpb.StringStringEntryProto, meta map[string]string) []*onnxpb.StringStringEntryProto {
	if meta == nil {
		return src
	}
	var out []*onnxpb.StringStringEntryProto
	seen := map[string]bool{}
	changed := false
	for _, kv := range src {
		v, ok := meta[kv.GetKey()]
		seen[kv.GetKey()] = true
		switch {
		case !ok:
			changed = true
		case v != kv.GetValue():
			changed = true
			out = append(out, &onnxpb.StringStringEntryProto{Key: proto.String(kv.GetKey()), Value: proto.String(v)})
		default:
			out = append(out, kv)
		}
	}
	var added []string
	for k := range meta {
		if !seen[k] {
			added = append(added, k)
		}
	}
	if !changed && len(added) == 0 {
		return src
	}
	slices.Sort(added)
	for _, k := range added {
		out = append(out, &onnxpb.StringStringEntryProto{Key: proto.String(k), Value: proto.String(meta[k])})
	}
	return out
}

func graphToProto(g *ir.Graph, static bool) (*onnxpb.GraphProto, error) {
	src, _ := g.Src.(*onnxpb.GraphProto)
	out := &onnxpb.GraphProto{}
	srcInputs := map[string]*onnxpb.ValueInfoProto{}
	srcOutputs := map[string]*onnxpb.ValueInfoProto{}
	if src != nil {
		out.Name = src.Name
		out.DocString = src.DocString
		out.SparseInitializer = src.SparseInitializer
		out.QuantizationAnnotation = src.QuantizationAnnotation
		out.MetadataProps = src.MetadataProps
		out.ProtoReflect().SetUnknown(src.ProtoReflect().GetUnknown())
		for _, vi := range src.Input {
			srcInputs[vi.GetName()] = vi
		}
		for _, vi := range src.Output {
			srcOutputs[vi.GetName()] = vi
		}
		// value_info entries are kept for the values that still exist
		// (a specialized graph drops the source's symbolic ones).
		for _, vi := range src.ValueInfo {
			if g.Lookup(vi.GetName()) != nil && !static {
				out.ValueInfo = append(out.ValueInfo, vi)
			}
		}
		if static {
			clear(srcInputs)
			clear(srcOutputs)
		}
	} else {
		out.Name = proto.String(g.Name)
	}
	for _, v := range g.Inputs {
		if vi, ok := srcInputs[v.Name]; ok {
			out.Input = append(out.Input, vi)
		} else {
			out.Input = append(out.Input, valueInfo(v))
		}
	}
	for _, v := range g.Inits {
		tp, err := initProto(v)
		if err != nil {
			return nil, err
		}
		out.Initializer = append(out.Initializer, tp)
	}
	for _, op := range g.Order() {
		out.Node = append(out.Node, nodeProto(op))
	}
	for _, v := range g.Outputs {
		if vi, ok := srcOutputs[v.Name]; ok {
			out.Output = append(out.Output, vi)
		} else {
			out.Output = append(out.Output, valueInfo(v))
		}
	}
	return out, nil
}

// valueInfo describes a value's static type.
func valueInfo(v *ir.Value) *onnxpb.ValueInfoProto {
	dims := make([]*onnxpb.TensorShapeProto_Dimension, len(v.Shape))
	for i, d := range v.Shape {
		dims[i] = &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}}
	}
	return &onnxpb.ValueInfoProto{
		Name: proto.String(v.Name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(v.DType)),
			Shape:    &onnxpb.TensorShapeProto{Dim: dims},
		}}},
	}
}

func initProto(v *ir.Value) (*onnxpb.TensorProto, error) {
	if tp, ok := v.Src.(*onnxpb.TensorProto); ok {
		return tp, nil
	}
	t, err := v.Data()
	if err != nil {
		return nil, fmt.Errorf("backend: initializer %q: %v", v.Name, err)
	}
	if t == nil {
		return nil, fmt.Errorf("backend: initializer %q has no data", v.Name)
	}
	tp := TensorProto(t)
	tp.Name = proto.String(v.Name)
	return tp, nil
}

// TensorProto encodes a tensor with raw_data.
func TensorProto(t *ir.Tensor) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{
		Dims:     append([]int64{}, t.Shape...),
		DataType: proto.Int32(int32(t.DType)),
		RawData:  append([]byte{}, t.Raw...),
	}
}

func nodeProto(op *ir.Op) *onnxpb.NodeProto {
	n := &onnxpb.NodeProto{}
	if src, ok := op.Src.(*onnxpb.NodeProto); ok {
		n.DocString = src.DocString
		n.Overload = src.Overload
		for _, kv := range src.MetadataProps {
			if k := kv.GetKey(); k != ir.PhaseKey && k != ir.HostKey && k != ir.OriginKey {
				n.MetadataProps = append(n.MetadataProps, kv)
			}
		}
		n.ProtoReflect().SetUnknown(src.ProtoReflect().GetUnknown())
		if src.Name != nil || op.Name != "" {
			n.Name = proto.String(op.Name)
		}
		if src.Domain != nil || op.Domain != "" {
			n.Domain = proto.String(op.Domain)
			if src.GetDomain() == "ai.onnx" && op.Domain == "" {
				n.Domain = proto.String("ai.onnx")
			}
		}
	} else {
		if op.Name != "" {
			n.Name = proto.String(op.Name)
		}
		if op.Domain != "" {
			n.Domain = proto.String(op.Domain)
		}
	}
	n.OpType = proto.String(op.Type)
	if op.Phase != ir.Forward {
		n.MetadataProps = append(n.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(ir.PhaseKey), Value: proto.String(op.Phase.String())})
	}
	if op.Origin != "" {
		n.MetadataProps = append(n.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(ir.OriginKey), Value: proto.String(op.Origin)})
	}
	if op.Host {
		n.MetadataProps = append(n.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(ir.HostKey), Value: proto.String("1")})
	}
	for _, v := range op.Inputs() {
		if v == nil {
			n.Input = append(n.Input, "")
		} else {
			n.Input = append(n.Input, v.Name)
		}
	}
	for _, v := range op.Outputs() {
		if v == nil {
			n.Output = append(n.Output, "")
		} else {
			n.Output = append(n.Output, v.Name)
		}
	}
	for i := range op.Attrs {
		n.Attribute = append(n.Attribute, attrProto(&op.Attrs[i]))
	}
	return n
}

func attrProto(a *ir.Attr) *onnxpb.AttributeProto {
	if ap, ok := a.Src.(*onnxpb.AttributeProto); ok {
		return ap
	}
	ap := &onnxpb.AttributeProto{Name: proto.String(a.Name), Type: onnxpb.AttributeProto_AttributeType(a.Type).Enum()}
	switch a.Type {
	case ir.AttrFloat:
		ap.F = proto.Float32(a.Float)
	case ir.AttrInt:
		ap.I = proto.Int64(a.Int)
	case ir.AttrString:
		ap.S = []byte(a.String)
	case ir.AttrFloats:
		ap.Floats = append([]float32{}, a.Floats...)
	case ir.AttrInts:
		ap.Ints = append([]int64{}, a.Ints...)
	case ir.AttrStrings:
		for _, s := range a.Strings {
			ap.Strings = append(ap.Strings, []byte(s))
		}
	case ir.AttrTensor:
		if a.Tensor != nil {
			ap.T = TensorProto(a.Tensor)
		}
	}
	return ap
}

package ir

import (
	"fmt"

	"github.com/tsplit/tsplit/internal/quote"
)

// OpID is a dense per-graph identifier of an op.
type OpID int32

// Phase is the part of a training step an op belongs to. Ops of a
// forward (inference) model are Forward; the training-step lowering adds
// Loss, Backward and Update ops. The planner evicts the forward values
// that Backward ops read (the feature maps).
type Phase uint8

// Phases.
const (
	Forward Phase = iota
	Loss
	Backward
	Update
)

var phaseNames = [...]string{"forward", "loss", "backward", "update"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", p)
}

// PhaseKey is the node metadata key under which a serialized model
// records an op's phase (absent for forward ops).
const PhaseKey = "tsplit.phase"

// OriginKey is the node metadata key of Op.Origin.
const OriginKey = "tsplit.origin"

// HostKey is the node metadata key marking a host-placed op ("1").
const HostKey = "tsplit.host"

// ParamInputsKey is the model metadata key listing, comma-separated,
// graph inputs that are trainable parameters (models whose weights are
// inputs rather than initializers, such as big zoo configurations).
const ParamInputsKey = "tsplit.param_inputs"

// ParsePhase is the inverse of Phase.String.
func ParsePhase(s string) (Phase, bool) {
	for i, n := range phaseNames {
		if n == s {
			return Phase(i), true
		}
	}
	return 0, false
}

// Op is one operation: a node of the graph.
type Op struct {
	ID     OpID
	Type   string
	Domain string // "" is the default ONNX domain
	Name   string
	Attrs  []Attr

	// Phase says which part of a training step the op belongs to.
	Phase Phase

	// Origin says which planning rewrite made the op ("recompute" for a
	// recomputation clone, "split" for a micro-op); empty for the
	// model's own ops. Serialized as node metadata (OriginKey).
	Origin string

	// Host places a standard data-movement op (Slice, Concat) on the
	// host: it reads and writes host tensors, such as the pieces of a
	// split tensor staged in host memory, and uses no device memory.
	// Other runtimes see an ordinary op.
	Host bool

	// Src carries the serialized node the op was read from (doc string,
	// metadata, unknown fields), owned by the frontend and the writer.
	Src any

	inputs  []*Value // nil entries are absent optional inputs
	outputs []*Value // nil entries are absent optional outputs
	g       *Graph
	removed bool
}

// Inputs returns the op's inputs; nil marks an absent optional input.
// The slice must not be modified: use SetInput.
func (o *Op) Inputs() []*Value { return o.inputs }

// Outputs returns the op's outputs; nil marks an absent optional output.
func (o *Op) Outputs() []*Value { return o.outputs }

// Input returns input i, or nil when absent or out of range.
func (o *Op) Input(i int) *Value {
	if i < len(o.inputs) {
		return o.inputs[i]
	}
	return nil
}

// Output returns output i, or nil when absent or out of range.
func (o *Op) Output(i int) *Value {
	if i < len(o.outputs) {
		return o.outputs[i]
	}
	return nil
}

// Graph is the graph that owns o.
func (o *Op) Graph() *Graph { return o.g }

// SetInput replaces input i, keeping use lists right. v may be nil to
// make an optional input absent.
func (o *Op) SetInput(i int, v *Value) {
	if old := o.inputs[i]; old != nil {
		old.removeUse(o, i)
	}
	o.inputs[i] = v
	if v != nil {
		v.addUse(o, i)
	}
}

// AddInput appends an input.
func (o *Op) AddInput(v *Value) {
	o.inputs = append(o.inputs, nil)
	o.SetInput(len(o.inputs)-1, v)
}

// Attr returns the attribute with the given name, or nil.
func (o *Op) Attr(name string) *Attr {
	for i := range o.Attrs {
		if o.Attrs[i].Name == name {
			return &o.Attrs[i]
		}
	}
	return nil
}

// SetAttr sets or replaces an attribute. The serialized source of a
// replaced attribute is dropped: the writer re-encodes it.
func (o *Op) SetAttr(a Attr) {
	a.Src = nil
	for i := range o.Attrs {
		if o.Attrs[i].Name == a.Name {
			o.Attrs[i] = a
			return
		}
	}
	o.Attrs = append(o.Attrs, a)
}

// AttrInt returns an int attribute or def when absent.
func (o *Op) AttrInt(name string, def int64) int64 {
	if a := o.Attr(name); a != nil && a.Type == AttrInt {
		return a.Int
	}
	return def
}

// AttrFloat returns a float attribute or def when absent.
func (o *Op) AttrFloat(name string, def float32) float32 {
	if a := o.Attr(name); a != nil && a.Type == AttrFloat {
		return a.Float
	}
	return def
}

// AttrString returns a string attribute or def when absent.
func (o *Op) AttrString(name string, def string) string {
	if a := o.Attr(name); a != nil && a.Type == AttrString {
		return a.String
	}
	return def
}

// AttrInts returns an ints attribute or def when absent.
func (o *Op) AttrInts(name string, def []int64) []int64 {
	if a := o.Attr(name); a != nil && a.Type == AttrInts {
		return a.Ints
	}
	return def
}

// AttrFloats returns a floats attribute or def when absent.
func (o *Op) AttrFloats(name string, def []float32) []float32 {
	if a := o.Attr(name); a != nil && a.Type == AttrFloats {
		return a.Floats
	}
	return def
}

// QualifiedType is "domain:Type", or just Type in the default domain.
func (o *Op) QualifiedType() string { return qualified(o.Domain, o.Type) }

// Describe names the op for error messages: its node name and type.
func (o *Op) Describe() string {
	// The type comes from the model too: quoted when it is not plain
	// text, as the name always is.
	if o.Name != "" {
		return fmt.Sprintf("node %q (%s)", o.Name, quote.Name(o.QualifiedType()))
	}
	return fmt.Sprintf("node #%d (%s)", o.ID, quote.Name(o.QualifiedType()))
}

func (o *Op) String() string { return fmt.Sprintf("op%d:%s", o.ID, o.QualifiedType()) }

package ir

import (
	"fmt"
	"sort"
)

// Schema is one operator's entry in the op registry: arity, attributes,
// shape inference and traits, declared here, plus the typed slots
// (Slot) that other packages fill for the same entry: kernels per
// device, the gradient rule, the split rule, the cost. Everything tsplit
// knows about an op hangs on this one entry.
type Schema struct {
	Type   string
	Domain string // "" for the default ONNX domain
	// MinIn/MaxIn bound the number of inputs (counting absent optional
	// ones); MaxIn < 0 means variadic. Likewise for outputs.
	MinIn, MaxIn   int
	MinOut, MaxOut int
	// Attrs lists the attributes the op accepts and their types.
	Attrs map[string]AttrType
	// Infer computes output dtypes and shapes (and constant values for
	// small shape arithmetic) from the inputs and attributes.
	Infer func(c *InferCtx) error
	// Copy marks tsplit's transfer ops, which run on a copy stream
	// concurrently with compute: ToHost ops (swap-out) read a device
	// tensor and define a host tensor; ToDevice ops (swap-in) read a
	// host tensor and define a device tensor. The memory model, the
	// simulator and the runtime all read this one field.
	Copy CopyKind

	// Traits. Each is read by the packages that act on it; none is a
	// hint that some package ignores.

	// View says whether output 0 is input 0's bytes (see View and
	// ViewOf); ViewAt decides it for an OffsetView op.
	View   View
	ViewAt func(op *Op) (offset int64, ok bool)
	// Elementwise: output element i depends only on the input elements
	// at i's (multidirectionally broadcast) position. The split slot
	// derives its rule from it (every dimension splits), the cost slot
	// its FLOPs (one per element).
	Elementwise bool
	// InPlace: the kernel may write output 0 into input 0's buffer when
	// the two have the same type and shape (each output element is
	// computed from input elements at its own position only, and read
	// before it is written). No runtime exploits it yet; the coverage
	// test runs every such kernel in place against a separate buffer.
	InPlace bool
	// Random: the op draws random numbers (Dropout in training). Its
	// kernel's draws depend on the node name and the step only, so a
	// rerun in the same step reproduces them, but a clone (a recompute
	// or a micro-op of a split) under another name does not.
	Random bool
	// NoGrad lists the inputs that never carry a gradient (shapes,
	// indices, axes, running statistics, ratios). Autodiff asks no rule
	// for them.
	NoGrad []int
	// ConstIn lists the inputs the inference rule reads as compile-time
	// constants (Reshape's target shape, Slice's starts, ends, axes and
	// steps, Expand's shape): without their values the output shape is
	// unknown. A value read there must stay a constant, so no planner
	// evicts it (Value.Pinned). Infer refuses a rule that asks for
	// another input's constant, so the list cannot fall behind the rule.
	ConstIn []int
	// Since is the first default-domain opset that defines the op, when
	// that is later than the first opset the frontend reads (7); 0
	// otherwise. Inference refuses the op in a model importing an
	// earlier opset. Changes of meaning between versions are handled
	// by the inference rule and the kernel, which see the opset.
	Since int64

	index int // position in schemas: the slots' index
}

// View says how output 0 of an op shares input 0's bytes.
//
// Every consumer answers "is it a view" from this trait (through
// ViewOf), with one deliberate difference between device and host: on
// the host (an Op.Host Slice) the memory model, the simulator and the
// executor alias a view's output to its input, at no cost. On the
// device the memory model still gives every value its own buffer, so
// the reference kernel of a view copies; the cost model charges a
// WholeView op only a kernel launch there (a GPU runtime reinterprets
// the buffer) and an OffsetView op its bytes. Aliasing device views in
// the static layout changes every planned output and is left for a
// change that re-records the plan goldens.
type View uint8

// Views.
const (
	NotView View = iota
	// WholeView: output 0 is input 0's bytes unchanged under another
	// shape (Reshape, Flatten, Squeeze, Unsqueeze, Identity).
	WholeView
	// OffsetView: output 0 may be one contiguous run of input 0's bytes,
	// starting at an offset; Schema.ViewAt says whether it is for a
	// given op, and where (a Slice that cuts one axis).
	OffsetView
)

// ViewOf reports whether output 0 of op is a run of input 0's bytes,
// and the byte offset where it starts.
func ViewOf(op *Op) (offset int64, ok bool) {
	s := LookupSchema(op.Domain, op.Type)
	if s == nil || op.Input(0) == nil || op.Output(0) == nil {
		return 0, false
	}
	switch s.View {
	case WholeView:
		return 0, true
	case OffsetView:
		return s.ViewAt(op)
	}
	return 0, false
}

// IsRandom reports whether op draws random numbers (Schema.Random).
func IsRandom(op *Op) bool {
	s := LookupSchema(op.Domain, op.Type)
	return s != nil && s.Random
}

// HasGrad reports whether input i of an op of schema s may carry a
// gradient (it is not in NoGrad).
func (s *Schema) HasGrad(i int) bool {
	for _, j := range s.NoGrad {
		if j == i {
			return false
		}
	}
	return true
}

// CopyKind says whether and which way an op moves data between device
// and host.
type CopyKind uint8

// Copy kinds.
const (
	NoCopy   CopyKind = iota // a compute op
	ToHost                   // device → host (swap-out)
	ToDevice                 // host → device (swap-in)
	OnHost                   // runs on the host over host tensors (Op.Host)
)

// CopyOf returns the copy kind of an op (NoCopy for ops outside the
// table); an op placed on the host (Op.Host) is OnHost.
func CopyOf(op *Op) CopyKind {
	if op.Host {
		return OnHost
	}
	// Copies are ops of this project's domain (Register enforces it):
	// every other op answers without the two map lookups, which the
	// planner's inner loops paid millions of times on a 13 B-parameter
	// step (issue 14).
	if op.Domain != Domain {
		return NoCopy
	}
	if s := LookupSchema(op.Domain, op.Type); s != nil {
		return s.Copy
	}
	return NoCopy
}

// The registry: schemas by domain, then type, and in registration order
// (Schema.index). Keying by domain first lets a lookup go without
// building a key string.
var (
	table   = map[string]map[string]*Schema{}
	schemas []*Schema
)

// normDomain maps "ai.onnx" to "", the one name of the default domain
// in the IR. It is the registry's only domain normalisation: every slot
// goes through LookupSchema.
func normDomain(domain string) string {
	if domain == "ai.onnx" {
		return ""
	}
	return domain
}

// Register adds a schema to the op registry. It panics on a duplicate:
// registration happens at init time and a duplicate is a programming
// error.
func Register(s *Schema) {
	name := qualified(s.Domain, s.Type)
	if LookupSchema(s.Domain, s.Type) != nil {
		panic("ir: duplicate schema " + name)
	}
	if s.Infer == nil {
		panic("ir: schema " + name + " has no inference rule")
	}
	if (s.View == OffsetView) != (s.ViewAt != nil) {
		panic("ir: schema " + name + ": ViewAt goes with View == OffsetView, and only with it")
	}
	d := normDomain(s.Domain)
	if s.Copy != NoCopy && d != Domain {
		panic("ir: schema " + name + " is a copy outside the " + Domain + " domain (CopyOf looks only there)")
	}
	if table[d] == nil {
		table[d] = map[string]*Schema{}
	}
	s.Domain = d
	s.index = len(schemas)
	table[d][s.Type] = s
	schemas = append(schemas, s)
}

// LookupSchema returns the schema of domain:typ, or nil.
func LookupSchema(domain, typ string) *Schema { return table[normDomain(domain)][typ] }

// Schemas returns all registered schemas sorted by domain and type.
func Schemas() []*Schema {
	out := append([]*Schema(nil), schemas...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Domain != out[j].Domain {
			return out[i].Domain < out[j].Domain
		}
		return out[i].Type < out[j].Type
	})
	return out
}

// Name is "domain:Type", or Type in the default domain.
func (s *Schema) Name() string { return qualified(s.Domain, s.Type) }

func qualified(domain, typ string) string {
	if d := normDomain(domain); d != "" {
		return d + ":" + typ
	}
	return typ
}

// CheckSignature checks an op's arity and attribute types against s.
func (s *Schema) CheckSignature(op *Op) error {
	n := len(op.inputs)
	if n < s.MinIn || (s.MaxIn >= 0 && n > s.MaxIn) {
		return fmt.Errorf("%s has %d inputs, %s takes %s", op.Describe(), n, s.Type, arity(s.MinIn, s.MaxIn))
	}
	for i := 0; i < min(n, s.MinIn); i++ {
		if op.inputs[i] == nil && !s.optionalIn(i) {
			return fmt.Errorf("%s: required input %d is missing", op.Describe(), i)
		}
	}
	m := len(op.outputs)
	if m < s.MinOut || (s.MaxOut >= 0 && m > s.MaxOut) {
		return fmt.Errorf("%s has %d outputs, %s gives %s", op.Describe(), m, s.Type, arity(s.MinOut, s.MaxOut))
	}
	for _, a := range op.Attrs {
		want, ok := s.Attrs[a.Name]
		if !ok {
			return fmt.Errorf("%s: unknown attribute %q", op.Describe(), a.Name)
		}
		if want != a.Type {
			return fmt.Errorf("%s: attribute %q is %v, want %v", op.Describe(), a.Name, a.Type, want)
		}
	}
	return nil
}

// optionalIn reports whether a leading input may be absent even though
// it counts toward MinIn (ONNX lets "" stand for optional inputs only
// after the required ones, so this is always false today).
func (s *Schema) optionalIn(int) bool { return false }

func arity(lo, hi int) string {
	switch {
	case hi < 0:
		return fmt.Sprintf("at least %d", lo)
	case lo == hi:
		return fmt.Sprintf("%d", lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

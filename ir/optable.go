package ir

import (
	"fmt"
	"sort"
)

// Schema describes an operator: arity, attributes and inference. It is
// the single op table of tsplit.
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
	if s := LookupSchema(op.Domain, op.Type); s != nil {
		return s.Copy
	}
	return NoCopy
}

var table = map[string]*Schema{}

func tableKey(domain, typ string) string {
	if domain == "ai.onnx" {
		domain = ""
	}
	return domain + ":" + typ
}

// Register adds a schema to the op table. It panics on a duplicate:
// registration happens at init time and a duplicate is a programming
// error.
func Register(s *Schema) {
	k := tableKey(s.Domain, s.Type)
	if _, dup := table[k]; dup {
		panic("ir: duplicate schema " + k)
	}
	if s.Infer == nil {
		panic("ir: schema " + k + " has no inference rule")
	}
	table[k] = s
}

// LookupSchema returns the schema of domain:typ, or nil.
func LookupSchema(domain, typ string) *Schema { return table[tableKey(domain, typ)] }

// Schemas returns all registered schemas sorted by domain and type.
func Schemas() []*Schema {
	out := make([]*Schema, 0, len(table))
	for _, s := range table {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Domain != out[j].Domain {
			return out[i].Domain < out[j].Domain
		}
		return out[i].Type < out[j].Type
	})
	return out
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

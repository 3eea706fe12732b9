package ir

import (
	"fmt"
	"sort"
)

// A Slot is one kind of per-op knowledge that a package other than ir
// owns (a device's kernels, gradient rules, split rules, costs), kept on
// the op's registry entry instead of in a table of that package's own.
//
// Why a generic typed slot rather than fields on Schema or a map per
// package: ir cannot import the packages that fill the slots (they
// import ir), so a field would have to be `any` and every reader would
// assert its type; a map per package is what drifted (three key
// functions, three duplicate checks, no common view of the gaps). A
// Slot[T] keeps the owner's type (kernels.Kernel, autodiff.Rule, ...),
// while ir alone keys entries (LookupSchema's domain normalisation),
// refuses duplicates and entries for unknown ops, records deliberate
// opt-outs with their reason, and lets the coverage test list every
// slot of every op (Slots).
//
// Slots are filled at init time, before any lookup, and are read-only
// afterwards, so lookups need no lock.
type Slot[T any] struct {
	name    string
	entries []slotEntry[T] // by Schema.index
	derive  func(*Schema) (T, bool)
	why     string // what derive does
}

type slotEntry[T any] struct {
	state SlotState
	v     T
	why   string // the opt-out's reason
}

// SlotState is what a slot holds for one op.
type SlotState uint8

// Slot states.
const (
	Missing  SlotState = iota // nothing: the coverage test fails on it
	Filled                    // an entry set for this op
	Derived                   // the slot's declared default (Derive) applies
	OptedOut                  // deliberately none, with a reason
)

var slotStateNames = [...]string{"missing", "filled", "derived", "opted out"}

func (s SlotState) String() string { return slotStateNames[s] }

// SlotInfo is the untyped face of a slot: what the coverage test reads.
type SlotInfo interface {
	Name() string
	// State says what the slot holds for s and why: the opt-out's
	// reason, or what the derived default is.
	State(s *Schema) (SlotState, string)
}

var slots = map[string]SlotInfo{}

// NewSlot declares a slot. Names are unique ("kernel/cpu", "gradient",
// ...); a second slot of the same name panics.
func NewSlot[T any](name string) *Slot[T] {
	if _, dup := slots[name]; dup {
		panic("ir: duplicate slot " + name)
	}
	s := &Slot[T]{name: name}
	slots[name] = s
	return s
}

// Slots returns every declared slot, sorted by name.
func Slots() []SlotInfo {
	out := make([]SlotInfo, 0, len(slots))
	for _, s := range slots {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Name is the slot's name.
func (s *Slot[T]) Name() string { return s.name }

// entry returns the writable entry of domain:typ. The op must be in the
// registry: an entry for an unknown op is a programming error.
func (s *Slot[T]) entry(domain, typ string) *slotEntry[T] {
	sc := LookupSchema(domain, typ)
	if sc == nil {
		panic(fmt.Sprintf("ir: slot %s: %s is not in the op registry", s.name, qualified(domain, typ)))
	}
	for len(s.entries) <= sc.index {
		s.entries = append(s.entries, slotEntry[T]{})
	}
	e := &s.entries[sc.index]
	if e.state != Missing {
		panic(fmt.Sprintf("ir: slot %s: %s is set twice", s.name, sc.Name()))
	}
	return e
}

// Set fills the slot for domain:typ. A second Set or OptOut of the
// same op panics (init-time programming error).
func (s *Slot[T]) Set(domain, typ string, v T) {
	e := s.entry(domain, typ)
	e.state, e.v = Filled, v
}

// OptOut records that domain:typ deliberately has no entry, and why.
func (s *Slot[T]) OptOut(domain, typ, reason string) {
	if reason == "" {
		panic(fmt.Sprintf("ir: slot %s: opting %s out needs a reason", s.name, qualified(domain, typ)))
	}
	e := s.entry(domain, typ)
	e.state, e.why = OptedOut, reason
}

// Derive declares the slot's default: for an op with no entry of its
// own (not Set, not opted out), f decides from the schema (its traits)
// whether the slot holds a value, and which. why says what the default
// is, for the coverage table. A slot has at most one default.
func (s *Slot[T]) Derive(why string, f func(*Schema) (T, bool)) {
	if s.derive != nil {
		panic("ir: slot " + s.name + " has two defaults")
	}
	s.derive, s.why = f, why
}

// For returns the slot's value for a schema.
func (s *Slot[T]) For(sc *Schema) (T, bool) {
	var zero T
	if sc == nil {
		return zero, false
	}
	if sc.index < len(s.entries) {
		switch e := &s.entries[sc.index]; e.state {
		case Filled:
			return e.v, true
		case OptedOut:
			return zero, false
		}
	}
	if s.derive != nil {
		return s.derive(sc)
	}
	return zero, false
}

// Lookup returns the slot's value for domain:typ.
func (s *Slot[T]) Lookup(domain, typ string) (T, bool) { return s.For(LookupSchema(domain, typ)) }

// Of returns the slot's value for op.
func (s *Slot[T]) Of(op *Op) (T, bool) { return s.For(LookupSchema(op.Domain, op.Type)) }

// State implements SlotInfo.
func (s *Slot[T]) State(sc *Schema) (SlotState, string) {
	if sc.index < len(s.entries) {
		if e := s.entries[sc.index]; e.state != Missing {
			return e.state, e.why
		}
	}
	if s.derive != nil {
		if _, ok := s.derive(sc); ok {
			return Derived, s.why
		}
	}
	return Missing, ""
}

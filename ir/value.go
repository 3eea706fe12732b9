package ir

import (
	"fmt"
	"slices"
)

// ValueID is a dense per-graph identifier of a value.
type ValueID int32

// ValueKind says how a value is defined.
type ValueKind uint8

// Value kinds.
const (
	KindInput ValueKind = iota // graph input, fed at run time
	KindInit                   // initializer: constant data stored in the model
	KindOp                     // output of an op
)

func (k ValueKind) String() string {
	switch k {
	case KindInput:
		return "input"
	case KindInit:
		return "init"
	case KindOp:
		return "op"
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Use is one use of a value: input Index of Op.
type Use struct {
	Op    *Op
	Index int
}

// Value is a tensor defined exactly once.
type Value struct {
	ID    ValueID
	Name  string
	DType DType
	Shape Shape
	Kind  ValueKind

	// Def and DefIndex locate the defining op of a KindOp value.
	Def      *Op
	DefIndex int

	// Const is the value when it is known at compile time: the data of
	// an initializer, or the folded result of shape arithmetic. Large
	// initializers may leave it nil and load data lazily through Data.
	Const *Tensor

	// Load fetches the data of an initializer whose Const is not
	// materialised (big weights are decoded only when needed).
	Load func() (*Tensor, error)

	// Next is the value that replaces this one in the next step of a
	// training loop (a weight's update, optimizer state, running
	// statistics). The old value is dead after its last read, so the
	// memory model frees it there instead of keeping it to the end.
	Next *Value

	// Param marks a trainable parameter (a weight the model keeps across
	// steps). The memory model keeps parameters resident for the whole
	// step, like initializers, even when they are graph inputs.
	Param bool

	// Src carries the serialized initializer as read, for lossless
	// writing. Owned by the frontend and the writer.
	Src any

	uses []Use
	g    *Graph
}

// Uses returns the value's uses. The slice must not be modified.
func (v *Value) Uses() []Use { return v.uses }

// NumUses is the number of op inputs that read v.
func (v *Value) NumUses() int { return len(v.uses) }

// Graph is the graph that owns v.
func (v *Value) Graph() *Graph { return v.g }

// Bytes is the storage size of the value.
func (v *Value) Bytes() int64 {
	b, _ := v.Shape.Bytes(v.DType)
	return b
}

// Data returns the constant data of v, loading it if needed; nil if v
// is not a compile-time constant.
func (v *Value) Data() (*Tensor, error) {
	if v.Const != nil {
		return v.Const, nil
	}
	if v.Load == nil {
		return nil, nil
	}
	return v.Load()
}

// IsConst reports whether v is known at compile time.
func (v *Value) IsConst() bool { return v.Const != nil || v.Load != nil }

// Pinned reports whether v must stay the compile-time constant it is:
// a constant (an initializer, or an op output inference folded, such as
// Shape→Gather→Concat) that reaches an input its op needs constant
// (Schema.ConstIn: Reshape's target shape, Slice's starts), directly or
// through ops whose outputs are folded. A planner never evicts a pinned
// value: a restored copy, a recomputed clone or the merge of a split is
// an op result that inference cannot fold, so the ops reading it would
// lose their static shapes (ir.Verify refuses the graph). Folded values
// that only feed computation (a weight's small transform) are not
// pinned.
func (v *Value) Pinned() bool {
	if !v.IsConst() {
		return false
	}
	seen := map[*Value]bool{v: true}
	work := []*Value{v}
	for len(work) > 0 {
		x := work[len(work)-1]
		work = work[:len(work)-1]
		for _, u := range x.uses {
			if s := LookupSchema(u.Op.Domain, u.Op.Type); s != nil && slices.Contains(s.ConstIn, u.Index) {
				return true
			}
			for _, w := range u.Op.outputs {
				if w != nil && w.Const != nil && !seen[w] {
					seen[w] = true
					work = append(work, w)
				}
			}
		}
	}
	return false
}

func (v *Value) String() string { return fmt.Sprintf("%%%d", v.ID) }

// ReplaceAllUsesWith redirects every use of v to w.
func (v *Value) ReplaceAllUsesWith(w *Value) {
	if v == w {
		return
	}
	for len(v.uses) > 0 {
		u := v.uses[len(v.uses)-1]
		u.Op.SetInput(u.Index, w)
	}
	for i, o := range v.g.Outputs {
		if o == v {
			v.g.Outputs[i] = w
		}
	}
}

func (v *Value) addUse(op *Op, i int) { v.uses = append(v.uses, Use{op, i}) }

func (v *Value) removeUse(op *Op, i int) {
	for k, u := range v.uses {
		if u.Op == op && u.Index == i {
			v.uses = append(v.uses[:k], v.uses[k+1:]...)
			return
		}
	}
	panic(fmt.Sprintf("ir: %v has no use at %s input %d", v, op.Type, i))
}

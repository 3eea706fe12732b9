// Package ir is tsplit's intermediate representation of a computation
// graph: an SSA-style graph in which every value is defined exactly once
// (a graph input, an initializer, or an op output), ops carry a type,
// a domain, typed attributes and ordered inputs and outputs, and every
// value knows its uses.
//
// Values and ops have dense integer IDs so that analyses can use slices
// and bitsets instead of maps. The graph is mutated only through methods
// of Graph, Op and Value, which keep use lists right; Verify checks every
// invariant and is run after each pass in tests.
//
// Every value carries a dtype and a static shape. Symbolic dimensions
// of a model (the batch) are bound when the model is imported, so after
// import all shapes are concrete. Small integer tensors that are known at
// compile time (shape arithmetic of exported transformers) carry their
// value in Value.Const, which is how shape subgraphs fold.
//
// The op registry (Schema, LookupSchema) is the one description of
// operators in tsplit: arity, attribute types, the shape/dtype
// inference rule and the op's traits (View, Elementwise, InPlace,
// Random, NoGrad, Since). What other packages know about an op hangs on
// the same entry through typed slots (Slot): the CPU kernel (package
// kernels), the gradient rule (autodiff), the split rule (passes) and
// the cost (profile). internal/opcoverage checks that every op fills,
// derives or deliberately opts out of every slot.
package ir

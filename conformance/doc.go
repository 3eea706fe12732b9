// Package conformance checks tsplit's frontend, executor and CPU
// reference kernels against the ONNX backend node tests.
//
// The cases come from onnx-go's Go export of the ONNX backend test set
// (github.com/owulveryck/onnx-go/backend/testbackend/onnx, v0.5.0): each
// is a one-node ONNX model with its inputs and expected outputs. The test
// (conformance_test.go) decodes every registered case with tsplit's own
// frontend (compiler.DecodeModel, compiler.FromProto), runs it through the
// executor on the CPU device with a pool of exactly the memory model's
// need, and compares the outputs: floating-point values within 1e-4
// relative plus 1e-5 absolute (or within the tolerance the ONNX backend
// test runner uses, rtol 1e-3 and atol 1e-7), integers and booleans
// exactly.
//
// Each case ends as one of
//
//   - pass;
//   - fail: the op is one tsplit claims to support (it is in the op table
//     of package ir and has a reference kernel for the element type), yet
//     the frontend rejects the model, the run fails or an output differs.
//     A failure fails the test;
//   - unsupported, with a reason category: the op has no schema in the op
//     table, or no kernel, or the case uses an element type tsplit does not
//     compute (strings, float16, ...), or the model imports a default-domain
//     opset outside the 7..21 the frontend reads.
//
// tsplit compiles for static shapes, so an integer graph input that an op
// needs at compile time (Reshape's shape, Slice's starts, TopK's k, ...) is
// bound as an initializer holding the case's value before the run, the way
// the batch dimension is bound; the summary lists those cases.
//
// `go test ./conformance -v` logs the summary; `go test ./conformance
// -args -write-doc` also writes it to docs/conformance.md.
package conformance

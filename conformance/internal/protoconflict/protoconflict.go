// Package protoconflict lets tsplit's ONNX protobuf types (package
// onnxpb) and onnx-go's generated copy of the same schema live in one
// test binary. Both register messages under the full names "onnx.*" in
// the global protobuf registry, and google.golang.org/protobuf panics on
// such a conflict at init time unless GOLANG_PROTOBUF_REGISTRATION_CONFLICT
// says otherwise. Neither side looks the types up by name (tsplit decodes
// into its own concrete messages; the conformance test uses onnx-go only
// for its test cases' bytes and tensors), so the duplicate is harmless.
//
// Importing this package (blank) sets the variable to "ignore" in its
// init, unless it is already set. The Go spec initialises packages in
// import-path order among those whose imports are ready; this package
// imports only os, so it is initialised before google.golang.org/protobuf
// and thus before any registration.
package protoconflict

import "os"

func init() {
	const env = "GOLANG_PROTOBUF_REGISTRATION_CONFLICT"
	if os.Getenv(env) == "" {
		os.Setenv(env, "ignore")
	}
}

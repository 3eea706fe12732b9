// Package oracle gives tests access to outside reference implementations
// ("oracles") that tsplit's own results are checked against:
//
//   - PyTorch, through /usr/bin/python3 and scripts/export_torch_models.py,
//     which exports randomly initialised models to testdata/torch/<name>.onnx
//     (TorchModel);
//   - ONNX Runtime (CPU), through Node.js and scripts/ort/run.js and
//     scripts/ort/shapes.js (ORTRun, ORTShapes);
//   - the python onnx package's shape inference, through
//     scripts/onnx_shapes.py (OnnxShapes);
//   - CBC, the MILP solver that solves package bound's exact model
//     (MILPSolver).
//
// The oracles are off in a plain `go test ./...` (the default tier runs the
// same Go-only checks on every machine): OraclesOn turns them on in the
// integration tier (TSPLIT_INTEGRATION, which make test sets), with
// TSPLIT_ORACLES=1 or with TSPLIT_REQUIRE_ORACLES, and every helper
// here skips its test while they are off (Oracles).
//
// The tools are installed by `make deps` (scripts/install-deps.sh). When one
// is missing, the helper that needs it calls t.Skip with a message saying what
// is missing and how to install it; a failure of a tool that is present fails
// the test. Set TSPLIT_REQUIRE_ORACLES=1 (e.g. in CI) to turn those skips
// into failures.
//
// Integration marks the integration tier: the cases that take minutes
// of CPU (the CI-sized benchmark, training steps of the full-size
// exports, vgg16), run when TSPLIT_INTEGRATION is set (make test sets it
// with TSPLIT_REQUIRE_ORACLES) and skipped by a plain go test ./... and
// by -short.
//
// Every oracle's result is cached outside the repository, in
// os.UserCacheDir()/tsplit/oracle (TSPLIT_ORACLE_CACHE moves it; "off"
// turns it off), keyed by a sha256 of everything the result depends on:
// the scripts (every scripts/*.py, or scripts/ort/*.js), the interpreter
// and package versions (python, torch, torchvision, onnx, numpy read
// from their metadata; node's binary and the installed onnxruntime-node
// with scripts/ort/package-lock.json), the model's bytes (and its
// external data), the input tensors and the arguments. A rerun of the
// tests therefore starts neither PyTorch nor Node.js. Entries are
// written atomically and checked against their manifest's digests when
// read; a damaged entry is computed again (see cache.go).
//
// Tensors cross the process boundary as JSON files (see Tensor,
// ReadTensors and WriteTensors):
//
//	{"<name>": {"type": "float32", "dims": [2, 3], "data_b64": "<base64>"}}
//
// where data_b64 is the little-endian raw bytes of the elements, row-major.
//
// The package imports nothing else from the project but the tensor-file
// format.
package oracle

'use strict';
// Shared helpers for the ONNX Runtime oracle scripts (run.js, shapes.js).
//
// Tensor file format (JSON), shared with internal/oracle and the Go runtime's
// --inputs flag:
//   {"<name>": {"type": "float32", "dims": [2, 3], "data_b64": "<base64>"}}
// data_b64 is the little-endian raw bytes of the elements in row-major order.

const fs = require('fs');
const os = require('os');

if (os.endianness() !== 'LE') {
  throw new Error('tensor files are little-endian; big-endian hosts are not supported');
}

// ONNX Runtime JS tensor type -> typed array constructor.
const ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  float16: Uint16Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
};

function elementCount(dims) {
  return dims.reduce((a, d) => a * d, 1);
}

function loadOrt() {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    process.stderr.write(
      'cannot load onnxruntime-node (' + e.message + ');\n' +
      'install it with `make deps` (scripts/install-deps.sh) or ' +
      '`cd scripts/ort && ONNXRUNTIME_NODE_INSTALL=skip npm ci --ignore-scripts`\n');
    process.exit(2);
  }
}

function sessionOptions(noOpt) {
  return {
    executionProviders: ['cpu'],
    graphOptimizationLevel: noOpt ? 'disabled' : 'all',
  };
}

// decodeTensor turns one JSON entry into an ort.Tensor.
function decodeTensor(ort, name, t) {
  const Ctor = ARRAYS[t.type];
  if (!Ctor) throw new Error(`input ${name}: unsupported type ${JSON.stringify(t.type)}`);
  const dims = (t.dims || []).map(Number);
  const raw = Buffer.from(t.data_b64 || '', 'base64');
  const want = elementCount(dims) * Ctor.BYTES_PER_ELEMENT;
  if (raw.length !== want) {
    throw new Error(`input ${name}: dims ${JSON.stringify(dims)} of ${t.type} need ${want} bytes, got ${raw.length}`);
  }
  // Copy into a fresh, aligned ArrayBuffer.
  const ab = new ArrayBuffer(raw.length);
  new Uint8Array(ab).set(raw);
  return new ort.Tensor(t.type, new Ctor(ab), dims);
}

// encodeTensor turns an ort.Tensor into one JSON entry.
function encodeTensor(name, v) {
  if (!v || typeof v !== 'object' || !('dims' in v) || !('type' in v)) {
    throw new Error(`output ${name}: not a tensor`);
  }
  if (!ARRAYS[v.type]) throw new Error(`output ${name}: unsupported type ${v.type}`);
  const d = v.data;
  const bytes = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  return { type: v.type, dims: Array.from(v.dims, Number), data_b64: bytes.toString('base64') };
}

function readJSON(path) {
  return JSON.parse(fs.readFileSync(path, 'utf8'));
}

function writeJSON(path, obj) {
  fs.writeFileSync(path, JSON.stringify(obj) + '\n');
}

// inputMeta returns [{name, type, shape}] for the session's inputs, where
// shape entries are numbers (fixed) or strings/negative numbers (symbolic).
function inputMeta(session) {
  const md = session.inputMetadata;
  if (Array.isArray(md) && md.length === session.inputNames.length) {
    return md.map((m, i) => ({ name: m.name || session.inputNames[i], type: m.type, shape: m.shape || [], isTensor: m.isTensor }));
  }
  throw new Error('this onnxruntime-node does not expose inputMetadata (need >= 1.22)');
}

function main(fn) {
  fn().catch((e) => {
    process.stderr.write((e && e.stack) ? e.stack + '\n' : String(e) + '\n');
    process.exit(1);
  });
}

module.exports = {
  ARRAYS, elementCount, loadOrt, sessionOptions, decodeTensor, encodeTensor,
  readJSON, writeJSON, inputMeta, main,
};

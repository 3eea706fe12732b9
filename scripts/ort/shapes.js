#!/usr/bin/env node
'use strict';
// Usage: node shapes.js MODEL BATCH[,BATCH...] OUT.json [--no-opt]
//
// Feeds MODEL seeded-random inputs of its declared types, with every
// symbolic or unknown input dimension set to BATCH (integers in [0, 10),
// floats in [-1, 1), bools 0/1), runs it with ONNX Runtime (CPU) and writes
//   {"outputs": {"<name>": [dims...]}}
// With several batches the model is loaded once and run at each (the
// inputs of each batch are those a run at that batch alone gets), and OUT
// must contain "{batch}", replaced by each batch.

const io = require('./tensorio');

// mulberry32: small deterministic PRNG, uniform in [0, 1).
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// toHalf returns the IEEE binary16 bits of x (|x| <= 1; truncates the mantissa).
function toHalf(x) {
  const f = new Float32Array([x]);
  const b = new Uint32Array(f.buffer)[0];
  const sign = (b >>> 16) & 0x8000;
  const exp = ((b >>> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return sign; // flush tiny values to zero
  return sign | (exp << 10) | ((b >>> 13) & 0x3ff);
}

io.main(async () => {
  const args = process.argv.slice(2);
  const noOpt = args.includes('--no-opt');
  const pos = args.filter((a) => a !== '--no-opt');
  if (pos.length !== 3 || !/^[0-9]+(,[0-9]+)*$/.test(pos[1])) {
    process.stderr.write('usage: node shapes.js MODEL BATCH[,BATCH...] OUT.json [--no-opt]\n');
    process.exit(2);
  }
  const [model, batchArg, outPath] = pos;
  const batches = batchArg.split(',').map((b) => parseInt(b, 10));
  if (batches.length > 1 && !outPath.includes('{batch}')) {
    process.stderr.write('shapes.js: with several batches OUT must contain "{batch}"\n');
    process.exit(2);
  }
  const ort = io.loadOrt();
  const session = await ort.InferenceSession.create(model, io.sessionOptions(noOpt));
  for (const batch of batches) {
    const outputs = await shapesAt(ort, session, batch);
    io.writeJSON(outPath.split('{batch}').join(String(batch)), { outputs });
  }
  await session.release();
});

// shapesAt runs the session on seeded-random inputs at batch and returns
// the dims of every output.
async function shapesAt(ort, session, batch) {
  const rand = rng(12345);
  const feeds = {};
  for (const m of io.inputMeta(session)) {
    if (m.isTensor === false) throw new Error(`input ${m.name}: not a tensor`);
    const Ctor = io.ARRAYS[m.type];
    if (!Ctor) throw new Error(`input ${m.name}: unsupported type ${m.type}`);
    const dims = Array.from(m.shape, (d) => (typeof d === 'number' && d >= 0 ? d : batch));
    const n = io.elementCount(dims);
    const data = new Ctor(n);
    for (let i = 0; i < n; i++) {
      const u = rand();
      switch (m.type) {
        case 'float32': case 'float64': data[i] = 2 * u - 1; break;
        case 'float16': data[i] = toHalf(2 * u - 1); break;
        case 'bool': data[i] = u < 0.5 ? 0 : 1; break;
        case 'int64': case 'uint64': data[i] = BigInt(Math.floor(10 * u)); break;
        default: data[i] = Math.floor(10 * u);
      }
    }
    feeds[m.name] = new ort.Tensor(m.type, data, dims);
  }
  const results = await session.run(feeds);
  const outputs = {};
  for (const name of session.outputNames) outputs[name] = Array.from(results[name].dims, Number);
  return outputs;
}

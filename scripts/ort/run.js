#!/usr/bin/env node
'use strict';
// Usage: node run.js MODEL IN.json OUT.json [--no-opt]
//
// Runs MODEL with ONNX Runtime (CPU) on the tensors in IN.json and writes
// every graph output to OUT.json (format: see tensorio.js). --no-opt sets
// graphOptimizationLevel 'disabled' (ORT otherwise deletes Dropout nodes,
// even training-mode ones).

const io = require('./tensorio');

io.main(async () => {
  const args = process.argv.slice(2);
  const noOpt = args.includes('--no-opt');
  const pos = args.filter((a) => a !== '--no-opt');
  if (pos.length !== 3 || pos.some((a) => a.startsWith('--'))) {
    process.stderr.write('usage: node run.js MODEL IN.json OUT.json [--no-opt]\n');
    process.exit(2);
  }
  const [model, inPath, outPath] = pos;
  const ort = io.loadOrt();
  const session = await ort.InferenceSession.create(model, io.sessionOptions(noOpt));

  const given = io.readJSON(inPath);
  const feeds = {};
  for (const name of session.inputNames) {
    if (!(name in given)) throw new Error(`${inPath}: missing input ${JSON.stringify(name)} (model inputs: ${session.inputNames.join(', ')})`);
    feeds[name] = io.decodeTensor(ort, name, given[name]);
  }
  for (const name of Object.keys(given)) {
    if (!session.inputNames.includes(name)) throw new Error(`${inPath}: ${JSON.stringify(name)} is not a model input (model inputs: ${session.inputNames.join(', ')})`);
  }

  const results = await session.run(feeds);
  const out = {};
  for (const name of session.outputNames) out[name] = io.encodeTensor(name, results[name]);
  io.writeJSON(outPath, out);
  await session.release();
});

#!/usr/bin/env node
'use strict';
// Usage: node bench.js MODEL BATCH ITERS [--no-opt] [--threads N]
//
// Times ONNX Runtime (CPU) on MODEL: feeds seeded-random inputs of the
// declared types, with every symbolic or unknown input dimension set to
// BATCH (as shapes.js does: floats in [-1, 1), integers in [0, 10), bools
// 0/1), runs 2 warm-up iterations, then ITERS timed ones, and prints
//   {"ms_per_iter": <mean ms>, "min_ms": ..., "median_ms": ...,
//    "cpu_ms_per_iter": <median CPU ms of the process (user + system)>,
//    "iters": ITERS, "batch": BATCH, "warmup": 2, "opt": "all"|"disabled",
//    "threads": N|null}
// on stdout. --no-opt disables ORT's graph optimisations; --threads sets
// intraOpNumThreads (default: ORT's, one per core).

const io = require('./tensorio');

const WARMUP = 2;

// mulberry32: the deterministic PRNG of shapes.js, uniform in [0, 1).
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

// median of a non-empty array of numbers.
function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function usage() {
  process.stderr.write('usage: node bench.js MODEL BATCH ITERS [--no-opt] [--threads N]\n');
  process.exit(2);
}

io.main(async () => {
  const args = process.argv.slice(2);
  let noOpt = false;
  let threads = null;
  const pos = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--no-opt') noOpt = true;
    else if (args[i] === '--threads') {
      threads = parseInt(args[++i], 10);
      if (!(threads > 0)) usage();
    } else if (args[i].startsWith('--')) usage();
    else pos.push(args[i]);
  }
  if (pos.length !== 3 || !/^[0-9]+$/.test(pos[1]) || !/^[0-9]+$/.test(pos[2]) || parseInt(pos[2], 10) < 1) usage();
  const [model, batchArg, itersArg] = pos;
  const batch = parseInt(batchArg, 10);
  const iters = parseInt(itersArg, 10);

  const ort = io.loadOrt();
  const opts = io.sessionOptions(noOpt);
  if (threads) opts.intraOpNumThreads = threads;
  const session = await ort.InferenceSession.create(model, opts);

  const rand = rng(12345);
  const feeds = {};
  for (const m of io.inputMeta(session)) {
    if (m.isTensor === false) throw new Error(`input ${m.name}: not a tensor`);
    const Ctor = io.ARRAYS[m.type];
    if (!Ctor || m.type === 'float16') throw new Error(`input ${m.name}: unsupported type ${m.type}`);
    const dims = Array.from(m.shape, (d) => (typeof d === 'number' && d >= 0 ? d : batch));
    const n = io.elementCount(dims);
    const data = new Ctor(n);
    for (let i = 0; i < n; i++) {
      const u = rand();
      switch (m.type) {
        case 'float32': case 'float64': data[i] = 2 * u - 1; break;
        case 'bool': data[i] = u < 0.5 ? 0 : 1; break;
        case 'int64': case 'uint64': data[i] = BigInt(Math.floor(10 * u)); break;
        default: data[i] = Math.floor(10 * u);
      }
    }
    feeds[m.name] = new ort.Tensor(m.type, data, dims);
  }

  for (let i = 0; i < WARMUP; i++) await session.run(feeds);
  const times = [];
  const cpu = [];
  for (let i = 0; i < iters; i++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1e3);
  }
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  process.stdout.write(JSON.stringify({
    ms_per_iter: mean,
    min_ms: Math.min(...times),
    median_ms: median(times),
    cpu_ms_per_iter: median(cpu),
    iters,
    batch,
    warmup: WARMUP,
    opt: noOpt ? 'disabled' : 'all',
    threads,
  }) + '\n');
  await session.release();
});

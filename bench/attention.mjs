// Decode attention of one layer (32 query heads over 8 KV heads), side by
// side in one process on the same data: this package's f32 and int8 modes on
// all its threads and on one (setThreadLimit(1), the single-threaded
// package), the same C built without SIMD128 and
// natively, a straightforward fused C loop (emcc -ffast-math), the module
// against the same C with one page per head (what pages cost), plain
// JavaScript, onnxruntime-web's wasm backend on the equivalent
// MatMul-Softmax-MatMul graph on one thread and (in a process of its own,
// since its thread count is fixed per process) on as many threads as cores,
// and the memory floor of a streaming-read probe in this package's own
// module, on one thread and on as many as the package runs.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { MODES as MODE_NAMES, threadCount } from '../js/index.js';
import { relaxedNode } from '../scripts/toolchain.mjs';
import {
  GROUP, NUM_KV_HEADS, NUM_Q_HEADS, onnxContender, onnxSession, ours, race, rawModule, shapeData,
} from './attention-shared.mjs';

// The modes timed side by side (every q8 one, q4, and 8-bit keys with 4-bit values).
const MODES = ['f32', 'q8', 'q8k', 'q8v', 'q4', 'q8k+q4v'];
const root = new URL('..', import.meta.url);
const path = (relative) => fileURLToPath(new URL(relative, root));
const FILES = {
  module: path('dist/kvcache.wasm'),
  scalar: path('build-wasm/bench/kvcache-scalar.wasm'),
  contiguous: path('build-wasm/bench/kvcache-contiguous.wasm'),
  naive: path('build-wasm/bench/naive-attend.wasm'),
  native: path('build/kvc_bench_native'),
  profile: path('build-wasm/bench/kernel-profile.js'),
  relaxedProfile: path('build-relaxed/bench/kernel-profile.js'),
};

/** Bytes per second this package's module streams with its read probe
 * (kvc_wasm_read_probe), best of several passes: on one thread (`module`, a
 * standalone instance of it), and on `threads` at once -- an instance per
 * worker thread (probe-reader.mjs), each over bytes / threads of its own,
 * started together. */
async function readBandwidth(module, bytes, threads) {
  const passes = 6;
  const ptr = module.alloc(bytes);
  module.f32().fill(1, ptr >>> 2, (ptr + bytes) >>> 2);
  let ms = Infinity;
  for (let pass = 0; pass < passes; pass++) {
    const t0 = performance.now();
    module.e.kvc_wasm_read_probe(ptr, bytes / 4);
    ms = Math.min(ms, performance.now() - t0);
  }
  module.e.free(ptr);
  const single = bytes / (ms / 1000);
  const signals = new Int32Array(new SharedArrayBuffer(8)); // [pass to run, readers done]
  const readers = Array.from({ length: threads }, () => new Worker(new URL('./probe-reader.mjs', import.meta.url), {
    workerData: { file: FILES.module, bytes: bytes / threads, passes, signals },
  }));
  await Promise.all(readers.map((reader) => new Promise((resolve, reject) => {
    reader.once('message', resolve);
    reader.once('error', reject);
  })));
  ms = Infinity;
  for (let pass = 1; pass <= passes; pass++) {
    const t0 = performance.now();
    Atomics.store(signals, 0, pass);
    Atomics.notify(signals, 0);
    for (let done; (done = Atomics.load(signals, 1)) < pass * threads;) Atomics.wait(signals, 1, done);
    ms = Math.min(ms, performance.now() - t0);
  }
  await Promise.all(readers.map((reader) => reader.terminate()));
  return { single, all: bytes / (ms / 1000) };
}

// ---- the contenders: each gives a step() for one shape, and a cleanup

/** A layer of `mode` in a module instantiated raw (one thread), filled with the rows. */
function oursRaw(module, mode, d, n, kRows, vRows, q) {
  const { e, alloc } = module;
  const slot = alloc(4);
  if (e.kvc_layer_create(NUM_KV_HEADS, d, MODE_NAMES.indexOf(mode), slot) !== 0) throw new Error('raw module: create failed');
  const layer = new Uint32Array(module.f32().buffer)[slot >>> 2];
  const chunkRows = 256;
  const width = NUM_KV_HEADS * d;
  const kPtr = alloc(chunkRows * width * 4);
  const vPtr = alloc(chunkRows * width * 4);
  for (let at = 0; at < n; at += chunkRows) {
    const m = Math.min(chunkRows, n - at);
    module.f32().set(kRows.subarray(at * width, (at + m) * width), kPtr >>> 2);
    module.f32().set(vRows.subarray(at * width, (at + m) * width), vPtr >>> 2);
    if (e.kvc_layer_append_n(layer, m, kPtr, vPtr, 0) !== 0) throw new Error('raw module: append failed');
  }
  const qPtr = alloc(q.byteLength);
  const outPtr = alloc(NUM_Q_HEADS * d * 4);
  module.f32().set(q, qPtr >>> 2);
  return {
    step: () => e.kvc_layer_attend_heads(layer, qPtr, NUM_Q_HEADS, outPtr, 0),
    free: () => {
      e.kvc_layer_free(layer);
      for (const ptr of [slot, kPtr, vPtr, qPtr, outPtr]) e.free(ptr);
    },
  };
}

function naiveC(module, d, n, kHeads, vHeads, q) {
  const { e, alloc } = module;
  const kPtr = alloc(kHeads.byteLength);
  const vPtr = alloc(vHeads.byteLength);
  const qPtr = alloc(q.byteLength);
  const outPtr = alloc(NUM_Q_HEADS * d * 4);
  const scoresPtr = alloc(n * 4);
  module.f32().set(kHeads, kPtr >>> 2);
  module.f32().set(vHeads, vPtr >>> 2);
  module.f32().set(q, qPtr >>> 2);
  return {
    step: () => e.naive_gqa(qPtr, kPtr, vPtr, outPtr, scoresPtr, n, d, NUM_Q_HEADS, NUM_KV_HEADS),
    free: () => { for (const ptr of [kPtr, vPtr, qPtr, outPtr, scoresPtr]) e.free(ptr); },
  };
}

/** Plain JavaScript: the same fused loop over Float32Arrays. */
function plainJs(d, n, kHeads, vHeads, q) {
  const out = new Float32Array(NUM_Q_HEADS * d);
  const scores = new Float32Array(n);
  const scale = 1 / Math.sqrt(d);
  return {
    step: () => {
      for (let h = 0; h < NUM_Q_HEADS; h++) {
        const base = Math.floor(h / GROUP) * n * d;
        let max = -Infinity;
        for (let p = 0; p < n; p++) {
          let dot = 0;
          for (let j = 0; j < d; j++) dot += q[h * d + j] * kHeads[base + p * d + j];
          scores[p] = dot * scale;
          if (scores[p] > max) max = scores[p];
        }
        let sum = 0;
        for (let p = 0; p < n; p++) sum += (scores[p] = Math.exp(scores[p] - max));
        out.fill(0, h * d, (h + 1) * d);
        for (let p = 0; p < n; p++) {
          const w = scores[p] / sum;
          for (let j = 0; j < d; j++) out[h * d + j] += w * vHeads[base + p * d + j];
        }
      }
    },
    free: () => {},
  };
}

/** The native build's numbers for every shape at once ({ 'd:n:mode': ms }), or null. */
function nativeTimes(shapes, reps) {
  if (!existsSync(FILES.native)) return null;
  const run = spawnSync(FILES.native, [String(reps), ...shapes.map(([d, n]) => `${d}:${n}`)], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`kvc_bench_native failed: ${run.stderr}`);
  const times = {};
  for (const line of run.stdout.trim().split('\n')) {
    const { d, n, mode, ms } = JSON.parse(line);
    times[`${d}:${n}:${mode}`] = ms;
  }
  return times;
}

/** The relaxed-SIMD build's times in Node 22 (bench/relaxed.mjs): { 'd:n': { f32, f32One, q8, q8One } }, or null. */
function relaxedTimes(shapes, rounds) {
  if (!existsSync(relaxedNode)) return null;
  const script = fileURLToPath(new URL('./relaxed.mjs', import.meta.url));
  const run = spawnSync(relaxedNode, [script, String(rounds), ...shapes.map(([d, n]) => `${d}:${n}`)], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`relaxed.mjs failed: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').at(-1));
}

/** The kernels of one attention step timed apart, per shape (from bench/c/kernel_profile.c), of a build. */
function kernelProfile(shapes, file = FILES.profile, node = process.execPath) {
  const run = spawnSync(node, [file, ...shapes.map(([d, n]) => `${d}:${n}`)], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`kernel-profile failed: ${run.stderr}`);
  return run.stdout.trim().split('\n').map((line) => JSON.parse(line));
}

/** onnxruntime-web on `threads` threads, in a process of its own (bench/onnx-threads.mjs): { 'd:n': ms }. */
function onnxThreadedTimes(threads, shapes, rounds) {
  const script = fileURLToPath(new URL('./onnx-threads.mjs', import.meta.url));
  const run = spawnSync(process.execPath, [script, String(threads), String(rounds), ...shapes.map(([d, n]) => `${d}:${n}`)],
    { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (run.status !== 0) throw new Error(`onnx-threads failed: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').at(-1));
}

export async function run({ quick = false } = {}) {
  for (const [name, file] of Object.entries(FILES)) {
    if (name !== 'native' && !existsSync(file)) throw new Error(`missing ${file}: build with npm run build`);
  }
  const shapes = quick ? [[64, 1024]] : [64, 128].flatMap((d) => [1024, 4096, 16384, 32768].map((n) => [d, n]));
  const rounds = quick ? 3 : 8;
  const threads = threadCount();
  const cores = availableParallelism();
  const scalar = await rawModule(FILES.scalar);
  // The package's module and the contiguous one, instantiated alike (one thread).
  const paged = await rawModule(FILES.module);
  const bandwidth = await readBandwidth(paged, quick ? 64 << 20 : 512 << 20, threads);
  const contiguous = await rawModule(FILES.contiguous);
  const naive = await rawModule(FILES.naive);
  const onnx = await onnxSession(64);
  const onnx128 = quick ? null : await onnxSession(128);
  const onnxAll = cores > 1 ? onnxThreadedTimes(cores, shapes, rounds) : null;
  const relaxed = relaxedTimes(shapes, rounds);
  const native = nativeTimes(shapes, quick ? 2 : 5);

  const rows = [];
  for (const [d, n] of shapes) {
    const { kRows, vRows, q, kHeads, vHeads } = shapeData(d, n);
    const contenders = Object.fromEntries(MODES.map((mode) => [mode, ours(mode, d, n, kRows, vRows, q)]));
    contenders.f32One = ours('f32', d, n, kRows, vRows, q, { single: true });
    contenders.q8One = ours('q8', d, n, kRows, vRows, q, { single: true });
    contenders.q4One = ours('q4', d, n, kRows, vRows, q, { single: true });
    contenders.scalar = oursRaw(scalar, 'f32', d, n, kRows, vRows, q);
    for (const mode of ['f32', 'q8']) {
      contenders[`${mode}Paged`] = oursRaw(paged, mode, d, n, kRows, vRows, q);
      contenders[`${mode}Contiguous`] = oursRaw(contiguous, mode, d, n, kRows, vRows, q);
    }
    contenders.naive = naiveC(naive, d, n, kHeads, vHeads, q);
    contenders.js = { ...plainJs(d, n, kHeads, vHeads, q), skipAfter: 2 }; // slow: three runs are plenty
    contenders.scalar.skipAfter = 2;
    contenders.onnx = onnxContender(d === 64 ? onnx : onnx128, d, n, kHeads, vHeads, q);
    const ms = await race(contenders, rounds);
    const f32Bytes = contenders.f32.bytes;
    const q8Bytes = contenders.q8.bytes;
    const q4Bytes = contenders.q4.bytes;
    const mixedBytes = contenders['q8k+q4v'].bytes;
    for (const contender of Object.values(contenders)) contender.free();
    const nativeMs = (mode) => native?.[`${d}:${n}:${mode}`] ?? null;
    rows.push({
      d, n,
      floorOne: (f32Bytes / bandwidth.single) * 1000,
      floor: (f32Bytes / bandwidth.all) * 1000,
      q8Floor: (q8Bytes / bandwidth.all) * 1000,
      f32Bytes, q8Bytes, q4Bytes, mixedBytes,
      ...Object.fromEntries(MODES.map((m) => [m, ms[m]])),
      f32One: ms.f32One, q8One: ms.q8One, q4One: ms.q4One,
      scalar: ms.scalar, nativeF32: nativeMs('f32'), nativeQ8: nativeMs('q8'),
      naive: ms.naive, js: ms.js, onnx: ms.onnx, onnxAll: onnxAll?.[`${d}:${n}`] ?? null,
      relaxed: relaxed?.[`${d}:${n}`] ?? {},
      f32Paged: ms.f32Paged, f32Contiguous: ms.f32Contiguous, q8Paged: ms.q8Paged, q8Contiguous: ms.q8Contiguous,
    });
  }

  const profileShapes = quick ? [[64, 1024]] : [[128, 1024], [128, 32768]];
  const profile = kernelProfile(profileShapes).map((p) => ({ ...p, build: 'SIMD128' }));
  if (existsSync(relaxedNode) && existsSync(FILES.relaxedProfile)) {
    profile.push(...kernelProfile(profileShapes, FILES.relaxedProfile, relaxedNode).map((p) => ({ ...p, build: 'relaxed' })));
  }
  const gbs = (bytes, ms) => bytes / ms / 1e6;
  const ratio = (a, b) => (a && b ? a / b : null);
  const best = (...times) => Math.min(...times.filter((x) => x !== null));
  const notes = [
    `${threads} threads (this package's default here: one per core, up to 8); "1t" columns are the same calls with every job on the calling thread, the single-threaded package.`,
    `Floor: cache bytes ÷ the streaming-read rate of kvcache.wasm's probe on this machine: ${(bandwidth.single / 1e9).toFixed(2)} GB/s on one thread, ${(bandwidth.all / 1e9).toFixed(2)} GB/s on ${threads}.`,
    `onnxruntime-web ${onnx.version}, wasm backend, 1 thread and ${cores} threads (numThreads = cores, in a process of its own); K and V passed as inputs every call.`,
    native ? 'Native: the same C (the portable scalar kernels) built with gcc -O3 -march=native, one thread.' : 'Native: not built (npm run build builds it).',
    'Every number is the best of interleaved runs (ms per decode step of one layer).',
  ];
  return [
    {
      name: 'attention',
      title: 'Decode attention, one layer, 32 query heads over 8 KV heads: ms per step',
      columns: ['head_dim', 'n', 'floor 1t', 'floor', 'f32 1t', 'f32', 'q8 1t', 'q8', 'q8k', 'q8v', 'q4 1t', 'q4', 'q8k+q4v',
        'f32 scalar wasm', 'f32 native C', 'q8 native C', 'plain C -ffast-math', 'plain JS', 'onnx 1t', `onnx ${cores}t`],
      rows: rows.map((r) => [r.d, r.n, r.floorOne, r.floor, r.f32One, r.f32, r.q8One, r.q8, r.q8k, r.q8v, r.q4One, r.q4, r['q8k+q4v'],
        r.scalar, r.nativeF32, r.nativeQ8, r.naive, r.js, r.onnx, r.onnxAll]),
      notes,
    },
    {
      name: 'attention-targets',
      title: 'Quantized against f32, both builds side by side (ms per step, all threads, the same run)',
      columns: ['head_dim', 'n', 'f32', 'q8', 'q4', 'q8 ÷ f32', 'q4 ÷ q8', 'relaxed f32', 'relaxed q8', 'relaxed q4',
        'relaxed q8 ÷ f32', 'relaxed q4 ÷ q8', `onnx ${cores}t ÷ q8`, `onnx ${cores}t ÷ relaxed q8`],
      rows: rows.map((r) => [r.d, r.n, r.f32, r.q8, r.q4, ratio(r.q8, r.f32), ratio(r.q4, r.q8), r.relaxed.f32 ?? null,
        r.relaxed.q8 ?? null, r.relaxed.q4 ?? null, ratio(r.relaxed.q8, r.relaxed.f32), ratio(r.relaxed.q4, r.relaxed.q8),
        ratio(r.onnxAll, r.q8), ratio(r.onnxAll, r.relaxed.q8)]),
      notes: ['The targets of issue 23 at head_dim 128, 32768 positions: SIMD128 q8 ÷ f32 <= 0.5 and q4 ÷ q8 <= 0.9; relaxed q8 ÷ f32 <= 0.4 and q4 ÷ q8 <= 0.9; at 1024 and 4096 positions q8 ÷ f32 <= 0.8 in both builds; onnxruntime-web on all cores ÷ q8 >= 9. The relaxed build runs in Node 22 in a process of its own (bench/relaxed.mjs), so its columns are interleaved among themselves, not with the SIMD128 ones.'],
    },
    {
      name: 'attention-ratios',
      title: 'Decode attention: cache bytes read per second and ratios',
      columns: ['head_dim', 'n', 'f32 GB/s', 'q8 GB/s', 'f32 ÷ f32 1t', 'q8 ÷ q8 1t', 'f32 ÷ floor', 'q8 ÷ its floor', 'best onnx ÷ f32', 'best onnx ÷ q8',
        'f32 ÷ q8', 'plain C ÷ f32', 'wasm 1t ÷ native f32'],
      rows: rows.map((r) => [r.d, r.n, gbs(r.f32Bytes, r.f32), gbs(r.q8Bytes, r.q8), ratio(r.f32, r.f32One), ratio(r.q8, r.q8One),
        ratio(r.f32, r.floor), ratio(r.q8, r.q8Floor), ratio(best(r.onnx, r.onnxAll), r.f32), ratio(best(r.onnx, r.onnxAll), r.q8),
        ratio(r.f32, r.q8), ratio(r.naive, r.f32), ratio(r.f32One, r.nativeF32)]),
      notes: ['"f32 ÷ f32 1t" is the scaling with threads (0.5 on two cores is linear). Ratios above 1 in "best onnx ÷ …", "f32 ÷ q8" and "plain C ÷ …" mean this package is faster (best onnx: its faster thread count per shape); "… ÷ floor" is how far from streaming speed on all threads.'],
    },
    {
      name: 'attention-q4',
      title: '4-bit storage: bytes held and ms per step beside q8, the same run',
      columns: ['head_dim', 'n', 'f32 MiB', 'q8 MiB', 'q8k+q4v MiB', 'q4 MiB', 'f32 ÷ q4 bytes', 'q8 ÷ q4 bytes',
        'q8 1t', 'q4 1t', 'q8', 'q4', 'q8k+q4v', 'q4 ÷ q8 1t', 'q4 ÷ q8', 'q8k+q4v ÷ q8'],
      rows: rows.map((r) => [r.d, r.n, r.f32Bytes / 2 ** 20, r.q8Bytes / 2 ** 20, r.mixedBytes / 2 ** 20, r.q4Bytes / 2 ** 20,
        ratio(r.f32Bytes, r.q4Bytes), ratio(r.q8Bytes, r.q4Bytes), r.q8One, r.q4One, r.q8, r.q4, r['q8k+q4v'],
        ratio(r.q4One, r.q8One), ratio(r.q4, r.q8), ratio(r['q8k+q4v'], r.q8)]),
      notes: ['memoryBytes of each cache (8 KV heads, every position alive; q4 keeps its newest 64 rows in f32 beside the f32 sinks). "q4 ÷ q8" above 1 means the 4-bit step is slower: its keys are decoded from nibbles in registers (scores-q4-wasmsimd.c), its values unpacked into int8 rows a tile at a time, and both summed as the q8 kernels sum (src/core/segment.c).'],
    },
    {
      name: 'attention-relaxed',
      title: 'Decode attention, the relaxed-SIMD build beside the SIMD128 one: ms per step and ratios',
      columns: ['head_dim', 'n', 'f32 1t', 'relaxed f32 1t', 'f32', 'relaxed f32', 'q8 1t', 'relaxed q8 1t', 'q8', 'relaxed q8',
        'relaxed q4 1t', 'relaxed q4', 'relaxed f32 ÷ q8', 'relaxed q4 ÷ q8', 'relaxed f32 ÷ floor', 'best onnx ÷ relaxed q8', 'SIMD128 1t f32 ÷ q8'],
      rows: rows.map((r) => [r.d, r.n, r.f32One, r.relaxed.f32One, r.f32, r.relaxed.f32, r.q8One, r.relaxed.q8One, r.q8, r.relaxed.q8,
        r.relaxed.q4One, r.relaxed.q4, ratio(r.relaxed.f32, r.relaxed.q8), ratio(r.relaxed.q4, r.relaxed.q8), ratio(r.relaxed.f32, r.floor),
        ratio(best(r.onnx, r.onnxAll), r.relaxed.q8), ratio(r.f32One, r.q8One)]),
      notes: [relaxed ? `The relaxed build runs in Node 22 (Node 20 has no relaxed SIMD), in a process of its own on the same data; ${threads} threads unless "1t". Its f32 kernels use the fused multiply-add; its int8 ones are the SIMD128 build's.`
        : `The relaxed build did not run: no Node 22 at ${relaxedNode}.`],
    },
    {
      name: 'attention-pages',
      title: 'Pages against contiguous rows: ms per step, one thread, the same harness',
      columns: ['head_dim', 'n', 'f32 contiguous', 'f32 paged', 'f32 paged ÷ contiguous', 'q8 contiguous', 'q8 paged', 'q8 paged ÷ contiguous'],
      rows: rows.map((r) => [r.d, r.n, r.f32Contiguous, r.f32Paged, ratio(r.f32Paged, r.f32Contiguous),
        r.q8Contiguous, r.q8Paged, ratio(r.q8Paged, r.q8Contiguous)]),
      notes: ['Paged: kvcache.wasm, rows in pages of 64 positions (what forks share). Contiguous: the same C built with pages of 32768 positions, so that each head\'s rows of these contexts lie in one block, as before pages. Both instantiated alike, on one thread, interleaved in one process; a ratio under 1.03 is within 3%.'],
    },
    {
      name: 'attention-profile',
      title: 'Where a step goes: the kernels of one attend_heads step timed apart (ms, one thread)',
      columns: ['build', 'head_dim', 'n', 'f32 scores', 'softmax', 'f32 values', 'q8 scores', 'q8 values (i16 weights)', 'q4 scores', 'q4 values',
        'floor f32 1t', 'floor q8 1t', 'floor q4 1t'],
      rows: profile.map((p) => {
        const shape = rows.find((r) => r.d === p.d && r.n === p.n);
        return [p.build, p.d, p.n, p.scores_f32, p.softmax, p.values_f32, p.scores_q8, p.values_q8, p.scores_q4, p.values_q4, shape?.floorOne ?? null,
          shape ? shape.floorOne * shape.q8Bytes / shape.f32Bytes : null, shape ? shape.floorOne * shape.q4Bytes / shape.f32Bytes : null];
      }),
      notes: ['Each kernel runs for all 8 KV heads on the same data as above, on one thread (compare with the 1t columns and floor); q8 scores run one vector of 14-bit codes per query (q * c_K) against the int8 rows, q8 values their weights as i16 codes against the int8 rows (see src/core/segment.c); q4 scores the same codes against 4-bit rows decoded in registers, q4 values the q8 values kernel on rows unpacked a tile at a time. The relaxed build runs in Node 22.'],
    },
  ];
}

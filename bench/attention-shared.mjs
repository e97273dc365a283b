// What the attention benchmark (attention.mjs) and its two helpers in
// processes of their own (relaxed.mjs: the relaxed-SIMD build in Node 22;
// onnx-threads.mjs: onnxruntime-web on several threads) share: the layer's
// shape, the data of each size, the contenders they time alike, the
// interleaved race and a module instantiated without the package's loader
// (bench/append.mjs takes its data generator, probe-reader.mjs the module).
// It imports none of them, so that they import it.
import { readFileSync } from 'node:fs';
import { LayerKvCache, setThreadLimit, threadCount } from '../js/index.js';
import { importsFor } from '../js/runtime/imports.js';

export const NUM_KV_HEADS = 8;
export const NUM_Q_HEADS = 32;
export const GROUP = NUM_Q_HEADS / NUM_KV_HEADS;

/** Instantiates a standalone module of this build, without the package's
 * loader: over a memory of its own when it imports one (single-threaded). */
export async function rawModule(file) {
  const module = await WebAssembly.compile(readFileSync(file));
  const importsMemory = WebAssembly.Module.imports(module).some((i) => i.kind === 'memory');
  // 16 MiB to start (above the 1 MiB these modules ask for), growing to wasm32's 4 GiB.
  const memory = importsMemory ? new WebAssembly.Memory({ initial: 256, maximum: 65536, shared: true }) : null;
  const instance = await WebAssembly.instantiate(module, importsFor(memory));
  instance.exports._initialize?.();
  const e = instance.exports;
  return {
    e,
    alloc(bytes) {
      const ptr = e.malloc(bytes) >>> 0;
      if (!ptr) throw new Error(`${file}: out of memory`);
      return ptr;
    },
    f32: () => new Float32Array((memory ?? e.memory).buffer),
  };
}

/** Fills `array` with uniforms in [-1, 1) from a fast generator: timing does not care about statistics. */
export function fill(array, seed) {
  let state = seed >>> 0;
  for (let i = 0; i < array.length; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    array[i] = state / 2147483648 - 1;
  }
  return array;
}

/** Runs fn on the calling thread alone: the single-threaded package. */
function oneThread(fn) {
  setThreadLimit(1);
  try {
    return fn();
  } finally {
    setThreadLimit(threadCount());
  }
}

// ---- the contenders timed in every process: each gives a step() for one shape, and a cleanup

export function ours(mode, d, n, kRows, vRows, q, { single = false } = {}) {
  const cache = new LayerKvCache({ numKvHeads: NUM_KV_HEADS, headDim: d, mode });
  const chunk = 1024 * NUM_KV_HEADS * d;
  for (let at = 0; at < kRows.length; at += chunk) cache.appendBatch(kRows.subarray(at, at + chunk), vRows.subarray(at, at + chunk));
  const into = { out: new Float32Array(NUM_Q_HEADS * d) };
  const step = single ? () => oneThread(() => cache.attendHeads(q, into)) : () => cache.attendHeads(q, into);
  return { step, bytes: cache.memoryBytes, free: () => cache.free() };
}

/** onnxruntime-web, wasm backend, `threads` threads: Q·Kᵀ, scale, softmax, ·V, with K and V fed each call. */
export async function onnxSession(d, threads = 1) {
  const ort = await import('onnxruntime-web');
  const { onnx } = (await import('onnx-proto')).default;
  ort.env.wasm.numThreads = threads;
  const tensorType = (dims) => ({
    tensorType: { elemType: onnx.TensorProto.DataType.FLOAT, shape: { dim: dims.map((x) => (typeof x === 'string' ? { dimParam: x } : { dimValue: x })) } },
  });
  const graph = onnx.GraphProto.create({
    name: 'gqa_decode',
    node: [
      onnx.NodeProto.create({ opType: 'Transpose', input: ['k'], output: ['kt'], attribute: [{ name: 'perm', type: onnx.AttributeProto.AttributeType.INTS, ints: [0, 2, 1] }] }),
      onnx.NodeProto.create({ opType: 'MatMul', input: ['q', 'kt'], output: ['s'] }),
      onnx.NodeProto.create({ opType: 'Mul', input: ['s', 'scale'], output: ['z'] }),
      onnx.NodeProto.create({ opType: 'Softmax', input: ['z'], output: ['p'], attribute: [{ name: 'axis', type: onnx.AttributeProto.AttributeType.INT, i: -1 }] }),
      onnx.NodeProto.create({ opType: 'MatMul', input: ['p', 'v'], output: ['out'] }),
    ],
    initializer: [onnx.TensorProto.create({ name: 'scale', dataType: onnx.TensorProto.DataType.FLOAT, dims: [], floatData: [1 / Math.sqrt(d)] })],
    input: [
      { name: 'q', type: tensorType([NUM_KV_HEADS, GROUP, d]) },
      { name: 'k', type: tensorType([NUM_KV_HEADS, 'n', d]) },
      { name: 'v', type: tensorType([NUM_KV_HEADS, 'n', d]) },
    ],
    output: [{ name: 'out', type: tensorType([NUM_KV_HEADS, GROUP, d]) }],
  });
  const model = onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 17 }], producerName: 'kvcache-wasm bench', graph });
  const session = await ort.InferenceSession.create(onnx.ModelProto.encode(model).finish(), { executionProviders: ['wasm'] });
  return { ort, session, version: ort.env.versions.web };
}

export function onnxContender({ ort, session }, d, n, kHeads, vHeads, q) {
  return {
    step: () => session.run({
      q: new ort.Tensor('float32', q, [NUM_KV_HEADS, GROUP, d]),
      k: new ort.Tensor('float32', kHeads, [NUM_KV_HEADS, n, d]),
      v: new ort.Tensor('float32', vHeads, [NUM_KV_HEADS, n, d]),
    }),
    free: () => {},
  };
}

/** Best time of each contender over `rounds` rounds, the contenders interleaved so that machine noise hits all alike. */
export async function race(contenders, rounds) {
  const best = Object.fromEntries(Object.keys(contenders).map((name) => [name, Infinity]));
  for (const contender of Object.values(contenders)) await contender.step(); // warm: JIT tiers, caches
  for (let round = 0; round < rounds; round++) {
    for (const [name, contender] of Object.entries(contenders)) {
      if (contender.skipAfter !== undefined && round >= contender.skipAfter) continue;
      const t0 = performance.now();
      await contender.step();
      best[name] = Math.min(best[name], performance.now() - t0);
    }
  }
  return best;
}

/** The data of one shape: K and V rows as appended ([n][head][d]) and head-major ([head][n][d]), and the queries. */
export function shapeData(d, n) {
  const kRows = fill(new Float32Array(n * NUM_KV_HEADS * d), 1);
  const vRows = fill(new Float32Array(n * NUM_KV_HEADS * d), 2);
  const q = fill(new Float32Array(NUM_Q_HEADS * d), 3);
  const toHeads = (rowsMajor) => {
    const heads = new Float32Array(rowsMajor.length);
    for (let p = 0; p < n; p++) {
      for (let h = 0; h < NUM_KV_HEADS; h++) heads.set(rowsMajor.subarray((p * NUM_KV_HEADS + h) * d, (p * NUM_KV_HEADS + h + 1) * d), (h * n + p) * d);
    }
    return heads;
  };
  return { kRows, vRows, q, kHeads: toHeads(kRows), vHeads: toHeads(vRows) };
}

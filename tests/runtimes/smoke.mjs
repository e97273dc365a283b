// The smoke test every runtime runs (Node, Chromium, Deno, Bun, workerd): it
// takes the package's namespace -- what `import * as kv from 'kvcache-wasm'`
// gives there -- and returns a JSON summary: `results`, which every runtime
// must give bit for bit (the same wasm on the same data, on however many
// threads: `storage` in every build, `attention` within one), and what ran
// (`kernelIsa`, `threads`). The data therefore comes
// from integer arithmetic only (no Math.cos or Math.log, whose last bit
// differs between engines).
import { rng } from '../../support/synthetic.mjs';
import { parallelDigests } from './parallel.mjs';

const NUM_KV_HEADS = 8;
const HEAD_DIM = 64;
const POSITIONS = 1000;
const TRUNCATED = 10;
const HEAD = 3;

function check(condition, message) {
  if (!condition) throw new Error(`smoke: ${message}`);
}

/** n uniforms in [-1, 1), exact in any engine. */
function uniforms(random, n) {
  return Float32Array.from({ length: n }, () => 2 * random.unit() - 1);
}

/** FNV-1a over the bytes of a typed array, as 8 hex digits. */
function checksum(array) {
  const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
  let hash = 0x811c9dc5;
  for (const byte of bytes) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, '0');
}

function sameBits(a, b) {
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  return x.length === y.length && x.every((byte, i) => byte === y[i]);
}

/** Checks that out is finite and, channel by channel, within the head's values: a convex combination. */
function checkConvex(layer, { out, probs }) {
  const values = layer.headValues(HEAD);
  const rows = layer.headLen(HEAD);
  check(probs.length === rows, `probs has ${probs.length} entries for ${rows} rows`);
  const sum = probs.reduce((a, p) => a + p, 0);
  check(probs.every((p) => p >= 0) && Math.abs(sum - 1) < 1e-4, `probs sum to ${sum}`);
  for (let j = 0; j < HEAD_DIM; j++) {
    let low = Infinity;
    let high = -Infinity;
    for (let p = 0; p < rows; p++) {
      low = Math.min(low, values[p * HEAD_DIM + j]);
      high = Math.max(high, values[p * HEAD_DIM + j]);
    }
    const slack = 1e-5 * Math.max(1, Math.abs(low), Math.abs(high));
    check(Number.isFinite(out[j]), `out[${j}] is ${out[j]}`);
    check(out[j] >= low - slack && out[j] <= high + slack, `out[${j}] = ${out[j]} is outside [${low}, ${high}]`);
  }
}

/** A model cache of two q8 layers round-trips through a snapshot. */
function kvCacheRoundTrip(kv, random, q) {
  const config = { numLayers: 2, numKvHeads: NUM_KV_HEADS, headDim: HEAD_DIM, mode: 'q8' };
  const cache = new kv.KvCache(config);
  const width = NUM_KV_HEADS * HEAD_DIM;
  const rows = 100;
  for (let l = 0; l < config.numLayers; l++) {
    cache.appendLayerBatch(l, uniforms(random, rows * width), uniforms(random, rows * width));
  }
  const bytes = cache.serialize();
  const restored = kv.KvCache.deserialize(bytes);
  try {
    check(restored.seqLen === rows && restored.numLayers === config.numLayers, `restored KvCache: ${restored}`);
    check(restored.memoryBytes === cache.memoryBytes, 'the restored KvCache holds the same memoryBytes');
    const out = cache.attendLayer(1, q, HEAD).out;
    check(sameBits(restored.attendLayer(1, q, HEAD).out, out), 'the restored KvCache attends identically');
    return { snapshotBytes: bytes.length, snapshotChecksum: checksum(bytes), attendChecksum: checksum(out) };
  } finally {
    restored.free();
    cache.free();
  }
}

/**
 * Runs the smoke test: init(initOptions), a q8 LayerKvCache of 8 KV heads ×
 * 64 filled with 1000 positions, attention, truncateLast, snapshot round
 * trips of the layer and of a KvCache, and the digests of every call that
 * runs on threads (parallel.mjs). Throws on the first failed check.
 */
export async function smoke(kv, initOptions) {
  await kv.init(initOptions);
  const random = rng(20240601);
  const width = NUM_KV_HEADS * HEAD_DIM;
  const layer = new kv.LayerKvCache({ numKvHeads: NUM_KV_HEADS, headDim: HEAD_DIM, mode: 'q8' });
  try {
    for (let i = 0; i < POSITIONS; i++) layer.append(uniforms(random, width), uniforms(random, width));
    check(layer.seqLen === POSITIONS && layer.fieldFrozen, `after ${POSITIONS} appends: ${layer}`);
    const q = uniforms(random, HEAD_DIM);
    const full = layer.attend(q, HEAD);
    checkConvex(layer, full);

    layer.truncateLast(TRUNCATED);
    check(layer.seqLen === POSITIONS - TRUNCATED, `after truncateLast(${TRUNCATED}): ${layer}`);
    const truncated = layer.attend(q, HEAD);
    checkConvex(layer, truncated);

    const bytes = layer.serialize();
    const restored = kv.LayerKvCache.deserialize(bytes);
    try {
      check(restored.memoryBytes === layer.memoryBytes, 'the restored layer holds the same memoryBytes');
      check(restored.seqLen === layer.seqLen && restored.mode === 'q8', `restored layer: ${restored}`);
      const again = restored.attend(q, HEAD);
      check(sameBits(again.out, truncated.out) && sameBits(again.probs, truncated.probs),
        'the restored layer attends identically');
    } finally {
      restored.free();
    }
    const model = kvCacheRoundTrip(kv, random, q);
    const parallel = parallelDigests(kv);
    // What every build stores alike (quantization is never relaxed), and
    // what each computes with its own kernels (f32 attention may differ
    // between the SIMD128 and relaxed builds in the last bits, never within
    // one).
    const storage = {
      version: kv.version(),
      seqLen: layer.seqLen,
      memoryBytes: layer.memoryBytes,
      snapshotBytes: bytes.length,
      snapshotChecksum: checksum(bytes),
      modelSnapshotBytes: model.snapshotBytes,
      modelSnapshotChecksum: model.snapshotChecksum,
      parallelSnapshots: Object.fromEntries(Object.entries(parallel).map(([mode, d]) => [mode, d.snapshot])),
    };
    const attention = {
      attendChecksum: checksum(full.out),
      truncatedAttendChecksum: checksum(truncated.out),
      modelAttendChecksum: model.attendChecksum,
      parallel: Object.fromEntries(Object.entries(parallel).map(([mode, d]) => [mode, { heads: d.heads, perHead: d.perHead }])),
    };
    return { results: { storage, attention }, kernelIsa: kv.kernelIsa(), threads: kv.threadCount(), threadReason: kv.threadInfo().reason };
  } finally {
    layer.free();
  }
}

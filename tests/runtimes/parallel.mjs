// Digests of every call that runs on the module's threads, for the runtime
// matrix and the thread tests: a prefill long enough for several segments
// of 1024 rows per head (appendBatch quantizes per head), a layer's
// attention in one call with and without probabilities (attendHeads,
// KvCache.attendLayerHeads), a verify's causal queries (attendCausal), and
// the single-head calls that share the split (attend, attendGroup), in every
// mode, with a pruned head and one alive at about half the positions. The
// split never depends on the thread count, so neither does any digest; the
// data comes from integer arithmetic, so every engine makes the same.
import { rng } from '../../support/synthetic.mjs';

const H = 4;
const D = 32;
const G = 3;
const PREFILL = 2500;
const DECODE = 3;
const CAUSAL = 5;
export const PARALLEL_MODES = ['f32', 'q8', 'q8k', 'q8v'];

/** FNV-1a over the bytes of typed arrays, as 8 hex digits. */
export function digest(...arrays) {
  let hash = 0x811c9dc5;
  for (const array of arrays) {
    const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
    for (const byte of bytes) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, '0');
}

function uniforms(random, n) {
  return Float32Array.from({ length: n }, () => 2 * random.unit() - 1);
}

// Head 1 pruned at every position; head 2 alive at about half of them.
function mask(random, positions) {
  return Uint8Array.from({ length: positions * H }, (_, i) => (i % H === 1 ? 0 : i % H === 2 ? random.int(2) : 1));
}

function layerDigests(kv, mode, random) {
  const cache = new kv.KvCache({ numLayers: 2, numKvHeads: H, headDim: D, mode });
  try {
    const width = H * D;
    for (let l = 0; l < 2; l++) {
      cache.appendLayerBatch(l, uniforms(random, PREFILL * width), uniforms(random, PREFILL * width), mask(random, PREFILL));
      for (let i = 0; i < DECODE; i++) cache.appendLayer(l, uniforms(random, width), uniforms(random, width), mask(random, 1));
    }
    const layer = cache.layer(0);
    const q = uniforms(random, H * G * D);
    const probs = new Float32Array(H * G * layer.seqLen);
    const heads = layer.attendHeads(q, { probs });
    const headsOnly = cache.attendLayerHeads(1, q);
    const perHead = [];
    for (let h = 0; h < H; h++) {
      const group = layer.attendGroup(q.subarray(h * G * D, (h + 1) * G * D), h);
      const single = layer.attend(q.subarray(h * G * D, h * G * D + D), h);
      const causal = layer.attendCausal(uniforms(random, CAUSAL * D), h);
      perHead.push(group.out, group.probs, single.out, single.probs, causal.out, causal.probs);
    }
    return {
      heads: digest(heads.out, heads.probs, headsOnly.out),
      perHead: digest(...perHead),
      snapshot: digest(cache.serialize()),
    };
  } finally {
    cache.free();
  }
}

/** { [mode]: { heads, perHead, snapshot } } for kv's package namespace (after init). */
export function parallelDigests(kv) {
  const random = rng(20261130);
  return Object.fromEntries(PARALLEL_MODES.map((mode) => [mode, layerDigests(kv, mode, random)]));
}

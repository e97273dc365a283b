// Shared by the JS tests: deterministic data and a fingerprint of a cache.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import init from '../../js/index.js';
import { rng } from '../../support/synthetic.mjs';

export { normals, outlierKeys, rng } from '../../support/synthetic.mjs';

/** Every mode by name: f32, the q8 ones, the q4 ones and the mixed ones. */
export const MODES = ['f32', 'q8', 'q8k', 'q8v', 'q4', 'q4k', 'q4v', 'q8k+q4v', 'q4k+q8v'];

/** How a mode named in MODES stores keys and values. */
export function componentsOf(mode) {
  const [keys, values] = {
    f32: ['f32', 'f32'], q8: ['q8', 'q8'], q8k: ['q8', 'f32'], q8v: ['f32', 'q8'], q4: ['q4', 'q4'],
    q4k: ['q4', 'f32'], q4v: ['f32', 'q4'], 'q8k+q4v': ['q8', 'q4'], 'q4k+q8v': ['q4', 'q8'],
  }[mode];
  return { keys, values };
}

/** Where the test model is: KVCACHE_WASM_MODEL, else ../shared/data/ beside the project. */
export const MODEL_PATH = process.env.KVCACHE_WASM_MODEL ??
  fileURLToPath(new URL('../../../shared/data/stories260k.gguf', import.meta.url));
export const MODEL_MISSING = existsSync(MODEL_PATH) ? null
  : `the model file is absent: put stories260k.gguf at ${MODEL_PATH} (or set KVCACHE_WASM_MODEL to its path)`;

/** `count` texts of 1 to `longest` pieces drawn from `pieces`, the same ones for the same seed. */
export function randomStrings(pieces, { count, seed, longest }) {
  const random = rng(seed);
  return Array.from({ length: count }, () => Array.from({ length: 1 + random.int(longest) }, () => pieces[random.int(pieces.length)]).join(''));
}

export async function ready() {
  await init();
}

/** The tokens `llama`'s forward passes take in while `fn` runs (what a call computed). */
export async function forwardTokens(llama, fn) {
  const forward = llama.forward.bind(llama);
  let count = 0;
  llama.forward = (cache, tokens, options) => {
    count += tokens.length;
    return forward(cache, tokens, options);
  };
  try {
    await fn();
  } finally {
    delete llama.forward;
  }
  return count;
}

/** Everything observable about a cache, to check that a refused call changed nothing. */
export function fingerprint(cache) {
  const heads = [];
  for (let h = 0; h < cache.numKvHeads; h++) {
    heads.push({
      len: cache.headLen(h),
      keys: Array.from(new Uint32Array(cache.headKeys(h).buffer)),
      values: Array.from(new Uint32Array(cache.headValues(h).buffer)),
      positions: Array.from(cache.headPositions(h)),
    });
  }
  return {
    seqLen: cache.seqLen,
    memoryBytes: cache.memoryBytes,
    fieldFrozen: cache.fieldFrozen,
    imp: Array.from(cache.imp),
    heads,
  };
}

/** max |a - b| / max |b| */
export function relError(a, b) {
  let diff = 0;
  let ref = 1e-30;
  for (let i = 0; i < a.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    ref = Math.max(ref, Math.abs(b[i]));
  }
  return diff / ref;
}

export function bitsEqual(a, b) {
  if (a.length !== b.length) return false;
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  return x.every((bits, i) => bits === y[i]);
}

// Choosing the next token from logits, as llama.cpp's sampler chain does by
// default: a repeat penalty over the recent tokens, then top-k, top-p and
// min-p, then the temperature, then a draw -- or, at temperature 0, the
// largest logit. Draws come from a seeded generator, so a seed gives the
// same text every time (and speculative decoding the text of plain
// decoding: a draft is kept only when it is what would have been drawn).
import { shown } from '../runtime/options.js';

/** The options a sampler takes, and llama.cpp's defaults for them. */
export const SAMPLING_DEFAULTS = Object.freeze({
  temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, repeatPenalty: 1, repeatLastN: 64, seed: undefined,
});
export const SAMPLING_OPTIONS = Object.keys(SAMPLING_DEFAULTS);

/** A seeded generator (mulberry32) of uniforms in [0, 1). */
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The index of the largest value (the lowest on ties). */
export function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

function checkNumber(where, name, value, min, max, integer = false) {
  if (typeof value !== 'number' || Number.isNaN(value) || (integer && !Number.isInteger(value))) {
    throw new TypeError(`${where}: ${name} must be ${integer ? 'an integer' : 'a number'} (got ${shown(value)})`);
  }
  if (value < min || value > max) throw new RangeError(`${where}: ${name} must be from ${min} to ${max} (got ${value})`);
  return value;
}

/** The sampling options of `options`, checked, with the defaults for what they leave out. */
export function samplingOptions(where, options) {
  const o = { ...SAMPLING_DEFAULTS };
  for (const key of SAMPLING_OPTIONS) if (options[key] !== undefined) o[key] = options[key];
  checkNumber(where, 'temperature', o.temperature, 0, 100);
  checkNumber(where, 'topK', o.topK, 0, 2 ** 31, true);
  checkNumber(where, 'topP', o.topP, 0, 1);
  checkNumber(where, 'minP', o.minP, 0, 1);
  checkNumber(where, 'repeatPenalty', o.repeatPenalty, 0, 100);
  checkNumber(where, 'repeatLastN', o.repeatLastN, 0, 2 ** 31, true);
  if (o.seed !== undefined) checkNumber(where, 'seed', o.seed, 0, 2 ** 32 - 1, true);
  return o;
}

/**
 * A sampler: `next(logits, history)` picks a token id from logits [vocab],
 * `history` the tokens so far (for the repeat penalty). With temperature 0
 * it is the largest logit, penalties applied; otherwise, in llama.cpp's
 * order: the penalty (a positive logit divided by it, a negative one
 * multiplied), the topK largest, the fewest whose probabilities reach topP,
 * those at least minP times the largest probability, the temperature, a
 * draw. 0 turns topK off, 1 topP, 0 minP, 1 the penalty.
 */
export function createSampler(where, options = {}) {
  const o = samplingOptions(where, options);
  const random = seededRandom(o.seed ?? Math.floor(Math.random() * 2 ** 32));
  // The penalty touches only the recent tokens: their logits before it, by id.
  const penalize = (logits, history) => {
    const original = new Map();
    if (o.repeatPenalty === 1) return original;
    for (let i = Math.max(0, history.length - o.repeatLastN); i < history.length; i++) {
      const token = history[i];
      const v = logits[token];
      if (v === undefined || original.has(token)) continue;
      original.set(token, v);
      logits[token] = v > 0 ? v / o.repeatPenalty : v * o.repeatPenalty;
    }
    return original;
  };
  /** The token of logits z, the penalty already in them. */
  const choose = (z) => {
    if (o.temperature === 0) return argmax(z);
    // Candidates: the topK largest (all when off), largest first.
    // (A logit of -Infinity, a token a constraint forbids, is never a candidate.)
    let ids;
    if (o.topK > 0 && o.topK < z.length) {
      ids = topK(z, o.topK);
    } else {
      ids = [];
      for (let id = 0; id < z.length; id++) if (z[id] !== -Infinity) ids.push(id);
      ids.sort((a, b) => z[b] - z[a] || a - b);
    }
    const max = z[ids[0]];
    let p = ids.map((id) => Math.exp(z[id] - max));
    let sum = p.reduce((a, b) => a + b, 0);
    if (o.topP < 1) {
      let kept = 0;
      for (let cumulative = 0; kept < ids.length && cumulative < o.topP * sum; kept++) cumulative += p[kept];
      ids = ids.slice(0, Math.max(1, kept));
      p = p.slice(0, ids.length);
    }
    if (o.minP > 0) {
      const keep = p.filter((x) => x >= o.minP * p[0]).length;
      ids = ids.slice(0, Math.max(1, keep));
    }
    // The temperature, on what is left.
    p = ids.map((id) => Math.exp((z[id] - max) / o.temperature));
    sum = p.reduce((a, b) => a + b, 0);
    let u = random() * sum;
    for (let i = 0; i < ids.length; i++) {
      u -= p[i];
      if (u < 0) return ids[i];
    }
    // Rounding left a sliver: the last candidate that has a chance (never one a constraint forbids).
    let last = ids.length - 1;
    while (last > 0 && p[last] === 0) last--;
    return ids[last];
  };
  return {
    options: o,
    next(logits, history = []) {
      // The penalized logits are written into the caller's array for the
      // choice and put back after it: the cost is that of the recent tokens,
      // not a copy of the vocabulary.
      const original = penalize(logits, history);
      try {
        return choose(logits);
      } finally {
        for (const [id, v] of original) logits[id] = v;
      }
    },
  };
}

/**
 * The k largest of z, largest first (ties: the lower id first), without
 * sorting all of them: one pass with a min-heap of the k best so far (ids
 * come in increasing order, so a later equal value is never better).
 */
function topK(z, k) {
  const ids = new Int32Array(k);
  const values = new Float32Array(k);
  // Whether heap entry a is worse than b: a smaller value, or the same and a higher id.
  const worse = (a, b) => values[a] < values[b] || (values[a] === values[b] && ids[a] > ids[b]);
  const siftDown = (i) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < k && worse(l, m)) m = l;
      if (r < k && worse(r, m)) m = r;
      if (m === i) return;
      const id = ids[i], v = values[i];
      ids[i] = ids[m]; values[i] = values[m];
      ids[m] = id; values[m] = v;
      i = m;
    }
  };
  for (let id = 0; id < k; id++) {
    ids[id] = id;
    values[id] = z[id];
  }
  for (let i = (k >> 1) - 1; i >= 0; i--) siftDown(i);
  // The rest against the worst kept: one comparison for almost every logit.
  let worst = values[0];
  for (let id = k; id < z.length; id++) {
    const v = z[id];
    if (v > worst) {
      ids[0] = id;
      values[0] = v;
      siftDown(0);
      worst = values[0];
    }
  }
  return Array.from(ids).sort((a, b) => z[b] - z[a] || a - b);
}

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
  const penalize = (logits, history) => {
    if (o.repeatPenalty === 1 || o.repeatLastN === 0 || history.length === 0) return logits;
    const out = Float32Array.from(logits);
    for (const token of new Set(history.slice(-o.repeatLastN))) {
      out[token] = out[token] > 0 ? out[token] / o.repeatPenalty : out[token] * o.repeatPenalty;
    }
    return out;
  };
  return {
    options: o,
    next(logits, history = []) {
      const z = penalize(logits, history);
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
  let size = 0;
  // Whether heap entry a is worse than b: a smaller value, or the same and a higher id.
  const worse = (a, b) => values[a] < values[b] || (values[a] === values[b] && ids[a] > ids[b]);
  const swap = (a, b) => {
    [ids[a], ids[b]] = [ids[b], ids[a]];
    [values[a], values[b]] = [values[b], values[a]];
  };
  for (let id = 0; id < z.length; id++) {
    const v = z[id];
    if (size < k) {
      ids[size] = id;
      values[size] = v;
      for (let i = size++; i > 0;) {
        const parent = (i - 1) >> 1;
        if (!worse(i, parent)) break;
        swap(i, parent);
        i = parent;
      }
    } else if (v > values[0]) {
      ids[0] = id;
      values[0] = v;
      for (let i = 0; ;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < size && worse(l, m)) m = l;
        if (r < size && worse(r, m)) m = r;
        if (m === i) break;
        swap(i, m);
        i = m;
      }
    }
  }
  return Array.from(ids).sort((a, b) => z[b] - z[a] || a - b);
}

// How llama.cpp's CPU code codes the activations a quantized matmul reads
// (ggml's vec_dot_type of each weight type: q8_0 / q8_1 for the 32-blocks,
// IQ4_NL's q8_0, q8_K for the K-quants and IQ4_XS), as the values those codes stand for -- written from
// ggml's reference quantizers (quantize_row_q8_0_ref, q8_1_ref, q8_K_ref),
// in f32 step by step. The plain-JS transformer (tests/js/reference/) reads
// these in place of the exact activations, so that it computes what
// llama.cpp's (and the package's) products compute, and a difference shows
// a fault, not the coding. (q8_1's s term, the block's sum of values rounded
// to f16 that Q4_1's and Q5_1's minimums multiply, is taken as the sum of
// the values here: it differs in the f16 rounding alone.)
//
//   const coded = codedActivations('Q4_K', x, rows, dim);   // Float32Array, x's shape
import { f16Bits, f16Value } from './types.mjs';

const f = Math.fround;

/** ggml's vec_dot_type per weight type: the blocks its activations are coded in. */
export const ACTIVATION_BLOCKS = { Q8_0: 32, Q4_0: 32, Q4_1: 32, Q5_0: 32, Q5_1: 32, Q4_K: 256, Q5_K: 256, Q6_K: 256,
  Q2_K: 256, Q3_K: 256, IQ4_NL: 32, IQ4_XS: 256 };

/** C's roundf: the nearest integer, ties away from zero. */
const roundAway = (x) => Math.sign(x) * Math.round(Math.abs(x));

/** Nearest integer, ties to even (C's nearbyint). */
function roundEven(x) {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

// q8_0 / q8_1: d = amax / 127 rounded to f16, codes roundf(x / d) (x times 1 / d, the unrounded d).
function q8Block32(x, from, out) {
  let amax = 0;
  for (let i = from; i < from + 32; i++) amax = Math.max(amax, Math.abs(x[i]));
  const d = f(amax / 127);
  const id = d !== 0 ? f(1 / d) : 0;
  const stored = f16Value(f16Bits(d));
  for (let i = from; i < from + 32; i++) out[i] = f(Math.max(-127, Math.min(127, roundAway(f(x[i] * id)))) * stored);
}

// q8_K: the x of largest magnitude m (its sign kept), iscale = -127 / m,
// codes nearbyint(x * iscale) up to 127, d = 1 / iscale.
function q8Block256(x, from, out) {
  let m = 0;
  for (let i = from; i < from + 256; i++) if (Math.abs(x[i]) > Math.abs(m)) m = x[i];
  if (m === 0) {
    out.fill(0, from, from + 256);
    return;
  }
  const iscale = f(-127 / m);
  const d = f(1 / iscale);
  for (let i = from; i < from + 256; i++) out[i] = f(Math.min(127, roundEven(f(x[i] * iscale))) * d);
}

/** x [rows x dim] as the activations a matmul of `type` weights reads them (x itself for F32, F16, BF16). */
export function codedActivations(type, x, rows, dim) {
  const block = ACTIVATION_BLOCKS[type];
  if (!block) return x;
  const out = new Float32Array(rows * dim);
  for (let at = 0; at < rows * dim; at += block) (block === 32 ? q8Block32 : q8Block256)(x, at, out);
  return out;
}

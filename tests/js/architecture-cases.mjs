// The tiny random files of each architecture the runner reads, and the bounds
// its logits must keep against another computation of them: what
// tests/js/architectures.test.mjs (the plain-JS transformer) and
// tests/integration/architectures-llamacpp.test.mjs (llama.cpp) share.
import assert from 'node:assert/strict';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { compareLogits, summarizeComparisons } from '../runtimes/wllama.mjs';

export const VARIANTS = ['tiny-qwen2', 'tiny-qwen3', 'tiny-llama3'];
// 48 tokens for the JS reference (slow: plain loops in f64); 128 for
// llama.cpp, 8 positions spread over them (one embedding call per prefix).
export const TOKENS = Array.from({ length: 128 }, (_, i) => (i === 0 ? 1 : 3 + ((i * 7919) % 1000)));
export const REFERENCE_TOKENS = TOKENS.slice(0, 48);
export const POSITIONS = Array.from({ length: 8 }, (_, i) => 16 * i + 15);
// On F32 weights nothing is quantized on either side: what is left is float
// rounding (measured 5e-13 to 4e-12 against both), far below what leaving
// out any one feature costs (the rope factors, the least, 6e-5).
export const F32_KL = 1e-9;
// On a quantized file all three code the activations as llama.cpp does
// (tests/gguf/activations.mjs); what is left is float rounding in another
// order (the f64 reference; llama.cpp's sums), which now and then moves an
// activation across a rounding boundary, and a random model this small
// amplifies one moved code: the logits differ by up to 0.16 (measured, the
// largest over 1024 tokens), so where the best two are closer than that the
// argmax may go either way (measured: llama.cpp's best 0.027 and 0.032 above
// the runner's choice, the reference's 0.073). Every top-1 must agree up to
// such a tie: the runner's choice within NEAR_TIE of the other side's best
// logit. Leaving out the biases, the NeoX pairing or the q/k norms puts it 6
// to 11 below.
export const QUANTIZED_KL = 1e-3;
export const NEAR_TIE = 0.2;
export const EXACT_CACHE = { warmup: false, cacheTypeK: 'f32', cacheTypeV: 'f32', flashAttention: false };

const specs = new Map();
export function spec(variant, mix) {
  const key = `${variant} ${mix}`;
  if (!specs.has(key)) specs.set(key, randomLlama(GEOMETRIES[variant], { mix, seed: 7 }));
  return specs.get(key);
}

/** How far ours is from expected over every position (both [positions x vocab]): summarizeComparisons'. */
export function agreement(expected, ours, vocab) {
  return summarizeComparisons(Array.from({ length: expected.length / vocab }, (_, p) =>
    compareLogits(expected.subarray(p * vocab, (p + 1) * vocab), ours.subarray(p * vocab, (p + 1) * vocab))));
}

export const shown = (r) => `mean KL ${r.meanKl.toExponential(2)}, max ${r.maxKl.toExponential(2)}, top-1 ${(100 * r.top1).toFixed(1)}%, largest top-1 gap ${r.top1Gap.toFixed(3)}, contenders moved up to ${r.contenderMove.toFixed(3)}`;

/** The bounds of `mix`: F32 to float rounding and every top-1; a quantized mix QUANTIZED_KL and every top-1 up to NEAR_TIE. */
export function assertAgrees(mix, r) {
  if (mix === 'F32') {
    assert.ok(r.meanKl < F32_KL, `mean KL ${r.meanKl}`);
    assert.equal(r.top1, 1, `top-1 ${r.top1}`);
  } else {
    assert.ok(r.meanKl <= QUANTIZED_KL, `mean KL ${r.meanKl}`);
    assert.ok(r.top1Gap <= NEAR_TIE, `a top-1 ${r.top1Gap} below the best logit: not a near tie`);
  }
}

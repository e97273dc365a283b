// Attention over plain slices, the routine an f32 layer's attend runs: a
// reference an app can hold its own rows against.
import { callC, copyOut, lib } from '../runtime/runtime.js';
import { checkFloat32, checkInteger } from '../runtime/checks.js';
import { MAX_HEAD_DIM, MAX_POSITIONS } from './layer.js';

/**
 * Single-query f32 softmax attention over plain slices: keys and values are
 * [n × d] row-major. LayerKvCache#attend in f32 mode runs this very routine.
 */
export function attentionHead(q, keys, values, n, d) {
  const where = 'attentionHead';
  const exports = lib();
  checkInteger(where, 'd', d, 1, MAX_HEAD_DIM);
  checkInteger(where, 'n', n, 0, MAX_POSITIONS);
  checkFloat32(where, 'q', q, d);
  checkFloat32(where, 'keys', keys, n * d);
  checkFloat32(where, 'values', values, n * d);
  return callC(where, [q, keys, values, d * 4, n * 4],
    (qPtr, kPtr, vPtr, outPtr, probsPtr) => exports.kvc_attention_head(qPtr, kPtr, vPtr, n, d, outPtr, probsPtr),
    ([, , , outPtr, probsPtr]) => ({ out: copyOut('f32', outPtr, d), probs: copyOut('f32', probsPtr, n) }));
}

// Cost of a speculative rollback as the context grows: on a full layer,
// accept(2) after 6 drafts and truncateLast(4); on a linear layer, accept(2)
// after 6 tentative steps. The claim under test: the cost does not grow with
// the context length. Only the rollback call itself is timed; the drafts are
// appended untimed before each call.
import { LayerKvCache } from '../js/index.js';
import { normals, outlierKeys, rng } from '../support/synthetic.mjs';

const DRAFTS = 6;
const KEEP = 2;
const CALLS = 1000;

/** Median microseconds of `call` over CALLS runs, each after an untimed `setup`. */
function timed(setup, call) {
  const samples = [];
  for (let i = 0; i < CALLS; i++) {
    setup();
    const start = performance.now();
    call();
    samples.push((performance.now() - start) * 1000);
  }
  samples.sort((a, b) => a - b);
  return samples[CALLS >> 1];
}

function fullLayerRows(r, quick) {
  const [H, d] = [8, 128];
  const draftK = outlierKeys(r, DRAFTS, 0, H, d);
  const draftV = normals(r, DRAFTS * H * d);
  const rows = [];
  for (const mode of ['f32', 'q8']) {
    const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
    for (const context of quick ? [256, 1024] : [1024, 8192, 32768]) {
      while (cache.seqLen < context) {
        const n = Math.min(1024, context - cache.seqLen);
        cache.appendBatch(outlierKeys(r, n, cache.seqLen, H, d), normals(r, n * H * d));
      }
      const base = cache.seqLen;
      const accept = timed(() => {
        cache.truncateLast(cache.seqLen - base);
        cache.beginVerify();
        cache.appendBatch(draftK, draftV);
      }, () => cache.accept(KEEP));
      const truncate = timed(() => {
        cache.truncateLast(cache.seqLen - base);
        cache.appendBatch(draftK, draftV);
      }, () => cache.truncateLast(DRAFTS - KEEP));
      cache.truncateLast(cache.seqLen - base);
      rows.push([`full, ${mode}, ${H} heads x ${d}`, context, accept, truncate, cache.memoryBytes]);
    }
    cache.free();
  }
  return rows;
}

function linearLayerRows(r, quick) {
  const [H, F, dv] = quick ? [4, 32, 32] : [16, 128, 128];
  const layer = new LayerKvCache({ kind: 'linear', numHeads: H, numFeatures: F, valueDim: dv });
  const phi = normals(r, H * F).map((x) => x / 16);
  const v = normals(r, H * dv);
  const rows = [];
  // Steps cost the whole state each (4 MFLOP here): fewer contexts than for rows.
  for (const context of quick ? [16, 64] : [128, 1024, 8192]) {
    while (layer.steps < context) layer.linearStep(phi, phi, v);
    const accept = timed(() => {
      layer.beginVerify();
      for (let i = 0; i < DRAFTS; i++) layer.linearStep(phi, phi, v);
    }, () => layer.accept(KEEP));
    // accept(2) advanced the state by 2 steps per call: the context is the one measured at.
    rows.push([`linear, ${H} heads x ${F} features x ${dv}`, context, accept, 'n/a: a state has no rows', layer.memoryBytes]);
  }
  layer.free();
  return rows;
}

export function run({ quick = false } = {}) {
  const r = rng(7);
  return [{
    name: 'rollback',
    title: `Rollback cost vs context (median of ${CALLS} calls; ${DRAFTS} drafts, keep ${KEEP})`,
    columns: ['layer', 'context', 'accept(2) µs', 'truncateLast(4) µs', 'memoryBytes'],
    rows: [...fullLayerRows(r, quick), ...linearLayerRows(r, quick)],
    notes: ['accept and truncateLast touch only the dropped positions\' bookkeeping (full layers) or copy one state (linear layers).'],
  }];
}

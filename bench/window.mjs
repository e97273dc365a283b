// Sliding-window layers: what a Gemma 3 cache holds at a long context, its
// window layers keeping only what their window still sees, against the same
// model with every layer global -- measured by filling the caches as a
// runner does (prefill chunks of 512, then a decode step), each in f32 and
// q8. An all-global cache is one full layer's memoryBytes times the layers
// (every full layer of a geometry holds the same bytes at a context).
import { KvCache } from '../js/index.js';
import { GEOMETRIES } from '../tests/gguf/models.mjs';
import { normals, outlierKeys, rng } from '../support/synthetic.mjs';

const CHUNK = 512; // KVC_LM_BATCH: what a prefill appends at once
const ROLLBACK = 64; // what a LlamaSession's window layers keep beyond the window

/** The layer kinds of a geometry: its window layers where llama.cpp has them (every layer but each sixth). */
function layerSpecs(g, mode) {
  return Array.from({ length: g.numLayers }, (_, l) => ((l + 1) % 6 !== 0
    ? { kind: 'window', window: g.slidingWindow, rollback: ROLLBACK, numKvHeads: g.numKvHeads, headDim: g.headDim, mode }
    : { kind: 'full', numKvHeads: g.numKvHeads, headDim: g.headDim, mode }));
}

/** Fills every layer of `cache` with `context` positions: chunks of CHUNK, the last position alone. */
function fill(cache, context, g, r) {
  const append = (n, at) => {
    const k = outlierKeys(r, n, at, g.numKvHeads, g.headDim);
    const v = normals(r, n * g.numKvHeads * g.headDim);
    for (let l = 0; l < cache.numLayers; l++) cache.layer(l).appendBatch(k, v);
  };
  for (let at = 0; at < context - 1; at += CHUNK) append(Math.min(CHUNK, context - 1 - at), at);
  append(1, context - 1);
}

export async function run({ quick }) {
  const r = rng(5);
  const rows = [];
  const cases = quick ? [['gemma-3-270m', 1024]] : [['gemma-3-270m', 32768], ['gemma-3-1b', 8192], ['gemma-3-1b', 32768]];
  for (const [name, context] of cases) {
    const g = GEOMETRIES[name];
    for (const mode of ['f32', 'q8']) {
      const windowed = new KvCache({ layers: layerSpecs(g, mode) });
      fill(windowed, context, g, r);
      const full = new KvCache({ layers: [{ kind: 'full', numKvHeads: g.numKvHeads, headDim: g.headDim, mode }] });
      fill(full, context, g, r);
      const global = full.memoryBytes * g.numLayers;
      const windowRows = windowed.layer(0).seqLen;
      rows.push([name, context, mode, windowed.memoryBytes / 2 ** 20, global / 2 ** 20, windowed.memoryBytes / global, windowRows]);
      windowed.free();
      full.free();
    }
  }
  // f32 against q8, windowed, per case (on the q8 row).
  for (let i = 0; i + 1 < rows.length; i += 2) {
    rows[i].push('');
    rows[i + 1].push(rows[i][3] / rows[i + 1][3]);
  }
  return [{
    name: 'window',
    title: 'Sliding-window layers: a Gemma 3 cache at a long context against the same model with every layer global, MiB',
    columns: ['geometry', 'context', 'mode', 'windowed', 'all global', 'windowed ÷ all global', 'rows a window layer holds', 'f32 ÷ q8 (windowed)'],
    rows,
    notes: [
      'Five layers of six are window layers (window 512, rollback 64, as a LlamaSession makes them); the sixth holds every position.',
      'Filled as a runner fills them: prefill chunks of 512, then one decode step. "all global": one full layer\'s memoryBytes at that context times the layers.',
    ],
  }];
}

// Append throughput: positions per second into one layer (8 KV heads), one
// position at a time (decode) and in batches of 512 (prefill), f32 against
// the int8 modes -- which quantize every row past position 64 and freeze the
// field when they reach it.
import { LayerKvCache } from '../js/index.js';
import { fill } from './attention-shared.mjs';

const NUM_KV_HEADS = 8;

/** Best positions per second of `append` over `rounds` fresh caches. */
function rate(mode, d, positions, batch, rounds) {
  const width = NUM_KV_HEADS * d;
  const k = fill(new Float32Array(batch * width), 1);
  const v = fill(new Float32Array(batch * width), 2);
  let best = Infinity;
  for (let round = 0; round < rounds + 1; round++) {
    const cache = new LayerKvCache({ numKvHeads: NUM_KV_HEADS, headDim: d, mode });
    const t0 = performance.now();
    for (let at = 0; at < positions; at += batch) {
      if (batch === 1) cache.append(k, v);
      else cache.appendBatch(k, v);
    }
    const ms = performance.now() - t0;
    if (round > 0) best = Math.min(best, ms); // round 0 warms the JIT
    cache.free();
  }
  return positions / (best / 1000);
}

export function run({ quick = false } = {}) {
  const d = quick ? 64 : 128;
  const decodePositions = quick ? 256 : 4096;
  const prefillPositions = quick ? 1024 : 32768;
  const rounds = quick ? 1 : 3;
  const rows = ['f32', 'q8', 'q8k', 'q8v', 'q4', 'q8k+q4v'].map((mode) => [
    mode,
    rate(mode, d, decodePositions, 1, rounds),
    rate(mode, d, prefillPositions, 512, rounds),
  ]);
  return [{
    name: 'append',
    title: `Append throughput, ${NUM_KV_HEADS} KV heads x ${d}: positions per second`,
    columns: ['mode', `decode (1 at a time, ${decodePositions} positions)`, `prefill (batches of 512, ${prefillPositions} positions)`],
    rows,
    notes: ['Each append crosses the JS/wasm boundary once; quantized modes quantize every row past position 64 and freeze the field there; q4 also keeps the f32 copies of its newest rows.'],
  }];
}

// Snapshots and eviction of one layer (8 KV heads × 128): snapshot size
// against memoryBytes, serialize and deserialize time (the bytes crossing
// into JavaScript included), and evict to half the rows by importance next
// to a sliding window of the same size. Best of a few runs each: the
// machine is noisy, and the best run is the one least disturbed.
import { LayerKvCache } from '../js/index.js';
import { normals, outlierKeys, rng } from '../support/synthetic.mjs';

const [H, d] = [8, 128];

/** Best milliseconds of `call` over `runs`, each after an untimed `setup` whose result it gets. */
function best(runs, setup, call) {
  let fastest = Infinity;
  for (let i = 0; i < runs; i++) {
    const input = setup();
    const start = performance.now();
    call(input);
    fastest = Math.min(fastest, performance.now() - start);
  }
  return fastest;
}

function filled(r, mode, context) {
  const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
  while (cache.seqLen < context) {
    const n = Math.min(1024, context - cache.seqLen);
    cache.appendBatch(outlierKeys(r, n, cache.seqLen, H, d), normals(r, n * H * d));
  }
  cache.accumulateImp(Float32Array.from(normals(r, context), Math.abs));
  return cache;
}

export function run({ quick = false } = {}) {
  const r = rng(11);
  const runs = quick ? 2 : 7;
  const rows = [];
  for (const context of quick ? [256] : [4096, 32768]) {
    for (const mode of ['f32', 'q8']) {
      const cache = filled(r, mode, context);
      const bytes = cache.serialize();
      const serialize = best(runs, () => null, () => cache.serialize());
      const deserialize = best(runs, () => null, () => LayerKvCache.deserialize(bytes).free());
      const half = context / 2;
      const evict = best(runs, () => cache.clone(), (copy) => { copy.evict({ budget: half }); copy.free(); });
      const window = best(runs, () => cache.clone(), (copy) => { copy.slideWindow(half); copy.free(); });
      const mbps = (ms) => bytes.length / 1e3 / ms;
      rows.push([`${mode}, ${H} heads x ${d}`, context, cache.memoryBytes, bytes.length, serialize, mbps(serialize),
        deserialize, mbps(deserialize), evict, window]);
      cache.free();
    }
  }
  return [{
    name: 'snapshot',
    title: `Snapshot and eviction of one layer (best of ${runs})`,
    columns: ['layer', 'context', 'memoryBytes', 'snapshot bytes', 'serialize ms', 'serialize MB/s',
      'deserialize ms', 'deserialize MB/s', 'evict to half ms', 'slideWindow(half) ms'],
    rows,
    notes: ['serialize and deserialize include the copy between JavaScript and the wasm heap and the CRC-32 over every byte;',
      'the evict columns time evict({ budget: context / 2 }) (heavy hitters by imp) and the plain window on a clone of the cache (free included).'],
  }];
}

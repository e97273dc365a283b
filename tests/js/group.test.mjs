// Grouped-query attention through the binding: attendGroup and attendHeads
// give each query head exactly what attend gives it.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { KvCache, LayerKvCache } from '../../js/index.js';
import { MODES, bitsEqual, fingerprint, normals, outlierKeys, ready, rng } from './helpers.mjs';

before(ready);

function filled(mode, H, d, n, seed, alive) {
  const r = rng(seed);
  const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
  cache.appendBatch(outlierKeys(r, n, 0, H, d), normals(r, n * H * d), alive);
  return cache;
}

for (const mode of MODES) {
  test(`attendGroup gives each query attend's out and probs, bit for bit (${mode})`, () => {
    const [H, d] = [2, 24];
    const cache = filled(mode, H, d, 90, 1, Uint8Array.from({ length: 90 * H }, (_, i) => (i % 5 === 2 ? 0 : 1)));
    const r = rng(2);
    for (const G of [1, 2, 3, 4, 5]) {
      const q = normals(r, G * d);
      for (let h = 0; h < H; h++) {
        const group = cache.attendGroup(q, h);
        const rows = cache.headLen(h);
        assert.equal(group.probs.length, G * rows);
        for (let g = 0; g < G; g++) {
          const single = cache.attend(q.subarray(g * d, (g + 1) * d), h);
          assert.ok(bitsEqual(group.out.subarray(g * d, (g + 1) * d), single.out), `G=${G} h=${h} g=${g}`);
          assert.ok(bitsEqual(group.probs.subarray(g * rows, (g + 1) * rows), single.probs));
        }
      }
    }
  });

  test(`attendHeads does a whole layer: query i on KV head i / G, probs per position (${mode})`, () => {
    const [H, d, G] = [3, 16, 4];
    const n = 80;
    // KV head 1 skips every third position: its probs are 0 there.
    const alive = Uint8Array.from({ length: n * H }, (_, i) => (i % H === 1 && Math.floor(i / H) % 3 === 0 ? 0 : 1));
    const cache = filled(mode, H, d, n, 3, alive);
    const q = normals(rng(4), H * G * d);
    const probs = new Float32Array(H * G * n);
    const { out } = cache.attendHeads(q, { probs });
    for (let i = 0; i < H * G; i++) {
      const h = Math.floor(i / G);
      const single = cache.attend(q.subarray(i * d, (i + 1) * d), h);
      assert.ok(bitsEqual(out.subarray(i * d, (i + 1) * d), single.out), `query head ${i}`);
      const positions = cache.headPositions(h);
      const row = probs.subarray(i * n, (i + 1) * n);
      const expected = new Float32Array(n);
      positions.forEach((p, r) => { expected[p] = single.probs[r]; });
      assert.ok(bitsEqual(row, expected), `probs of query head ${i}`);
    }
    assert.equal(cache.attendHeads(q).probs, null, 'no probs unless asked');
  });
}

test('KvCache.attendLayerHeads is the layer\'s attendHeads', () => {
  const model = new KvCache({ numLayers: 2, numKvHeads: 2, headDim: 8, mode: 'q8' });
  const r = rng(6);
  model.appendLayerBatch(1, outlierKeys(r, 70, 0, 2, 8), normals(r, 70 * 16));
  const q = normals(r, 4 * 8);
  assert.ok(bitsEqual(model.attendLayerHeads(1, q).out, model.layer(1).attendHeads(q).out));
  model.free();
});

test('attendGroup and attendHeads name q and into, and change nothing when refused', () => {
  const cache = filled('q8', 2, 8, 70, 5);
  const before = fingerprint(cache);
  const bad = [
    [() => cache.attendGroup(new Float32Array(7), 0), RangeError, /\bq\b/],
    [() => cache.attendGroup(new Float32Array(0), 0), RangeError, /\bq\b/],
    [() => cache.attendGroup(new Float32Array(16), 2), RangeError, /kvHead/],
    [() => cache.attendGroup([1], 0), TypeError, /\bq\b/],
    [() => cache.attendHeads(new Float32Array(8)), RangeError, /multiple of numKvHeads/],
    [() => cache.attendHeads(new Float32Array(16), { out: new Float32Array(3) }), RangeError, /into\.out/],
    [() => cache.attendHeads(new Float32Array(16), { probs: new Float32Array(3) }), RangeError, /into\.probs/],
    [() => cache.attendHeads(Float32Array.from({ length: 16 }, (_, i) => (i === 3 ? NaN : 0))), RangeError, /\bq\b/],
  ];
  for (const [call, type, message] of bad) {
    assert.throws(call, (e) => e instanceof type && message.test(e.message), String(call));
  }
  assert.deepEqual(fingerprint(cache), before);
});

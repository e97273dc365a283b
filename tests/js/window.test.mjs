// Sliding-window layers through the binding: a query sees its window, the
// layer lets go of what slid out, truncation within the rows held, and the
// kind in a model's cache.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { KvCache, KvCacheError, LayerKvCache, attentionHead } from '../../js/index.js';
import { bitsEqual, normals, ready, rng } from './helpers.mjs';

before(ready);

const H = 2;
const D = 8;

test('a window layer attends the newest `window` positions: attentionHead over those rows, bit for bit', () => {
  const r = rng(1);
  const layer = new LayerKvCache({ kind: 'window', window: 10, numKvHeads: H, headDim: D });
  const keys = [];
  const values = [];
  for (let p = 0; p < 100; p++) {
    const k = normals(r, H * D);
    const v = normals(r, H * D);
    keys.push(k.slice(0, D));
    values.push(v.slice(0, D));
    layer.append(k, v);
    const q = normals(r, D);
    const first = Math.max(0, p - 9);
    const n = p + 1 - first;
    const rows = (list) => Float32Array.from(list.slice(first, p + 1).flatMap((x) => [...x]));
    const expected = attentionHead(q, rows(keys), rows(values), n, D);
    assert.ok(bitsEqual(layer.attend(q, 0).out, expected.out), `position ${p}`);
  }
  assert.equal(layer.kind, 'window');
  assert.equal(layer.window, 10);
  assert.equal(layer.nextPosition, 100);
  assert.ok(layer.seqLen < 10 + 64 + 1, `it holds ${layer.seqLen} positions`);
  layer.free();
});

test('a window layer takes truncations within what it holds and refuses deeper ones, changing nothing', () => {
  const r = rng(2);
  const layer = new LayerKvCache({ kind: 'window', window: 16, rollback: 8, numKvHeads: H, headDim: D, mode: 'q8' });
  for (let p = 0; p < 300; p++) layer.append(normals(r, H * D), normals(r, H * D));
  const exact = layer.exactRollback;
  assert.ok(exact >= 8, `exactRollback ${exact}`);
  const before = layer.serialize();
  assert.throws(() => layer.truncateLast(exact + 1), (e) => e instanceof KvCacheError && e.code === 'KVC_E_WINDOW');
  assert.deepEqual(layer.serialize(), before);
  layer.truncateLast(8);
  assert.equal(layer.nextPosition, 292);
  layer.free();
});

test('a window layer refuses a window of 0, options of full layers, and eviction', () => {
  assert.throws(() => new LayerKvCache({ kind: 'window', window: 0, numKvHeads: H, headDim: D }), { name: 'RangeError', message: /window/ });
  assert.throws(() => new LayerKvCache({ kind: 'window', window: 8, maxRows: 20, numKvHeads: H, headDim: D }), { name: 'TypeError', message: /maxRows/ });
  const layer = new LayerKvCache({ kind: 'window', window: 8, numKvHeads: H, headDim: D });
  assert.throws(() => layer.evict({ budget: 4 }), (e) => e instanceof KvCacheError && e.code === 'KVC_E_KIND');
  layer.free();
});

test('a model cache mixes full and window layers; snapshots carry them', () => {
  const r = rng(3);
  const cache = new KvCache({ layers: [{ kind: 'window', window: 12, numKvHeads: H, headDim: D }, { kind: 'full', numKvHeads: H, headDim: D }] });
  for (let p = 0; p < 200; p++) for (let l = 0; l < 2; l++) cache.appendLayer(l, normals(r, H * D), normals(r, H * D));
  assert.equal(cache.layer(0).kind, 'window');
  assert.ok(cache.layer(0).seqLen < cache.layer(1).seqLen);
  const restored = KvCache.deserialize(cache.serialize());
  assert.equal(restored.layer(0).kind, 'window');
  assert.equal(restored.layer(0).window, 12);
  assert.deepEqual(restored.serialize(), cache.serialize());
  cache.free();
  restored.free();
});

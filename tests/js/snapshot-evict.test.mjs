// Snapshots and eviction through the binding: round trips, refusals that say
// why, eviction policies on chosen importance, automatic eviction.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { KvCache, KvCacheError, LayerKvCache } from '../../js/index.js';
import { MODES, bitsEqual, fingerprint, normals, outlierKeys, ready, rng } from './helpers.mjs';

before(ready);

function filled(mode, n, { H = 3, d = 8, seed = 1, deadHead = true } = {}) {
  const r = rng(seed);
  const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
  const alive = Uint8Array.from({ length: n * H }, (_, i) => (deadHead && i % H === 1 && Math.floor(i / H) % 4 === 0 ? 0 : 1));
  if (n) cache.appendBatch(outlierKeys(r, n, 0, H, d), normals(r, n * H * d), alive);
  if (n) cache.accumulateImp(Float32Array.from({ length: n }, () => r.unit()));
  return cache;
}

const state = (cache) => ({ ...fingerprint(cache), positions: Array.from(cache.positions()), next: cache.nextPosition });

for (const mode of MODES) {
  test(`a snapshot restores the same cache, which then behaves the same (${mode})`, () => {
    const r = rng(2);
    for (const n of [0, 10, 64, 65, 130]) {
      const original = filled(mode, n);
      if (n > 100) original.evict({ budget: 90, sinks: 4, recent: 20 });
      const bytes = original.serialize();
      const restored = LayerKvCache.deserialize(bytes);
      assert.deepEqual(state(restored), state(original), `n=${n}`);
      assert.ok(Buffer.from(restored.serialize()).equals(Buffer.from(bytes)), 'its snapshot is the same bytes');
      // The same future: appends past the window, a truncation, an attend.
      const k = outlierKeys(r, 70, original.nextPosition, 3, 8);
      const v = normals(r, 70 * 24);
      for (const cache of [original, restored]) {
        cache.appendBatch(k, v);
        cache.truncateLast(5);
      }
      assert.deepEqual(state(restored), state(original));
      const q = normals(r, 8);
      assert.ok(bitsEqual(restored.attend(q, 2).out, original.attend(q, 2).out));
    }
  });
}

test('a model snapshot restores every layer, linear ones too', () => {
  const model = new KvCache({ layers: [{ numKvHeads: 2, headDim: 8, mode: 'q8' }, { kind: 'linear', numHeads: 2, numFeatures: 4, valueDim: 3 }] });
  const r = rng(3);
  for (let p = 0; p < 70; p++) {
    model.appendLayer(0, outlierKeys(r, 1, p, 2, 8), normals(r, 16));
    model.layer(1).linearStep(normals(r, 8), normals(r, 8), normals(r, 6));
  }
  const restored = KvCache.deserialize(model.serialize());
  assert.deepEqual(fingerprint(restored.layer(0)), fingerprint(model.layer(0)));
  assert.deepEqual(restored.layer(1).linearState, model.layer(1).linearState);
  assert.deepEqual([restored.seqLen, restored.layer(1).steps], [70, 70]);
  assert.throws(() => LayerKvCache.deserialize(model.serialize()), (e) => e.code === 'KVC_E_SNAPSHOT_MAGIC');
});

test('refused snapshots say why: magic, version, truncation, a changed byte', () => {
  const bytes = filled('q8', 80).serialize();
  const refusal = (data) => {
    try {
      LayerKvCache.deserialize(data);
    } catch (error) {
      assert.ok(error instanceof KvCacheError, error.message);
      assert.match(error.message, /LayerKvCache\.deserialize: bytes refused/);
      return error.code;
    }
    return 'accepted';
  };
  const changed = (at, xor) => { const c = bytes.slice(); c[at] ^= xor; return c; };
  assert.equal(refusal(changed(0, 1)), 'KVC_E_SNAPSHOT_MAGIC');
  assert.equal(refusal(changed(4, 2)), 'KVC_E_SNAPSHOT_VERSION');
  assert.equal(refusal(bytes.subarray(0, bytes.length - 1)), 'KVC_E_SNAPSHOT_TRUNCATED');
  assert.equal(refusal(bytes.subarray(0, 10)), 'KVC_E_SNAPSHOT_TRUNCATED');
  assert.equal(refusal(changed(bytes.length >> 1, 0x10)), 'KVC_E_SNAPSHOT_CHECKSUM');
  assert.throws(() => LayerKvCache.deserialize('KVCL'), { name: 'TypeError', message: /bytes/ });
  // Every byte flipped, and every length: nothing corrupt is accepted.
  const small = filled('q8k', 70, { H: 2, d: 4 }).serialize();
  for (let at = 0; at < small.length; at++) {
    const c = small.slice();
    c[at] ^= 0xff;
    assert.notEqual(refusal(c), 'accepted', `byte ${at}`);
  }
  for (let length = 0; length < small.length; length++) assert.notEqual(refusal(small.subarray(0, length)), 'accepted');
});

test('evict keeps the sinks, the newest and the most attended, in order', () => {
  const cache = filled('f32', 40, { deadHead: false });
  cache.clear();
  const r = rng(4);
  cache.appendBatch(normals(r, 40 * 24), normals(r, 40 * 24));
  const imp = new Float32Array(40);
  [10, 25, 17, 30].forEach((p, i) => { imp[p] = 10 - i; }); // most attended: 10, 25, 17, 30
  imp[12] = 7; // as much as 30: the older wins
  cache.accumulateImp(imp);
  const policy = { budget: 12, sinks: 3, recent: 5 };
  const plan = Array.from(cache.evictionPlan(policy));
  assert.deepEqual(plan, [0, 1, 2, 10, 12, 17, 25, 35, 36, 37, 38, 39]);
  assert.equal(cache.seqLen, 40, 'a plan changes nothing');
  const rowsBefore = cache.headKeys(0);
  assert.deepEqual(Array.from(cache.evict(policy)), plan);
  assert.equal(cache.seqLen, 12);
  assert.equal(cache.nextPosition, 40);
  assert.deepEqual(Array.from(cache.headPositions(0)), plan);
  assert.ok(bitsEqual(cache.headKeys(0), Float32Array.from(plan.flatMap((p) => Array.from(rowsBefore.subarray(p * 8, p * 8 + 8))))));
  assert.deepEqual(Array.from(cache.imp), plan.map((p) => imp[p]));
  cache.append(normals(r, 24), normals(r, 24));
  assert.deepEqual(Array.from(cache.positions()).slice(-2), [39, 40], 'appends continue at the next position');
  assert.deepEqual(Array.from(cache.slideWindow(6, 2)), [0, 1, 37, 38, 39, 40]);
});

test('eviction keeps int8 rows as they were: no requantizing, the field stays', () => {
  const cache = filled('q8', 200);
  const keysBefore = cache.headKeys(0);
  const positionsBefore = Array.from(cache.headPositions(0));
  const kept = Array.from(cache.evict({ budget: 100, sinks: 4, recent: 30 }));
  assert.equal(cache.fieldFrozen, true);
  const rows = cache.headKeys(0);
  const positions = Array.from(cache.headPositions(0));
  positions.forEach((p, i) => {
    const before = positionsBefore.indexOf(p);
    assert.ok(kept.includes(p));
    assert.ok(bitsEqual(rows.subarray(i * 8, (i + 1) * 8), keysBefore.subarray(before * 8, (before + 1) * 8)), `row at ${p}`);
  });
});

test('maxRows bounds a cache on append, always keeping the new positions', () => {
  const r = rng(5);
  const cache = new LayerKvCache({ numKvHeads: 2, headDim: 4, mode: 'q8v', maxRows: 32, sinks: 4, recent: 12 });
  for (let p = 0; p < 100; p++) {
    cache.append(normals(r, 8), normals(r, 8));
    cache.accumulateImp(Float32Array.from({ length: cache.seqLen }, () => r.unit()));
    assert.ok(cache.seqLen <= 32);
    assert.equal(cache.positions().at(-1), p);
  }
  assert.equal(cache.nextPosition, 100);
  assert.deepEqual(Array.from(cache.positions()).slice(0, 4), [0, 1, 2, 3]);
  assert.throws(() => cache.appendBatch(new Float32Array(33 * 8), new Float32Array(33 * 8)), (e) => e.code === 'KVC_E_LENGTH');
});

test('eviction policies are checked and named', () => {
  const cache = filled('f32', 20);
  const before = state(cache);
  const bad = [
    [() => cache.evict(), TypeError, /policy/],
    [() => cache.evict({ budget: 0 }), RangeError, /policy\.budget/],
    [() => cache.evict({ budget: 10, sinks: 11 }), RangeError, /policy\.sinks/],
    [() => cache.evict({ budget: 10, sinks: 4, recent: 7 }), RangeError, /policy\.recent/],
    [() => cache.evictionPlan({ budget: 1.5 }), TypeError, /policy\.budget/],
    [() => cache.slideWindow(4, 5), RangeError, /sinks/],
    [() => new LayerKvCache({ numKvHeads: 1, headDim: 4, maxRows: 8, sinks: 9 }), RangeError, /sinks/],
  ];
  for (const [call, type, message] of bad) assert.throws(call, (e) => e instanceof type && message.test(e.message), String(call));
  assert.deepEqual(state(cache), before);
  cache.beginVerify();
  assert.throws(() => cache.evict({ budget: 5 }), (e) => e.code === 'KVC_E_VERIFYING');
  assert.throws(() => cache.serialize(), (e) => e.code === 'KVC_E_VERIFYING');
});

test('KvCache.evict bounds every full layer by its own importance', () => {
  const model = new KvCache({ numLayers: 2, numKvHeads: 1, headDim: 4 });
  const r = rng(6);
  for (let i = 0; i < 2; i++) model.appendLayerBatch(i, normals(r, 4 * 30), normals(r, 4 * 30));
  const imp = (hot) => Float32Array.from({ length: 30 }, (_, p) => (p === hot ? 1 : 0));
  model.layer(0).accumulateImp(imp(10));
  model.layer(1).accumulateImp(imp(20));
  model.evict({ budget: 5, sinks: 2, recent: 2 });
  assert.deepEqual(Array.from(model.layer(0).positions()), [0, 1, 10, 28, 29]);
  assert.deepEqual(Array.from(model.layer(1).positions()), [0, 1, 20, 28, 29]);
  assert.equal(model.seqLen, 30, 'the model has taken in 30 positions');
});

// LayerKvCache through the binding: each behaviour of DESIGN.md section 1.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { KvCache, LayerKvCache, attentionHead, Q4_RESIDUAL_ROWS, Q8_WINDOW } from '../../js/index.js';
import { MODES, bitsEqual, componentsOf, fingerprint, normals, outlierKeys, ready, relError, rng } from './helpers.mjs';

before(ready);

/** Appends `count` positions of outlier keys / normal values, one at a time. */
function fill(cache, r, count, alive) {
  const H = cache.numKvHeads;
  const d = cache.headDim;
  for (let i = 0; i < count; i++) {
    const mask = alive?.(cache.seqLen);
    cache.append(outlierKeys(r, 1, cache.seqLen, H, d), normals(r, H * d), mask);
  }
}

/** The memory formula of include/kvcache.h, from the alive masks of the positions held
 * (appended, never truncated: a q4 component's residual window is then full). */
function expectedMemoryBytes(mode, H, d, masks, residualRows = 64) {
  const { keys, values } = componentsOf(mode);
  const L = masks.length;
  let bytes = L * (8 + Math.ceil(H / 8)); // importance and position (4 + 4), alive map
  for (let h = 0; h < H; h++) {
    const rows = masks.filter((m) => m[h]).length;
    const below = masks.filter((m, p) => m[h] && p < Q8_WINDOW).length;
    for (const component of [keys, values]) {
      const from = rows - below;
      if (component === 'f32') bytes += rows * d * 4;
      if (component === 'q8') bytes += below * d * 4 + from * (d + 4);
      // q4: scale, a 2-bit shift per 16 channels, 4-bit codes; the window's f32 copies
      if (component === 'q4') bytes += below * d * 4 + from * (4 + Math.ceil(Math.ceil(d / 16) / 4) + Math.ceil(d / 2)) + Math.min(from, residualRows) * d * 4;
    }
  }
  if (L > Q8_WINDOW) bytes += [keys, values].filter((c) => c !== 'f32').length * H * d * 4;
  return bytes;
}

test('a new cache has its geometry, mode f32 by default, and nothing stored', () => {
  const cache = new LayerKvCache({ numKvHeads: 4, headDim: 32 });
  assert.equal(cache.numKvHeads, 4);
  assert.equal(cache.headDim, 32);
  assert.equal(cache.mode, 'f32');
  assert.equal(cache.seqLen, 0);
  assert.equal(cache.memoryBytes, 0);
  assert.equal(cache.headLen(3), 0);
  assert.equal(cache.fieldFrozen, false);
  cache.free();
});

test('append counts every position in seqLen, dead heads included', () => {
  const cache = new LayerKvCache({ numKvHeads: 3, headDim: 8 });
  const r = rng(1);
  cache.append(normals(r, 24), normals(r, 24));
  cache.append(normals(r, 24), normals(r, 24), [true, false, true]);
  cache.append(normals(r, 24), normals(r, 24), new Uint8Array([0, 0, 0]));
  assert.equal(cache.seqLen, 3);
  assert.deepEqual([0, 1, 2].map((h) => cache.headLen(h)), [2, 1, 2]);
  assert.deepEqual(Array.from(cache.imp), [0, 0, 0]);
});

test('headKeys and headValues of an f32 cache return exactly the rows appended', () => {
  const cache = new LayerKvCache({ numKvHeads: 2, headDim: 5 });
  const r = rng(2);
  const k = normals(r, 3 * 10);
  const v = normals(r, 3 * 10);
  cache.appendBatch(k, v);
  const expectedHead1 = (x) => Float32Array.from([0, 1, 2].flatMap((p) => Array.from(x.subarray(p * 10 + 5, p * 10 + 10))));
  assert.ok(bitsEqual(cache.headKeys(1), expectedHead1(k)));
  assert.ok(bitsEqual(cache.headValues(1), expectedHead1(v)));
});

for (const mode of MODES) {
  test(`appendBatch equals single appends, across the q8 window (${mode})`, () => {
    const H = 3;
    const d = 16;
    const n = 150;
    const r = rng(3);
    const k = outlierKeys(r, n, 0, H, d);
    const v = normals(r, n * H * d);
    const alive = Uint8Array.from({ length: n * H }, (_, i) => (i % 7 === 3 ? 0 : 1));
    const single = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
    for (let p = 0; p < n; p++) {
      const at = p * H * d;
      single.append(k.subarray(at, at + H * d), v.subarray(at, at + H * d), alive.subarray(p * H, p * H + H));
    }
    const batch = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
    batch.appendBatch(k.subarray(0, 40 * H * d), v.subarray(0, 40 * H * d), alive.subarray(0, 40 * H));
    batch.appendBatch(k.subarray(40 * H * d), v.subarray(40 * H * d), alive.subarray(40 * H));
    assert.deepEqual(fingerprint(batch), fingerprint(single));
    const q = normals(r, d);
    for (let h = 0; h < H; h++) {
      assert.ok(bitsEqual(batch.attend(q, h).out, single.attend(q, h).out));
    }
  });
}

test('f32 attend is bit-for-bit attentionHead over headKeys and headValues', () => {
  const r = rng(4);
  for (const d of [8, 64, 80, 128, 256]) {
    for (const H of [1, 4, 8]) {
      const cache = new LayerKvCache({ numKvHeads: H, headDim: d });
      fill(cache, r, 1 + r.int(150), () => Array.from({ length: H }, () => r.unit() < 0.9));
      for (let h = 0; h < H; h++) {
        const q = normals(r, d);
        const n = cache.headLen(h);
        const viaCache = cache.attend(q, h);
        const viaSlices = attentionHead(q, cache.headKeys(h), cache.headValues(h), n, d);
        assert.ok(bitsEqual(viaCache.out, viaSlices.out), `out, d=${d} H=${H} h=${h}`);
        assert.ok(bitsEqual(viaCache.probs, viaSlices.probs), `probs, d=${d} H=${H} h=${h}`);
      }
      cache.free();
    }
  }
});

test('attention matches a double-precision reference within f32 rounding', () => {
  const r = rng(5);
  const d = 64;
  const n = 300;
  const keys = outlierKeys(r, n, 0, 1, d);
  const values = normals(r, n * d);
  const q = normals(r, d);
  const { out, probs } = attentionHead(q, keys, values, n, d);
  const z = Array.from({ length: n }, (_, p) => {
    let dot = 0;
    for (let j = 0; j < d; j++) dot += q[j] * keys[p * d + j];
    return dot / Math.sqrt(d);
  });
  const max = Math.max(...z);
  const e = z.map((x) => Math.exp(x - max));
  const sum = e.reduce((a, b) => a + b, 0);
  const ref = new Float64Array(d);
  e.forEach((w, p) => { for (let j = 0; j < d; j++) ref[j] += (w / sum) * values[p * d + j]; });
  assert.ok(relError(out, ref) < 1e-4, `out error ${relError(out, ref)}`);
  assert.ok(relError(probs, e.map((w) => w / sum)) < 1e-4);
});

// q8 attend vs f32 attend on keys with outlier channels (outlierKeys) and
// N(0, 1) queries: max |out_q8 - out_f32| / max |out_f32| over 120 queries at
// 1200 positions. Measured through the binding: 0.070 (q8), 0.069 (q8k),
// 0.010 (q8v); the bounds sit about 20% above. The C tests measure the
// longer contexts the README reports.
const Q8_ATTEND_REL_ERROR_BOUND = { q8: 0.085, q8k: 0.085, q8v: 0.0125 };

for (const mode of ['q8', 'q8k', 'q8v']) {
  test(`${mode} attend stays within ${Q8_ATTEND_REL_ERROR_BOUND[mode]} of f32 on outlier-channel keys`, (t) => {
    const r = rng(6);
    let worst = 0;
    for (const d of [64, 128]) {
      const H = 2;
      const n = 1200;
      const k = outlierKeys(r, n, 0, H, d);
      const v = normals(r, n * H * d);
      const exact = new LayerKvCache({ numKvHeads: H, headDim: d, mode: 'f32' });
      const quantized = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
      exact.appendBatch(k, v);
      quantized.appendBatch(k, v);
      for (let i = 0; i < 60; i++) {
        const q = normals(r, d);
        worst = Math.max(worst, relError(quantized.attend(q, i % H).out, exact.attend(q, i % H).out));
      }
      exact.free();
      quantized.free();
    }
    t.diagnostic(`${mode}: max relative error ${worst.toExponential(2)}`);
    assert.ok(worst > 0, 'quantization changes something');
    assert.ok(worst < Q8_ATTEND_REL_ERROR_BOUND[mode], `max relative error ${worst}`);
  });
}

for (const mode of ['q8', 'q8k', 'q8v']) {
  test(`${mode}: rows below position 64 stay exact and the field freezes when 64 is appended`, () => {
    const H = 2;
    const d = 12;
    const r = rng(7);
    const k = outlierKeys(r, 65, 0, H, d);
    const v = normals(r, 65 * H * d);
    const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
    cache.appendBatch(k.subarray(0, 64 * H * d), v.subarray(0, 64 * H * d));
    assert.equal(cache.fieldFrozen, false);
    cache.appendBatch(k.subarray(64 * H * d), v.subarray(64 * H * d));
    assert.equal(cache.fieldFrozen, true);
    const rowsOf = (x, h, count) => Float32Array.from({ length: count * d }, (_, i) => x[(Math.floor(i / d) * H + h) * d + (i % d)]);
    const keys = cache.headKeys(1);
    const values = cache.headValues(1);
    assert.ok(bitsEqual(keys.subarray(0, 64 * d), rowsOf(k, 1, 64)));
    assert.ok(bitsEqual(values.subarray(0, 64 * d), rowsOf(v, 1, 64)));
    // The row at position 64 is exact only in the component kept f32.
    assert.equal(bitsEqual(keys.subarray(64 * d), rowsOf(k, 1, 65).subarray(64 * d)), mode === 'q8v');
    assert.equal(bitsEqual(values.subarray(64 * d), rowsOf(v, 1, 65).subarray(64 * d)), mode === 'q8k');
  });
}

for (const mode of MODES) {
  test(`truncateLast then re-append equals a run that never appended the dropped positions (${mode})`, () => {
    const H = 3;
    const d = 8;
    const r = rng(8);
    const n = 160;
    const k = outlierKeys(r, n, 0, H, d);
    const v = normals(r, n * H * d);
    const alive = Uint8Array.from({ length: n * H }, () => (r.unit() < 0.8 ? 1 : 0));
    const slice = (from, to) => [k.subarray(from * H * d, to * H * d), v.subarray(from * H * d, to * H * d), alive.subarray(from * H, to * H)];
    const plain = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
    plain.appendBatch(...slice(0, n));
    const rolled = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
    // Cuts that end above the window, at it, and below it.
    for (const [to, cut] of [[100, 30], [120, 60], [90, 40], [70, 7]]) {
      rolled.truncateLast(rolled.seqLen); // start over from nothing each round
      rolled.appendBatch(...slice(0, to));
      const junk = outlierKeys(r, cut, to, H, d);
      rolled.appendBatch(junk, normals(r, cut * H * d));
      rolled.truncateLast(cut);
      assert.equal(rolled.seqLen, to);
      assert.equal(rolled.fieldFrozen, mode !== 'f32' && to > Q8_WINDOW);
      rolled.appendBatch(...slice(to, n));
      assert.deepEqual(fingerprint(rolled), fingerprint(plain), `round to=${to} cut=${cut}`);
    }
    const q = normals(r, d);
    for (let h = 0; h < H; h++) assert.ok(bitsEqual(rolled.attend(q, h).out, plain.attend(q, h).out));
  });
}

for (const mode of ['q8k', 'q8v']) {
  test(`truncateLast in ${mode} drops from each store exactly its own rows`, () => {
    const H = 2;
    const d = 8;
    const r = rng(9);
    const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
    const masks = [];
    fill(cache, r, 100, (p) => { const m = [p % 3 !== 0, p % 5 !== 0]; masks.push(m); return m; });
    const before = [0, 1].map((h) => ({ keys: cache.headKeys(h), values: cache.headValues(h) }));
    cache.truncateLast(45); // from 100 to 55: across the window
    for (let h = 0; h < H; h++) {
      const kept = masks.slice(0, 55).filter((m) => m[h]).length;
      assert.equal(cache.headLen(h), kept);
      assert.equal(cache.headKeys(h).length, kept * d);
      assert.equal(cache.headValues(h).length, kept * d);
      assert.ok(bitsEqual(cache.headKeys(h), before[h].keys.subarray(0, kept * d)));
      assert.ok(bitsEqual(cache.headValues(h), before[h].values.subarray(0, kept * d)));
    }
  });
}

test('truncateLast(n) with n above seqLen drops everything', () => {
  const cache = new LayerKvCache({ numKvHeads: 2, headDim: 4, mode: 'q8' });
  fill(cache, rng(10), 80);
  cache.truncateLast(1000);
  assert.equal(cache.seqLen, 0);
  assert.equal(cache.memoryBytes, 0);
  assert.equal(cache.fieldFrozen, false);
});

test('alive masks keep rows, probs and imp aligned with positions', () => {
  const H = 2;
  const d = 4;
  const cache = new LayerKvCache({ numKvHeads: H, headDim: d });
  const r = rng(11);
  const head1Alive = [true, false, false, true, true, false, true];
  for (const alive1 of head1Alive) cache.append(normals(r, H * d), normals(r, H * d), [true, alive1]);
  assert.deepEqual(Array.from(cache.headPositions(1)), [0, 3, 4, 6]);
  assert.deepEqual(Array.from(cache.headPositions(0)), [0, 1, 2, 3, 4, 5, 6]);
  const { probs } = cache.attend(normals(r, d), 1);
  assert.equal(probs.length, 4);
  cache.accumulateImpHead(1, probs);
  const imp = cache.imp;
  assert.deepEqual([1, 2, 5].map((p) => imp[p]), [0, 0, 0]);
  assert.deepEqual([0, 3, 4, 6].map((p) => imp[p]), Array.from(probs));
});

test('accumulateImp adds per position and sums over calls', () => {
  const cache = new LayerKvCache({ numKvHeads: 1, headDim: 4 });
  fill(cache, rng(12), 3);
  cache.accumulateImp(new Float32Array([0.5, 0.25, 0.25]));
  cache.accumulateImp(new Float32Array([0.125, 0, 1]));
  assert.deepEqual(Array.from(cache.imp), [0.625, 0.25, 1.25]);
  cache.append(new Float32Array(4), new Float32Array(4));
  assert.equal(cache.imp[3], 0, 'a new position starts at 0');
});

test('an empty head attends to zeros with no probs', () => {
  const cache = new LayerKvCache({ numKvHeads: 2, headDim: 4, mode: 'q8' });
  fill(cache, rng(13), 70, () => [true, false]);
  const { out, probs } = cache.attend(new Float32Array([1, 2, 3, 4]), 1);
  assert.deepEqual(Array.from(out), [0, 0, 0, 0]);
  assert.equal(probs.length, 0);
});

for (const mode of MODES) {
  test(`memoryBytes equals the documented formula (${mode})`, () => {
    const H = 10; // two bytes of alive map per position
    const d = 24;
    const r = rng(14);
    const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
    const masks = [];
    const check = () => assert.equal(cache.memoryBytes, expectedMemoryBytes(mode, H, d, masks), `at seqLen ${cache.seqLen}`);
    for (const count of [1, 30, 33, 1, 100]) {
      fill(cache, r, count, () => { const m = Array.from({ length: H }, () => r.unit() < 0.7); masks.push(m); return m; });
      check();
    }
    for (const cut of [20, 81, 1]) {
      cache.truncateLast(cut);
      masks.length -= cut;
      check();
    }
    assert.ok(cache.capacityBytes >= cache.memoryBytes);
  });
}

test('memoryBytes at 4096 positions: f32 over q8 ratio for d = 64 and 128', (t) => {
  const r = rng(15);
  for (const d of [64, 128]) {
    const H = 8;
    const k = outlierKeys(r, 4096, 0, H, d);
    const v = normals(r, 4096 * H * d);
    const bytes = {};
    for (const mode of ['f32', 'q8']) {
      const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
      cache.appendBatch(k, v);
      bytes[mode] = cache.memoryBytes;
      assert.equal(bytes[mode], expectedMemoryBytes(mode, H, d, Array.from({ length: 4096 }, () => Array(H).fill(true))));
      cache.free();
    }
    const ratio = bytes.f32 / bytes.q8;
    t.diagnostic(`d=${d}: f32 ${bytes.f32} B, q8 ${bytes.q8} B, ratio ${ratio.toFixed(3)}`);
    assert.ok(ratio > 3.4 && ratio < 3.9);
  }
});

test('clone is deep: changing either side leaves the other as it was', () => {
  const r = rng(16);
  const original = new LayerKvCache({ numKvHeads: 2, headDim: 8, mode: 'q8' });
  fill(original, r, 90);
  original.accumulateImp(new Float32Array(90).fill(0.5));
  const before = fingerprint(original);
  const copy = original.clone();
  assert.deepEqual(fingerprint(copy), before);
  copy.truncateLast(40);
  fill(copy, r, 10);
  copy.accumulateImp(new Float32Array(copy.seqLen).fill(1));
  assert.deepEqual(fingerprint(original), before);
  const copyState = fingerprint(copy);
  original.clear();
  assert.deepEqual(fingerprint(copy), copyState);
  original.free();
  assert.equal(copy.seqLen, 60, 'the copy outlives the original');
});

test('clear empties everything and keeps geometry and mode', () => {
  const cache = new LayerKvCache({ numKvHeads: 3, headDim: 8, mode: 'q8k' });
  fill(cache, rng(17), 80);
  cache.clear();
  assert.equal(cache.seqLen, 0);
  assert.equal(cache.memoryBytes, 0);
  assert.equal(cache.fieldFrozen, false);
  assert.deepEqual([cache.numKvHeads, cache.headDim, cache.mode], [3, 8, 'q8k']);
  assert.equal(cache.headLen(2), 0);
});

test('free is idempotent, dispose frees, and any later use throws a TypeError', () => {
  const cache = new LayerKvCache({ numKvHeads: 1, headDim: 4 });
  cache.free();
  cache.free();
  assert.throws(() => cache.seqLen, { name: 'TypeError', message: /freed/ });
  const disposed = new LayerKvCache({ numKvHeads: 1, headDim: 4 });
  disposed[Symbol.dispose ?? Symbol.for('Symbol.dispose')]();
  assert.throws(() => disposed.append(new Float32Array(4), new Float32Array(4)), { name: 'TypeError', message: /freed/ });
  assert.equal(String(disposed), 'LayerKvCache{freed}');
});

test('attend writes into caller arrays when given', () => {
  const cache = new LayerKvCache({ numKvHeads: 1, headDim: 4 });
  fill(cache, rng(18), 5);
  const q = new Float32Array([0.1, 0.2, 0.3, 0.4]);
  const into = { out: new Float32Array(4), probs: new Float32Array(64) };
  const result = cache.attend(q, 0, into);
  assert.equal(result.out, into.out);
  assert.equal(result.probs.buffer, into.probs.buffer);
  assert.equal(result.probs.length, 5);
  const fresh = cache.attend(q, 0);
  assert.ok(bitsEqual(result.out, fresh.out));
  assert.ok(bitsEqual(result.probs, fresh.probs));
});

test('results stay valid and calls stay right after the wasm heap grows', () => {
  const small = new LayerKvCache({ numKvHeads: 1, headDim: 4 });
  fill(small, rng(19), 3);
  const q = new Float32Array([1, 0, 0, 0]);
  const before = small.attend(q, 0);
  const kept = Float32Array.from(before.out);
  // About 64 MiB of rows: far beyond the initial heap.
  const big = new LayerKvCache({ numKvHeads: 8, headDim: 128 });
  const chunk = new Float32Array(256 * 8 * 128).fill(0.5);
  for (let i = 0; i < 32; i++) big.appendBatch(chunk, chunk);
  assert.ok(bitsEqual(before.out, kept), 'a returned array is the caller\'s own copy');
  assert.ok(bitsEqual(small.attend(q, 0).out, kept), 'the same call gives the same bits after growth');
  assert.equal(big.seqLen, 8192);
  assert.deepEqual(Array.from(big.attend(new Float32Array(128), 7).out.subarray(0, 3)), [0.5, 0.5, 0.5]);
  big.free();
});

test('toString describes the cache', () => {
  const cache = new LayerKvCache({ numKvHeads: 2, headDim: 16, mode: 'q8v' });
  fill(cache, rng(20), 3);
  assert.match(String(cache), /mode=q8v .*seq_len=3/);
});

// ---- 4-bit components and modes per component ----

test('a mode given per component is the mode of that name, and reads back both ways', () => {
  const forms = [
    [{ keys: 'q4', values: 'q4' }, 'q4'], [{ keys: 'q8' }, 'q8k'], [{ values: 'q4' }, 'q4v'],
    [{ keys: 'q8', values: 'q4' }, 'q8k+q4v'], [{ keys: 'q4', values: 'q8' }, 'q4k+q8v'], [{}, 'f32'],
  ];
  const r = rng(40);
  const k = outlierKeys(r, 120, 0, 2, 16);
  const v = normals(r, 120 * 2 * 16);
  for (const [mode, name] of forms) {
    const given = new LayerKvCache({ numKvHeads: 2, headDim: 16, mode });
    const named = new LayerKvCache({ numKvHeads: 2, headDim: 16, mode: name });
    assert.equal(given.mode, name);
    assert.deepEqual(given.components, componentsOf(name));
    given.appendBatch(k, v);
    named.appendBatch(k, v);
    assert.deepEqual(fingerprint(given), fingerprint(named));
    assert.deepEqual(given.serialize(), named.serialize());
  }
});

test('q4 reads its newest residualRows rows exactly and older ones from the window on through 4 bits', () => {
  const H = 1;
  const d = 32;
  const n = 200;
  const r = rng(41);
  const k = outlierKeys(r, n, 0, H, d);
  const v = normals(r, n * H * d);
  for (const residualRows of [0, 16, 64]) {
    const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode: 'q4', residualRows });
    assert.equal(cache.residualRows, residualRows);
    cache.appendBatch(k, v);
    const keys = cache.headKeys(0);
    for (let p = 0; p < n; p++) {
      const exact = bitsEqual(keys.subarray(p * d, (p + 1) * d), k.subarray(p * d, (p + 1) * d));
      assert.equal(exact, p < Q8_WINDOW || p >= n - residualRows, `position ${p}, R = ${residualRows}`);
    }
  }
  assert.equal(new LayerKvCache({ numKvHeads: 1, headDim: 4, mode: 'q4' }).residualRows, Q4_RESIDUAL_ROWS);
});

test('q4 holds more than 6.4 times less than f32 at head_dim 128, 32768 positions', (t) => {
  // One KV head here (8 heads hold 8 times as much of each, and the slots' 9 bytes a position
  // weigh nothing next to a row): 16 MiB of f32 rows.
  const d = 128;
  const n = 32768;
  const chunk = normals(rng(42), 1024 * d);
  const bytes = {};
  for (const mode of ['f32', 'q8', 'q4']) {
    const cache = new LayerKvCache({ numKvHeads: 1, headDim: d, mode });
    for (let i = 0; i < n / 1024; i++) cache.appendBatch(chunk, chunk);
    bytes[mode] = cache.memoryBytes;
    assert.equal(bytes[mode], expectedMemoryBytes(mode, 1, d, Array.from({ length: n }, () => [true])));
    cache.free();
  }
  assert.ok(bytes.f32 / bytes.q4 >= 6.4, `f32 / q4 = ${bytes.f32 / bytes.q4}`);
  assert.ok(bytes.q8 / bytes.q4 > 1.75, `q8 / q4 = ${bytes.q8 / bytes.q4}`);
  t.diagnostic(`f32 / q4 = ${(bytes.f32 / bytes.q4).toFixed(2)}, q8 / q4 = ${(bytes.q8 / bytes.q4).toFixed(2)}`);
});

test('memoryBytes follows the formula for every mode with 8 KV heads, masked', () => {
  const H = 8;
  const d = 40;
  const n = 300;
  const r = rng(45);
  const masks = Array.from({ length: n }, (_, p) => Array.from({ length: H }, (_, h) => (p * 7 + h) % 5 !== 0));
  for (const mode of MODES) {
    const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
    cache.appendBatch(outlierKeys(r, n, 0, H, d), normals(r, n * H * d), Uint8Array.from(masks.flat(), Number));
    assert.equal(cache.memoryBytes, expectedMemoryBytes(mode, H, d, masks), mode);
    cache.free();
  }
});

test('truncateLast within exactRollback leaves a q4 cache as if the positions were never appended', () => {
  const H = 2;
  const d = 16;
  const n = 400;
  const r = rng(43);
  const k = outlierKeys(r, n, 0, H, d);
  const v = normals(r, n * H * d);
  const upTo = (count, mode) => {
    const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
    cache.appendBatch(k.subarray(0, count * H * d), v.subarray(0, count * H * d));
    return cache;
  };
  for (const mode of ['q4', 'q8k+q4v']) {
    const cache = upTo(n, mode);
    assert.ok(cache.exactRollback >= 64 && Number.isFinite(cache.exactRollback), `exactRollback ${cache.exactRollback}`);
    cache.truncateLast(64);
    const plain = upTo(n - 64, mode);
    assert.deepEqual(fingerprint(cache), fingerprint(plain));
    assert.deepEqual(cache.serialize(), plain.serialize());
    assert.equal(cache.memoryBytes, plain.memoryBytes);
  }
  assert.equal(upTo(n, 'q8').exactRollback, Infinity);
});

test('a q4 snapshot keeps its residual window, and a restored cache rolls back what it appends after', () => {
  const r = rng(44);
  const cache = new LayerKvCache({ numKvHeads: 2, headDim: 8, mode: 'q4', residualRows: 20 });
  cache.appendBatch(outlierKeys(r, 300, 0, 2, 8), normals(r, 300 * 16));
  const restored = LayerKvCache.deserialize(cache.serialize());
  assert.deepEqual(fingerprint(restored), fingerprint(cache));
  assert.equal(restored.residualRows, 20);
  assert.equal(restored.exactRollback, 0);
  const k = outlierKeys(r, 5, 300, 2, 8);
  const v = normals(r, 5 * 16);
  restored.appendBatch(k, v);
  assert.equal(restored.exactRollback, 5);
  cache.appendBatch(k, v);
  assert.deepEqual(restored.serialize(), cache.serialize());
});

test('a mamba2 layer has the geometry it was made with, holds its state in memoryBytes, and refuses a shape by name', () => {
  const layer = new LayerKvCache({ kind: 'mamba2', heads: 4, headDim: 12, groups: 2, stateSize: 8, kernel: 4 });
  try {
    assert.equal(layer.kind, 'mamba2');
    // Read as a delta layer's: key heads the groups, value heads the heads, key size the state, value size headDim.
    assert.deepEqual([layer.keyHeads, layer.valueHeads, layer.keyDim, layer.valueDim, layer.kernel], [2, 4, 8, 12, 4]);
    const channels = 4 * 12 + 2 * 2 * 8;
    assert.equal(layer.channels, channels);
    assert.equal(layer.memoryBytes, 4 * (3 * channels + 4 * 8 * 12));
  } finally {
    layer.free();
  }
  const good = { kind: 'mamba2', heads: 4, headDim: 12, groups: 2, stateSize: 8, kernel: 4 };
  assert.throws(() => new LayerKvCache({ ...good, groups: 3 }), /heads must be a multiple of groups/);
  assert.throws(() => new LayerKvCache({ ...good, stateSize: 0 }), /stateSize/);
  assert.throws(() => new LayerKvCache({ ...good, kernel: 1 }), /kernel/);
  assert.throws(() => new LayerKvCache({ ...good, keyHeads: 2 }), /keyHeads/);
});

test('a none layer holds nothing and takes no positions: a KvCache with it goes on as its layers of rows', () => {
  const none = new LayerKvCache({ kind: 'none' });
  try {
    assert.equal(none.kind, 'none');
    assert.deepEqual([none.memoryBytes, none.seqLen, none.steps, none.owner], [0, 0, 0, null]);
    const row = new Float32Array(2 * 8).fill(0.5);
    assert.throws(() => none.append(row, row), (error) => error.code === 'KVC_E_KIND' && /none layer/.test(error.message));
    assert.equal(none.memoryBytes, 0);
  } finally {
    none.free();
  }
  assert.throws(() => new LayerKvCache({ kind: 'none', owner: 0 }), /owner/);
  // First in the list, too: the cache's positions are its other layers'.
  const cache = new KvCache({ layers: [{ kind: 'none' }, { kind: 'full', numKvHeads: 2, headDim: 8 }, { kind: 'none' }] });
  const plain = new KvCache({ layers: [{ kind: 'full', numKvHeads: 2, headDim: 8 }] });
  try {
    const draw = rng(7);
    const rows = Array.from({ length: 6 }, () => normals(draw, 16));
    for (const row of rows.slice(0, 4)) {
      cache.appendLayer(1, row, row);
      plain.appendLayer(0, row, row);
    }
    cache.beginVerify();
    plain.beginVerify();
    for (const row of rows.slice(4)) {
      cache.appendLayer(1, row, row);
      plain.appendLayer(0, row, row);
    }
    cache.accept(1);
    plain.accept(1);
    assert.equal(cache.nextPosition, 5);
    assert.equal(cache.memoryBytes, plain.memoryBytes);
    const restored = KvCache.deserialize(cache.serialize());
    try {
      assert.deepEqual([0, 1, 2].map((i) => restored.layer(i).kind), ['none', 'full', 'none']);
      assert.deepEqual(restored.serialize(), cache.serialize());
      assert.ok(bitsEqual(restored.layer(1).headKeys(0), plain.layer(0).headKeys(0)));
    } finally {
      restored.free();
    }
  } finally {
    cache.free();
    plain.free();
  }
});

test('an attn_mamba2 layer holds rows and a Mamba-2 state: both in memoryBytes, snapshots and forks', () => {
  const shape = { kind: 'attn_mamba2', numKvHeads: 2, headDim: 8, mode: 'q8', heads: 4, ssmHeadDim: 12, groups: 2, stateSize: 8, kernel: 4 };
  const layer = new LayerKvCache(shape);
  const channels = 4 * 12 + 2 * 2 * 8;
  const stateBytes = 4 * (3 * channels + 4 * 8 * 12);
  try {
    assert.equal(layer.kind, 'attn_mamba2');
    assert.deepEqual([layer.numKvHeads, layer.headDim, layer.mode], [2, 8, 'q8']);
    assert.deepEqual([layer.keyHeads, layer.valueHeads, layer.keyDim, layer.valueDim, layer.kernel, layer.channels], [2, 4, 8, 12, 4, channels]);
    assert.equal(layer.memoryBytes, stateBytes);
    const r = rng(55);
    const k = normals(r, 3 * 2 * 8), v = normals(r, 3 * 2 * 8);
    layer.appendBatch(k, v);
    assert.equal(layer.seqLen, 3);
    const rows = new LayerKvCache({ kind: 'full', numKvHeads: 2, headDim: 8, mode: 'q8' });
    try {
      rows.appendBatch(k, v);
      assert.equal(layer.memoryBytes, rows.memoryBytes + stateBytes);
      assert.ok(bitsEqual(layer.headKeys(1), rows.headKeys(1)));
    } finally {
      rows.free();
    }
    const restored = LayerKvCache.deserialize(layer.serialize());
    const fork = layer.clone();
    try {
      for (const other of [restored, fork]) {
        assert.equal(other.kind, 'attn_mamba2');
        assert.deepEqual(other.serialize(), layer.serialize());
        assert.ok(bitsEqual(other.recurrentState, layer.recurrentState));
      }
    } finally {
      restored.free();
      fork.free();
    }
  } finally {
    layer.free();
  }
  assert.throws(() => new LayerKvCache({ ...shape, groups: 3 }), /heads must be a multiple of groups/);
  assert.throws(() => new LayerKvCache({ ...shape, ssmHeadDim: 0 }), /ssmHeadDim/);
  assert.throws(() => new LayerKvCache({ ...shape, numKvHeads: 0 }), /numKvHeads/);
  assert.throws(() => new LayerKvCache({ ...shape, valueDim: 2 }), /valueDim/);
});

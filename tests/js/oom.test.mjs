// Out of memory in wasm (issue #8): the module with its heap capped at 16 MiB
// (init({ maxMemory })), on the default threads. An append, clone,
// deserialize or constructor that cannot get memory -- or a write into a
// page a fork shares, which copies it -- throws a KvCacheError with code
// KVC_E_NOMEM, changes nothing and leaks nothing, and the cache goes on once
// memory is freed.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { KvCache, KvCacheError, LayerKvCache, init, memoryStats } from '../../js/index.js';
import { MODES, normals, outlierKeys, rng } from './helpers.mjs';

before(async () => {
  await init({ maxMemory: 16 * 2 ** 20 });
});

const H = 32;
const D = 16;
const STRIDE = H * D;
// A batch stages k and v of BATCH positions, just under the 1 MiB the
// staging area keeps between calls. Every read of a full cache (a head's
// rows, imp, probs) fits in that, so reading a full cache allocates nothing
// on the JS side.
const BATCH = 255;
const data = rng(8);
// Position p holds row p % BATCH of the pool however it was appended; the
// pool twice over has the rows of BATCH positions from any position on.
const POOL_K = twice(outlierKeys(data, BATCH, 0, H, D));
const POOL_V = twice(normals(data, BATCH * STRIDE));
const QUERIES = Array.from({ length: H }, () => normals(data, D));

function twice(rows) {
  const both = new Float32Array(2 * rows.length);
  both.set(rows);
  both.set(rows, rows.length);
  return both;
}

/** Appends the pool's rows for the next `count` (<= BATCH) positions to a layer. */
function appendRows(cache, count) {
  const from = (cache.nextPosition % BATCH) * STRIDE;
  const to = from + count * STRIDE;
  if (count === 1) cache.append(POOL_K.subarray(from, to), POOL_V.subarray(from, to));
  else cache.appendBatch(POOL_K.subarray(from, to), POOL_V.subarray(from, to));
}

const appendBatch = (cache) => appendRows(cache, BATCH);
const appendOne = (cache) => appendRows(cache, 1);
const layerOf = (mode) => new LayerKvCache({ numKvHeads: H, headDim: D, mode });
const isOutOfMemory = (error) => error instanceof KvCacheError && error.code === 'KVC_E_NOMEM';

/**
 * A test whose caches (those passed to own) are freed when it ends, passed
 * or failed: every test starts on an empty heap.
 */
function heapTest(name, body) {
  test(name, (t) => {
    const owned = [];
    const own = (cache) => {
      owned.push(cache);
      return cache;
    };
    try {
      return body(own, t);
    } finally {
      for (const cache of owned) cache.free();
    }
  });
}

/** Runs step() until it throws KVC_E_NOMEM (rethrowing anything else); returns the calls that succeeded. */
function untilOutOfMemory(step) {
  for (let calls = 0; calls < 100_000; calls++) {
    try {
      step();
    } catch (error) {
      if (isOutOfMemory(error)) return calls;
      throw error;
    }
  }
  return assert.fail('the heap never ran out: is the module capped?');
}

/**
 * Batches, then positions, that a new layer in `mode` takes before the heap
 * is full. Equal before and after a failed call when that call leaked nothing.
 */
function positionsThatFit(mode) {
  const cache = layerOf(mode);
  try {
    const batches = untilOutOfMemory(() => appendBatch(cache));
    untilOutOfMemory(() => appendOne(cache));
    return { batches, positions: cache.seqLen };
  } finally {
    cache.free();
  }
}

/** Everything a layer shows: lengths, imp, slots, each head's rows and its attention to a fixed query. */
function observe(cache) {
  const heads = [];
  for (let h = 0; h < H; h++) {
    const { out, probs } = cache.attend(QUERIES[h], h);
    heads.push({ keys: cache.headKeys(h), values: cache.headValues(h), positions: cache.headPositions(h), out, probs });
  }
  return {
    seqLen: cache.seqLen,
    nextPosition: cache.nextPosition,
    memoryBytes: cache.memoryBytes,
    fieldFrozen: cache.fieldFrozen,
    imp: cache.imp,
    slots: cache.positions(),
    heads,
  };
}

// Arrays of up to megabytes, compared many times: as bytes, in one call each.
function sameBits(a, b) {
  const bytes = (x) => new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  return Buffer.compare(bytes(a), bytes(b)) === 0;
}

function assertSameObservation(actual, expected, what) {
  for (const key of ['seqLen', 'nextPosition', 'memoryBytes', 'fieldFrozen']) {
    assert.equal(actual[key], expected[key], `${what}: ${key}`);
  }
  assert.ok(sameBits(actual.imp, expected.imp), `${what}: imp`);
  assert.ok(sameBits(actual.slots, expected.slots), `${what}: positions`);
  actual.heads.forEach((head, h) => {
    for (const key of ['keys', 'values', 'positions', 'out', 'probs']) {
      assert.ok(sameBits(head[key], expected.heads[h][key]), `${what}: head ${h} ${key}`);
    }
  });
}

/** Gives a layer importance, so that a failed call that touched imp would show. */
function weigh(cache) {
  cache.accumulateImpHead(0, cache.attend(QUERIES[0], 0).probs);
}

/**
 * Memory held back while a layer fills the heap and handed back while the
 * test reads the layer: attending to int8 rows allocates a workspace (tens
 * of KiB). Taking it again makes the same allocations, into the same hole.
 */
class Headroom {
  #cache = null;

  take() {
    this.#cache = new LayerKvCache({ numKvHeads: 1, headDim: 4096 });
    this.#cache.append(new Float32Array(4096), new Float32Array(4096));
  }

  free() {
    this.#cache?.free();
    this.#cache = null;
  }
}

/**
 * On a layer that has just run out of memory with headroom taken: tries
 * step(cache) again, reading the layer before each try, until a try throws
 * KVC_E_NOMEM. Returns the reads just before and just after that try.
 */
function failureWatched(cache, step, headroom) {
  for (let tries = 0; tries < 50; tries++) {
    headroom.free();
    const before = observe(cache);
    headroom.take();
    try {
      step(cache);
    } catch (error) {
      if (!isOutOfMemory(error)) throw error;
      headroom.free();
      return { before, after: observe(cache) };
    }
  }
  return assert.fail('a full heap took 50 more calls');
}

/**
 * Leaves the heap full but for a hole of about `bytes`: an f32 layer that
 * size is made in one call (no spare capacity), a ballast takes everything
 * else, and the layer is freed. Returns the ballast.
 */
function heapFullButFor(bytes, own) {
  const rows = new Float32Array(Math.ceil(bytes / (STRIDE * 8)) * STRIDE);
  const hole = own(layerOf('f32'));
  hole.appendBatch(rows, rows);
  const ballast = own(layerOf('f32'));
  untilOutOfMemory(() => appendBatch(ballast));
  untilOutOfMemory(() => appendOne(ballast));
  hole.free();
  return ballast;
}

/**
 * Fills what is left of the heap: a large f32 layer, then layers of one
 * channel, until not even one of those can be made. Returns them as one
 * thing to free (owned by the test too).
 */
function fillHeap(own) {
  const layers = [layerOf('f32')];
  untilOutOfMemory(() => appendBatch(layers[0]));
  untilOutOfMemory(() => appendOne(layers[0]));
  const one = new Float32Array(1);
  untilOutOfMemory(() => {
    layers.push(new LayerKvCache({ numKvHeads: 1, headDim: 1 }));
    untilOutOfMemory(() => layers.at(-1).append(one, one));
  });
  return own({ free: () => layers.splice(0).forEach((layer) => layer.free()) });
}

for (const mode of MODES) {
  heapTest(`append that cannot get memory throws KVC_E_NOMEM and changes nothing (${mode})`, (own, t) => {
    const headroom = own(new Headroom());
    headroom.take();
    const cache = own(layerOf(mode));
    untilOutOfMemory(() => appendBatch(cache));
    untilOutOfMemory(() => appendOne(cache));
    t.diagnostic(`${mode}: ${cache.seqLen} positions of ${H} heads x ${D} fit ` +
      `(memoryBytes ${cache.memoryBytes}, capacityBytes ${cache.capacityBytes})`);
    headroom.free();
    weigh(cache);
    headroom.take();
    const { before, after } = failureWatched(cache, appendOne, headroom);
    assertSameObservation(after, before, 'after the failed append');
  });

  heapTest(`appendBatch that cannot get memory throws KVC_E_NOMEM and changes nothing (${mode})`, (own) => {
    const headroom = own(new Headroom());
    headroom.take();
    const cache = own(layerOf(mode));
    untilOutOfMemory(() => appendBatch(cache));
    headroom.free();
    weigh(cache);
    headroom.take();
    const { before, after } = failureWatched(cache, appendBatch, headroom);
    assertSameObservation(after, before, 'after the failed appendBatch');
  });

  heapTest(`a layer that ran out of memory appends and attends as one that never did, once another is freed (${mode})`, (own) => {
    const fit = positionsThatFit(mode);
    const other = own(layerOf(mode));
    for (let i = 0; i < Math.floor(fit.batches * 0.8); i++) appendBatch(other);
    const cache = own(layerOf(mode));
    assert.ok(untilOutOfMemory(() => appendBatch(cache)) > 0, 'the layer took a batch before the heap was full');
    untilOutOfMemory(() => appendOne(cache));
    other.free();
    appendBatch(cache);
    appendOne(cache);
    const plain = own(layerOf(mode));
    while (plain.seqLen < cache.seqLen) appendRows(plain, Math.min(BATCH, cache.seqLen - plain.seqLen));
    assertSameObservation(observe(cache), observe(plain), 'against a layer that never ran out');
  });

  heapTest(`clone copies no row, and a write into a page the fork shares that cannot get memory throws KVC_E_NOMEM and changes neither cache (${mode})`, (own) => {
    const fit = positionsThatFit(mode);
    const headroom = own(new Headroom());
    headroom.take();
    // Four fifths of what fits: a copy of it would not fit beside it.
    const cache = own(layerOf(mode));
    for (let i = 0; i < Math.floor(fit.batches * 0.8); i++) appendBatch(cache);
    headroom.free();
    weigh(cache);
    const original = observe(cache);
    headroom.take();
    const fork = own(cache.clone());
    assert.equal(fork.sharedBytes, fork.memoryBytes, 'the fork shares every page');
    fillHeap(own);
    const { before, after } = failureWatched(fork, appendOne, headroom);
    assertSameObservation(after, before, 'the fork after its failed append');
    assertSameObservation(observe(cache), original, 'the cache it was forked from');
    fork.free();
    cache.free();
  });

  heapTest(`LayerKvCache.deserialize of a snapshot too big to restore throws KVC_E_NOMEM and leaks nothing (${mode})`, (own) => {
    const batches = positionsThatFit(mode).batches;
    // The snapshot, and a heap full but for room to stage it, not to restore it too.
    const prepare = () => {
      const original = layerOf(mode);
      for (let i = 0; i < Math.ceil(batches / 3); i++) appendBatch(original);
      weigh(original);
      const snapshot = original.serialize();
      const expected = observe(original);
      original.free();
      return { snapshot, expected, ballast: heapFullButFor(snapshot.length * 1.25, own) };
    };
    // Where blocks of mixed sizes land depends on what the heap went through:
    // the same steps without the restores say what fits after them.
    prepare().ballast.free();
    const fit = positionsThatFit(mode);
    const { snapshot, expected, ballast } = prepare();
    const corrupt = snapshot.slice();
    corrupt[corrupt.length - 1] ^= 1;
    assert.throws(() => own(LayerKvCache.deserialize(corrupt)), { code: 'KVC_E_SNAPSHOT_CHECKSUM' },
      'the snapshot can be staged: what runs out is the restore');
    const { layers, pages } = memoryStats();
    for (let i = 0; i < 3; i++) assert.throws(() => own(LayerKvCache.deserialize(snapshot)), isOutOfMemory);
    assert.deepEqual([memoryStats().layers, memoryStats().pages], [layers, pages], 'no layer or page of the failed restores lives on');
    ballast.free();
    assert.deepEqual(positionsThatFit(mode), fit, 'the failed restores leaked nothing');
    const restored = own(LayerKvCache.deserialize(snapshot));
    assertSameObservation(observe(restored), expected, 'the restore that fits');
  });
}

// A model: one full layer per mode, appended MODEL_ROUND positions at a time.
const MODEL_ROUND = 64;
const modelOf = () => new KvCache({ layers: MODES.map((mode) => ({ kind: 'full', numKvHeads: H, headDim: D, mode })) });
const appendRound = (model) => MODES.forEach((_, i) => appendRows(model.layer(i), MODEL_ROUND));
const observeModel = (model) => MODES.map((_, i) => observe(model.layer(i)));

function roundsThatFit() {
  const model = modelOf();
  try {
    return untilOutOfMemory(() => appendRound(model));
  } finally {
    model.free();
  }
}

function assertSameModel(actual, expected, what) {
  actual.forEach((layer, i) => assertSameObservation(layer, expected[i], `${what}, layer ${i} (${MODES[i]})`));
}

heapTest('KvCache.clone copies no row, and fails only for its bookkeeping: then KVC_E_NOMEM, the model intact, nothing leaked', (own) => {
  const fit = positionsThatFit('f32');
  const model = own(modelOf());
  for (let i = Math.floor(roundsThatFit() * 0.8); i > 0; i--) appendRound(model);
  const before = observeModel(model);
  const fork = own(model.clone());
  assert.equal(fork.sharedBytes, fork.memoryBytes, 'the fork shares every page');
  assertSameModel(observeModel(fork), before, 'the fork');
  fork.free();
  const headroom = own(new Headroom());
  headroom.take();
  const filler = fillHeap(own);
  assert.throws(() => own(model.clone()), isOutOfMemory);
  headroom.free();
  assertSameModel(observeModel(model), before, 'after the failed clone');
  filler.free();
  model.free();
  assert.deepEqual(positionsThatFit('f32'), fit, 'the failed clone leaked nothing');
});

heapTest('KvCache.deserialize of a snapshot too big to restore throws KVC_E_NOMEM and leaks nothing', (own) => {
  const fit = positionsThatFit('f32');
  const model = own(modelOf());
  // A quarter of what fits: the snapshot is staged and restored beside a hole of its size.
  for (let i = Math.ceil(roundsThatFit() / 4); i > 0; i--) appendRound(model);
  const snapshot = model.serialize();
  const expected = observeModel(model);
  model.free();
  const ballast = heapFullButFor(snapshot.length * 1.25, own);
  for (let i = 0; i < 3; i++) assert.throws(() => own(KvCache.deserialize(snapshot)), isOutOfMemory);
  ballast.free();
  assert.deepEqual(positionsThatFit('f32'), fit, 'the layers restored before it ran out were freed');
  const restored = own(KvCache.deserialize(snapshot));
  assertSameModel(observeModel(restored), expected, 'the restore that fits');
});

heapTest('new KvCache that cannot fit throws KVC_E_NOMEM and leaves no layer behind', (own) => {
  const fit = positionsThatFit('f32');
  // A layer's per-head bookkeeping alone is a few hundred KiB at 4096 heads.
  const huge = { numLayers: 4096, numKvHeads: 4096, headDim: 1 };
  for (let i = 0; i < 3; i++) assert.throws(() => own(new KvCache(huge)), isOutOfMemory);
  assert.deepEqual(positionsThatFit('f32'), fit, 'the layers made before it ran out were freed');
  assert.equal(own(new KvCache({ ...huge, numLayers: 8 })).numLayers, 8, 'a model that fits is made');
});

heapTest('appendBatch of more than the heap can stage throws KVC_E_NOMEM and changes nothing', (own) => {
  const cache = own(layerOf('q8'));
  for (let i = 0; i < 2; i++) appendBatch(cache);
  weigh(cache);
  const before = observe(cache);
  const k = new Float32Array(Math.ceil((10 << 20) / (STRIDE * 4)) * STRIDE); // 10 MiB, and as much for v
  assert.throws(() => cache.appendBatch(k, k), isOutOfMemory);
  assertSameObservation(observe(cache), before, 'after the refused appendBatch');
  appendBatch(cache);
  assert.equal(cache.seqLen, 3 * BATCH, 'the layer appends again');
});

heapTest('attendHeads with more queries than the heap can stage throws KVC_E_NOMEM and changes nothing', (own) => {
  const cache = own(layerOf('q8'));
  for (let i = 0; i < 2; i++) appendBatch(cache);
  weigh(cache);
  const before = observe(cache);
  const q = new Float32Array((20 << 20) / 4); // 20 MiB: 640 queries per KV head
  assert.throws(() => cache.attendHeads(q), isOutOfMemory);
  assertSameObservation(observe(cache), before, 'after the refused attendHeads');
  const { out } = cache.attendHeads(Float32Array.from(QUERIES.flatMap((q1) => Array.from(q1))));
  QUERIES.forEach((_, h) => assert.ok(sameBits(out.subarray(h * D, (h + 1) * D), before.heads[h].out), `head ${h} attends again`));
});

// Shared layers (Gemma 4's shared-KV blocks) through the binding: a layer
// that holds nothing and names the earlier layer of its KvCache whose rows it
// reads; the cache's operations reach that owner once; bad owners and calls
// on rows are refused, changing nothing.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { KvCache, KvCacheError, LayerKvCache, PrefixCache, memoryStats } from '../../js/index.js';
import { fingerprint, normals, ready, rng } from './helpers.mjs';

before(ready);

const H = 2;
const D = 8;
const OWNERS = [
  { kind: 'full', numKvHeads: H, headDim: D, mode: 'q8' },
  { kind: 'window', window: 40, rollback: 8, numKvHeads: H, headDim: D },
];
const SHARED = [{ kind: 'shared', owner: 0 }, { kind: 'shared', owner: 1 }, { kind: 'shared', owner: 0 }];

/** A cache of the two owners (and the shared layers after them, withShared) holding n positions of seed's data. */
function cacheWith(n, { seed = 1, withShared = true, chunk = n } = {}) {
  const cache = new KvCache({ layers: withShared ? [...OWNERS, ...SHARED] : OWNERS });
  appendToOwners(cache, 0, n, seed, chunk);
  return cache;
}

/** Positions [first, first + n) of seed's data (each position's its own, however they are batched),
 * to the owners only, `chunk` at a time. */
function appendToOwners(cache, first, n, seed, chunk = n) {
  for (let at = first; at < first + n; at += chunk) {
    const count = Math.min(chunk, first + n - at);
    for (let i = 0; i < OWNERS.length; i++) {
      const k = new Float32Array(count * H * D);
      const v = new Float32Array(count * H * D);
      for (let p = 0; p < count; p++) {
        const r = rng(seed * 100000 + i * 10000 + at + p);
        k.set(normals(r, H * D), p * H * D);
        v.set(normals(r, H * D), p * H * D);
      }
      cache.appendLayerBatch(i, k, v);
    }
  }
}

/** The owners of a cache, as fingerprints, and what its shared layers are. */
function ownersOf(cache) {
  const owners = OWNERS.map((_, i) => fingerprint(cache.layer(i)));
  const shared = [];
  for (let i = OWNERS.length; i < cache.numLayers; i++) {
    const layer = cache.layer(i);
    shared.push({ kind: layer.kind, owner: layer.owner, memoryBytes: layer.memoryBytes, verifying: layer.verifying });
  }
  return { owners, shared, nextPosition: cache.nextPosition, memoryBytes: cache.memoryBytes };
}

const SHARED_AS_MADE = SHARED.map(({ owner }) => ({ kind: 'shared', owner, memoryBytes: 0, verifying: false }));

test('a shared layer holds nothing, names its owner and costs no memory', () => {
  const cache = cacheWith(100);
  const plain = cacheWith(100, { withShared: false });
  assert.equal(cache.numLayers, 5);
  for (let i = 2; i < 5; i++) {
    const layer = cache.layer(i);
    assert.equal(layer.kind, 'shared');
    assert.equal(layer.owner, SHARED[i - 2].owner);
    assert.equal(layer.memoryBytes, 0);
    assert.equal(layer.sharedBytes, 0);
    assert.equal(layer.seqLen, 0);
    assert.equal(layer.mode, null);
  }
  assert.equal(cache.layer(0).owner, null, 'other kinds have no owner');
  assert.ok(cache.memoryBytes > 0);
  assert.equal(cache.memoryBytes, cache.layer(0).memoryBytes + cache.layer(1).memoryBytes, 'the owners, once');
  assert.equal(cache.memoryBytes, plain.memoryBytes);
  assert.deepEqual(cache.memoryBytesByLayer.slice(2), [0, 0, 0]);
  assert.equal(cache.nextPosition, 100, 'shared layers never hold the cache back');
  assert.match(String(cache.layer(2)), /kind=shared owner=0/);
  cache.free();
  plain.free();
});

test('a bad owner throws naming layers[i].owner, and nothing is created', () => {
  const cases = [
    [[...OWNERS, { kind: 'shared' }], TypeError, /layers\[2\]\.owner must be an integer/],
    [[...OWNERS, { kind: 'shared', owner: 1.5 }], TypeError, /layers\[2\]\.owner must be an integer/],
    [[...OWNERS, { kind: 'shared', owner: '0' }], TypeError, /layers\[2\]\.owner must be an integer/],
    [[...OWNERS, { kind: 'shared', owner: -1 }], RangeError, /layers\[2\]\.owner must be between 0 and 2/],
    [[...OWNERS, { kind: 'shared', owner: 3 }], RangeError, /layers\[2\]\.owner must be between 0 and 2/],
    [[...OWNERS, { kind: 'shared', owner: 2 }], RangeError, /layers\[2\]\.owner must name an earlier layer/],
    [[{ kind: 'shared', owner: 0 }, ...OWNERS], RangeError, /layers\[0\]\.owner must name an earlier layer/],
    [[...OWNERS, { kind: 'shared', owner: 3 }, { kind: 'full', numKvHeads: H, headDim: D }], RangeError, /layers\[2\]\.owner must name an earlier layer/],
    [[...OWNERS, { kind: 'shared', owner: 0 }, { kind: 'shared', owner: 2 }], RangeError, /layers\[3\]\.owner must name a full or window layer.*"shared"/],
    [[{ kind: 'conv', channels: 4, kernel: 3 }, { kind: 'shared', owner: 0 }], RangeError, /layers\[1\]\.owner must name a full or window layer.*"conv"/],
    [[{ kind: 'linear', numHeads: 1, numFeatures: 2, valueDim: 2 }, { kind: 'shared', owner: 0 }], RangeError, /layers\[1\]\.owner must name a full or window layer.*"linear"/],
    [[...OWNERS, { kind: 'shared', owner: 0, window: 3 }], TypeError, /window/],
  ];
  const live = memoryStats().layers;
  for (const [layers, type, message] of cases) {
    assert.throws(() => new KvCache({ layers }), (error) => error instanceof type && message.test(error.message),
      JSON.stringify(layers.slice(-2)));
    assert.equal(memoryStats().layers, live, 'no layer is left behind');
  }
  // Alone, a shared layer's owner is any index a cache can have.
  assert.throws(() => new LayerKvCache({ kind: 'shared', owner: -1 }), /owner must be between 0 and 4095/);
  assert.throws(() => new LayerKvCache({ kind: 'shared', owner: 4096 }), /owner must be between 0 and 4095/);
});

test('calls on rows of a shared layer throw KVC_E_KIND and change nothing', () => {
  const cache = cacheWith(70);
  const shared = cache.layer(2);
  const before = ownersOf(cache);
  const q = new Float32Array(D);
  const kv = new Float32Array(H * D);
  const calls = {
    append: () => shared.append(kv, kv),
    appendBatch: () => shared.appendBatch(kv, kv),
    attend: () => shared.attend(q, 0),
    attendHeads: () => shared.attendHeads(kv),
    attendCausal: () => shared.attendCausal(q, 0),
    truncateLast: () => shared.truncateLast(1),
    headKeys: () => shared.headKeys(0),
    positions: () => shared.positions(),
    evict: () => shared.evict({ budget: 10 }),
    setMaxRows: () => shared.setMaxRows(10),
    accumulateImp: () => shared.accumulateImp(new Float32Array(0)),
    appendLayer: () => cache.appendLayer(2, kv, kv),
  };
  for (const [name, call] of Object.entries(calls)) {
    assert.throws(call, (error) => error instanceof KvCacheError && error.code === 'KVC_E_KIND' &&
      /shared layer .*layer 0, its owner/.test(error.message), name);
  }
  assert.deepEqual(ownersOf(cache), before);
  cache.free();
});

test('a verify appends drafts to the owners only; accept(j) leaves them as j plain appends', () => {
  for (let j = 0; j <= 4; j++) {
    const cache = cacheWith(90);
    const plain = cacheWith(90, { withShared: false });
    cache.beginVerify();
    assert.equal(cache.verifying, true);
    appendToOwners(cache, 90, 4, 2);
    appendToOwners(plain, 90, j, 2);
    assert.throws(() => cache.accept(5), /accept/);
    cache.accept(j);
    assert.equal(cache.verifying, false);
    const got = ownersOf(cache);
    assert.deepEqual(got.owners, ownersOf(plain).owners, `j = ${j}`);
    assert.deepEqual(got.shared, SHARED_AS_MADE);
    assert.equal(got.nextPosition, 90 + j);
    cache.free();
    plain.free();
  }
});

test('truncateLast, evict and clear reach the owners and pass the shared layers by', () => {
  const cache = cacheWith(150, { chunk: 10 });
  const plain = cacheWith(150, { withShared: false, chunk: 10 });
  cache.truncateLast(8);
  plain.truncateLast(8);
  assert.deepEqual(ownersOf(cache).owners, ownersOf(plain).owners);
  const before = ownersOf(cache);
  assert.throws(() => cache.truncateLast(120), (error) => error.code === 'KVC_E_WINDOW');
  assert.deepEqual(ownersOf(cache), before, 'refused, nothing changed');
  cache.evict({ budget: 80, sinks: 4, recent: 40 });
  plain.evict({ budget: 80, sinks: 4, recent: 40 });
  assert.deepEqual(ownersOf(cache).owners, ownersOf(plain).owners);
  cache.clear();
  assert.equal(cache.nextPosition, 0);
  assert.equal(cache.memoryBytes, 0);
  assert.deepEqual(ownersOf(cache).shared, SHARED_AS_MADE);
  cache.free();
  plain.free();
});

test('serialize and deserialize carry the shared layers; the bytes re-serialize identical', () => {
  const cache = cacheWith(120);
  const bytes = cache.serialize();
  const restored = KvCache.deserialize(bytes);
  assert.deepEqual(ownersOf(restored), ownersOf(cache));
  assert.deepEqual(restored.serialize(), bytes);
  // A shared layer alone round-trips as well.
  const alone = new LayerKvCache({ kind: 'shared', owner: 7 });
  const again = LayerKvCache.deserialize(alone.serialize());
  assert.equal(again.kind, 'shared');
  assert.equal(again.owner, 7);
  assert.equal(again.clone().owner, 7);
  for (const x of [cache, restored, alone, again]) x.free();
});

test('clone is copy-on-write, and the fork\'s shared layers read the fork\'s owners', () => {
  const cache = cacheWith(100);
  const before = ownersOf(cache);
  const fork = cache.clone();
  assert.ok(fork.sharedBytes > 0);
  assert.deepEqual(ownersOf(fork), before);
  appendToOwners(fork, 100, 30, 3);
  assert.deepEqual(ownersOf(cache), before, 'the original is untouched');
  assert.equal(fork.nextPosition, 130);
  assert.deepEqual(ownersOf(fork).shared, SHARED_AS_MADE);
  fork.free();
  assert.deepEqual(ownersOf(cache), before);
  cache.free();
});

test('PrefixCache holds and matches caches with shared layers', () => {
  // Prefix caches take full layers: the owners here are both full.
  const layers = [OWNERS[0], { kind: 'full', numKvHeads: H, headDim: D }, { kind: 'shared', owner: 0 }, { kind: 'shared', owner: 1 }];
  const make = (n) => {
    const cache = new KvCache({ layers });
    appendToOwners(cache, 0, n, 4);
    return cache;
  };
  const tokens = Array.from({ length: 120 }, (_, i) => i * 3 + 1);
  const prefixes = new PrefixCache({ budgetBytes: Infinity });
  const cache = make(120);
  assert.equal(prefixes.add(tokens, cache), true);
  const other = [...tokens.slice(0, 80), 7, ...tokens.slice(81)];
  const hit = prefixes.match(other);
  assert.equal(hit.length, 80);
  assert.equal(hit.cache.nextPosition, 80);
  const plain = cache.clone();
  plain.truncateLast(40);
  assert.deepEqual(ownersOf(hit.cache), ownersOf(plain));
  assert.equal(hit.cache.layer(2).owner, 0);
  assert.equal(hit.cache.layer(3).owner, 1);
  // Entries agree on their shared layers' owners too.
  const swapped = new KvCache({ layers: [layers[0], layers[1], { kind: 'shared', owner: 1 }, { kind: 'shared', owner: 0 }] });
  appendToOwners(swapped, 0, 120, 4);
  assert.throws(() => prefixes.add(other, swapped), (error) => error.code === 'KVC_E_PREFIX');
  assert.equal(prefixes.size, 1);
  for (const x of [cache, hit.cache, plain, swapped, prefixes]) x.free();
});

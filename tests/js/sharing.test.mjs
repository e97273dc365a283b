// Shared prefixes from JavaScript: a clone is a copy-on-write fork (its
// bytes shared, sharedBytes and memoryStats say so, a write on either side
// never reaches the other), PrefixCache keeps and finds prefixes within a
// budget and refuses what it cannot hold, and a llama session with a prefix
// cache computes only what the prefix cache does not hold -- and generates
// what a session without one generates.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { KvCache, KvCacheError, LayerKvCache, PrefixCache, memoryStats } from '../../js/index.js';
import { Llama, generate } from '../../js/llama.js';
import { MODEL_MISSING, MODEL_PATH, MODES, fingerprint, normals, ready, rng } from './helpers.mjs';

before(ready);

const H = 2;
const D = 16;

/** A model cache of `layers` full layers holding `len` positions of seeded data. */
function modelWith(len, { mode = 'q8', layers = 2, seed = 1 } = {}) {
  const cache = new KvCache({ numLayers: layers, numKvHeads: H, headDim: D, mode });
  const r = rng(seed);
  for (let i = 0; i < layers; i++) {
    if (len) cache.layer(i).appendBatch(normals(r, len * H * D), normals(r, len * H * D));
  }
  return cache;
}

const tokens = (n, shared, conversation) =>
  Array.from({ length: n }, (_, i) => (i < shared ? i * 7 + 1 : conversation * 100000 + i));

const digest = (cache) => Buffer.from(cache.serialize()).toString('base64');

for (const mode of MODES) {
  test(`a clone shares every page and copies no row, and a write on either side never reaches the other (${mode})`, () => {
    const r = rng(2);
    const cache = new LayerKvCache({ numKvHeads: H, headDim: D, mode });
    cache.appendBatch(normals(r, 200 * H * D), normals(r, 200 * H * D));
    const stats = memoryStats();
    const fork = cache.clone();
    assert.equal(memoryStats().cacheBytes, stats.cacheBytes, 'a fork adds no bytes');
    assert.equal(memoryStats().pages, stats.pages, 'nor pages');
    assert.equal(fork.sharedBytes, fork.memoryBytes);
    assert.equal(cache.sharedBytes, cache.memoryBytes);
    const parent = fingerprint(cache);
    fork.append(normals(r, H * D), normals(r, H * D));
    fork.accumulateImp(new Float32Array(fork.seqLen).fill(0.5));
    fork.evict({ budget: 120, sinks: 4, recent: 20 });
    assert.deepEqual(fingerprint(cache), parent, 'the parent after its fork wrote');
    const forked = fingerprint(fork);
    cache.append(normals(r, H * D), normals(r, H * D));
    cache.truncateLast(3);
    assert.deepEqual(fingerprint(fork), forked, 'the fork after its parent wrote');
    assert.ok(fork.sharedBytes < fork.memoryBytes, 'the fork copied what it wrote into');
    cache.free();
    assert.equal(fork.sharedBytes, 0, 'alone, it shares nothing');
    fork.free();
  });
}

test('memoryStats counts a prefix shared by 64 forks once', () => {
  const before = memoryStats();
  const cache = modelWith(4096, { layers: 3 });
  const one = cache.memoryBytes;
  assert.equal(memoryStats().cacheBytes - before.cacheBytes, one);
  const forks = Array.from({ length: 64 }, () => cache.clone());
  const added = memoryStats().cacheBytes - before.cacheBytes - one;
  assert.ok(added < 0.02 * one, `64 forks added ${added} bytes to ${one}`);
  // Each fork appends a position of its own: it copies its last partly
  // filled pages, not the prefix.
  const r = rng(3);
  for (const fork of forks) for (let i = 0; i < 3; i++) fork.layer(i).append(normals(r, H * D), normals(r, H * D));
  const grown = memoryStats().cacheBytes - before.cacheBytes - one;
  assert.ok(grown < 64 * 0.05 * one, `64 conversations of one position each: ${grown} bytes beyond the prefix`);
  for (const fork of forks) fork.free();
  cache.free();
  assert.equal(memoryStats().cacheBytes, before.cacheBytes);
  assert.equal(memoryStats().pages, before.pages, 'every page went with its last holder');
});

test('PrefixCache.match gives a fork of the longest common prefix, truncated to it, the caller\'s to free', () => {
  const prefixes = new PrefixCache({ budgetBytes: Infinity });
  const a = modelWith(300, { seed: 4 });
  const b = modelWith(300, { seed: 5 });
  assert.equal(prefixes.add(tokens(300, 200, 1), a), true);
  assert.equal(prefixes.add(new Uint32Array(tokens(300, 120, 2)), b), true);
  assert.equal(prefixes.size, 2);
  const hit = prefixes.match(tokens(250, 200, 3));
  assert.equal(hit.length, 200);
  assert.equal(hit.cache.seqLen, 200);
  const plain = a.clone();
  plain.truncateLast(100);
  assert.equal(digest(hit.cache), digest(plain), 'the first 200 positions of a');
  const entry = digest(a);
  const r = rng(6);
  hit.cache.layer(0).append(normals(r, H * D), normals(r, H * D));
  a.free(); // the entries are forks of their own
  b.free();
  assert.equal(prefixes.match(tokens(63, 63, 1)), null, 'fewer than 64 tokens never match');
  assert.equal(prefixes.match(tokens(300, 0, 9)), null, 'nothing in common');
  const again = prefixes.match(tokens(300, 200, 1));
  assert.equal(again.length, 300);
  assert.equal(digest(again.cache), entry, 'the entry is as it was added');
  for (const cache of [hit.cache, again.cache, plain]) cache.free();
  prefixes.free();
});

test('PrefixCache keeps a shared prefix once, and its budget drops the least recently used entries', () => {
  const base = modelWith(256, { seed: 7 });
  const shared = new PrefixCache({ budgetBytes: Infinity });
  let separate = 0;
  for (let c = 0; c < 4; c++) {
    const conversation = base.clone();
    const r = rng(10 + c);
    for (let i = 0; i < 2; i++) conversation.layer(i).appendBatch(normals(r, 20 * H * D), normals(r, 20 * H * D));
    shared.add(tokens(276, 256, c + 1), conversation);
    separate += conversation.memoryBytes;
    conversation.free();
  }
  assert.ok(shared.bytes < separate / 3, `4 entries sharing 256 positions: ${shared.bytes} bytes, ${separate} apart`);
  shared.free();
  base.free();

  const models = [0, 1, 2, 3].map((c) => modelWith(100, { seed: 20 + c }));
  const one = models[0].memoryBytes;
  const prefixes = new PrefixCache({ budgetBytes: 3.5 * one });
  for (let c = 0; c < 3; c++) prefixes.add(tokens(100, 0, c + 1), models[c]);
  prefixes.match(tokens(100, 0, 1)).cache.free(); // entry 1 used: entry 2 is now the oldest
  assert.equal(prefixes.add(tokens(100, 0, 4), models[3]), true);
  assert.equal(prefixes.size, 3);
  assert.ok(prefixes.bytes <= prefixes.budgetBytes);
  assert.equal(prefixes.match(tokens(100, 0, 2)), null, 'the least recently used went');
  assert.equal(prefixes.delete(tokens(100, 0, 4)), true);
  assert.equal(prefixes.delete(tokens(100, 0, 4)), false);
  prefixes.clear();
  assert.equal(prefixes.size, 0);
  const small = new PrefixCache({ budgetBytes: one / 2 });
  assert.equal(small.add(tokens(100, 0, 1), models[0]), false, 'an entry over the budget is not kept');
  assert.equal(small.size, 0);
  for (const model of models) model.free();
  small.free();
  prefixes.free();
});

test('PrefixCache refuses what it cannot hold, naming the argument, and changes nothing', () => {
  const prefixes = new PrefixCache({ budgetBytes: 1 << 30 });
  const model = modelWith(100);
  prefixes.add(tokens(100, 100, 1), model);
  const unchanged = () => {
    assert.equal(prefixes.size, 1);
    assert.equal(prefixes.match(tokens(100, 100, 1)).length, 100);
  };
  const refuses = (call, expected) => {
    const bytes = prefixes.bytes;
    assert.throws(call, expected);
    assert.equal(prefixes.bytes, bytes);
    unchanged();
  };
  refuses(() => prefixes.add(tokens(99, 99, 1), model), /tokens must hold one id per position of the cache \(100; got 99\)/);
  refuses(() => prefixes.add([...tokens(99, 99, 1), 1.5], model), /tokens\[99\] must be an integer/);
  refuses(() => prefixes.add([...tokens(99, 99, 1), -1], model), /tokens\[99\]/);
  refuses(() => prefixes.add(new Float32Array(100), model), /tokens must be an array or an integer typed array/);
  refuses(() => prefixes.add(tokens(100, 100, 1), {}), /cache must be a KvCache/);
  const f32 = modelWith(100, { mode: 'f32' });
  refuses(() => prefixes.add(tokens(100, 100, 2), f32), { code: 'KVC_E_PREFIX' });
  const evicted = modelWith(100, { seed: 3 });
  evicted.evict({ budget: 80 });
  refuses(() => prefixes.add(tokens(100, 100, 3), evicted), { code: 'KVC_E_PREFIX' }); // positions no longer follow tokens
  model.beginVerify();
  refuses(() => prefixes.add(tokens(100, 100, 1), model), { code: 'KVC_E_VERIFYING' });
  model.reject();
  const hybrid = new KvCache({ layers: [{ kind: 'full', numKvHeads: H, headDim: D, mode: 'q8' }, { kind: 'linear', numHeads: 1, numFeatures: 2, valueDim: 2 }] });
  refuses(() => prefixes.add([], hybrid), (error) => error instanceof KvCacheError && error.code === 'KVC_E_KIND' && /layer 1 of the cache is linear/.test(error.message));
  refuses(() => new PrefixCache({ budgetBytes: -1 }), /options.budgetBytes must be between 0/);
  refuses(() => new PrefixCache({}), /options.budgetBytes must be an integer/);
  for (const cache of [f32, evicted, hybrid]) cache.free();
  model.free();
  refuses(() => prefixes.add(tokens(100, 100, 1), model), /cache was freed/);
  prefixes.free();
  assert.throws(() => prefixes.match(tokens(100, 100, 1)), /the prefix cache was freed/);
  prefixes.free(); // idempotent
});

test('a llama session with a prefix cache computes only what it does not hold, and generates what a session without one does', (t) => {
  if (MODEL_MISSING) return t.skip(MODEL_MISSING);
  const llama = Llama.fromGguf(new Uint8Array(readFileSync(MODEL_PATH)));
  const system = llama.tokenizer.encode('Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ' +
    'One day, she saw a big, red ball. She wanted to play with it, but it was too high. Lily asked her mom for help. ' +
    'Her mom smiled and said yes.');
  assert.ok(system.length > 64, `a system prompt of ${system.length} tokens`);
  const prompts = [' One day,', ' Every morning,', ' One day,'].map((text) => [...system, ...llama.tokenizer.encode(text).slice(1)]);
  const prefixCache = new PrefixCache({ budgetBytes: 8 << 20 });
  for (const mode of ['f32', 'q8']) {
    prefixCache.clear();
    prompts.forEach((prompt, i) => {
      const plain = llama.session({ mode });
      const want = generate(plain, prompt, { steps: 40 });
      plain.free();
      const session = llama.session({ mode, prefixCache });
      const got = generate(session, prompt, { steps: 40, draft: i === 2 ? 4 : 0 });
      assert.deepEqual(got.tokens, want.tokens, `${mode}, prompt ${i}: the same tokens`);
      if (i === 0) assert.equal(got.stats.prefixTokens, 0, 'nothing to reuse at first');
      else assert.ok(got.stats.prefixTokens >= system.length - 1, `${mode}, prompt ${i}: ${got.stats.prefixTokens} prompt tokens reused`);
      if (i === 2) assert.equal(got.stats.prefixTokens, prompt.length - 1, 'the same prompt again: all of it');
      session.free();
    });
    assert.ok(prefixCache.size >= 2);
  }
  prefixCache.free();
});

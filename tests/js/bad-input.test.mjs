// Every argument is checked: a wrong type, length, head or count throws a
// TypeError or RangeError whose message names the parameter, and the cache
// is exactly as it was.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { LayerKvCache, attentionHead } from '../../js/index.js';
import { readFileSync } from 'node:fs';
import { MODEL_MISSING, MODEL_PATH, fingerprint, normals, outlierKeys, ready, rng } from './helpers.mjs';

before(ready);

const H = 2;
const d = 4;

function populated(mode = 'q8') {
  const r = rng(1);
  const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
  cache.appendBatch(outlierKeys(r, 70, 0, H, d), normals(r, 70 * H * d), Uint8Array.from({ length: 70 * H }, (_, i) => i % 5 !== 0));
  cache.accumulateImp(new Float32Array(70).fill(0.25));
  return cache;
}

/** Asserts that `call` throws `name` mentioning `param`, and that the cache did not change. */
function refuses(cache, call, name, param) {
  const before = fingerprint(cache);
  assert.throws(call, (error) => {
    assert.equal(error.name, name, `${error.name}: ${error.message}`);
    assert.ok(error.message.includes(param), `"${error.message}" names ${param}`);
    return true;
  });
  assert.deepEqual(fingerprint(cache), before, 'the cache is unchanged');
}

const k = () => new Float32Array(H * d);
const withNonFinite = (value, at) => { const x = k(); x[at] = value; return x; };

test('the constructor names each bad option', () => {
  const bad = [
    [undefined, 'TypeError', 'options'],
    [null, 'TypeError', 'options'],
    [4, 'TypeError', 'options'],
    [{ headDim: 4 }, 'TypeError', 'numKvHeads'],
    [{ numKvHeads: 0, headDim: 4 }, 'RangeError', 'numKvHeads'],
    [{ numKvHeads: -1, headDim: 4 }, 'RangeError', 'numKvHeads'],
    [{ numKvHeads: 4097, headDim: 4 }, 'RangeError', 'numKvHeads'],
    [{ numKvHeads: 1.5, headDim: 4 }, 'TypeError', 'numKvHeads'],
    [{ numKvHeads: '2', headDim: 4 }, 'TypeError', 'numKvHeads'],
    [{ numKvHeads: NaN, headDim: 4 }, 'TypeError', 'numKvHeads'],
    [{ numKvHeads: 2 }, 'TypeError', 'headDim'],
    [{ numKvHeads: 2, headDim: 0 }, 'RangeError', 'headDim'],
    [{ numKvHeads: 2, headDim: 4097 }, 'RangeError', 'headDim'],
    [{ numKvHeads: 2, headDim: Infinity }, 'TypeError', 'headDim'],
    [{ numKvHeads: 2, headDim: 4, mode: 'q5' }, 'RangeError', 'mode'],
    [{ numKvHeads: 2, headDim: 4, mode: 'Q4' }, 'RangeError', 'mode'],
    [{ numKvHeads: 2, headDim: 4, mode: 1 }, 'TypeError', 'mode'],
    [{ numKvHeads: 2, headDim: 4, mode: null }, 'TypeError', 'mode'],
    [{ numKvHeads: 2, headDim: 4, mode: ['q4'] }, 'TypeError', 'mode'],
    [{ numKvHeads: 2, headDim: 4, mode: { keys: 'q5' } }, 'RangeError', 'mode.keys'],
    [{ numKvHeads: 2, headDim: 4, mode: { values: 4 } }, 'RangeError', 'mode.values'],
    [{ numKvHeads: 2, headDim: 4, mode: { keys: 'q4', value: 'q4' } }, 'TypeError', "mode has no option 'value' (did you mean 'values'?)"],
    [{ numKvHeads: 2, headDim: 4, mode: { key: 'q8', values: 'q8' } }, 'TypeError', "mode has no option 'key' (did you mean 'keys'?)"],
    [{ numKvHeads: 2, headDim: 4, mdoe: 'q8' }, 'TypeError', "unknown option 'mdoe' (did you mean 'mode'?)"],
    [{ numKvHeads: 2, headDim: 4, mode: 'q8', residualRows: 32 }, 'TypeError', "option 'residualRows' does nothing here"],
    [{ numKvHeads: 2, headDim: 4, sinks: 2 }, 'TypeError', "option 'sinks' does nothing here: it goes with maxRows"],
    [{ kind: 'linear', numHeads: 2, numFeatures: 4, valueDim: 4, mode: 'q8' }, 'TypeError', "unknown option 'mode'"],
    [{ numKvHeads: 2, headDim: 4, mode: 'q4', residualRows: -1 }, 'RangeError', 'residualRows'],
    [{ numKvHeads: 2, headDim: 4, mode: 'q4', residualRows: 4097 }, 'RangeError', 'residualRows'],
    [{ numKvHeads: 2, headDim: 4, mode: 'q4', residualRows: 1.5 }, 'TypeError', 'residualRows'],
  ];
  for (const [options, name, param] of bad) {
    assert.throws(() => new LayerKvCache(options), (error) => error.name === name && error.message.includes(param),
      `new LayerKvCache(${JSON.stringify(options)})`);
  }
});

test('append names k, v and alive when they are of the wrong type or length', () => {
  const cache = populated();
  refuses(cache, () => cache.append([0, 0, 0, 0, 0, 0, 0, 0], k()), 'TypeError', 'k');
  refuses(cache, () => cache.append(new Float64Array(H * d), k()), 'TypeError', 'k');
  refuses(cache, () => cache.append(null, k()), 'TypeError', 'k');
  refuses(cache, () => cache.append(new Float32Array(H * d - 1), k()), 'RangeError', 'k');
  refuses(cache, () => cache.append(k(), undefined), 'TypeError', 'v');
  refuses(cache, () => cache.append(k(), new Float32Array(H * d + 1)), 'RangeError', 'v');
  refuses(cache, () => cache.append(k(), k(), 'yes'), 'TypeError', 'alive');
  refuses(cache, () => cache.append(k(), k(), new Int8Array(H)), 'TypeError', 'alive');
  refuses(cache, () => cache.append(k(), k(), [1, 0]), 'TypeError', 'alive');
  refuses(cache, () => cache.append(k(), k(), [true]), 'RangeError', 'alive');
  refuses(cache, () => cache.append(k(), k(), new Uint8Array(H + 1)), 'RangeError', 'alive');
});

test('append refuses NaN and infinities in a live head and stores nothing', () => {
  const cache = populated();
  for (const value of [NaN, Infinity, -Infinity]) {
    refuses(cache, () => cache.append(withNonFinite(value, 5), k()), 'RangeError', 'k');
    refuses(cache, () => cache.append(k(), withNonFinite(value, 0)), 'RangeError', 'v');
  }
});

test('append accepts NaN in the slice of a dead head, which is never read', () => {
  const cache = populated();
  cache.append(withNonFinite(NaN, d + 1), withNonFinite(NaN, d), [true, false]);
  assert.equal(cache.seqLen, 71);
});

test('appendBatch names k, v and alive, and is all or nothing', () => {
  const cache = populated();
  const n = 3;
  refuses(cache, () => cache.appendBatch(new Float32Array(n * H * d + 1), new Float32Array(n * H * d + 1)), 'RangeError', 'k');
  refuses(cache, () => cache.appendBatch(new Float32Array(n * H * d), new Float32Array(H * d)), 'RangeError', 'v');
  refuses(cache, () => cache.appendBatch(new Float32Array(n * H * d), new Float32Array(n * H * d), new Uint8Array(H)), 'RangeError', 'alive');
  const late = new Float32Array(n * H * d);
  late[(n - 1) * H * d + 2] = NaN; // only the last position is bad
  refuses(cache, () => cache.appendBatch(new Float32Array(n * H * d), late), 'RangeError', 'v');
});

test('attend names q, kvHead and into', () => {
  const cache = populated();
  const q = new Float32Array(d);
  refuses(cache, () => cache.attend(new Float32Array(d + 1), 0), 'RangeError', 'q');
  refuses(cache, () => cache.attend([1, 2, 3, 4], 0), 'TypeError', 'q');
  refuses(cache, () => cache.attend(withNonFinite(NaN, 0).subarray(0, d), 0), 'RangeError', 'q');
  for (const head of [-1, H, 0.5, '0', undefined, null]) {
    const name = typeof head === 'number' && Number.isInteger(head) ? 'RangeError' : 'TypeError';
    refuses(cache, () => cache.attend(q, head), name, 'kvHead');
  }
  refuses(cache, () => cache.attend(q, 0, 5), 'TypeError', 'into');
  refuses(cache, () => cache.attend(q, 0, { out: new Float32Array(d - 1) }), 'RangeError', 'into.out');
  refuses(cache, () => cache.attend(q, 0, { probs: new Float32Array(3) }), 'RangeError', 'into.probs');
  refuses(cache, () => cache.attend(q, 0, { probs: new Array(100) }), 'TypeError', 'into.probs');
});

test('truncateLast names n when it is negative or not an integer', () => {
  const cache = populated();
  refuses(cache, () => cache.truncateLast(-1), 'RangeError', 'n');
  for (const n of [1.5, '1', NaN, undefined, null]) refuses(cache, () => cache.truncateLast(n), 'TypeError', 'n');
});

test('accumulateImp and accumulateImpHead name probs and kvHead', () => {
  const cache = populated();
  const n = cache.seqLen;
  refuses(cache, () => cache.accumulateImp(new Float32Array(n - 1)), 'RangeError', 'probs');
  refuses(cache, () => cache.accumulateImp(Array(n).fill(0)), 'TypeError', 'probs');
  const negative = new Float32Array(n);
  negative[n - 1] = -0.5;
  refuses(cache, () => cache.accumulateImp(negative), 'RangeError', 'probs');
  const nan = new Float32Array(n);
  nan[3] = NaN;
  refuses(cache, () => cache.accumulateImp(nan), 'RangeError', 'probs');
  refuses(cache, () => cache.accumulateImpHead(H, new Float32Array(1)), 'RangeError', 'kvHead');
  refuses(cache, () => cache.accumulateImpHead(1, new Float32Array(cache.headLen(1) + 1)), 'RangeError', 'probs');
  const negativeHead = new Float32Array(cache.headLen(1));
  negativeHead[0] = -1;
  refuses(cache, () => cache.accumulateImpHead(1, negativeHead), 'RangeError', 'probs');
});

test('head accessors name kvHead', () => {
  const cache = populated();
  for (const method of ['headLen', 'headKeys', 'headValues', 'headPositions']) {
    refuses(cache, () => cache[method](H), 'RangeError', 'kvHead');
    refuses(cache, () => cache[method](-1), 'RangeError', 'kvHead');
    refuses(cache, () => cache[method]('1'), 'TypeError', 'kvHead');
  }
});

test('attentionHead names q, keys, values, n and d', () => {
  const q = new Float32Array(4);
  const rows = new Float32Array(12);
  const bad = [
    [() => attentionHead(q, rows, rows, 3, 0), 'RangeError', 'd'],
    [() => attentionHead(q, rows, rows, 3, 2.5), 'TypeError', 'd'],
    [() => attentionHead(q, rows, rows, -1, 4), 'RangeError', 'n'],
    [() => attentionHead(q, rows, rows, '3', 4), 'TypeError', 'n'],
    [() => attentionHead(new Float32Array(3), rows, rows, 3, 4), 'RangeError', 'q'],
    [() => attentionHead(q, new Float32Array(8), rows, 3, 4), 'RangeError', 'keys'],
    [() => attentionHead(q, rows, [0], 3, 4), 'TypeError', 'values'],
    [() => attentionHead(Float32Array.of(0, NaN, 0, 0), rows, rows, 3, 4), 'RangeError', 'q'],
  ];
  for (const [call, name, param] of bad) {
    assert.throws(call, (error) => error.name === name && error.message.includes(param), `${call}`);
  }
});

test('every method and getter of a freed cache throws a TypeError saying so', () => {
  const cache = populated();
  cache.free();
  const calls = {
    append: () => cache.append(k(), k()),
    appendBatch: () => cache.appendBatch(k(), k()),
    attend: () => cache.attend(new Float32Array(d), 0),
    truncateLast: () => cache.truncateLast(1),
    clear: () => cache.clear(),
    accumulateImp: () => cache.accumulateImp(new Float32Array(0)),
    accumulateImpHead: () => cache.accumulateImpHead(0, new Float32Array(0)),
    headLen: () => cache.headLen(0),
    headKeys: () => cache.headKeys(0),
    headValues: () => cache.headValues(0),
    headPositions: () => cache.headPositions(0),
    clone: () => cache.clone(),
    seqLen: () => cache.seqLen,
    numKvHeads: () => cache.numKvHeads,
    headDim: () => cache.headDim,
    mode: () => cache.mode,
    memoryBytes: () => cache.memoryBytes,
    capacityBytes: () => cache.capacityBytes,
    fieldFrozen: () => cache.fieldFrozen,
    imp: () => cache.imp,
  };
  for (const [name, call] of Object.entries(calls)) {
    assert.throws(call, (error) => error.name === 'TypeError' && error.message.includes(name) && /freed/.test(error.message), name);
  }
});

test('every options object refuses a key it does not know, naming the nearest one it does', async (t) => {
  const { KvCache, PrefixCache } = await import('../../js/index.js');
  const { Llama, generate } = await import('../../js/llama.js');
  const unknown = (call, key, guess) => assert.throws(call, (error) => {
    assert.equal(error.name, 'TypeError', error.message);
    assert.ok(error.message.includes(`'${key}'`) && error.message.includes(`did you mean '${guess}'?`), error.message);
    return true;
  });
  unknown(() => new KvCache({ numLayers: 2, numKvHeads: 2, headDim: 4, mdoe: 'q8' }), 'mdoe', 'mode');
  unknown(() => new KvCache({ numLayers: 2, numKvHeads: 2, headdim: 4 }), 'headdim', 'headDim');
  unknown(() => new KvCache({ layers: [{ kind: 'full', numKvHeads: 2, headDim: 4, mdoe: 'q8' }] }), 'mdoe', 'mode');
  assert.throws(() => new KvCache({ layers: [{ kind: 'full', numKvHeads: 2, headDim: 4 }], numLayers: 1 }),
    { name: 'TypeError', message: /option 'numLayers' does nothing here/ });
  unknown(() => new PrefixCache({ budget: 1 << 20 }), 'budget', 'budgetBytes');
  const cache = populated();
  refuses(cache, () => cache.evict({ budget: 8, sink: 2 }), 'TypeError', "did you mean 'sinks'?");
  refuses(cache, () => cache.evictionPlan({ budget: 8, recnet: 2 }), 'TypeError', "did you mean 'recent'?");
  refuses(cache, () => cache.setMaxRows(8, { sinks: 2, recents: 2 }), 'TypeError', "did you mean 'recent'?");
  refuses(cache, () => cache.setMaxRows(0, { sinks: 2 }), 'TypeError', "option 'sinks' does nothing here");
  cache.free();
  if (MODEL_MISSING) return t.skip(MODEL_MISSING);
  const llama = Llama.fromGguf(readFileSync(MODEL_PATH));
  unknown(() => llama.session({ maxrows: 8 }), 'maxrows', 'maxRows');
  const session = llama.session();
  assert.throws(() => llama.session({ cache: session.cache, mode: 'q8' }), { name: 'TypeError', message: /option 'mode' does nothing here/ });
  unknown(() => generate(session, [1], { step: 3 }), 'step', 'steps');
  assert.throws(() => generate(session, [1], { steps: 3, minNgram: 3 }), { name: 'TypeError', message: /option 'minNgram' does nothing here/ });
  assert.equal(session.cache.seqLen, 0, 'nothing ran');
  session.free();
});

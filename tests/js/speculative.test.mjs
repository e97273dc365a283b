// The model cache and the speculative session: causal multi-query attend,
// KvCache, and the central property -- a speculative run leaves every layer
// bit-identical to a plain run that appended only the accepted positions.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { KvCache, KvCacheError, LayerKvCache, Q8_WINDOW } from '../../js/index.js';
import { MODES, bitsEqual, fingerprint, normals, outlierKeys, ready, rng } from './helpers.mjs';

before(ready);

for (const mode of MODES) {
  test(`attendCausal query i equals attend at length seqLen − m + i + 1, bit for bit (${mode})`, () => {
    const r = rng(1);
    const [H, d] = [3, 16];
    const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
    const n = 75; // the queries cross position 64
    cache.appendBatch(outlierKeys(r, n, 0, H, d), normals(r, n * H * d),
      Uint8Array.from({ length: n * H }, (_, i) => (i % 4 === 1 ? 0 : 1)));
    for (const m of [1, 2, 5, 13]) {
      const q = normals(r, m * d);
      for (let h = 0; h < H; h++) {
        const { out, probs } = cache.attendCausal(q, h);
        const rows = cache.headLen(h);
        assert.equal(probs.length, m * rows);
        for (let i = 0; i < m; i++) {
          const prefix = cache.clone();
          prefix.truncateLast(m - 1 - i);
          const single = prefix.attend(q.subarray(i * d, (i + 1) * d), h);
          assert.ok(bitsEqual(out.subarray(i * d, (i + 1) * d), single.out), `m=${m} h=${h} i=${i}`);
          const row = probs.subarray(i * rows, (i + 1) * rows);
          assert.ok(bitsEqual(row.subarray(0, single.probs.length), single.probs));
          assert.ok(row.subarray(single.probs.length).every((p) => Object.is(p, 0)), 'unseen rows are +0');
          prefix.free();
        }
      }
    }
  });
}

test('attendCausal names q when it holds no queries or more than seqLen', () => {
  const cache = new LayerKvCache({ numKvHeads: 1, headDim: 4 });
  cache.appendBatch(new Float32Array(8), new Float32Array(8));
  assert.throws(() => cache.attendCausal(new Float32Array(0), 0), { name: 'RangeError', message: /\bq\b/ });
  assert.throws(() => cache.attendCausal(new Float32Array(6), 0), { name: 'RangeError', message: /\bq\b/ });
  assert.throws(() => cache.attendCausal(new Float32Array(12), 0), { name: 'RangeError', message: /3 queries.*2 positions/ });
  assert.throws(() => cache.attendCausal(new Float32Array(4), 1), { name: 'RangeError', message: /kvHead/ });
});

const FULL = { numKvHeads: 2, headDim: 8 };
const LINEAR = { kind: 'linear', numHeads: 2, numFeatures: 4, valueDim: 3 };

function hybrid(mode) {
  return new KvCache({
    layers: [
      { kind: 'full', ...FULL, mode }, LINEAR, { kind: 'full', ...FULL, mode },
      { ...LINEAR, phaseMass: 0.5 }, { kind: 'full', ...FULL, mode },
    ],
  });
}

/** One position's inputs for every layer of `model`. */
function positionInputs(r, model, position) {
  return Array.from({ length: model.numLayers }, (_, i) => {
    const layer = model.layer(i);
    if (layer.kind === 'linear') {
      const [H, F, dv] = [layer.numHeads, layer.numFeatures, layer.valueDim];
      return {
        phase: i % 2 === 1 && F % 2 === 0 && layer.phaseMass > 0,
        keyIn: normals(r, H * F), queryIn: normals(r, H * F), v: normals(r, H * dv),
        decay: Float32Array.from({ length: H * F }, () => 0.6 + 0.4 * r.unit()),
      };
    }
    const [H, d] = [layer.numKvHeads, layer.headDim];
    return {
      k: outlierKeys(r, 1, position, H, d), v: normals(r, H * d),
      alive: Uint8Array.from({ length: H }, () => (r.unit() < 0.8 ? 1 : 0)),
      q: normals(r, H * d),
    };
  });
}

function stepLinear(layer, input) {
  const width = input.phase ? layer.numFeatures / 2 : layer.numFeatures;
  const keyIn = input.keyIn.subarray(0, layer.numHeads * width);
  const queryIn = input.queryIn.subarray(0, layer.numHeads * width);
  if (input.phase) layer.linearStepPhase(keyIn, queryIn, input.v, input.decay);
  else layer.linearStep(keyIn, queryIn, input.v, input.decay);
}

/** The plain run: append one position to every layer, attend with its query, add the probs to imp. */
function plainStep(model, inputs) {
  inputs.forEach((input, i) => {
    const layer = model.layer(i);
    if (layer.kind === 'linear') return stepLinear(layer, input);
    layer.append(input.k, input.v, input.alive);
    for (let h = 0; h < layer.numKvHeads; h++) {
      const { probs } = layer.attend(input.q.subarray(h * layer.headDim, (h + 1) * layer.headDim), h);
      layer.accumulateImpHead(h, probs);
    }
  });
}

/**
 * The speculative run: k drafts in one verify (causal attend for all of them
 * at once), accept j, then add the imp of the j kept queries.
 */
function speculativeRound(model, drafts, j) {
  model.beginVerify();
  const causal = [];
  for (let i = 0; i < model.numLayers; i++) {
    const layer = model.layer(i);
    if (layer.kind === 'linear') {
      for (const inputs of drafts) stepLinear(layer, inputs[i]);
      continue;
    }
    const [H, d] = [layer.numKvHeads, layer.headDim];
    const concat = (key) => {
      const all = new (key === 'alive' ? Uint8Array : Float32Array)(drafts.length * drafts[0][i][key].length);
      drafts.forEach((inputs, p) => all.set(inputs[i][key], p * inputs[i][key].length));
      return all;
    };
    layer.appendBatch(concat('k'), concat('v'), concat('alive'));
    causal[i] = Array.from({ length: H }, (_, h) => {
      const q = new Float32Array(drafts.length * d);
      drafts.forEach((inputs, p) => q.set(inputs[i].q.subarray(h * d, (h + 1) * d), p * d));
      return { probs: layer.attendCausal(q, h).probs, rows: layer.headLen(h) };
    });
  }
  model.accept(j);
  // imp takes the kept queries in the order the plain run adds them: position by position, head by head.
  causal.forEach((heads, i) => {
    if (!heads) return;
    const layer = model.layer(i);
    for (let p = 0; p < j; p++) {
      heads.forEach(({ probs, rows }, h) => layer.accumulateImpHead(h, probs.subarray(p * rows, p * rows + layer.headLen(h))));
    }
  });
}

function modelState(model) {
  return Array.from({ length: model.numLayers }, (_, i) => {
    const layer = model.layer(i);
    return layer.kind === 'linear'
      ? { steps: layer.steps, state: Array.from(layer.linearState), bytes: layer.memoryBytes }
      : fingerprint(layer);
  });
}

for (const mode of MODES) {
  test(`a speculative run equals a plain run of the accepted positions, bit for bit (${mode})`, () => {
    const r = rng(100 + MODES.indexOf(mode));
    const speculative = hybrid(mode);
    const plain = hybrid(mode);
    let froze = 0;
    let unfroze = 0;
    // Episodes that start just below the q8 window and open with 6 drafts,
    // so that verifies cross it both ways: kept above it, or rolled back below.
    for (let episode = 0; episode < 10; episode++) {
      speculative.clear();
      plain.clear();
      const prefill = 59 + r.int(5);
      for (let p = 0; p < prefill; p++) {
        const inputs = positionInputs(r, plain, p);
        plainStep(plain, inputs);
        plainStep(speculative, inputs);
      }
      for (let round = 0; round < 4; round++) {
        const base = plain.seqLen;
        const k = round === 0 ? 6 : 1 + r.int(6);
        const drafts = Array.from({ length: k }, (_, p) => positionInputs(r, plain, base + p));
        const j = r.int(k + 1);
        speculativeRound(speculative, drafts, j);
        for (const inputs of drafts.slice(0, j)) plainStep(plain, inputs);
        if (base <= Q8_WINDOW && base + k > Q8_WINDOW) {
          if (base + j > Q8_WINDOW) froze++;
          else unfroze++;
        }
        const where = `episode ${episode} round ${round}: base ${base} k ${k} j ${j}`;
        assert.deepEqual(modelState(speculative), modelState(plain), where);
        assert.equal(speculative.seqLen, base + j);
        assert.equal(speculative.memoryBytes, plain.memoryBytes);
        for (let i = 0; i < plain.numLayers; i += 2) {
          const q = normals(r, FULL.headDim);
          assert.ok(bitsEqual(speculative.attendLayer(i, q, 1).out, plain.attendLayer(i, q, 1).out), where);
        }
      }
    }
    assert.ok(froze > 0 && unfroze > 0, `verifies crossed the window both ways (kept ${froze}, rolled back ${unfroze})`);
  });
}

test('a uniform KvCache has numLayers full layers of one shape', () => {
  const model = new KvCache({ numLayers: 3, numKvHeads: 2, headDim: 4, mode: 'q8v' });
  assert.equal(model.numLayers, 3);
  for (let i = 0; i < 3; i++) assert.deepEqual([model.layer(i).kind, model.layer(i).mode, model.layer(i).headDim], ['full', 'q8v', 4]);
  model.appendLayer(1, new Float32Array(8).fill(1), new Float32Array(8).fill(2));
  assert.deepEqual([model.seqLen, model.layer(1).seqLen], [0, 1], 'seqLen counts what every layer holds');
  model.appendLayer(0, new Float32Array(8), new Float32Array(8));
  model.appendLayer(2, new Float32Array(8), new Float32Array(8));
  assert.equal(model.seqLen, 1);
  assert.deepEqual(Array.from(model.attendLayer(1, new Float32Array(4), 0).out), [2, 2, 2, 2]);
});

test('memoryBytes is the sum of the layers, given per layer too', () => {
  const model = hybrid('q8');
  const r = rng(7);
  for (let p = 0; p < 70; p++) plainStep(model, positionInputs(r, model, p));
  const byLayer = model.memoryBytesByLayer;
  assert.equal(byLayer.length, 5);
  assert.equal(byLayer.reduce((a, b) => a + b, 0), model.memoryBytes);
  assert.equal(byLayer[1], LINEAR.numHeads * LINEAR.numFeatures * LINEAR.valueDim * 8);
  assert.ok(model.capacityBytes >= model.memoryBytes);
});

test('truncateLast reaches every layer, and a model with linear layers refuses it', () => {
  const full = new KvCache({ numLayers: 2, numKvHeads: 1, headDim: 4 });
  full.appendLayerBatch(0, new Float32Array(12), new Float32Array(12));
  full.appendLayerBatch(1, new Float32Array(12), new Float32Array(12));
  full.truncateLast(2);
  assert.deepEqual([full.layer(0).seqLen, full.layer(1).seqLen], [1, 1]);
  const model = hybrid('f32');
  const before = modelState(model);
  assert.throws(() => model.truncateLast(1), (e) => e instanceof KvCacheError && e.code === 'KVC_E_KIND' && /layer 1 is linear/.test(e.message));
  assert.deepEqual(modelState(model), before);
});

test('verify misuse on a model is a clear error that changes nothing', () => {
  const r = rng(8);
  const model = hybrid('q8k');
  for (let p = 0; p < 3; p++) plainStep(model, positionInputs(r, model, p));
  const expectError = (call, code, message) => {
    const before = modelState(model);
    assert.throws(call, (e) => (code ? e.code === code : e instanceof RangeError) && message.test(e.message));
    assert.deepEqual(modelState(model), before);
  };
  expectError(() => model.accept(0), 'KVC_E_NOT_VERIFYING', /beginVerify/);
  model.beginVerify();
  expectError(() => model.beginVerify(), 'KVC_E_VERIFYING', /verify/);
  const inputs = positionInputs(r, model, 3);
  model.appendLayer(0, inputs[0].k, inputs[0].v);
  expectError(() => model.accept(1), 'KVC_E_ACCEPT', /layer 0 has 1, layer 1 has 0/);
  inputs.forEach((input, i) => {
    const layer = model.layer(i);
    if (i === 0) return;
    if (layer.kind === 'linear') stepLinear(layer, input);
    else layer.append(input.k, input.v);
  });
  expectError(() => model.accept(2), null, /\bj\b.*1 draft/);
  expectError(() => model.clone(), 'KVC_E_VERIFYING', /accept\(\) or reject\(\)/);
  expectError(() => model.layer(0).truncateLast(1), 'KVC_E_VERIFYING', /verify/);
  model.accept(1);
  assert.deepEqual([model.verifying, model.seqLen], [false, 4]);
});

test('layers of a KvCache belong to it: free() on them throws, and they die with it', () => {
  const model = new KvCache({ numLayers: 2, numKvHeads: 1, headDim: 4 });
  const layer = model.layer(1);
  assert.throws(() => layer.free(), { name: 'TypeError', message: /belongs to a KvCache/ });
  assert.equal(model.layer(1), layer);
  model.free();
  model.free();
  assert.throws(() => layer.seqLen, { name: 'TypeError', message: /freed/ });
  assert.throws(() => model.layer(0), { name: 'TypeError', message: /freed/ });
  assert.equal(String(layer), 'LayerKvCache{freed}');
});

test('a KvCache clone is deep and independent', () => {
  const r = rng(9);
  const model = hybrid('q8');
  for (let p = 0; p < 66; p++) plainStep(model, positionInputs(r, model, p));
  const before = modelState(model);
  const copy = model.clone();
  assert.deepEqual(modelState(copy), before);
  plainStep(copy, positionInputs(r, copy, 66));
  assert.deepEqual(modelState(model), before);
  model.clear();
  assert.equal(copy.seqLen, 67);
  assert.deepEqual([model.seqLen, model.memoryBytes], [0, 2 * LINEAR.numHeads * LINEAR.numFeatures * LINEAR.valueDim * 8]);
});

test('KvCache names each bad config entry', () => {
  const bad = [
    [undefined, TypeError, /config/],
    [{ numLayers: 0, numKvHeads: 1, headDim: 4 }, RangeError, /numLayers/],
    [{ numLayers: 2, numKvHeads: 1 }, TypeError, /layers\[0\].*headDim/],
    [{ layers: [] }, TypeError, /config\.layers/],
    [{ layers: [FULL, { kind: 'linear', numHeads: 1, numFeatures: 2 }] }, TypeError, /layers\[1\].*valueDim/],
    [{ layers: [FULL, { ...FULL, mode: 'q5' }] }, RangeError, /layers\[1\].*mode/],
    [{ layers: [FULL, { ...FULL, mode: { keys: 'q4', value: 'q4' } }] }, TypeError, /layers\[1\].*mode has no option 'value' \(did you mean 'values'\?\)/],
  ];
  for (const [config, type, message] of bad) {
    assert.throws(() => new KvCache(config), (e) => e instanceof type && message.test(e.message), JSON.stringify(config));
  }
});

// Linear-attention layers through the binding: the recurrence, the vmf_phase
// feature map, tentative steps and accept/reject.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { KvCacheError, LayerKvCache } from '../../js/index.js';
import { normals, ready, rng } from './helpers.mjs';

before(ready);

/** The recurrence in plain f64, in the documented order. */
class ReferenceState {
  constructor(H, F, dv) {
    Object.assign(this, { H, F, dv, S: new Float64Array(H * F * dv) });
  }

  step(phiK, phiQ, v, decay) {
    const { H, F, dv, S } = this;
    const out = new Float32Array(H * dv);
    for (let h = 0; h < H; h++) {
      for (let f = 0; f < F; f++) {
        const lambda = decay ? decay[h * F + f] : 1;
        for (let j = 0; j < dv; j++) {
          const at = (h * F + f) * dv + j;
          S[at] = lambda * S[at] + phiK[h * F + f] * v[h * dv + j];
        }
      }
      for (let j = 0; j < dv; j++) {
        let sum = 0;
        for (let f = 0; f < F; f++) sum += phiQ[h * F + f] * S[(h * F + f) * dv + j];
        out[h * dv + j] = sum;
      }
    }
    return out;
  }
}

function stepInputs(r, H, F, dv) {
  return {
    phiK: normals(r, H * F),
    phiQ: normals(r, H * F),
    v: normals(r, H * dv),
    decay: Float32Array.from({ length: H * F }, () => 0.5 + 0.5 * r.unit()),
  };
}

test('a linear layer stores a zero f64 state and no rows', () => {
  const layer = new LayerKvCache({ kind: 'linear', numHeads: 2, numFeatures: 6, valueDim: 5 });
  assert.equal(layer.kind, 'linear');
  assert.deepEqual([layer.numHeads, layer.numFeatures, layer.valueDim, layer.phaseMass], [2, 6, 5, 0]);
  assert.deepEqual([layer.seqLen, layer.steps, layer.numKvHeads, layer.mode], [0, 0, 0, null]);
  assert.equal(layer.linearState.length, 2 * 6 * 5);
  assert.ok(layer.linearState.every((x) => x === 0));
  assert.equal(layer.memoryBytes, 2 * 6 * 5 * 8);
  assert.equal(layer.imp.length, 0);
});

test('linearStep follows the f64 recurrence bit for bit, with and without decay', () => {
  const r = rng(1);
  for (const [H, F, dv] of [[1, 1, 1], [2, 6, 5], [3, 17, 9], [4, 32, 64]]) {
    const layer = new LayerKvCache({ kind: 'linear', numHeads: H, numFeatures: F, valueDim: dv });
    const reference = new ReferenceState(H, F, dv);
    for (let step = 0; step < 12; step++) {
      const { phiK, phiQ, v, decay } = stepInputs(r, H, F, dv);
      const useDecay = step % 3 !== 0 ? decay : undefined;
      const out = layer.linearStep(phiK, phiQ, v, useDecay);
      assert.deepEqual(out, reference.step(phiK, phiQ, v, useDecay), `H=${H} F=${F} dv=${dv} step ${step}`);
      assert.deepEqual(layer.linearState, reference.S);
    }
    assert.equal(layer.steps, 12);
    layer.free();
  }
});

test('linearStepPhase uses [cos(mθ), sin(mθ)] with m = 1 / (1 + phaseMass)', () => {
  const r = rng(2);
  const [H, P, dv] = [2, 4, 3];
  for (const phaseMass of [0, 0.5, 3]) {
    const layer = new LayerKvCache({ kind: 'linear', numHeads: H, numFeatures: 2 * P, valueDim: dv, phaseMass });
    const reference = new ReferenceState(H, 2 * P, dv);
    const m = 1 / (1 + phaseMass);
    const features = (theta) => Float64Array.from({ length: H * 2 * P }, (_, i) => {
      const h = Math.floor(i / (2 * P));
      const f = i % (2 * P);
      const angle = m * theta[h * P + (f % P)];
      return f < P ? Math.cos(angle) : Math.sin(angle);
    });
    for (let step = 0; step < 5; step++) {
      const thetaK = normals(r, H * P).map((x) => 3 * x);
      const thetaQ = normals(r, H * P).map((x) => 3 * x);
      const v = normals(r, H * dv);
      const out = layer.linearStepPhase(thetaK, thetaQ, v);
      const want = reference.step(features(thetaK), features(thetaQ), v);
      // cos/sin of the C library and of JavaScript may differ in the last bit.
      out.forEach((x, i) => assert.ok(Math.abs(x - want[i]) <= 1e-6 * (1 + Math.abs(want[i])), `phaseMass ${phaseMass}`));
    }
  }
});

test('tentative steps leave the state untouched and keep one snapshot per step', () => {
  const r = rng(3);
  const [H, F, dv] = [2, 4, 3];
  const layer = new LayerKvCache({ kind: 'linear', numHeads: H, numFeatures: F, valueDim: dv });
  layer.linearStep(normals(r, H * F), normals(r, H * F), normals(r, H * dv));
  const committed = layer.linearState;
  const reference = new ReferenceState(H, F, dv);
  reference.S.set(committed);
  layer.beginVerify();
  const snapshots = [];
  for (let i = 0; i < 3; i++) {
    const { phiK, phiQ, v, decay } = stepInputs(r, H, F, dv);
    assert.deepEqual(layer.linearStep(phiK, phiQ, v, decay), reference.step(phiK, phiQ, v, decay));
    snapshots.push(Float64Array.from(reference.S));
  }
  assert.deepEqual(layer.linearState, committed);
  assert.equal(layer.draftLen, 3);
  assert.equal(layer.steps, 4);
  const scratch = layer.linearScratch;
  assert.equal(scratch.length, 3 * H * F * dv);
  snapshots.forEach((s, i) => assert.deepEqual(scratch.subarray(i * s.length, (i + 1) * s.length), s));
  assert.equal(layer.memoryBytes, 4 * H * F * dv * 8);
});

test('accept(j) commits the state after tentative step j, for every j; reject keeps it', () => {
  const r = rng(4);
  const [H, F, dv] = [2, 3, 4];
  const k = 4;
  const inputs = Array.from({ length: k }, () => stepInputs(r, H, F, dv));
  for (let j = 0; j <= k; j++) {
    const speculative = new LayerKvCache({ kind: 'linear', numHeads: H, numFeatures: F, valueDim: dv });
    const plain = new LayerKvCache({ kind: 'linear', numHeads: H, numFeatures: F, valueDim: dv });
    speculative.beginVerify();
    for (const s of inputs) speculative.linearStep(s.phiK, s.phiQ, s.v, s.decay);
    if (j === 0) speculative.reject();
    else speculative.accept(j);
    for (const s of inputs.slice(0, j)) plain.linearStep(s.phiK, s.phiQ, s.v, s.decay);
    assert.deepEqual(speculative.linearState, plain.linearState, `j=${j}`);
    assert.deepEqual([speculative.steps, speculative.verifying, speculative.memoryBytes], [j, false, plain.memoryBytes]);
    assert.equal(speculative.linearScratch.length, 0);
  }
});

test('a linear layer refuses row calls and truncation, and a full layer refuses steps', () => {
  const linear = new LayerKvCache({ kind: 'linear', numHeads: 1, numFeatures: 2, valueDim: 2 });
  assert.throws(() => linear.append(new Float32Array(2), new Float32Array(2)), { name: 'TypeError', message: /linear layer/ });
  assert.throws(() => linear.truncateLast(1), { name: 'TypeError', message: /linear layer/ });
  assert.throws(() => linear.attend(new Float32Array(2), 0), { name: 'TypeError', message: /linear layer/ });
  const full = new LayerKvCache({ numKvHeads: 1, headDim: 2 });
  assert.throws(() => full.linearStep(new Float32Array(2), new Float32Array(2), new Float32Array(2)), { name: 'TypeError', message: /full-attention layer/ });
  assert.equal(full.linearState.length, 0);
});

test('linearStep names each bad input and changes nothing', () => {
  const [H, F, dv] = [2, 3, 2];
  const layer = new LayerKvCache({ kind: 'linear', numHeads: H, numFeatures: F, valueDim: dv });
  const good = stepInputs(rng(5), H, F, dv);
  layer.linearStep(good.phiK, good.phiQ, good.v, good.decay);
  const before = layer.linearState;
  const withNaN = (x) => { const y = Float32Array.from(x); y[1] = NaN; return y; };
  const bad = [
    [() => layer.linearStep(new Float32Array(H * F - 1), good.phiQ, good.v), RangeError, /phiK/],
    [() => layer.linearStep(good.phiK, [0], good.v), TypeError, /phiQ/],
    [() => layer.linearStep(good.phiK, good.phiQ, new Float32Array(1)), RangeError, /\bv\b/],
    [() => layer.linearStep(good.phiK, good.phiQ, good.v, new Float32Array(1)), RangeError, /decay/],
    [() => layer.linearStep(withNaN(good.phiK), good.phiQ, good.v), RangeError, /phiK/],
    [() => layer.linearStep(good.phiK, withNaN(good.phiQ), good.v), RangeError, /phiQ/],
    [() => layer.linearStep(good.phiK, good.phiQ, withNaN(good.v)), RangeError, /\bv\b/],
    [() => layer.linearStep(good.phiK, good.phiQ, good.v, withNaN(good.decay)), RangeError, /decay/],
    [() => layer.linearStepPhase(new Float32Array(H), new Float32Array(H), good.v), RangeError, /even numFeatures/],
  ];
  for (const [call, type, message] of bad) {
    assert.throws(call, (e) => e instanceof type && message.test(e.message), String(call));
    assert.deepEqual(layer.linearState, before);
    assert.equal(layer.steps, 1);
  }
  assert.throws(() => new LayerKvCache({ kind: 'linear', numHeads: 1, numFeatures: 2, valueDim: 2, phaseMass: -1 }), { name: 'RangeError', message: /phaseMass/ });
  assert.throws(() => new LayerKvCache({ kind: 'linear', numHeads: 0, numFeatures: 2, valueDim: 2 }), { name: 'RangeError', message: /numHeads/ });
  assert.throws(() => new LayerKvCache({ kind: 'linear', numHeads: 1, numFeatures: 2 }), { name: 'TypeError', message: /valueDim/ });
  assert.throws(() => new LayerKvCache({ kind: 'mamba', numHeads: 1 }), { name: 'RangeError', message: /kind/ });
});

test('verify misuse on a layer is a clear error that changes nothing', () => {
  const r = rng(6);
  const layer = new LayerKvCache({ kind: 'linear', numHeads: 1, numFeatures: 2, valueDim: 2 });
  assert.throws(() => layer.accept(0), (e) => e instanceof KvCacheError && e.code === 'KVC_E_NOT_VERIFYING');
  layer.beginVerify();
  assert.throws(() => layer.beginVerify(), (e) => e instanceof KvCacheError && e.code === 'KVC_E_VERIFYING');
  layer.linearStep(normals(r, 2), normals(r, 2), normals(r, 2));
  assert.throws(() => layer.accept(2), { name: 'RangeError', message: /\bj\b.*1 draft/ });
  assert.throws(() => layer.clone(), (e) => e.code === 'KVC_E_VERIFYING');
  assert.equal(layer.draftLen, 1);
  layer.clear();
  assert.deepEqual([layer.verifying, layer.steps], [false, 0]);
});

test('a clone of a linear layer is independent', () => {
  const r = rng(7);
  const layer = new LayerKvCache({ kind: 'linear', numHeads: 2, numFeatures: 2, valueDim: 2, phaseMass: 0.25 });
  layer.linearStep(normals(r, 4), normals(r, 4), normals(r, 4));
  const copy = layer.clone();
  assert.deepEqual([copy.linearState, copy.steps, copy.phaseMass], [layer.linearState, 1, 0.25]);
  copy.linearStep(normals(r, 4), normals(r, 4), normals(r, 4));
  assert.equal(layer.steps, 1);
  assert.notDeepEqual(copy.linearState, layer.linearState);
});

// The wasm module (SIMD128 kernels) against the native build (scalar
// kernels) on the same operations -- appends, truncations, importance,
// evictions: the quantizer gives the same bytes, so every stored row,
// memoryBytes, the frozen state and every snapshot are identical; attention
// agrees to f32 rounding (the SIMD dot products sum in another order).
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { LayerKvCache } from '../../js/index.js';
import { MODES, bitsEqual, normals, outlierKeys, ready, relError, rng } from './helpers.mjs';

before(ready);

const oracle = fileURLToPath(new URL('../../build/tests/c/kvc_oracle', import.meta.url));

/** A script of operations, run on the native oracle and on a wasm cache alike. */
function script(seed, H, d) {
  const r = rng(seed);
  const ops = [];
  // After an eviction, truncation rewinds positions, not rows: the script
  // knows the next position and an upper bound of the rows held, and an 'I'
  // gives that many probabilities, of which the cache takes seqLen.
  let next = 0;
  let rowsAtMost = 0;
  for (let step = 0; step < 260; step++) {
    const roll = r.unit();
    if (roll < 0.8) {
      ops.push({ op: 'A', alive: Uint8Array.from({ length: H }, () => (r.unit() < 0.85 ? 1 : 0)),
        k: outlierKeys(r, 1, next, H, d), v: normals(r, H * d) });
      next++;
      rowsAtMost++;
    } else if (roll < 0.86) {
      const n = r.int(40);
      ops.push({ op: 'T', n });
      next = Math.max(0, next - n);
      rowsAtMost = Math.min(rowsAtMost, next);
    } else if (roll < 0.89 && rowsAtMost > 0) {
      ops.push({ op: 'I', probs: Float32Array.from({ length: rowsAtMost }, () => r.unit()) });
    } else if (roll < 0.91 && rowsAtMost > 40) {
      const budget = 20 + r.int(rowsAtMost - 20);
      ops.push({ op: 'E', budget, sinks: r.int(5), recent: r.int(10) });
      rowsAtMost = Math.min(rowsAtMost, budget);
    } else if (roll < 0.93) {
      ops.push({ op: 'S' });
    } else {
      ops.push({ op: 'Q', head: r.int(H), q: normals(r, d) });
    }
  }
  ops.push({ op: 'D' });
  return ops;
}

function encode(H, d, mode, ops) {
  const chunks = [new Uint8Array(new Uint32Array([H, d, MODES.indexOf(mode)]).buffer)];
  const u32 = (x) => new Uint8Array(new Uint32Array([x]).buffer);
  const bytes = (f32) => new Uint8Array(f32.buffer, f32.byteOffset, f32.byteLength);
  for (const o of ops) {
    chunks.push(Uint8Array.of(o.op.charCodeAt(0)));
    if (o.op === 'A') chunks.push(o.alive, bytes(o.k), bytes(o.v));
    if (o.op === 'T') chunks.push(u32(o.n));
    if (o.op === 'Q') chunks.push(u32(o.head), bytes(o.q));
    if (o.op === 'I') chunks.push(u32(o.probs.length), bytes(o.probs));
    if (o.op === 'E') chunks.push(u32(o.budget), u32(o.sinks), u32(o.recent));
  }
  return Buffer.concat(chunks);
}

/** Reads the oracle's output back as a list of results, one per Q and D. */
function decode(H, d, ops, output) {
  const view = new DataView(output.buffer, output.byteOffset, output.byteLength);
  let at = 0;
  const u32 = () => { const x = view.getUint32(at, true); at += 4; return x; };
  const f32s = (n) => { const x = new Float32Array(output.buffer.slice(output.byteOffset + at, output.byteOffset + at + 4 * n)); at += 4 * n; return x; };
  const results = [];
  for (const o of ops) {
    if (o.op === 'Q') {
      const out = f32s(d);
      results.push({ out, probs: f32s(u32()) });
    } else if (o.op === 'S') {
      const size = Number(view.getBigUint64(at, true));
      at += 8;
      results.push({ snapshot: output.subarray(at, at + size) });
      at += size;
    } else if (o.op === 'D') {
      const memoryBytes = Number(view.getBigUint64(at, true));
      at += 8;
      const state = { memoryBytes, seqLen: u32(), frozen: u32() === 1, heads: [] };
      for (let h = 0; h < H; h++) {
        const rows = u32();
        state.heads.push({ keys: f32s(rows * d), values: f32s(rows * d) });
      }
      results.push(state);
    }
  }
  assert.equal(at, output.length, 'the whole output was read');
  return results;
}

function runWasm(H, d, mode, ops) {
  const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode });
  const results = [];
  for (const o of ops) {
    if (o.op === 'A') cache.append(o.k, o.v, o.alive);
    if (o.op === 'T') cache.truncateLast(o.n);
    if (o.op === 'Q') results.push(cache.attend(o.q, o.head));
    if (o.op === 'I') cache.accumulateImp(o.probs.subarray(0, cache.seqLen));
    if (o.op === 'E') cache.evict({ budget: o.budget, sinks: o.sinks, recent: o.recent });
    if (o.op === 'S') results.push({ snapshot: cache.serialize() });
    if (o.op === 'D') {
      results.push({
        memoryBytes: cache.memoryBytes,
        seqLen: cache.seqLen,
        frozen: cache.fieldFrozen,
        heads: Array.from({ length: H }, (_, h) => ({ keys: cache.headKeys(h), values: cache.headValues(h) })),
      });
    }
  }
  cache.free();
  return results;
}

for (const mode of MODES) {
  test(`wasm and native agree on the same operations (${mode})`, (t) => {
    if (!existsSync(oracle)) {
      t.skip('the native oracle is not built (npm test builds it; or run npm run build)');
      return;
    }
    let seed = 100;
    let frozenStates = 0;
    let snapshots = 0;
    for (const [H, d] of [[1, 8], [3, 17], [8, 64], [2, 128]]) {
      const ops = script(seed++, H, d);
      const run = spawnSync(oracle, { input: encode(H, d, mode, ops), maxBuffer: 1 << 28 });
      assert.equal(run.status, 0, `oracle exit status (${run.stderr})`);
      const native = decode(H, d, ops, run.stdout);
      const wasm = runWasm(H, d, mode, ops);
      assert.equal(wasm.length, native.length);
      wasm.forEach((got, i) => {
        const want = native[i];
        if ('snapshot' in want) {
          snapshots++;
          assert.ok(Buffer.from(got.snapshot).equals(Buffer.from(want.snapshot)), `snapshot ${i}: the same bytes natively and in wasm, H=${H} d=${d}`);
        } else if ('out' in want) {
          assert.ok(relError(got.out, want.out) < 1e-5, `attend out, H=${H} d=${d}: ${relError(got.out, want.out)}`);
          assert.equal(got.probs.length, want.probs.length);
          assert.ok(relError(got.probs, want.probs) < 1e-5, 'attend probs');
        } else {
          frozenStates += Number(want.frozen);
          assert.deepEqual([got.memoryBytes, got.seqLen, got.frozen], [want.memoryBytes, want.seqLen, want.frozen]);
          got.heads.forEach((head, h) => {
            assert.ok(bitsEqual(head.keys, want.heads[h].keys), `keys of head ${h}, H=${H} d=${d}`);
            assert.ok(bitsEqual(head.values, want.heads[h].values), `values of head ${h}`);
          });
        }
      });
    }
    assert.equal(frozenStates > 0, mode !== 'f32', 'the scripts reach past the q8 window');
    assert.ok(snapshots > 0, 'snapshots were compared');
  });
}

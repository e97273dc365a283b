// Differential soak (issue #8): the wasm cache and the plain-JS reference of
// tests/js/reference/ run the same random operation sequence, in every mode,
// and every output is compared: after each operation what it returns and the
// cache's lengths, positions, memoryBytes and field state; every few
// operations, and whenever a call was refused, the whole state (rows bit for
// bit, positions, imp). Attention is held to the f32 rounding bound of
// reference/attention.mjs, and in f32 mode also bit for bit to attentionHead
// over the head's rows. It runs on the module's default threads with every
// job of two tasks or more sent to the pool however small, so that the
// workers take part in every call that can split.
//
// KVC_SOAK_OPS   operations in all, split evenly over the nine modes (default 100000)
// KVC_SOAK_SEED  the seed (default 1). A failure names the seed, the mode and
//                the operation index, and how to run just that far again.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { LayerKvCache, attentionHead, threadCount } from '../../js/index.js';
import { setPoolMinWork } from '../../js/runtime/threads.js';
import { MODES, normals, outlierKeys, ready, rng } from './helpers.mjs';
import { ReferenceLayer, Refusal, withDefaults } from './reference/layer.mjs';
import { referenceAttention } from './reference/attention.mjs';
import { Q8_WINDOW } from './reference/q8.mjs';

before(async () => {
  await ready();
  setPoolMinWork(0);
});

const TOTAL_OPS = Number(process.env.KVC_SOAK_OPS ?? 100_000);
const SEED = Number(process.env.KVC_SOAK_SEED ?? 1);
const OPS_PER_MODE = Math.ceil(TOTAL_OPS / MODES.length);
// The whole state is compared every this many operations (and at the end).
const FULL_CHECK_EVERY = 16;
const HEAD_DIMS = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 63, 64];

// The error the binding throws for a status the reference refuses with:
// argument checks in JS and non-finite input are RangeErrors, the rest
// KvCacheErrors carrying the status name.
const RANGE_ERRORS = new Set(['KVC_E_NONFINITE_KEY', 'KVC_E_NONFINITE_VALUE', 'KVC_E_PROBS', 'KVC_E_ACCEPT',
  'KVC_E_BUDGET']);
const bindingError = (code) => (RANGE_ERRORS.has(code) ? 'RangeError' : code);
const errorName = (error) => error.code ?? error.name;

class Mismatch extends Error {}

const asBits = (a) => (a instanceof Float32Array ? new Uint32Array(a.buffer, a.byteOffset, a.length) : a);
const shownValue = (a, i) => (a instanceof Float32Array ? `${a[i]} (0x${asBits(a)[i].toString(16)})` : `${a[i]}`);

/** One mode's soak: a cache and its reference, driven through sessions of random operations. */
class Soak {
  constructor(mode, seed) {
    this.mode = mode;
    this.r = rng(seed);
    this.ops = 0;
    this.counts = new Map();
    this.checks = 0;
    this.values = 0;
    this.refused = 0;
    this.sessions = 0;
    this.worstOfBound = 0; // largest attention error / its bound
    this.outErrors = []; // per query: max |out error| / max |out|
    this.illConditioned = 0; // queries whose scores f32 cannot rank as f64 does
    this.recent = [];
    this.cache = null;
    this.kept = null; // a fork kept beside the cache: { cache, ref }
  }

  run(totalOps) {
    while (this.ops < totalOps) {
      this.newSession();
      const end = Math.min(totalOps, this.ops + 200 + this.r.int(1800));
      while (this.ops < end) {
        const before = this.ops;
        this.pick()();
        if (Math.floor(this.ops / FULL_CHECK_EVERY) !== Math.floor(before / FULL_CHECK_EVERY)) this.checkState();
      }
      this.checkState();
      this.releaseFork();
      this.cache.free();
    }
  }

  // --- sessions and data --------------------------------------------------

  newSession() {
    const r = this.r;
    const H = 1 + r.int(8);
    const d = r.int(2) ? HEAD_DIMS[r.int(HEAD_DIMS.length)] : 1 + r.int(64);
    this.H = H;
    this.d = d;
    this.cap = 20 + r.int(380); // past this length, the session shrinks the cache
    this.deadHead = r.int(5) === 0 ? r.int(H) : -1; // a head that is never alive
    // Rows that are zero below the window: a head whose keys and values are
    // all zero there, and channels zero there in every head, keys and values.
    // Their field sits at a floor (1e-30, or 2^-12 of the head's largest
    // channel), and what comes after them can be huge: x / c past 2^127
    // saturates.
    this.zeroHead = r.int(5) === 0 ? r.int(H) : -1;
    // Rows of ±1 below the window make every field exactly 1; rows of
    // half-integers times a power of two after it then quantize at ties.
    this.ties = r.int(6) === 0;
    this.zeroChannels = r.int(5) === 0 ? [r.int(d), r.int(d)] : [];
    this.hugeAfterWindow = r.int(3) === 0;
    const options = { numKvHeads: H, headDim: d, mode: this.mode };
    this.ref = new ReferenceLayer(options);
    if (r.int(6) === 0) {
      const policy = this.randomPolicy(1 + r.int(this.cap));
      Object.assign(options, { maxRows: policy.budget, sinks: policy.sinks, recent: policy.recent });
      const p = withDefaults(policy.budget, policy.sinks, policy.recent);
      this.ref.setMaxRows(p.budget, p.sinks, p.recent);
    }
    this.describe(`new LayerKvCache(${JSON.stringify(options)})`);
    this.cache = new LayerKvCache(options);
    this.sessions++;
  }

  /** { budget, sinks?, recent? }: a valid policy, sinks and recent sometimes left to their defaults. */
  randomPolicy(budget) {
    const r = this.r;
    const policy = { budget };
    if (r.int(4)) policy.sinks = r.int(Math.min(budget, 8) + 1);
    if (r.int(4)) policy.recent = r.int(budget - (policy.sinks ?? Math.min(4, budget)) + 1);
    return policy;
  }

  /** Keys and values for n positions from the next one: outlier keys most of
   * the time, sometimes zeros, subnormals or large values. */
  rows(n) {
    const { r, H, d } = this;
    const first = this.ref.nextPosition;
    const size = n * H * d;
    let k;
    let v;
    const flavour = r.int(20);
    if (this.ties) {
      const power = 2 ** (r.int(9) - 4);
      const tie = (i) => (first + i < Q8_WINDOW ? (r.int(2) ? 1 : -1) : power * (r.int(41) - 20.5));
      k = new Float32Array(size).map((_, at) => tie(Math.floor(at / (H * d))));
      v = new Float32Array(size).map((_, at) => tie(Math.floor(at / (H * d))));
      for (let at = 0; at < size; at += d) {
        if (first + Math.floor(at / (H * d)) >= Q8_WINDOW) k[at] = v[at] = power * 127;
      }
    } else if (flavour < 13) {
      k = outlierKeys(r, n, first, H, d);
      v = normals(r, size);
    } else if (flavour < 16) {
      const scale = 10 ** (4 * r.unit() - 2);
      k = normals(r, size).map((x) => x * scale);
      v = normals(r, size).map((x) => x * scale);
    } else if (flavour === 16) {
      k = normals(r, size).map((x) => x * 1e-39); // subnormal
      v = normals(r, size).map((x) => x * 1e-39);
    } else if (flavour === 17) {
      k = new Float32Array(size).map(() => (r.int(2) ? -0 : 0));
      v = new Float32Array(size).map(() => (r.int(2) ? -0 : 0));
    } else {
      // Keys much larger than this give scores whose f32 rounding alone can
      // reorder rows: the bound then allows about anything.
      k = outlierKeys(r, n, first, H, d).map((x) => x * 1e2);
      v = normals(r, size).map((x) => x * 1e5);
    }
    const big = () => (this.hugeAfterWindow ? 1e10 : 1) * r.normal(); // 1e40 over a 1e-30 field
    for (let i = 0; i < n; i++) {
      const below = first + i < Q8_WINDOW;
      for (let h = 0; h < H; h++) {
        const row = (i * H + h) * d;
        if (h === this.zeroHead && below) {
          k.fill(0, row, row + d);
          v.fill(0, row, row + d);
        }
        if (h === this.zeroHead && !below && this.hugeAfterWindow) v[row] = big();
        for (const j of this.zeroChannels) {
          k[row + j] = below ? 0 : r.normal();
          v[row + j] = below ? 0 : big();
        }
      }
    }
    return { k, v };
  }

  /** An alive mask for n positions, as the binding takes it (null, bytes or
   * booleans), and as bytes for the reference; dead slices sometimes hold NaN. */
  mask(n, k, v) {
    const { r, H, d } = this;
    if (this.deadHead < 0 && r.int(5) < 3) return { mask: null, bytes: null };
    const bytes = new Uint8Array(n * H);
    for (let i = 0; i < n * H; i++) bytes[i] = r.int(10) < 7 ? 1 + r.int(255) : 0;
    if (this.deadHead >= 0) for (let i = 0; i < n; i++) bytes[i * H + this.deadHead] = 0;
    for (let i = 0; i < n * H; i++) {
      if (bytes[i] === 0 && r.int(4) === 0) (r.int(2) ? k : v).fill(r.int(2) ? NaN : -Infinity, i * d, (i + 1) * d);
    }
    const mask = r.int(2) ? bytes : Array.from(bytes, (b) => b !== 0);
    return { mask, bytes };
  }

  query(count) {
    const { r, d } = this;
    const kind = r.int(20);
    if (kind === 0) return new Float32Array(count * d);
    const scale = kind === 1 ? 1e-39 : 0.1 + 3 * r.unit();
    return normals(r, count * d).map((x) => x * scale);
  }

  // --- operations ---------------------------------------------------------

  pick() {
    const full = this.ref.seqLen >= this.cap;
    const verifying = this.ref.verifying;
    const table = [
      [full ? 2 : 22, this.append], [full ? 0.5 : 7, this.appendBatch],
      [14, this.attend], [3, this.attendGroup], [4, this.attendHeads], [4, this.attendCausal],
      [4, this.accumulateImp], [3, this.accumulateImpHead],
      [full ? 12 : 4, this.truncateLast], [full ? 4 : 2, this.evict], [full ? 3 : 1.5, this.slideWindow],
      [2, this.evictionPlan], [1.5, this.setMaxRows],
      [verifying ? 0.5 : 3, this.beginVerify], [verifying ? 8 : 0.3, this.accept],
      [1, this.clone], [1.5, this.keepFork], [1, this.snapshot], [full ? 1 : 0.3, this.clear], [4, this.badInput],
    ];
    let x = this.r.unit() * table.reduce((sum, [w]) => sum + w, 0);
    for (const [w, op] of table) {
      if ((x -= w) < 0) return op.bind(this);
    }
    return this.append.bind(this);
  }

  /** Remembers what the cache is being asked, for a failure report. */
  describe(text) {
    this.current = `#${this.ops} ${text}`;
    this.recent.push(this.current);
    if (this.recent.length > 8) this.recent.shift();
  }

  /** Counts one operation of the cache, and describes it. */
  count(kind, text) {
    this.describe(`${kind}${text ? ` ${text}` : ''}`);
    this.ops++;
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
  }

  append() {
    const { k, v } = this.rows(1);
    const { mask, bytes } = this.mask(1, k, v);
    this.count('append', `at ${this.ref.nextPosition} alive=${bytes ? Array.from(bytes, (b) => +(b !== 0)).join('') : 'all'}`);
    this.both(() => this.ref.appendN(1, k, v, bytes), () => this.cache.append(k, v, mask));
    this.checkScalars();
  }

  appendBatch() {
    const r = this.r;
    const n = r.int(30) === 0 ? 0 : r.int(10) === 0 ? 1 + r.int(32) : 2 + r.int(4);
    const { k, v } = this.rows(n);
    const { mask, bytes } = this.mask(n, k, v);
    this.count('appendBatch', `n=${n} at ${this.ref.nextPosition}${bytes ? ' masked' : ''}`);
    this.both(() => this.ref.appendN(n, k, v, bytes), () => this.cache.appendBatch(k, v, mask));
    this.checkScalars();
  }

  /** Reference attention of query q over head h's first `seen` rows (all by default). */
  expected(q, h, seen) {
    const { rows, keyField, valueField } = this.ref.headRows(h, seen);
    const want = referenceAttention(q, rows, this.d, keyField, valueField);
    this.illConditioned += want.illConditioned;
    return want;
  }

  attend() {
    const r = this.r;
    const h = r.int(this.H);
    const q = this.query(1);
    const n = this.ref.headLen(h);
    const into = r.int(5) === 0 ? { out: new Float32Array(this.d), probs: new Float32Array(n + r.int(3)) } : undefined;
    this.count('attend', `head ${h} of ${n} rows${into ? ' into' : ''}`);
    const got = this.cache.attend(q, h, into);
    this.closeTo('attend', got, this.expected(q, h));
    if (this.mode === 'f32') {
      const keys = this.cache.headKeys(h);
      const values = this.cache.headValues(h);
      this.sameBits('attend vs attentionHead', got, attentionHead(q, keys, values, n, this.d));
    }
    if (r.int(2)) {
      this.count('accumulateImpHead', `head ${h} with attend's probs`);
      this.both(() => this.ref.accumulateImpHead(h, got.probs), () => this.cache.accumulateImpHead(h, got.probs));
      this.checkImp();
    }
  }

  attendGroup() {
    const h = this.r.int(this.H);
    const G = 1 + this.r.int(4);
    const q = this.query(G);
    const n = this.ref.headLen(h);
    this.count('attendGroup', `G=${G} head ${h}`);
    const got = this.cache.attendGroup(q, h);
    for (let g = 0; g < G; g++) {
      const qg = q.subarray(g * this.d, (g + 1) * this.d);
      const one = this.slice(got, g, n);
      this.closeTo(`attendGroup query ${g}`, one, this.expected(qg, h));
      this.sameBits(`attendGroup query ${g} vs attend`, one, this.cache.attend(qg, h));
    }
  }

  attendHeads() {
    const r = this.r;
    const { H, d } = this;
    const G = 1 + r.int(2);
    const L = this.ref.seqLen;
    const q = this.query(G * H);
    const withProbs = r.int(5) < 3;
    this.count('attendHeads', `G=${G}${withProbs ? ' with probs' : ''}`);
    const got = this.cache.attendHeads(q, withProbs ? { probs: new Float32Array(G * H * L) } : undefined);
    assert.equal(got.probs === null, !withProbs, 'attendHeads gives probs exactly when asked');
    const againstAttend = r.int(4) === 0;
    const sum = new Float32Array(L); // the probabilities summed over query heads, for accumulateImp
    for (let i = 0; i < G * H; i++) {
      const h = Math.floor(i / G);
      const qi = q.subarray(i * d, (i + 1) * d);
      const want = this.expected(qi, h);
      const out = got.out.subarray(i * d, (i + 1) * d);
      this.outWithin(`attendHeads query ${i}`, out, want);
      if (withProbs) {
        // Row i holds the head's weights at the positions it stored, 0 elsewhere.
        const row = got.probs.subarray(i * L, (i + 1) * L);
        const stored = this.ref.slots.map((slot) => slot.alive[h]);
        const atRows = row.filter((_, p) => stored[p]);
        this.within(`attendHeads query ${i} probs`, atRows, want.probs, want.probsTol);
        this.sameBits(`attendHeads query ${i} probs where head ${h} stored nothing`,
          row.filter((_, p) => !stored[p]), new Float32Array(L - atRows.length));
        for (let p = 0; p < L; p++) sum[p] += row[p];
      }
      if (againstAttend) {
        const one = this.cache.attend(qi, h);
        this.sameBits(`attendHeads query ${i} out vs attend`, out, one.out);
      }
    }
    if (withProbs && r.int(2)) {
      this.count('accumulateImp', 'with attendHeads probs');
      this.both(() => this.ref.accumulateImp(sum), () => this.cache.accumulateImp(sum));
      this.checkImp();
    }
  }

  attendCausal() {
    const L = this.ref.seqLen;
    if (L === 0) return this.attend();
    const h = this.r.int(this.H);
    const m = 1 + this.r.int(Math.min(L, 6));
    const q = this.query(m);
    const { d } = this;
    const n = this.ref.headLen(h);
    this.count('attendCausal', `m=${m} head ${h}`);
    const got = this.cache.attendCausal(q, h);
    const rows = this.ref.headRows(h).rows;
    const keys = this.mode === 'f32' ? this.cache.headKeys(h) : null;
    const values = this.mode === 'f32' ? this.cache.headValues(h) : null;
    const againstTruncated = !this.ref.verifying && this.r.int(4) === 0;
    for (let i = 0; i < m; i++) {
      // Query i sees the slots up to L - m + i: the rows at positions up to that slot's.
      const last = this.ref.slots[L - m + i].position;
      const seen = rows.filter((row) => row.position <= last).length;
      const qi = q.subarray(i * d, (i + 1) * d);
      const one = this.slice(got, i, n);
      const want = this.expected(qi, h, seen);
      this.outWithin(`attendCausal query ${i}`, one.out, want);
      this.within(`attendCausal query ${i} probs`, one.probs.subarray(0, seen), want.probs, want.probsTol);
      this.sameBits(`attendCausal query ${i} probs of rows it does not see`, one.probs.subarray(seen), new Float32Array(n - seen));
      const seenPart = { out: one.out, probs: one.probs.subarray(0, seen) };
      if (keys) {
        const exact = attentionHead(qi, keys.subarray(0, seen * d), values.subarray(0, seen * d), seen, d);
        this.sameBits(`attendCausal query ${i} vs attentionHead`, seenPart, exact);
      }
      if (againstTruncated) {
        // attend on a copy rewound to the slots query i sees.
        const copy = this.cache.clone();
        if (i + 1 < m) copy.truncateLast(copy.nextPosition - this.ref.slots[L - m + i + 1].position);
        this.sameBits(`attendCausal query ${i} vs attend on the truncated cache`, seenPart, copy.attend(qi, h));
        copy.free();
      }
    }
  }

  /** Query g's share of a result of several queries over n rows. */
  slice(result, g, n) {
    const { d } = this;
    return { out: result.out.subarray(g * d, (g + 1) * d), probs: result.probs.subarray(g * n, (g + 1) * n) };
  }

  accumulateImp() {
    const r = this.r;
    const probs = Float32Array.from({ length: this.ref.seqLen }, () => (r.int(4) ? r.unit() : 0));
    this.count('accumulateImp', 'random');
    this.both(() => this.ref.accumulateImp(probs), () => this.cache.accumulateImp(probs));
    this.checkImp();
  }

  accumulateImpHead() {
    const r = this.r;
    const h = r.int(this.H);
    const probs = Float32Array.from({ length: this.ref.headLen(h) }, () => r.unit() / 4);
    this.count('accumulateImpHead', `head ${h} random`);
    this.both(() => this.ref.accumulateImpHead(h, probs), () => this.cache.accumulateImpHead(h, probs));
    this.checkImp();
  }

  truncateLast() {
    const r = this.r;
    const next = this.ref.nextPosition;
    const kind = r.int(6);
    let n;
    if (kind === 0) n = Math.max(0, next - (Q8_WINDOW - 4 + r.int(9))); // to either side of the window
    else if (kind === 1) n = r.int(next + 5);
    else if (kind === 2) n = r.int(3) ? 0 : Number.MAX_SAFE_INTEGER;
    else n = 1 + r.int(4);
    this.count('truncateLast', `n=${n} from next ${next}`);
    this.both(() => this.ref.truncateLast(n), () => this.cache.truncateLast(n));
    this.checkScalars();
    this.checkPositions();
  }

  evict() {
    const policy = this.randomPolicy(1 + this.r.int(this.ref.seqLen + 8));
    const p = withDefaults(policy.budget, policy.sinks, policy.recent);
    this.count('evict', JSON.stringify(policy));
    const result = this.both(() => this.ref.evict(p.budget, p.sinks, p.recent), () => this.cache.evict(policy));
    if (result) this.sameBits('evict result', result[1], this.ref.positions());
    this.checkScalars();
    this.checkPositions();
  }

  slideWindow() {
    const r = this.r;
    const window = 1 + r.int(this.ref.seqLen + 4);
    const sinks = r.int(3) ? r.int(Math.min(window, 6) + 1) : undefined;
    const s = sinks ?? Math.min(4, window);
    this.count('slideWindow', `window=${window} sinks=${sinks}`);
    const result = this.both(() => this.ref.evict(window, s, window - s), () => this.cache.slideWindow(window, sinks));
    if (result) this.sameBits('slideWindow result', result[1], this.ref.positions());
    this.checkScalars();
    this.checkPositions();
  }

  evictionPlan() {
    const policy = this.randomPolicy(1 + this.r.int(this.ref.seqLen + 8));
    const p = withDefaults(policy.budget, policy.sinks, policy.recent);
    this.count('evictionPlan', JSON.stringify(policy));
    const [want, got] = this.both(() => this.ref.plan(p.budget, p.sinks, p.recent), () => this.cache.evictionPlan(policy));
    this.sameBits('evictionPlan', got, want);
  }

  setMaxRows() {
    const r = this.r;
    if (r.int(2)) {
      this.count('setMaxRows', 'off');
      this.both(() => this.ref.setMaxRows(0, 0, 0), () => this.cache.setMaxRows(0));
      return;
    }
    const policy = this.randomPolicy(1 + r.int(this.cap + 20));
    const p = withDefaults(policy.budget, policy.sinks, policy.recent);
    this.count('setMaxRows', JSON.stringify(policy));
    this.both(() => this.ref.setMaxRows(p.budget, p.sinks, p.recent),
      () => this.cache.setMaxRows(policy.budget, { sinks: policy.sinks, recent: policy.recent }));
  }

  beginVerify() {
    this.count('beginVerify');
    this.both(() => this.ref.beginVerify(), () => this.cache.beginVerify());
    this.checkScalars();
  }

  accept() {
    const r = this.r;
    const j = r.int(this.ref.draftLen + 1);
    if (r.int(4) === 0) {
      this.count('reject', `of ${this.ref.draftLen} drafts`);
      this.both(() => this.ref.accept(0), () => this.cache.reject());
    } else {
      this.count('accept', `${j} of ${this.ref.draftLen} drafts`);
      this.both(() => this.ref.accept(j), () => this.cache.accept(j));
    }
    this.checkScalars();
    this.checkPositions();
  }

  clear() {
    this.count('clear');
    this.both(() => this.ref.clear(), () => this.cache.clear());
    this.checkScalars();
  }

  // A clone equals its original; the session goes on with one of the two,
  // and the other must not see what happens to it.
  clone() {
    this.count('clone');
    const result = this.both(() => this.ref.clone(), () => this.cache.clone());
    if (!result) return;
    const [refCopy, copy] = result;
    this.checkState(copy, refCopy);
    const keep = this.r.int(2) ? { cache: copy, ref: refCopy } : { cache: this.cache, ref: this.ref };
    const left = keep.cache === copy ? { cache: this.cache, ref: this.ref } : { cache: copy, ref: refCopy };
    [this.cache, this.ref] = [keep.cache, keep.ref];
    this.append();
    if (this.ref.seqLen) this.accumulateImp();
    this.checkState(left.cache, left.ref);
    left.cache.free();
  }

  // A fork kept beside the cache while the session goes on: every write of
  // the cache meets pages the two share, and the fork must still hold what
  // it held when the next one replaces it (or the session ends).
  keepFork() {
    this.count('keep a fork');
    const result = this.both(() => this.ref.clone(), () => this.cache.clone());
    if (!result) return;
    this.releaseFork();
    this.kept = { ref: result[0], cache: result[1] };
  }

  releaseFork() {
    if (!this.kept) return;
    const { cache, ref } = this.kept;
    this.kept = null;
    this.checkState(cache, ref);
    cache.free();
  }

  // serialize, then deserialize: the session goes on with the restored cache.
  snapshot() {
    const r = this.r;
    this.count('serialize');
    const result = this.both(() => null, () => this.cache.serialize(), () => this.ref.verifying && 'KVC_E_VERIFYING');
    if (!result) return;
    const bytes = result[1];
    if (r.int(5) === 0) {
      const changed = bytes.slice();
      changed[r.int(changed.length)] ^= 1 << r.int(8);
      this.count('deserialize', 'of a changed byte');
      this.refusedByBinding('deserialize of a changed byte', () => LayerKvCache.deserialize(changed), /^KVC_E_SNAPSHOT_/);
    }
    this.count('deserialize');
    const restored = LayerKvCache.deserialize(bytes);
    this.ref.restored(); // q4: the window's copies, not the rollback ones
    this.checkState(restored, this.ref);
    if (r.int(3) === 0) this.sameBits('serialize of the restored cache', restored.serialize(), bytes);
    this.cache.free();
    this.cache = restored;
  }

  // Bad input: the call throws and nothing changes.
  badInput() {
    const r = this.r;
    const { H, d } = this;
    const ref = this.ref;
    const cache = this.cache;
    const L = ref.seqLen;
    switch (r.int(13)) {
      case 0: {
        const { k, v } = this.rows(1);
        (r.int(2) ? k : v)[r.int(H * d)] = [NaN, Infinity, -Infinity][r.int(3)];
        this.count('append', 'with a non-finite element');
        this.both(() => ref.appendN(1, k, v, null), () => cache.append(k, v));
        break;
      }
      case 1: {
        const { k, v } = this.rows(1);
        this.count('append', 'k one element short');
        this.refusedByBinding('append of a short k', () => cache.append(k.subarray(1), v), 'RangeError');
        break;
      }
      case 2: {
        const { k, v } = this.rows(1);
        this.count('append', 'alive of the wrong length');
        this.refusedByBinding('append with a long mask', () => cache.append(k, v, new Uint8Array(H + 1)), 'RangeError');
        break;
      }
      case 3: {
        const head = [H, -1, 0.5][r.int(3)];
        this.count('attend', `head ${head}`);
        this.refusedByBinding('attend of a head out of range', () => cache.attend(this.query(1), head), head === 0.5 ? 'TypeError' : 'RangeError');
        break;
      }
      case 4: {
        const q = this.query(1);
        q[r.int(d)] = NaN;
        this.count('attend', 'q holds NaN');
        this.refusedByBinding('attend of a NaN query', () => cache.attend(q, r.int(H)), 'RangeError');
        break;
      }
      case 5: {
        this.count('accumulateImp', 'probs of the wrong length');
        this.refusedByBinding('accumulateImp of a long probs', () => cache.accumulateImp(new Float32Array(L + 1)), 'RangeError');
        break;
      }
      case 6: {
        const probs = Float32Array.from({ length: L }, () => r.unit());
        if (L) probs[r.int(L)] = [-0.25, NaN, Infinity][r.int(3)];
        this.count('accumulateImp', 'a negative or non-finite prob');
        this.both(() => ref.accumulateImp(probs), () => cache.accumulateImp(probs));
        break;
      }
      case 7: {
        const budget = r.int(L + 4);
        const policy = budget === 0 ? { budget } : { budget, sinks: budget + 1 + r.int(3) };
        this.count('evict', JSON.stringify(policy));
        this.refusedByBinding('evict of a bad policy', () => cache.evict(policy), 'RangeError');
        break;
      }
      case 8: {
        const j = ref.verifying ? ref.draftLen + 1 + r.int(3) : r.int(3);
        this.count('accept', `${j} of ${ref.draftLen} drafts${ref.verifying ? '' : ' without a verify'}`);
        this.both(() => ref.accept(j), () => cache.accept(j));
        break;
      }
      case 9: {
        this.count('attendCausal', `m=${L + 1} over ${L} positions`);
        this.refusedByBinding('attendCausal of too many queries', () => cache.attendCausal(this.query(L + 1), r.int(H)), 'RangeError');
        break;
      }
      case 10: {
        const bytes = Uint8Array.from({ length: r.int(64) }, () => r.int(256));
        this.count('deserialize', `${bytes.length} random bytes`);
        this.refusedByBinding('deserialize of random bytes', () => LayerKvCache.deserialize(bytes), /^KVC_E_SNAPSHOT_/);
        break;
      }
      case 11: {
        // More positions at once than maxRows allows (a verify's drafts may).
        const maxRows = ref.policy.maxRows;
        if (!maxRows || maxRows > 60) return this.appendBatch();
        const { k, v } = this.rows(maxRows + 1);
        this.count('appendBatch', `n=${maxRows + 1} over maxRows ${maxRows}`);
        this.both(() => ref.appendN(maxRows + 1, k, v, null), () => cache.appendBatch(k, v));
        break;
      }
      default: {
        const maxRows = 1 + r.int(20);
        this.count('setMaxRows', `${maxRows} with sinks ${maxRows + 1}`);
        this.refusedByBinding('setMaxRows of a bad policy', () => cache.setMaxRows(maxRows, { sinks: maxRows + 1 }), 'RangeError');
      }
    }
    this.checkScalars();
  }

  // --- comparing ----------------------------------------------------------

  /**
   * Runs one call on the reference and on the cache: both refuse it (the
   * cache with the error the binding makes of the reference's status, and
   * nothing changes) or neither does. `refusal` overrides the reference's
   * verdict for calls it does not model. Returns [reference result, cache
   * result], or null when refused.
   */
  both(onReference, onCache, refusal = () => null) {
    let refused = refusal();
    let want;
    if (!refused) {
      try {
        want = onReference();
      } catch (error) {
        if (!(error instanceof Refusal)) throw error;
        refused = error.code;
      }
    }
    let got;
    let failure = null;
    try {
      got = onCache();
    } catch (error) {
      failure = error;
    }
    this.checks++;
    if (refused) {
      if (!failure) throw new Mismatch(`the reference refuses this (${refused}) but the cache did it`);
      if (errorName(failure) !== bindingError(refused)) {
        throw new Mismatch(`expected ${bindingError(refused)} (${refused}), the cache threw ${errorName(failure)}: ${failure.message}`);
      }
      this.refused++;
      this.checkState();
      return null;
    }
    if (failure) throw new Mismatch(`the cache refused this (${errorName(failure)}: ${failure.message}) but the reference does it`);
    return [want, got];
  }

  /** A call the binding's own checks refuse: it throws `expected` (a name or a
   * pattern over code or name) and the cache is unchanged. */
  refusedByBinding(what, call, expected) {
    let failure = null;
    try {
      call();
    } catch (error) {
      failure = error;
    }
    this.checks++;
    if (!failure) throw new Mismatch(`${what}: accepted, expected ${expected}`);
    const name = errorName(failure);
    if (typeof expected === 'string' ? name !== expected : !expected.test(name)) {
      throw new Mismatch(`${what}: threw ${name} (${failure.message}), expected ${expected}`);
    }
    this.refused++;
    this.checkState();
  }

  checkScalars(cache = this.cache, ref = this.ref) {
    const pairs = [
      ['seqLen', cache.seqLen, ref.seqLen], ['nextPosition', cache.nextPosition, ref.nextPosition],
      ['memoryBytes', cache.memoryBytes, ref.memoryBytes], ['fieldFrozen', cache.fieldFrozen, ref.fieldFrozen],
      ['verifying', cache.verifying, ref.verifying], ['draftLen', cache.draftLen, ref.draftLen],
    ];
    for (const [what, got, want] of pairs) {
      this.checks++;
      this.values++;
      if (got !== want) throw new Mismatch(`${what} is ${got}, the reference says ${want}`);
    }
  }

  checkPositions(cache = this.cache, ref = this.ref) {
    this.sameBits('positions()', cache.positions(), ref.positions());
  }

  checkImp(cache = this.cache, ref = this.ref) {
    this.sameBits('imp', cache.imp, ref.imp);
  }

  /** Everything observable, bit for bit. */
  checkState(cache = this.cache, ref = this.ref) {
    this.checkScalars(cache, ref);
    this.checks++;
    if (!(cache.capacityBytes >= cache.memoryBytes)) {
      throw new Mismatch(`capacityBytes ${cache.capacityBytes} is below memoryBytes ${cache.memoryBytes}`);
    }
    this.checkPositions(cache, ref);
    this.checkImp(cache, ref);
    for (let h = 0; h < ref.H; h++) {
      this.sameBits(`headPositions(${h})`, cache.headPositions(h), ref.headPositions(h));
      this.sameBits(`headKeys(${h})`, cache.headKeys(h), ref.headKeys(h));
      this.sameBits(`headValues(${h})`, cache.headValues(h), ref.headValues(h));
    }
  }

  /** Bit-for-bit equality of typed arrays, or of { out, probs } pairs. */
  sameBits(what, got, want) {
    if (!ArrayBuffer.isView(want)) {
      this.sameBits(`${what} out`, got.out, want.out);
      this.sameBits(`${what} probs`, got.probs, want.probs);
      return;
    }
    this.checks++;
    this.values += want.length;
    if (got.length !== want.length) throw new Mismatch(`${what}: length ${got.length}, expected ${want.length}`);
    const a = asBits(got);
    const b = asBits(want);
    for (let i = 0; i < b.length; i++) {
      if (a[i] !== b[i]) throw new Mismatch(`${what}[${i}] is ${shownValue(got, i)}, expected ${shownValue(want, i)}`);
    }
  }

  /** An attention result against the reference's, within its bound. */
  closeTo(what, got, want) {
    this.outWithin(what, got.out, want);
    this.within(`${what} probs`, got.probs, want.probs, want.probsTol);
  }

  /** One query's out against the reference's, and its error for the statistics
   * (not where out is a cancellation, a millionth of the values or less:
   * its relative error means nothing there). */
  outWithin(what, got, want) {
    const error = this.within(`${what} out`, got, want.out, want.outTol);
    const scale = want.out.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    if (scale > 1e-6 * want.valueScale && !want.illConditioned) this.outErrors.push(error / scale);
  }

  /** |got - want| <= tol element by element; returns the largest error. */
  within(what, got, want, tol) {
    this.checks++;
    this.values += want.length;
    if (got.length !== want.length) throw new Mismatch(`${what}: length ${got.length}, expected ${want.length}`);
    let maxError = 0;
    for (let i = 0; i < want.length; i++) {
      const error = Math.abs(got[i] - want[i]);
      if (!(error <= tol[i])) {
        throw new Mismatch(`${what}[${i}] is ${got[i]}, the reference ${want[i]}: off by ${error}, bound ${tol[i]}`);
      }
      if (tol[i] > 0) this.worstOfBound = Math.max(this.worstOfBound, error / tol[i]);
      maxError = Math.max(maxError, error);
    }
    return maxError;
  }

  /** The error, with where it happened and how to replay it. */
  report(error) {
    const total = MODES.length * (this.ops + 1);
    return new Error([
      `soak ${this.mode}, seed ${SEED}: operation ${this.current}: ${error.message}`,
      `the operations before it: ${this.recent.join(' | ')}`,
      `replay: KVC_SOAK_SEED=${SEED} KVC_SOAK_OPS=${total} node --test --test-name-pattern='\\(${this.mode}\\)' tests/js/soak.test.mjs`,
    ].join('\n'), { cause: error });
  }
}

for (const [index, mode] of MODES.entries()) {
  test(`the wasm cache and the JS reference agree on every output of a random operation sequence (${mode})`, (t) => {
    const soak = new Soak(mode, SEED * MODES.length + index);
    const started = performance.now();
    try {
      soak.run(OPS_PER_MODE);
    } catch (error) {
      soak.cache?.free();
      soak.kept?.cache.free();
      throw soak.report(error);
    }
    soak.cache.free();
    const seconds = (performance.now() - started) / 1000;
    const kinds = [...soak.counts].sort((a, b) => b[1] - a[1]).map(([kind, n]) => `${kind} ${n}`).join(', ');
    t.diagnostic(`${mode}: ${soak.ops} operations in ${soak.sessions} caches on ${threadCount()} threads, ${seconds.toFixed(1)} s, seed ${SEED}`);
    t.diagnostic(`${mode}: ${soak.checks} comparisons of ${soak.values} values, ${soak.refused} refused calls`);
    const errors = Float64Array.from(soak.outErrors).sort();
    const at = (fraction) => errors[Math.min(errors.length - 1, Math.floor(fraction * errors.length))]?.toExponential(1);
    t.diagnostic(`${mode}: attention errors at most ${soak.worstOfBound.toFixed(2)} of their bound; out error / max |out| over ${errors.length} queries: median ${at(0.5)}, 99% ${at(0.99)}, 99.9% ${at(0.999)}; ${soak.illConditioned} queries ill-conditioned (held to the values' range)`);
    t.diagnostic(`${mode}: ${kinds}`);
  });
}

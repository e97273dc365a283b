// The live demo: a source of keys and values (the stories260K model, or a
// synthetic stream of model-sized shapes) drives this package's caches in
// every mode, and the panels show what they hold and cost as it runs, and
// what branches forked from them share.
// It imports the package as any app would: 'kvcache-wasm' and
// 'kvcache-wasm/llama' (see the import map in index.html).
import init, { LayerKvCache, kernelIsa, memoryStats, setThreadLimit, threadInfo } from 'kvcache-wasm';
import { GgufError, Llama, decode, generate } from 'kvcache-wasm/llama';
import uPlot from 'uplot';
import { normals, outlierKeys, rng } from '/support/synthetic.mjs';

// The modes drawn side by side: f32, the q8 ones, 4-bit both, and 8-bit keys with 4-bit values.
const MODES = ['f32', 'q8', 'q8k', 'q8v', 'q4', 'q8k+q4v'];
const QUANTIZED = MODES.filter((m) => m !== 'f32');
const COLORS = {
  f32: '#3b6fd4', q8: '#d6453d', q8k: '#e69a28', q8v: '#2f9e58', q4: '#b03aa8', 'q8k+q4v': '#1f9aa8', imp: '#9aa3b0', kept: '#7c4dd6',
};
const emptySeries = (count) => Array.from({ length: count + 1 }, () => []);
const SINKS = 4; // eviction keeps the first positions: attention sinks
const MAX_STREAM_TOKENS = 600;

const $ = (id) => document.getElementById(id);
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(bytes < 2 ** 20 ? 3 : 2)} MiB`;
// An axis label for a byte count: KiB below a MiB, MiB above.
const byteLabel = (bytes) => (bytes < 2 ** 20 ? `${(bytes / 1024).toFixed(0)} KiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`);

// ---------------------------------------------------------------------------
// Charts (uPlot)

function chart(element, { series, yLabel, yValues, log = false, bars = false }) {
  const options = {
    width: Math.max(320, element.clientWidth),
    height: 220,
    legend: { live: false },
    scales: { x: { time: false }, y: log ? { distr: 3 } : { range: (u, min, max) => [0, max > 0 ? max * 1.05 : 1] } },
    axes: [{ label: bars ? 'position' : 'tokens' }, { label: yLabel, values: yValues, size: 70 }],
    series: [{ label: bars ? 'position' : 'tokens' }, ...series.map((name) => ({
      label: name,
      stroke: COLORS[name],
      dash: name === 'q8v' ? [6, 4] : undefined, // q8k and q8v often coincide
      fill: bars ? COLORS[name] : undefined,
      width: bars ? 0 : 2,
      points: { show: false },
      paths: bars ? uPlot.paths.bars({ size: [1, Infinity], gap: 0 }) : undefined,
    }))],
  };
  const plot = new uPlot(options, [[], ...series.map(() => [])], element);
  new ResizeObserver(() => plot.setSize({ width: Math.max(320, element.clientWidth), height: 220 })).observe(element);
  return plot;
}

const charts = {
  memory: chart($('memory-chart'), { series: MODES, yLabel: 'bytes held', yValues: (u, ticks) => ticks.map(byteLabel) }),
  // A log axis leaves some ticks out (null).
  accuracy: chart($('accuracy-chart'), { series: QUANTIZED, yLabel: 'vs f32', log: true, yValues: (u, ticks) => ticks.map((v) => (v == null ? '' : v.toExponential(0))) }),
  importance: chart($('importance-chart'), { series: ['imp', 'kept'], yLabel: 'attention received', bars: true }),
};

// Series data, appended per step and drawn once per animation frame.
const series = { memory: emptySeries(MODES.length), accuracy: emptySeries(QUANTIZED.length) };
let drawPending = false;
function draw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => {
    drawPending = false;
    charts.memory.setData(series.memory);
    charts.accuracy.setData(series.accuracy);
    drawImportance();
  });
}

// ---------------------------------------------------------------------------
// The speculative stream: tokens as spans

const stream = $('stream');

function addSpan(text, className = '') {
  const span = document.createElement('span');
  span.className = `token ${className}`.trim();
  span.textContent = text;
  stream.append(span);
  while (stream.childElementCount > MAX_STREAM_TOKENS) stream.firstElementChild.remove();
  stream.scrollTop = stream.scrollHeight;
  return span;
}

let draftSpans = [];

function showDrafts(labels) {
  draftSpans = labels.map((label) => addSpan(label, 'drafted'));
}

function resolveDrafts(accepted) {
  draftSpans.forEach((span, i) => {
    if (i < accepted) {
      span.remove(); // the kept ones come back as tokens, in order
    } else {
      span.classList.replace('drafted', 'rejected');
      setTimeout(() => span.remove(), 900);
    }
  });
  draftSpans = [];
}

// ---------------------------------------------------------------------------
// Sources: each step() does one step of work and reports what to show.

/** One running story on a llama model: a driving session (the chosen mode,
 * speculative when k > 0) and one teacher-forced session per mode, which give
 * the memory and next-token KL curves over the very same tokens. */
class ModelSource {
  constructor(llama, { mode, draft, prompt }) {
    this.llama = llama;
    this.kind = 'model';
    this.driver = llama.session({ mode });
    this.shadows = Object.fromEntries(MODES.map((m) => [m, llama.session({ mode: m })]));
    const ids = llama.tokenizer.encode(prompt);
    this.events = decode(this.driver, ids, { steps: llama.config.contextLength, draft, stopAtEos: false });
    this.lastLogits = Object.fromEntries(MODES.map((m) => {
      const logits = this.shadows[m].forward(ids);
      return [m, logits.subarray(logits.length - llama.config.vocabSize)];
    }));
    this.stats = { tokens: 0, forwardPasses: 0, drafted: 0, accepted: 0, rollbacks: 0 };
    this.fromVerify = 0; // tokens still to come from the last verify
    this.decoder = llama.tokenizer.decoder();
    addSpan(ids.map((id) => this.decoder.push(id)).join(''), 'prompt');
    this.lastToken = ids[ids.length - 1]; // emitted, not yet in the driving cache
  }

  /** Branch i: a fork of the driving cache that goes on with `tokens` sampled tokens of its own. */
  branch(i, tokens) {
    const session = this.llama.session({ cache: this.driver.cache.clone() });
    const { tokens: ids } = generate(session, [this.lastToken], { steps: tokens, temperature: 1, seed: i + 1, stopAtEos: false });
    const decoder = this.llama.tokenizer.decoder();
    return { cache: session.cache, text: `…${ids.map((id) => decoder.push(id)).join("")}` };
  }

  get seqLen() { return this.driver.cache.layer(0).seqLen; }

  get position() { return this.driver.cache.seqLen; }

  memory() {
    return Object.fromEntries(MODES.map((m) => [m, this.shadows[m].cache.memoryBytes]));
  }

  /** The layer the importance panel shows: layer 0 of the driving cache (each layer evicts by its own imp). */
  shownLayer() { return this.driver.cache.layer(0); }

  caches() { return [this.driver.cache, ...Object.values(this.shadows).map((s) => s.cache)]; }

  layers() { return this.caches().flatMap((cache) => Array.from({ length: cache.numLayers }, (_, l) => cache.layer(l))); }

  /** The real eviction on every cache, each layer by its own imp; false while a verify is open. */
  evict(policy) {
    if (this.driver.cache.verifying) return false;
    for (const cache of this.caches()) cache.evict(policy);
    return true;
  }

  piece(id) {
    return this.llama.tokenizer.tokens[id].replaceAll('\u2581', ' ').replace(/^<0x0A>$/, '\n');
  }

  step() {
    const { value, done } = this.events.next();
    if (done) return { finished: 'the context is full' };
    if (value.type === 'verify') {
      this.stats.forwardPasses++;
      this.stats.drafted += value.drafts.length;
      showDrafts(value.drafts.map((id) => this.piece(id)));
      return {};
    }
    if (value.type === 'accept') {
      this.stats.accepted += value.accepted;
      if (value.rejected > 0) this.stats.rollbacks++;
      this.fromVerify = value.accepted + 1;
      resolveDrafts(value.accepted);
      return {};
    }
    // A token: from the last verify, or a plain forward pass of its own.
    if (this.fromVerify > 0) this.fromVerify--;
    else this.stats.forwardPasses++;
    this.stats.tokens++;
    this.lastToken = value.token;
    addSpan(this.decoder.push(value.token));
    // The teacher-forced sessions: the KL of what they predicted for this token, then the token.
    const reference = logSoftmax(this.lastLogits.f32);
    const kl = QUANTIZED.map((m) => klDivergence(reference, logSoftmax(this.lastLogits[m])));
    for (const m of MODES) this.lastLogits[m] = this.shadows[m].forward([value.token]);
    return { point: { x: this.shadows.f32.cache.seqLen - 1, accuracy: kl } };
  }

  dispose() {
    this.driver.free();
    for (const session of Object.values(this.shadows)) session.free();
  }
}

function logSoftmax(logits) {
  let max = -Infinity;
  for (const z of logits) max = Math.max(max, z);
  let sum = 0;
  for (const z of logits) sum += Math.exp(z - max);
  const logSum = max + Math.log(sum);
  return Array.from(logits, (z) => z - logSum);
}

function klDivergence(p, q) {
  let kl = 0;
  for (let i = 0; i < p.length; i++) kl += Math.exp(p[i]) * (p[i] - q[i]);
  return kl > 0 ? kl : null; // no error at all (every row still f32): no point on a log axis
}

/** Keys with outlier channels and a RoPE-like rotation, in every mode at once.
 * With k > 0, every other step is a verify: k draft positions, a random
 * number of them kept. */
class SyntheticSource {
  constructor({ mode, draft, heads, headDim, context, batch }) {
    this.kind = 'synthetic';
    Object.assign(this, { mode, draft, heads, headDim, context, batch });
    this.caches = Object.fromEntries(MODES.map((m) => [m, new LayerKvCache({ numKvHeads: heads, headDim, mode: m })]));
    this.random = rng(2026);
    this.stats = { tokens: 0, forwardPasses: 0, drafted: 0, accepted: 0, rollbacks: 0 };
    this.pendingDrafts = 0;
    this.verifyNext = false;
  }

  get seqLen() { return this.caches[this.mode].seqLen; }

  get position() { return this.caches.f32.nextPosition; }

  memory() {
    return Object.fromEntries(MODES.map((m) => [m, this.caches[m].memoryBytes]));
  }

  shownLayer() { return this.caches[this.mode]; }

  layers() { return Object.values(this.caches); }

  /** The real eviction on every mode's cache; false while a verify is open. */
  evict(policy) {
    if (this.caches.f32.verifying) return false;
    for (const cache of this.layers()) cache.evict(policy);
    return true;
  }

  append(n, caches = Object.values(this.caches)) {
    const { heads, headDim } = this;
    const k = outlierKeys(this.random, n, this.position, heads, headDim);
    const v = normals(this.random, n * heads * headDim);
    for (const cache of caches) cache.appendBatch(k, v);
  }

  /** Branch i: a fork of the shown cache that goes on with `tokens` positions of its own. */
  branch(i, tokens) {
    const cache = this.shownLayer().clone();
    this.append(tokens, [cache]);
    return { cache, text: `positions ${cache.nextPosition - tokens}–${cache.nextPosition - 1} of its own` };
  }

  step() {
    const room = this.context - this.position;
    if (this.pendingDrafts > 0) {
      // Keep each draft with probability 0.7, stopping at the first miss.
      let accepted = 0;
      while (accepted < this.pendingDrafts && this.random.unit() < 0.7) accepted++;
      for (const cache of Object.values(this.caches)) cache.accept(accepted);
      this.stats.accepted += accepted;
      this.stats.tokens += accepted;
      if (accepted < this.pendingDrafts) this.stats.rollbacks++;
      resolveDrafts(accepted);
      for (let i = 0; i < accepted; i++) addSpan(`#${this.position - accepted + i} `);
      this.pendingDrafts = 0;
      return { point: this.measure() };
    }
    if (room <= 0) return { finished: `the ${this.context}-position context is full` };
    this.stats.forwardPasses++;
    if (this.draft > 0 && this.verifyNext && room > 1) {
      this.verifyNext = false;
      const n = Math.min(this.draft, room);
      for (const cache of Object.values(this.caches)) cache.beginVerify();
      const first = this.position;
      this.append(n);
      this.pendingDrafts = n;
      this.stats.drafted += n;
      showDrafts(Array.from({ length: n }, (_, i) => `#${first + i} `));
      return {};
    }
    this.verifyNext = true;
    const n = Math.min(this.batch, room);
    this.append(n);
    this.stats.tokens += n;
    const end = this.position;
    addSpan(n > 1 ? `#${end - n}–${end - 1} ` : `#${end - 1} `, n > 1 ? 'batch' : '');
    return { point: this.measure() };
  }

  // One query on a random head: the relative error of each mode's attention
  // output against f32, and the f32 probabilities added to every mode's imp
  // (so that eviction keeps the same positions in all of them).
  measure() {
    if (this.stats.forwardPasses % TIMING_EVERY === 1) this.timeStep();
    const h = this.random.int(this.heads);
    const q = normals(this.random, this.headDim);
    const exact = this.caches.f32.attend(q, h);
    for (const cache of this.layers()) cache.accumulateImpHead(h, exact.probs);
    const errors = QUANTIZED.map((m) => {
      const { out } = this.caches[m].attend(q, h);
      let diff = 0;
      let scale = 1e-30;
      out.forEach((x, j) => {
        diff = Math.max(diff, Math.abs(x - exact.out[j]));
        scale = Math.max(scale, Math.abs(exact.out[j]));
      });
      return diff > 0 ? diff / scale : null; // exact: no point on a log axis
    });
    return { x: this.position - 1, accuracy: errors };
  }

  // One whole-layer step of the shown cache on every thread and on one
  // (setThreadLimit(1)): the best of a few of each, interleaved.
  timeStep() {
    const cache = this.caches[this.mode];
    const q = normals(this.random, QUERY_HEADS_PER_KV * this.heads * this.headDim);
    const into = { out: new Float32Array(q.length) };
    const all = threadInfo().threads;
    const best = { all: Infinity, one: Infinity };
    for (let round = 0; round < 3; round++) {
      for (const [key, limit] of [['all', all], ['one', 1]]) {
        setThreadLimit(limit);
        const t0 = performance.now();
        cache.attendHeads(q, into);
        best[key] = Math.min(best[key], performance.now() - t0);
      }
    }
    setThreadLimit(all);
    timing.all = best.all;
    timing.one = best.one;
    timing.rows = cache.seqLen;
  }

  dispose() {
    for (const cache of Object.values(this.caches)) cache.free();
  }
}

// ---------------------------------------------------------------------------
// The importance panel: imp, and what the cache's own eviction would keep

/** The eviction policy of the budget slider: the first SINKS positions, the
 * newest half of the rest, and the most attended in between (the package's
 * default split; H2O heavy hitters with StreamingLLM sinks). */
function policy() {
  const budget = Number($('budget').value);
  return { budget, sinks: Math.min(SINKS, budget) };
}

// What the panel last drew, for the browser test.
const shownImportance = { positions: [], kept: [] };

function drawImportance() {
  if (!source) return;
  const layer = source.shownLayer();
  const imp = layer.imp;
  const positions = layer.positions();
  // The plan comes from the C core: the very positions evict() would keep.
  const kept = new Set(layer.evictionPlan(policy()));
  Object.assign(shownImportance, { positions: Array.from(positions), kept: Array.from(kept) });
  charts.importance.setData([
    Array.from(positions),
    Array.from(imp, (v, s) => (kept.has(positions[s]) ? null : v)),
    Array.from(imp, (v, s) => (kept.has(positions[s]) ? v : null)),
  ]);
}

/** Bounds every cache at the budget (maxRows: appends evict first), or lifts the bound. */
function applyBound() {
  if (!source) return;
  const bound = $('bound').checked;
  for (const layer of source.layers()) layer.setMaxRows(bound ? policy().budget : 0, bound ? { sinks: policy().sinks } : {});
}

let evictPending = false; // "Evict now" waits for an open verify to close

function evictNow() {
  if (!source) return;
  evictPending = !source.evict(policy());
  if (!evictPending) observed.evictions++;
  render();
  draw();
}

// ---------------------------------------------------------------------------
// The shared-prefix panel: branches forked from the running cache

let branches = []; // { cache, text }
const branchView = { count: 0, sharedBytes: 0, deepBytes: 0, texts: [] };

function dropBranches() {
  for (const { cache } of branches) cache.free();
  branches = [];
  Object.assign(branchView, { count: 0, sharedBytes: 0, deepBytes: 0, texts: [] });
}

/** Forks the running cache into branches that each go on by themselves; shows what they hold. */
function branchNow() {
  if (!source) return;
  pause();
  // A cache mid-verify cannot fork: close the verify first.
  for (let i = 0; i < 20 && source.shownLayer().verifying; i++) stepOnce();
  dropBranches();
  const count = Math.max(1, Math.min(32, Number($('branch-count').value) || 1));
  const tokens = Math.max(1, Math.min(64, Number($('branch-tokens').value) || 1));
  const before = memoryStats().cacheBytes;
  for (let i = 0; i < count; i++) branches.push(source.branch(i, tokens));
  Object.assign(branchView, {
    count,
    sharedBytes: memoryStats().cacheBytes - before,
    deepBytes: branches.reduce((sum, { cache }) => sum + cache.memoryBytes, 0),
    texts: branches.map(({ text }) => text),
  });
  renderBranches();
}

function renderBranches() {
  const { count, sharedBytes, deepBytes, texts } = branchView;
  $('branches').textContent = count ? String(count) : '–';
  $('branch-shared').textContent = count ? byteLabel(sharedBytes) : '–';
  $('branch-deep').textContent = count ? byteLabel(deepBytes) : '–';
  $('branch-ratio').textContent = count && sharedBytes > 0 ? `${(deepBytes / sharedBytes).toFixed(1)}×` : '–';
  $('bar-shared').style.width = count ? `${(100 * sharedBytes) / deepBytes}%` : '0';
  $('bar-deep').style.width = count ? '100%' : '0';
  $('branch-texts').replaceChildren(...texts.map((text) => {
    const item = document.createElement('li');
    item.textContent = text;
    return item;
  }));
}

// ---------------------------------------------------------------------------
// The threads panel

const TIMING_EVERY = 16; // forward passes between two timings of a step
const QUERY_HEADS_PER_KV = 4;
const timing = { all: null, one: null, rows: 0 };

function renderThreads() {
  const info = threadInfo();
  $('threads').textContent = String(info.threads);
  $('threads-note').textContent = info.reason ? `Fewer threads than cores: ${info.reason}.` : '';
  const ms = (x) => (x === null ? '–' : `${x.toFixed(2)} ms`);
  $('step-all').textContent = timing.all === null ? '–' : `${ms(timing.all)} (${timing.rows} rows)`;
  $('step-one').textContent = ms(timing.one);
  $('speedup').textContent = timing.all ? `${(timing.one / timing.all).toFixed(2)}×` : '–';
}

// ---------------------------------------------------------------------------
// Running

let llama = null; // the loaded model, if any
let source = null;
let running = false;
let timer = null;
let lastSeqLen = 0;
const observed = { seqLenWentDown: false, finished: null, evictions: 0 };

// What each mode costs at a head size, as measured (README, Storage): the
// synthetic stream's attention error (its own statistics: one normal query
// per 16 positions over 4096, 8 KV heads), a model's teacher-forced KL.
const EXPECTED = {
  synthetic: {
    128: 'q8 and q8k about 0.02 of the output (0.01–0.04), q8v 0.006, q8k+q4v 0.11 (0.08–0.15), q4 0.36 (0.2–0.6, at times above 1): on keys with outlier channels 4-bit keys lose about 15× what 8-bit ones do.',
    64: 'q8 and q8k about 0.05 of the output (0.02–0.15), q8v 0.006, q8k+q4v 0.12 (0.07–0.2), q4 0.6 (0.26–1.7): on keys with outlier channels 4-bit keys lose about 12× what 8-bit ones do.',
  },
  model: {
    8: 'mean KL q8 2.1e-4, q8k 2.2e-4, q8v 2.3e-6, q4 3.0e-4, q8k+q4v 2.6e-4 (stories260K, teacher-forced on its greedy story).',
    64: 'mean KL q8 2.7e-6, q8k 2.6e-6, q8v 3.6e-7, q4 1.1e-3 (top-1 98.8%), q8k+q4v 9.7e-5 (kjv-d512-h64, teacher-forced over Genesis 1; llama.cpp\'s own q8_0 and q4_0 caches: 1.1e-5 and 2.4e-3).',
  },
};

/** The sentence under the accuracy chart: what to expect at this head size, or that it was not measured. */
function expectation(kind, headDim) {
  const known = EXPECTED[kind];
  if (known[headDim]) return `Expect at head_dim ${headDim}, as measured: ${known[headDim]}`;
  return `No measurement at head_dim ${headDim}; measured at ${Object.keys(known).join(' and ')}: ${Object.entries(known).map(([d, text]) => `${d}: ${text}`).join(' ')}`;
}

function settings() {
  return {
    mode: $('mode').value,
    draft: Math.max(0, Math.min(8, Number($('draft').value) || 0)),
    prompt: $('prompt').value,
    heads: Math.max(1, Number($('heads').value) || 8),
    headDim: Math.max(8, Number($('head-dim').value) || 128),
    context: Number($('context').value),
    batch: Math.max(1, Number($('batch').value) || 1),
  };
}

// Every error the page met, as well as shown: the browser test reads this
// where the browser's own console is out of its reach (WebKitWebDriver).
const pageErrors = [];
addEventListener('error', (event) => pageErrors.push(`page error: ${event.message}`));
addEventListener('unhandledrejection', (event) => pageErrors.push(`unhandled rejection: ${event.reason?.message ?? event.reason}`));

function setStatus(text, isError = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', isError);
  if (isError) pageErrors.push(`status: ${text}`);
}

function reset() {
  pause();
  dropBranches();
  renderBranches();
  source?.dispose();
  source = null;
  stream.replaceChildren();
  draftSpans = [];
  series.memory = emptySeries(MODES.length);
  series.accuracy = emptySeries(QUANTIZED.length);
  observed.seqLenWentDown = false;
  observed.finished = null;
  observed.evictions = 0;
  evictPending = false;
  lastSeqLen = 0;
  Object.assign(timing, { all: null, one: null, rows: 0 });
  const kind = $('source').value;
  $('source-model').hidden = kind !== 'model';
  $('source-synthetic').hidden = kind !== 'synthetic';
  $('accuracy-explain').textContent = kind === 'model'
    ? 'What 8- and 4-bit storage costs: the KL divergence of each mode\'s next-token distribution from f32\'s, token by token.'
    : 'What 8- and 4-bit storage costs: max |out − out_f32| / max |out_f32| of one attention query per step.';
  $('accuracy-expect').textContent = kind === 'model'
    ? (llama ? expectation('model', llama.config.headDim) : '')
    : expectation('synthetic', settings().headDim);
  if (kind === 'model' && !llama) {
    setStatus('No model loaded: pick or drop a llama GGUF, or use the synthetic stream.');
  } else {
    source = kind === 'model' ? new ModelSource(llama, settings()) : new SyntheticSource(settings());
    setStatus(kind === 'model' ? `model: ${llama.name}` : `synthetic: ${settings().heads} KV heads × ${settings().headDim}`);
    applyBound();
  }
  render();
  draw();
}

function render() {
  renderThreads();
  const memory = source ? source.memory() : Object.fromEntries(MODES.map((m) => [m, 0]));
  for (const m of MODES) {
    const cell = document.querySelector(`[data-memory-mode="${m}"]`);
    cell.dataset.bytes = String(memory[m]);
    cell.textContent = `${mib(memory[m])} (${memory[m].toLocaleString('en')} B)`;
    document.querySelector(`[data-ratio-mode="${m}"]`).textContent = memory[m] ? `${(memory.f32 / memory[m]).toFixed(2)}×` : '–';
  }
  const seqLen = source ? source.seqLen : 0;
  if (seqLen < lastSeqLen && source) observed.seqLenWentDown = true;
  lastSeqLen = seqLen;
  $('seqlen').textContent = String(seqLen);
  $('position').textContent = String(source ? source.position : 0);
  const stats = source?.stats;
  $('tokens').textContent = String(stats?.tokens ?? 0);
  $('rollbacks').textContent = String(stats?.rollbacks ?? 0);
  $('acceptance').textContent = stats?.drafted ? `${stats.accepted}/${stats.drafted} (${((100 * stats.accepted) / stats.drafted).toFixed(0)}%)` : '–';
  $('tokens-per-forward').textContent = stats?.forwardPasses ? (stats.tokens / stats.forwardPasses).toFixed(2) : '–';
  $('start').textContent = running ? 'Pause' : 'Start';
}

function stepOnce() {
  if (!source) return;
  let result;
  try {
    result = source.step();
  } catch (error) {
    pause();
    setStatus(`stopped: ${error.message}`, true);
    return;
  }
  if (result.point) {
    const memory = source.memory();
    series.memory[0].push(result.point.x);
    MODES.forEach((m, i) => series.memory[i + 1].push(memory[m]));
    series.accuracy[0].push(result.point.x);
    result.point.accuracy.forEach((v, i) => series.accuracy[i + 1].push(v));
  }
  if (evictPending) evictNow();
  if (result.finished) {
    observed.finished = result.finished;
    pause();
    setStatus(`finished: ${result.finished}. Reset to run again.`);
  }
  render();
  draw();
}

function tick() {
  timer = null;
  if (!running) return;
  stepOnce();
  if (running) timer = setTimeout(tick, 1000 / Number($('speed').value));
}

function start() {
  if (!source || running) return;
  running = true;
  render();
  tick();
}

function pause() {
  running = false;
  if (timer) clearTimeout(timer);
  timer = null;
  render();
}

// ---------------------------------------------------------------------------
// Models: found beside the project, picked, or dropped

// A model streamed into the heap (a picked or dropped File, or a fetch's
// Response), with its progress; the model running before keeps running
// until the new one has loaded, and stays when it cannot.
async function useModel(file, name) {
  await window.demo.ready;
  const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  try {
    const loaded = await Llama.load(file, {
      onProgress: ({ loaded: done, total }) => setStatus(`loading ${name}: ${mib(done)}${total ? ` of ${mib(total)}` : ''}`),
    });
    pause();
    source?.dispose(); // the sessions of the model going
    source = null;
    llama?.free();
    llama = loaded;
    llama.name = name;
    $('source').value = 'model';
    reset();
  } catch (error) {
    const still = llama ? `; still running ${llama.name}` : '';
    setStatus(error instanceof GgufError ? `${name} is not usable: ${error.message}${still}` : `${name}: ${error.message}${still}`, true);
  }
}

$('model-file').addEventListener('change', async (event) => {
  const file = event.target.files[0];
  if (file) await useModel(file, file.name);
});
document.addEventListener('dragover', (event) => event.preventDefault());
document.addEventListener('drop', async (event) => {
  event.preventDefault();
  const file = event.dataTransfer?.files[0];
  if (file) await useModel(file, file.name);
});

$('start').addEventListener('click', () => (running ? pause() : start()));
$('step').addEventListener('click', () => {
  pause();
  stepOnce();
});
$('reset').addEventListener('click', reset);
for (const id of ['source', 'mode', 'draft', 'heads', 'head-dim', 'context', 'batch']) $(id).addEventListener('change', reset);
$('prompt').addEventListener('change', reset);
$('speed').addEventListener('input', () => { $('speed-value').textContent = `${$('speed').value}/s`; });
$('budget').addEventListener('input', () => {
  $('budget-value').textContent = $('budget').value;
  applyBound();
  draw();
});
$('bound').addEventListener('change', applyBound);
$('evict').addEventListener('click', evictNow);
$('branch').addEventListener('click', branchNow);

// What the browser test reads: the live state next to what the page shows.
window.demo = {
  ready: (async () => {
    await init();
    const found = await (await fetch('/api/models')).json();
    if (found['stories260k.gguf']) {
      llama = await Llama.load(await fetch('/models/stories260k.gguf'));
      llama.name = 'stories260K';
    } else {
      $('source').value = 'synthetic';
    }
    reset();
    document.body.dataset.kernels = kernelIsa();
    return { model: Boolean(llama) };
  })(),
  snapshot() {
    const memory = source ? source.memory() : {};
    return {
      source: source?.kind ?? null,
      running,
      tokens: source?.stats.tokens ?? 0,
      seqLen: source?.seqLen ?? 0,
      stats: source ? { ...source.stats } : null,
      seqLenWentDown: observed.seqLenWentDown,
      finished: observed.finished,
      memoryBytes: memory,
      displayedBytes: Object.fromEntries(MODES.map((m) => [m, Number(document.querySelector(`[data-memory-mode="${m}"]`).dataset.bytes)])),
      chartPoints: Object.fromEntries(MODES.map((m, i) => [m, charts.memory.data[i + 1].filter((v) => v != null).length])),
      position: source?.position ?? 0,
      verifying: source ? source.shownLayer().verifying : false,
      evictions: observed.evictions,
      // Rows held per layer and the positions each holds, as the caches report them.
      rows: source ? source.layers().map((layer) => layer.seqLen) : [],
      shownPositions: source ? Array.from(source.shownLayer().positions()) : [],
      importance: { ...shownImportance },
      threads: threadInfo(),
      timing: { ...timing },
      errors: pageErrors.slice(),
      branches: { ...branchView, texts: branchView.texts.slice() },
    };
  },
};
window.demo.ready.catch((error) => setStatus(`could not start: ${error.message}`, true));

// The live demo: a chat with a GGUF model (stories260K when it is found
// beside the project, or a file picked or dropped) -- with its projector
// (an mmproj GGUF), pictures dropped or picked go with a message -- or a
// synthetic stream of model-sized shapes, drives this package's caches in
// every mode, and the panels show what they hold and cost as it runs, and
// what branches forked from them share. The search panel ranks paragraphs
// for a question with an embedding model and a reranker in the same worker.
// It imports the package as any app would: 'kvcache-wasm', 'kvcache-wasm/llama',
// 'kvcache-wasm/worker' and 'kvcache-wasm/chat' (see the import map in
// index.html). The chat runs in a worker (LlamaWorker, a Chat over its
// RemoteSession); the panels read a replica of it on this page (replica.js).
import init, { LayerKvCache, kernelIsa, memoryStats, setThreadLimit, threadInfo } from 'kvcache-wasm';
import { EMBEDDING_PROMPTS, Llama, ModelStore } from 'kvcache-wasm/llama';
import { LlamaWorker } from 'kvcache-wasm/worker';
import { Chat, ChatTemplate, PLAIN_TEMPLATE } from 'kvcache-wasm/chat';
import uPlot from 'uplot';
import { normals, outlierKeys, rng } from '/support/synthetic.mjs';
import { ChatReplica } from './replica.js';

// The modes drawn side by side: f32, the q8 ones, 4-bit both, and 8-bit keys with 4-bit values.
const MODES = ['f32', 'q8', 'q8k', 'q8v', 'q4', 'q8k+q4v'];
const QUANTIZED = MODES.filter((m) => m !== 'f32');
const COLORS = {
  f32: '#3b6fd4', q8: '#d6453d', q8k: '#e69a28', q8v: '#2f9e58', q4: '#b03aa8', 'q8k+q4v': '#1f9aa8', imp: '#9aa3b0', kept: '#7c4dd6',
  'global layer': '#3b6fd4', 'window layer': '#2f9e58',
};
const LAYER_KINDS = ['global layer', 'window layer'];
const emptySeries = (count) => Array.from({ length: count + 1 }, () => []);
const SINKS = 4; // eviction keeps the first positions: attention sinks
const MAX_STREAM_TOKENS = 600;
// A model file up to this size also loads on this page, for the panels' replica; a larger one only chats.
const REPLICA_MAX_BYTES = 32 * 2 ** 20;
const DEFAULT_MODEL_URL = '/models/stories260k.gguf';
const DEFAULT_PROJECTOR_URL = '/models/mmproj.gguf';
// Real models by their Hugging Face names (the file of that quantization in that repository, as llama.cpp's -hf
// picks it), the size of that file, about, and what each is for (a chat, or the search panel's embedding model or
// reranker): what the catalogue offers to download into the store.
const CATALOGUE = [
  { label: 'SmolLM2-135M-Instruct', name: 'hf:unsloth/SmolLM2-135M-Instruct-GGUF:Q8_0', bytes: 145e6, kind: 'chat' },
  { label: 'Qwen3.5-0.8B', name: 'hf:unsloth/Qwen3.5-0.8B-GGUF:Q4_K_M', bytes: 0.5e9, kind: 'chat' },
  { label: 'LFM2.5-1.2B-Instruct', name: 'hf:LiquidAI/LFM2.5-1.2B-Instruct-GGUF:Q4_K_M', bytes: 0.7e9, kind: 'chat' },
  { label: 'Gemma 3 1B', name: 'hf:unsloth/gemma-3-1b-it-GGUF:Q4_K_M', bytes: 806e6, kind: 'chat' },
  { label: 'Gemma 4 E2B', name: 'hf:unsloth/gemma-4-E2B-it-GGUF:Q4_K_M', bytes: 3.2e9, kind: 'chat' },
  { label: 'EmbeddingGemma-300M', name: 'hf:ggml-org/embeddinggemma-300M-GGUF:Q8_0', bytes: 329e6, kind: 'embedding' },
  { label: 'Qwen3-Reranker-0.6B', name: 'hf:ggml-org/Qwen3-Reranker-0.6B-Q8_0-GGUF:Q8_0', bytes: 639e6, kind: 'reranker' },
];
const FRAME_MS = 16;

const $ = (id) => document.getElementById(id);
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(bytes < 2 ** 20 ? 3 : 2)} MiB`;
const byteLabel = (bytes) => (bytes < 2 ** 20 ? `${(bytes / 1024).toFixed(0)} KiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`);

// ---------------------------------------------------------------------------
// Charts (uPlot)

// Whole-number steps for axes that count tokens or positions (uPlot's own include fractions).
const WHOLE_STEPS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 50000, 100000];
// What each axis last labelled its ticks with, for the browser test.
const tickLabels = {};

const hasData = (u) => u.data[0].length > 0;

/** Axis labels for byte counts: one unit for the axis (the largest tick's), as many decimals as tell the ticks apart. */
function byteTicks(u, ticks) {
  if (!hasData(u)) return ticks.map(() => '');
  const top = Math.max(...ticks.map((v) => Math.abs(v)));
  const [unit, name] = top >= 2 ** 20 ? [2 ** 20, 'MiB'] : top >= 1024 ? [1024, 'KiB'] : [1, 'B'];
  const step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : top;
  const decimals = step > 0 && unit > 1 ? Math.max(0, Math.min(3, Math.ceil(-Math.log10(step / unit)))) : 0;
  return ticks.map((v) => `${(v / unit).toFixed(decimals)} ${name}`);
}

// A log axis leaves some ticks out (null).
const expTicks = (u, ticks) => (hasData(u) ? ticks.map((v) => (v == null ? '' : v.toExponential(0))) : ticks.map(() => ''));
const wholeTicks = (u, ticks) => (hasData(u) ? ticks.map((v) => String(Math.round(v))) : ticks.map(() => ''));

function recorded(name, format) {
  return (u, ticks, ...rest) => {
    const labels = format(u, ticks, ...rest);
    tickLabels[name] = labels.filter((label) => label !== '');
    return labels;
  };
}

// No data: an x range of its own, not the last run's.
const xRange = (u, min, max) => (min == null || !hasData(u) ? [0, 1] : [min, max > min ? max : min + 1]);

function chart(element, name, { series, xLabel, yLabel, yValues, log = false, bars = false }) {
  const width = () => Math.max(200, element.clientWidth);
  const options = {
    width: width(),
    height: 220,
    legend: { live: false },
    scales: { x: { time: false, range: xRange }, y: log ? { distr: 3 } : { range: (u, min, max) => [0, max > 0 ? max * 1.05 : 1] } },
    axes: [
      { label: xLabel, incrs: WHOLE_STEPS, values: recorded(`${name}.x`, wholeTicks) },
      { label: yLabel, values: recorded(`${name}.y`, yValues), size: 70 },
    ],
    series: [{ label: xLabel }, ...series.map((label) => ({
      label,
      stroke: COLORS[label],
      dash: label === 'q8v' ? [6, 4] : undefined, // q8k and q8v often coincide
      fill: bars ? COLORS[label] : undefined,
      width: bars ? 0 : 2,
      points: { show: false },
      paths: bars ? uPlot.paths.bars({ size: [1, Infinity], gap: 0 }) : undefined,
    }))],
  };
  const plot = new uPlot(options, [[], ...series.map(() => [])], element);
  // Only a new width resizes the plot, on the next frame: resizing within
  // the observer's callback would change what it observes (a loop).
  let drawnWidth = options.width;
  const observer = new ResizeObserver(() => {
    if (width() === drawnWidth) return;
    drawnWidth = width();
    requestAnimationFrame(() => plot.setSize({ width: drawnWidth, height: 220 }));
  });
  observer.observe(element);
  return { plot, observer };
}

// The accuracy axis names its metric, which depends on the source: made again when the source changes.
const ACCURACY_METRIC = {
  model: 'KL vs f32 (nats)',
  synthetic: 'rel. error vs f32',
};
const charts = {
  memory: chart($('memory-chart'), 'memory', { series: MODES, xLabel: 'tokens', yLabel: 'bytes held', yValues: byteTicks }).plot,
  layers: chart($('layers-chart'), 'layers', { series: LAYER_KINDS, xLabel: 'positions', yLabel: 'rows held', yValues: (u, t) => (hasData(u) ? t.map(String) : t.map(() => '')) }).plot,
  importance: chart($('importance-chart'), 'importance', { series: ['imp', 'kept'], xLabel: 'position', yLabel: 'attention received', yValues: (u, t) => (hasData(u) ? t.map(String) : t.map(() => '')), bars: true }).plot,
  accuracy: null,
};
let accuracyChart = null;
function makeAccuracyChart(kind) {
  if (accuracyChart?.kind === kind) return;
  accuracyChart?.observer.disconnect();
  accuracyChart?.plot.destroy();
  accuracyChart = { kind, ...chart($('accuracy-chart'), 'accuracy', { series: QUANTIZED, xLabel: 'tokens', yLabel: ACCURACY_METRIC[kind], log: true, yValues: expTicks }) };
  charts.accuracy = accuracyChart.plot;
}
makeAccuracyChart('model');

// Series data, appended per step, drawn with the page's numbers once per animation frame.
// layers: a windowed model's rows per layer kind, from the worker's cacheStats after each reply.
const series = { memory: emptySeries(MODES.length), accuracy: emptySeries(QUANTIZED.length), layers: emptySeries(LAYER_KINDS.length) };
let drawPending = false;
function draw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => {
    drawPending = false;
    render();
    charts.memory.setData(series.memory);
    charts.layers.setData(series.layers);
    charts.accuracy.setData(series.accuracy);
    drawImportance();
  });
}

/** A point for the charts: x, the memory of every mode now, the accuracy of each quantized mode (or none). */
function pushPoint(point) {
  if (!point || !source) return;
  const memory = source.memory();
  series.memory[0].push(point.x);
  MODES.forEach((m, i) => series.memory[i + 1].push(memory[m] ?? null));
  series.accuracy[0].push(point.x);
  QUANTIZED.forEach((m, i) => series.accuracy[i + 1].push(point.accuracy?.[i] ?? null));
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
// The synthetic source: each step() does one step of work and reports what to show.

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

  timeStep() {
    timeLayerStep(this.caches[this.mode], QUERY_HEADS_PER_KV * this.heads * this.headDim, this.random);
  }

  dispose() {
    for (const cache of Object.values(this.caches)) cache.free();
  }
}
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
  if (!source) {
    Object.assign(shownImportance, { positions: [], kept: [] });
    charts.importance.setData([[], [], []]);
    return;
  }
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
  const count = readInteger('branch-count');
  const tokens = readInteger('branch-tokens');
  const refused = [count, tokens].filter((x) => x.error);
  if (refused.length > 0) return refuse(refused.map((x) => x.error));
  refuse([]);
  if (source.kind === 'synthetic') {
    pause();
    // A cache mid-verify cannot fork: close the verify first.
    for (let i = 0; i < 20 && source.shownLayer().verifying; i++) stepOnce();
  } else if (source.lastToken === null) {
    return;
  }
  dropBranches();
  const before = memoryStats().cacheBytes;
  for (let i = 0; i < count.value; i++) branches.push(source.branch(i, tokens.value));
  Object.assign(branchView, {
    count: count.value,
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

/**
 * One whole-layer step (attendHeads, `queryLength` query floats) of `layer`
 * on every thread and on one (setThreadLimit(1)): the best of a few of
 * each, interleaved.
 */
function timeLayerStep(layer, queryLength, random) {
  const q = normals(random, queryLength);
  const into = { out: new Float32Array(q.length) };
  const all = threadInfo().threads;
  const best = { all: Infinity, one: Infinity };
  for (let round = 0; round < 3; round++) {
    for (const [key, limit] of [['all', all], ['one', 1]]) {
      setThreadLimit(limit);
      const t0 = performance.now();
      layer.attendHeads(q, into);
      best[key] = Math.min(best[key], performance.now() - t0);
    }
  }
  setThreadLimit(all);
  Object.assign(timing, { all: best.all, one: best.one, rows: layer.seqLen });
}

function renderThreads() {
  const info = threadInfo();
  $('threads').textContent = String(info.threads);
  $('threads-note').textContent = info.reason ? `Fewer threads than cores: ${info.reason}.` : '';
  const ms = (x) => (x === null ? '–' : `${x.toFixed(2)} ms`);
  $('step-all').textContent = timing.all === null ? '–' : `${ms(timing.all)} (${timing.rows} rows)`;
  $('step-one').textContent = ms(timing.one);
  $('speedup').textContent = timing.all ? `${(timing.one / timing.all).toFixed(2)}×` : '–';
  $('threads-worker').textContent = workerInfo ? `${workerInfo.threadInfo.threads} (${workerInfo.kernelInfo.isa})` : '–';
}

// ---------------------------------------------------------------------------
// Inputs: read as given, or refused (never clamped to something else)

/** The integer an input holds, within its min, max and step; or { error } saying why not. */
function readInteger(id) {
  const input = $(id);
  const name = input.closest('label')?.firstChild?.textContent.trim() || id;
  const value = Number(input.value);
  if (input.value === '' || !input.checkValidity() || !Number.isInteger(value)) {
    const { min, max } = input;
    return { error: `${name} must be a whole number from ${min} to ${max} (got ${input.value === '' ? 'nothing' : JSON.stringify(input.value)})` };
  }
  return { value };
}

/** A number input within its min and max; or { error }. */
function readNumber(id) {
  const input = $(id);
  const name = input.closest('label')?.firstChild?.textContent.trim() || id;
  const value = Number(input.value);
  if (input.value === '' || !Number.isFinite(value) || value < Number(input.min) || value > Number(input.max)) {
    return { error: `${name} must be a number from ${input.min} to ${input.max} (got ${input.value === '' ? 'nothing' : JSON.stringify(input.value)})` };
  }
  return { value };
}

/** Shows what was refused, and what runs instead, in the one place for it (empty: nothing refused). */
function refuse(errors) {
  const note = $('input-note');
  note.textContent = errors.length ? `Refused: ${errors.join('; ')}. ${runningNow()}` : '';
  note.hidden = errors.length === 0;
  observed.refused = errors.slice();
}

/** The settings a new run takes: { values } or { errors }. */
function settings(kind) {
  const fields = kind === 'synthetic'
    ? { draft: readInteger('draft'), heads: readInteger('heads'), headDim: readInteger('head-dim'), batch: readInteger('batch') }
    : { draft: readInteger('draft') };
  const errors = Object.values(fields).filter((f) => f.error).map((f) => f.error);
  if (errors.length) return { errors };
  const values = Object.fromEntries(Object.entries(fields).map(([k, f]) => [k, f.value]));
  return { values: { ...values, mode: $('mode').value, context: Number($('context').value) } };
}

/** What runs now, in words: the status line's text. */
function runningNow() {
  if (source?.kind === 'synthetic') {
    return `Running: synthetic, ${source.heads} KV heads × head_dim ${source.headDim}, ${source.mode}, draft k ${source.draft}, batch ${source.batch}.`;
  }
  if (!chat) return model ? `Chat: ${model.name}, no chat open.` : 'Nothing runs.';
  const panelsOff = model.projector ? ' (with its projector, in the worker only: the panels are off)' : ' (too large to re-run on this page: the panels are off)';
  return `Chat: ${model.name}, ${chatSettings.mode} cache, draft k ${chatSettings.draft}${source ? '' : panelsOff}.`;
}

// ---------------------------------------------------------------------------
// The chat: a Chat over a RemoteSession of the worker's model; the replica
// (replica.js) follows it on this page for the panels.

let worker = null;
let workerInfo = null; // what init() gave in the worker: { kernelInfo, threadInfo }
let model = null; // { name, remote: RemoteLlama, local: Llama | null, template: { source, plain } }
let chat = null;
let chatSettings = null; // the open chat's { mode, draft }
let reply = null; // the reply under way: { controller, done }
const chatLog = $('chat-log');
const chatView = { replies: [], notices: [], sentImages: [] }; // what the transcript shows, for the browser test

/** A message in the transcript: its text, after thumbnails of its pictures (object URLs) or, restored, a word for each. */
function addMessage(role, text, { images = [], restoredImages = [] } = {}) {
  const item = document.createElement('div');
  item.className = `message ${role}`;
  const who = document.createElement('span');
  who.className = 'who';
  who.textContent = role === 'user' ? 'you' : model.name;
  const body = document.createElement('span');
  body.className = 'text';
  body.textContent = text;
  if (images.length === 0 && restoredImages.length === 0) {
    item.append(who, body);
  } else {
    const column = document.createElement('span');
    column.className = 'body';
    const strip = document.createElement('span');
    strip.className = 'images';
    strip.append(...images.map(({ url, name }) => Object.assign(document.createElement('img'), { src: url, alt: name, className: 'thumb' })),
      ...restoredImages.map(({ width, height }) => Object.assign(document.createElement('span'), { textContent: `[a ${width}×${height} picture]` })));
    column.append(strip, body);
    item.append(who, column);
  }
  chatLog.append(item);
  chatLog.scrollTop = chatLog.scrollHeight;
  return body;
}

// ---------------------------------------------------------------------------
// Pictures for the next message: each shown with the positions it will take
// (imageTokenCount, from its size), sent with the text as content parts; the
// worker decodes the File itself (RemoteLlama#prepareImage).

let attachments = []; // { file, url, name, width, height, count: { image, markers, total } }

/** Shows what goes with the next message; a note says what each picture costs the context. */
function renderAttachments() {
  $('attachments').hidden = attachments.length === 0;
  $('attachments').replaceChildren(...attachments.map((attachment) => {
    const item = document.createElement('span');
    item.className = 'attachment';
    const remove = Object.assign(document.createElement('button'), { type: 'button', textContent: '×', title: 'Remove' });
    remove.addEventListener('click', () => {
      attachments = attachments.filter((a) => a !== attachment);
      URL.revokeObjectURL(attachment.url);
      renderAttachments();
    });
    const { name, width, height, count } = attachment;
    const words = Object.assign(document.createElement('span'), {
      textContent: `${name}: ${width}×${height}, ${count.total} positions (${count.image} from the encoder, ${count.markers} of markers)`,
    });
    item.append(Object.assign(document.createElement('img'), { src: attachment.url, alt: name, className: 'thumb' }), words, remove);
    return item;
  }));
}

function clearAttachments() {
  for (const { url } of attachments) URL.revokeObjectURL(url);
  attachments = [];
  renderAttachments();
  $('image-pick').hidden = !model?.projector;
}

/** A picture for the next message, refused (saying why) without a projector or when it does not decode. */
async function attachImage(file) {
  await started;
  if (!model?.projector) return refuse([`${file.name} is a picture, and ${model ? model.name : 'no model'} has no projector to see it: load its mmproj GGUF first`]);
  const url = URL.createObjectURL(file);
  try {
    const img = new Image();
    img.src = url;
    await img.decode();
    const [width, height] = [img.naturalWidth, img.naturalHeight];
    const count = await model.remote.imageTokenCount({ width, height });
    attachments.push({ file, url, name: file.name, width, height, count });
    refuse([]);
    renderAttachments();
  } catch (error) {
    URL.revokeObjectURL(url);
    refuse([`${file.name} was not attached: ${error.message || 'it does not decode as a picture'}`]);
  }
}

/** A message's content as the transcript shows it: its text parts, and its images. */
function shownContent(content) {
  if (typeof content === 'string') return { text: content, images: [] };
  return { text: content.filter((p) => p.type === 'text').map((p) => p.text).join('\n'), images: content.filter((p) => p.type === 'image').map((p) => p.image) };
}

/** A line in the transcript saying how a reply ended, or what was refused. */
function addNotice(text, kind) {
  const item = document.createElement('p');
  item.className = `notice ${kind}`;
  item.textContent = text;
  chatLog.append(item);
  chatLog.scrollTop = chatLog.scrollHeight;
  chatView.notices.push({ kind, text });
}

function contextPolicy() {
  return $('context-policy').value;
}

/** Why a reply ended, in words; the context's end says the policy that ended it. */
function endText(stop, stats) {
  const { contextLength } = model.remote.config;
  switch (stop) {
    case 'context': return `The context is full: ${contextLength} of ${contextLength} positions. Policy "stop": the reply ends here. ` +
      'New chat starts over; the policy "slide" keeps the first 4 positions and the newest instead.';
    case 'abort': return `Stopped: the reply is kept as far as it came (${stats.tokens} tokens).`;
    case 'end': return `The model ended its reply (${stats.tokens} tokens).`;
    case 'maxTokens': return `Max tokens reached (${stats.tokens}).`;
    default: return `Stopped at a stop string (${stats.tokens} tokens).`;
  }
}

/** The worker's own figures for the session: its cacheStats, and the last reply's stats. */
async function showWorkerCache() {
  if (!chat) return;
  const stats = await chat.session.cacheStats();
  const { contextLength } = model.remote.config;
  observed.workerCache = stats;
  const slid = stats.rows < stats.nextPosition;
  // A windowed model (gemma3): its global layers' rows grow, its window layers' stay flat.
  const windows = stats.windowLayers
    ? `; its ${stats.windowLayers} sliding-window layers hold ${stats.windowRows} rows each at most, however long the chat` : '';
  $('layers-block').hidden = !stats.windowLayers;
  if (stats.windowLayers && series.layers[0].at(-1) !== stats.nextPosition) {
    [stats.nextPosition, stats.rows, stats.windowRows].forEach((value, i) => series.layers[i].push(value));
    draw();
  }
  $('context-meter').textContent = `worker's cache: ${stats.rows} of ${contextLength} rows held, ${stats.nextPosition} positions taken in` +
    `${slid ? ' (slid: the first 4 and the newest kept)' : ''}${windows}, ${byteLabel(stats.memoryBytes)}`;
}

function showReplyStats(stats) {
  observed.workerStats = stats;
  $('worker-stats').textContent = stats
    ? `The worker's last reply: ${stats.tokens} tokens in ${stats.forwardPasses} forward passes, ` +
      `${stats.accepted}/${stats.drafted} drafts kept, ${stats.rollbacks} rollbacks, ${stats.seconds.toFixed(2)} s.`
    : '';
}

function chatControls() {
  const busy = reply !== null;
  $('send').disabled = busy || !chat;
  $('stop').disabled = !busy;
  $('chat-input').disabled = !chat;
}

// What the replay shows of the worker's speculative decoding (replica.js advance()).
let replayDecoder = null;
let replayPeak = 0;
const replayEvents = {
  onDrafts(drafts) {
    replayPeak = source.seqLen;
    showDrafts(drafts.map((id) => draftLabel(id)));
  },
  onAccept(accepted) {
    if (source.seqLen < replayPeak) observed.seqLenWentDown = true;
    resolveDrafts(accepted);
  },
  onToken(id) {
    addSpan(replayDecoder.push(id));
    if (source.stats.forwardPasses % TIMING_EVERY === 1) timeLayerStep(source.shownLayer(), model.local.config.numHeads * model.local.config.headDim, timingRandom);
  },
};
const timingRandom = rng(2027);

function draftLabel(id) {
  const decoder = model.local.tokenizer.decoder();
  return decoder.push(id) + decoder.flush();
}

/** With JSON on: the schema the editor holds, parsed ({ value } or { error }); off: { value: null }. */
function jsonSchema() {
  if (!$('json-mode').checked) return { value: null };
  try {
    return { value: JSON.parse($('json-schema').value) };
  } catch (error) {
    return { error: `the JSON Schema is not JSON (${error.message})` };
  }
}

/** Sends the input's text and streams the reply into the transcript; the replica follows each token. */
async function send() {
  if (reply || !chat) return;
  const text = $('chat-input').value;
  const maxTokens = readInteger('max-tokens');
  const temperature = readNumber('temperature');
  const schema = jsonSchema();
  const refused = [maxTokens, temperature, schema].filter((x) => x.error);
  if (refused.length) return refuse(refused.map((x) => x.error));
  refuse([]);
  $('chat-input').value = '';
  const images = attachments;
  attachments = [];
  renderAttachments();
  const controller = new AbortController();
  const context = contextPolicy();
  const options = { signal: controller.signal, maxTokens: maxTokens.value, temperature: temperature.value, seed: chatView.replies.length + 1, context };
  // A constrained reply does not draft: the matcher takes one token a step.
  if (schema.value) options.responseFormat = { type: 'json_schema', schema: schema.value };
  else if (chatSettings.draft > 0) options.draft = chatSettings.draft;
  let done;
  reply = { controller, done: new Promise((resolve) => { done = resolve; }) };
  chatControls();
  // Pictures go before the text, as llama.cpp's mtmd-cli puts them.
  const content = images.length ? [...images.map(({ file }) => ({ type: 'image', image: file })), { type: 'text', text }] : text;
  const messages = [...chat.messages, { role: 'user', content }];
  addMessage('user', text, { images });
  chatView.sentImages.push(...images.map(({ name, width, height, count }) => ({ name, width, height, positions: count.total })));
  const body = addMessage('assistant', '');
  const shown = { text: '', pieces: 0, tokens: 0, stop: null };
  chatView.replies.push(shown);
  try {
    if (source?.kind === 'model') {
      // The conversation's ids as the worker's session takes them (LlamaSession#respond).
      const rendered = model.template.engine.render(messages, { addGenerationPrompt: true });
      const ids = model.local.tokenizer.encode(rendered, { special: true, bos: false });
      source.setContextPolicy(context);
      pushPoint(source.beginTurn(ids, { maxTokens: maxTokens.value }));
      addSpan(`${stream.childElementCount ? '\n' : ''}${text}\n`, 'prompt');
      replayDecoder = model.local.tokenizer.decoder({ after: ids });
    }
    let stats = null;
    let yielded = performance.now();
    for await (const piece of chat.send(messages, options)) {
      shown.pieces++;
      shown.tokens += piece.tokens.length;
      shown.text += piece.text;
      body.textContent = shown.text;
      if (source?.kind === 'model') for (const id of piece.tokens) pushPoint(source.token(id, replayEvents));
      if (piece.stop) ({ stop: shown.stop, stats } = piece);
      draw();
      // Pieces the worker sent while the replica worked come as one backlog, which the loop
      // would take without letting the page paint or see a click: a task's turn once a frame.
      if (performance.now() - yielded > FRAME_MS) {
        await new Promise((resolve) => setTimeout(resolve, 0));
        yielded = performance.now();
      }
      // Stop ends the reply where the page shows it: the worker may have sent the rest (all of
      // it, when it finished first), which this page would take seconds to re-run and show.
      if (controller.signal.aborted && !piece.stop) {
        shown.stop = 'abort';
        break;
      }
    }
    if (source?.kind === 'model') {
      source.endTurn(replayEvents);
      await syncReplica();
    }
    // A reply cut short on this page has no stats of the worker's: the notice counts the tokens shown.
    addNotice(endText(shown.stop, stats ?? { tokens: shown.tokens }), shown.stop === 'context' ? 'policy' : 'end');
    showReplyStats(stats);
    await showWorkerCache();
  } catch (error) {
    // A turn refused before its first piece (a message longer than the context) leaves the chat as it was.
    if (shown.pieces === 0 && (error instanceof RangeError || error instanceof TypeError)) {
      addNotice(`Refused: ${error.message}`, 'refused');
      if (source?.kind === 'model') await syncReplica();
    } else {
      addNotice(`The reply failed: ${error.message}`, 'failed');
      pageErrors.push(`reply: ${error.message}`);
    }
  } finally {
    await saveChat();
    reply = null;
    done();
    chatControls();
    render();
    draw();
  }
}

/** The replica set to the worker's session: its tokens, and how many of them its cache holds. */
async function syncReplica() {
  const [tokens, { nextPosition }] = await Promise.all([chat.session.tokens(), chat.session.cacheStats()]);
  source.syncTo(tokens, nextPosition);
}

/** Aborts the reply under way, if any, and waits for it to end. */
async function stopReply() {
  if (!reply) return;
  const { controller, done } = reply;
  controller.abort();
  await done;
}

/** Ends the chat: closed before it is freed, so that the page's state never shows it open beside another model. */
async function closeChat() {
  const closing = chat;
  chat = null;
  await closing?.free();
  clearPanels();
}

/**
 * A new chat on the model: a fresh worker session, and a fresh replica
 * beside it. With `restore`, the conversation saved for this model (after
 * each reply) comes back instead, the replica brought to its tokens; a new
 * chat otherwise drops what was saved.
 */
async function newChat({ restore = false } = {}) {
  await stopReply();
  const chosen = settings('model');
  if (chosen.errors) return refuse(chosen.errors);
  refuse([]);
  await closeChat();
  for (const img of chatLog.querySelectorAll('img.thumb')) URL.revokeObjectURL(img.src);
  chatLog.replaceChildren();
  chatView.replies = [];
  chatView.notices = [];
  chatView.sentImages = [];
  showReplyStats(null);
  const { mode, draft } = chosen.values;
  chatSettings = { mode, draft };
  chat = restore ? await restoredChat() : null;
  if (!chat && model.conversation) await store.deleteConversation(model.conversation);
  chat ??= new Chat(await model.remote.session({ mode }));
  source = model.local ? new ChatReplica(model.local, { mode, modes: MODES, draft, context: contextPolicy() }) : null;
  if (source) applyBound();
  observed.restored = chat.messages.length;
  if (observed.restored > 0) {
    for (const m of chat.messages) {
      const { text, images } = shownContent(m.content);
      if (m.role !== 'system') addMessage(m.role, text, { restoredImages: images });
    }
    addNotice(`The conversation of your last visit, restored from the store: ${chat.messages.length} messages, its cache as it was.`, 'end');
    if (source) await syncReplica();
  }
  $('template-note').textContent = model.template.plain
    ? `${model.name} has no chat template (a base model): the chat uses the package's plain template, PLAIN_TEMPLATE — ` +
      `the begin token, then each message on a line of its own: ${PLAIN_TEMPLATE}`
    : `${model.name}'s own chat template (tokenizer.chat_template), rendered with @huggingface/jinja.`;
  $('replica-note').textContent = model.projector
    ? `${model.name} runs with its projector in the worker only: the panels stay empty (the page's replica takes no images); ` +
      'the worker\'s cacheStats and reply stats show.'
    : model.local
    ? 'To show what the cache does, this page loads the model too and re-runs each reply\'s tokens through a cache in every mode: ' +
      'the panels below show their memory, and their accuracy against f32 on the same text. The worker\'s speculative decoding is ' +
      'replayed on a cache in the chosen mode (the same guessed tokens, kept while they equal the tokens the worker wrote). ' +
      'The worker\'s own figures: its cache\'s size and each reply\'s statistics. The page runs every token through seven caches, ' +
      'the worker through one, so on a slow machine a reply shows more slowly than the worker writes it; Stop ends it where it is.'
    : `${model.name} is over ${REPLICA_MAX_BYTES / 2 ** 20} MiB: it runs in the worker only, and the panels stay empty ` +
      '(only the worker\'s cacheStats and reply stats show).';
  setStatus(runningNow());
  await showWorkerCache();
  chatControls();
  render();
  draw();
}

/** The conversation saved for this model, restored in the worker; null when there is none (or it does not restore). */
async function restoredChat() {
  if (!model.conversation) return null;
  try {
    return await Chat.restore(model.remote, model.conversation, { store });
  } catch (error) {
    if (!/no conversation is saved/.test(error.message)) addNotice(`The saved conversation did not restore: ${error.message}`, 'refused');
    return null;
  }
}

/**
 * Saves the conversation under this model's name (after each reply), when
 * the model came through the store -- not one with pictures, whose rows
 * live only as long as the worker's model.
 */
async function saveChat() {
  if (!model?.conversation || !chat || chat.messages.some((m) => shownContent(m.content).images.length > 0)) return;
  try {
    await chat.save(model.conversation, { store });
  } catch (error) {
    addNotice(`The conversation was not saved: ${error.message}`, 'refused');
  }
}

/** The store's models, each with its size and buttons to use or delete it. */
async function showStored() {
  if (!store) {
    $('stored').hidden = true;
    return;
  }
  const models = await store.list();
  const { bytes, available } = await store.usage();
  $('stored-usage').textContent = `— ${byteLabel(bytes)} stored${available === null ? '' : `, ${byteLabel(available)} free`}`;
  observed.stored = models.map((m) => ({ key: m.key, size: m.size, stored: m.stored, complete: m.complete }));
  $('stored-list').replaceChildren(...models.map((m) => {
    const item = document.createElement('li');
    const name = document.createElement('strong');
    // A model downloaded by its Hugging Face name shows it; another, its file's name.
    name.textContent = m.name ?? decodeURIComponent(new URL(m.key).pathname.split('/').pop());
    const size = document.createElement('span');
    size.className = 'size';
    size.textContent = m.complete ? byteLabel(m.size) : `${byteLabel(m.stored)} of ${m.size ? byteLabel(m.size) : '?'} (partial: the next load resumes)`;
    const use = document.createElement('button');
    use.type = 'button';
    use.textContent = 'Use';
    use.addEventListener('click', () => useModel(m.key, name.textContent, m.size, catalogueOptions()));
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.textContent = 'Delete';
    remove.dataset.key = m.key;
    remove.addEventListener('click', async () => {
      await store.delete(m.key);
      await showStored();
      await showCatalogue();
    });
    item.append(name, size, use, remove);
    return item;
  }));
}

// ---------------------------------------------------------------------------
// The catalogue: real models by their Hugging Face names, each downloaded
// into the store with one click (and resumed by the next, when a download
// was cut), then chatted with, or given to the search panel. `hfEndpoint`
// is where the names resolve: the server says (npm start -- --hf-endpoint),
// else the Hub.

let hfEndpoint = null;
let downloading = null; // { name, loaded, total } of the catalogue's download under way

/** A file's size as the Hub shows it: decimal MB or GB. */
const decimalSize = (bytes) => (bytes >= 1e9 ? `${(bytes / 1e9).toFixed(1)} GB` : `${(bytes / 1e6).toFixed(bytes < 1e7 ? 1 : 0)} MB`);

/** The huggingFace option of a catalogue's load: the server's endpoint, when it names one. */
function catalogueOptions() {
  return hfEndpoint ? { huggingFace: { endpoint: hfEndpoint } } : {};
}

/** Each entry of the catalogue with what the store holds of it (its parts listed under its name) and a button. */
async function showCatalogue() {
  const models = store ? await store.list() : [];
  $('catalogue-endpoint').textContent = hfEndpoint ? `The names resolve at ${hfEndpoint}.` : '';
  observed.catalogue = CATALOGUE.map((entry) => {
    const parts = models.filter((m) => m.name === entry.name);
    const stored = parts.reduce((sum, m) => sum + m.stored, 0);
    const size = parts.length > 0 && parts.every((m) => m.size !== null) ? parts.reduce((sum, m) => sum + m.size, 0) : null;
    const state = downloading?.name === entry.name ? 'downloading'
      : parts.length === 0 ? 'absent' : parts.every((m) => m.complete) ? 'stored' : 'partial';
    return { ...entry, state, stored, size };
  });
  $('catalogue-list').replaceChildren(...observed.catalogue.map((entry) => {
    const item = document.createElement('li');
    item.dataset.name = entry.name;
    const label = document.createElement('strong');
    label.textContent = entry.label;
    const name = document.createElement('code');
    name.textContent = entry.name;
    const size = document.createElement('span');
    size.className = 'size';
    size.textContent = entry.size === null ? `about ${decimalSize(entry.bytes)}` : decimalSize(entry.size);
    const kind = document.createElement('span');
    kind.className = 'kind';
    kind.textContent = entry.kind;
    const state = document.createElement('span');
    state.className = 'state';
    state.textContent = {
      downloading: `downloading: ${byteLabel(downloading?.loaded ?? 0)}${downloading?.total ? ` of ${byteLabel(downloading.total)}` : ''}`,
      absent: store ? 'not downloaded' : 'no store in this browser: downloaded at each use',
      stored: 'stored',
      partial: `partial: ${byteLabel(entry.stored)}${entry.size ? ` of ${byteLabel(entry.size)}` : ''} (the next click resumes)`,
    }[entry.state];
    const button = document.createElement('button');
    button.type = 'button';
    button.textContent = { stored: entry.kind === 'chat' ? 'Chat' : 'Use', partial: 'Resume', absent: 'Download', downloading: 'Downloading…' }[entry.state];
    button.disabled = downloading !== null;
    button.addEventListener('click', () => useCatalogue(entry));
    item.append(label, kind, name, size, state, button);
    return item;
  }));
}

/** Downloads (or resumes, or reads from the store) a catalogue entry and chats with it, or gives it to the search panel. */
async function useCatalogue(entry) {
  if (downloading) return;
  downloading = { name: entry.name, loaded: 0, total: null };
  await showCatalogue();
  const state = () => document.querySelector(`#catalogue-list li[data-name="${CSS.escape(entry.name)}"] .state`);
  try {
    await useModel(entry.name, entry.label, entry.bytes, {
      ...catalogueOptions(),
      onProgress: ({ loaded, total, fromStore = 0 }) => {
        Object.assign(downloading, { loaded, total });
        observed.catalogueProgress = { name: entry.name, loaded, total, fromStore };
        const shown = state();
        if (shown) shown.textContent = `downloading: ${byteLabel(loaded)}${total ? ` of ${byteLabel(total)}` : ''}${fromStore ? ` (${byteLabel(fromStore)} from the store)` : ''}`;
      },
    });
  } finally {
    downloading = null;
    await showCatalogue();
  }
}

// ---------------------------------------------------------------------------
// The search panel: the text area's paragraphs embedded in the worker (each
// once, kept while it is in the text area), the question's nearest by cosine
// similarity, then scored by the reranker with the question when one is
// loaded. The models come as any other (useModel), by what their files say.

const SEARCH_HITS = 5; // the nearest paragraphs: what the reranker scores and the panel shows
const searchModels = { embedder: null, reranker: null }; // { name, remote } each
const paragraphVectors = new Map(); // a paragraph -> its vector from the embedding model loaded now
let searching = null; // the search under way: { controller, done }
// What the panel shows, for the browser test: its note, each pass's progress, the paragraphs the last search embedded, its hits.
const searchView = { note: null, progress: [], embedded: null, hits: [] };

/** What a model is for: a reranker (it has a classification head), an embedding model (its file pools), else a chat. */
const roleOf = ({ rankOutputs, pooling }) => (rankOutputs > 0 ? 'reranker' : pooling !== 'none' ? 'embedder' : 'chat');

/** The paragraphs of a text: its blocks between blank lines, trimmed. */
const paragraphsOf = (text) => text.split(/\n\s*\n/).map((block) => block.trim()).filter((block) => block !== '');

// embed() gives vectors of length 1: their dot product is the cosine.
const cosine = (a, b) => a.reduce((sum, x, i) => sum + x * b[i], 0);

/** The panel's one place for what a search did, or why it did not. */
function searchNote(text, kind) {
  $('search-note').textContent = text;
  $('search-note').className = kind;
  searchView.note = { text, kind };
}

function searchControls() {
  $('search').disabled = searching !== null || !searchModels.embedder;
  $('search-stop').disabled = searching === null;
}

/** The line naming the panel's models, and what embed()'s prompt puts before a question and a paragraph (its model card's). */
function showSearchModels() {
  const { embedder, reranker } = searchModels;
  const prompts = embedder && EMBEDDING_PROMPTS[embedder.remote.config.architecture];
  const shown = (text) => (text ? `"${text}"` : 'nothing');
  $('search-models').textContent = `${embedder
    ? `Embedding model: ${embedder.name} (${embedder.remote.config.pooling} pooling, ${embedder.remote.config.embeddingDim} values; ` +
      `${prompts ? `its model card's prompts: ${shown(prompts.query)} before the question, ${shown(prompts.document)} before a paragraph` : 'no prompts'}).`
    : 'No embedding model: load EmbeddingGemma-300M from the catalogue, say.'} ${reranker
    ? `Reranker: ${reranker.name}.` : 'No reranker: the hits stay in the order of their similarity.'}`;
  searchControls();
}

/** `remote` (an embedding model or a reranker) in the panel, in place of the one before it; what it is, in words. */
async function useForSearch(remote, name) {
  await stopSearch();
  const role = roleOf(remote.config);
  const before = searchModels[role];
  searchModels[role] = { name, remote };
  if (role === 'embedder') paragraphVectors.clear();
  await before?.remote.free();
  showSearchModels();
  return role === 'reranker' ? 'a reranker' : 'an embedding model';
}

function showHits(hits) {
  searchView.hits = hits;
  $('search-hits').replaceChildren(...hits.map(({ index, paragraph, similarity, score }) => {
    const item = document.createElement('li');
    const scores = document.createElement('span');
    scores.className = 'scores';
    scores.textContent = `paragraph ${index + 1}: similarity ${similarity.toFixed(4)}${score === null ? '' : `, rerank score ${score.toFixed(4)}`}`;
    const text = document.createElement('span');
    text.className = 'text';
    text.textContent = paragraph;
    item.append(scores, text);
    return item;
  }));
}

/** Shows `what` under way on the bar and in the note; returns the onProgress that shows its passes. */
function startProgress(what) {
  searchNote(`${what}…`, 'loading');
  $('search-progress').hidden = false;
  $('search-progress').removeAttribute('value'); // no pass done yet: a bar that says so
  return ({ done, total }) => {
    searchView.progress.push({ what, done, total });
    Object.assign($('search-progress'), { max: total, value: done });
    searchNote(`${what}: pass ${done} of ${total}`, 'loading');
  };
}

/** Embeds what is new of the paragraphs, and the question; the nearest paragraphs, reranked when a reranker is loaded. */
async function search() {
  if (searching || !searchModels.embedder) return;
  const paragraphs = paragraphsOf($('search-paragraphs').value);
  const question = $('search-question').value.trim();
  const refused = [paragraphs.length === 0 && 'there are no paragraphs to search', question === '' && 'there is no question'].filter(Boolean);
  if (refused.length) return searchNote(`Refused: ${refused.join('; ')}.`, 'refused');
  const { embedder, reranker } = searchModels;
  const controller = new AbortController();
  const { signal } = controller;
  let done;
  searching = { controller, done: new Promise((resolve) => { done = resolve; }) };
  searchControls();
  showHits([]);
  searchView.progress = [];
  try {
    for (const paragraph of paragraphVectors.keys()) if (!paragraphs.includes(paragraph)) paragraphVectors.delete(paragraph);
    const missing = [...new Set(paragraphs)].filter((paragraph) => !paragraphVectors.has(paragraph));
    searchView.embedded = missing.length;
    if (missing.length > 0) {
      const vectors = await embedder.remote.embed(missing,
        { prompt: 'document', signal, onProgress: startProgress(`embedding ${missing.length} of ${paragraphs.length} paragraphs`) });
      missing.forEach((paragraph, i) => paragraphVectors.set(paragraph, vectors[i]));
      // A Stop the worker did not see (it came after the last pass) ends the search here.
      signal.throwIfAborted();
    }
    const [query] = await embedder.remote.embed(question, { prompt: 'query', signal, onProgress: startProgress('embedding the question') });
    signal.throwIfAborted();
    let hits = paragraphs.map((paragraph, index) => ({ index, paragraph, similarity: cosine(query, paragraphVectors.get(paragraph)), score: null }))
      .sort((a, b) => b.similarity - a.similarity).slice(0, SEARCH_HITS);
    if (reranker) {
      const { ranking } = await reranker.remote.rerank(question, hits.map((hit) => hit.paragraph),
        { signal, onProgress: startProgress(`reranking the ${hits.length} nearest`) });
      signal.throwIfAborted();
      hits = ranking.map(({ index, score }) => ({ ...hits[index], score }));
    }
    showHits(hits);
    searchNote(`The ${hits.length} nearest of ${paragraphs.length} paragraphs, ${reranker ? 'by rerank score' : 'by similarity'}, best first ` +
      `(${missing.length} paragraphs embedded for this search, the others kept from before).`, 'loaded');
  } catch (error) {
    if (signal.aborted) {
      searchNote('Stopped: no hits.', 'end');
    } else if (error instanceof RangeError || error instanceof TypeError) {
      searchNote(`Refused: ${error.message}`, 'refused');
    } else {
      searchNote(`The search failed: ${error.message}`, 'failed');
      pageErrors.push(`search: ${error.message}`);
    }
  } finally {
    $('search-progress').hidden = true;
    searching = null;
    done();
    searchControls();
  }
}

/** Aborts the search under way, if any, and waits for it to end. */
async function stopSearch() {
  if (!searching) return;
  const { controller, done } = searching;
  controller.abort();
  await done;
}

$('search-form').addEventListener('submit', (event) => {
  event.preventDefault();
  search();
});
$('search-stop').addEventListener('click', () => searching?.controller.abort());
showSearchModels();

// ---------------------------------------------------------------------------
// Models: found beside the project, picked, or dropped

/**
 * Loads a model (a URL, or a picked or dropped File) in the worker, and on
 * this page for the replica when it is small enough. The chat before keeps
 * running until both have loaded, and stays when either fails: the load
 * note says why, in that one place. An embedding model or a reranker goes
 * to the search panel instead, the chat left as it was.
 */
async function useModel(input, name, bytes, { projector, projectorName, huggingFace, onProgress } = {}) {
  await started;
  const note = (text, kind) => {
    $('load-note').textContent = text;
    $('load-note').className = kind;
    observed.loadNote = { text, kind };
  };
  const size = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  note(`loading ${name}…`, 'loading');
  let remote = null;
  let local = null;
  // A URL's file goes through the store (a File picked or dropped is on the machine already).
  const stored = store && typeof input === 'string' ? { store } : {};
  try {
    remote = await worker.load(input, {
      ...stored,
      ...(projector !== undefined && { projector }),
      ...(huggingFace && { huggingFace }),
      onProgress: (progress) => {
        const { loaded, total, fromStore, file } = progress;
        note(`loading ${file === 'projector' ? projectorName : name}: ${size(loaded)}` +
          `${total ? ` of ${size(total)}` : ''}${fromStore ? ` (${size(fromStore)} from the store)` : ''}`, 'loading');
        onProgress?.(progress);
      },
    });
    if (roleOf(remote.config) !== 'chat') {
      const role = await useForSearch(remote, name);
      remote = null;
      note(`${name}: ${role} for the search panel.${model ? ` Still chatting with ${model.name}.` : ''}`, 'loaded');
      await showStored();
      return;
    }
    // A model with a projector runs in the worker only: the replica could not follow its images' ids.
    if (projector === undefined && (bytes === null || bytes <= REPLICA_MAX_BYTES)) local = await Llama.load(input, { ...stored, ...(huggingFace && { huggingFace }) });
    const { tokenizer } = remote;
    const templateSource = tokenizer.chatTemplate ?? PLAIN_TEMPLATE;
    const engine = new ChatTemplate(templateSource, { bosToken: tokenizer.bosToken, eosToken: tokenizer.eosToken });
    await stopReply();
    const before = model;
    model = { name, input, bytes, remote, local, template: { source: templateSource, plain: tokenizer.chatTemplate == null, engine },
      projector: projector === undefined ? null : { name: projectorName, type: remote.projector.config.type },
      // The name its conversation is saved under, when the model came through the store.
      conversation: stored.store ? `demo: ${new URL(input, location.href).href}` : null };
    remote = null;
    local = null;
    await closeChat();
    await before?.remote.free();
    before?.local?.free();
    const { config } = model.remote;
    note(`${name}: ${config.numLayers} layers, ${config.numKvHeads} KV heads × ${config.headDim}, context ${config.contextLength}` +
      `${model.projector ? `; its projector ${projectorName} (${model.projector.type}) takes pictures: drop or pick one for your message` : ''}`, 'loaded');
    $('model-name').textContent = name;
    $('projector-name').textContent = model.projector ? `${model.projector.name} (${model.projector.type})` : 'none';
    clearAttachments();
    $('source').value = 'model';
    showSource('model');
  } catch (error) {
    await remote?.free();
    local?.free();
    note(`${name} was not loaded: ${error.message}.${model ? ` Still chatting with ${model.name}.` : ''}`, 'refused');
    return;
  }
  await showStored();
  try {
    await newChat({ restore: true });
  } catch (error) {
    note(`${name} loaded, but its chat did not start: ${error.message}.`, 'failed');
    pageErrors.push(`new chat: ${error.message}`);
  }
}

$('model-file').addEventListener('change', async (event) => {
  const file = event.target.files[0];
  if (file) await useModel(file, file.name, file.size);
  event.target.value = '';
});

/** The model loaded now, again, with this projector (a File or a URL): the chat starts over, its images' tokens its own. */
async function useProjector(projector, projectorName) {
  await started;
  if (!model) {
    $('load-note').textContent = `${projectorName} is a model's projector: load the model first, then its projector.`;
    $('load-note').className = 'refused';
    observed.loadNote = { text: $('load-note').textContent, kind: 'refused' };
    return;
  }
  await useModel(model.input, model.name, model.bytes, { projector, projectorName });
}

$('projector-file').addEventListener('change', async (event) => {
  const file = event.target.files[0];
  if (file) await useProjector(file, file.name);
  event.target.value = '';
});
$('projector-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const url = $('projector-url').value.trim();
  if (url) await useProjector(url, decodeURIComponent(new URL(url, location.href).pathname.split('/').pop()));
});
$('image-file').addEventListener('change', async (event) => {
  for (const file of event.target.files) await attachImage(file);
  event.target.value = '';
});
const isImage = (file) => file.type.startsWith('image/');
document.addEventListener('dragover', (event) => event.preventDefault());
document.addEventListener('drop', async (event) => {
  event.preventDefault();
  const files = [...(event.dataTransfer?.files ?? [])];
  // Pictures go with the next message; a GGUF is a model to load.
  for (const file of files.filter(isImage)) await attachImage(file);
  const gguf = files.find((file) => !isImage(file));
  if (gguf) await useModel(gguf, gguf.name, gguf.size);
});

// ---------------------------------------------------------------------------
// Running

let source = null; // what the panels read: the chat's replica, or the synthetic stream
let running = false;
let timer = null;
let lastSeqLen = 0;
const observed = {
  seqLenWentDown: false, finished: null, evictions: 0, refused: [], loadNote: null, workerCache: null, workerStats: null,
  restored: 0, stored: [], catalogue: [],
};

// What each mode costs at a head size, as measured (README, Storage): the
// synthetic stream's attention error (its own statistics: one normal query
// per 16 positions over 4096, 8 KV heads), a model's KL on a text run through each cache.
const EXPECTED = {
  synthetic: {
    128: 'q8 and q8k about 0.02 of the output (0.01–0.04), q8v 0.006, q8k+q4v 0.11 (0.08–0.15), q4 0.36 (0.2–0.6, at times above 1): on keys with outlier channels 4-bit keys lose about 15× what 8-bit ones do.',
    64: 'q8 and q8k about 0.05 of the output (0.02–0.15), q8v 0.006, q8k+q4v 0.12 (0.07–0.2), q4 0.6 (0.26–1.7): on keys with outlier channels 4-bit keys lose about 12× what 8-bit ones do.',
  },
  model: {
    8: 'mean KL q8 2.1e-4, q8k 2.2e-4, q8v 2.3e-6, q4 3.0e-4, q8k+q4v 2.6e-4 (stories260K, its own greedy story run through each cache).',
    64: 'mean KL q8 2.7e-6, q8k 2.6e-6, q8v 3.6e-7, q4 1.1e-3 (top-1 98.8%), q8k+q4v 9.7e-5 (kjv-d512-h64, Genesis 1 run through each cache; llama.cpp\'s own q8_0 and q4_0 caches: 1.1e-5 and 2.4e-3).',
  },
};

/** The sentence under the accuracy chart: what to expect at this head size, or that it was not measured. */
function expectation(kind, headDim) {
  const known = EXPECTED[kind];
  if (known[headDim]) return `Expect at head_dim ${headDim}, as measured: ${known[headDim]}`;
  return `No measurement at head_dim ${headDim}; measured at ${Object.keys(known).join(' and ')}: ${Object.entries(known).map(([d, text]) => `${d}: ${text}`).join(' ')}`;
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

/** Empties the panels: no source, no points, no branches, no timing. */
function clearPanels() {
  pause();
  dropBranches();
  renderBranches();
  source?.dispose();
  source = null;
  stream.replaceChildren();
  draftSpans = [];
  series.memory = emptySeries(MODES.length);
  series.accuracy = emptySeries(QUANTIZED.length);
  series.layers = emptySeries(LAYER_KINDS.length);
  Object.assign(observed, { seqLenWentDown: false, finished: null, evictions: 0 });
  evictPending = false;
  lastSeqLen = 0;
  Object.assign(timing, { all: null, one: null, rows: 0 });
}

function showSource(kind) {
  $('source-model').hidden = kind !== 'model';
  $('source-synthetic').hidden = kind !== 'synthetic';
  $('run-controls').hidden = kind !== 'synthetic';
  makeAccuracyChart(kind);
  $('accuracy-explain').textContent = kind === 'model'
    ? 'What 8- and 4-bit storage costs: the KL divergence of each mode\'s next-token distribution from f32\'s, token by token of the chat.'
    : 'What 8- and 4-bit storage costs: max |out − out_f32| / max |out_f32| of one attention query per step.';
  $('accuracy-expect').textContent = kind === 'model'
    ? (model ? expectation('model', model.remote.config.headDim) : '')
    : expectation('synthetic', Number($('head-dim').value));
}

/** Starts the chosen source over: a new chat on the model, or a new synthetic stream. A refused setting changes nothing. */
async function reset() {
  const kind = $('source').value;
  if (kind === 'model') {
    if (!model) {
      showSource(kind);
      clearPanels();
      setStatus('No model loaded: pick or drop a GGUF, or use the synthetic stream.');
      render();
      draw();
      return;
    }
    if (source?.kind !== 'model') clearPanels();
    showSource(kind);
    await newChat();
    return;
  }
  const chosen = settings(kind);
  if (chosen.errors) {
    refuse(chosen.errors);
    return;
  }
  let next;
  try {
    next = new SyntheticSource(chosen.values);
  } catch (error) {
    refuse([error.message]);
    return;
  }
  refuse([]);
  await stopReply();
  clearPanels();
  showSource(kind);
  source = next;
  applyBound();
  setStatus(runningNow());
  render();
  draw();
}

function render() {
  renderThreads();
  const memory = source ? source.memory() : {};
  for (const m of MODES) {
    const cell = document.querySelector(`[data-memory-mode="${m}"]`);
    const bytes = memory[m] ?? 0;
    cell.dataset.bytes = String(bytes);
    cell.textContent = source ? `${mib(bytes)} (${bytes.toLocaleString('en')} B)` : '–';
    document.querySelector(`[data-ratio-mode="${m}"]`).textContent = bytes ? `${(memory.f32 / bytes).toFixed(2)}×` : '–';
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
  if (source?.kind !== 'synthetic') return;
  let result;
  try {
    result = source.step();
  } catch (error) {
    pause();
    setStatus(`stopped: ${error.message}`, true);
    return;
  }
  pushPoint(result.point);
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
  if (source?.kind !== 'synthetic' || running) return;
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

$('start').addEventListener('click', () => (running ? pause() : start()));
$('step').addEventListener('click', () => {
  pause();
  stepOnce();
});
$('reset').addEventListener('click', reset);
for (const id of ['source', 'mode', 'draft', 'heads', 'head-dim', 'context', 'batch']) $(id).addEventListener('change', reset);
$('chat-form').addEventListener('submit', (event) => {
  event.preventDefault();
  send();
});
$('chat-input').addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey) {
    event.preventDefault();
    send();
  }
});
$('stop').addEventListener('click', () => reply?.controller.abort());
$('new-chat').addEventListener('click', () => newChat());
$('speed').addEventListener('input', () => { $('speed-value').textContent = `${$('speed').value}/s`; });
$('budget').addEventListener('input', () => {
  $('budget-value').textContent = $('budget').value;
  applyBound();
  draw();
});
$('bound').addEventListener('change', applyBound);
$('json-mode').addEventListener('change', () => { $('json-schema-editor').hidden = !$('json-mode').checked; });
$('evict').addEventListener('click', evictNow);
$('branch').addEventListener('click', branchNow);

// The package on this page, and the chat's worker; `startup` names the step
// under way, for a test to say where a start that never ends stopped.
// ?isa=wasm-simd128 runs both on the baseline build (the one Node runs: to
// compare with it), ?isa=wasm-relaxed-simd insists on relaxed SIMD; by
// default the page takes relaxed SIMD where the engine runs it.
const chosenIsa = new URLSearchParams(location.search).get('isa');
const kernels = chosenIsa === null ? {} : { isa: chosenIsa };
let startup = 'the package starting on the page';
let store = null;
const started = (async () => {
  await init(kernels);
  startup = 'the model store opening';
  store = await ModelStore.open().catch(() => null); // a private window may have none: the page works without
  document.body.dataset.store = store?.backend ?? 'none';
  startup = 'the chat\'s worker starting';
  worker = new LlamaWorker({ init: kernels });
  workerInfo = await worker.ready();
  document.body.dataset.kernels = kernelIsa();
})();

// What the browser test reads: the live state next to what the page shows.
window.demo = {
  ready: (async () => {
    await started;
    startup = 'the model list being fetched';
    const found = await (await fetch('/api/models')).json();
    hfEndpoint = found.hfEndpoint ?? null;
    await showCatalogue();
    if (found['stories260k.gguf']) {
      startup = 'stories260K loading';
      // The server's model (stories260K unless npm start named another), with the projector it names.
      const name = found.modelName === 'stories260k.gguf' ? 'stories260K' : found.modelName;
      await useModel(DEFAULT_MODEL_URL, name, null, found['mmproj.gguf'] ? { projector: DEFAULT_PROJECTOR_URL, projectorName: found.projectorName } : {});
    } else {
      startup = 'the synthetic stream starting';
      // Without a model the page would otherwise open on the synthetic
      // stream with no word on why: say so, and how to chat.
      $('no-model-note').hidden = false;
      $('source').value = 'synthetic';
      await reset();
    }
    for (const role of ['embedder', 'reranker']) {
      if (!found[`${role}.gguf`]) continue;
      startup = `the search panel's ${role} loading`;
      // The embedding model and the reranker npm start names (--embedder, --reranker): the search panel's.
      await useModel(`/models/${role}.gguf`, found[`${role}Name`], null);
    }
    startup = 'done';
    return { model: Boolean(model) };
  })(),
  /** The step of the page's start under way ('done' once ready). */
  get startup() { return startup; },
  snapshot() {
    const memory = source ? source.memory() : {};
    const width = document.documentElement;
    return {
      source: source?.kind ?? null,
      synthetic: source?.kind === 'synthetic' ? { heads: source.heads, headDim: source.headDim, batch: source.batch, draft: source.draft } : null,
      running,
      replying: reply !== null,
      tokens: source?.stats.tokens ?? 0,
      seqLen: source?.seqLen ?? 0,
      stats: source ? { ...source.stats } : null,
      seqLenWentDown: observed.seqLenWentDown,
      finished: observed.finished,
      memoryBytes: memory,
      displayedBytes: Object.fromEntries(MODES.map((m) => [m, Number(document.querySelector(`[data-memory-mode="${m}"]`).dataset.bytes)])),
      chartPoints: Object.fromEntries(MODES.map((m, i) => [m, charts.memory.data[i + 1].filter((v) => v != null).length])),
      accuracyPoints: charts.accuracy.data.slice(1).reduce((n, s) => n + s.filter((v) => v != null).length, 0),
      xRange: { memory: [charts.memory.scales.x.min, charts.memory.scales.x.max], accuracy: [charts.accuracy.scales.x.min, charts.accuracy.scales.x.max] },
      tickLabels: JSON.parse(JSON.stringify(tickLabels)),
      accuracyMetric: accuracyChart.plot.axes[1].label,
      position: source?.position ?? 0,
      verifying: source ? Boolean(source.shownLayer().verifying) : false,
      evictions: observed.evictions,
      // Rows held per layer and the positions each holds, as the caches report them.
      rows: source ? source.layers().map((layer) => layer.seqLen) : [],
      // The layer-kinds chart's points: positions, and the rows a global and a window layer held there.
      layerRows: { shown: !$('layers-block').hidden, positions: series.layers[0].slice(), global: series.layers[1].slice(), window: series.layers[2].slice() },
      shownPositions: source ? Array.from(source.shownLayer().positions()) : [],
      importance: { ...shownImportance },
      threads: threadInfo(),
      workerThreads: workerInfo?.threadInfo ?? null,
      timing: { ...timing },
      errors: pageErrors.slice(),
      branches: { ...branchView, texts: branchView.texts.slice() },
      status: $('status').textContent,
      statusIsError: $('status').classList.contains('error'),
      refused: observed.refused.slice(),
      inputNote: $('input-note').hidden ? '' : $('input-note').textContent,
      model: model?.name ?? null,
      projector: model?.projector ? { ...model.projector } : null,
      // Pictures waiting for the next message, as the page shows them.
      attachments: attachments.map(({ name, width, height, count }) => ({ name, width, height, count: { ...count } })),
      loadNote: observed.loadNote,
      // The store's models as the picker lists them, and the messages a restored conversation brought back.
      stored: observed.stored.map((m) => ({ ...m })),
      // The catalogue as the page shows it: each entry's state (absent, downloading, partial, stored) and bytes stored.
      catalogue: observed.catalogue.map(({ label, name, kind, state, stored, size }) => ({ label, name, kind, state, stored, size })),
      catalogueProgress: observed.catalogueProgress ?? null,
      restored: observed.restored,
      chat: {
        open: chat !== null,
        messages: chat ? chat.messages : [],
        replies: chatView.replies.map((r) => ({ ...r })),
        notices: chatView.notices.slice(),
        sentImages: chatView.sentImages.map((image) => ({ ...image })),
        thumbnails: [...chatLog.querySelectorAll('.message.user img.thumb')].map((img) => ({ complete: img.complete, width: img.naturalWidth })),
        templateNote: $('template-note').textContent,
        workerCache: observed.workerCache,
        workerStats: observed.workerStats,
      },
      search: {
        embedder: searchModels.embedder?.name ?? null,
        reranker: searchModels.reranker?.name ?? null,
        prompts: (searchModels.embedder && EMBEDDING_PROMPTS[searchModels.embedder.remote.config.architecture]) ?? null,
        searching: searching !== null,
        kept: paragraphVectors.size,
        embedded: searchView.embedded,
        progress: searchView.progress.map((p) => ({ ...p })),
        note: searchView.note,
        hits: searchView.hits.map((hit) => ({ ...hit })),
        // Each hit's line of scores as the page shows it.
        shown: [...document.querySelectorAll('#search-hits .scores')].map((line) => line.textContent),
      },
      overflow: { scrollWidth: width.scrollWidth, clientWidth: width.clientWidth },
    };
  },
};
window.demo.ready.catch((error) => setStatus(`could not start: ${error.message}`, true));

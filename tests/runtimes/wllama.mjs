// llama.cpp as the oracle: its wasm build (@wllama/wllama, one module with
// SIMD128, Memory64, JSPI and pthreads) in headless Chromium, behind a few
// calls that take a GGUF file (a path, or its bytes) and return what
// llama.cpp computed.
//
//   const why = await llamaCppMissing();               // a reason to skip, or null
//   const [h] = await llamaCppHidden(path, tokens, [tokens.length - 1]);
//   const logits = logitsFromHidden(h, outputWeight);  // llama.cpp's logits, in f64
//   const t = await llamaCppTimings(path, { promptTokens: 512, decodeTokens: 64, threads: 2 });
//   const r = await llamaCppCompletion(path, 'text', { maxTokens: 8, request: { n_probs: 1 } });
//   const e = await llamaCppEmbeddingTimings(path, [ids1, ids2], { threads: 2 });  // tokens/s of createEmbedding
//   await closeLlamaCpp();
//
// wllama speaks llama-server's OpenAI-style API and shows no logits. Loaded
// with { embeddings: true, pooling_type: 'last' }, createEmbedding({ input:
// token ids, embd_normalize: -1 }) returns the final normed hidden state of
// the last token (what output.weight multiplies into logits); ids go in as
// given, no <s> added. One call per prefix is teacher forcing. Completions
// take text only (a token array crashes the module), so a prompt of n tokens
// is text that tokenizes to n (digitPrompt for the synthetic vocabulary),
// checked against llama.cpp's own count (timings.prompt_n). llama-server
// reads special tokens written in a prompt as those tokens and puts the begin
// token first when the file's add_bos_token says so (a second one before a
// text that starts with it). A completion whose text is not valid UTF-8 fails
// (wllama's JSON writer throws): a random model's greedy text often is not,
// so logit_bias can keep it to tokens of whole characters; n_probs with
// post_sampling_probs then names the ids it picked (without
// post_sampling_probs, the candidates before logit_bias).
//
// One browser and one page serve every call; a model stays loaded while calls
// ask for the same file and load options. A static server on 127.0.0.1
// serves the page, wllama's files and models given as bytes, cross-origin
// isolated (COOP + COEP: SharedArrayBuffer, so threads) unless { isolated:
// false } (then llama.cpp runs on one thread whatever is asked); a model file
// reaches the page through its file input, read from the disk as wllama goes.
import { createReadStream, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, extname, join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Llama } from '../../js/llama.js';
import { digitPrompt, tensorValues } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { codedActivations } from '../gguf/activations.mjs';
import { browserMissing, launchBrowser } from './browsers.mjs';
import { ISOLATION_HEADERS } from './static-server.mjs';

const MIME = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };

function wllamaDir() {
  try {
    return dirname(fileURLToPath(import.meta.resolve('@wllama/wllama/package.json')));
  } catch {
    return null;
  }
}

/** Why llama.cpp cannot run here (no Chromium, playwright-core or @wllama/wllama), or null. */
export async function llamaCppMissing() {
  const browser = await browserMissing('chromium');
  if (browser) return browser;
  if (!wllamaDir()) return '@wllama/wllama is not installed (npm ci)';
  return null;
}

// ---------------------------------------------------------------------------
// The server: the page, wllama's esm/ folder, and models given as bytes.

function listen(isolated, models) {
  const headers = isolated ? ISOLATION_HEADERS : {};
  const esm = join(wllamaDir(), 'esm');
  const server = createServer((request, response) => {
    const { pathname } = new URL(request.url, 'http://127.0.0.1');
    if (pathname === '/') {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', ...headers });
      return response.end('<!doctype html><meta charset="utf-8"><title>llama.cpp oracle</title><link rel="icon" href="data:,"><input type="file" id="model">');
    }
    const model = models.get(pathname); // bytes (a file on disk goes through the page's file input)
    if (model !== undefined) {
      response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': model.length, ...headers });
      return response.end(model);
    }
    const path = posix.normalize(decodeURIComponent(pathname)); // normalizing '/…' leaves no '..'
    if (path.startsWith('/wllama/')) {
      const file = join(esm, path.slice('/wllama/'.length));
      try {
        if (statSync(file).isFile()) {
          // Cacheable, so that Chromium keeps the compiled module for the next load.
          response.writeHead(200, { 'content-type': MIME[extname(file)] ?? 'application/octet-stream', 'cache-control': 'max-age=86400', ...headers });
          return createReadStream(file).pipe(response);
        }
      } catch { /* not there: 404 */ }
    }
    response.writeHead(404);
    return response.end();
  });
  return new Promise((done, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => done(server));
  });
}

// ---------------------------------------------------------------------------
// The engine: one browser, page and server, and what is loaded.

let engine = null;
const byteIds = new WeakMap();

/** The URL path a model file is served at: one per path, one per bytes object. */
function modelPath(file) {
  if (typeof file === 'string') return `/models/${encodeURIComponent(resolve(file))}`;
  if (!(file instanceof Uint8Array)) throw new TypeError('llama.cpp: a model is a path or a Uint8Array of its bytes');
  if (!byteIds.has(file)) byteIds.set(file, byteIds.size + 1 + Math.random().toString(36).slice(2, 8));
  return `/models/bytes-${byteIds.get(file)}`;
}

async function start(isolated) {
  if (engine?.isolated === isolated) return engine;
  await closeLlamaCpp();
  const models = new Map();
  const server = await listen(isolated, models);
  const url = `http://127.0.0.1:${server.address().port}`;
  let browser;
  try {
    browser = await launchBrowser('chromium');
    const page = await browser.open(`${url}/`);
    engine = { isolated, server, url, browser, page, models, loaded: null };
    return engine;
  } catch (error) {
    await browser?.close();
    server.close();
    throw error;
  }
}

/** Closes the browser and the server (the next call starts them again). */
export async function closeLlamaCpp() {
  if (!engine) return;
  const { browser, server } = engine;
  engine = null;
  await browser.close();
  await new Promise((done) => server.close(done));
}

// Runs in the page: (re)creates the Wllama instance and loads a model, the
// file given to the page's file input (model null) or bytes by URL.
const LOAD = `async ({ base, model, params }) => {
  const { Wllama } = await import(base + '/wllama/index.js');
  if (window.llama) await window.llama.exit();
  window.llama = null;
  const llama = new Wllama({ default: base + '/wllama/wasm/wllama.wasm' });
  const blob = model === null ? document.getElementById('model').files[0] : await (await fetch(base + model)).blob();
  const started = performance.now();
  await llama.loadModel([blob], params);
  const loadMs = performance.now() - started;
  window.llama = llama;
  const info = llama.getLoadedContextInfo();
  // A model llama.cpp refuses may still resolve loadModel, with nothing loaded.
  if (!(info.n_vocab > 0 && info.n_ctx > 0)) throw new Error('llama.cpp loaded no model (n_vocab ' + info.n_vocab + ')');
  return {
    loadMs, libllama: Wllama.getLibllamaVersion(), crossOriginIsolated, multithread: llama.isMultithread(),
    threads: llama.getNumThreads(), nCtx: info.n_ctx, nVocab: info.n_vocab, nEmbd: info.n_embd, nLayer: info.n_layer,
    fileBytes: blob.size,
  };
}`;

// What a page's blobs may hold in all: fetching a model of 2 GiB fails
// ('Failed to fetch'), whole or in parts (the page is a Playwright context,
// whose blobs live in memory). A file on disk reaches the page through a file
// input instead, as a File that Chromium reads from the disk: no limit.
const BLOB_LIMIT = 2 ** 31;

/**
 * wllama's load parameters for our options. flashAttention: undefined leaves
 * llama.cpp's default ('auto': on, on the CPU); false turns it off; true
 * asks for 'auto' (wllama has no way to force it on). A quantized V cache
 * needs it on.
 */
function loadParams({ threads = 1, nCtx = 512, cacheTypeK = 'f16', cacheTypeV = 'f16', flashAttention, batch, ubatch, warmup = true }, extra) {
  if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`llama.cpp: threads must be an integer >= 1 (got ${threads})`);
  return {
    n_threads: threads, n_ctx: nCtx, cache_type_k: cacheTypeK, cache_type_v: cacheTypeV, warmup,
    ...(flashAttention === undefined ? {} : { flash_attn: flashAttention }),
    ...(batch ? { n_batch: batch } : {}), ...(ubatch ? { n_ubatch: ubatch } : {}),
    n_gpu_layers: 0, // CPU only: headless Chromium has no WebGPU adapter anyway
    n_parallel: 1, // one slot: requests run one after another
    log_level: 4, // llama.cpp's own errors reach the console, nothing else
    ...extra,
  };
}

/**
 * Loads `file` (a path or bytes) with `options` ({ threads = 1, nCtx = 512,
 * cacheTypeK = 'f16', cacheTypeV = 'f16' (or 'f32', 'q8_0', 'q5_1', 'q5_0',
 * 'q4_1', 'q4_0'), flashAttention (see loadParams), batch, ubatch, warmup =
 * true, isolated = true }) unless it is loaded with them already; resolves
 * to { loadMs, libllama, crossOriginIsolated, multithread, threads, nCtx,
 * nVocab, nEmbd, nLayer, fileBytes, reused }. A file llama.cpp refuses
 * rejects with llama.cpp's own messages (and the page is started afresh: a
 * failed load leaves wllama unusable).
 */
export async function llamaCppLoad(file, options = {}, extra = {}) {
  const { isolated = true } = options;
  if (typeof file !== 'string' && file.length >= BLOB_LIMIT) {
    throw new RangeError(`llama.cpp: a model of ${file.length} bytes cannot load here from bytes: the page's blobs stop at 2 GiB (write it to a file)`);
  }
  const e = await start(isolated);
  const model = modelPath(file);
  const params = loadParams(options, extra);
  const key = JSON.stringify({ model, params });
  if (e.loaded?.key === key) return { ...e.loaded.info, reused: true };
  e.models.clear(); // one model served at a time
  if (typeof file !== 'string') e.models.set(model, file);
  e.loaded = null;
  const seen = e.page.problems().length;
  try {
    if (typeof file === 'string') await e.page.setInputFiles('#model', resolve(file));
    const info = await e.page.evaluate(LOAD, { base: e.url, model: typeof file === 'string' ? null : model, params });
    e.loaded = { key, info };
    return { ...info, reused: false };
  } catch (error) {
    const said = e.page.problems().slice(seen).filter((line) => /error|failed|unsupported|invalid/i.test(line)).slice(0, 8);
    await closeLlamaCpp();
    throw new Error(`llama.cpp did not load the model: ${said.join(' | ') || error.message}`);
  }
}

function checkTokens(tokens, positions) {
  if (!Array.isArray(tokens) || tokens.length === 0 || !tokens.every((t) => Number.isInteger(t) && t >= 0)) {
    throw new TypeError('llamaCppHidden: tokens must be a non-empty array of token ids');
  }
  if (!Array.isArray(positions) || !positions.every((p) => Number.isInteger(p) && p >= 0 && p < tokens.length)) {
    throw new RangeError(`llamaCppHidden: positions must be indices into tokens (0 to ${tokens.length - 1})`);
  }
}

// Runs in the page: one embedding per prefix (each its own sequence), in
// calls of `group` prefixes (llama-server runs a call's inputs as one task
// each; fewer calls, less waiting on the page and the worker).
const HIDDEN = `async ({ prefixes, group }) => {
  const out = [];
  for (let i = 0; i < prefixes.length; i += group) {
    const input = prefixes.slice(i, i + group);
    const response = await window.llama.createEmbedding({ input, embd_normalize: -1 });
    const tokens = input.reduce((n, p) => n + p.length, 0);
    if (response.usage.prompt_tokens !== tokens) throw new Error('llama.cpp embedded ' + response.usage.prompt_tokens + ' tokens of ' + tokens);
    for (const d of [...response.data].sort((a, b) => a.index - b.index)) out.push(d.embedding);
  }
  return out;
}`;

// What makes createEmbedding return the final normed hidden state of the last token.
const EMBEDDINGS = { embeddings: true, pooling_type: 'last' };

/**
 * llama.cpp's final hidden state (after output_norm) at each of `positions`
 * (indices into `tokens`), each computed from tokens[0..p] alone: teacher
 * forcing, one createEmbedding per prefix. Resolves to one Float32Array
 * [n_embd] per position. `options` are llamaCppLoad's.
 */
export async function llamaCppHidden(file, tokens, positions, options = {}) {
  checkTokens(tokens, positions);
  await llamaCppLoad(file, options, EMBEDDINGS);
  const { group = 16 } = options;
  const states = await engine.page.evaluate(HIDDEN, { prefixes: positions.map((p) => tokens.slice(0, p + 1)), group });
  return states.map((s) => Float32Array.from(s));
}

// Runs in the page: every token list in one createEmbedding call, timed by the page's clock around it.
const EMBED_TIMED = `async ({ lists }) => {
  const started = performance.now();
  const response = await window.llama.createEmbedding({ input: lists });
  return { ms: performance.now() - started, promptTokens: response.usage.prompt_tokens, vectors: response.data.length };
}`;

/**
 * llama.cpp's embedding speed on `file`: `tokenLists` (arrays of ids, taken
 * as given) in one createEmbedding call, which llama-server runs as a task
 * a list, one after another (one slot), pooled as the file says and
 * normalised (its default), timed by the page's clock around the call.
 * `options` are llamaCppLoad's; the context and both batches are the
 * longest list's (512 at least: an encoder takes a list in one ubatch).
 * Resolves to { tokens, ms, tokensPerSecond, load }.
 */
export async function llamaCppEmbeddingTimings(file, tokenLists, options = {}) {
  const size = Math.max(512, ...tokenLists.map((tokens) => tokens.length));
  const load = await llamaCppLoad(file, { nCtx: size, batch: size, ubatch: size, ...options }, { embeddings: true });
  const tokens = tokenLists.reduce((n, list) => n + list.length, 0);
  const { ms, promptTokens, vectors } = await engine.page.evaluate(EMBED_TIMED, { lists: tokenLists });
  if (promptTokens !== tokens || vectors !== tokenLists.length) {
    throw new Error(`llama.cpp embedded ${promptTokens} tokens in ${vectors} vectors, not the ${tokens} in ${tokenLists.length} given`);
  }
  return { tokens, ms, tokensPerSecond: tokens / (ms / 1000), load };
}

// Runs in the page: one completion, greedy, for exactly maxTokens tokens
// (`request` adds to llama-server's completion request).
const COMPLETE = `async ({ prompt, maxTokens, request }) => {
  return window.llama.createCompletion({
    prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true, cache_prompt: false, ...request,
  });
}`;

/**
 * llama.cpp's greedy completion of the text `prompt` for exactly
 * `maxTokens` tokens, as llama-server answers it (text in, text out:
 * wllama's completions take no token ids); `request` adds to the request
 * (llama-server's own fields, e.g. n_probs). `options` are llamaCppLoad's
 * (nCtx defaults to 2048). Resolves to the response: { choices: [{ text,
 * logprobs, ... }], usage, timings, ... }.
 */
export async function llamaCppCompletion(file, prompt, { maxTokens = 16, request = {}, ...options } = {}) {
  await llamaCppLoad(file, { nCtx: 2048, ...options });
  return complete(prompt, maxTokens, request);
}

// One completion on the loaded model. A completion whose text is not valid
// UTF-8 (a random model's bytes) fails inside wllama: its JSON writer throws
// ([json.exception.type_error.316]) and the page sees a garbage length; the
// error carries what llama.cpp said.
async function complete(prompt, maxTokens, request) {
  const seen = engine.page.problems().length;
  try {
    return await engine.page.evaluate(COMPLETE, { prompt, maxTokens, request });
  } catch (error) {
    const said = engine.page.problems().slice(seen);
    await closeLlamaCpp(); // a failed action leaves wllama unusable
    throw new Error(`llama.cpp's completion failed: ${error.message.split('\n')[0]}${said.length ? ` (it said: ${said.slice(0, 8).join(' | ')})` : ''}`);
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * llama.cpp's own prefill and decode rates for `file`: a completion of a
 * prompt followed by `decodeTokens` greedy tokens, `runs` times (medians
 * reported). The prompt is `prompt`, or digitPrompt(promptTokens) (default
 * 512 tokens) for the synthetic vocabulary; when promptTokens is given, the
 * count llama.cpp made of the prompt must be it. `options` are
 * llamaCppLoad's (nCtx defaults to the prompt and the decode, 2048 when the
 * prompt's length is not known). Resolves to { promptTokens, decodeTokens,
 * prefillMs, decodeMs, prefillTokensPerSecond, decodeTokensPerSecond, runs:
 * [llama.cpp's timings], load }.
 */
export async function llamaCppTimings(file, { promptTokens, decodeTokens = 64, prompt, runs = 1, ...options } = {}) {
  const wanted = promptTokens ?? (prompt === undefined ? 512 : undefined);
  const text = prompt ?? digitPrompt(wanted);
  const load = await llamaCppLoad(file, { nCtx: wanted === undefined ? 2048 : wanted + decodeTokens, ...options });
  const all = [];
  for (let r = 0; r < runs; r++) {
    const { timings } = await complete(text, decodeTokens, {});
    if (wanted !== undefined && timings.prompt_n !== wanted) {
      throw new Error(`llama.cpp made ${timings.prompt_n} tokens of the prompt, not ${wanted}: give a prompt of that many tokens`);
    }
    all.push(timings);
  }
  const prefillMs = median(all.map((t) => t.prompt_ms));
  return {
    promptTokens: all[0].prompt_n, decodeTokens: all[0].predicted_n,
    prefillMs, decodeMs: median(all.map((t) => t.predicted_ms)),
    prefillTokensPerSecond: median(all.map((t) => t.prompt_per_second)),
    // llama.cpp's own figure: tokens generated over the time from the prompt's end
    // (n tokens, n − 1 forward passes: the first comes from the prompt's logits).
    decodeTokensPerSecond: median(all.map((t) => t.predicted_per_second)),
    runs: all, load,
  };
}

/** Logits [vocab] = output (row-major [vocab × dim], f32) · hidden, accumulated in f64. */
export function logitsFromHidden(hidden, output) {
  const dim = hidden.length;
  const vocab = output.length / dim;
  const logits = new Float64Array(vocab);
  for (let v = 0; v < vocab; v++) {
    let s = 0;
    for (let i = 0; i < dim; i++) s += output[v * dim + i] * hidden[i];
    logits[v] = s;
  }
  return logits;
}

// A contender for the top-1: a token within this many nats of the best.
const CONTENDER = 1;

/**
 * KL(p ‖ q) of the softmaxes of two logit vectors, in nats; whether their
 * argmaxes agree; top1Gap, how far below p's best logit p puts q's argmax
 * (0 when they agree): small where p's two best are a near tie that the two
 * computations' rounding may settle either way; and contenderMove, the most
 * q moves the log-probability of one of p's contenders.
 */
export function compareLogits(p, q) {
  // Plain loops: a 262k vocabulary over 128 positions is 67M terms a comparison.
  const logSumExp = (z) => {
    let max = -Infinity;
    for (let i = 0; i < z.length; i++) max = Math.max(max, z[i]);
    let sum = 0;
    for (let i = 0; i < z.length; i++) sum += Math.exp(z[i] - max);
    return Math.log(sum) + max;
  };
  const [logP, logQ] = [logSumExp(p), logSumExp(q)];
  let kl = 0;
  for (let i = 0; i < p.length; i++) {
    const lp = p[i] - logP;
    kl += Math.exp(lp) * (lp - (q[i] - logQ));
  }
  const argmax = (z) => {
    let best = 0;
    for (let i = 1; i < z.length; i++) if (z[i] > z[best]) best = i;
    return best;
  };
  const [bestP, bestQ] = [argmax(p), argmax(q)];
  let contenderMove = 0;
  for (let i = 0; i < p.length; i++) {
    if (p[i] >= p[bestP] - CONTENDER) contenderMove = Math.max(contenderMove, Math.abs((p[i] - logP) - (q[i] - logQ)));
  }
  return { kl: Math.max(0, kl), top1Agrees: bestP === bestQ, top1Gap: p[bestP] - p[bestQ], contenderMove };
}

/**
 * compareLogits' results over a model's positions, summed up: { meanKl,
 * maxKl, top1 (the fraction of positions whose argmax agrees), top1Gap and
 * contenderMove (the largest) }.
 */
export function summarizeComparisons(comparisons) {
  return {
    meanKl: comparisons.reduce((sum, c) => sum + c.kl, 0) / comparisons.length,
    maxKl: Math.max(...comparisons.map((c) => c.kl)),
    top1: comparisons.filter((c) => c.top1Agrees).length / comparisons.length,
    top1Gap: Math.max(...comparisons.map((c) => c.top1Gap)),
    contenderMove: Math.max(...comparisons.map((c) => c.contenderMove)),
  };
}

/**
 * How far this project's runner is from llama.cpp on the model `spec`
 * (tests/gguf/models.mjs): at each of `positions`, teacher-forced on
 * `tokens`, llama.cpp's hidden state (coded as llama.cpp codes it for
 * output.weight's type: tests/gguf/activations.mjs) times output.weight
 * (dequantized by the JS reference) in f64 against the runner's logits (one forward pass over
 * `tokens`, its cache in options.runnerMode, default f32). The runner is
 * `runner` (a Llama), or the spec's own model. `options` are llamaCppLoad's. Resolves to
 * summarizeComparisons' { meanKl, maxKl, top1, top1Gap } and loadMs, hiddenMs
 * (llama.cpp's time for all the prefixes).
 */
export async function runnerAgreement(spec, tokens, positions, options = {}, runner = undefined) {
  const bytes = encodeGguf(spec);
  runner ??= Llama.fromGguf(bytes);
  const load = await llamaCppLoad(bytes, options, EMBEDDINGS);
  const started = performance.now();
  const hidden = await llamaCppHidden(bytes, tokens, positions, options);
  const hiddenMs = performance.now() - started;
  const vocab = runner.config.vocabSize;
  // A session's cache: the model's layer kinds (window, conv, delta layers where it has them).
  const session = runner.session({ mode: options.runnerMode ?? 'f32' });
  let reference;
  try {
    reference = runner.forward(session.cache, tokens);
  } finally {
    session.free();
  }
  const outputName = spec.tensors.some((t) => t.name === 'output.weight') ? 'output.weight' : 'token_embd.weight';
  const output = tensorValues(spec, outputName);
  // llama.cpp's product codes the hidden state as its vec_dot_type first: so does this one.
  const outputType = spec.tensors.find((t) => t.name === outputName).type;
  const comparisons = positions.map((p, i) => compareLogits(
    logitsFromHidden(codedActivations(outputType, hidden[i], 1, hidden[i].length), output), reference.subarray(p * vocab, (p + 1) * vocab)));
  return { ...summarizeComparisons(comparisons), loadMs: load.loadMs, hiddenMs };
}

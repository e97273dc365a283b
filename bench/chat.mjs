// A reply in a worker, as an app sees it: kvcache-wasm/worker in headless
// Chromium on a cross-origin isolated page, a model of SmolLM2-135M's
// geometry in Q8_0 (random valid weights: tests/gguf/models.mjs, kept in the
// same folder as the llm benchmark's). What the targets are about:
// the first piece against one forward pass of the prompt (the same prompt
// prefilled on the page's thread by Llama, the time a first piece cannot
// beat), the page's thread while the worker generates (the longest gap
// between timer ticks, and Chromium's long tasks), and an abort: how long
// after abort() the last piece comes, and how many tokens still came.
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GEOMETRIES, modelFile, randomLlama } from '../tests/gguf/models.mjs';
import { browserMissing, launchBrowser } from '../tests/runtimes/browsers.mjs';
import { serveFiles } from '../tests/runtimes/static-server.mjs';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const MODELS = join(tmpdir(), 'kvcache-wasm-bench-models');
const JINJA = 'node_modules/@huggingface/jinja/dist/index.js';
const DECODE_TOKENS = 32;
const ABORT_AFTER = 8;
// The page's thread is watched as the worker tests watch it.
const WATCH = 'tests/runtimes/worker-smoke.mjs';

const PAGE = `<!doctype html><meta charset="utf-8"><title>kvcache-wasm chat bench</title><link rel="icon" href="data:,">
<script type="importmap">{ "imports": { "kvcache-wasm": "/js/index.js", "kvcache-wasm/llama": "/js/llama.js",
  "kvcache-wasm/worker": "/js/worker.js", "kvcache-wasm/chat": "/js/chat.js", "@huggingface/jinja": "/${JINJA}" } }</script>`;

// Runs in the page: the same prompt through the worker and, for the first
// piece's floor, on the page's own thread.
const RUN = `async ({ url, promptTokens, decode, abortAfter, threads }) => {
  const kv = await import('kvcache-wasm');
  const { Llama } = await import('kvcache-wasm/llama');
  const { LlamaWorker } = await import('kvcache-wasm/worker');
  await kv.init({ threads });
  const worker = new LlamaWorker({ init: { threads } });
  const { threadInfo } = await worker.ready();
  const model = await worker.load(url);
  const prompt = Array.from({ length: promptTokens }, (_, i) => 3 + ((i * 7919) % (model.config.vocabSize - 3)));

  // One forward pass of the prompt on this thread: what the first piece waits for at least.
  const local = await Llama.load(await fetch(url), { contextLength: promptTokens + decode });
  const { numLayers, numKvHeads, headDim } = local.config;
  local.forward(new kv.KvCache({ numLayers, numKvHeads, headDim }), prompt.slice(0, 16), { logits: 'last' }); // warm-up
  const cache = new kv.KvCache({ numLayers, numKvHeads, headDim });
  let t = performance.now();
  local.forward(cache, prompt, { logits: 'last' });
  const forwardMs = performance.now() - t;
  cache.free();
  local.free();

  const warm = await model.session();
  for await (const piece of warm.generate(prompt.slice(0, 16), { maxTokens: 2, temperature: 0 })) void piece;
  await warm.free();

  const session = await model.session();
  const { watchMainThread } = await import('/tests/runtimes/worker-smoke.mjs');
  const watching = watchMainThread();
  t = performance.now();
  let firstPieceMs = null;
  let tokens = 0;
  for await (const piece of session.generate(prompt, { maxTokens: decode, temperature: 0 })) {
    firstPieceMs ??= performance.now() - t;
    tokens += piece.tokens.length;
  }
  const decodeMs = performance.now() - t - firstPieceMs;
  const { maxGapMs, longTasks } = watching.stop();
  await session.free();

  const aborting = await model.session();
  const controller = new AbortController();
  let seen = 0; let abortedAt = null; let abortMs = null; let afterAbort = 0;
  for await (const piece of aborting.generate(prompt.slice(0, 16), { maxTokens: 400, temperature: 0, signal: controller.signal })) {
    if (abortedAt !== null) afterAbort += piece.tokens.length;
    if (piece.tokens.length && ++seen === abortAfter) { controller.abort(); abortedAt = performance.now(); }
    if (piece.stop) abortMs = performance.now() - abortedAt;
  }
  await aborting.free();
  await model.free();
  worker.terminate();
  return { threads: threadInfo.threads, isa: kv.kernelIsa(), forwardMs, firstPieceMs, decodeMsPerToken: decodeMs / (tokens - 1),
    maxGapMs, longTasks: (longTasks ?? []).filter((d) => d > 50).length, abortMs, afterAbort };
}`;

export async function run({ quick = false } = {}) {
  const title = 'A reply in a worker (kvcache-wasm/worker, Chromium, cross-origin isolated): first piece, the page\'s thread, abort';
  const columns = ['file', 'prompt tokens', 'threads', 'one forward of the prompt ms (page)', 'first piece ms (worker)', 'first ÷ forward',
    'decode ms/token', 'page longest gap ms', 'long tasks > 50 ms', 'abort took ms', 'tokens after abort'];
  const missing = await browserMissing('chromium');
  if (missing) return [{ name: 'chat', title, columns, rows: [], notes: [`skipped: ${missing}`] }];
  mkdirSync(MODELS, { recursive: true });
  const file = modelFile(MODELS, 'smollm2-135m-Q8_0', () => randomLlama(GEOMETRIES['smollm2-135m'], { mix: 'Q8_0', seed: 1 }));
  const served = (pathname) => {
    const path = posix.normalize(pathname).slice(1);
    if (path === 'model.gguf') return file;
    const at = join(ROOT, path);
    const allowed = path.startsWith('js/') || path.startsWith('dist/') || path === JINJA || path === WATCH;
    return allowed && existsSync(at) && statSync(at).isFile() ? at : null;
  };
  const server = await serveFiles(served, { isolated: true, pages: { '/': () => PAGE } });
  const browser = await launchBrowser('chromium');
  const rows = [];
  try {
    for (const promptTokens of quick ? [32] : [128, 512]) {
      for (const threads of quick ? [2] : [1, 2]) {
        const page = await browser.open(`http://127.0.0.1:${server.address().port}/`);
        const r = await page.evaluate(RUN, { url: '/model.gguf', promptTokens, decode: quick ? 4 : DECODE_TOKENS, abortAfter: quick ? 2 : ABORT_AFTER, threads });
        await page.close();
        rows.push(['SmolLM2-135M geometry, Q8_0', promptTokens, r.threads, r.forwardMs, r.firstPieceMs, r.firstPieceMs / r.forwardMs,
          r.decodeMsPerToken, r.maxGapMs, r.longTasks, r.abortMs, r.afterAbort]);
      }
    }
  } finally {
    await browser.close();
    server.close();
  }
  return [{ name: 'chat', title, columns, rows, notes: [
    `${browser.version}; ${statSync(file).size >> 20} MiB file, random weights. The first piece is the prompt's own forward pass in the worker ` +
    '(its first token comes from the prompt\'s logits) plus one message; the forward on the page is the same prompt by Llama on the page\'s thread. ' +
    'The page\'s longest gap: between setTimeout(0) ticks while the worker generates. Abort: from abort() to the last piece, which says \'abort\'; ' +
    'tokens after it are pieces the worker had sent before the abort reached it.'] }];
}

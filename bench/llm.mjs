// The model runner against llama.cpp on the same GGUF files in the same
// browser: this package (Llama.load, a session's forward passes) and
// llama.cpp's wasm build (@wllama/wllama, tests/runtimes/wllama.mjs), each in
// headless Chromium on a cross-origin isolated page, one after the other.
// Files of two geometries (SmolLM2-135M's and Llama-3.2-1B's) with random
// valid weights in three mixes (Q8_0, llama.cpp's Q4_K_M rules, F16): any
// valid block is a valid weight for both engines (tests/gguf/models.mjs
// writes them, into a folder kept between runs). Prefill: a prompt of the
// context's length; decode: tokens after it. Both engines on 1 thread and on
// every thread; native llama.cpp (node-llama-cpp) on the same files beside
// them. Also: the JS heap while a 1.3 GB file loads. The 2026 geometries
// (Gemma 3 270M and 1B, with their window layers, and SmolLM3-3B) run in Q8_0
// and Q4_K_M, Phi-3.5-mini's and Phi-4-mini's in Q4_K_M, the hybrids
// LFM2-350M (Q8_0), LFM2-1.2B (Q4_K_M) and Qwen3.5-0.8B (Q8_0), and Gemma 4
// E2B's and Ministral 3 3B's in Q4_K_M.
//
// llama.cpp prefills a few tokens a second on this machine, so long contexts
// take it most of an hour per file: the full run measures 512 everywhere on 1
// thread and on 2, and last 16384 on the small geometry (its context raised)
// in Q8_0 with 8-bit caches (q8 against q8_0) on 2; --quick one file at 128.
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GEOMETRIES, modelFile, randomLlama } from '../tests/gguf/models.mjs';
import { browserMissing, launchBrowser } from '../tests/runtimes/browsers.mjs';
import { serveFiles } from '../tests/runtimes/static-server.mjs';
import { closeLlamaCpp, llamaCppMissing, llamaCppTimings } from '../tests/runtimes/wllama.mjs';
import { closeNativeLlamaCpp, nativeLlamaCppMissing, nativeTimings } from '../tests/runtimes/llamacpp-native.mjs';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const MODELS = join(tmpdir(), 'kvcache-wasm-bench-models');
const DECODE_TOKENS = 32;
const THREADS = [1, 2];

// The page: the package from the repository (its browser entry), a model by
// URL; what it measures comes back as JSON.
const PAGE = `<!doctype html><meta charset="utf-8"><title>kvcache-wasm runner bench</title><link rel="icon" href="data:,">
<script type="importmap">{ "imports": { "kvcache-wasm": "/js/index.js", "kvcache-wasm/llama": "/js/llama.js" } }</script>`;

// Runs in the page: loads the model once per URL (sampling the JS heap while
// it streams), then a prefill of `context` tokens and `decode` greedy tokens.
const RUN = `async ({ url, threads, context, decode, mode }) => {
  const kv = await import('kvcache-wasm');
  const { Llama } = await import('kvcache-wasm/llama');
  await kv.init({ threads });
  // One model loaded at a time: a page's heap holds one 1B model, not six.
  if (window.model?.url !== url) {
    window.model?.llama.free();
    window.model = null;
    let heapPeak = 0;
    const started = performance.now();
    const llama = await Llama.load(await fetch(url), {
      contextLength: context + decode,
      onProgress: () => { heapPeak = Math.max(heapPeak, performance.memory?.usedJSHeapSize ?? 0); },
    });
    window.model = { url, llama, loadMs: performance.now() - started, heapPeak };
  }
  const { llama, loadMs, heapPeak } = window.model;
  const { vocabSize } = llama.config;
  // A session's cache: the model's layer kinds (window layers where it has them).
  const session = llama.session({ mode });
  const { cache } = session;
  const prompt = Array.from({ length: context }, (_, i) => 3 + ((i * 7919) % (vocabSize - 3)));
  let t = performance.now();
  let logits = llama.forward(cache, prompt, { logits: 'last' });
  const prefillMs = performance.now() - t;
  const argmax = (z) => z.reduce((best, v, i) => (v > z[best] ? i : best), 0);
  t = performance.now();
  for (let i = 0; i < decode; i++) logits = llama.forward(cache, [argmax(logits)], { logits: 'last' });
  const decodeMs = performance.now() - t;
  session.free();
  return { threads: kv.threadCount(), isa: kv.kernelIsa(), loadMs, heapPeak,
    prefillTokensPerSecond: context / (prefillMs / 1000), decodeTokensPerSecond: decode / (decodeMs / 1000) };
}`;

/** This package in Chromium: one page per thread count (init runs once a page). */
export async function ourEngine() {
  const served = (pathname) => {
    const path = posix.normalize(pathname).slice(1);
    if (path.startsWith('models/')) return join(MODELS, path.slice('models/'.length));
    const file = join(ROOT, path);
    return (path.startsWith('js/') || path.startsWith('dist/')) && existsSync(file) && statSync(file).isFile() ? file : null;
  };
  const server = await serveFiles(served, { isolated: true, pages: { '/': () => PAGE } });
  const browser = await launchBrowser('chromium');
  const pages = new Map();
  return {
    version: browser.version,
    async run(file, threads, context, decode, mode) {
      if (!pages.has(threads)) pages.set(threads, await browser.open(`http://127.0.0.1:${server.address().port}/`));
      return pages.get(threads).evaluate(RUN, { url: `/models/${posix.basename(file)}`, threads, context, decode, mode });
    },
    async close() {
      await browser.close();
      server.close();
    },
  };
}

/**
 * The benchmark's files: { geometry, mix, path, bytes, long }. The long
 * context runs on SmolLM2-135M's geometry with its context (8192) raised to
 * 32768 in the file: the runner refuses positions past a file's context, and
 * a geometry whose own context is that long (Llama-3.2-1B's) would take
 * llama.cpp hours to prefill.
 */
function files(quick, only) {
  mkdirSync(MODELS, { recursive: true });
  const long = { ...GEOMETRIES['smollm2-135m'], name: 'smollm2-135m-32k', contextLength: 32768 };
  const all = quick ? [[GEOMETRIES['smollm2-135m'], 'Q8_0', false]]
    : [...['smollm2-135m', 'llama-3.2-1b'].flatMap((g) => ['Q8_0', 'Q4_K_M', 'F16'].map((mix) => [GEOMETRIES[g], mix, false])),
      [long, 'Q8_0', true],
      ...['gemma-3-270m', 'gemma-3-1b', 'smollm3-3b'].flatMap((g) => ['Q8_0', 'Q4_K_M'].map((mix) => [GEOMETRIES[g], mix, false])),
      ...['phi-3.5-mini', 'phi-4-mini'].map((g) => [GEOMETRIES[g], 'Q4_K_M', false]),
      ...[['lfm2-350m', 'Q8_0'], ['lfm2-1.2b', 'Q4_K_M'], ['qwen3.5-0.8b', 'Q8_0'], ['granite-4.0-h-350m', 'Q8_0'],
        ['granite-4.0-h-1b', 'Q4_K_M'], ['falcon-h1-0.5b', 'Q4_K_M'], ['nemotron-3-nano-4b', 'Q4_K_M']].map(([g, mix]) => [GEOMETRIES[g], mix, false]),
      ...['gemma-4-e2b', 'ministral-3-3b'].map((g) => [GEOMETRIES[g], 'Q4_K_M', false])];
  const named = (g, mix) => `${g.name}-${mix}`;
  const unknown = only?.filter((name) => !all.some(([g, mix]) => named(g, mix) === name));
  if (unknown?.length) throw new RangeError(`bench llm: no file ${unknown.join(', ')}; known: ${all.map(([g, mix]) => named(g, mix)).join(', ')}`);
  return all.filter(([g, mix]) => !only || only.includes(named(g, mix))).map(([g, mix, isLong]) => {
    const path = modelFile(MODELS, named(g, mix), () => randomLlama(g, { mix, seed: 1 }));
    return { geometry: g.name, mix, path, bytes: statSync(path).size, long: isLong };
  });
}

/** What each file is measured at: [context, our mode, llama.cpp's cache type, thread counts]. */
function contexts(file, quick) {
  if (quick) return [[128, 'f32', 'f16', [2]]];
  if (file.long) return [[16384, 'q8', 'q8_0', [THREADS.at(-1)]]];
  // Gemma 3 1B also where its window layers matter: 8192 positions, 16 windows of 512.
  if (file.geometry === 'gemma-3-1b' && file.mix === 'Q8_0') return [[512, 'f32', 'f16', THREADS], [8192, 'f32', 'f16', [THREADS.at(-1)]]];
  return [[512, 'f32', 'f16', THREADS]];
}

export async function run({ quick = false, files: onlyFiles, threads: onlyThreads } = {}) {
  const title = 'Decode and prefill: this package against llama.cpp (@wllama/wllama) on the same GGUF file, Chromium, tokens/s';
  const columns = ['geometry', 'file', 'context', 'threads', 'KV (ours / llama.cpp)', 'decode', 'llama.cpp decode', 'decode ÷', 'prefill',
    'llama.cpp prefill', 'prefill ÷', 'native decode', 'decode ÷ native', 'native prefill', 'prefill ÷ native'];
  const missing = (await browserMissing('chromium')) ?? (await llamaCppMissing());
  if (missing) return [{ name: 'llm', title, columns, rows: [], notes: [`skipped: ${missing}`] }];
  const rows = [];
  const loads = [];
  const nativeMissing = await nativeLlamaCppMissing();
  const decode = quick ? 4 : DECODE_TOKENS;
  const ours = await ourEngine();
  const notes = [];
  try {
    for (const file of files(quick, onlyFiles)) {
      for (const [context, mode, cacheType, threadCounts] of contexts(file, quick)) {
        for (const threads of threadCounts.filter((n) => !onlyThreads || onlyThreads.includes(n))) {
          const mine = await ours.run(file.path, threads, context, decode, mode);
          let theirs = null;
          try {
            theirs = await llamaCppTimings(file.path, { promptTokens: context, decodeTokens: decode, threads, nCtx: context + decode + 8,
              cacheTypeK: cacheType, cacheTypeV: cacheType, warmup: true });
          } catch (error) {
            notes.push(`llama.cpp, ${file.geometry} ${file.mix} at ${context}: ${error.message.split('\n')[0]}`);
          }
          const native = nativeMissing ? null : await nativeTimings(file.path, { promptTokens: context, decodeTokens: decode, threads });
          const ratio = (a, b) => (a && b ? a / b : null);
          rows.push([file.geometry, file.mix, context, threads, `${mode} / ${cacheType}`,
            mine.decodeTokensPerSecond, theirs?.decodeTokensPerSecond, ratio(mine.decodeTokensPerSecond, theirs?.decodeTokensPerSecond),
            mine.prefillTokensPerSecond, theirs?.prefillTokensPerSecond, ratio(mine.prefillTokensPerSecond, theirs?.prefillTokensPerSecond),
            native?.decodeTokensPerSecond, ratio(mine.decodeTokensPerSecond, native?.decodeTokensPerSecond),
            native?.prefillTokensPerSecond, ratio(mine.prefillTokensPerSecond, native?.prefillTokensPerSecond)]);
          if (!loads.some((l) => l[1] === file.mix && l[0] === file.geometry)) {
            loads.push([file.geometry, file.mix, file.bytes / 2 ** 20, mine.loadMs, mine.heapPeak / 2 ** 20, theirs?.load.loadMs]);
          }
        }
      }
    }
  } finally {
    await ours.close();
    await closeLlamaCpp();
    await closeNativeLlamaCpp();
  }
  if (nativeMissing) notes.push(`native llama.cpp: ${nativeMissing}`);
  return [
    { name: 'llm', title, columns, rows, notes: [
      `${ours.version}, cross-origin isolated, ${decode} tokens decoded after a prompt of the context's length; ÷: ours over llama.cpp's. ` +
      'llama.cpp: its own timings (prompt_per_second, predicted_per_second), flash attention as it defaults (on), its cache f16 unless said; ' +
      'ours: its forward passes timed in the page, attention added to imp as a session does. ' +
      'Native: llama.cpp\'s CPU build through node-llama-cpp in Node on the same file and threads, timed by the clock around its calls ' +
      '(the prompt in one evaluation, then greedy tokens sampled natively; node-llama-cpp\'s per-token overhead is in the decode figure).', ...notes] },
    { name: 'llm-load', title: 'Loading the same files (Chromium): MiB, ms, and the JS heap during our load (outside the wasm memory)',
      columns: ['geometry', 'file', 'MiB', 'our load ms', 'our JS heap peak MiB', 'llama.cpp load ms'], rows: loads,
      notes: ['Ours: Llama.load of the fetch Response, streamed into the heap; the heap peak is performance.memory.usedJSHeapSize sampled at every chunk. ' +
        'llama.cpp: wllama\'s loadModel of the same file.'] },
  ];
}

// Embeddings (issue 53): how fast a batch of texts becomes vectors, and the
// memory a batch takes. Files of random valid weights at the embedding
// models' real geometries (tests/gguf/models.mjs, kept in the llm
// benchmark's folder): EmbeddingGemma-300M's in Q8_0 and F16,
// Qwen3-Embedding-0.6B's in Q8_0, and bge-small-en-v1.5's and
// nomic-embed-text-v1.5's in Q8_0 where models.mjs has their geometries.
// A batch of 64 texts of 32 to 256 random token ids (seed 1), the same lists
// for every engine, on 2 threads:
// - this package in Node: Llama#embed of the lists, in a process of its own
//   (init runs once a process, with its thread count): this file run as a
//   script, under the Node that runs relaxed SIMD where there is one;
// - native llama.cpp, node-llama-cpp's CPU build (tests/runtimes/
//   llamacpp-native.mjs): one embedding context, the lists one after another;
//   as it comes (the best of its builds for the CPU) and with its AVX2 build
//   alone (nativeInProcess's 'avx2', in a process of its own: wasm SIMD's
//   class of instruction, the yardstick);
// - llama.cpp's wasm build (@wllama/wllama, tests/runtimes/wllama.mjs) in
//   headless Chromium: createEmbedding of the same ids.
// Ours and native twice, in turn, the best of each kept; wllama once, on the
// first 16 texts.
// Memory: the wasm memory's size and Llama#memoryBytes after a batch of 1, 8
// and 64 texts, each batch in a process of its own (the memory never
// shrinks: its size after the batch is the batch's peak). --quick: the tiny geometries of the same architectures,
// 8 texts of 32 to 64 tokens, once.
//
//   node bench/embeddings.mjs FILE THREADS < lists.json   (the Node engine)
// prints one line of JSON: { isa, threads, tokens, ms, heapBytes, weights, scratch }.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { init, kernelIsa, memoryStats, threadCount } from '../js/index.js';
import { Llama } from '../js/llama.js';
import { rng } from '../support/synthetic.mjs';
import { GEOMETRIES, modelFile, randomLlama } from '../tests/gguf/models.mjs';
import { closeNativeLlamaCpp, nativeEmbeddingTimings, nativeInProcess, nativeLlamaCppMissing } from '../tests/runtimes/llamacpp-native.mjs';
import { closeLlamaCpp, llamaCppEmbeddingTimings, llamaCppMissing } from '../tests/runtimes/wllama.mjs';
import { relaxedNode } from '../scripts/toolchain.mjs';

const SELF = fileURLToPath(import.meta.url);
const MODELS = join(tmpdir(), 'kvcache-wasm-bench-models');
const THREADS = 2;
const ROUNDS = 2;
const TEXTS = 64;
// wllama takes the first 16 of them: it runs a text at a time, at a tenth of
// the others' speed, and 64 would hold the benchmark up for an hour.
const WLLAMA_TEXTS = 16;
const TEXT_TOKENS = [32, 256];
const MEMORY_BATCHES = [1, 8, TEXTS];
// Each file's geometry, mixes, and the tiny geometry of its architecture that --quick runs in its place.
const FILES = [
  { geometry: 'embeddinggemma-300m', mixes: ['Q8_0', 'F16'], quick: 'tiny-embeddinggemma' },
  { geometry: 'qwen3-embedding-0.6b', mixes: ['Q8_0'], quick: 'tiny-qwen3-embedding' },
  { geometry: 'bge-small-en-v1.5', mixes: ['Q8_0'], quick: 'tiny-bert' },
  { geometry: 'nomic-embed-text-v1.5', mixes: ['Q8_0'], quick: 'tiny-nomic-bert' },
];

/** `count` lists of `min` to `max` random ids (seed 1), past the first three of a vocabulary of `vocab`. */
function tokenLists(count, [min, max], vocab) {
  const random = rng(1);
  return Array.from({ length: count }, () => Array.from({ length: min + random.int(max - min + 1) }, () => 3 + random.int(vocab - 3)));
}

const tokensOf = (lists) => lists.reduce((n, list) => n + list.length, 0);

/** The benchmark's files, { geometry, mix, path, vocab }, and why any is left out. */
function files(quick) {
  mkdirSync(MODELS, { recursive: true });
  const skipped = [];
  const found = [];
  for (const { geometry, mixes, quick: tiny } of FILES) {
    const name = quick ? tiny : geometry;
    const g = GEOMETRIES[name];
    if (!g) {
      skipped.push(`${name}: skipped, tests/gguf/models.mjs has no such geometry`);
      continue;
    }
    for (const mix of quick ? ['Q8_0'] : mixes) {
      found.push({ geometry: name, mix, vocab: g.vocabSize, path: modelFile(MODELS, `${name}-${mix}`, () => randomLlama(g, { mix, seed: 1 })) });
    }
  }
  return { found, skipped };
}

/** This package in Node on THREADS: `lists` embedded in one call, in a process of its own (this file as a script). */
function inNode(path, lists) {
  const node = existsSync(relaxedNode) ? relaxedNode : process.execPath;
  const run = spawnSync(node, [SELF, path, String(THREADS)], { input: JSON.stringify(lists), encoding: 'utf8', maxBuffer: 1 << 20 });
  if (run.status !== 0) throw new Error(`bench embeddings: ${SELF} failed: ${run.stderr.trim().split('\n').slice(-3).join(' ')}`);
  return JSON.parse(run.stdout.trim().split('\n').at(-1));
}

/** The Node engine: the file at `file` loaded, a warm-up text (its code compiled), then the lists of stdin timed in one embed(). */
async function measureInNode(file, threads) {
  await init({ threads });
  const lists = JSON.parse(readFileSync(0, 'utf8'));
  const llama = Llama.fromGguf(readFileSync(file));
  await llama.embed([lists[0]]);
  const started = performance.now();
  await llama.embed(lists);
  const ms = performance.now() - started;
  const { weights, scratch } = llama.memoryBytes;
  console.log(JSON.stringify({ isa: kernelIsa(), threads: threadCount(), tokens: tokensOf(lists), ms, heapBytes: memoryStats().heapBytes, weights, scratch }));
}

export async function run({ quick = false } = {}) {
  const texts = quick ? 8 : TEXTS;
  const textTokens = quick ? [32, 64] : TEXT_TOKENS;
  const rounds = quick ? 1 : ROUNDS;
  const batches = MEMORY_BATCHES.filter((n) => n < texts).concat(texts);
  const speedTable = { name: 'embeddings', title: `A batch of ${texts} texts embedded on ${THREADS} threads: this package against llama.cpp, native and wasm, on the same file and token ids, tokens/s`,
    columns: ['geometry', 'file', 'MiB', 'texts', 'tokens', 'ours, Node', 'our build', 'native AVX2', 'ours ÷ AVX2', 'native best', 'ours ÷ best',
      'wllama', 'wllama threads', 'ours ÷ wllama'] };
  const memoryTable = { name: 'embeddings-memory', title: 'The memory of a batch (Node): the wasm memory and the model\'s bytes after it, MiB',
    columns: ['geometry', 'file', 'texts', 'tokens', 'wasm memory', 'weights', 'scratch'] };
  const nativeMissing = await nativeLlamaCppMissing();
  const wllamaMissing = await llamaCppMissing();
  const notes = [];
  const { found, skipped } = files(quick);
  const speed = [];
  const memory = [];
  const mib = (bytes) => bytes / 2 ** 20;
  try {
    for (const file of found) {
      const lists = tokenLists(texts, textTokens, file.vocab);
      const tokens = tokensOf(lists);
      // Ours and native `rounds` times, in turn, the best of each kept: the machine is shared,
      // and a neighbour's burst slows whichever engine runs through it.
      const best = {};
      const keep = (engine, result) => {
        if (!best[engine] || result.tokensPerSecond > best[engine].tokensPerSecond) best[engine] = result;
      };
      for (let round = 0; round < rounds; round++) {
        const node = inNode(file.path, lists);
        keep('node', { ...node, tokensPerSecond: node.tokens / (node.ms / 1000) });
        if (!nativeMissing) keep('native', await nativeEmbeddingTimings(file.path, lists, { threads: THREADS }));
        if (!nativeMissing) keep('avx2', nativeInProcess('avx2', 'nativeEmbeddingTimings', file.path, lists, { threads: THREADS }));
      }
      // wllama once, as the llm benchmark runs it: a batch takes it many times the others' time.
      let wllama = null;
      if (!wllamaMissing) {
        try {
          wllama = await llamaCppEmbeddingTimings(file.path, lists.slice(0, quick ? texts : WLLAMA_TEXTS), { threads: THREADS });
        } catch (error) {
          notes.push(`wllama, ${file.geometry} ${file.mix}: ${error.message.split('\n')[0]}`);
        }
      }
      const { node, native, avx2 } = best;
      const ratio = (a, b) => (a && b ? a / b : null);
      const wllamaThreads = wllama && `${wllama.load.threads}${wllama.load.multithread ? '' : ' (no pthreads)'}`;
      speed.push([file.geometry, file.mix, mib(statSync(file.path).size), texts, tokens, node.tokensPerSecond, node.isa,
        avx2?.tokensPerSecond, ratio(node.tokensPerSecond, avx2?.tokensPerSecond),
        native?.tokensPerSecond, ratio(node.tokensPerSecond, native?.tokensPerSecond),
        wllama?.tokensPerSecond, wllamaThreads, ratio(node.tokensPerSecond, wllama?.tokensPerSecond)]);
      // The batch of the speed rows is the largest; the smaller ones each in a process of its own.
      for (const batch of batches) {
        const measured = batch === texts ? node : inNode(file.path, lists.slice(0, batch));
        memory.push([file.geometry, file.mix, batch, measured.tokens, mib(measured.heapBytes), mib(measured.weights), mib(measured.scratch)]);
      }
    }
  } finally {
    await closeNativeLlamaCpp();
    await closeLlamaCpp();
  }
  if (nativeMissing) notes.push(`native llama.cpp: ${nativeMissing}`);
  if (wllamaMissing) notes.push(`wllama: ${wllamaMissing}`);
  const listsSaid = `${texts} lists of ${textTokens[0]} to ${textTokens[1]} random token ids (seed 1), the same for every engine and taken as given (no begin or end token added)`;
  return [
    { ...speedTable, rows: speed, notes: [
      `${cpus()[0]?.model ?? 'unknown CPU'}. Random valid weights; ${listsSaid}; ours and native in turn, ${rounds === 1 ? 'once' : `${rounds} times, the best of each kept`}, then wllama once; tokens/s is the batch's tokens over the time of the batch. ` +
      `Ours: Llama#embed of the lists in one call (many texts a pass of the weights, up to 512 tokens), in Node in a process of its own on ${THREADS} threads, after one warm-up text; our build is the module init() picked there. ` +
      `Native: llama.cpp's CPU build through node-llama-cpp in Node, ${THREADS} threads, the lists one after another in one embedding context as its LlamaEmbeddingContext does, ` +
      `"best" the variant of its CPU backend it picks for this CPU${cpuFlags().length ? ` (the CPU has ${cpuFlags().join(', ')})` : ''}, "AVX2" its haswell variant alone (256-bit vectors without VNNI or AMX: wasm SIMD's class of instruction, the yardstick) ` +
      '(the context made before the clock starts; its cache and flash attention as it defaults). ' +
      `wllama: llama.cpp's wasm build in headless Chromium, cross-origin isolated, loaded with embeddings on and the file's pooling, the ${quick ? '' : `first ${WLLAMA_TEXTS} `}ids given to createEmbedding as token arrays (no text, no tokenizer) in one call, which llama-server runs a list at a time (one slot); timed by the page's clock around the call; "wllama threads" is what it ran on. ` +
      'Targets (issue 53): ours ÷ native at least 0.5, ours ÷ wllama at least 2 (Node against Chromium). Not measured: ours in Chromium (the llm benchmark\'s page runs forward passes, not embed).',
      ...skipped, ...notes] },
    { ...memoryTable, rows: memory, notes: [
      `The first ${batches.slice(0, -1).join(', ')} and ${texts} of the lists above, each batch in a process of its own on ${THREADS} threads after one warm-up text: the wasm memory's size after the batch (memoryStats().heapBytes: it never shrinks, so this is the batch's peak), ` +
      'and Llama#memoryBytes then: the weights, and the scratch the largest pass grew it to (a pass takes up to 512 tokens of texts; its layers\' rows are freed after it).'] },
  ];
}

/** The CPU's vector and matrix extensions past AVX2 that native builds may use (/proc/cpuinfo's flags; none elsewhere). */
function cpuFlags() {
  const flags = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1].split(' ') ?? [] : [];
  return ['avx512f', 'avx512_vnni', 'amx_tile'].filter((flag) => flags.includes(flag)).map((flag) => ({ avx512f: 'AVX-512', avx512_vnni: 'VNNI', amx_tile: 'AMX' })[flag]);
}

if (process.argv[1] === SELF) {
  const [file, threads] = process.argv.slice(2);
  await measureInNode(file, Number(threads));
  process.exit(0);
}

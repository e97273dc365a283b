// llama.cpp as the oracle, natively: the npm package node-llama-cpp (its
// prebuilt CPU build), which scripts/test.mjs --all installs into
// build-tools/node-llama-cpp (scripts/toolchain.mjs ensureNativeLlamaCpp).
// It runs every architecture the runner reads and gives raw logits per
// position, far faster than the wasm build in a browser.
//
//   const why = await nativeLlamaCppMissing();   // a reason to skip, or null
//   const logits = await nativeLogits(path, tokens, vocab, { flashAttention: false });  // [tokens x vocab]
//   const t = await nativeTimings(path, { promptTokens: 512, decodeTokens: 32, threads: 2 });  // tokens/s
//   const vectors = await nativeEmbeddings(path, [ids1, ids2]);   // Float32Array per token list, raw
//   const scores = await nativeRankScores(path, [ids1, ids2]);    // a reranker's rank output per list
//   const e = await nativeEmbeddingTimings(path, [ids1, ids2], { threads: 2 });  // tokens/s, one context
//   const t2 = nativeInProcess('avx2', 'nativeTimings', path, { promptTokens: 512, decodeTokens: 32, threads: 2 });
//       // the same in a process of its own, with the AVX2 build alone ('best': as installed); t2.isa its instruction sets
//   nativeInProcess('avx2', 'nativeLogitsToFile', out, path, tokens, vocab);  // that build's logits, raw f32 in the file out
//   const ids = await nativeTokenize(vocabPath, text, { special: true });  // a vocabulary-only file will do
//   const text = await nativeDetokenize(vocabPath, ids, { special: true });
//   await closeNativeLlamaCpp();
//
// The cache is f32 (keys and values), so that what is compared is the
// model's arithmetic, not llama.cpp's cache quantization; one context per
// call, teacher forcing every position in one evaluation.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { nativeLlamaCppDir } from '../../scripts/toolchain.mjs';
import { POOLING_TYPES } from '../gguf/models.mjs';

const SELF = fileURLToPath(import.meta.url);
// KVC_NATIVE_LLAMA_CPP_DIR: another installation (avx2NativeLlamaCppDir's), for a process of its own (nativeInProcess).
const installed = process.env.KVC_NATIVE_LLAMA_CPP_DIR ?? nativeLlamaCppDir;
const entry = join(installed, 'node_modules', 'node-llama-cpp', 'dist', 'index.js');

/**
 * node-llama-cpp as installed but with its AVX2 build of llama.cpp's CPU
 * backend alone (libggml-cpu-haswell.so: 256-bit vectors without VNNI or
 * AMX, the class of instruction wasm SIMD maps to), where it picks the best
 * of a dozen for the CPU: its directory, made once in the temporary folder
 * (node-llama-cpp and its binaries copied, every other package linked), for
 * KVC_NATIVE_LLAMA_CPP_DIR.
 */
export function avx2NativeLlamaCppDir() {
  const dir = join(tmpdir(), 'kvcache-wasm-llamacpp-avx2');
  const modules = join(dir, 'node_modules'), from = join(nativeLlamaCppDir, 'node_modules');
  const binaries = join(modules, '@node-llama-cpp', `${process.platform}-${process.arch}`);
  if (existsSync(join(modules, 'node-llama-cpp'))) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(modules, '@node-llama-cpp'), { recursive: true });
  cpSync(join(from, 'node-llama-cpp'), join(modules, 'node-llama-cpp'), { recursive: true });
  cpSync(join(from, '@node-llama-cpp', `${process.platform}-${process.arch}`), binaries, { recursive: true,
    filter: (source) => !/libggml-cpu-(?!haswell)[\w-]+\.so$/.test(source) });
  for (const name of readdirSync(from).filter((n) => n !== 'node-llama-cpp' && n !== '@node-llama-cpp' && !n.startsWith('.'))) {
    symlinkSync(join(from, name), join(modules, name));
  }
  return dir;
}
let llama = null;
let loaded = null; // { path, vocabOnly, model }

async function runtime() {
  if (!llama) {
    const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
    llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error, build: 'never' });
  }
  return llama;
}

// ggml's CPU features that name no instruction set (ggml-cpu.cpp's ggml_backend_cpu_get_features).
const NOT_ISA = new Set(['LLAMAFILE', 'ACCELERATE', 'CPU_HBM', 'OPENMP', 'KLEIDIAI', 'REPACK']);

/**
 * The instruction sets of the CPU backend node-llama-cpp loaded (of its
 * builds, the one it picked for this CPU): llama_print_system_info's CPU
 * line, as 'SSE3, SSSE3, AVX, AVX2, F16C, FMA, BMI2'.
 */
export async function nativeCpuIsa() {
  const line = /CPU :([^\n]*)/.exec((await runtime()).systemInfo)?.[1] ?? '';
  return [...line.matchAll(/(\w+) = (\w+)/g)].filter(([, name, value]) => value !== '0' && !NOT_ISA.has(name)).map(([, name]) => name).join(', ');
}

/** Why native llama.cpp cannot run here, or null. */
export async function nativeLlamaCppMissing() {
  if (!existsSync(entry)) return `node-llama-cpp is not installed in ${nativeLlamaCppDir} (npm run test:all installs it)`;
  try {
    await runtime();
    return null;
  } catch (error) {
    return `node-llama-cpp does not start here: ${error.message}`;
  }
}

async function modelAt(path, { vocabOnly = false } = {}) {
  if (loaded?.path !== path || loaded.vocabOnly !== vocabOnly) {
    await loaded?.model.dispose();
    loaded = { path, vocabOnly, model: await (await runtime()).loadModel({ modelPath: path, vocabOnly }) };
  }
  return loaded.model;
}

/**
 * llama.cpp's ids for `text` from the vocabulary of the file at `path` (its
 * weights not loaded), without the begin token (common_tokenize's
 * add_special false); `special`: control tokens written in the text are
 * taken whole (parse_special).
 */
export async function nativeTokenize(path, text, { special = false } = {}) {
  return (await modelAt(path, { vocabOnly: true })).tokenize(text, special);
}

/** llama.cpp's text for `ids` (llama_detokenize; `special`: control tokens read as their text). */
export async function nativeDetokenize(path, ids, { special = false } = {}) {
  return (await modelAt(path, { vocabOnly: true })).detokenize(ids, special);
}

/** The context nativeLogits gives llama.cpp for up to this many tokens (LongRoPE picks its factors by it). */
export const NATIVE_CONTEXT = 256;

/** llama.cpp's logits at every position of `tokens` [tokens.length x vocab], an f32 cache. */
export async function nativeLogits(path, tokens, vocab, { flashAttention = false, threads = 2 } = {}) {
  const model = await modelAt(path);
  const context = await model.createContext({
    contextSize: Math.max(NATIVE_CONTEXT, tokens.length), batchSize: Math.max(NATIVE_CONTEXT, tokens.length), threads, flashAttention,
    experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32',
  });
  try {
    const results = await context.getSequence().controlledEvaluate(tokens.map((t) => [t, { generateNext: { logits: true } }]));
    const out = new Float32Array(tokens.length * vocab);
    results.forEach((r, i) => {
      for (const [token, logit] of r.next.logits) out[i * vocab + token] = logit;
    });
    return out;
  } finally {
    await context.dispose();
  }
}

/** `tokens` evaluated in `sequence` of the embeddings context `context` (the sequence empty): the pooled output, copied. */
async function pooledOutput(context, sequence, tokens) {
  // The evaluation runs as the generator is first pulled; one pull, no token sampled.
  for await (const _ of sequence.evaluate(tokens, { _noSampling: true })) break;
  return Float32Array.from(context._ctx.getEmbedding(tokens.length));
}

/**
 * llama.cpp's pooled output for each token list of `tokenLists`, each
 * evaluated alone (a context of its own, one sequence, an f32 cache, flash
 * attention off, the whole list in one batch: mean pooling and the
 * bidirectional attention of gemma-embedding see all of it): what
 * llama_get_embeddings_seq gives, the width of the model's output (after
 * its Dense modules) or n_cls_out for rank pooling. node-llama-cpp's
 * LlamaEmbeddingContext adds a begin or end token to given ids where the
 * vocabulary adds one, LlamaRankingContext makes its own input of a query
 * and a document, and neither takes a cache type; so their machinery is
 * used as they use it: a context made with their `_embeddings` (and
 * `_ranking`: rank pooling) flags, the ids evaluated as they are
 * (`_noSampling`), the context's `getEmbedding`.
 */
async function pooledOutputs(path, tokenLists, { ranking = false, threads = 2 } = {}) {
  const model = await modelAt(path);
  const outputs = [];
  for (const tokens of tokenLists) {
    const size = Math.max(NATIVE_CONTEXT, tokens.length + 1);
    const context = await model.createContext({
      contextSize: size, batchSize: size, sequences: 1, threads, flashAttention: false,
      experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32', _embeddings: true, _ranking: ranking,
    });
    try {
      outputs.push(await pooledOutput(context, context.getSequence(), tokens));
    } finally {
      await context.dispose();
    }
  }
  return outputs;
}

/**
 * Native llama.cpp's embedding speed on a file: every token list of
 * `tokenLists` (ids as given) evaluated one after another in one context,
 * as node-llama-cpp's LlamaEmbeddingContext does (its cache and flash
 * attention as it defaults, the sequence emptied before each list), the
 * pooled vector read out of each; the context's creation not timed:
 * { tokens, ms, tokensPerSecond }.
 */
export async function nativeEmbeddingTimings(path, tokenLists, { threads = 2 } = {}) {
  const model = await modelAt(path);
  const size = Math.max(NATIVE_CONTEXT, ...tokenLists.map((tokens) => tokens.length + 1));
  const context = await model.createContext({ contextSize: size, batchSize: size, sequences: 1, threads, _embeddings: true });
  try {
    const sequence = context.getSequence();
    const started = performance.now();
    for (const tokens of tokenLists) {
      await sequence.eraseContextTokenRanges([{ start: 0, end: sequence.nextTokenIndex }]);
      await pooledOutput(context, sequence, tokens);
    }
    const ms = performance.now() - started;
    const tokens = tokenLists.reduce((n, list) => n + list.length, 0);
    return { tokens, ms, tokensPerSecond: tokens / (ms / 1000) };
  } finally {
    await context.dispose();
  }
}

/** The pooling (a POOLING_TYPES name) the file at `path` asks for, or undefined (llama.cpp then pools none). */
async function filePooling(path) {
  const { metadata } = (await modelAt(path)).fileInfo;
  const type = metadata[metadata.general.architecture]?.pooling_type;
  return Object.keys(POOLING_TYPES).find((name) => POOLING_TYPES[name] === type);
}

/**
 * llama.cpp's embedding of each token list of `texts` (arrays of ids,
 * evaluated exactly as given: no begin or end token added), a
 * Float32Array each, not normalised. node-llama-cpp normalises nothing
 * (its getEmbedding copies llama_get_embeddings_seq as it is; llama-server
 * and @fugood/llama.node normalise by default, embd_normalize 2). The
 * pooling is the file's: node-llama-cpp sets no pooling type on a context
 * but rank, so `pooling`, when given, must be the file's (write the file
 * with the pooling wanted; secondOpinionEmbeddings in mtmd-native.mjs
 * overrides it). A file without one pools none, and the vector is then the
 * last token's hidden state.
 */
export async function nativeEmbeddings(path, texts, { pooling, threads = 2 } = {}) {
  const own = await filePooling(path);
  if (pooling !== undefined && pooling !== own) {
    throw new RangeError(`node-llama-cpp pools as the file says (${own ?? 'none'}), not ${pooling}: write the file with that pooling`);
  }
  return pooledOutputs(path, texts, { threads });
}

/**
 * llama.cpp's rank score for each token list (the ids as given, each alone):
 * the rank pooling's first output, embd[0], which is what llama-server
 * returns as a document's score -- for qwen3 the softmax of the last
 * token's "yes" and "no" logits (cls.output), a probability; for a BERT
 * cross-encoder cls.output's one logit (its bias added) on the first
 * token's hidden state, the context asking for rank pooling where the file
 * names none (the converter writes no pooling type for a cross-encoder).
 * LlamaRankingContext passes other architectures' through a sigmoid, which
 * is left out here.
 */
export async function nativeRankScores(path, tokenLists, { threads = 2 } = {}) {
  return (await pooledOutputs(path, tokenLists, { ranking: true, threads })).map((output) => output[0]);
}

/**
 * Native llama.cpp's speed on a file: a prompt of `promptTokens` taken in
 * one evaluation, then `decodeTokens` greedy tokens sampled natively (no
 * logits cross into JS), each timed by the clock around it (its f16 cache
 * and flash attention as it defaults, as the wasm build's timings are
 * taken): { prefillTokensPerSecond, decodeTokensPerSecond }.
 */
export async function nativeTimings(path, { promptTokens, decodeTokens, threads }) {
  const model = await modelAt(path);
  const context = await model.createContext({ contextSize: promptTokens + decodeTokens + 8, batchSize: promptTokens, threads });
  try {
    const sequence = context.getSequence();
    const vocab = model.tokens.count ?? 1024;
    const prompt = Array.from({ length: promptTokens }, (_, i) => 3 + ((i * 7919) % (vocab - 3)));
    let t = performance.now();
    await sequence.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1));
    const prefillMs = performance.now() - t;
    t = performance.now();
    let made = 0;
    for await (const token of sequence.evaluate(prompt.slice(-1), { temperature: 0 })) {
      if (++made >= decodeTokens || token === undefined) break;
    }
    const decodeMs = performance.now() - t;
    return { prefillTokensPerSecond: (promptTokens - 1) / (prefillMs / 1000), decodeTokensPerSecond: made / (decodeMs / 1000) };
  } finally {
    await context.dispose();
  }
}

export async function closeNativeLlamaCpp() {
  await loaded?.model.dispose();
  loaded = null;
  await llama?.dispose();
  llama = null;
}

// The installations nativeInProcess runs: node-llama-cpp as installed (it
// loads the best of its CPU builds for this CPU), and its AVX2 build alone.
const BUILDS = { best: () => nativeLlamaCppDir, avx2: avx2NativeLlamaCppDir };
/** nativeLogits(path, tokens, vocab, options) written to the file `out`, raw f32 (a process's answer to nativeInProcess is a line of JSON): { bytes }. */
async function nativeLogitsToFile(out, path, tokens, vocab, options) {
  const logits = await nativeLogits(path, tokens, vocab, options);
  writeFileSync(out, logits);
  return { bytes: logits.byteLength };
}

// What it may run there.
const MEASUREMENTS = { nativeTimings, nativeEmbeddingTimings, nativeLogitsToFile };

/**
 * measurement(...args) (nativeTimings, nativeEmbeddingTimings or nativeLogitsToFile) in a
 * process of its own, this module run as a script with `build` ('best' or
 * 'avx2') installed: the measurement's result, with `isa` the instruction
 * sets of the CPU backend that ran it (nativeCpuIsa). A library loads one
 * installation a process, so one build is measured beside another this way.
 */
export function nativeInProcess(build, measurement, ...args) {
  const run = spawnSync(process.execPath, [SELF], {
    input: JSON.stringify({ measurement, args }), encoding: 'utf8', maxBuffer: 1 << 20, env: { ...process.env, KVC_NATIVE_LLAMA_CPP_DIR: BUILDS[build]() },
  });
  if (run.status !== 0) throw new Error(`native llama.cpp, ${build} build: ${measurement} failed: ${run.stderr.trim().split('\n').slice(-3).join(' ')}`);
  return JSON.parse(run.stdout.trim().split('\n').at(-1));
}

if (process.argv[1] === SELF) {
  const { measurement, args } = JSON.parse(readFileSync(0, 'utf8'));
  console.log(JSON.stringify({ ...(await MEASUREMENTS[measurement](...args)), isa: await nativeCpuIsa() }));
  await closeNativeLlamaCpp();
  process.exit(0);
}

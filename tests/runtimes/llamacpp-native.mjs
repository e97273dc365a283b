// llama.cpp as the oracle, natively: the npm package node-llama-cpp (its
// prebuilt CPU build), which scripts/test.mjs --all installs into
// build-tools/node-llama-cpp (scripts/toolchain.mjs ensureNativeLlamaCpp).
// It runs every architecture the runner reads and gives raw logits per
// position, far faster than the wasm build in a browser.
//
//   const why = await nativeLlamaCppMissing();   // a reason to skip, or null
//   const logits = await nativeLogits(path, tokens, vocab, { flashAttention: false });  // [tokens x vocab]
//   const t = await nativeTimings(path, { promptTokens: 512, decodeTokens: 32, threads: 2 });  // tokens/s
//   const ids = await nativeTokenize(vocabPath, text, { special: true });  // a vocabulary-only file will do
//   const text = await nativeDetokenize(vocabPath, ids, { special: true });
//   await closeNativeLlamaCpp();
//
// The cache is f32 (keys and values), so that what is compared is the
// model's arithmetic, not llama.cpp's cache quantization; one context per
// call, teacher forcing every position in one evaluation.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { nativeLlamaCppDir } from '../../scripts/toolchain.mjs';

const entry = join(nativeLlamaCppDir, 'node_modules', 'node-llama-cpp', 'dist', 'index.js');
let llama = null;
let loaded = null; // { path, vocabOnly, model }

async function runtime() {
  if (!llama) {
    const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
    llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error, build: 'never' });
  }
  return llama;
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

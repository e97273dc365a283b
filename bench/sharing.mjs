// Shared prefixes: what a fork costs as the context grows (the claim: O(pages)
// bookkeeping, no row copied, so about flat), what N conversations sharing a
// prefix hold against N deep copies (memoryStats: every page once), and what
// a PrefixCache saves a llama runner: the prompt tokens it does not compute.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { KvCache, PrefixCache, memoryStats } from '../js/index.js';
import { Llama, generate } from '../js/llama.js';
import { defineLanguageModel } from '../js/prompt-api.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GEOMETRIES as MODEL_GEOMETRIES, modelFile, randomLlama } from '../tests/gguf/models.mjs';
import { encodeGguf } from '../tests/gguf/writer.mjs';
import { normals, outlierKeys, rng } from '../support/synthetic.mjs';

const MODEL = process.env.KVCACHE_WASM_MODEL ?? fileURLToPath(new URL('../../shared/data/stories260k.gguf', import.meta.url));
const FORKS = 64;
// The geometries of the targets: stories260K's (5 layers of 4 KV heads x 8)
// and a 32-layer one of 8 x 128 (llama-3-8B's).
const GEOMETRIES = [
  { name: 'stories260K: 5 layers x 4 x 8', numLayers: 5, numKvHeads: 4, headDim: 8 },
  { name: '32 layers x 8 x 128', numLayers: 32, numKvHeads: 8, headDim: 128 },
];

/** A q8 model cache of `geometry` holding `context` positions. */
function filled(geometry, context, r) {
  const { numLayers, numKvHeads, headDim } = geometry;
  const cache = new KvCache({ numLayers, numKvHeads, headDim, mode: 'q8' });
  for (let at = 0; at < context;) {
    const n = Math.min(1024, context - at);
    const k = outlierKeys(r, n, at, numKvHeads, headDim);
    const v = normals(r, n * numKvHeads * headDim);
    for (let l = 0; l < numLayers; l++) cache.layer(l).appendBatch(k, v);
    at += n;
  }
  return cache;
}

/** Median ms of `call` (its result freed untimed) over `runs` calls. */
function medianMs(runs, call) {
  const samples = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    const made = call();
    samples.push(performance.now() - start);
    made.free();
  }
  samples.sort((a, b) => a - b);
  return samples[runs >> 1];
}

function forkRows(quick) {
  const r = rng(41);
  const rows = [];
  for (const geometry of GEOMETRIES) {
    const contexts = quick ? [256, 1024] : geometry.headDim > 8 ? [1024, 4096] : [1024, 4096, 16384];
    for (const context of contexts) {
      if (quick && geometry.headDim > 8) continue;
      const cache = filled(geometry, context, r);
      const one = cache.memoryBytes;
      const fork = medianMs(quick ? 11 : 101, () => cache.clone());
      const serialized = cache.serialize();
      const deep = medianMs(quick ? 3 : 7, () => KvCache.deserialize(serialized));
      // 64 forks: what memoryStats counts, then after each fork appended one position of its own.
      const before = memoryStats().cacheBytes;
      const forks = Array.from({ length: FORKS }, () => cache.clone());
      const added = memoryStats().cacheBytes - before;
      const { numKvHeads, headDim } = geometry;
      const k = outlierKeys(r, 1, context, numKvHeads, headDim);
      const v = normals(r, numKvHeads * headDim);
      for (const f of forks) for (let l = 0; l < geometry.numLayers; l++) f.layer(l).append(k, v);
      const grown = memoryStats().cacheBytes - before;
      const deepCopies = forks.reduce((sum, f) => sum + f.memoryBytes, 0);
      for (const f of forks) f.free();
      cache.free();
      rows.push([geometry.name, context, one, fork, deep, (100 * added) / one, grown, deepCopies, deepCopies / (one + grown)]);
    }
  }
  return rows;
}

function prefixRows(quick) {
  if (!existsSync(MODEL)) return { rows: [], note: `The prefix-cache rows were skipped: no model at ${MODEL} (set KVCACHE_WASM_MODEL).` };
  const llama = Llama.fromGguf(new Uint8Array(readFileSync(MODEL)));
  // A 256-token system prompt, then each conversation's own question.
  const system = llama.tokenizer.encode('Once upon a time, in a small town by the sea, there lived a kind old man named Tom. '.repeat(20)).slice(0, 256);
  const questions = ['One day, Tom', 'The bird', 'Max was a good dog.', 'Then it started to rain.', 'Tom smiled.', 'What happened next?']
    .map((text) => llama.tokenizer.encode(` ${text}`, { bos: false }));
  const conversations = quick ? 6 : 24;
  const steps = 16;
  const rows = [];
  for (const shared of [false, true]) {
    const prefixCache = shared ? new PrefixCache({ budgetBytes: 32 << 20 }) : undefined;
    const sessions = [];
    let computed = 0;
    let reused = 0;
    const start = performance.now();
    for (let c = 0; c < conversations; c++) {
      const session = llama.session({ mode: 'q8', prefixCache });
      const prompt = [...system, ...questions[c % questions.length]];
      const { stats } = generate(session, prompt, { steps, stopAtEos: false });
      reused += stats.prefixTokens;
      computed += prompt.length - 1 - stats.prefixTokens;
      sessions.push(session);
    }
    const seconds = (performance.now() - start) / 1000;
    const held = memoryStats().cacheBytes;
    const apart = sessions.reduce((sum, s) => sum + s.cache.memoryBytes, 0);
    for (const session of sessions) session.free();
    prefixCache?.free();
    rows.push([shared ? 'with a PrefixCache' : 'each prefills its prompt', conversations, computed, reused, seconds, held, apart]);
  }
  return { rows, note: `stories260K, q8: ${conversations} conversations, each a 256-token system prompt, a question of its own and ${steps} greedy tokens; "held" is memoryStats().cacheBytes with every conversation alive (the prefix cache's entries included), "apart" the sum of their memoryBytes.` };
}

// A Prompt API session's clone() against the prefill of its conversation:
// a model of SmolLM2-135M's geometry in Q8_0 (random valid weights, kept
// with the llm benchmark's files), a long system prompt as initialPrompts.
async function promptApiRows(quick) {
  // --quick: a tiny geometry, so that the harness runs in a second.
  const geometry = MODEL_GEOMETRIES[quick ? 'tiny' : 'smollm2-135m'];
  const llama = quick ? Llama.fromGguf(encodeGguf(randomLlama(geometry, { mix: 'Q8_0', seed: 1 })))
    : Llama.fromGguf(new Uint8Array(readFileSync(modelFile(join(tmpdir(), 'kvcache-wasm-bench-models'), 'smollm2-135m-Q8_0', () => randomLlama(geometry, { mix: 'Q8_0', seed: 1 })))));
  const LanguageModel = defineLanguageModel({ model: llama });
  const rows = [];
  for (const words of quick ? [64] : [512]) {
    const system = Array.from({ length: words }, (_, i) => `w${(i * 7919) % 997}`).join(' ');
    const start = performance.now();
    const session = await LanguageModel.create({ initialPrompts: [{ role: 'system', content: system }] });
    const prefill = performance.now() - start;
    const samples = [];
    for (let i = 0; i < (quick ? 5 : 51); i++) {
      const t0 = performance.now();
      const copy = await session.clone();
      samples.push(performance.now() - t0);
      copy.destroy();
    }
    samples.sort((a, b) => a - b);
    const clone = samples[samples.length >> 1];
    rows.push([session.contextUsage, prefill / 1000, clone, (100 * clone) / prefill]);
    session.destroy();
  }
  llama.free();
  return rows;
}

export async function run({ quick = false } = {}) {
  const prefix = prefixRows(quick);
  const promptApi = await promptApiRows(quick);
  return [
    {
      name: 'sharing-forks',
      title: `Forks of a q8 KvCache: time against context, and ${FORKS} of them against deep copies`,
      columns: ['geometry', 'context', 'one cache bytes', 'clone ms', 'deep copy ms (restore)', `${FORKS} forks add % of one`,
        `bytes added, ${FORKS} forks + 1 position each`, `${FORKS} deep copies bytes`, 'deep ÷ shared'],
      rows: forkRows(quick),
      notes: [`clone() is a fork: a reference to every page (64 positions of a head) and no row copied; the deep copy is a restored snapshot (a copy of every byte). After forking, each of the ${FORKS} forks appends one position: it copies the partly filled last page of each sequence, not the prefix. "deep ÷ shared": ${FORKS} deep copies against the one cache and everything the forks added.`],
    },
    {
      name: 'sharing-prefix',
      title: 'A PrefixCache in the llama runner: prompt tokens computed and memory held',
      columns: ['conversations', 'count', 'prompt tokens computed', 'taken from the prefix cache', 'seconds', 'held bytes', 'apart bytes'],
      rows: prefix.rows,
      notes: [prefix.note],
    },
    {
      name: 'sharing-prompt-api',
      title: 'The Prompt API\'s clone(): a fork of the session against the prefill of its conversation',
      columns: ['tokens held', 'create() with initialPrompts s', 'clone() ms', 'clone % of prefill'],
      rows: promptApi,
      notes: ['kvcache-wasm/prompt-api on a model of SmolLM2-135M\'s geometry in Q8_0 (random valid weights), this thread, the f32 cache: create() takes the system prompt in (its prefill); clone() forks the session (its cache copy on write, its tokens and messages copied), median of 51.'],
    },
  ];
}

// The runner's embeddings and rerank scores against native llama.cpp
// (tests/runtimes/llamacpp-native.mjs, an f32 cache, each text alone) at the
// real geometries of the embedding families, random weights, texts of random
// words of 1 to 512 tokens (at most the model's context): in the full tier
// bge-small-en-v1.5 (F16) and a MiniLM cross-encoder -- the tier's 25 minutes
// hold the small ones; their architectures' tiny files meet llama.cpp in npm
// test -- and with KVC_EMBEDDING_GEOMETRIES (a list of names, or all)
// EmbeddingGemma-300M, all-MiniLM-L6-v2, nomic-embed-text-v1.5,
// Qwen3-Embedding-0.6B and Qwen3-Reranker-0.6B; KVC_EMBEDDING_TEXTS texts a
// file (default 8; docs/embeddings.md's figures are over 200);
// KVC_EMBEDDING_MIX one type for every file. Bounds as on the tiny files
// (tests/js/embeddings-native.test.mjs): cosine >= 0.9999 per text on F16 and
// F32; on a quantized file >= 0.999, or, where @fugood/llama.node's build
// (the second opinion) differs from node-llama-cpp's by more, within twice
// that; rank scores within 1e-3 and in llama.cpp's order. Each case prints
// its figures (a quantized file's beside llama.cpp's two builds').
import assert from 'node:assert/strict';
import { openAsBlob } from 'node:fs';
import { after, before, test } from 'node:test';
import { Llama } from '../../js/llama.js';
import { cosine, rerankTokens, textLists } from '../js/embedding-cases.mjs';
import { nativeOracle } from '../js/native-cases.mjs';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { writeGgufFile } from '../gguf/writer.mjs';
import { nativeEmbeddings, nativeRankScores } from '../runtimes/llamacpp-native.mjs';
import { closeMtmd, mtmdMissing, secondOpinionEmbeddings } from '../runtimes/mtmd-native.mjs';

const oracle = nativeOracle();
let secondMissing = null;
before(async () => {
  secondMissing = await mtmdMissing();
});
after(closeMtmd);

const EMBEDDERS = [['bge-small-en-v1.5', 'F16'], ['embeddinggemma-300m', 'Q8_0'], ['all-minilm-l6-v2', 'Q8_0'],
  ['nomic-embed-text-v1.5', 'Q8_0'], ['qwen3-embedding-0.6b', 'Q8_0']];
const RERANKERS = [['qwen3-reranker-0.6b', 'F16'], ['ms-marco-minilm-l6', 'F16']];
const TIER = ['bge-small-en-v1.5', 'ms-marco-minilm-l6'];
const chosen = process.env.KVC_EMBEDDING_GEOMETRIES === 'all' ? [...EMBEDDERS, ...RERANKERS].map(([name]) => name)
  : process.env.KVC_EMBEDDING_GEOMETRIES?.split(',') ?? TIER;
const TEXTS = Number(process.env.KVC_EMBEDDING_TEXTS ?? 8);
const MIX = process.env.KVC_EMBEDDING_MIX;

/** The file of geometry `name` in `mix`, written for the case, and our model of it. */
async function model(name, mix) {
  const path = oracle.file(`${name}-${mix}.gguf`);
  writeGgufFile(path, randomLlama(GEOMETRIES[name], { mix, seed: 9 }));
  return { path, llama: await Llama.load(await openAsBlob(path)) };
}

const worstOf = (values) => Math.min(...values);

for (const [name, own] of EMBEDDERS.filter(([name]) => chosen.includes(name))) {
  const mix = MIX ?? own;
  test(`${name} (${mix}): each text's embedding is llama.cpp's`, async (t) => {
    if (oracle.missing) return t.skip(oracle.missing);
    const { path, llama } = await model(name, mix);
    try {
      const lists = textLists(llama, TEXTS, Math.min(512, llama.config.contextLength), 21);
      const ours = await llama.embed(lists, { normalize: false });
      const theirs = await nativeEmbeddings(path, lists);
      const worst = worstOf(ours.map((v, i) => cosine(v, theirs[i])));
      // A quantized file's bound: llama.cpp against itself, its second build (another CPU backend, the same file).
      const quantized = mix !== 'F16' && mix !== 'F32';
      const self = !quantized || secondMissing ? null : worstOf((await secondOpinionEmbeddings(path, lists)).map((v, i) => cosine(v, theirs[i])));
      console.log(`# ${name} ${mix}: cosine against llama.cpp, worst of ${lists.length} texts of 1 to ${lists[1].length} tokens: ${worst.toFixed(7)}`
        + (quantized ? `; llama.cpp's two builds: ${self === null ? `not measured (${secondMissing})` : self.toFixed(7)}` : ''));
      const bound = !quantized ? 0.9999 : Math.min(0.999, self === null ? 1 : 1 - 2 * (1 - self));
      assert.ok(worst >= bound, `worst cosine ${worst} below ${bound}`);
    } finally {
      llama.free();
    }
  });
}

for (const [name, own] of RERANKERS.filter(([name]) => chosen.includes(name))) {
  const mix = MIX ?? own;
  test(`${name} (${mix}): rerank scores are llama.cpp's within 1e-3, in its order`, async (t) => {
    if (oracle.missing) return t.skip(oracle.missing);
    const { path, llama } = await model(name, mix);
    try {
      const query = 'where did the fox sleep last night';
      const documents = Array.from({ length: TEXTS }, (_, i) => `document ${i}: ${'the fox slept under a tree by the river '.repeat(1 + (i * 7) % 12)}`);
      const { scores, ranking } = await llama.rerank(query, documents);
      const theirs = await nativeRankScores(path, documents.map((d) => rerankTokens(llama, query, d)));
      const worst = Math.max(...scores.map((s, i) => Math.abs(s - theirs[i])));
      console.log(`# ${name} ${mix}: rank scores within ${worst.toExponential(2)} of llama.cpp's over ${documents.length} documents`);
      assert.ok(worst <= 1e-3, `ours ${scores}, llama.cpp's ${theirs}`);
      assert.deepEqual(ranking.map(({ index }) => index), [...theirs.keys()].sort((a, b) => theirs[b] - theirs[a] || a - b));
    } finally {
      llama.free();
    }
  });
}

// The runner's embeddings and rerank scores against native llama.cpp
// (tests/runtimes/llamacpp-native.mjs: node-llama-cpp's embedding and
// ranking contexts, an f32 cache, each token list alone) on tiny random
// files of each embedding family: qwen3 pooling its last token (causal),
// gemma-embedding (Gemma 3's block both ways, a symmetric window of 16
// crossed many times by the longer texts, mean pooling, two dense layers),
// BERT (bge's CLS pooling; LayerNorms after each sub-block, learned
// positions, biases, GELU) and nomic-bert (RoPE, fused qkv, SwiGLU, mean),
// the same qwen3 block written with each other pooling, lfm2 pooling its
// mean with its short convolutions causal and (attention.causal false)
// centred on each token with its attention both ways; and the rerankers: a
// qwen3 one (the softmax of cls.output's "yes" and "no" rows on the last
// token) and a BERT cross-encoder (cls.output on [CLS], its file without a
// template). The same
// token lists go to both, many texts to one pass of ours. Bounds: cosine
// similarity >= 0.9999 per text on F32 and F16 files; on Q8_0 the figure is
// printed beside llama.cpp's own two builds' (their activations coded to
// 8 bits in another order differ by as much), and bounded by 0.999; rank
// scores within 1e-3, in the same order. Each case prints its figures.
// Where node-llama-cpp is missing the tests skip, saying why. The real
// geometries: tests/integration/embeddings-native.test.mjs.
import assert from 'node:assert/strict';
import { openAsBlob } from 'node:fs';
import { test } from 'node:test';
import { Llama } from '../../js/llama.js';
import { cosine, rerankTokens, tokenLists } from './embedding-cases.mjs';
import { nativeOracle } from './native-cases.mjs';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { writeGgufFile } from '../gguf/writer.mjs';
import { nativeEmbeddings, nativeRankScores } from '../runtimes/llamacpp-native.mjs';

const oracle = nativeOracle();

const qwen3 = GEOMETRIES['tiny-qwen3-embedding'];
const lfm2 = { ...GEOMETRIES['tiny-lfm2'], pooling: 'mean' };
// The qwen3 block written with each pooling llama.cpp applies to any
// architecture; `metadata`: keys added to the file.
// `mixes`: the two families people download take F16 and Q8_0 files too.
const EMBEDDERS = [
  { ...qwen3, mixes: ['F32', 'F16', 'Q8_0'] }, { ...GEOMETRIES['tiny-embeddinggemma'], mixes: ['F32', 'F16', 'Q8_0'] },
  { ...GEOMETRIES['tiny-bert'], mixes: ['F32', 'F16', 'Q8_0'] }, GEOMETRIES['tiny-nomic-bert'],
  { ...qwen3, name: 'tiny-qwen3-mean', pooling: 'mean' }, { ...qwen3, name: 'tiny-qwen3-cls', pooling: 'cls' },
  { ...lfm2, name: 'tiny-lfm2-causal' }, { ...lfm2, name: 'tiny-lfm2-bidirectional', metadata: [['lfm2.attention.causal', false]] },
];

/** Our vectors and llama.cpp's for `lists` on the file of g in `mix`: the cosine of each text's. */
async function cosines(g, mix, lists) {
  const path = oracle.file(`${g.name}-${mix}.gguf`);
  const spec = randomLlama(g, { mix, seed: 3 });
  writeGgufFile(path, { ...spec, metadata: [...spec.metadata, ...(g.metadata ?? [])] });
  const llama = await Llama.load(await openAsBlob(path));
  try {
    const ours = await llama.embed(lists, { normalize: false });
    const theirs = await nativeEmbeddings(path, lists);
    assert.ok(ours.every((v, i) => v.length === theirs[i].length && v.length === llama.config.embeddingDim));
    return ours.map((v, i) => cosine(v, theirs[i]));
  } finally {
    llama.free();
  }
}

for (const g of EMBEDDERS) {
  test(`${g.name} (${g.architecture}, pooling ${g.pooling}): each text's embedding is llama.cpp's, cosine >= 0.9999 on F32 and F16`, async (t) => {
    if (oracle.missing) return t.skip(oracle.missing);
    const lists = tokenLists(8, 160, g.vocabSize, 11);
    for (const mix of g.mixes ?? ['F32']) {
      const c = await cosines(g, mix, lists);
      const worst = Math.min(...c);
      console.log(`${g.name} ${mix}: cosine against llama.cpp, worst of ${lists.length} texts of 1 to 160 tokens: ${worst.toFixed(7)}`);
      assert.ok(c.every(Number.isFinite), `${mix}: cosines ${c}`);
      assert.ok(worst >= (mix === 'Q8_0' ? 0.999 : 0.9999), `${mix}: cosines ${c.map((x) => x.toFixed(6)).join(', ')}`);
    }
  });
}

for (const name of ['tiny-qwen3-reranker', 'tiny-bert-reranker']) {
  test(`${name}: rerank scores are llama.cpp's within 1e-3, in the same order, each document and the query tokenized as its server does`, async (t) => {
    if (oracle.missing) return t.skip(oracle.missing);
    const g = GEOMETRIES[name];
    const path = oracle.file(`${name}.gguf`);
    writeGgufFile(path, randomLlama(g, { mix: 'F32', seed: 4 }));
    const llama = await Llama.load(await openAsBlob(path));
    try {
      const query = 'which of these is about a fox';
      const documents = ['the quick brown fox', 'a dog slept', 'numbers 1 2 3 4 5 6 7', 'the fox and the dog', 'x'];
      const { scores, ranking } = await llama.rerank(query, documents);
      const theirs = await nativeRankScores(path, documents.map((d) => rerankTokens(llama, query, d)));
      const worst = Math.max(...scores.map((s, i) => Math.abs(s - theirs[i])));
      console.log(`${name}: rank scores ${scores.map((s) => s.toFixed(4)).join(', ')}; max |difference| from llama.cpp's ${worst.toExponential(2)}`);
      assert.ok(worst <= 1e-3, `ours ${scores}, llama.cpp's ${theirs}`);
      const order = (s) => s.map((score, index) => ({ score, index })).sort((a, b) => b.score - a.score).map(({ index }) => index);
      assert.deepEqual(ranking.map(({ index }) => index), order(theirs));
      assert.deepEqual(ranking.map(({ document }) => document), order(theirs).map((i) => documents[i]));
    } finally {
      llama.free();
    }
  });
}

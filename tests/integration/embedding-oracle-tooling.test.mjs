// The embedding test tooling against its oracles: the tiny embedding and
// reranking geometries of tests/gguf/models.mjs (tiny-qwen3-embedding,
// tiny-embeddinggemma, tiny-bert, tiny-nomic-bert, tiny-qwen3-reranker,
// tiny-bert-reranker) load in llama.cpp, and the two builds of it the tests
// run -- node-llama-cpp's (nativeEmbeddings, nativeRankScores:
// tests/runtimes/llamacpp-native.mjs) and @fugood/llama.node's
// (secondOpinionEmbeddings: tests/runtimes/mtmd-native.mjs) -- give the same
// vectors: finite, of the model's width (EmbeddingGemma's after its Dense
// modules), a token list's the same alone as after another that shares its
// prefix; a reranker's scores are what its pooled hidden state and cls.output
// account for (Qwen3's the softmax of the last token's "yes" and "no"
// logits, a BERT cross-encoder's one logit on its first token). Each test
// skips, saying why, where an oracle is missing.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { digitPrompt, GEOMETRIES, POOLING_TYPES, QWEN3_RERANK_TEMPLATE, randomLlama, tensorValues } from '../gguf/models.mjs';
import { writeGgufFile } from '../gguf/writer.mjs';
import { cosine } from '../js/embedding-cases.mjs';
import { closeNativeLlamaCpp, nativeEmbeddings, nativeLlamaCppMissing, nativeRankScores, nativeTokenize } from '../runtimes/llamacpp-native.mjs';
import { closeMtmd, mtmdMissing, secondOpinionEmbeddings } from '../runtimes/mtmd-native.mjs';

const dir = mkdtempSync(join(tmpdir(), 'kvc-embedding-oracle-'));
let nativeMissing = null;
let secondMissing = null;
before(async () => {
  nativeMissing = await nativeLlamaCppMissing();
  secondMissing = await mtmdMissing();
});
after(async () => {
  await closeMtmd();
  await closeNativeLlamaCpp();
  rmSync(dir, { recursive: true, force: true });
});

const EMBEDDERS = ['tiny-qwen3-embedding', 'tiny-embeddinggemma', 'tiny-bert', 'tiny-nomic-bert'].map((name) => GEOMETRIES[name]);
const RERANKER = GEOMETRIES['tiny-qwen3-reranker'];
const BERT_RERANKER = GEOMETRIES['tiny-bert-reranker'];

// Two texts that share their first three words (a context that kept the first's tokens would
// skip them in the second), another, and one of 128 tokens, which crosses a window of 16 many times.
const TEXTS = ['the quick brown fox', 'the quick brown dog sat', 'hello', digitPrompt(128)];

/** Each mix's file of geometry g, written once: { path, spec }. */
const files = new Map();
function file(g, mix = 'F32') {
  const key = `${g.name}-${mix}`;
  if (!files.has(key)) {
    const spec = randomLlama(g, { mix, seed: 5 });
    const path = join(dir, `${key}.gguf`);
    writeGgufFile(path, spec);
    files.set(key, { path, spec });
  }
  return files.get(key);
}

/** TEXTS as llama.cpp tokenizes them for g's file, with the begin and end tokens its tokenizer adds. */
async function tokenLists(g, path) {
  const { bosId, eosId } = file(g).spec.vocab;
  return Promise.all(TEXTS.map(async (text) => [
    ...((g.addBos ?? true) ? [bosId] : []), ...(await nativeTokenize(path, text)), ...(g.addEos ? [eosId] : []),
  ]));
}

const maxDifference = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);
const rms = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0) / v.length);

/** Geometry g's metadata, key to value, and its tensors' dims ('384x512'), as randomLlama writes them. */
const keys = (g) => new Map(randomLlama(g).metadata.map(([key, value]) => [key, value.value ?? value]));
const dims = (g) => new Map(randomLlama(g).tensors.map((t) => [t.name, t.dims.join('x')]));

test('the geometries write the pooling, the heads and the keys the converter writes', () => {
  const embedding = keys(GEOMETRIES['qwen3-embedding-0.6b']);
  assert.equal(embedding.get('qwen3.pooling_type'), POOLING_TYPES.last);
  assert.equal(embedding.get('tokenizer.ggml.add_eos_token'), true);
  assert.equal(embedding.get('tokenizer.ggml.add_bos_token'), false);
  const reranker = keys(GEOMETRIES['qwen3-reranker-0.6b']);
  assert.equal(reranker.get('qwen3.pooling_type'), POOLING_TYPES.rank);
  assert.deepEqual(reranker.get('qwen3.classifier.output_labels'), ['yes', 'no']);
  assert.equal(reranker.get('tokenizer.chat_template.rerank'), QWEN3_RERANK_TEMPLATE);
  assert.deepEqual(reranker.get('tokenizer.chat_templates'), ['rerank']);
  assert.equal(dims(GEOMETRIES['qwen3-reranker-0.6b']).get('cls.output.weight'), '1024x2');
  const gemma = keys(GEOMETRIES['embeddinggemma-300m']);
  assert.equal(gemma.get('general.architecture'), 'gemma-embedding');
  assert.equal(gemma.get('gemma-embedding.pooling_type'), POOLING_TYPES.mean);
  assert.deepEqual(['dense_2_feat_in', 'dense_2_feat_out', 'dense_3_feat_in', 'dense_3_feat_out'].map((k) => gemma.get(`gemma-embedding.${k}`)), [768, 3072, 3072, 768]);
  assert.equal(gemma.get('gemma-embedding.attention.sliding_window'), 512);
  assert.equal(gemma.get('gemma-embedding.rope.freq_base_swa'), 10000);
  const gemmaDims = dims(GEOMETRIES['embeddinggemma-300m']);
  assert.equal(gemmaDims.get('dense_2.weight'), '768x3072');
  assert.equal(gemmaDims.get('dense_3.weight'), '3072x768');
  assert.equal(gemmaDims.get('token_embd.weight'), '768x262144');
});

test("the encoder geometries write BertModel's and NomicBertModel's keys, tensors and WordPiece tokenizer", () => {
  const bge = keys(GEOMETRIES['bge-small-en-v1.5']);
  assert.equal(bge.get('general.architecture'), 'bert');
  assert.equal(bge.get('bert.pooling_type'), POOLING_TYPES.cls);
  assert.equal(bge.get('bert.attention.causal'), false);
  assert.equal(bge.get('bert.attention.layer_norm_epsilon'), 1e-12);
  assert.equal(bge.has('bert.attention.head_count_kv'), false);
  assert.equal(bge.get('tokenizer.ggml.model'), 'bert');
  assert.equal(bge.get('tokenizer.ggml.token_type_count'), 2);
  assert.deepEqual(['add_bos_token', 'add_eos_token', 'add_sep_token'].map((k) => bge.get(`tokenizer.ggml.${k}`)), [true, true, false]);
  const tokens = bge.get('tokenizer.ggml.tokens');
  assert.deepEqual(['bos_token_id', 'eos_token_id', 'seperator_token_id', 'unknown_token_id', 'padding_token_id', 'mask_token_id'].map((k) => tokens[bge.get(`tokenizer.ggml.${k}`)]),
    ['[CLS]', '[SEP]', '[SEP]', '[UNK]', '[PAD]', '[MASK]']);
  const bgeDims = dims(GEOMETRIES['bge-small-en-v1.5']);
  assert.equal(bgeDims.get('position_embd.weight'), '384x512');
  assert.equal(bgeDims.get('token_types.weight'), '384x2');
  assert.equal(bgeDims.get('blk.11.attn_q.bias'), '384');
  assert.equal(bgeDims.get('blk.11.layer_output_norm.bias'), '384');
  assert.equal(keys(GEOMETRIES['all-minilm-l6-v2']).get('bert.pooling_type'), POOLING_TYPES.mean);
  // A cross-encoder: no pooling type (llama.cpp ranks when asked), one label, cls.output with its bias.
  const marco = keys(GEOMETRIES['ms-marco-minilm-l6']);
  assert.equal(marco.has('bert.pooling_type'), false);
  assert.deepEqual(marco.get('bert.classifier.output_labels'), ['LABEL_0']);
  const marcoDims = dims(GEOMETRIES['ms-marco-minilm-l6']);
  assert.equal(marcoDims.get('cls.output.weight'), '384x1');
  assert.equal(marcoDims.get('cls.output.bias'), '1');
  assert.equal(marcoDims.has('cls.weight'), false);
  const nomic = keys(GEOMETRIES['nomic-embed-text-v1.5']);
  assert.equal(nomic.get('nomic-bert.pooling_type'), POOLING_TYPES.mean);
  assert.equal(nomic.get('nomic-bert.rope.freq_base'), 1000);
  assert.equal(nomic.get('nomic-bert.context_length'), 2048);
  const nomicDims = dims(GEOMETRIES['nomic-embed-text-v1.5']);
  assert.equal(nomicDims.get('token_embd.weight'), '768x30528');
  assert.equal(nomicDims.get('blk.0.attn_qkv.weight'), '768x2304');
  assert.equal(nomicDims.get('blk.0.ffn_gate.weight'), '768x3072');
  assert.deepEqual(['position_embd.weight', 'blk.0.attn_qkv.bias', 'blk.0.ffn_up.bias'].filter((name) => nomicDims.has(name)), []);
});

for (const g of EMBEDDERS) {
  test(`${g.name}: llama.cpp's two builds give the same embeddings, in every mix`, async (t) => {
    if (nativeMissing) return t.skip(nativeMissing);
    for (const mix of ['F32', 'F16', 'Q8_0']) {
      const { path } = file(g, mix);
      const lists = await tokenLists(g, path);
      const native = await nativeEmbeddings(path, lists);
      for (const [i, v] of native.entries()) {
        assert.equal(v.length, g.dim, `${mix}, text ${i}: width`);
        assert.ok(v.every(Number.isFinite), `${mix}, text ${i}: not finite`);
        assert.ok(rms(v) > 0.01, `${mix}, text ${i}: RMS ${rms(v)}`);
      }
      assert.ok(cosine(native[0], native[2]) < 0.99, `${mix}: two texts' embeddings alike (cosine ${cosine(native[0], native[2])})`);
      if (secondMissing) {
        t.diagnostic(`no second opinion: ${secondMissing}`);
        continue;
      }
      const second = await secondOpinionEmbeddings(path, lists);
      const cosines = native.map((v, i) => cosine(v, second[i]));
      const worst = Math.min(...cosines);
      console.log(`${g.name} ${mix}: cosine node-llama-cpp vs @fugood/llama.node, worst of ${lists.length} texts (${lists.map((l) => l.length).join(', ')} tokens): ${worst.toFixed(7)}; max |difference| ${Math.max(...native.map((v, i) => maxDifference(v, second[i]))).toExponential(2)} (RMS ${rms(native[0]).toFixed(3)})`);
      assert.ok(worst >= (mix === 'F32' ? 0.9999 : 0.999), `${mix}: cosines ${cosines.join(', ')}`);
    }
  });

  test(`${g.name}: a text's embedding alone is its embedding after others`, async (t) => {
    if (nativeMissing) return t.skip(nativeMissing);
    const { path } = file(g);
    const lists = await tokenLists(g, path);
    const alone = (await nativeEmbeddings(path, [lists[1]]))[0];
    const afterOthers = (await nativeEmbeddings(path, [lists[0], lists[3], lists[1]]))[2];
    console.log(`${g.name}: node-llama-cpp, alone vs after others: max |difference| ${maxDifference(alone, afterOthers).toExponential(2)}`);
    assert.deepEqual(afterOthers, alone);
    if (secondMissing) return t.diagnostic(`no second opinion: ${secondMissing}`);
    // After a text sharing its prefix: the quirk secondOpinionEmbeddings clears.
    const second = await secondOpinionEmbeddings(path, [lists[0], lists[1]]);
    const secondAlone = (await secondOpinionEmbeddings(path, [lists[1]]))[0];
    console.log(`${g.name}: @fugood/llama.node, alone vs after a shared prefix: max |difference| ${maxDifference(secondAlone, second[1]).toExponential(2)}`);
    assert.deepEqual(second[1], secondAlone);
  });
}

test(`${RERANKER.name}: llama.cpp's rank scores are the softmax of the last token's "yes" and "no" logits`, async (t) => {
  if (nativeMissing) return t.skip(nativeMissing);
  const { path, spec } = file(RERANKER);
  const lists = await tokenLists(RERANKER, path);
  const scores = await nativeRankScores(path, lists);
  console.log(`${RERANKER.name}: rank scores ${scores.map((s) => s.toFixed(4)).join(', ')}`);
  assert.ok(scores.every((s) => Number.isFinite(s) && s >= 0 && s <= 1), `scores ${scores}`);
  assert.ok(Math.max(...scores) - Math.min(...scores) > 0.01, `scores all alike: ${scores}`);
  assert.equal((await nativeRankScores(path, [lists[2]]))[0], scores[2]);
  await assert.rejects(nativeEmbeddings(path, lists, { pooling: 'last' }), RangeError);
  if (secondMissing) return t.diagnostic(`no second opinion: ${secondMissing}`);
  // The other build's last hidden state (normed), through cls.output's rows (yes, no) and a softmax.
  const head = tensorValues(spec, 'cls.output.weight');
  const hidden = await secondOpinionEmbeddings(path, lists, { pooling: 'last' });
  const recomputed = hidden.map((h) => {
    const [yes, no] = [0, 1].map((row) => h.reduce((s, x, i) => s + x * head[row * RERANKER.dim + i], 0));
    return 1 / (1 + Math.exp(no - yes));
  });
  const worst = Math.max(...recomputed.map((p, i) => Math.abs(p - scores[i])));
  console.log(`${RERANKER.name}: rank scores vs softmax(cls.output x @fugood/llama.node's last hidden state): max |difference| ${worst.toExponential(2)}`);
  assert.ok(worst < 1e-4, `recomputed ${recomputed}`);
});

test(`${BERT_RERANKER.name}: llama.cpp's rank scores are cls.output's logit on the first token's hidden state`, async (t) => {
  if (nativeMissing) return t.skip(nativeMissing);
  const { path, spec } = file(BERT_RERANKER);
  const lists = await tokenLists(BERT_RERANKER, path);
  const scores = await nativeRankScores(path, lists);
  console.log(`${BERT_RERANKER.name}: rank scores ${scores.map((s) => s.toFixed(4)).join(', ')}`);
  assert.ok(scores.every(Number.isFinite), `scores ${scores}`);
  assert.ok(Math.max(...scores) - Math.min(...scores) > 0.01, `scores all alike: ${scores}`);
  assert.equal((await nativeRankScores(path, [lists[2]]))[0], scores[2]);
  if (secondMissing) return t.diagnostic(`no second opinion: ${secondMissing}`);
  // The other build's [CLS] hidden state through cls.output's one row and its bias.
  const head = tensorValues(spec, 'cls.output.weight');
  const [bias] = tensorValues(spec, 'cls.output.bias');
  const hidden = await secondOpinionEmbeddings(path, lists, { pooling: 'cls' });
  const recomputed = hidden.map((h) => h.reduce((s, x, i) => s + x * head[i], bias));
  const worst = Math.max(...recomputed.map((r, i) => Math.abs(r - scores[i])));
  console.log(`${BERT_RERANKER.name}: rank scores vs cls.output x @fugood/llama.node's [CLS] hidden state: max |difference| ${worst.toExponential(2)}`);
  assert.ok(worst < 1e-4, `recomputed ${recomputed}`);
});

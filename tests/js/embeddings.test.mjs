// Llama#embed and Llama#rerank as an app uses them, on tiny random files
// (their arithmetic against llama.cpp: embeddings-native.test.mjs): many
// texts in a pass give each text the bits it gets alone; a pass keeps no
// rows; normalize, dimensions (Matryoshka), pooling and truncate do what
// they say; bad input is refused with a sentence naming it and changes
// nothing; the same through a LlamaWorker (vectors transferred, progress,
// abort), OpenAI's embeddings.create (embeddings()), and the CLI's embed
// and rerank (JSON lines).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { memoryStats } from '../../js/index.js';
import { EMBEDDING_PROMPTS, Llama } from '../../js/llama.js';
import { embeddings } from '../../js/chat.js';
import { LlamaWorker } from '../../js/worker.js';
import { bitsEqual, ready } from './helpers.mjs';
import { nodeWorker } from './node-worker.mjs';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf, writeGgufFile } from '../gguf/writer.mjs';

const cli = fileURLToPath(new URL('../../cli/kvcache-wasm.js', import.meta.url));
const bytes = (name) => encodeGguf(randomLlama(GEOMETRIES[name], { mix: 'Q8_0', seed: 2 }));
let embedder, encoder, reranker, generator, dir;
before(async () => {
  await ready();
  embedder = Llama.fromGguf(bytes('tiny-qwen3-embedding'));
  encoder = Llama.fromGguf(bytes('tiny-embeddinggemma'));
  reranker = Llama.fromGguf(bytes('tiny-qwen3-reranker'));
  generator = Llama.fromGguf(bytes('tiny'));
  dir = mkdtempSync(join(tmpdir(), 'kvcache-embed-'));
});
after(() => {
  for (const llama of [embedder, encoder, reranker, generator]) llama?.free();
  rmSync(dir, { recursive: true, force: true });
});

const TEXTS = ['the quick brown fox', 'hello', 'a much longer text that goes on for a while, past a window of sixteen tokens at least', 'x y'];
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

test('a model says how it embeds: its pooling, direction, vector width and scores', () => {
  assert.deepEqual([embedder, encoder, reranker, generator].map(({ config: { pooling, causal, embeddingDim, rankOutputs } }) => ({ pooling, causal, embeddingDim, rankOutputs })), [
    { pooling: 'last', causal: true, embeddingDim: 256, rankOutputs: 0 },
    { pooling: 'mean', causal: false, embeddingDim: 256, rankOutputs: 0 },
    { pooling: 'rank', causal: true, embeddingDim: 256, rankOutputs: 2 },
    { pooling: 'none', causal: true, embeddingDim: 256, rankOutputs: 0 },
  ]);
});

test('each text gets the same vector alone as among others, and a pass keeps no rows', async () => {
  for (const llama of [embedder, encoder]) {
    const before = memoryStats();
    const together = await llama.embed(TEXTS);
    assert.deepEqual(memoryStats().pages, before.pages, 'pages held after the pass');
    assert.equal(memoryStats().layers, before.layers, 'layers held after the pass');
    for (const [i, text] of TEXTS.entries()) {
      const [alone] = await llama.embed(text);
      assert.ok(bitsEqual(alone, together[i]), `${llama.config.architecture}: text ${i}`);
      assert.ok(Math.abs(norm(alone) - 1) < 1e-6);
    }
    // Different texts, different vectors.
    assert.ok(together[0].some((x, i) => x !== together[1][i]));
  }
});

test('normalize, dimensions and pooling: raw vectors, their first values normalised, another pooling', async () => {
  const [raw] = await encoder.embed(TEXTS[0], { normalize: false });
  const [unit] = await encoder.embed(TEXTS[0]);
  assert.ok(Math.abs(norm(raw) - 1) > 1e-3, 'a raw vector is not of length 1');
  assert.ok(unit.every((x, i) => Math.abs(x - raw[i] / norm(raw)) < 1e-6));
  const [short] = await encoder.embed(TEXTS[0], { dimensions: 64 });
  assert.equal(short.length, 64);
  const head = raw.slice(0, 64);
  assert.ok(short.every((x, i) => Math.abs(x - head[i] / norm(head)) < 1e-6));
  // A generation model embeds with a pooling given; 'none' gives a row per token.
  const [mean] = await generator.embed('hello there', { pooling: 'mean' });
  assert.equal(mean.length, generator.config.dim);
  const ids = generator.tokenizer.encode('hello there', { special: true });
  const [rows] = await generator.embed('hello there', { pooling: 'none' });
  assert.equal(rows.length, ids.length * generator.config.dim);
  // A text given as ids is taken as it is.
  const [fromIds] = await generator.embed([ids], { pooling: 'mean' });
  assert.ok(bitsEqual(fromIds, mean));
});

test('prompt: the model card\'s text before a query or a document, by the family, or any text given', async () => {
  const [query] = await encoder.embed('where is the fox', { prompt: 'query' });
  assert.ok(bitsEqual(query, (await encoder.embed(`${EMBEDDING_PROMPTS['gemma-embedding'].query}where is the fox`))[0]));
  const [document] = await embedder.embed('a fox', { prompt: 'document' });
  assert.ok(bitsEqual(document, (await embedder.embed('a fox'))[0]), 'Qwen3-Embedding\'s documents go bare');
  const [given] = await embedder.embed('a fox', { prompt: 'note: ' });
  assert.ok(bitsEqual(given, (await embedder.embed('note: a fox'))[0]));
  await assert.rejects(embedder.embed([[1, 2]], { prompt: 'query' }), /options\.prompt goes before text, and texts holds token ids/);
  await assert.rejects(embedder.embed('x', { prompt: 3 }), /options\.prompt must be 'query', 'document' or a string/);
});

test('a text longer than the context is refused, or cut to it with truncate, its end token kept', async () => {
  const long = Array.from({ length: 700 }, (_, i) => `w${i % 50}`).join(' ');
  await assert.rejects(embedder.embed(['fine', long]), (e) => e instanceof RangeError && /texts\[1\] is \d+ tokens, more than the model's context of 512 \(options\.truncate: true cuts it\)/.test(e.message));
  const [cut] = await embedder.embed(long, { truncate: true, normalize: false });
  const ids = embedder.tokenizer.encode(long, { special: true });
  assert.equal(ids.at(-1), embedder.tokenizer.eosId); // Qwen3-Embedding's tokenizer ends a text with its end token
  const kept = [...ids.slice(0, 511), embedder.tokenizer.eosId];
  const [same] = await embedder.embed([kept], { normalize: false });
  assert.ok(bitsEqual(cut, same));
});

test('bad input is refused with a sentence that names it, and the model goes on', async () => {
  const refuses = (promise, type, pattern) => assert.rejects(promise, (e) => e instanceof type && pattern.test(e.message));
  await refuses(embedder.embed(['a', '']), TypeError, /^Llama\.embed: texts\[1\] is empty/);
  await refuses(embedder.embed([]), TypeError, /texts must be a string or a non-empty array/);
  await refuses(embedder.embed([[1, 2, 99999]]), RangeError, /texts\[0\] holds 99999, not a token id \(0 to 1023\)/);
  await refuses(generator.embed('hi'), TypeError, /gives no pooling type \(it generates\); pass options\.pooling \('mean', 'cls' or 'last'\)/);
  await refuses(embedder.embed('hi', { pooling: 'rank' }), TypeError, /a reranker scores with rerank\(\)/);
  await refuses(embedder.embed('hi', { dimensions: 300 }), RangeError, /options\.dimensions/);
  await refuses(embedder.embed('hi', { normalise: true }), TypeError, /normalise/);
  await refuses(embedder.rerank('q', ['d']), TypeError, /no classification head \(cls\.output\), so it does not rerank/);
  await refuses(reranker.rerank('', ['d']), TypeError, /query must be a non-empty string/);
  await refuses(reranker.rerank('q', []), TypeError, /documents must be a non-empty array of strings/);
  await refuses(reranker.rerank('q', ['a'], { topN: 2 }), RangeError, /options\.topN/);
  assert.throws(() => reranker.session(), /is a reranker \(pooling_type rank\): it scores documents with rerank\(\) and does not generate/);
  assert.throws(() => encoder.session(), /is an encoder .* it embeds texts with embed\(\) and does not generate/);
  const aborted = new AbortController();
  aborted.abort();
  await assert.rejects(embedder.embed('hi', { signal: aborted.signal }), { name: 'AbortError' });
  assert.equal((await embedder.embed('still works'))[0].length, 256);
});

test('rerank: a score a document in their order, and the topN best first', async () => {
  const documents = ['the fox', 'a dog', 'a cat', 'the fox again'];
  const { scores, ranking } = await reranker.rerank('a fox', documents, { topN: 2 });
  assert.equal(scores.length, 4);
  assert.ok(scores.every((s) => s > 0 && s < 1));
  const best = [...scores.keys()].sort((a, b) => scores[b] - scores[a]).slice(0, 2);
  assert.deepEqual(ranking, best.map((index) => ({ index, score: scores[index], document: documents[index] })));
  // Each document alone scores the same.
  assert.equal((await reranker.rerank('a fox', [documents[2]])).scores[0], scores[2]);
});

test('many texts go in passes: progress after each, and an abort between them', async () => {
  const many = Array.from({ length: 40 }, (_, i) => `text number ${i} `.repeat(8));
  const progress = [];
  const vectors = await embedder.embed(many, { onProgress: (p) => progress.push(p) });
  assert.equal(vectors.length, 40);
  assert.ok(progress.length > 1, 'more than one pass');
  assert.deepEqual(progress.at(-1), { done: 40, total: 40 });
  const controller = new AbortController();
  await assert.rejects(embedder.embed(many, { signal: controller.signal, onProgress: () => controller.abort() }), { name: 'AbortError' });
});

test('in a worker: the same vectors and scores, transferred, with progress and abort', async () => {
  const worker = new LlamaWorker({ worker: () => nodeWorker(), init: { threads: 1 } });
  try {
    const remote = await worker.load(bytes('tiny-qwen3-embedding'));
    assert.equal(remote.config.pooling, 'last');
    const progress = [];
    const vectors = await remote.embed(TEXTS, { dimensions: 128, onProgress: (p) => progress.push(p) });
    const local = await embedder.embed(TEXTS, { dimensions: 128 });
    assert.ok(vectors.every((v, i) => v instanceof Float32Array && bitsEqual(v, local[i])));
    assert.deepEqual(progress.at(-1), { done: TEXTS.length, total: TEXTS.length });
    await assert.rejects(remote.embed(''), /Llama\.embed: texts\[0\] is empty/);
    const controller = new AbortController();
    const many = Array.from({ length: 40 }, (_, i) => `text number ${i} `.repeat(8));
    await assert.rejects(remote.embed(many, { signal: controller.signal, onProgress: () => controller.abort() }), { name: 'AbortError' });
    const remoteReranker = await worker.load(bytes('tiny-qwen3-reranker'));
    assert.deepEqual(await remoteReranker.rerank('a fox', ['the fox', 'a dog']), await reranker.rerank('a fox', ['the fox', 'a dog']));
  } finally {
    worker.terminate();
  }
});

test('embeddings(model).embeddings.create: OpenAI\'s shape, floats or base64, usage in tokens', async () => {
  const client = embeddings(embedder);
  const r = await client.embeddings.create({ input: ['hello', 'the quick brown fox'], model: 'mine', dimensions: 32 });
  const local = await embedder.embed(['hello', 'the quick brown fox'], { dimensions: 32 });
  assert.equal(r.object, 'list');
  assert.equal(r.model, 'mine');
  assert.deepEqual(r.data.map((d) => [d.object, d.index]), [['embedding', 0], ['embedding', 1]]);
  assert.deepEqual(r.data[1].embedding, Array.from(local[1]));
  const tokens = ['hello', 'the quick brown fox'].reduce((n, t) => n + embedder.tokenizer.encode(t, { special: true }).length, 0);
  assert.deepEqual(r.usage, { prompt_tokens: tokens, total_tokens: tokens });
  const b = await client.embeddings.create({ input: 'hello', encoding_format: 'base64' });
  const decoded = new Float32Array(Uint8Array.from(atob(b.data[0].embedding), (c) => c.charCodeAt(0)).buffer);
  assert.ok(bitsEqual(decoded, (await embedder.embed('hello'))[0]));
  const ids = embedder.tokenizer.encode('hello', { special: true });
  assert.deepEqual((await client.embeddings.create({ input: ids })).data[0].embedding, Array.from((await embedder.embed([ids]))[0]));
  await assert.rejects(client.embeddings.create({ input: 'x', encoding_format: 'int8' }), /encoding_format must be 'float' or 'base64'/);
  assert.throws(() => embeddings({}), /model must be a Llama or a RemoteLlama/);
});

test('the CLI: embed prints a JSON line a text, rerank a line a document best first', async () => {
  const path = join(dir, 'embedder.gguf');
  writeGgufFile(path, randomLlama(GEOMETRIES['tiny-qwen3-embedding'], { mix: 'Q8_0', seed: 2 }));
  const out = spawnSync(process.execPath, [cli, 'embed', path, '--text', 'hello', '--text', 'the quick brown fox', '--dimensions', '16'], { encoding: 'utf8' });
  assert.equal(out.status, 0, out.stderr);
  const lines = out.stdout.trim().split('\n').map((line) => JSON.parse(line));
  const local = await embedder.embed(['hello', 'the quick brown fox'], { dimensions: 16 });
  assert.deepEqual(lines, [0, 1].map((index) => ({ index, text: ['hello', 'the quick brown fox'][index], embedding: Array.from(local[index]) })));
  // Texts from stdin, one a line; a generation model without --pooling refused with the option's name.
  const stdin = spawnSync(process.execPath, [cli, 'embed', '--model', path], { encoding: 'utf8', input: 'hello\n\nthe quick brown fox\n' });
  assert.equal(stdin.stdout.trim().split('\n').length, 2);
  const rerankerPath = join(dir, 'reranker.gguf');
  writeGgufFile(rerankerPath, randomLlama(GEOMETRIES['tiny-qwen3-reranker'], { mix: 'Q8_0', seed: 2 }));
  const ranked = spawnSync(process.execPath, [cli, 'rerank', rerankerPath, '--query', 'a fox', '--text', 'the fox', '--text', 'a dog', '--top-n', '1'], { encoding: 'utf8' });
  assert.equal(ranked.status, 0, ranked.stderr);
  const { ranking } = await reranker.rerank('a fox', ['the fox', 'a dog'], { topN: 1 });
  assert.deepEqual(ranked.stdout.trim().split('\n').map((line) => JSON.parse(line)), ranking.map(({ index, score, document }) => ({ index, score, text: document })));
  const usage = spawnSync(process.execPath, [cli, 'rerank', rerankerPath, '--text', 'a'], { encoding: 'utf8' });
  assert.equal(usage.status, 2);
  assert.match(usage.stderr, /rerank needs --query TEXT/);
  const refused = spawnSync(process.execPath, [cli, 'embed', rerankerPath, '--text', 'a'], { encoding: 'utf8' });
  assert.equal(refused.status, 2);
  assert.match(refused.stderr, /kvcache-wasm embed: --pooling must be 'mean', 'cls', 'last' or 'none' \(got "rank"\); a reranker scores with rerank\(\)/);
});

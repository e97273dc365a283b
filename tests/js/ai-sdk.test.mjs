// kvcache-wasm/ai-sdk through the Vercel AI SDK's own functions (`ai`):
// generateText and streamText on stories260K (an abort mid-stream ends the
// stream and leaves the session usable), usage equal to the tokens the
// session computed and emitted, finish reasons; generateObject and
// streamObject on a random-weight model over Qwen3's vocabulary, whose
// unconstrained output is noise, every object valid (ajv); a loop of two
// tools run by the SDK; images through a model with its projector; bad
// input refused, naming what is wrong; embed, embedMany and rerank on tiny
// random embedding and reranker files, in the page and in a worker, giving
// the model's own vectors and ranking.
import { test, describe, before } from 'node:test';
import assert from 'node:assert/strict';
import { openAsBlob, readFileSync } from 'node:fs';
import Ajv from 'ajv';
import { cosineSimilarity, createProviderRegistry, embed, embedMany, generateObject, generateText, isStepCount, jsonSchema, rerank, streamObject, streamText, tool } from 'ai';
import { NoSuchModelError, UnsupportedFunctionalityError } from '@ai-sdk/provider';
import { MODEL_MISSING, MODEL_PATH, ready } from './helpers.mjs';
import { Llama } from '../../js/llama.js';
import { createKvcache, kvcache } from '../../js/ai-sdk.js';
import { LlamaWorker } from '../../js/worker.js';
import { nodeWorker } from './node-worker.mjs';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { TINY_PROJECTORS, pairedLanguageModel, randomProjector } from '../gguf/vision.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { decodePng, encodePng, testImage } from '../runtimes/png.mjs';
import { PERSON_SCHEMA } from '../runtimes/ai-sdk-scenario.mjs';
import { VOCABULARIES, hfVocabulary } from './hf-tokenizers.mjs';

await ready();
globalThis.AI_SDK_LOG_WARNINGS = false; // the tests read the warnings themselves

/** A model's session with a counter of the tokens its forward passes took in for prompts (prefill), less what a prefix cache gave. */
function counted(session) {
  const prefill = session.prefill.bind(session);
  session.computed = 0;
  session.prefill = (tokens, options) => {
    const out = prefill(tokens, options);
    session.computed += tokens.length - (options?.logits ? out.reused : out);
    return out;
  };
  return session;
}

describe('text on stories260K', { skip: MODEL_MISSING ?? false }, () => {
  let llama;
  before(async () => {
    llama = await Llama.load(await openAsBlob(MODEL_PATH));
  });

  test('generateText: the text the session generates, usage in the tokens it computed and emitted, finish reasons', async () => {
    const session = counted(llama.session());
    const model = kvcache(llama, { session });
    const first = await generateText({ model, prompt: 'Once upon a time', maxOutputTokens: 24, temperature: 0 });
    // The same reply as the session's own respond() to the same rendering (PLAIN_TEMPLATE: <s>, the text, a newline).
    let direct = '';
    const fresh = llama.session();
    for await (const piece of fresh.respond('<s>Once upon a time\n', { maxTokens: 24, temperature: 0 })) direct += piece.text;
    fresh.free();
    assert.equal(first.text, direct);
    assert.equal(first.finishReason, 'length');
    assert.equal(first.rawFinishReason, 'maxTokens');
    assert.equal(first.usage.outputTokens, 24);
    assert.equal(first.usage.inputTokens, session.computed);
    assert.equal(first.usage.inputTokenDetails.cacheReadTokens, 0);
    assert.equal(session.tokens.length, first.usage.inputTokens + first.usage.outputTokens);

    // The next turn repeats the conversation: only what the cache does not hold is computed.
    const before = session.computed;
    const second = await generateText({ model, messages: [
      { role: 'user', content: 'Once upon a time' }, { role: 'assistant', content: first.text }, { role: 'user', content: 'Then' },
    ], maxOutputTokens: 30, temperature: 0, stopSequences: ['.'] });
    const computed = session.computed - before;
    assert.equal(second.usage.inputTokenDetails.noCacheTokens, computed);
    assert.equal(second.usage.inputTokenDetails.cacheReadTokens, second.usage.inputTokens - computed);
    assert.ok(second.usage.inputTokenDetails.cacheReadTokens > 20, `the first turn's tokens were reused (${JSON.stringify(second.usage)})`);
    assert.equal(second.finishReason, 'stop');
    assert.equal(second.rawFinishReason, 'stop');
    assert.ok(!second.text.includes('.'), second.text);
    assert.equal(session.tokens.length, second.usage.inputTokens + second.usage.outputTokens);
  });

  test('streamText: deltas that join into the reply; an abort ends the stream and the session goes on', async () => {
    const model = kvcache(llama);
    const whole = await generateText({ model, prompt: 'Lily', maxOutputTokens: 40, temperature: 0 });
    const streamed = streamText({ model, prompt: 'Lily', maxOutputTokens: 40, temperature: 0 });
    const deltas = [];
    for await (const delta of streamed.textStream) deltas.push(delta);
    assert.ok(deltas.length > 5, `${deltas.length} deltas`);
    assert.equal(deltas.join(''), whole.text);
    assert.equal(await streamed.finishReason, 'length');
    assert.equal((await streamed.usage).outputTokens, 40);

    const stop = new AbortController();
    const aborted = streamText({ model, prompt: 'Tom', maxOutputTokens: 200, temperature: 0, abortSignal: stop.signal, onError: () => {} });
    const parts = [];
    for await (const part of aborted.fullStream) {
      parts.push(part.type);
      if (parts.filter((type) => type === 'text-delta').length === 5) stop.abort();
    }
    assert.ok(parts.includes('abort'), parts.join(' '));
    assert.ok(parts.filter((type) => type === 'text-delta').length <= 6, parts.join(' '));
    const session = await model.session();
    assert.ok(session.tokens.length < 60, `the session stopped near the abort (${session.tokens.length} tokens)`);
    // Usable after: the same reply as on a fresh session.
    const after = await generateText({ model, prompt: 'Lily', maxOutputTokens: 40, temperature: 0 });
    assert.equal(after.text, whole.text);

    // A consumer that stops reading cancels the stream: the model's next call does not wait for it.
    const left = streamText({ model, prompt: 'Tom', maxOutputTokens: 200, temperature: 0 });
    for await (const delta of left.textStream) if (delta) break;
    assert.equal((await generateText({ model, prompt: 'Lily', maxOutputTokens: 40, temperature: 0 })).text, whole.text);
  });

  test('calls on one model take turns: two at once answer as each alone', async () => {
    const model = kvcache(llama);
    const alone = await generateText({ model, prompt: 'Ben', maxOutputTokens: 20, temperature: 0 });
    const other = await generateText({ model, prompt: 'Sue', maxOutputTokens: 20, temperature: 0 });
    const [a, b] = await Promise.all([
      generateText({ model, prompt: 'Ben', maxOutputTokens: 20, temperature: 0 }),
      generateText({ model, prompt: 'Sue', maxOutputTokens: 20, temperature: 0 }),
    ]);
    assert.deepEqual([a.text, b.text], [alone.text, other.text]);
  });

  test('settings it does not take are warnings; sampling settings reach the sampler', async () => {
    const model = kvcache(llama);
    const r = await generateText({ model, prompt: 'Lily', maxOutputTokens: 4, presencePenalty: 0.5, frequencyPenalty: 0.5, temperature: 0 });
    assert.deepEqual(r.warnings.map((w) => [w.type, w.feature]), [['unsupported', 'presencePenalty'], ['unsupported', 'frequencyPenalty']]);
    const seeded = (seed) => generateText({ model, prompt: 'Lily', maxOutputTokens: 16, temperature: 1.5, topK: 0, topP: 1, seed });
    const [x, y, z] = [await seeded(1), await seeded(1), await seeded(2)];
    assert.equal(x.text, y.text);
    assert.notEqual(x.text, z.text);
    const tuned = await generateText({ model, prompt: 'Lily', maxOutputTokens: 16, temperature: 0, providerOptions: { 'kvcache-wasm': { repeatPenalty: 1.3, draft: 3 } } });
    assert.equal(tuned.usage.outputTokens, 16);
    await assert.rejects(generateText({ model, prompt: 'Lily', providerOptions: { 'kvcache-wasm': { tempreature: 1 } } }), /did you mean 'temperature'|has no option 'tempreature'/);
  });
});

// A small block over Llama 3's real vocabulary with Llama 3.2's chat template, whose tool call is the
// whole reply: a reply that calls ends with its call, whatever the weights.
const GEOMETRY = { ...GEOMETRIES.tiny, name: 'vocabulary', dim: 64, hiddenDim: 128, numHeads: 2, numKvHeads: 1, tied: true, contextLength: 2048 };
const LLAMA32 = JSON.parse(readFileSync(new URL('../fixtures/chat-templates.json', import.meta.url), 'utf8'))['llama-3.2-instruct'];
describe('objects and tools on a random-weight model over Llama 3\'s vocabulary', () => {
  let llama;
  before(() => {
    const vocabulary = hfVocabulary({ ...VOCABULARIES.llama3, config: { eos_token: LLAMA32.eos_token, chat_template: LLAMA32.chat_template } });
    llama = Llama.fromGguf(encodeGguf(randomLlama(GEOMETRY, { tokenizer: vocabulary.entries, seed: 5, mix: 'Q8_0' })));
  });

  // 10 here; 50 more in a worker, in Node and in Chromium (tests/integration/ai-sdk-browser.test.mjs).
  test('generateObject: 10 objects of a nested schema, every one valid', async () => {
    const validate = new Ajv().compile(PERSON_SCHEMA);
    const model = kvcache(llama);
    const seen = new Set();
    for (let seed = 0; seed < 10; seed++) {
      const { object, finishReason } = await generateObject({ model, schema: jsonSchema(PERSON_SCHEMA), prompt: 'A person, please.', temperature: 1, seed, maxOutputTokens: 400 });
      assert.ok(validate(object), `${JSON.stringify(object)}: ${JSON.stringify(validate.errors)}`);
      assert.equal(finishReason, 'stop');
      seen.add(JSON.stringify(object));
    }
    assert.ok(seen.size > 8, `${seen.size} distinct objects: the weights, not a fixed answer, chose them`);
  });

  test('streamObject: partial objects as the reply comes, the last one valid', async () => {
    const validate = new Ajv().compile(PERSON_SCHEMA);
    const result = streamObject({ model: kvcache(llama), schema: jsonSchema(PERSON_SCHEMA), prompt: 'A person.', temperature: 1, seed: 7, maxOutputTokens: 400 });
    const partials = [];
    for await (const partial of result.partialObjectStream) partials.push(partial);
    const object = await result.object;
    assert.ok(validate(object), JSON.stringify(validate.errors));
    assert.ok(partials.length > 3, `${partials.length} partial objects`);
    assert.deepEqual(partials.at(-1), object);
  });

  test('a loop of two tools: the SDK runs each call the model makes, its result goes back, then the model answers', async () => {
    const ran = [];
    const tools = {
      get_weather: tool({
        description: 'The weather in a city',
        inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'], additionalProperties: false }),
        execute: async ({ city }) => { ran.push(['get_weather', city]); return { city, celsius: 21 }; },
      }),
      get_time: tool({
        description: 'The time in a zone',
        inputSchema: jsonSchema({ type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false }),
        execute: async ({ zone }) => { ran.push(['get_time', zone]); return `12:00 ${zone}`; },
      }),
    };
    const session = counted(llama.session());
    const result = await generateText({
      model: kvcache(llama, { session }), tools, prompt: 'Weather in Paris, and the time?', temperature: 1, seed: 3, maxOutputTokens: 120,
      stopWhen: isStepCount(3),
      // The first step must call the weather, the second the time, the third answers in text.
      prepareStep: ({ stepNumber }) => ({ toolChoice: [{ type: 'tool', toolName: 'get_weather' }, { type: 'tool', toolName: 'get_time' }, 'none'][stepNumber] }),
    });
    assert.deepEqual(result.steps.map((s) => s.finishReason), ['tool-calls', 'tool-calls', 'length']);
    assert.deepEqual(ran.map(([name]) => name), ['get_weather', 'get_time']);
    assert.deepEqual(result.steps[0].toolCalls.map((c) => [c.toolName, c.input.city]), [ran[0]]);
    assert.deepEqual(result.steps[1].toolResults.map((r) => r.output), [`12:00 ${ran[1][1]}`]);
    // Each step's conversation holds the last: its tokens came from the cache, only the call's result was computed.
    const [one, two, three] = result.steps.map((s) => s.usage);
    assert.equal(one.inputTokens + two.inputTokenDetails.noCacheTokens + three.inputTokenDetails.noCacheTokens, session.computed);
    assert.ok(two.inputTokenDetails.cacheReadTokens >= one.inputTokens, JSON.stringify(two));
    assert.ok(three.inputTokenDetails.cacheReadTokens >= two.inputTokens, JSON.stringify(three));
    assert.equal(result.totalUsage.outputTokens, one.outputTokens + two.outputTokens + three.outputTokens);
    // The SDK's conversation went to the template: the results are in what the session took in.
    const taken = llama.tokenizer.decode(session.tokens, { special: true });
    assert.ok(taken.includes('<|start_header_id|>ipython<|end_header_id|>') && taken.includes(`12:00 ${ran[1][1]}`), taken.slice(-400));
  });

  test('streamText with tools: the calls as tool-call parts, finish reason tool-calls', async () => {
    const result = streamText({
      model: kvcache(llama), prompt: 'Weather?', temperature: 1, seed: 4, maxOutputTokens: 120, toolChoice: 'required',
      tools: { get_weather: tool({ inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'], additionalProperties: false }) }) },
    });
    const calls = [];
    for await (const part of result.fullStream) if (part.type === 'tool-call') calls.push(part);
    assert.ok(calls.length >= 1 && calls.every((c) => c.toolName === 'get_weather' && typeof c.input.city === 'string'), JSON.stringify(calls));
    assert.equal(await result.finishReason, 'tool-calls');
  });

  test('bad input: the parameter named, the SDK\'s errors where it has one', async () => {
    assert.throws(() => kvcache({}), /kvcache: model must be a Llama/);
    assert.throws(() => kvcache(llama, { tempate: 'x' }), /kvcache: settings has no option 'tempate' \(did you mean 'template'\?\)/);
    assert.throws(() => kvcache(llama, { session: llama }), /settings.session must be a session of this model/);
    const provider = createKvcache({ models: { qwen: llama } });
    assert.equal(provider.languageModel('qwen').modelId, 'qwen');
    assert.throws(() => provider('nope'), (e) => NoSuchModelError.isInstance(e) && /no model is named "nope"/.test(e.message));
    assert.throws(() => provider.embeddingModel('qwen'), (e) => NoSuchModelError.isInstance(e) && e.modelType === 'embeddingModel' && /"qwen" is no embedding model: its file gives no pooling type \(it generates/.test(e.message));
    const model = kvcache(llama);
    await assert.rejects(generateText({ model, messages: [{ role: 'user', content: [{ type: 'file', mediaType: 'application/pdf', data: new Uint8Array(4) }] }], maxRetries: 0 }),
      (e) => UnsupportedFunctionalityError.isInstance(e) && /application\/pdf file is not taken/.test(e.message));
    await assert.rejects(generateObject({ model, schema: jsonSchema({ type: 'object', properties: { a: { type: 'string', format: 'email' } } }), prompt: 'x', maxRetries: 0 }),
      /format/);
    // The model is usable after each refusal.
    assert.equal((await generateText({ model, prompt: 'Hi', maxOutputTokens: 3 })).usage.outputTokens, 3);
  });
});

test('images: a file part goes to the projector, as Chat sends it', async () => {
  const pair = TINY_PROJECTORS.idefics3;
  const llama = Llama.fromGguf(encodeGguf(pairedLanguageModel(pair, { seed: 3 })), { projector: encodeGguf(randomProjector(pair, { seed: 3 })) });
  const decodeImage = decodePng; // Node decodes no images: the app gives a decoder
  const png = encodePng(testImage(40, 30, 7));
  const session = llama.session();
  const model = kvcache(llama, { session, decodeImage });
  const messages = (image) => [{ role: 'user', content: [{ type: 'image', image, mediaType: 'image/png' }, { type: 'text', text: 'What is in it?' }] }];
  const r = await generateText({ model, messages: messages(png), maxOutputTokens: 6, temperature: 0 });
  const prepared = await llama.prepareImage(png, { decodeImage });
  assert.ok(r.usage.inputTokens > prepared.tokens.length, JSON.stringify(r.usage));
  assert.ok(prepared.tokens.every((id) => session.tokens.includes(id)), 'the image\'s ids are in what the session took in');
  // The same image as base64 is the same conversation: the cache holds it all.
  const again = await generateText({ model, messages: messages(Buffer.from(png).toString('base64')), maxOutputTokens: 6, temperature: 0 });
  assert.equal(again.text, r.text);
  assert.equal(again.usage.inputTokenDetails.cacheReadTokens, again.usage.inputTokens - 1);
  llama.free();
});

describe('embeddings and reranking on tiny random files', () => {
  const bytes = (name) => encodeGguf(randomLlama(GEOMETRIES[name], { mix: 'Q8_0' }));
  const TEXTS = ['the quick brown fox', 'hello', 'a fox sleeps under the oak', 'x y'];
  // More texts than one pass of the weights takes (512 tokens): the runner splits them.
  const MANY = Array.from({ length: 12 }, (_, i) => `text number ${i} `.repeat(8));
  const DOCUMENTS = ['the fox', 'a dog', 'a cat', 'the fox again'];
  const tokensOf = (llama, texts) => texts.reduce((n, text) => n + llama.tokenizer.encode(text, { special: true }).length, 0);
  let embedder, encoder, reranker, generator;
  before(() => {
    embedder = Llama.fromGguf(bytes('tiny-qwen3-embedding'));
    encoder = Llama.fromGguf(bytes('tiny-embeddinggemma'));
    reranker = Llama.fromGguf(bytes('tiny-qwen3-reranker'));
    generator = Llama.fromGguf(bytes('tiny'));
  });

  test('embed and embedMany: the model\'s own vectors, usage in the tokens embed() encoded', async () => {
    for (const llama of [embedder, encoder]) {
      const model = kvcache.embeddingModel(llama);
      assert.deepEqual([model.specificationVersion, model.provider, model.modelId, model.maxEmbeddingsPerCall, model.supportsParallelCalls],
        ['v4', 'kvcache-wasm', llama.config.architecture, Infinity, false]);
      const one = await embed({ model, value: TEXTS[0] });
      assert.deepEqual(one.embedding, Array.from((await llama.embed(TEXTS[0]))[0]));
      assert.equal(one.usage.tokens, tokensOf(llama, [TEXTS[0]]));
      assert.deepEqual((await embedMany({ model, values: TEXTS })).embeddings, (await llama.embed(TEXTS)).map((v) => Array.from(v)));
      assert.deepEqual((await embedMany({ model, values: [] })).embeddings, []);
    }
    const many = await embedMany({ model: kvcache.embeddingModel(embedder), values: MANY });
    const own = await embedder.embed(MANY);
    assert.deepEqual(many.embeddings, own.map((v) => Array.from(v)));
    assert.ok(tokensOf(embedder, MANY) > 512, 'more than one pass');
    assert.equal(many.usage.tokens, tokensOf(embedder, MANY));
    // The SDK's cosine of two of them is their dot product: embed() gives vectors of length 1.
    const dot = own[0].reduce((sum, x, i) => sum + x * own[1][i], 0);
    assert.ok(Math.abs(cosineSimilarity(many.embeddings[0], many.embeddings[1]) - dot) < 1e-6);
  });

  test('dimensions, the SDK\'s or providerOptions[\'kvcache-wasm\'].dimensions: the first values, normalised after', async () => {
    const model = kvcache.embeddingModel(encoder);
    const [short] = await encoder.embed(TEXTS[2], { dimensions: 64 });
    const sdk = await embed({ model, value: TEXTS[2], dimensions: 64 });
    const provider = await embed({ model, value: TEXTS[2], providerOptions: { 'kvcache-wasm': { dimensions: 64 } } });
    assert.deepEqual(sdk.embedding, Array.from(short));
    assert.deepEqual(provider.embedding, Array.from(short));
    assert.deepEqual((await embedMany({ model, values: TEXTS, dimensions: 32 })).embeddings.map((v) => v.length), [32, 32, 32, 32]);
    await assert.rejects(embed({ model, value: 'x', dimensions: 64, providerOptions: { 'kvcache-wasm': { dimensions: 32 } } }),
      /dimensions \(64\) and providerOptions\['kvcache-wasm'\]\.dimensions \(32\) disagree/);
    await assert.rejects(embed({ model, value: 'x', providerOptions: { 'kvcache-wasm': { dimension: 32 } } }), /has no option 'dimension' \(did you mean 'dimensions'\?\)/);
    await assert.rejects(embed({ model, value: 'x', dimensions: 300 }), (e) => e instanceof RangeError && /options\.dimensions/.test(e.message));
  });

  test('an abort ends a call between passes, and the model goes on', async () => {
    const model = kvcache.embeddingModel(embedder);
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 0);
    await assert.rejects(embedMany({ model, values: MANY, abortSignal: stop.signal, maxRetries: 0 }), { name: 'AbortError' });
    await assert.rejects(embed({ model, value: 'x', abortSignal: stop.signal, maxRetries: 0 }), { name: 'AbortError' });
    await assert.rejects(rerank({ model: kvcache.rerankingModel(reranker), query: 'a fox', documents: DOCUMENTS, abortSignal: stop.signal, maxRetries: 0 }), { name: 'AbortError' });
    assert.equal((await embed({ model, value: 'still works' })).embedding.length, 256);
  });

  test('rerank: the model\'s ranking, cut to topN; object documents as their JSON', async () => {
    const model = kvcache.rerankingModel(reranker);
    assert.deepEqual([model.specificationVersion, model.provider, model.modelId], ['v4', 'kvcache-wasm', 'qwen3']);
    const own = (await reranker.rerank('a fox', DOCUMENTS)).ranking;
    const { ranking, rerankedDocuments } = await rerank({ model, query: 'a fox', documents: DOCUMENTS, topN: 2 });
    assert.deepEqual(ranking, own.slice(0, 2).map(({ index, score, document }) => ({ originalIndex: index, score, document })));
    assert.deepEqual(rerankedDocuments, own.slice(0, 2).map(({ document }) => document));
    // A topN past the documents is all of them (and no topN, below).
    assert.deepEqual((await rerank({ model, query: 'a fox', documents: DOCUMENTS, topN: 10 })).ranking.map((r) => r.originalIndex), own.map(({ index }) => index));
    const objects = [{ title: 'Fox', text: 'the fox' }, { title: 'Dog', text: 'a dog' }, { title: 'Fox', text: 'the fox again' }];
    const byObject = await rerank({ model, query: 'a fox', documents: objects });
    const byJson = await reranker.rerank('a fox', objects.map((o) => JSON.stringify(o)));
    assert.deepEqual(byObject.ranking.map((r) => [r.originalIndex, r.score]), byJson.ranking.map((r) => [r.index, r.score]));
    assert.deepEqual(byObject.rerankedDocuments, byJson.ranking.map(({ index }) => objects[index]));
    // A document past the context: refused, or cut with providerOptions['kvcache-wasm'].truncate.
    const long = Array.from({ length: 300 }, (_, i) => `w${i % 50}`).join(' '); // some 840 tokens
    await assert.rejects(rerank({ model, query: 'a fox', documents: ['the fox', long], maxRetries: 0 }), (e) => e instanceof RangeError && /options\.truncate: true cuts it/.test(e.message));
    const cut = await rerank({ model, query: 'a fox', documents: ['the fox', long], providerOptions: { 'kvcache-wasm': { truncate: true } } });
    assert.equal(cut.ranking.length, 2);
    await assert.rejects(rerank({ model, query: 'a fox', documents: ['x'], providerOptions: { 'kvcache-wasm': { topN: 1 } } }), /providerOptions\['kvcache-wasm'\] has no option 'topN'/);
    // A BERT cross-encoder's file says no pooling type: its classification head makes it a reranker.
    const crossEncoder = Llama.fromGguf(bytes('tiny-bert-reranker'));
    try {
      const documents = ['the fox', 'a dog'];
      const { ranking } = await rerank({ model: kvcache.rerankingModel(crossEncoder), query: 'a fox', documents });
      assert.deepEqual(ranking.map(({ originalIndex, score }) => [originalIndex, score]),
        (await crossEncoder.rerank('a fox', documents)).ranking.map(({ index, score }) => [index, score]));
    } finally {
      crossEncoder.free();
    }
  });

  test('a model that does not embed, or does not rerank, or is not named: the SDK\'s NoSuchModelError, saying why', async () => {
    const provider = createKvcache({ models: { gen: generator, emb: embedder, enc: encoder, rank: reranker } });
    const refused = (make, modelType, pattern) => assert.throws(make, (e) => NoSuchModelError.isInstance(e) && e.modelType === modelType && pattern.test(e.message));
    refused(() => provider.embeddingModel('gen'), 'embeddingModel', /"gen" is no embedding model: its file gives no pooling type \(it generates; an embedding model's file says mean, cls or last\)/);
    refused(() => provider.embeddingModel('rank'), 'embeddingModel', /"rank" is no embedding model: it is a reranker \(pooling rank\), which scores documents: rerankingModel\(\) takes it/);
    refused(() => provider.rerankingModel('emb'), 'rerankingModel', /"emb" is no reranker: it is an embedding model \(pooling last\), which gives vectors: embeddingModel\(\) takes it/);
    refused(() => provider.rerankingModel('gen'), 'rerankingModel', /"gen" is no reranker: its file has no classification head \(it generates/);
    refused(() => kvcache.embeddingModel(generator), 'embeddingModel', /"llama" is no embedding model/);
    refused(() => provider.embeddingModel('nope'), 'embeddingModel', /no model is named "nope" \(options\.models of createKvcache names 'gen', 'emb', 'enc', 'rank'\)/);
    refused(() => provider.rerankingModel('nope'), 'rerankingModel', /no model is named "nope"/);
    assert.throws(() => kvcache.embeddingModel({}), /kvcache\.embeddingModel: model must be a Llama/);
    assert.throws(() => kvcache.rerankingModel(embedder, { modelID: 'x' }), /settings has no option 'modelID' \(did you mean 'modelId'\?\)/);
    // By name, through the SDK's registry.
    const registry = createProviderRegistry({ local: provider });
    const byName = registry.embeddingModel('local:enc');
    assert.equal(byName.modelId, 'enc');
    assert.deepEqual((await embed({ model: byName, value: 'hello' })).embedding, Array.from((await encoder.embed('hello'))[0]));
    assert.equal(registry.rerankingModel('local:rank').modelId, 'rank');
  });

  test('in a worker: the same vectors, usage and ranking', async () => {
    const worker = new LlamaWorker({ worker: () => nodeWorker(), init: { threads: 1 } });
    try {
      const remote = await worker.load(bytes('tiny-qwen3-embedding'));
      const here = await embedMany({ model: kvcache.embeddingModel(embedder), values: TEXTS, dimensions: 128 });
      const there = await embedMany({ model: kvcache.embeddingModel(remote), values: TEXTS, dimensions: 128 });
      assert.deepEqual(there.embeddings, here.embeddings);
      assert.equal(there.usage.tokens, here.usage.tokens);
      const remoteReranker = await worker.load(bytes('tiny-qwen3-reranker'));
      const ranked = (model) => rerank({ model, query: 'a fox', documents: DOCUMENTS, topN: 3 }).then((r) => r.ranking);
      assert.deepEqual(await ranked(kvcache.rerankingModel(remoteReranker)), await ranked(kvcache.rerankingModel(reranker)));
      assert.throws(() => kvcache.rerankingModel(remote), (e) => NoSuchModelError.isInstance(e) && /is no reranker/.test(e.message));
    } finally {
      worker.terminate();
    }
  });
});

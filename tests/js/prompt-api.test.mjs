// kvcache-wasm/prompt-api: the Prompt API's LanguageModel over the runner,
// in Node. The rules WPT's ai/ helpers check for every session (download
// progress from 0 to 1 in 1/65536 steps, aborts with the signal's reason,
// destroy() rejecting what is pending and later with an AbortError), the
// specification's prompt validation, context usage in tokens the cache
// holds, clone() as a fork that computes nothing, a QuotaExceededError that
// changes nothing, the contextoverflow event, response constraints, tools
// and images -- on stories260K, a random-weight model over Qwen3's
// vocabulary and template, and a tiny projector pair.
import { test, describe, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import Ajv from 'ajv';
import { MODEL_MISSING, MODEL_PATH, forwardTokens, ready } from './helpers.mjs';
import { Llama } from '../../js/llama.js';
import { defineLanguageModel, installLanguageModel, polyfillBackend } from '../../js/prompt-api.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { TINY_PROJECTORS, pairedLanguageModel, randomProjector } from '../gguf/vision.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { decodePng, encodePng, testImage } from '../runtimes/png.mjs';
import { VOCABULARIES, hfVocabulary } from './hf-tokenizers.mjs';

await ready();
const GREEDY = { samplingMode: 'most-predictable' };

/** The events a create() monitor hears, and the monitor. */
function progressMonitor() {
  const events = [];
  return { events, monitor: (m) => m.addEventListener('downloadprogress', (e) => events.push(e)) };
}

describe('on stories260K', { skip: MODEL_MISSING ?? false }, () => {
  let bytes;
  let LanguageModel;
  let llama;
  before(async () => {
    bytes = new Uint8Array(readFileSync(MODEL_PATH));
    llama = Llama.fromGguf(bytes);
    LanguageModel = defineLanguageModel({ model: llama });
  });

  test('availability: available for text; unavailable for audio, for images without a projector, for outputs other than text, for languages the model is not said to have', async () => {
    assert.equal(await LanguageModel.availability(), 'available');
    assert.equal(await LanguageModel.availability({ expectedInputs: [{ type: 'text', languages: ['en'] }], expectedOutputs: [{ type: 'tool-call' }] }), 'available');
    assert.equal(await LanguageModel.availability({ expectedInputs: [{ type: 'audio' }] }), 'unavailable');
    assert.equal(await LanguageModel.availability({ expectedInputs: [{ type: 'image' }] }), 'unavailable');
    assert.equal(await LanguageModel.availability({ expectedOutputs: [{ type: 'image' }] }), 'unavailable');
    const English = defineLanguageModel({ model: llama, languages: ['en'] });
    assert.equal(await English.availability({ expectedInputs: [{ type: 'text', languages: ['en-US'] }] }), 'available');
    assert.equal(await English.availability({ expectedOutputs: [{ type: 'text', languages: ['ja'] }] }), 'unavailable');
    await assert.rejects(LanguageModel.availability({ expectedInputs: [{ type: 'text', languages: ['not a tag'] }] }), RangeError);
    await assert.rejects(LanguageModel.availability({ expectedInputs: [{ type: 'smell' }] }), /expectedInputs\[0\]\.type must be one of/);
    await assert.rejects(LanguageModel.create({ expectedInputs: [{ type: 'audio' }] }), { name: 'NotSupportedError' });
    // A model still to download is 'downloadable' until a create() starts it.
    assert.equal(await defineLanguageModel({ model: 'https://example.invalid/model.gguf' }).availability(), 'downloadable');
  });

  test('create(): the monitor hears downloadprogress from 0 to 1, rising, in steps of 1/65536, total 1; a monitor that throws rejects create() with its error', async () => {
    const fresh = defineLanguageModel({ model: new Blob([bytes]) });
    const { events, monitor } = progressMonitor();
    const session = await fresh.create({ monitor });
    assert.ok(events.length >= 2);
    assert.equal(events[0].loaded, 0);
    assert.equal(events.at(-1).loaded, 1);
    for (const [i, e] of events.entries()) {
      assert.equal(e.type, 'downloadprogress');
      assert.equal(e.total, 1);
      assert.equal(e.lengthComputable, true);
      assert.equal(e.loaded % (1 / 0x10000), 0);
      if (i > 0) assert.ok(e.loaded > events[i - 1].loaded);
    }
    session.destroy();
    // Loaded once: the next session's create() hears 0 and 1 only.
    const again = progressMonitor();
    (await fresh.create({ monitor: again.monitor })).destroy();
    assert.deepEqual(again.events.map((e) => e.loaded), [0, 1]);
    const error = new Error('the monitor threw');
    await assert.rejects(fresh.create({ monitor() { throw error; } }), (e) => e === error);
  });

  test('create() options: samplingMode, or temperature with topK (both or neither, in range); an aborted signal rejects with its reason', async () => {
    const creative = await LanguageModel.create({ samplingMode: 'creative' });
    assert.equal(creative.samplingMode, 'creative');
    creative.destroy();
    const custom = await LanguageModel.create({ temperature: 5, topK: 1000 });
    assert.deepEqual([custom.temperature, custom.topK], [2, 128]); // params()'s maximums
    custom.destroy();
    assert.deepEqual(await LanguageModel.params(), { defaultTopK: 40, maxTopK: 128, defaultTemperature: 0.8, maxTemperature: 2 });
    await assert.rejects(LanguageModel.create({ topK: 3 }), { name: 'NotSupportedError' });
    await assert.rejects(LanguageModel.create({ temperature: 0.5 }), { name: 'NotSupportedError' });
    await assert.rejects(LanguageModel.create({ topK: 3, temperature: -0.5 }), RangeError);
    await assert.rejects(LanguageModel.create({ topK: 0, temperature: 0.5 }), RangeError);
    await assert.rejects(LanguageModel.create({ samplingMode: 'wild' }), /samplingMode must be one of/);
    const reason = new Error('stop');
    await assert.rejects(LanguageModel.create({ signal: AbortSignal.abort(reason) }), (e) => e === reason);
    await assert.rejects(LanguageModel.create({ signal: AbortSignal.abort() }), { name: 'AbortError' });
  });

  test('prompts are validated as the specification says: a system message only first, a prefix only last and an assistant\'s, text values strings', async () => {
    const session = await LanguageModel.create({ ...GREEDY, initialPrompts: [{ role: 'system', content: 'Once upon a time' }] });
    await assert.rejects(session.prompt([{ role: 'system', content: 'again' }]), TypeError);
    await assert.rejects(session.prompt([{ role: 'user', content: 'a', prefix: true }]), { name: 'SyntaxError' });
    await assert.rejects(session.prompt([{ role: 'assistant', content: 'a', prefix: true }, { role: 'user', content: 'b' }]), { name: 'SyntaxError' });
    await assert.rejects(session.prompt([{ role: 'user', content: [{ type: 'text', value: 3 }] }]), TypeError);
    await assert.rejects(session.prompt([{ role: 'assistant', content: [{ type: 'image', value: new Uint8Array(4) }] }]), { name: 'NotSupportedError' });
    await assert.rejects(session.prompt([{ role: 'user', content: [{ type: 'image', value: new Uint8Array(4) }] }]), { name: 'NotSupportedError' });
    await assert.rejects(LanguageModel.create({ initialPrompts: [{ role: 'user', content: 'a' }, { role: 'system', content: 'b' }] }), TypeError);
    // None of these took anything in.
    const usage = session.contextUsage;
    assert.equal(typeof await session.prompt(''), 'string');
    assert.ok(session.contextUsage > usage);
    session.destroy();
  });

  test('context usage is the tokens the cache holds; append() takes its input in at once, and measureContextUsage() says how much a prompt adds', async () => {
    const session = await LanguageModel.create({ ...GREEDY, initialPrompts: [{ role: 'system', content: 'Tom had a dog.' }] });
    assert.equal(session.contextWindow, llama.config.contextLength);
    const start = session.contextUsage;
    assert.ok(start > 0);
    // measureContextUsage() measures the input alone: what a session created with it holds.
    assert.equal(await session.measureContextUsage([{ role: 'system', content: 'Tom had a dog.' }]), start);
    const measured = await session.measureContextUsage('The dog ran to the park.');
    assert.equal(session.contextUsage, start, 'measuring takes nothing in');
    const appending = await forwardTokens(llama, () => session.append('The dog ran to the park.'));
    // It computed exactly the tokens it added; they are the measured ones but the begin token, which the session
    // holds once -- give or take one where the text meets the line before it (SentencePiece's space prefix).
    assert.equal(appending, session.contextUsage - start);
    assert.ok(Math.abs(appending - (measured - 1)) <= 1, `${appending} tokens added, ${measured} measured`);
    // The prompt after it computes only what follows the appended text.
    let reply;
    const prompting = await forwardTokens(llama, async () => { reply = await session.prompt('Then'); });
    assert.equal(typeof reply, 'string');
    assert.ok(prompting < session.contextUsage - start - measured + 8, `${prompting} tokens computed`);
    assert.equal(await session.measureContextUsage([]), await session.measureContextUsage(''));
    session.destroy();
  });

  test('clone(): a fork that computes nothing, replies as the original would, and goes its own way', async () => {
    const session = await LanguageModel.create({ ...GREEDY, initialPrompts: [{ role: 'system', content: 'Lily had a red ball. She liked to play.' }] });
    await session.append('One day, Lily went to the park.');
    let copy;
    assert.equal(await forwardTokens(llama, async () => { copy = await session.clone(); }), 0);
    assert.equal(copy.contextUsage, session.contextUsage);
    assert.equal(copy.samplingMode, 'most-predictable');
    const fromCopy = await copy.prompt('She saw');
    const fromOriginal = await session.prompt('She saw');
    assert.equal(fromCopy, fromOriginal);
    await copy.prompt('Then a bird came.');
    assert.ok(copy.contextUsage > session.contextUsage);
    copy.destroy();
    assert.equal(typeof await session.prompt('The end.'), 'string', 'the original goes on when its clone is destroyed');
    session.destroy();
  });

  test('promptStreaming(): the reply in pieces, the same text prompt() gives', async () => {
    const session = await LanguageModel.create({ ...GREEDY, initialPrompts: [{ role: 'system', content: 'Once upon a time' }] });
    const copy = await session.clone();
    const chunks = [];
    for await (const chunk of session.promptStreaming('there was a cat')) chunks.push(chunk);
    assert.ok(chunks.length > 1 && chunks.every((c) => typeof c === 'string'));
    assert.equal(chunks.join(''), await copy.prompt('there was a cat'));
    session.destroy();
    copy.destroy();
  });

  test('aborts: a signal aborted before or during a prompt rejects it with its reason; the session stays usable', async () => {
    const session = await LanguageModel.create(GREEDY);
    const reason = new Error('enough');
    await assert.rejects(session.prompt('a', { signal: AbortSignal.abort(reason) }), (e) => e === reason);
    assert.throws(() => session.promptStreaming('a', { signal: AbortSignal.abort(reason) }), (e) => e === reason);
    const controller = new AbortController();
    const stream = session.promptStreaming('Tom went', { signal: controller.signal });
    const reader = stream.getReader();
    await reader.read();
    controller.abort(reason);
    await assert.rejects(async () => { for (;;) if ((await reader.read()).done) break; }, (e) => e === reason);
    const domAbort = new AbortController();
    const pending = session.prompt('Tom went', { signal: domAbort.signal });
    domAbort.abort();
    await assert.rejects(pending, { name: 'AbortError' });
    // Cancelling a stream aborts its reply: the next prompt runs at once.
    const cancelled = session.promptStreaming('Lily went').getReader();
    await cancelled.read();
    await cancelled.cancel();
    assert.equal(typeof await session.prompt('Then'), 'string');
    session.destroy();
  });

  test('destroy() rejects what is pending and what is asked later with an AbortError; create()\'s signal, aborted later, does the same with its reason', async () => {
    const session = await LanguageModel.create(GREEDY);
    const pending = [session.prompt('a'), session.append('b'), session.measureContextUsage('c'), session.clone()];
    session.destroy();
    for (const call of [...pending, session.prompt('d'), session.append('e'), session.clone()]) await assert.rejects(call, { name: 'AbortError' });
    assert.throws(() => session.promptStreaming('f'), { name: 'AbortError' });
    const controller = new AbortController();
    const owned = await LanguageModel.create({ ...GREEDY, signal: controller.signal });
    const reason = new Error('the page is done');
    const running = owned.prompt('a');
    controller.abort(reason);
    await assert.rejects(running, (e) => e === reason);
    await assert.rejects(owned.prompt('b'), (e) => e === reason);
  });

  test('a prompt that cannot fit the context is a QuotaExceededError with requested and quota, and changes nothing', async () => {
    const Small = defineLanguageModel({ model: llama, contextLength: 64 });
    const session = await Small.create(GREEDY);
    assert.equal(session.contextWindow, 64);
    const before = session.contextUsage;
    const long = 'Tom and Lily played with the ball in the park all day long. '.repeat(8);
    await assert.rejects(session.prompt(long), (e) => e.name === 'QuotaExceededError' && e.requested > 64 && e.quota === 64);
    await assert.rejects(session.append(long), { name: 'QuotaExceededError' });
    await assert.rejects(Small.create({ initialPrompts: [{ role: 'system', content: long }] }), { name: 'QuotaExceededError' });
    assert.equal((await defineLanguageModel({ model: bytes, contextLength: 64 }).create()).contextWindow, 64, 'a model loaded for a window of 64');
    assert.equal(session.contextUsage, before);
    assert.equal(typeof await session.prompt('Tom'), 'string');
    session.destroy();
  });

  test('a reply that fills the context fires contextoverflow (oncontextoverflow too), and the next prompt has room again', async () => {
    const Small = defineLanguageModel({ model: llama, contextLength: 64 });
    const session = await Small.create({ ...GREEDY, initialPrompts: [{ role: 'system', content: 'Once' }] });
    let heard = 0;
    session.addEventListener('contextoverflow', () => heard++);
    session.oncontextoverflow = () => heard++;
    assert.equal(typeof session.oncontextoverflow, 'function');
    await session.prompt('upon a time there was a little girl');
    assert.equal(heard, 2);
    assert.ok(session.contextUsage <= 64);
    assert.equal(typeof await session.prompt('She'), 'string');
    session.destroy();
  });

  test('a prefix: the reply continues the assistant\'s start; consecutive user turns are one turn', async () => {
    const session = await LanguageModel.create(GREEDY);
    const copy = await session.clone();
    const continued = await session.prompt([{ role: 'user', content: 'Tom' }, { role: 'assistant', content: 'had a big', prefix: true }]);
    assert.equal(typeof continued, 'string');
    assert.equal(await copy.prompt([{ role: 'user', content: 'Tom' }, { role: 'user', content: 'had a dog' }]).then((t) => typeof t), 'string');
    session.destroy();
    copy.destroy();
  });

  test('installLanguageModel() is opt-in: it sets globalThis.LanguageModel where there is none, and keeps one that is there', async () => {
    assert.equal(globalThis.LanguageModel, undefined);
    const installed = installLanguageModel({ model: llama });
    try {
      assert.equal(globalThis.LanguageModel, installed);
      assert.equal(installLanguageModel({ model: llama }), installed);
      assert.notEqual(installLanguageModel({ model: llama, replace: true }), installed);
      const session = await globalThis.LanguageModel.create();
      assert.ok(session instanceof globalThis.LanguageModel);
      session.destroy();
    } finally {
      delete globalThis.LanguageModel;
    }
  });

  test('a prompt-api-polyfill backend: the conversation sent whole each call (Gemini-shaped contents) is held in one session, and a call computes only what is new', async () => {
    const Backend = polyfillBackend({ model: llama, maxTokens: 12 });
    assert.equal(Backend.availability({ expectedInputs: [{ type: 'audio' }] }), 'unavailable');
    assert.equal(Backend.availability({ expectedInputs: [{ type: 'image' }] }), 'unavailable');
    assert.equal(Backend.availability({}), 'available');
    const backend = new Backend({ modelName: 'stories260K' });
    assert.equal(backend.modelName, 'stories260K');
    await assert.rejects(backend.generateContent([]), /call createSession\(\) first/);
    const monitor = new EventTarget();
    const progress = [];
    monitor.addEventListener('downloadprogress', (e) => progress.push(e.loaded));
    await backend.createSession({}, { systemInstruction: 'Once upon a time', generationConfig: { temperature: 0 } }, monitor);
    assert.equal(progress[0], 0);
    assert.equal(progress.at(-1), 1);
    const first = [{ role: 'user', parts: [{ text: 'there was a dog' }] }];
    const { text, usage } = await backend.generateContent(first);
    assert.ok(text.length > 0);
    const second = [...first, { role: 'model', parts: [{ text }] }, { role: 'user', parts: [{ text: 'The end.' }] }];
    const chunks = [];
    let count = null;
    const computedTokens = await forwardTokens(llama, async () => {
      for await (const chunk of await backend.generateContentStream(second)) {
        chunks.push(chunk.text());
        count = chunk.usageMetadata.totalTokenCount;
      }
    });
    // The second call took in the new turn and its reply, not the conversation again.
    assert.ok(computedTokens <= count - usage + 2, `${computedTokens} tokens computed for a conversation of ${count}`);
    assert.ok(chunks.join('').length > 0);
    assert.ok(count > usage, `${count} tokens held after the second reply, ${usage} after the first`);
    assert.ok(await backend.countTokens(second) < count);
    assert.throws(() => polyfillBackend({ model: bytes, maxTokens: -1 }), /options\.maxTokens must be a positive integer/);
    await assert.rejects(backend.generateContent([{ role: 'robot', parts: [] }]), /contents\[0\] must be/);
  });

  test('bad options are refused, naming them', () => {
    assert.throws(() => defineLanguageModel({}), /options\.model must be/);
    assert.throws(() => defineLanguageModel({ model: llama, modle: 1 }), /modle/);
    assert.throws(() => defineLanguageModel({ model: llama, worker: true }), /for a model to load/);
    assert.throws(() => defineLanguageModel({ model: llama, contextLength: 0 }), /options\.contextLength must be a positive integer/);
    assert.throws(() => defineLanguageModel({ model: llama, decodeImage: 'png' }), /options\.decodeImage must be a function/);
    assert.throws(() => defineLanguageModel({ model: llama, requireUserActivation: 'yes' }), /options\.requireUserActivation must be a boolean/);
    assert.throws(() => defineLanguageModel({ model: bytes, worker: 'yes' }), /options\.worker must be/);
    assert.throws(() => defineLanguageModel({ model: bytes, maxTokens: 0 }), /options\.maxTokens must be a positive integer/);
  });
});

describe('on a chat model: response constraints and tools', () => {
  // A random-weight block over Qwen3's real vocabulary and chat template (hermes tool calls): its unconstrained output is noise.
  const vocabulary = hfVocabulary(VOCABULARIES.qwen3);
  const geometry = { ...GEOMETRIES.tiny, name: 'prompt-api', dim: 64, hiddenDim: 128, numHeads: 2, numKvHeads: 1, tied: true, contextLength: 2048 };
  const llama = Llama.fromGguf(encodeGguf(randomLlama(geometry, { tokenizer: vocabulary.entries, seed: 5, mix: 'Q8_0' })));
  const ajv = new Ajv();
  // WPT's own response schema (ai/resources/util.js's kValidResponseSchema).
  const RATING = { type: 'object', required: ['Rating'], additionalProperties: false, properties: { Rating: { type: 'number', minimum: 0, maximum: 5 } } };

  test('a JSON Schema constraint: every reply parses and validates (10 replies, number bounds included); the schema is said in the prompt unless omitResponseConstraintInput', async () => {
    const LanguageModel = defineLanguageModel({ model: llama, maxTokens: 64 });
    const session = await LanguageModel.create({ temperature: 1, topK: 128 });
    const plain = await session.measureContextUsage('Rate it.', { responseConstraint: RATING, omitResponseConstraintInput: true });
    const said = await session.measureContextUsage('Rate it.', { responseConstraint: RATING });
    assert.ok(said > plain + 10, `${said} vs ${plain} tokens`);
    await assert.rejects(session.measureContextUsage('Rate it.', { omitResponseConstraintInput: true }), TypeError);
    for (let i = 0; i < 10; i++) {
      const copy = await session.clone();
      const reply = await copy.prompt('Rate the food from 0 to 5.', { responseConstraint: RATING, omitResponseConstraintInput: i % 2 === 0 });
      const value = JSON.parse(reply);
      assert.ok(ajv.validate(RATING, value), reply);
      copy.destroy();
    }
    session.destroy();
  });

  test('a constraint with an assistant\'s prefix: the constraint reads the prefix first, the reply continues it; a prefix it does not allow is a NotSupportedError', async () => {
    const LanguageModel = defineLanguageModel({ model: llama, maxTokens: 48 });
    const session = await LanguageModel.create({ temperature: 1, topK: 128 });
    for (let i = 0; i < 3; i++) {
      const copy = await session.clone();
      const prefix = '{ "Rating": ';
      const reply = await copy.prompt([{ role: 'user', content: 'Rate it.' }, { role: 'assistant', content: prefix, prefix: true }], { responseConstraint: RATING });
      assert.ok(ajv.validate(RATING, JSON.parse(prefix + reply)), prefix + reply);
      copy.destroy();
    }
    const regex = await session.clone();
    const greeting = await regex.prompt([{ role: 'user', content: 'hello' }, { role: 'assistant', content: 'Greetings', prefix: true }], { responseConstraint: /Greetings and [a-z]{2,10}/ });
    assert.match(`Greetings${greeting}`, /^Greetings and [a-z]{2,10}$/);
    const usage = session.contextUsage;
    await assert.rejects(session.prompt([{ role: 'user', content: 'hello' }, { role: 'assistant', content: 'invalid', prefix: true }], { responseConstraint: RATING }), { name: 'NotSupportedError' });
    assert.equal(session.contextUsage, usage);
    session.destroy();
    regex.destroy();
  });

  test('a RegExp constraint: the reply matches it', async () => {
    const LanguageModel = defineLanguageModel({ model: llama, maxTokens: 40 });
    const session = await LanguageModel.create({ temperature: 1, topK: 128 });
    const reply = await session.prompt('An email address?', { responseConstraint: /[a-z]{2,8}@[a-z]{2,8}\.(com|org)/ });
    assert.match(reply, /^[a-z]{2,8}@[a-z]{2,8}\.(com|org)$/);
    await assert.rejects(session.prompt('x', { responseConstraint: /a/i }), { name: 'NotSupportedError' });
    await assert.rejects(session.prompt('x', { responseConstraint: 'json' }), TypeError);
    session.destroy();
  });

  test('tools: the model\'s calls run the tool\'s execute() with arguments valid for its schema, their results go back, and the reply is text', async () => {
    const calls = [];
    const weather = {
      name: 'getWeather',
      description: 'Get the weather in a location.',
      inputSchema: { type: 'object', properties: { location: { type: 'string', maxLength: 12 } }, required: ['location'], additionalProperties: false },
      async execute(args) {
        calls.push(args);
        return JSON.stringify({ celsius: 21 });
      },
    };
    const LanguageModel = defineLanguageModel({ model: llama, maxTokens: 48 });
    const session = await LanguageModel.create({ temperature: 1, topK: 128, tools: [weather], expectedOutputs: [{ type: 'tool-call' }] });
    const reply = await session.prompt('What is the weather in Seattle?');
    assert.equal(typeof reply, 'string');
    for (const args of calls) assert.ok(ajv.validate(weather.inputSchema, args), JSON.stringify(args));
    session.destroy();
    // Tools go with expectedOutputs that list tool calls; each is checked as the specification says.
    await assert.rejects(LanguageModel.create({ tools: [weather] }), /expectedOutputs does not list \{ type: 'tool-call' \}/);
    const withTool = (tool) => LanguageModel.create({ tools: [tool], expectedOutputs: [{ type: 'tool-call' }] });
    await assert.rejects(withTool({ ...weather, name: '' }), TypeError);
    await assert.rejects(withTool({ ...weather, inputSchema: { type: 'string' } }), /inputSchema must have type 'object'/);
    await assert.rejects(withTool({ ...weather, inputSchema: { type: 'object', required: 'location' } }), /required must be an array/);
    const thrown = new Error('toJSON threw');
    await assert.rejects(withTool({ ...weather, inputSchema: { type: 'object', toJSON() { throw thrown; } } }), (e) => e === thrown);
    const cycle = { type: 'object' };
    cycle.self = cycle;
    await assert.rejects(withTool({ ...weather, inputSchema: cycle }), TypeError);
    await assert.rejects(LanguageModel.create({ tools: [weather, weather], expectedOutputs: [{ type: 'tool-call' }] }), /names a tool twice/);
    (await withTool({ name: 'note', description: 'Keeps a note.', inputSchema: { type: 'object' } })).destroy(); // execute is optional
    // A template without tool calls cannot take tools.
    const plainLlama = MODEL_MISSING ? null : Llama.fromGguf(new Uint8Array(readFileSync(MODEL_PATH)));
    if (plainLlama) await assert.rejects(defineLanguageModel({ model: plainLlama }).create({ tools: [weather], expectedOutputs: [{ type: 'tool-call' }] }), { name: 'NotSupportedError' });
  });
});

test('images: with a projector, availability for image inputs is available, and a BufferSource image goes into the prompt; without expectedInputs it is refused', async () => {
  const pair = TINY_PROJECTORS.idefics3;
  const llama = Llama.fromGguf(encodeGguf(pairedLanguageModel(pair, { seed: 3 })), { projector: encodeGguf(randomProjector(pair, { seed: 3 })) });
  const decodeImage = decodePng; // Node decodes no images: the app gives a decoder
  const LanguageModel = defineLanguageModel({ model: llama, maxTokens: 4, decodeImage });
  assert.equal(await LanguageModel.availability({ expectedInputs: [{ type: 'image' }] }), 'available');
  const png = encodePng(testImage(40, 30, 7));
  const session = await LanguageModel.create({ samplingMode: 'most-predictable', expectedInputs: [{ type: 'image' }] });
  const message = [{ role: 'user', content: [{ type: 'text', value: 'Describe' }, { type: 'image', value: png }] }];
  const usage = await session.measureContextUsage(message);
  const { total } = llama.imageTokenCount({ width: 40, height: 30 });
  assert.ok(usage >= total, `${usage} tokens for an image of ${total}`);
  assert.equal(typeof await session.prompt(message), 'string');
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  assert.equal(typeof await session.prompt([{ role: 'user', content: [{ type: 'image', value: view }] }]), 'string');
  const textOnly = await LanguageModel.create();
  await assert.rejects(textOnly.prompt(message), { name: 'NotSupportedError' });
  session.destroy();
  textOnly.destroy();
});

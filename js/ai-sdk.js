// kvcache-wasm/ai-sdk: a provider for the Vercel AI SDK (`ai`): a loaded
// Llama, or a RemoteLlama running in a LlamaWorker, as a language model of
// the SDK's specification v4, so that generateText, streamText,
// generateObject, streamObject and tool loops run on it. Each call's prompt
// is rendered by the model's chat template through Chat's machinery
// (chat/chat.js reply()); responseFormat is the package's structured
// output, tools and toolChoice its tool calls. One session per model: a
// call renders the whole conversation and the session computes only what
// its cache does not hold (respond() goes back to where its tokens and the
// conversation's part), so the turns of a conversation, or calls sharing a
// system prompt, prefill only what is new. Calls on one model take turns.
// An embedding model's file (pooling mean, cls or last) is an embedding
// model of the same specification, for embed and embedMany (its embed());
// a reranker's (pooling rank) a reranking model, for rerank (its rerank()).
//
//   import { embed, generateText } from 'ai';
//   const { text } = await generateText({ model: kvcache(llama), prompt: 'Hi' });
//   const { embedding } = await embed({ model: kvcache.embeddingModel(embedder), value: 'a fox' });
//
// Nothing here imports `ai` or `@ai-sdk/provider`: the errors carry the
// SDK's markers (Symbol.for('vercel.ai.error...')), which its isInstance()
// checks read across versions.
import { checkObject, shown } from './runtime/checks.js';
import { checkKeys } from './runtime/options.js';
import { commonPrefix, sessionTokens } from './runtime/tokens.js';
import { checkMessages, reply, templateFor } from './chat/chat.js';
import { prepareImages } from './chat/content.js';
import { embeddings } from './chat/embeddings.js';
import { readsControlTokens, toolFormatOf } from './chat/tools.js';

const PROVIDER = 'kvcache-wasm';
const MODEL_SETTINGS = ['template', 'session', 'sessionOptions', 'modelId', 'decodeImage'];
// ReplyOptions a call may set through providerOptions['kvcache-wasm'], beyond the SDK's own settings.
const PROVIDER_OPTIONS = ['minP', 'repeatPenalty', 'repeatLastN', 'draft', 'minNgram', 'context'];
// Our stop reasons as the SDK's finish reasons (a reply with tool calls that ended on its own: 'tool-calls').
const FINISH = { end: 'stop', stop: 'stop', maxTokens: 'length', context: 'length', abort: 'other' };

/**
 * An error the SDK's `X.isInstance(error)` recognizes: an Error named
 * `AI_${kind}` with the SDK's markers and `fields` on it.
 */
function sdkError(kind, message, fields = {}) {
  const error = new Error(message);
  error.name = `AI_${kind}`;
  error[Symbol.for('vercel.ai.error')] = true;
  error[Symbol.for(`vercel.ai.error.AI_${kind}`)] = true;
  return Object.assign(error, fields);
}

const unsupported = (functionality, message) => sdkError('UnsupportedFunctionalityError', message, { functionality });

/**
 * A provider: `provider(model, settings)` (also `provider.languageModel`)
 * is a LanguageModelV4 over `model` -- a Llama, a RemoteLlama, or the name
 * of one in options.models. options.models: { [name]: Llama | RemoteLlama },
 * for provider registries, which name models by string. Settings: template
 * (a Jinja chat template in place of the file's), session (a LlamaSession
 * or RemoteSession of the model to use; default: one made at the first
 * call, with sessionOptions), decodeImage (where the runtime cannot
 * decode an image's bytes: Node, Deno, Bun), modelId (default: its name in
 * options.models, else the model's general.architecture).
 * `provider.embeddingModel(model, { modelId })` is an EmbeddingModelV4 over
 * an embedding model, `provider.rerankingModel(model, { modelId })` a
 * RerankingModelV4 over a reranker; another model is the SDK's
 * NoSuchModelError, saying why. imageModel throws: the runner has none.
 */
export function createKvcache(options = {}) {
  const where = 'createKvcache';
  if (options === null || typeof options !== 'object') throw new TypeError(`${where}: options must be an object (got ${shown(options)})`);
  checkKeys(where, options, ['models']);
  const models = options.models ?? {};
  if (models === null || typeof models !== 'object') throw new TypeError(`${where}: options.models must be an object of { name: Llama | RemoteLlama } (got ${shown(models)})`);
  // A model of `Kind` over `model`, or over the one options.models names so (its name the model's id).
  const maker = (Kind, modelType) => (model, settings = {}) => {
    if (typeof model !== 'string') return new Kind(model, settings);
    if (!Object.hasOwn(models, model)) {
      throw sdkError('NoSuchModelError', `kvcache: no model is named ${shown(model)} (options.models of createKvcache names ${Object.keys(models).map((k) => `'${k}'`).join(', ') || 'none'})`,
        { modelId: model, modelType });
    }
    return new Kind(models[model], { modelId: model, ...settings });
  };
  const languageModel = maker(KvcacheLanguageModel, 'languageModel');
  const provider = (model, settings) => languageModel(model, settings);
  provider.specificationVersion = 'v4';
  provider.languageModel = languageModel;
  provider.embeddingModel = maker(KvcacheEmbeddingModel, 'embeddingModel');
  provider.rerankingModel = maker(KvcacheRerankingModel, 'rerankingModel');
  provider.imageModel = (modelId) => {
    throw sdkError('NoSuchModelError', `kvcache: the runner generates no images: there is no image model (asked for ${shown(modelId)})`, { modelId: String(modelId), modelType: 'imageModel' });
  };
  return provider;
}

/** A LanguageModelV4 over a Llama or a RemoteLlama: what kvcache(model) returns. */
export class KvcacheLanguageModel {
  specificationVersion = 'v4';
  provider = PROVIDER;
  // No URL is read by the model itself: the SDK downloads them and hands over the bytes.
  supportedUrls = {};
  #llama;
  #template;
  #session;
  #sessionOptions;
  #decodeImage;
  #turn = Promise.resolve();
  #count = 0;

  constructor(llama, settings = {}) {
    const where = 'kvcache';
    if (typeof llama?.session !== 'function' || !llama.tokenizer || !llama.config) {
      throw new TypeError(`${where}: model must be a Llama (kvcache-wasm/llama) or a RemoteLlama (kvcache-wasm/worker) (got ${shown(llama)})`);
    }
    this.modelId = modelIdOf(where, llama, settings, MODEL_SETTINGS);
    if (settings.session !== undefined && (typeof settings.session?.respond !== 'function' || settings.session.llama !== llama)) {
      throw new TypeError(`${where}: settings.session must be a session of this model (got ${shown(settings.session)})`);
    }
    this.#llama = llama;
    this.#template = templateFor(llama.tokenizer, settings.template);
    this.#session = settings.session ?? null;
    this.#sessionOptions = settings.sessionOptions ?? {};
    if (settings.decodeImage !== undefined && typeof settings.decodeImage !== 'function') throw new TypeError(`${where}: settings.decodeImage must be a function (got ${shown(settings.decodeImage)})`);
    this.#decodeImage = settings.decodeImage;
  }

  /** The session the calls run in (made at the first call unless settings.session gave one). */
  session() {
    // The promise kept, not the session: two first calls at once make one (and one that failed, none).
    this.#session ??= Promise.resolve(this.#llama.session(this.#sessionOptions)).catch((error) => {
      this.#session = null;
      throw error;
    });
    return Promise.resolve(this.#session);
  }

  async doGenerate(options) {
    const call = await this.#start('doGenerate', options);
    let last = null;
    try {
      for await (const piece of call.pieces) last = piece;
      return { ...(await finish(call, last)), request: { body: call.request }, response: call.response, warnings: call.warnings };
    } finally {
      call.done();
    }
  }

  async doStream(options) {
    const call = await this.#start('doStream', options);
    const pieces = call.pieces[Symbol.asyncIterator]();
    let open = true;
    const stream = new ReadableStream({
      start(controller) {
        const send = (part) => {
          if (open) controller.enqueue(part);
        };
        send({ type: 'stream-start', warnings: call.warnings });
        send({ type: 'response-metadata', ...call.response });
        // The reply runs to its end whether or not the stream is read (as a server's reply would: the SDK
        // stops reading a stream it no longer needs without cancelling it); an abort or cancel() stops it.
        void pump(call, pieces, options, send).finally(() => {
          call.done();
          if (open) controller.close();
          open = false;
        });
      },
      async cancel() {
        open = false;
        await pieces.return?.();
      },
    });
    return { stream, request: { body: call.request } };
  }

  // A call begun: its turn on the session taken, its prompt rendered, its reply's pieces under way.
  async #start(where, options) {
    const { messages, warnings, generate } = callOf(`kvcache: ${where}`, options);
    const session = await this.session();
    // One call at a time on the session: the next waits for this one's done().
    let done;
    const mine = new Promise((resolve) => { done = resolve; });
    const before = this.#turn;
    this.#turn = before.then(() => mine);
    await before;
    try {
      const prepared = await prepareImages(`kvcache: ${where}`, this.#llama, checkMessages(`kvcache: ${where}`, messages), { decodeImage: this.#decodeImage });
      const held = await heldBy(session);
      const pieces = reply(`kvcache: ${where}`, session, this.#template, prepared, generate);
      const active = generate.tools !== undefined && generate.toolChoice !== 'none';
      const special = readsControlTokens(toolFormatOf(this.#template.source)?.name);
      return {
        pieces, session, held, warnings, request: { messages, ...generate, signal: undefined }, done,
        // A reply's text streams as it comes unless it may hold a call, or a thought its content leaves out: then it comes whole.
        streamsText: !active && !special,
        response: { id: `kvcache-${Date.now().toString(36)}${(this.#count++).toString(36)}`, timestamp: new Date(), modelId: this.modelId },
      };
    } catch (error) {
      done();
      throw error;
    }
  }
}

// The stream parts of a call's reply: text deltas as they come (or its text whole at its end, where it may hold a
// call or a thought), then its reasoning, tool calls and finish; an error as an error part.
async function pump(call, pieces, options, send) {
  const text = call.streamsText ? { id: 'text-0', open: false } : null; // the streamed text's block
  try {
    for (;;) {
      const { value: piece, done } = await pieces.next();
      if (done) return;
      if (options.includeRawChunks) send({ type: 'raw', rawValue: { text: piece.text, tokens: piece.tokens, stop: piece.stop } });
      if (text && piece.text) {
        if (!text.open) send({ type: 'text-start', id: text.id });
        text.open = true;
        send({ type: 'text-delta', id: text.id, delta: piece.text });
      }
      if (piece.stop === null) continue;
      const result = await finish(call, piece);
      // A block whole: its start, its one delta, its end.
      const block = (kind, delta) => ['start', 'delta', 'end'].forEach((at) => send({ type: `${kind}-${at}`, id: `${kind}-0`, ...(at === 'delta' ? { delta } : {}) }));
      for (const part of result.content) {
        if ((part.type === 'text' && !text) || part.type === 'reasoning') block(part.type, part.text);
        else if (part.type === 'tool-call') send(part);
      }
      if (text?.open) send({ type: 'text-end', id: text.id });
      send({ type: 'finish', usage: result.usage, finishReason: result.finishReason, providerMetadata: result.providerMetadata });
    }
  } catch (error) {
    send({ type: 'error', error });
  }
}

// What a session holds before a call: its tokens, and the positions its cache holds (the last token emitted is not among them).
async function heldBy(session) {
  const positions = session.cache ? session.cache.nextPosition : (await session.cacheStats()).nextPosition;
  return { tokens: await sessionTokens(session), positions };
}

// The call's result from its last piece: content, finish reason, usage in the tokens the session computed and emitted.
async function finish(call, last) {
  if (!last?.message) throw new Error('kvcache: the reply ended without its last piece');
  const { message, stats } = last;
  const content = [];
  if (message.reasoning_content) content.push({ type: 'reasoning', text: message.reasoning_content });
  if (message.content) content.push({ type: 'text', text: message.content });
  for (const c of message.tool_calls ?? []) content.push({ type: 'tool-call', toolCallId: c.id, toolName: c.function.name, input: c.function.arguments });
  // The conversation's tokens whose rows the session's cache held before the call, or its prefix cache
  // gave (cacheRead), and those it computed (noCache): the conversation's last token is always computed
  // (its logits give the first token), and so is a token emitted last, which no row held yet.
  const after = await sessionTokens(call.session);
  const common = commonPrefix(call.held.tokens, after.slice(0, stats.promptTokens));
  const held = Math.max(0, Math.min(common, call.held.positions, stats.promptTokens - 1));
  const reused = Math.min(stats.promptTokens, held + stats.prefixTokens);
  const unified = FINISH[last.stop] === 'length' ? 'length' : message.tool_calls ? 'tool-calls' : FINISH[last.stop];
  return {
    content,
    finishReason: { unified, raw: last.stop },
    usage: {
      inputTokens: { total: stats.promptTokens, noCache: stats.promptTokens - reused, cacheRead: reused, cacheWrite: undefined },
      outputTokens: { total: stats.tokens, text: undefined, reasoning: undefined },
      raw: { promptTokens: stats.promptTokens, heldTokens: held, prefixTokens: stats.prefixTokens, tokens: stats.tokens },
    },
    providerMetadata: { [PROVIDER]: { stop: last.stop, forwardPasses: stats.forwardPasses, drafted: stats.drafted, accepted: stats.accepted, seconds: stats.seconds } },
  };
}

/** A model's settings, checked against the `known` ones; their modelId, else the model's general.architecture. */
function modelIdOf(where, llama, settings, known) {
  if (settings === null || typeof settings !== 'object') throw new TypeError(`${where}: settings must be an object (got ${shown(settings)})`);
  checkKeys(where, settings, known, 'settings');
  if (settings.modelId !== undefined && typeof settings.modelId !== 'string') throw new TypeError(`${where}: settings.modelId must be a string (got ${shown(settings.modelId)})`);
  return settings.modelId ?? llama.config.architecture ?? PROVIDER;
}

/**
 * The SDK's call options as Chat's: { messages (ConversationMessage[]),
 * generate (reply()'s options), warnings (settings not taken) }.
 */
function callOf(where, options) {
  if (options === null || typeof options !== 'object') throw new TypeError(`${where}: options must be an object (got ${shown(options)})`);
  const warnings = [];
  const generate = {};
  const set = (key, value) => { if (value !== undefined && value !== null) generate[key] = value; };
  set('maxTokens', options.maxOutputTokens);
  set('temperature', options.temperature);
  set('topK', options.topK);
  set('topP', options.topP);
  set('seed', options.seed);
  set('signal', options.abortSignal);
  if (options.stopSequences?.length) generate.stop = options.stopSequences;
  for (const key of ['presencePenalty', 'frequencyPenalty']) {
    if (options[key] !== undefined && options[key] !== 0) warnings.push({ type: 'unsupported', feature: key, details: "the sampler has llama.cpp's repeat penalty instead: providerOptions['kvcache-wasm'].repeatPenalty" });
  }
  if (options.reasoning !== undefined && options.reasoning !== 'provider-default') {
    warnings.push({ type: 'unsupported', feature: 'reasoning', details: 'a reasoning effort is not set through the provider; the chat template decides whether the model thinks' });
  }
  const extra = options.providerOptions?.[PROVIDER];
  if (extra !== undefined) {
    checkKeys(where, extra, PROVIDER_OPTIONS, `providerOptions['${PROVIDER}']`);
    Object.assign(generate, extra);
  }
  const format = options.responseFormat;
  if (format?.type === 'json') generate.responseFormat = format.schema ? { type: 'json_schema', schema: format.schema } : { type: 'json_object' };
  else if (format !== undefined && format.type !== 'text') throw new TypeError(`${where}: responseFormat must be { type: 'text' } or { type: 'json', schema } (got ${shown(format)})`);
  const functions = [];
  for (const tool of options.tools ?? []) {
    if (tool.type === 'function') functions.push({ name: tool.name, ...(tool.description === undefined ? {} : { description: tool.description }), parameters: tool.inputSchema });
    else warnings.push({ type: 'unsupported', feature: `provider-defined tool ${tool.id ?? tool.name}`, details: 'this provider has no tools of its own' });
  }
  if (functions.length > 0) {
    generate.tools = functions;
    const choice = options.toolChoice;
    if (choice !== undefined) generate.toolChoice = choice.type === 'tool' ? { type: 'function', function: { name: choice.toolName } } : choice.type;
    if (generate.responseFormat && generate.toolChoice !== 'none') {
      throw unsupported('responseFormat with tools', `${where}: a reply constrained to JSON cannot also be constrained to tool calls: give responseFormat or tools, or toolChoice 'none'`);
    }
  }
  return { messages: messagesOf(where, options.prompt), warnings, generate };
}

// The SDK's prompt as a conversation: system, user (text, images), assistant (text, reasoning, tool calls), tool (results).
function messagesOf(where, prompt) {
  if (!Array.isArray(prompt)) throw new TypeError(`${where}: options.prompt must be an array of messages (got ${shown(prompt)})`);
  const messages = [];
  prompt.forEach((m, i) => {
    const at = `options.prompt[${i}]`;
    if (m?.role === 'system') {
      messages.push({ role: 'system', content: m.content });
    } else if (m?.role === 'user') {
      const parts = m.content.map((part, j) => userPart(where, `${at}.content[${j}]`, part));
      messages.push({ role: 'user', content: parts.every((p) => p.type === 'text') ? parts.map((p) => p.text).join('\n') : parts });
    } else if (m?.role === 'assistant') {
      const message = { role: 'assistant', content: '' };
      const calls = [];
      for (const [j, part] of m.content.entries()) {
        if (part.type === 'text') message.content += part.text;
        else if (part.type === 'reasoning') message.reasoning_content = (message.reasoning_content ?? '') + part.text;
        else if (part.type === 'tool-call') calls.push({ id: part.toolCallId, type: 'function', function: { name: part.toolName, arguments: JSON.stringify(part.input ?? {}) } });
        else throw unsupported(`assistant ${part.type} parts`, `${where}: ${at}.content[${j}]: an assistant's ${part.type} part is not taken (text, reasoning and tool calls are)`);
      }
      if (calls.length > 0) message.tool_calls = calls;
      messages.push(message);
    } else if (m?.role === 'tool') {
      for (const part of m.content) {
        if (part.type !== 'tool-result') continue; // approvals are for tools a provider runs: this one runs none
        messages.push({ role: 'tool', tool_call_id: part.toolCallId, name: part.toolName, content: resultText(where, part.output) });
      }
    } else {
      throw new TypeError(`${where}: ${at} must be a system, user, assistant or tool message (got ${shown(m)})`);
    }
  });
  return messages;
}

// A user's part as Chat's: text, or an image (bytes, a data: URL of base64 text, or a URL the runtime fetches).
function userPart(where, at, part) {
  if (part.type === 'text') return { type: 'text', text: part.text };
  const image = part.type === 'file' && (part.mediaType === 'image' || part.mediaType?.startsWith('image/'));
  if (!image) throw unsupported(`${part.mediaType ?? part.type} files`, `${where}: ${at}: a ${part.mediaType ?? part.type} file is not taken: only images (with a model loaded with its projector)`);
  const { data } = part;
  if (data.type === 'url') return { type: 'image', image: String(data.url) };
  if (data.type === 'data' && typeof data.data === 'string') return { type: 'image', image: `data:${part.mediaType.includes('/') ? part.mediaType : 'image/*'};base64,${data.data}` };
  if (data.type === 'data') return { type: 'image', image: data.data };
  throw unsupported(`${data.type} file data`, `${where}: ${at}: an image given as ${data.type} is not taken (bytes, base64 or a URL are)`);
}

// A tool's output as the text a tool message holds.
function resultText(where, output) {
  switch (output.type) {
    case 'text':
    case 'error-text':
      return output.value;
    case 'json':
    case 'error-json':
      return JSON.stringify(output.value);
    case 'execution-denied':
      return output.reason ?? 'The tool was not run: its execution was denied.';
    case 'content':
      return output.value.map((part) => {
        if (part.type === 'text') return part.text;
        throw unsupported(`tool result ${part.type} parts`, `${where}: a tool result's ${part.type} part is not taken (its text parts are)`);
      }).join('\n');
    default:
      throw new TypeError(`${where}: a tool result's output of type ${shown(output.type)} is not one of the SDK's`);
  }
}

/**
 * An EmbeddingModelV4 over a Llama or a RemoteLlama whose file embeds
 * (pooling mean, cls or last): what provider.embeddingModel(model)
 * returns, for the SDK's embed and embedMany. A vector per value, as the
 * model's embed() gives it (normalised; `dimensions`, or
 * providerOptions['kvcache-wasm'].dimensions, its first values, normalised
 * after), and usage in the tokens embed() encoded.
 */
export class KvcacheEmbeddingModel {
  specificationVersion = 'v4';
  provider = PROVIDER;
  // No limit: the runner groups a call's texts into passes of the weights by their tokens itself (up to
  // 512 a pass), so a count per call would only cut a pass short at each call's end; no request's size bounds it.
  maxEmbeddingsPerCall = Infinity;
  // One model, one heap: calls at once would only take turns between their passes.
  supportsParallelCalls = false;
  #client;

  constructor(llama, settings = {}) {
    this.modelId = pooledModelId(llama, settings, {
      modelType: 'embeddingModel', method: 'embed', what: 'embedding model', why: ({ pooling }) => ({
        none: 'its file gives no pooling type (it generates; an embedding model\'s file says mean, cls or last)',
        rank: 'it is a reranker (pooling rank), which scores documents: rerankingModel() takes it',
      })[pooling],
    });
    // OpenAI's shape over embed(), for its count of the tokens embed() encodes (a RemoteLlama's in its worker).
    this.#client = embeddings(llama);
  }

  async doEmbed(options) {
    const where = 'kvcache: doEmbed';
    checkObject(where, 'options', options);
    const { values, abortSignal } = options;
    if (!Array.isArray(values)) throw new TypeError(`${where}: options.values must be an array of strings (got ${shown(values)})`);
    // embedMany of no values: no vectors (embed() refuses an empty list).
    if (values.length === 0) return { embeddings: [], usage: { tokens: 0 }, warnings: [] };
    const { data, usage } = await this.#client.embeddings.create({ input: values, dimensions: dimensionsOf(where, options), signal: abortSignal });
    return { embeddings: data.map(({ embedding }) => embedding), usage: { tokens: usage.prompt_tokens }, warnings: [] };
  }
}

/**
 * The id of a model of `modelType` (the SDK's name: 'embeddingModel') over
 * `llama`, a Llama or a RemoteLlama (which has `method`): settings' modelId,
 * else its architecture. A file for which `why(config)` gives a reason is
 * no `what`: the SDK's NoSuchModelError, saying so.
 */
function pooledModelId(llama, settings, { modelType, method, what, why }) {
  const where = `kvcache.${modelType}`;
  if (typeof llama?.[method] !== 'function' || !llama.config) {
    throw new TypeError(`${where}: model must be a Llama (kvcache-wasm/llama) or a RemoteLlama (kvcache-wasm/worker) (got ${shown(llama)})`);
  }
  const modelId = modelIdOf(where, llama, settings, ['modelId']);
  const reason = why(llama.config);
  if (reason) throw sdkError('NoSuchModelError', `kvcache: ${shown(modelId)} is no ${what}: ${reason}`, { modelId, modelType });
  return modelId;
}

// The dimensions a call asks for: the SDK's own option, or providerOptions['kvcache-wasm'].dimensions, as code written
// for providers that took them there passes them.
function dimensionsOf(where, options) {
  const extra = options.providerOptions?.[PROVIDER] ?? {};
  checkKeys(where, extra, ['dimensions'], `providerOptions['${PROVIDER}']`);
  if (options.dimensions !== undefined && extra.dimensions !== undefined && options.dimensions !== extra.dimensions) {
    throw new TypeError(`${where}: dimensions (${shown(options.dimensions)}) and providerOptions['${PROVIDER}'].dimensions (${shown(extra.dimensions)}) disagree: give one`);
  }
  return options.dimensions ?? extra.dimensions;
}

/**
 * A RerankingModelV4 over a Llama or a RemoteLlama whose file reranks
 * (a classification head, cls.output: pooling rank, or a BERT
 * cross-encoder's): what provider.rerankingModel(model) returns, for the
 * SDK's rerank. The ranking is the model's rerank(): best first, cut to
 * topN, each document's index and score (Qwen3-Reranker's: the
 * probability of "yes"). providerOptions['kvcache-wasm'].truncate cuts a
 * query and document longer than the context to it.
 */
export class KvcacheRerankingModel {
  specificationVersion = 'v4';
  provider = PROVIDER;
  #llama;

  constructor(llama, settings = {}) {
    this.modelId = pooledModelId(llama, settings, {
      // A classification head scores (a BERT cross-encoder's file may say no pooling type).
      modelType: 'rerankingModel', method: 'rerank', what: 'reranker', why: ({ pooling, rankOutputs }) => rankOutputs > 0 ? undefined
        : pooling === 'none' ? 'its file has no classification head (it generates; a reranker\'s scores a query\'s documents: cls.output)'
          : `it is an embedding model (pooling ${pooling}), which gives vectors: embeddingModel() takes it`,
    });
    this.#llama = llama;
  }

  async doRerank(options) {
    const where = 'kvcache: doRerank';
    checkObject(where, 'options', options);
    const { documents, query, topN, abortSignal } = options;
    const extra = options.providerOptions?.[PROVIDER] ?? {};
    checkKeys(where, extra, ['truncate'], `providerOptions['${PROVIDER}']`);
    if ((documents?.type !== 'text' && documents?.type !== 'object') || !Array.isArray(documents.values)) {
      throw new TypeError(`${where}: options.documents must be { type: 'text' or 'object', values: [...] } (got ${shown(documents)})`);
    }
    // The specification's documents are texts or JSON objects: an object goes to the model as its JSON text.
    const texts = documents.type === 'text' ? documents.values : documents.values.map((value) => JSON.stringify(value));
    // The SDK's topN is a limit: more than there are documents is all of them.
    const { ranking } = await this.#llama.rerank(query, texts, { topN: Math.min(topN ?? Infinity, texts.length), truncate: extra.truncate, signal: abortSignal });
    return { ranking: ranking.map(({ index, score }) => ({ index, relevanceScore: score })), warnings: [] };
  }
}

/**
 * The default provider: kvcache(llama) is a language model over a loaded
 * Llama or RemoteLlama. (Last: the provider makes the classes above, which
 * exist only once their declarations have run.)
 */
export const kvcache = createKvcache();

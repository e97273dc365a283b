// The model runner in a dedicated worker (worker.js starts it): the package,
// the models, their prefix caches and sessions live here, and the page talks
// to them by messages, so that no forward pass ever runs on the page's
// thread. One message a call: { id, op, args }; answered { id, result } or
// { id, error }; a stream sends { id, piece } ... before its { id, result },
// a load { id, progress }; { id, op: 'abort' } aborts call `id`. Objects
// are named by handles. Chat templates render on the page (kvcache-wasm/chat),
// so this module imports nothing but the package's own files: it runs
// unbundled too, where a worker has no import map.
import * as kv from './index.js';
import { Llama } from './model/llama.js';
import { PrefixCache } from './cache/prefix.js';
import { ModelStore } from './store/store.js';
import { workerConstructionWatch } from './runtime/threads.js';
import { setGrammarEngine } from './model/grammar.js';

const objects = new Map(); // handle -> { kind, object }
const calls = new Map(); // call id -> the AbortController of a load or a stream
let nextHandle = 1;

function keep(kind, object) {
  const handle = nextHandle++;
  objects.set(handle, { kind, object });
  return handle;
}

function target(kind, handle) {
  const entry = objects.get(handle);
  if (!entry || entry.kind !== kind) throw new TypeError(`the ${kind} was freed`);
  return entry.object;
}

/** What the page sees of a model: its handle, configuration, its projector's and what a chat template reads. */
function describeModel(handle, llama) {
  const { tokenizer, projector } = llama;
  return {
    handle,
    config: llama.config,
    projector: projector && { config: projector.config },
    tokenizer: {
      vocabSize: tokenizer.vocabSize, bosId: tokenizer.bosId, eosId: tokenizer.eosId, eogIds: [...tokenizer.eogIds],
      bosToken: tokenizer.bosToken, eosToken: tokenizer.eosToken, chatTemplate: tokenizer.chatTemplate,
    },
  };
}

/** Session options from the page: a prefix cache goes by its handle. */
function sessionOptions(options = {}) {
  const { prefixCache, ...rest } = options;
  return prefixCache === undefined ? rest : { ...rest, prefixCache: target('prefixCache', prefixCache) };
}

// An error as a message can carry it (the page makes the same kind again).
function errorOf(error) {
  return { name: error?.name ?? 'Error', message: error?.message ?? String(error), code: error?.code };
}

const OPS = {
  async init(options, signal, id) {
    // The page sent locateFile's answers, by file name; it hears when a pool
    // worker is being constructed (threads.js says why).
    const { locateFile: located, grammarEngine, ...initOptions } = options;
    if (grammarEngine !== undefined) setGrammarEngine(grammarEngine);
    await kv.init({
      ...initOptions,
      ...(located && { locateFile: (name) => located[name] }),
      [workerConstructionWatch]: (constructing) => postMessage({ id, progress: { constructingThread: constructing } }),
    });
    // decodesImages: whether an encoded image (a Blob, bytes, a URL) can be sent here to be decoded (images.js).
    return { kernelInfo: kv.kernelInfo(), threadInfo: kv.threadInfo(),
      decodesImages: typeof createImageBitmap === 'function' && typeof OffscreenCanvas === 'function' };
  },
  async load(source, options, signal, id) {
    const store = options.store && await ModelStore.open(options.store);
    const llama = await Llama.load(source, { ...options, ...(store && { store }), signal, onProgress: (progress) => postMessage({ id, progress }) });
    return describeModel(keep('model', llama), llama);
  },
  embed: (model, texts, options, signal, id) =>
    target('model', model).embed(texts, { ...options, signal, onProgress: (progress) => postMessage({ id, progress }) }),
  rerank: (model, query, documents, options, signal, id) =>
    target('model', model).rerank(query, documents, { ...options, signal, onProgress: (progress) => postMessage({ id, progress }) }),
  encode: (model, text, options) => target('model', model).tokenizer.encode(text, options),
  decode: (model, ids, options) => target('model', model).tokenizer.decode(ids, options),
  memoryBytes: (model) => target('model', model).memoryBytes,
  // An image as the page sent it (a Blob, an ImageBitmap, a URL, encoded bytes or RGBA pixels), decoded here when it must be.
  prepareImage: (model, image) => target('model', model).prepareImage(image),
  imageTokenCount: (model, size) => target('model', model).imageTokenCount(size),
  digest: (model) => target('model', model).digest,
  prefixCache: (options) => keep('prefixCache', new PrefixCache(options)),
  session: (model, options) => keep('session', target('model', model).session(sessionOptions(options))),
  restoreSession: (model, bytes, options) => keep('session', target('model', model).restoreSession(bytes, sessionOptions(options))),
  tokens: (session) => target('session', session).tokens,
  cacheStats(session) {
    const { cache } = target('session', session);
    // Window layers (gemma3's) apart: the rows the most-filled one holds, and how many there are.
    const windows = Array.from({ length: cache.numLayers }, (_, i) => cache.layer(i)).filter((layer) => layer.kind === 'window');
    return { nextPosition: cache.nextPosition, rows: cache.rows, memoryBytes: cache.memoryBytes, capacityBytes: cache.capacityBytes,
      windowLayers: windows.length, windowRows: windows.reduce((most, layer) => Math.max(most, layer.seqLen), 0) };
  },
  save: (session) => target('session', session).save(),
  whenStored: (session) => target('session', session).whenStored(),
  clone: (session) => keep('session', target('session', session).clone()),
  free(kind, handle) {
    const entry = objects.get(handle);
    if (entry?.kind !== kind) return;
    entry.object.free();
    objects.delete(handle);
  },
};

// Calls that report progress and that an abort stops: they take the call's signal and id last.
const CONTROLLED = new Set(['init', 'load', 'embed', 'rerank']);

// What of a result moves to the page rather than being copied: saved bytes, embed()'s vectors (each its own buffer).
function transferable(result) {
  if (result instanceof Uint8Array) return [result.buffer];
  if (Array.isArray(result) && result.length > 0 && result.every((v) => v instanceof Float32Array)) return result.map((v) => v.buffer);
  return [];
}

// Calls that stream pieces back, and run with an AbortController of their own.
const STREAMS = {
  generate: (session, prompt, options, signal) => target('session', session).generate(prompt, { ...options, signal }),
  respond: (session, conversation, options, signal) => target('session', session).respond(conversation, { ...options, signal }),
};

globalThis.onmessage = async ({ data }) => {
  const { id, op, args = [] } = data;
  if (op === 'abort') return calls.get(id)?.abort();
  const controller = new AbortController();
  calls.set(id, controller);
  try {
    let result;
    if (STREAMS[op]) {
      for await (const piece of STREAMS[op](...args, controller.signal)) postMessage({ id, piece });
    } else if (CONTROLLED.has(op)) {
      result = await OPS[op](...args, controller.signal, id);
    } else if (OPS[op]) {
      result = await OPS[op](...args);
    } else {
      throw new TypeError(`no operation ${op}`);
    }
    postMessage({ id, result }, transferable(result));
  } catch (error) {
    postMessage({ id, error: errorOf(error) });
  } finally {
    calls.delete(id);
  }
};

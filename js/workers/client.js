// kvcache-wasm/worker: the model runner in a dedicated worker, its API made
// asynchronous for the page. The worker (llama-worker.js) holds the
// package, the models and their caches; the page's thread sends calls and
// receives pieces of text, so no forward pass ever blocks it. A Chat
// (kvcache-wasm/chat) runs on a RemoteSession as on a LlamaSession: its
// template renders here, the tokens' work happens in the worker.
//
//   import { LlamaWorker } from 'kvcache-wasm/worker';
//   import { Chat } from 'kvcache-wasm/chat';
//   const worker = new LlamaWorker();
//   const model = await worker.load('/models/SmolLM2-135M-Instruct-Q8_0.gguf', { onProgress });
//   const chat = new Chat(await model.session(), { system: 'You are concise.' });
//   for await (const piece of chat.send('Hello!', { signal })) output.textContent += piece.text;
import { GgufError, KvCacheError, checkObject, shown } from '../runtime/checks.js';
import { RUNTIME_FILES, locate } from '../runtime/files.js';
import { checkResponse } from '../store/sources.js';
import { ModelStore } from '../store/store.js';
import { isHfName } from '../store/hf.js';
import { checkKeys } from '../runtime/options.js';
import { GRAMMAR_ENGINE } from '../model/grammar.js';
import { imagePixels } from '../model/images.js';

/** Where this page's import map sends `specifier` (undefined: it has none for it, or the runtime has no import.meta.resolve). */
function pageResolved(specifier) {
  try {
    const url = import.meta.resolve?.(specifier);
    return typeof url === 'string' && /^(https?|file|blob):/.test(url) ? url : undefined;
  } catch {
    return undefined;
  }
}

const ERRORS = { TypeError, RangeError, KvCacheError, GgufError };

// The error the worker reported, as the kind it was.
function errorOf({ name, message, code }) {
  if (name === 'AbortError') return new DOMException(message, 'AbortError');
  const Kind = ERRORS[name] ?? Error;
  return Kind === KvCacheError ? new KvCacheError(message, code) : new Kind(message);
}

/** The bytes to send, and what to transfer: a copy of a view (the caller keeps its own). */
function outgoing(bytes) {
  const copy = ArrayBuffer.isView(bytes) ? new Uint8Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)) : bytes;
  return { value: copy, transfer: copy instanceof Uint8Array ? [copy.buffer] : [] };
}

/**
 * A file to load (a model or its projector) as the worker takes it: a URL
 * resolved against the page, a split model's parts, bytes copied, a
 * Response's body (its status and headers checked here), a ReadableStream
 * transferred; a Blob goes as it is (cloning one shares its bytes).
 */
function outgoingSource(where, source) {
  if (typeof Response !== 'undefined' && source instanceof Response) {
    checkResponse(where, source);
    source = source.body;
  }
  // A Hugging Face name (and the projector 'auto' beside one) is resolved in the worker.
  const href = (url) => (isHfName(url) ? url : new URL(url, globalThis.location?.href).href);
  if (typeof source === 'string' || source instanceof URL) return { value: href(source), transfer: [] };
  if (Array.isArray(source)) return { value: source.map((part) => (typeof part === 'string' || part instanceof URL ? href(part) : part)), transfer: [] };
  if (ArrayBuffer.isView(source) || source instanceof ArrayBuffer) return outgoing(source);
  if (typeof ReadableStream !== 'undefined' && source instanceof ReadableStream) return { value: source, transfer: [source] };
  return { value: source, transfer: [] };
}

/** Pixels decoded on this thread, as a buffer of their own to transfer: `given`'s own pixels are copied (the app keeps them). */
function outgoingPixels({ width, height, data }, given) {
  const whole = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && data.buffer instanceof ArrayBuffer;
  const own = whole && data.buffer !== given?.data?.buffer;
  const bytes = own ? data : new Uint8Array(data);
  return { value: { width, height, data: bytes }, transfer: [bytes.buffer] };
}

const isBlob = (value) => typeof Blob !== 'undefined' && value instanceof Blob;
const isBitmap = (value) => typeof ImageBitmap !== 'undefined' && value instanceof ImageBitmap;

/**
 * An image as the worker takes it, and what to transfer. Where the worker
 * decodes (a browser's has createImageBitmap and OffscreenCanvas) and no
 * decodeImage is given, an encoded image goes as it is: a Blob or File (its
 * bytes shared, not copied), an ImageBitmap (transferred: closed here), a
 * URL (resolved against the page), bytes (a copy transferred). Anything
 * else -- an image element, a canvas, ImageData, pixels, or any image when
 * the worker cannot decode -- is decoded here (imagePixels) and its RGBA
 * buffer transferred.
 */
async function outgoingImage(where, image, { decodeImage, workerDecodes }) {
  if (decodeImage === undefined && workerDecodes) {
    if (isBlob(image)) return { value: image, transfer: [] };
    if (isBitmap(image)) return { value: image, transfer: [image] };
    if (typeof image === 'string' || image instanceof URL) return { value: new URL(image, globalThis.location?.href).href, transfer: [] };
    if (image instanceof ArrayBuffer || image instanceof Uint8Array) return outgoing(image);
  }
  return outgoingPixels(await imagePixels(where, image, { decodeImage }), image);
}

// LlamaWorker's answer to whether its worker decodes images (for RemoteLlama#prepareImage).
const workerDecodesImages = Symbol('workerDecodesImages');

// How long constructing a pool thread in the worker may take (a few ms
// here, a second on a loaded machine) before the worker counts as stuck in
// it, and how many workers a LlamaWorker starts before it gives up.
const CONSTRUCTION_TIMEOUT_MS = 10000;
const STARTS = 3;
const STUCK = Symbol('a pool thread\'s construction did not return');

export class LlamaWorker {
  #worker;
  #calls = new Map(); // id -> { resolve, reject, piece?, progress? }
  #next = 1;
  #failed = null;
  #ready = null;
  #decodesImages = false;

  /**
   * Starts the worker: the package's own (`new Worker(new URL(
   * './llama-worker.js', import.meta.url), { type: 'module' })`, which
   * bundlers emit), or options.worker, one the app starts itself from the
   * package's js/llama-worker.js (esbuild, which does not follow workers:
   * the README says how): a function that starts one (called again should
   * a start be stuck), or the Worker. options.init: init()'s options in the worker
   * (threads, isa, maxMemory, wasm as a URL, locateFile), sent before the
   * first call; locateFile is asked here for each file the package loads
   * (RUNTIME_FILES), and the worker is sent its answers as URLs;
   * grammarEngine: where the worker imports the structured-output engine
   * from (setGrammarEngine), by default where this page's import map
   * resolves it (a worker sees none).
   */
  constructor(options = {}) {
    const where = 'new LlamaWorker';
    checkObject(where, 'options', options);
    checkKeys(where, options, ['worker', 'init']);
    const { worker, init = {} } = options;
    if (worker !== undefined && typeof worker !== 'function' && typeof worker?.postMessage !== 'function') {
      throw new TypeError(`${where}: options.worker must be a Worker or a function that starts one (got ${shown(worker)})`);
    }
    checkObject(where, 'options.init', init);
    const { locateFile } = init;
    if (locateFile !== undefined && typeof locateFile !== 'function') {
      throw new TypeError(`${where}: options.init.locateFile must be a function (name) => URL or string (got ${shown(locateFile)})`);
    }
    const located = locateFile && Object.fromEntries(Object.values(RUNTIME_FILES).map((name) => [name, locate(init, name).href]));
    const { grammarEngine = pageResolved(GRAMMAR_ENGINE) } = init;
    if (grammarEngine !== undefined && !(grammarEngine instanceof URL) && typeof grammarEngine !== 'string') {
      throw new TypeError(`${where}: options.init.grammarEngine must be a URL or a string (got ${shown(grammarEngine)})`);
    }
    this.#ready = this.#start(worker, [{ ...init, ...(locateFile && { locateFile: located }), ...(grammarEngine !== undefined && { grammarEngine: String(grammarEngine) }) }]);
  }

  /**
   * Starts the worker and its init. The worker tells when it constructs a
   * thread of its pool and when that returned: Firefox at times never
   * returns from it (js/threads.js), so a construction that has not
   * returned in CONSTRUCTION_TIMEOUT_MS ends that worker and, unless the
   * app passed a Worker (not a function that starts one), starts another
   * (up to STARTS in all).
   */
  async #start(given, args) {
    const startWorker = typeof given === 'function' ? given
      : given ? () => given
        : () => new Worker(new URL('../llama-worker.js', import.meta.url), { type: 'module', name: 'kvcache-wasm' });
    const once = given !== undefined && typeof given !== 'function';
    for (let start = 1; ; start++) {
      const worker = startWorker();
      if (typeof worker?.postMessage !== 'function') {
        this.#fail(new TypeError(`new LlamaWorker: options.worker() must return a Worker (got ${shown(worker)})`));
        throw this.#failed;
      }
      this.#attach(worker);
      let timer;
      let stuck;
      const constructionStuck = new Promise((resolve) => { stuck = () => resolve(STUCK); });
      const init = this.#send('init', args, {
        progress: ({ constructingThread }) => {
          clearTimeout(timer);
          if (constructingThread) timer = setTimeout(stuck, CONSTRUCTION_TIMEOUT_MS);
        },
      });
      const result = await Promise.race([init.done, constructionStuck]).finally(() => clearTimeout(timer));
      if (result !== STUCK) {
        const { decodesImages, ...info } = result;
        this.#decodesImages = decodesImages === true;
        return info;
      }
      this.#calls.delete(init.id);
      this.#worker.terminate();
      if (once || start === STARTS) {
        const error = new Error(`the kvcache-wasm worker did not start: constructing a thread of its pool did not return in ${CONSTRUCTION_TIMEOUT_MS / 1000} s${once ? '' : ` in any of ${STARTS} workers`} (Firefox at times never returns from a Worker constructed in a worker; ${once ? 'options.worker as a function that starts one is called again then; ' : ''}init({ threads: 1 }) constructs none)`);
        this.#fail(error);
        throw error;
      }
    }
  }

  #attach(worker) {
    this.#worker = worker;
    worker.onmessage = ({ data }) => this.#receive(data);
    worker.onerror = (event) => {
      event.preventDefault?.();
      this.#fail(new Error(`the kvcache-wasm worker failed: ${event.message || 'its script did not load'}`));
    };
  }

  #fail(error) {
    this.#failed = error;
    for (const call of this.#calls.values()) call.reject(error);
    this.#calls.clear();
  }

  #receive({ id, result, error, piece, progress }) {
    const call = this.#calls.get(id);
    if (!call) return;
    if (progress) return call.progress?.(progress);
    if (piece) return call.piece(piece);
    this.#calls.delete(id);
    if (error) call.reject(errorOf(error));
    else call.resolve(result);
  }

  #send(op, args, handlers = {}, transfer = []) {
    const id = this.#next++;
    const done = new Promise((resolve, reject) => {
      if (this.#failed) return reject(this.#failed);
      this.#calls.set(id, { resolve, reject, ...handlers });
      this.#worker.postMessage({ id, op, args }, transfer);
    });
    return { id, done };
  }

  /** What init() gave in the worker: { kernelInfo, threadInfo }. */
  ready() {
    return this.#ready;
  }

  /** Whether the started worker decodes encoded images itself (createImageBitmap and OffscreenCanvas there). */
  async [workerDecodesImages]() {
    await this.#ready;
    return this.#decodesImages;
  }

  /** Calls `op` in the worker (after its init); resolves to its result. */
  async call(op, args, transfer = []) {
    await this.#ready;
    return this.#send(op, args, {}, transfer).done;
  }

  /**
   * A call whose pieces stream back, as an async iterator: `signal`, or a
   * loop's break, aborts it in the worker (its last piece then says
   * 'abort').
   */
  stream(op, args, signal) {
    const queue = [];
    let wake = null;
    let call = null;
    let finished = false;
    const start = this.#ready.then(() => {
      call = this.#send(op, args, {
        piece: (piece) => {
          queue.push(piece);
          wake?.();
        },
      });
      call.done.then(() => { finished = true; wake?.(); }, () => { finished = true; wake?.(); });
      if (signal?.aborted) this.#abort(call.id);
    });
    const onAbort = () => call && this.#abort(call.id);
    signal?.addEventListener('abort', onAbort, { once: true });
    const worker = this;
    return {
      [Symbol.asyncIterator]() {
        return this;
      },
      async next() {
        await start;
        while (queue.length === 0 && !finished) await new Promise((resolve) => { wake = resolve; });
        wake = null;
        if (queue.length > 0) return { value: queue.shift(), done: false };
        signal?.removeEventListener('abort', onAbort);
        await call.done; // rejects with the worker's error
        return { value: undefined, done: true };
      },
      async return() {
        await start;
        if (!finished) worker.#abort(call.id);
        signal?.removeEventListener('abort', onAbort);
        await call.done.catch(() => {});
        return { value: undefined, done: true };
      },
    };
  }

  #abort(id) {
    this.#worker.postMessage({ id, op: 'abort' });
  }

  /**
   * Llama.load in the worker: a URL (relative to the page), bytes (a copy
   * is transferred), a Blob or File, a Response or a ReadableStream
   * (transferred); onProgress, signal and the rest of Llama.load's options
   * -- options.projector, the vision encoder's file (an mmproj GGUF), any
   * of the same sources, loaded beside it in the worker. Resolves to a
   * RemoteLlama. A response that holds no model (an HTTP error, an HTML
   * page) is refused as Llama.load refuses it.
   */
  async load(source, options = {}) {
    const where = 'LlamaWorker.load';
    checkObject(where, 'options', options);
    const { onProgress, signal, store, ...rest } = options;
    // A store goes as the options that open it again in the worker (the same files).
    if (store !== undefined) {
      if (!(store instanceof ModelStore)) throw new TypeError(`${where}: options.store must be a ModelStore (ModelStore.open) (got ${shown(store)})`);
      rest.store = store.openOptions;
    }
    if (onProgress !== undefined && typeof onProgress !== 'function') throw new TypeError(`${where}: options.onProgress must be a function (got ${shown(onProgress)})`);
    // A reader's functions cannot be cloned to the worker: the worker's model keeps its own table.
    if (typeof rest.perLayerEmbeddings === 'object' && rest.perLayerEmbeddings !== null) {
      throw new TypeError(`${where}: options.perLayerEmbeddings must be 'outside' or 'heap' for a model in a worker (a reader's functions cannot go to it)`);
    }
    if (signal?.aborted) throw signal.reason ?? new DOMException('the load was aborted', 'AbortError');
    if (rest.huggingFace?.endpoint instanceof URL) rest.huggingFace = { ...rest.huggingFace, endpoint: rest.huggingFace.endpoint.href }; // a URL does not clone
    const model = outgoingSource(where, source);
    const transfer = model.transfer;
    if (rest.projector !== undefined && rest.projector !== 'auto') { // 'auto': found beside an hf: model, in the worker
      const projector = outgoingSource(where, rest.projector);
      rest.projector = projector.value;
      transfer.push(...projector.transfer);
    }
    const llama = new RemoteLlama(this, await this.controlledCall('load', [model.value, rest], { onProgress, signal }, transfer));
    llama.store = store ?? null;
    return llama;
  }

  /** call() of an operation that reports progress (to `onProgress`) and that `signal` aborts in the worker. */
  async controlledCall(op, args, { onProgress, signal }, transfer = []) {
    await this.#ready;
    const { id, done } = this.#send(op, args, { progress: onProgress }, transfer);
    const onAbort = () => this.#abort(id);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await done;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** A PrefixCache in the worker (options as PrefixCache's), for its sessions to share. */
  async prefixCache(options) {
    return new RemotePrefixCache(this, await this.call('prefixCache', [options]));
  }

  /** Stops the worker: every model and cache in it goes. */
  terminate() {
    this.#worker.terminate();
    this.#fail(new Error('the kvcache-wasm worker was terminated'));
  }
}

/** A prefix cache in the worker: passed as a session's options.prefixCache. */
export class RemotePrefixCache {
  #worker;

  constructor(worker, handle) {
    this.#worker = worker;
    this.handle = handle;
  }

  free() {
    return this.#worker.call('free', ['prefixCache', this.handle]);
  }
}

/** Session options for the worker: a prefix cache goes by its handle. */
function remoteSessionOptions(where, options) {
  checkObject(where, 'options', options);
  if (options.prefixCache === undefined) return options;
  if (!(options.prefixCache instanceof RemotePrefixCache)) throw new TypeError(`${where}: options.prefixCache must be a RemotePrefixCache (LlamaWorker#prefixCache)`);
  return { ...options, prefixCache: options.prefixCache.handle };
}

/**
 * A model in the worker: Llama's API, made asynchronous. `config` is the
 * model's; `tokenizer` what a chat template reads of its vocabulary
 * ({ vocabSize, bosId, eosId, eogIds, bosToken, eosToken, chatTemplate });
 * `projector` its vision encoder's { config: { type, outputDim } }, or null.
 */
export class RemoteLlama {
  #worker;
  #handle;
  /** The ModelStore (on this thread) of the store the worker loaded the model through, or null. */
  store = null;

  constructor(worker, { handle, config, tokenizer, projector }) {
    this.#worker = worker;
    this.#handle = handle;
    this.config = config;
    this.tokenizer = Object.freeze({ ...tokenizer, eogIds: new Set(tokenizer.eogIds) });
    this.projector = projector ? Object.freeze({ config: Object.freeze(projector.config) }) : null;
  }

  // Refused on the page, before any image goes over: the worker's model would say the same.
  #checkProjector(where) {
    if (!this.projector) throw new TypeError(`${where}: the model was loaded without a projector (LlamaWorker.load's options.projector), so it takes no images`);
  }

  /**
   * Llama#prepareImage in the worker: the image goes over without a copy
   * where it can (outgoingImage: a Blob or an ImageBitmap, decoded in a
   * browser's worker; else decoded here, with options.decodeImage where this
   * runtime cannot decode, and its pixels transferred). Resolves to {
   * digest, width, height, tokens, imageTokens }, whose tokens stand for
   * the image in this model's sessions (the worker keeps its rows), as a
   * local Llama's do: Chat and completions() over a RemoteSession take
   * images as over a LlamaSession.
   */
  async prepareImage(image, options = {}) {
    const where = 'RemoteLlama.prepareImage';
    checkObject(where, 'options', options);
    checkKeys(where, options, ['decodeImage']);
    this.#checkProjector(where);
    const { value, transfer } = await outgoingImage(where, image, { decodeImage: options.decodeImage, workerDecodes: await this.#worker[workerDecodesImages]() });
    return this.#worker.call('prepareImage', [this.#handle, value], transfer);
  }

  /** Llama#imageTokenCount in the worker: { image, markers, total } positions an image of width x height takes. */
  async imageTokenCount({ width, height } = {}) {
    this.#checkProjector('RemoteLlama.imageTokenCount');
    return this.#worker.call('imageTokenCount', [this.#handle, { width, height }]);
  }

  /** Llama#digest, computed in the worker (a promise). */
  get digest() {
    return this.#worker.call('digest', [this.#handle]);
  }

  encode(text, options) {
    return this.#worker.call('encode', [this.#handle, text, options]);
  }

  decode(ids, options) {
    return this.#worker.call('decode', [this.#handle, ids, options]);
  }

  /** { weights, scratch } */
  memoryBytes() {
    return this.#worker.call('memoryBytes', [this.#handle]);
  }

  /** Llama#embed in the worker: the vectors come back transferred. */
  async embed(texts, options = {}) {
    checkObject('RemoteLlama.embed', 'options', options);
    const { onProgress, signal, ...rest } = options;
    if (signal?.aborted) throw signal.reason ?? new DOMException('the call was aborted', 'AbortError');
    return this.#worker.controlledCall('embed', [this.#handle, texts, rest], { onProgress, signal });
  }

  /** Llama#rerank in the worker. */
  async rerank(query, documents, options = {}) {
    checkObject('RemoteLlama.rerank', 'options', options);
    const { onProgress, signal, ...rest } = options;
    if (signal?.aborted) throw signal.reason ?? new DOMException('the call was aborted', 'AbortError');
    return this.#worker.controlledCall('rerank', [this.#handle, query, documents, rest], { onProgress, signal });
  }

  /** Llama#session in the worker. */
  async session(options = {}) {
    const handle = await this.#worker.call('session', [this.#handle, remoteSessionOptions('RemoteLlama.session', options)]);
    return new RemoteSession(this.#worker, this, handle);
  }

  /** Llama#restoreSession in the worker (the bytes are copied over). */
  async restoreSession(bytes, options = {}) {
    const { value, transfer } = outgoing(bytes);
    const handle = await this.#worker.call('restoreSession', [this.#handle, value, remoteSessionOptions('RemoteLlama.restoreSession', options)], transfer);
    return new RemoteSession(this.#worker, this, handle);
  }

  free() {
    return this.#worker.call('free', ['model', this.#handle]);
  }
}

/** A session in the worker: generate() and respond() stream pieces as LlamaSession's do. */
export class RemoteSession {
  #worker;
  #handle;

  constructor(worker, llama, handle) {
    this.#worker = worker;
    this.#handle = handle;
    this.llama = llama;
  }

  generate(prompt, { signal, ...options } = {}) {
    return this.#worker.stream('generate', [this.#handle, prompt, options], signal);
  }

  respond(conversation, { signal, ...options } = {}) {
    return this.#worker.stream('respond', [this.#handle, conversation, options], signal);
  }

  /** The session's tokens (LlamaSession#tokens). */
  tokens() {
    return this.#worker.call('tokens', [this.#handle]);
  }

  /** Its cache: { nextPosition, rows, memoryBytes, capacityBytes, windowLayers, windowRows } (windowRows: what its fullest window layer holds). */
  cacheStats() {
    return this.#worker.call('cacheStats', [this.#handle]);
  }

  /** LlamaSession#clone in the worker: a second session from where this one is, its cache a copy-on-write fork. */
  async clone() {
    return new RemoteSession(this.#worker, this.llama, await this.#worker.call('clone', [this.#handle]));
  }

  /** LlamaSession#save: the session as bytes. */
  save() {
    return this.#worker.call('save', [this.#handle]);
  }

  /** LlamaSession#whenStored: resolves once the prefixes the session kept are in the store's prefix cache. */
  async whenStored() {
    await this.#worker.call('whenStored', [this.#handle]);
  }

  free() {
    return this.#worker.call('free', ['session', this.#handle]);
  }
}

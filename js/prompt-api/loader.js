// The model behind a Prompt API class (language-model.js) or a polyfill's
// backend (polyfill-backend.js): given loaded, or loaded once from where it
// is -- on this thread or in a LlamaWorker, through a ModelStore -- with its
// download reported as the Prompt API's `downloadprogress` events.
import { shown } from '../runtime/checks.js';
import { sessionTokens } from '../runtime/tokens.js';
import { Llama } from '../model/llama.js';
import { init } from '../runtime/runtime.js';
import { LlamaWorker } from '../workers/client.js';
import { ModelStore } from '../store/store.js';

/** The options a loader reads. */
export const LOADER_OPTIONS = ['model', 'projector', 'worker', 'init', 'store', 'storePrefixes', 'contextLength', 'cacheMode'];
// downloadprogress's `loaded` is a multiple of 1/0x10000 (the specification's rounding).
const PROGRESS_STEPS = 0x10000;

// ProgressEvent is a browser's; Node has Event alone.
const ProgressEventClass = typeof ProgressEvent === 'function' ? ProgressEvent : class ProgressEvent extends Event {
  constructor(type, { loaded = 0, total = 0, lengthComputable = false } = {}) {
    super(type);
    Object.defineProperties(this, { loaded: { value: loaded }, total: { value: total }, lengthComputable: { value: lengthComputable } });
  }
};

/**
 * { load(onProgress), availability(), takesImages(), contextLength } for
 * options.model (a Llama or RemoteLlama, or what Llama.load takes) and the
 * other LOADER_OPTIONS, checked. load() loads once (every caller gets the
 * same model; a failed load is tried again by the next); availability() is
 * 'available' where no download is needed (a loaded model, bytes in hand,
 * a file the store holds whole), 'downloading' while load() runs, else
 * 'downloadable'.
 */
export function modelLoader(where, options) {
  const { model, projector, worker = false, init: initOptions = {}, store = null, storePrefixes, contextLength, cacheMode } = options;
  if (model === undefined || model === null) throw new TypeError(`${where}: options.model must be a Llama, a RemoteLlama or a model's source (a URL, an hf: name, bytes, a Blob)`);
  const loadedAlready = typeof model.session === 'function' && model.tokenizer !== undefined;
  if (loadedAlready && (projector !== undefined || worker !== false || cacheMode !== undefined || storePrefixes !== undefined)) {
    throw new TypeError(`${where}: options.projector, worker, cacheMode and storePrefixes are for a model to load, and options.model is loaded`);
  }
  if (storePrefixes !== undefined && typeof storePrefixes !== 'boolean') throw new TypeError(`${where}: options.storePrefixes must be a boolean (got ${shown(storePrefixes)})`);
  if (contextLength !== undefined && !(Number.isInteger(contextLength) && contextLength > 0)) throw new TypeError(`${where}: options.contextLength must be a positive integer (got ${shown(contextLength)})`);
  if (worker !== false && worker !== true && !(worker instanceof LlamaWorker)) throw new TypeError(`${where}: options.worker must be true, false or a LlamaWorker (got ${shown(worker)})`);
  if (store !== null && store !== true && !(store instanceof ModelStore)) throw new TypeError(`${where}: options.store must be a ModelStore or true (got ${shown(store)})`);

  let loaded = loadedAlready ? Promise.resolve(model) : null;
  let downloading = false;
  let storePromise = null;
  const storeOf = () => (store === true ? (storePromise ??= ModelStore.open()) : Promise.resolve(store));

  function load(onProgress) {
    if (loaded) return loaded;
    downloading = true;
    loaded = (async () => {
      const opened = await storeOf();
      const loadOptions = {
        onProgress, ...(opened && { store: opened }), ...(projector !== undefined && { projector }),
        ...(contextLength !== undefined && { contextLength }), ...(cacheMode !== undefined && { cacheMode }),
        ...(storePrefixes !== undefined && { storePrefixes }),
      };
      if (worker === false) {
        await init(initOptions);
        return Llama.load(model, loadOptions);
      }
      const runner = worker === true ? new LlamaWorker({ init: initOptions }) : worker;
      return runner.load(model, loadOptions);
    })();
    loaded.then(() => { downloading = false; }, () => { downloading = false; loaded = null; });
    return loaded;
  }

  async function availability() {
    if (loadedAlready || (loaded && !downloading)) return 'available';
    if (downloading) return 'downloading';
    if (typeof model !== 'string' && !(model instanceof URL)) return 'available';
    const opened = await storeOf();
    if (!opened) return 'downloadable';
    const key = String(model);
    const stored = (await opened.list()).find((entry) => entry.key === key || entry.key === new URL(key, globalThis.location?.href).href);
    return stored?.complete ? 'available' : 'downloadable';
  }

  // Whether the model takes images: known once it is loaded, else from whether a projector was given.
  async function takesImages() {
    return loaded && !downloading ? Boolean((await loaded).projector) : projector !== undefined;
  }

  return { load, availability, takesImages, contextLength };
}

/**
 * The model of `loader`, its download told to `target` as `downloadprogress`
 * events: 0 first and 1 last, rising, in steps of 1/65536 (total 1); none
 * once `signal` aborts, which rejects with its reason (the load goes on for
 * the next caller).
 */
export async function loadReporting(loader, target, signal) {
  let last = -1;
  const report = (fraction) => {
    const loaded = Math.floor(fraction * PROGRESS_STEPS) / PROGRESS_STEPS;
    if (loaded <= last || signal?.aborted) return;
    last = loaded;
    target?.dispatchEvent(new ProgressEventClass('downloadprogress', { loaded, total: 1, lengthComputable: true }));
  };
  report(0);
  const llama = await racing(loader.load(({ loaded, total }) => {
    if (total) report(Math.min(loaded / total, 1 - 1 / PROGRESS_STEPS));
  }), signal);
  report(1);
  return llama;
}

/** `promise`, or a rejection with `signal`'s reason once it aborts. */
export function racing(promise, signal) {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** What respond() takes (conversationInput's: text, or ids with images') as token ids, by a Llama's tokenizer or in a RemoteLlama's worker. */
export async function inputIds(llama, input) {
  if (typeof input !== 'string') return input;
  const encoder = typeof llama.tokenizer.encode === 'function' ? llama.tokenizer : llama;
  return encoder.encode(input, { special: true, bos: false });
}

/** How many tokens a LlamaSession or a RemoteSession holds. */
export async function heldTokens(session) {
  return (await sessionTokens(session)).length;
}

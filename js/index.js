// kvcache-wasm: the KV cache of one transformer layer, in WebAssembly.
//
// This file is the whole JavaScript side: a loader for dist/kvcache.wasm and
// thin classes over the C API (include/kvcache.h). It validates arguments,
// copies typed arrays in and out of the wasm heap, and turns status codes
// into errors; every rule about the cache itself lives in C.

const WASM_ABI = 1; // must equal KVC_WASM_ABI in src/wasm/abi.c

// Mirrors of include/kvcache.h (stable values; the ABI check guards them).
const MODES = ['f32', 'q8', 'q8k', 'q8v'];
export const Q8_WINDOW = 64;
export const MAX_KV_HEADS = 4096;
export const MAX_HEAD_DIM = 4096;
export const MAX_POSITIONS = 0x7fffffff;
const STATUS = [
  'KVC_OK', 'KVC_E_NULL_POINTER', 'KVC_E_MODE', 'KVC_E_NUM_KV_HEADS', 'KVC_E_HEAD_DIM',
  'KVC_E_KV_HEAD', 'KVC_E_LENGTH', 'KVC_E_NONFINITE_KEY', 'KVC_E_NONFINITE_VALUE',
  'KVC_E_NONFINITE_QUERY', 'KVC_E_PROBS', 'KVC_E_TOO_LONG', 'KVC_E_NOMEM',
];

// Staging buffers up to this size stay allocated between calls; larger ones
// (a big prefill) are released as soon as the call returns.
const KEEP_STAGING_BYTES = 1 << 20;

let wasm = null; // { exports, memory }
let initPromise = null;

/** An error reported by the C library that argument checks cannot prevent. */
export class KvCacheError extends Error {
  constructor(message, code) {
    super(message);
    this.name = 'KvCacheError';
    this.code = code;
  }
}

// ---------------------------------------------------------------------------
// Loading

/**
 * Loads and instantiates the wasm module; every other call needs it first.
 * Resolves once; later calls return the same promise.
 * @param {{ module?: WebAssembly.Module, wasm?: BufferSource | URL | string | Response }} [options]
 */
export default function init(options = {}) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('init: options must be an object');
  }
  if (!initPromise) {
    initPromise = instantiate(options).then(
      (instance) => {
        wasm = adopt(instance);
      },
      (error) => {
        initPromise = null; // let the caller retry, e.g. with other options
        throw error;
      },
    );
  }
  return initPromise;
}
export { init };

const imports = {
  env: {
    // Views are refreshed lazily (see heap()), so growth needs no action here.
    emscripten_notify_memory_growth() {},
  },
};

async function instantiate(options) {
  if (options.module !== undefined) {
    if (!(options.module instanceof WebAssembly.Module)) {
      throw new TypeError('init: options.module must be a WebAssembly.Module');
    }
    return WebAssembly.instantiate(options.module, imports);
  }
  let source = options.wasm ?? new URL('../dist/kvcache.wasm', import.meta.url);
  if (typeof source === 'string') source = new URL(source, import.meta.url);
  if (source instanceof URL) source = await fetchWasm(source);
  if (typeof Response !== 'undefined' && source instanceof Response) {
    return (await instantiateResponse(source)).instance;
  }
  if (ArrayBuffer.isView(source) || source instanceof ArrayBuffer) {
    return (await WebAssembly.instantiate(source, imports)).instance;
  }
  throw new TypeError('init: options.wasm must be bytes, a URL, a string or a Response');
}

async function fetchWasm(url) {
  if (url.protocol === 'file:') {
    // Node's fetch does not read files; Node, Bun and Deno all have node:fs.
    const { readFile } = await import('node:fs/promises');
    return readFile(url);
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`init: fetching ${url} failed with HTTP ${response.status}`);
  return response;
}

async function instantiateResponse(response) {
  if (typeof WebAssembly.instantiateStreaming === 'function') {
    try {
      return await WebAssembly.instantiateStreaming(response.clone(), imports);
    } catch {
      // A server without the application/wasm MIME type: compile from bytes.
    }
  }
  return WebAssembly.instantiate(await response.arrayBuffer(), imports);
}

function adopt(instance) {
  const exports = instance.exports;
  if (typeof exports.kvc_wasm_abi !== 'function' || exports.kvc_wasm_abi() !== WASM_ABI) {
    throw new Error('init: this kvcache.wasm does not match the loader (ABI mismatch); rebuild both');
  }
  exports._initialize?.();
  return { exports, memory: exports.memory, views: null, staging: 0, stagingBytes: 0 };
}

function lib() {
  if (!wasm) throw new Error('kvcache-wasm: call `await init()` before using the library');
  return wasm;
}

// Typed-array views of the heap, rebuilt whenever the memory has grown (a
// grown memory detaches its old buffer), so no view is ever stale.
function heap() {
  const { memory } = wasm;
  if (!wasm.views || wasm.views.buffer !== memory.buffer) {
    const buffer = memory.buffer;
    wasm.views = {
      buffer,
      u8: new Uint8Array(buffer),
      u32: new Uint32Array(buffer),
      f32: new Float32Array(buffer),
    };
  }
  return wasm.views;
}

function readCString(ptr) {
  const { u8 } = heap();
  let end = ptr;
  while (u8[end] !== 0) end++;
  return new TextDecoder().decode(u8.subarray(ptr, end));
}

/**
 * Reserves heap room for several arrays at once and returns their pointers
 * (each 16-byte aligned). Valid until the next call to stage().
 */
function stage(...sizes) {
  const offsets = [];
  let total = 0;
  for (const bytes of sizes) {
    offsets.push(total);
    total += (bytes + 15) & ~15;
  }
  const w = wasm;
  if (total > w.stagingBytes) {
    if (w.staging) w.exports.free(w.staging);
    w.staging = 0;
    w.stagingBytes = 0;
    const ptr = w.exports.malloc(Math.max(total, 256)) >>> 0;
    if (!ptr) throw new KvCacheError('out of memory: the wasm heap cannot grow further', 'KVC_E_NOMEM');
    w.staging = ptr;
    w.stagingBytes = Math.max(total, 256);
  }
  return offsets.map((offset) => w.staging + offset);
}

// Releases an oversized staging buffer once the call that needed it is done.
function unstage() {
  const w = wasm;
  if (w.stagingBytes > KEEP_STAGING_BYTES) {
    w.exports.free(w.staging);
    w.staging = 0;
    w.stagingBytes = 0;
  }
}

// ---------------------------------------------------------------------------
// Argument checks: each names the parameter and runs before anything changes.

// How a bad argument is shown in a message: 1.5, "2", null, a Float64Array.
function shown(value) {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'function') return 'a function';
  if (value === null || typeof value !== 'object') return String(value);
  const name = value.constructor?.name ?? 'object';
  return `${/^[AEIOU]/i.test(name) ? 'an' : 'a'} ${name}`;
}

function checkInteger(where, name, value, min, max) {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new TypeError(`${where}: ${name} must be an integer (got ${shown(value)})`);
  }
  if (value < min || value > max) {
    throw new RangeError(`${where}: ${name} must be between ${min} and ${max} (got ${value})`);
  }
  return value;
}

function checkFloat32(where, name, value, length) {
  if (!(value instanceof Float32Array)) {
    throw new TypeError(`${where}: ${name} must be a Float32Array (got ${shown(value)})`);
  }
  if (length !== undefined && value.length !== length) {
    throw new RangeError(`${where}: ${name} must have length ${length} (got ${value.length})`);
  }
  return value;
}

// An alive mask: absent (all alive), a Uint8Array (non-zero = alive) or an
// array of booleans. Returns a Uint8Array of `length` bytes, or null.
function checkAlive(where, alive, length) {
  if (alive === undefined || alive === null) return null;
  let bytes;
  if (alive instanceof Uint8Array) {
    bytes = alive;
  } else if (Array.isArray(alive)) {
    if (!alive.every((x) => typeof x === 'boolean')) {
      throw new TypeError(`${where}: alive must hold only booleans`);
    }
    bytes = Uint8Array.from(alive, (x) => (x ? 1 : 0));
  } else {
    throw new TypeError(`${where}: alive must be a Uint8Array or an array of booleans (got ${shown(alive)})`);
  }
  if (bytes.length !== length) {
    throw new RangeError(`${where}: alive must have length ${length} (got ${bytes.length})`);
  }
  return bytes;
}

// Status codes that argument checks cannot rule out, named for the caller.
function checkStatus(where, status, names = {}) {
  if (status === 0) return;
  const code = STATUS[status] ?? `status ${status}`;
  switch (code) {
    case 'KVC_E_NONFINITE_KEY':
      throw new RangeError(`${where}: ${names.k ?? 'k'} holds NaN or Infinity in a live head; nothing was stored`);
    case 'KVC_E_NONFINITE_VALUE':
      throw new RangeError(`${where}: ${names.v ?? 'v'} holds NaN or Infinity in a live head; nothing was stored`);
    case 'KVC_E_NONFINITE_QUERY':
      throw new RangeError(`${where}: q holds NaN or Infinity`);
    case 'KVC_E_PROBS':
      throw new RangeError(`${where}: probs holds a negative, NaN or infinite value; imp is unchanged`);
    case 'KVC_E_TOO_LONG':
      throw new RangeError(`${where}: the cache would exceed ${MAX_POSITIONS} positions`);
    case 'KVC_E_NOMEM':
      throw new KvCacheError(`${where}: out of memory (the wasm heap cannot grow further); the cache is unchanged`, code);
    default:
      throw new KvCacheError(`${where}: ${readCString(wasm.exports.kvc_status_name(status) >>> 0)}`, code);
  }
}

// ---------------------------------------------------------------------------
// Library-level functions

/** The kernel set the module runs: 'wasm-simd128' for a SIMD build. */
export function kernelIsa() {
  return readCString(lib().exports.kvc_kernel_isa() >>> 0);
}

/** The C library's version string. */
export function version() {
  return readCString(lib().exports.kvc_version() >>> 0);
}

/**
 * Single-query f32 softmax attention over plain slices: keys and values are
 * [n × d] row-major. LayerKvCache#attend in f32 mode runs this very routine.
 */
export function attentionHead(q, keys, values, n, d) {
  const where = 'attentionHead';
  const { exports } = lib();
  checkInteger(where, 'd', d, 1, MAX_HEAD_DIM);
  checkInteger(where, 'n', n, 0, MAX_POSITIONS);
  checkFloat32(where, 'q', q, d);
  checkFloat32(where, 'keys', keys, n * d);
  checkFloat32(where, 'values', values, n * d);
  const [qPtr, kPtr, vPtr, outPtr, probsPtr] = stage(q.byteLength, keys.byteLength,
    values.byteLength, d * 4, n * 4);
  try {
    const { f32 } = heap();
    f32.set(q, qPtr >>> 2);
    f32.set(keys, kPtr >>> 2);
    f32.set(values, vPtr >>> 2);
    checkStatus(where, exports.kvc_attention_head(qPtr, kPtr, vPtr, n, d, outPtr, probsPtr));
    const views = heap();
    return {
      out: views.f32.slice(outPtr >>> 2, (outPtr >>> 2) + d),
      probs: views.f32.slice(probsPtr >>> 2, (probsPtr >>> 2) + n),
    };
  } finally {
    unstage();
  }
}

// ---------------------------------------------------------------------------
// LayerKvCache

const fromPointer = Symbol('fromPointer');
const disposeSymbol = Symbol.dispose ?? Symbol.for('Symbol.dispose');
const finalizer = new FinalizationRegistry((ptr) => {
  if (wasm) wasm.exports.kvc_layer_free(ptr);
});

/** The KV cache of one transformer layer. See include/kvcache.h for the rules. */
export class LayerKvCache {
  #ptr = 0;
  #numKvHeads;
  #headDim;
  #mode;

  /**
   * @param {{ numKvHeads: number, headDim: number, mode?: 'f32' | 'q8' | 'q8k' | 'q8v' }} options
   */
  constructor(options) {
    const where = 'new LayerKvCache';
    if (options?.[fromPointer]) {
      this.#adopt(options[fromPointer]);
      return;
    }
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`${where}: options must be an object { numKvHeads, headDim, mode? }`);
    }
    const { exports } = lib();
    const numKvHeads = checkInteger(where, 'numKvHeads', options.numKvHeads, 1, MAX_KV_HEADS);
    const headDim = checkInteger(where, 'headDim', options.headDim, 1, MAX_HEAD_DIM);
    const mode = options.mode ?? 'f32';
    if (!MODES.includes(mode)) {
      throw new RangeError(`${where}: mode must be one of ${MODES.map((m) => `'${m}'`).join(', ')} (got ${shown(mode)})`);
    }
    const [outPtr] = stage(4);
    checkStatus(where, exports.kvc_layer_create(numKvHeads, headDim, MODES.indexOf(mode), outPtr));
    this.#adopt(heap().u32[outPtr >>> 2]);
  }

  #adopt(ptr) {
    const { exports } = wasm;
    this.#ptr = ptr;
    this.#numKvHeads = exports.kvc_layer_num_kv_heads(ptr) >>> 0;
    this.#headDim = exports.kvc_layer_head_dim(ptr) >>> 0;
    this.#mode = MODES[exports.kvc_layer_mode(ptr)];
    finalizer.register(this, ptr, this);
  }

  // The live pointer, or a TypeError naming the method after free().
  #live(where) {
    if (!this.#ptr) throw new TypeError(`LayerKvCache.${where}: the cache was freed`);
    return this.#ptr;
  }

  #checkHead(where, kvHead) {
    return checkInteger(`LayerKvCache.${where}`, 'kvHead', kvHead, 0, this.#numKvHeads - 1);
  }

  get numKvHeads() { this.#live('numKvHeads'); return this.#numKvHeads; }
  get headDim() { this.#live('headDim'); return this.#headDim; }
  get mode() { this.#live('mode'); return this.#mode; }
  get seqLen() { return wasm.exports.kvc_layer_seq_len(this.#live('seqLen')) >>> 0; }
  get memoryBytes() { return wasm.exports.kvc_layer_memory_bytes(this.#live('memoryBytes')) >>> 0; }
  get capacityBytes() { return wasm.exports.kvc_layer_capacity_bytes(this.#live('capacityBytes')) >>> 0; }
  /** True while the q8 per-channel field is frozen (seqLen > 64 in a q8 mode). */
  get fieldFrozen() { return wasm.exports.kvc_layer_field_frozen(this.#live('fieldFrozen')) !== 0; }

  /** A copy of the importance vector, one slot per position. */
  get imp() {
    const ptr = this.#live('imp');
    const n = this.seqLen;
    const [dst] = stage(n * 4);
    checkStatus('LayerKvCache.imp', wasm.exports.kvc_layer_imp(ptr, dst, n));
    const result = heap().f32.slice(dst >>> 2, (dst >>> 2) + n);
    unstage();
    return result;
  }

  /** Appends one position: k and v are [numKvHeads × headDim]. */
  append(k, v, alive) {
    this.#appendPositions('append', 1, k, v, alive);
  }

  /** Appends n positions (prefill): k and v are [n × numKvHeads × headDim]. */
  appendBatch(k, v, alive) {
    const where = 'LayerKvCache.appendBatch';
    this.#live('appendBatch');
    checkFloat32(where, 'k', k);
    const stride = this.#numKvHeads * this.#headDim;
    if (k.length % stride !== 0) {
      throw new RangeError(`${where}: k must have a length that is a multiple of numKvHeads × headDim = ${stride} (got ${k.length})`);
    }
    this.#appendPositions('appendBatch', k.length / stride, k, v, alive);
  }

  #appendPositions(method, n, k, v, alive) {
    const where = `LayerKvCache.${method}`;
    const ptr = this.#live(method);
    const count = n * this.#numKvHeads * this.#headDim;
    checkFloat32(where, 'k', k, count);
    checkFloat32(where, 'v', v, count);
    const mask = checkAlive(where, alive, n * this.#numKvHeads);
    if (n === 0) return;
    const [kPtr, vPtr, maskPtr] = stage(k.byteLength, v.byteLength, mask ? mask.length : 0);
    try {
      const { f32, u8 } = heap();
      f32.set(k, kPtr >>> 2);
      f32.set(v, vPtr >>> 2);
      if (mask) u8.set(mask, maskPtr);
      checkStatus(where, wasm.exports.kvc_layer_append_n(ptr, n, kPtr, vPtr, mask ? maskPtr : 0));
    } finally {
      unstage();
    }
  }

  /**
   * Attention of q [headDim] over the rows of kvHead. Returns { out, probs }:
   * out [headDim], probs one per stored row of the head. Pass `into` to reuse
   * output arrays (out of length headDim, probs at least headLen(kvHead) long).
   */
  attend(q, kvHead, into) {
    const where = 'LayerKvCache.attend';
    const ptr = this.#live('attend');
    const d = this.#headDim;
    checkFloat32(where, 'q', q, d);
    this.#checkHead('attend', kvHead);
    const rows = this.headLen(kvHead);
    let out, probs;
    if (into !== undefined) {
      if (into === null || typeof into !== 'object') {
        throw new TypeError(`${where}: into must be an object { out?, probs? }`);
      }
      if (into.out !== undefined) out = checkFloat32(where, 'into.out', into.out, d);
      if (into.probs !== undefined) {
        probs = checkFloat32(where, 'into.probs', into.probs);
        if (probs.length < rows) {
          throw new RangeError(`${where}: into.probs must have length at least headLen(${kvHead}) = ${rows} (got ${probs.length})`);
        }
      }
    }
    const [qPtr, outPtr, probsPtr] = stage(d * 4, d * 4, rows * 4);
    try {
      heap().f32.set(q, qPtr >>> 2);
      checkStatus(where, wasm.exports.kvc_layer_attend(ptr, qPtr, kvHead, outPtr, probsPtr));
      const { f32 } = heap();
      const outView = f32.subarray(outPtr >>> 2, (outPtr >>> 2) + d);
      const probsView = f32.subarray(probsPtr >>> 2, (probsPtr >>> 2) + rows);
      if (out) out.set(outView);
      else out = outView.slice();
      if (probs) {
        probs.set(probsView);
        if (probs.length !== rows) probs = probs.subarray(0, rows);
      } else {
        probs = probsView.slice();
      }
      return { out, probs };
    } finally {
      unstage();
    }
  }

  /** Drops the last min(n, seqLen) positions (speculative rollback). */
  truncateLast(n) {
    const ptr = this.#live('truncateLast');
    checkInteger('LayerKvCache.truncateLast', 'n', n, 0, Number.MAX_SAFE_INTEGER);
    wasm.exports.kvc_layer_truncate_last(ptr, Math.min(n, MAX_POSITIONS));
  }

  /** Empties the cache, keeping geometry and mode. */
  clear() {
    wasm.exports.kvc_layer_clear(this.#live('clear'));
  }

  /** imp[p] += probs[p] for every position; probs has length seqLen. */
  accumulateImp(probs) {
    const where = 'LayerKvCache.accumulateImp';
    const ptr = this.#live('accumulateImp');
    checkFloat32(where, 'probs', probs, this.seqLen);
    this.#withProbs(where, probs, (probsPtr) =>
      wasm.exports.kvc_layer_accumulate_imp(ptr, probsPtr, probs.length));
  }

  /** Adds one head's row probabilities (as attend returns them) at that head's positions. */
  accumulateImpHead(kvHead, probs) {
    const where = 'LayerKvCache.accumulateImpHead';
    const ptr = this.#live('accumulateImpHead');
    this.#checkHead('accumulateImpHead', kvHead);
    checkFloat32(where, 'probs', probs, this.headLen(kvHead));
    this.#withProbs(where, probs, (probsPtr) =>
      wasm.exports.kvc_layer_accumulate_imp_head(ptr, kvHead, probsPtr, probs.length));
  }

  #withProbs(where, probs, call) {
    const [probsPtr] = stage(probs.byteLength);
    try {
      heap().f32.set(probs, probsPtr >>> 2);
      checkStatus(where, call(probsPtr));
    } finally {
      unstage();
    }
  }

  /** Rows stored for kvHead (0 for a head that was never alive). */
  headLen(kvHead) {
    const ptr = this.#live('headLen');
    this.#checkHead('headLen', kvHead);
    return wasm.exports.kvc_layer_head_len(ptr, kvHead) >>> 0;
  }

  /** The head's keys, [headLen × headDim] f32 (a dequantized copy when quantized). */
  headKeys(kvHead) {
    return this.#copyRows('headKeys', kvHead, 'kvc_layer_head_keys');
  }

  /** The head's values, [headLen × headDim] f32 (a dequantized copy when quantized). */
  headValues(kvHead) {
    return this.#copyRows('headValues', kvHead, 'kvc_layer_head_values');
  }

  #copyRows(method, kvHead, cFunction) {
    const ptr = this.#live(method);
    this.#checkHead(method, kvHead);
    const count = this.headLen(kvHead) * this.#headDim;
    const [dst] = stage(count * 4);
    try {
      checkStatus(`LayerKvCache.${method}`, wasm.exports[cFunction](ptr, kvHead, dst, count));
      return heap().f32.slice(dst >>> 2, (dst >>> 2) + count);
    } finally {
      unstage();
    }
  }

  /** The position of each stored row of kvHead, ascending. */
  headPositions(kvHead) {
    const ptr = this.#live('headPositions');
    this.#checkHead('headPositions', kvHead);
    const count = this.headLen(kvHead);
    const [dst] = stage(count * 4);
    try {
      checkStatus('LayerKvCache.headPositions', wasm.exports.kvc_layer_head_positions(ptr, kvHead, dst, count));
      return heap().u32.slice(dst >>> 2, (dst >>> 2) + count);
    } finally {
      unstage();
    }
  }

  /** A deep, independent copy (fork a conversation). */
  clone() {
    const ptr = this.#live('clone');
    const [outPtr] = stage(4);
    checkStatus('LayerKvCache.clone', wasm.exports.kvc_layer_clone(ptr, outPtr));
    return new LayerKvCache({ [fromPointer]: heap().u32[outPtr >>> 2] });
  }

  /** Releases the cache's memory now. Idempotent; any later call throws. */
  free() {
    if (!this.#ptr) return;
    finalizer.unregister(this);
    wasm.exports.kvc_layer_free(this.#ptr);
    this.#ptr = 0;
  }

  [disposeSymbol]() {
    this.free();
  }

  toString() {
    if (!this.#ptr) return 'LayerKvCache{freed}';
    const { exports } = wasm;
    const length = exports.kvc_layer_describe(this.#ptr, 0, 0) >>> 0;
    const [buf] = stage(length + 1);
    exports.kvc_layer_describe(this.#ptr, buf, length + 1);
    return readCString(buf);
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return this.toString();
  }
}

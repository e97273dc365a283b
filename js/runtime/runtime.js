// The wasm module and its heap: loading (init), typed-array views that are
// never stale, and the one way the package calls C with arrays (callC):
// staging memory, the call, its status turned into an error, the outputs
// copied out.
import { KvCacheError } from './checks.js';
import { C_LIMITS, checkNames } from './constants.js';
import { RUNTIME_FILES, fetchFile, locate, toUrl } from './files.js';
import { importsFor } from './imports.js';
import { checkKeys, shown } from './options.js';
import { checkThreads, startThreads } from './threads.js';

export { importsFor };

const WASM_ABI = 12; // must equal KVC_WASM_ABI in src/wasm/abi.c
// The module's memory import (CMakeLists.txt: INITIAL_MEMORY, MAXIMUM_MEMORY),
// in 64 KiB pages; tests/js/constants.test.mjs reads them off the built files.
export const MEMORY_INITIAL_PAGES = 16;
export const MEMORY_MAXIMUM_PAGES = 65536;
const PAGE = 65536;

// Staging buffers up to this size stay allocated between calls; larger ones
// (a big prefill) are released as soon as the call returns.
const KEEP_STAGING_BYTES = 1 << 20;

let wasm = null; // { exports, memory, views, staging, stagingBytes }
let initPromise = null;
let kernel = null; // what kernelInfo() says: { wanted, reason }

// What init() takes; `locateFile(name)` says where a self-hosted file is
// (name: 'kvcache.wasm', 'kvcache-relaxed.wasm' or 'pool-worker.js').
const INIT_OPTIONS = ['module', 'wasm', 'isa', 'threads', 'maxMemory', 'locateFile'];

/**
 * Loads and instantiates the wasm module, and starts its threads; every
 * other call needs it first. Resolves once; later calls (their options
 * checked, then ignored) return the same promise.
 * @param {{ module?: WebAssembly.Module, wasm?: BufferSource | URL | string | Response,
 *           isa?: 'wasm-simd128' | 'wasm-relaxed-simd', threads?: number, maxMemory?: number,
 *           locateFile?: (name: string) => URL | string }} [options]
 */
export function init(options = {}) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('init: options must be an object');
  }
  let threads;
  let maximumPages;
  try {
    checkKeys('init', options, INIT_OPTIONS);
    threads = checkThreads(options.threads);
    maximumPages = checkMaxMemory(options.maxMemory);
    checkIsa(options);
    if (options.locateFile !== undefined && typeof options.locateFile !== 'function') {
      throw new TypeError(`init: options.locateFile must be a function (name) => URL or string (got ${typeof options.locateFile})`);
    }
  } catch (error) {
    return Promise.reject(error); // checked on every call, loaded or not
  }
  if (!initPromise) {
    initPromise = load(options, threads, maximumPages).catch((error) => {
      wasm = null;
      kernel = null;
      initPromise = null; // let the caller retry, e.g. with other options
      throw error;
    });
  }
  return initPromise;
}

async function load(options, threads, maximumPages) {
  const { module, instance, memory } = await instantiate(options, maximumPages);
  wasm = adopt(instance, memory);
  wasm.limitBytes = maximumPages * PAGE;
  wasm.statuses = namesOf(wasm.exports.kvc_status_symbol);
  checkNames({
    constants: Object.fromEntries(namesOf(wasm.exports.kvc_constant_name)
      .map((name, index) => [name, wasm.exports.kvc_constant_value(index) >>> 0])),
    modes: namesOf(wasm.exports.kvc_mode_name),
    components: namesOf(wasm.exports.kvc_component_name),
  });
  await startThreads(wasm.exports, module, memory, threads, options);
}

/**
 * init() for an entry that imports the compiled modules itself (a Worker:
 * workerd and wrangler compile wasm at deploy time and refuse to compile
 * bytes at run time, so the relaxed-SIMD probe cannot run there): loads the
 * baseline module, or the relaxed one with { isa: 'wasm-relaxed-simd' },
 * unless the options name a module or bytes.
 */
export function initWithModules(modules, options = {}) {
  if (options === null || typeof options !== 'object' || options.module !== undefined || options.wasm !== undefined) {
    return init(options);
  }
  const { isa, ...rest } = options;
  if (isa !== undefined && !ISAS.includes(isa)) return init(options); // init names the bad value
  return init({ ...rest, module: isa === 'wasm-relaxed-simd' ? modules.relaxed : modules.baseline });
}

// The two builds of the module: SIMD128 (every engine with wasm SIMD) and
// relaxed SIMD (fused multiply-add), in dist/ beside js/. Each URL is written
// out literally, as `new URL('…', import.meta.url)`, so that bundlers see the
// file and emit it beside the bundle.
const ISAS = ['wasm-simd128', 'wasm-relaxed-simd'];
const BUILDS = {
  'wasm-simd128': { file: RUNTIME_FILES.simd128, url: () => new URL('../../dist/kvcache.wasm', import.meta.url) },
  'wasm-relaxed-simd': { file: RUNTIME_FILES.relaxed, url: () => new URL('../../dist/kvcache-relaxed.wasm', import.meta.url) },
};

function checkIsa(options) {
  const { isa } = options;
  if (isa === undefined) return;
  if (!ISAS.includes(isa)) {
    throw new RangeError(`init: options.isa must be ${ISAS.map((x) => `'${x}'`).join(' or ')} (got ${shown(isa)})`);
  }
  if (options.module !== undefined || options.wasm !== undefined) {
    throw new TypeError('init: options.isa picks the package\'s own file; it does not go with options.module or options.wasm');
  }
}

// A module of one function: i32x4.relaxed_dot_i8x16_i7x16_add_s of sixteen
// -3s by sixteen 2s, plus 0, lane 0 -- -24 where relaxed SIMD is what the
// standard says for 7-bit operands.  (Node 20's experimental flag accepts
// the opcode and answers -48.)
const RELAXED_PROBE = new Uint8Array([
  0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, // magic, version
  1, 5, 1, 0x60, 0, 1, 0x7f, // type: [] -> [i32]
  3, 2, 1, 0, // one function
  7, 5, 1, 1, 0x70, 0, 0, // export "p"
  0x0a, 0x40, 1, 0x3e, 0, // code: one body of 62 bytes, no locals
  0xfd, 0x0c, ...new Array(16).fill(0xfd), // v128.const i8x16 -3 ...
  0xfd, 0x0c, ...new Array(16).fill(2), // v128.const i8x16 2 ...
  0xfd, 0x0c, ...new Array(16).fill(0), // v128.const 0
  0xfd, 0x93, 0x02, // i32x4.relaxed_dot_i8x16_i7x16_add_s
  0xfd, 0x1b, 0, // i32x4.extract_lane 0
  0x0b,
]);

/**
 * True when the engine runs relaxed SIMD and computes what the kernels
 * expect (`wasmApi`: WebAssembly, or a stand-in in tests).
 */
export function relaxedSimdWorks(wasmApi = WebAssembly) {
  try {
    if (!wasmApi.validate(RELAXED_PROBE)) return false;
    return new wasmApi.Instance(new wasmApi.Module(RELAXED_PROBE)).exports.p() === -24;
  } catch {
    return false;
  }
}

function checkMaxMemory(maxMemory) {
  if (maxMemory === undefined) return MEMORY_MAXIMUM_PAGES;
  const min = MEMORY_INITIAL_PAGES * PAGE;
  const max = MEMORY_MAXIMUM_PAGES * PAGE;
  if (typeof maxMemory !== 'number' || !Number.isInteger(maxMemory) || maxMemory < min || maxMemory > max) {
    throw new RangeError(`init: options.maxMemory must be a whole number of bytes from ${min} to ${max} (got ${String(maxMemory)})`);
  }
  return Math.floor(maxMemory / PAGE);
}

/**
 * A shared memory when the runtime can make one (workers can then run on
 * it), else null. Chromium makes them even in pages that are not
 * cross-origin isolated, though it will not post them to a worker there.
 */
function sharedMemory(maximumPages) {
  try {
    return new WebAssembly.Memory({ initial: MEMORY_INITIAL_PAGES, maximum: maximumPages, shared: true });
  } catch {
    return null;
  }
}

// The module init() runs, compiled for `memory` (shared, or null: the same
// module with its memory import declared unshared, on one thread).
async function instantiate(options, maximumPages) {
  let memory = sharedMemory(maximumPages);
  let module;
  if (options.module !== undefined) {
    if (!(options.module instanceof WebAssembly.Module)) {
      throw new TypeError('init: options.module must be a WebAssembly.Module');
    }
    if (!memory) {
      throw new Error('init: this runtime cannot create a shared WebAssembly.Memory, which a precompiled module needs; pass the .wasm bytes (options.wasm) instead');
    }
    module = options.module;
    kernel = { wanted: null, reason: null };
  } else if (options.wasm !== undefined) {
    let source = options.wasm;
    if (typeof source === 'string' || source instanceof URL) source = await fetchFile(toUrl(source));
    const isResponse = typeof Response !== 'undefined' && source instanceof Response;
    if (!isResponse && !ArrayBuffer.isView(source) && !(source instanceof ArrayBuffer)) {
      throw new TypeError('init: options.wasm must be bytes, a URL, a string or a Response');
    }
    module = await compile(source, memory !== null);
    kernel = { wanted: null, reason: null };
  } else {
    module = await compileBuild(options, memory !== null);
  }
  if (!memory) memory = new WebAssembly.Memory({ initial: MEMORY_INITIAL_PAGES, maximum: maximumPages });
  const instance = await WebAssembly.instantiate(module, importsFor(memory));
  return { module, instance, memory };
}

/**
 * The package's own build: the one options.isa names, else relaxed SIMD
 * where the engine runs it as the kernels expect -- and SIMD128 when the
 * relaxed file cannot be fetched or compiled (a deployment that copied only
 * kvcache.wasm), with the reason in kernelInfo().
 */
async function compileBuild(options, shared) {
  const wanted = options.isa ?? 'wasm-relaxed-simd';
  if (wanted === 'wasm-relaxed-simd' && !relaxedSimdWorks()) {
    if (options.isa) throw new Error('init: options.isa is \'wasm-relaxed-simd\' but this engine has no relaxed SIMD, or computes it differently from the standard');
    kernel = { wanted, reason: 'this engine has no relaxed SIMD, or computes it differently from the standard' };
    return compile(await fetchFile(locate(options, BUILDS['wasm-simd128'].file, BUILDS['wasm-simd128'].url)), shared);
  }
  const build = BUILDS[wanted];
  try {
    const module = await compile(await fetchFile(locate(options, build.file, build.url)), shared);
    kernel = { wanted, reason: null };
    return module;
  } catch (error) {
    if (options.isa) throw error;
    const fallback = BUILDS['wasm-simd128'];
    const module = await compile(await fetchFile(locate(options, fallback.file, fallback.url)), shared);
    kernel = { wanted, reason: `${build.file} could not be loaded, so the SIMD128 build runs: ${error.message}` };
    return module;
  }
}

/** The kernel set the module runs: 'wasm-simd128' for a SIMD build. */
export function kernelIsa() {
  return readCString(lib().kvc_kernel_isa() >>> 0);
}

/** The C library's version string. */
export function version() {
  return readCString(lib().kvc_version() >>> 0);
}

/** { isa, wanted, reason }: the build running, the one init() aimed for (null when given a module or bytes), and why they differ. */
export function kernelInfo() {
  const isa = kernelIsa();
  return { isa, wanted: kernel.wanted ?? isa, reason: kernel.reason };
}

// Compiles bytes or a Response, for a shared memory import or (shared
// false) with it declared unshared.
async function compile(source, shared) {
  const isResponse = typeof Response !== 'undefined' && source instanceof Response;
  if (!shared) return WebAssembly.compile(unsharedMemoryImport(isResponse ? await source.arrayBuffer() : source));
  if (!isResponse) return WebAssembly.compile(source);
  if (typeof WebAssembly.compileStreaming === 'function' && (source.headers.get('content-type') ?? '').startsWith('application/wasm')) {
    return WebAssembly.compileStreaming(source);
  }
  // A server without the application/wasm MIME type: compile from bytes.
  return WebAssembly.compile(await source.arrayBuffer());
}

/**
 * A copy of the module's bytes with its memory import declared unshared:
 * one byte, the limits' flags, in the import section. Everything else is
 * valid on an unshared memory (atomic instructions included); only the
 * pool's sleep would trap, and without workers no thread sleeps.
 */
export function unsharedMemoryImport(source) {
  const bytes = new Uint8Array(ArrayBuffer.isView(source) ? source.buffer.slice(source.byteOffset, source.byteOffset + source.byteLength) : source.slice(0));
  let at = 8; // magic and version
  const leb = () => {
    let value = 0;
    let shift = 0;
    let byte;
    do {
      byte = bytes[at++];
      value += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80);
    return value;
  };
  while (at < bytes.length) {
    const id = bytes[at++];
    const size = leb();
    const end = at + size;
    if (id === 2) { // imports
      for (let count = leb(); count > 0; count--) {
        // The module and field names, skipped: their length read first
        // (`at += leb()` would add it to `at` as it was before the length).
        for (let names = 2; names > 0; names--) {
          const length = leb();
          at += length;
        }
        const kind = bytes[at++];
        if (kind === 0) leb(); // a function: its type
        else if (kind === 2) { // a memory: flags (bit 1 = shared), limits
          bytes[at] &= ~2;
          return bytes;
        } else throw new Error('init: unexpected import in kvcache.wasm');
      }
    }
    at = end;
  }
  throw new Error('init: kvcache.wasm imports no memory');
}

function adopt(instance, memory) {
  const exports = instance.exports;
  if (typeof exports.kvc_wasm_abi !== 'function' || exports.kvc_wasm_abi() !== WASM_ABI) {
    throw new Error('init: this kvcache.wasm does not match the loader (ABI mismatch); rebuild both');
  }
  exports._initialize?.();
  return { exports, memory, views: null, staging: 0, stagingBytes: 0 };
}

// The strings nameOf(0), nameOf(1), ... up to the first NULL.
function namesOf(nameOf) {
  const names = [];
  for (let ptr; (ptr = nameOf(names.length) >>> 0) !== 0;) names.push(readCString(ptr));
  return names;
}

/** The most bytes the heap may grow to (init's maxMemory, default 4 GiB). */
export function heapLimitBytes() {
  lib();
  return wasm.limitBytes;
}

/** The module's exports; throws until init() has resolved. */
export function lib() {
  if (!wasm) throw new Error('kvcache-wasm: call `await init()` before using the library');
  return wasm.exports;
}

/** The symbol of `using` declarations (Symbol.dispose, where the runtime has it). */
export const disposeSymbol = Symbol.dispose ?? Symbol.for('Symbol.dispose');

/**
 * The C objects of one class, each owned by an instance: released by the
 * instance's free() -- release(owner, ptr) -- or, if the instance is
 * collected first, by a FinalizationRegistry once the module is loaded (a
 * finalizer must not throw). Where the runtime has none (workerd before
 * compatibility date 2025-05-05), only free() releases: the finalizer is a
 * safety net, free() is the plan.
 */
export function ownedObjects(free) {
  const registry = typeof FinalizationRegistry === 'function'
    ? new FinalizationRegistry((ptr) => { if (wasm !== null) free(ptr); })
    : null;
  return {
    /** `owner` owns `ptr` from now on. */
    adopt(owner, ptr) {
      registry?.register(owner, ptr, owner);
    },
    /** Frees `owner`'s `ptr` (0: freed already); returns 0, the owner's pointer from now on. */
    release(owner, ptr) {
      if (ptr) {
        registry?.unregister(owner);
        free(ptr);
      }
      return 0;
    },
  };
}

/**
 * Typed-array views of the heap, rebuilt whenever the memory has grown (a
 * grown memory detaches its old buffer), so no view is ever stale. Take them
 * again after any call into C.
 */
export function heap() {
  const { memory } = wasm;
  if (!wasm.views || wasm.views.buffer !== memory.buffer) {
    const buffer = memory.buffer;
    wasm.views = {
      buffer,
      u8: new Uint8Array(buffer),
      u32: new Uint32Array(buffer),
      f32: new Float32Array(buffer),
      f64: new Float64Array(buffer),
    };
  }
  return wasm.views;
}

export function readCString(ptr) {
  const { u8 } = heap();
  let end = ptr;
  while (u8[end] !== 0) end++;
  // A copy: TextDecoder refuses views of a shared memory.
  return new TextDecoder().decode(u8.slice(ptr, end));
}

/**
 * Reserves heap room for several arrays at once and returns their pointers
 * (each 16-byte aligned). Valid until the next call to stage().
 * Returns null when the heap cannot grow.
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
    const bytes = Math.max(total, 256);
    const ptr = w.exports.malloc(bytes) >>> 0;
    if (!ptr) return null;
    w.staging = ptr;
    w.stagingBytes = bytes;
  }
  return offsets.map((offset) => w.staging + offset);
}

/** Releases an oversized staging buffer once the call that needed it is done. */
function unstage() {
  const w = wasm;
  if (w && w.stagingBytes > KEEP_STAGING_BYTES) {
    w.exports.free(w.staging);
    w.staging = 0;
    w.stagingBytes = 0;
  }
}

// ---- calls into C

/**
 * Calls C with arrays on the heap: every call of the package that passes or
 * gets back an array goes through here. Each of `args` becomes a pointer: a
 * typed array is copied in, a number reserves that many bytes for an output,
 * null passes NULL. `call(...pointers)` returns the C status, which
 * checkStatus(where, status, names) turns into an error; then
 * `read(pointers)` copies the outputs out (copyOut, u32At) and is what
 * callC returns. The staging memory is released however the call ends.
 */
export function callC(where, args, call, read, names) {
  const sizes = args.map((arg) => (arg === null ? 0 : typeof arg === 'number' ? arg : arg.byteLength));
  return withStaging(where, sizes, (pointers) => {
    const { u8 } = heap();
    args.forEach((arg, i) => {
      if (arg === null) pointers[i] = 0;
      else if (typeof arg !== 'number') u8.set(new Uint8Array(arg.buffer, arg.byteOffset, arg.byteLength), pointers[i]);
    });
    checkStatus(where, call(...pointers), names);
    return read?.(pointers);
  });
}

/** callC of a call whose one array is a uint32 out-parameter (a new object's pointer, a mode): call(outPtr); returns its value. */
export function callOut(where, call) {
  return callC(where, [4], call, ([outPtr]) => u32At(outPtr));
}

/**
 * What callC is made of, for the few places that make several calls over
 * one set of out-parameters or read a status in their own way (the GGUF
 * reader): `body(pointers)` over staging memory of `sizes` bytes, released
 * however it ends.
 */
export function withStaging(where, sizes, body) {
  const pointers = staged(where, ...sizes);
  try {
    return body(pointers);
  } finally {
    unstage();
  }
}

/** A view of `count` elements of heap view `view` ('u8', 'u32', 'f32', 'f64') at `ptr`; valid until the next call into C. */
export function heapView(view, ptr, count) {
  const array = heap()[view];
  const at = ptr / array.BYTES_PER_ELEMENT;
  return array.subarray(at, at + count);
}

/** A copy of `count` elements of heap view `view` at `ptr`. */
export function copyOut(view, ptr, count) {
  return heapView(view, ptr, count).slice();
}

/** size_t's largest value in wasm32: what C returns for "no bound" or "past the address space". */
export const SIZE_MAX = 0xffffffff;

/** A size_t C returned, as a number: SIZE_MAX read as Infinity. */
export function sizeOrInfinity(n) {
  const size = n >>> 0;
  return size === SIZE_MAX ? Infinity : size;
}

/** The uint32 at `ptr`: an out-parameter (a count, a flag, a pointer). */
export function u32At(ptr) {
  return heap().u32[ptr >>> 2];
}

/** The uint64 (a BigInt) at `ptr` of the heap, which need not be 8-aligned. */
export function u64At(ptr) {
  return new DataView(heap().buffer).getBigUint64(ptr, true);
}

/** The C name of a status ("KVC_E_NOMEM", from the module), or "status N" for one it does not name. */
export function statusName(status) {
  return wasm?.statuses[status] ?? `status ${status}`;
}

/** stage() or a KvCacheError when the wasm heap cannot grow. */
function staged(where, ...sizes) {
  const pointers = stage(...sizes);
  if (!pointers) throw outOfMemory(where);
  return pointers;
}

export function outOfMemory(where) {
  return new KvCacheError(`${where}: out of memory (the wasm heap cannot grow further); nothing was changed`, 'KVC_E_NOMEM');
}

/**
 * Turns a C status into an error. `names` renames the arrays a message
 * mentions (k, v, q, decay) to the caller's parameter names.
 */
export function checkStatus(where, status, names = {}) {
  if (status === 0) return;
  const code = statusName(status);
  const nonFinite = (name) => new RangeError(`${where}: ${name} holds NaN or Infinity; nothing was changed`);
  switch (code) {
    case 'KVC_E_NONFINITE_KEY': throw nonFinite(names.k ?? 'k');
    case 'KVC_E_NONFINITE_VALUE': throw nonFinite(names.v ?? 'v');
    case 'KVC_E_NONFINITE_QUERY': throw nonFinite(names.q ?? 'q');
    case 'KVC_E_NONFINITE_DECAY': throw nonFinite('decay');
    case 'KVC_E_PROBS':
      throw new RangeError(`${where}: probs holds a negative, NaN or infinite value; imp is unchanged`);
    case 'KVC_E_TOO_LONG':
      throw new RangeError(`${where}: the cache would exceed ${C_LIMITS.KVC_MAX_POSITIONS} positions`);
    case 'KVC_E_NOMEM': throw outOfMemory(where);
    case 'KVC_E_VERIFYING':
      throw new KvCacheError(`${where}: not allowed during a speculative verify; accept() or reject() first`, code);
    case 'KVC_E_NOT_VERIFYING':
      throw new KvCacheError(`${where}: no verify is open; call beginVerify() first`, code);
    case 'KVC_E_SNAPSHOT_MAGIC':
    case 'KVC_E_SNAPSHOT_VERSION':
    case 'KVC_E_SNAPSHOT_TRUNCATED':
    case 'KVC_E_SNAPSHOT_CHECKSUM':
    case 'KVC_E_SNAPSHOT_CORRUPT':
    case 'KVC_E_SNAPSHOT_TOO_LARGE':
      throw new KvCacheError(`${where}: bytes refused: ${readCString(lib().kvc_status_name(status) >>> 0)}; nothing was created`, code);
    default:
      throw new KvCacheError(`${where}: ${readCString(lib().kvc_status_name(status) >>> 0)}`, code);
  }
}

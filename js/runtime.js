// The wasm module and its heap: loading (init), typed-array views that are
// never stale, and staging memory for the arrays a call passes to C.

const WASM_ABI = 4; // must equal KVC_WASM_ABI in src/wasm/abi.c

// Staging buffers up to this size stay allocated between calls; larger ones
// (a big prefill) are released as soon as the call returns.
const KEEP_STAGING_BYTES = 1 << 20;

let wasm = null; // { exports, memory, views, staging, stagingBytes }
let initPromise = null;

/**
 * Loads and instantiates the wasm module; every other call needs it first.
 * Resolves once; later calls return the same promise.
 * @param {{ module?: WebAssembly.Module, wasm?: BufferSource | URL | string | Response }} [options]
 */
export function init(options = {}) {
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

/**
 * init() for an entry that imports the compiled module itself (a Worker:
 * workerd and wrangler compile wasm at deploy time and refuse to compile
 * bytes at run time): loads `module` unless the options name a module or bytes.
 */
export function initWithModule(module, options = {}) {
  if (options === null || typeof options !== 'object' || options.module !== undefined || options.wasm !== undefined) {
    return init(options);
  }
  return init({ ...options, module });
}

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

/** The module's exports; throws until init() has resolved. */
export function lib() {
  if (!wasm) throw new Error('kvcache-wasm: call `await init()` before using the library');
  return wasm.exports;
}

/**
 * A FinalizationRegistry that releases a collected object's pointer with
 * release(ptr) once the module is loaded (a finalizer must not throw). Where
 * the runtime has none (workerd before compatibility date 2025-05-05), one
 * that does nothing: the finalizer is a safety net, free() is the plan.
 */
export function finalizerOf(release) {
  if (typeof FinalizationRegistry !== 'function') return { register() {}, unregister() {} };
  return new FinalizationRegistry((ptr) => {
    if (wasm !== null) release(ptr);
  });
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
  return new TextDecoder().decode(u8.subarray(ptr, end));
}

/**
 * Reserves heap room for several arrays at once and returns their pointers
 * (each 16-byte aligned). Valid until the next call to stage().
 * Returns null when the heap cannot grow.
 */
export function stage(...sizes) {
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
export function unstage() {
  const w = wasm;
  if (w && w.stagingBytes > KEEP_STAGING_BYTES) {
    w.exports.free(w.staging);
    w.staging = 0;
    w.stagingBytes = 0;
  }
}

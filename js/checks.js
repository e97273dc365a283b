// Argument checks and errors. Each check names the parameter and runs before
// anything changes; C status codes that checks cannot rule out become errors
// here, with the same names.
import { lib, readCString, stage } from './runtime.js';
import { checkKeys, shown } from './options.js';

export { shown };

/** An error reported by the C library that argument checks cannot prevent;
 * `code` is the C status name (e.g. "KVC_E_NOMEM", "KVC_E_VERIFYING"). */
export class KvCacheError extends Error {
  constructor(message, code) {
    super(message);
    this.name = 'KvCacheError';
    this.code = code;
  }
}

const STATUS = [
  'KVC_OK', 'KVC_E_NULL_POINTER', 'KVC_E_MODE', 'KVC_E_NUM_KV_HEADS', 'KVC_E_HEAD_DIM',
  'KVC_E_KV_HEAD', 'KVC_E_LENGTH', 'KVC_E_NONFINITE_KEY', 'KVC_E_NONFINITE_VALUE',
  'KVC_E_NONFINITE_QUERY', 'KVC_E_PROBS', 'KVC_E_TOO_LONG', 'KVC_E_NOMEM', 'KVC_E_KIND',
  'KVC_E_VERIFYING', 'KVC_E_NOT_VERIFYING', 'KVC_E_ACCEPT', 'KVC_E_NUM_HEADS',
  'KVC_E_NUM_FEATURES', 'KVC_E_VALUE_DIM', 'KVC_E_PHASE_MASS', 'KVC_E_NONFINITE_DECAY',
  'KVC_E_LAYERS', 'KVC_E_SNAPSHOT_MAGIC', 'KVC_E_SNAPSHOT_VERSION', 'KVC_E_SNAPSHOT_TRUNCATED',
  'KVC_E_SNAPSHOT_CHECKSUM', 'KVC_E_SNAPSHOT_CORRUPT', 'KVC_E_SNAPSHOT_TOO_LARGE', 'KVC_E_BUDGET',
  'KVC_E_THREADS', 'KVC_E_PREFIX', 'KVC_E_RESIDUAL', 'KVC_E_GGUF_MAGIC', 'KVC_E_GGUF_VERSION',
  'KVC_E_GGUF_TRUNCATED', 'KVC_E_GGUF_CORRUPT', 'KVC_E_GGUF_TOO_LARGE', 'KVC_E_GGUF_INDEX',
  'KVC_E_GGUF_TYPE', 'KVC_E_WEIGHT_TYPE', 'KVC_E_ARCH', 'KVC_E_MODEL_FILE', 'KVC_E_TOKEN',
];

/** The C name of a status ("KVC_E_NOMEM"), or "status N" for one this list lacks. */
export function statusName(status) {
  return STATUS[status] ?? `status ${status}`;
}

export function checkObject(where, name, value) {
  if (value === null || typeof value !== 'object') {
    throw new TypeError(`${where}: ${name} must be an object (got ${shown(value)})`);
  }
  return value;
}

export function checkInteger(where, name, value, min, max) {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new TypeError(`${where}: ${name} must be an integer (got ${shown(value)})`);
  }
  if (value < min || value > max) {
    throw new RangeError(`${where}: ${name} must be between ${min} and ${max} (got ${value})`);
  }
  return value;
}

export function checkFloat32(where, name, value, length) {
  if (!(value instanceof Float32Array)) {
    throw new TypeError(`${where}: ${name} must be a Float32Array (got ${shown(value)})`);
  }
  if (length !== undefined && value.length !== length) {
    throw new RangeError(`${where}: ${name} must have length ${length} (got ${value.length})`);
  }
  return value;
}

/** An alive mask: absent (all alive), a Uint8Array (non-zero = alive) or an
 * array of booleans. Returns a Uint8Array of `length` bytes, or null. */
export function checkAlive(where, alive, length) {
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

/** Checks an optional `into` output array: undefined, or a Float32Array of at least `length`. */
export function checkInto(where, into, name, length) {
  if (into === undefined) return undefined;
  const value = checkFloat32(where, `into.${name}`, into[name] ?? null);
  if (value.length < length) {
    throw new RangeError(`${where}: into.${name} must have length at least ${length} (got ${value.length})`);
  }
  return value;
}

/** Bytes given as a Uint8Array, an ArrayBuffer or another view; a Uint8Array over them. */
export function checkBytes(where, name, value) {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  throw new TypeError(`${where}: ${name} must be a Uint8Array or an ArrayBuffer (got ${shown(value)})`);
}

/** An eviction policy { budget, sinks?, recent? } checked against each other. */
export function checkPolicy(where, name, policy) {
  checkObject(where, name, policy);
  checkKeys(where, policy, ['budget', 'sinks', 'recent'], name);
  const budget = checkInteger(where, `${name}.budget`, policy.budget, 1, 0x7fffffff);
  const sinks = checkInteger(where, `${name}.sinks`, policy.sinks ?? Math.min(4, budget), 0, budget);
  const recent = checkInteger(where, `${name}.recent`, policy.recent ?? Math.floor((budget - sinks) / 2), 0, budget - sinks);
  return { budget, sinks, recent };
}

/** stage() or a KvCacheError when the wasm heap cannot grow. */
export function staged(where, ...sizes) {
  const pointers = stage(...sizes);
  if (!pointers) throw outOfMemory(where);
  return pointers;
}

function outOfMemory(where) {
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
      throw new RangeError(`${where}: the cache would exceed ${0x7fffffff} positions`);
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

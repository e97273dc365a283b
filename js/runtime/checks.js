// Argument checks and errors. Each check names the parameter and runs before
// anything changes; C status codes that checks cannot rule out become errors
// with the same names (runtime.js, checkStatus).
import { C_LIMITS } from './constants.js';
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

/** A file that is not a GGUF the model reader (model/gguf.js) can use, or a
 * vocabulary the tokenizers cannot; the message says why. */
export class GgufError extends Error {
  constructor(message) {
    super(message);
    this.name = 'GgufError';
  }
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
  const budget = checkInteger(where, `${name}.budget`, policy.budget, 1, C_LIMITS.KVC_MAX_POSITIONS);
  const sinks = checkInteger(where, `${name}.sinks`, policy.sinks ?? Math.min(4, budget), 0, budget);
  const recent = checkInteger(where, `${name}.recent`, policy.recent ?? Math.floor((budget - sinks) / 2), 0, budget - sinks);
  return { budget, sinks, recent };
}

/** accept(j)'s j: a whole number, and at most the `drafts` draft positions when a verify is open (drafts undefined when none is). */
export function checkAccepted(where, j, drafts) {
  checkInteger(where, 'j', j, 0, Number.MAX_SAFE_INTEGER);
  if (drafts !== undefined && j > drafts) {
    throw new RangeError(`${where}: j must be at most the ${drafts} draft positions (got ${j})`);
  }
}

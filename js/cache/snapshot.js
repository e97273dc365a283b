// The snapshot and clone calls of both cache classes: the bytes cross the wasm
// heap through the staging area, and the C core does the rest (format, checks, CRC).
import { callC, callOut, copyOut, lib, u32At } from '../runtime/runtime.js';
import { checkBytes } from '../runtime/checks.js';

/** The snapshot of handle ptr as a new Uint8Array, through C's `${c}_snapshot_size` and `${c}_serialize` (c: 'kvc_layer' or 'kvc_model'). */
export function serializeHandle(where, c, ptr) {
  // size is 0 while a verify is open; serialize then says so itself.
  const size = lib()[`${c}_snapshot_size`](ptr) >>> 0;
  return callC(where, [size], (dst) => lib()[`${c}_serialize`](ptr, dst, size), ([dst]) => copyOut('u8', dst, size));
}

/** The handle C's `${c}_deserialize` makes of the caller's bytes (a clear error before init()). */
export function deserializeHandle(where, c, bytes) {
  const deserialize = lib()[`${c}_deserialize`];
  const data = checkBytes(where, 'bytes', bytes);
  return callC(where, [data, 4], (src, outPtr) => deserialize(src, data.length, outPtr), ([, outPtr]) => u32At(outPtr));
}

/** A copy-on-write copy of handle ptr, through C's `${c}_clone`. */
export function cloneHandle(where, c, ptr) {
  return callOut(where, (outPtr) => lib()[`${c}_clone`](ptr, outPtr));
}

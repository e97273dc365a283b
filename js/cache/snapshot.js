// The snapshot and clone calls of both cache classes: the bytes cross the wasm
// heap through the staging area, and the C core does the rest (format, checks, CRC).
import { SIZE_MAX, callC, callOut, checkStatus, copyOut, heap, lib, u32At, withStaging } from '../runtime/runtime.js';
import { checkBytes, checkInteger } from '../runtime/checks.js';

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

/**
 * The model C's kvc_model_reader makes of `chunks` (an iterable or async
 * iterable of Uint8Array pieces, `total` bytes in all): each piece is copied
 * straight to where the reader wants it (a layer's frame), so no copy of the
 * whole snapshot is made, in JavaScript or in the heap.
 */
export async function readModelInPieces(where, chunks, total) {
  checkInteger(where, 'byteLength', total, 0, SIZE_MAX);
  const api = lib();
  const reader = callOut(where, (outPtr) => api.kvc_model_reader_create(total, outPtr));
  try {
    let taken = 0;
    for await (const chunk of chunks) {
      const bytes = checkBytes(where, 'a chunk', chunk);
      if (taken + bytes.length > total) throw new RangeError(`${where}: the chunks hold more than byteLength (${total}) bytes`);
      for (let at = 0; at < bytes.length;) {
        at += withStaging(where, [4, 4], ([dstPtr, roomPtr]) => {
          checkStatus(where, api.kvc_model_reader_next(reader, dstPtr, roomPtr));
          const n = Math.min(u32At(roomPtr), bytes.length - at);
          heap().u8.set(bytes.subarray(at, at + n), u32At(dstPtr));
          checkStatus(where, api.kvc_model_reader_wrote(reader, n));
          return n;
        });
      }
      taken += bytes.length;
    }
    return callOut(where, (outPtr) => api.kvc_model_reader_finish(reader, outPtr));
  } finally {
    api.kvc_model_reader_free(reader);
  }
}

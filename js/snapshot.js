// The snapshot calls of both classes: the bytes cross the wasm heap through
// the staging area, and the C core does the rest (format, checks, CRC).
import { callC, copyOut, u32At } from './runtime.js';
import { checkBytes } from './checks.js';

/** The bytes serialize(ptr, dst, size) writes, as a new Uint8Array. */
export function serializeWith(where, size, serialize) {
  // size is 0 while a verify is open; serialize then says so itself.
  return callC(where, [size], (dst) => serialize(dst, size), ([dst]) => copyOut('u8', dst, size));
}

/** The pointer deserialize(src, len, outPtr) makes of the caller's bytes. */
export function deserializeWith(where, bytes, deserialize) {
  const data = checkBytes(where, 'bytes', bytes);
  return callC(where, [data, 4], (src, outPtr) => deserialize(src, data.length, outPtr), ([, outPtr]) => u32At(outPtr));
}

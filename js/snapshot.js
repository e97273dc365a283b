// The snapshot calls of both classes: the bytes cross the wasm heap through
// the staging area, and the C core does the rest (format, checks, CRC).
import { heap, unstage } from './runtime.js';
import { checkBytes, checkStatus, staged } from './checks.js';

/** The bytes serialize(ptr, dst, size) writes, as a new Uint8Array. */
export function serializeWith(where, size, serialize) {
  // size is 0 while a verify is open; serialize then says so itself.
  const [dst] = staged(where, size);
  try {
    checkStatus(where, serialize(dst, size));
    return heap().u8.slice(dst, dst + size);
  } finally {
    unstage();
  }
}

/** The pointer deserialize(src, len, outPtr) makes of the caller's bytes. */
export function deserializeWith(where, bytes, deserialize) {
  const data = checkBytes(where, 'bytes', bytes);
  const [src, outPtr] = staged(where, data.length, 4);
  try {
    heap().u8.set(data, src);
    checkStatus(where, deserialize(src, data.length, outPtr));
    return heap().u32[outPtr >>> 2];
  } finally {
    unstage();
  }
}

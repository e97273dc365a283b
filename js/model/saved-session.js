// A session as bytes: what LlamaSession#save writes and Llama#restoreSession
// reads, and what the store's prefix cache keeps (stored-prefixes.js).
// "KVSS" (a little-endian u32), the version, the token count, (version 2)
// the multimodal-RoPE shift, the tokens (u32 each), then the cache's
// snapshot (docs/snapshot-format.md). Version 1 had no shift.
import { KvCache } from '../cache/model.js';

const SAVED_MAGIC = 0x5353564b;
const SAVED_VERSION = 2;
const headerBytes = (version) => (version === 1 ? 12 : 16);

/** The bytes of a session: its `tokens` (one per position of `cache`, then the pending one if any), `ropeShift`, `cache`. */
export function savedBytes(tokens, ropeShift, cache) {
  const snapshot = cache.serialize();
  const header = headerBytes(SAVED_VERSION);
  const out = new Uint8Array(header + 4 * tokens.length + snapshot.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, SAVED_MAGIC, true);
  view.setUint32(4, SAVED_VERSION, true);
  view.setUint32(8, tokens.length, true);
  view.setUint32(12, ropeShift, true);
  for (let i = 0; i < tokens.length; i++) view.setUint32(header + 4 * i, tokens[i], true);
  out.set(snapshot, header + 4 * tokens.length);
  return out;
}

/**
 * What saved bytes begin with: { tokens, ropeShift, snapshotAt (where the
 * snapshot begins) }, or { need } (the bytes the header and tokens take,
 * when `data` holds fewer); refused, naming `where`, when they are no
 * saved session.
 */
function savedHeader(where, data) {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (data.length < 8) return { need: headerBytes(SAVED_VERSION) };
  if (view.getUint32(0, true) !== SAVED_MAGIC) throw new TypeError(`${where}: these bytes are not a saved session`);
  const version = view.getUint32(4, true);
  if (version !== 1 && version !== SAVED_VERSION) throw new TypeError(`${where}: a saved session of version ${version}, which this package does not read`);
  const header = headerBytes(version);
  if (data.length < header) return { need: header };
  const count = view.getUint32(8, true);
  const snapshotAt = header + 4 * count;
  if (data.length < snapshotAt) return { need: snapshotAt };
  const tokens = Array.from({ length: count }, (_, i) => view.getUint32(header + 4 * i, true));
  return { tokens, ropeShift: version === 1 ? 0 : view.getUint32(12, true), snapshotAt };
}

/** { tokens, ropeShift, cache (the caller's) } of saved bytes held whole. */
export function readSaved(where, data) {
  if (data.length < headerBytes(SAVED_VERSION)) throw new TypeError(`${where}: these bytes are not a saved session`);
  const header = savedHeader(where, data);
  if (header.need !== undefined) throw new TypeError(`${where}: the saved session is truncated`);
  return { tokens: header.tokens, ropeShift: header.ropeShift, cache: KvCache.deserialize(data.subarray(header.snapshotAt)) };
}

/**
 * readSaved() of saved bytes that come in pieces (`chunks`, `byteLength`
 * in all): the tokens from the first pieces, then -- when accept(tokens)
 * says so -- the snapshot streamed into the cache's pages
 * (KvCache.deserializeFrom). null when accept() refuses.
 */
export async function readSavedFrom(where, chunks, byteLength, accept = () => true) {
  const iterator = chunks[Symbol.asyncIterator]();
  let head = new Uint8Array(0);
  let header = savedHeader(where, head);
  try {
    while (header.need !== undefined) {
      const next = await iterator.next();
      if (next.done) throw new TypeError(`${where}: the saved session is truncated`);
      const joined = new Uint8Array(head.length + next.value.length);
      joined.set(head);
      joined.set(next.value, head.length);
      head = joined;
      header = savedHeader(where, head);
    }
    if (!accept(header.tokens)) {
      await iterator.return?.();
      return null;
    }
  } catch (error) {
    await iterator.return?.();
    throw error;
  }
  const rest = head.subarray(header.snapshotAt);
  async function* snapshot() {
    try {
      yield rest;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
    } finally {
      await iterator.return?.(); // the source closed, however the reading ends
    }
  }
  const cache = await KvCache.deserializeFrom(snapshot(), byteLength - header.snapshotAt);
  return { tokens: header.tokens, ropeShift: header.ropeShift, cache };
}

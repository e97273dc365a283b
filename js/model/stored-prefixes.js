// A session's side of the store's prefix cache (store/prefixes.js): which
// prefixes of its prompts it keeps, and how it gets the longest stored one
// back. An entry is "KVCP" (a little-endian u32), its token count, its
// multimodal-RoPE shift, the tokens (u32 each), then the cache's snapshot:
// read in pieces into the cache's pages (KvCache.deserializeFrom), checked
// by the snapshot's CRC-32 and against the prompt's tokens.
import { KvCache } from '../cache/model.js';
import { LEAST_PREFIX_TOKENS } from '../store/prefixes.js';

const ENTRY_MAGIC = 0x5043564b;
const ENTRY_HEADER_BYTES = 12;

/** The store prefix cache a session of `llama` uses: its store's, unless it was loaded with { storePrefixes: false }; else null. */
export const storedPrefixesOf = (llama) => (llama.storePrefixes && llama.store ? llama.store.prefixes : null);

/** Of a prompt's points (token counts), those a session of `llama` keeps a prefix at: none without a store's prefix cache, none too short to be worth it. */
export const keepPoints = (llama, points) => (storedPrefixesOf(llama) ? points.filter((at) => at >= LEAST_PREFIX_TOKENS) : []);

/** An entry's bytes: the tokens a cache holds, its RoPE shift, its snapshot. */
export function entryBytes(tokens, ropeShift, cache) {
  const snapshot = cache.serialize();
  const header = ENTRY_HEADER_BYTES + 4 * tokens.length;
  const out = new Uint8Array(header + snapshot.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, ENTRY_MAGIC, true);
  view.setUint32(4, tokens.length, true);
  view.setUint32(8, ropeShift, true);
  for (let i = 0; i < tokens.length; i++) view.setUint32(ENTRY_HEADER_BYTES + 4 * i, tokens[i], true);
  out.set(snapshot, header);
  return out;
}

/**
 * The longest stored prefix of `ids` (at most `most` tokens) for a session
 * of `llama` in cache `mode`: { length, cache, ropeShift } -- a cache the
 * caller owns -- or null. An entry that does not read back (damaged, cut
 * short, of other tokens) is deleted and the next one tried.
 */
export async function restoreLongest(llama, mode, ids, most) {
  const stored = storedPrefixesOf(llama);
  if (!stored || most < LEAST_PREFIX_TOKENS) return null;
  const model = llama.digest;
  for (const { name, length } of await stored.candidates(model, mode, ids, most).catch(() => [])) {
    try {
      const entry = await stored.read(model, mode, name);
      if (!entry) continue;
      const restored = await readEntry(entry, ids, length);
      if (restored) return restored;
    } catch {
      // Damaged: deleted, and its tokens computed again.
    }
    await stored.remove(model, mode, name).catch(() => {});
  }
  return null;
}

// An entry's header and tokens (checked against ids), then its cache from the rest of its pieces; null if not ids' prefix.
async function readEntry({ byteLength, chunks }, ids, length) {
  const iterator = chunks[Symbol.asyncIterator]();
  let first = (await iterator.next()).value ?? new Uint8Array(0);
  const header = ENTRY_HEADER_BYTES + 4 * length;
  if (first.length < header) {
    await iterator.return?.();
    return null; // a header longer than a read piece is a prefix longer than anyone's prompt
  }
  const view = new DataView(first.buffer, first.byteOffset, first.byteLength);
  if (view.getUint32(0, true) !== ENTRY_MAGIC || view.getUint32(4, true) !== length) throw new Error('not an entry of its name');
  for (let i = 0; i < length; i++) {
    if (view.getUint32(ENTRY_HEADER_BYTES + 4 * i, true) !== ids[i]) {
      await iterator.return?.();
      return null;
    }
  }
  const ropeShift = view.getUint32(8, true);
  first = first.subarray(header);
  async function* rest() {
    try {
      yield first;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
    } finally {
      await iterator.return?.(); // the file closed, however the reading ends
    }
  }
  const cache = await KvCache.deserializeFrom(rest(), byteLength - header);
  if (cache.nextPosition !== length) {
    cache.free();
    throw new Error('its cache holds other positions than its tokens');
  }
  return { length, cache, ropeShift };
}

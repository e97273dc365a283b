// A session's side of the store's prefix cache (store/prefixes.js): which
// prefixes of its prompts it keeps, and how it gets the longest stored one
// back. An entry is a saved session (saved-session.js) of the tokens a
// cache holds: read in pieces, its tokens checked against the prompt's
// before its snapshot streams into the cache's pages, checked by the
// snapshot's CRC-32.
import { readSavedFrom } from './saved-session.js';
import { LEAST_PREFIX_TOKENS } from '../store/prefixes.js';

/** The store prefix cache a session of `llama` uses: its store's, unless it was loaded with { storePrefixes: false }; else null. */
export const storedPrefixesOf = (llama) => (llama.storePrefixes && llama.store ? llama.store.prefixes : null);

/**
 * Of a prompt's points (token counts), in order, those a session of `llama`
 * keeps a prefix at: none without a store's prefix cache, else each at
 * least LEAST_PREFIX_TOKENS beyond the one before it, the first beyond
 * `since` (what the session has stored already).
 */
export function keepPoints(llama, points, since) {
  if (!storedPrefixesOf(llama)) return [];
  const kept = [];
  for (const at of [...points].sort((a, b) => a - b)) {
    if (at - (kept.at(-1) ?? since) >= LEAST_PREFIX_TOKENS) kept.push(at);
  }
  return kept;
}

/**
 * The longest stored prefix of `ids` (at most `most` tokens) for a session
 * of `llama` in cache `mode`: { length, cache, ropeShift } -- a cache the
 * caller owns -- or null. An entry that does not read back (damaged, cut
 * short) is deleted and the next one tried, as is one of other tokens
 * (whose name's hash is the prompt's by chance), which stays.
 */
export async function restoreLongest(llama, mode, ids, most) {
  const stored = storedPrefixesOf(llama);
  if (!stored || most < LEAST_PREFIX_TOKENS) return null;
  const model = llama.digest;
  for (const { name, length } of await stored.candidates(model, mode, ids, most).catch(() => [])) {
    try {
      const entry = await stored.read(model, mode, name);
      const restored = entry && (await readEntry(entry, ids, length));
      if (restored) return restored;
    } catch {
      // Damaged: deleted, and its tokens computed again.
      await stored.remove(model, mode, name).catch(() => {});
    }
  }
  return null;
}

// An entry's cache, when its tokens are the first `length` of ids (else null).
async function readEntry({ byteLength, chunks }, ids, length) {
  const same = (tokens) => tokens.length === length && tokens.every((t, i) => t === ids[i]);
  const saved = await readSavedFrom('the store\'s prefix cache', chunks, byteLength, same);
  if (!saved) return null;
  if (saved.cache.nextPosition !== length) {
    saved.cache.free();
    throw new Error('its cache holds other positions than its tokens');
  }
  return { length, cache: saved.cache, ropeShift: saved.ropeShift };
}

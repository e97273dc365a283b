// PrefixCache: model caches kept under the tokens they hold, found again by
// the longest common prefix (src/core/prefix.c holds the logic).
import { SIZE_MAX, callC, callOut, disposeSymbol, lib, ownedObjects, u32At } from '../runtime/runtime.js';
import { checkKeys } from '../runtime/options.js';
import { KvCacheError, checkInteger, checkObject, shown } from '../runtime/checks.js';
import { KvCache, adoptModel, modelPointer } from './model.js';

const owned = ownedObjects((ptr) => lib().kvc_prefix_cache_free(ptr));
const MAX_TOKEN = 0xffffffff;
const MAX_BUDGET = SIZE_MAX; // more than the heap can hold

/** Token ids as a Uint32Array: an array or a typed array of integers 0 .. 2^32 - 1. */
function checkTokens(where, tokens) {
  if (tokens instanceof Uint32Array) return tokens;
  const integers = Array.isArray(tokens) || (ArrayBuffer.isView(tokens) && !(tokens instanceof DataView) &&
    !(tokens instanceof Float32Array) && !(tokens instanceof Float64Array));
  if (!integers) throw new TypeError(`${where}: tokens must be an array or an integer typed array of token ids (got ${shown(tokens)})`);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > MAX_TOKEN) {
      throw new TypeError(`${where}: tokens[${i}] must be an integer between 0 and ${MAX_TOKEN} (got ${shown(t)})`);
    }
  }
  return Uint32Array.from(tokens);
}

/**
 * A cache of prefixes for many conversations on one device or edge isolate:
 *   const prefixes = new PrefixCache({ budgetBytes: 64 << 20 });
 *   prefixes.add(promptTokens, cache);          // keeps a copy-on-write fork
 *   const hit = prefixes.match(newTokens);      // { length, cache } or null
 * An entry costs the pages it keeps alive, which the caches forked from it
 * share; when the entries' bytes (each page once) exceed budgetBytes, the
 * least recently added or matched go.
 */
export class PrefixCache {
  #ptr = 0;
  #budgetBytes;

  constructor(options) {
    const where = 'new PrefixCache';
    lib(); // a clear error before init()
    checkObject(where, 'options', options);
    checkKeys(where, options, ['budgetBytes']);
    const budget = options.budgetBytes;
    if (budget !== Infinity) checkInteger(where, 'options.budgetBytes', budget, 0, Number.MAX_SAFE_INTEGER);
    this.#budgetBytes = budget;
    this.#ptr = callOut(where, (outPtr) => lib().kvc_prefix_cache_create(Math.min(budget, MAX_BUDGET), outPtr));
    owned.adopt(this, this.#ptr);
  }

  #live(where) {
    if (!this.#ptr) throw new TypeError(`PrefixCache.${where}: the prefix cache was freed`);
    return this.#ptr;
  }

  /** The budget it was made with. */
  get budgetBytes() { this.#live('budgetBytes'); return this.#budgetBytes; }
  /** Entries held. */
  get size() { return lib().kvc_prefix_cache_size(this.#live('size')) >>> 0; }
  /** Bytes the entries hold, each page counted once (pages shared with live caches included). */
  get bytes() { return lib().kvc_prefix_cache_bytes(this.#live('bytes')) >>> 0; }

  /**
   * Keeps a fork of `cache` under `tokens`, the token ids its positions
   * hold (tokens.length === cache.nextPosition); the caller keeps its cache. An
   * entry of the same tokens is replaced. Returns whether the entry stayed
   * within the budget (false: it alone exceeds it). Refused, changing
   * nothing: a cache with linear layers, that evicted positions, of another
   * geometry or mode than the entries', or mid-verify.
   */
  add(tokens, cache) {
    const where = 'PrefixCache.add';
    const ptr = this.#live('add');
    const ids = checkTokens(where, tokens);
    const model = KvCache[modelPointer](where, 'cache', cache);
    if (ids.length !== cache.nextPosition) {
      throw new RangeError(`${where}: tokens must hold one id per position of the cache (${cache.nextPosition}; got ${ids.length})`);
    }
    for (let i = 0; i < cache.numLayers; i++) {
      if (cache.layer(i).kind === 'linear') {
        throw new KvCacheError(`${where}: layer ${i} of the cache is linear: a prefix of its state cannot be taken; nothing was changed`, 'KVC_E_KIND');
      }
    }
    return callC(where, [ids, 4], (tokensPtr, keptPtr) => lib().kvc_prefix_cache_add(ptr, tokensPtr, ids.length, model, keptPtr),
      ([, keptPtr]) => u32At(keptPtr) !== 0);
  }

  /**
   * The entry sharing the longest prefix with `tokens`, when that prefix
   * holds at least Q8_WINDOW (64) tokens: { length, cache }, cache a new
   * KvCache (the caller's to free) holding those `length` positions, forked
   * from the entry. Else null.
   */
  match(tokens) {
    const where = 'PrefixCache.match';
    const ptr = this.#live('match');
    const ids = checkTokens(where, tokens);
    const { length, adopted } = callC(where, [ids, 4, 4],
      (tokensPtr, lengthPtr, outPtr) => lib().kvc_prefix_cache_match(ptr, tokensPtr, ids.length, lengthPtr, outPtr),
      ([, lengthPtr, outPtr]) => ({ length: u32At(lengthPtr), adopted: u32At(outPtr) }));
    return adopted ? { length, cache: KvCache[adoptModel](adopted) } : null;
  }

  /** Drops the entry of exactly `tokens`; whether there was one. */
  delete(tokens) {
    const where = 'PrefixCache.delete';
    const ptr = this.#live('delete');
    const ids = checkTokens(where, tokens);
    return callC(where, [ids, 4], (tokensPtr, deletedPtr) => lib().kvc_prefix_cache_delete(ptr, tokensPtr, ids.length, deletedPtr),
      ([, deletedPtr]) => u32At(deletedPtr) !== 0);
  }

  /** Drops every entry. */
  clear() {
    lib().kvc_prefix_cache_clear(this.#live('clear'));
  }

  /** Releases the entries now (caches forked from them keep their pages). Idempotent. */
  free() {
    this.#ptr = owned.release(this, this.#ptr);
  }

  [disposeSymbol]() { this.free(); }

  toString() {
    return this.#ptr ? `PrefixCache{size=${this.size} bytes=${this.bytes} budget=${this.#budgetBytes}}` : 'PrefixCache{freed}';
  }
}

// KvCache: a model's cache, one layer per transformer layer (full or
// linear), with the speculative session that reaches every layer or none.
import { callC, checkStatus, disposeSymbol, lib, ownedObjects, u32At } from '../runtime/runtime.js';
import { KvCacheError, checkAccepted, checkInteger, checkObject, checkPolicy, shown } from '../runtime/checks.js';
import { MAX_LAYERS, MAX_POSITIONS, createLayer, wrapLayer } from './layer.js';
import { checkKeys, checkUnused } from '../runtime/options.js';
import { cloneHandle, deserializeHandle, readModelInPieces, serializeHandle } from './snapshot.js';

const adoptPointer = Symbol('adoptPointer');
/** KvCache[modelPointer](where, name, cache) and KvCache[adoptModel](ptr): for PrefixCache. */
export const modelPointer = Symbol('modelPointer');
export const adoptModel = Symbol('adoptModel');
const owned = ownedObjects((ptr) => lib().kvc_model_free(ptr));

// The layer specs of a config: { layers: [...] } or a uniform one.
const UNIFORM_OPTIONS = ['numLayers', 'numKvHeads', 'headDim', 'mode', 'residualRows', 'maxRows', 'sinks', 'recent'];

function layerSpecs(where, config) {
  checkObject(where, 'config', config);
  if (config.layers !== undefined) {
    for (const key of UNIFORM_OPTIONS) checkUnused(where, config, key, 'with config.layers, each layer has its own options');
    checkKeys(where, config, ['layers'], 'config');
    if (!Array.isArray(config.layers) || config.layers.length === 0 || config.layers.length > MAX_LAYERS) {
      throw new TypeError(`${where}: config.layers must be an array of 1 to ${MAX_LAYERS} layer configs`);
    }
    config.layers.forEach((spec, i) => checkOwner(where, config.layers, i));
    return config.layers;
  }
  checkKeys(where, config, UNIFORM_OPTIONS, 'config');
  const numLayers = checkInteger(where, 'numLayers', config.numLayers, 1, MAX_LAYERS);
  const { numKvHeads, headDim, mode, residualRows, maxRows, sinks, recent } = config;
  return Array.from({ length: numLayers }, () => ({ kind: 'full', numKvHeads, headDim, mode, residualRows, maxRows, sinks, recent }));
}

// A shared layer's owner: an earlier layer of rows (full or window) of the list.
function checkOwner(where, specs, i) {
  if (specs[i]?.kind !== 'shared') return;
  const name = `layers[${i}].owner`;
  const owner = checkInteger(where, name, specs[i].owner, 0, specs.length - 1);
  if (owner >= i) throw new RangeError(`${where}: ${name} must name an earlier layer (got ${owner}, not below ${i})`);
  const kind = specs[owner]?.kind ?? 'full';
  if (kind !== 'full' && kind !== 'window') {
    throw new RangeError(`${where}: ${name} must name a full or window layer, whose rows it reads (layer ${owner} is ${shown(kind)})`);
  }
}

/**
 * A model's cache.
 *   new KvCache({ numLayers, numKvHeads, headDim, mode?, residualRows? })      uniform
 *   new KvCache({ layers: [{ kind: 'full', numKvHeads, headDim, mode? },
 *                          { kind: 'linear', numHeads, numFeatures, valueDim, phaseMass? },
 *                          { kind: 'shared', owner: 0 }, …] })
 * A shared layer holds nothing: it reads the rows of layer `owner`, and the
 * model's operations reach that layer once.
 */
export class KvCache {
  #ptr = 0;
  #layers = [];

  constructor(config) {
    const where = 'new KvCache';
    let ptr = config?.[adoptPointer];
    if (!ptr) {
      lib(); // a clear error before init()
      const specs = layerSpecs(where, config);
      const layerPtrs = [];
      try {
        specs.forEach((spec, i) => layerPtrs.push(createLayer(`${where}: layers[${i}]`, spec)));
        ptr = callC(where, [Uint32Array.from(layerPtrs), 4],
          (listPtr, outPtr) => lib().kvc_model_create(listPtr, layerPtrs.length, outPtr), ([, outPtr]) => u32At(outPtr));
      } catch (error) {
        for (const layerPtr of layerPtrs) lib().kvc_layer_free(layerPtr);
        throw error;
      }
    }
    this.#ptr = ptr;
    const owner = { isLive: () => this.#ptr !== 0 };
    const count = lib().kvc_model_num_layers(ptr) >>> 0;
    this.#layers = Array.from({ length: count }, (_, i) => wrapLayer(lib().kvc_model_layer(ptr, i) >>> 0, owner));
    owned.adopt(this, ptr);
  }

  #live(where) {
    if (!this.#ptr) throw new TypeError(`KvCache.${where}: the cache was freed`);
    return this.#ptr;
  }

  /** The live C model of `cache`, for the package's other classes (PrefixCache). */
  static [modelPointer](where, name, cache) {
    if (!(cache instanceof KvCache)) throw new TypeError(`${where}: ${name} must be a KvCache (got ${shown(cache)})`);
    if (!cache.#ptr) throw new TypeError(`${where}: ${name} was freed`);
    return cache.#ptr;
  }

  /** A KvCache that owns the C model at `ptr`. */
  static [adoptModel](ptr) {
    return new KvCache({ [adoptPointer]: ptr });
  }

  get numLayers() { this.#live('numLayers'); return this.#layers.length; }

  /** Layer `index`, owned by this cache: use it as any LayerKvCache, but do not free it. */
  layer(index) {
    this.#live('layer');
    checkInteger('KvCache.layer', 'index', index, 0, this.#layers.length - 1);
    return this.#layers[index];
  }

  /** layer(index).append(k, v, alive) */
  appendLayer(index, k, v, alive) {
    this.layer(index).append(k, v, alive);
  }

  /** layer(index).appendBatch(k, v, alive) */
  appendLayerBatch(index, k, v, alive) {
    this.layer(index).appendBatch(k, v, alive);
  }

  /** layer(index).attend(q, kvHead, into) */
  attendLayer(index, q, kvHead, into) {
    return this.layer(index).attend(q, kvHead, into);
  }

  /** layer(index).attendHeads(q, into): the whole layer's query heads in one call. */
  attendLayerHeads(index, q, into) {
    return this.layer(index).attendHeads(q, into);
  }

  /** The least next position of its layers: where the next token goes (evictions do not move it). */
  get nextPosition() { return lib().kvc_model_seq_len(this.#live('nextPosition')) >>> 0; }
  /**
   * nextPosition under its earlier name, kept for one release.
   * @deprecated Use nextPosition: a layer's seqLen is another thing, the
   * slots it holds (fewer once it evicts); see rows for the most of those.
   */
  get seqLen() { return lib().kvc_model_seq_len(this.#live('seqLen')) >>> 0; }
  /** The most rows a layer holds: what a forward pass's attention reads (below nextPosition once a layer evicts). */
  get rows() {
    this.#live('rows');
    return this.#layers.reduce((most, layer) => Math.max(most, layer.kind === 'full' ? layer.seqLen : 0), 0);
  }
  get memoryBytes() { return lib().kvc_model_memory_bytes(this.#live('memoryBytes')) >>> 0; }
  get capacityBytes() { return lib().kvc_model_capacity_bytes(this.#live('capacityBytes')) >>> 0; }
  /** The part of memoryBytes held in pages shared with forks (clone, PrefixCache). */
  get sharedBytes() { return lib().kvc_model_shared_bytes(this.#live('sharedBytes')) >>> 0; }
  /** memoryBytes of each layer, in order; they sum to memoryBytes. */
  get memoryBytesByLayer() {
    this.#live('memoryBytesByLayer');
    return this.#layers.map((layer) => layer.memoryBytes);
  }
  /** True while a speculative verify is open. */
  get verifying() { return lib().kvc_model_verifying(this.#live('verifying')) !== 0; }

  /** Rewinds every layer by n positions (see LayerKvCache#truncateLast); a model with linear layers rolls back with a verify instead. */
  truncateLast(n) {
    const where = 'KvCache.truncateLast';
    const ptr = this.#live('truncateLast');
    checkInteger(where, 'n', n, 0, Number.MAX_SAFE_INTEGER);
    const linear = this.#layers.findIndex((layer) => layer.kind === 'linear');
    if (linear >= 0) {
      throw new KvCacheError(`${where}: layer ${linear} is linear and its state cannot be truncated; roll back with beginVerify() and accept()`, 'KVC_E_KIND');
    }
    checkStatus(where, lib().kvc_model_truncate_last(ptr, Math.min(n, MAX_POSITIONS)));
  }

  /** Empties every layer and ends a verify. */
  clear() {
    lib().kvc_model_clear(this.#live('clear'));
  }

  /**
   * Opens a speculative verify in every layer: append the k draft positions
   * to every layer (full layers append rows, linear layers step tentatively),
   * then accept(j).
   */
  beginVerify() {
    checkStatus('KvCache.beginVerify', lib().kvc_model_begin_verify(this.#live('beginVerify')));
  }

  /**
   * Keeps the first j of the k draft positions in every layer and closes the
   * verify: full layers drop the last k − j rows, linear layers commit the
   * state after step j. The result is bit-identical to having appended only
   * those j positions.
   */
  accept(j) {
    const where = 'KvCache.accept';
    const ptr = this.#live('accept');
    // A shared layer's drafts are its owner's rows, a none layer has none: neither holds any to compare.
    const drafts = this.verifying ? this.#layers.map((layer) => (layer.kind === 'shared' || layer.kind === 'none' ? null : layer.draftLen)) : [];
    const first = drafts.findIndex((k) => k !== null);
    const differs = drafts.findIndex((k) => k !== null && k !== drafts[first]);
    if (differs >= 0) {
      throw new KvCacheError(`${where}: every layer must hold the same draft positions (layer ${first} has ${drafts[first]}, layer ${differs} has ${drafts[differs]}); nothing was changed`, 'KVC_E_ACCEPT');
    }
    checkAccepted(where, j, this.verifying ? drafts[first] ?? 0 : undefined);
    checkStatus(where, lib().kvc_model_accept(ptr, j));
  }

  /** Drops every draft position and closes the verify: accept(0). */
  reject() {
    this.accept(0);
  }

  /** evict(policy) on every full layer, each by its own importance (see LayerKvCache#evict); all or none. */
  evict(policy) {
    const where = 'KvCache.evict';
    const ptr = this.#live('evict');
    const { budget, sinks, recent } = checkPolicy(where, 'policy', policy);
    if (this.#ptr !== ptr) throw new TypeError(`${where}: the cache was freed`); // by a getter of policy
    checkStatus(where, lib().kvc_model_evict(ptr, budget, sinks, recent));
  }

  /** Every layer as bytes in one snapshot; KvCache.deserialize restores it. Not during a verify. */
  serialize() {
    return serializeHandle('KvCache.serialize', 'kvc_model', this.#live('serialize'));
  }

  /** A new model cache from serialize()'s bytes; refused bytes throw a KvCacheError saying why. */
  static deserialize(bytes) {
    return new KvCache({ [adoptPointer]: deserializeHandle('KvCache.deserialize', 'kvc_model', bytes) });
  }

  /**
   * deserialize() of a snapshot that comes in pieces -- `chunks`, an
   * iterable or async iterable of Uint8Arrays (a file read piece by piece, a
   * response's body), `byteLength` bytes in all -- read into the cache's
   * pages as they come, holding at most one layer's bytes besides: no whole
   * copy of the snapshot in JavaScript or in the heap. Refuses what
   * deserialize refuses.
   */
  static async deserializeFrom(chunks, byteLength) {
    return new KvCache({ [adoptPointer]: await readModelInPieces('KvCache.deserializeFrom', chunks, byteLength) });
  }

  /**
   * An independent copy of every layer, copy-on-write: O(pages), no row
   * copied until either cache writes into a shared page. Not during a verify.
   */
  clone() {
    return new KvCache({ [adoptPointer]: cloneHandle('KvCache.clone', 'kvc_model', this.#live('clone')) });
  }

  /** Releases every layer now. Idempotent; later calls, also through layer(i), throw. */
  free() {
    this.#ptr = owned.release(this, this.#ptr);
  }

  [disposeSymbol]() { this.free(); }

  toString() {
    if (!this.#ptr) return 'KvCache{freed}';
    return `KvCache{layers=${this.#layers.length} seq_len=${this.nextPosition} memory_bytes=${this.memoryBytes}}`;
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return this.toString();
  }
}


// Types of kvcache-wasm. The C header include/kvcache.h documents the rules
// behind each call; these are the JavaScript shapes.

/** How one component (keys or values) is stored: f32; int8 codes with a
 * per-row scale against a per-channel field (q8); or 4-bit codes against the
 * same field, with a 2-bit shift per 16 channels and the newest
 * `residualRows` rows kept f32 (q4). */
export type KvComponent = 'f32' | 'q8' | 'q4';
/** A mode's name: "q8" both components int8, "q8k" keys only, "q8v" values
 * only; "q4", "q4k", "q4v" the same in 4 bits; "q8k+q4v", "q4k+q8v" mixed. */
export type KvModeName = 'f32' | 'q8' | 'q8k' | 'q8v' | 'q4' | 'q4k' | 'q4v' | 'q8k+q4v' | 'q4k+q8v';
/** How keys (K) and values (V) are stored: a name, or each component ('f32' where left out),
 * as llama.cpp's --cache-type-k / --cache-type-v. */
export type KvMode = KvModeName | { keys?: KvComponent; values?: KvComponent };

declare global {
  interface SymbolConstructor {
    /** The classes' [Symbol.dispose] (for `using`), declared here too for a lib older than esnext.disposable. */
    readonly dispose: unique symbol;
  }
}

/** A per-head mask: `false` / `0` stores nothing for that head. */
export type AliveMask = Uint8Array | readonly boolean[];

export interface InitOptions {
  /** A precompiled module, for runtimes that cannot compile wasm from bytes (Cloudflare workerd). */
  module?: WebAssembly.Module;
  /** The module's bytes, or where to fetch them (a string: against the page's address; in Node, Deno and Bun a file
   * path). Default: the package's own build (see `isa`); in the Worker entry (the "workerd" export condition),
   * dist/kvcache.wasm imported as a module, compiled at deploy time. */
  wasm?: BufferSource | URL | string | Response;
  /** Where a file of the package is when you host it yourself (a bundler that does not emit files referenced by
   * `new URL('…', import.meta.url)`, such as esbuild, or a CDN): called with 'kvcache.wasm', 'kvcache-relaxed.wasm'
   * and 'pool-worker.js' (a Worker's script must be on the page's origin), it returns a URL or a string (as `wasm`). */
  locateFile?: (name: 'kvcache.wasm' | 'kvcache-relaxed.wasm' | 'pool-worker.js') => URL | string;
  /** Which build to load: 'wasm-relaxed-simd' (fused multiply-add; the default where the engine runs relaxed SIMD as
   * the standard says, checked by a probe) or 'wasm-simd128' (every engine; the default elsewhere, and in the Worker
   * entry, where the probe cannot compile). Not with `module` or `wasm`. */
  isa?: 'wasm-simd128' | 'wasm-relaxed-simd';
  // Any other key is refused with a TypeError naming the nearest one ('treads': did you mean 'threads'?).
  /** Threads calls run on, the calling one included: 1 to 64. Default: one per core (up to 8) where workers and
   * shared memory exist (Node, Deno, Bun, cross-origin isolated pages), else 1. An explicit count that cannot
   * run rejects, naming why. */
  threads?: number;
  /** The most bytes the module's memory may grow to (a multiple of 64 KiB is used): from 1 MiB to 4 GiB (the default). */
  maxMemory?: number;
}

/** Loads the wasm module and starts its threads. Call once and await it before anything else; later calls check
 * their options and return the same promise. */
export function init(options?: InitOptions): Promise<void>;
export default init;

/** The threads calls run on now: the calling thread and the pool's running workers. */
export function threadCount(): number;
export interface ThreadInfo {
  /** Running now (threadCount()). */
  threads: number;
  /** What init() aimed for. */
  wanted: number;
  /** Why `threads` is below `wanted` (no workers here, a page not cross-origin isolated, a worker that failed), or null. */
  reason: string | null;
  /** The most threads a call uses (setThreadLimit). */
  limit: number;
}
export function threadInfo(): ThreadInfo;
/** Calls use at most `limit` threads from now on (1: the single-threaded package, workers idle). Results never depend on it. */
export function setThreadLimit(limit: number): void;
/** Stops the workers and waits for them; later calls run on the calling thread. Idle workers never keep a process
 * alive, so this is for releasing them early, not a duty. */
export function shutdown(): Promise<void>;

/** An operation of a forward pass that a profile times. */
export type ProfileOperation = 'embed' | 'norm' | 'quantize' | 'qkv' | 'rope' | 'append' | 'attend' | 'wo' | 'recurrent' |
  'gateUp' | 'activation' | 'down' | 'residual' | 'logits' | 'poolWait';
/** The operations, in the module's order. */
export const PROFILE_OPERATIONS: readonly ProfileOperation[];
export interface Profile<T> {
  /** What `run` returned. */
  value: T;
  /** Its wall time, ms. */
  totalMs: number;
  /** Milliseconds of each operation of the forward passes made on this thread meanwhile; they exclude `poolWait` (the
   * wait for pool threads), so they sum to the passes' time; the rest of totalMs is the caller's (sampling, JS). */
  ms: Record<ProfileOperation, number>;
}
/** Runs `run` with a profile on: where the time of its forward passes went, operation by operation. One at a time. */
export function profile<T>(run: () => T | Promise<T>): Promise<Profile<Awaited<T>>>;

/** The kernel set the module runs: "wasm-relaxed-simd" or "wasm-simd128". */
export function kernelIsa(): string;
export interface KernelInfo {
  /** The build running (kernelIsa()). */
  isa: 'wasm-simd128' | 'wasm-relaxed-simd';
  /** The build init() aimed for: the one `isa` named, else 'wasm-relaxed-simd'; with `module` or `wasm`, the one given. */
  wanted: 'wasm-simd128' | 'wasm-relaxed-simd';
  /** Why `isa` is not `wanted` (this engine has no relaxed SIMD; the relaxed file could not be fetched or compiled,
   * so the SIMD128 one runs), or null. */
  reason: string | null;
}
export function kernelInfo(): KernelInfo;
/** The C library's version. */
export function version(): string;

export interface MemoryStats {
  /** The sum of every live cache's memoryBytes, each page shared by forks counted once. */
  cacheBytes: number;
  /** The size of the wasm memory (it never shrinks). */
  heapBytes: number;
  /** Live C layers (a KvCache's included) and pages. */
  layers: number;
  pages: number;
}
/** What the caches of this module hold. */
export function memoryStats(): MemoryStats;

export interface AttentionResult {
  /** The attention output, [headDim]. */
  out: Float32Array;
  /** The softmax weight of each stored row of the head, in position order. */
  probs: Float32Array;
}

/** f32 softmax attention of q [d] over keys and values [n × d] row-major. */
export function attentionHead(
  q: Float32Array, keys: Float32Array, values: Float32Array, n: number, d: number,
): AttentionResult;

/** A full-attention layer: rows of keys and values per KV head. */
export interface FullLayerOptions {
  kind?: 'full';
  /** KV heads, 1 ..= 4096. */
  numKvHeads: number;
  /** Channels per head, 1 ..= 4096. */
  headDim: number;
  /** Storage mode, default 'f32'. */
  mode?: KvMode;
  /** q4 components: the newest rows kept (and read) in f32, 0 ..= 4096, default 64. */
  residualRows?: number;
  /** Bound the cache: an append that would pass maxRows evicts first (see LayerKvCache#setMaxRows). */
  maxRows?: number;
  /** Eviction's sinks and recent counts for maxRows (evict's defaults when left out). */
  sinks?: number;
  recent?: number;
}

/** What evict keeps: at most `budget` positions — the first `sinks` (default min(4, budget)), the
 * `recent` newest (default half of the rest), and the most attended (imp) in between. */
export interface EvictionPolicy {
  budget: number;
  sinks?: number;
  recent?: number;
}

/** A sliding-window layer (Gemma 3's local layers): rows as a full layer's, of which the query at
 * position p attends p − window + 1 … p; the layer lets go of the rows no later query sees. */
export interface WindowLayerOptions {
  kind: 'window';
  /** Positions a query sees, itself included: 1 ..= 2^31 − 1. */
  window: number;
  /** Positions kept beyond the window so that truncateLast(n ≤ rollback) is always taken; default 0. */
  rollback?: number;
  /** KV heads, 1 ..= 4096. */
  numKvHeads: number;
  /** Channels per head, 1 ..= 4096. */
  headDim: number;
  /** Storage mode, default 'f32'. */
  mode?: KvMode;
  /** q4 components: the newest rows kept (and read) in f32, 0 ..= 4096, default 64. */
  residualRows?: number;
}

/** A linear-attention layer: a recurrent f64 state [numHeads × numFeatures × valueDim]. */
export interface LinearLayerOptions {
  kind: 'linear';
  /** Heads, 1 ..= 4096. */
  numHeads: number;
  /** Features per head, 1 ..= 4096 (even for the vmf_phase feature map). */
  numFeatures: number;
  /** Values per head, 1 ..= 4096. */
  valueDim: number;
  /** vmf_phase: m = 1 / (1 + phaseMass); ≥ 0, default 0. */
  phaseMass?: number;
}

/** A shared layer (Gemma 4's shared-KV blocks): it holds nothing, and in a KvCache reads the rows of
 * layer `owner`, an earlier full or window layer of the same cache. It costs no memory, and the cache's
 * operations (truncateLast, beginVerify/accept, evict, clone, serialize) reach its owner once. */
export interface SharedLayerOptions {
  kind: 'shared';
  /** The index of the layer whose rows it reads: in a KvCache, an earlier full or window layer. */
  owner: number;
}

/** A none layer (Nemotron-H's MLP-only blocks): it holds nothing and takes no positions; the cache's
 * operations leave it as it is. */
export interface NoneLayerOptions {
  kind: 'none';
}

export type LayerKvCacheOptions = FullLayerOptions | WindowLayerOptions | LinearLayerOptions | SharedLayerOptions | NoneLayerOptions;

/** Thrown for what argument checks cannot prevent; `code` is the C status name (e.g. "KVC_E_NOMEM"). */
export class KvCacheError extends Error {
  constructor(message: string, code: string);
  readonly code: string;
}

/** Positions below this stay f32 in quantized components; the per-channel field freezes when it is appended. */
export const Q8_WINDOW: 64;
/** Every mode name, in the C library's order, and every component storage. */
export const MODES: readonly KvModeName[];
export const COMPONENTS: readonly KvComponent[];
/** The default residual window of q4 components, and its largest. */
export const Q4_RESIDUAL_ROWS: 64;
export const Q4_MAX_RESIDUAL_ROWS: 4096;
export const MAX_KV_HEADS: 4096;
export const MAX_HEAD_DIM: 4096;
export const MAX_POSITIONS: number;

/** What every class holding wasm memory has. */
export interface WasmHandle {
  /** Releases the wasm memory now; idempotent, later calls of other methods throw (LayerKvCache: throws for a layer a KvCache owns). */
  free(): void;
  /** free(), for `using`. */
  [Symbol.dispose](): void;
  toString(): string;
}

/** The KV cache of one transformer layer: full attention (rows, head-major) or linear attention (a state). */
export interface LayerKvCache extends WasmHandle {}
export class LayerKvCache {
  constructor(options: LayerKvCacheOptions);

  readonly kind: 'full' | 'window' | 'linear' | 'shared' | 'none';
  /** A shared layer's owner: the index of the layer of its KvCache whose rows it reads (null for other kinds). */
  readonly owner: number | null;
  /** A window layer's window (0 for other kinds). */
  readonly window: number;
  /** A window layer's rollback: positions kept beyond the window for truncateLast (0 for other kinds). */
  readonly rollback: number;
  /** KV heads of a full layer (0 for a linear one). */
  readonly numKvHeads: number;
  /** Channels per head of a full layer (0 for a linear one). */
  readonly headDim: number;
  /** Storage mode of a full layer, by name (null for a linear one). */
  readonly mode: KvModeName | null;
  /** The same per component (null for a linear one). */
  readonly components: { keys: KvComponent; values: KvComponent } | null;
  /** q4 components: the newest rows read in f32 (0 for a linear layer). */
  readonly residualRows: number;
  /** The most positions truncateLast may take back leaving the cache bit for bit as if they had
   * never been appended: Infinity without q4 components; with them >= 64 after appends, less after a
   * truncation, an eviction or a restore (a deeper truncation is safe, read through 4 bits). */
  readonly exactRollback: number;
  /** Positions held: appended (dead heads included) minus truncated and evicted. */
  readonly seqLen: number;
  /** The absolute position the next append gets (its RoPE position): seqLen until the cache evicts. */
  readonly nextPosition: number;
  /** Bytes of data held (rows, scales, fields, imp, alive map); see the README's formula. */
  readonly memoryBytes: number;
  /** Bytes allocated, reserved capacity and bookkeeping included. */
  readonly capacityBytes: number;
  /** The part of memoryBytes held in pages shared with a fork (clone) or the cache it was forked from. */
  readonly sharedBytes: number;
  /** True while the q8 per-channel field is frozen. */
  readonly fieldFrozen: boolean;
  /** A copy of the importance vector, one slot per position. */
  readonly imp: Float32Array;
  /** Linear layers (0 for a full one): heads, features, values per head, phaseMass. */
  readonly numHeads: number;
  readonly numFeatures: number;
  readonly valueDim: number;
  readonly phaseMass: number;
  /** Steps a linear layer has taken, tentative ones included. */
  readonly steps: number;
  /** A copy of the committed linear state (empty for a full layer). */
  readonly linearState: Float64Array;
  /** Copies of the tentative states of an open verify, one per tentative step. */
  readonly linearScratch: Float64Array;
  /** True while a speculative verify is open. */
  readonly verifying: boolean;
  /** Draft positions (rows or tentative steps) since beginVerify(). */
  readonly draftLen: number;

  /** Appends one position; k and v are [numKvHeads × headDim]. */
  append(k: Float32Array, v: Float32Array, alive?: AliveMask | null): void;
  /** Appends n positions at once; k and v are [n × numKvHeads × headDim], alive [n × numKvHeads]. */
  appendBatch(k: Float32Array, v: Float32Array, alive?: AliveMask | null): void;
  /** Attention of q [headDim] over kvHead's rows; `into` reuses output arrays. */
  attend(q: Float32Array, kvHead: number, into?: { out?: Float32Array; probs?: Float32Array }): AttentionResult;
  /** The G query heads sharing kvHead in one pass: q is [G × headDim]; out [G × headDim], probs [G × headLen(kvHead)]. */
  attendGroup(q: Float32Array, kvHead: number, into?: { out?: Float32Array; probs?: Float32Array }): AttentionResult;
  /** A whole layer in one call: q is [numQueryHeads × headDim] (a multiple of numKvHeads; query i uses KV head ⌊i / G⌋).
   * probs [numQueryHeads × seqLen] (per position) only when into.probs is given, else null. */
  attendHeads(q: Float32Array, into?: { out?: Float32Array; probs?: Float32Array }): { out: Float32Array; probs: Float32Array | null };
  /** m queries at once: q is [m × headDim], query i sees the first seqLen − m + i + 1 slots (positions 0 .. seqLen − m + i until the cache evicts).
   * probs is [m × headLen(kvHead)], zero where a query does not see a row. */
  attendCausal(q: Float32Array, kvHead: number, into?: { out?: Float32Array; probs?: Float32Array }): AttentionResult;
  /** Rewinds the last n positions: nextPosition goes back by n (to 0 at most) and the rows at or after it go;
   * before any eviction, the last min(n, seqLen) rows. Not during a verify. */
  truncateLast(n: number): void;
  /** One linear step; returns out [numHeads × valueDim]. decay defaults to all ones. */
  linearStep(phiK: Float32Array, phiQ: Float32Array, v: Float32Array, decay?: Float32Array | null, out?: Float32Array): Float32Array;
  /** One linear step with the vmf_phase features of phases [numHeads × numFeatures/2]. */
  linearStepPhase(thetaK: Float32Array, thetaQ: Float32Array, v: Float32Array, decay?: Float32Array | null, out?: Float32Array): Float32Array;
  /** Opens a speculative verify: what is appended (or stepped) next is a draft. */
  beginVerify(): void;
  /** Keeps the first j drafts and closes the verify; with maxRows, j > 0 then evicts back to it (which can throw KVC_E_NOMEM, changing nothing). */
  accept(j: number): void;
  /** accept(0). */
  reject(): void;
  /** Empties the cache, keeping geometry and mode. */
  clear(): void;
  /** imp[p] += probs[p]; probs has length seqLen. */
  accumulateImp(probs: Float32Array): void;
  /** Adds one head's row probabilities (length headLen(kvHead)) at that head's positions. */
  accumulateImpHead(kvHead: number, probs: Float32Array): void;
  /** Rows stored for kvHead. */
  headLen(kvHead: number): number;
  /** kvHead's keys, [headLen × headDim] (dequantized copy when quantized). */
  headKeys(kvHead: number): Float32Array;
  /** kvHead's values, [headLen × headDim] (dequantized copy when quantized). */
  headValues(kvHead: number): Float32Array;
  /** The position of each stored row of kvHead. */
  headPositions(kvHead: number): Uint32Array;
  /** The absolute position of each slot (seqLen values, increasing). */
  positions(): Uint32Array;
  /** Keeps what `policy` says, in order and in place (no requantizing); returns the positions kept. Not during a verify. */
  evict(policy: EvictionPolicy): Uint32Array;
  /** evict({ budget: window, sinks, recent: window − sinks }); sinks defaults to min(4, window). */
  slideWindow(window: number, sinks?: number): Uint32Array;
  /** The positions evict(policy) would keep, without evicting. */
  evictionPlan(policy: EvictionPolicy): Uint32Array;
  /** Bounds the cache from the next append on; 0 lifts the bound. A verify's drafts pass it; accept(j > 0) evicts back to it, keeping the accepted positions; a rejected verify changes nothing. */
  setMaxRows(maxRows: number, options?: { sinks?: number; recent?: number }): void;
  /** The whole cache as a versioned, CRC-checked snapshot (docs/snapshot-format.md); the same bytes from every build. Not during a verify. */
  serialize(): Uint8Array;
  /** A new cache from serialize()'s bytes; refused bytes throw a KvCacheError whose code says why (KVC_E_SNAPSHOT_*). */
  static deserialize(bytes: ArrayBufferView | ArrayBuffer): LayerKvCache;
  /** An independent copy, copy-on-write: it shares every page until either cache writes into one (not during a verify). */
  clone(): LayerKvCache;
}

export type KvCacheConfig =
  | { numLayers: number; numKvHeads: number; headDim: number; mode?: KvMode; residualRows?: number; maxRows?: number; sinks?: number; recent?: number }
  | { layers: readonly LayerKvCacheOptions[] };

/** A model's cache: one layer per transformer layer, full or linear. */
export interface KvCache extends WasmHandle {}
export class KvCache {
  constructor(config: KvCacheConfig);

  readonly numLayers: number;
  /** The least nextPosition over the layers: the position the next token takes (evictions do not move it). */
  readonly nextPosition: number;
  /**
   * nextPosition under its earlier name, kept for one release.
   * @deprecated Use nextPosition: a layer's seqLen is another thing, the slots it holds (fewer once it evicts).
   */
  readonly seqLen: number;
  /** The most rows a full layer holds: what a forward pass's attention reads (below nextPosition once a layer evicts). */
  readonly rows: number;
  readonly memoryBytes: number;
  readonly capacityBytes: number;
  /** The part of memoryBytes held in pages shared with forks (clone, PrefixCache). */
  readonly sharedBytes: number;
  /** memoryBytes of each layer, in order. */
  readonly memoryBytesByLayer: number[];
  readonly verifying: boolean;

  /** Layer `index`, owned by this cache (do not free it). */
  layer(index: number): LayerKvCache;
  appendLayer(index: number, k: Float32Array, v: Float32Array, alive?: AliveMask | null): void;
  appendLayerBatch(index: number, k: Float32Array, v: Float32Array, alive?: AliveMask | null): void;
  attendLayer(index: number, q: Float32Array, kvHead: number, into?: { out?: Float32Array; probs?: Float32Array }): AttentionResult;
  /** layer(index).attendHeads(q, into): all query heads of a layer in one call. */
  attendLayerHeads(index: number, q: Float32Array, into?: { out?: Float32Array; probs?: Float32Array }): { out: Float32Array; probs: Float32Array | null };
  /** Truncates every layer; refused when the model has linear layers (roll back with a verify). */
  truncateLast(n: number): void;
  clear(): void;
  /** Opens a speculative verify in every layer. */
  beginVerify(): void;
  /** Keeps the first j of the k drafts in every layer (all must hold k) and closes the verify. */
  accept(j: number): void;
  reject(): void;
  /** evict(policy) on every full layer, each by its own imp; all layers or none. Not during a verify. */
  evict(policy: EvictionPolicy): void;
  /** Every layer in one snapshot. Not during a verify, nor while the layers hold different numbers of positions (KVC_E_LAYERS). */
  serialize(): Uint8Array;
  /** A new KvCache from serialize()'s bytes; refused bytes throw a KvCacheError (KVC_E_SNAPSHOT_*). */
  static deserialize(bytes: ArrayBufferView | ArrayBuffer): KvCache;
  /** deserialize() of a snapshot that comes in pieces (`byteLength` bytes in all), read into the cache's pages as they
   * come, holding at most one layer's bytes besides. */
  static deserializeFrom(chunks: Iterable<Uint8Array> | AsyncIterable<Uint8Array>, byteLength: number): Promise<KvCache>;
  /** An independent copy of every layer, copy-on-write: O(pages), no row copied (not during a verify). */
  clone(): KvCache;
}

/** Token ids: an array or an integer typed array of integers 0 .. 2^32 - 1. */
export type TokenIds = readonly number[] | Uint32Array | Int32Array | Uint16Array | Int16Array | Uint8Array;

/**
 * Model caches kept under the tokens they hold (copy-on-write forks), found
 * again by the longest common prefix; the least recently used go past budgetBytes.
 */
export interface PrefixCache extends WasmHandle {}
export class PrefixCache {
  /** budgetBytes: a byte count, or Infinity. */
  constructor(options: { budgetBytes: number });
  readonly budgetBytes: number;
  /** Entries held. */
  readonly size: number;
  /** Bytes the entries hold, each page counted once. */
  readonly bytes: number;
  /** Keeps a fork of `cache` under `tokens` (one id per position); whether it stayed within the budget. */
  add(tokens: TokenIds, cache: KvCache): boolean;
  /** A fork of the entry sharing the longest prefix (at least 64 tokens) with `tokens`, truncated to it; the caller frees it. */
  match(tokens: TokenIds): { length: number; cache: KvCache } | null;
  /** Drops the entry of exactly `tokens`; whether there was one. */
  delete(tokens: TokenIds): boolean;
  clear(): void;
}

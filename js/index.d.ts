// Types of kvcache-wasm. The C header include/kvcache.h documents the rules
// behind each call; these are the JavaScript shapes.

/** How keys (K) and values (V) are stored: f32, or int8 codes with a per-row
 * scale and a per-channel field ("q8": both, "q8k": keys only, "q8v": values only). */
export type KvMode = 'f32' | 'q8' | 'q8k' | 'q8v';

/** A per-head mask: `false` / `0` stores nothing for that head. */
export type AliveMask = Uint8Array | readonly boolean[];

export interface InitOptions {
  /** A precompiled module, for runtimes that cannot compile wasm from bytes (Cloudflare workerd). */
  module?: WebAssembly.Module;
  /** The module's bytes, or where to fetch them (default: ../dist/kvcache.wasm next to this file). */
  wasm?: BufferSource | URL | string | Response;
}

/** Loads the wasm module. Call once and await it before anything else; later calls return the same promise. */
export function init(options?: InitOptions): Promise<void>;
export default init;

/** The kernel set the module runs: "wasm-simd128" for the SIMD build. */
export function kernelIsa(): string;
/** The C library's version. */
export function version(): string;

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

export interface LayerKvCacheOptions {
  /** KV heads, 1 ..= 4096. */
  numKvHeads: number;
  /** Channels per head, 1 ..= 4096. */
  headDim: number;
  /** Storage mode, default 'f32'. */
  mode?: KvMode;
}

/** Thrown for what argument checks cannot prevent; `code` is the C status name (e.g. "KVC_E_NOMEM"). */
export class KvCacheError extends Error {
  readonly code: string;
}

/** Positions below this stay f32 in q8 modes; the per-channel field freezes when it is appended. */
export const Q8_WINDOW: 64;
export const MAX_KV_HEADS: 4096;
export const MAX_HEAD_DIM: 4096;
export const MAX_POSITIONS: number;

/** The KV cache of one transformer layer, stored head-major. */
export class LayerKvCache {
  constructor(options: LayerKvCacheOptions);

  readonly numKvHeads: number;
  readonly headDim: number;
  readonly mode: KvMode;
  /** Positions appended so far (dead heads included). */
  readonly seqLen: number;
  /** Bytes of data held (rows, scales, fields, imp, alive map); see the README's formula. */
  readonly memoryBytes: number;
  /** Bytes allocated, reserved capacity and bookkeeping included. */
  readonly capacityBytes: number;
  /** True while the q8 per-channel field is frozen. */
  readonly fieldFrozen: boolean;
  /** A copy of the importance vector, one slot per position. */
  readonly imp: Float32Array;

  /** Appends one position; k and v are [numKvHeads × headDim]. */
  append(k: Float32Array, v: Float32Array, alive?: AliveMask | null): void;
  /** Appends n positions at once; k and v are [n × numKvHeads × headDim], alive [n × numKvHeads]. */
  appendBatch(k: Float32Array, v: Float32Array, alive?: AliveMask | null): void;
  /** Attention of q [headDim] over kvHead's rows; `into` reuses output arrays. */
  attend(q: Float32Array, kvHead: number, into?: { out?: Float32Array; probs?: Float32Array }): AttentionResult;
  /** Drops the last min(n, seqLen) positions. */
  truncateLast(n: number): void;
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
  /** A deep, independent copy. */
  clone(): LayerKvCache;
  /** Releases the memory now; idempotent, later calls throw. */
  free(): void;
  [Symbol.dispose](): void;
  toString(): string;
}

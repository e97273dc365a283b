// Types of kvcache-wasm/llama: the reference llama runner on the cache.
import type { KvCache, KvMode, PrefixCache } from './index.js';

/** A GGUF file that cannot be used; the message says why. */
export class GgufError extends Error {}

export interface GgufTensorInfo {
  name: string;
  /** ggml's name of the type ("F32", "Q4_K"); null for an id ggml does not define. */
  type: string | null;
  /** The ggml type id. */
  typeId: number;
  /** ggml order: innermost first. */
  dims: number[];
  /** Byte offset of the data in the file. */
  offset: number;
  /** Bytes of the data; 0 for a type this reader does not convert. */
  bytes: number;
}

export class GgufFile {
  /** readGguf() makes them. */
  private constructor();
  readonly version: number;
  /** Numbers (bigints where a 64-bit integer is beyond 2^53), booleans, strings, arrays of them. */
  readonly metadata: Map<string, unknown>;
  readonly tensors: Map<string, GgufTensorInfo>;
  /** A metadata value; throws GgufError when the key is missing. */
  get(key: string): unknown;
  /** A tensor as f32, dequantized from F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or
   * Q6_K; throws GgufError when it is missing or of another type. */
  tensor(name: string): Float32Array;
}

/** Parses GGUF versions 1 to 3 (little-endian); throws GgufError naming what is wrong. Needs
 * `await init()` first (the reader is the C library's). */
export function readGguf(bytes: Uint8Array | ArrayBuffer): GgufFile;

export interface StreamingDecoder {
  /** The text token `id` completes (byte tokens wait for a whole character). */
  push(id: number): string;
  flush(): string;
}

export class Tokenizer {
  constructor(vocab: { tokens: string[]; scores: number[]; bosId: number; eosId: number; unkId?: number });
  static fromGguf(gguf: GgufFile): Tokenizer;
  readonly tokens: string[];
  readonly scores: number[];
  readonly bosId: number;
  readonly eosId: number;
  /** The id of what the vocabulary cannot spell, not even byte by byte (default 0). */
  readonly unkId: number;
  readonly vocabSize: number;
  /** sentencepiece BPE: '▁' for spaces, greedy merges by score, byte fallback; <s> first unless bos is false. */
  encode(text: string, options?: { bos?: boolean }): number[];
  decode(ids: readonly number[]): string;
  decoder(): StreamingDecoder;
}

export interface LlamaConfig {
  dim: number;
  numLayers: number;
  hiddenDim: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  eps: number;
  contextLength: number;
  ropeBase: number;
  vocabSize: number;
}

export class Llama {
  /** Llama.fromGguf() makes them. */
  private constructor();
  /** Reads a llama GGUF with F32 or F16 tensors. */
  static fromGguf(input: Uint8Array | ArrayBuffer | GgufFile): Llama;
  readonly config: LlamaConfig;
  readonly tokenizer: Tokenizer;
  /**
   * A session with its own cache; maxRows bounds every layer (evicting with sinks/recent, see EvictionPolicy).
   * With a prefixCache, a prompt starts from the longest prefix of it the prefix cache holds, and is added to it.
   * With a cache (say one restored from a snapshot), the session continues it and owns it.
   */
  session(options?: { mode?: KvMode; maxRows?: number; sinks?: number; recent?: number; prefixCache?: PrefixCache; cache?: KvCache }): LlamaSession;
  /** No-cache reference: logits of every position [m × vocab], computed from scratch. */
  referenceLogits(tokens: readonly number[]): Float32Array;
  /** Appends the tokens to the cache and returns their logits and attention probabilities. */
  forward(cache: KvCache, tokens: readonly number[]): {
    logits: Float32Array;
    /** Per layer, per query head: probabilities [m × rows]. */
    attention: { probs: Float32Array; rows: number }[][];
  };
}

export class LlamaSession {
  /** Llama#session() makes them. */
  private constructor();
  readonly llama: Llama;
  readonly cache: KvCache;
  readonly mode: KvMode;
  readonly prefixCache: PrefixCache | null;
  /** Takes in a prompt's tokens, from the prefix cache as far as it holds them; returns how many came from it. */
  prefill(tokens: readonly number[]): number;
  /** Appends the tokens, adds their attention to imp, returns logits [m × vocab]. */
  forward(tokens: readonly number[]): Float32Array;
  /** Appends tokens inside a verify; keep(n) keeps the first n positions and rolls back the rest. */
  verify(tokens: readonly number[]): { logits: Float32Array; keep(n: number): void };
  free(): void;
}

export interface GenerateOptions {
  /** Tokens to generate, at most (default 256). */
  steps?: number;
  /** Up to k prompt-lookup drafts per forward pass (default 0: plain decoding). */
  draft?: number;
  /** The shortest n-gram a draft may come from (default 2). */
  minNgram?: number;
  /** 0 (default) is greedy. */
  temperature?: number;
  seed?: number;
  /** Stop after </s> or a new <s> (default true). */
  stopAtEos?: boolean;
  onToken?: (id: number) => void;
}

export interface GenerateStats {
  tokens: number;
  forwardPasses: number;
  drafted: number;
  accepted: number;
  verifies: number;
  rollbacks: number;
  /** Prompt tokens taken from the session's prefix cache instead of computed. */
  prefixTokens: number;
  seconds: number;
  /** Why it stopped: as many tokens as asked ('steps'), the end of the text ('end': </s> or a new <s>), or a full context. */
  stop: 'steps' | 'end' | 'context';
}

export type DecodeEvent =
  | { type: 'token'; token: number }
  | { type: 'verify'; drafts: number[]; accepted: number }
  | { type: 'accept'; accepted: number; rejected: number };

/** decode() one forward pass at a time: token events, and for a speculative
 * verify the drafts in the cache, then their rollback; returns the statistics. */
export function decode(session: LlamaSession, prompt: readonly number[], options?: Omit<GenerateOptions, 'onToken'>): Generator<DecodeEvent, GenerateStats, void>;

/** Generates after `prompt` (token ids, <s> first); speculative when draft > 0, with the same tokens. */
export function generate(session: LlamaSession, prompt: readonly number[], options?: GenerateOptions): {
  tokens: number[];
  stats: GenerateStats;
};

/** Up to k tokens that followed the latest earlier occurrence of the longest suffix n-gram of history. */
export function promptLookup(history: readonly number[], k: number, maxNgram?: number, minNgram?: number): number[];

/** A seeded generator of uniforms in [0, 1). */
export function seededRandom(seed: number): () => number;

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
  /** A tensor as f32, dequantized from F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
   * Q6_K, Q2_K, Q3_K, IQ4_NL or IQ4_XS; throws GgufError when it is missing or of another type. */
  tensor(name: string): Float32Array;
}

/** Parses GGUF versions 1 to 3 (little-endian); throws GgufError naming what is wrong. Needs
 * `await init()` first (the reader is the C library's). */
export function readGguf(bytes: Uint8Array | ArrayBuffer): GgufFile;

export interface StreamingDecoder {
  /** The text token `id` completes: the bytes of a character split over tokens wait for its last byte. */
  push(id: number): string;
  /** What is left (an unfinished character as U+FFFD); the decoder then starts afresh. */
  flush(): string;
}

/** What Tokenizer.fromGguf reads: a key's value, or undefined when the file lacks it (a Map will do). */
export interface TokenizerMetadata {
  get(key: string): unknown;
}

export interface TokenizerVocab {
  /** 'llama': SentencePiece BPE (the default); 'gpt2': byte-level BPE; 'gemma4': Gemma 4's BPE (raw UTF-8, '▁' for a space). */
  model?: 'llama' | 'gpt2' | 'gemma4';
  tokens: string[];
  /**
   * GGUF's token type per token, numbered as llama.cpp does: 1 normal, 2 unknown, 3 control, 4 user-defined,
   * 5 unused, 6 byte. Without them the begin and end tokens are control tokens, the unknown token unknown, the rest normal.
   */
  tokenTypes?: ArrayLike<number>;
  /** SentencePiece: a score per token. */
  scores?: number[];
  /** BPE (byte-level and Gemma 4's): "left right" pairs, the first merged first. */
  merges?: string[];
  /** Byte-level BPE: the pre-tokenizer, by its tokenizer.ggml.pre name (default 'default'). */
  pre?: 'default' | 'gpt-2' | 'llama-bpe' | 'qwen2' | 'smollm' | 'tekken';
  bosId?: number | null;
  eosId?: number | null;
  /** The id of what the vocabulary cannot spell, not even byte by byte (SentencePiece default 0). */
  unkId?: number | null;
  /** Whether encode() puts the begin token first by default (default: as llama.cpp does for the model and pre-tokenizer). */
  addBos?: boolean;
  /** Whether encode() puts the end token last by default (default false). */
  addEos?: boolean;
  /** SentencePiece: whether text gets a '▁' before it (default true). */
  addSpacePrefix?: boolean;
  chatTemplate?: string | null;
  /** More tokens that end a generation (tokenizer.ggml.eot_token_id, eom_token_id). */
  eogIds?: number[];
}

export interface EncodeOptions {
  /** Put the begin token first (default: the vocabulary's add_bos_token). Off to continue a sequence. */
  bos?: boolean;
  /** Put the end token last (default: the vocabulary's add_eos_token). */
  eos?: boolean;
  /** Put the separator last, after any end token (default: WordPiece's always, as llama.cpp's add_special). */
  sep?: boolean;
  /**
   * Take control tokens (and the unknown token) written in the text as those tokens (default false:
   * they are spelled as text). User-defined tokens are always taken whole.
   */
  special?: boolean;
}

export interface DecodeOptions {
  /** Show control tokens (and the unknown token) as written (default false: they read as nothing). */
  special?: boolean;
  /** The ids the decoded ones follow (read, not returned): their text continues that text, so a SentencePiece
   * decoder keeps its first space, which it drops from the start of a text (default none). */
  after?: readonly number[];
}

export class Tokenizer {
  constructor(vocab: TokenizerVocab);
  /** The tokenizer of a GGUF file's tokenizer.* keys; throws a GgufError naming what is wrong. */
  static fromGguf(metadata: GgufFile | TokenizerMetadata): Tokenizer;
  /** tokenizer.ggml.model: 'llama' (SentencePiece), 'gpt2' (byte-level BPE), 'gemma4' (Gemma 4's BPE) or 'bert' (WordPiece). */
  readonly model: 'llama' | 'gpt2' | 'gemma4' | 'bert';
  /** BPE: tokenizer.ggml.pre ('gemma4' for Gemma 4's); null for SentencePiece. */
  readonly pre: string | null;
  readonly tokens: string[];
  /** The token types (see TokenizerVocab.tokenTypes); 0 for a type llama.cpp does not know either. */
  readonly tokenTypes: Uint8Array;
  /** SentencePiece: a score per token (empty for byte-level BPE). */
  readonly scores: number[];
  /** Byte-level BPE: the merges (empty for SentencePiece). */
  readonly merges: string[];
  readonly bosId: number | null;
  readonly eosId: number | null;
  /** The id of what the vocabulary cannot spell, not even byte by byte. */
  readonly unkId: number | null;
  readonly addBos: boolean;
  readonly addEos: boolean;
  /** WordPiece's separator, [SEP] (null for the others), and whether the vocabulary says to add it (add_sep_token). */
  readonly sepId: number | null;
  readonly addSep: boolean;
  /** tokenizer.chat_template, or null. */
  readonly chatTemplate: string | null;
  /** The text of the begin and end tokens (what a chat template calls bos_token and eos_token), or null. */
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  /** The tokens that end a generation: the end token, tokenizer.ggml.eot_token_id / eom_token_id, and the control
   * tokens llama.cpp also takes as ends (<|eot_id|>, <|im_end|>, <|endoftext|>, ...). */
  readonly eogIds: ReadonlySet<number>;
  readonly vocabSize: number;
  /** Text to ids: special tokens in the text matched whole (see EncodeOptions), the rest by the model; <s> first unless bos is false. */
  encode(text: string, options?: EncodeOptions): number[];
  decode(ids: readonly number[], options?: DecodeOptions): string;
  decoder(options?: DecodeOptions): StreamingDecoder;
}

export interface LlamaConfig {
  /** general.architecture: 'llama', 'qwen2', 'qwen3', 'gemma3', 'gemma-embedding', 'gemma4', 'smollm3', 'mistral3', 'phi3', 'lfm2' or 'qwen35'. */
  architecture: string;
  dim: number;
  numLayers: number;
  hiddenDim: number;
  numHeads: number;
  numKvHeads: number;
  /** Per head (qwen3: not dim / numHeads). */
  headDim: number;
  eps: number;
  contextLength: number;
  ropeBase: number;
  vocabSize: number;
  /** Each layer's sliding window (gemma3's window layers), 0 for a layer that attends every position;
   * a session's cache has a window layer (kind 'window') exactly where this is not 0. */
  layerWindows: readonly number[];
  /** Each layer's kind: 'full', 'window', 'shared' (gemma4's shared-KV blocks), 'conv' (lfm2) or 'delta' (qwen35). */
  layerKinds: readonly ('full' | 'window' | 'shared' | 'conv' | 'delta')[];
  /** Each layer's head size and KV heads (gemma4's window and global layers differ; 0 for a recurrent layer). */
  layerHeadDims: readonly number[];
  layerKvHeads: readonly number[];
  /** The layer each shared layer attends over, -1 for any other layer. */
  layerOwners: readonly number[];
  /** The file's pooling (<arch>.pooling_type): 'none' for a model that generates. */
  pooling: Pooling;
  /** Whether its attention is causal (false: an encoder, gemma-embedding's; it embeds, it does not generate). */
  causal: boolean;
  /** The size of a pooled embedding: dim, or what the file's dense layers give. */
  embeddingDim: number;
  /** A reranker's scores a text (cls.output's rows); 0 without a classification head. */
  rankOutputs: number;
}

/** What each family's model card puts before a query and a document, by general.architecture. */
export const EMBEDDING_PROMPTS: Readonly<Record<string, Readonly<{ query: string; document: string }>>>;

/** How an embedding model makes one vector of a text's tokens, as GGUF's pooling_type names them. */
export type Pooling = 'none' | 'mean' | 'cls' | 'last' | 'rank';

export interface EmbedOptions {
  /** Default: the file's pooling (required for a model whose file gives none). 'none': a row per token, not normalised. */
  pooling?: 'mean' | 'cls' | 'last' | 'none';
  /** Each vector of length 1 (default true). */
  normalize?: boolean;
  /** The first that many values of each vector, normalised after (Matryoshka). */
  dimensions?: number;
  /** Cut a text longer than the model's context to it (default: a RangeError). */
  truncate?: boolean;
  /** 'query' or 'document': the model card's text before one (EMBEDDING_PROMPTS, by the file's architecture); or a
   * string put before each text. */
  prompt?: 'query' | 'document' | string;
  signal?: AbortSignal;
  /** After each pass of the weights: the texts done so far. */
  onProgress?: (progress: { done: number; total: number }) => void;
}

export interface RerankOptions {
  /** The ranking's length (default: every document). */
  topN?: number;
  truncate?: boolean;
  signal?: AbortSignal;
  onProgress?: (progress: { done: number; total: number }) => void;
}

export interface Reranking {
  /** Each document's score, in the documents' order. */
  scores: number[];
  /** The topN documents, best first. */
  ranking: { index: number; score: number; document: string }[];
}

/**
 * Where a model's per-layer embeddings (gemma4's per_layer_token_embd: a row of every block's slice a token,
 * read only for that token) are kept: 'outside' (default) in JavaScript memory beside the heap -- a view of
 * Llama.fromGguf's bytes, or a copy made as Llama.load streams the file; 'heap' with the other weights; or
 * read by the app where the file is: { read(offset, length) }, a synchronous reader of the file's bytes (Node's
 * fs.readSync on the file, an OPFS sync access handle in a worker), every forward pass reading its tokens' rows
 * first; or { readAsync(offset, length) } (a Blob's slice, a ranged read of an R2 object), whose rows a session's
 * generate() and respond() (and Chat) read before their passes, and Llama#preparePerLayerRows before a bare
 * forward pass. A read that throws fails the pass, or the reply, before anything is computed.
 */
export type PerLayerEmbeddings = 'outside' | 'heap' | { read(offset: number, length: number): Uint8Array }
  | { readAsync(offset: number, length: number): Promise<Uint8Array> };

/** Where Llama.load reads a GGUF file from. A string is a URL, or a Hugging Face name (see HuggingFaceOptions):
 * `hf:owner/repo/path/file.gguf`, or `hf:owner/repo:Q4_K_M` (the file of that quantization, its case blind; no tag:
 * Q4_K_M, else the repository's one model), either with `#revision` (a branch, tag or commit; default main). */
export type ModelSource = Uint8Array | ArrayBuffer | ArrayBufferView | Blob | Response | ReadableStream<Uint8Array> | URL | string;

/** Llama.load's progress; fromStore, fromNetwork and restarted with options.store. */
export interface LoadProgress {
  /** Bytes read so far. */
  loaded: number;
  /** The file's size where known (else null). */
  total: number | null;
  /** Of those, bytes read from the store and bytes downloaded. */
  fromStore?: number;
  fromNetwork?: number;
  /** Why a download started over (a server that does not resume, a changed file, a damaged stored copy), else null. */
  restarted?: string | null;
}

export interface LoadOptions {
  /** Called after every chunk. */
  onProgress?: (progress: LoadProgress) => void;
  /** Aborts the load (it rejects with the signal's reason); nothing is left in the heap. */
  signal?: AbortSignal;
  /** Positions the app will keep in a cache: checked to fit the heap with the weights before they load
   * (default: the file's context, at most 4096). */
  contextLength?: number;
  /** The mode of that cache, and the sessions' default mode (default 'f32'). */
  cacheMode?: KvMode;
  /** Keep a URL's file in this store: later loads read it from there without a request, a cut download resumes. */
  store?: ModelStore;
  /** With a store: its sessions keep their prompts' prefixes in the store's prefix cache (ModelStore#prefixes) and a
   * session begins from the longest one stored, computing only the rest (default true; false: neither). */
  storePrefixes?: boolean;
  /** With a store: ask the server once whether its file changed (a conditional request); default false. */
  revalidate?: boolean;
  /** Where the per-layer embeddings are kept (gemma4): see PerLayerEmbeddings; default 'outside'. */
  perLayerEmbeddings?: PerLayerEmbeddings;
  /** The model's vision encoder (an mmproj GGUF, `general.architecture` clip), loaded beside it from any source a
   * model loads from (and through `store`); checked to go with the model. 'auto' with a model named `hf:...`: the
   * repository's `mmproj*.gguf` (of the model's quantization, else F16, BF16, Q8_0, F32, else the first by name). */
  projector?: ModelSource | readonly ModelSource[] | 'auto';
  /** Where `hf:` names resolve, and the token that opens private and gated repositories. */
  huggingFace?: HuggingFaceOptions;
}

/**
 * How `hf:` names resolve: the repository's file list from `{endpoint}/api/models/{owner}/{repo}[/revision/{rev}]`,
 * each file from `{endpoint}/{owner}/{repo}/resolve/{rev}/{path}` (the Hub redirects it to its CDN). Through a store a
 * file is kept under that resolve URL, listed with the name it was loaded by (StoredModel#name); a name whose files are stored whole
 * loads with no request.
 */
export interface HuggingFaceOptions {
  /** The Hub or a mirror of it (a company's proxy): an http(s) URL, a path allowed (default 'https://huggingface.co'). */
  endpoint?: string | URL;
  /** An access token (sent as `Authorization: Bearer`) for a private repository, or a gated one whose licence its
   * account accepted. Sent to the endpoint only: a redirect to another origin (the Hub's CDN) drops it. */
  token?: string;
}

/** RGBA (4 bytes a pixel) or RGB (3) pixels, row by row. */
export interface ImagePixels {
  width: number;
  height: number;
  data: Uint8Array | Uint8ClampedArray;
}

/** An image as a model takes it: a Blob or File, an ImageBitmap, an image element, a canvas, a VideoFrame, ImageData,
 * a URL, encoded bytes (PNG, JPEG, ...: decoded by the runtime, or by `decodeImage`) or pixels. */
export type ImageSource = Blob | ImageBitmap | HTMLImageElement | HTMLCanvasElement | OffscreenCanvas | ImageData | string | URL
  | Uint8Array | ArrayBuffer | ImagePixels;

/** Decodes encoded image bytes where the runtime cannot (Node, Deno, Bun, workerd). */
export type ImageDecoder = (bytes: Uint8Array) => ImagePixels | Promise<ImagePixels>;

/** An image made ready for a model's conversations: `tokens` stand for it where it goes in a prompt (its markers' tokens and
 * an id per encoder row, past the vocabulary), as sessions, Chat and prefix caches take them. */
export interface PreparedImage {
  readonly digest: string;
  readonly width: number;
  readonly height: number;
  readonly tokens: readonly number[];
  /** The encoder's rows among them. */
  readonly imageTokens: number;
}

/** The positions an image takes: the encoder's rows, its markers' tokens and their sum. */
export interface ImageTokenCount {
  image: number;
  markers: number;
  total: number;
}

/** How llama.cpp's mtmd prepares an image for a projector: its tiles (each its pixels and the encoder's rows for it, as a
 * gridX × gridY grid), the grid they form before the overview, and all the rows. */
export interface ImagePlan {
  tiles: { width: number; height: number; tokens: number; gridX: number; gridY: number }[];
  rows: number;
  cols: number;
  overview: boolean;
  tokens: number;
}

/** A vision encoder in the wasm heap (Llama.load's `projector`). */
export class Projector {
  private constructor();
  /** A projector file held whole in memory. */
  static fromGguf(input: Uint8Array | ArrayBuffer): Projector;
  /** `type`: clip.projector_type; `outputDim`: the language model's embedding width it gives rows of. */
  readonly config: { type: 'idefics3' | 'lfm2' | 'gemma3' | 'gemma4v' | 'qwen3vl_merger'; outputDim: number };
  /** How an image of width × height goes in, without encoding it. */
  plan(width: number, height: number): ImagePlan;
  /** XXH64 of the file's header and tensor data, 16 hex digits. */
  readonly digest: string;
  readonly memoryBytes: { weights: number; scratch: number };
  free(): void;
  [Symbol.dispose](): void;
}

/** A model stored by ModelStore#list. */
export interface StoredModel {
  /** Its URL (for an `hf:` name, the file's resolve URL). */
  key: string;
  /** The `hf:` name its download began by, as given (each part of a split model's has it; a projector found by
   * projector 'auto' has its own file's, `hf:owner/repo/mmproj-....gguf`), else null. */
  name: string | null;
  /** The file's size (null while a download of unknown length is partial), and the bytes stored. */
  size: number | null;
  stored: number;
  complete: boolean;
  /** Llama#digest of the file, once complete (else null). */
  digest: string | null;
  etag: string | null;
  lastModified: string | null;
  storedAt: string | null;
}

/** A conversation saved by Chat#save(name). */
export interface StoredConversation {
  name: string;
  /** Its model's digest (Llama#digest, StoredModel#digest). */
  model: string;
  bytes: number;
  savedAt: string;
}

/** Model files downloaded once and kept (OPFS in a page or worker, a folder in Node / Deno / Bun, else the Cache API), and saved conversations. */
export class ModelStore {
  private constructor();
  /** Opens the store `name` (default 'default'); directory: the folder in Node / Deno / Bun (default
   * $XDG_CACHE_HOME or ~/.cache, then kvcache-wasm/<name>); persist: ask the browser to keep it (default true). */
  static open(options?: { name?: string; backend?: 'opfs' | 'folder' | 'cache'; directory?: string; persist?: boolean }): Promise<ModelStore>;
  readonly name: string;
  readonly backend: 'opfs' | 'folder' | 'cache';
  /** Where the backend keeps the store (a folder's path, or OPFS / the Cache API and its name). */
  readonly where: string;
  /** ModelStore.open's options that open this store again (in a worker). */
  readonly openOptions: { name: string; backend: 'opfs' | 'folder' | 'cache'; directory?: string; persist: boolean };
  /** The stored models, complete ones first. */
  list(): Promise<StoredModel[]>;
  /** Deletes a stored model (complete or partial) by its URL; true when there was one. */
  delete(key: string | URL): Promise<boolean>;
  /** Bytes held by the store, and the runtime's quota and free bytes (null where it does not say). */
  usage(): Promise<{ bytes: number; quota: number | null; available: number | null }>;
  /** navigator.storage.persist(): false where the runtime cannot. */
  persist(): Promise<boolean>;
  conversations(): Promise<StoredConversation[]>;
  deleteConversation(name: string): Promise<boolean>;
  /** The store's prefix cache: sessions' caches kept under the tokens they hold, restored by later sessions of the
   * same model and cache mode (another page, tab or worker, after a reload) instead of computing those tokens. */
  readonly prefixes: StoredPrefixes;
}

/** An entry of the store's prefix cache. */
export interface StoredPrefix {
  /** Its model's digest (Llama#digest) and cache mode. */
  model: string;
  mode: KvMode;
  /** The tokens it holds, and its bytes in the store. */
  tokens: number;
  bytes: number;
  /** When it was saved and last restored (ms since the epoch). */
  savedAt: number;
  usedAt: number;
  name: string;
}

export interface StoredPrefixes {
  /** The bytes the entries may hold; past it the least recently used go. null (default): a tenth of the store's
   * quota, at most 2 GiB. */
  budgetBytes: number | null;
  /** Every entry, most recently used first. */
  list(): Promise<StoredPrefix[]>;
  /** Deletes one entry, every entry of a model ({ model }), or all; how many went. */
  delete(which?: StoredPrefix | { model: string }): Promise<number>;
  usage(): Promise<{ entries: number; bytes: number; budgetBytes: number }>;
}

export interface ForwardOptions {
  /** The logits of which tokens: 'all' (default), 'last', or the last n (0: none). */
  logits?: 'all' | 'last' | number;
  /** Add the tokens' attention to the cache's imp (default true). */
  importance?: boolean;
  /** The tokens are a speculative verify: the cache begins one, and keep(cache, n) ends it. */
  verify?: boolean;
  /** The array the logits go into (its first rows × vocab values) and which the pass returns, in place of a new one
   * each pass; shorter, or not a Float32Array: refused before the pass, the cache unchanged. */
  into?: Float32Array;
}

export class Llama {
  /** Llama.load() and Llama.fromGguf() make them. */
  private constructor();
  /** A GGUF file (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS tensors) held whole in memory. */
  static fromGguf(input: Uint8Array | ArrayBuffer | GgufFile, options?: { perLayerEmbeddings?: PerLayerEmbeddings; projector?: Uint8Array | ArrayBuffer | GgufFile }): Llama;
  /** A GGUF file streamed into the wasm heap, one chunk at a time; a model that does not fit is refused
   * (KvCacheError KVC_E_NOMEM naming the missing bytes) before its tensor data is read, and a response that holds
   * no model (an HTTP error, an HTML page) with a GgufError saying what it was. A split model (llama.cpp's gguf-split):
   * its parts in order, or the URL of one part (`…-00001-of-00003.gguf`), from which the others are found. */
  static load(source: ModelSource | readonly ModelSource[], options?: LoadOptions): Promise<Llama>;
  readonly config: LlamaConfig;
  readonly tokenizer: Tokenizer;
  readonly tensors: Map<string, GgufTensorInfo>;
  /** What the model holds in the heap, its caches apart (KvCache#memoryBytes), and the bytes of per-layer
   * embeddings it keeps in JavaScript memory outside it (0 in the heap or read by the app). */
  readonly memoryBytes: { weights: number; scratch: number; perLayerOutside: number };
  /** Reads the per-layer rows of these tokens where the model reads them asynchronously (PerLayerEmbeddings' readAsync). */
  preparePerLayerRows(tokens: readonly number[]): Promise<void>;
  /** Whether forward passes need preparePerLayerRows first (a readAsync reader). */
  readonly readsRowsAsync: boolean;
  /** The file's digest, 16 hex digits (XXH64 of its header and tensor data): what a stored copy is checked by. */
  readonly digest: string;
  /** The ModelStore the model was loaded through, or null. */
  store: ModelStore | null;
  /** The vision encoder loaded beside the model (LoadOptions' projector), or null. */
  projector: Projector | null;
  /** An image decoded, prepared and encoded as llama.cpp's mtmd does for this projector, its rows kept by the model
   * (the same pixels: the same ids, encoded once). */
  prepareImage(image: ImageSource, options?: { decodeImage?: ImageDecoder }): Promise<PreparedImage>;
  /** prepareImage() of pixels at hand, synchronously. */
  imageOf(pixels: ImagePixels): PreparedImage;
  /** The positions an image of this size takes, without encoding it. */
  imageTokenCount(size: { width: number; height: number }): ImageTokenCount;
  /**
   * A session with its own cache; maxRows bounds every layer (evicting with sinks/recent, see EvictionPolicy).
   * With a prefixCache, a prompt starts from the longest prefix of it the prefix cache holds, and is added to it.
   * With a cache (say one restored from a snapshot), the session continues it and owns it; `tokens` are the
   * tokens it was computed from (one per position, and the pending one if any), which a reply continues from.
   */
  session(options?: SessionOptions): LlamaSession;
  /** A session LlamaSession#save() saved, on this model: its cache and tokens back. */
  restoreSession(bytes: Uint8Array | ArrayBuffer, options?: Omit<SessionOptions, 'mode' | 'residualRows' | 'cache' | 'tokens'>): LlamaSession;
  /** Appends the tokens to the cache and returns the logits asked for, [rows × vocab]. */
  forward(cache: KvCache, tokens: readonly number[], options?: ForwardOptions): Float32Array;
  /** forward() of rows of the model's embeddings (an image's, [n × dim]) in place of tokens; `positions`: [n × 4] RoPE
   * positions (t, y, x, e) for a model with multimodal RoPE; `span`: the rows attend each other both ways (at most 512). */
  forwardEmbeddings(cache: KvCache, embeddings: Float32Array, options?: ForwardOptions & { positions?: Uint32Array; span?: boolean }): Float32Array;
  /** Ends a verify forward() began: keeps its first n tokens. */
  keep(cache: KvCache, n: number): void;
  /** The embeddings of texts (strings or token-id arrays), a Float32Array each, many texts to a pass, no rows kept. */
  embed(texts: string | readonly (string | readonly number[] | Uint32Array)[], options?: EmbedOptions): Promise<Float32Array[]>;
  /** A reranker's scores of documents for a query, and the best first. */
  rerank(query: string, documents: readonly string[], options?: RerankOptions): Promise<Reranking>;
  /** A reranker's template of a query and a document (tokenizer.chat_template.rerank), or null. */
  readonly rerankTemplate: string | null;
  /** Releases the weights (idempotent). */
  free(): void;
  [Symbol.dispose](): void;
}

export interface SessionOptions {
  mode?: KvMode;
  residualRows?: number;
  maxRows?: number;
  sinks?: number;
  recent?: number;
  prefixCache?: PrefixCache;
  cache?: KvCache;
  /** With a cache: the tokens it holds, and the pending one if any (a saved session's `tokens`). */
  tokens?: readonly number[];
  /** Add each token's attention to the cache's imp, which eviction reads (default true). */
  importance?: boolean;
}

/** llama.cpp's sampler chain (its defaults): repeat penalty, top-k, top-p, min-p, temperature, a seeded draw. */
export interface SamplingOptions {
  /** Default 0.8; 0 is greedy. */
  temperature?: number;
  /** Default 40; 0 keeps every token. */
  topK?: number;
  /** Default 0.95; 1 keeps every token. */
  topP?: number;
  /** Default 0.05; 0 keeps every token. */
  minP?: number;
  /** Default 1 (none). */
  repeatPenalty?: number;
  /** The recent tokens the penalty looks at (default 64). */
  repeatLastN?: number;
  /** The same seed, the same text (default: a random one). */
  seed?: number;
}

/** What LlamaSession#respond takes (and generate, with `special`). */
export interface ReplyOptions extends SamplingOptions {
  /** Aborts the reply between tokens: its last piece then has stop 'abort'. */
  signal?: AbortSignal;
  /** Tokens to generate, at most (default 256). */
  maxTokens?: number;
  /** Strings that end the reply; its text stops before one. */
  stop?: string[];
  /** Up to k prompt-lookup drafts per forward pass (default 0); the same text as without. */
  draft?: number;
  /** The shortest n-gram a draft may come from (default 2; with draft only). */
  minNgram?: number;
  /** A session of a smaller model of the same vocabulary that drafts (greedily, `draft` tokens a round) in place of
   * prompt lookup; it follows this session's tokens. The same text as without. */
  draftSession?: LlamaSession;
  /** When the model's context fills: 'stop' (default: the reply ends, stop 'context') or 'slide' (keep the first 4 positions
   * and the newest, half the context, and go on). */
  context?: 'stop' | 'slide';
  /** Constrains the reply to JSON ({ type: 'json_object' }) or to a JSON Schema ({ type: 'json_schema', schema } or
   * OpenAI's { type: 'json_schema', json_schema: { name, schema, strict } }); a keyword the engine would not enforce is
   * refused, naming it. At most one of responseFormat, grammar, regex, structuralTag; draft must be 0 with one. */
  responseFormat?: { type: 'text' } | { type: 'json_object' } | { type: 'json_schema'; schema: object | boolean; strict?: true }
    | { type: 'json_schema'; json_schema: { name?: string; schema: object | boolean; strict?: true } };
  /** Constrains the reply to a grammar: EBNF (XGrammar's, which reads llama.cpp's GBNF), its rule `root` first. */
  grammar?: string;
  /** Constrains the whole reply to match a regular expression. */
  regex?: string;
  /** Constrains the reply by an XGrammar structural tag (what tool calls are constrained by). */
  structuralTag?: object;
  /** With a constraint: text the reply continues (the start of an answer written at the end of the prompt), which the
   * constraint reads first -- the reply is then what follows it. A RangeError if the constraint allows no reply that
   * begins with it. */
  constraintPrefix?: string;
  /** The start of the conversation's text that other conversations share (a system prompt and tools): with the
   * store's prefix cache, kept there as an entry of its own (Chat passes its system prompt's rendering). */
  sharedPrefix?: string;
  /** Each piece's tokens with their log-probabilities: true, or a count of likeliest alternatives (up to 20). */
  logprobs?: boolean | number;
}

/** A token's log-probability under the model (the log-softmax of its logits) and its likeliest alternatives. */
export interface TokenLogprob {
  token: number;
  logprob: number;
  top: { token: number; logprob: number }[];
}

export interface GenerateTextOptions extends ReplyOptions {
  /** A text prompt: take special tokens written in it as such (default false). */
  special?: boolean;
}

/** Why a reply ended. */
export type StopReason = 'end' | 'stop' | 'maxTokens' | 'context' | 'abort';

/** How a reply went: decode()'s statistics, with its stop reason. */
export type ReplyStats = Omit<GenerateStats, 'stop'> & {
  stop: StopReason;
  /** The tokens the reply follows: the session's before it and the prompt's (promptComputed: those computed for it). */
  promptTokens: number;
  /** Of them, the tokens restored from the store's prefix cache for this reply (not computed), and the seconds the
   * restore took (finding the entry, reading it, its cache's pages filled). */
  storedTokens: number;
  restoreSeconds: number;
};

/** A piece of a streamed reply. */
export interface GeneratePiece {
  /** The text its tokens completed (a character split over tokens comes whole, with its last token). */
  text: string;
  /** The tokens it took (the last piece: none, or the one that completed a stop string). */
  tokens: number[];
  /** null until the last piece, which says why the reply ended. */
  stop: StopReason | null;
  /** The last piece's: how the reply went. */
  stats: ReplyStats | null;
  /** With ReplyOptions' logprobs: its tokens' log-probabilities. */
  logprobs?: TokenLogprob[];
}

export class LlamaSession {
  /** Llama#session() makes them. */
  private constructor();
  readonly llama: Llama;
  readonly cache: KvCache;
  readonly mode: KvMode;
  readonly prefixCache: PrefixCache | null;
  /** Every token the session has taken in or emitted, in order (a copy). */
  readonly tokens: number[];
  /** The last token emitted (or given), which the next forward pass takes in first; null when none. */
  readonly pending: number | null;
  /** Takes in a prompt's tokens, from the prefix cache as far as it holds them; returns how many came from it
   * (with options.logits, also the last token's logits). */
  prefill(tokens: readonly number[]): number;
  prefill(tokens: readonly number[], options: { logits: true }): { reused: number; logits: Float32Array };
  /**
   * Generates after `prompt` (text, <s> first on a fresh session; or token ids), following what the session holds,
   * streamed as pieces. A prompt longer than the model's context is a RangeError; a full context ends the reply
   * (or slides, with context 'slide'); an abort or a loop's break leaves the session at the last whole token.
   */
  generate(prompt: string | readonly number[], options?: GenerateTextOptions): AsyncGenerator<GeneratePiece, void, undefined>;
  /** What follows `conversation` (a chat template's whole rendering, or token ids), computing only what the session
   * does not hold yet (text that goes on from the text of the session's tokens keeps those tokens): what Chat#send runs. */
  respond(conversation: string | readonly number[], options?: ReplyOptions): AsyncGenerator<GeneratePiece, void, undefined>;
  /** The session as bytes (its tokens and its cache's snapshot); Llama#restoreSession takes them back. */
  save(): Uint8Array;
  /** Resolves once the prefixes the session kept (written behind its replies) are in the store's prefix cache. */
  whenStored(): Promise<void>;
  /**
   * A second session that goes on from where this one is, its own way: its cache a fork of this one's (copy on write: the pages
   * are shared until one of them writes, so it costs no forward pass and no copy of the rows), its tokens, pending token and
   * rewind checkpoints this session's. Not during a verify.
   */
  clone(): LlamaSession;
  /** Appends the tokens (after the pending one, if any), adds their attention to imp, returns their logits
   * [m × vocab]; the session records them, as a reply's tokens, for save() and the next reply. */
  forward(tokens: readonly number[]): Float32Array;
  /** Appends tokens inside a verify (after the pending one, if any, which stays) and returns their logits;
   * keep(n) keeps the first n of them, which the session records, and rolls back the rest. */
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
  /** A session of a smaller model of the same vocabulary that drafts in place of prompt lookup (see RespondOptions). */
  draftSession?: LlamaSession;
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
  /** Prompt tokens computed: the pending one and the prompt's, less prefixTokens, and any a rewind took in again. */
  promptComputed: number;
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

/** The 'slide' context policy on a model's cache: when `needed` more rows do not fit in `contextLength`, keep the first
 * 4 positions and the newest (half the context, or less for a long prompt) by eviction; returns the rows left free. */
export function slideCache(cache: KvCache, needed: number, contextLength: number): number;

/** A seeded generator of uniforms in [0, 1). */
export function seededRandom(seed: number): () => number;

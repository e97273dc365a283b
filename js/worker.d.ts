// kvcache-wasm/worker: the model runner in a dedicated worker, its API made asynchronous for the page.
import type { InitOptions, KernelInfo, ThreadInfo } from './index.js';
import type {
  EmbedOptions, EncodeOptions, DecodeOptions, GeneratePiece, GenerateTextOptions, ImagePixels, ImageSource, ImageTokenCount, LlamaConfig, LoadOptions,
  ModelStore, PreparedImage, Reranking, RerankOptions, ReplyOptions, SessionOptions,
} from './llama.js';
export { ModelStore } from './llama.js';
export type { ImagePixels, ImageTokenCount, PreparedImage } from './llama.js';

export interface LlamaWorkerOptions {
  /** A worker the app starts itself from the package's js/llama-worker.js (as a module worker), for bundlers that do
   * not follow `new Worker(new URL(...))` (esbuild): a function that starts one (called again when a start is stuck,
   * as Firefox's at times is), or the Worker. Default: the package's own. */
  worker?: Worker | (() => Worker);
  /** init()'s options in the worker (threads, isa, maxMemory, wasm as a URL); locateFile is asked on the page for each
   * file the package loads, and the worker gets its answers. */
  init?: Omit<InitOptions, 'module'>;
}

/** What a model source may be from the page: a URL (relative to the page) or an `hf:` name (resolved in the worker),
 * bytes (a copy is transferred), a Blob or File, a Response or a ReadableStream (transferred). */
export type RemoteModelSource = string | URL | Uint8Array | ArrayBuffer | ArrayBufferView | Blob | Response | ReadableStream<Uint8Array>;

/** Llama.load's options for a model in the worker; `projector`: its vision encoder's file (an mmproj GGUF), loaded beside it
 * ('auto' with a model named `hf:...`: found in its repository). */
export interface RemoteLoadOptions extends Omit<LoadOptions, 'projector'> {
  projector?: RemoteModelSource | 'auto';
}

/** An image as a remote model takes it: an ImageBitmap goes to the worker transferred, a Blob as it is. */
export type RemoteImage = ImageSource;

export class LlamaWorker {
  constructor(options?: LlamaWorkerOptions);
  /** What init() gave in the worker; rejects when the worker cannot start. */
  ready(): Promise<{ kernelInfo: KernelInfo; threadInfo: ThreadInfo }>;
  /** Llama.load in the worker: onProgress, signal and the rest of its options; a store is opened again in the worker
   * (the same files) and becomes the RemoteLlama's store on the page. */
  load(source: RemoteModelSource | readonly RemoteModelSource[], options?: RemoteLoadOptions): Promise<RemoteLlama>;
  /** A PrefixCache in the worker, for its sessions to share (options as PrefixCache's). */
  prefixCache(options: { budgetBytes: number }): Promise<RemotePrefixCache>;
  /** Stops the worker: every model and cache in it goes; pending calls reject. */
  terminate(): void;
}

/** A prefix cache in the worker: passed as a remote session's options.prefixCache. */
export class RemotePrefixCache {
  private constructor();
  readonly handle: number;
  free(): Promise<void>;
}

/** What a chat template reads of a remote model's vocabulary. */
export interface RemoteTokenizer {
  readonly vocabSize: number;
  readonly bosId: number | null;
  readonly eosId: number | null;
  readonly eogIds: ReadonlySet<number>;
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  readonly chatTemplate: string | null;
}

export type RemoteSessionOptions = Omit<SessionOptions, 'prefixCache' | 'cache' | 'tokens'> & { prefixCache?: RemotePrefixCache };

/** A model in the worker: Llama's API, made asynchronous. */
export class RemoteLlama {
  private constructor();
  readonly config: LlamaConfig;
  readonly tokenizer: RemoteTokenizer;
  /** Llama#digest, computed in the worker. */
  readonly digest: Promise<string>;
  /** The store the model was loaded through (on the page), or null. */
  store: ModelStore | null;
  /** The vision encoder loaded beside it (LlamaWorker#load's options.projector): clip.projector_type and the width of its rows;
   * null without one. */
  readonly projector: { readonly config: { readonly type: string; readonly outputDim: number } } | null;
  /** Llama#prepareImage in the worker. The image crosses without a copy: where the worker decodes (a browser's), a Blob goes
   * as it is and an ImageBitmap is transferred (closed here); anything else is decoded here (with decodeImage where this runtime
   * cannot decode) and its pixels transferred (an app's own pixels are copied). Rejects without a projector, or for an image of
   * no pixels. */
  prepareImage(image: RemoteImage, options?: { decodeImage?: (bytes: Uint8Array) => ImagePixels | Promise<ImagePixels> }): Promise<PreparedImage>;
  /** Llama#imageTokenCount in the worker: the positions an image of width x height takes, nothing encoded. */
  imageTokenCount(size: { width: number; height: number }): Promise<ImageTokenCount>;
  encode(text: string, options?: EncodeOptions): Promise<number[]>;
  decode(ids: readonly number[], options?: DecodeOptions): Promise<string>;
  memoryBytes(): Promise<{ weights: number; scratch: number }>;
  /** Llama#embed in the worker; the vectors come back transferred. */
  embed(texts: string | readonly (string | readonly number[] | Uint32Array)[], options?: EmbedOptions): Promise<Float32Array[]>;
  /** Llama#rerank in the worker. */
  rerank(query: string, documents: readonly string[], options?: RerankOptions): Promise<Reranking>;
  session(options?: RemoteSessionOptions): Promise<RemoteSession>;
  /** Llama#restoreSession in the worker (the bytes are copied over). */
  restoreSession(bytes: Uint8Array | ArrayBuffer, options?: Omit<RemoteSessionOptions, 'mode' | 'residualRows'>): Promise<RemoteSession>;
  free(): Promise<void>;
}

/** A session in the worker: generate() and respond() stream pieces as LlamaSession's do; a signal or a loop's break
 * aborts in the worker. */
export class RemoteSession {
  private constructor();
  readonly llama: RemoteLlama;
  generate(prompt: string | readonly number[], options?: GenerateTextOptions): AsyncIterableIterator<GeneratePiece>;
  respond(conversation: string | readonly number[], options?: ReplyOptions): AsyncIterableIterator<GeneratePiece>;
  /** LlamaSession#tokens. */
  tokens(): Promise<number[]>;
  /** Its cache as it stands. */
  /** rows: what the fullest layer that attends every position holds; windowLayers: the sliding-window layers
   * (gemma3's), windowRows: what the fullest of them holds -- flat once the window has filled. */
  cacheStats(): Promise<{ nextPosition: number; rows: number; memoryBytes: number; capacityBytes: number; windowLayers: number; windowRows: number }>;
  /** LlamaSession#save: the session as bytes. */
  save(): Promise<Uint8Array>;
  /** LlamaSession#whenStored in the worker. */
  whenStored(): Promise<void>;
  /** LlamaSession#clone in the worker: a second session from where this one is, its cache a copy-on-write fork. */
  clone(): Promise<RemoteSession>;
  free(): Promise<void>;
}

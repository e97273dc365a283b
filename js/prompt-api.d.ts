// Types of kvcache-wasm/prompt-api: the web platform's Prompt API (LanguageModel) over this package's runner.
import type { InitOptions, KvMode } from './index.js';
import type { ImagePixels, Llama, ModelSource, ModelStore } from './llama.js';
import type { LlamaWorker, RemoteLlama } from './worker.js';

export type Availability = 'unavailable' | 'downloadable' | 'downloading' | 'available';
export type LanguageModelMessageType = 'text' | 'image' | 'audio' | 'tool-call' | 'tool-response';
export type LanguageModelSamplingMode = 'most-predictable' | 'predictable' | 'balanced' | 'creative' | 'most-creative';

export interface LanguageModelExpected {
  type: LanguageModelMessageType;
  languages?: string[];
}

export interface LanguageModelMessageContent {
  type: LanguageModelMessageType;
  /** Text for 'text'; an ImageBitmapSource or a BufferSource (encoded image bytes) for 'image'. */
  value: unknown;
}

export interface LanguageModelMessage {
  role: 'system' | 'user' | 'assistant';
  content: string | LanguageModelMessageContent[];
  /** On the last message, an assistant's: the reply continues this text. */
  prefix?: boolean;
}

export type LanguageModelPrompt = string | LanguageModelMessage[];

export interface LanguageModelTool {
  name: string;
  description: string;
  /** The JSON Schema of the arguments, which the model's calls are constrained to. */
  inputSchema: object;
  /** Runs a call: given its arguments, resolves to the result the model reads (a string, or what JSON.stringify writes). */
  execute(args: any): Promise<unknown> | unknown;
}

export interface LanguageModelCreateCoreOptions {
  /** With temperature, both or neither; capped at params().maxTopK. */
  topK?: number;
  /** With topK, both or neither; capped at params().maxTemperature. */
  temperature?: number;
  samplingMode?: LanguageModelSamplingMode;
  expectedInputs?: LanguageModelExpected[];
  expectedOutputs?: LanguageModelExpected[];
  tools?: LanguageModelTool[];
}

export interface CreateMonitor extends EventTarget {
  ondownloadprogress: ((event: Event & { loaded: number; total: number; lengthComputable: boolean }) => void) | null;
}

export interface LanguageModelCreateOptions extends LanguageModelCreateCoreOptions {
  signal?: AbortSignal;
  /** Called at once with a monitor of `downloadprogress` events: loaded from 0 to 1 (total 1), in steps of 1/65536. */
  monitor?: (monitor: CreateMonitor) => void;
  initialPrompts?: LanguageModelMessage[];
}

export interface LanguageModelPromptOptions {
  /** A JSON Schema (an object) or a RegExp (without flags) the reply follows exactly. */
  responseConstraint?: object | RegExp;
  /** Leave out the sentence that tells the model what the constraint expects. */
  omitResponseConstraintInput?: boolean;
  signal?: AbortSignal;
}

export interface LanguageModelParams {
  defaultTopK: number;
  maxTopK: number;
  defaultTemperature: number;
  maxTemperature: number;
}

/** A session of the Prompt API: one conversation, held in a session of the model (its cache). */
export interface LanguageModel extends EventTarget {
  /** The reply, whole. Rejects with a QuotaExceededError (requested, quota) when the conversation and the prompt cannot fit. */
  prompt(input: LanguageModelPrompt, options?: LanguageModelPromptOptions): Promise<string>;
  /** The reply as a stream of its text, piece by piece. */
  promptStreaming(input: LanguageModelPrompt, options?: LanguageModelPromptOptions): ReadableStream<string>;
  /** Takes the input into the session's cache now, without a reply. */
  append(input: LanguageModelPrompt, options?: { signal?: AbortSignal }): Promise<void>;
  /** The tokens the input would add (with the constraint's sentence where it would go). */
  measureContextUsage(input: LanguageModelPrompt, options?: LanguageModelPromptOptions): Promise<number>;
  /** measureContextUsage's older name. */
  measureInputUsage(input: LanguageModelPrompt, options?: LanguageModelPromptOptions): Promise<number>;
  /** The tokens the session's cache holds. */
  readonly contextUsage: number;
  /** The context window in tokens. */
  readonly contextWindow: number;
  readonly inputUsage: number;
  readonly inputQuota: number;
  readonly topK: number;
  readonly temperature: number;
  readonly samplingMode: LanguageModelSamplingMode;
  /** Fired when a reply fills the context window: it ends there, and the oldest turns after the initial prompts are dropped. */
  oncontextoverflow: ((event: Event) => void) | null;
  onquotaoverflow: ((event: Event) => void) | null;
  /** A second session from this one's conversation: its cache a copy-on-write fork (no forward pass). */
  clone(options?: { signal?: AbortSignal }): Promise<LanguageModel>;
  /** Ends the session: what is pending and what is asked later rejects with an AbortError. */
  destroy(): void;
}

export interface LanguageModelStatic {
  create(options?: LanguageModelCreateOptions): Promise<LanguageModel>;
  availability(options?: LanguageModelCreateCoreOptions): Promise<Availability>;
  params(): Promise<LanguageModelParams>;
  prototype: LanguageModel;
}

export interface DefineLanguageModelOptions {
  /** A loaded Llama or RemoteLlama, or where to load one from (what Llama.load takes: a URL, an hf: name, bytes, a Blob). */
  model: Llama | RemoteLlama | ModelSource | readonly ModelSource[];
  /** The model's projector, to take images. */
  projector?: ModelSource;
  /** Load the model in a LlamaWorker: true for a new one (default: this thread). */
  worker?: boolean | LlamaWorker;
  /** init()'s options (or the new worker's). */
  init?: Omit<InitOptions, 'module'>;
  /** A ModelStore (or true: the default one) the file downloads into once; a stored file is 'available'. */
  store?: ModelStore | true | null;
  /** With a store: false keeps and restores no prefixes in its prefix cache (Llama.load's storePrefixes; default true). */
  storePrefixes?: boolean;
  /** The context window in tokens (default: the model's context), which Llama.load sizes the heap for. */
  contextLength?: number;
  cacheMode?: KvMode;
  /** The language tags the model is said to read and write (default: any). */
  languages?: string[];
  /** The most tokens of one reply (default: the window's room). */
  maxTokens?: number;
  /** Decodes an image's bytes where the runtime cannot (Node). */
  decodeImage?: (bytes: Uint8Array) => ImagePixels | Promise<ImagePixels>;
  /** As Chrome's (default true): on a page, a create() that would start the model's download is a NotAllowedError until
   * the user has interacted with the page (navigator.userActivation.hasBeenActive). */
  requireUserActivation?: boolean;
}

/** A LanguageModel class over one model, loaded by its first create(). */
export function defineLanguageModel(options: DefineLanguageModelOptions): LanguageModelStatic;

/** defineLanguageModel(options) installed as globalThis.LanguageModel where there is none (or with replace: true). */
export function installLanguageModel(options: DefineLanguageModelOptions & { replace?: boolean }): LanguageModelStatic;

/** A message of the conversation as Chrome's prompt-api-polyfill sends it to a backend (Gemini's contents). */
export interface PolyfillContent {
  role: 'user' | 'model' | 'system';
  parts: ({ text: string } | { inlineData: { mimeType: string; data: string } })[];
}

/** The class of a prompt-api-polyfill backend: the shape of the polyfill's own backends. */
export interface PolyfillBackendClass {
  new (config?: { modelName?: string }): {
    readonly modelName: string;
    /** Loads the model (once; `downloadprogress` events on monitorTarget) and opens the session the conversation is held in. */
    createSession(options: object, sessionParams?: { systemInstruction?: string; generationConfig?: { temperature?: number; topK?: number; responseSchema?: object } },
      monitorTarget?: EventTarget | null): Promise<unknown>;
    /** The reply to the whole conversation; usage: the tokens the session holds. */
    generateContent(contents: PolyfillContent[]): Promise<{ text: string; usage: number }>;
    /** The reply as chunks; the last one's totalTokenCount is the tokens the session holds. */
    generateContentStream(contents: PolyfillContent[]): Promise<AsyncIterable<{ text(): string; usageMetadata: { totalTokenCount: number } }>>;
    /** The tokens of the conversation as the model's template renders it. */
    countTokens(contents: PolyfillContent[]): Promise<number>;
  };
  /** 'unavailable' for audio inputs, and images without a projector; 'available' otherwise. */
  availability(options?: LanguageModelCreateCoreOptions): Availability;
}

/**
 * A backend of Chrome's prompt-api-polyfill over one model (the loader's options as defineLanguageModel's; maxTokens,
 * a reply's most, default 512): the conversation the polyfill sends whole each call is held in the backend's session,
 * so a call computes only what is new.
 */
export function polyfillBackend(options: Omit<DefineLanguageModelOptions, 'languages' | 'requireUserActivation'>): PolyfillBackendClass;

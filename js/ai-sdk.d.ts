// kvcache-wasm/ai-sdk: a provider for the Vercel AI SDK (`ai`), its language-model specification v4.
// The shapes are the SDK's (@ai-sdk/provider's LanguageModelV4), written out here so that the package needs neither
// `ai` nor `@ai-sdk/provider` to be installed; a model is accepted wherever the SDK takes a LanguageModel.
import type { ImageDecoder, Llama, LlamaSession, SessionOptions } from './llama.js';
import type { RemoteLlama, RemoteSession, RemoteSessionOptions } from './worker.js';

/** What kvcache(model, settings) takes beside the model. */
export interface KvcacheModelSettings {
  /** A Jinja chat template in place of the file's (a file without one chats through PLAIN_TEMPLATE). */
  template?: string;
  /** The session the calls run in, a session of this model (default: one made at the first call, with sessionOptions). */
  session?: LlamaSession | RemoteSession;
  /** Options of the session made at the first call. */
  sessionOptions?: SessionOptions | RemoteSessionOptions;
  /** Decodes an image's bytes where the runtime cannot (Node, Deno, Bun): images in prompts need it there. */
  decodeImage?: ImageDecoder;
  /** The id the SDK reports (default: its name in createKvcache's models, else general.architecture). */
  modelId?: string;
}

/** ReplyOptions a call may set as providerOptions['kvcache-wasm'], beside the SDK's own settings. */
export interface KvcacheProviderOptions {
  minP?: number;
  repeatPenalty?: number;
  repeatLastN?: number;
  draft?: number;
  minNgram?: number;
  context?: 'stop' | 'slide';
}

/** A language model of the AI SDK's specification v4 over a Llama or a RemoteLlama: pass it as `model` to generateText,
 * streamText, generateObject, streamObject. Calls on one model take turns in its one session, which computes only what
 * its cache does not hold of each call's conversation. */
export class KvcacheLanguageModel {
  constructor(model: Llama | RemoteLlama, settings?: KvcacheModelSettings);
  readonly specificationVersion: 'v4';
  readonly provider: 'kvcache-wasm';
  readonly modelId: string;
  /** None: the SDK downloads a URL in a prompt and hands over its bytes. */
  readonly supportedUrls: Record<string, RegExp[]>;
  /** The session the calls run in (made at the first call unless settings.session gave one). */
  session(): Promise<LlamaSession | RemoteSession>;
  /** LanguageModelV4#doGenerate: content (text, reasoning, tool calls), finishReason, usage in tokens, warnings. */
  doGenerate(options: LanguageModelCallOptions): PromiseLike<any>;
  /** LanguageModelV4#doStream: a ReadableStream of the specification's stream parts. */
  doStream(options: LanguageModelCallOptions): PromiseLike<{ stream: ReadableStream<any>; request?: { body?: unknown } }>;
}

/** The SDK's LanguageModelV4CallOptions, as far as this provider reads them (the SDK builds them: an app does not). */
export interface LanguageModelCallOptions {
  prompt: readonly unknown[];
  maxOutputTokens?: number;
  temperature?: number;
  stopSequences?: string[];
  topP?: number;
  topK?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  responseFormat?: { type: 'text' } | { type: 'json'; schema?: object; name?: string; description?: string };
  seed?: number;
  tools?: readonly unknown[];
  toolChoice?: { type: 'auto' | 'none' | 'required' } | { type: 'tool'; toolName: string };
  includeRawChunks?: boolean;
  abortSignal?: AbortSignal;
  headers?: Record<string, string | undefined>;
  reasoning?: string;
  providerOptions?: Record<string, Record<string, unknown>>;
}

/** A provider: call it with a model (or the name of one in createKvcache's models). */
export interface KvcacheProvider {
  (model: Llama | RemoteLlama | string, settings?: KvcacheModelSettings): KvcacheLanguageModel;
  readonly specificationVersion: 'v4';
  languageModel(model: Llama | RemoteLlama | string, settings?: KvcacheModelSettings): KvcacheLanguageModel;
  /** Throws the SDK's NoSuchModelError: the runner computes no embeddings yet. */
  embeddingModel(modelId: string): never;
  /** Throws the SDK's NoSuchModelError: the runner generates no images. */
  imageModel(modelId: string): never;
}

/** A provider; options.models names models for the SDK's provider registries (createProviderRegistry), which ask by name. */
export function createKvcache(options?: { models?: Record<string, Llama | RemoteLlama> }): KvcacheProvider;

/** The default provider: generateText({ model: kvcache(llama), prompt }). */
export const kvcache: KvcacheProvider;

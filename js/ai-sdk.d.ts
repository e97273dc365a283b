// kvcache-wasm/ai-sdk: a provider for the Vercel AI SDK (`ai`), its specification v4 of language, embedding and
// reranking models. The shapes are the SDK's (@ai-sdk/provider's LanguageModelV4, EmbeddingModelV4,
// RerankingModelV4), written out here so that the package needs neither `ai` nor `@ai-sdk/provider` to be installed;
// a model is accepted wherever the SDK takes a LanguageModel, an EmbeddingModel or a RerankingModel.
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

/** An embedding model of the AI SDK's specification v4 over a Llama or a RemoteLlama whose file embeds (pooling mean,
 * cls or last): pass it as `model` to embed and embedMany. Its vectors are the model's embed()'s, normalised. */
export class KvcacheEmbeddingModel {
  /** Throws the SDK's NoSuchModelError, saying why, for a model that generates or reranks. */
  constructor(model: Llama | RemoteLlama, settings?: Pick<KvcacheModelSettings, 'modelId'>);
  readonly specificationVersion: 'v4';
  readonly provider: 'kvcache-wasm';
  readonly modelId: string;
  /** Infinity: the runner groups a call's texts into passes of the weights by their tokens itself. */
  readonly maxEmbeddingsPerCall: number;
  /** False: one model, one heap. */
  readonly supportsParallelCalls: false;
  /** EmbeddingModelV4#doEmbed: a vector per value, usage in the tokens embed() encoded. */
  doEmbed(options: EmbeddingModelCallOptions): PromiseLike<{ embeddings: number[][]; usage: { tokens: number }; warnings: [] }>;
}

/** The SDK's EmbeddingModelV4CallOptions (the SDK builds them: an app does not). */
export interface EmbeddingModelCallOptions extends Pick<LanguageModelCallOptions, 'abortSignal' | 'headers' | 'providerOptions'> {
  values: string[];
  /** The first that many values of each vector, normalised after (Matryoshka); at most config.embeddingDim. */
  dimensions?: number;
}

/** What an embedding call may set as providerOptions['kvcache-wasm']. */
export interface KvcacheEmbeddingProviderOptions {
  /** As the SDK's own `dimensions` (the two, if both given, must agree). */
  dimensions?: number;
}

/** A reranking model of the AI SDK's specification v4 over a Llama or a RemoteLlama whose file reranks (pooling rank):
 * pass it as `model` to rerank. Its ranking is the model's rerank()'s: best first, cut to topN. */
export class KvcacheRerankingModel {
  /** Throws the SDK's NoSuchModelError, saying why, for a model that generates or embeds. */
  constructor(model: Llama | RemoteLlama, settings?: Pick<KvcacheModelSettings, 'modelId'>);
  readonly specificationVersion: 'v4';
  readonly provider: 'kvcache-wasm';
  readonly modelId: string;
  /** RerankingModelV4#doRerank: the documents' indices and scores, best first; an object document goes as its JSON. */
  doRerank(options: RerankingModelCallOptions): PromiseLike<{ ranking: { index: number; relevanceScore: number }[]; warnings: [] }>;
}

/** The SDK's RerankingModelV4CallOptions (the SDK builds them: an app does not). */
export interface RerankingModelCallOptions extends Pick<LanguageModelCallOptions, 'abortSignal' | 'headers' | 'providerOptions'> {
  documents: { type: 'text'; values: string[] } | { type: 'object'; values: Record<string, unknown>[] };
  query: string;
  topN?: number;
}

/** What a reranking call may set as providerOptions['kvcache-wasm']. */
export interface KvcacheRerankingProviderOptions {
  /** Cut a query and document longer than the model's context to it (default: a RangeError). */
  truncate?: boolean;
}

/** A provider: call it with a model (or the name of one in createKvcache's models). */
export interface KvcacheProvider {
  (model: Llama | RemoteLlama | string, settings?: KvcacheModelSettings): KvcacheLanguageModel;
  readonly specificationVersion: 'v4';
  languageModel(model: Llama | RemoteLlama | string, settings?: KvcacheModelSettings): KvcacheLanguageModel;
  /** An embedding model (pooling mean, cls or last); another model, or an unknown name, is the SDK's NoSuchModelError. */
  embeddingModel(model: Llama | RemoteLlama | string, settings?: Pick<KvcacheModelSettings, 'modelId'>): KvcacheEmbeddingModel;
  /** A reranker (pooling rank); another model, or an unknown name, is the SDK's NoSuchModelError. */
  rerankingModel(model: Llama | RemoteLlama | string, settings?: Pick<KvcacheModelSettings, 'modelId'>): KvcacheRerankingModel;
  /** Throws the SDK's NoSuchModelError: the runner generates no images. */
  imageModel(modelId: string): never;
}

/** A provider; options.models names models for the SDK's provider registries (createProviderRegistry), which ask by name. */
export function createKvcache(options?: { models?: Record<string, Llama | RemoteLlama> }): KvcacheProvider;

/** The default provider: generateText({ model: kvcache(llama), prompt }), embed({ model: kvcache.embeddingModel(embedder),
 * value }), rerank({ model: kvcache.rerankingModel(reranker), query, documents }). */
export const kvcache: KvcacheProvider;

// kvcache-wasm/chat: a conversation rendered by the model's chat template, in a local or a worker's session.
import type {
  GeneratePiece, ImageDecoder, ImageSource, Llama, LlamaSession, ModelStore, PreparedImage, ReplyOptions, SessionOptions, Tokenizer,
} from './llama.js';
import type { RemoteLlama, RemoteSession } from './worker.js';

/** A turn of a conversation. Templates read role and content; some read more (tool_calls, reasoning_content). */
export interface ChatMessage {
  role: string;
  /** Text as a rule; some templates take null (a tool call's turn) or a list of parts. */
  content?: unknown;
  [key: string]: unknown;
}

export interface ChatRenderOptions {
  /** End with the opening of the assistant's turn, for the model to write (default true). */
  addGenerationPrompt?: boolean;
  /** Any other key is a template variable (tools, documents, date_string, enable_thinking, ...), set over render's own. */
  [variable: string]: unknown;
}

/** A chat template that does not parse, raises an exception (raise_exception) or fails to render; `cause` is the engine's error. */
export class ChatTemplateError extends Error {}

/**
 * A chat template (Jinja) rendered with @huggingface/jinja from the variables transformers.js
 * gives it: messages, add_generation_prompt, tools and documents (null unless given),
 * bos_token and eos_token (when set), then the caller's. The text is byte for byte
 * transformers.js's tokenizer.apply_chat_template(messages, { tokenize: false }).
 */
export class ChatTemplate {
  /** Throws a ChatTemplateError when the source does not parse. */
  constructor(source: string, tokens?: { bosToken?: string | null; eosToken?: string | null });
  /** The GGUF file's tokenizer.chat_template with the text of its begin and end tokens; a ChatTemplateError when it has none. */
  static fromTokenizer(tokenizer: Pick<Tokenizer, 'chatTemplate' | 'bosToken' | 'eosToken'>): ChatTemplate;
  /** The template's Jinja text. */
  readonly source: string;
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  /** The conversation as the model's prompt text; a ChatTemplateError naming what the template raised or why it failed. */
  render(messages: readonly ChatMessage[], options?: ChatRenderOptions): string;
}

/** The template of a file without one (a base model): the begin token, then each message's text on a line of its own. */
export const PLAIN_TEMPLATE: string;

export interface ChatOptions {
  /** A system prompt: the conversation's first message. */
  system?: string;
  /** A Jinja chat template in place of the file's (a file without one chats through PLAIN_TEMPLATE). */
  template?: string;
}

export class Chat {
  /** A chat in `session`, which it then owns. */
  constructor(session: LlamaSession | RemoteSession, options?: ChatOptions);
  /** The conversation so far (a copy). */
  readonly messages: ConversationMessage[];
  readonly session: LlamaSession | RemoteSession;
  /**
   * Sends a user message (text, or parts: text and images, which need a model loaded with a projector) -- or takes an
   * array of messages as the conversation to answer (an edited or regenerated turn) -- and streams the reply; only what
   * the session's cache does not hold is computed. The reply, whole or as far as an abort let it come, joins the messages.
   */
  send(input: string | readonly ContentPart[] | readonly ConversationMessage[], options?: ReplyOptions & ToolOptions & { decodeImage?: ImageDecoder }):
    AsyncGenerator<GeneratePiece & { toolCalls?: ToolCall[] }, void, undefined>;
  /** The conversation as bytes: its messages and its session; given a name, also stored under it in a ModelStore
   * (options.store, else the one the model was loaded through) with its model's digest. */
  save(name?: string, options?: { store?: ModelStore }): Promise<Uint8Array>;
  /** A chat save() saved -- its bytes, or the name it was stored under -- on a Llama or RemoteLlama of the same model
   * (a stored one saved with another model file is refused). */
  static restore(llama: Llama | RemoteLlama, saved: Uint8Array | ArrayBuffer | string,
    options?: { template?: string; store?: ModelStore } & Omit<SessionOptions, 'mode' | 'residualRows' | 'cache' | 'tokens'>): Promise<Chat>;
  /** Frees the session (idempotent). */
  free(): void | Promise<void>;
}

/** A tool call, OpenAI-shaped: its arguments are JSON text. */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A part of a user's (or system's) message: text, or an image (anything Llama#prepareImage takes, or one it prepared;
 * OpenAI's image_url: a URL fetch() reads, data: URLs among them). */
export type ContentPart = { type: 'text'; text: string } | { type: 'image'; image: ImageSource | PreparedImage }
  | { type: 'image_url'; image_url: { url: string } | string };

/** A message of a conversation: an assistant's may carry tool_calls and reasoning_content, a tool's the id of the call it answers. */
export interface ConversationMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | ContentPart[];
  tool_calls?: ToolCall[];
  /** An assistant's thinking (Gemma 4's thinking channel), which its content leaves out. */
  reasoning_content?: string;
  tool_call_id?: string;
  name?: string;
  [key: string]: unknown;
}

/** A tool: its parameters a JSON Schema (checked as responseFormat's are). Also taken OpenAI-shaped ({ type: 'function', function }). */
export interface Tool {
  name: string;
  description?: string;
  parameters?: object;
}

export interface ToolOptions {
  /** Tools the model may call, rendered by its template; calls are constrained to their parameters and parsed. */
  tools?: readonly (Tool | { type: 'function'; function: Tool })[];
  /** 'auto' (default), 'required' (at least one call), 'none', or the one tool to call. */
  toolChoice?: 'auto' | 'required' | 'none' | { type: 'function'; function: { name: string } };
}

/** An OpenAI-shaped embeddings client over an embedding model: client.embeddings.create({ input, dimensions, encoding_format }). */
export function embeddings(model: Llama | RemoteLlama): {
  embeddings: {
    create(request: { input: string | readonly number[] | readonly (string | readonly number[])[]; model?: string; dimensions?: number;
      encoding_format?: 'float' | 'base64'; user?: string; signal?: AbortSignal }): Promise<{
      object: 'list'; data: { object: 'embedding'; index: number; embedding: number[] | string }[]; model: string;
      usage: { prompt_tokens: number; total_tokens: number } }>;
  };
};

/** An OpenAI-shaped client over a session: client.chat.completions.create(request). */
export function completions(session: LlamaSession | RemoteSession, options?: { template?: string }): {
  chat: { completions: { create(request: Record<string, unknown> & { messages: readonly ConversationMessage[]; stream?: boolean }): Promise<any> } };
};

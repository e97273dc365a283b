// kvcache-wasm/chat: a conversation with a model. Its messages are rendered
// by the file's chat template (chat-template.js: @huggingface/jinja, as
// transformers.js renders them) and the session responds to the whole
// rendering -- computing only what its cache does not hold yet, so each
// turn prefills only the new tokens. The session is a LlamaSession or a
// RemoteSession (kvcache-wasm/worker): the template renders on this thread,
// the model runs where the session is. A system prompt shared by many chats
// comes once from their sessions' PrefixCache; a conversation saves to
// bytes (its messages and its session) and restores.
//
//   const chat = new Chat(llama.session({ prefixCache }), { system: 'You are concise.' });
//   for await (const piece of chat.send('Hello!', { signal })) output.textContent += piece.text;
import { checkBytes, checkObject, shown } from '../runtime/checks.js';
import { checkKeys } from '../runtime/options.js';
import { ChatTemplate } from './template.js';
import { parseReply, readsControlTokens, templateMessages, toolFormatOf, toolRequest } from './tools.js';
import { checkName, getConversation, putConversation } from '../store/store.js';
import { checkParts, hasParts, idsOf, imagesOf, prepareImages, renderedContent } from './content.js';

// A file without a chat template (a base model, like stories260K) chats as
// plain text: the begin token, then each message's text on a line of its own.
export const PLAIN_TEMPLATE = '{{ bos_token }}{% for message in messages %}{{ message.content }}\n{% endfor %}';

const CHAT_OPTIONS = ['system', 'template'];
const ROLES = ['system', 'user', 'assistant', 'tool'];
// A saved chat: "KVCH" (a little-endian u32), the version, the length of
// its messages' JSON, the JSON, then the saved session.
const SAVED_MAGIC = 0x4843564b;
const SAVED_VERSION = 1;
const SAVED_HEADER_BYTES = 12;
const restored = Symbol('restored');

/**
 * `messages` checked: { role, content } (an assistant's with its tool_calls
 * and reasoning_content, a tool's with its tool_call_id), copied; a user's
 * or system's content may be parts, text and images (content.js).
 */
export function checkMessages(where, messages) {
  if (!Array.isArray(messages) || messages.length === 0) throw new TypeError(`${where}: messages must be a non-empty array`);
  return messages.map((m, i) => {
    const calls = m?.role === 'assistant' ? m.tool_calls : undefined;
    const content = calls !== undefined && m.content == null ? '' : m?.content;
    const parts = hasParts(content) && (m.role === 'user' || m.role === 'system');
    if (m === null || typeof m !== 'object' || !ROLES.includes(m.role) || (typeof content !== 'string' && !parts)) {
      throw new TypeError(`${where}: messages[${i}] must be { role: ${ROLES.map((r) => `'${r}'`).join(' | ')}, content: string } ` +
        `(a user's content may be [{ type: 'text', text }, { type: 'image', image }]) (got ${shown(m)})`);
    }
    const message = { role: m.role, content: parts ? checkParts(where, i, content) : content };
    if (calls !== undefined && calls.length > 0) message.tool_calls = checkCalls(where, i, calls);
    if (m.role === 'assistant' && typeof m.reasoning_content === 'string') message.reasoning_content = m.reasoning_content;
    if (m.role === 'tool' && m.tool_call_id !== undefined) message.tool_call_id = String(m.tool_call_id);
    if (m.role === 'tool' && m.name !== undefined) message.name = String(m.name);
    return message;
  });
}

function checkCalls(where, i, calls) {
  const ok = Array.isArray(calls) && calls.every((c) => typeof c?.function?.name === 'string' &&
    (typeof c.function.arguments === 'string' || (c.function.arguments !== null && typeof c.function.arguments === 'object')));
  if (!ok) throw new TypeError(`${where}: messages[${i}].tool_calls must be [{ id, type: 'function', function: { name, arguments } }]`);
  return calls.map((c) => ({ id: String(c.id ?? ''), type: 'function', function: { name: c.function.name, arguments: typeof c.function.arguments === 'string' ? c.function.arguments : JSON.stringify(c.function.arguments) } }));
}

/** The chat template a model's conversations render by: `source` (Jinja text), else its file's, else PLAIN_TEMPLATE. */
export function templateFor(tokenizer, source) {
  return new ChatTemplate(source ?? tokenizer.chatTemplate ?? PLAIN_TEMPLATE, { bosToken: tokenizer.bosToken, eosToken: tokenizer.eosToken });
}

// A name for a tool call, as OpenAI's ids look.
const callId = () => `call_${Math.random().toString(36).slice(2, 12)}`;

/**
 * The reply to `messages` in `session` rendered by `template`, streamed as
 * pieces; the last piece (its stop set) carries `toolCalls` when options.tools
 * were given, and `message`: the assistant turn as it joins the
 * conversation ({ role, content, tool_calls?, reasoning_content? -- a
 * thinking channel's text, which a Gemma 4 reply's content leaves out }).
 * What Chat#send and the OpenAI-shaped client run.
 */
export async function* reply(where, session, template, messages, options, { continuation = '' } = {}) {
  const { tools, toolChoice, ...rest } = options;
  let request = null;
  if (tools !== undefined) request = toolRequest(where, template.source, tools, toolChoice);
  else if (toolChoice !== undefined) throw new TypeError(`${where}: options.toolChoice is given without options.tools`);
  const text = await conversationInput(where, session.llama, template, messages, { variables: request?.variables, continuation });
  const shared = typeof text === 'string' ? sharedPrefixOf(template, messages, request?.variables, text) : '';
  const respondOptions = { ...rest, ...(request?.structuralTag && { structuralTag: request.structuralTag }), ...(shared && { sharedPrefix: shared }) };
  const format = request?.format ?? toolFormatOf(template.source)?.name ?? null;
  const special = readsControlTokens(format);
  let whole = '';
  const ids = [];
  for await (const piece of session.respond(text, respondOptions)) {
    whole += piece.text;
    if (special) ids.push(...piece.tokens.filter((id) => !session.llama.tokenizer.eogIds.has(id))); // its end token is not its text
    if (piece.stop === null) {
      yield piece;
      continue;
    }
    const read = special ? await decodeWithControlTokens(session.llama, ids) : whole;
    const parsed = parseReply(format, read, Boolean(request) && toolChoice !== 'none', callId, request?.tools);
    const message = { role: 'assistant', content: parsed.toolCalls.length > 0 || special ? parsed.content : whole };
    if (parsed.reasoning) message.reasoning_content = parsed.reasoning;
    if (parsed.toolCalls.length > 0) message.tool_calls = parsed.toolCalls;
    yield { ...piece, ...(request ? { toolCalls: parsed.toolCalls } : {}), message };
  }
}

/**
 * The start of `text` (the rendering of `messages`) that other
 * conversations share: the rendering of its system messages and tools
 * alone, when the text begins with it (a template may fold the system
 * prompt into the first user turn); else ''. The session keeps a prefix
 * there in the store's prefix cache, for the next page's first message.
 */
function sharedPrefixOf(template, messages, variables = {}, text) {
  const system = [];
  for (const m of messages) {
    if (m.role !== 'system' || typeof m.content !== 'string') break;
    system.push(m);
  }
  if (system.length === 0 && !variables.tools) return '';
  try {
    const shared = template.render(templateMessages(system), { addGenerationPrompt: false, ...variables });
    return text.startsWith(shared) ? shared : '';
  } catch {
    return ''; // a template that renders no conversation without a user turn
  }
}

/**
 * `messages` (their images prepared: prepareImages) as a session's
 * respond() takes them: the template's rendering -- with the template
 * variables of a tool request, and the generation prompt unless
 * generationPrompt is false, then `continuation` (the start of the reply,
 * written by the app) -- as text, or as token ids where images are in it.
 */
export async function conversationInput(where, llama, template, messages, { variables = {}, generationPrompt = true, continuation = '' } = {}) {
  const rendered = messages.map((m) => ({ ...m, content: renderedContent(m.content) }));
  const rendering = template.render(templateMessages(rendered), { addGenerationPrompt: generationPrompt, ...variables }) + continuation;
  const images = imagesOf(messages);
  return images.length ? idsOf(where, llama, rendering, images) : rendering;
}

// A reply's tokens as text with their control tokens written in it: a Llama's tokenizer decodes here, a RemoteLlama's in its worker.
function decodeWithControlTokens(llama, ids) {
  return typeof llama.tokenizer.decode === 'function' ? llama.tokenizer.decode(ids, { special: true }) : llama.decode(ids, { special: true });
}

export class Chat {
  #session;
  #template;
  #messages;

  /**
   * A chat in `session` (a LlamaSession, or a RemoteSession from
   * kvcache-wasm/worker), which it then owns. options.system: a system
   * prompt; options.template: a Jinja chat template in place of the
   * file's (a file without one chats through PLAIN_TEMPLATE).
   */
  constructor(session, options = {}, internal = null) {
    const where = 'new Chat';
    if (typeof session?.respond !== 'function' || !session.llama?.tokenizer) {
      throw new TypeError(`${where}: session must be a LlamaSession or a RemoteSession (got ${shown(session)})`);
    }
    checkObject(where, 'options', options);
    checkKeys(where, options, CHAT_OPTIONS);
    const { system, template } = options;
    if (system !== undefined && typeof system !== 'string') throw new TypeError(`${where}: options.system must be a string (got ${shown(system)})`);
    if (system !== undefined && internal) throw new TypeError('Chat.restore: options.system is the saved chat\'s');
    this.#template = templateFor(session.llama.tokenizer, template);
    this.#session = session;
    this.#messages = internal?.[restored] ?? (system === undefined ? [] : [{ role: 'system', content: system }]);
  }

  /** The conversation so far: { role, content } (a copy). */
  get messages() {
    return this.#messages.map((m) => ({ ...m }));
  }

  /** The session the conversation runs in. */
  get session() {
    return this.#session;
  }

  /**
   * Sends a user message -- text, or parts: [{ type: 'text', text },
   * { type: 'image', image }] (an image: what Llama#prepareImage takes, with
   * options.decodeImage where the runtime cannot decode; the model needs a
   * projector) -- or, given an array of messages, takes it as the
   * conversation to answer (an edited or regenerated turn) -- and
   * streams the assistant's reply as LlamaSession#generate does (pieces {
   * text, tokens, stop, stats }; its options: signal, maxTokens, sampling,
   * stop, draft, context, and a constraint: responseFormat, grammar, regex
   * or structuralTag, as generate()'s). options.tools ([{ name,
   * description, parameters }]) go to the template, and the calls' names
   * and arguments are constrained to them (toolChoice: 'auto', 'required',
   * 'none' or { type: 'function', function: { name } }); the last piece's
   * toolCalls are the calls, OpenAI-shaped. A tool's result goes back as a
   * message { role: 'tool', content, tool_call_id } in the next send's
   * array. The rendering goes to the session's respond(), which computes
   * only what its cache does not hold. The reply, whole or as far as an
   * abort (or a loop's break) let it come, joins the messages (its calls as
   * tool_calls); a call refused before its first piece changes nothing.
   */
  async *send(input, options = {}) {
    const where = 'Chat.send';
    checkObject(where, 'options', options);
    const { decodeImage, ...rest } = options;
    // Text, a user message's parts (text and images), or the conversation to answer.
    const userParts = Array.isArray(input) && input.length > 0 && input.every((part) => typeof part?.type === 'string' && part.role === undefined);
    const messages = await prepareImages(where, this.#session.llama, typeof input === 'string' || userParts
      ? [...this.#messages, { role: 'user', content: userParts ? checkParts(where, this.#messages.length, input) : input }]
      : checkMessages(where, input), { decodeImage });
    let partial = null;
    let ended = null;
    try {
      for await (const piece of reply(where, this.#session, this.#template, messages, rest)) {
        partial = (partial ?? '') + piece.text;
        const { message, ...rest } = piece;
        if (message) ended = message;
        yield rest;
      }
    } finally {
      if (ended) this.#messages = [...messages, ended];
      else if (partial !== null) this.#messages = [...messages, { role: 'assistant', content: partial }];
    }
  }

  /**
   * The conversation as bytes: its messages and its session (tokens and the
   * cache's snapshot, the same bytes from every build). Chat.restore takes
   * it back, in another tab, worker or edge isolate. Given a `name`, it is
   * also stored under that name in a ModelStore (options.store, else the
   * store the model was loaded through) with its model's digest, replacing
   * what was saved under it: Chat.restore(llama, name) takes it back after
   * a reload.
   */
  async save(name, options = {}) {
    const where = 'Chat.save';
    if (name !== undefined) checkName(where, name);
    checkObject(where, 'options', options);
    checkKeys(where, options, ['store']);
    const store = name === undefined ? null : storeOf(where, options, this.#session.llama);
    const json = new TextEncoder().encode(JSON.stringify(this.#messages));
    const session = await this.#session.save();
    const out = new Uint8Array(SAVED_HEADER_BYTES + json.length + session.length);
    const view = new DataView(out.buffer);
    view.setUint32(0, SAVED_MAGIC, true);
    view.setUint32(4, SAVED_VERSION, true);
    view.setUint32(8, json.length, true);
    out.set(json, SAVED_HEADER_BYTES);
    out.set(session, SAVED_HEADER_BYTES + json.length);
    if (store) await store[putConversation](name, out, { digest: await this.#session.llama.digest });
    return out;
  }

  /**
   * A chat restored on `llama` (a Llama, or a RemoteLlama from
   * kvcache-wasm/worker) of the same model: from save()'s bytes, or by the
   * name it was saved under in a ModelStore (options.store, else the store
   * llama was loaded through) -- refused, saying so, when it was saved with
   * another model file. options: template (as the constructor's) and the
   * session's options (Llama#restoreSession's).
   */
  static async restore(llama, saved, options = {}) {
    const where = 'Chat.restore';
    checkObject(where, 'options', options);
    const { template, store, ...sessionOptions } = options;
    let data;
    if (typeof saved === 'string') {
      const from = storeOf(where, { store }, llama);
      const found = await from[getConversation](saved);
      if (!found) throw new Error(`${where}: no conversation is saved as ${shown(saved)} in the store ${from.name}`);
      const digest = await llama.digest;
      if (found.model.digest !== digest) {
        throw new TypeError(`${where}: the conversation ${shown(saved)} was saved with another model file (digest ${found.model.digest}; this model's is ${digest})`);
      }
      data = found.bytes;
    } else {
      data = checkBytes(where, 'saved', saved);
    }
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    if (data.length < SAVED_HEADER_BYTES || view.getUint32(0, true) !== SAVED_MAGIC) throw new TypeError(`${where}: these bytes are not a saved chat`);
    const version = view.getUint32(4, true);
    if (version !== SAVED_VERSION) throw new TypeError(`${where}: a saved chat of version ${version}, which this package does not read`);
    const length = view.getUint32(8, true);
    if (SAVED_HEADER_BYTES + length > data.length) throw new TypeError(`${where}: the saved chat is truncated`);
    let messages;
    try {
      messages = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(data.subarray(SAVED_HEADER_BYTES, SAVED_HEADER_BYTES + length)));
    } catch {
      throw new TypeError(`${where}: the saved chat's messages are not JSON`);
    }
    if (messages.length > 0) checkMessages(where, messages);
    const session = await llama.restoreSession(data.subarray(SAVED_HEADER_BYTES + length), sessionOptions);
    return new Chat(session, template === undefined ? {} : { template }, { [restored]: messages });
  }

  /** Frees the session (idempotent). */
  free() {
    return this.#session.free();
  }
}

/** The ModelStore a chat saves to or restores from: options.store, else the one its model was loaded through. */
function storeOf(where, options, llama) {
  const store = options.store ?? llama.store;
  if (!store?.[putConversation]) {
    throw new TypeError(`${where}: a conversation is saved by name in a ModelStore: options.store, or load the model with one (got ${shown(options.store)})`);
  }
  return store;
}

// An OpenAI-shaped entry point for apps that already speak that API:
// client.chat.completions.create({ messages, tools, tool_choice,
// response_format, stream, max_tokens, ... }) on a session (a LlamaSession,
// or a RemoteSession in a worker), mapped onto Chat's machinery: the
// model's template renders the messages, the session responds computing
// only what its cache does not hold (each request repeats the conversation;
// its shared part is not computed again), and the reply comes back as a
// chat.completion, or as chat.completion.chunk objects when streamed.
//
//   const client = completions(llama.session());
//   const r = await client.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }] });
//   r.choices[0].message.content
import { checkObject, shown } from '../runtime/checks.js';
import { checkKeys } from '../runtime/options.js';
import { checkMessages, reply, templateFor } from './chat.js';
import { prepareImages } from './content.js';

// The request's keys, and the generate() option each maps to (null: handled here).
const REQUEST = {
  messages: null, model: null, stream: null, tools: 'tools', tool_choice: 'toolChoice', response_format: 'responseFormat',
  max_tokens: 'maxTokens', max_completion_tokens: 'maxTokens', temperature: 'temperature', top_p: 'topP', seed: 'seed',
  stop: 'stop', signal: 'signal', n: null, frequency_penalty: null, presence_penalty: null, logprobs: null, top_logprobs: null,
};
const FINISH = { end: 'stop', stop: 'stop', maxTokens: 'length', context: 'length', abort: 'stop' };

/**
 * An OpenAI-shaped client over `session`: { chat: { completions: { create
 * } } }. create(request) returns a promise of a chat.completion, or with
 * stream: true of an async iterable of chat.completion.chunk objects. Taken:
 * messages (system, user, assistant with tool_calls, tool), tools,
 * tool_choice, response_format ({ type: 'json_schema', json_schema: {
 * schema, strict } } or { type: 'json_object' }), max_tokens (or
 * max_completion_tokens), temperature, top_p, seed, stop (a string or
 * strings), signal (an AbortSignal, as OpenAI's client takes it), a user
 * message's content parts { type: 'text' } and { type: 'image_url',
 * image_url: { url } } (a model with a projector; a data: URL or any URL
 * fetch() reads, decoded by the runtime), model
 * (ignored: the session's model answers), logprobs and top_logprobs (up to
 * 20: choices[0].logprobs.content, OpenAI-shaped, the log-softmax of the
 * model's own logits). n must be 1; frequency_penalty
 * and presence_penalty are refused unless 0 (the sampler has llama.cpp's
 * repeat penalty instead). options.template: a Jinja chat template in
 * place of the file's.
 */
export function completions(session, options = {}) {
  const where = 'completions';
  if (typeof session?.respond !== 'function' || !session.llama?.tokenizer) {
    throw new TypeError(`${where}: session must be a LlamaSession or a RemoteSession (got ${shown(session)})`);
  }
  checkObject(where, 'options', options);
  checkKeys(where, options, ['template']);
  const template = templateFor(session.llama.tokenizer, options.template);
  let count = 0;
  const create = async (request) => {
    const call = 'chat.completions.create';
    checkObject(call, 'request', request);
    checkKeys(call, request, Object.keys(REQUEST));
    if (request.n !== undefined && request.n !== 1) throw new RangeError(`${call}: n must be 1 (one reply per request)`);
    for (const key of ['frequency_penalty', 'presence_penalty']) {
      if (request[key] !== undefined && request[key] !== 0) throw new RangeError(`${call}: ${key} is not supported (the sampler has llama.cpp's repeatPenalty)`);
    }
    const messages = await prepareImages(call, session.llama, checkMessages(call, request.messages));
    const generate = {};
    for (const [key, option] of Object.entries(REQUEST)) if (option && request[key] !== undefined) generate[option] = request[key];
    if (request.logprobs !== undefined && typeof request.logprobs !== 'boolean') throw new TypeError(`${call}: logprobs must be a boolean (got ${shown(request.logprobs)})`);
    if (request.top_logprobs !== undefined && !request.logprobs) throw new TypeError(`${call}: top_logprobs needs logprobs: true`);
    if (request.logprobs) generate.logprobs = request.top_logprobs ?? 0;
    const scored = request.logprobs ? logprobsOf(session.llama) : null;
    if (typeof generate.stop === 'string') generate.stop = [generate.stop];
    const id = `chatcmpl-${Date.now().toString(36)}${(count++).toString(36)}`;
    const created = Math.floor(Date.now() / 1000);
    const model = request.model ?? 'kvcache-wasm';
    const pieces = reply(call, session, template, messages, generate);
    return request.stream ? chunks(pieces, { id, created, model }, scored) : whole(pieces, { id, created, model }, scored);
  };
  return { chat: { completions: { create } } };
}

// 'length' when cut short (a call in it may be unfinished), else 'tool_calls' when it called.
const finishReason = (piece) => (FINISH[piece.stop] === 'length' ? 'length' : piece.message.tool_calls ? 'tool_calls' : FINISH[piece.stop]);

function usage({ promptTokens, tokens }) {
  return { prompt_tokens: promptTokens, completion_tokens: tokens, total_tokens: promptTokens + tokens };
}

function choiceMessage(message) {
  const out = { role: 'assistant', content: message.tool_calls ? (message.content || null) : message.content };
  if (message.reasoning_content) out.reasoning_content = message.reasoning_content;
  if (message.tool_calls) out.tool_calls = message.tool_calls;
  return out;
}

/**
 * A piece's logprobs as OpenAI's choice.logprobs.content entries: { token
 * (its text), logprob, bytes (its UTF-8 bytes), top_logprobs: [{ token,
 * logprob, bytes }] }, spelled by `llama`'s tokenizer (a RemoteLlama's where it runs).
 */
function logprobsOf(llama) {
  const spelled = async (token) => {
    const text = await (typeof llama.tokenizer.decode === 'function' ? llama.tokenizer : llama).decode([token], { special: true });
    return { token: text, bytes: Array.from(new TextEncoder().encode(text)) };
  };
  return async (piece) => Promise.all((piece.logprobs ?? []).map(async ({ token, logprob, top }) => ({
    ...(await spelled(token)), logprob,
    top_logprobs: await Promise.all(top.map(async (alt) => ({ ...(await spelled(alt.token)), logprob: alt.logprob }))),
  })));
}

async function whole(pieces, head, scored) {
  const content = [];
  for await (const piece of pieces) {
    if (scored) content.push(...(await scored(piece)));
    if (!piece.message) continue;
    const finish = finishReason(piece);
    return {
      ...head, object: 'chat.completion',
      choices: [{ index: 0, message: choiceMessage(piece.message), logprobs: scored ? { content } : null, finish_reason: finish }],
      usage: usage(piece.stats),
    };
  }
  throw new Error('chat.completions.create: the reply ended without its last piece');
}

async function* chunks(pieces, head, scored) {
  const chunk = (delta, finish = null, logprobs = null) => ({ ...head, object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, ...(scored ? { logprobs } : {}), finish_reason: finish }] });
  yield chunk({ role: 'assistant', content: '' });
  for await (const piece of pieces) {
    const logprobs = scored && piece.logprobs ? { content: await scored(piece) } : null;
    if (!piece.message) {
      if (piece.text || logprobs) yield chunk({ content: piece.text }, null, logprobs);
      continue;
    }
    if (piece.text || logprobs) yield chunk({ content: piece.text }, null, logprobs);
    const calls = piece.message.tool_calls;
    if (calls) yield chunk({ tool_calls: calls.map((c, index) => ({ index, ...c })) });
    yield chunk({}, finishReason(piece));
  }
}

// The Prompt API (the web platform's LanguageModel, as its explainer and
// specification define it) over this package's runner: a class per model
// that an app creates sessions of, each a conversation in a session of the
// model -- a LlamaSession here, or a RemoteSession in a LlamaWorker --
// rendered by the model's chat template. What the specification leaves to
// the implementation, this one decides so:
//   - context usage is counted in tokens: contextUsage is the positions the
//     session's cache holds, contextWindow the model's context length;
//   - append() takes its messages into the cache at once (a prompt then
//     computes only its own tokens); clone() forks the cache (copy on
//     write), costing no forward pass;
//   - a response constraint is enforced by the grammar engine (a JSON
//     Schema, or a RegExp's source), and unless omitResponseConstraintInput
//     the last user message says what is expected, in one sentence;
//   - a reply that reaches the end of the context ends there, fires
//     `contextoverflow`, and the oldest turns after the initial prompts are
//     dropped so that the next prompt has room.
import { checkObject, shown } from '../runtime/checks.js';
import { checkKeys } from '../runtime/options.js';
import { conversationInput, reply, templateFor } from '../chat/chat.js';
import { prepareImages } from '../chat/content.js';
import { toolRequest } from '../chat/tools.js';
import { constraintOf as engineConstraint } from '../model/grammar.js';
import { LOADER_OPTIONS, heldTokens, inputIds, loadReporting, modelLoader, racing } from './loader.js';

const MESSAGE_TYPES = ['text', 'image', 'audio', 'tool-call', 'tool-response'];
const ROLES = ['system', 'user', 'assistant'];
const SAMPLING_MODES = {
  'most-predictable': { temperature: 0, topK: 1 },
  predictable: { temperature: 0.3, topK: 10 },
  balanced: { temperature: 0.8, topK: 40 },
  creative: { temperature: 1, topK: 64 },
  'most-creative': { temperature: 1.3, topK: 128 },
};
const PARAMS = Object.freeze({ defaultTopK: 40, maxTopK: 128, defaultTemperature: 0.8, maxTemperature: 2 });
// The most rounds of tool calls one prompt runs before its reply must be text.
const TOOL_ROUNDS = 8;
const FACTORY_OPTIONS = [...LOADER_OPTIONS, 'languages', 'maxTokens', 'decodeImage', 'requireUserActivation'];

const domError = (name, message) => new DOMException(message, name);

/** A QuotaExceededError: the platform's class where the runtime has one, else a DOMException of that name with its two numbers. */
function quotaExceeded(message, requested, quota) {
  if (typeof globalThis.QuotaExceededError === 'function') return new globalThis.QuotaExceededError(message, { requested, quota });
  return Object.defineProperties(domError('QuotaExceededError', message), { requested: { value: requested }, quota: { value: quota } });
}

/** What create()'s monitor callback is given: an EventTarget of `downloadprogress` events (ondownloadprogress too). */
class CreateMonitor extends EventTarget {
  #handler = null;
  get ondownloadprogress() {
    return this.#handler;
  }

  set ondownloadprogress(handler) {
    if (this.#handler) this.removeEventListener('downloadprogress', this.#handler);
    this.#handler = typeof handler === 'function' ? handler : null;
    if (this.#handler) this.addEventListener('downloadprogress', this.#handler);
  }
}

/** An EventHandler attribute (oncontextoverflow) on `target`'s prototype, for the event `type`. */
function eventHandler(prototype, type) {
  const handlers = new WeakMap();
  Object.defineProperty(prototype, `on${type}`, {
    get() {
      return handlers.get(this) ?? null;
    },
    set(handler) {
      const old = handlers.get(this);
      if (old) this.removeEventListener(type, old);
      if (typeof handler === 'function') {
        handlers.set(this, handler);
        this.addEventListener(type, handler);
      } else {
        handlers.delete(this);
      }
    },
    configurable: true,
    enumerable: true,
  });
}

// Language tags checked and made canonical (Intl's RangeError for one that is not a tag).
function canonicalLanguages(where, languages) {
  if (!Array.isArray(languages) || !languages.every((tag) => typeof tag === 'string')) {
    throw new TypeError(`${where}: languages must be an array of language tags (got ${shown(languages)})`);
  }
  return Intl.getCanonicalLocales(languages);
}

/** expectedInputs / expectedOutputs checked: [{ type, languages? }], copied with canonical tags. */
function checkExpected(where, name, list) {
  if (list === undefined) return [];
  if (!Array.isArray(list)) throw new TypeError(`${where}: options.${name} must be an array of { type, languages? } (got ${shown(list)})`);
  return list.map((item, i) => {
    if (item === null || typeof item !== 'object' || !MESSAGE_TYPES.includes(item.type)) {
      throw new TypeError(`${where}: options.${name}[${i}].type must be one of ${MESSAGE_TYPES.map((t) => `'${t}'`).join(', ')} (got ${shown(item?.type)})`);
    }
    return item.languages === undefined ? { type: item.type } : { type: item.type, languages: canonicalLanguages(`${where}: options.${name}[${i}]`, item.languages) };
  });
}

/**
 * create()'s tools checked: [{ name, description, inputSchema, execute? }]
 * with names and descriptions non-empty and names unique, an inputSchema of
 * { type: 'object' } (properties an object, required an array), read as
 * JSON.stringify reads it -- a getter's or toJSON's error propagates, a cycle
 * is a TypeError -- and execute a function where given. Tools go with
 * expectedOutputs that list 'tool-call', as the specification wants.
 */
function checkTools(where, tools, outputs) {
  if (tools === undefined) return [];
  if (!Array.isArray(tools)) throw new TypeError(`${where}: options.tools must be an array of { name, description, inputSchema, execute } (got ${shown(tools)})`);
  if (tools.length > 0 && !outputs.some((e) => e.type === 'tool-call')) {
    throw new TypeError(`${where}: options.tools are given, and options.expectedOutputs does not list { type: 'tool-call' }`);
  }
  const names = new Set();
  return tools.map((tool, i) => {
    const at = `${where}: options.tools[${i}]`;
    if (tool === null || typeof tool !== 'object') throw new TypeError(`${at} must be { name, description, inputSchema, execute } (got ${shown(tool)})`);
    const { name, description, inputSchema, execute } = tool;
    if (typeof name !== 'string' || name === '') throw new TypeError(`${at}.name must be a non-empty string (got ${shown(name)})`);
    if (names.has(name)) throw new TypeError(`${at}.name ${shown(name)} names a tool twice`);
    names.add(name);
    if (typeof description !== 'string' || description === '') throw new TypeError(`${at}.description must be a non-empty string (got ${shown(description)})`);
    if (execute !== undefined && typeof execute !== 'function') throw new TypeError(`${at}.execute must be a function (got ${shown(execute)})`);
    if (inputSchema === null || typeof inputSchema !== 'object' || Array.isArray(inputSchema)) throw new TypeError(`${at}.inputSchema must be a JSON Schema object (got ${shown(inputSchema)})`);
    // The members this checks, read as the page wrote them (a getter's error propagates, a Proxy's too), then the
    // whole as JSON.stringify reads it.
    for (const key of ['type', 'properties', 'required']) void inputSchema[key];
    const schema = JSON.parse(JSON.stringify(inputSchema));
    if (schema.type !== 'object') throw new TypeError(`${at}.inputSchema must have type 'object' (got ${shown(schema?.type)})`);
    if (schema.properties !== undefined && (schema.properties === null || typeof schema.properties !== 'object' || Array.isArray(schema.properties))) {
      throw new TypeError(`${at}.inputSchema.properties must be an object`);
    }
    if (schema.required !== undefined && !Array.isArray(schema.required)) throw new TypeError(`${at}.inputSchema.required must be an array`);
    return { name, description, inputSchema: schema, execute };
  });
}

/** The expected input types: the listed ones and text, always. */
const expectedTypes = (expected) => new Set(['text', ...expected.map((e) => e.type)]);

/** A message's image value as Llama#prepareImage takes it (a BufferSource as its bytes; other ImageBitmapSources through createImageBitmap). */
async function imageOf(where, value) {
  if (value instanceof ArrayBuffer || value instanceof Uint8Array) return value;
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  const taken = (typeof Blob !== 'undefined' && value instanceof Blob) || (typeof ImageBitmap !== 'undefined' && value instanceof ImageBitmap)
    || (typeof ImageData !== 'undefined' && value instanceof ImageData) || (typeof OffscreenCanvas !== 'undefined' && value instanceof OffscreenCanvas)
    || (typeof HTMLCanvasElement !== 'undefined' && value instanceof HTMLCanvasElement) || (typeof HTMLImageElement !== 'undefined' && value instanceof HTMLImageElement);
  if (taken) return value;
  if (typeof createImageBitmap === 'function' && value !== null && typeof value === 'object') return createImageBitmap(value);
  throw new TypeError(`${where}: an image's value must be an ImageBitmapSource or a BufferSource (got ${shown(value)})`);
}

/**
 * The specification's "validate and canonicalize a prompt": `input` (a
 * string, or messages { role, content: string | [{ type, value }], prefix })
 * as this package's messages { role, content: string | parts }, with the
 * prefix (an assistant's last message with prefix: true) apart. Throws as
 * the specification says: SyntaxError (a prefix not last, or not an
 * assistant's), TypeError (a system message after others; a text value not
 * a string), NotSupportedError (a type not expected at create(), audio, or
 * an assistant's non-text content).
 */
async function canonicalPrompt(where, input, types, appended) {
  if (typeof input === 'string') return { messages: [{ role: 'user', content: input }], prefix: null };
  if (!Array.isArray(input)) {
    // WebIDL's (sequence<LanguageModelMessage> or DOMString): an iterable is a
    // sequence, anything else the string it converts to (null is 'null', {} '[object Object]').
    if (input !== null && typeof input === 'object' && typeof input[Symbol.iterator] === 'function') return canonicalPrompt(where, [...input], types, appended);
    return { messages: [{ role: 'user', content: String(input) }], prefix: null };
  }
  if (input.length === 0) return { messages: [{ role: 'user', content: '' }], prefix: null };
  const messages = [];
  let prefix = null;
  for (const [i, message] of input.entries()) {
    if (message === null || typeof message !== 'object' || !ROLES.includes(message.role)) {
      throw new TypeError(`${where}: input[${i}].role must be 'system', 'user' or 'assistant' (got ${shown(message?.role)})`);
    }
    const { role } = message;
    if (message.prefix === true) {
      if (role !== 'assistant') throw domError('SyntaxError', `${where}: input[${i}] has prefix: true, which only an assistant's message may have`);
      if (i !== input.length - 1) throw domError('SyntaxError', `${where}: input[${i}] has prefix: true, which only the last message may have`);
    }
    if (role === 'system' && (appended || i > 0)) throw new TypeError(`${where}: input[${i}] is a system message, which may only come first in a session`);
    const content = typeof message.content === 'string' ? [{ type: 'text', value: message.content }] : message.content;
    if (!Array.isArray(content)) throw new TypeError(`${where}: input[${i}].content must be a string or an array of { type, value } (got ${shown(message.content)})`);
    const parts = [];
    for (const [j, part] of (content.length ? content : [{ type: 'text', value: '' }]).entries()) {
      const at = `input[${i}].content[${j}]`;
      if (part === null || typeof part !== 'object' || !MESSAGE_TYPES.includes(part.type)) throw new TypeError(`${where}: ${at}.type must be one of ${MESSAGE_TYPES.join(', ')} (got ${shown(part?.type)})`);
      if (role === 'assistant' && part.type !== 'text') throw domError('NotSupportedError', `${where}: ${at}: an assistant's message holds text only`);
      if (part.type === 'text') {
        if (typeof part.value !== 'string') throw new TypeError(`${where}: ${at}.value must be a string (got ${shown(part.value)})`);
        // Contiguous text is one part (the specification joins it with nothing between).
        if (parts.at(-1)?.type === 'text') parts.at(-1).text += part.value;
        else parts.push({ type: 'text', text: part.value });
        continue;
      }
      if (!types.has(part.type)) throw domError('NotSupportedError', `${where}: ${at} is ${part.type}, which create()'s expectedInputs did not list`);
      if (part.type !== 'image') throw domError('NotSupportedError', `${where}: ${at}: this model takes ${part.type === 'audio' ? 'no audio' : `no ${part.type} content`}`);
      parts.push({ type: 'image', image: await imageOf(`${where}: ${at}`, part.value) });
    }
    const text = parts.length === 1 && parts[0].type === 'text';
    if (message.prefix === true) prefix = parts[0].text;
    else messages.push({ role, content: text ? parts[0].text : parts });
  }
  return { messages, prefix };
}

/** Consecutive messages of one role as one (their texts on lines of their own): templates that want turns to alternate read them. */
function joinedTurns(messages) {
  const out = [];
  for (const m of messages) {
    const last = out.at(-1);
    if (last && last.role === m.role && m.role !== 'tool' && !last.tool_calls && !m.tool_calls) {
      const parts = (content) => (typeof content === 'string' ? [{ type: 'text', text: content }] : content);
      const joined = [...parts(last.content), ...parts(m.content)];
      out[out.length - 1] = { ...last, content: joined.every((p) => p.type === 'text') ? joined.map((p) => p.text).join('\n') : joined };
    } else {
      out.push(m);
    }
  }
  return out;
}

/** A responseConstraint as a reply's constraint option, and the sentence that says it to the model. */
function constraintOf(where, constraint) {
  if (constraint instanceof RegExp) {
    if (/[gimsuyv]/.test(constraint.flags.replace(/[gu]/g, ''))) throw domError('NotSupportedError', `${where}: options.responseConstraint: a RegExp with the flags ${constraint.flags} (the engine matches a pattern as written)`);
    const option = engineChecked(where, { regex: constraint.flags.includes('u') ? constraint.source : engineRegex(constraint.source) });
    return { option, guide: `Respond with text that matches this regular expression: ${constraint.source}` };
  }
  if (constraint !== null && typeof constraint === 'object') {
    // A schema the engine cannot take (not JSON, circular, an unknown type) is the specification's NotSupportedError.
    const option = engineChecked(where, { responseFormat: { type: 'json_schema', schema: constraint } });
    return { option, guide: `Respond in JSON that follows this JSON Schema: ${JSON.stringify(constraint)}` };
  }
  throw new TypeError(`${where}: options.responseConstraint must be a JSON Schema (an object) or a RegExp (got ${shown(constraint)})`);
}

/** A reply's constraint option checked by the engine now: what it refuses is a NotSupportedError. */
function engineChecked(where, option) {
  try {
    engineConstraint(`${where}: options.responseConstraint`, option);
  } catch (error) {
    throw domError('NotSupportedError', error.message);
  }
  return option;
}

/**
 * A RegExp's source (no u flag: JavaScript's own reading) as the engine
 * reads a pattern (Unicode mode, a `.` that matches any character): an
 * identity escape of a character with no meaning (\" in /^\"[^\"]*\"$/)
 * is that character, and `.` leaves out line breaks, as JavaScript's does.
 */
function engineRegex(source) {
  let out = '';
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '\\') {
      const next = source[++i] ?? '';
      out += /[A-Za-z0-9^$\\.*+?()[\]{}|/]/.test(next) || (inClass && next === '-') ? `\\${next}` : next;
    } else if (inClass) {
      if (c === ']') inClass = false;
      out += c;
    } else if (c === '[') {
      inClass = true;
      out += c;
    } else {
      out += c === '.' ? '[^\\n\\r]' : c;
    }
  }
  return out;
}

/** The messages with `guide` added to the last user message's text (as its own line). */
function guided(messages, guide) {
  const at = messages.findLastIndex((m) => m.role === 'user');
  if (at < 0) return [...messages, { role: 'user', content: guide }];
  const m = messages[at];
  const content = typeof m.content === 'string' ? `${m.content}\n\n${guide}` : [...m.content, { type: 'text', text: guide }];
  return messages.map((x, i) => (i === at ? { ...m, content } : x));
}

/**
 * A LanguageModel class (the Prompt API) over one model. options.model: a
 * loaded Llama or RemoteLlama, or where to load one from (what Llama.load
 * takes: a URL, an hf: name, bytes, a Blob; with options.projector, its
 * projector); options.worker: true (a new LlamaWorker) or a LlamaWorker to
 * load it in (default: this thread), options.init the module's init()
 * options (or the new worker's); options.store: a ModelStore (or true:
 * the default one) the file is downloaded into once, and whose copy makes
 * availability() 'available'; contextLength: the context window (default:
 * the model's context), which Llama.load sizes the heap for; cacheMode:
 * Llama.load's; decodeImage: what decodes an image's bytes where the runtime
 * cannot (Node: see Llama#prepareImage);
 * languages: the language tags the model is said to read and write (default:
 * any); maxTokens: the most tokens of one reply (default: the context's
 * room); requireUserActivation (default true, as Chrome's): on a page, a
 * create() that would start the download is a NotAllowedError until the
 * user has interacted with the page. The model is loaded by the first
 * create(), once.
 */
export function defineLanguageModel(options) {
  const where = 'defineLanguageModel';
  checkObject(where, 'options', options);
  checkKeys(where, options, FACTORY_OPTIONS);
  const { contextLength, languages, maxTokens, decodeImage, requireUserActivation = true } = options;
  if (typeof requireUserActivation !== 'boolean') throw new TypeError(`${where}: options.requireUserActivation must be a boolean (got ${shown(requireUserActivation)})`);
  const loader = modelLoader(where, options);
  if (decodeImage !== undefined && typeof decodeImage !== 'function') throw new TypeError(`${where}: options.decodeImage must be a function (bytes) => { width, height, data }`);
  if (maxTokens !== undefined && !(Number.isInteger(maxTokens) && maxTokens > 0)) throw new TypeError(`${where}: options.maxTokens must be a positive integer (got ${shown(maxTokens)})`);
  const modelLanguages = languages === undefined ? null : new Set(canonicalLanguages(where, languages).map((tag) => tag.toLowerCase()));

  /** Availability for create()'s core options: the model's, or 'unavailable' where an expected type or language cannot be. */
  async function availabilityOf(where, options) {
    checkObject(where, 'options', options);
    // Sampling options create() refuses: a TypeError as there (samplingMode with a raw parameter), else 'unavailable'.
    try {
      samplingOf(where, options);
    } catch (error) {
      if (error instanceof TypeError) throw error;
      return 'unavailable';
    }
    const inputs = checkExpected(where, 'expectedInputs', options.expectedInputs);
    const outputs = checkExpected(where, 'expectedOutputs', options.expectedOutputs);
    const unsupportedLanguage = [...inputs, ...outputs].some((e) => e.languages && modelLanguages && !e.languages.every((tag) => modelLanguages.has(tag.toLowerCase())
      || modelLanguages.has(tag.split('-')[0].toLowerCase())));
    if (unsupportedLanguage || inputs.some((e) => e.type === 'audio') || outputs.some((e) => !['text', 'tool-call'].includes(e.type))) return 'unavailable';
    const availability = await loader.availability();
    if (inputs.some((e) => e.type === 'image') && !await loader.takesImages()) return 'unavailable';
    return availability;
  }

  class LanguageModel extends EventTarget {
    #llama;
    #session;
    #template;
    #messages; // the conversation as the template renders it
    #initial; // how many of the messages are the initial prompts
    #usage;
    #window;
    #sampling;
    #types;
    #tools;
    #request; // the tools' rendering and reply options (create's), null without tools
    #destroyed = new AbortController(); // destroy(), or create()'s signal
    #queue = Promise.resolve();

    constructor(internal) {
      if (internal?.llama === undefined) throw new TypeError('LanguageModel: sessions are made by LanguageModel.create()');
      super();
      this.#llama = internal.llama;
      this.#session = internal.session;
      this.#template = internal.template;
      this.#messages = internal.messages;
      this.#initial = internal.initial;
      this.#usage = internal.usage;
      this.#window = internal.window;
      this.#sampling = internal.sampling;
      this.#types = internal.types;
      this.#tools = internal.tools;
      this.#request = internal.request;
    }

    /** 'unavailable', 'downloadable', 'downloading' or 'available' for these options (expectedInputs, expectedOutputs). */
    static async availability(options = {}) {
      return availabilityOf('LanguageModel.availability', options);
    }

    /** The sampling defaults and limits: { defaultTopK, maxTopK, defaultTemperature, maxTemperature }. */
    static async params() {
      return { ...PARAMS };
    }

    /**
     * A session: the model loaded (once; monitor's `downloadprogress` events
     * follow its download, from 0 to 1), initialPrompts taken into a fresh
     * session's cache. Options as the specification's: initialPrompts,
     * expectedInputs, expectedOutputs, tools, samplingMode or temperature
     * with topK, signal, monitor.
     */
    static async create(options = {}) {
      const where = 'LanguageModel.create';
      checkObject(where, 'options', options);
      const { signal, monitor, initialPrompts, tools, samplingMode } = options;
      if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError(`${where}: options.signal must be an AbortSignal`);
      if (signal?.aborted) throw signal.reason;
      const sampling = samplingOf(where, options);
      const expected = { inputs: checkExpected(where, 'expectedInputs', options.expectedInputs), outputs: checkExpected(where, 'expectedOutputs', options.expectedOutputs) };
      const types = expectedTypes(expected.inputs);
      const checkedTools = checkTools(where, tools, expected.outputs);
      const initial = initialPrompts === undefined ? null : await canonicalPrompt(where, initialPrompts, types, false);
      if (initial?.prefix !== null && initial?.prefix !== undefined) throw domError('SyntaxError', `${where}: options.initialPrompts may not end with a prefix`);
      const progress = new CreateMonitor();
      if (monitor !== undefined) {
        if (typeof monitor !== 'function') throw new TypeError(`${where}: options.monitor must be a function`);
        monitor(progress);
      }
      const availability = await availabilityOf(where, options);
      if (availability === 'unavailable') {
        throw domError('NotSupportedError', `${where}: the model cannot take these options (an expected input or output type or language it does not have)`);
      }
      // As Chrome's: a download starts once the user has interacted with the page (sticky activation), where a page has one.
      if (availability === 'downloadable' && requireUserActivation && globalThis.navigator?.userActivation?.hasBeenActive === false) {
        throw domError('NotAllowedError', `${where}: the model is still to be downloaded, which waits for the user to have interacted with the page (a click, a key): call create() from an event handler, or define the class with requireUserActivation: false`);
      }
      const llama = await loadReporting(loader, progress, signal);
      if (expected.inputs.some((e) => e.type === 'image') && !llama.projector) throw domError('NotSupportedError', `${where}: options.expectedInputs lists images, and the model was loaded without a projector`);
      const template = templateFor(llama.tokenizer);
      // The tools as the template renders them (its variables) and as a reply's options.tools, made once.
      let request = null;
      if (checkedTools.length > 0) {
        const replyTools = checkedTools.map((t) => ({ name: t.name, description: t.description, parameters: t.inputSchema }));
        try {
          request = { variables: toolRequest(where, template.source, replyTools).variables, tools: replyTools };
        } catch (error) {
          throw domError('NotSupportedError', error.message);
        }
      }
      const session = await llama.session();
      // Aborted once the model was loaded (at the last downloadprogress event, say): no session.
      if (signal?.aborted) {
        await session.free();
        throw signal.reason;
      }
      const contextWindow = Math.min(contextLength ?? Infinity, llama.config.contextLength);
      const instance = new LanguageModel({
        llama, session, template, messages: [], initial: 0, usage: 0, window: contextWindow,
        sampling, types, tools: checkedTools, request,
      });
      try {
        if (initial) await instance.#takeIn(where, initial.messages, signal);
        instance.#initial = instance.#messages.length;
      } catch (error) {
        await instance.#free();
        throw error;
      }
      if (signal) signal.addEventListener('abort', () => instance.#destroy(signal.reason), { once: true });
      return instance;
    }

    /** The tokens the session's cache holds. */
    get contextUsage() {
      return this.#usage;
    }

    /** The model's context length in tokens. */
    get contextWindow() {
      return this.#window;
    }

    /** contextUsage's older name. */
    get inputUsage() {
      return this.#usage;
    }

    /** contextWindow's older name. */
    get inputQuota() {
      return this.#window;
    }

    get topK() {
      return this.#sampling.topK;
    }

    get temperature() {
      return this.#sampling.temperature;
    }

    get samplingMode() {
      return this.#sampling.mode;
    }

    /** The reply to `input` (a string or messages), whole. options: responseConstraint, omitResponseConstraintInput, signal. */
    prompt(input, options = {}) {
      return this.#run('LanguageModel.prompt', options, async (signal) => {
        let text = '';
        for await (const chunk of this.#respond('LanguageModel.prompt', input, options, signal)) text += chunk;
        return text;
      });
    }

    /** The reply to `input` as a ReadableStream of its text, piece by piece. */
    promptStreaming(input, options = {}) {
      const where = 'LanguageModel.promptStreaming';
      checkObject(where, 'options', options);
      if (options.signal?.aborted) throw options.signal.reason;
      if (this.#destroyed.signal.aborted) throw this.#destroyed.signal.reason;
      // Cancelling the stream aborts the reply, as its signal would.
      const cancelled = new AbortController();
      const signal = options.signal ? AbortSignal.any([options.signal, cancelled.signal]) : cancelled.signal;
      let started = null;
      return new ReadableStream({
        start: (controller) => {
          started = this.#run(where, { ...options, signal }, async (running) => {
            for await (const chunk of this.#respond(where, input, options, running)) controller.enqueue(chunk);
          }).then(() => controller.close(), (error) => controller.error(error)).catch(() => {}); // a cancelled stream takes neither
        },
        cancel: async (reason) => {
          cancelled.abort(reason ?? domError('AbortError', `${where}: the stream was cancelled`));
          await started;
        },
      });
    }

    /** Takes `input` into the session (its cache), no reply; a later prompt computes only its own tokens. */
    append(input, options = {}) {
      const where = 'LanguageModel.append';
      return this.#run(where, options, async (signal) => {
        // An empty sequence appends nothing.
        if (Array.isArray(input) && input.length === 0) return;
        const { messages, prefix } = await canonicalPrompt(where, input, this.#types, this.#messages.length > 0);
        if (prefix !== null) throw domError('SyntaxError', `${where}: an appended prompt may not end with a prefix`);
        await this.#takeIn(where, messages, signal);
      });
    }

    /** The tokens `input` would add to the session (with the response constraint's sentence, where one would go). */
    measureContextUsage(input, options = {}) {
      const where = 'LanguageModel.measureContextUsage';
      return this.#run(where, options, async () => {
        if (options.omitResponseConstraintInput === true && options.responseConstraint === undefined) {
          throw new TypeError(`${where}: options.omitResponseConstraintInput is given without options.responseConstraint`);
        }
        const { messages, prefix } = await canonicalPrompt(where, input, this.#types, false);
        const constraint = options.responseConstraint === undefined ? null : constraintOf(where, options.responseConstraint);
        const asked = constraint && !options.omitResponseConstraintInput ? guided(messages, constraint.guide) : messages;
        return this.#measure(where, asked, prefix ?? '');
      }, { queued: false });
    }

    /** measureContextUsage's older name. */
    measureInputUsage(input, options) {
      return this.measureContextUsage(input, options);
    }

    /** A second session that goes on from this one's conversation, its cache a copy-on-write fork (no forward pass). */
    clone(options = {}) {
      return this.#run('LanguageModel.clone', options, async () => {
        const session = await this.#session.clone();
        const copy = new LanguageModel({
          llama: this.#llama, session, template: this.#template, messages: this.#messages.slice(), initial: this.#initial, usage: this.#usage,
          window: this.#window, sampling: this.#sampling, types: this.#types, tools: this.#tools, request: this.#request,
        });
        return copy;
      });
    }

    /** Ends the session: what is running and what is asked later rejects with an AbortError; its cache is freed. */
    destroy() {
      this.#destroy(domError('AbortError', 'the session was destroyed'));
    }

    #destroy(reason) {
      if (this.#destroyed.signal.aborted) return;
      this.#destroyed.abort(reason);
      this.#queue.then(() => this.#free());
    }

    async #free() {
      await this.#session.free();
    }

    // An operation: checked options, run after the ones before it (one at a
    // time: the session is one conversation), rejected with the reason of
    // whichever aborts first -- its own signal, destroy(), create()'s signal.
    #run(where, options, operation, { queued = true } = {}) {
      try {
        checkObject(where, 'options', options);
        if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) throw new TypeError(`${where}: options.signal must be an AbortSignal`);
      } catch (error) {
        return Promise.reject(error);
      }
      const signals = [this.#destroyed.signal, ...(options.signal ? [options.signal] : [])];
      const signal = signals.length === 1 ? signals[0] : AbortSignal.any(signals);
      if (signal.aborted) return Promise.reject(signal.reason);
      const run = queued ? this.#queue.then(() => (signal.aborted ? Promise.reject(signal.reason) : operation(signal))) : operation(signal);
      if (queued) this.#queue = run.catch(() => {});
      return racing(run, signal);
    }

    // The rendering of `messages` after the session's (their images prepared) as token ids.
    async #ids(where, messages, { generationPrompt = true, continuation = '' } = {}) {
      const input = await conversationInput(where, this.#llama, this.#template, joinedTurns(messages), {
        variables: this.#request?.variables, generationPrompt, continuation,
      });
      return inputIds(this.#llama, input);
    }

    // The tokens `messages` take on their own: what a session created with
    // them as its initial prompts holds (the template's opening included),
    // whatever this session holds already -- the specification measures the
    // input, not the session.
    async #measure(where, messages, continuation) {
      const prepared = await prepareImages(where, this.#llama, messages, { decodeImage });
      return (await this.#ids(where, prepared, { generationPrompt: continuation !== '', continuation })).length;
    }

    // Checks that `messages` fit the context (a QuotaExceededError if not), and takes them in.
    async #takeIn(where, messages, signal) {
      const prepared = await prepareImages(where, this.#llama, messages, { decodeImage });
      const conversation = [...this.#messages, ...prepared];
      let ids = await this.#ids(where, conversation, { generationPrompt: false });
      if (ids.length > this.#window) {
        const fitted = await this.#evicted(where, prepared, { generationPrompt: false });
        if (!fitted) throw quotaExceeded(`${where}: the input needs ${ids.length} tokens of the context's ${this.#window}`, ids.length, this.#window);
        conversation.splice(0, conversation.length, ...fitted.messages, ...prepared);
        ids = await this.#ids(where, conversation, { generationPrompt: false });
        this.dispatchEvent(new Event('contextoverflow'));
      }
      if (ids.length > 0) {
        // A reply of no tokens: the session takes the conversation in, and stops.
        for await (const piece of this.#session.respond(ids, { maxTokens: 0, signal })) void piece;
      }
      if (signal?.aborted) throw signal.reason;
      this.#messages = conversation;
      this.#usage = await this.#held();
    }

    // The session's messages less their oldest turns after the initial
    // prompts (a user's message and what followed it, one turn at a time),
    // as few as make room for `added`: { messages, requested }, or null when
    // `added` does not fit even after the initial prompts alone.
    async #evicted(where, added, options) {
      const kept = this.#messages.slice(0, this.#initial);
      let turns = this.#messages.slice(this.#initial);
      while (turns.length > 0) {
        const next = turns.findIndex((m, i) => i > 0 && m.role === 'user');
        turns = next < 0 ? [] : turns.slice(next);
        const requested = (await this.#ids(where, [...kept, ...turns, ...added], options)).length;
        if (requested <= this.#window) return { messages: [...kept, ...turns], requested };
      }
      return null;
    }

    #held() {
      return heldTokens(this.#session);
    }

    // The reply's text, piece by piece; the conversation gains the prompt and the reply as far as it came.
    async *#respond(where, input, options, signal) {
      checkKeys(where, options, ['responseConstraint', 'omitResponseConstraintInput', 'signal']);
      const { messages: asked, prefix } = await canonicalPrompt(where, input, this.#types, this.#messages.length > 0);
      const constraint = options.responseConstraint === undefined ? null : constraintOf(where, options.responseConstraint);
      const withGuide = constraint && !options.omitResponseConstraintInput ? guided(asked, constraint.guide) : asked;
      const prepared = await prepareImages(where, this.#llama, withGuide, { decodeImage });
      let conversation = [...this.#messages, ...prepared];
      let requested = (await this.#ids(where, conversation, { continuation: prefix ?? '' })).length;
      if (requested > this.#window) {
        // The explainer's overflow: the oldest turns after the initial prompts
        // go until the prompt fits, and `contextoverflow` says so; a prompt
        // that does not fit even so is a QuotaExceededError, and nothing goes.
        const fitted = await this.#evicted(where, prepared, { continuation: prefix ?? '' });
        if (!fitted) throw quotaExceeded(`${where}: the conversation with this prompt needs ${requested} tokens of the context's ${this.#window}`, requested, this.#window);
        conversation = [...fitted.messages, ...prepared];
        requested = fitted.requested;
        this.#messages = fitted.messages;
        this.dispatchEvent(new Event('contextoverflow'));
      }
      const tools = this.#request?.tools;
      // A reply has the context's room left, and the app's maxTokens at most.
      const room = this.#window - requested;
      const sampling = this.#sampling.temperature === 0 ? { temperature: 0 } : { temperature: this.#sampling.temperature, topK: this.#sampling.topK };
      for (let round = 0; ; round++) {
        const replyOptions = {
          ...sampling, signal, maxTokens: Math.min(maxTokens ?? Infinity, room),
          // A constrained reply is text (the tools stay in the template's rendering, uncalled).
          ...(constraint ? constraint.option : {}),
          ...(constraint && prefix ? { constraintPrefix: prefix } : {}), // the constraint reads the prefix first
          ...(tools && { tools, toolChoice: round < TOOL_ROUNDS && !constraint ? 'auto' : 'none' }),
        };
        if (room <= 0) {
          this.#overflowed();
          return;
        }
        let message = null;
        let stop = null;
        let text = null;
        try {
          for await (const piece of reply(where, this.#session, this.#template, joinedTurns(conversation), replyOptions, { continuation: prefix ?? '' })) {
            if (piece.message) message = piece.message;
            stop = piece.stop ?? stop;
            text = (text ?? '') + piece.text;
            if (!tools && piece.text) yield piece.text;
          }
        } catch (error) {
          // A prefix the constraint allows no reply to begin with: the input is not one this model can answer as asked.
          if (constraint && prefix && text === null && error?.name === 'RangeError' && /constraintPrefix/.test(error.message)) {
            throw domError('NotSupportedError', `${where}: the assistant's prefix ${shown(prefix)} does not begin a reply options.responseConstraint allows`);
          }
          throw error;
        } finally {
          // However the reply ended (its end, an abort, the stream cancelled), the conversation holds it as far as it came;
          // a prompt that ended before its first piece adds nothing.
          if (text !== null) {
            const content = (prefix ?? '') + (message && !message.tool_calls ? message.content : text);
            this.#messages = [...conversation, message?.tool_calls ? message : { role: 'assistant', content }];
          }
          this.#usage = await this.#held();
        }
        if (message?.tool_calls?.length) {
          const results = [];
          for (const call of message.tool_calls) {
            const tool = this.#tools.find((t) => t.name === call.function.name);
            if (!tool.execute) {
              throw domError('NotSupportedError', `${where}: the model called ${tool.name}, which has no execute(): returning calls to the page is not implemented; give the tool an execute() to run them`);
            }
            const result = await tool.execute(JSON.parse(call.function.arguments));
            results.push({ role: 'tool', name: call.function.name, tool_call_id: call.id, content: typeof result === 'string' ? result : JSON.stringify(result) });
          }
          conversation = [...this.#messages, ...results];
          continue;
        }
        if (tools && message) yield message.content;
        if (stop === 'context' || (stop === 'maxTokens' && room <= (maxTokens ?? Infinity))) this.#overflowed();
        return;
      }
    }

    // The reply filled the context: the oldest half of the turns after the
    // initial prompts go (from a user's message on, as templates want a
    // conversation to go on), so that the next prompt has room.
    #overflowed() {
      const kept = this.#messages.slice(0, this.#initial);
      const turns = this.#messages.slice(this.#initial);
      const from = turns.findIndex((m, i) => i >= Math.ceil(turns.length / 2) && m.role === 'user');
      this.#messages = [...kept, ...(from < 0 ? [] : turns.slice(from))];
      this.dispatchEvent(new Event('contextoverflow'));
    }
  }
  eventHandler(LanguageModel.prototype, 'contextoverflow');
  eventHandler(LanguageModel.prototype, 'quotaoverflow');
  return LanguageModel;
}

/** samplingMode, or temperature with topK (both or neither), as { mode, temperature, topK }. */
function samplingOf(where, { samplingMode, temperature, topK }) {
  if (samplingMode !== undefined && samplingMode !== 'default' && !Object.hasOwn(SAMPLING_MODES, samplingMode)) {
    throw new TypeError(`${where}: options.samplingMode must be one of ${Object.keys(SAMPLING_MODES).map((m) => `'${m}'`).join(', ')} (got ${shown(samplingMode)})`);
  }
  // The explainer: a samplingMode with a raw parameter (topK or temperature) is a TypeError.
  if (samplingMode !== undefined && samplingMode !== 'default' && (temperature !== undefined || topK !== undefined)) {
    throw new TypeError(`${where}: options.samplingMode is given with options.${temperature !== undefined ? 'temperature' : 'topK'}: give one or the other`);
  }
  if ((temperature === undefined) !== (topK === undefined)) {
    throw domError('NotSupportedError', `${where}: options.temperature and options.topK are given together or not at all`);
  }
  if (temperature !== undefined) {
    if (typeof temperature !== 'number' || Number.isNaN(temperature) || temperature < 0) throw new RangeError(`${where}: options.temperature must be a number >= 0 (got ${shown(temperature)})`);
    if (typeof topK !== 'number' || Number.isNaN(topK) || topK < 1) throw new RangeError(`${where}: options.topK must be a number >= 1 (got ${shown(topK)})`);
    return { mode: samplingMode ?? 'balanced', temperature: Math.min(temperature, PARAMS.maxTemperature), topK: Math.min(Math.floor(topK), PARAMS.maxTopK) };
  }
  const mode = samplingMode === undefined || samplingMode === 'default' ? 'balanced' : samplingMode;
  return { mode, ...SAMPLING_MODES[mode] };
}

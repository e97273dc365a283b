// A backend of Chrome's prompt-api-polyfill: the shape its backends have
// (static availability(options); createSession(options, sessionParams,
// monitorTarget); generateContent(contents) -> { text, usage };
// generateContentStream(contents) -> chunks { text(), usageMetadata };
// countTokens(contents)), over this package's runner. The polyfill keeps
// the conversation and sends it whole, as Gemini's contents ({ role:
// 'user' | 'model' | 'system', parts: [{ text } | { inlineData: { mimeType,
// data } }] }), each call: the backend's session holds it in its cache, so
// a call computes only what the cache does not hold.
import { checkObject, shown } from '../runtime/checks.js';
import { checkKeys } from '../runtime/options.js';
import { conversationInput, reply, templateFor } from '../chat/chat.js';
import { prepareImages } from '../chat/content.js';
import { LOADER_OPTIONS, heldTokens, inputIds, loadReporting, modelLoader } from './loader.js';

const BACKEND_OPTIONS = [...LOADER_OPTIONS, 'maxTokens', 'decodeImage'];
const ROLES = { user: 'user', model: 'assistant', system: 'system' };

/** Base64 text as bytes (an inlineData part's). */
function base64Bytes(data) {
  const text = atob(data);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

/** Gemini-shaped contents as this package's messages (an image part's bytes decoded from base64). */
function messagesOf(where, contents, systemInstruction) {
  if (!Array.isArray(contents)) throw new TypeError(`${where}: contents must be an array of { role, parts } (got ${shown(contents)})`);
  const messages = contents.map((content, i) => {
    const role = ROLES[content?.role];
    if (!role || !Array.isArray(content.parts)) throw new TypeError(`${where}: contents[${i}] must be { role: 'user' | 'model' | 'system', parts } (got ${shown(content)})`);
    const parts = content.parts.map((part, j) => {
      if (typeof part?.text === 'string') return { type: 'text', text: part.text };
      if (typeof part?.inlineData?.data === 'string' && /^image\//.test(part.inlineData.mimeType ?? '')) return { type: 'image', image: base64Bytes(part.inlineData.data) };
      throw new TypeError(`${where}: contents[${i}].parts[${j}] must be { text } or an image's { inlineData: { mimeType, data } } (got ${shown(part)})`);
    });
    return { role, content: parts.every((p) => p.type === 'text') ? parts.map((p) => p.text).join('') : parts };
  });
  return typeof systemInstruction === 'string' && !messages.some((m) => m.role === 'system')
    ? [{ role: 'system', content: systemInstruction }, ...messages] : messages;
}

/**
 * A prompt-api-polyfill backend class over one model: options as
 * defineLanguageModel's loader takes them (model, projector, worker, init,
 * store, contextLength, cacheMode), maxTokens (a reply's most, default 512)
 * and decodeImage; the polyfill's config object, given to the constructor,
 * may set the same keys.
 */
export function polyfillBackend(options) {
  const where = 'polyfillBackend';
  checkObject(where, 'options', options);
  checkKeys(where, options, BACKEND_OPTIONS);
  const { maxTokens = 512, decodeImage } = options;
  if (!(Number.isInteger(maxTokens) && maxTokens > 0)) throw new TypeError(`${where}: options.maxTokens must be a positive integer (got ${shown(maxTokens)})`);
  const loader = modelLoader(where, options);

  return class KvcacheBackend {
    #llama = null;
    #session = null;
    #template = null;
    #systemInstruction;
    #generation = {};

    constructor(config = {}) {
      checkObject('KvcacheBackend', 'config', config);
      this.modelName = typeof config.modelName === 'string' ? config.modelName : String(options.model?.digest ?? 'kvcache-wasm');
    }

    /** 'unavailable' for audio inputs, and images without a projector; 'available' otherwise (the download happens in createSession). */
    static availability(availabilityOptions = {}) {
      const inputs = availabilityOptions?.expectedInputs ?? [];
      if (inputs.some((e) => e?.type === 'audio')) return 'unavailable';
      if (inputs.some((e) => e?.type === 'image') && options.projector === undefined && !options.model?.projector) return 'unavailable';
      return 'available';
    }

    /** Loads the model (once; `downloadprogress` events on monitorTarget) and opens the session the conversation is held in. */
    async createSession(_options, sessionParams = {}, monitorTarget = null) {
      this.#llama = await loadReporting(loader, monitorTarget, null);
      this.#template = templateFor(this.#llama.tokenizer);
      this.#session ??= await this.#llama.session();
      this.#systemInstruction = sessionParams.systemInstruction;
      const config = sessionParams.generationConfig ?? {};
      this.#generation = {
        ...(typeof config.temperature === 'number' && { temperature: config.temperature }),
        ...(typeof config.topK === 'number' && { topK: config.topK }),
        ...(config.responseSchema && { responseFormat: { type: 'json_schema', schema: config.responseSchema } }),
      };
      return this.#session;
    }

    /** The reply to the conversation, whole: { text, usage } (usage: the tokens the session holds). */
    async generateContent(contents) {
      let text = '';
      for await (const chunk of await this.generateContentStream(contents)) text += chunk.text();
      return { text, usage: await this.#held() };
    }

    /** The reply as chunks { text(), usageMetadata: { totalTokenCount } }, the last one's count the session's tokens. */
    async generateContentStream(contents) {
      const where = 'KvcacheBackend.generateContentStream';
      const session = this.#live(where);
      const messages = await prepareImages(where, this.#llama, messagesOf(where, contents, this.#systemInstruction), { decodeImage });
      const pieces = reply(where, session, this.#template, messages, { maxTokens, ...this.#generation });
      const held = () => this.#held();
      return (async function* chunks() {
        for await (const piece of pieces) {
          if (piece.text) yield { text: () => piece.text, usageMetadata: { totalTokenCount: 0 } };
        }
        const total = await held();
        yield { text: () => '', usageMetadata: { totalTokenCount: total } };
      })();
    }

    /** The tokens of the conversation as the model's template renders it. */
    async countTokens(contents) {
      const where = 'KvcacheBackend.countTokens';
      this.#live(where);
      const messages = await prepareImages(where, this.#llama, messagesOf(where, contents, this.#systemInstruction), { decodeImage });
      const input = await conversationInput(where, this.#llama, this.#template, messages, { generationPrompt: false });
      return (await inputIds(this.#llama, input)).length;
    }

    #live(where) {
      if (!this.#session) throw new TypeError(`${where}: call createSession() first`);
      return this.#session;
    }

    #held() {
      return heldTokens(this.#session);
    }
  };
}

// An OpenAI-shaped entry point for apps that embed through that API:
// client.embeddings.create({ input, dimensions, encoding_format }) on an
// embedding model (a Llama, or a RemoteLlama in a worker), mapped onto its
// embed(): the vectors normalised as OpenAI's are, in the input's order,
// as numbers or as base64 of little-endian float32s.
//
//   const client = embeddings(model);
//   const r = await client.embeddings.create({ input: ['a', 'b'], dimensions: 256 });
//   r.data[1].embedding
import { checkObject, shown } from '../runtime/checks.js';
import { checkKeys } from '../runtime/options.js';

const REQUEST = ['input', 'model', 'dimensions', 'encoding_format', 'user', 'signal'];

/** A Float32Array's bytes (little-endian, as every wasm engine's) in base64. */
function base64Of(vector) {
  const bytes = new Uint8Array(vector.buffer, vector.byteOffset, vector.byteLength);
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/**
 * An OpenAI-shaped client over `model`: { embeddings: { create } }.
 * create(request) resolves to { object: 'list', data: [{ object:
 * 'embedding', index, embedding }], model, usage: { prompt_tokens,
 * total_tokens } }. Taken: input (a string, strings, token ids, or arrays
 * of them), dimensions (the first that many values, normalised after),
 * encoding_format ('float', default, or 'base64'), signal (an
 * AbortSignal), model and user (ignored: `model` answers). The vectors are
 * normalised and pooled as the model's file says (Llama#embed).
 */
export function embeddings(model) {
  const where = 'embeddings';
  if (typeof model?.embed !== 'function' || !model.config) {
    throw new TypeError(`${where}: model must be a Llama or a RemoteLlama (got ${shown(model)})`);
  }
  // Tokens counted as embed() encodes them: a Llama's tokenizer here, a RemoteLlama's in its worker.
  const count = (text) => (typeof text !== 'string' ? text.length
    : typeof model.encode === 'function' ? model.encode(text, { special: true }).then((ids) => ids.length)
      : model.tokenizer.encode(text, { special: true }).length);
  const create = async (request) => {
    const call = 'embeddings.create';
    checkObject(call, 'request', request);
    checkKeys(call, request, REQUEST);
    const { input, dimensions, encoding_format: format = 'float', signal } = request;
    if (format !== 'float' && format !== 'base64') throw new TypeError(`${call}: encoding_format must be 'float' or 'base64' (got ${shown(format)})`);
    // One text, or many: a string, an array of ids, or an array of either.
    const single = typeof input === 'string' || (Array.isArray(input) && input.length > 0 && input.every((x) => typeof x === 'number'));
    const texts = single ? [input] : input;
    if (!Array.isArray(texts) || texts.length === 0) {
      throw new TypeError(`${call}: input must be a string, an array of token ids, or a non-empty array of either (got ${shown(input)})`);
    }
    const vectors = await model.embed(texts, { ...(dimensions !== undefined && { dimensions }), ...(signal && { signal }) });
    const tokens = (await Promise.all(texts.map(count))).reduce((a, b) => a + b, 0);
    return {
      object: 'list',
      data: vectors.map((vector, index) => ({ object: 'embedding', index, embedding: format === 'base64' ? base64Of(vector) : Array.from(vector) })),
      model: request.model ?? model.config.architecture,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    };
  };
  return { embeddings: { create } };
}

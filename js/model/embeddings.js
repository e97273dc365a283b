// Embeddings and reranking (kvc_lm_embed): texts to vectors, and a query's
// documents to scores, with the same GGUF files llama.cpp reads -- an
// embedding model (<arch>.pooling_type mean, cls or last: EmbeddingGemma,
// Qwen3-Embedding, the BERT family) or a reranker (pooling rank: its
// classification head). Many texts go through one pass of the weights,
// each attending to itself alone, so a text's vector is the same bits alone
// or among others; a pass keeps no rows after it.
//
//   const [a, b] = await model.embed(['a query', 'a passage'], { dimensions: 256 });
//   const { scores, ranking } = await model.rerank('a query', documents, { topN: 3 });
//
// Texts are tokenized as llama.cpp's server tokenizes them (the vocabulary's
// begin, end and separator tokens added, special tokens in the text taken
// as such); a query and a document go into the file's rerank template
// (tokenizer.chat_template.rerank: {query}, {document}) tokenized whole,
// or, without one, end to end between the vocabulary's tokens, as llama.cpp's
// format_prompt_rerank does.
import { C_LIMITS } from '../runtime/constants.js';
import { checkInteger, checkObject, shown } from '../runtime/checks.js';
import { checkKeys } from '../runtime/options.js';
import { callC, copyOut, lib } from '../runtime/runtime.js';
import { aborted } from '../store/sources.js';

/** The poolings, as GGUF's pooling_type numbers them. */
export const POOLINGS = ['none', 'mean', 'cls', 'last', 'rank'];
const EMBED_OPTIONS = ['pooling', 'normalize', 'dimensions', 'truncate', 'prompt', 'signal', 'onProgress'];

/**
 * What each family's model card puts before a query and before a document
 * (the files do not say): EmbeddingGemma's task prompts, Qwen3-Embedding's
 * instruction (its documents go bare), nomic-embed's prefixes. embed()'s
 * `prompt: 'query'` and `'document'` read it by the file's architecture.
 */
export const EMBEDDING_PROMPTS = Object.freeze({
  'gemma-embedding': Object.freeze({ query: 'task: search result | query: ', document: 'title: none | text: ' }),
  qwen3: Object.freeze({ query: 'Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: ', document: '' }),
  'nomic-bert': Object.freeze({ query: 'search_query: ', document: 'search_document: ' }),
});
const RERANK_OPTIONS = ['topN', 'truncate', 'signal', 'onProgress'];
// The tokens one pass takes at most: more texts go in more passes (a longer
// text alone). A pass's scratch grows with its tokens; past a few hundred
// the weights are read once for enough tokens that more gain nothing.
const PASS_TOKENS = C_LIMITS.KVC_LM_BATCH;

/** What a model file says of embedding with it: { pooling, causal, embeddingDim, rankOutputs }. */
export function embeddingConfig(api, ptr) {
  return {
    pooling: POOLINGS[api.kvc_lm_pooling(ptr)],
    causal: api.kvc_lm_causal(ptr) !== 0,
    embeddingDim: api.kvc_lm_embedding_dim(ptr) >>> 0,
    rankOutputs: api.kvc_lm_rank_outputs(ptr) >>> 0,
  };
}

function checkSignal(where, signal) {
  if (signal !== undefined && !(typeof AbortSignal !== 'undefined' && signal instanceof AbortSignal)) {
    throw new TypeError(`${where}: options.signal must be an AbortSignal (got ${shown(signal)})`);
  }
}

function checkProgress(where, onProgress) {
  if (onProgress !== undefined && typeof onProgress !== 'function') {
    throw new TypeError(`${where}: options.onProgress must be a function (got ${shown(onProgress)})`);
  }
}

/** What kvc_lm_embed refuses: a layer a text cannot have alone (a delta rule's or Mamba-2's state, another layer's rows). */
function checkEmbeds(where, layerKinds) {
  const kind = layerKinds.find((k) => k === 'delta' || k === 'mamba2' || k === 'shared');
  if (kind) throw new TypeError(`${where}: this model has ${kind} layers, which an embedding pass does not compute (it computes full, window and conv layers)`);
}

/**
 * A text's ids within the model's context: a string encoded as llama.cpp's
 * server encodes it, or ids as given. Too long: cut to the context (its
 * first tokens, and the vocabulary's end and separator tokens kept) when
 * `truncate`, else a RangeError.
 */
function idsOf(where, name, text, llama, truncate, encode) {
  const { vocabSize, contextLength } = llama.config;
  let ids;
  if (typeof text === 'string') {
    if (text.length === 0) throw new TypeError(`${where}: ${name} is empty: there is nothing to embed`);
    ids = encode(text);
  } else if (Array.isArray(text) || text instanceof Uint32Array) {
    if (text.length === 0) throw new TypeError(`${where}: ${name} holds no token ids`);
    for (const id of text) {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) throw new RangeError(`${where}: ${name} holds ${shown(id)}, not a token id (0 to ${vocabSize - 1})`);
    }
    ids = Array.from(text);
  } else {
    throw new TypeError(`${where}: ${name} must be a string or an array of token ids (got ${shown(text)})`);
  }
  if (ids.length <= contextLength) return ids;
  if (!truncate) {
    throw new RangeError(`${where}: ${name} is ${ids.length} tokens, more than the model's context of ${contextLength} (options.truncate: true cuts it)`);
  }
  if (typeof text !== 'string') return ids.slice(0, contextLength);
  // The text's own tokens cut, the tokens the vocabulary puts around them kept.
  const inner = encode(text, { bos: false, eos: false, sep: false });
  const before = llama.tokenizer.addBos ? 1 : 0, after = ids.length - inner.length - before;
  return [...ids.slice(0, before), ...inner.slice(0, contextLength - before - after), ...ids.slice(ids.length - after)];
}

/**
 * The vectors of `lists` (arrays of ids) pooled as `pooling` says, through
 * kvc_lm_embed in passes of up to PASS_TOKENS tokens: `width` values per
 * text (per token for 'none'). Between passes it gives the event loop a
 * turn, checks `signal` and reports { done, total } texts.
 */
async function vectorsOf(where, llama, ptr, lists, pooling, width, { signal, onProgress }) {
  const code = POOLINGS.indexOf(pooling);
  const vectors = [];
  for (let first = 0; first < lists.length;) {
    let last = first + 1, tokens = lists[first].length;
    while (last < lists.length && tokens + lists[last].length <= PASS_TOKENS) tokens += lists[last++].length;
    const group = lists.slice(first, last);
    const rows = pooling === 'none' ? tokens : group.length;
    const out = callC(where, [Uint32Array.from(group.flat()), Uint32Array.from(group, (ids) => ids.length), 4 * rows * width],
      (tokensPtr, lengthsPtr, outPtr) => lib().kvc_lm_embed(ptr, tokensPtr, lengthsPtr, group.length, code, outPtr),
      ([, , outPtr]) => copyOut('f32', outPtr, rows * width), { k: 'a hidden state', v: 'a hidden state' });
    let at = 0;
    for (const ids of group) {
      const count = (pooling === 'none' ? ids.length : 1) * width;
      vectors.push(out.slice(at, at + count)); // a buffer of its own: a worker transfers each
      at += count;
    }
    first = last;
    onProgress?.({ done: first, total: lists.length });
    if (first < lists.length) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      if (signal?.aborted) throw aborted(signal);
    }
  }
  return vectors;
}

/** v scaled to length 1 (a zero vector stays zero), in place. */
function normalized(v) {
  let sum = 0;
  for (const x of v) sum += x * x;
  const scale = sum > 0 ? 1 / Math.sqrt(sum) : 0;
  for (let i = 0; i < v.length; i++) v[i] *= scale;
  return v;
}

/** The text embed()'s `prompt` puts before each text: the family's for 'query' or 'document', else the string given. */
function promptOf(where, prompt, architecture) {
  if (prompt === undefined) return '';
  if (prompt === 'query' || prompt === 'document') return EMBEDDING_PROMPTS[architecture]?.[prompt] ?? '';
  if (typeof prompt !== 'string') throw new TypeError(`${where}: options.prompt must be 'query', 'document' or a string to put before each text (got ${shown(prompt)})`);
  return prompt;
}

/** Llama#embed (which see). */
export async function embed(llama, ptr, texts, options = {}) {
  const where = 'Llama.embed';
  checkObject(where, 'options', options);
  checkKeys(where, options, EMBED_OPTIONS);
  const { pooling = llama.config.pooling, normalize = true, dimensions, truncate = false, prompt, signal, onProgress } = options;
  checkSignal(where, signal);
  checkProgress(where, onProgress);
  if (pooling === 'none' && options.pooling === undefined) {
    const why = llama.config.rankOutputs > 0 ? 'a cross-encoder: rerank() scores with its classification head' : 'it generates';
    throw new TypeError(`${where}: this model's file gives no pooling type (${why}); pass options.pooling ('mean', 'cls' or 'last') to embed with it`);
  }
  if (!['none', 'mean', 'cls', 'last'].includes(pooling)) {
    throw new TypeError(`${where}: options.pooling must be 'mean', 'cls', 'last' or 'none' (got ${shown(pooling)})${pooling === 'rank' ? '; a reranker scores with rerank()' : ''}`);
  }
  if (typeof normalize !== 'boolean') throw new TypeError(`${where}: options.normalize must be a boolean (got ${shown(normalize)})`);
  if (typeof truncate !== 'boolean') throw new TypeError(`${where}: options.truncate must be a boolean (got ${shown(truncate)})`);
  const { embeddingDim, layerKinds } = llama.config;
  if (dimensions !== undefined) checkInteger(where, 'options.dimensions', dimensions, 1, embeddingDim);
  checkEmbeds(where, layerKinds);
  const list = typeof texts === 'string' ? [texts] : texts;
  if (!Array.isArray(list) || list.length === 0) throw new TypeError(`${where}: texts must be a string or a non-empty array of them (got ${shown(texts)})`);
  const before = promptOf(where, prompt, llama.config.architecture);
  if (before && list.some((text) => typeof text !== 'string')) throw new TypeError(`${where}: options.prompt goes before text, and texts holds token ids`);
  const encode = (text, flags = {}) => llama.tokenizer.encode(text, { special: true, ...flags });
  const lists = list.map((text, i) => idsOf(where, `texts[${i}]`, before ? before + text : text, llama, truncate, encode));
  if (signal?.aborted) throw aborted(signal);
  const vectors = await vectorsOf(where, llama, ptr, lists, pooling, embeddingDim, { signal, onProgress });
  return vectors.map((vector) => {
    if (pooling === 'none') return vector; // a row per token, as the model gives them
    const kept = dimensions === undefined ? vector : vector.slice(0, dimensions); // Matryoshka: the first dimensions
    return normalize ? normalized(kept) : kept;
  });
}

/** Llama#rerank (which see). */
export async function rerank(llama, ptr, query, documents, options = {}) {
  const where = 'Llama.rerank';
  checkObject(where, 'options', options);
  checkKeys(where, options, RERANK_OPTIONS);
  const { topN = documents?.length, truncate = false, signal, onProgress } = options;
  checkSignal(where, signal);
  checkProgress(where, onProgress);
  if (llama.config.rankOutputs === 0) {
    throw new TypeError(`${where}: this model has no classification head (cls.output), so it does not rerank; a reranker's file says pooling_type rank`);
  }
  if (typeof query !== 'string' || query.length === 0) throw new TypeError(`${where}: query must be a non-empty string (got ${shown(query)})`);
  if (!Array.isArray(documents) || documents.length === 0 || !documents.every((d) => typeof d === 'string')) {
    throw new TypeError(`${where}: documents must be a non-empty array of strings (got ${shown(documents)})`);
  }
  checkInteger(where, 'options.topN', topN, 1, documents.length);
  checkEmbeds(where, llama.config.layerKinds);
  if (typeof truncate !== 'boolean') throw new TypeError(`${where}: options.truncate must be a boolean (got ${shown(truncate)})`);
  const { tokenizer } = llama;
  const template = llama.rerankTemplate;
  const encode = (text, flags = {}) => tokenizer.encode(text, { special: true, ...flags });
  // Without a template: [begin] query [end] [separator] document [end], the vocabulary's own (llama.cpp's; its end falls back to the separator).
  const plain = (document) => {
    const end = tokenizer.addEos ? [tokenizer.eosId ?? tokenizer.sepId] : [];
    return [...(tokenizer.addBos ? [tokenizer.bosId] : []), ...encode(query, { bos: false, eos: false, sep: false }), ...end,
      ...(tokenizer.addSep ? [tokenizer.sepId] : []), ...encode(document, { bos: false, eos: false, sep: false }), ...end];
  };
  const lists = documents.map((document, i) => {
    const ids = template
      ? encode(template.replaceAll('{query}', query).replaceAll('{document}', document), { bos: false, eos: false, sep: false })
      : plain(document);
    return idsOf(where, `documents[${i}] with the query`, ids, llama, truncate, encode);
  });
  if (signal?.aborted) throw aborted(signal);
  const vectors = await vectorsOf(where, llama, ptr, lists, 'rank', llama.config.rankOutputs, { signal, onProgress });
  // llama.cpp's server's score: the head's first output (qwen3's: the softmax's "yes").
  const scores = vectors.map((v) => v[0]);
  const ranking = scores.map((score, index) => ({ index, score, document: documents[index] }))
    .sort((a, b) => b.score - a.score || a.index - b.index).slice(0, topN);
  return { scores, ranking };
}

// The model runner: a GGUF language model (llama, qwen2, qwen3; weights in
// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K, left in
// their encoding in the wasm heap) whose forward pass runs in C (src/model)
// on this package's KvCache: the prompt in batches, each decode step a
// whole layer's attention in one call, the attention fed to imp, and
// speculative decoding (prompt-lookup drafts) verified in one forward pass
// and rolled back with the cache's verify. JavaScript makes a few calls per
// forward pass: tokens in, logits out.
//
//   import init from 'kvcache-wasm';
//   import { Llama, generate } from 'kvcache-wasm/llama';
//   await init();
//   const llama = await Llama.load(await fetch(url), { onProgress });   // or Llama.fromGguf(bytes)
//   const session = llama.session({ mode: 'q8' });
//   const { tokens, stats } = generate(session, llama.tokenizer.encode('Once'), { steps: 100, draft: 4 });
import {
  GgufError, GgufFile, checkTensorsPresent, describeGguf, parsePrefix, parseWhole, readGguf,
} from './gguf.js';
import { Tokenizer } from './tokenizer.js';
import { KvCache, modelPointer } from './model.js';
import { PrefixCache } from './prefix.js';
import { MODES } from './layer.js';
import { KvCacheError, checkBytes, checkInteger, checkObject, checkStatus, shown, staged } from './checks.js';
import { checkKeys, checkUnused } from './options.js';
import { finalizerOf, heap, heapLimitBytes, lib, readCString, unstage } from './runtime.js';
import { aborted, sourceChunks } from './sources.js';

export { GgufError, GgufFile, readGguf } from './gguf.js';
export { Tokenizer } from './tokenizer.js';

const SESSION_OPTIONS = ['mode', 'residualRows', 'maxRows', 'sinks', 'recent', 'prefixCache', 'cache', 'importance'];
const DECODE_OPTIONS = ['steps', 'draft', 'minNgram', 'temperature', 'seed', 'stopAtEos'];
const LOAD_OPTIONS = ['onProgress', 'signal', 'contextLength', 'cacheMode'];
const FORWARD_OPTIONS = ['logits', 'importance', 'verify'];
// kvc_lm_forward's flags (kvcache.h).
const LM_IMPORTANCE = 1;
const LM_VERIFY = 2;
// A header prefix's first buffer (it doubles as the header needs).
const FIRST_PREFIX = 1 << 20;
// Room for kvc_lm_create's sentence.
const MESSAGE_BYTES = 512;
// The context a load checks the heap for when not told: most chats stay within it.
const DEFAULT_CONTEXT = 4096;

const finalizer = finalizerOf((ptr) => lib().kvc_lm_free(ptr));
const disposeSymbol = Symbol.dispose ?? Symbol.for('Symbol.dispose');
const fromPointer = Symbol('fromPointer');

/** A prefix of a file, grown by appends into one buffer that doubles. */
class Prefix {
  bytes = new Uint8Array(FIRST_PREFIX);
  length = 0;

  append(chunk) {
    if (this.length + chunk.length > this.bytes.length) {
      const grown = new Uint8Array(Math.max(2 * this.bytes.length, this.length + chunk.length));
      grown.set(this.bytes.subarray(0, this.length));
      this.bytes = grown;
    }
    this.bytes.set(chunk, this.length);
    this.length += chunk.length;
  }

  get view() {
    return this.bytes.subarray(0, this.length);
  }
}

/**
 * A model being opened: the kvc_lm made from a parsed header, checked to
 * fit the heap with a cache of `contextLength` positions in `cacheMode`,
 * and its weights region filled from the file's bytes as they come
 * (`take(chunk, at)`: the chunk's bytes at file offset `at`). `done()`
 * checks that all of it came and gives the Llama; `fail()` frees
 * everything.
 */
function opening(where, g, { contextLength, cacheMode = 'f32' }) {
  const api = lib();
  const { metadata, tensors, dataOffset, dataBytes } = describeGguf(where, g);
  const tokenizer = Tokenizer.fromGguf(metadata);
  const [outPtr, message] = staged(where, 4, MESSAGE_BYTES);
  let ptr;
  try {
    const status = api.kvc_lm_create(g, outPtr, message, MESSAGE_BYTES);
    if (status !== 0) {
      const why = readCString(message);
      if (status === 12) throw new KvCacheError(`${where}: ${why}`, 'KVC_E_NOMEM');
      throw new GgufError(why || readCString(api.kvc_status_name(status) >>> 0));
    }
    ptr = heap().u32[outPtr >>> 2];
  } finally {
    unstage();
  }
  const llama = new Llama({ [fromPointer]: { ptr, tokenizer, tensors, cacheMode } });
  if (tokenizer.vocabSize !== llama.config.vocabSize) {
    llama.free();
    throw new GgufError(`tokenizer.ggml.tokens holds ${tokenizer.vocabSize} tokens and token_embd.weight ${llama.config.vocabSize} rows: they must be one vocabulary`);
  }
  const weightsBytes = dataBytes;
  try {
    llama.checkFits(where, contextLength ?? Math.min(llama.config.contextLength, DEFAULT_CONTEXT), cacheMode, weightsBytes);
    const status = api.kvc_lm_alloc_weights(ptr);
    if (status === 12) llama.checkFits(where, 0, cacheMode, weightsBytes, 'the heap, grown as far as it goes, has no block that large');
    checkStatus(where, status);
  } catch (error) {
    llama.free();
    throw error;
  }
  const weights = api.kvc_lm_weights(ptr) >>> 0;
  let filled = 0;
  return {
    llama,
    weightsBytes,
    take(chunk, at) {
      // The part of [at, at + chunk.length) that is tensor data.
      const from = Math.max(at, dataOffset);
      const to = Math.min(at + chunk.length, dataOffset + weightsBytes);
      if (from >= to) return;
      heap().u8.set(chunk.subarray(from - at, to - at), weights + from - dataOffset);
      filled += to - from;
    },
    done(fileLength) {
      if (filled < weightsBytes) checkTensorsPresent(tensors, fileLength);
      if (filled < weightsBytes) throw new GgufError(`truncated: the file ends at byte ${fileLength}, its tensor data at ${dataOffset + weightsBytes}`);
      return llama;
    },
    fail() {
      llama.free();
    },
  };
}

/** Load options, checked: { onProgress, signal, contextLength, cacheMode }. */
function loadOptions(where, options) {
  checkObject(where, 'options', options);
  checkKeys(where, options, LOAD_OPTIONS);
  const { onProgress, signal, contextLength, cacheMode = 'f32' } = options;
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new TypeError(`${where}: options.onProgress must be a function (got ${shown(onProgress)})`);
  if (signal !== undefined && !(typeof AbortSignal !== 'undefined' && signal instanceof AbortSignal)) {
    throw new TypeError(`${where}: options.signal must be an AbortSignal (got ${shown(signal)})`);
  }
  if (contextLength !== undefined) checkInteger(where, 'options.contextLength', contextLength, 1, 0x7fffffff);
  if (typeof cacheMode !== 'string' || !MODES.includes(cacheMode)) {
    throw new RangeError(`${where}: options.cacheMode must be one of ${MODES.map((m) => `'${m}'`).join(', ')} (got ${shown(cacheMode)})`);
  }
  return { onProgress, signal, contextLength, cacheMode };
}

// ---------------------------------------------------------------------------
// The model

/** A language model in the wasm heap: its configuration, tokenizer and forward pass. */
export class Llama {
  #ptr = 0;
  #cacheMode;

  /**
   * Loads a GGUF file held whole in memory (bytes, or a GgufFile from
   * readGguf), its tensor data copied into the heap once. For a file the
   * size of a real model, Llama.load streams it instead.
   * @param {Uint8Array | ArrayBuffer | GgufFile} input
   */
  static fromGguf(input) {
    const where = 'Llama.fromGguf';
    lib();
    const bytes = input instanceof GgufFile ? input.bytes : checkBytes(where, 'input', input);
    const g = parseWhole(where, bytes);
    let model;
    try {
      model = opening(where, g, {});
    } finally {
      lib().kvc_gguf_free(g);
    }
    try {
      model.take(bytes, 0);
      return model.done(bytes.length);
    } catch (error) {
      model.fail();
      throw error;
    }
  }

  /**
   * Loads a GGUF file from bytes, a Blob or File, a Response, a
   * ReadableStream or a URL, streamed into the wasm heap: JavaScript holds
   * one chunk at a time, never the file. `onProgress({ loaded, total })`
   * after every chunk (total null when unknown); `signal` aborts it, with
   * nothing left behind. Before the tensor data comes in, the weights and a
   * cache of `contextLength` positions (default: the file's context, at most
   * 4096) in `cacheMode` (default 'f32'; also the sessions' default mode)
   * are checked to fit the heap: a KvCacheError 'KVC_E_NOMEM' says how many
   * bytes are missing.
   */
  static async load(source, options = {}) {
    const where = 'Llama.load';
    lib();
    const { onProgress, signal, contextLength, cacheMode } = loadOptions(where, options);
    if (signal?.aborted) throw aborted(signal);
    const { total, chunks } = await sourceChunks(where, source, { signal });
    const prefix = new Prefix();
    let want = 1; // a first try on the first chunk; then what the parser asks for (at least twice as much)
    let model = null;
    let loaded = 0;
    const open = (more) => {
      const { g, needed } = parsePrefix(where, prefix.view, more);
      if (!g) {
        want = needed;
        return;
      }
      try {
        model = opening(where, g, { contextLength, cacheMode }); // before the tensor data comes: fits, or not
      } finally {
        lib().kvc_gguf_free(g);
      }
      model.take(prefix.view, 0);
    };
    try {
      for await (const chunk of chunks) {
        if (signal?.aborted) throw aborted(signal);
        if (model) model.take(chunk, loaded);
        else {
          prefix.append(chunk);
          if (prefix.length >= want) open(true);
        }
        loaded += chunk.length;
        onProgress?.({ loaded, total });
      }
      if (signal?.aborted) throw aborted(signal);
      if (!model) open(false);
      return model.done(loaded);
    } catch (error) {
      model?.fail();
      throw error;
    }
  }

  constructor(internal) {
    const adopted = internal?.[fromPointer];
    if (!adopted) throw new TypeError('new Llama: use Llama.load or Llama.fromGguf');
    const { ptr, tokenizer, tensors, cacheMode } = adopted;
    const api = lib();
    this.#ptr = ptr;
    this.#cacheMode = cacheMode ?? 'f32';
    this.tokenizer = tokenizer;
    /** The file's tensors: { name, type, typeId, dims, offset, bytes } (GgufFile.tensors). */
    this.tensors = tensors;
    this.config = Object.freeze({
      architecture: readCString(api.kvc_lm_architecture(ptr) >>> 0),
      dim: api.kvc_lm_dim(ptr) >>> 0,
      numLayers: api.kvc_lm_num_layers(ptr) >>> 0,
      hiddenDim: api.kvc_lm_ffn_dim(ptr) >>> 0,
      numHeads: api.kvc_lm_num_heads(ptr) >>> 0,
      numKvHeads: api.kvc_lm_num_kv_heads(ptr) >>> 0,
      headDim: api.kvc_lm_head_dim(ptr) >>> 0,
      vocabSize: api.kvc_lm_vocab_size(ptr) >>> 0,
      contextLength: api.kvc_lm_context_length(ptr) >>> 0,
      eps: api.kvc_lm_rms_eps(ptr),
      ropeBase: api.kvc_lm_rope_base(ptr),
    });
    finalizer.register(this, ptr, this);
  }

  #live(where) {
    if (!this.#ptr) throw new TypeError(`Llama.${where}: the model was freed`);
    return this.#ptr;
  }

  /** { weights, scratch }: the bytes the model holds in the heap (its caches count apart: KvCache#memoryBytes). */
  get memoryBytes() {
    const ptr = this.#live('memoryBytes');
    return { weights: lib().kvc_lm_weights_bytes(ptr) >>> 0, scratch: lib().kvc_lm_scratch_bytes(ptr) >>> 0 };
  }

  /**
   * Throws a KvCacheError 'KVC_E_NOMEM' saying how many bytes are missing
   * when `extra` bytes (the weights, before they are allocated) and a cache
   * of `positions` positions in `mode` do not fit what the heap holds free
   * and can still grow by -- or, given `why`, always (an allocation that
   * failed anyway).
   */
  checkFits(where, positions, mode, extra, why = null) {
    const api = lib();
    const { numLayers, numKvHeads, headDim } = this.config;
    const cache = numLayers * (api.kvc_layer_bytes_for(numKvHeads, headDim, MODES.indexOf(mode), positions) >>> 0);
    const room = heapLimitBytes() - heap().buffer.byteLength + (api.kvc_wasm_heap_free_bytes() >>> 0);
    if (cache + extra > room || why) {
      const context = positions ? ` and a ${positions}-position ${mode} cache (${cache} bytes)` : '';
      throw new KvCacheError(`${where}: ${extra} bytes of weights${context} do not fit the wasm heap (at most ` +
        `${heapLimitBytes()} bytes, room for ${room} more): ${why ?? `${cache + extra - room} bytes are missing`}`, 'KVC_E_NOMEM');
    }
  }

  /**
   * A new generation session with its own cache. `maxRows` bounds every
   * layer's cache (evicting with { sinks, recent } when it fills; see
   * LayerKvCache#evict). With a `prefixCache` (a PrefixCache shared by
   * sessions of this model and mode), a prompt starts from the longest
   * prefix of it the prefix cache holds -- a fork, sharing its pages -- and
   * only the rest is computed; the prompt's cache is added to it afterwards.
   * With a `cache` (a KvCache of this model's geometry, say one restored
   * from a snapshot), the session continues it and owns it; its mode is the
   * cache's. `importance` (default true): each token's attention goes to
   * the cache's imp, which eviction reads.
   */
  session(options = {}) {
    const where = 'llama.session';
    this.#live('session');
    checkObject(where, 'options', options);
    checkKeys(where, options, SESSION_OPTIONS);
    if (options.cache !== undefined) {
      for (const key of ['mode', 'residualRows']) checkUnused(where, options, key, 'a session given a cache stores as that cache does');
    }
    const { mode = this.#cacheMode, residualRows, maxRows, sinks, recent, prefixCache, cache, importance = true } = options;
    if (typeof importance !== 'boolean') throw new TypeError(`${where}: options.importance must be a boolean (got ${shown(importance)})`);
    return new LlamaSession(this, { mode, residualRows, maxRows, sinks, recent, prefixCache, cache, importance });
  }

  /**
   * The forward pass on a cache: appends the tokens at the cache's next
   * positions and returns their logits, [rows x vocab] for the last `rows`
   * tokens: options.logits 'all' (default), 'last' or a count (0: none).
   * importance (default true): their attention goes to imp. verify: the
   * tokens are a speculative verify (the cache begins one; keep(cache, n)
   * ends it, keeping the first n).
   */
  forward(cache, tokens, options = {}) {
    const where = 'Llama.forward';
    const ptr = this.#live('forward');
    checkObject(where, 'options', options);
    checkKeys(where, options, FORWARD_OPTIONS);
    const { logits = 'all', importance = true, verify = false } = options;
    const cachePtr = KvCache[modelPointer](where, 'cache', cache);
    const { contextLength, vocabSize } = this.config;
    if (!Array.isArray(tokens) || tokens.length === 0) throw new TypeError(`${where}: tokens must be a non-empty array of token ids`);
    for (const token of tokens) {
      if (!Number.isInteger(token) || token < 0 || token >= vocabSize) {
        throw new RangeError(`${where}: ${shown(token)} is not a token id (0 to ${vocabSize - 1})`);
      }
    }
    const n = tokens.length;
    const rows = logits === 'all' ? n : logits === 'last' ? 1 : logits;
    checkInteger(where, 'options.logits', rows, 0, n);
    const first = cache.nextPosition;
    if (first + n > contextLength) {
      throw new RangeError(`${where}: ${first + n} positions exceed the model's context of ${contextLength}`);
    }
    const [tokensPtr, logitsPtr] = staged(where, 4 * n, 4 * rows * vocabSize);
    try {
      heap().u32.set(tokens, tokensPtr >>> 2);
      const flags = (importance ? LM_IMPORTANCE : 0) | (verify ? LM_VERIFY : 0);
      checkStatus(where, lib().kvc_lm_forward(ptr, cachePtr, tokensPtr, n, logitsPtr, rows, flags));
      return heap().f32.slice(logitsPtr >>> 2, (logitsPtr >>> 2) + rows * vocabSize);
    } finally {
      unstage();
    }
  }

  /** Ends a verify that forward(…, { verify: true }) began: keeps its first n tokens, their attention added to imp. */
  keep(cache, n) {
    const where = 'Llama.keep';
    const ptr = this.#live('keep');
    const cachePtr = KvCache[modelPointer](where, 'cache', cache);
    checkInteger(where, 'n', n, 0, 0x7fffffff);
    checkStatus(where, lib().kvc_lm_keep(ptr, cachePtr, n));
  }

  /** Releases the model's weights (idempotent); later calls throw. */
  free() {
    if (!this.#ptr) return;
    finalizer.unregister(this);
    lib().kvc_lm_free(this.#ptr);
    this.#ptr = 0;
  }

  [disposeSymbol]() {
    this.free();
  }
}

/** A model with its cache: what generate() drives. */
export class LlamaSession {
  #bound;
  #importance;

  constructor(llama, { mode, residualRows, maxRows, sinks, recent, prefixCache, cache, importance }) {
    const { numLayers, numKvHeads, headDim } = llama.config;
    if (prefixCache !== undefined && !(prefixCache instanceof PrefixCache)) {
      throw new TypeError('llama.session: prefixCache must be a PrefixCache');
    }
    if (cache !== undefined) {
      if (!(cache instanceof KvCache)) throw new TypeError('llama.session: cache must be a KvCache');
      const fits = cache.numLayers === numLayers && Array.from({ length: numLayers }, (_, i) => cache.layer(i))
        .every((layer) => layer.kind === 'full' && layer.numKvHeads === numKvHeads && layer.headDim === headDim);
      if (!fits) throw new TypeError(`llama.session: cache must have ${numLayers} full layers of ${numKvHeads} KV heads x ${headDim}, as the model`);
    }
    this.llama = llama;
    this.prefixCache = prefixCache ?? null;
    this.cache = cache ?? new KvCache({ numLayers, numKvHeads, headDim, mode, residualRows, maxRows, sinks, recent });
    this.#bound = { maxRows: maxRows ?? 0, sinks, recent };
    this.#importance = importance;
  }

  /**
   * Takes in a prompt's tokens and returns how many came from the prefix
   * cache: on a fresh session, the longest prefix it holds (at least 64
   * tokens) becomes the cache, a fork of it, and only the rest is computed;
   * then the prompt's cache goes into the prefix cache for the next sessions
   * (unless it evicted positions: its rows no longer follow the tokens). A
   * session that holds positions already just computes the tokens.
   * What comes next is what a session without a prefix cache computes; imp
   * differs only in that the matched positions keep the attention the
   * entry's later tokens gave them.
   */
  prefill(tokens) {
    let reused = 0;
    const fresh = this.cache.nextPosition === 0;
    if (this.prefixCache && fresh) {
      const hit = this.prefixCache.match(tokens);
      if (hit) {
        this.cache.free();
        this.cache = hit.cache;
        reused = hit.length;
        const { maxRows, sinks, recent } = this.#bound; // the entry's own bound came with it
        for (let i = 0; i < this.cache.numLayers; i++) this.cache.layer(i).setMaxRows(maxRows, { sinks, recent });
      }
    }
    if (reused < tokens.length) this.llama.forward(this.cache, tokens.slice(reused), { logits: 0, importance: this.#importance });
    const evicted = Array.from({ length: this.cache.numLayers }, (_, i) => this.cache.layer(i))
      .some((layer) => layer.seqLen !== layer.nextPosition);
    if (this.prefixCache && fresh && tokens.length > 0 && !evicted) this.prefixCache.add(tokens, this.cache);
    return reused;
  }

  get mode() {
    return this.cache.layer(0).mode;
  }

  /** Appends the tokens and returns their logits [m × vocab]; their attention goes to imp. */
  forward(tokens) {
    return this.llama.forward(this.cache, tokens, { importance: this.#importance });
  }

  /**
   * Verifies a pending token and its drafts in one forward pass: appends
   * [pending, ...drafts] inside a verify and returns the logits; keep(n)
   * then keeps the first n positions and rolls back the rest.
   */
  verify(tokens) {
    const logits = this.llama.forward(this.cache, tokens, { importance: this.#importance, verify: true });
    return { logits, keep: (n) => this.llama.keep(this.cache, n) };
  }

  free() {
    this.cache.free();
  }
}

// ---------------------------------------------------------------------------
// Generation

/** A seeded generator (mulberry32) of uniforms in [0, 1). */
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The next token from logits: argmax (lowest id on ties) when temperature is 0, else a sample. */
function sampler(temperature, random) {
  return (logits) => {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
    if (temperature === 0) return best;
    const weights = Array.from(logits, (z) => Math.exp((z - logits[best]) / temperature));
    let u = random() * weights.reduce((a, b) => a + b, 0);
    for (let i = 0; i < weights.length; i++) {
      u -= weights[i];
      if (u < 0) return i;
    }
    return best;
  };
}

/**
 * Prompt lookup: finds the latest earlier occurrence of the longest suffix
 * n-gram (minNgram ≤ n ≤ maxNgram) of `history` and proposes up to k tokens
 * that followed it. A one-token match drafts too eagerly: on stories260K at
 * k = 4 it is accepted 22% of the time against 43% from two tokens on.
 */
export function promptLookup(history, k, maxNgram = 3, minNgram = 2) {
  for (let n = Math.min(maxNgram, history.length - 1); n >= minNgram; n--) {
    const suffix = history.length - n;
    for (let start = suffix - 1; start >= 0; start--) {
      let match = true;
      for (let i = 0; i < n && match; i++) match = history[start + i] === history[suffix + i];
      if (match) {
        const next = history.slice(start + n, start + n + k);
        if (next.length > 0) return next;
      }
    }
  }
  return [];
}

/**
 * Decodes up to `steps` tokens after `prompt` (ids, <s> first), one forward
 * pass at a time, as a generator of events -- what a UI animates:
 *   { type: 'token', token }                 a token is emitted
 *   { type: 'verify', drafts, accepted }     drafts are in the cache (seqLen at its peak)
 *   { type: 'accept', accepted, rejected }   the rejected drafts are rolled back
 * and returns the statistics { tokens, forwardPasses, drafted, accepted,
 * verifies, rollbacks, prefixTokens (prompt tokens taken from the session's
 * prefix cache), seconds, stop } -- stop: why it stopped, 'steps' (as many
 * tokens as asked), 'end' (the end of the text: </s>, or a new <s>) or
 * 'context' (the model's context is full).
 *   draft: k > 0 drafts up to k tokens by prompt lookup (of an n-gram of at
 *     least minNgram tokens, default 2) and verifies them in one forward
 *     pass; the emitted tokens are exactly those of draft = 0 (greedy, or
 *     sampled with the same seed: a draft is kept only when it equals the
 *     token sampled at its place).
 *   temperature: 0 (default) is greedy. seed: for sampling.
 *   stopAtEos: stop after </s> or a new <s> (default true).
 */
export function* decode(session, prompt, options = {}) {
  checkObject('decode', 'options', options);
  checkKeys('decode', options, DECODE_OPTIONS);
  if (!options.draft) checkUnused('decode', options, 'minNgram', 'it sizes the n-grams drafts are looked up by, and draft is 0');
  const { steps = 256, draft = 0, minNgram = 2, temperature = 0, seed = 1, stopAtEos = true } = options;
  const { tokenizer, config } = session.llama;
  if (!Array.isArray(prompt) || prompt.length === 0) throw new TypeError('decode: prompt must be a non-empty array of token ids');
  if (!Number.isInteger(steps) || steps < 0) throw new RangeError(`decode: steps must be an integer >= 0 (got ${steps})`);
  if (!Number.isInteger(draft) || draft < 0) throw new RangeError(`decode: draft must be an integer >= 0 (got ${draft})`);
  if (typeof temperature !== 'number' || !(temperature >= 0)) throw new RangeError(`decode: temperature must be a number >= 0 (got ${temperature})`);
  const next = sampler(temperature, seededRandom(seed));
  const stats = { tokens: 0, forwardPasses: 0, drafted: 0, accepted: 0, verifies: 0, rollbacks: 0, prefixTokens: 0, seconds: 0, stop: null };
  const started = performance.now();
  const history = [...prompt];
  const room = () => Math.min(steps - stats.tokens, config.contextLength - session.cache.nextPosition);
  const stops = (token) => stopAtEos && (token === tokenizer.eosId || token === tokenizer.bosId);
  const emitted = (token) => {
    history.push(token);
    stats.tokens++;
    return { type: 'token', token };
  };

  // The prompt but its last token goes in as one batch (or from the prefix
  // cache); the last token is the first "pending" one: sampled or given, but
  // not yet in the cache.
  if (prompt.length > 1) {
    stats.prefixTokens = session.prefill(prompt.slice(0, -1));
    if (stats.prefixTokens < prompt.length - 1) stats.forwardPasses++;
  }
  let pending = prompt[prompt.length - 1];
  let done = false;
  while (!done && room() > 0) {
    // Drafts must fit the steps left (the bonus token is one more) and the context.
    const drafts = draft > 0 ? promptLookup(history, Math.min(draft, room() - 1), 3, minNgram) : [];
    stats.forwardPasses++;
    if (drafts.length === 0) {
      pending = next(session.forward([pending]));
      done = stops(pending);
      yield emitted(pending);
      continue;
    }
    const { logits, keep } = session.verify([pending, ...drafts]);
    const row = (i) => logits.subarray(i * config.vocabSize, (i + 1) * config.vocabSize);
    // A draft is kept while it equals the token sampled at its place.
    let accepted = 0;
    let token = next(row(0));
    while (accepted < drafts.length && token === drafts[accepted] && !done) {
      accepted++;
      done = stops(token);
      if (!done) token = next(row(accepted));
    }
    yield { type: 'verify', drafts, accepted };
    keep(1 + accepted);
    stats.verifies++;
    stats.drafted += drafts.length;
    stats.accepted += accepted;
    if (accepted < drafts.length) stats.rollbacks++;
    yield { type: 'accept', accepted, rejected: drafts.length - accepted };
    for (const kept of drafts.slice(0, accepted)) yield emitted(kept);
    if (!done) {
      pending = token;
      done = stops(token);
      yield emitted(token);
    }
  }
  stats.seconds = (performance.now() - started) / 1000;
  stats.stop = done ? 'end' : stats.tokens >= steps ? 'steps' : 'context';
  return stats;
}

/**
 * decode() run to the end: returns { tokens, stats }, calling onToken(id)
 * for every emitted token, in order.
 */
export function generate(session, prompt, options = {}) {
  checkObject('generate', 'options', options);
  checkKeys('generate', options, [...DECODE_OPTIONS, 'onToken']);
  const { onToken, ...rest } = options;
  const events = decode(session, prompt, rest);
  const tokens = [];
  for (;;) {
    const { value, done } = events.next();
    if (done) return { tokens, stats: value };
    if (value.type === 'token') {
      tokens.push(value.token);
      onToken?.(value.token);
    }
  }
}

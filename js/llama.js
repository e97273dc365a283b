// A reference llama runner on the cache: RMSNorm, RoPE in the interleaved
// layout of llama GGUF files, grouped-query attention and SwiGLU, written to
// be read. Its attention runs entirely on this package's KvCache: the prompt
// is appended in one batch, a decode step attends a whole layer with
// attendHeads and a batch with attendCausal, the attention probabilities
// feed accumulateImp, and speculative decoding
// (prompt-lookup drafts) verifies its drafts in one forward pass and rolls
// back with beginVerify / accept.
//
//   import init from 'kvcache-wasm';
//   import { Llama, generate } from 'kvcache-wasm/llama';
//   await init();
//   const llama = Llama.fromGguf(bytes);
//   const session = llama.session({ mode: 'q8' });
//   const { tokens, stats } = generate(session, llama.tokenizer.encode('Once'), { steps: 100, draft: 4 });
import { GgufError, GgufFile, readGguf } from './gguf.js';
import { Tokenizer } from './tokenizer.js';
import { KvCache } from './model.js';
import { PrefixCache } from './prefix.js';

export { GgufError, GgufFile, readGguf } from './gguf.js';
export { Tokenizer } from './tokenizer.js';

// ---------------------------------------------------------------------------
// The arithmetic of one transformer block, on rows of Float32Arrays.

/** out[r × outDim] = x[r × inDim] · wᵀ, w row-major [outDim × inDim]. */
function matmul(out, x, w, rows, inDim, outDim) {
  const in4 = inDim - (inDim % 4);
  for (let r = 0; r < rows; r++) {
    const xr = r * inDim;
    for (let o = 0; o < outDim; o++) {
      const wo = o * inDim;
      // Four partial sums: the same products, fewer dependent additions.
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let i = 0;
      for (; i < in4; i += 4) {
        s0 += w[wo + i] * x[xr + i];
        s1 += w[wo + i + 1] * x[xr + i + 1];
        s2 += w[wo + i + 2] * x[xr + i + 2];
        s3 += w[wo + i + 3] * x[xr + i + 3];
      }
      for (; i < inDim; i++) s0 += w[wo + i] * x[xr + i];
      out[r * outDim + o] = s0 + s1 + (s2 + s3);
    }
  }
}

/** Each row of x, scaled to unit RMS and by the weight. */
function rmsnorm(out, x, weight, rows, dim, eps) {
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[r * dim + i] ** 2;
    const scale = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) out[r * dim + i] = weight[i] * (scale * x[r * dim + i]);
  }
}

/** Rotates the pairs (2i, 2i+1) of every head of row r by position × base^(−2i/headDim). */
function rope(x, rows, width, headDim, firstPosition, base) {
  for (let r = 0; r < rows; r++) {
    const position = firstPosition + r;
    for (let i = 0; i < width; i += 2) {
      const angle = position * base ** (-(i % headDim) / headDim);
      const [c, s] = [Math.cos(angle), Math.sin(angle)];
      const [a, b] = [x[r * width + i], x[r * width + i + 1]];
      x[r * width + i] = a * c - b * s;
      x[r * width + i + 1] = a * s + b * c;
    }
  }
}

/** SwiGLU: gate ← silu(gate) · up. */
function swiglu(gate, up) {
  for (let i = 0; i < gate.length; i++) gate[i] = (gate[i] / (1 + Math.exp(-gate[i]))) * up[i];
}

function addInto(x, y) {
  for (let i = 0; i < x.length; i++) x[i] += y[i];
}

// ---------------------------------------------------------------------------
// The model

/** A llama model's configuration, weights and tokenizer. */
export class Llama {
  /**
   * Reads a llama GGUF (F32 or F16 tensors).
   * @param {Uint8Array | ArrayBuffer | GgufFile} input
   */
  static fromGguf(input) {
    const gguf = input instanceof GgufFile ? input : readGguf(input);
    const architecture = gguf.get('general.architecture');
    if (architecture !== 'llama') throw new GgufError(`general.architecture is ${architecture}; this runner reads llama models`);
    // A size: a positive integer no model needs more than 2^24 of.
    const size = (name, fallback) => {
      const value = fallback === undefined ? gguf.get(`llama.${name}`) : gguf.metadata.get(`llama.${name}`) ?? fallback;
      if (!Number.isInteger(value) || value < 1 || value > 1 << 24) throw new GgufError(`llama.${name} is ${value}, not a usable size`);
      return value;
    };
    const positive = (name, fallback) => {
      const value = fallback === undefined ? gguf.get(`llama.${name}`) : gguf.metadata.get(`llama.${name}`) ?? fallback;
      if (typeof value !== 'number' || !(value > 0) || !Number.isFinite(value)) throw new GgufError(`llama.${name} is ${value}, not a positive number`);
      return value;
    };
    const dim = size('embedding_length');
    const numHeads = size('attention.head_count');
    const config = {
      dim,
      numLayers: size('block_count'),
      hiddenDim: size('feed_forward_length'),
      numHeads,
      numKvHeads: size('attention.head_count_kv', numHeads),
      headDim: dim / numHeads,
      eps: positive('attention.layer_norm_rms_epsilon'),
      contextLength: size('context_length'),
      ropeBase: positive('rope.freq_base', 10000),
    };
    const { numLayers, hiddenDim, numKvHeads, headDim } = config;
    if (!Number.isInteger(headDim) || numHeads % numKvHeads !== 0 || headDim % 2 !== 0 || headDim > 4096) {
      throw new GgufError(`inconsistent llama shape: ${dim} channels, ${numHeads} heads, ${numKvHeads} KV heads`);
    }
    const tokenizer = Tokenizer.fromGguf(gguf);
    config.vocabSize = tokenizer.vocabSize;
    const kvDim = numKvHeads * headDim;
    // ggml lists dims innermost first: [in, out] is a row-major out × in matrix.
    const tensor = (name, ...dims) => {
      const info = gguf.tensors.get(name);
      if (!info) throw new GgufError(`missing tensor ${name}`);
      if (info.dims.length !== dims.length || info.dims.some((d, i) => d !== dims[i])) {
        throw new GgufError(`tensor ${name} is [${info.dims.join(', ')}], expected [${dims.join(', ')}]`);
      }
      return gguf.tensor(name);
    };
    const layers = Array.from({ length: numLayers }, (_, l) => ({
      attnNorm: tensor(`blk.${l}.attn_norm.weight`, dim),
      wq: tensor(`blk.${l}.attn_q.weight`, dim, dim),
      wk: tensor(`blk.${l}.attn_k.weight`, dim, kvDim),
      wv: tensor(`blk.${l}.attn_v.weight`, dim, kvDim),
      wo: tensor(`blk.${l}.attn_output.weight`, dim, dim),
      ffnNorm: tensor(`blk.${l}.ffn_norm.weight`, dim),
      w1: tensor(`blk.${l}.ffn_gate.weight`, dim, hiddenDim),
      w2: tensor(`blk.${l}.ffn_down.weight`, hiddenDim, dim),
      w3: tensor(`blk.${l}.ffn_up.weight`, dim, hiddenDim),
    }));
    const embedding = tensor('token_embd.weight', dim, config.vocabSize);
    const weights = {
      embedding,
      layers,
      outputNorm: tensor('output_norm.weight', dim),
      // Models with tied embeddings have no output.weight.
      output: gguf.tensors.has('output.weight') ? tensor('output.weight', dim, config.vocabSize) : embedding,
    };
    return new Llama(config, weights, tokenizer);
  }

  constructor(config, weights, tokenizer) {
    this.config = config;
    this.weights = weights;
    this.tokenizer = tokenizer;
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
   * cache's.
   */
  session({ mode = 'f32', residualRows, maxRows, sinks, recent, prefixCache, cache } = {}) {
    return new LlamaSession(this, { mode, residualRows, maxRows, sinks, recent, prefixCache, cache });
  }

  /**
   * The no-cache reference: computes every position of `tokens` from scratch,
   * each query attending in f64 over the keys and values of all positions up
   * to its own, and returns the logits of every position [m × vocab]. What
   * the cache must match; a greedy run without a cache is this, called on a
   * growing sequence.
   */
  referenceLogits(tokens) {
    const { dim, numHeads, numKvHeads, headDim, eps, ropeBase } = this.config;
    const m = tokens.length;
    const kvDim = numKvHeads * headDim;
    const group = numHeads / numKvHeads;
    const x = this.#embed(tokens);
    for (const layer of this.weights.layers) {
      const xb = new Float32Array(m * dim);
      rmsnorm(xb, x, layer.attnNorm, m, dim, eps);
      const q = new Float32Array(m * dim);
      const k = new Float32Array(m * kvDim);
      const v = new Float32Array(m * kvDim);
      matmul(q, xb, layer.wq, m, dim, dim);
      matmul(k, xb, layer.wk, m, dim, kvDim);
      matmul(v, xb, layer.wv, m, dim, kvDim);
      rope(q, m, dim, headDim, 0, ropeBase);
      rope(k, m, kvDim, headDim, 0, ropeBase);
      const att = new Float32Array(m * dim);
      for (let i = 0; i < m; i++) {
        for (let h = 0; h < numHeads; h++) {
          const g = Math.floor(h / group);
          const scores = new Float64Array(i + 1);
          for (let p = 0; p <= i; p++) {
            let dot = 0;
            for (let j = 0; j < headDim; j++) dot += q[i * dim + h * headDim + j] * k[p * kvDim + g * headDim + j];
            scores[p] = dot / Math.sqrt(headDim);
          }
          const max = Math.max(...scores);
          let sum = 0;
          for (let p = 0; p <= i; p++) sum += (scores[p] = Math.exp(scores[p] - max));
          for (let j = 0; j < headDim; j++) {
            let acc = 0;
            for (let p = 0; p <= i; p++) acc += (scores[p] / sum) * v[p * kvDim + g * headDim + j];
            att[i * dim + h * headDim + j] = acc;
          }
        }
      }
      this.#finishBlock(x, att, layer, m);
    }
    return this.#logits(x, m);
  }

  #embed(tokens) {
    const { dim, vocabSize } = this.config;
    const x = new Float32Array(tokens.length * dim);
    tokens.forEach((token, i) => {
      if (!Number.isInteger(token) || token < 0 || token >= vocabSize) {
        throw new RangeError(`Llama: ${token} is not a token id (0 to ${vocabSize - 1})`);
      }
      x.set(this.weights.embedding.subarray(token * dim, (token + 1) * dim), i * dim);
    });
    return x;
  }

  // x += att · Woᵀ, then x += SwiGLU feed-forward of the normalised x.
  #finishBlock(x, att, layer, m) {
    const { dim, hiddenDim, eps } = this.config;
    const projected = new Float32Array(m * dim);
    matmul(projected, att, layer.wo, m, dim, dim);
    addInto(x, projected);
    const xb = new Float32Array(m * dim);
    rmsnorm(xb, x, layer.ffnNorm, m, dim, eps);
    const gate = new Float32Array(m * hiddenDim);
    const up = new Float32Array(m * hiddenDim);
    matmul(gate, xb, layer.w1, m, dim, hiddenDim);
    matmul(up, xb, layer.w3, m, dim, hiddenDim);
    swiglu(gate, up);
    matmul(projected, gate, layer.w2, m, hiddenDim, dim);
    addInto(x, projected);
  }

  #logits(x, m) {
    const { dim, eps, vocabSize } = this.config;
    const xb = new Float32Array(m * dim);
    rmsnorm(xb, x, this.weights.outputNorm, m, dim, eps);
    const logits = new Float32Array(m * vocabSize);
    matmul(logits, xb, this.weights.output, m, dim, vocabSize);
    return logits;
  }

  /**
   * The forward pass on a cache: appends the m tokens at the cache's next
   * positions and returns their logits [m × vocab], with the attention
   * probabilities of every query head of every layer ([m × rows] each) for
   * the caller to add to imp.
   */
  forward(cache, tokens) {
    const { dim, numHeads, numKvHeads, headDim, eps, ropeBase, contextLength } = this.config;
    const m = tokens.length;
    const first = cache.seqLen; // the absolute position: evicted positions still count
    if (first + m > contextLength) {
      throw new RangeError(`Llama.forward: ${first + m} positions exceed the model's context of ${contextLength}`);
    }
    const kvDim = numKvHeads * headDim;
    const group = numHeads / numKvHeads;
    const x = this.#embed(tokens);
    const attention = []; // per layer, per query head: { probs [m × rows], rows }
    this.weights.layers.forEach((layer, l) => {
      const layerCache = cache.layer(l);
      const xb = new Float32Array(m * dim);
      rmsnorm(xb, x, layer.attnNorm, m, dim, eps);
      const q = new Float32Array(m * dim);
      const k = new Float32Array(m * kvDim);
      const v = new Float32Array(m * kvDim);
      matmul(q, xb, layer.wq, m, dim, dim);
      matmul(k, xb, layer.wk, m, dim, kvDim);
      matmul(v, xb, layer.wv, m, dim, kvDim);
      rope(q, m, dim, headDim, first, ropeBase);
      rope(k, m, kvDim, headDim, first, ropeBase);
      layerCache.appendBatch(k, v); // [m × kvHeads × headDim]: the cache's row layout
      const att = new Float32Array(m * dim);
      const heads = [];
      if (m === 1) {
        // One token: the whole layer's heads in one call, each KV row read once per group.
        const rows = layerCache.seqLen; // slots held, after any eviction this append made
        const probs = new Float32Array(numHeads * rows);
        layerCache.attendHeads(q, { out: att, probs });
        for (let h = 0; h < numHeads; h++) heads.push({ probs: probs.subarray(h * rows, (h + 1) * rows), rows });
      } else {
        // m tokens: each query head sees its own prefix.
        const qh = new Float32Array(m * headDim);
        for (let h = 0; h < numHeads; h++) {
          const g = Math.floor(h / group);
          for (let i = 0; i < m; i++) qh.set(q.subarray(i * dim + h * headDim, i * dim + (h + 1) * headDim), i * headDim);
          const { out, probs } = layerCache.attendCausal(qh, g);
          for (let i = 0; i < m; i++) att.set(out.subarray(i * headDim, (i + 1) * headDim), i * dim + h * headDim);
          heads.push({ probs, rows: probs.length / m });
        }
      }
      attention.push(heads);
      this.#finishBlock(x, att, layer, m);
    });
    return { logits: this.#logits(x, m), attention };
  }
}

/**
 * Adds to imp the attention of the first `keep` of the m queries a forward
 * pass made, summed over the query heads, one position at a time (the order
 * a plain run adds them in). Every head of a llama layer is alive, so a
 * head's rows are the layer's positions.
 */
function accumulateAttention(cache, attention, keep) {
  attention.forEach((heads, l) => {
    const layerCache = cache.layer(l);
    const seqLen = layerCache.seqLen;
    const rows = heads[0].rows;
    for (let i = 0; i < keep; i++) {
      const mass = new Float32Array(seqLen);
      for (const { probs } of heads) {
        for (let p = 0; p < seqLen; p++) mass[p] += probs[i * rows + p];
      }
      layerCache.accumulateImp(mass);
    }
  });
}

/** A model with its cache: what generate() drives. */
export class LlamaSession {
  #bound;

  constructor(llama, { mode, residualRows, maxRows, sinks, recent, prefixCache, cache }) {
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
  }

  /**
   * Takes in a prompt's tokens and returns how many came from the prefix
   * cache: on a fresh session, the longest prefix it holds (at least 64
   * tokens) becomes the cache, a fork of it, and only the rest is computed;
   * then the prompt's cache goes into the prefix cache for the next sessions
   * (unless it evicted positions: its rows no longer follow the tokens). A
   * session that holds positions already just computes the tokens.
   * The logits are those a session without a prefix cache computes; imp
   * differs only in that the matched positions keep the attention the
   * entry's later tokens gave them.
   */
  prefill(tokens) {
    let reused = 0;
    const fresh = this.cache.seqLen === 0;
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
    if (reused < tokens.length) this.forward(tokens.slice(reused));
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
    const { logits, attention } = this.llama.forward(this.cache, tokens);
    accumulateAttention(this.cache, attention, tokens.length);
    return logits;
  }

  /**
   * Verifies a pending token and its drafts in one forward pass: appends
   * [pending, ...drafts] inside a verify and returns the logits; keep(n)
   * then keeps the first n positions and rolls back the rest.
   */
  verify(tokens) {
    this.cache.beginVerify();
    let result;
    try {
      result = this.llama.forward(this.cache, tokens);
    } catch (error) {
      this.cache.reject();
      throw error;
    }
    return {
      logits: result.logits,
      keep: (n) => {
        this.cache.accept(n);
        accumulateAttention(this.cache, result.attention, n);
      },
    };
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
 * prefix cache), seconds }.
 *   draft: k > 0 drafts up to k tokens by prompt lookup (of an n-gram of at
 *     least minNgram tokens, default 2) and verifies them in one forward
 *     pass; the emitted tokens are exactly those of draft = 0 (greedy, or
 *     sampled with the same seed: a draft is kept only when it equals the
 *     token sampled at its place).
 *   temperature: 0 (default) is greedy. seed: for sampling.
 *   stopAtEos: stop after </s> or a new <s> (default true).
 */
export function* decode(session, prompt, { steps = 256, draft = 0, minNgram = 2, temperature = 0, seed = 1, stopAtEos = true } = {}) {
  const { tokenizer, config } = session.llama;
  if (!Array.isArray(prompt) || prompt.length === 0) throw new TypeError('decode: prompt must be a non-empty array of token ids');
  if (!Number.isInteger(steps) || steps < 0) throw new RangeError(`decode: steps must be an integer >= 0 (got ${steps})`);
  if (!Number.isInteger(draft) || draft < 0) throw new RangeError(`decode: draft must be an integer >= 0 (got ${draft})`);
  if (typeof temperature !== 'number' || !(temperature >= 0)) throw new RangeError(`decode: temperature must be a number >= 0 (got ${temperature})`);
  const next = sampler(temperature, seededRandom(seed));
  const stats = { tokens: 0, forwardPasses: 0, drafted: 0, accepted: 0, verifies: 0, rollbacks: 0, prefixTokens: 0, seconds: 0 };
  const started = performance.now();
  const history = [...prompt];
  const room = () => Math.min(steps - stats.tokens, config.contextLength - session.cache.seqLen);
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
  return stats;
}

/**
 * decode() run to the end: returns { tokens, stats }, calling onToken(id)
 * for every emitted token, in order.
 */
export function generate(session, prompt, { onToken, ...options } = {}) {
  const events = decode(session, prompt, options);
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

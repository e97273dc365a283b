// The page's replica of the conversation the worker runs: the same model,
// loaded on this page too, with a cache per mode fed the very tokens the
// worker streams (teacher-forced: each mode's next-token distribution, and
// its bytes, over the same text), and one cache in the chosen mode that
// replays the worker's speculative decoding -- the same prompt-lookup drafts
// on the same history, verified against the tokens the worker emitted, the
// rejected ones rolled back. The worker's session exposes its tokens and
// cacheStats, not its caches' rows, imp or logits; the panels need those, so
// they read this replica, and the page says so.
//
// Each cache follows a session's rules (js/llama.js, decode.js): the last
// token emitted stays pending, out of the cache, until the next forward pass
// takes it in; a new turn goes back to where the conversation and the
// tokens part; the 'slide' policy keeps the first positions and the newest,
// half the context, when a forward pass would not fit.
import { generate, promptLookup, slideCache } from 'kvcache-wasm/llama';


function commonPrefix(a, b) {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

/** One cache following a session's tokens: `history` every token, the last one pending (not in the cache) when `pending`. */
class Mirror {
  constructor(llama, cache, context) {
    Object.assign(this, { llama, cache, context });
    this.history = [];
    this.pending = false;
  }

  get cached() { return this.history.length - (this.pending ? 1 : 0); }

  /** Back to the first n tokens (LlamaSession's rewind: nothing pending after it). */
  rewindTo(n) {
    if (n >= this.history.length) return;
    if (n < this.cached) this.cache.truncateLast(this.cached - n);
    this.history.length = n;
    this.pending = false;
  }

  /** Rows the cache has room for once `needed` more are asked for: the policy's sliding window, or what is left. */
  roomFor(needed) {
    const { contextLength } = this.llama.config;
    return this.context === 'slide' ? slideCache(this.cache, needed, contextLength) : contextLength - this.cache.rows;
  }

  /** The pending token and `tokens` into the cache; the last row's logits. */
  forward(tokens, { last = true } = {}) {
    const input = this.pending ? [this.history.at(-1), ...tokens] : tokens;
    this.history.push(...tokens);
    this.pending = false;
    if (input.length === 0) return null;
    return this.llama.forward(this.cache, input, { logits: last ? 'last' : 0 });
  }

  /** A turn's conversation (token ids, as LlamaSession#respond takes them): false when the context has no room for it. */
  takePrompt(ids) {
    this.rewindTo(commonPrefix(this.history, ids));
    let rest = ids.slice(this.history.length);
    if (rest.length === 0 && !this.pending) {
      // A session holding every token but none pending computes its last again.
      this.rewindTo(this.history.length - 1);
      rest = ids.slice(this.history.length);
    }
    const input = rest.length + (this.pending ? 1 : 0);
    if (this.roomFor(input) < input) return null;
    return this.forward(rest);
  }

  /**
   * Sets the cache to hold `tokens` as the worker's session does: its first
   * `positions` (the session cache's nextPosition) in the cache, the one
   * after them, if any, pending. (An abort inside a verify leaves none pending.)
   */
  syncTo(tokens, positions) {
    this.rewindTo(Math.min(commonPrefix(this.history, tokens), positions));
    if (positions > this.cached) {
      this.roomFor(positions - this.cached);
      this.forward(tokens.slice(this.history.length, positions), { last: false });
    }
    this.history.push(...tokens.slice(this.history.length));
    this.pending = tokens.length > positions;
  }
}

export class ChatReplica {
  /**
   * `llama`: the model on this page; mode: the chosen mode (the replay's);
   * modes: every mode fed teacher-forced; draft: the worker's k; context:
   * its policy ('stop' or 'slide').
   */
  constructor(llama, { mode, modes, draft, context }) {
    this.kind = 'model';
    this.llama = llama;
    this.mode = mode;
    this.draft = draft;
    const session = (m) => llama.session({ mode: m });
    this.replay = new Mirror(llama, session(mode).cache, context);
    this.shadows = Object.fromEntries(modes.map((m) => [m, new Mirror(llama, session(m).cache, context)]));
    this.lastLogits = null; // per mode: the logits that predict the next token
    this.queue = []; // tokens the worker emitted that the replay has not taken yet
    this.reply = null; // the turn under way: { maxTokens, emitted, first }
    this.stats = { tokens: 0, forwardPasses: 0, drafted: 0, accepted: 0, rollbacks: 0 };
    this.taken = 0; // tokens the shadows have taken in over the conversation (the charts' x)
  }

  get seqLen() { return this.shownLayer().seqLen; }

  get position() { return this.replay.cache.nextPosition; }

  memory() {
    return Object.fromEntries(Object.entries(this.shadows).map(([m, mirror]) => [m, mirror.cache.memoryBytes]));
  }

  /** The layer the panels show: the first that holds every position (a windowed model's first global layer). */
  shownLayer() { return this.#fullLayers(this.replay.cache)[0]; }

  caches() { return [this.replay.cache, ...Object.values(this.shadows).map((s) => s.cache)]; }

  /** The layers eviction and maxRows bound: every full layer (a window layer holds its window and no more). */
  layers() { return this.caches().flatMap((cache) => this.#fullLayers(cache)); }

  #fullLayers(cache) {
    return Array.from({ length: cache.numLayers }, (_, l) => cache.layer(l)).filter((layer) => layer.kind === 'full');
  }

  /** The real eviction on every cache of the replica, each layer by its own imp. */
  evict(policy) {
    for (const cache of this.caches()) cache.evict(policy);
    return true;
  }

  /** The token the replay's cache would take in next, or null. */
  get lastToken() { return this.replay.pending ? this.replay.history.at(-1) : null; }

  /**
   * A turn begins: the conversation's ids, as the worker's session takes
   * them. Returns the point for the charts (memory after the prompt).
   */
  beginTurn(ids, { maxTokens }) {
    this.queue = [];
    this.reply = { maxTokens, emitted: 0, first: true };
    const common = commonPrefix(this.shadows.f32.history, ids);
    this.lastLogits = Object.fromEntries(Object.entries(this.shadows).map(([m, mirror]) => [m, mirror.takePrompt(ids)]));
    this.replayPrompt = this.replay.takePrompt(ids) !== null;
    if (this.lastLogits.f32 === null) return null; // no room: the worker takes nothing in either
    this.taken += ids.length - common;
    return { x: this.taken, accuracy: null };
  }

  /**
   * A token the worker emitted: the shadows take in the one pending before
   * it (the KL of what each mode predicted for it, against f32's), and the
   * replay goes as far as the tokens that came let it. Returns the chart's
   * point and the replay's events ({ drafts } shown, then { accepted }).
   */
  token(token, events) {
    for (const [m, mirror] of Object.entries(this.shadows)) {
      if (mirror.history.length === 0) continue;
      if (!this.reply?.first) {
        mirror.roomFor(1);
        this.lastLogits[m] = mirror.forward([]);
      }
      mirror.history.push(token);
      mirror.pending = true;
    }
    let accuracy = null;
    if (this.lastLogits?.f32) {
      const reference = logSoftmax(this.lastLogits.f32);
      accuracy = Object.keys(this.shadows).filter((m) => m !== 'f32')
        .map((m) => klDivergence(reference, logSoftmax(this.lastLogits[m])));
    }
    if (this.reply) this.reply.first = false;
    this.taken++;
    this.queue.push(token);
    this.advance(false, events);
    return { x: this.taken, accuracy };
  }

  /** Branch i: a fork of the replay's cache that goes on with `tokens` sampled tokens of its own. */
  branch(i, tokens) {
    const session = this.llama.session({ cache: this.replay.cache.clone() });
    const { tokens: ids } = generate(session, [this.lastToken], { steps: tokens, temperature: 1, seed: i + 1, stopAtEos: false });
    return { cache: session.cache, text: `…${this.llama.tokenizer.decode(ids)}` };
  }

  /** The context policy of the next replies: 'stop' or 'slide'. */
  setContextPolicy(context) {
    for (const mirror of [this.replay, ...Object.values(this.shadows)]) mirror.context = context;
  }

  /** The reply ended: the replay takes the rest of its tokens. */
  endTurn(events) {
    this.advance(true, events);
    this.reply = null;
  }

  /** Every mirror set to the worker's session: its tokens, `positions` of them cached (after a stop string or an abort rewound it). */
  syncTo(tokens, positions) {
    for (const mirror of [this.replay, ...Object.values(this.shadows)]) mirror.syncTo(tokens, positions);
  }

  // decodeWith's loop (js/model/decode.js) on the replay's cache, with the
  // worker's tokens in place of sampling: the first token of a turn from the
  // prompt's pass; then, each pass, drafts looked up in the history, the
  // pending token and the drafts verified, the drafts kept while they equal
  // the tokens the worker emitted, the rest rolled back.
  advance(ended, { onDrafts, onAccept, onToken }) {
    const replay = this.replay;
    const reply = this.reply;
    if (!reply || !this.replayPrompt) return;
    while (this.queue.length > 0) {
      if (reply.emitted === 0) {
        onToken(this.takeEmitted(this.queue.shift()));
        continue;
      }
      const room = Math.min(reply.maxTokens - reply.emitted, replay.roomFor(1));
      if (room <= 0) break;
      const drafts = this.draft > 0 ? promptLookup(replay.history, Math.min(this.draft, room - 1)) : [];
      if (drafts.length === 0) {
        replay.forward([], { last: false });
        this.stats.forwardPasses++;
        onToken(this.takeEmitted(this.queue.shift()));
        continue;
      }
      // The worker's tokens at the drafts' places decide, with the one after them: wait for them unless the reply ended.
      if (this.queue.length <= drafts.length && !ended) break;
      let accepted = 0;
      while (accepted < drafts.length && accepted + 1 < this.queue.length && this.queue[accepted] === drafts[accepted]) accepted++;
      if (ended && accepted === this.queue.length - 1 && this.queue[accepted] === drafts[accepted]) accepted++;
      const pending = replay.history.at(-1);
      this.llama.forward(replay.cache, [pending, ...drafts], { logits: 0, verify: true });
      onDrafts(drafts);
      this.llama.keep(replay.cache, 1 + accepted);
      replay.pending = false;
      this.stats.forwardPasses++;
      this.stats.drafted += drafts.length;
      this.stats.accepted += accepted;
      if (accepted < drafts.length) this.stats.rollbacks++;
      onAccept(accepted);
      for (const kept of this.queue.splice(0, accepted)) {
        replay.history.push(kept);
        reply.emitted++;
        this.stats.tokens++;
        onToken(kept);
      }
      if (this.queue.length > 0) onToken(this.takeEmitted(this.queue.shift()));
    }
  }

  takeEmitted(token) {
    if (this.reply.emitted === 0) this.stats.forwardPasses++; // the prompt's pass gave it
    this.replay.history.push(token);
    this.replay.pending = true;
    this.reply.emitted++;
    this.stats.tokens++;
    return token;
  }

  dispose() {
    for (const cache of this.caches()) cache.free();
  }
}

function logSoftmax(logits) {
  let max = -Infinity;
  for (const z of logits) max = Math.max(max, z);
  let sum = 0;
  for (const z of logits) sum += Math.exp(z - max);
  const logSum = max + Math.log(sum);
  return Array.from(logits, (z) => z - logSum);
}

/** KL(p || q) in nats; null when there is no difference at all (no point on a log axis). */
function klDivergence(p, q) {
  let kl = 0;
  for (let i = 0; i < p.length; i++) kl += Math.exp(p[i]) * (p[i] - q[i]);
  return kl > 0 ? kl : null;
}

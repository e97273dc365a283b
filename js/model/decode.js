// Generation: a session's tokens decoded one forward pass at a time, with
// speculative decoding (drafts by prompt lookup or by a smaller model,
// verified in one pass and rolled back with the cache's verify) that emits
// exactly what plain decoding emits. decode() is the step-by-step generator a UI animates; generate()
// runs it to the end; LlamaSession#generate (llama.js) streams text from it.
import { checkObject } from '../runtime/checks.js';
import { checkKeys, checkUnused } from '../runtime/options.js';
import { argmax, createSampler } from './sampling.js';

const DECODE_OPTIONS = ['steps', 'draft', 'minNgram', 'draftSession', 'temperature', 'seed', 'stopAtEos', 'topK', 'topP', 'minP', 'repeatPenalty', 'repeatLastN'];
/**
 * How decoding tells a session what it took in (LlamaSession implements them):
 * [hold](prompt, pending): the prompt's tokens and the one pending before
 * went into the cache -- but `pending` (non-null: the prompt's last), which
 * is pending now; [take](token): the pending token (if any) went into the
 * cache, `token` is pending now; [taken](tokens): the pending token (if
 * any) and these went into the cache (a verify kept these drafts), none is
 * pending now.
 */
export const hold = Symbol('hold');
export const take = Symbol('take');
export const taken = Symbol('taken');
/**
 * [pass](tokens, { verify, into }): the forward pass on the session's
 * cache, recording nothing (decoding says what the session took in, above):
 * every token's logits (in `into` when given, Llama#forward's option); with
 * verify, inside a verify that Llama#keep ends.
 */
export const pass = Symbol('pass');
/**
 * [logitsInto](rows): the Float32Array a session keeps for decoding's
 * passes to write their logits into ([pass]'s `into`, Llama#forward's):
 * one row exactly for rows = 1, else at least `rows` rows -- the same array
 * pass after pass (grown only for more rows than before), so that a step
 * allocates no logits. Its values hold until the session's next such pass:
 * nothing that outlives a step (an event, a piece) holds the array.
 */
export const logitsInto = Symbol('logitsInto');
/**
 * [rewind](n): the session keeps the first n of its tokens (its cache goes
 * back with them); returns how many of them it took in again (a state or a
 * window that cannot go back so far goes back to a checkpoint, or the start).
 */
export const rewind = Symbol('rewind');

// decode()'s sampling: plain temperature sampling over every token unless told otherwise.
const PLAIN = { temperature: 0, topK: 0, topP: 1, minP: 0, repeatPenalty: 1, seed: 1 };

// The longest n-gram a draft is looked up by.
const MAX_NGRAM = 3;

/**
 * Prompt lookup: finds the latest earlier occurrence of the longest suffix
 * n-gram (minNgram ≤ n ≤ maxNgram) of `history` and proposes up to k tokens
 * that followed it. A one-token match drafts too eagerly: on stories260K at
 * k = 4 it is accepted 22% of the time against 43% from two tokens on.
 */
export function promptLookup(history, k, maxNgram = MAX_NGRAM, minNgram = 2) {
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
 * A draft model's drafts: `draftSession` (a session of a smaller model with
 * the same vocabulary) follows the target session's tokens, and drafts k
 * tokens greedily, one forward pass each, inside one verify of its own
 * cache; once the target has checked them, it keeps those the target
 * accepted -- its recurrent layers by their draft states, nothing decoded
 * again. Its cache follows the target's tokens; where they part (a rewound
 * conversation) it starts again from the first token they do not share.
 * Returns { propose(history, k) -> drafts, settle(accepted) }.
 */
export function modelDrafter(draftSession) {
  const llama = draftSession.llama;
  let input = [];
  let drafts = [];
  return {
    propose(history, k) {
      // What its cache holds (a token it had pending is let go: the target's history says what follows).
      if (draftSession.pending !== null) draftSession[rewind](draftSession.cache.nextPosition);
      const held = draftSession.tokens;
      let common = 0;
      while (common < held.length && common < history.length - 1 && held[common] === history[common]) common++;
      if (common < held.length) draftSession[rewind](common);
      input = history.slice(common);
      const next = (tokens) => argmax(llama.forward(draftSession.cache, tokens,
        { logits: 'last', importance: false, verify: true, into: draftSession[logitsInto](1) }));
      drafts = [next(input)];
      while (drafts.length < k) drafts.push(next([drafts.at(-1)]));
      return drafts;
    },
    settle(accepted) {
      // The last draft never went in: the accepted ones before it did.
      const kept = Math.min(accepted, drafts.length - 1);
      llama.keep(draftSession.cache, input.length + kept);
      draftSession[taken]([...input, ...drafts.slice(0, kept)]);
    },
  };
}

/**
 * Decodes up to `steps` tokens after `prompt` (ids: <s> first on a fresh
 * session; on a session that decoded before, what follows its text), one
 * forward pass at a time, as a generator of events -- what a UI animates:
 *   { type: 'token', token }                 a token is emitted
 *   { type: 'verify', drafts, accepted }     drafts are in the cache (seqLen at its peak)
 *   { type: 'accept', accepted, rejected }   the rejected drafts are rolled back
 * and returns the statistics { tokens, forwardPasses, drafted, accepted,
 * verifies, rollbacks, prefixTokens (prompt tokens taken from the session's
 * prefix cache), promptComputed (prompt tokens computed: the pending one and
 * the prompt's, less those, and any a rewind took in again), seconds, stop }
 * -- stop: why it stopped, 'steps' (as many tokens as asked), 'end' (the
 * end of the text: an end-of-generation token, or a new <s>) or 'context'
 * (the model's context is full).
 *   draft: k > 0 drafts up to k tokens by prompt lookup (of an n-gram of at
 *     least minNgram tokens, default 2) -- or, given a draftSession (a
 *     session of a smaller model of the same vocabulary, modelDrafter), by
 *     that model -- and verifies them in one forward pass; the emitted
 *     tokens are exactly those of draft = 0 (greedy, or sampled with the
 *     same seed: a draft is kept only when it equals the token sampled at
 *     its place).
 *   temperature: 0 (default) is greedy; topK, topP, minP, repeatPenalty,
 *     repeatLastN, seed: sampling.js (off by default here).
 *   stopAtEos: stop after an end-of-generation token or a new <s> (default true).
 * The last emitted token is not in the cache yet: the session keeps it
 * pending, and the next decode on the session takes it in first.
 */
export function* decode(session, prompt, options = {}) {
  checkObject('decode', 'options', options);
  checkKeys('decode', options, DECODE_OPTIONS);
  if (!options.draft) checkUnused('decode', options, 'minNgram', 'it sizes the n-grams drafts are looked up by, and draft is 0');
  if (!options.draft) checkUnused('decode', options, 'draftSession', 'it drafts, and draft is 0');
  if (options.draftSession !== undefined) checkUnused('decode', options, 'minNgram', 'a draft model drafts, not prompt lookup');
  const { steps = 256, draft = 0, minNgram = 2, draftSession, stopAtEos = true, ...sampling } = options;
  return yield* decodeWith(session, prompt, { steps, draft, minNgram, drafter: drafterOf('decode', session, draftSession),
    stop: stopAtEos ? session.llama.tokenizer.eogIds : new Set(), sampler: createSampler('decode', { ...PLAIN, ...sampling }) });
}

/** The drafter of a draftSession option (undefined: none), checked against the target session. */
export function drafterOf(where, session, draftSession) {
  if (draftSession === undefined) return null;
  if (typeof draftSession?.verify !== 'function' || !draftSession.llama || draftSession === session) {
    throw new TypeError(`${where}: draftSession must be a LlamaSession of another model`);
  }
  const [ours, theirs] = [session.llama.config.vocabSize, draftSession.llama.config.vocabSize];
  if (ours !== theirs) throw new RangeError(`${where}: draftSession's model has ${theirs} tokens, the target's ${ours}: a draft model needs the same vocabulary`);
  return modelDrafter(draftSession);
}

/** decode()'s statistics, before the first token; endStats() ends them with the reason. */
export function decodeStats() {
  return { tokens: 0, forwardPasses: 0, drafted: 0, accepted: 0, verifies: 0, rollbacks: 0, prefixTokens: 0, promptComputed: 0, seconds: 0, stop: null, started: performance.now() };
}

export function endStats(stats, stop) {
  const { started, ...ended } = stats;
  return { ...ended, seconds: (performance.now() - started) / 1000, stop };
}

/**
 * decode() with a sampler and a set of stopping tokens of the caller's: what
 * LlamaSession#generate runs. `makeRoom(needed)` (optional) may make room in
 * the cache for `needed` more rows (a sliding window) and says how many it
 * has. `stats` (decodeStats()) are filled as it goes, for a caller that
 * stops it early.
 */
export function* decodeWith(session, prompt, { steps, draft, minNgram, drafter = null, stop, sampler, makeRoom = null, stats = decodeStats(), logprobs = null }) {
  const { config } = session.llama;
  if (!Array.isArray(prompt) || !prompt.every((t) => Number.isInteger(t) && t >= 0)) {
    throw new TypeError('decode: prompt must be an array of token ids');
  }
  if (!Number.isInteger(steps) || steps < 0) throw new RangeError(`decode: steps must be an integer >= 0 (got ${steps})`);
  if (!Number.isInteger(draft) || draft < 0) throw new RangeError(`decode: draft must be an integer >= 0 (got ${draft})`);
  const finish = (why) => endStats(stats, why);
  const stops = (token) => stop.has(token) || (stop.size > 0 && token === session.llama.tokenizer.bosId && stats.tokens > 0);
  // Positions the cache has room for, after making room for `needed` of them (a sliding window).
  const roomFor = (needed) => (makeRoom ? makeRoom(needed) : config.contextLength - session.cache.rows);
  const room = () => Math.min(steps - stats.tokens, roomFor(1));
  // With `logprobs` (a count of alternatives), each token says how likely the model made it (logprobsOf).
  const scored = (token, row) => (logprobs === null ? { type: 'token', token } : { type: 'token', token, logprob: logprobsOf(row, token, logprobs) });
  const emitted = (token, row) => {
    session[take](token);
    stats.tokens++;
    return scored(token, row);
  };

  // What the session has pending, then the prompt, go in as one forward
  // pass (what the prefix cache holds of them taken from it); its last
  // position's logits give the first token. A session that holds tokens but
  // none pending (rewound, restored) computes its last one again.
  let input = session.pending === null ? prompt : [session.pending, ...prompt];
  if (input.length === 0) {
    const held = session.tokens;
    if (held.length === 0) throw new TypeError('decode: prompt must hold a token on a session that holds none');
    stats.promptComputed += session[rewind](held.length - 1);
    input = prompt = [held.at(-1)];
  }
  if (input.length > config.contextLength) {
    throw new RangeError(`decode: the prompt's ${input.length} tokens exceed the model's context of ${config.contextLength}`);
  }
  if (roomFor(input.length) < input.length) return finish('context'); // nothing taken in
  if (steps === 0) {
    // Taken in but its last token, which stays pending: no logits are needed yet.
    stats.prefixTokens = session.prefill(input.slice(0, -1));
    stats.promptComputed += input.length - 1 - stats.prefixTokens;
    if (stats.prefixTokens < input.length - 1) stats.forwardPasses++;
    session[hold](prompt, input.at(-1));
    return finish('steps');
  }
  const { reused, logits } = session.prefill(input, { logits: true });
  stats.prefixTokens = reused;
  stats.promptComputed += input.length - reused;
  stats.forwardPasses++;
  session[hold](prompt, null);
  const first = sampler.next(logits, session.tokens);
  let done = stops(first);
  yield emitted(first, logits);
  while (!done && room() > 0) {
    const pending = session.pending;
    // Drafts must fit the steps left (the bonus token is one more) and the context.
    const history = session.tokens;
    const k = Math.min(draft, room() - 1);
    // Drafts are text: an image's ids (past the vocabulary) are never drafted.
    const proposed = k <= 0 ? [] : drafter ? drafter.propose(history, k) : promptLookup(history, k, MAX_NGRAM, minNgram);
    const beyond = proposed.findIndex((t) => t >= config.vocabSize);
    const drafts = beyond < 0 ? proposed : proposed.slice(0, beyond);
    stats.forwardPasses++;
    if (drafts.length === 0) {
      const row = session[pass]([pending], { into: session[logitsInto](1) });
      const token = sampler.next(row, history);
      done = stops(token);
      yield emitted(token, row);
      continue;
    }
    const rows = session[pass]([pending, ...drafts], { verify: true, into: session[logitsInto](1 + drafts.length) });
    const row = (i) => rows.subarray(i * config.vocabSize, (i + 1) * config.vocabSize);
    // A draft is kept while it equals the token sampled at its place (its
    // history the drafts before it, as plain decoding would have had).
    let accepted = 0;
    let token = sampler.next(row(0), history);
    while (accepted < drafts.length && token === drafts[accepted] && !done) {
      accepted++;
      done = stops(token);
      if (!done) token = sampler.next(row(accepted), history.concat(drafts.slice(0, accepted)));
    }
    yield { type: 'verify', drafts, accepted };
    session.llama.keep(session.cache, 1 + accepted);
    drafter?.settle(accepted);
    session[taken](drafts.slice(0, accepted));
    stats.verifies++;
    stats.drafted += drafts.length;
    stats.accepted += accepted;
    if (accepted < drafts.length) stats.rollbacks++;
    yield { type: 'accept', accepted, rejected: drafts.length - accepted };
    for (const [i, kept] of drafts.slice(0, accepted).entries()) {
      stats.tokens++;
      yield scored(kept, logprobs === null ? null : row(i));
    }
    if (!done) {
      done = stops(token);
      yield emitted(token, logprobs === null ? null : row(accepted));
    }
  }
  return finish(done ? 'end' : stats.tokens >= steps ? 'steps' : 'context');
}

/**
 * How likely the model made `token` at a step, from that step's logits:
 * { logprob, top: the `count` likeliest tokens [{ token, logprob }], most
 * likely first } -- the log-softmax of the model's logits themselves, before
 * any sampling option or constraint reshapes them (what llama.cpp's n_probs
 * reports with no sampler in its way).
 */
export function logprobsOf(row, token, count) {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i] > max) max = row[i];
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i] - max);
  const norm = max + Math.log(sum);
  const top = [];
  for (let i = 0; i < row.length && count > 0; i++) {
    if (top.length < count || row[i] > row[top.at(-1)]) {
      let at = top.length < count ? top.length : count - 1;
      while (at > 0 && row[top[at - 1]] < row[i]) at--;
      top.splice(at, 0, i);
      if (top.length > count) top.pop();
    }
  }
  return { logprob: row[token] - norm, top: top.map((t) => ({ token: t, logprob: row[t] - norm })) };
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

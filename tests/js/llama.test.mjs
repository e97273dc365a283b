// The llama runner on the real stories260K model: the cache against a
// no-cache reference, the quantized modes' next-token KL, speculative
// decoding, the tokenizer and the GGUF reader's refusals.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { GgufError, Llama, Tokenizer, generate, promptLookup, readGguf } from '../../js/llama.js';
import { KvCacheError, PROFILE_OPERATIONS, profile } from '../../js/index.js';
import { MODEL_MISSING, MODEL_PATH, MODES, bitsEqual, fingerprint, ready, rng } from './helpers.mjs';
import { writeGguf } from './gguf-writer.mjs';
import { logitsInto } from '../../js/model/decode.js';
import { referenceLogits } from './reference/transformer.mjs';
import { REAL_MODELS, reencodeLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';

const STEPS = 200;
const STORY_OPENING = 'Once upon a time, there was a little girl named Lily.';

// Mean next-token KL against f32, teacher-forced on the f32 greedy text: the
// design measures 2.2e-4 (q8), 2.2e-4 (q8k), 2.3e-6 (q8v); llama.cpp's q8_0
// KV cache is about 1e-3 on an 8B model, and a simulation of its q8_0 blocks
// (llama.cpp itself refuses q8_0 and q4_0 caches at this model's head_dim of
// 8) gave 1.6e-3 here.  4 bits with the default residual window of 64 rows,
// measured: 3.0e-4 (q4), 2.2e-4 (q4k), 2.2e-5 (q4v), 2.6e-4 (q8k+q4v),
// 2.2e-4 (q4k+q8v); the targets are 2.5e-3 (q4) and 1.2e-3
// (q8k+q4v), and the same simulation of llama.cpp's q4_0 blocks gave 0.42.
// (llama.cpp's own caches, at a head size it accepts: the kjv-d512-h64
// figures below and tests/integration/llamacpp-oracle.test.mjs.)
const KL_BOUND = {
  q8: 2.5e-4, q8k: 2.5e-4, q8v: 1e-5, q4: 3.5e-4, q4k: 2.6e-4, q4v: 3e-5, 'q8k+q4v': 3e-4, 'q4k+q8v': 3.5e-4,
};
const TOP1_BOUND = 0.98;

let bytes;
let llama;
let greedy; // the f32 greedy continuation of <s>, STEPS tokens

before(async () => {
  await ready();
  if (MODEL_MISSING) return;
  bytes = new Uint8Array(readFileSync(MODEL_PATH));
  llama = Llama.fromGguf(bytes);
  const session = llama.session({ mode: 'f32' });
  greedy = generate(session, [llama.tokenizer.bosId], { steps: STEPS, stopAtEos: false }).tokens;
  session.free();
});

/** A test that needs the model, skipped with a message saying where to put it. */
function modelTest(name, fn) {
  test(name, (t) => (MODEL_MISSING ? t.skip(MODEL_MISSING) : fn(t)));
}

const argmax = (row) => row.reduce((best, z, i) => (z > row[best] ? i : best), 0);

modelTest('a profile tells where the time of the forward passes it wraps went, operation by operation', async () => {
  const session = llama.session({ mode: 'f32' });
  const prompt = greedy.slice(0, 40);
  const { value, totalMs, ms } = await profile(() => {
    llama.forward(session.cache, prompt, { logits: 'last' });
    return llama.forward(session.cache, [greedy[40]], { logits: 'last' });
  });
  assert.equal(value.length, llama.config.vocabSize, 'run\'s value comes back');
  assert.deepEqual(Object.keys(ms), [...PROFILE_OPERATIONS]);
  for (const op of ['embed', 'norm', 'quantize', 'qkv', 'attend', 'wo', 'gateUp', 'activation', 'down', 'logits']) {
    assert.ok(ms[op] > 0, `${op}: ${ms[op]} ms`);
  }
  assert.equal(ms.recurrent, 0, 'no recurrent layer');
  const sum = Object.values(ms).reduce((a, b) => a + b, 0);
  assert.ok(sum <= totalMs + 0.01, `the operations (${sum} ms) fit in the call (${totalMs} ms)`);
  // Off again: a pass after it changes nothing it returned.
  const before = { ...ms };
  llama.forward(session.cache, [greedy[41]], { logits: 'last' });
  assert.deepEqual(ms, before);
  await assert.rejects(profile('run'), { name: 'TypeError', message: /profile: run must be a function/ });
  await assert.rejects(profile(() => profile(() => 0)), { message: /a profile is running already/ });
  assert.equal((await profile(() => 7)).value, 7, 'a refused profile leaves the next one free to run');
  await assert.rejects(profile(() => { throw new RangeError('boom'); }), { name: 'RangeError', message: 'boom' });
  session.free();
});

modelTest('greedy decoding from <s> tells the published story', () => {
  assert.ok(llama.tokenizer.decode(greedy).startsWith(STORY_OPENING), llama.tokenizer.decode(greedy).slice(0, 80));
});

modelTest(`the cached runner and a no-cache reference agree token for token for ${STEPS} greedy tokens (f32)`, () => {
  const sequence = [llama.tokenizer.bosId, ...greedy];
  const vocab = llama.config.vocabSize;
  const gguf = readGguf(bytes);
  const model = { config: llama.config, tensor: (name) => gguf.tensor(name), has: (name) => gguf.tensors.has(name) };
  // Every step recomputed from scratch for the first tokens...
  for (let n = 1; n <= 24; n++) {
    const logits = referenceLogits(model, sequence.slice(0, n));
    assert.equal(argmax(logits.subarray((n - 1) * vocab)), sequence[n], `step ${n}`);
  }
  // ...and all of them in one causal pass: position i predicts token i + 1.
  const logits = referenceLogits(model, sequence.slice(0, STEPS));
  for (let i = 0; i < STEPS; i++) {
    assert.equal(argmax(logits.subarray(i * vocab, (i + 1) * vocab)), sequence[i + 1], `position ${i}`);
  }
});

/** log-softmax of one row, in f64. */
function logSoftmax(row) {
  const max = Math.max(...row);
  const logSum = max + Math.log(row.reduce((sum, z) => sum + Math.exp(z - max), 0));
  return Array.from(row, (z) => z - logSum);
}

/** Mean next-token KL of a session's mode against f32 and top-1 agreement,
 * teacher-forced on the greedy text (a forward pass reads each position as
 * decoding would have: attendCausal gives each query its own q4 window). */
function divergence(options) {
  const sequence = [llama.tokenizer.bosId, ...greedy.slice(0, STEPS - 1)];
  const vocab = llama.config.vocabSize;
  const logitsOf = (sessionOptions) => {
    const session = llama.session(sessionOptions);
    const logits = session.forward(sequence);
    session.free();
    return logits;
  };
  const exact = logitsOf({ mode: 'f32' });
  const quantized = logitsOf(options);
  let kl = 0;
  let agree = 0;
  for (let i = 0; i < STEPS; i++) {
    const p = logSoftmax(exact.subarray(i * vocab, (i + 1) * vocab));
    const q = logSoftmax(quantized.subarray(i * vocab, (i + 1) * vocab));
    kl += p.reduce((sum, lp, j) => sum + Math.exp(lp) * (lp - q[j]), 0);
    agree += Number(argmax(p) === argmax(q));
  }
  return { kl: kl / STEPS, top1: agree / STEPS };
}

for (const mode of Object.keys(KL_BOUND)) {
  modelTest(`${mode}: next-token KL against f32 stays below ${KL_BOUND[mode]}, teacher-forced on the greedy text`, (t) => {
    const { kl, top1 } = divergence({ mode });
    t.diagnostic(`${mode}: mean KL ${kl.toExponential(3)}, top-1 agreement ${top1.toFixed(3)}`);
    assert.ok(kl > 0, 'quantization changes the distribution');
    assert.ok(kl < KL_BOUND[mode], `mean KL ${kl}`);
    assert.ok(top1 >= TOP1_BOUND, `top-1 agreement ${top1}`);
  });
}

modelTest('q4 meets its targets with a residual window of 32 rows too, and needs one', (t) => {
  // Measured: R = 32 KL 1.9e-3, top-1 0.985 (the targets: <= 2.5e-3 and >= 98.5%);
  // without a window (every row from position 64 on through 4 bits) KL 0.11, top-1 0.90.
  const window32 = divergence({ mode: 'q4', residualRows: 32 });
  const none = divergence({ mode: 'q4', residualRows: 0 });
  t.diagnostic(`q4, R = 32: KL ${window32.kl.toExponential(3)}, top-1 ${window32.top1.toFixed(3)}; R = 0: KL ${none.kl.toExponential(3)}, top-1 ${none.top1.toFixed(3)}`);
  assert.ok(window32.kl <= 2.5e-3 && window32.top1 >= 0.985, `R = 32: ${JSON.stringify(window32)}`);
  assert.ok(none.kl > 0.05 && none.top1 < 0.95, `R = 0: ${JSON.stringify(none)}`);
});

modelTest('{ keys: q8, values: q4 } is the mode named q8k+q4v, and meets the 1.2e-3 target', () => {
  const { kl } = divergence({ mode: { keys: 'q8', values: 'q4' } });
  assert.ok(kl <= 1.2e-3 && kl === divergence({ mode: 'q8k+q4v' }).kl, `mean KL ${kl}`);
});

// The trained model at a real head size (kjv-d512-h64: head_dim 64, 4 query
// heads per KV head), teacher-forced over 320 tokens of Genesis 1: each
// mode's mean next-token KL and top-1 agreement against f32.  The kernels of
// issue 23 (one 14-bit code vector per query, scales folded into one
// multiply) must cost no accuracy: each mode within 5% of what the package
// gave before them, measured on this text (SIMD128 build): q8 2.67e-6, q8k
// 2.60e-6, q8v 3.61e-7, q4 1.072e-3, q4k 9.43e-4, q4v 9.56e-5, q8k+q4v
// 9.66e-5, q4k+q8v 9.52e-4 (top-1 99.7%, 100%, 99.7%, 98.75%, 98.75%,
// 99.1%, 99.1%, 98.75%).  Measured with them: q8 2.71e-6, q8k 2.59e-6, the
// others equal to three digits.  4-bit keys carry most of q4's KL here:
// the model's keys have no strong outlier channels, so the field evens out
// little and a row's 7 steps each side are coarse beside its values'.
const KJV_TOKENS = 320;
const KJV_BEFORE = {
  q8: 2.673e-6, q8k: 2.602e-6, q8v: 3.612e-7, q4: 1.0719e-3, q4k: 9.434e-4, q4v: 9.563e-5, 'q8k+q4v': 9.655e-5, 'q4k+q8v': 9.518e-4,
};
const KJV_TOP1 = 0.985;
const kjv = REAL_MODELS['kjv-d512-h64'];
const KJV_MISSING = existsSync(kjv.path) ? null : `the model file is absent: put kjv-d512-h64.gguf at ${kjv.path}`;
let kjvRun = null; // { llama, tokens, exact }, made by the first test that needs it

function kjvDivergence(mode) {
  if (!kjvRun) {
    const runner = Llama.fromGguf(new Uint8Array(readFileSync(kjv.path)));
    const tokens = kjv.tokens(runner, KJV_TOKENS);
    kjvRun = { runner, tokens, exact: null };
    kjvRun.exact = kjvLogits('f32');
  }
  const { runner, tokens, exact } = kjvRun;
  const vocab = runner.config.vocabSize;
  const quantized = kjvLogits(mode);
  let kl = 0;
  let agree = 0;
  for (let i = 0; i < tokens.length; i++) {
    const p = logSoftmax(exact.subarray(i * vocab, (i + 1) * vocab));
    const q = logSoftmax(quantized.subarray(i * vocab, (i + 1) * vocab));
    kl += p.reduce((sum, lp, j) => sum + Math.exp(lp) * (lp - q[j]), 0);
    agree += Number(argmax(p) === argmax(q));
  }
  return { kl: kl / tokens.length, top1: agree / tokens.length };
}

function kjvLogits(mode) {
  const session = kjvRun.runner.session({ mode });
  const logits = session.forward(kjvRun.tokens);
  session.free();
  return logits;
}

for (const mode of Object.keys(KJV_BEFORE)) {
  test(`kjv-d512-h64 (head_dim 64), ${mode}: next-token KL against f32 within 5% of the package before issue 23's kernels, teacher-forced on Genesis`, (t) => {
    if (KJV_MISSING) return t.skip(KJV_MISSING);
    const { kl, top1 } = kjvDivergence(mode);
    t.diagnostic(`${mode}: mean KL ${kl.toExponential(3)} (before: ${KJV_BEFORE[mode].toExponential(3)}), top-1 agreement ${top1.toFixed(4)}`);
    assert.equal(kjvRun.tokens.length, KJV_TOKENS);
    assert.ok(kl > 0, 'quantization changes the distribution');
    assert.ok(kl <= 1.05 * KJV_BEFORE[mode], `mean KL ${kl} against ${KJV_BEFORE[mode]} before`);
    assert.ok(top1 >= KJV_TOP1, `top-1 agreement ${top1}`);
  });
}

// Eviction on the real model: a 128-row budget over a 400-token story,
// teacher-forced on the unbounded f32 greedy text. Importance-based eviction
// (4 sinks, 96 recent, 28 heavy hitters) must lose less than a sliding window
// of the same size (4 sinks, 124 recent); both must stay coherent.
const EVICT_CONTEXT = 400;
const EVICT_BUDGET = 128;

modelTest(`with a ${EVICT_BUDGET}-row budget, importance eviction has lower next-token KL than a sliding window, and both stay coherent`, (t) => {
  const full = llama.session();
  const story = [llama.tokenizer.bosId, ...generate(full, [llama.tokenizer.bosId], { steps: EVICT_CONTEXT - 1, stopAtEos: false }).tokens];
  full.free();
  const stepwiseLogits = (options) => {
    const session = llama.session(options);
    let maxRows = 0;
    const rows = story.map((token) => {
      const logits = session.forward([token]);
      maxRows = Math.max(maxRows, session.cache.layer(0).seqLen);
      return logits;
    });
    session.free();
    return { rows, maxRows };
  };
  const exact = stepwiseLogits({}).rows;
  const measure = (options) => {
    const { rows, maxRows } = stepwiseLogits({ maxRows: EVICT_BUDGET, ...options });
    let kl = 0;
    let agree = 0;
    for (let i = EVICT_BUDGET; i < EVICT_CONTEXT; i++) {
      const p = logSoftmax(exact[i]);
      const q = logSoftmax(rows[i]);
      kl += p.reduce((sum, lp, j) => sum + Math.exp(lp) * (lp - q[j]), 0);
      agree += Number(argmax(p) === argmax(q));
    }
    const count = EVICT_CONTEXT - EVICT_BUDGET;
    return { kl: kl / count, top1: agree / count, maxRows };
  };
  const window = measure({ sinks: 4, recent: EVICT_BUDGET - 4 });
  const heavy = measure({ sinks: 4, recent: 96 });
  t.diagnostic(`window: KL ${window.kl.toExponential(3)}, top-1 ${window.top1.toFixed(3)}; importance: KL ${heavy.kl.toExponential(3)}, top-1 ${heavy.top1.toFixed(3)}`);
  assert.equal(window.maxRows, EVICT_BUDGET, 'the cache holds its budget, no more');
  assert.equal(heavy.maxRows, EVICT_BUDGET);
  assert.ok(heavy.kl > 0 && window.kl > 0, 'eviction changes the distribution');
  assert.ok(heavy.kl < window.kl, `importance KL ${heavy.kl} < window KL ${window.kl}`);
  assert.ok(heavy.top1 >= 0.95 && window.top1 >= 0.95, `top-1 agreement ${heavy.top1}, ${window.top1}`);
  // Free-running generation under the budget still writes sentences of words.
  const session = llama.session({ maxRows: EVICT_BUDGET, sinks: 4, recent: 96 });
  const text = llama.tokenizer.decode(generate(session, [llama.tokenizer.bosId], { steps: EVICT_CONTEXT - 1, stopAtEos: false }).tokens);
  session.free();
  const tail = text.slice(-400);
  const words = tail.split(/\s+/).filter(Boolean);
  assert.ok(words.length > 40 && /[.!?]/.test(tail), tail);
  assert.ok(words.every((word) => /^[A-Za-z'",.!?;:-]+$/.test(word)), tail);
});

/** The layers' state, comparable across sessions. */
const cacheState = (session) => Array.from({ length: session.cache.numLayers }, (_, i) => fingerprint(session.cache.layer(i)));

for (const mode of MODES) {
  modelTest(`speculative greedy decoding (k = 1..6) emits exactly the plain greedy tokens and rolls back (${mode})`, (t) => {
    const prompt = [llama.tokenizer.bosId];
    const plainSession = llama.session({ mode });
    const plain = generate(plainSession, prompt, { steps: STEPS, stopAtEos: false }).tokens;
    for (let k = 1; k <= 6; k++) {
      const session = llama.session({ mode });
      const { tokens, stats } = generate(session, prompt, { steps: STEPS, draft: k, stopAtEos: false });
      assert.deepEqual(tokens, plain, `k = ${k}`);
      assert.ok(stats.rollbacks > 0 && stats.accepted > 0, `k = ${k}: ${JSON.stringify(stats)}`);
      assert.deepEqual(cacheState(session), cacheState(plainSession), `k = ${k}: every layer's rows and imp`);
      if (k === 4) {
        t.diagnostic(`${mode}, k = 4: ${stats.accepted}/${stats.drafted} drafts accepted (${(stats.accepted / stats.drafted).toFixed(3)}), ${(stats.tokens / stats.forwardPasses).toFixed(2)} tokens per forward pass`);
      }
      session.free();
    }
    plainSession.free();
  });
}

modelTest('sampled speculative decoding emits the tokens of sampled plain decoding with the same seed', () => {
  const prompt = llama.tokenizer.encode('Once upon a time');
  const options = { steps: 120, temperature: 0.8, seed: 7, stopAtEos: false };
  const plain = generate(llama.session({ mode: 'q8' }), prompt, options).tokens;
  const speculative = generate(llama.session({ mode: 'q8' }), prompt, { ...options, draft: 4 });
  assert.deepEqual(speculative.tokens, plain);
  assert.ok(speculative.stats.accepted > 0);
  const other = generate(llama.session({ mode: 'q8' }), prompt, { ...options, seed: 8 }).tokens;
  assert.notDeepEqual(other, plain, 'another seed samples another text');
});

modelTest('forward() and verify() record what they take in: save() after them restores a session that goes on the same', () => {
  const { bosId } = llama.tokenizer;
  const session = llama.session();
  session.forward([bosId, ...greedy.slice(0, 10)]);
  // A verify keeps two drafts of three: the third, rolled back, is not the session's.
  session.verify([greedy[10], greedy[11], greedy[10]]).keep(2);
  const held = [bosId, ...greedy.slice(0, 12)];
  assert.deepEqual(session.tokens, held);
  const restored = llama.restoreSession(session.save());
  assert.deepEqual(restored.tokens, held);
  const next = restored.forward([greedy[12]]);
  assert.ok(bitsEqual(next, session.forward([greedy[12]])), 'the restored session computes what the original does');
  assert.equal(argmax(next), greedy[13]);
  // After a reply, forward() takes the reply's pending token in first.
  const replied = llama.session();
  generate(replied, [bosId], { steps: 3 });
  assert.equal(replied.pending, greedy[2]);
  replied.forward([greedy[3]]);
  assert.deepEqual(replied.tokens, [bosId, ...greedy.slice(0, 4)]);
  assert.equal(replied.cache.nextPosition, 5);
  for (const s of [session, restored, replied]) s.free();
});

modelTest('forward() writes its logits into options.into: the same bits, the same array back; a wrong one is refused by name, the cache unchanged', () => {
  const { bosId } = llama.tokenizer;
  const { vocabSize } = llama.config;
  const prompt = [bosId, ...greedy.slice(0, 8)];
  const plain = llama.session({ mode: 'f32' });
  const given = llama.session({ mode: 'f32' });
  const want = llama.forward(plain.cache, prompt, { logits: 3 });
  // Longer than the pass needs: its first 3 rows take the logits, the rest stays.
  const into = new Float32Array(3 * vocabSize + 2).fill(-7);
  assert.equal(llama.forward(given.cache, prompt, { logits: 3, into }), into);
  assert.ok(bitsEqual(into.subarray(0, 3 * vocabSize), want));
  assert.deepEqual(Array.from(into.subarray(3 * vocabSize)), [-7, -7]);
  // Step after step into one row: each step's own bits.
  const row = new Float32Array(vocabSize);
  for (const token of greedy.slice(8, 12)) {
    const fresh = llama.forward(plain.cache, [token], { logits: 'last' });
    assert.equal(llama.forward(given.cache, [token], { logits: 'last', into: row }), row);
    assert.ok(bitsEqual(row, fresh));
  }
  const before = { state: cacheState(given), next: given.cache.nextPosition, row: row.slice() };
  const refusals = [
    [new Float32Array(vocabSize - 1), RangeError], [new Float64Array(vocabSize), TypeError],
    [Array.from({ length: vocabSize }, () => 0), TypeError], [null, TypeError],
  ];
  for (const [bad, kind] of refusals) {
    assert.throws(() => llama.forward(given.cache, [greedy[12]], { logits: 'last', into: bad }),
      (error) => error instanceof kind && /Llama\.forward: options\.into must/.test(error.message), `${kind.name}`);
  }
  // Two rows asked for, one row given.
  assert.throws(() => llama.forward(given.cache, greedy.slice(12, 14), { logits: 'all', into: row }),
    (error) => error instanceof RangeError && error.message.includes(`options.into must hold at least ${2 * vocabSize} values`));
  assert.deepEqual(cacheState(given), before.state, 'every layer as it was');
  assert.equal(given.cache.nextPosition, before.next);
  assert.ok(bitsEqual(row, before.row), 'a refused array is not written');
  plain.free();
  given.free();
});

modelTest('a session decodes into one logits array it keeps, plain and speculative, and emits the greedy text', () => {
  const prompt = [llama.tokenizer.bosId];
  // The array before a reply is the array after it, and holds the last step's logits (greedy: its argmax, the last token).
  const session = llama.session({ mode: 'f32' });
  const row = session[logitsInto](1);
  const { tokens } = generate(session, prompt, { steps: 40, stopAtEos: false });
  assert.deepEqual(tokens, greedy.slice(0, 40));
  assert.equal(session[logitsInto](1), row);
  assert.equal(argmax(row), tokens.at(-1));
  // Drafts of up to 4: five rows at most, the same array throughout.
  const drafting = llama.session({ mode: 'f32' });
  const rows = drafting[logitsInto](5);
  const speculative = generate(drafting, prompt, { steps: STEPS, draft: 4, stopAtEos: false });
  assert.deepEqual(speculative.tokens, greedy);
  assert.ok(speculative.stats.verifies > 0 && speculative.stats.rollbacks > 0, JSON.stringify(speculative.stats));
  assert.equal(drafting[logitsInto](5), rows);
  session.free();
  drafting.free();
});

modelTest('generation stops at </s> unless told not to, and at the context length', () => {
  const session = llama.session();
  const { tokens, stats } = generate(session, [llama.tokenizer.bosId], { steps: 2000 });
  const last = tokens[tokens.length - 1];
  assert.ok(last === llama.tokenizer.eosId || last === llama.tokenizer.bosId || session.cache.seqLen === llama.config.contextLength);
  assert.equal(stats.tokens, tokens.length);
});

modelTest('the tokenizer round-trips the model\'s own text and encodes a prompt as <s> + pieces', () => {
  const { tokenizer } = llama;
  const text = tokenizer.decode(greedy);
  assert.equal(tokenizer.decode(tokenizer.encode(text)), text);
  const opening = greedy.slice(0, tokenizer.encode(STORY_OPENING, { bos: false }).length);
  assert.deepEqual(tokenizer.encode(STORY_OPENING), [tokenizer.bosId, ...opening], 'the ids the model itself produced');
  assert.equal(tokenizer.tokens[tokenizer.encode('Once')[1]], '\u2581Once');
});

modelTest('the tokenizer falls back to bytes for characters outside the vocabulary', () => {
  const { tokenizer } = llama;
  const text = 'Lily saw a 🦉 and a ✓.';
  const ids = tokenizer.encode(text, { bos: false });
  assert.ok(ids.some((id) => /^<0x[0-9A-F]{2}>$/.test(tokenizer.tokens[id])));
  assert.equal(tokenizer.decode(ids), text);
  const decoder = tokenizer.decoder();
  const streamed = ids.map((id) => decoder.push(id)).join('') + decoder.flush();
  assert.equal(streamed, text, 'streaming waits for whole characters');
});

test('promptLookup proposes what followed the latest earlier match of the longest n-gram', () => {
  assert.deepEqual(promptLookup([5, 6, 7, 8, 9, 5, 6, 7], 3), [8, 9, 5]);
  assert.deepEqual(promptLookup([1, 2, 3, 1, 2, 4, 1, 2], 2), [4, 1], 'the latest occurrence');
  assert.deepEqual(promptLookup([1, 2, 3, 4], 3), [], 'no repeated n-gram');
  assert.deepEqual(promptLookup([1, 2, 3, 1], 3), [], 'one-token matches are not drafted by default');
  assert.deepEqual(promptLookup([1, 2, 3, 1], 3, 3, 1), [2, 3, 1]);
});

test('a Tokenizer can be built from plain arrays', () => {
  const tokenizer = new Tokenizer({ tokens: ['<unk>', '<s>', '</s>', '\u2581', 'a', 'b', '\u2581a', 'ab', '\u2581ab'], scores: [0, 0, 0, -9, -9, -9, -1, -2, -0.5], bosId: 1, eosId: 2 });
  assert.deepEqual(tokenizer.encode('ab'), [1, 8]);
  assert.deepEqual(tokenizer.encode('ab a', { bos: false }), [8, 6]);
  assert.equal(tokenizer.decode([1, 8, 6]), 'ab a');
});

// ---- the GGUF reader ----

modelTest('the GGUF reader reads versions 1 and 3 and F16 tensors', () => {
  const gguf = readGguf(bytes);
  assert.equal(gguf.version, 1);
  assert.equal(gguf.get('general.architecture'), 'llama');
  const v3 = readGguf(writeGguf(gguf, { version: 3 }));
  assert.equal(v3.version, 3);
  assert.deepEqual(v3.tensor('blk.2.ffn_up.weight'), gguf.tensor('blk.2.ffn_up.weight'));
  const half = Llama.fromGguf(writeGguf(gguf, { version: 3, tensorType: 1 }));
  const session = half.session();
  const tokens = generate(session, [1], { steps: 12, stopAtEos: false }).tokens;
  assert.equal(half.tokenizer.decode(tokens), llama.tokenizer.decode(greedy.slice(0, 12)), 'F16 weights tell the same opening');
});

modelTest('the GGUF reader dequantizes Q8_0 tensors through the weight table, within half a step', () => {
  const gguf = readGguf(bytes);
  const q8 = readGguf(encodeGguf(reencodeLlama(gguf, { mix: 'Q8_0' })));
  assert.equal(q8.tensors.get('blk.1.ffn_down.weight').type, 'F16', 'rows of 172 fall back to F16, as llama.cpp\'s quantizer does');
  assert.equal(q8.tensors.get('output_norm.weight').type, 'F32', 'vectors stay F32');
  for (const name of ['token_embd.weight', 'blk.1.ffn_up.weight']) {
    const info = q8.tensors.get(name);
    const exact = gguf.tensor(name);
    assert.equal(info.type, 'Q8_0');
    assert.equal(info.bytes, (exact.length / 32) * 34);
    const values = q8.tensor(name);
    assert.equal(values.length, exact.length);
    for (let b = 0; b < exact.length / 32; b++) {
      const block = exact.subarray(32 * b, 32 * b + 32);
      const step = block.reduce((m, x) => Math.max(m, Math.abs(x)), 0) / 127;
      for (let i = 32 * b; i < 32 * b + 32; i++) {
        assert.ok(Math.abs(values[i] - exact[i]) <= 0.51 * step * (1 + 2 ** -10), `${name}[${i}]: ${values[i]} for ${exact[i]}`);
      }
    }
  }
});

test('the GGUF reader reads a 128k-token vocabulary and every kind of value', () => {
  const n = 128 * 1024;
  const tokens = Array.from({ length: n }, (_, i) => (i % 7 === 0 ? `\u2581tok${i}` : `<${i.toString(36)}>`));
  const scores = Array.from({ length: n }, (_, i) => Math.fround(-i / 8 - 0.5));
  const file = {
    metadata: new Map([['general.architecture', 'llama'], ['tokenizer.ggml.tokens', tokens], ['tokenizer.ggml.scores', scores],
      ['llama.block_count', 5], ['llama.rope.freq_base', 0.5]]),
    tensors: new Map([['w', { name: 'w', dims: [32, 2] }]]),
    tensor: () => Float32Array.from({ length: 64 }, (_, i) => i - 32),
  };
  const started = performance.now();
  const gguf = readGguf(writeGguf(file, { version: 3 }));
  const seconds = (performance.now() - started) / 1000;
  assert.deepEqual(gguf.get('tokenizer.ggml.tokens'), tokens);
  assert.deepEqual(gguf.get('tokenizer.ggml.scores'), scores);
  assert.equal(gguf.get('llama.block_count'), 5);
  assert.equal(gguf.get('llama.rope.freq_base'), 0.5);
  assert.deepEqual([...gguf.tensor('w')], Array.from({ length: 64 }, (_, i) => i - 32));
  assert.ok(seconds < 10, `${seconds} s to read the header`);
});

/** Asserts that parsing (and loading) the bytes fails with a GgufError whose message matches. */
function refuses(data, message) {
  assert.throws(() => Llama.fromGguf(data), (error) => error instanceof GgufError && message.test(error.message),
    `expected a GgufError matching ${message}`);
}

modelTest('the GGUF reader refuses truncated copies, naming what is cut', () => {
  const gguf = readGguf(bytes);
  const firstTensor = gguf.tensors.get('token_embd.weight').offset;
  const cuts = [0, 3, 7, 15, 100, 5000, firstTensor - 1, firstTensor + 100, bytes.length - 1];
  for (let i = 1; i < 40; i++) cuts.push(Math.floor((firstTensor * i) / 40));
  for (const length of cuts) refuses(bytes.slice(0, length), length < 4 ? /truncated: the magic/ : /truncated/);
});

modelTest('the GGUF reader refuses corrupted copies with a message naming the fault', () => {
  const corrupt = (edit) => {
    const copy = bytes.slice();
    edit(copy, new DataView(copy.buffer));
    return copy;
  };
  refuses(corrupt((b) => b.set([0x47, 0x47, 0x55, 0x47], 0)), /not a GGUF file/);
  refuses(corrupt((b, v) => v.setUint32(4, 9, true)), /unsupported GGUF version 9/);
  refuses(corrupt((b, v) => v.setUint32(4, 0x03000000, true)), /big-endian/);
  refuses(corrupt((b, v) => v.setUint32(8, 0x7fffffff, true)), /tensor count/);
  // The first key's length (past GGUF's 65535 bytes), then its type.
  refuses(corrupt((b, v) => v.setUint32(16, 0x7ffffff0, true)), /key of metadata entry 0 is 2147483632 bytes long/);
  const typeAt = 16 + 4 + 'general.architecture'.length;
  refuses(corrupt((b, v) => v.setUint32(typeAt, 99, true)), /unknown value type 99/);
  // Tensor infos: the first one starts right after the metadata.
  const infoAt = findBytes(bytes, 'token_embd.weight') - 4;
  const nameLength = 'token_embd.weight'.length;
  refuses(corrupt((b, v) => v.setUint32(infoAt + 4 + nameLength, 9, true)), /9 dimensions/);
  const tensorTypeAt = infoAt + 4 + nameLength + 4 + 8;
  refuses(corrupt((b, v) => v.setUint32(tensorTypeAt, 16, true)), /tensor token_embd\.weight has type IQ2_XXS; this runner reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS/);
  refuses(corrupt((b, v) => v.setUint32(tensorTypeAt + 4, 0x7ffffff0, true)), /token_embd\.weight starts at data offset 2147483632, off its 32-byte alignment/);
  refuses(corrupt((b, v) => v.setUint32(tensorTypeAt + 4, 0x7fffffe0, true)), /truncated: tensor token_embd\.weight \(64 x 512 F32\) needs bytes/);
  // A type the weight table has reads (as what its bytes say): Q4_0's 18 bytes a block of 32.
  const asQ4 = readGguf(corrupt((b, v) => v.setUint32(tensorTypeAt, 2, true)));
  assert.deepEqual(asQ4.tensors.get('token_embd.weight'), { ...readGguf(bytes).tensors.get('token_embd.weight'), type: 'Q4_0', typeId: 2, bytes: 512 * 2 * 18 });
  assert.equal(asQ4.tensor('token_embd.weight').length, 64 * 512);
  refuses(corrupt((b) => b.set(new TextEncoder().encode('blk.3.ffn_up.weighs'), findBytes(bytes, 'blk.3.ffn_up.weight'))), /tensor blk\.3\.ffn_up\.weight is missing/);
  refuses(corrupt((b) => b.set(new TextEncoder().encode('gpt2'), findBytes(bytes, 'llama'))), /architecture gpt2a is not supported; this runner reads llama, qwen2, qwen3/);
});

modelTest('random byte flips in the header are refused with a GgufError (or, sizes too large for the heap, a KvCacheError naming the missing bytes) or read, never anything else', () => {
  const header = readGguf(bytes).tensors.get('token_embd.weight').offset;
  const r = rng(11);
  let refused = 0;
  for (let i = 0; i < 1500; i++) {
    const copy = bytes.slice();
    const flips = 1 + r.int(3);
    for (let f = 0; f < flips; f++) copy[r.int(header)] ^= 1 << r.int(8);
    try {
      Llama.fromGguf(copy);
    } catch (error) {
      const tooLarge = error instanceof KvCacheError && error.code === 'KVC_E_NOMEM' && /bytes are missing|no block that large/.test(error.message);
      assert.ok(error instanceof GgufError || tooLarge, `flip ${i} threw ${error.name}: ${error.message}`);
      refused++;
    }
  }
  assert.ok(refused > 0);
});

function findBytes(haystack, text) {
  const needle = new TextEncoder().encode(text);
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return i;
  }
  throw new Error(`${text} not found`);
}

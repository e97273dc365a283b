// The app-shaped generation API on the real stories260K model: a reply
// streamed as text pieces with their tokens, stop strings, an abort that
// leaves the session usable, the context-full policies, the sampler.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Llama, generate } from '../../js/llama.js';
import { createSampler, seededRandom } from '../../js/model/sampling.js';
import { MODEL_MISSING, MODEL_PATH, ready, rng } from './helpers.mjs';

const PROMPT = 'Once upon a time';
let llama;
let greedy; // the greedy continuation of PROMPT, 60 tokens, through decode's generate()

before(async () => {
  await ready();
  if (MODEL_MISSING) return;
  llama = Llama.fromGguf(new Uint8Array(readFileSync(MODEL_PATH)));
  const session = llama.session();
  greedy = generate(session, llama.tokenizer.encode(PROMPT), { steps: 60, stopAtEos: false }).tokens;
  session.free();
});

function modelTest(name, fn) {
  test(name, (t) => (MODEL_MISSING ? t.skip(MODEL_MISSING) : fn(t)));
}

/** Runs session.generate to its end: { pieces, text, tokens, last }. */
async function collect(iterator, onPiece = () => {}) {
  const pieces = [];
  for await (const piece of iterator) {
    pieces.push(piece);
    onPiece(piece, pieces.length);
  }
  return {
    pieces, text: pieces.map((p) => p.text).join(''), tokens: pieces.flatMap((p) => p.tokens), last: pieces.at(-1),
  };
}

const GREEDY = { temperature: 0 };

modelTest('a reply streams one piece per token, the text of its tokens, and a last piece saying why it stopped', async () => {
  const session = llama.session();
  const { pieces, text, tokens, last } = await collect(session.generate(PROMPT, { ...GREEDY, maxTokens: 60 }));
  assert.deepEqual(tokens, greedy);
  assert.equal(text, llama.tokenizer.decode(greedy));
  assert.ok(pieces.slice(0, -1).every((p) => p.stop === null && p.tokens.length === 1 && p.stats === null));
  assert.equal(last.stop, 'maxTokens');
  assert.equal(last.stats.tokens, 60);
  assert.deepEqual(last.tokens, []);
  session.free();
});

modelTest('the first piece comes after one forward pass of the prompt', async () => {
  const session = llama.session();
  const forward = llama.forward.bind(llama);
  let passes = 0;
  llama.forward = (...args) => {
    passes++;
    return forward(...args);
  };
  try {
    const passesAtFirst = [];
    await collect(session.generate(PROMPT, { ...GREEDY, maxTokens: 3 }), () => passesAtFirst.push(passes));
    assert.equal(passesAtFirst[0], 1, 'the prompt in one pass, and its logits give the first token');
    assert.deepEqual(passesAtFirst, [1, 2, 3, 3]);
  } finally {
    delete llama.forward;
    session.free();
  }
});

modelTest('a character whose bytes span tokens comes whole, in the piece of its last token', async () => {
  // stories260K spells characters outside its vocabulary as byte tokens: a
  // CJK character is three of them, and the two first give no text.
  const ids = llama.tokenizer.encode('猫', { bos: false }).slice(-3);
  const decoder = llama.tokenizer.decoder();
  assert.deepEqual(ids.map((id) => decoder.push(id)), ['', '', '猫']);
  // A reply that is those tokens streams the same way.
  const session = llama.session();
  const forward = llama.forward.bind(llama);
  let next = 0;
  llama.forward = (cache, tokens, options) => {
    const logits = forward(cache, tokens, options);
    logits.fill(0).subarray(logits.length - llama.config.vocabSize)[ids[next++ % 3]] = 1; // the next byte wins
    return logits;
  };
  try {
    const { pieces } = await collect(session.generate(PROMPT, { ...GREEDY, maxTokens: 3 }));
    assert.deepEqual(pieces.map((p) => p.text), ['', '', '猫', '']);
  } finally {
    delete llama.forward;
    session.free();
  }
});

modelTest('a stop string ends the reply before it, even when it spans pieces, and is never shown', async () => {
  const full = llama.tokenizer.decode(greedy);
  const stop = 'little girl'; // spans tokens in the greedy text
  const session = llama.session();
  const { text, last } = await collect(session.generate(PROMPT, { ...GREEDY, maxTokens: 60, stop: [stop] }));
  assert.equal(last.stop, 'stop');
  assert.equal(text, full.slice(0, full.indexOf(stop)));
  session.free();
});

modelTest('a stop string that never comes holds nothing back at the end', async () => {
  const session = llama.session();
  const { text, last } = await collect(session.generate(PROMPT, { ...GREEDY, maxTokens: 60, stop: ['Lily and the dragon'] }));
  assert.equal(last.stop, 'maxTokens');
  assert.equal(text, llama.tokenizer.decode(greedy));
  session.free();
});

modelTest('the end-of-text token ends a reply with stop "end", and is not shown', async () => {
  const session = llama.session();
  const { text, tokens, last } = await collect(session.generate(PROMPT, { ...GREEDY, maxTokens: 2000 }));
  assert.equal(last.stop, 'end');
  const { eogIds, bosId } = llama.tokenizer;
  assert.ok(eogIds.has(tokens.at(-1)) || tokens.at(-1) === bosId, `ends with token ${tokens.at(-1)}`);
  assert.ok(!text.includes('</s>') && !text.includes('<s>'), text.slice(-40));
  session.free();
});

modelTest('an abort stops the reply within one token and leaves the session where its text ends', async () => {
  const controller = new AbortController();
  const session = llama.session();
  const first = await collect(session.generate(PROMPT, { ...GREEDY, maxTokens: 60, signal: controller.signal }), (piece, n) => {
    if (n === 10) controller.abort();
  });
  assert.equal(first.last.stop, 'abort');
  assert.equal(first.tokens.length, 10, 'no token after the abort');
  assert.deepEqual(first.tokens, greedy.slice(0, 10));
  // The session goes on as though the reply had asked for 10 tokens.
  const rest = await collect(session.generate([], { ...GREEDY, maxTokens: 50 }));
  assert.deepEqual([...first.tokens, ...rest.tokens], greedy);
  session.free();
});

modelTest('an abort in the middle of accepted drafts goes back to the last token shown', async () => {
  const text = 'the cat sat on the mat. the cat sat on the mat. the cat sat on the mat.';
  const plainSession = llama.session();
  const plain = await collect(plainSession.generate(text, { ...GREEDY, maxTokens: 40 }));
  plainSession.free();
  for (let at = 1; at <= 12; at++) {
    const controller = new AbortController();
    const session = llama.session();
    const cut = await collect(session.generate(text, { ...GREEDY, maxTokens: 40, draft: 4, signal: controller.signal }), (piece, n) => {
      if (n === at) controller.abort();
    });
    assert.deepEqual(cut.tokens, plain.tokens.slice(0, at), `abort after ${at}`);
    const prompt = llama.tokenizer.encode(text);
    assert.deepEqual(session.tokens, [...prompt, ...cut.tokens], `abort after ${at}: the session's tokens`);
    const rest = await collect(session.generate([], { ...GREEDY, maxTokens: 40 - at }));
    assert.deepEqual([...cut.tokens, ...rest.tokens], plain.tokens, `abort after ${at}: continued`);
    session.free();
  }
});

modelTest('a loop that breaks off a reply leaves the session at its last piece', async () => {
  const text = 'the cat sat on the mat. the cat sat on the mat. the cat sat on the mat.';
  const session = llama.session();
  const got = [];
  for await (const piece of session.generate(text, { ...GREEDY, maxTokens: 40, draft: 4 })) {
    got.push(...piece.tokens);
    if (got.length >= 7) break;
  }
  assert.deepEqual(session.tokens, [...llama.tokenizer.encode(text), ...got]);
  session.free();
});

modelTest('an aborted signal before the first token stops at once with nothing generated', async () => {
  const session = llama.session();
  const { tokens, last } = await collect(session.generate(PROMPT, { ...GREEDY, signal: AbortSignal.abort() }));
  assert.deepEqual(tokens, []);
  assert.equal(last.stop, 'abort');
  assert.deepEqual(session.tokens, []);
  session.free();
});

modelTest('a full context ends a reply with stop "context" (the default policy), never an exception', async () => {
  const { contextLength } = llama.config;
  const session = llama.session();
  let total = 0;
  let last;
  for (let turn = 0; turn < 10 && last?.stop !== 'context'; turn++) {
    ({ last } = await collect(session.generate(turn === 0 ? PROMPT : ' And then', { ...GREEDY, maxTokens: 200 })));
    total = session.tokens.length;
  }
  assert.equal(last.stop, 'context');
  assert.ok(session.cache.rows <= contextLength && total >= contextLength, `${session.cache.rows} rows, ${total} tokens`);
  // Another reply stops at once, taking nothing in.
  const before = session.tokens;
  const again = await collect(session.generate(' More', GREEDY));
  assert.equal(again.last.stop, 'context');
  assert.deepEqual(session.tokens, before);
  session.free();
});

modelTest('the sliding policy keeps the first positions and the newest past the context, and the text stays the model\'s', async () => {
  const { contextLength } = llama.config;
  const session = llama.session();
  const stops = [];
  for (let turn = 0; turn < 8; turn++) {
    const { last } = await collect(session.generate(turn === 0 ? PROMPT : ' And then', { ...GREEDY, maxTokens: 200, context: 'slide' }));
    stops.push(last.stop);
  }
  assert.ok(!stops.includes('context'), stops.join());
  assert.ok(session.cache.nextPosition > contextLength, `${session.cache.nextPosition} positions`);
  assert.ok(session.cache.rows <= contextLength);
  const positions = session.cache.layer(0).headPositions(0);
  assert.deepEqual(Array.from(positions.subarray(0, 4)), [0, 1, 2, 3], 'the sinks stay');
  assert.equal(positions.at(-1), session.cache.nextPosition - 1, 'the newest stays');
  session.free();
});

modelTest('a prompt longer than the context is a RangeError before anything is computed', async () => {
  const session = llama.session();
  const long = Array.from({ length: llama.config.contextLength + 1 }, (_, i) => 100 + (i % 50));
  await assert.rejects(collect(session.generate(long, GREEDY)), { name: 'RangeError', message: /prompt's 513 tokens exceed the model's context of 512/ });
  assert.deepEqual(session.tokens, []);
  assert.equal(session.cache.nextPosition, 0);
  session.free();
});

modelTest('a reply continues the session: two calls give the tokens of one', async () => {
  const session = llama.session();
  const a = await collect(session.generate(PROMPT, { ...GREEDY, maxTokens: 25 }));
  const b = await collect(session.generate([], { ...GREEDY, maxTokens: 35 }));
  assert.deepEqual([...a.tokens, ...b.tokens], greedy);
  session.free();
});

modelTest('a continuation keeps the space after its prompt; decoding from <s> drops the first one', async () => {
  const { tokenizer } = llama;
  const session = llama.session();
  const prompt = tokenizer.encode('The dog');
  const a = await collect(session.generate('The dog', { ...GREEDY, maxTokens: 20 }));
  const b = await collect(session.generate([], { ...GREEDY, maxTokens: 20 }));
  const all = tokenizer.decode([...prompt, ...a.tokens, ...b.tokens]);
  assert.ok(a.text.startsWith(' '), JSON.stringify(a.text));
  assert.equal('The dog' + a.text + b.text, all, 'the pieces are the whole text after the prompt');
  assert.equal(tokenizer.decode(a.tokens, { after: prompt }), a.text);
  session.free();
  // From <s> alone, the story's first word starts the text.
  const fresh = llama.session();
  const story = await collect(fresh.generate('', { ...GREEDY, maxTokens: 3 }));
  assert.equal(story.text, 'Once upon a');
  fresh.free();
});

modelTest('the same seed gives the same sampled reply, and another seed another one', async () => {
  const run = async (seed) => {
    const session = llama.session();
    const { tokens } = await collect(session.generate(PROMPT, { temperature: 1, seed, maxTokens: 40 }));
    session.free();
    return tokens;
  };
  const [a, b, c] = [await run(7), await run(7), await run(8)];
  assert.deepEqual(a, b);
  assert.notDeepEqual(a, c);
});

modelTest('sampled speculative decoding streams what sampled plain decoding streams with the same seed', async () => {
  const text = 'the cat sat on the mat. the cat sat on the mat.';
  const run = async (draft) => {
    const session = llama.session();
    const { tokens, last } = await collect(session.generate(text, { temperature: 0.7, seed: 3, maxTokens: 40, draft }));
    session.free();
    return { tokens, stats: last.stats };
  };
  const plain = await run(0);
  const drafted = await run(4);
  assert.deepEqual(drafted.tokens, plain.tokens);
  assert.ok(drafted.stats.verifies > 0, 'drafts were verified');
});

test('the sampler at temperature 0, or with topK 1, takes the largest logit', () => {
  const logits = Float32Array.from([0.1, 2.5, -1, 2.4, 0]);
  assert.equal(createSampler('test', { temperature: 0 }).next(logits), 1);
  const sampler = createSampler('test', { temperature: 1.5, topK: 1, seed: 1 });
  for (let i = 0; i < 50; i++) assert.equal(sampler.next(logits), 1);
});

test('topK, topP and minP draw only from the tokens they keep', () => {
  const logits = Float32Array.from([3, 2.9, 2.8, 0, -1, -2, 1.5, 2.7]);
  const drawn = (options) => {
    const sampler = createSampler('test', { temperature: 1, seed: 5, topP: 1, minP: 0, topK: 0, ...options });
    return new Set(Array.from({ length: 2000 }, () => sampler.next(logits)));
  };
  assert.deepEqual([...drawn({ topK: 3 })].sort(), [0, 1, 2]);
  // p ∝ e^z: the four largest hold 0.87 of the mass, the three largest 0.67.
  assert.deepEqual([...drawn({ topP: 0.8 })].sort(), [0, 1, 2, 7]);
  // min-p 0.3: at least 0.3 of the largest probability: z ≥ 3 + ln 0.3 = 1.80.
  assert.deepEqual([...drawn({ minP: 0.3 })].sort(), [0, 1, 2, 7]);
  assert.equal(drawn({}).size, 8, 'with nothing turned on, every token can come');
});

test('the repeat penalty lowers the logits of recent tokens', () => {
  const logits = Float32Array.from([2, 1.9, -1]);
  const sampler = createSampler('test', { temperature: 0, repeatPenalty: 1.1 });
  assert.equal(sampler.next(logits, [0]), 1, '2 / 1.1 < 1.9');
  assert.equal(sampler.next(logits, [1]), 0);
  assert.equal(createSampler('test', { temperature: 0, repeatPenalty: 1.1, repeatLastN: 1 }).next(logits, [0, 2]), 0, 'only the last token counts');
  assert.deepEqual(Array.from(logits), Array.from(Float32Array.from([2, 1.9, -1])), 'the caller\'s logits come back as they were');
});

test('top-k sampling picks what sorting every logit would, the penalty applied, and leaves the logits as they were', () => {
  const random = rng(11);
  const logits = Float32Array.from({ length: 5000 }, () => random.int(40) / 4); // many ties
  const before = Float32Array.from(logits);
  const history = Array.from({ length: 300 }, () => random.int(5000));
  for (const options of [{ topK: 40 }, { topK: 1 }, { topK: 4999 }, { topK: 40, repeatPenalty: 1.3, repeatLastN: 64 }]) {
    const o = { temperature: 0.7, topP: 1, minP: 0, seed: 3, ...options };
    // The reference: the penalty on a copy, every id sorted (ties: the lower id first), the topK first kept, a draw.
    const z = Float32Array.from(logits);
    if (o.repeatPenalty) for (const id of new Set(history.slice(-o.repeatLastN))) z[id] = z[id] > 0 ? z[id] / o.repeatPenalty : z[id] * o.repeatPenalty;
    const ids = Array.from(z.keys()).sort((a, b) => z[b] - z[a] || a - b).slice(0, o.topK);
    const sampler = createSampler('test', o);
    for (let i = 0; i < 50; i++) {
      const token = sampler.next(logits, history);
      assert.ok(ids.includes(token), `${JSON.stringify(options)}: ${token} is not among the ${o.topK} largest`);
    }
    const p = ids.map((id) => Math.exp((z[id] - z[ids[0]]) / o.temperature));
    const u = seededRandom(3)() * p.reduce((a, b) => a + b, 0);
    let at = 0;
    for (let acc = p[0]; acc <= u; acc += p[++at]);
    assert.equal(createSampler('test', o).next(logits, history), ids[at], `${JSON.stringify(options)}: the first draw`);
  }
  assert.deepEqual(logits, before);
});

modelTest('generate names a bad option and takes nothing in', async () => {
  const session = llama.session();
  const bad = [
    [{ maxTokens: -1 }, /options\.maxTokens/],
    [{ temperature: 'hot' }, /temperature/],
    [{ topP: 2 }, /topP/],
    [{ stop: 'x' }, /options\.stop/],
    [{ stop: [''] }, /options\.stop/],
    [{ context: 'wrap' }, /options\.context/],
    [{ signal: {} }, /options\.signal/],
    [{ maxToken: 3 }, /maxToken.*did you mean 'maxTokens'/],
    [{ minNgram: 3 }, /minNgram/],
  ];
  for (const [options, message] of bad) {
    await assert.rejects(collect(session.generate(PROMPT, options)), { message }, JSON.stringify(options));
  }
  await assert.rejects(collect(session.generate([1, 2], { special: true })), { message: /special/ });
  assert.deepEqual(session.tokens, []);
  session.free();
});

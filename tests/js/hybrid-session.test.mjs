// Sessions of hybrid models (tiny random lfm2: short convolutions with
// attention at layers 2 and 5; tiny random qwen35: gated delta rules with
// gated attention every fourth layer; tiny random granitehybrid: Mamba-2
// with attention at layers 2 and 5; tiny random nemotron_h: Mamba-2,
// attention and MLP-only blocks, whose none layers hold nothing; tiny random
// falcon-h1: attention and Mamba-2 in every layer, rows and a state in one
// layer): their recurrent layers hold a state
// of one size however long the conversation, beside attention rows that
// grow; a speculative verify keeps each draft's state apart, so that
// keeping j of k drafts is exactly plain decoding of those j tokens, at
// every draft length from 1 to 8; a saved session restores bit for bit; a
// fork copies the states and shares the attention pages; a rewind goes back
// to the checkpoint at a reply's prompt (a state cannot be truncated); a
// prompt of several chunks that fails in a later one changes nothing.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { Llama, generate } from '../../js/llama.js';
import { PrefixCache } from '../../js/index.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { bitsEqual, ready } from './helpers.mjs';
import { POISON, POISONED_PROMPT, PROMPT, poisonedLlama, reply } from './session-cases.mjs';

const VARIANTS = ['tiny-lfm2', 'tiny-qwen35', 'tiny-granitehybrid', 'tiny-nemotron-h', 'tiny-falcon-h1'];
const models = {};
before(async () => {
  await ready();
  for (const variant of VARIANTS) {
    for (const mix of ['F32', 'Q8_0']) {
      models[`${variant} ${mix}`] = Llama.fromGguf(encodeGguf(randomLlama({ ...GEOMETRIES[variant], contextLength: 4096 }, { mix, seed: 11 })));
    }
  }
});

const RECURRENT = ['conv', 'delta', 'mamba2'];

const layersOf = (cache) => Array.from({ length: cache.numLayers }, (_, i) => cache.layer(i));

for (const variant of VARIANTS) {
  test(`a ${variant} session's recurrent layers hold one state's bytes however long it runs; memoryBytes is their states and the attention rows`, () => {
    const llama = models[`${variant} F32`];
    const session = llama.session();
    const layers = layersOf(session.cache);
    assert.deepEqual(layers.map((layer) => layer.kind), llama.config.layerKinds);
    // A state (conv, delta, Mamba-2), rows (full), or both in one layer (falcon-h1's attn_mamba2).
    const state = (layer) => layer.recurrentState.byteLength;
    const holdsRows = (layer) => layer.kind === 'full' || layer.kind === 'attn_mamba2';
    assert.ok(layers.some((layer) => state(layer) > 0) && layers.some(holdsRows));
    const stateBytes = layers.filter((layer) => state(layer) > 0).map(state);
    assert.ok(stateBytes.every((bytes) => bytes === stateBytes[0]));
    const perPosition = new Set();
    for (const steps of [100, 400]) {
      llama.forward(session.cache, PROMPT.slice(0, steps > 200 ? 200 : steps), { logits: 0 });
      const now = layersOf(session.cache);
      assert.deepEqual(now.filter((layer) => state(layer) > 0).map(state), stateBytes);
      assert.ok(now.every((layer) => (layer.kind === 'none' ? layer.memoryBytes === 0
        : (state(layer) > 0 ? layer.steps : layer.seqLen) === session.cache.nextPosition)));
      for (const layer of now.filter((layer) => state(layer) > 0)) {
        // A state alone is its bytes; beside rows, the rows' bytes grow by as many a position.
        if (!holdsRows(layer)) assert.equal(layer.memoryBytes, state(layer));
        else perPosition.add((layer.memoryBytes - state(layer)) / layer.seqLen);
      }
      assert.equal(session.cache.memoryBytes, now.reduce((sum, layer) => sum + layer.memoryBytes, 0));
    }
    assert.ok(perPosition.size <= 1);
    session.free();
  });

  for (const mix of ['F32', 'Q8_0']) {
    test(`keeping j of k drafts on ${variant} ${mix} is plain decoding of those j tokens, bit for bit, at every k from 1 to 8`, () => {
      const llama = models[`${variant} ${mix}`];
      const base = llama.session();
      base.forward(PROMPT);
      const drafts = [17, 250, 3, 99, 640, 12, 8, 511];
      for (let k = 1; k <= 8; k++) {
        for (const j of new Set([0, k >> 1, k])) {
          const speculative = llama.restoreSession(base.save());
          const { logits, keep } = speculative.verify(drafts.slice(0, k));
          // (The model holds a verify's importance until keep: no other pass in between.)
          keep(j);
          const plain = llama.restoreSession(base.save());
          // A verify's logits are those of the same tokens taken in one by one.
          for (let i = 0; i < k; i++) {
            const one = plain.forward([drafts[i]]);
            assert.ok(bitsEqual(logits.subarray(i * one.length, (i + 1) * one.length), one), `k ${k}: draft ${i}'s logits`);
          }
          const kept = llama.restoreSession(base.save());
          if (j > 0) kept.forward(drafts.slice(0, j));
          assert.deepEqual(speculative.cache.serialize(), kept.cache.serialize(), `k ${k}, j ${j}: the cache`);
          assert.ok(bitsEqual(speculative.forward([5, 6]), kept.forward([5, 6])), `k ${k}, j ${j}: what comes next`);
          for (const session of [speculative, plain, kept]) session.free();
        }
      }
      base.free();
    });

    test(`speculative decoding on ${variant} ${mix} emits exactly plain decoding's tokens at every draft length from 1 to 8`, () => {
      const llama = models[`${variant} ${mix}`];
      const plain = llama.session();
      const a = generate(plain, PROMPT, { steps: 80, stopAtEos: false });
      // (A random hybrid's greedy text does not repeat its prompt: the drafts are all rejected
      // here, and the test above keeps them.)
      for (let draft = 1; draft <= 8; draft++) {
        const speculative = llama.session();
        const b = generate(speculative, PROMPT, { steps: 80, stopAtEos: false, draft });
        assert.deepEqual(b.tokens, a.tokens, `draft ${draft}`);
        assert.deepEqual(speculative.cache.serialize(), plain.cache.serialize(), `draft ${draft}: the cache`);
        speculative.free();
      }
      plain.free();
    });
  }

  test(`a saved ${variant} session restores bit for bit and goes on as the original; a fork copies the states and shares the attention pages`, () => {
    const llama = models[`${variant} Q8_0`];
    const session = llama.session();
    generate(session, PROMPT, { steps: 40, stopAtEos: false });
    const fork = session.cache.clone();
    const forkTokens = session.tokens;
    const restored = llama.restoreSession(session.save());
    assert.deepEqual(restored.cache.serialize(), session.cache.serialize());
    const layers = layersOf(fork);
    assert.ok(layers.filter((layer) => layer.kind === 'full').every((layer) => layer.sharedBytes > 0), 'attention pages shared');
    assert.ok(layers.filter((layer) => RECURRENT.includes(layer.kind)).every((layer) => layer.sharedBytes === 0), 'states copied');
    const next = [5, 6, 7];
    const expected = session.forward(next);
    assert.ok(bitsEqual(restored.forward(next), expected));
    // The fork did not move with the session it came from.
    const forked = llama.session({ cache: fork, tokens: forkTokens });
    assert.ok(bitsEqual(forked.forward(next), expected));
    forked.free();
    restored.free();
    session.free();
  });
}

for (const [target, drafter] of [['tiny-qwen35', 'tiny-qwen35'], ['tiny-lfm2', 'tiny-lfm2'], ['tiny-qwen35', 'tiny-lfm2'],
  ['tiny-granitehybrid', 'tiny-granitehybrid'], ['tiny-nemotron-h', 'tiny-granitehybrid'], ['tiny-falcon-h1', 'tiny-falcon-h1']]) {
  test(`a ${drafter} draft model drafting for ${target}: exactly plain decoding's tokens at every draft length, its drafts kept by their states`, () => {
    const llama = models[`${target} Q8_0`];
    // The same file drafts what the target samples (every draft accepted); another, what it happens to agree on.
    const draftModel = models[`${drafter} ${target === drafter ? 'Q8_0' : 'F32'}`];
    const plain = llama.session();
    const a = generate(plain, PROMPT, { steps: 60, stopAtEos: false });
    for (const draft of [1, 3, 8]) {
      const speculative = llama.session();
      const draftSession = draftModel.session();
      const b = generate(speculative, PROMPT, { steps: 60, stopAtEos: false, draft, draftSession });
      assert.deepEqual(b.tokens, a.tokens, `draft ${draft}`);
      assert.deepEqual(speculative.cache.serialize(), plain.cache.serialize(), `draft ${draft}: the cache`);
      if (target === drafter) assert.equal(b.stats.accepted, b.stats.drafted, `draft ${draft}: a model drafting for itself is always right`);
      assert.ok(b.stats.drafted > 0 && b.stats.verifies > 0);
      // The draft session holds what plain decoding of the same tokens gives it.
      const check = draftModel.session();
      check.forward([...PROMPT, ...b.tokens].slice(0, draftSession.cache.nextPosition));
      assert.deepEqual(draftSession.cache.serialize().length, check.cache.serialize().length);
      assert.ok(bitsEqual(draftSession.forward([5]), check.forward([5])), `draft ${draft}: the draft session follows`);
      for (const session of [speculative, draftSession, check]) session.free();
    }
    plain.free();
  });
}

test('a draft session is checked: another vocabulary, the target session itself, or no draft count is refused', () => {
  const llama = models['tiny-qwen35 Q8_0'];
  const session = llama.session();
  assert.throws(() => generate(session, PROMPT, { steps: 2, draft: 2, draftSession: session }), /draftSession must be a LlamaSession of another model/);
  assert.throws(() => generate(session, PROMPT, { steps: 2, draftSession: models['tiny-lfm2 F32'].session() }), /draftSession.*draft is 0/);
  assert.throws(() => generate(session, PROMPT, { steps: 2, draft: 2, draftSession: {} }), TypeError);
  assert.equal(session.cache.nextPosition, 0, 'nothing was taken in');
  session.free();
});

for (const variant of VARIANTS) {
  test(`a ${variant} conversation continued in another session starts from a PrefixCache entry of its last turn, whole`, () => {
    const llama = models[`${variant} Q8_0`];
    const prefixCache = new PrefixCache({ budgetBytes: 64 * 2 ** 20 });
    const first = llama.session({ prefixCache });
    assert.equal(first.prefill(PROMPT), 0);
    assert.equal(prefixCache.size, 1);
    // The conversation goes on elsewhere: its prompt starts with all of the entry's tokens.
    const more = [...PROMPT, ...Array.from({ length: 30 }, (_, i) => 40 + i)];
    const second = llama.session({ prefixCache });
    const { reused, logits } = second.prefill(more, { logits: true });
    assert.equal(reused, PROMPT.length);
    const plain = llama.session();
    const expected = plain.prefill(more, { logits: true });
    assert.ok(bitsEqual(logits, expected.logits), 'what a session without the prefix cache computes');
    // A prompt that shares only part of the entry's tokens cannot start from it (a state cannot go back).
    const other = llama.session({ prefixCache });
    assert.equal(other.prefill([...PROMPT.slice(0, 150), 7, 8, 9]), 0);
    for (const session of [first, second, plain, other]) session.free();
    prefixCache.free();
  });
}

for (const variant of VARIANTS) {
  test(`regenerating the last reply of a ${variant} conversation goes back to its prompt's checkpoint and computes only the reply`, async () => {
    const llama = models[`${variant} Q8_0`];
    const session = llama.session();
    const turn1 = [1, ...Array.from({ length: 1500 }, (_, i) => 3 + ((i * 7919) % 1000))];
    const first = await reply(session, turn1, 40);
    const turn2 = [...turn1, ...first.tokens, ...Array.from({ length: 20 }, (_, i) => 40 + i)];
    const second = await reply(session, turn2, 60);
    assert.ok(second.computed < 20 + 60 + 8, `a turn computes its new tokens (${second.computed})`);
    const again = await reply(session, turn2, 60);
    assert.deepEqual(again.tokens, second.tokens);
    assert.ok(again.computed <= again.tokens.length + 1, `regenerating computed ${again.computed} tokens for a reply of ${again.tokens.length}`);
    const fresh = llama.session();
    const once = await reply(fresh, turn2, 60);
    assert.deepEqual(once.tokens, second.tokens);
    assert.ok(bitsEqual(session.forward([5, 6, 7]), fresh.forward([5, 6, 7])));
    session.free();
    fresh.free();
  });

  test(`a prompt of several chunks that fails in a later chunk leaves a ${variant} cache as it was, though its states stepped`, () => {
    // Token POISON's embedding is NaN: the layers' inputs are not finite, wherever it stands.
    const llama = poisonedLlama(variant);
    const session = llama.session();
    llama.forward(session.cache, PROMPT, { logits: 0 });
    const before = session.cache.serialize();
    // Chunks of 512, 512 and 176; the third fails, after two stepped every recurrent layer.
    const long = POISONED_PROMPT;
    assert.throws(() => llama.forward(session.cache, long, { logits: 0, importance: false }), /not finite|NaN|infinit/i);
    assert.deepEqual(session.cache.serialize(), before, 'the cache is the one before the call');
    // A failure in the first chunk too.
    assert.throws(() => llama.forward(session.cache, [5, POISON, 6], { logits: 0 }), /not finite|NaN|infinit/i);
    assert.deepEqual(session.cache.serialize(), before);
    const other = llama.session();
    llama.forward(other.cache, PROMPT, { logits: 0 });
    assert.ok(bitsEqual(llama.forward(session.cache, long.slice(0, 600), { logits: 'last' }), llama.forward(other.cache, long.slice(0, 600), { logits: 'last' })));
    other.free();
    session.free();
    llama.free();
  });
}

// Sessions of models with window layers (tiny random gemma3 and gemma4 --
// whose last blocks share the keys and values of earlier ones --, window 16;
// and smollm3's NoPE layers and phi3's fused, partly rotated block for
// speculative decoding): speculative decoding emits plain decoding's tokens,
// a saved session restores bit for bit, and a rewind past what the window
// layers still hold -- regenerating the last reply of a 4k-token
// conversation -- goes back to the checkpoint at that reply's prompt,
// computing only what follows it, with the same tokens and logits as a
// session that never went past it.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { Llama, generate } from '../../js/llama.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { bitsEqual, ready } from './helpers.mjs';
import { POISONED_PROMPT, PROMPT, poisonedLlama, reply } from './session-cases.mjs';

const models = {};
// The architectures whose window layers cannot be truncated far: the session tests below run on each.
const WINDOWED = ['tiny-gemma3', 'tiny-gemma4'];
before(async () => {
  await ready();
  for (const variant of ['tiny-gemma3', 'tiny-smollm3', 'tiny-phi3', 'tiny-gemma4']) {
    models[variant] = Llama.fromGguf(encodeGguf(randomLlama(GEOMETRIES[variant], { mix: 'Q8_0', seed: 11 })));
  }
  // Gemma 3's and Gemma 4's blocks with room for a conversation of 4k tokens.
  models.long = {};
  for (const variant of WINDOWED) {
    models.long[variant] = Llama.fromGguf(encodeGguf(randomLlama({ ...GEOMETRIES[variant], contextLength: 8192 }, { mix: 'Q8_0', seed: 11 })));
  }
});


test('a gemma3 session holds window layers: the global ones every position, the windowed ones only what their window sees', () => {
  const llama = models['tiny-gemma3'];
  assert.deepEqual(llama.config.layerWindows, [16, 16, 16, 16, 16, 0, 16, 16]);
  const session = llama.session();
  // One prefill keeps what its first position's window needs; the next appends slide.
  llama.forward(session.cache, PROMPT, { logits: 0 });
  for (const token of [5, 6, 7]) llama.forward(session.cache, [token], { logits: 0 });
  assert.equal(session.cache.layer(5).kind, 'full');
  assert.equal(session.cache.layer(5).seqLen, PROMPT.length + 3);
  assert.equal(session.cache.layer(0).kind, 'window');
  assert.ok(session.cache.layer(0).seqLen < 16 + 64 + 64, `a window layer holds ${session.cache.layer(0).seqLen}`);
  session.free();
});

for (const variant of ['tiny-gemma3', 'tiny-smollm3', 'tiny-phi3', 'tiny-gemma4']) {
  test(`speculative decoding on ${variant} emits exactly plain decoding's tokens`, () => {
    const llama = models[variant];
    const plain = llama.session();
    const speculative = llama.session();
    const a = generate(plain, PROMPT, { steps: 120, stopAtEos: false });
    const b = generate(speculative, PROMPT, { steps: 120, stopAtEos: false, draft: 6 });
    assert.ok(b.stats.accepted > 0, 'some drafts were accepted');
    assert.deepEqual(b.tokens, a.tokens);
    assert.deepEqual(speculative.cache.serialize(), plain.cache.serialize());
    plain.free();
    speculative.free();
  });
}

for (const variant of WINDOWED) test(`a saved ${variant} session restores bit for bit, and goes on as the original`, () => {
  const llama = models[variant];
  const session = llama.session();
  generate(session, PROMPT, { steps: 40, stopAtEos: false });
  const restored = llama.restoreSession(session.save());
  assert.deepEqual(restored.cache.serialize(), session.cache.serialize());
  const next = [5, 6, 7];
  assert.ok(bitsEqual(restored.forward(next), session.forward(next)));
  restored.free();
  session.free();
});

/** Two sessions hold the same rows and give the same logits to what comes next (imp may differ: a rewound token's attention stays counted). */
function assertGoesOnAlike(session, other) {
  assert.equal(session.cache.memoryBytes, other.cache.memoryBytes);
  assert.ok(bitsEqual(session.forward([5, 6, 7]), other.forward([5, 6, 7])));
}

for (const variant of WINDOWED) test(`regenerating the last reply of a 4k-token ${variant} conversation computes only what follows its prompt`, async () => {
  const llama = models.long[variant];
  const session = llama.session();
  const turn1 = [1, ...Array.from({ length: 4000 }, (_, i) => 3 + ((i * 7919) % 1000))];
  const first = await reply(session, turn1, 60);
  const turn2 = [...turn1, ...first.tokens, ...Array.from({ length: 20 }, (_, i) => 40 + i)];
  const second = await reply(session, turn2, 200);
  assert.ok(second.computed < 20 + 200 + 8, `a turn computes its new tokens (${second.computed})`);
  // The reply goes further back than the window layers can be truncated (rollback 64, and at most a page more).
  assert.ok(session.cache.layer(0).exactRollback < second.tokens.length, `exactRollback ${session.cache.layer(0).exactRollback}, reply ${second.tokens.length}, first ${first.tokens.length}`);
  const again = await reply(session, turn2, 200);
  assert.deepEqual(again.tokens, second.tokens);
  assert.ok(again.computed <= again.tokens.length + 1, `regenerating computed ${again.computed} tokens for a reply of ${again.tokens.length}`);
  // The same as a session that took the conversation in once.
  const fresh = llama.session();
  const once = await reply(fresh, turn2, 200);
  assert.deepEqual(once.tokens, second.tokens);
  assertGoesOnAlike(session, fresh);
  session.free();
  fresh.free();
});

test('a rewind further back than any checkpoint takes the conversation in again, with the same results', async () => {
  const llama = models['tiny-gemma3'];
  const session = llama.session();
  const first = await reply(session, PROMPT, 100);
  const edited = [...PROMPT.slice(0, 150), 7, 8, 9];
  const redone = await reply(session, edited, 30);
  const fresh = llama.session();
  const once = await reply(fresh, edited, 30);
  assert.deepEqual(redone.tokens, once.tokens);
  assert.ok(first.tokens.length > 0);
  assertGoesOnAlike(session, fresh);
  session.free();
  fresh.free();
});

for (const variant of WINDOWED) test(`a ${variant} prompt of several chunks that fails in a later chunk leaves a windowed cache as it was, though its windows slid`, () => {
  // Token POISON's embedding is NaN: what it touches is not finite, wherever it stands.
  const llama = poisonedLlama(variant);
  // (A q4 mode's full layers read rows truncated past their exact rollback through the codes: kvc_lm_forward.)
  for (const mode of ['f32', 'q8']) {
    const session = llama.session({ mode });
    llama.forward(session.cache, PROMPT, { logits: 0 });
    const before = session.cache.serialize();
    const memory = session.cache.memoryBytes;
    // 1200 tokens: chunks of 512, 512 and 176; the third fails, after two chunks slid the window layers by 1024 positions.
    const long = POISONED_PROMPT;
    // Without importance: a failed call may leave the attention it gave older positions in imp (kvc_lm_forward).
    assert.throws(() => llama.forward(session.cache, long, { logits: 0, importance: false }), /not finite|NaN|infinit/i);
    assert.deepEqual(session.cache.serialize(), before, `${mode}: the cache is the one before the call`);
    assert.equal(session.cache.memoryBytes, memory);
    // And it goes on as a session that never saw the call.
    const other = llama.session({ mode });
    llama.forward(other.cache, PROMPT, { logits: 0 });
    assert.ok(bitsEqual(llama.forward(session.cache, long.slice(0, 600), { logits: 'last' }), llama.forward(other.cache, long.slice(0, 600), { logits: 'last' })));
    other.free();
    session.free();
  }
  llama.free();
});

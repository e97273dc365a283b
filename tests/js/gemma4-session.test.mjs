// Gemma 4's cache, through a model's sessions: the layers a session makes
// for its geometry (window and global layers of two head sizes, the last
// blocks shared), what that holds at 32k positions of E2B's geometry against
// a cache that gave every block global f32 rows, and sessions of a tiny
// random gemma4 -- speculative decoding emits plain decoding's tokens, a
// saved session restores bit for bit, regenerating the last reply of a
// 4k-token conversation computes only the reply, and a prompt that fails in
// a later chunk leaves the cache as it was.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { KvCache } from '../../js/index.js';
import { Llama, generate } from '../../js/llama.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { bitsEqual, normals, ready, rng } from './helpers.mjs';
import { POISONED_PROMPT, PROMPT, poisonedLlama, reply } from './session-cases.mjs';

const models = {};
before(async () => {
  await ready();
  models.tiny = Llama.fromGguf(encodeGguf(randomLlama(GEOMETRIES['tiny-gemma4'], { mix: 'Q8_0', seed: 11 })));
  models.long = Llama.fromGguf(encodeGguf(randomLlama({ ...GEOMETRIES['tiny-gemma4'], contextLength: 8192 }, { mix: 'Q8_0', seed: 11 })));
});

test('a gemma4 session shares the last blocks\' keys and values: window and global owners, shared layers holding nothing', () => {
  const llama = models.tiny;
  const { layerKinds, layerOwners, layerHeadDims, layerWindows } = llama.config;
  assert.deepEqual(layerKinds, ['window', 'window', 'window', 'window', 'full', 'shared', 'shared', 'shared', 'shared', 'shared']);
  // The last window and global layers with rows before the shared ones.
  assert.deepEqual(layerOwners, [-1, -1, -1, -1, -1, 3, 3, 3, 3, 4]);
  assert.deepEqual(layerHeadDims, [64, 64, 64, 64, 128, 64, 64, 64, 64, 128]);
  assert.deepEqual(layerWindows, [16, 16, 16, 16, 0, 16, 16, 16, 16, 0]);
  const session = llama.session();
  llama.forward(session.cache, PROMPT, { logits: 0 });
  for (let l = 5; l < 10; l++) {
    assert.equal(session.cache.layer(l).kind, 'shared');
    assert.equal(session.cache.layer(l).memoryBytes, 0);
  }
  assert.equal(session.cache.layer(4).seqLen, PROMPT.length);
  const owned = session.cache.memoryBytesByLayer.slice(0, 5).reduce((a, b) => a + b, 0);
  assert.equal(session.cache.memoryBytes, owned);
  session.free();
});

test('E2B\'s geometry at 32k positions holds at most 0.12 of what every block\'s global f32 rows would', () => {
  // A model of E2B's attention (35 blocks, 4 window to 1 global, heads of 256 and 512, one KV
  // head, window 512, the last 20 shared) and small everything else: its session's cache is
  // the one a real E2B file gets.
  const g = { ...GEOMETRIES['gemma-4-e2b'], dim: 256, hiddenDim: 256, vocabSize: 512, perLayerDim: 32, contextLength: 32768 };
  const llama = Llama.fromGguf(encodeGguf(randomLlama(g, { mix: 'Q8_0', seed: 3 })));
  const session = llama.session();
  const { layerKinds, layerHeadDims } = llama.config;
  assert.equal(layerKinds.filter((k) => k === 'shared').length, 20);
  const positions = 32768, chunk = 1024;
  const random = rng(5);
  for (let at = 0; at < positions; at += chunk) {
    layerKinds.forEach((kind, l) => {
      if (kind === 'shared') return;
      const k = normals(random, chunk * layerHeadDims[l]);
      session.cache.appendLayerBatch(l, k, k);
    });
  }
  assert.equal(session.cache.nextPosition, positions);
  // A cache that gave every block all-global f32 rows: 35 of one global layer's.
  const global = new KvCache({ layers: [{ kind: 'full', numKvHeads: 1, headDim: 512 }] });
  for (let at = 0; at < positions; at += chunk) global.appendLayerBatch(0, normals(random, chunk * 512), normals(random, chunk * 512));
  const ratio = session.cache.memoryBytes / (35 * global.memoryBytes);
  console.log(`# E2B's geometry at ${positions} positions: ${session.cache.memoryBytes} bytes, ${ratio.toFixed(4)} of every block's global f32 rows (${35 * global.memoryBytes})`);
  assert.ok(ratio <= 0.12, `ratio ${ratio}`);
  global.free();
  session.free();
  llama.free();
});

test('speculative decoding on gemma4 emits exactly plain decoding\'s tokens', () => {
  const llama = models.tiny;
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

test('a saved gemma4 session restores bit for bit, and goes on as the original', () => {
  const llama = models.tiny;
  const session = llama.session();
  generate(session, PROMPT, { steps: 40, stopAtEos: false });
  const restored = llama.restoreSession(session.save());
  assert.deepEqual(restored.cache.serialize(), session.cache.serialize());
  const next = [5, 6, 7];
  assert.ok(bitsEqual(restored.forward(next), session.forward(next)));
  restored.free();
  session.free();
});

test('regenerating the last reply of a 4k-token gemma4 conversation computes only what follows its prompt', async () => {
  const llama = models.long;
  const session = llama.session();
  const turn1 = [1, ...Array.from({ length: 4000 }, (_, i) => 3 + ((i * 7919) % 1000))];
  const first = await reply(session, turn1, 60);
  const turn2 = [...turn1, ...first.tokens, ...Array.from({ length: 20 }, (_, i) => 40 + i)];
  const second = await reply(session, turn2, 200);
  assert.ok(second.computed < 20 + 200 + 8, `a turn computes its new tokens (${second.computed})`);
  const again = await reply(session, turn2, 200);
  assert.deepEqual(again.tokens, second.tokens);
  assert.ok(again.computed <= again.tokens.length + 1, `regenerating computed ${again.computed} tokens for a reply of ${again.tokens.length}`);
  const fresh = llama.session();
  const once = await reply(fresh, turn2, 200);
  assert.deepEqual(once.tokens, second.tokens);
  assert.equal(session.cache.memoryBytes, fresh.cache.memoryBytes);
  assert.ok(bitsEqual(session.forward([5, 6, 7]), fresh.forward([5, 6, 7])));
  session.free();
  fresh.free();
});

test('a gemma4 prompt of several chunks that fails in a later chunk leaves the cache as it was', () => {
  const llama = poisonedLlama('tiny-gemma4');
  const session = llama.session();
  llama.forward(session.cache, PROMPT, { logits: 0 });
  const before = session.cache.serialize();
  assert.throws(() => llama.forward(session.cache, POISONED_PROMPT, { logits: 0, importance: false }), /not finite|NaN|infinit/i);
  assert.deepEqual(session.cache.serialize(), before);
  session.free();
  llama.free();
});

// Gemma 4's cache, through a model's sessions: the layers a session makes
// for its geometry (window and global layers of two head sizes, the last
// blocks shared), and what that holds at 32k positions of E2B's geometry
// against a cache that gave every block global f32 rows. Its sessions'
// speculative decoding, restores, regenerated replies and failed chunks:
// tests/js/window-session.test.mjs.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { KvCache } from '../../js/index.js';
import { Llama } from '../../js/llama.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { normals, ready, rng } from './helpers.mjs';
import { PROMPT } from './session-cases.mjs';

const models = {};
before(async () => {
  await ready();
  models.tiny = Llama.fromGguf(encodeGguf(randomLlama(GEOMETRIES['tiny-gemma4'], { mix: 'Q8_0', seed: 11 })));
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

// The image test tooling against its oracle, llama.cpp's mtmd
// (tests/runtimes/mtmd-native.mjs, @fugood/llama.node): each projector type's
// tiny pair (tests/gguf/vision.mjs) loads, in every mix; a prompt with an
// image is laid out with the type's markers around image chunks; the next
// token after image + question is neither certain nor uniform and moves with
// the image; the probabilities llama.cpp reports are the softmax of its raw
// logits (node-llama-cpp's, tests/runtimes/llamacpp-native.mjs); a 1x1 PNG
// (tests/runtimes/png.mjs) is taken. Every test skips, saying why, where
// @fugood/llama.node (or, for the softmax, node-llama-cpp) is missing.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { PROJECTOR_TYPES, TINY_PROJECTORS, pairedLanguageModel, randomProjector } from '../gguf/vision.mjs';
import { writeGgufFile } from '../gguf/writer.mjs';
import { closeNativeLlamaCpp, nativeLlamaCppMissing, nativeLogits } from '../runtimes/llamacpp-native.mjs';
import { MEDIA_MARKER, closeMtmd, mtmdImageTokens, mtmdMissing, mtmdNextTokenProbs, mtmdTokenize } from '../runtimes/mtmd-native.mjs';
import { encodePng, testImage } from '../runtimes/png.mjs';

const dir = mkdtempSync(join(tmpdir(), 'kvc-vision-oracle-'));
let missing = null;
before(async () => {
  missing = await mtmdMissing();
});
after(async () => {
  await closeMtmd();
  await closeNativeLlamaCpp();
  rmSync(dir, { recursive: true, force: true });
});

function png(name, width, height, seed) {
  const path = join(dir, `${name}.png`);
  writeFileSync(path, encodePng(testImage(width, height, seed)));
  return path;
}
const IMAGE = png('odd', 96, 61, 1);
const OTHER = png('other', 61, 96, 2);
const SINGLE = png('single', 1, 1, 3);
const QUESTION = 'what is it';

// Each tiny pair's files, written once: the language model and the projector in each mix.
const pairs = new Map();
function pair(g, mix = 'F32') {
  const key = `${g.name}-${mix}`;
  if (!pairs.has(key)) {
    const language = pairedLanguageModel(g, { seed: 2 });
    const model = join(dir, `${g.name}-lm.gguf`);
    if (![...pairs.values()].some((p) => p.model === model)) writeGgufFile(model, language);
    const projector = join(dir, `${key}-mmproj.gguf`);
    writeGgufFile(projector, randomProjector(g, { mix, seed: 3 }));
    pairs.set(key, { model, projector, vocab: language.vocab });
  }
  return pairs.get(key);
}

const entropy = (probs) => -[...probs.values()].reduce((h, p) => h + (p > 0 ? p * Math.log(p) : 0), 0);
function divergence(p, q) {
  let kl = 0;
  for (const [id, pi] of p) if (pi > 0) kl += pi * Math.log(pi / Math.max(q.get(id) ?? 0, 1e-30));
  return kl;
}

for (const g of Object.values(TINY_PROJECTORS)) {
  const { markers } = PROJECTOR_TYPES[g.type];

  test(`${g.type}: llama.cpp lays out an image between the type's markers, in every mix`, async (t) => {
    if (missing) return t.skip(missing);
    for (const mix of ['F32', 'F16', 'Q8_0']) {
      const { model, projector, vocab } = pair(g, mix);
      const { tokens, chunks } = await mtmdTokenize(model, projector, `${MEDIA_MARKER}${QUESTION}`, [IMAGE]);
      const images = chunks.filter((c) => c.type === 'image');
      assert.ok(images.length >= 1 && images.every((c) => c.tokens > 0), `${mix}: image chunks ${JSON.stringify(images)}`);
      // Before the question: the begin token, the type's markers, and rows' ends ("\n", a byte token).
      const before = chunks.slice(0, chunks.lastIndexOf(images.at(-1)) + 1).flatMap((c) => (c.type === 'text' ? c.tokens : []));
      const used = before.slice(1).map((id) => vocab.tokens[id]);
      assert.equal(before[0], vocab.bosId);
      assert.ok(used.length > 0 && used.every((piece) => markers.includes(piece) || piece === '<0x0A>'), `${mix}: ${used.join(' ')}`);
      assert.equal(await mtmdImageTokens(model, projector, IMAGE), images.reduce((n, c) => n + c.tokens, 0));
      assert.ok(tokens.length > 0);
    }
  });

  test(`${g.type}: the next token after image + question is neither certain nor uniform, and moves with the image`, async (t) => {
    if (missing) return t.skip(missing);
    const { model, projector, vocab } = pair(g);
    const probs = (image) => mtmdNextTokenProbs(model, projector, { prompt: `${MEDIA_MARKER}${QUESTION}`, imagePaths: [image], vocab });
    const [a, b] = [await probs(IMAGE), await probs(OTHER)];
    assert.equal(a.size, vocab.tokens.length);
    assert.ok(Math.abs([...a.values()].reduce((s, p) => s + p, 0) - 1) < 1e-4);
    assert.ok(Math.max(...a.values()) < 0.9, `top p ${Math.max(...a.values())}`);
    assert.ok(entropy(a) > 1 && entropy(a) < Math.log(vocab.tokens.length) - 0.1, `entropy ${entropy(a)}`);
    assert.ok(divergence(a, b) > 1e-4, `KL between two images ${divergence(a, b)}`);
  });

  test(`${g.type}: a 1x1 image is taken`, async (t) => {
    if (missing) return t.skip(missing);
    const { model, projector, vocab } = pair(g);
    assert.ok((await mtmdImageTokens(model, projector, SINGLE)) > 0);
    const probs = await mtmdNextTokenProbs(model, projector, { prompt: `${MEDIA_MARKER}${QUESTION}`, imagePaths: [SINGLE], vocab });
    assert.ok(Math.abs([...probs.values()].reduce((s, p) => s + p, 0) - 1) < 1e-4);
  });

  test(`${g.type}: llama.cpp's reported probabilities are the softmax of its logits`, async (t) => {
    if (missing) return t.skip(missing);
    const nativeMissing = await nativeLlamaCppMissing();
    if (nativeMissing) return t.skip(nativeMissing);
    const { model, projector, vocab } = pair(g);
    const probs = await mtmdNextTokenProbs(model, projector, { prompt: QUESTION, vocab });
    // A text-only tokenize has no begin token; the completion adds it.
    const { tokens } = await mtmdTokenize(model, projector, QUESTION);
    const ids = [vocab.bosId, ...tokens];
    const V = vocab.tokens.length;
    const last = (await nativeLogits(model, ids, V)).subarray((ids.length - 1) * V);
    const top = Math.max(...last);
    const weights = Array.from(last, (x) => Math.exp(x - top));
    const sum = weights.reduce((s, w) => s + w, 0);
    let worst = 0;
    for (let id = 0; id < V; id++) worst = Math.max(worst, Math.abs(weights[id] / sum - (probs.get(id) ?? 0)));
    assert.ok(worst < 1e-4, `largest difference ${worst}`);
  });
}

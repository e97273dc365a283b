// Images in, against llama.cpp's mtmd (tests/runtimes/mtmd-native.mjs): for
// each projector type's tiny pair (a language model and its projector,
// random weights, tests/gguf/vision.mjs) the runner lays out a prompt with an
// image exactly as mtmd does -- the same text tokens, image chunks of the
// same sizes, for images of every shape -- and the next-token distribution
// after the image and a question agrees with llama.cpp's (mean KL over three
// images at most 1e-3); each real model's preprocessing gives its images as
// many tokens as llama.cpp does. The same image in the same conversation is encoded
// once and never computed twice; bad input is refused and changes nothing.
// Every test skips, saying why, where @fugood/llama.node is missing.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ready } from './helpers.mjs';
import { Llama } from '../../js/llama.js';
import { Chat } from '../../js/chat.js';
import { isImageId } from '../../js/model/image-tokens.js';
import { PROJECTOR_GEOMETRIES, TINY_PROJECTORS, narrowed, pairedLanguageModel, randomProjector } from '../gguf/vision.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import {
  MEDIA_MARKER, closeMtmd, divergenceFrom, mtmdImageTokens, mtmdMissing, mtmdNextTokenProbs, mtmdTokenize,
} from '../runtimes/mtmd-native.mjs';
import { IMAGE_SHAPES, encodePng, testImage } from '../runtimes/png.mjs';

await ready();
const dir = mkdtempSync(join(tmpdir(), 'kvc-vision-'));
let missing = null;
before(async () => {
  missing = await mtmdMissing();
});
after(async () => {
  await closeMtmd();
  rmSync(dir, { recursive: true, force: true });
});

// Digits and signs: the paired vocabularies (distinct pieces: no single letters) spell them in bytes
// alike in llama.cpp's SentencePiece and Hugging Face's, which part on a word of letters.
const QUESTION = '2+2=?';
// Three images of odd sizes: each agreement is the mean over them.
const IMAGES = [[96, 61, 1], [61, 96, 2], [40, 40, 3]].map(([width, height, seed]) => image(width, height, seed));

function image(width, height, seed) {
  const pixels = testImage(width, height, seed);
  const path = join(dir, `image-${width}x${height}-${seed}.png`);
  writeFileSync(path, encodePng(pixels));
  return { pixels, path };
}

// Each type's pair: files for llama.cpp, the same bytes for the runner.
const pairs = new Map();
function pair(g, mix, { shallow = false } = {}) {
  const key = `${g.name}-${mix}`;
  if (!pairs.has(key)) {
    const language = pairedLanguageModel(g, { seed: 2, shallow });
    const modelBytes = encodeGguf(language);
    const projectorBytes = encodeGguf(randomProjector(g, { mix, seed: 3 }));
    const model = join(dir, `${key}-lm.gguf`);
    const projector = join(dir, `${key}-mmproj.gguf`);
    writeFileSync(model, modelBytes);
    writeFileSync(projector, projectorBytes);
    pairs.set(key, { model, projector, vocab: language.vocab, llama: Llama.fromGguf(modelBytes, { projector: projectorBytes }) });
  }
  return pairs.get(key);
}
after(() => {
  for (const { llama } of pairs.values()) llama.free();
});

/** mtmd's prompt `${MEDIA_MARKER}${text}` as the runner's ids: the begin token, the image, the text. */
function promptIds(llama, prepared, text) {
  return [llama.tokenizer.bosId, ...prepared.tokens, ...llama.tokenizer.encode(text, { bos: false, special: true })];
}



/** KL(llama.cpp || runner) of the next token after each of IMAGES and the question, reported; their mean. */
async function meanDivergence(t, { model, projector, vocab, llama }) {
  const kls = [];
  for (const { pixels, path } of IMAGES) {
    const session = llama.session();
    const { logits } = session.prefill(promptIds(llama, llama.imageOf(pixels), QUESTION), { logits: true });
    const theirs = await mtmdNextTokenProbs(model, projector, { prompt: `${MEDIA_MARKER}${QUESTION}`, imagePaths: [path], vocab });
    kls.push(divergenceFrom(theirs, logits));
    session.free();
  }
  const mean = kls.reduce((a, b) => a + b, 0) / kls.length;
  t.diagnostic(`KL per image ${kls.map((k) => k.toExponential(2)).join(', ')}; mean ${mean.toExponential(2)}`);
  return mean;
}

for (const g of Object.values(TINY_PROJECTORS)) {
  test(`${g.type}: an image's tokens are laid out as llama.cpp's mtmd lays them out, for images of every shape`, async (t) => {
    if (missing) return t.skip(missing);
    const { model, projector, llama } = pair(g, 'F32');
    for (const [shape, [width, height]] of Object.entries(IMAGE_SHAPES)) {
      const { path } = image(width, height, 7);
      const count = llama.imageTokenCount({ width, height });
      assert.equal(count.image, await mtmdImageTokens(model, projector, path), `${shape} (${width}x${height})`);
    }
    const { pixels, path } = IMAGES[0];
    const ids = promptIds(llama, llama.imageOf(pixels), QUESTION);
    const { chunks } = await mtmdTokenize(model, projector, `${MEDIA_MARKER}${QUESTION}`, [path]);
    // The runner's ids as mtmd's chunks: text tokens, and a count of image tokens per run of image ids.
    const ours = [];
    for (const id of ids) {
      const last = ours.at(-1);
      if (!isImageId(id)) ours.push({ type: 'text', id });
      else if (last?.type === 'image') last.tokens++;
      else ours.push({ type: 'image', tokens: 1 });
    }
    const theirs = chunks.flatMap((c) => (c.type === 'text' ? c.tokens.map((id) => ({ type: 'text', id })) : [{ type: 'image', tokens: c.tokens }]));
    // Consecutive image chunks (tiles) are one run of ids when no marker parts them.
    const merged = [];
    for (const c of theirs) {
      if (c.type === 'image' && merged.at(-1)?.type === 'image') merged.at(-1).tokens += c.tokens;
      else merged.push({ ...c });
    }
    assert.deepEqual(ours, merged);
  });

  for (const mix of ['F32', 'Q8_0']) {
    test(`${g.type} (${mix} projector): the next token after an image and a question is llama.cpp's (mean KL <= 1e-3 over three images)`, async (t) => {
      if (missing) return t.skip(missing);
      const mean = await meanDivergence(t, pair(g, mix));
      assert.ok(mean <= 1e-3, `mean KL ${mean}`);
    });
  }
}

for (const g of Object.values(PROJECTOR_GEOMETRIES).filter((geometry) => !geometry.name.startsWith('tiny-'))) {
  test(`${g.name}'s preprocessing: an image of every shape takes as many tokens as llama.cpp's mtmd gives it`, async (t) => {
    if (missing) return t.skip(missing);
    // The real model's preprocessing with the tiny encoder (narrowed): its counts, cheaply.
    const { model, projector, llama } = pair(narrowed(g), 'F32');
    for (const [shape, [width, height]] of Object.entries(IMAGE_SHAPES)) {
      const { path } = image(width, height, 5);
      assert.equal(llama.imageTokenCount({ width, height }).image, await mtmdImageTokens(model, projector, path), `${shape} (${width}x${height})`);
    }
  });
}

// Gemma 4's E2B and E4B are 1536 and 2560 wide: llama.cpp b10257's mtmd has an image's tokens attend
// each other both ways at those widths too (mtmd_decode_use_non_causal; causal, KL 8e-2 here).
test('gemma4v beside a language model of Gemma 4 E2B\'s width (1536): the image attends both ways, as in llama.cpp (mean KL <= 1e-3)', async (t) => {
  if (missing) return t.skip(missing);
  const g = { ...TINY_PROJECTORS.gemma4v, name: 'tiny-gemma4v-1536', outputDim: 1536 };
  const mean = await meanDivergence(t, pair(g, 'F32', { shallow: true }));
  assert.ok(mean <= 1e-3, `mean KL ${mean}`);
});

test('a second question about the same image encodes nothing, and computes only the new text', async (t) => {
  if (missing) return t.skip(missing);
  const { llama } = pair(TINY_PROJECTORS.lfm2, 'F32');
  const encode = llama.projector.encodeTile.bind(llama.projector);
  let encoded = 0;
  llama.projector.encodeTile = (...args) => {
    encoded++;
    return encode(...args);
  };
  const forward = llama.forwardEmbeddings.bind(llama);
  let imageRows = 0;
  llama.forwardEmbeddings = (cache, embeddings, options) => {
    imageRows += embeddings.length / llama.config.dim;
    return forward(cache, embeddings, options);
  };
  try {
    const template = '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}';
    const chat = new Chat(llama.session(), { template });
    // A picture no other test prepared: its first send encodes it.
    const picture = testImage(50, 37, 11);
    for await (const piece of chat.send([{ type: 'image', image: picture }, { type: 'text', text: 'What is it?' }], { maxTokens: 3, temperature: 0 })) void piece;
    assert.equal(encoded, 1);
    const rows = imageRows;
    assert.ok(rows > 0);
    for await (const piece of chat.send('And its colour?', { maxTokens: 3, temperature: 0 })) void piece;
    // The same picture sent again, in a new message: encoded once all along; the first turn's rows stay in the cache.
    for await (const piece of chat.send([{ type: 'text', text: 'Again:' }, { type: 'image', image: picture }], { maxTokens: 3, temperature: 0 })) void piece;
    assert.equal(encoded, 1);
    assert.equal(imageRows, 2 * rows, 'only the new message\'s image rows were computed');
    // A regenerated reply: the conversation up to the last user message again; no image row computed.
    const before = imageRows;
    for await (const piece of chat.send(chat.messages.slice(0, -1), { maxTokens: 3, temperature: 0 })) void piece;
    assert.equal(imageRows, before);
    chat.free();
  } finally {
    delete llama.projector.encodeTile;
    delete llama.forwardEmbeddings;
  }
});

test('a conversation with an image saved and restored on the model loaded again computes no image row, and goes on as the original', async (t) => {
  if (missing) return t.skip(missing);
  // llama's layers truncate to any position: the next turn takes in only what follows the saved tokens' common part.
  // (A hybrid's or a windowed model's restored conversation that parts from its tokens before their end starts
  // again from its first position, and then needs its images prepared again: docs/vision.md.)
  const { model, projector, llama } = pair(TINY_PROJECTORS.idefics3, 'F32');
  const template = '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}';
  const chat = new Chat(llama.session(), { template });
  for await (const piece of chat.send([{ type: 'image', image: testImage(41, 29, 12) }, { type: 'text', text: 'What is it?' }], { maxTokens: 3, temperature: 0 })) void piece;
  const saved = await chat.save();
  const reloaded = Llama.fromGguf(readFileSync(model), { projector: readFileSync(projector) });
  const restored = await Chat.restore(reloaded, saved, { template });
  let computed = 0;
  const forward = reloaded.forwardEmbeddings.bind(reloaded);
  reloaded.forwardEmbeddings = (...args) => {
    computed++;
    return forward(...args);
  };
  const encode = reloaded.projector.encodeTile.bind(reloaded.projector);
  reloaded.projector.encodeTile = (...args) => {
    computed++;
    return encode(...args);
  };
  let reply = '';
  for await (const piece of restored.send('One more?', { maxTokens: 3, temperature: 0 })) reply += piece.text;
  assert.equal(computed, 0);
  let original = '';
  for await (const piece of chat.send('One more?', { maxTokens: 3, temperature: 0 })) original += piece.text;
  assert.equal(reply, original);
  chat.free();
  restored.free();
  reloaded.free();
});

test('bad input: a projector of another model, a truncated one, images of no pixels or too many, wrong pixel counts -- each a clear error that changes nothing', async (t) => {
  if (missing) return t.skip(missing);
  const idefics = pair(TINY_PROJECTORS.idefics3, 'F32');
  const lfm2 = pair(TINY_PROJECTORS.lfm2, 'F32');
  const lfm2Projector = readFileSync(lfm2.projector);
  assert.throws(() => Llama.fromGguf(readFileSync(idefics.model), { projector: lfm2Projector }), /projector|go with|not one model/);
  assert.throws(() => Llama.fromGguf(readFileSync(lfm2.model), { projector: lfm2Projector.subarray(0, lfm2Projector.length - 100) }), /truncated/);
  const { llama } = lfm2;
  assert.throws(() => llama.imageOf({ width: 0, height: 4, data: new Uint8Array(0) }), /width|side|LENGTH|pixels/);
  assert.throws(() => llama.imageTokenCount({ width: 100001, height: 4 }), /100000|LENGTH|side/);
  await assert.rejects(llama.prepareImage({ width: 4, height: 4, data: new Uint8Array(10) }), /RGBA|RGB|bytes/);
  await assert.rejects(llama.prepareImage(new Uint8Array([0xff, 0xd8, 0xff, 0x00, 1, 2, 3])), /decode/);
  const text = Llama.fromGguf(readFileSync(lfm2.model));
  await assert.rejects(text.prepareImage(IMAGES[0].pixels), /without a projector/);
  text.free();
  // Nothing changed: the model still answers as before.
  const session = llama.session();
  const { logits } = session.prefill(promptIds(llama, llama.imageOf(IMAGES[0].pixels), QUESTION), { logits: true });
  assert.ok(logits.every(Number.isFinite));
  session.free();
});

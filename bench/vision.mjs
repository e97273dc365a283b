// What an image costs: each projector type at its real model's geometry
// (random valid weights, Q8_0 matrices, tests/gguf/vision.mjs), a 512x512
// picture prepared and encoded (every tile) on the package's threads, beside
// llama.cpp's mtmd on the same files and picture and as many threads
// (@fugood/llama.node, native, its best CPU build: tests/runtimes/mtmd-native.mjs
// measures its encode as an image prompt's time less a text prompt's of as
// many tokens); and the image's rows prefilled into a language model of the
// projector's width (the tiny one of its type, made that wide) beside as
// many text tokens.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { threadCount } from '../js/index.js';
import { Llama } from '../js/llama.js';
import { modelFile } from '../tests/gguf/models.mjs';
import { PROJECTOR_GEOMETRIES, TINY_PROJECTORS, pairedLanguageModel, randomProjector } from '../tests/gguf/vision.mjs';
import { closeMtmd, mtmdEncodeTimings, mtmdMissing } from '../tests/runtimes/mtmd-native.mjs';
import { encodePng, testImage } from '../tests/runtimes/png.mjs';
import { ensureMtmdOracle } from '../scripts/toolchain.mjs';

const MODELS = join(tmpdir(), 'kvcache-wasm-bench-models');
const REAL = ['smolvlm2-256m', 'lfm2-vl-450m', 'gemma-3-4b', 'gemma-4-e2b', 'qwen3.5-0.8b'];
const SIDE = 512;

const ms = (x) => Number(x.toFixed(x < 10 ? 1 : 0));

/** The best of `repeats` timings of fn, in ms. */
function best(repeats, fn) {
  let fastest = Infinity;
  for (let i = 0; i < repeats; i++) {
    const started = performance.now();
    fn();
    fastest = Math.min(fastest, performance.now() - started);
  }
  return fastest;
}

export async function run({ quick = false } = {}) {
  ensureMtmdOracle();
  const missing = await mtmdMissing();
  const geometries = quick ? [TINY_PROJECTORS.lfm2, TINY_PROJECTORS.qwen3vl_merger] : REAL.map((name) => PROJECTOR_GEOMETRIES[name]);
  const picture = testImage(SIDE, SIDE, 1);
  mkdirSync(MODELS, { recursive: true });
  const picturePath = join(MODELS, `vision-${SIDE}.png`);
  writeFileSync(picturePath, encodePng(picture));
  const threads = threadCount();
  const rows = [];
  for (const g of geometries) {
    const mix = 'Q8_0';
    const model = modelFile(MODELS, `vision-${g.name}-lm-${mix}`, () => pairedLanguageModel(g, { mix, seed: 2, shallow: true }));
    const projector = modelFile(MODELS, `vision-${g.name}-mmproj-${mix}`, () => randomProjector(g, { mix, seed: 3 }));
    const llama = Llama.fromGguf(readFileSync(model), { projector: readFileSync(projector) });
    const plan = llama.projector.plan(SIDE, SIDE);
    // Every tile, as prepareImage encodes them (imageOf keeps what it encoded: its timing is encodeTile's).
    // An image of thousands of patches takes minutes at a real model's size: timed once.
    const repeats = quick || plan.tiles.reduce((n, tile) => n + tile.width * tile.height, 0) > 512 * 512 ? 1 : 2;
    const ours = best(repeats, () => plan.tiles.forEach((_, i) => llama.projector.encodeTile(picture, plan, i)));
    const theirs = missing ? null : await mtmdEncodeTimings(model, projector, { imagePath: picturePath, threads, repeats });
    // Prefill: the image's rows, then as many text tokens, each into a fresh session.
    const prepared = llama.imageOf(picture);
    const imageIds = prepared.tokens.filter((id) => id >= llama.config.vocabSize);
    const textIds = Array.from({ length: imageIds.length }, (_, i) => 300 + (i % 200));
    const prefill = (ids) => best(2, () => {
      const session = llama.session();
      session.prefill([llama.tokenizer.bosId, ...ids]);
      session.free();
    });
    const imageMs = prefill(imageIds);
    const textMs = prefill(textIds);
    rows.push([`${g.name} (${g.type})`, plan.tiles.length, plan.tokens, ms(ours), theirs ? ms(theirs.encodeMs) : 'no llama.cpp',
      theirs ? Number((theirs.encodeMs / ours).toFixed(2)) : 'no llama.cpp',
      Math.round(imageIds.length / (imageMs / 1000)), Math.round(textIds.length / (textMs / 1000))]);
    console.log(`vision: ${rows.at(-1).join(' | ')}`);
    llama.free();
  }
  await closeMtmd();
  return [{
    name: 'vision',
    title: `An image's cost: a ${SIDE}x${SIDE} picture through each projector type (${quick ? 'tiny geometries' : 'real geometries'}, Q8_0), ${threads} threads (Node)`,
    columns: ['projector', 'tiles', 'image tokens', 'encode ms (ours)', 'encode ms (llama.cpp native)', 'ours ÷ llama.cpp (speed)',
      'image rows prefilled tok/s', 'text prefilled tok/s'],
    rows,
    notes: [
      'Encode: every tile of the picture prepared and through the encoder and projector, best of 2 (once past 512x512 pixels of tiles); llama.cpp\'s the same picture and files through @fugood/llama.node\'s mtmd (its prebuilt binary: a plain x86-64 build, without AVX or F16C), an image prompt\'s time less a text prompt\'s of as many tokens.',
      'Prefill: the image\'s rows (forwardEmbeddings) and as many text tokens into the tiny language model of the type made as wide as the projector\'s output: an image prefills at the text rate.',
      ...(missing ? [`llama.cpp skipped: ${missing}`] : []),
    ],
  }];
}

// What an image costs: each projector type at its real model's geometry
// (random valid weights, Q8_0 matrices, tests/gguf/vision.mjs), a 512x512
// picture prepared and encoded (every tile) on the package's threads, beside
// llama.cpp's mtmd on the same files, picture and threads in its AVX2 build
// (the class of instructions wasm SIMD maps to) and this CPU's best build
// (tests/runtimes/mtmd-builds.mjs, built from the source node-llama-cpp
// carries); the image's rows prefilled into a language model of the
// projector's width (the tiny one of its type, made that wide) beside as many
// text tokens; and how far each answer after the image and a question lies
// from llama.cpp's reference answer (@fugood/llama.node's prebuilt binary,
// the oracle of the tests): ours, and llama.cpp's own builds'.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { threadCount } from '../js/index.js';
import { Llama } from '../js/llama.js';
import { modelFile } from '../tests/gguf/models.mjs';
import { PROJECTOR_GEOMETRIES, TINY_PROJECTORS, pairedLanguageModel, randomProjector } from '../tests/gguf/vision.mjs';
import { mtmdNext } from '../tests/runtimes/mtmd-builds.mjs';
import { MEDIA_MARKER, closeMtmd, divergenceFrom, mtmdMissing, mtmdNextTokenProbs } from '../tests/runtimes/mtmd-native.mjs';
import { encodePng, testImage } from '../tests/runtimes/png.mjs';
import { ensureMtmdBuilds, ensureMtmdOracle, mtmdBuildsDir } from '../scripts/toolchain.mjs';

const MODELS = join(tmpdir(), 'kvcache-wasm-bench-models');
const REAL = ['smolvlm2-256m', 'lfm2-vl-450m', 'gemma-3-4b', 'gemma-4-e2b', 'qwen3.5-0.8b'];
const SIDE = 512;
// The reference binary (no x86 extension) takes minutes over these pictures (SmolVLM2's 17 tiles: 4; Gemma 3's
// 896x896: 12): their agreement is tests/integration/vision-real.test.mjs's, at smaller tiles.
const SLOW_REFERENCE = ['smolvlm2-256m', 'gemma-3-4b'];
const QUESTION = '2+2=?'; // spelled alike by both tokenizers (tests/js/vision.test.mjs)

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

/** The builds of llama.cpp's mtmd: built for a full run; in --quick, those built already. */
function builds(quick) {
  if (!quick) return ensureMtmdBuilds();
  return existsSync(join(mtmdBuildsDir, 'mtmd-next')) ? ensureMtmdBuilds() : { missing: 'not built in --quick (a full run builds them)' };
}

export async function run({ quick = false } = {}) {
  ensureMtmdOracle();
  const missing = await mtmdMissing();
  const mtmd = builds(quick);
  const geometries = quick ? [TINY_PROJECTORS.lfm2, TINY_PROJECTORS.qwen3vl_merger] : REAL.map((name) => PROJECTOR_GEOMETRIES[name]);
  const picture = testImage(SIDE, SIDE, 1);
  mkdirSync(MODELS, { recursive: true });
  const picturePath = join(MODELS, `vision-${SIDE}.png`);
  writeFileSync(picturePath, encodePng(picture));
  const threads = threadCount();
  const prompt = `${MEDIA_MARKER}${QUESTION}`;
  const speed = [], agreement = [];
  for (const g of geometries) {
    const mix = 'Q8_0';
    const language = pairedLanguageModel(g, { mix, seed: 2, shallow: true });
    const model = modelFile(MODELS, `vision-${g.name}-lm-${mix}`, () => language);
    const projector = modelFile(MODELS, `vision-${g.name}-mmproj-${mix}`, () => randomProjector(g, { mix, seed: 3 }));
    const llama = Llama.fromGguf(readFileSync(model), { projector: readFileSync(projector) });
    const plan = llama.projector.plan(SIDE, SIDE);
    // Every tile, as prepareImage encodes them (imageOf keeps what it encoded: its timing is encodeTile's).
    // An image of thousands of patches takes minutes at a real model's size: timed once.
    const repeats = quick || plan.tiles.reduce((n, tile) => n + tile.width * tile.height, 0) > 512 * 512 ? 1 : 2;
    const ours = best(repeats, () => plan.tiles.forEach((_, i) => llama.projector.encodeTile(picture, plan, i)));
    // llama.cpp's: mtmd_tokenize's preprocessing and every image chunk's encode (the fastest of `repeats`).
    const run = (build, options = {}) => mtmdNext(mtmd.harness, mtmd.builds[build], model, projector, { prompt, imagePaths: [picturePath], threads, repeats, ...options });
    const theirs = mtmd.missing ? {} : { avx2: run('avx2'), best: mtmd.builds.best ? run('best') : null };
    const encodeMs = (r) => r.prepareMs + r.encodeMs.reduce((a, b) => a + b, 0);
    const speedCells = (r) => (r ? [ms(encodeMs(r)), Number((encodeMs(r) / ours).toFixed(2))] : [mtmd.missing ? 'no build' : 'no wider build', '-']);
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
    speed.push([`${g.name} (${g.type})`, plan.tiles.length, plan.tokens, ms(ours), ...speedCells(theirs.avx2), ...speedCells(theirs.best),
      Math.round(imageIds.length / (imageMs / 1000)), Math.round(textIds.length / (textMs / 1000))]);
    console.log(`vision: ${speed.at(-1).join(' | ')}`);
    // Agreement: every answer against the reference's, KL(reference || answer).
    if (!missing && !SLOW_REFERENCE.includes(g.name)) {
      const reference = await mtmdNextTokenProbs(model, projector, { prompt, imagePaths: [picturePath], vocab: language.vocab, threads });
      const session = llama.session();
      const { logits } = session.prefill([llama.tokenizer.bosId, ...prepared.tokens, ...llama.tokenizer.encode(QUESTION, { bos: false, special: true })], { logits: true });
      session.free();
      const kl = (r) => (r ? Number(divergenceFrom(reference, r.probs.map(Math.log)).toExponential(1)) : mtmd.missing ? 'no build' : 'no wider build');
      const builtRuns = mtmd.missing ? {} : { reference: run('reference', { repeats: 1 }), avx2Direct: run('avx2', { repeats: 1, flash: false }) };
      agreement.push([`${g.name} (${g.type})`, Number(divergenceFrom(reference, logits).toExponential(1)), kl(builtRuns.reference), kl(theirs.avx2),
        kl(theirs.best), kl(builtRuns.avx2Direct)]);
      console.log(`vision agreement: ${agreement.at(-1).join(' | ')}`);
    }
    llama.free();
  }
  await closeMtmd();
  const skipped = [...(missing ? [`llama.cpp's reference (@fugood/llama.node) skipped: ${missing}`] : []),
    ...(mtmd.missing ? [`llama.cpp's builds skipped: ${mtmd.missing}`] : [])];
  const system = mtmd.missing ? '' : ` Its best build here: ${mtmd.builds.best ? 'AVX-512 (with VNNI and BF16 where the CPU has them; not AMX, whose kernels stopped at an illegal instruction here)' : 'none wider than AVX2'}.`;
  return [{
    name: 'vision',
    title: `An image's cost: a ${SIDE}x${SIDE} picture through each projector type (${quick ? 'tiny geometries' : 'real geometries'}, Q8_0), ${threads} threads (Node)`,
    columns: ['projector', 'tiles', 'image tokens', 'encode ms (ours)', 'llama.cpp AVX2 ms', 'ours ÷ AVX2 (speed)', 'llama.cpp best ms',
      'ours ÷ best (speed)', 'image rows prefilled tok/s', 'text prefilled tok/s'],
    rows: speed,
    notes: [
      'Encode: every tile of the picture prepared and through the encoder and projector, best of 2 (once past 512x512 pixels of tiles); llama.cpp\'s the same picture and files through mtmd (mtmd_tokenize\'s preprocessing and each image chunk\'s mtmd_encode_chunk, the fastest of as many), its CPU backend built from the source node-llama-cpp carries: AVX2 (with FMA and F16C, the haswell class) and the widest this CPU runs.' + system,
      'Prefill: the image\'s rows (forwardEmbeddings) and as many text tokens into the tiny language model of the type made as wide as the projector\'s output: an image prefills at the text rate.',
      ...skipped,
    ],
  }, {
    name: 'vision-agreement',
    title: `How far each answer lies from llama.cpp's reference: KL of the next token after the picture and "${QUESTION}", same files`,
    columns: ['projector', 'ours', 'llama.cpp reference build', 'llama.cpp AVX2', 'llama.cpp best', 'llama.cpp AVX2, encoder without flash attention'],
    rows: agreement,
    notes: [
      `KL(reference || answer) for the projector types whose picture the reference encodes in seconds (not ${SLOW_REFERENCE.join(' or ')}: tests/integration/vision-real.test.mjs holds them at smaller tiles), the reference being @fugood/llama.node\'s answer (a 2026 llama.cpp\'s prebuilt CPU binary, no x86 extension: the oracle of the tests); the other llama.cpp columns are one source (node-llama-cpp\'s) in three CPU builds. Where llama.cpp\'s own columns are far from 0, the file is one where rounding anywhere moves the answer that far (Q8_0 products re-quantize every activation), and ours is to be read against them.`,
      ...skipped,
    ],
  }];
}

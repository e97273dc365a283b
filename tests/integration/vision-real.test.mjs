// Images at the real models' geometries (random valid weights, tests/gguf/vision.mjs):
// each projector type's real encoder and projector -- SmolVLM2-256M's, LFM2-VL-450M's,
// Gemma 3 4B's, Gemma 4 E2B's, Qwen3.5-0.8B's (their widths, heads and depths), in Q8_0
// (and F16 for Qwen3.5's) -- before a language
// model of its width, against llama.cpp's mtmd (tests/runtimes/mtmd-native.mjs): the
// next token after an image and a question agrees (KL at most 1e-3). Skips, saying
// why, where @fugood/llama.node is missing.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ready } from '../js/helpers.mjs';
import { Llama } from '../../js/llama.js';
import { PROJECTOR_GEOMETRIES, pairedLanguageModel, randomProjector } from '../gguf/vision.mjs';
import { writeGgufFile } from '../gguf/writer.mjs';
import { MEDIA_MARKER, closeMtmd, divergenceFrom, mtmdMissing, mtmdNextTokenProbs } from '../runtimes/mtmd-native.mjs';
import { encodePng, testImage } from '../runtimes/png.mjs';

await ready();
const dir = mkdtempSync(join(tmpdir(), 'kvc-vision-real-'));
let missing = null;
before(async () => {
  missing = await mtmdMissing();
});
after(async () => {
  await closeMtmd();
  rmSync(dir, { recursive: true, force: true });
});

const QUESTION = '2+2=?'; // spelled alike by both tokenizers (tests/js/vision.test.mjs)
// Q8_0 projectors see a picture their preprocessing sizes to hundreds of patches; the F16 ones, whose products
// llama.cpp's reference build (no F16C) takes minutes over, a smaller one -- still past the 64 patches where
// ggml's flash attention takes its queries a tile at a time.
const PICTURES = { Q8_0: [333, 517], F16: [160, 256] };
const pictures = Object.fromEntries(Object.entries(PICTURES).map(([mix, [width, height]]) => {
  const pixels = testImage(width, height, 4);
  const path = join(dir, `picture-${mix}.png`);
  writeFileSync(path, encodePng(pixels));
  return [mix, { pixels, path }];
}));


// SmolVLM2 cuts every image into 17 tiles of 512 and Gemma 3 takes 896x896: at their real widths and depths
// those encode here in minutes, so their files have smaller tiles (the same blocks, fewer patches); the
// other three take the picture as their real preprocessing sizes it.
const REAL = {
  'smolvlm2-256m': { imageSize: 128, longestEdge: 256 },
  'lfm2-vl-450m': {},
  'gemma-3-4b': { imageSize: 112 },
  'gemma-4-e2b': {},
  'qwen3.5-0.8b': {},
};
// Q8_0 for every type; F16 (how Qwen3.5's and Gemma 4's projectors ship) for Qwen3.5's, whose encode is cheapest
// (Gemma 4's F16 pair, 40 s of llama.cpp's reference build here, with KVC_VISION_F16=all).
const MIXES = { 'gemma-4-e2b': process.env.KVC_VISION_F16 === 'all' ? ['F16', 'Q8_0'] : ['Q8_0'], 'qwen3.5-0.8b': ['F16', 'Q8_0'] };
// Known apart: Qwen3.5's Q8_0 pair at its real geometry, a file whose answer moves with rounding anywhere (its
// Q8_0 products re-quantize every activation, and a last-bit difference grows to a step of 8-bit codes within a
// few blocks): llama.cpp disagrees with itself on it -- one source in three CPU builds, flash attention on and
// off, and this oracle's binary -- by KLs of 2.2e-3 to 5.1e-2 (tests/runtimes/mtmd-builds.mjs; the bench's
// vision-agreement table shows the same on its files), and ours lies 2.1e-2 to 6.6e-2 from those answers, 5.3e-2
// from this oracle's. Run and reported as a todo, not a pass.
const TODO = { 'qwen3.5-0.8b Q8_0': 'Qwen3.5 Q8_0 at the real geometry: KL 5.3e-2, where llama.cpp\'s own builds lie up to 5.1e-2 from this oracle' };
for (const [name, smaller] of Object.entries(REAL)) {
  for (const mix of MIXES[name] ?? ['Q8_0']) {
    test(`${name} (${mix} projector): the next token after an image and a question is llama.cpp's`, { timeout: 600000, todo: TODO[`${name} ${mix}`] }, async (t) => {
      if (missing) return t.skip(missing);
      const g = { ...PROJECTOR_GEOMETRIES[name], ...smaller };
      const language = pairedLanguageModel(g, { seed: 2, shallow: true });
      const model = join(dir, `${name}-lm.gguf`);
      const projector = join(dir, `${name}-${mix}-mmproj.gguf`);
      writeGgufFile(model, language);
      writeGgufFile(projector, randomProjector(g, { mix, seed: 3 }));
      const llama = Llama.fromGguf(readFileSync(model), { projector: readFileSync(projector) });
      try {
        const { pixels, path } = pictures[mix];
        const ids = [llama.tokenizer.bosId, ...llama.imageOf(pixels).tokens, ...llama.tokenizer.encode(QUESTION, { bos: false, special: true })];
        const { logits } = llama.session().prefill(ids, { logits: true });
        const theirs = await mtmdNextTokenProbs(model, projector, { prompt: `${MEDIA_MARKER}${QUESTION}`, imagePaths: [path], vocab: language.vocab });
        const kl = divergenceFrom(theirs, logits);
        t.diagnostic(`KL ${kl.toExponential(2)}`);
        assert.ok(kl <= 1e-3, `KL ${kl}`);
      } finally {
        llama.free();
        rmSync(projector, { force: true });
      }
    });
  }
}

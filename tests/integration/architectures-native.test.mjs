// The runner and native llama.cpp (tests/runtimes/llamacpp-native.mjs: an f32
// cache) on tiny random files of the 2026 architectures, teacher-forced over
// 128 positions -- gemma3's window of 16 crossed eight times; phi3's fused
// projections, RoPE on 48 channels of 64 and LongRoPE's long factors. The bound is
// llama.cpp's agreement with itself (flash attention on against off): the
// runner's mean KL within it and within 1e-3, and its top-1 at least as
// high, or every top-1 it misses a near tie. Each case prints both figures.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import init from '../../js/index.js';
import { Llama } from '../../js/llama.js';
import { NEAR_TIE, QUANTIZED_KL, TOKENS, agreement, shown } from '../js/architecture-cases.mjs';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf, writeGgufFile } from '../gguf/writer.mjs';
import { closeNativeLlamaCpp, nativeLlamaCppMissing, nativeLogits } from '../runtimes/llamacpp-native.mjs';

export const NATIVE_VARIANTS = ['tiny-gemma3', 'tiny-smollm3', 'tiny-phi3'];
// Below this the runner agrees with llama.cpp to float rounding, whatever llama.cpp's self-agreement.
const ROUNDING_KL = 1e-9;

let missing = null;
let dir = null;
before(async () => {
  missing = await nativeLlamaCppMissing();
  dir = mkdtempSync(join(tmpdir(), 'kvcache-native-'));
  await init();
});
after(async () => {
  await closeNativeLlamaCpp();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

for (const variant of NATIVE_VARIANTS) {
  for (const mix of ['F32', 'Q8_0', 'Q4_K_M']) {
    test(`the runner agrees with native llama.cpp on a ${variant} ${mix} file as closely as llama.cpp with itself`, async (t) => {
      if (missing) return t.skip(missing);
      const spec = randomLlama(GEOMETRIES[variant], { mix, seed: 7 });
      const path = join(dir, `${variant}-${mix}.gguf`);
      writeGgufFile(path, spec);
      const llama = await Llama.load(encodeGguf(spec));
      const session = llama.session();
      const ours = llama.forward(session.cache, TOKENS, { logits: 'all' });
      const vocab = llama.config.vocabSize;
      const reference = await nativeLogits(path, TOKENS, vocab);
      const flash = await nativeLogits(path, TOKENS, vocab, { flashAttention: true });
      const r = agreement(reference, ours, vocab);
      const self = agreement(reference, flash, vocab);
      console.log(`# ${variant} ${mix}: runner ${shown(r)}; llama.cpp flash attention on vs off ${shown(self)}`);
      assert.ok(r.meanKl <= QUANTIZED_KL, `mean KL ${r.meanKl}`);
      assert.ok(r.meanKl <= Math.max(self.meanKl, ROUNDING_KL), `mean KL ${r.meanKl} above llama.cpp's own ${self.meanKl}`);
      assert.ok(r.top1 >= self.top1 || r.top1Gap <= NEAR_TIE, `top-1 ${r.top1} below llama.cpp's own ${self.top1}, by more than a near tie (${r.top1Gap})`);
      session.free();
      llama.free();
    });
  }
}

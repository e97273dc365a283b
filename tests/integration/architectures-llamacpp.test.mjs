// The runner and llama.cpp (tests/runtimes/wllama.mjs: its wasm build in
// Chromium, an f32 KV cache and no flash attention) on the tiny random files
// of each architecture the runner reads (tests/js/architecture-cases.mjs),
// within the bounds the plain-JS transformer holds it to
// (tests/js/architectures.test.mjs). The tests skip, saying why, where
// Chromium, playwright-core or @wllama/wllama is missing.
import { after, before, test } from 'node:test';
import init from '../../js/index.js';
import { EXACT_CACHE, POSITIONS, TOKENS, VARIANTS, assertAgrees, shown, spec } from '../js/architecture-cases.mjs';
import { closeLlamaCpp, llamaCppMissing, runnerAgreement } from '../runtimes/wllama.mjs';

let missing = null;
before(async () => {
  missing = await llamaCppMissing();
  await init();
});
after(() => closeLlamaCpp());

// The hybrids in F32: llama.cpp's wasm build computes their arithmetic too
// (quantized, a recurrent state keeps every moved 8-bit code: docs/models.md).
const MIXES = { 'tiny-lfm2': ['F32'], 'tiny-qwen35': ['F32'] };

for (const variant of [...VARIANTS, 'tiny-lfm2', 'tiny-qwen35']) {
  for (const mix of MIXES[variant] ?? ['F32', 'Q8_0', 'Q4_K_M']) {
    test(`the runner and llama.cpp agree on a ${variant} ${mix} file`, async (t) => {
      if (missing) return t.skip(missing);
      const r = await runnerAgreement(spec(variant, mix), TOKENS, POSITIONS, EXACT_CACHE);
      console.log(`# ${variant} ${mix} against llama.cpp: ${shown(r)} (llama.cpp: load ${r.loadMs.toFixed(0)} ms, prefixes ${r.hiddenMs.toFixed(0)} ms)`);
      assertAgrees(mix, r);
    });
  }
}

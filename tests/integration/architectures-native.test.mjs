// The runner and native llama.cpp (tests/runtimes/llamacpp-native.mjs: an f32
// cache) on tiny random files of the 2026 architectures, teacher-forced over
// 128 positions -- gemma3's window of 16 crossed eight times; phi3's fused
// projections, RoPE on 48 channels of 64 and LongRoPE's long factors; then a
// real geometry of each: Gemma-3-1B (window 32), SmolLM3-3B and Phi-4-mini
// (Gemma-3-270M and Phi-3.5-mini with KVC_GEOMETRIES, below). The bound is
// llama.cpp's agreement with itself (flash attention on against off): the
// runner's mean KL within it and within 1e-3, and its top-1 at least as
// high, or every top-1 it misses a near tie. Each case prints both figures.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, openAsBlob, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import init from '../../js/index.js';
import { Llama } from '../../js/llama.js';
import { NEAR_TIE, QUANTIZED_KL, TOKENS, agreement, shown } from '../js/architecture-cases.mjs';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { writeGgufFile } from '../gguf/writer.mjs';
import { NATIVE_CONTEXT, closeNativeLlamaCpp, nativeLlamaCppMissing, nativeLogits } from '../runtimes/llamacpp-native.mjs';

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

/** Ours and llama.cpp (flash attention off, and on) on the file of `spec` at `path`, over TOKENS: { r, self }. */
async function agreementWithNative(spec, path) {
  writeGgufFile(path, spec);
  // Room for TOKENS, as llama.cpp's context: Phi-3.5-mini's 32 KV heads would not fit 4096 f32 positions beside its weights.
  const llama = await Llama.load(await openAsBlob(path), { contextLength: Math.max(NATIVE_CONTEXT, TOKENS.length) });
  const session = llama.session();
  try {
    const ours = llama.forward(session.cache, TOKENS, { logits: 'all' });
    const vocab = llama.config.vocabSize;
    const reference = await nativeLogits(path, TOKENS, vocab);
    const flash = await nativeLogits(path, TOKENS, vocab, { flashAttention: true });
    return { r: agreement(reference, ours, vocab), self: agreement(reference, flash, vocab) };
  } finally {
    session.free();
    llama.free();
    rmSync(path, { force: true });
  }
}

/**
 * The bounds: within llama.cpp's own agreement (or float rounding), top-1
 * as high up to near ties, and a mean KL within 1e-3 -- unless llama.cpp
 * disagrees with itself by more (random Q4_K_M weights at SmolLM3-3B's and
 * the Phi geometries, 32 to 36 layers: llama.cpp's flash on/off 4.5e-3 to
 * 4.4e-2, the runner 2.6e-3 to 1.4e-2 against it).
 */
function assertAsCloseAsLlamaCpp({ r, self }) {
  assert.ok(r.meanKl <= Math.max(QUANTIZED_KL, self.meanKl), `mean KL ${r.meanKl}`);
  assert.ok(r.meanKl <= Math.max(self.meanKl, ROUNDING_KL), `mean KL ${r.meanKl} above llama.cpp's own ${self.meanKl}`);
  assert.ok(r.top1 >= self.top1 || r.top1Gap <= NEAR_TIE, `top-1 ${r.top1} below llama.cpp's own ${self.top1}, by more than a near tie (${r.top1Gap})`);
}

for (const variant of NATIVE_VARIANTS) {
  for (const mix of ['F32', 'Q8_0', 'Q4_K_M']) {
    test(`the runner agrees with native llama.cpp on a ${variant} ${mix} file as closely as llama.cpp with itself`, async (t) => {
      if (missing) return t.skip(missing);
      const found = await agreementWithNative(randomLlama(GEOMETRIES[variant], { mix, seed: 7 }), join(dir, `${variant}-${mix}.gguf`));
      console.log(`# ${variant} ${mix}: runner ${shown(found.r)}; llama.cpp flash attention on vs off ${shown(found.self)}`);
      assertAsCloseAsLlamaCpp(found);
    });
  }
}

// The real geometries, random weights: Gemma 3's with a window of 32, so that
// 128 positions cross it four times (its files' 512 they would not reach);
// Phi-4-mini's with an original context of 128, so that llama.cpp's context
// of 256 passes it and takes the long factors as the runner does (its files'
// 4096 it would not).
// One geometry of each architecture runs in the full tier (a 2 GB file's case
// takes about 1.5 minutes on 2 cores); KVC_GEOMETRIES=all runs every one, or
// a list of names those named.
const GEOMETRY_CASES = [['gemma-3-270m', 'Q8_0', { slidingWindow: 32 }], ['gemma-3-1b', 'Q4_K_M', { slidingWindow: 32 }],
  ['smollm3-3b', 'Q4_K_M', {}], ['phi-4-mini', 'Q4_K_M', { originalContextLength: 128 }],
  ['phi-3.5-mini', 'Q4_K_M', { originalContextLength: 128 }]];
const TIER_GEOMETRIES = ['gemma-3-1b', 'smollm3-3b', 'phi-4-mini'];
const chosen = process.env.KVC_GEOMETRIES === 'all' ? GEOMETRY_CASES.map(([name]) => name)
  : process.env.KVC_GEOMETRIES?.split(',') ?? TIER_GEOMETRIES;
for (const [name, mix, change] of GEOMETRY_CASES.filter(([name]) => chosen.includes(name))) {
  test(`the runner agrees with native llama.cpp at ${name}'s geometry (${mix}, ${JSON.stringify(change)})`, async (t) => {
    if (missing) return t.skip(missing);
    const found = await agreementWithNative(randomLlama({ ...GEOMETRIES[name], ...change }, { mix, seed: 7 }), join(dir, `${name}-${mix}.gguf`));
    console.log(`# ${name} ${mix}: runner ${shown(found.r)}; llama.cpp flash attention on vs off ${shown(found.self)}`);
    assertAsCloseAsLlamaCpp(found);
  });
}

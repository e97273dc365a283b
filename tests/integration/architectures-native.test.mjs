// The runner and native llama.cpp (tests/runtimes/llamacpp-native.mjs: an f32
// cache) at the real geometries of the 2026 architectures, random weights,
// teacher-forced over 128 positions: in the full tier Gemma-3-1B (window
// 32), SmolLM3-3B, Gemma 4 E2B (window 32; its 2.6 GB Q4_K_M file,
// per-layer embeddings in the heap) and the Mamba-2 hybrids Granite-4.0-H-350M
// (F32), Falcon-H1-0.5B and Nemotron 3 Nano 4B's layers 9 to 15 (Q8_0 and
// Q4_K_M) -- and with KVC_GEOMETRIES (below)
// Phi-3.5-mini, Ministral 3 3B (an original context of 32, so that YaRN's
// temperature steps within the 128 positions), Gemma-3-270M and Phi-4-mini,
// whose architectures' tiny files meet llama.cpp in npm test: the tier's
// 25 minutes do not hold every real geometry. Bounded as the tiny files are
// (tests/js/architectures-native.test.mjs, tests/js/native-cases.mjs); each
// case prints the runner's figures and llama.cpp's against itself.
import { test } from 'node:test';
import { assertAgrees } from '../js/architecture-cases.mjs';
import { agreementWithNative, assertAsCloseAsLlamaCpp, nativeOracle, shownAgreement } from '../js/native-cases.mjs';
import { GEOMETRIES, hybridPattern, randomLlama } from '../gguf/models.mjs';

const oracle = nativeOracle();

// The real geometries, random weights: Gemma 3's with a window of 32, so that
// 128 positions cross it four times (its files' 512 they would not reach);
// Phi-4-mini's with an original context of 128, so that llama.cpp's context
// of 256 passes it and takes the long factors as the runner does (its files'
// 4096 it would not).
// A 2 GB file's case takes 1 to 2 minutes on 2 cores, most of it
// node-llama-cpp handing over 128 rows of logits twice: the full tier runs
// six (TIER_GEOMETRIES; the three hybrids' five files about 4 minutes in all).
// Of the phi3 geometries Phi-3.5-mini's is the one
// to run, its 32k vocabulary half the time of Phi-4-mini's 200k (its partial
// rotary is the tiny phi3's too). KVC_GEOMETRIES=all runs every one, or a
// list of names those named.
// The other hybrids' geometries (LFM2-350M, LFM2-1.2B, Qwen3.5-0.8B, Granite-4.0-H-1B) run with
// KVC_GEOMETRIES, and do not all keep the bound: Qwen3.5's quantized files
// are about twice llama.cpp's own distance, LFM2-1.2B's Q4_K_M 1.2 times --
// recurrent states keep the 8-bit codes a last-bit difference moved
// (docs/models.md has the figures and the evidence).
// Nemotron 3 Nano 4B's layers 9 to 15 (the first attention among them): every kind in a sixth of the file.
const NEMOTRON_CUT = hybridPattern('M-M*-M-');
// Known apart, the same way: the quantized Mamba-2 files below lie 1.6 to 2.1 times llama.cpp's flash
// on/off distance from it, where llama.cpp's own AVX2 build lies 1.0 to 1.6 times (docs/models.md). Held
// to the quantized bound (mean KL 1e-3, a top-1 it misses a near tie); within llama.cpp's own distance
// is run and reported as a todo, not a pass.
const APART = 'a quantized Mamba-2 hybrid: 1.6 to 2.1 times llama.cpp\'s flash on/off distance, where its AVX2 build lies 1.0 to 1.6 times';
const KNOWN_APART = new Set(['granite-4.0-h-1b Q8_0', 'granite-4.0-h-1b Q4_K_M', 'nemotron-3-nano-4b Q8_0', 'nemotron-3-nano-4b Q4_K_M']);
const GEOMETRY_CASES = [['gemma-3-270m', 'Q8_0', { slidingWindow: 32 }], ['gemma-3-1b', 'Q4_K_M', { slidingWindow: 32 }],
  ['smollm3-3b', 'Q4_K_M', {}], ['phi-4-mini', 'Q4_K_M', { originalContextLength: 128 }],
  ['phi-3.5-mini', 'Q4_K_M', { originalContextLength: 128 }],
  ['lfm2-350m', 'Q8_0', {}], ['lfm2-1.2b', 'Q4_K_M', {}], ['qwen3.5-0.8b', 'Q8_0', {}], ['qwen3.5-0.8b', 'Q4_K_M', {}],
  ['granite-4.0-h-350m', 'F32', {}], ['granite-4.0-h-1b', 'Q8_0', {}], ['granite-4.0-h-1b', 'Q4_K_M', {}],
  ['nemotron-3-nano-4b', 'Q8_0', NEMOTRON_CUT], ['nemotron-3-nano-4b', 'Q4_K_M', NEMOTRON_CUT], ['falcon-h1-0.5b', 'Q8_0', {}],
  ['falcon-h1-0.5b', 'Q4_K_M', {}],
  ['gemma-4-e2b', 'Q4_K_M', { slidingWindow: 32 }],
  ['ministral-3-3b', 'Q4_K_M', { yarn: { ...GEOMETRIES['ministral-3-3b'].yarn, originalContextLength: 32 } }]];
const TIER_GEOMETRIES = ['gemma-3-1b', 'smollm3-3b', 'gemma-4-e2b', 'granite-4.0-h-350m', 'falcon-h1-0.5b', 'nemotron-3-nano-4b'];
const chosen = process.env.KVC_GEOMETRIES === 'all' ? GEOMETRY_CASES.map(([name]) => name)
  : process.env.KVC_GEOMETRIES?.split(',') ?? TIER_GEOMETRIES;
for (const [name, mix, change] of GEOMETRY_CASES.filter(([name]) => chosen.includes(name))) {
  test(`the runner agrees with native llama.cpp at ${name}'s geometry (${mix}, ${JSON.stringify(change)})`, async (t) => {
    if (oracle.missing) return t.skip(oracle.missing);
    const found = await agreementWithNative(randomLlama({ ...GEOMETRIES[name], ...change }, { mix, seed: 7 }), oracle.file(`${name}-${mix}.gguf`));
    console.log(shownAgreement(`${name} ${mix}`, found));
    if (!KNOWN_APART.has(`${name} ${mix}`)) return assertAsCloseAsLlamaCpp(found);
    assertAgrees(mix, found.r);
    await t.test('as close to llama.cpp as llama.cpp with itself', { todo: APART }, () => assertAsCloseAsLlamaCpp(found));
  });
}

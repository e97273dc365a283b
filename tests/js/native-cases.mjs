// What the runner's agreement with native llama.cpp is measured and bounded
// by (tests/runtimes/llamacpp-native.mjs: an f32 cache), teacher-forced over
// TOKENS: the tiny files' tests (tests/js/architectures-native.test.mjs) and
// the real geometries' (tests/integration/architectures-native.test.mjs).
import assert from 'node:assert/strict';
import { mkdtempSync, openAsBlob, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import init from '../../js/index.js';
import { Llama } from '../../js/llama.js';
import { NEAR_TIE, QUANTIZED_KL, TOKENS, agreement, shown } from './architecture-cases.mjs';
import { writeGgufFile } from '../gguf/writer.mjs';
import { NATIVE_CONTEXT, closeNativeLlamaCpp, nativeInProcess, nativeLlamaCppMissing, nativeLogits } from '../runtimes/llamacpp-native.mjs';

/**
 * A test file's oracle: before its tests, init() and why node-llama-cpp
 * cannot run here (null when it can), and a scratch folder for the files;
 * after them, llama.cpp closed and the folder gone. Returns { missing, file(name) }.
 */
export function nativeOracle() {
  const oracle = { missing: null, dir: null, file: (name) => join(oracle.dir, name) };
  before(async () => {
    oracle.missing = await nativeLlamaCppMissing();
    oracle.dir = mkdtempSync(join(tmpdir(), 'kvcache-native-'));
    await init();
  });
  after(async () => {
    await closeNativeLlamaCpp();
    if (oracle.dir) rmSync(oracle.dir, { recursive: true, force: true });
  });
  return oracle;
}

// Below this the runner agrees with llama.cpp to float rounding, whatever llama.cpp's self-agreement.
const ROUNDING_KL = 1e-9;

/**
 * Ours and llama.cpp (flash attention off, and on) on the file of `spec` at
 * `path`, over TOKENS: { r, self }. With KVC_NATIVE_BUILDS=1 also llama.cpp's
 * AVX2 build (flash attention off, a process of its own): `builds` its
 * agreement with the build llama.cpp picks for this CPU (the same build,
 * where that is the AVX2 one), `avx2` the runner's with it -- figures to
 * read, not bounds.
 */
export async function agreementWithNative(spec, path) {
  writeGgufFile(path, spec);
  // Room for TOKENS, as llama.cpp's context: Phi-3.5-mini's 32 KV heads would not fit 4096 f32 positions beside its weights.
  const llama = await Llama.load(await openAsBlob(path), { contextLength: Math.max(NATIVE_CONTEXT, TOKENS.length) });
  const session = llama.session();
  try {
    const ours = llama.forward(session.cache, TOKENS, { logits: 'all' });
    const vocab = llama.config.vocabSize;
    const reference = await nativeLogits(path, TOKENS, vocab);
    const flash = await nativeLogits(path, TOKENS, vocab, { flashAttention: true });
    const found = { r: agreement(reference, ours, vocab), self: agreement(reference, flash, vocab) };
    if (process.env.KVC_NATIVE_BUILDS) {
      const out = `${path}.avx2-logits`;
      nativeInProcess('avx2', 'nativeLogitsToFile', out, path, TOKENS, vocab);
      const bytes = readFileSync(out);
      const avx2 = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
      rmSync(out);
      Object.assign(found, { builds: agreement(reference, avx2, vocab), avx2: agreement(avx2, ours, vocab) });
    }
    return found;
  } finally {
    session.free();
    llama.free();
    rmSync(path, { force: true });
  }
}

/** A line of what agreementWithNative found, for a case of `name`. */
export function shownAgreement(name, found) {
  const builds = found.builds ? `; llama.cpp's AVX2 build vs the one it picks ${shown(found.builds)}; runner vs the AVX2 build ${shown(found.avx2)}` : '';
  return `# ${name}: runner ${shown(found.r)}; llama.cpp flash attention on vs off ${shown(found.self)}${builds}`;
}

/**
 * The bounds: within llama.cpp's own agreement (or float rounding), top-1
 * as high up to near ties, and a mean KL within 1e-3 -- unless llama.cpp
 * disagrees with itself by more (random Q4_K_M weights at SmolLM3-3B's and
 * the Phi geometries, 32 to 36 layers: llama.cpp's flash on/off 4.5e-3 to
 * 4.4e-2, the runner 2.6e-3 to 1.4e-2 against it).
 */
export function assertAsCloseAsLlamaCpp({ r, self }) {
  assert.ok(r.meanKl <= Math.max(QUANTIZED_KL, self.meanKl), `mean KL ${r.meanKl}`);
  assert.ok(r.meanKl <= Math.max(self.meanKl, ROUNDING_KL), `mean KL ${r.meanKl} above llama.cpp's own ${self.meanKl}`);
  // A near tie: NEAR_TIE, or a gap llama.cpp's own flash on/off moves a
  // contender's log-probability by (at Gemma 4 E2B's 35 layers in Q4_K_M,
  // 0.23 -- the runner's own move 0.23 too -- where top-1s flip at gaps up to 0.21).
  const nearTie = Math.max(NEAR_TIE, self.contenderMove);
  assert.ok(r.top1 >= self.top1 || r.top1Gap <= nearTie, `top-1 ${r.top1} below llama.cpp's own ${self.top1}, by more than a near tie (${r.top1Gap} > ${nearTie})`);
}


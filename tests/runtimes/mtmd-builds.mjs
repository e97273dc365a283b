// llama.cpp's mtmd in three CPU builds of one source (scripts/toolchain.mjs
// ensureMtmdBuilds: 'reference', without x86 extensions; 'avx2', the
// haswell class; 'best', this CPU's widest), through the harness
// tests/runtimes/mtmd-next.cpp -- for the bench's vision suite, which sets
// our encoder beside each and the builds' answers beside each other.
//
//   const { harness, builds, missing } = ensureMtmdBuilds();   // scripts/toolchain.mjs; builds: { name: backend library }
//   const r = mtmdNext(harness, builds.avx2, model, projector, { prompt: `${MEDIA_MARKER}2+2=?`, imagePaths: [png] });
//   // r: { system, tokens, prepareMs, imageTokens: [..], encodeMs: [..], decodeMs: [..], probs: Float32Array }
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * One run of the harness on the `backend` build: the prompt (MEDIA_MARKER
 * where each image goes) with `imagePaths`, the encoder's flash attention
 * on unless `flash` is false, each image chunk encoded `repeats` times (the
 * fastest timed). Throws with the harness's sentence where it fails.
 */
export function mtmdNext(harness, backend, modelPath, projectorPath, { prompt, imagePaths, threads = 2, flash = true, repeats = 1 }) {
  const dir = mkdtempSync(join(tmpdir(), 'kvc-mtmd-next-'));
  try {
    const out = join(dir, 'probs.f32');
    const line = execFileSync(harness, [backend, modelPath, projectorPath, prompt, String(threads), flash ? '1' : '0', String(repeats), out, ...imagePaths],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 20 });
    const bytes = readFileSync(out);
    return { ...JSON.parse(line), probs: new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

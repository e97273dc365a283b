// Measures llama.cpp (tests/runtimes/wllama.mjs) once, for sizing the tests
// and the benchmarks, and prints markdown tables:
//   --timings   prefill (512-token prompt) and decode tokens/s of the
//               SmolLM2-135M-geometry files in Q8_0, F16 and Q4_K_M, on 1 and
//               2 threads, cross-origin isolated, with its load time;
//   --validate  the JS runner against llama.cpp over 128 teacher-forced
//               positions (tiny random F32, stories260K as v3, kjv-d512-h64):
//               mean KL, top-1, and the cost of an embedding per prefix;
//   --quality   kjv-d512-h64 re-encoded in each of the types, run by
//               llama.cpp, against the JS runner on the F32 original (16
//               teacher-forced positions): what each encoder costs;
//   --runner    the package's runner against llama.cpp over 128 teacher-forced
//               positions, every mix: the tiny random model and the real models
//               re-encoded; llama.cpp with an f32 KV cache and no flash
//               attention, and on F32, Q8_0 and Q4_K_M also with its defaults
//               (f16 KV, flash attention) against the runner's f32 cache;
//   --models    writes every model of tests/gguf/models.mjs (every geometry
//               in Q8_0, F16, BF16 and Q4_K_M; the real models in each of the
//               types) and loads each in llama.cpp: size, types, load time;
//   --architectures  the package's runner against llama.cpp at real
//               geometries, random weights in Q8_0 -- Qwen2.5-0.5B (qwen2),
//               Qwen3-0.6B (qwen3), Llama-3.2-1B with its rope_freqs.weight --
//               over 128 teacher-forced positions (4 sequences of 32), both with f32 KV caches
//               and llama.cpp without flash attention: mean KL, top-1, times.
//               2.5 GB of files and several minutes.
//   --self      llama.cpp against itself beside the runner against it: the
//               same file and tokens run by llama.cpp with f32 KV caches and
//               flash attention off (A) and on (B), two of its own ways to the
//               same attention, and by the runner (f32 cache), 128
//               teacher-forced positions -- the tiny random model in every
//               mix, or with --architectures the three real geometries in
//               Q8_0 (an hour or more): how far the oracle's own choices move its top-1 on
//               random weights, beside how far the runner is from it.
// No flag: all but --runner and --architectures (several minutes each).
// --mix A,B,... restricts --runner and --self to those mixes.
// --dir DIR keeps the model files there (default: a new temporary folder,
// removed at the end). The machine may be shared: the load average is
// printed beside the figures.
import { mkdtempSync, openAsBlob, readFileSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import init, { KvCache } from '../../js/index.js';
import { Llama, readGguf } from '../../js/llama.js';
import { GEOMETRIES, MIXES, modelFile, randomLlama, REAL_MODELS, reencodeLlama, typeCounts } from '../gguf/models.mjs';
import { codedActivations } from '../gguf/activations.mjs';
import { GGML_TYPES, ggmlType, tensorBytes } from '../gguf/types.mjs';
import { closeLlamaCpp, compareLogits, llamaCppHidden, llamaCppLoad, llamaCppMissing, llamaCppTimings, runnerAgreement, summarizeComparisons } from './wllama.mjs';

const args = process.argv.slice(2);
const dirArg = args.indexOf('--dir');
const keep = dirArg >= 0;
const dir = keep ? args[dirArg + 1] : mkdtempSync(join(tmpdir(), 'kvcache-gguf-'));
const wanted = ['--timings', '--validate', '--quality', '--models', '--runner', '--architectures', '--self'].filter((f) => args.includes(f));
const LONG = ['--runner', '--architectures', '--self'];
const run = (flag) => (wanted.length === 0 ? !LONG.includes(flag) : wanted.includes(flag));
const mixArg = args.indexOf('--mix');
const mixes = mixArg >= 0 ? args[mixArg + 1].split(',') : MIXES;
const unknownMix = mixes.find((mix) => !MIXES.includes(mix));
if (unknownMix) throw new RangeError(`--mix: no mix ${unknownMix} (known: ${MIXES.join(', ')})`);
const load = () => loadavg().map((x) => x.toFixed(1)).join(' ');
const mb = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
// The token ids the tiny random model is teacher-forced on (--validate, --runner, --self).
const TINY_TOKENS = Array.from({ length: 128 }, (_, i) => (i === 0 ? 1 : 3 + ((i * 7919) % 1000)));

async function timings() {
  console.log(`\n## llama.cpp prefill and decode, SmolLM2-135M geometry (load average ${load()})\n`);
  console.log('| file | threads | load ms | prefill tok/s (512) | decode tok/s (64 after 512) |');
  console.log('| --- | --- | --- | --- | --- |');
  const g = GEOMETRIES['smollm2-135m'];
  for (const mix of ['Q8_0', 'F16', 'Q4_K_M']) {
    const path = modelFile(dir, `${g.name}-${mix}`, () => randomLlama(g, { mix }));
    for (const threads of [1, 2]) {
      const t = await llamaCppTimings(path, { promptTokens: 512, decodeTokens: 64, threads, runs: 2 });
      console.log(`| ${mix} (${mb(statSync(path).size)}) | ${t.load.threads}${t.load.multithread ? '' : ' (no pthreads)'} | ${t.load.loadMs.toFixed(0)} | ${t.prefillTokensPerSecond.toFixed(1)} | ${t.decodeTokensPerSecond.toFixed(1)} |`);
    }
  }
  console.log(`\n(load average after: ${load()})`);
}

async function validate() {
  await init(); // stories260K's greedy story runs on the package's cache
  console.log(`\n## The JS runner against llama.cpp, 128 teacher-forced positions (load average ${load()})\n`);
  console.log('| model | llama.cpp KV cache, flash attention | mean KL | max KL | top-1 | load ms | ms per prefix (mean length 64.5) |');
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  const cases = [['tiny random F32', randomLlama(GEOMETRIES.tiny, { mix: 'F32', seed: 3 }), TINY_TOKENS]];
  for (const name of Object.keys(REAL_MODELS)) {
    const file = readGguf(readFileSync(REAL_MODELS[name].path));
    cases.push([`${name} (v3 F32)`, reencodeLlama(file, { mix: 'F32' }), REAL_MODELS[name].tokens(Llama.fromGguf(file), 128)]);
  }
  const settings = [['f16, on (llama.cpp\'s default)', {}], ['f16, off', { flashAttention: false }], ['f32, off', { cacheTypeK: 'f32', cacheTypeV: 'f32', flashAttention: false }]];
  for (const [name, spec, tokens] of cases) {
    for (const [label, options] of settings) {
      const r = await runnerAgreement(spec, tokens, tokens.map((_, i) => i), { ...options, warmup: false });
      console.log(`| ${name} | ${label} | ${r.meanKl.toExponential(2)} | ${r.maxKl.toExponential(2)} | ${(100 * r.top1).toFixed(1)}% | ${r.loadMs.toFixed(0)} | ${(r.hiddenMs / tokens.length).toFixed(0)} |`);
    }
  }
  console.log(`\n(load average after: ${load()})`);
}

async function quality() {
  console.log(`\n## kjv-d512-h64 in each type (llama.cpp) against the F32 original (JS runner), 16 positions (load average ${load()})\n`);
  console.log('| type | matrices | mean KL | max KL | top-1 |');
  console.log('| --- | --- | --- | --- | --- |');
  const file = readGguf(readFileSync(REAL_MODELS['kjv-d512-h64'].path));
  const original = Llama.fromGguf(file);
  const tokens = REAL_MODELS['kjv-d512-h64'].tokens(original, 128);
  const positions = Array.from({ length: 16 }, (_, i) => 8 * i + 7);
  for (const mix of Object.keys(GGML_TYPES)) {
    const spec = reencodeLlama(file, { mix });
    const r = await runnerAgreement(spec, tokens, positions, { warmup: false }, original);
    const types = Object.entries(typeCounts(spec)).map(([t, n]) => `${t} ${n}`).join(', ');
    console.log(`| ${mix} | ${types} | ${r.meanKl.toExponential(2)} | ${r.maxKl.toExponential(2)} | ${(100 * r.top1).toFixed(1)}% |`);
  }
}

async function runner() {
  await init();
  console.log(`\n## The package's runner against llama.cpp, 128 teacher-forced positions, every mix (load average ${load()})\n`);
  console.log('| model | mix | matrices | llama.cpp KV cache | mean KL | max KL | top-1 | largest top-1 gap |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  const exact = { warmup: false, cacheTypeK: 'f32', cacheTypeV: 'f32', flashAttention: false };
  const defaults = { warmup: false };
  const positions = Array.from({ length: 128 }, (_, i) => i);
  const sources = [['tiny random', (mix) => randomLlama(GEOMETRIES.tiny, { mix, seed: 7 }), TINY_TOKENS]];
  for (const name of Object.keys(REAL_MODELS)) {
    const file = readGguf(readFileSync(REAL_MODELS[name].path));
    sources.push([name, (mix) => reencodeLlama(file, { mix }), REAL_MODELS[name].tokens(Llama.fromGguf(file), 128)]);
  }
  for (const [name, make, tokens] of sources) {
    for (const mix of mixes) {
      const spec = make(mix);
      const types = Object.entries(typeCounts(spec)).map(([t, n]) => `${t} ${n}`).join(', ');
      for (const [cache, options] of [['f32, no flash', exact], ['f16, flash (defaults)', defaults]]) {
        if (options === defaults && !['F32', 'Q8_0', 'Q4_K_M'].includes(mix)) continue;
        const r = await runnerAgreement(spec, tokens, positions, options);
        console.log(`| ${name} | ${mix} | ${types} | ${cache} | ${r.meanKl.toExponential(2)} | ${r.maxKl.toExponential(2)} | ${(100 * r.top1).toFixed(1)}% | ${r.top1Gap.toFixed(3)} |`);
      }
    }
  }
  console.log(`\n(load average after: ${load()})`);
}

async function models() {
  console.log(`\n## Model files: written, then loaded by llama.cpp (load average ${load()})\n`);
  console.log('| file | size | tensor types | write s | llama.cpp load ms |');
  console.log('| --- | --- | --- | --- | --- |');
  const entries = [];
  for (const g of Object.values(GEOMETRIES)) {
    for (const mix of ['Q8_0', 'F16', 'BF16', 'Q4_K_M']) entries.push([`${g.name}-${mix}`, () => randomLlama(g, { mix })]);
  }
  for (const source of Object.keys(REAL_MODELS)) {
    const file = readGguf(readFileSync(REAL_MODELS[source].path));
    for (const mix of Object.keys(GGML_TYPES)) entries.push([`${source}-${mix}`, () => reencodeLlama(file, { mix })]);
  }
  for (const [name, makeSpec] of entries) {
    let counts;
    const started = performance.now();
    const path = modelFile(dir, name, () => {
      const spec = makeSpec();
      counts = typeCounts(spec);
      return spec;
    });
    const seconds = (performance.now() - started) / 1000;
    let loaded;
    try {
      loaded = `${(await llamaCppLoad(path, { nCtx: 512 })).loadMs.toFixed(0)}`;
    } catch (error) {
      loaded = `refused: ${error.message.slice(0, 160)}`;
    }
    const types = counts ? Object.entries(counts).map(([t, n]) => `${t} ${n}`).join(', ') : '(existing file)';
    console.log(`| ${name} | ${mb(statSync(path).size)} | ${types} | ${seconds.toFixed(1)} | ${loaded} |`);
  }
}

/**
 * Logits [positions x vocab] = hidden states times spec's output matrix (the
 * embedding when tied) dequantized by the JS reference, in f64, a chunk of
 * rows at a time: a 128k vocabulary's matrix in f32 would be a gigabyte.
 */
function logitsFromStates(spec, states) {
  const t = spec.tensors.find((x) => x.name === 'output.weight') ?? spec.tensors.find((x) => x.name === 'token_embd.weight');
  const [dim, vocab] = t.dims;
  const type = ggmlType(t.type);
  const rowBytes = tensorBytes(type, dim);
  const bytes = t.data();
  // llama.cpp's product codes the hidden state as the matrix type's activations first.
  states = states.map((h) => codedActivations(t.type, h, 1, dim));
  const logits = new Float64Array(states.length * vocab);
  const CHUNK = 1024;
  for (let r0 = 0; r0 < vocab; r0 += CHUNK) {
    const rows = Math.min(CHUNK, vocab - r0);
    const w = type.decode(bytes.subarray(r0 * rowBytes, (r0 + rows) * rowBytes), rows * dim);
    states.forEach((h, p) => {
      for (let r = 0; r < rows; r++) {
        let sum = 0;
        for (let i = 0; i < dim; i++) sum += w[r * dim + i] * h[i];
        logits[p * vocab + r0 + r] = sum;
      }
    });
  }
  return logits;
}

const SEQUENCES = 4;

// 128 positions as 4 sequences of 32 tokens of a vocabulary: llama.cpp computes one prefix per position.
function teacherSequences(vocabSize) {
  return Array.from({ length: SEQUENCES }, (_, s) => Array.from({ length: 128 / SEQUENCES },
    (_, i) => (i === 0 ? 1 : 3 + (((s * 1000 + i) * 7919) % (vocabSize - 3)))));
}

// llama.cpp's logits for each sequence's every prefix, under `options`; and
// its load and prefix times in seconds.
async function llamaCppLogits(spec, file, sequences, options) {
  const loaded = await llamaCppLoad(file, options, { embeddings: true, pooling_type: 'last' });
  const started = performance.now();
  const logits = [];
  for (const tokens of sequences) logits.push(logitsFromStates(spec, await llamaCppHidden(file, tokens, tokens.map((_, i) => i), options)));
  return { logits, loadSeconds: loaded.loadMs / 1000, prefixSeconds: (performance.now() - started) / 1000 };
}

// The runner's logits for each sequence (f32 cache), from the file at `path`;
// and its load and forward times in seconds.
async function runnerLogits(path, sequences) {
  let started = performance.now();
  const runner = await Llama.load(await openAsBlob(path), { contextLength: Math.max(...sequences.map((t) => t.length)) });
  const loadSeconds = (performance.now() - started) / 1000;
  const { numLayers, numKvHeads, headDim } = runner.config;
  started = performance.now();
  try {
    const logits = sequences.map((tokens) => {
      const cache = new KvCache({ numLayers, numKvHeads, headDim, mode: 'f32' });
      try {
        return runner.forward(cache, tokens);
      } finally {
        cache.free();
      }
    });
    return { logits, loadSeconds, forwardSeconds: (performance.now() - started) / 1000 };
  } finally {
    runner.free();
  }
}

// Two programs' logits ([sequence] of [positions x vocabSize]) compared
// position by position: summarizeComparisons' figures and the count.
function agreement(sequences, vocabSize, x, y) {
  const comparisons = sequences.flatMap((tokens, s) => tokens.map((_, p) => compareLogits(
    x[s].subarray(p * vocabSize, (p + 1) * vocabSize), y[s].subarray(p * vocabSize, (p + 1) * vocabSize))));
  return { ...summarizeComparisons(comparisons), positions: comparisons.length };
}

const top1Of = (r) => `${Math.round(r.top1 * r.positions)}/${r.positions}`;
const REAL_GEOMETRIES = ['qwen2.5-0.5b', 'qwen3-0.6b', 'llama-3.2-1b'];
// llama.cpp as the tests' exact reference runs it: f32 caches, no flash attention.
const EXACT_LLAMACPP = { cacheTypeK: 'f32', cacheTypeV: 'f32', flashAttention: false, threads: 2, warmup: false };

async function architectures() {
  await init();
  console.log(`\n## The runner against llama.cpp at real geometries, random Q8_0 weights, 128 teacher-forced positions (load average ${load()})\n`);
  console.log('| geometry | file | write s | runner load s | runner forward s | llama.cpp load s | llama.cpp prefixes s | mean KL | max KL | top-1 | largest top-1 gap |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const name of REAL_GEOMETRIES) {
    const g = GEOMETRIES[name];
    const spec = randomLlama(g, { mix: 'Q8_0' });
    const started = performance.now();
    const path = modelFile(dir, `${name}-Q8_0`, () => spec);
    const write = (performance.now() - started) / 1000;
    const sequences = teacherSequences(g.vocabSize);
    const ours = await runnerLogits(path, sequences);
    const theirs = await llamaCppLogits(spec, path, sequences, EXACT_LLAMACPP);
    const r = agreement(sequences, g.vocabSize, theirs.logits, ours.logits);
    const types = Object.entries(typeCounts(spec)).map(([t, n]) => `${t} ${n}`).join(', ');
    const s = (x) => x.toFixed(1);
    console.log(`| ${name} (${g.architecture ?? 'llama'}) | ${mb(statSync(path).size)}, ${types} | ${s(write)} | ${s(ours.loadSeconds)} | ${s(ours.forwardSeconds)} | ${s(theirs.loadSeconds)} | ${s(theirs.prefixSeconds)} | ${r.meanKl.toExponential(2)} | ${r.maxKl.toExponential(2)} | ${top1Of(r)} | ${r.top1Gap.toFixed(3)} |`);
  }
  console.log(`\n(load average after: ${load()})`);
}

async function self() {
  await init();
  console.log(`\n## llama.cpp against itself and the runner against llama.cpp, 128 teacher-forced positions (load average ${load()})\n`);
  console.log('f32 KV caches everywhere; llama.cpp with flash attention off (A) and on (B), two of its own ways to the same attention.\n');
  console.log('| model | mix | A vs B: mean KL | top-1 | largest gap | runner vs A: mean KL | top-1 | largest gap |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  // The tiny model as the --runner table has it: seed 7, one sequence of 128.
  const cases = args.includes('--architectures')
    ? REAL_GEOMETRIES.map((name) => [name, 'Q8_0', GEOMETRIES[name], {}, teacherSequences(GEOMETRIES[name].vocabSize)])
    : mixes.map((mix) => ['tiny random', mix, GEOMETRIES.tiny, { seed: 7 }, [TINY_TOKENS]]);
  for (const [name, mix, g, options, sequences] of cases) {
    const spec = randomLlama(g, { mix, ...options });
    const path = modelFile(dir, `${g.name}-${mix}`, () => spec);
    const a = await llamaCppLogits(spec, path, sequences, EXACT_LLAMACPP);
    const b = await llamaCppLogits(spec, path, sequences, { ...EXACT_LLAMACPP, flashAttention: true });
    const ours = await runnerLogits(path, sequences);
    const cells = (r) => `${r.meanKl.toExponential(2)} | ${top1Of(r)} | ${r.top1Gap.toFixed(3)}`;
    console.log(`| ${name} | ${mix} | ${cells(agreement(sequences, g.vocabSize, a.logits, b.logits))} | ${cells(agreement(sequences, g.vocabSize, a.logits, ours.logits))} |`);
  }
  console.log(`\n(load average after: ${load()})`);
}

const missing = await llamaCppMissing();
if (missing) {
  console.log(`llama.cpp cannot run here: ${missing}`);
  process.exit(1);
}
try {
  if (run('--validate')) await validate();
  if (run('--timings')) await timings();
  if (run('--quality')) await quality();
  if (run('--models')) await models();
  if (run('--runner')) await runner();
  if (run('--self')) await self();
  else if (run('--architectures')) await architectures();
} finally {
  await closeLlamaCpp();
  if (!keep) rmSync(dir, { recursive: true, force: true });
}

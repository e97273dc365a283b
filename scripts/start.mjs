// npm start: builds the wasm module if it is missing or older than the C
// sources, then streams synthetic K/V (outlier key channels, RoPE-like
// rotation) into f32, q8, q8k and q8v caches side by side, printing the
// memory each holds and how far quantized attention strays from f32.
//
//   npm start -- [--heads 8] [--head-dim 128] [--positions 4096] [--every 512]
import { parseArgs } from 'node:util';
import init, { LayerKvCache, kernelIsa } from '../js/index.js';
import { normals, outlierKeys, rng } from '../bench/synthetic.mjs';
import { buildWasm, ensureToolchain, wasmUpToDate } from './toolchain.mjs';

const usage = 'usage: npm start -- [--heads N] [--head-dim D] [--positions P] [--every E]';
let options;
try {
  ({ values: options } = parseArgs({
    options: {
      heads: { type: 'string', default: '8' },
      'head-dim': { type: 'string', default: '128' },
      positions: { type: 'string', default: '4096' },
      every: { type: 'string', default: '512' },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (error) {
  console.error(`${error.message}\n${usage}`);
  process.exit(2);
}
if (options.help) {
  console.log(usage);
  process.exit(0);
}
function positiveInt(name, max) {
  const value = Number(options[name]);
  if (!Number.isInteger(value) || value < 1 || value > max) {
    console.error(`--${name} must be an integer from 1 to ${max} (got ${options[name]})\n${usage}`);
    process.exit(2);
  }
  return value;
}
const H = positiveInt('heads', 4096);
const d = positiveInt('head-dim', 4096);
const positions = positiveInt('positions', 1 << 20);
const every = positiveInt('every', 1 << 20);

if (!wasmUpToDate()) {
  ensureToolchain();
  buildWasm();
}
await init();

const modes = ['f32', 'q8', 'q8k', 'q8v'];
const caches = Object.fromEntries(modes.map((mode) => [mode, new LayerKvCache({ numKvHeads: H, headDim: d, mode })]));
const r = rng(2024);
const mib = (bytes) => (bytes / 2 ** 20).toFixed(2).padStart(9);

console.log(`kvcache-wasm (${kernelIsa()}): ${H} KV heads x ${d} channels, synthetic keys with outlier channels`);
console.log('memory held by each cache (MiB), f32/q8 ratio, and attention error vs f32');
console.log('(max |out - out_f32| / max |out_f32| over one N(0,1) query per head)\n');
console.log(`${'tokens'.padStart(8)} ${modes.map((m) => `${m} MiB`.padStart(9)).join(' ')}  ${'f32/q8'.padStart(6)}  ${modes.slice(1).map((m) => `err ${m}`.padStart(9)).join(' ')}`);

const chunk = Math.min(every, 256);
const t0 = performance.now();
while (caches.f32.seqLen < positions) {
  const n = Math.min(chunk, positions - caches.f32.seqLen, every - (caches.f32.seqLen % every));
  const k = outlierKeys(r, n, caches.f32.seqLen, H, d);
  const v = normals(r, n * H * d);
  for (const cache of Object.values(caches)) cache.appendBatch(k, v);
  const seqLen = caches.f32.seqLen;
  if (seqLen % every !== 0 && seqLen !== positions) continue;
  const errors = modes.slice(1).map((mode) => {
    let worst = 0;
    for (let h = 0; h < H; h++) {
      const q = normals(r, d);
      const exact = caches.f32.attend(q, h).out;
      const approx = caches[mode].attend(q, h).out;
      let diff = 0;
      let scale = 1e-30;
      for (let j = 0; j < d; j++) {
        diff = Math.max(diff, Math.abs(approx[j] - exact[j]));
        scale = Math.max(scale, Math.abs(exact[j]));
      }
      worst = Math.max(worst, diff / scale);
    }
    return worst;
  });
  const bytes = modes.map((mode) => caches[mode].memoryBytes);
  console.log(`${String(seqLen).padStart(8)} ${bytes.map(mib).join(' ')}  ${(bytes[0] / bytes[1]).toFixed(2).padStart(6)}  ${errors.map((e) => e.toExponential(2).padStart(9)).join(' ')}`);
}
const seconds = (performance.now() - t0) / 1000;
console.log(`\n${positions} tokens into 4 caches in ${seconds.toFixed(2)} s. The browser demo replaces this once it lands.`);
for (const cache of Object.values(caches)) cache.free();

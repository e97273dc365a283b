// The loader: every way of initialising, and the SIMD build it loads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

const wasmUrl = new URL('../../dist/kvcache.wasm', import.meta.url);
let fresh = 0;
// Each query string gives a separate module instance with its own state.
const freshModule = () => import(`../../js/index.js?instance=${++fresh}`);

test('init() loads the module next to the package and resolves once', async () => {
  const lib = await freshModule();
  const first = lib.default();
  assert.equal(lib.init(), first, 'a second call returns the same promise');
  await first;
  assert.equal(lib.version(), '0.1.0');
});

test('init({ wasm: bytes }) instantiates from the given bytes', async () => {
  const lib = await freshModule();
  await lib.init({ wasm: await readFile(wasmUrl) });
  const cache = new lib.LayerKvCache({ numKvHeads: 1, headDim: 4 });
  cache.append(new Float32Array(4).fill(1), new Float32Array(4).fill(2));
  assert.deepEqual(Array.from(cache.attend(new Float32Array(4), 0).out), [2, 2, 2, 2]);
});

test('init({ wasm: URL }) reads a file URL', async () => {
  const lib = await freshModule();
  await lib.init({ wasm: wasmUrl });
  assert.equal(lib.kernelIsa(), 'wasm-simd128');
});

test('init({ module }) instantiates a precompiled WebAssembly.Module, as workerd needs', async () => {
  const lib = await freshModule();
  const module = await WebAssembly.compile(await readFile(wasmUrl));
  await lib.init({ module });
  assert.equal(new lib.LayerKvCache({ numKvHeads: 2, headDim: 8, mode: 'q8' }).mode, 'q8');
});

test('init rejects options of the wrong type, naming them', async () => {
  const lib = await freshModule();
  assert.throws(() => lib.init(42), { name: 'TypeError', message: /options/ });
  await assert.rejects(lib.init({ module: new Uint8Array(8) }), { name: 'TypeError', message: /options\.module/ });
  await assert.rejects(lib.init({ wasm: 42 }), { name: 'TypeError', message: /options\.wasm/ });
  await lib.init(); // a failed init leaves the way open for a correct one
  assert.equal(lib.kernelIsa(), 'wasm-simd128');
});

test('using the library before init() throws an error that says to call it', async () => {
  const lib = await freshModule();
  assert.throws(() => new lib.LayerKvCache({ numKvHeads: 1, headDim: 4 }), /await init\(\)/);
  assert.throws(() => lib.kernelIsa(), /await init\(\)/);
});

test('the module is built with SIMD128 kernels', async () => {
  const lib = await freshModule();
  await lib.init();
  assert.equal(lib.kernelIsa(), 'wasm-simd128');
});

test('the attend path of the module contains SIMD128 instructions (wasm-objdump)', (t) => {
  const result = spawnSync('wasm-objdump', ['-d', fileURLToPath(wasmUrl)], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (result.error) {
    t.skip('wasm-objdump (Debian package wabt) is not installed, so the disassembly cannot be read');
    return;
  }
  // Function bodies by name (the module keeps its function names).
  const bodies = new Map();
  let current = null;
  for (const line of result.stdout.split('\n')) {
    const start = line.match(/^[0-9a-f]+ func\[\d+\] <([^>]+)>:/);
    if (start) bodies.set((current = start[1]), []);
    else if (current) bodies.get(current).push(line);
  }
  const body = (name) => {
    assert.ok(bodies.has(name), `function ${name} is in the module`);
    return bodies.get(name).join('\n');
  };
  // kvc_layer_attend reaches the kernels through the table that picks the SIMD set.
  assert.match(body('kvc_dot_f32__wasmsimd'), /f32x4\.mul/);
  assert.match(body('kvc_dot_f32__wasmsimd'), /f32x4\.add/);
  assert.match(body('kvc_dot_f32_i8__wasmsimd'), /i16x8\.extend_(low|high)_i8x16_s/);
  assert.match(body('kvc_axpy_i8__wasmsimd'), /i32x4\.extend_(low|high)_i16x8_s/);
  assert.doesNotMatch(body('kvc_axpy_i8__wasmsimd'), /extract_lane/, 'no scalarised conversion');
  assert.match(body('kvc_quantize_row__wasmsimd'), /f32x4\.nearest/);
  assert.match(body('kvc_softmax__wasmsimd'), /f32x4\.div/);
});

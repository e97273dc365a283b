// The loader: every way of initialising, and the SIMD build it loads. Each
// case runs in its own Node process, since a process loads the module once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const indexUrl = new URL('../../js/index.js', import.meta.url).href;
const wasmUrl = new URL('../../dist/kvcache.wasm', import.meta.url);

/** Runs `body` (an async function body with `lib` and `wasmUrl` in scope) in
 * a fresh process and returns what it returns (JSON). */
function fresh(body) {
  const source = `
    const lib = await import(${JSON.stringify(indexUrl)});
    const wasmUrl = new URL(${JSON.stringify(wasmUrl.href)});
    const { readFile } = await import('node:fs/promises');
    const result = await (async () => { ${body} })();
    process.stdout.write(JSON.stringify(result ?? null));`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', source], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout);
}

test('init() loads the module next to the package and resolves once', () => {
  const result = fresh(`
    const first = lib.default();
    const same = lib.init() === first;
    await first;
    return { same, version: lib.version() };`);
  assert.deepEqual(result, { same: true, version: '0.1.0' });
});

test('init({ wasm: bytes }) instantiates from the given bytes', () => {
  const out = fresh(`
    await lib.init({ wasm: await readFile(wasmUrl) });
    const cache = new lib.LayerKvCache({ numKvHeads: 1, headDim: 4 });
    cache.append(new Float32Array(4).fill(1), new Float32Array(4).fill(2));
    return Array.from(cache.attend(new Float32Array(4), 0).out);`);
  assert.deepEqual(out, [2, 2, 2, 2]);
});

test('init({ wasm: URL }) reads a file URL', () => {
  assert.equal(fresh('await lib.init({ wasm: wasmUrl }); return lib.kernelIsa();'), 'wasm-simd128');
});

test('init({ module }) instantiates a precompiled WebAssembly.Module, as workerd needs', () => {
  const mode = fresh(`
    const module = await WebAssembly.compile(await readFile(wasmUrl));
    await lib.init({ module });
    return new lib.LayerKvCache({ numKvHeads: 2, headDim: 8, mode: 'q8' }).mode;`);
  assert.equal(mode, 'q8');
});

test('init rejects options of the wrong type, naming them, and can then succeed', () => {
  const errors = fresh(`
    const errors = [];
    try { lib.init(42); } catch (e) { errors.push(e.name + ': ' + e.message); }
    for (const options of [{ module: new Uint8Array(8) }, { wasm: 42 }]) {
      try { await lib.init(options); } catch (e) { errors.push(e.name + ': ' + e.message); }
    }
    await lib.init();
    errors.push(lib.kernelIsa());
    return errors;`);
  assert.match(errors[0], /^TypeError: .*options/);
  assert.match(errors[1], /^TypeError: .*options\.module/);
  assert.match(errors[2], /^TypeError: .*options\.wasm/);
  assert.equal(errors[3], 'wasm-simd128');
});

test('the relaxed-SIMD probe refuses an engine without it, or one that computes it differently', async () => {
  const { relaxedSimdWorks } = await import('../../js/runtime.js');
  const engine = (answer, valid = true) => ({
    validate: () => valid,
    Module: function Module() {},
    Instance: function Instance() { this.exports = { p: () => answer }; },
  });
  assert.equal(relaxedSimdWorks(engine(-24)), true);
  assert.equal(relaxedSimdWorks(engine(-48)), false, "Node 20's experimental flag answers -48");
  assert.equal(relaxedSimdWorks(engine(-24, false)), false, 'an engine that does not validate the opcode');
  assert.equal(relaxedSimdWorks(), false, 'Node 20 has no relaxed SIMD');
});

test('init({ isa }) loads the build it names, refuses one the engine cannot run, and checks the value', () => {
  const result = fresh(`
    const errors = [];
    for (const options of [{ isa: 'wasm-relaxed-simd' }, { isa: 'avx2' }, { isa: 'wasm-simd128', wasm: wasmUrl }]) {
      try { await lib.init(options); } catch (e) { errors.push(e.name + ': ' + e.message); }
    }
    await lib.init({ isa: 'wasm-simd128' });
    return { errors, isa: lib.kernelIsa() };`);
  assert.equal(result.isa, 'wasm-simd128');
  assert.match(result.errors[0], /^Error: init: options\.isa is 'wasm-relaxed-simd' but this engine has no relaxed SIMD/);
  assert.match(result.errors[1], /^RangeError: init: options\.isa must be 'wasm-simd128' or 'wasm-relaxed-simd' \(got "avx2"\)/);
  assert.match(result.errors[2], /^TypeError: init: options\.isa .* does not go with options\.module or options\.wasm/);
});

test('using the library before init() throws an error that says to call it', () => {
  const errors = fresh(`
    const errors = [];
    try { new lib.LayerKvCache({ numKvHeads: 1, headDim: 4 }); } catch (e) { errors.push(e.message); }
    try { lib.kernelIsa(); } catch (e) { errors.push(e.message); }
    try { new lib.KvCache({ numLayers: 1, numKvHeads: 1, headDim: 4 }); } catch (e) { errors.push(e.message); }
    return errors;`);
  assert.equal(errors.length, 3);
  for (const message of errors) assert.match(message, /await init\(\)/);
});

test('the module is built with SIMD128 kernels', () => {
  assert.equal(fresh('await lib.init(); return lib.kernelIsa();'), 'wasm-simd128');
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
  assert.match(body('kvc_scores_f32__wasmsimd'), /f32x4\.mul/);
  assert.match(body('kvc_scores_f32__wasmsimd'), /f32x4\.add/);
  assert.match(body('kvc_scores_q8__wasmsimd'), /i32x4\.dot_i16x8_s/);
  assert.match(body('kvc_weighted_sum_f32__wasmsimd'), /f32x4\.mul/);
  assert.match(body('kvc_weighted_sum_q8__wasmsimd'), /i32x4\.dot_i16x8_s/);
  assert.match(body('kvc_quantize_row__wasmsimd'), /f32x4\.nearest/);
  assert.match(body('kvc_softmax__wasmsimd'), /f32x4\.mul/);
  assert.match(body('kvc_linear_read_f64__wasmsimd'), /f64x2\.mul/);
});

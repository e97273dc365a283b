// The C core under sanitizers, built natively with clang: AddressSanitizer
// (leaks included) and UndefinedBehaviorSanitizer on the library, the C tests
// and the fuzz harnesses (build-asan: every C test, and the fuzz corpora
// replayed), then ThreadSanitizer on the library and the C tests (build-tsan),
// each case on a pool of three threads. Any report is fatal.
// `sanitizedTests()` is a step of npm test; `node scripts/sanitize.mjs` runs
// it alone.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { aptInstall, ensureToolchain, have, log, root, run, runOrThrow } from './toolchain.mjs';

export const asanBuildDir = join(root, 'build-asan');
export const tsanBuildDir = join(root, 'build-tsan');
// Every C case on the pool's threads too (tests/c/test.c).
const TEST_THREADS = '3';

const jobs = String(Math.max(1, availableParallelism()));

// Reports stop the program; a leak is a failure too.
export const sanitizerEnv = {
  ASAN_OPTIONS: 'detect_leaks=1',
  UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
  TSAN_OPTIONS: 'halt_on_error=1:second_deadlock_stack=1:atexit_sleep_ms=0',
};

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

/** Configures and builds `dir` with clang under `sanitizers`, with extra CMake options. */
export function buildSanitized(dir, sanitizers, options) {
  runOrThrow('cmake', ['-S', '.', '-B', dir, '-DCMAKE_C_COMPILER=clang', '-DCMAKE_BUILD_TYPE=RelWithDebInfo',
    `-DKVC_SANITIZE=${sanitizers}`, '-DKVC_BUILD_BENCH=OFF', ...options]);
  runOrThrow('cmake', ['--build', dir, '--parallel', jobs]);
}

/** Builds build-asan and build-tsan and runs their ctest (ASan's twice: on forks too); true when every test passed. */
export function sanitizedTests() {
  try {
    ensureToolchain({ wasm: false });
    ensureClang('fuzzer,address,undefined');
    ensureClang('thread');
    log('sanitized build (clang, ASan + UBSan): library, C tests, fuzz harnesses');
    buildSanitized(asanBuildDir, 'address,undefined', ['-DKVC_BUILD_TESTS=ON', '-DKVC_BUILD_FUZZERS=ON']);
    log('sanitized build (clang, ThreadSanitizer): library, C tests');
    buildSanitized(tsanBuildDir, 'thread', ['-DKVC_BUILD_TESTS=ON']);
  } catch (error) {
    console.error(`sanitized build: ${error.message}`);
    return false;
  }
  log(`C tests and fuzz corpora under ASan + UBSan, on ${TEST_THREADS} threads`);
  const asan = run('ctest', ['--test-dir', asanBuildDir, '--output-on-failure', '--parallel', jobs],
    { env: { ...sanitizerEnv, KVC_TEST_THREADS: TEST_THREADS } }) === 0;
  // Once more with every appended layer forked (tests/c/test.c): all their
  // later writes meet shared pages. Not the cases that count allocations or
  // pages themselves.
  log('C tests under ASan + UBSan on forks (KVC_TEST_FORKS)');
  const forks = run('ctest', ['--test-dir', asanBuildDir, '--output-on-failure', '--parallel', jobs,
    '-R', '^test_', '-E', '^test_(alloc|pages|prefix)\\.'],
  { env: { ...sanitizerEnv, KVC_TEST_FORKS: '1' } }) === 0;
  log(`C tests under ThreadSanitizer, on ${TEST_THREADS} threads`);
  const tsan = run('ctest', ['--test-dir', tsanBuildDir, '--output-on-failure', '--parallel', jobs],
    { env: { ...sanitizerEnv, KVC_TEST_THREADS: TEST_THREADS } }) === 0;
  return asan && forks && tsan;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.exit(sanitizedTests() ? 0 : 1);
}

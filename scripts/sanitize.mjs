// The C core under AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer:
// the library, the C tests and the fuzz harnesses built natively with clang
// into build-asan, then ctest (every C test, and the fuzz corpora replayed).
// Any report is fatal. `sanitizedTests()` is a step of npm test;
// `node scripts/sanitize.mjs` runs it alone.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { aptInstall, ensureToolchain, have, log, root, run, runOrThrow } from './toolchain.mjs';

export const asanBuildDir = join(root, 'build-asan');

const jobs = String(Math.max(1, availableParallelism()));

// Reports stop the program; a leak is a failure too.
export const sanitizerEnv = {
  ASAN_OPTIONS: 'detect_leaks=1',
  UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
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

/** Configures and builds `dir` with clang under the sanitizers, with extra CMake options. */
export function buildSanitized(dir, options) {
  runOrThrow('cmake', ['-S', '.', '-B', dir, '-DCMAKE_C_COMPILER=clang', '-DCMAKE_BUILD_TYPE=RelWithDebInfo',
    '-DKVC_SANITIZE=ON', '-DKVC_BUILD_BENCH=OFF', ...options]);
  runOrThrow('cmake', ['--build', dir, '--parallel', jobs]);
}

/** Builds build-asan and runs its ctest; true when every test passed. */
export function sanitizedTests() {
  try {
    ensureToolchain({ wasm: false });
    ensureClang('fuzzer,address,undefined');
    log('sanitized build (clang, ASan + UBSan): library, C tests, fuzz harnesses');
    buildSanitized(asanBuildDir, ['-DKVC_BUILD_TESTS=ON', '-DKVC_BUILD_FUZZERS=ON']);
  } catch (error) {
    console.error(`sanitized build: ${error.message}`);
    return false;
  }
  log('C tests and fuzz corpora under ASan + UBSan');
  return run('ctest', ['--test-dir', asanBuildDir, '--output-on-failure', '--parallel', jobs],
    { env: sanitizerEnv }) === 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.exit(sanitizedTests() ? 0 : 1);
}

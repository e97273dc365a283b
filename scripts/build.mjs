// npm run build: the native library and tests (build/), the wasm module
// (dist/kvcache.wasm) and its C tests (build-wasm/).
// `--native` or `--wasm` builds one side only.
import { buildNative, buildWasm, ensureToolchain } from './toolchain.mjs';

const args = new Set(process.argv.slice(2));
const native = !args.has('--wasm') || args.has('--native');
const wasm = !args.has('--native') || args.has('--wasm');
try {
  ensureToolchain({ wasm });
  if (native) buildNative();
  if (wasm) buildWasm();
} catch (error) {
  console.error(`build failed: ${error.message}`);
  process.exit(1);
}

// The package's entry in Cloudflare Workers (the "workerd" export condition,
// which wrangler and workerd resolve; not "worker", which webpack also picks
// for browser web workers, where fetching the .wasm works). workerd cannot
// compile wasm from bytes at run time, so the modules are imported here --
// workerd and wrangler compile them at deploy time -- and init() uses one
// unless told otherwise. Everything else is index.js.
import baseline from '../dist/kvcache.wasm';
import relaxed from '../dist/kvcache-relaxed.wasm';
import { initWithModules } from './runtime/runtime.js';

export * from './index.js';

/**
 * init() that loads a module imported above -- the SIMD128 one, or the
 * relaxed-SIMD one with { isa: 'wasm-relaxed-simd' } (workerd cannot compile
 * the probe that picks it elsewhere) -- unless the options name another.
 */
export function init(options) {
  return initWithModules({ baseline, relaxed }, options);
}

export default init;

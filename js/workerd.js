// The package's entry in Cloudflare Workers (the "workerd" export condition,
// which wrangler and workerd resolve; not "worker", which webpack also picks
// for browser web workers, where fetching the .wasm works). workerd cannot
// compile wasm from bytes at run time, so the module is imported here --
// workerd and wrangler compile it at deploy time -- and init() uses it unless
// told otherwise. Everything else is index.js.
import kvcacheWasm from '../dist/kvcache.wasm';
import { initWithModule } from './runtime.js';

export * from './index.js';

/** init() that loads the module imported above unless the options name another. */
export function init(options) {
  return initWithModule(kvcacheWasm, options);
}

export default init;

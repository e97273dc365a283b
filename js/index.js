// kvcache-wasm: the KV cache of a transformer layer, in WebAssembly.
//
// The package's entry points are the files in js/ (this one, llama.js,
// chat.js, worker.js, workerd.js) and the two worker scripts; each folder is
// one concern, imported one way (tests/js/layout.test.mjs):
//   runtime/     the module loader (runtime.js), its files, the thread pool,
//                options and argument checks, the header's constants
//   cache/       one class per C object: a layer, a model's cache, the prefix
//                cache, snapshots -- every rule of the cache lives in C
//   tokenizers/  text to tokens and back, from a GGUF file's vocabulary
//   model/       the GGUF reader, model sources, the runner, decode, sampling
//   chat/        conversations and their templates
//   workers/     the runner in a worker, seen from the page
import { init } from './runtime/runtime.js';

export default init;
export { init };
export { KvCacheError } from './runtime/checks.js';
export {
  LayerKvCache, MODES, COMPONENTS, Q8_WINDOW, Q4_RESIDUAL_ROWS, Q4_MAX_RESIDUAL_ROWS, MAX_KV_HEADS, MAX_HEAD_DIM, MAX_POSITIONS,
} from './cache/layer.js';
export { KvCache } from './cache/model.js';
export { PrefixCache } from './cache/prefix.js';
export { threadCount, threadInfo, setThreadLimit, shutdown } from './runtime/threads.js';
export { PROFILE_OPERATIONS, profile } from './runtime/profile.js';
export { kernelInfo, kernelIsa, version } from './runtime/runtime.js';
export { memoryStats } from './cache/memory.js';
export { attentionHead } from './cache/attention.js';

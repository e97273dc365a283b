// kvcache-wasm/llama: the model runner (model/) -- a GGUF file's model on
// this package's caches, its tokenizer, decoding and sampling.
//
//   import init from 'kvcache-wasm';
//   import { Llama, generate } from 'kvcache-wasm/llama';
//   await init();
//   const llama = await Llama.load(await fetch(url), { onProgress });   // or Llama.fromGguf(bytes)
//   const session = llama.session({ mode: 'q8' });
//   const { tokens, stats } = generate(session, llama.tokenizer.encode('Once'), { steps: 100, draft: 4 });
export { Llama, LlamaSession, slideCache } from './model/llama.js';
export { Projector } from './model/vision.js';
export { EMBEDDING_PROMPTS } from './model/embeddings.js';
export { ModelStore } from './store/store.js';
export { GgufError, GgufFile, readGguf } from './model/gguf.js';
export { Tokenizer } from './tokenizers/tokenizer.js';
export { decode, generate, promptLookup } from './model/decode.js';
export { seededRandom } from './model/sampling.js';
export { setGrammarEngine } from './model/grammar.js';

// kvcache-wasm/worker: the model runner in a dedicated worker
// (llama-worker.js), its API made asynchronous for the page (workers/).
//
//   import { LlamaWorker } from 'kvcache-wasm/worker';
//   import { Chat } from 'kvcache-wasm/chat';
//   const worker = new LlamaWorker();
//   const model = await worker.load('/models/SmolLM2-135M-Instruct-Q8_0.gguf', { onProgress });
//   const chat = new Chat(await model.session(), { system: 'You are concise.' });
//   for await (const piece of chat.send('Hello!', { signal })) output.textContent += piece.text;
export { LlamaWorker, RemoteLlama, RemotePrefixCache, RemoteSession } from './workers/client.js';
export { ModelStore } from './store/store.js';

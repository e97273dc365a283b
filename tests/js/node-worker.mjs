// The package's worker (js/llama-worker.js) on a Node thread, as a Web
// Worker for LlamaWorker: the thread's messages go to the worker's
// onmessage (those sent before its module loaded, once it has), its
// postMessage to the thread's port. `prelude`: script run on the thread
// first (what a browser's worker has that Node's lacks, stood in).
//
//   const worker = new LlamaWorker({ worker: nodeWorker, init: { threads: 1 } });
import { Worker } from 'node:worker_threads';

export function nodeWorker(prelude = '') {
  const script = `
    const { parentPort } = require('node:worker_threads');
    ${prelude}
    const early = [];
    globalThis.postMessage = (data, transfer) => parentPort.postMessage(data, transfer);
    parentPort.on('message', (data) => (globalThis.onmessage ? globalThis.onmessage({ data }) : early.push(data)));
    import(${JSON.stringify(new URL('../../js/llama-worker.js', import.meta.url).href)})
      .then(() => { for (const data of early.splice(0)) globalThis.onmessage({ data }); });`;
  const thread = new Worker(script, { eval: true });
  const worker = {
    onmessage: null,
    onerror: null,
    postMessage: (data, transfer) => thread.postMessage(data, transfer),
    terminate: () => thread.terminate(),
  };
  thread.on('message', (data) => worker.onmessage?.({ data }));
  thread.on('error', (error) => worker.onerror?.({ message: error.message }));
  return worker;
}

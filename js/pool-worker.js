// One thread of the module's pool (js/threads.js): an instance of the module
// over the shared memory it is sent, on a stack of its own, running tasks
// until the pool closes (kvc_wasm_worker_run, src/wasm/workers.c). It takes
// one message: { module, memory, index, stackTop }; it answers 'ready', then
// 'closed' when the pool closes, or 'failed' with a message.

function serve(post, close) {
  return ({ module, memory, index, stackTop }) => {
    let exports;
    try {
      // A file of its own, importing nothing: bundlers copy a worker's script as it is.
      const instance = new WebAssembly.Instance(module, {
        env: { memory, emscripten_notify_memory_growth() {} },
        // Only the calling thread profiles (src/core/profile.c): a pool thread never reads the clock.
        wasi_snapshot_preview1: { clock_time_get: () => 52 /* ENOSYS */ },
      });
      exports = instance.exports;
      exports.stackRestore(stackTop);
      if (exports.kvc_wasm_worker_join(index) !== 0) throw new Error(`pool slot ${index} is not open`);
    } catch (error) {
      post({ type: 'failed', message: `the worker could not instantiate the module: ${error?.message ?? error}` });
      close();
      return;
    }
    post({ type: 'ready' });
    try {
      exports.kvc_wasm_worker_run(index); // returns when the pool closes
      post({ type: 'closed' });
    } catch (error) {
      // A trap: the task it ran goes back to the calling thread.
      exports.stackRestore(stackTop);
      exports.kvc_wasm_worker_failed(index);
      post({ type: 'failed', message: `a pool worker stopped: ${error?.message ?? error}` });
    }
    close();
  };
}

// Started by worker_threads (Node, Deno, Bun: js/threads.js), or as a web
// Worker. Node's built-in modules come through process.getBuiltinModule,
// so a bundler building this file for a browser sees no import of them.
const parentPort = globalThis.process?.getBuiltinModule?.('node:worker_threads')?.parentPort;
if (parentPort) {
  // The port holds messages until there is a listener.
  const onMessage = serve((message) => parentPort.postMessage(message), () => parentPort.close());
  parentPort.once('message', onMessage);
} else {
  // A web Worker: listen at once, before any message can arrive.
  const onMessage = serve((message) => globalThis.postMessage(message), () => globalThis.close());
  globalThis.onmessage = (event) => onMessage(event.data);
}

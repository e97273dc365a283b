// One reader of the attention benchmark's memory floor on all threads
// (attention.mjs, readBandwidth): a standalone instance of the package's
// module in this worker thread, streaming a buffer of its own with the
// module's read probe each time the main thread starts a pass.
import { parentPort, workerData } from 'node:worker_threads';
import { rawModule } from './attention-shared.mjs';

const { file, bytes, passes, signals } = workerData; // signals: [pass to run, readers done]
const { e, alloc, f32 } = await rawModule(file);
const ptr = alloc(bytes);
f32().fill(1, ptr >>> 2, (ptr + bytes) >>> 2);
parentPort.postMessage('ready');
for (let pass = 1; pass <= passes; pass++) {
  Atomics.wait(signals, 0, pass - 1);
  e.kvc_wasm_read_probe(ptr, bytes / 4);
  Atomics.add(signals, 1, 1);
  Atomics.notify(signals, 1);
}

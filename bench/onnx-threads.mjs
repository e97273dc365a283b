// onnxruntime-web's wasm backend on several threads, for the attention
// benchmark: its thread count is fixed once per process, so it runs here,
// in a process of its own, on the same data and graph as attention.mjs.
//   node bench/onnx-threads.mjs THREADS ROUNDS d:n [d:n ...]
// prints { "d:n": best ms per step } as one line of JSON.
import { onnxContender, onnxSession, shapeData } from './attention-shared.mjs';

const [threads, rounds, ...shapes] = process.argv.slice(2);
const sessions = {};
const times = {};
for (const shape of shapes) {
  const [d, n] = shape.split(':').map(Number);
  sessions[d] ??= await onnxSession(d, Number(threads));
  const { q, kHeads, vHeads } = shapeData(d, n);
  const contender = onnxContender(sessions[d], d, n, kHeads, vHeads, q);
  await contender.step(); // warm
  let best = Infinity;
  for (let round = 0; round < Number(rounds); round++) {
    const t0 = performance.now();
    await contender.step();
    best = Math.min(best, performance.now() - t0);
  }
  times[shape] = best;
}
console.log(JSON.stringify(times));
process.exit(0); // onnxruntime's own workers would keep the process alive

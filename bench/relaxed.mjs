// The relaxed-SIMD build in the attention benchmark: an engine that runs
// relaxed SIMD (Node 22; Node 20, which runs the benchmark, does not), in a
// process of its own, on the same data as attention.mjs: f32, q8 and q4 on
// all threads and on one.
//   node22 bench/relaxed.mjs ROUNDS d:n [d:n ...]
// prints { "d:n": { f32, f32One, q8, q8One, q4, q4One } } (best ms per step) as one line of JSON.
import init, { kernelIsa } from '../js/index.js';
import { ours, race, shapeData } from './attention-shared.mjs';

const [rounds, ...shapes] = process.argv.slice(2);
await init({ isa: 'wasm-relaxed-simd' });
if (kernelIsa() !== 'wasm-relaxed-simd') throw new Error(`loaded ${kernelIsa()}`);
const times = {};
for (const shape of shapes) {
  const [d, n] = shape.split(':').map(Number);
  const { kRows, vRows, q } = shapeData(d, n);
  const contenders = {
    f32: ours('f32', d, n, kRows, vRows, q),
    f32One: ours('f32', d, n, kRows, vRows, q, { single: true }),
    q8: ours('q8', d, n, kRows, vRows, q),
    q8One: ours('q8', d, n, kRows, vRows, q, { single: true }),
    q4: ours('q4', d, n, kRows, vRows, q),
    q4One: ours('q4', d, n, kRows, vRows, q, { single: true }),
  };
  times[shape] = await race(contenders, Number(rounds));
  for (const contender of Object.values(contenders)) contender.free();
}
console.log(JSON.stringify(times));

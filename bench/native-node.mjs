// One measurement of bench/native.mjs in a process of its own (init runs
// once a process, with its thread count): `node native-node.mjs FILE THREADS
// CONTEXT DECODE` prints one line of JSON: the prompt's and the steps'
// tokens/s, each profiled (PROFILE_OPERATIONS), the package used as an app
// uses it.
import { readFileSync } from 'node:fs';
import { init, profile, threadCount, kernelIsa } from '../js/index.js';
import { Llama } from '../js/llama.js';
import { argmax } from '../js/model/sampling.js';

const [file, threads, context, decode] = process.argv.slice(2).map((arg, i) => (i === 0 ? arg : Number(arg)));
await init({ threads });
const llama = Llama.fromGguf(readFileSync(file));
const { vocabSize } = llama.config;
const prompt = Array.from({ length: context }, (_, i) => 3 + ((i * 7919) % (vocabSize - 3)));
const session = llama.session({ mode: 'f32' });
// A warm-up step, its memory grown and its code compiled, then a fresh cache.
llama.forward(session.cache, prompt.slice(0, 8), { logits: 'last' });
session.free();
const measured = llama.session({ mode: 'f32' });
const prefill = await profile(() => llama.forward(measured.cache, prompt, { logits: 'last' }));
let logits = prefill.value;
const steps = await profile(() => {
  for (let i = 0; i < decode; i++) logits = llama.forward(measured.cache, [argmax(logits)], { logits: 'last' });
});
measured.free();
console.log(JSON.stringify({
  threads: threadCount(), isa: kernelIsa(),
  prefill: { tokensPerSecond: context / (prefill.totalMs / 1000), totalMs: prefill.totalMs, ms: prefill.ms },
  decode: { tokensPerSecond: decode / (steps.totalMs / 1000), totalMs: steps.totalMs, ms: steps.ms },
}));
process.exit(0);

// A plain JavaScript user of the installed package: its entries by name,
// as the README shows them. With a llama GGUF named on the command line it
// also generates text and chats (kvcache-wasm/chat, whose template engine is
// the package's one dependency); prints what it saw as JSON.
import { readFileSync } from 'node:fs';
import init, { KvCache, LayerKvCache, kernelIsa } from 'kvcache-wasm';
import { Llama, generate, promptLookup, seededRandom } from 'kvcache-wasm/llama';
import { Chat } from 'kvcache-wasm/chat';

await init();
const random = seededRandom(1);
const numbers = (n) => Float32Array.from({ length: n }, () => 2 * random() - 1);

const layer = new LayerKvCache({ numKvHeads: 4, headDim: 32, mode: 'q8' });
for (let i = 0; i < 100; i++) layer.append(numbers(4 * 32), numbers(4 * 32));
const { out } = layer.attend(numbers(32), 2);
const restored = LayerKvCache.deserialize(layer.serialize());

const cache = new KvCache({ numLayers: 2, numKvHeads: 4, headDim: 32, mode: 'q8k' });
cache.appendLayerBatch(0, numbers(10 * 4 * 32), numbers(10 * 4 * 32));
cache.appendLayerBatch(1, numbers(10 * 4 * 32), numbers(10 * 4 * 32));
const copy = KvCache.deserialize(cache.serialize());

let text = null;
let reply = null;
const [modelPath] = process.argv.slice(2);
if (modelPath) {
  const llama = Llama.fromGguf(readFileSync(modelPath));
  const session = llama.session({ mode: 'q8' });
  const { tokens } = generate(session, llama.tokenizer.encode('Once upon a time'), { steps: 30, draft: 4 });
  text = llama.tokenizer.decode(tokens);
  session.free();
  const chat = new Chat(llama.session());
  reply = '';
  for await (const piece of chat.send('Once upon a time', { maxTokens: 20, temperature: 0 })) reply += piece.text;
  chat.free();
}

console.log(JSON.stringify({
  kernelIsa: kernelIsa(),
  seqLen: layer.seqLen,
  restoredSeqLen: restored.seqLen,
  finite: out.every(Number.isFinite),
  modelSeqLen: copy.seqLen,
  lookup: promptLookup([5, 6, 7, 5, 6], 1),
  text,
  reply,
}));
for (const owner of [layer, restored, cache, copy]) owner.free();

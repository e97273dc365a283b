// A Worker as a user writes one for wrangler: the package by its name and
// init() with no options -- the "workerd" condition's entry brings the .wasm
// in as a module -- with the llama entry beside it, sharing its runtime.
import init, { KvCache, LayerKvCache, kernelIsa } from 'kvcache-wasm';
import { seededRandom } from 'kvcache-wasm/llama';

export default {
  async fetch() {
    await init();
    const random = seededRandom(1);
    const numbers = (n) => Float32Array.from({ length: n }, () => 2 * random() - 1);
    const layer = new LayerKvCache({ numKvHeads: 2, headDim: 16, mode: 'q8' });
    for (let i = 0; i < 100; i++) layer.append(numbers(32), numbers(32));
    const { out } = layer.attend(numbers(16), 1);
    const cache = new KvCache({ numLayers: 2, numKvHeads: 2, headDim: 16 });
    for (let l = 0; l < 2; l++) cache.appendLayerBatch(l, numbers(5 * 32), numbers(5 * 32));
    const restored = KvCache.deserialize(cache.serialize());
    const seen = { kernelIsa: kernelIsa(), seqLen: layer.seqLen, finite: out.every(Number.isFinite), restoredSeqLen: restored.seqLen };
    for (const owner of [layer, cache, restored]) owner.free();
    return Response.json(seen);
  },
};

// Out of memory in a prompt with an image (the module's heap capped): an
// image's tokens go in as passes of their own between the text's, and a
// prompt that runs out of memory in any of them -- the text before the
// image in, the image's pass failing -- appends nothing, as a text prompt's
// single pass does; freed memory lets the same prompt through, with the
// logits of a session that never failed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KvCacheError, LayerKvCache, init } from '../../js/index.js';
import { Llama } from '../../js/llama.js';
import { TINY_PROJECTORS, pairedLanguageModel, randomProjector } from '../gguf/vision.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { testImage } from '../runtimes/png.mjs';

await init({ maxMemory: 48 * 2 ** 20 });

const isOutOfMemory = (error) => error instanceof KvCacheError && error.code === 'KVC_E_NOMEM';

test('a prompt with an image that runs out of memory in any of its passes appends nothing; with memory freed it goes through', () => {
  const g = TINY_PROJECTORS.lfm2;
  const llama = Llama.fromGguf(encodeGguf(pairedLanguageModel(g, { seed: 2 })), { projector: encodeGguf(randomProjector(g, { mix: 'F32', seed: 3 })) });
  const fillers = [];
  try {
    const image = llama.imageOf(testImage(64, 64, 1));
    const text = llama.tokenizer.encode('2+2=? 3+3=?', { bos: false, special: true });
    const ids = [llama.tokenizer.bosId, ...text, ...image.tokens, ...text];
    const expected = (() => {
      const session = llama.session();
      try {
        return session.prefill(ids, { logits: true }).logits;
      } finally {
        session.free();
      }
    })();
    // Fill the heap in pieces of a few KiB, then give them back one at a time: at each level a fresh
    // session tries the prompt, until one gets through.
    for (;;) {
      const filler = new LayerKvCache({ numKvHeads: 1, headDim: 64, mode: 'f32' });
      fillers.push(filler);
      try {
        filler.appendBatch(new Float32Array(64 * 32), new Float32Array(64 * 32));
      } catch (error) {
        if (!isOutOfMemory(error)) throw error;
        fillers.pop().free();
        break;
      }
    }
    let failures = 0;
    for (;;) {
      let session;
      try {
        session = llama.session();
      } catch (error) {
        if (!isOutOfMemory(error)) throw error;
        fillers.pop().free();
        continue;
      }
      try {
        const { logits } = session.prefill(ids, { logits: true });
        assert.deepEqual(logits, expected, 'the prompt\'s logits, as in a session that never failed');
        break;
      } catch (error) {
        if (!isOutOfMemory(error)) throw error;
        failures++;
        assert.equal(session.cache.seqLen, 0, `a failed prompt appended ${session.cache.seqLen} positions`);
        assert.equal(session.tokens.length, 0);
      } finally {
        session.free();
      }
      assert.ok(fillers.length > 0, 'the prompt fails with every filler freed');
      fillers.pop().free();
    }
    assert.ok(failures > 0, 'the heap was full enough for the prompt to fail');
  } finally {
    for (const filler of fillers) filler.free();
    llama.free();
  }
});

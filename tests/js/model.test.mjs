// The model runner over C (src/model): GGUF files of every supported tensor
// type, their forward pass against a plain-JS transformer on the same weights
// (tests/js/reference/transformer.mjs, the weights dequantized by
// tests/gguf/types.mjs -- which llama.cpp itself confirms,
// tests/integration/llamacpp-oracle.test.mjs), logits that do not depend on the number
// of threads, and the loader: every kind of source streamed into the heap with
// progress and abort, and files it must refuse refused with nothing left
// behind.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import init, { KvCache, KvCacheError, setThreadLimit, threadCount } from '../../js/index.js';
import { setPoolMinWork } from '../../js/runtime/threads.js';
import { GgufError, Llama, readGguf } from '../../js/llama.js';
import { GEOMETRIES, MIXES, randomLlama, tensorValues } from '../gguf/models.mjs';
import { encodeGguf, encodeGgufHeader } from '../gguf/writer.mjs';
import { GGML_TYPES } from '../gguf/types.mjs';
import { referenceLogits } from './reference/transformer.mjs';
import { codedActivations } from '../gguf/activations.mjs';
import { compareLogits } from '../runtimes/wllama.mjs';

before(() => init());

const TOKENS = Array.from({ length: 48 }, (_, i) => (i === 0 ? 1 : 3 + ((i * 7919) % 1000)));
const files = new Map(); // mix -> { spec, bytes }

function model(mix) {
  if (!files.has(mix)) {
    const spec = randomLlama(GEOMETRIES.tiny, { mix, seed: 7 });
    files.set(mix, { spec, bytes: encodeGguf(spec) });
  }
  return files.get(mix);
}

/** The logits of every token through a fresh cache of `mode`, one prefill. */
function logitsOf(llama, tokens, mode = 'f32') {
  const { numLayers, numKvHeads, headDim } = llama.config;
  const cache = new KvCache({ numLayers, numKvHeads, headDim, mode });
  try {
    return llama.forward(cache, tokens);
  } finally {
    cache.free();
  }
}

/** Mean KL(reference || ours) and top-1 agreement over every position. */
function agreement(reference, ours, vocab, positions) {
  let kl = 0;
  let agree = 0;
  for (let p = 0; p < positions; p++) {
    const r = compareLogits(reference.subarray(p * vocab, (p + 1) * vocab), ours.subarray(p * vocab, (p + 1) * vocab));
    kl += r.kl;
    agree += r.top1Agrees;
  }
  return { kl: kl / positions, top1: agree / positions };
}

for (const mix of MIXES) {
  test(`a ${mix} file runs as the plain-JS transformer computes on its weights and on its activations coded as llama.cpp codes them (mean KL below 1e-3, top-1 above 95%)`, () => {
    const { spec, bytes } = model(mix);
    const llama = Llama.fromGguf(bytes);
    try {
      const counts = {};
      for (const info of llama.tensors.values()) counts[info.type] = (counts[info.type] ?? 0) + 1;
      if (GGML_TYPES[mix]) assert.ok(counts[mix] > 0, `the file holds ${mix} tensors: ${JSON.stringify(counts)}`);
      const typeOf = (name) => spec.tensors.find((t) => t.name === name).type;
      const reference = referenceLogits({
        config: llama.config,
        tensor: (name) => tensorValues(spec, name),
        has: (name) => spec.tensors.some((t) => t.name === name),
        input: (name, x, rows, cols) => codedActivations(typeOf(name), x, rows, cols),
      }, TOKENS);
      const { kl, top1 } = agreement(reference, logitsOf(llama, TOKENS), llama.config.vocabSize, TOKENS.length);
      console.log(`# ${mix}: mean KL(reference || ours) ${kl.toExponential(2)}, top-1 ${(100 * top1).toFixed(1)}%`);
      assert.ok(kl < 1e-3, `mean KL ${kl}`);
      assert.ok(top1 >= 0.95, `top-1 ${top1}`);
    } finally {
      llama.free();
    }
  });
}

test('every type dequantizes in the package as the JS reference does (which llama.cpp confirms), bit for bit', () => {
  for (const name of Object.keys(GGML_TYPES)) {
    const { spec, bytes } = model(name);
    const file = readGguf(bytes);
    for (const tensor of ['token_embd.weight', 'blk.1.ffn_down.weight']) {
      const ours = file.tensor(tensor);
      const reference = tensorValues(spec, tensor);
      assert.deepEqual(new Uint32Array(ours.buffer), new Uint32Array(reference.buffer), `${name} ${tensor}`);
    }
  }
});

test('logits are the same bits on one thread and on every thread, in every type', () => {
  const previous = setPoolMinWork(0); // every product on the pool, small as the tiny model's are
  try {
    for (const mix of ['Q8_0', 'Q4_K_M', 'F16', 'Q5_1']) {
      const llama = Llama.fromGguf(model(mix).bytes);
      setThreadLimit(1);
      const one = logitsOf(llama, TOKENS.slice(0, 24), 'q8');
      setThreadLimit(threadCount());
      const many = logitsOf(llama, TOKENS.slice(0, 24), 'q8');
      assert.ok(threadCount() > 1, 'this runtime runs threads');
      assert.deepEqual(new Uint8Array(many.buffer), new Uint8Array(one.buffer), mix);
      llama.free();
    }
  } finally {
    setPoolMinWork(previous);
  }
});

test('a verify of k tokens gives the logits of k single steps, bit for bit, and keep(n) leaves plain decoding\'s cache', () => {
  const llama = Llama.fromGguf(model('Q4_K_M').bytes);
  const { numLayers, numKvHeads, headDim, vocabSize } = llama.config;
  const make = () => new KvCache({ numLayers, numKvHeads, headDim, mode: 'q8' });
  const plain = make();
  const verify = make();
  llama.forward(plain, TOKENS.slice(0, 30), { logits: 0 });
  llama.forward(verify, TOKENS.slice(0, 30), { logits: 0 });
  const steps = [];
  for (let i = 30; i < 33; i++) steps.push(...llama.forward(plain, [TOKENS[i]]));
  const batch = llama.forward(verify, TOKENS.slice(30, 35), { verify: true });
  assert.deepEqual(batch.subarray(0, 3 * vocabSize), Float32Array.from(steps));
  llama.keep(verify, 3);
  assert.deepEqual(verify.serialize(), plain.serialize(), 'rows, imp and positions: the same snapshot bytes');
  plain.free();
  verify.free();
  llama.free();
});

test('memoryBytes counts the weights and the scratch apart from the cache', () => {
  const { bytes } = model('Q8_0');
  const llama = Llama.fromGguf(bytes);
  const weights = [...llama.tensors.values()].reduce((end, t) => Math.max(end, t.offset + t.bytes), 0) -
    Math.min(...[...llama.tensors.values()].map((t) => t.offset));
  assert.ok(Math.abs(llama.memoryBytes.weights - weights) < 64, `${llama.memoryBytes.weights} bytes of weights for ${weights} of tensors`);
  assert.equal(llama.memoryBytes.scratch, 0, 'nothing run yet');
  logitsOf(llama, TOKENS);
  assert.ok(llama.memoryBytes.scratch > 0);
  llama.free();
  assert.throws(() => llama.memoryBytes, /the model was freed/);
});

// ---- the loader ----

/** A ReadableStream of `bytes` in chunks of `size`; a byte stream (as a fetch's body is) with `type: 'bytes'`. */
function stream(bytes, size, type = undefined) {
  let at = 0;
  return new ReadableStream({
    type,
    pull(controller) {
      if (at >= bytes.length) {
        controller.close();
        return controller.byobRequest?.respond(0); // a byte stream gives a pending reader's buffer back
      }
      controller.enqueue(bytes.slice(at, at + size));
      at += size;
    },
  });
}

test('Llama.load streams bytes, a Blob, a Response or a ReadableStream into the heap, with progress, to the same model', async () => {
  const { bytes } = model('Q6_K');
  const expected = logitsOf(Llama.fromGguf(bytes), TOKENS.slice(0, 8));
  const sources = {
    bytes,
    Blob: new Blob([bytes]),
    Response: new Response(bytes, { headers: { 'content-length': String(bytes.length) } }),
    'a ReadableStream of 1000-byte chunks': stream(bytes, 1000),
    // Read into one buffer by a BYOB reader: each chunk must be taken before the next overwrites it.
    'a ReadableStream of bytes in 3000-byte chunks': stream(bytes, 3000, 'bytes'),
  };
  for (const [what, source] of Object.entries(sources)) {
    const progress = [];
    const llama = await Llama.load(source, { onProgress: (p) => progress.push(p) });
    assert.deepEqual(logitsOf(llama, TOKENS.slice(0, 8)), expected, what);
    assert.equal(progress.at(-1).loaded, bytes.length, what);
    assert.ok(progress.every((p, i) => i === 0 || p.loaded > progress[i - 1].loaded), `${what}: progress grows`);
    const total = what.startsWith('a ReadableStream') ? null : bytes.length;
    assert.ok(progress.every((p) => p.total === total), `${what}: total ${progress[0].total}`);
    llama.free();
  }
});

test('an abort stops the load between chunks, rejects with the signal\'s reason and leaves nothing in the heap', async () => {
  const { bytes } = model('Q8_0');
  const probe = await Llama.load(bytes); // the heap grown once for such a model
  probe.free();
  const controller = new AbortController();
  let chunks = 0;
  const loading = Llama.load(stream(bytes, 4096), {
    signal: controller.signal,
    onProgress: () => (++chunks === 20 ? controller.abort() : undefined),
  });
  await assert.rejects(loading, { name: 'AbortError' });
  assert.equal(chunks, 20, 'no chunk after the abort');
  const again = await Llama.load(bytes); // what the aborted load held is free again
  again.free();
  await assert.rejects(Llama.load(bytes, { signal: AbortSignal.abort() }), { name: 'AbortError' });
});

test('a truncated file is refused naming the tensor cut short, and a file of a tensor type it does not read names the type and what it reads', async () => {
  const { bytes } = model('Q4_0');
  await assert.rejects(Llama.load(bytes.subarray(0, bytes.length - 5000)), (error) =>
    error instanceof GgufError && /^truncated: tensor [a-z0-9_.]+ \(.*Q4_0\) needs bytes \d+\.\.\d+, the file has \d+/.test(error.message));
  assert.throws(() => Llama.fromGguf(bytes.subarray(0, 300)), (error) => error instanceof GgufError && /truncated/.test(error.message));
  // IQ2_XXS, a type ggml has and this runner does not: the writer takes its block shape.
  const IQ2_XXS = { id: 16, name: 'IQ2_XXS', blockSize: 256, blockBytes: 66 };
  const spec = randomLlama(GEOMETRIES.tiny, { mix: 'Q8_0', seed: 2 });
  const tensors = spec.tensors.map((t) => (t.name !== 'blk.1.attn_k.weight' ? t
    : { ...t, type: IQ2_XXS, data: new Uint8Array((t.dims[0] * t.dims[1] / 256) * 66) }));
  await assert.rejects(Llama.load(encodeGguf({ ...spec, tensors })),
    (error) => error instanceof GgufError &&
      error.message === 'tensor blk.1.attn_k.weight has type IQ2_XXS; this runner reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS');
});

test('a model too large for the heap is refused before its tensor data is read, saying how many bytes are missing', async () => {
  // A header whose feed-forward matrices are 6 GiB of F32, and no data at
  // all: the check comes first.
  const header = encodeGgufHeader(randomLlama({ ...GEOMETRIES.tiny, hiddenDim: 1 << 20 }, { mix: 'F32' }));
  let read = 0;
  await assert.rejects(Llama.load(new ReadableStream({
    pull(controller) {
      if (read >= header.length) return controller.error(new Error('the loader read past the header'));
      controller.enqueue(header.slice(read, read + 65536));
      read += 65536;
    },
  }), { contextLength: 100000, cacheMode: 'q8' }), (error) => error instanceof KvCacheError && error.code === 'KVC_E_NOMEM' &&
    /^Llama\.load: \d+ bytes of weights and a 100000-position q8 cache \(\d+ bytes\) do not fit the wasm heap \(at most 4294967296 bytes, room for \d+ more\): \d+ bytes are missing$/.test(error.message));
});

test('a context whose cache passes the 32-bit address space is refused, not wrapped into one that seems to fit', async () => {
  // The tiny geometry's 2 KV heads of 64 channels in f32: 1 KiB a position
  // per layer, so 2^23 positions are 8 GiB a layer (a size_t count of them
  // wrapped to the bookkeeping's 72 MiB, which fit).
  const bytes = encodeGguf(randomLlama(GEOMETRIES.tiny, { mix: 'Q8_0', seed: 3 }));
  await assert.rejects(Llama.load(bytes, { contextLength: 2 ** 23 }), (error) => error instanceof KvCacheError &&
    error.code === 'KVC_E_NOMEM' && error.message.includes('a 8388608-position f32 cache (a layer of it past the address space)') &&
    error.message.endsWith("a layer's cache alone is more than a 32-bit heap holds"));
});

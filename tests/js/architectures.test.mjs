// The runner on each architecture it reads (src/model/arch.c), on tiny random
// files written as llama.cpp's converter writes them (tests/gguf/models.mjs,
// architecture-cases.mjs):
//   - qwen2: q/k/v biases, NeoX RoPE, tied embeddings, no key_length key
//     (a head is dim / heads);
//   - qwen3: an RMSNorm per head of q and k, NeoX RoPE, a head of
//     attention.key_length = 128 channels where dim / heads is 64, its own
//     output.weight;
//   - llama with Llama 3's RoPE scaling: rope_freqs.weight, tied embeddings.
// Each against the plain-JS transformer on the same weights
// (tests/js/reference/transformer.mjs); a reference that leaves out one of an
// architecture's features is shown to be far from the runner, so that the
// bounds tell them apart. Against llama.cpp:
// tests/integration/architectures-llamacpp.test.mjs.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import init, { KvCache } from '../../js/index.js';
import { GgufError, Llama } from '../../js/llama.js';
import { codedActivations } from '../gguf/activations.mjs';
import { tensorValues } from '../gguf/models.mjs';
import { encodeGguf, gguf } from '../gguf/writer.mjs';
import { F32_KL, REFERENCE_TOKENS, TOKENS, VARIANTS, agreement, assertAgrees, shown, spec } from './architecture-cases.mjs';
import { referenceLogits } from './reference/transformer.mjs';

before(() => init());

/** The logits of every token through a fresh f32 cache, one prefill. */
function logitsOf(llama, tokens) {
  const { numLayers, numKvHeads, headDim } = llama.config;
  const cache = new KvCache({ numLayers, numKvHeads, headDim, mode: 'f32' });
  try {
    return llama.forward(cache, tokens);
  } finally {
    cache.free();
  }
}

/**
 * The JS reference's logits on spec's weights, its activations coded as
 * llama.cpp codes them for each weight's type; `config`, `tensor` and `has`
 * can leave a feature out.
 */
function reference(s, config, { tensor = (name) => tensorValues(s, name), has = (name) => s.tensors.some((t) => t.name === name) } = {}) {
  const typeOf = (name) => s.tensors.find((t) => t.name === name).type;
  const input = (name, x, rows, cols) => codedActivations(typeOf(name), x, rows, cols);
  return referenceLogits({ config, tensor, has, input }, REFERENCE_TOKENS);
}

test('the runner reads each architecture\'s geometry from the keys the converter writes', () => {
  const expected = {
    'tiny-qwen2': { architecture: 'qwen2', headDim: 64, keyLength: false, tied: true, ropeFreqs: false },
    'tiny-qwen3': { architecture: 'qwen3', headDim: 128, keyLength: true, tied: false, ropeFreqs: false },
    'tiny-llama3': { architecture: 'llama', headDim: 64, keyLength: false, tied: true, ropeFreqs: true },
  };
  for (const variant of VARIANTS) {
    const s = spec(variant, 'F32');
    const llama = Llama.fromGguf(encodeGguf(s));
    const want = expected[variant];
    assert.equal(llama.config.architecture, want.architecture, variant);
    assert.equal(llama.config.headDim, want.headDim, variant);
    const keys = new Map(s.metadata);
    assert.equal(keys.has(`${want.architecture}.attention.key_length`), want.keyLength, `${variant}: key_length`);
    assert.equal(keys.has(`${want.architecture}.rope.dimension_count`), want.architecture === 'llama', `${variant}: only LlamaModel writes rope.dimension_count`);
    assert.equal(llama.tensors.has('output.weight'), !want.tied, `${variant}: output.weight`);
    assert.equal(llama.tensors.has('rope_freqs.weight'), want.ropeFreqs, `${variant}: rope_freqs.weight`);
    llama.free();
  }
  // qwen3's head is not dim / heads: its projections say so.
  const qwen3 = new Map(spec('tiny-qwen3', 'F32').tensors.map((t) => [t.name, t.dims]));
  assert.deepEqual(qwen3.get('blk.0.attn_q.weight'), [256, 4 * 128]);
  assert.deepEqual(qwen3.get('blk.0.attn_output.weight'), [4 * 128, 256]);
  assert.deepEqual(qwen3.get('blk.0.attn_k_norm.weight'), [128]);
  assert.deepEqual(new Map(spec('tiny-qwen2', 'F32').tensors.map((t) => [t.name, t.dims])).get('blk.1.attn_v.bias'), [2 * 64]);
});

test('rope_freqs.weight is Llama 3\'s: 1 for wavelengths under 2048, 32 over 8192, a smooth rise between', () => {
  // factor 32, low_freq_factor 1, high_freq_factor 4, original context 8192.
  // Base 500000, head 64: pair i turns with wavelength 2 pi 500000^(i / 32),
  // under 2048 up to i = 14, over 8192 from i = 18.
  const factors = tensorValues(spec('tiny-llama3', 'F32'), 'rope_freqs.weight');
  assert.equal(factors.length, 32);
  factors.forEach((f, i) => {
    const wavelength = 2 * Math.PI * 500000 ** (i / 32);
    if (wavelength < 2048) return assert.equal(f, 1, `pair ${i}`);
    if (wavelength > 8192) return assert.equal(f, 32, `pair ${i}`);
    const smooth = (8192 / wavelength - 1) / (4 - 1);
    const expected = 1 / ((1 - smooth) / 32 + smooth);
    assert.ok(Math.abs(f - expected) < 1e-5 * expected && f > factors[i - 1], `pair ${i}: ${f}, in f64 ${expected}`);
  });
  assert.deepEqual([factors.filter((f) => f === 1).length, factors.filter((f) => f === 32).length], [15, 14]);
});

for (const variant of VARIANTS) {
  for (const mix of ['F32', 'Q8_0']) {
    test(`a ${variant} ${mix} file runs as the plain-JS transformer computes on its weights`, () => {
      const s = spec(variant, mix);
      const llama = Llama.fromGguf(encodeGguf(s));
      try {
        const r = agreement(reference(s, llama.config), logitsOf(llama, REFERENCE_TOKENS), llama.config.vocabSize);
        console.log(`# ${variant} ${mix} against the reference: ${shown(r)}`);
        assertAgrees(mix, r);
      } finally {
        llama.free();
      }
    });
  }
}

test('a reference without one of an architecture\'s features is far from the runner: the bounds tell them apart', () => {
  const cases = [
    // [variant, what is left out, config override, tensor override, KL it must exceed]
    ['tiny-qwen2', 'computed as llama (adjacent RoPE pairs, no biases)', { architecture: 'llama' }, null, 0.1],
    ['tiny-qwen2', 'biases zero', {}, { tensor: (s) => (name) => (name.endsWith('.bias') ? new Float32Array(tensorValues(s, name).length) : tensorValues(s, name)) }, 1e-3],
    ['tiny-qwen3', 'computed as llama (adjacent RoPE pairs, no q/k norms)', { architecture: 'llama' }, null, 0.1],
    ['tiny-llama3', 'no rope_freqs.weight', {}, { has: (s) => (name) => name !== 'rope_freqs.weight' && s.tensors.some((t) => t.name === name) }, 1e-6],
  ];
  for (const [variant, what, config, overrides, bound] of cases) {
    const s = spec(variant, 'F32');
    const llama = Llama.fromGguf(encodeGguf(s));
    const options = Object.fromEntries(Object.entries(overrides ?? {}).map(([k, make]) => [k, make(s)]));
    const r = agreement(reference(s, { ...llama.config, ...config }, options), logitsOf(llama, REFERENCE_TOKENS), llama.config.vocabSize);
    console.log(`# ${variant}, reference ${what}: ${shown(r)}`);
    assert.ok(r.meanKl > bound && r.meanKl > 100 * F32_KL, `${variant}, ${what}: mean KL ${r.meanKl}`);
    llama.free();
  }
});

test('tied embeddings: a file without output.weight runs as the same file whose output.weight is token_embd\'s bytes, bit for bit', () => {
  for (const mix of ['F32', 'Q8_0']) {
    const tied = spec('tiny-qwen2', mix);
    const embedding = tied.tensors.find((t) => t.name === 'token_embd.weight');
    const untied = { ...tied, tensors: [...tied.tensors, { ...embedding, name: 'output.weight' }] };
    const [a, b] = [tied, untied].map((s) => Llama.fromGguf(encodeGguf(s)));
    assert.ok(!a.tensors.has('output.weight') && b.tensors.has('output.weight'));
    assert.deepEqual(logitsOf(a, TOKENS.slice(0, 16)), logitsOf(b, TOKENS.slice(0, 16)), mix);
    a.free();
    b.free();
  }
});

test('a nemotron_h mixture of experts is refused by a sentence, and nemotron_h_moe is an architecture the runner does not read', () => {
  const s = spec('tiny-nemotron-h', 'F32');
  const experts = [...s.metadata.filter(([key]) => key !== 'nemotron_h.expert_count'), ['nemotron_h.expert_count', gguf.u32(8)]];
  assert.throws(() => Llama.fromGguf(encodeGguf({ ...s, metadata: experts })),
    (error) => error instanceof GgufError && error.message === 'metadata nemotron_h.expert_count is 8: a mixture-of-experts FFN, which this runner does not compute');
  const moe = s.metadata.map(([key, value]) => (key === 'general.architecture' ? [key, 'nemotron_h_moe'] : [key.replace(/^nemotron_h\./, 'nemotron_h_moe.'), value]));
  assert.throws(() => Llama.fromGguf(encodeGguf({ ...s, metadata: moe })),
    (error) => error instanceof GgufError && /^architecture nemotron_h_moe is not supported/.test(error.message));
});

test('an architecture the runner does not read is refused, naming it and the ones it reads; so is a block without its architecture\'s tensors', () => {
  const s = spec('tiny-qwen2', 'F32');
  const metadata = s.metadata.map(([key, value]) => (key === 'general.architecture' ? [key, 'gemma'] : [key.replace(/^qwen2\./, 'gemma.'), value]));
  assert.throws(() => Llama.fromGguf(encodeGguf({ ...s, metadata })),
    (error) => error instanceof GgufError && error.message === 'architecture gemma is not supported; this runner reads llama, qwen2, qwen3, gemma3, gemma-embedding, bert, nomic-bert, gemma4, smollm3, mistral3, phi3, lfm2, qwen35, falcon-h1, granitehybrid, nemotron_h');
  // A multimodal projector (LFM2-VL's, Qwen3.5's vision tower) is a file of its own, architecture clip.
  const clip = s.metadata.map(([key, value]) => (key === 'general.architecture' ? [key, 'clip'] : [key.replace(/^qwen2\./, 'clip.'), value]));
  assert.throws(() => Llama.fromGguf(encodeGguf({ ...s, metadata: clip })),
    (error) => error instanceof GgufError && /vision or audio encoder .*load the language model's GGUF/.test(error.message));
  for (const [variant, name] of [['tiny-qwen2', 'blk.1.attn_k.bias'], ['tiny-qwen3', 'blk.0.attn_q_norm.weight'],
    ['tiny-lfm2', 'blk.0.shortconv.conv.weight'], ['tiny-qwen35', 'blk.1.ssm_a'], ['tiny-qwen35', 'blk.3.attn_q_norm.weight'],
    ['tiny-gemma4', 'per_layer_proj_norm.weight'], ['tiny-gemma4', 'blk.2.inp_gate.weight'], ['tiny-gemma4', 'blk.7.attn_q_norm.weight'],
    ['tiny-gemma4', 'blk.4.attn_k.weight'], ['tiny-nemotron-h', 'blk.1.ffn_up.weight'], ['tiny-nemotron-h', 'blk.3.attn_k.weight'],
    ['tiny-nemotron-h', 'blk.4.attn_norm.weight']]) {
    const whole = spec(variant, 'F32');
    const without = { ...whole, tensors: whole.tensors.filter((t) => t.name !== name) };
    assert.throws(() => Llama.fromGguf(encodeGguf(without)), (error) => error instanceof GgufError && error.message === `tensor ${name} is missing`);
  }
});

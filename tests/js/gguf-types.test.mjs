// The GGUF writer and the tensor types of tests/gguf/: f16 and bf16
// rounding, each type's encoder, random blocks and dequantizer, the writer
// read back by the package's reader, and llama.cpp's type mixes. (Whether the
// dequantizers mean what ggml means is llamacpp-oracle.test.mjs's question.)
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { f16round } from '@petamoriken/float16';
import init from '../../js/index.js';
import { readGguf } from '../../js/model/gguf.js';
import { rng } from '../../support/synthetic.mjs';
import { f16Bits, f16Value, GGML_TYPES, tensorBytes } from '../gguf/types.mjs';
import { GEOMETRIES, digitPrompt, embeddingProbe, everyValueType, randomLlama, syntheticVocab, tensorType, tensorValues, typeCounts } from '../gguf/models.mjs';
import { encodeGguf, gguf } from '../gguf/writer.mjs';

const rms = (x) => Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length);

before(() => init());

test('f16 rounding matches the float16 polyfill, ties to even, subnormals and overflow included', () => {
  const r = rng(3);
  const values = [0, -0, 1, -1, 65504, 65519.99, 65520, 1e9, -1e9, 2 ** -24, 2 ** -25, 3 * 2 ** -26, 2 ** -14, 2 ** -14 - 2 ** -25,
    1 + 2 ** -11, 1 + 3 * 2 ** -11, Infinity, -Infinity];
  for (let i = 0; i < 20000; i++) values.push((r.unit() - 0.5) * 2 ** (r.int(50) - 30));
  for (const x of values) {
    const ours = f16Value(f16Bits(x));
    assert.ok(Object.is(ours, f16round(x)), `f16 of ${x}: ours ${ours}, polyfill ${f16round(x)}`);
  }
  assert.ok(Number.isNaN(f16Value(f16Bits(NaN))));
});

test('bf16 keeps the top 16 bits of f32, rounded to nearest even', () => {
  const bf16 = (x) => GGML_TYPES.BF16.decode(GGML_TYPES.BF16.encode([x]), 1)[0];
  assert.equal(bf16(1 + 2 ** -8), 1, 'a tie goes to the even neighbour');
  assert.equal(bf16(1 + 3 * 2 ** -8), 1 + 2 ** -6, 'a tie goes to the even neighbour');
  assert.equal(bf16(1 + 2 ** -8 + 2 ** -20), 1 + 2 ** -7, 'above a tie rounds up');
  assert.equal(bf16(-3.5), -3.5);
  assert.ok(Number.isNaN(bf16(NaN)));
});

test('every type has ggml\'s block size and bytes per block', () => {
  const ggml = { F32: [1, 4], F16: [1, 2], BF16: [1, 2], Q8_0: [32, 34], Q4_0: [32, 18], Q4_1: [32, 20], Q5_0: [32, 22], Q5_1: [32, 24],
    Q4_K: [256, 144], Q5_K: [256, 176], Q6_K: [256, 210],
    Q2_K: [256, 84], Q3_K: [256, 110], IQ4_NL: [32, 18], IQ4_XS: [256, 136] };
  const ids = { F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q8_0: 8, Q4_K: 12, Q5_K: 13, Q6_K: 14, BF16: 30,
    Q2_K: 10, Q3_K: 11, IQ4_NL: 20, IQ4_XS: 23 };
  assert.deepEqual(Object.keys(GGML_TYPES).sort(), Object.keys(ggml).sort());
  for (const [name, [blockSize, blockBytes]] of Object.entries(ggml)) {
    const type = GGML_TYPES[name];
    assert.deepEqual([type.id, type.blockSize, type.blockBytes], [ids[name], blockSize, blockBytes], name);
    assert.equal(type.encode(new Float32Array(512)).length, tensorBytes(type, 512), `${name} encodes 512 values in ${tensorBytes(type, 512)} bytes`);
  }
});

test('each type\'s encoder and dequantizer round-trip f32 within its precision', () => {
  // Relative RMS error bounds: what the bits allow with a plain absmax or min/max scale
  // (Q2_K, Q3_K: with ggml's reference quantizers; IQ4_NL and IQ4_XS: with
  // ggml's search for the scale, about 0.08 measured).
  const bounds = { F32: 0, F16: 5e-4, BF16: 4e-3, Q8_0: 0.01, Q4_0: 0.12, Q4_1: 0.12, Q5_0: 0.06, Q5_1: 0.06, Q4_K: 0.12, Q5_K: 0.06, Q6_K: 0.03,
    Q2_K: 0.32, Q3_K: 0.15, IQ4_NL: 0.1, IQ4_XS: 0.1 };
  const r = rng(11);
  const n = 256 * 32;
  // Normal values, one block of constants, one of zeros, one with an outlier.
  const x = Float32Array.from({ length: n }, () => 0.05 * r.normal());
  x.fill(0.02, 256, 512);
  x.fill(0, 512, 768);
  x[1000] = 3;
  for (const [name, type] of Object.entries(GGML_TYPES)) {
    const y = type.decode(type.encode(x), n);
    const err = rms(x.map((v, i) => v - y[i])) / rms(x);
    assert.ok(err <= bounds[name], `${name}: relative RMS error ${err} above ${bounds[name]}`);
    assert.ok(y.subarray(512, 768).every((v) => v === 0), `${name} keeps a block of zeros zero`);
  }
});

test('each type\'s random blocks are finite values of about the RMS asked for', () => {
  for (const [name, type] of Object.entries(GGML_TYPES)) {
    for (const target of [0.02, 1]) {
      const y = type.decode(type.random(256 * 64, rng(5), target), 256 * 64);
      assert.ok(y.every(Number.isFinite), `${name}: every value finite`);
      const ratio = rms(y) / target;
      assert.ok(ratio > 0.8 && ratio < 1.25, `${name}: RMS ${rms(y)} for ${target}`);
      const mean = y.reduce((a, b) => a + b, 0) / y.length;
      assert.ok(Math.abs(mean) < 0.1 * target, `${name}: mean ${mean} near zero`);
    }
  }
});

test('the writer\'s metadata of every value type and F32/F16 tensors read back through the package\'s reader', () => {
  for (const version of [1, 2, 3]) {
    const values = Float32Array.from({ length: 64 * 3 }, (_, i) => Math.sin(i));
    const bytes = encodeGguf({
      version,
      metadata: [...everyValueType(), ['nested', gguf.array('array', [gguf.array('u8', [1, 2]), gguf.array('string', ['x'])])],
        ['general.alignment', gguf.u32(64)]],
      tensors: [{ name: 'a', dims: [64, 3], type: 'F32', data: GGML_TYPES.F32.encode(values) },
        { name: 'b', dims: [64], type: 'F16', data: () => GGML_TYPES.F16.encode(values.subarray(0, 64)) }],
    });
    const file = readGguf(bytes);
    assert.equal(file.version, version);
    for (const [key, typed] of everyValueType()) {
      const expected = typeof typed === 'object' && 'value' in typed ? typed.value : typed;
      const read = file.get(key);
      // A 64-bit integer reads as a number where that is exact, else as a bigint.
      const plain = (v) => (typeof v === 'bigint' && Number.isSafeInteger(Number(v)) ? Number(v) : v);
      if (Array.isArray(expected)) assert.deepEqual(read, expected.map(plain), key);
      else if (typed.type === 'f32') assert.equal(read, Math.fround(expected), key);
      else assert.equal(read, plain(expected), key);
    }
    assert.deepEqual(file.get('nested'), [[1, 2], ['x']]);
    assert.deepEqual(file.tensor('a'), values);
    assert.equal(file.tensors.get('a').offset % 64, 0, 'data aligned to general.alignment');
    assert.deepEqual(file.tensor('b'), GGML_TYPES.F16.decode(GGML_TYPES.F16.encode(values.subarray(0, 64)), 64));
  }
});

test('the writer refuses untyped numbers and rows that are not whole blocks', () => {
  assert.throws(() => encodeGguf({ metadata: [['llama.block_count', 2]] }), /give numbers a GGUF type/);
  assert.throws(() => encodeGguf({ tensors: [{ name: 't', dims: [100, 2], type: 'Q4_K', data: new Uint8Array(0) }] }), /not whole Q4_K blocks/);
  assert.throws(() => encodeGguf({ tensors: [{ name: 't', dims: [32], type: 'Q8_0', data: new Uint8Array(3) }] }), /must be 34 bytes/);
});

test('the Q4_K_M mix puts Q6_K where llama.cpp does and falls back where 256 does not divide a row', () => {
  const smol = GEOMETRIES['smollm2-135m'];
  const spec = randomLlama(smol, { mix: 'Q4_K_M' });
  const type = (name) => spec.tensors.find((t) => t.name === name).type;
  // 30 layers: use_more_bits is layers 0-2, 27-29 and every third from 5.
  const more = [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29];
  for (let l = 0; l < 30; l++) {
    assert.equal(type(`blk.${l}.ffn_down.weight`), more.includes(l) ? 'Q6_K' : 'Q4_K', `ffn_down ${l} (rows of 1536)`);
    assert.equal(type(`blk.${l}.attn_v.weight`), more.includes(l) ? 'Q8_0' : 'Q5_0', `attn_v ${l} (rows of 576)`);
    assert.equal(type(`blk.${l}.attn_q.weight`), 'Q5_0');
  }
  assert.equal(type('token_embd.weight'), 'Q8_0', 'the tied embedding is the output: Q6_K, and Q8_0 at 576');
  assert.equal(type('blk.0.attn_norm.weight'), 'F32');
  const llama = randomLlama(GEOMETRIES['llama-3.2-1b'], { mix: 'Q4_K_M' });
  assert.deepEqual(typeCounts(llama), { Q6_K: 1 + 2 * 8, Q4_K: 16 * 7 - 2 * 8, F32: 16 * 2 + 2 }, 'norms, and rope_freqs.weight');
  assert.equal(tensorType('Q4_0', { name: 'blk.0.ffn_down.weight', dims: [172, 64] }), 'F16', 'no 32-block divides 172');
  assert.equal(tensorType('Q6_K', { name: 'blk.0.attn_q.weight', dims: [64, 64] }), 'Q8_0');
});

test('the IQ4_XS mix puts Q5_K and Q6_K where llama.cpp does and falls back to IQ4_NL where 256 does not divide a row', () => {
  const smol = randomLlama(GEOMETRIES['smollm2-135m'], { mix: 'IQ4_XS_MIX' });
  const type = (name) => smol.tensors.find((t) => t.name === name).type;
  for (let l = 0; l < 30; l++) {
    // The first eighth of 30 layers: 0..2. Three query heads to a key head: attn_v stays IQ4_XS.
    assert.equal(type(`blk.${l}.ffn_down.weight`), l < 3 ? 'Q5_K' : 'IQ4_XS', `ffn_down ${l} (rows of 1536)`);
    assert.equal(type(`blk.${l}.attn_v.weight`), 'IQ4_NL', `attn_v ${l} (rows of 576)`);
    assert.equal(type(`blk.${l}.ffn_gate.weight`), 'IQ4_NL');
  }
  assert.equal(type('token_embd.weight'), 'Q8_0', 'the tied embedding is the output: Q6_K, and Q8_0 at 576');
  const llama = randomLlama(GEOMETRIES['llama-3.2-1b'], { mix: 'IQ4_XS_MIX' });
  // 32 query heads to 8 key heads: attn_v Q5_K in every layer, and ffn_down in layers 0 and 1.
  assert.deepEqual(typeCounts(llama), { Q6_K: 1, Q5_K: 16 + 2, IQ4_XS: 16 * 7 - 16 - 2, F32: 16 * 2 + 2 });
  assert.equal(tensorType('IQ4_NL', { name: 'blk.0.ffn_down.weight', dims: [172, 64] }), 'F16', 'no 32-block divides 172');
  assert.equal(tensorType('IQ4_XS', { name: 'blk.0.attn_q.weight', dims: [64, 64] }), 'IQ4_NL');
});

test('the Q3_K_M mix puts Q4_K, Q5_K and Q6_K where llama.cpp does and Q2_K and Q3_K fall back to Q4_0', () => {
  // 16 layers: ffn_down's first sixteenth (layer 0) Q5_K, attn_v's first two.
  const llama = randomLlama(GEOMETRIES['llama-3.2-1b'], { mix: 'Q3_K_M' });
  const type = (name) => llama.tensors.find((t) => t.name === name).type;
  for (let l = 0; l < 16; l++) {
    assert.equal(type(`blk.${l}.attn_v.weight`), l < 2 ? 'Q5_K' : 'Q4_K', `attn_v ${l}`);
    assert.equal(type(`blk.${l}.ffn_down.weight`), l < 1 ? 'Q5_K' : 'Q4_K', `ffn_down ${l}`);
    assert.equal(type(`blk.${l}.attn_output.weight`), 'Q4_K', `attn_output ${l}`);
    for (const name of ['attn_q', 'attn_k', 'ffn_gate', 'ffn_up']) assert.equal(type(`blk.${l}.${name}.weight`), 'Q3_K', `${name} ${l}`);
  }
  assert.equal(type('token_embd.weight'), 'Q6_K', 'the tied embedding is the output');
  assert.deepEqual(typeCounts(llama), { Q3_K: 16 * 4, Q4_K: 14 + 15 + 16, Q5_K: 2 + 1, Q6_K: 1, F32: 16 * 2 + 2 });
  for (const mix of ['Q2_K', 'Q3_K']) {
    assert.equal(tensorType(mix, { name: 'blk.0.attn_q.weight', dims: [576, 576] }), 'Q4_0', `${mix} in rows of 576`);
    assert.equal(tensorType(mix, { name: 'blk.0.ffn_down.weight', dims: [172, 64] }), 'F16', `${mix} in rows of 172`);
  }
  const smol = randomLlama(GEOMETRIES['smollm2-135m'], { mix: 'Q3_K_M' });
  assert.equal(smol.tensors.find((t) => t.name === 'blk.0.attn_q.weight').type, 'Q4_0', 'Q3_K in rows of 576');
  assert.equal(smol.tensors.find((t) => t.name === 'blk.0.attn_v.weight').type, 'Q5_1', 'Q5_K in rows of 576');
});

test('the synthetic vocabulary spells a digit prompt of n tokens and the probe zeroes its block', () => {
  const vocab = syntheticVocab(49152);
  assert.equal(new Set(vocab.tokens).size, 49152, 'every piece once');
  assert.equal(vocab.tokens[3 + 0x0a], '<0x0A>');
  assert.equal(digitPrompt(512).length, 510);
  const probe = embeddingProbe('Q5_K', { dim: 512 });
  assert.ok(tensorValues(probe, 'blk.0.ffn_down.weight').every((v) => v === 0));
  assert.ok(tensorValues(probe, 'output_norm.weight').every((v) => v === 1));
  assert.equal(probe.tensors.find((t) => t.name === 'token_embd.weight').type, 'Q5_K');
});

// The ggml tensor types a GGUF file can hold that the package is to read, one
// row each: the type's id and block geometry, an encoder from f32, random
// valid blocks, and a reference dequantizer -- written from the block layouts
// ggml defines (ggml-common.h) and the semantics of its dequantize_row_*
// (ggml-quants.c), not from their code.
//
//   const type = GGML_TYPES.Q4_K;
//   const bytes = type.encode(values);            // values.length a multiple of type.blockSize
//   const back = type.decode(bytes, values.length);
//   const weights = type.random(n, rng(1), 0.05); // valid blocks, values of RMS about 0.05
//
// The dequantizers compute in f32 step by step as ggml's scalar code does
// (Math.fround after every operation), so their output is ggml's bit for bit.
// The encoders are simple (absmax, min/max, a 6-bit scale per sub-block), not
// ggml's search for the best scale: any valid block is a valid weight -- but
// for Q2_K and Q3_K, whose 2 and 3 bits a plain absmax leaves too coarse, they
// port ggml's reference quantizers (quantize_row_q2_K_ref, q3_K_ref) in f32,
// and IQ4_NL and IQ4_XS port ggml's reference quantizer, whose search is what
// picks their table indices.
const f = Math.fround;

// f16 by hand: the polyfill's per-value calls take microseconds, and a
// model's worth of scales is millions of them. (The tests check these
// against it.)
const scratch = new Float32Array(1);
const scratchBits = new Uint32Array(scratch.buffer);

/** The f16 bits nearest to `value` (ties to even), as ggml's FP32_TO_FP16 rounds. */
export function f16Bits(value) {
  scratch[0] = value;
  const bits = scratchBits[0];
  const sign = (bits >>> 16) & 0x8000;
  const abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00; // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00; // 65520 and up round to infinity
  if (abs < 0x38800000) {
    // Below 2^−14: a subnormal f16, a multiple of 2^−24.
    const t = Math.abs(scratch[0]) * 2 ** 24;
    let q = Math.round(t);
    if (q - t === 0.5 && (q & 1)) q -= 1;
    return sign | q;
  }
  // Rebias the exponent (127 → 15) and round the 13 dropped bits to even.
  return sign | ((abs - 0x38000000 + 0xfff + ((abs >>> 13) & 1)) >>> 13);
}

/** Every f16 as f32, by its bits. */
const F16_VALUES = Float32Array.from({ length: 65536 }, (_, h) => {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 31;
  const fraction = h & 1023;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * (1024 + fraction) * 2 ** (exponent - 25);
});

/** The f32 value of the f16 bits `h`. */
export const f16Value = (h) => F16_VALUES[h & 0xffff];
const f16At = (bytes, at) => F16_VALUES[bytes[at] | (bytes[at + 1] << 8)];
function setF16(bytes, at, value) {
  const h = f16Bits(value);
  bytes[at] = h & 255;
  bytes[at + 1] = h >> 8;
}
const f16round = (value) => F16_VALUES[f16Bits(value)];

/** Nearest integer, ties away from zero (C's roundf), clamped to [lo, hi]. */
function quant(x, lo, hi) {
  const q = Math.sign(x) * Math.round(Math.abs(x));
  return Math.min(hi, Math.max(lo, Number.isFinite(q) ? q : 0));
}

/** The element of largest magnitude of values[from .. from + n), with its sign. */
function signedMax(values, from, n) {
  let max = 0;
  for (let i = from; i < from + n; i++) if (Math.abs(values[i]) > Math.abs(max)) max = values[i];
  return max;
}

function minMax(values, from, n) {
  let min = Infinity;
  let max = -Infinity;
  for (let i = from; i < from + n; i++) {
    min = Math.min(min, values[i]);
    max = Math.max(max, values[i]);
  }
  return { min, max };
}

/** n random bytes from a generator of uniforms in [0, 1) (each draw gives 32 bits). */
function randomBytes(n, random) {
  const out = new Uint8Array(Math.ceil(n / 4) * 4);
  const words = new Uint32Array(out.buffer);
  for (let i = 0; i < words.length; i++) words[i] = random.unit() * 4294967296;
  return out.subarray(0, n);
}

/** A scale of about `base` (between 0.5 and 1.5 times it), with a random sign when `signed`. */
function randomScale(random, base, signed) {
  const scale = base * (0.5 + random.unit());
  return signed && random.unit() < 0.5 ? -scale : scale;
}

// ---------------------------------------------------------------------------
// Types without blocks: one value per element, random values normal.

/** f32 bits to bf16 as ggml rounds them: to nearest, ties to even; a NaN stays a (quiet) NaN. */
function bf16Bits(bits) {
  if ((bits & 0x7fffffff) > 0x7f800000) return (bits >>> 16) | 64;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

function elementwise({ id, name, bytes, encode, decode }) {
  return {
    id, name, blockSize: 1, blockBytes: bytes, encode,
    // A copy first: the data may sit at any offset of a file.
    decode: (data, count) => decode(data.slice(0, count * bytes).buffer),
    // Uniform in ±rms·√3 (RMS `rms`): cheaper than normal, and as valid.
    random(count, random, rms) {
      const values = new Float32Array(count);
      for (let i = 0; i < count; i++) values[i] = rms * Math.sqrt(3) * (2 * random.unit() - 1);
      return encode(values);
    },
  };
}

const F32 = elementwise({
  id: 0, name: 'F32', bytes: 4,
  encode: (values) => new Uint8Array(Float32Array.from(values).buffer),
  decode: (buffer) => new Float32Array(buffer),
});

/** Each value as 16 bits `bitsOf(f32 bits, value)`, and back through `valueOf(u16)`. */
function halfWidth({ id, name, bitsOf, valueOf }) {
  return elementwise({
    id, name, bytes: 2,
    encode(values) {
      const out = new Uint16Array(values.length);
      const f32 = Float32Array.from(values);
      const u32 = new Uint32Array(f32.buffer);
      for (let i = 0; i < out.length; i++) out[i] = bitsOf(u32[i], f32[i]);
      return new Uint8Array(out.buffer);
    },
    decode(buffer) {
      const h = new Uint16Array(buffer);
      const out = new Float32Array(h.length);
      for (let i = 0; i < out.length; i++) out[i] = valueOf(h[i]);
      return out;
    },
  });
}

const F16 = halfWidth({ id: 1, name: 'F16', bitsOf: (_, value) => f16Bits(value), valueOf: f16Value });

const bf16Scratch = new Uint32Array(1);
const bf16View = new Float32Array(bf16Scratch.buffer);
const BF16 = halfWidth({
  id: 30, name: 'BF16', bitsOf: bf16Bits,
  valueOf: (h) => {
    bf16Scratch[0] = h << 16;
    return bf16View[0];
  },
});

// ---------------------------------------------------------------------------
// Blocks of 32 with one f16 scale (and a min for _1): x = d·q (+ m).

/**
 * A 32-element type storing `bits`-bit codes: the low 4 bits of elements j and
 * j + 16 share byte j of qs (j low, j + 16 high); the fifth bit of element i,
 * if any, is bit i of a little-endian u32 qh. `offset` is what a code has
 * subtracted (8 or 16 for the symmetric _0 types, 0 for _1 with its min).
 */
function block32({ id, name, bits, withMin }) {
  const headerBytes = withMin ? 4 : 2;
  const qhAt = headerBytes;
  const qsAt = headerBytes + (bits === 5 ? 4 : 0);
  const blockBytes = qsAt + 16;
  const levels = 1 << bits;
  const offset = withMin ? 0 : levels / 2;

  const store = (out, at, codes) => {
    let qh = 0;
    for (let j = 0; j < 16; j++) {
      out[at + qsAt + j] = (codes[j] & 15) | ((codes[j + 16] & 15) << 4);
      qh |= ((codes[j] >> 4) & 1) << j;
      qh |= ((codes[j + 16] >> 4) & 1) << (j + 16);
    }
    if (bits === 5) new DataView(out.buffer, out.byteOffset + at + qhAt, 4).setUint32(0, qh >>> 0, true);
  };

  return {
    id, name, blockSize: 32, blockBytes,
    encode(values) {
      const blocks = values.length / 32;
      const out = new Uint8Array(blocks * blockBytes);
      const codes = new Uint8Array(32);
      for (let b = 0; b < blocks; b++) {
        const at = b * blockBytes;
        let d;
        let m = 0;
        if (withMin) {
          const { min, max } = minMax(values, 32 * b, 32);
          setF16(out, at, (max - min) / (levels - 1));
          setF16(out, at + 2, min);
          d = f16At(out, at);
          m = f16At(out, at + 2);
        } else {
          // The element of largest magnitude takes the code −levels/2 exactly.
          setF16(out, at, signedMax(values, 32 * b, 32) / -offset);
          d = f16At(out, at);
        }
        for (let j = 0; j < 32; j++) codes[j] = d ? quant((values[32 * b + j] - m) / d + offset, 0, levels - 1) : offset;
        store(out, at, codes);
      }
      return out;
    },
    decode(data, count) {
      const out = new Float32Array(count);
      const view = new DataView(data.buffer, data.byteOffset, data.length);
      for (let b = 0; b < count / 32; b++) {
        const at = b * blockBytes;
        const d = f16At(data, at);
        const m = withMin ? f16At(data, at + 2) : 0;
        const qh = bits === 5 ? view.getUint32(at + qhAt, true) : 0;
        for (let j = 0; j < 16; j++) {
          const byte = data[at + qsAt + j];
          const low = (byte & 15) | (((qh >>> j) & 1) << 4);
          const high = (byte >> 4) | (((qh >>> (j + 16)) & 1) << 4);
          out[32 * b + j] = withMin ? f(f(low * d) + m) : f((low - offset) * d);
          out[32 * b + j + 16] = withMin ? f(f(high * d) + m) : f((high - offset) * d);
        }
      }
      return out;
    },
    random(count, random, rms) {
      const blocks = count / 32;
      const out = randomBytes(blocks * blockBytes, random);
      // Uniform codes: RMS of (q − offset) for the symmetric types, spread of q for _1.
      const spread = withMin ? Math.sqrt((levels * levels - 1) / 12) : Math.sqrt(((levels * levels) + 2) / 12);
      for (let b = 0; b < blocks; b++) {
        const d = randomScale(random, rms / spread, !withMin);
        setF16(out, b * blockBytes, d);
        // The min centres the block's values on zero, give or take a step.
        if (withMin) setF16(out, b * blockBytes + 2, -f16round(d) * ((levels - 1) / 2 + (random.unit() - 0.5)));
      }
      return out;
    },
  };
}

const Q8_0 = {
  id: 8, name: 'Q8_0', blockSize: 32, blockBytes: 34,
  encode(values) {
    const blocks = values.length / 32;
    const out = new Uint8Array(blocks * 34);
    const qs = new Int8Array(out.buffer);
    for (let b = 0; b < blocks; b++) {
      setF16(out, 34 * b, Math.abs(signedMax(values, 32 * b, 32)) / 127);
      const d = f16At(out, 34 * b);
      for (let j = 0; j < 32; j++) qs[34 * b + 2 + j] = d ? quant(values[32 * b + j] / d, -127, 127) : 0;
    }
    return out;
  },
  decode(data, count) {
    const out = new Float32Array(count);
    const qs = new Int8Array(data.buffer, data.byteOffset, data.length);
    for (let b = 0; b < count / 32; b++) {
      const d = f16At(data, 34 * b);
      for (let j = 0; j < 32; j++) out[32 * b + j] = f(qs[34 * b + 2 + j] * d);
    }
    return out;
  },
  random(count, random, rms) {
    const blocks = count / 32;
    const out = randomBytes(blocks * 34, random); // every int8 code, −128 included
    for (let b = 0; b < blocks; b++) setF16(out, 34 * b, randomScale(random, rms / 73.9, true));
    return out;
  },
};

// ---------------------------------------------------------------------------
// K-quants: super-blocks of 256.

/** The 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes at `at`. */
function scaleMinK4(data, at, j) {
  if (j < 4) return [data[at + j] & 63, data[at + j + 4] & 63];
  return [
    (data[at + j + 4] & 15) | ((data[at + j - 4] >> 6) << 4),
    (data[at + j + 4] >> 4) | ((data[at + j] >> 6) << 4),
  ];
}

/** Packs eight 6-bit scales and mins into the 12 bytes at `at`, as scaleMinK4 reads them. */
function packScaleMinK4(out, at, scales, mins) {
  for (let j = 0; j < 4; j++) {
    out[at + j] = (scales[j] & 63) | ((scales[j + 4] >> 4) << 6);
    out[at + j + 4] = (mins[j] & 63) | ((mins[j + 4] >> 4) << 6);
    out[at + j + 8] = (scales[j + 4] & 15) | ((mins[j + 4] & 15) << 4);
  }
}

/**
 * Q4_K and Q5_K: d, dmin (f16), 12 bytes of eight 6-bit (scale, min) pairs, then
 * for Q5_K a 32-byte qh, then 128 bytes qs. Element 64c + l (l < 32) is the low
 * nibble of qs[32c + l] in sub-block 2c, element 64c + 32 + l its high nibble in
 * sub-block 2c + 1; Q5_K adds 16 where bit 2c (resp. 2c + 1) of qh[l] is set.
 * x = d·scale·q − dmin·min.
 */
function kQuantWithMin({ id, name, bits }) {
  const qhAt = 16;
  const qsAt = bits === 5 ? 48 : 16;
  const blockBytes = qsAt + 128;
  const top = (1 << bits) - 1;

  const storeCodes = (out, at, codes) => {
    for (let c = 0; c < 4; c++) {
      for (let l = 0; l < 32; l++) {
        const low = codes[64 * c + l];
        const high = codes[64 * c + 32 + l];
        out[at + qsAt + 32 * c + l] = (low & 15) | ((high & 15) << 4);
        if (bits === 5) out[at + qhAt + l] |= ((low >> 4) << (2 * c)) | ((high >> 4) << (2 * c + 1));
      }
    }
  };

  return {
    id, name, blockSize: 256, blockBytes,
    encode(values) {
      const blocks = values.length / 256;
      const out = new Uint8Array(blocks * blockBytes);
      const codes = new Uint8Array(256);
      const subScale = new Float64Array(8);
      const subMin = new Float64Array(8);
      const scales = new Uint8Array(8);
      const mins = new Uint8Array(8);
      for (let b = 0; b < blocks; b++) {
        const at = b * blockBytes;
        // Each sub-block of 32 spans [−min, −min + top·scale], its min at most 0.
        for (let j = 0; j < 8; j++) {
          const { min, max } = minMax(values, 256 * b + 32 * j, 32);
          subMin[j] = -Math.min(min, 0);
          subScale[j] = (max + subMin[j]) / top;
        }
        setF16(out, at, Math.max(...subScale) / 63);
        setF16(out, at + 2, Math.max(...subMin) / 63);
        const d = f16At(out, at);
        const dmin = f16At(out, at + 2);
        for (let j = 0; j < 8; j++) {
          scales[j] = d ? quant(subScale[j] / d, 0, 63) : 0;
          mins[j] = dmin ? quant(subMin[j] / dmin, 0, 63) : 0;
        }
        packScaleMinK4(out, at + 4, scales, mins);
        for (let j = 0; j < 8; j++) {
          const step = f(d * scales[j]);
          const shift = f(dmin * mins[j]);
          for (let l = 0; l < 32; l++) codes[32 * j + l] = step ? quant((values[256 * b + 32 * j + l] + shift) / step, 0, top) : 0;
        }
        storeCodes(out, at, codes);
      }
      return out;
    },
    decode(data, count) {
      const out = new Float32Array(count);
      for (let b = 0; b < count / 256; b++) {
        const at = b * blockBytes;
        const d = f16At(data, at);
        const dmin = f16At(data, at + 2);
        for (let c = 0; c < 4; c++) {
          const [sc1, m1] = scaleMinK4(data, at + 4, 2 * c);
          const [sc2, m2] = scaleMinK4(data, at + 4, 2 * c + 1);
          const [d1, min1, d2, min2] = [f(d * sc1), f(dmin * m1), f(d * sc2), f(dmin * m2)];
          for (let l = 0; l < 32; l++) {
            const byte = data[at + qsAt + 32 * c + l];
            const qh = bits === 5 ? data[at + qhAt + l] : 0;
            const low = (byte & 15) + (qh & (1 << (2 * c)) ? 16 : 0);
            const high = (byte >> 4) + (qh & (1 << (2 * c + 1)) ? 16 : 0);
            out[256 * b + 64 * c + l] = f(f(d1 * low) - min1);
            out[256 * b + 64 * c + 32 + l] = f(f(d2 * high) - min2);
          }
        }
      }
      return out;
    },
    random(count, random, rms) {
      const blocks = count / 256;
      const out = randomBytes(blocks * blockBytes, random);
      const half = top / 2;
      const spread = Math.sqrt(((top + 1) ** 2 - 1) / 12);
      for (let b = 0; b < blocks; b++) {
        const at = b * blockBytes;
        // Every 6-bit scale is drawn (RMS 36.5 over 0..63); each min is about
        // half the scale's range so that the sub-block is centred near zero.
        const d = randomScale(random, rms / (36.5 * spread), false);
        setF16(out, at, d);
        setF16(out, at + 2, f16round(d) * half);
        const scales = Uint8Array.from({ length: 8 }, () => random.int(64));
        const mins = scales.map((s) => Math.min(63, Math.max(0, s + random.int(5) - 2)));
        packScaleMinK4(out, at + 4, scales, mins);
      }
      return out;
    },
  };
}

/**
 * Q6_K: ql[128], qh[64], 16 int8 scales, d (f16). Each half n (128 elements)
 * reads ql[64n ..], qh[32n ..], scales[8n ..]: for l < 32, elements l, l + 32,
 * l + 64, l + 96 take the low nibble of ql[l], the low nibble of ql[l + 32],
 * the high nibble of ql[l], the high nibble of ql[l + 32], and bits 0–1, 2–3,
 * 4–5, 6–7 of qh[l] as their top two bits; element e of the half has scale
 * 8n + ⌊e/16⌋. x = d·scale·(q − 32).
 */
const Q6_K = {
  id: 14, name: 'Q6_K', blockSize: 256, blockBytes: 210,
  encode(values) {
    const blocks = values.length / 256;
    const out = new Uint8Array(blocks * 210);
    const scales = new Int8Array(out.buffer);
    const codes = new Uint8Array(256);
    const subScale = new Float64Array(16);
    for (let b = 0; b < blocks; b++) {
      const at = 210 * b;
      // Each sub-block of 16: its largest-magnitude element takes the code −32 exactly.
      for (let j = 0; j < 16; j++) subScale[j] = signedMax(values, 256 * b + 16 * j, 16) / -32;
      let top = 0;
      for (const s of subScale) if (Math.abs(s) > Math.abs(top)) top = s;
      setF16(out, at + 208, top / -128);
      const d = f16At(out, at + 208);
      for (let j = 0; j < 16; j++) scales[at + 192 + j] = d ? quant(subScale[j] / d, -128, 127) : 0;
      for (let j = 0; j < 16; j++) {
        const step = f(d * scales[at + 192 + j]);
        for (let l = 0; l < 16; l++) codes[16 * j + l] = step ? quant(values[256 * b + 16 * j + l] / step + 32, 0, 63) : 32;
      }
      for (let n = 0; n < 2; n++) {
        for (let l = 0; l < 32; l++) {
          const e = 128 * n + l;
          const [q1, q2, q3, q4] = [codes[e], codes[e + 32], codes[e + 64], codes[e + 96]];
          out[at + 64 * n + l] = (q1 & 15) | ((q3 & 15) << 4);
          out[at + 64 * n + l + 32] = (q2 & 15) | ((q4 & 15) << 4);
          out[at + 128 + 32 * n + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
      }
    }
    return out;
  },
  decode(data, count) {
    const out = new Float32Array(count);
    const scales = new Int8Array(data.buffer, data.byteOffset, data.length);
    for (let b = 0; b < count / 256; b++) {
      const at = 210 * b;
      const d = f16At(data, at + 208);
      for (let n = 0; n < 2; n++) {
        for (let l = 0; l < 32; l++) {
          const ql0 = data[at + 64 * n + l];
          const ql1 = data[at + 64 * n + l + 32];
          const qh = data[at + 128 + 32 * n + l];
          const sc = at + 192 + 8 * n + (l >> 4); // elements l, l + 32, ... are in sub-blocks +0, +2, +4, +6
          const y = 256 * b + 128 * n + l;
          out[y] = f(f(d * scales[sc]) * (((ql0 & 15) | ((qh & 3) << 4)) - 32));
          out[y + 32] = f(f(d * scales[sc + 2]) * (((ql1 & 15) | (((qh >> 2) & 3) << 4)) - 32));
          out[y + 64] = f(f(d * scales[sc + 4]) * (((ql0 >> 4) | (((qh >> 4) & 3) << 4)) - 32));
          out[y + 96] = f(f(d * scales[sc + 6]) * (((ql1 >> 4) | (((qh >> 6) & 3) << 4)) - 32));
        }
      }
    }
    return out;
  },
  random(count, random, rms) {
    const blocks = count / 256;
    const out = randomBytes(blocks * 210, random); // every code and every int8 scale
    // RMS of a uniform int8 scale 73.9, of a code − 32 18.5.
    for (let b = 0; b < blocks; b++) setF16(out, 210 * b + 208, randomScale(random, rms / (73.9 * 18.5), false));
    return out;
  },
};

// ---------------------------------------------------------------------------
// Q2_K and Q3_K: ggml's reference quantizers, in f32 step by step.

/** ggml's nearest_int: the nearest integer, ties to even (by the f32 sum with 1.5·2^23). */
const nearestInt = (x) => f(x + 12582912) - 12582912;
const clamp = (x, lo, hi) => Math.min(hi, Math.max(lo, x));

/**
 * ggml's make_qkx2_quants over x[from .. from + n) with weights w: codes 0..nmax
 * into L[at ..], the scale returned and the min (≥ 0, to subtract) as .min.
 */
function makeQkx2Quants(n, nmax, x, from, w, L, at, rmin, rdelta, nstep) {
  const Laux = new Uint8Array(n);
  let min = x[from];
  let max = x[from];
  let sumW = w[0];
  let sumX = f(sumW * x[from]);
  for (let i = 1; i < n; i++) {
    if (x[from + i] < min) min = x[from + i];
    if (x[from + i] > max) max = x[from + i];
    sumW = f(sumW + w[i]);
    sumX = f(sumX + f(w[i] * x[from + i]));
  }
  if (min > 0) min = 0;
  if (max === min) {
    L.fill(0, at, at + n);
    return { scale: 0, min: -min };
  }
  let iscale = f(nmax / f(max - min));
  let scale = f(1 / iscale);
  let bestError = 0;
  for (let i = 0; i < n; i++) {
    L[at + i] = clamp(nearestInt(f(iscale * f(x[from + i] - min))), 0, nmax);
    const diff = f(f(f(scale * L[at + i]) + min) - x[from + i]);
    bestError = f(bestError + f(w[i] * Math.abs(diff)));
  }
  for (let is = 0; is <= nstep; is++) {
    iscale = f(f(f(rmin + f(rdelta * is)) + nmax) / f(max - min));
    let sumL = 0;
    let sumL2 = 0;
    let sumXL = 0;
    for (let i = 0; i < n; i++) {
      const l = clamp(nearestInt(f(iscale * f(x[from + i] - min))), 0, nmax);
      Laux[i] = l;
      const wl = f(w[i] * l);
      sumL = f(sumL + wl);
      sumL2 = f(sumL2 + f(wl * l));
      sumXL = f(sumXL + f(wl * x[from + i]));
    }
    const D = f(f(sumW * sumL2) - f(sumL * sumL));
    if (D > 0) {
      let thisScale = f(f(f(sumW * sumXL) - f(sumX * sumL)) / D);
      let thisMin = f(f(f(sumL2 * sumX) - f(sumL * sumXL)) / D);
      if (thisMin > 0) {
        thisMin = 0;
        thisScale = f(sumXL / sumL2);
      }
      let error = 0;
      for (let i = 0; i < n; i++) {
        const diff = f(f(f(thisScale * Laux[i]) + thisMin) - x[from + i]);
        error = f(error + f(w[i] * Math.abs(diff)));
      }
      if (error < bestError) {
        L.set(Laux, at);
        bestError = error;
        scale = thisScale;
        min = thisMin;
      }
    }
  }
  return { scale, min: -min };
}

/** ggml's make_q3_quants (with its RMSE refinement) over x[from .. from + 16): codes 0..2·nmax − 1 into L[at ..]. */
function makeQ3Quants(nmax, x, from, L, at) {
  const n = 16;
  let max = 0;
  let amax = 0;
  for (let i = 0; i < n; i++) {
    const ax = Math.abs(x[from + i]);
    if (ax > amax) {
      amax = ax;
      max = x[from + i];
    }
  }
  if (amax < f(1e-15)) {
    L.fill(0, at, at + n);
    return 0;
  }
  const iscale = f(-nmax / max);
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < n; i++) {
    const xi = x[from + i];
    const l = clamp(nearestInt(f(iscale * xi)), -nmax, nmax - 1);
    L[at + i] = l;
    const w = f(xi * xi);
    sumlx = f(sumlx + f(f(w * xi) * l));
    suml2 = f(suml2 + f(f(w * l) * l));
  }
  for (let itry = 0; itry < 5; itry++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const xi = x[from + i];
      const w = f(xi * xi);
      let slx = f(sumlx - f(f(w * xi) * L[at + i]));
      if (slx > 0) {
        let sl2 = f(suml2 - f(f(w * L[at + i]) * L[at + i]));
        const l = clamp(nearestInt(f(f(xi * sl2) / slx)), -nmax, nmax - 1);
        if (l !== L[at + i]) {
          slx = f(slx + f(f(w * xi) * l));
          sl2 = f(sl2 + f(f(w * l) * l));
          if (sl2 > 0 && f(f(slx * slx) * suml2) > f(f(sumlx * sumlx) * sl2)) {
            L[at + i] = l;
            sumlx = slx;
            suml2 = sl2;
            changed++;
          }
        }
      }
    }
    if (!changed) break;
  }
  for (let i = 0; i < n; i++) L[at + i] += nmax;
  return suml2 > 0 ? f(sumlx / suml2) : 0;
}

/** 2-bit codes L[0..256) packed as Q2_K and Q3_K store them: element 128h + 32k + l in bits 2k, 2k + 1 of byte 32h + l. */
function pack2Bit(out, at, L) {
  for (let h = 0; h < 2; h++) {
    for (let l = 0; l < 32; l++) {
      const e = 128 * h + l;
      out[at + 32 * h + l] = L[e] | (L[e + 32] << 2) | (L[e + 64] << 4) | (L[e + 96] << 6);
    }
  }
}

/**
 * Q2_K: 16 scale bytes (sub-block j of 16: a 4-bit scale in the low nibble, a
 * 4-bit min in the high one), qs[64] (pack2Bit), d, dmin (f16).
 * x = d·scale·q − dmin·min.
 */
const Q2_K = {
  id: 10, name: 'Q2_K', blockSize: 256, blockBytes: 84,
  encode(values) {
    const x = Float32Array.from(values);
    const blocks = x.length / 256;
    const out = new Uint8Array(blocks * 84);
    const L = new Uint8Array(256);
    const weights = new Float32Array(16);
    const scales = new Float32Array(16);
    const mins = new Float32Array(16);
    for (let b = 0; b < blocks; b++) {
      const at = 84 * b;
      const from = 256 * b;
      let maxScale = 0;
      let maxMin = 0;
      for (let j = 0; j < 16; j++) {
        for (let l = 0; l < 16; l++) weights[l] = Math.abs(x[from + 16 * j + l]);
        const { scale, min } = makeQkx2Quants(16, 3, x, from + 16 * j, weights, L, 16 * j, -0.5, f(0.1), 15);
        scales[j] = scale;
        mins[j] = min;
        if (scale > maxScale) maxScale = scale;
        if (min > maxMin) maxMin = min;
      }
      if (maxScale > 0) {
        const iscale = f(15 / maxScale);
        for (let j = 0; j < 16; j++) out[at + j] = nearestInt(f(iscale * scales[j])) & 255;
        setF16(out, at + 80, f(maxScale / 15));
      } else {
        setF16(out, at + 80, 0);
      }
      if (maxMin > 0) {
        const iscale = f(15 / maxMin);
        for (let j = 0; j < 16; j++) out[at + j] |= (nearestInt(f(iscale * mins[j])) << 4) & 255;
        setF16(out, at + 82, f(maxMin / 15));
      } else {
        setF16(out, at + 82, 0);
      }
      const d = f16At(out, at + 80);
      const dmin = f16At(out, at + 82);
      for (let j = 0; j < 16; j++) {
        const step = f(d * (out[at + j] & 15));
        if (!step) continue;
        const shift = f(dmin * (out[at + j] >> 4));
        for (let l = 0; l < 16; l++) L[16 * j + l] = clamp(nearestInt(f(f(x[from + 16 * j + l] + shift) / step)), 0, 3);
      }
      pack2Bit(out, at + 16, L);
    }
    return out;
  },
  decode(data, count) {
    const out = new Float32Array(count);
    for (let b = 0; b < count / 256; b++) {
      const at = 84 * b;
      const d = f16At(data, at + 80);
      const dmin = f16At(data, at + 82);
      for (let j = 0; j < 16; j++) {
        const sc = data[at + j];
        const dl = f(d * (sc & 15));
        const ml = f(dmin * (sc >> 4));
        // sub-block j: elements 128h + 32k + 16i + l of bytes 32h + 16i + l, k = (j mod 8) >> 1
        const h = j >> 3, k = (j & 7) >> 1, i = j & 1;
        for (let l = 0; l < 16; l++) {
          const q = (data[at + 16 + 32 * h + 16 * i + l] >> (2 * k)) & 3;
          out[256 * b + 16 * j + l] = f(f(dl * q) - ml);
        }
      }
    }
    return out;
  },
  random(count, random, rms) {
    const blocks = count / 256;
    const out = randomBytes(blocks * 84, random); // every code
    for (let b = 0; b < blocks; b++) {
      const at = 84 * b;
      // Every 4-bit scale drawn (RMS 8.8 over 0..15, a code − 1.5 1.12); each
      // min 1.5 steps of its scale, give or take two, centres the sub-block
      // near zero (the off-centre share adds a little: 10.1 in all).
      const d = randomScale(random, rms / 10.1, false);
      setF16(out, at + 80, d);
      setF16(out, at + 82, f16round(d) * 1.5);
      for (let j = 0; j < 16; j++) {
        const scale = random.int(16);
        out[at + j] = scale | (clamp(scale + random.int(5) - 2, 0, 15) << 4);
      }
    }
    return out;
  },
};

/** Q3_K's 6-bit scale j (0..63, before the − 32) from the 12 bytes at `at`. */
function q3kScale(data, at, j) {
  const low = j < 8 ? data[at + j] & 15 : data[at + j - 8] >> 4;
  return low | (((data[at + 8 + (j % 4)] >> (2 * (j >> 2))) & 3) << 4);
}

/**
 * Q3_K: hmask[32], qs[64] (pack2Bit), 12 bytes of sixteen 6-bit scales
 * (q3kScale), d (f16). Element 128h + 32k + l has bit 4h + k of hmask[l] as
 * its code's third bit; x = d·(scale − 32)·(q − 4).
 */
const Q3_K = {
  id: 11, name: 'Q3_K', blockSize: 256, blockBytes: 110,
  encode(values) {
    const x = Float32Array.from(values);
    const blocks = x.length / 256;
    const out = new Uint8Array(blocks * 110);
    const L = new Int8Array(256);
    const scales = new Float32Array(16);
    for (let b = 0; b < blocks; b++) {
      const at = 110 * b;
      const from = 256 * b;
      let maxScale = 0;
      let amax = 0;
      for (let j = 0; j < 16; j++) {
        scales[j] = makeQ3Quants(4, x, from + 16 * j, L, 16 * j);
        if (Math.abs(scales[j]) > amax) {
          amax = Math.abs(scales[j]);
          maxScale = scales[j];
        }
      }
      if (maxScale) {
        const iscale = f(-32 / maxScale);
        for (let j = 0; j < 16; j++) {
          const l = clamp((nearestInt(f(iscale * scales[j])) << 24) >> 24, -32, 31) + 32; // ggml keeps it in an int8_t
          if (j < 8) out[at + 96 + j] = l & 15;
          else out[at + 96 + j - 8] |= (l & 15) << 4;
          out[at + 96 + 8 + (j % 4)] |= (l >> 4) << (2 * (j >> 2));
        }
        setF16(out, at + 108, f(1 / iscale));
      } else {
        setF16(out, at + 108, 0);
      }
      const d = f16At(out, at + 108);
      for (let j = 0; j < 16; j++) {
        const step = f(d * (q3kScale(out, at + 96, j) - 32));
        if (!step) continue;
        for (let l = 0; l < 16; l++) L[16 * j + l] = clamp(nearestInt(f(x[from + 16 * j + l] / step)), -4, 3) + 4;
      }
      for (let e = 0; e < 256; e++) {
        if (L[e] > 3) {
          out[at + (e % 32)] |= 1 << (e >> 5);
          L[e] -= 4;
        }
      }
      pack2Bit(out, at + 32, L);
    }
    return out;
  },
  decode(data, count) {
    const out = new Float32Array(count);
    for (let b = 0; b < count / 256; b++) {
      const at = 110 * b;
      const d = f16At(data, at + 108);
      for (let j = 0; j < 16; j++) {
        const dl = f(d * (q3kScale(data, at + 96, j) - 32));
        const h = j >> 3, k = (j & 7) >> 1, i = j & 1;
        for (let l = 0; l < 16; l++) {
          const low = (data[at + 32 + 32 * h + 16 * i + l] >> (2 * k)) & 3;
          const high = (data[at + 16 * i + l] >> (4 * h + k)) & 1;
          out[256 * b + 16 * j + l] = f(dl * (low - (high ? 0 : 4)));
        }
      }
    }
    return out;
  },
  random(count, random, rms) {
    const blocks = count / 256;
    const out = randomBytes(blocks * 110, random); // every code and every 6-bit scale
    // RMS of a scale − 32 over −32..31 18.5, of a code − 4 2.35.
    for (let b = 0; b < blocks; b++) setF16(out, 110 * b + 108, randomScale(random, rms / (18.5 * 2.35), true));
    return out;
  },
};

// ---------------------------------------------------------------------------
// IQ4_NL and IQ4_XS: 4-bit indices into ggml's non-linear table kvalues_iq4nl,
// packed as Q4_0's nibbles (elements j and j + 16 of each 32 in byte j).

const IQ4_VALUES = Int8Array.of(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
const IQ4_RMS = Math.sqrt(IQ4_VALUES.reduce((sum, v) => sum + v * v, 0) / 16);

/** ggml's best_index_int8: the index of the table value nearest x (f32). */
function iq4Index(x) {
  if (x <= IQ4_VALUES[0]) return 0;
  if (x >= IQ4_VALUES[15]) return 15;
  let lo = 0;
  let hi = 15;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (x < IQ4_VALUES[mid]) hi = mid; else lo = mid;
  }
  return f(x - IQ4_VALUES[hi - 1]) < f(IQ4_VALUES[hi] - x) ? hi - 1 : hi;
}

/**
 * ggml's quantize_row_iq4_nl_impl without importance weights, in f32 step by
 * step: per sub-block of 32 the scale of least squares (weights x²) for the
 * indices of d = max/−127, then, with ntry > 0, the best of the scales
 * (itry − 127)/max for itry in −ntry..ntry; a super-block of 256 keeps an f16
 * d = −max_scale/32 and a 6-bit ls − 32 per sub-block, and re-picks the
 * indices for d·(ls − 32). Writes d, the scales (superBlock 256) and the
 * nibbles of values[from ..] to out at `at`; returns nothing. (Compared once
 * with ggml's own quantizer, 2026-12-07: the same bytes on normal, outlier
 * and zero blocks, but for an all-zero IQ4_NL block's indices, which ggml
 * leaves as the block before had them: d is 0 either way.)
 */
function iq4Quantize(values, from, superBlock, ntry, out, at) {
  const blocks = superBlock / 32;
  const qsAt = blocks > 1 ? 8 : 2;
  const L = new Uint8Array(superBlock);
  const scales = new Float32Array(blocks);
  let maxScale = 0;
  let amaxScale = 0;
  for (let ib = 0; ib < blocks; ib++) {
    const x = from + 32 * ib;
    let amax = 0;
    let max = 0;
    for (let j = 0; j < 32; j++) {
      const ax = Math.abs(f(values[x + j]));
      if (ax > amax) { amax = ax; max = f(values[x + j]); }
    }
    if (amax < f(1e-15)) { scales[ib] = 0; continue; } // GROUP_MAX_EPS; indices 0 (ggml leaves them unset, d·q is 0 either way)
    const sums = (id) => {
      let sumqx = 0;
      let sumq2 = 0;
      for (let j = 0; j < 32; j++) {
        const xj = f(values[x + j]);
        const q = IQ4_VALUES[iq4Index(f(id * xj))];
        const w = f(xj * xj);
        sumqx = f(sumqx + f(f(w * q) * xj));
        sumq2 = f(sumq2 + f(f(w * q) * q));
      }
      return [sumqx, sumq2];
    };
    let d = ntry > 0 ? f(-max / IQ4_VALUES[0]) : f(max / IQ4_VALUES[0]);
    const id0 = f(1 / d);
    for (let j = 0; j < 32; j++) L[32 * ib + j] = iq4Index(f(id0 * f(values[x + j])));
    let [sumqx, sumq2] = sums(id0);
    d = sumq2 > 0 ? f(sumqx / sumq2) : 0;
    let best = f(d * sumqx);
    for (let itry = -ntry; itry <= ntry; itry++) {
      [sumqx, sumq2] = sums(f((itry + IQ4_VALUES[0]) / max));
      if (sumq2 > 0 && f(sumqx * sumqx) > f(best * sumq2)) { d = f(sumqx / sumq2); best = f(d * sumqx); }
    }
    scales[ib] = d;
    if (Math.abs(d) > amaxScale) { amaxScale = Math.abs(d); maxScale = d; }
  }
  if (blocks > 1) {
    const d = f(-maxScale / 32);
    setF16(out, at, d);
    const id = d ? f(1 / d) : 0;
    let scalesH = 0;
    for (let ib = 0; ib < blocks; ib++) {
      const l = Math.max(-32, Math.min(31, nearestInt(f(id * scales[ib]))));
      const dl = f(d * l);
      const idl = dl ? f(1 / dl) : 0;
      for (let j = 0; j < 32; j++) L[32 * ib + j] = iq4Index(f(idl * f(values[from + 32 * ib + j])));
      out[at + 4 + (ib >> 1)] |= ((l + 32) & 15) << (4 * (ib & 1));
      scalesH |= ((l + 32) >> 4) << (2 * ib);
    }
    out[at + 2] = scalesH & 255;
    out[at + 3] = scalesH >> 8;
  } else {
    setF16(out, at, scales[0]);
    if (ntry > 0) {
      const id = scales[0] ? f(1 / scales[0]) : 0;
      for (let j = 0; j < 32; j++) L[j] = iq4Index(f(id * f(values[from + j])));
    }
  }
  for (let i = 0; i < blocks; i++) {
    for (let j = 0; j < 16; j++) out[at + qsAt + 16 * i + j] = L[32 * i + j] | (L[32 * i + 16 + j] << 4);
  }
}

/** IQ4_NL: d (f16), 16 bytes of indices; x = d·table[q]. Encoded as quantize_row_iq4_nl_ref (ntry −1). */
const IQ4_NL = {
  id: 20, name: 'IQ4_NL', blockSize: 32, blockBytes: 18,
  encode(values) {
    const out = new Uint8Array((values.length / 32) * 18);
    for (let b = 0; b < values.length / 32; b++) iq4Quantize(values, 32 * b, 32, -1, out, 18 * b);
    return out;
  },
  decode(data, count) {
    const out = new Float32Array(count);
    for (let b = 0; b < count / 32; b++) {
      const d = f16At(data, 18 * b);
      for (let j = 0; j < 16; j++) {
        const byte = data[18 * b + 2 + j];
        out[32 * b + j] = f(d * IQ4_VALUES[byte & 15]);
        out[32 * b + j + 16] = f(d * IQ4_VALUES[byte >> 4]);
      }
    }
    return out;
  },
  random(count, random, rms) {
    const blocks = count / 32;
    const out = randomBytes(blocks * 18, random); // every index
    for (let b = 0; b < blocks; b++) setF16(out, 18 * b, randomScale(random, rms / IQ4_RMS, true));
    return out;
  },
};

/**
 * IQ4_XS: d (f16), scales_h (u16: bits 2j, 2j + 1 the high two bits of ls_j),
 * scales_l[4] (nibble j % 2 of byte j/2 the low four), then 16 bytes of indices
 * per sub-block j of 32; x = d·(ls_j − 32)·table[q]. Encoded as
 * quantize_row_iq4_xs_ref (quantize_iq4_xs without importance: ntry 7).
 */
const IQ4_XS = {
  id: 23, name: 'IQ4_XS', blockSize: 256, blockBytes: 136,
  encode(values) {
    const out = new Uint8Array((values.length / 256) * 136);
    for (let b = 0; b < values.length / 256; b++) iq4Quantize(values, 256 * b, 256, 7, out, 136 * b);
    return out;
  },
  decode(data, count) {
    const out = new Float32Array(count);
    for (let b = 0; b < count / 256; b++) {
      const at = 136 * b;
      const d = f16At(data, at);
      const scalesH = data[at + 2] | (data[at + 3] << 8);
      for (let ib = 0; ib < 8; ib++) {
        const ls = ((data[at + 4 + (ib >> 1)] >> (4 * (ib & 1))) & 15) | (((scalesH >> (2 * ib)) & 3) << 4);
        const dl = f(d * (ls - 32));
        for (let j = 0; j < 16; j++) {
          const byte = data[at + 8 + 16 * ib + j];
          out[256 * b + 32 * ib + j] = f(dl * IQ4_VALUES[byte & 15]);
          out[256 * b + 32 * ib + j + 16] = f(dl * IQ4_VALUES[byte >> 4]);
        }
      }
    }
    return out;
  },
  random(count, random, rms) {
    const blocks = count / 256;
    const out = randomBytes(blocks * 136, random); // every index and every 6-bit scale
    // RMS of a uniform ls − 32 (−32..31) 18.5.
    const scaleRms = Math.sqrt(Array.from({ length: 64 }, (_, k) => (k - 32) ** 2).reduce((a, b) => a + b) / 64);
    for (let b = 0; b < blocks; b++) setF16(out, 136 * b, randomScale(random, rms / (scaleRms * IQ4_RMS), true));
    return out;
  },
};

/** Every type, by name. */
export const GGML_TYPES = {
  F32, F16, BF16, Q8_0,
  Q4_0: block32({ id: 2, name: 'Q4_0', bits: 4, withMin: false }),
  Q4_1: block32({ id: 3, name: 'Q4_1', bits: 4, withMin: true }),
  Q5_0: block32({ id: 6, name: 'Q5_0', bits: 5, withMin: false }),
  Q5_1: block32({ id: 7, name: 'Q5_1', bits: 5, withMin: true }),
  Q4_K: kQuantWithMin({ id: 12, name: 'Q4_K', bits: 4 }),
  Q5_K: kQuantWithMin({ id: 13, name: 'Q5_K', bits: 5 }),
  Q6_K,
  Q2_K,
  Q3_K,
  IQ4_NL,
  IQ4_XS,
};

/** The type named `name` ('Q4_K', ...) or with ggml id `id`; throws for another. */
export function ggmlType(nameOrId) {
  const type = typeof nameOrId === 'number'
    ? Object.values(GGML_TYPES).find((t) => t.id === nameOrId)
    : GGML_TYPES[nameOrId];
  if (!type) throw new RangeError(`no ggml type ${nameOrId} here (known: ${Object.keys(GGML_TYPES).join(', ')})`);
  return type;
}

/** Bytes of `count` elements of `type` (count a multiple of its block size). */
export function tensorBytes(type, count) {
  if (count % type.blockSize !== 0) throw new RangeError(`${count} elements are not whole ${type.name} blocks of ${type.blockSize}`);
  return (count / type.blockSize) * type.blockBytes;
}

// A minimal GGUF writer for the tests: re-encodes a parsed file as another
// version and tensor type, so that the reader is tested on v1, v3, F16 and
// Q8_0 from the one real model.

const T_UINT32 = 4;
const T_FLOAT32 = 6;
const T_STRING = 8;
const T_ARRAY = 9;

function floatToHalf(value) {
  const f32 = new Float32Array([value]);
  const bits = new Uint32Array(f32.buffer)[0];
  const sign = (bits >>> 16) & 0x8000;
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  const mantissa = bits & 0x7fffff;
  if (exponent <= 0) return sign | Math.round((mantissa | 0x800000) / 2 ** (14 - exponent));
  if (exponent >= 31) return sign | 0x7c00;
  const half = sign | ((exponent << 10) + Math.round(mantissa / 8192));
  return half; // a mantissa rounding up carries into the exponent, as it should
}

/** Q8_0 blocks of a row-major tensor whose rows are multiples of 32 values:
 * per block an f16 scale d (the largest |x| / 127, rounded to f16) and 32
 * codes round(x / d), as ggml lays them out. */
function toQ8(values) {
  const blocks = values.length / 32;
  const out = new Uint8Array(blocks * 34);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const block = values.subarray(32 * b, 32 * b + 32);
    const half = floatToHalf(block.reduce((m, x) => Math.max(m, Math.abs(x)), 0) / 127);
    const d = halfToFloat(half);
    view.setUint16(34 * b, half, true);
    for (let i = 0; i < 32; i++) view.setInt8(34 * b + 2 + i, d ? Math.max(-127, Math.min(127, Math.round(block[i] / d))) : 0);
  }
  return out;
}

function halfToFloat(h) {
  const exponent = (h >> 10) & 0x1f;
  const magnitude = exponent ? 2 ** (exponent - 15) * (1 + (h & 0x3ff) / 1024) : 2 ** -14 * ((h & 0x3ff) / 1024);
  return h & 0x8000 ? -magnitude : magnitude;
}

/** Encodes `gguf` (a GgufFile) as GGUF `version` with `tensorType` 0 (F32), 1 (F16) or 8 (Q8_0) data. */
export function writeGguf(gguf, { version = 3, tensorType = 0 } = {}) {
  const parts = [];
  const countBytes = version === 1 ? 4 : 8;
  const u32 = (x) => parts.push(new Uint8Array(new Uint32Array([x]).buffer));
  const count = (x) => (countBytes === 4 ? u32(x) : parts.push(new Uint8Array(new BigUint64Array([BigInt(x)]).buffer)));
  const u64 = (x) => parts.push(new Uint8Array(new BigUint64Array([BigInt(x)]).buffer));
  const string = (text) => {
    const bytes = new TextEncoder().encode(text);
    count(bytes.length);
    parts.push(bytes);
  };
  const value = (v) => {
    if (typeof v === 'string') return (u32(T_STRING), string(v));
    if (Array.isArray(v)) {
      u32(T_ARRAY);
      const itemType = typeof v[0] === 'string' ? T_STRING : Number.isInteger(v[0]) ? T_UINT32 : T_FLOAT32;
      u32(itemType);
      count(v.length);
      for (const item of v) {
        if (itemType === T_STRING) string(item);
        else if (itemType === T_UINT32) u32(item);
        else parts.push(new Uint8Array(new Float32Array([item]).buffer));
      }
      return undefined;
    }
    if (Number.isInteger(v)) return (u32(T_UINT32), u32(v));
    return (u32(T_FLOAT32), parts.push(new Uint8Array(new Float32Array([v]).buffer)));
  };
  parts.push(new TextEncoder().encode('GGUF'));
  u32(version);
  count(gguf.tensors.size);
  count(gguf.metadata.size);
  for (const [key, v] of gguf.metadata) {
    string(key);
    value(v);
  }
  let offset = 0;
  const datas = [];
  for (const info of gguf.tensors.values()) {
    string(info.name);
    u32(info.dims.length);
    for (const dim of info.dims) count(dim);
    // Q8_0 needs rows of whole blocks: other tensors stay F32, as quantizers keep them.
    const type = tensorType === 8 && info.dims[0] % 32 !== 0 ? 0 : tensorType;
    u32(type);
    u64(offset);
    const values = gguf.tensor(info.name);
    const data = type === 0 ? new Uint8Array(values.buffer)
      : type === 1 ? new Uint8Array(Uint16Array.from(values, floatToHalf).buffer) : toQ8(values);
    datas.push(data);
    offset += Math.ceil(data.length / 32) * 32;
  }
  const header = parts.reduce((n, p) => n + p.length, 0);
  const start = Math.ceil(header / 32) * 32;
  const out = new Uint8Array(start + offset);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  at = start;
  for (const data of datas) {
    out.set(data, at);
    at += Math.ceil(data.length / 32) * 32;
  }
  return out;
}

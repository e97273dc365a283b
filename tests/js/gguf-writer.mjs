// A minimal GGUF writer for the tests: re-encodes a parsed file as another
// version and tensor type, so that the reader is tested on v1, v3 and F16
// from the one real model.

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
  const half = sign | (exponent << 10) | Math.round(mantissa / 8192);
  return half; // a mantissa rounding up carries into the exponent, as it should
}

/** Encodes `gguf` (a GgufFile) as GGUF `version` with `tensorType` 0 (F32) or 1 (F16) data. */
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
  const elementBytes = tensorType === 0 ? 4 : 2;
  let offset = 0;
  const datas = [];
  for (const info of gguf.tensors.values()) {
    string(info.name);
    u32(info.dims.length);
    for (const dim of info.dims) count(dim);
    u32(tensorType);
    u64(offset);
    const values = gguf.tensor(info.name);
    const data = tensorType === 0 ? new Uint8Array(values.buffer) : new Uint8Array(Uint16Array.from(values, floatToHalf).buffer);
    datas.push(data);
    offset += Math.ceil((values.length * elementBytes) / 32) * 32;
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

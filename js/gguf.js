// A GGUF reader (versions 1 to 3, little-endian; f32 and f16 tensors).
//
// Every read is bounds-checked against the file, and every count is checked
// against the bytes left before anything loops over it, so a truncated or
// corrupted file is refused with a GgufError naming what is wrong -- never a
// crash, a hang or a huge allocation.

const MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
const DEFAULT_ALIGNMENT = 32;
const MAX_DIMS = 4;
const MAX_ARRAY_NESTING = 8;

// Metadata value types.
const T_UINT8 = 0;
const T_INT8 = 1;
const T_UINT16 = 2;
const T_INT16 = 3;
const T_UINT32 = 4;
const T_INT32 = 5;
const T_FLOAT32 = 6;
const T_BOOL = 7;
const T_STRING = 8;
const T_ARRAY = 9;
const T_UINT64 = 10;
const T_INT64 = 11;
const T_FLOAT64 = 12;

// Bytes of one value of each fixed-size type (strings and arrays are sized apart).
const FIXED_SIZE = {
  [T_UINT8]: 1, [T_INT8]: 1, [T_UINT16]: 2, [T_INT16]: 2, [T_UINT32]: 4, [T_INT32]: 4,
  [T_FLOAT32]: 4, [T_BOOL]: 1, [T_UINT64]: 8, [T_INT64]: 8, [T_FLOAT64]: 8,
};

// ggml tensor types this reader converts to f32, and the names of the others.
const TENSOR_F32 = 0;
const TENSOR_F16 = 1;
const TENSOR_TYPE_NAMES = [
  'F32', 'F16', 'Q4_0', 'Q4_1', 'Q4_2', 'Q4_3', 'Q5_0', 'Q5_1', 'Q8_0', 'Q8_1', 'Q2_K', 'Q3_K',
  'Q4_K', 'Q5_K', 'Q6_K', 'Q8_K', 'IQ2_XXS', 'IQ2_XS', 'IQ3_XXS', 'IQ1_S', 'IQ4_NL', 'IQ3_S',
  'IQ2_S', 'IQ4_XS', 'I8', 'I16', 'I32', 'I64', 'F64', 'IQ1_M', 'BF16',
];

/** A file that is not a GGUF this reader can use; the message says why. */
export class GgufError extends Error {
  constructor(message) {
    super(message);
    this.name = 'GgufError';
  }
}

// A cursor over the file that refuses to read past its end.
class Reader {
  constructor(bytes) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.at = 0;
    this.version = 0;
  }

  need(count, what) {
    if (count > this.bytes.length - this.at) {
      throw new GgufError(`truncated: ${what} needs ${count} bytes at offset ${this.at}, the file has ${this.bytes.length - this.at} left`);
    }
  }

  u32(what) {
    this.need(4, what);
    const value = this.view.getUint32(this.at, true);
    this.at += 4;
    return value;
  }

  u64(what) {
    this.need(8, what);
    const value = this.view.getBigUint64(this.at, true);
    this.at += 8;
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new GgufError(`${what} is ${value}, beyond any file`);
    return Number(value);
  }

  // Counts and string lengths are u32 in GGUF v1, u64 from v2 on.
  count(what) {
    return this.version === 1 ? this.u32(what) : this.u64(what);
  }

  // A count of items that take at least `minBytes` each: checked against the
  // bytes left, so no loop runs longer than the file could back.
  items(what, minBytes) {
    const n = this.count(what);
    if (n * minBytes > this.bytes.length - this.at) {
      throw new GgufError(`truncated or corrupt: ${what} is ${n}, more than the ${this.bytes.length - this.at} bytes left could hold`);
    }
    return n;
  }

  string(what) {
    const length = this.count(`length of ${what}`);
    this.need(length, what);
    const text = new TextDecoder('utf-8', { fatal: false }).decode(this.bytes.subarray(this.at, this.at + length));
    this.at += length;
    return text;
  }

  value(type, what, depth = 0) {
    const v = this.view;
    if (type === T_STRING) return this.string(what);
    if (type === T_ARRAY) {
      if (depth >= MAX_ARRAY_NESTING) throw new GgufError(`corrupt: ${what} nests arrays deeper than ${MAX_ARRAY_NESTING}`);
      const itemType = this.u32(`item type of ${what}`);
      if (itemType !== T_STRING && itemType !== T_ARRAY && !(itemType in FIXED_SIZE)) {
        throw new GgufError(`corrupt: ${what} is an array of unknown value type ${itemType}`);
      }
      const minBytes = itemType in FIXED_SIZE ? FIXED_SIZE[itemType] : this.version === 1 ? 4 : 8;
      const n = this.items(`length of ${what}`, minBytes);
      const items = new Array(n);
      for (let i = 0; i < n; i++) items[i] = this.value(itemType, `${what}[${i}]`, depth + 1);
      return items;
    }
    const size = FIXED_SIZE[type];
    if (size === undefined) throw new GgufError(`corrupt: ${what} has unknown value type ${type}`);
    this.need(size, what);
    const at = this.at;
    this.at += size;
    switch (type) {
      case T_UINT8: return v.getUint8(at);
      case T_INT8: return v.getInt8(at);
      case T_UINT16: return v.getUint16(at, true);
      case T_INT16: return v.getInt16(at, true);
      case T_UINT32: return v.getUint32(at, true);
      case T_INT32: return v.getInt32(at, true);
      case T_FLOAT32: return v.getFloat32(at, true);
      case T_BOOL: return v.getUint8(at) !== 0;
      case T_UINT64: return Number(v.getBigUint64(at, true));
      case T_INT64: return Number(v.getBigInt64(at, true));
      default: return v.getFloat64(at, true); // T_FLOAT64
    }
  }
}

function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

/** A parsed GGUF file: its metadata and its tensors, read on demand. */
export class GgufFile {
  constructor(version, metadata, tensors, bytes) {
    this.version = version;
    /** @type {Map<string, unknown>} */
    this.metadata = metadata;
    /** @type {Map<string, { name: string, dims: number[], type: number, typeName: string, offset: number, count: number }>} */
    this.tensors = tensors;
    this.bytes = bytes;
  }

  /** A metadata value, or an error naming the missing key. */
  get(key) {
    if (!this.metadata.has(key)) throw new GgufError(`missing metadata key ${key}`);
    return this.metadata.get(key);
  }

  /** A tensor's values as a new Float32Array (f16 converted); dims innermost first, as ggml lists them. */
  tensor(name) {
    const info = this.tensors.get(name);
    if (!info) throw new GgufError(`missing tensor ${name}`);
    const out = new Float32Array(info.count);
    const view = new DataView(this.bytes.buffer, this.bytes.byteOffset + info.offset, info.count * (info.type === TENSOR_F32 ? 4 : 2));
    if (info.type === TENSOR_F32) {
      for (let i = 0; i < info.count; i++) out[i] = view.getFloat32(4 * i, true);
    } else {
      for (let i = 0; i < info.count; i++) out[i] = halfToFloat(view.getUint16(2 * i, true));
    }
    return out;
  }
}

/**
 * Parses a GGUF file held in memory.
 * @param {Uint8Array | ArrayBuffer} input
 * @returns {GgufFile}
 */
export function readGguf(input) {
  const bytes = input instanceof ArrayBuffer ? new Uint8Array(input) : input;
  if (!(bytes instanceof Uint8Array)) throw new TypeError('readGguf: the file must be a Uint8Array or an ArrayBuffer');
  const r = new Reader(bytes);
  if (bytes.length < 4 || r.u32('magic') !== MAGIC) throw new GgufError('not a GGUF file: wrong magic (expected "GGUF")');
  const version = r.u32('version');
  if (version === 0x01000000 || version === 0x02000000 || version === 0x03000000) {
    throw new GgufError('big-endian GGUF files are not supported');
  }
  if (version < 1 || version > 3) throw new GgufError(`unsupported GGUF version ${version} (this reader knows 1 to 3)`);
  r.version = version;
  const countBytes = version === 1 ? 4 : 8;
  // A tensor info takes at least a name length, a dims count, one dim, a type and an offset.
  const tensorCount = r.items('tensor count', countBytes + 4 + countBytes + 4 + 8);
  const metadataCount = r.items('metadata count', countBytes + 4 + 1);

  const metadata = new Map();
  for (let i = 0; i < metadataCount; i++) {
    const key = r.string(`key of metadata entry ${i}`);
    const type = r.u32(`type of ${key}`);
    metadata.set(key, r.value(type, key));
  }
  const alignment = metadata.get('general.alignment') ?? DEFAULT_ALIGNMENT;
  if (!Number.isInteger(alignment) || alignment < 1 || (alignment & (alignment - 1)) !== 0) {
    throw new GgufError(`corrupt: general.alignment is ${alignment}, not a power of two`);
  }

  const infos = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = r.string(`name of tensor ${i}`);
    const nDims = r.u32(`dimension count of ${name}`);
    if (nDims < 1 || nDims > MAX_DIMS) throw new GgufError(`corrupt: tensor ${name} has ${nDims} dimensions (1 to ${MAX_DIMS} allowed)`);
    const dims = [];
    let count = 1;
    for (let d = 0; d < nDims; d++) {
      const dim = r.count(`dimension ${d} of ${name}`);
      count *= dim;
      dims.push(dim);
    }
    const type = r.u32(`type of ${name}`);
    const offset = r.u64(`data offset of ${name}`);
    infos.push({ name, dims, type, offset, count });
  }
  const dataStart = Math.ceil(r.at / alignment) * alignment;

  const tensors = new Map();
  for (const info of infos) {
    const typeName = TENSOR_TYPE_NAMES[info.type] ?? `type ${info.type}`;
    if (info.type !== TENSOR_F32 && info.type !== TENSOR_F16) {
      throw new GgufError(`tensor ${info.name} has type ${typeName}; this reader supports F32 and F16`);
    }
    if (tensors.has(info.name)) throw new GgufError(`corrupt: tensor ${info.name} appears twice`);
    const size = info.count * (info.type === TENSOR_F32 ? 4 : 2);
    const start = dataStart + info.offset;
    if (!Number.isSafeInteger(size) || start + size > bytes.length) {
      throw new GgufError(`truncated: tensor ${info.name} (${info.dims.join(' x ')} ${typeName}) needs bytes ${start}..${start + size}, the file has ${bytes.length}`);
    }
    if (info.offset % alignment !== 0) throw new GgufError(`corrupt: tensor ${info.name} starts off its ${alignment}-byte alignment`);
    tensors.set(info.name, { ...info, typeName, offset: start });
  }
  return new GgufFile(version, metadata, tensors, bytes);
}

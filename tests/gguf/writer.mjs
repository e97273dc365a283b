// A GGUF writer (versions 1 to 3, little-endian): metadata of every GGUF value
// type and tensors of any type in types.mjs.
//
//   const spec = {
//     version: 3,
//     metadata: [['general.architecture', 'llama'], ['llama.block_count', gguf.u32(2)],
//                ['tokenizer.ggml.scores', gguf.array('f32', scores)]],
//     tensors: [{ name: 'token_embd.weight', dims: [256, 1024], type: 'Q4_K', data: bytes }],
//   };
//   const bytes = encodeGguf(spec);      // in memory
//   writeGgufFile(path, spec);           // streamed, one tensor in memory at a time
//
// dims are ggml's order, innermost first: [256, 1024] is 1024 rows of 256. A
// tensor's data is its bytes in its type, or a function returning them (called
// once, when the tensor is written). Numbers carry their GGUF type (gguf.u32(5),
// gguf.f32(1e-5), gguf.array('i32', ids)): inferring it would write 10000.0 as
// an integer, which llama.cpp refuses. Strings, booleans and string arrays need
// no wrapper. general.alignment, when present, sets the data alignment.
import { closeSync, openSync, writeSync } from 'node:fs';
import { ggmlType, tensorBytes } from './types.mjs';

const VALUE_TYPES = {
  u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12,
};
const DEFAULT_ALIGNMENT = 32;

class Typed {
  constructor(type, value, itemType) {
    if (!(type in VALUE_TYPES)) throw new RangeError(`no GGUF value type ${type} (known: ${Object.keys(VALUE_TYPES).join(', ')})`);
    if (itemType !== undefined && !(itemType in VALUE_TYPES)) throw new RangeError(`no GGUF value type ${itemType} for array items`);
    this.type = type;
    this.value = value;
    this.itemType = itemType;
  }
}

/** Typed metadata values: gguf.u32(5), gguf.i64(-3n), gguf.array('f32', [...]), gguf.array('array', [gguf.array(...)]). */
export const gguf = Object.fromEntries([
  ...Object.keys(VALUE_TYPES).filter((t) => t !== 'array').map((t) => [t, (value) => new Typed(t, value)]),
  ['array', (itemType, items) => new Typed('array', items, itemType)],
]);

/** A value as Typed: wrapped already, or a string, boolean or array of strings. */
function typedValue(key, value) {
  if (value instanceof Typed) return value;
  if (typeof value === 'string') return new Typed('string', value);
  if (typeof value === 'boolean') return new Typed('bool', value);
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return new Typed('array', value, 'string');
  throw new TypeError(`metadata ${key}: give numbers a GGUF type (gguf.u32(...), gguf.f32(...), gguf.array('i32', ...))`);
}

// Little-endian bytes, collected in chunks.
class Bytes {
  constructor(version) {
    this.version = version;
    this.chunks = [];
    this.length = 0;
  }

  push(bytes) {
    this.chunks.push(bytes);
    this.length += bytes.length;
  }

  fixed(size, set) {
    const bytes = new Uint8Array(size);
    set(new DataView(bytes.buffer));
    this.push(bytes);
  }

  u32(x) {
    this.fixed(4, (v) => v.setUint32(0, x, true));
  }

  u64(x) {
    this.fixed(8, (v) => v.setBigUint64(0, BigInt(x), true));
  }

  // Counts and string lengths are u32 in GGUF v1, u64 from v2 on.
  count(x) {
    if (this.version === 1) this.u32(x);
    else this.u64(x);
  }

  string(text) {
    const bytes = new TextEncoder().encode(text);
    this.count(bytes.length);
    this.push(bytes);
  }

  scalar(type, x, key) {
    const size = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, bool: 1, u64: 8, i64: 8, f64: 8 }[type];
    const integer = ['u8', 'i8', 'u16', 'i16', 'u32', 'i32'].includes(type);
    if (integer && !Number.isInteger(x)) throw new TypeError(`metadata ${key}: ${x} is not an integer for ${type}`);
    this.fixed(size, (v) => {
      switch (type) {
        case 'u8': return v.setUint8(0, x);
        case 'i8': return v.setInt8(0, x);
        case 'u16': return v.setUint16(0, x, true);
        case 'i16': return v.setInt16(0, x, true);
        case 'u32': return v.setUint32(0, x, true);
        case 'i32': return v.setInt32(0, x, true);
        case 'f32': return v.setFloat32(0, x, true);
        case 'bool': return v.setUint8(0, x ? 1 : 0);
        case 'u64': return v.setBigUint64(0, BigInt(x), true);
        case 'i64': return v.setBigInt64(0, BigInt(x), true);
        default: return v.setFloat64(0, x, true); // f64
      }
    });
  }

  // A value's bytes after its type: an array is its item type, its length, its items.
  value(typed, key) {
    if (typed.type === 'string') return this.string(typed.value);
    if (typed.type !== 'array') return this.scalar(typed.type, typed.value, key);
    this.u32(VALUE_TYPES[typed.itemType]);
    this.count(typed.value.length);
    typed.value.forEach((item, i) => {
      const inner = typed.itemType === 'array' || typed.itemType === 'string' ? typedValue(`${key}[${i}]`, item) : new Typed(typed.itemType, item);
      if (inner.type !== typed.itemType) throw new TypeError(`metadata ${key}[${i}] is a ${inner.type}, the array holds ${typed.itemType}`);
      this.value(inner, `${key}[${i}]`);
    });
  }

  concat() {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const chunk of this.chunks) {
      out.set(chunk, at);
      at += chunk.length;
    }
    return out;
  }
}

const padded = (n, alignment) => Math.ceil(n / alignment) * alignment;

/** The header (magic to the end of the tensor infos, padded) and each tensor's type and size. */
function layout({ version = 3, metadata = [], tensors = [] }) {
  if (![1, 2, 3].includes(version)) throw new RangeError(`GGUF version ${version}: this writer writes 1 to 3`);
  const entries = [...metadata].map(([key, value]) => [key, typedValue(key, value)]);
  const alignmentEntry = entries.find(([key]) => key === 'general.alignment');
  const alignment = alignmentEntry ? alignmentEntry[1].value : DEFAULT_ALIGNMENT;
  if (!Number.isInteger(alignment) || alignment < 1 || (alignment & (alignment - 1)) !== 0) {
    throw new RangeError(`general.alignment ${alignment} is not a power of two`);
  }
  const header = new Bytes(version);
  header.push(new TextEncoder().encode('GGUF'));
  header.u32(version);
  header.count(tensors.length);
  header.count(entries.length);
  for (const [key, typed] of entries) {
    header.string(key);
    header.u32(VALUE_TYPES[typed.type]);
    header.value(typed, key);
  }
  let offset = 0;
  const placed = tensors.map((tensor) => {
    const type = typeof tensor.type === 'object' ? tensor.type : ggmlType(tensor.type);
    const count = tensor.dims.reduce((a, b) => a * b, 1);
    if (tensor.dims[0] % type.blockSize !== 0) {
      throw new RangeError(`tensor ${tensor.name}: rows of ${tensor.dims[0]} are not whole ${type.name} blocks of ${type.blockSize}`);
    }
    const size = tensorBytes(type, count);
    header.string(tensor.name);
    header.u32(tensor.dims.length);
    for (const dim of tensor.dims) header.count(dim);
    header.u32(type.id);
    header.u64(offset);
    const at = offset;
    offset = padded(offset + size, alignment);
    return { tensor, size, at };
  });
  const headerBytes = header.concat();
  const dataStart = padded(headerBytes.length, alignment);
  return { headerBytes, dataStart, placed, total: dataStart + offset };
}

function dataOf({ tensor, size }) {
  const data = typeof tensor.data === 'function' ? tensor.data() : tensor.data;
  if (!(data instanceof Uint8Array) || data.length !== size) {
    throw new RangeError(`tensor ${tensor.name}: data must be ${size} bytes (got ${data?.length ?? typeof data})`);
  }
  return data;
}

/** The header of `spec`'s file alone, without its tensor data: what a loader reads first. */
export function encodeGgufHeader(spec) {
  return layout(spec).headerBytes;
}

/**
 * The parts llama.cpp's gguf-split cuts `spec` into: `count` specs (files
 * `<name>-0000k-of-0000N.gguf`), the first with every metadata entry, each
 * with split.no, split.count and split.tensors.count, the tensors shared
 * out in order.
 */
export function splitSpec(spec, count) {
  const per = Math.ceil(spec.tensors.length / count);
  return Array.from({ length: count }, (_, i) => ({
    version: 3,
    metadata: [...(i === 0 ? spec.metadata : []),
      ['split.no', gguf.u16(i)], ['split.count', gguf.u16(count)], ['split.tensors.count', gguf.i32(spec.tensors.length)]],
    tensors: spec.tensors.slice(i * per, (i + 1) * per),
  }));
}

/** The GGUF file of `spec` as bytes. */
export function encodeGguf(spec) {
  const { headerBytes, dataStart, placed, total } = layout(spec);
  const out = new Uint8Array(total);
  out.set(headerBytes);
  for (const item of placed) out.set(dataOf(item), dataStart + item.at);
  return out;
}

// write(2) may take less than it is given (at most about 2 GiB at once).
function writeAll(fd, bytes) {
  for (let done = 0; done < bytes.length;) done += writeSync(fd, bytes, done, bytes.length - done);
}

/** Writes the GGUF file of `spec` to `path`, one tensor's data in memory at a time; returns its size. */
export function writeGgufFile(path, spec) {
  const { headerBytes, dataStart, placed, total } = layout(spec);
  const fd = openSync(path, 'w');
  try {
    writeAll(fd, headerBytes);
    let at = headerBytes.length;
    for (const item of placed) {
      const start = dataStart + item.at;
      if (start > at) writeAll(fd, new Uint8Array(start - at));
      writeAll(fd, dataOf(item));
      at = start + item.size;
    }
    if (total > at) writeAll(fd, new Uint8Array(total - at));
  } finally {
    closeSync(fd);
  }
  return total;
}

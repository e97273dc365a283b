// A GGUF reader (versions 1 to 3, little-endian) over the C one
// (src/model/gguf.c): the header is parsed and checked there -- every count
// and length bounded before anything is allocated, a refusal worded by
// kvc_gguf_explain -- and read from there into JavaScript values once.
// Tensors become f32 on demand through the weight table's dequantize, in C.
import { callC, checkStatus, copyOut, heap, lib, readCString, statusName, u32At, u64At, withStaging } from '../runtime/runtime.js';
import { C_CODES } from '../runtime/constants.js';
import { GgufError } from '../runtime/checks.js';

export { GgufError };

// The first prefix handed to the parser: most headers fit in it; a longer
// one is asked for (kvc_gguf_parse's `needed`) and grown at least twofold.
const FIRST_PREFIX = 1 << 20;
// Room for kvc_gguf_explain's sentence.
const EXPLAIN_BYTES = 1024;
// kvc_gguf_type values (kvcache.h) that are not numbers.
const { KVC_GGUF_BOOL: T_BOOL, KVC_GGUF_STRING: T_STRING, KVC_GGUF_ARRAY: T_ARRAY } = C_CODES;
// How each number type's elements read, as kvc_gguf_raw gives them.
const ELEMENTS = {
  [C_CODES.KVC_GGUF_UINT8]: Uint8Array, [C_CODES.KVC_GGUF_INT8]: Int8Array,
  [C_CODES.KVC_GGUF_UINT16]: Uint16Array, [C_CODES.KVC_GGUF_INT16]: Int16Array,
  [C_CODES.KVC_GGUF_UINT32]: Uint32Array, [C_CODES.KVC_GGUF_INT32]: Int32Array,
  [C_CODES.KVC_GGUF_FLOAT32]: Float32Array, [T_BOOL]: Uint8Array,
  [C_CODES.KVC_GGUF_UINT64]: BigUint64Array, [C_CODES.KVC_GGUF_INT64]: BigInt64Array,
  [C_CODES.KVC_GGUF_FLOAT64]: Float64Array,
};
const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A tensor's type as a message names it. */
const typeLabel = (info) => info.type ?? `${info.typeId} (not a ggml type)`;

/** A bigint as a number where that is exact. */
const exact = (x) => (x <= SAFE && x >= -SAFE ? Number(x) : x);

/** A parsed GGUF file: its metadata and its tensors, converted on demand. */
export class GgufFile {
  constructor(version, metadata, tensors, bytes) {
    this.version = version;
    /** @type {Map<string, unknown>} */
    this.metadata = metadata;
    /** @type {Map<string, { name: string, type: string | null, typeId: number, dims: number[], offset: number, bytes: number }>} */
    this.tensors = tensors;
    this.bytes = bytes;
  }

  /** A metadata value, or an error naming the missing key. */
  get(key) {
    if (!this.metadata.has(key)) throw new GgufError(`missing metadata key ${key}`);
    return this.metadata.get(key);
  }

  /** A tensor's values as a new Float32Array, dequantized from any type the
   * weight table has; dims innermost first, as ggml lists them. */
  tensor(name) {
    const info = this.tensors.get(name);
    if (!info) throw new GgufError(`missing tensor ${name}`);
    if (info.bytes === 0) {
      throw new GgufError(`tensor ${name} has type ${typeLabel(info)}, which this reader does not convert`);
    }
    const where = 'GgufFile.tensor';
    const count = info.dims.reduce((n, d) => n * d, 1);
    return callC(where, [this.bytes.subarray(info.offset, info.offset + info.bytes), 4 * count],
      (src, dst) => lib().kvc_weight_dequantize(info.typeId, src, 0, count, dst), ([, dst]) => copyOut('f32', dst, count));
  }
}

// The out-parameter slots the accessors write, staged together: a, b, c,
// dims, offset, bytes, d.
const SLOT_BYTES = [8, 8, 8, 8 * 4, 8, 8, 8];


/** Bytes [ptr, ptr + len) of the heap as text (a copy: TextDecoder refuses
 * views of a shared memory). */
function text(decoder, ptr, len) {
  return decoder.decode(heap().u8.slice(ptr, ptr + len));
}

/** The elements of string value v, one call each, decoded from one copy of
 * the bytes they span. */
function readStrings(api, g, v, count, s, decoder) {
  const at = new Array(count);
  const lengths = new Array(count);
  let lo = Infinity;
  let hi = 0;
  for (let j = 0; j < count; j++) {
    checkStatus('readGguf', api.kvc_gguf_string(g, v, j, s.a, s.b));
    at[j] = u32At(s.a);
    lengths[j] = u32At(s.b);
    lo = Math.min(lo, at[j]);
    hi = Math.max(hi, at[j] + lengths[j]);
  }
  if (count === 0) return [];
  const span = heap().u8.slice(lo, hi);
  return at.map((p, j) => decoder.decode(span.subarray(p - lo, p - lo + lengths[j])));
}

/** Number value v's elements: one copy of the raw little-endian bytes. */
function readNumbers(api, g, v, item, s) {
  checkStatus('readGguf', api.kvc_gguf_raw(g, v, s.a, s.b));
  const ptr = u32At(s.a);
  const raw = heap().u8.slice(ptr, ptr + u32At(s.b));
  const elements = new ELEMENTS[item](raw.buffer);
  if (item === T_BOOL) return Array.from(elements, (x) => x !== 0);
  if (elements instanceof BigUint64Array || elements instanceof BigInt64Array) return Array.from(elements, exact);
  return Array.from(elements);
}

/** Value v as a JavaScript value: a number (a bigint where a 64-bit integer
 * is beyond 2^53), boolean, string, or an array of them (or of arrays). */
function readValue(api, g, v, s, decoder) {
  checkStatus('readGguf', api.kvc_gguf_value(g, v, s.a, s.b, s.c));
  const type = u32At(s.a);
  const item = u32At(s.b);
  const count = u32At(s.c);
  let elements;
  if (item === T_STRING) {
    elements = readStrings(api, g, v, count, s, decoder);
  } else if (item === T_ARRAY) {
    elements = new Array(count);
    for (let j = 0; j < count; j++) {
      checkStatus('readGguf', api.kvc_gguf_array_item(g, v, j, s.d));
      elements[j] = readValue(api, g, u32At(s.d), s, decoder);
    }
  } else {
    elements = readNumbers(api, g, v, item, s);
  }
  return type === T_ARRAY ? elements : elements[0];
}

/** Tensor t: name, ggml type (name and id), dims, offset in the file, bytes (0: a type the reader does not convert). */
function readTensor(api, g, t, dataOffset, s, decoder) {
  checkStatus('readGguf', api.kvc_gguf_tensor(g, t, s.a, s.b, s.c, s.d, s.dims, s.offset, s.bytes));
  const typeName = api.kvc_gguf_tensor_type_name(g, t) >>> 0;
  const dims = Array.from({ length: u32At(s.d) }, (_, d) => Number(u64At(s.dims + 8 * d)));
  return {
    name: text(decoder, u32At(s.a), u32At(s.b)),
    type: typeName ? readCString(typeName) : null,
    typeId: u32At(s.c),
    dims,
    offset: dataOffset + Number(u64At(s.offset)),
    bytes: Number(u64At(s.bytes)),
  };
}

/**
 * One try at the header in `prefix` (the first bytes of a file; `more`:
 * whether the file goes on past them): { g } (a kvc_gguf pointer, which
 * the caller frees with kvc_gguf_free), or { needed } (the prefix length
 * to try again with, when the header goes on past it); a file that cannot
 * be read throws a GgufError with kvc_gguf_explain's sentence.
 */
export function parsePrefix(where, prefix, more) {
  const api = lib();
  const len = prefix.length;
  return withStaging(where, [len, 4, 4, EXPLAIN_BYTES], ([src, out, needed, sentence]) => {
    heap().u8.set(prefix, src);
    const status = api.kvc_gguf_parse(src, len, out, needed);
    if (status === 0) return { g: u32At(out) };
    const code = statusName(status);
    if (code === 'KVC_E_GGUF_TRUNCATED' && more) return { needed: Math.max(u32At(needed), 2 * len) };
    if (!code.startsWith('KVC_E_GGUF_')) checkStatus(where, status);
    api.kvc_gguf_explain(src, len, sentence, EXPLAIN_BYTES);
    throw new GgufError(readCString(sentence));
  });
}

/**
 * What the kvc_gguf at `g` holds, as JavaScript values: { version,
 * metadata, tensors, dataOffset, dataBytes } (see GgufFile).
 */
export function describeGguf(where, g) {
  const api = lib();
  // A string is its bytes: a leading U+FEFF is a character of it (Gemma 3 has a token "\uFEFF//" beside "//").
  const decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  return withStaging(where, SLOT_BYTES, ([a, b, c, dims, offset, bytes, d]) => {
    const s = { a, b, c, d, dims, offset, bytes };
    const metadata = new Map();
    const entries = api.kvc_gguf_metadata_count(g) >>> 0;
    for (let i = 0; i < entries; i++) {
      checkStatus(where, api.kvc_gguf_key(g, i, s.a, s.b));
      const key = text(decoder, u32At(s.a), u32At(s.b));
      metadata.set(key, readValue(api, g, i, s, decoder));
    }
    const dataOffset = Number(api.kvc_gguf_data_offset(g));
    const tensors = new Map();
    const count = api.kvc_gguf_tensor_count(g) >>> 0;
    for (let t = 0; t < count; t++) {
      const info = readTensor(api, g, t, dataOffset, s, decoder);
      tensors.set(info.name, info);
    }
    return { version: api.kvc_gguf_version(g), metadata, tensors, dataOffset, dataBytes: Number(api.kvc_gguf_data_bytes(g)) };
  });
}

/** The kvc_gguf of a file held whole in memory, its header parsed from a growing prefix as a streaming loader does. */
export function parseWhole(where, bytes) {
  for (let len = Math.min(bytes.length, FIRST_PREFIX); ;) {
    const { g, needed } = parsePrefix(where, bytes.subarray(0, len), len < bytes.length);
    if (g) return g;
    len = Math.min(bytes.length, needed);
  }
}

/** A truncated file: the first tensor past its `length` bytes, named. */
export function checkTensorsPresent(tensors, length) {
  for (const info of tensors.values()) {
    const end = info.offset + info.bytes;
    if (end > length) {
      throw new GgufError(`truncated: tensor ${info.name} (${info.dims.join(' x ')} ${typeLabel(info)}) needs bytes ` +
        `${info.offset}..${end}, the file has ${length}`);
    }
  }
}

/**
 * Parses a GGUF file held in memory (versions 1 to 3): its metadata and
 * tensor infos, checked to the last field; tensors are read by
 * `tensor(name)`. Call `await init()` first: the reader is the C library's.
 * @param {Uint8Array | ArrayBuffer} input
 * @returns {GgufFile}
 */
export function readGguf(input) {
  const bytes = input instanceof ArrayBuffer ? new Uint8Array(input) : input;
  if (!(bytes instanceof Uint8Array)) throw new TypeError('readGguf: the file must be a Uint8Array or an ArrayBuffer');
  const g = parseWhole('readGguf', bytes);
  try {
    const { version, metadata, tensors } = describeGguf('readGguf', g);
    checkTensorsPresent(tensors, bytes.length);
    return new GgufFile(version, metadata, tensors, bytes);
  } finally {
    lib().kvc_gguf_free(g);
  }
}

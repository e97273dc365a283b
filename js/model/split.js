// A model published as parts: llama.cpp's gguf-split writes a large GGUF
// file as `<name>-00001-of-0000N.gguf` ... , each part a GGUF file of its
// own -- the first with every metadata entry, the others with only split.no,
// split.count and split.tensors.count -- holding some of the tensors. The
// parts are read here as the one file they were cut from: a header with the
// first part's metadata and every part's tensor infos (their offsets moved
// to where each part's data lands), then each part's tensor data in turn.
// The loader reads that file as any other.
import { GgufError } from '../runtime/checks.js';
import { shown } from '../runtime/options.js';

// A part's name: `-00001-of-00003.gguf` at its end (gguf-split's %05d, counted from 1).
const PART_NAME = /-(\d{5})-of-(\d{5})\.gguf$/;
const GGUF_MAGIC = 0x46554747; // "GGUF"
const DEFAULT_ALIGNMENT = 32;
// The bytes of each metadata value type (GGUF's ids 0 to 12); 0: a string or an array.
const VALUE_BYTES = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
const STRING = 8;
const ARRAY = 9;

/**
 * The URLs of every part when `url` names one part of a split model
 * (`…-00002-of-00003.gguf`), else null.
 */
export function splitParts(url) {
  const href = String(url);
  const [path, query = ''] = href.split(/(?=[?#])/);
  const match = PART_NAME.exec(path);
  if (!match || Number(match[2]) < 2) return null;
  const count = Number(match[2]);
  const stem = path.slice(0, match.index);
  return Array.from({ length: count }, (_, i) => `${stem}-${String(i + 1).padStart(5, '0')}-of-${match[2]}.gguf${query}`);
}

/** Too few bytes of a header to walk it: how many to try next. */
class NeedMore {
  constructor(at) {
    this.at = at;
  }
}

/**
 * Walks a GGUF header (versions 2 and 3, which gguf-split writes): where its
 * metadata entries and tensor infos lie, the split.* values and the
 * alignment, and each tensor info's offset field. Throws NeedMore when
 * `bytes` ends inside it.
 */
function walkHeader(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  const need = (n) => {
    if (at + n > bytes.length) throw new NeedMore(at + n);
  };
  const u32 = () => { need(4); at += 4; return view.getUint32(at - 4, true); };
  const u64 = () => {
    need(8);
    at += 8;
    const value = view.getBigUint64(at - 8, true);
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new GgufError(`a count or size of ${value} at byte ${at - 8}`);
    return Number(value);
  };
  const string = () => {
    const n = u64();
    need(n);
    at += n;
    return new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes.subarray(at - n, at)); // a leading U+FEFF kept, as gguf.js keeps it
  };
  const scalar = (type) => {
    const size = VALUE_BYTES[type];
    if (!size) throw new GgufError(`a metadata value of type ${type}`);
    need(size);
    at += size;
    return type === 2 ? view.getUint16(at - 2, true) : type === 4 ? view.getUint32(at - 4, true)
      : type === 5 ? view.getInt32(at - 4, true) : type === 3 ? view.getInt16(at - 2, true) : null;
  };
  const value = (type) => {
    if (type === STRING) return string();
    if (type !== ARRAY) return scalar(type);
    const itemType = u32();
    const count = u64();
    if (itemType !== STRING && itemType !== ARRAY && VALUE_BYTES[itemType]) {
      need(count * VALUE_BYTES[itemType]);
      at += count * VALUE_BYTES[itemType];
    } else {
      for (let i = 0; i < count; i++) value(itemType);
    }
    return null;
  };
  if (u32() !== GGUF_MAGIC) throw new GgufError('a part does not begin "GGUF"');
  const version = u32();
  if (version !== 2 && version !== 3) throw new GgufError(`a part of GGUF version ${version} (a split model's parts are versions 2 and 3)`);
  const tensorCount = u64();
  const entryCount = u64();
  const entriesAt = at;
  const split = {};
  let alignment = DEFAULT_ALIGNMENT;
  for (let i = 0; i < entryCount; i++) {
    const key = string();
    const v = value(u32());
    if (key.startsWith('split.')) split[key] = v;
    if (key === 'general.alignment') alignment = v;
  }
  const infosAt = at;
  const offsets = []; // where each tensor info's offset field is
  let dataEnd = 0;
  for (let t = 0; t < tensorCount; t++) {
    string();
    const dims = u32();
    need(8 * dims + 12);
    at += 8 * dims + 4;
    offsets.push(at);
    dataEnd = Math.max(dataEnd, u64());
  }
  if (!(alignment > 0) || alignment % 8 !== 0) throw new GgufError(`general.alignment ${alignment} is not a positive multiple of 8`);
  return { version, tensorCount, entryCount, entriesAt, infosAt, end: at, offsets, split, alignment, dataOffset: alignUp(at, alignment) };
}

function alignUp(x, alignment) {
  return Math.ceil(x / alignment) * alignment;
}

/** A part's header: its first bytes read until the header is whole ({ header, rest: the chunks after }). */
async function readHeader(where, name, chunks) {
  const iterator = chunks[Symbol.asyncIterator]();
  let bytes = new Uint8Array(0);
  for (;;) {
    try {
      return { header: walkHeader(bytes), bytes, iterator };
    } catch (error) {
      if (!(error instanceof NeedMore)) throw new GgufError(`${where}: ${name}: ${error.message}`);
    }
    const { value, done } = await iterator.next();
    if (done) throw new GgufError(`${where}: ${name} ends inside its header (${bytes.length} bytes)`);
    const grown = new Uint8Array(bytes.length + value.length);
    grown.set(bytes);
    grown.set(value, bytes.length);
    bytes = grown;
  }
}

/**
 * The parts ([{ name, total, chunks }], in order) read as the one file they
 * were cut from: { total, chunks }. A part that is not the one its place
 * wants (its split.no, split.count or the tensor count they add up to) is
 * refused by name.
 */
export async function joinParts(where, parts) {
  const read = [];
  for (const part of parts) read.push({ ...part, ...(await readHeader(where, part.name, part.chunks)) });
  const count = parts.length;
  const [first] = read;
  const tensors = read.reduce((sum, p) => sum + p.header.tensorCount, 0);
  const expected = first.header.split['split.tensors.count'];
  read.forEach(({ name, header }, i) => {
    const { 'split.no': no, 'split.count': splitCount, 'split.tensors.count': splitTensors } = header.split;
    if (no !== i || splitCount !== count || splitTensors !== expected) {
      throw new GgufError(`${where}: ${name} is not part ${i + 1} of ${count} of this model: its split.no is ${shown(no)}` +
        `${Number.isInteger(no) ? ` (part ${no + 1})` : ''}, split.count ${shown(splitCount)} and split.tensors.count ${shown(splitTensors)}` +
        `${i > 0 ? `, where the first part's is ${shown(expected)}` : ''}`);
    }
  });
  if (tensors !== expected) throw new GgufError(`${where}: the ${count} parts hold ${tensors} tensors, where split.tensors.count is ${expected}`);
  const { alignment } = first.header;
  // Where each part's tensor data lands in the joined file's data.
  let base = 0;
  const bases = read.map((p) => {
    if (p.total === null) throw new GgufError(`${where}: ${p.name}'s size is not known (a split model's parts need their Content-Length)`);
    const at = base;
    base = alignUp(base + p.total - p.header.dataOffset, alignment);
    return at;
  });
  // The joined header: the first part's metadata, every part's tensor infos with their offsets moved.
  const infos = read.map(({ bytes, header }, i) => {
    const copy = bytes.slice(header.infosAt, header.end);
    const view = new DataView(copy.buffer);
    for (const field of header.offsets) {
      const at = field - header.infosAt;
      view.setBigUint64(at, view.getBigUint64(at, true) + BigInt(bases[i]), true);
    }
    return copy;
  });
  const headerLength = 24 + (first.header.infosAt - first.header.entriesAt) + infos.reduce((sum, b) => sum + b.length, 0);
  const head = new Uint8Array(alignUp(headerLength, alignment));
  const view = new DataView(head.buffer);
  view.setUint32(0, GGUF_MAGIC, true);
  view.setUint32(4, first.header.version, true);
  view.setBigUint64(8, BigInt(tensors), true);
  view.setBigUint64(16, BigInt(first.header.entryCount), true);
  head.set(first.bytes.subarray(first.header.entriesAt, first.header.infosAt), 24);
  let at = 24 + first.header.infosAt - first.header.entriesAt;
  for (const b of infos) {
    head.set(b, at);
    at += b.length;
  }
  const total = head.length + base;
  async function* chunks() {
    yield head;
    let written = 0;
    for (const [i, part] of read.entries()) {
      if (bases[i] > written) yield new Uint8Array(bases[i] - written); // alignment between parts
      written = bases[i];
      // The part's bytes after its header: what was read with it, then the rest.
      let skip = part.header.dataOffset;
      let seen = 0;
      const pass = (chunk) => {
        const from = Math.min(chunk.length, Math.max(0, skip - seen));
        seen += chunk.length;
        return chunk.subarray(from);
      };
      const first = pass(part.bytes);
      if (first.length) yield first;
      written += first.length;
      for (;;) {
        const { value, done } = await part.iterator.next();
        if (done) break;
        const data = pass(value);
        written += data.length;
        if (data.length) yield data;
      }
      if (seen !== part.total) throw new GgufError(`${where}: ${part.name} is ${seen} bytes, not the ${part.total} it said`);
    }
  }
  return { total, chunks: chunks() };
}

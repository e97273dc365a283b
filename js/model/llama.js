// The model runner: a GGUF language model (llama, qwen2, qwen3, gemma3, smollm3, phi3; weights in
// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL or IQ4_XS, left in
// their encoding in the wasm heap) whose forward pass runs in C (src/model)
// on this package's KvCache: the prompt in batches, each decode step a
// whole layer's attention in one call, the attention fed to imp, and
// speculative decoding (prompt-lookup drafts) verified in one forward pass
// and rolled back with the cache's verify. JavaScript makes a few calls per
// forward pass: tokens in, logits out.
//
//   import init from 'kvcache-wasm';
//   import { Llama, generate } from 'kvcache-wasm/llama';
//   await init();
//   const llama = await Llama.load(await fetch(url), { onProgress });   // or Llama.fromGguf(bytes)
//   const session = llama.session({ mode: 'q8' });
//   const { tokens, stats } = generate(session, llama.tokenizer.encode('Once'), { steps: 100, draft: 4 });
import {
  GgufError, GgufFile, checkTensorsPresent, describeGguf, parsePrefix, parseWhole, readGguf,
} from './gguf.js';
import { Tokenizer } from '../tokenizers/tokenizer.js';
import { KvCache, modelPointer } from '../cache/model.js';
import { PrefixCache } from '../cache/prefix.js';
import { MAX_POSITIONS, MODES } from '../cache/layer.js';
import { C_CODES, C_LIMITS } from '../runtime/constants.js';
import { commonPrefix } from '../runtime/tokens.js';
import { KvCacheError, checkBytes, checkFloat32, checkInteger, checkObject, shown } from '../runtime/checks.js';
import { checkKeys, checkUnused } from '../runtime/options.js';
import {
  callC, checkStatus, copyOut, disposeSymbol, heap, heapLimitBytes, heapView, lib, ownedObjects, readCString, sizeOrInfinity, statusName,
  u32At, withStaging,
} from '../runtime/runtime.js';
import { aborted, letGo, sourceChunks } from '../store/sources.js';
import { ModelStore, loadThrough } from '../store/store.js';
import { hfOptions, isHfName, resolveHfName } from '../store/hf.js';
import { joinParts, splitParts } from './split.js';
import { keepPoints, restoreLongest, storedPrefixesOf } from './stored-prefixes.js';
import { readSaved, savedBytes } from './saved-session.js';
import { decodeStats, decodeWith, drafterOf, endStats, hold, logitsInto, pass, rewind, take, taken } from './decode.js';
import { SAMPLING_OPTIONS, createSampler } from './sampling.js';
import { CONSTRAINT_OPTIONS, constrainedSampler, constraintOf } from './grammar.js';
import { Projector, openProjector, pieceId } from './vision.js';
import { embed, embeddingConfig, rerank } from './embeddings.js';
import { fromPixels, imagePixels } from './images.js';
import { IMAGE_BIT, ImageRows, imageId, isImageId, ropeShiftOf, runsOf, tileIdBase } from './image-tokens.js';

const SESSION_OPTIONS = ['mode', 'residualRows', 'maxRows', 'sinks', 'recent', 'prefixCache', 'cache', 'tokens', 'importance'];
const RESPOND_OPTIONS = ['signal', 'maxTokens', 'stop', 'draft', 'minNgram', 'draftSession', 'context', 'logprobs', 'constraintPrefix', 'sharedPrefix', ...SAMPLING_OPTIONS, ...CONSTRAINT_OPTIONS];
// The most alternatives a token's logprobs list (OpenAI's top_logprobs bound).
const MAX_TOP_LOGPROBS = 20;
const GENERATE_OPTIONS = [...RESPOND_OPTIONS, 'special'];
// A saved session: "KVSS" (a little-endian u32), the version, the token
// count, how far its RoPE positions fall behind the cache's (version 2: a
// multimodal-RoPE model's images; version 1 has no such word), the tokens
// (u32; an image's past the vocabulary), then the cache's snapshot.
const LOAD_OPTIONS = ['onProgress', 'signal', 'contextLength', 'cacheMode', 'store', 'storePrefixes', 'revalidate', 'perLayerEmbeddings', 'projector', 'huggingFace'];
const FORWARD_OPTIONS = ['logits', 'importance', 'verify', 'into'];

// options.into of a pass of `rows` rows of logits: a Float32Array of at
// least rows × vocab values (its first ones take them), checked before the
// pass so that a wrong one leaves the cache as it was.
function checkLogitsInto(where, into, rows, vocabSize) {
  if (into === undefined) return undefined;
  checkFloat32(where, 'options.into', into);
  if (into.length < rows * vocabSize) {
    throw new RangeError(`${where}: options.into must hold at least ${rows * vocabSize} values, ${rows} rows of ${vocabSize} logits (got ${into.length})`);
  }
  return into;
}

// The chunks Llama#digest reads a model's per-layer embeddings in.
const DIGEST_CHUNK = 1 << 24;
// The per-layer rows a model whose reader is asynchronous keeps (E4B's rows: 6 KiB each).
const ASYNC_ROWS_BYTES = 64 << 20;
// kvc_lm_forward's flags (kvcache.h).
const { KVC_LM_IMPORTANCE: LM_IMPORTANCE, KVC_LM_VERIFY: LM_VERIFY, KVC_LM_SPAN: LM_SPAN } = C_CODES;
// A header prefix's first buffer (it doubles as the header needs).
const FIRST_PREFIX = 1 << 20;
// Room for kvc_lm_create's sentence.
const MESSAGE_BYTES = 512;
// The context a load checks the heap for when not told: most chats stay within it.
const DEFAULT_CONTEXT = 4096;

const owned = ownedObjects((ptr) => lib().kvc_lm_free(ptr));
const fromPointer = Symbol('fromPointer');
// [restore](where, tokens): a session on a given cache takes up the tokens it was computed from.
const restore = Symbol('restore');
// [knowsId](id), [forwardIds](cache, ids, options): a session's passes over ids that may hold images'.
const knowsId = Symbol('knowsId');
const forwardIds = Symbol('forwardIds');
const ropeShiftAfter = Symbol('ropeShiftAfter');

/** A prefix of a file, grown by appends into one buffer that doubles. */
class Prefix {
  bytes = new Uint8Array(FIRST_PREFIX);
  length = 0;

  append(chunk) {
    if (this.length + chunk.length > this.bytes.length) {
      const grown = new Uint8Array(Math.max(2 * this.bytes.length, this.length + chunk.length));
      grown.set(this.bytes.subarray(0, this.length));
      this.bytes = grown;
    }
    this.bytes.set(chunk, this.length);
    this.length += chunk.length;
  }

  get view() {
    return this.bytes.subarray(0, this.length);
  }
}

/**
 * A model being opened: the kvc_lm made from a parsed header, checked to
 * fit the heap with a cache of `contextLength` positions in `cacheMode`,
 * and its weights region filled from the file's bytes as they come
 * (`take(chunk, at)`: the chunk's bytes at file offset `at`). `done()`
 * checks that all of it came and gives the Llama; `fail()` frees
 * everything.
 */
function opening(where, g, { contextLength, cacheMode = 'f32', perLayerEmbeddings = 'outside' }, bytes) {
  const api = lib();
  const { metadata, tensors, dataOffset, dataBytes } = describeGguf(where, g);
  // The header's digest (its bytes up to the tensor infos' end), the seed of the tensor data's (Llama#digest).
  const header = bytes.subarray(0, api.kvc_gguf_header_bytes(g) >>> 0);
  const headerDigest = withStaging(where, [header.length], ([at]) => {
    heap().u8.set(header, at);
    return api.kvc_digest(at, header.length, 0n);
  });
  const tokenizer = Tokenizer.fromGguf(metadata);
  const ptr = withStaging(where, [4, MESSAGE_BYTES], ([outPtr, message]) => {
    const status = api.kvc_lm_create(g, outPtr, message, MESSAGE_BYTES);
    if (status !== 0) {
      const why = readCString(message);
      if (statusName(status) === 'KVC_E_NOMEM') throw new KvCacheError(`${where}: ${why}`, 'KVC_E_NOMEM');
      throw new GgufError(why || readCString(api.kvc_status_name(status) >>> 0));
    }
    return u32At(outPtr);
  });
  // The per-layer embeddings (gemma4's) stay out of the heap unless asked
  // for: in JavaScript memory, or read by the app's own reader. Where they
  // lie in the tensor data, in or out of the heap (Llama#digest).
  const rowBytes = api.kvc_lm_per_layer_row_bytes(ptr) >>> 0;
  const tableInfo = rowBytes ? tensors.get('per_layer_token_embd.weight') : null;
  const tableRange = tableInfo && { offset: tableInfo.offset - dataOffset, bytes: tableInfo.bytes };
  let table = null; // tableRange, and how its rows are read, where it stays outside
  if (tableRange && perLayerEmbeddings !== 'heap') {
    checkStatus(where, api.kvc_lm_keep_per_layer_outside(ptr));
    const reader = typeof perLayerEmbeddings === 'object' ? perLayerEmbeddings : {};
    table = { ...tableRange, rowBytes, held: null, read: reader.read ?? null, readAsync: reader.readAsync ?? null };
  }
  const perLayer = table && perLayerRows(where, table, dataOffset);
  const rerankTemplate = metadata.get('tokenizer.chat_template.rerank');
  const llama = new Llama({ [fromPointer]: {
    ptr, tokenizer, tensors, cacheMode, headerDigest, perLayer, tableRange,
    rerankTemplate: typeof rerankTemplate === 'string' ? rerankTemplate : null,
  } });
  if (tokenizer.vocabSize !== llama.config.vocabSize) {
    llama.free();
    throw new GgufError(`tokenizer.ggml.tokens holds ${tokenizer.vocabSize} tokens and token_embd.weight ${llama.config.vocabSize} rows: they must be one vocabulary`);
  }
  const weightsBytes = dataBytes - (table?.bytes ?? 0);
  try {
    llama.checkFits(where, contextLength ?? Math.min(llama.config.contextLength, DEFAULT_CONTEXT), cacheMode, weightsBytes);
    const status = api.kvc_lm_alloc_weights(ptr);
    if (statusName(status) === 'KVC_E_NOMEM') llama.checkFits(where, 0, cacheMode, weightsBytes, 'the heap, grown as far as it goes, has no block that large');
    checkStatus(where, status);
  } catch (error) {
    llama.free();
    throw error;
  }
  const weights = api.kvc_lm_weights(ptr) >>> 0;
  let filled = 0;
  return {
    llama,
    weightsBytes,
    take(chunk, at) {
      // The part of [at, at + chunk.length) that is tensor data: the
      // per-layer table's bytes (when it stays outside) to it, the rest to
      // the weights, those after the table moved down by it.
      const end = dataOffset + weightsBytes + (table?.bytes ?? 0);
      const piece = (from, to, put) => {
        from = Math.max(from, at);
        to = Math.min(to, at + chunk.length);
        if (from < to) put(chunk.subarray(from - at, to - at), from);
      };
      const toWeights = (shift) => (part, from) => {
        heap().u8.set(part, weights + from - dataOffset - shift);
        filled += part.length;
      };
      if (!table) return piece(dataOffset, end, toWeights(0));
      const tableFrom = dataOffset + table.offset, tableTo = tableFrom + table.bytes;
      piece(dataOffset, tableFrom, toWeights(0));
      piece(tableFrom, tableTo, (part, from) => {
        // The digest of the bytes before the table seeds the table's (Llama#digest), which goes as they pass.
        table.digest ??= chunkedDigest(where, api.kvc_digest(weights, table.offset, headerDigest));
        table.digest.push(part);
        table.filled = (table.filled ?? 0) + part.length;
        if (table.read || table.readAsync) return; // the app reads its rows
        // A chunk holding the whole table (Llama.fromGguf's bytes) is kept as it is; else copied.
        if (part.length === table.bytes) table.held = part;
        else (table.held ??= new Uint8Array(table.bytes)).set(part, from - tableFrom);
      });
      piece(tableTo, end, toWeights(table.bytes));
    },
    done(fileLength) {
      const tableMissing = table && (table.filled ?? 0) < table.bytes;
      if (filled < weightsBytes || tableMissing) checkTensorsPresent(tensors, fileLength);
      if (filled < weightsBytes || tableMissing) {
        throw new GgufError(`truncated: the file ends at byte ${fileLength}, its tensor data at ${dataOffset + dataBytes}`);
      }
      if (table) table.tableDigest = table.digest.end();
      // The matrices packed for the kernels, in place (the same results,
      // faster); where its few rows of scratch do not fit, the file's layout serves.
      const packed = api.kvc_lm_pack_weights(ptr);
      if (statusName(packed) !== 'KVC_E_NOMEM') checkStatus(where, packed);
      return llama;
    },
    fail() {
      llama.free();
    },
  };
}

/**
 * How a model whose per-layer embeddings stay outside the heap reads a
 * pass's rows: rows(tokens) gives the tokens' rows of the table, in order,
 * as they are in the file -- from the bytes kept in JavaScript, or through
 * the app's read(offset, length) (offset in the file), a distinct token
 * read once a pass, or from the rows its readAsync(offset, length) gave
 * prepare(tokens) before (kept, the least recently used let go past
 * ASYNC_ROWS_BYTES). A read that throws or gives the wrong bytes, or a row
 * not prepared, fails the pass before anything is computed.
 */
function perLayerRows(where, table, dataOffset) {
  const { rowBytes } = table;
  const prepared = new Map(); // token -> its row, in the order last used (readAsync)
  const checked = (bytes, offset, length, name) => {
    if (!(bytes instanceof Uint8Array) || bytes.length !== length) {
      throw new TypeError(`${where}: options.perLayerEmbeddings.${name}(${dataOffset + offset}, ${length}) must give a Uint8Array of ${length} bytes (got ${shown(bytes)})`);
    }
    return bytes;
  };
  return {
    rowBytes,
    async: table.readAsync !== null,
    get heldBytes() { return table.held?.byteLength ?? 0; },
    // The digest of the tensor data up to the table's end (taken as the file loaded: Llama#digest).
    get tableDigest() { return table.tableDigest; },
    read(offset, length) {
      if (table.held) return table.held.subarray(offset - table.offset, offset - table.offset + length);
      return checked(table.read(dataOffset + offset, length), offset, length, 'read');
    },
    async readAsync(offset, length) {
      return checked(await table.readAsync(dataOffset + offset, length), offset, length, 'readAsync');
    },
    // Reads (readAsync) the rows of the tokens not prepared yet.
    async prepare(tokens) {
      if (!this.async) return;
      const missing = [...new Set(tokens)].filter((token) => !prepared.has(token));
      const rows = await Promise.all(missing.map((token) => this.readAsync(table.offset + token * rowBytes, rowBytes)));
      missing.forEach((token, i) => prepared.set(token, rows[i]));
      for (const token of prepared.keys()) {
        if (prepared.size * rowBytes <= ASYNC_ROWS_BYTES || prepared.size <= missing.length) break;
        if (!missing.includes(token)) prepared.delete(token);
      }
    },
    row(token) {
      if (!this.async) return this.read(table.offset + token * rowBytes, rowBytes);
      const row = prepared.get(token);
      if (!row) {
        throw new TypeError(`${where}: token ${token}'s per-layer row is not read yet: its model reads them asynchronously ` +
          '(options.perLayerEmbeddings.readAsync): a session\'s generate() and respond() and Chat read them first; else await llama.preparePerLayerRows(tokens)');
      }
      prepared.delete(token); // the most recently used last
      prepared.set(token, row);
      return row;
    },
    rows(tokens) {
      const out = new Uint8Array(tokens.length * rowBytes);
      const seen = new Map();
      tokens.forEach((token, i) => {
        if (!seen.has(token)) seen.set(token, this.row(token));
        out.set(seen.get(token), i * rowBytes);
      });
      return out;
    },
  };
}

/**
 * XXH64 (kvc_digest) of bytes pushed in any pieces, taken in chunks of
 * DIGEST_CHUNK, each seeded by the one before: push(part), then end().
 */
function chunkedDigest(where, seed) {
  const api = lib();
  const buffer = new Uint8Array(DIGEST_CHUNK);
  let digest = seed;
  let filled = 0;
  const flush = () => {
    if (filled === 0) return;
    digest = withStaging(where, [filled], ([at]) => {
      heap().u8.set(buffer.subarray(0, filled), at);
      return api.kvc_digest(at, filled, digest);
    });
    filled = 0;
  };
  return {
    push(part) {
      for (let i = 0; i < part.length;) {
        const n = Math.min(part.length - i, DIGEST_CHUNK - filled);
        buffer.set(part.subarray(i, i + n), filled);
        filled += n;
        i += n;
        if (filled === DIGEST_CHUNK) flush();
      }
    },
    end() {
      flush();
      return digest;
    },
  };
}

/** perLayerEmbeddings: 'outside' (default), 'heap', { read(offset, length) } (a synchronous reader of the file) or { readAsync(offset, length) }. */
function checkPerLayerEmbeddings(where, value) {
  if (value === undefined || value === 'outside' || value === 'heap') return value ?? 'outside';
  if (typeof value === 'object' && value !== null && (typeof value.read === 'function') !== (typeof value.readAsync === 'function')) return value;
  throw new TypeError(`${where}: options.perLayerEmbeddings must be 'outside', 'heap', { read(offset, length) } or { readAsync(offset, length) } (got ${shown(value)})`);
}

/** Load options, checked: { onProgress, signal, contextLength, cacheMode, store, storePrefixes, revalidate, perLayerEmbeddings, projector, huggingFace }. */
function loadOptions(where, options) {
  checkObject(where, 'options', options);
  checkKeys(where, options, LOAD_OPTIONS);
  const { onProgress, signal, contextLength, cacheMode = 'f32', store, storePrefixes = true, revalidate = false } = options;
  if (store !== undefined && !(store instanceof ModelStore)) throw new TypeError(`${where}: options.store must be a ModelStore (ModelStore.open) (got ${shown(store)})`);
  if (typeof storePrefixes !== 'boolean') throw new TypeError(`${where}: options.storePrefixes must be a boolean (got ${shown(storePrefixes)})`);
  if (typeof revalidate !== 'boolean') throw new TypeError(`${where}: options.revalidate must be a boolean (got ${shown(revalidate)})`);
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new TypeError(`${where}: options.onProgress must be a function (got ${shown(onProgress)})`);
  if (signal !== undefined && !(typeof AbortSignal !== 'undefined' && signal instanceof AbortSignal)) {
    throw new TypeError(`${where}: options.signal must be an AbortSignal (got ${shown(signal)})`);
  }
  if (contextLength !== undefined) checkInteger(where, 'options.contextLength', contextLength, 1, MAX_POSITIONS);
  if (typeof cacheMode !== 'string' || !MODES.includes(cacheMode)) {
    throw new RangeError(`${where}: options.cacheMode must be one of ${MODES.map((m) => `'${m}'`).join(', ')} (got ${shown(cacheMode)})`);
  }
  hfOptions(where, options.huggingFace);
  return { onProgress, signal, contextLength, cacheMode, store, storePrefixes, revalidate, perLayerEmbeddings: checkPerLayerEmbeddings(where, options.perLayerEmbeddings),
    projector: options.projector, huggingFace: options.huggingFace };
}

/**
 * A model read from a source's chunks ({ total, chunks }: sourceChunks'),
 * streamed into the heap: the header is parsed as soon as it is whole, the
 * tensor data then goes straight to the weights.
 */
function readModel(where, file, { onProgress, signal, contextLength, cacheMode, perLayerEmbeddings }) {
  return readStreamed(where, file, { onProgress, signal },
    (g, bytes) => opening(where, g, { contextLength, cacheMode, perLayerEmbeddings }, bytes));
}

/**
 * A GGUF file of any kind read from a source's chunks into the heap:
 * `open(g, headerBytes)` makes what the file's bytes go into once its
 * header is whole ({ take(chunk, at), done(fileLength), fail() }: opening's
 * shape), and done's result is the file's.
 */
export async function readStreamed(where, { total, chunks }, { onProgress, signal }, openFile) {
  const prefix = new Prefix();
  let want = 1; // a first try on the first chunk; then what the parser asks for (at least twice as much)
  let model = null;
  let loaded = 0;
  const open = (more) => {
    const { g, needed } = parsePrefix(where, prefix.view, more);
    if (!g) {
      want = needed;
      return;
    }
    try {
      model = openFile(g, prefix.view); // before the tensor data comes: fits, or not
    } finally {
      lib().kvc_gguf_free(g);
    }
    model.take(prefix.view, 0);
  };
  try {
    for await (const chunk of chunks) {
      if (signal?.aborted) throw aborted(signal);
      if (model) model.take(chunk, loaded);
      else {
        prefix.append(chunk);
        if (prefix.length >= want) open(true);
      }
      loaded += chunk.length;
      onProgress?.({ loaded, total });
    }
    if (signal?.aborted) throw aborted(signal);
    if (!model) open(false);
    return model.done(loaded);
  } catch (error) {
    model?.fail();
    throw error;
  }
}

/** A split model's parts, as given to Llama.load: at least two sources. */
function checkParts(where, parts) {
  if (parts.length < 2) throw new TypeError(`${where}: a split model's parts are two or more sources (got ${parts.length})`);
  return parts;
}

/** What an error names a part by: its URL, a File's name, else its place. */
function partName(part) {
  if (typeof part === 'string' || part instanceof URL) return String(part);
  return typeof part?.name === 'string' ? part.name : 'a part given as bytes or a stream';
}

/**
 * A file loaded from `source` as Llama.load takes one -- bytes, a Blob,
 * a Response, a stream, a URL or a split file's parts; with a store, from
 * or into it -- by `read(sources, onProgress)`.
 */
async function loadFile(where, source, { store, signal, revalidate, onProgress, huggingFace, headers = {}, label = null }, read) {
  if (isHfName(source)) {
    // A Hugging Face name: its file's URL (or its parts'), listed in the store under the name as given.
    const resolved = await resolveHfName(where, source, { huggingFace, signal, store, revalidate });
    const urls = resolved.urls.length === 1 ? resolved.urls[0] : resolved.urls;
    return loadFile(where, urls, { store, signal, revalidate, onProgress, headers: resolved.headers, label: source }, read);
  }
  // A split file: its parts given, or found from the name of one of them.
  const parts = Array.isArray(source) ? checkParts(where, source)
    : (typeof source === 'string' || source instanceof URL) ? splitParts(source) : null;
  const readParts = async (sources, progress) => read(sources.length === 1 ? sources[0] : await joinParts(where, sources), progress);
  if (store) {
    const urls = parts ?? [source];
    if (!urls.every((url) => typeof url === 'string' || url instanceof URL)) {
      throw new TypeError(`${where}: a file loads through options.store from a URL (got ${shown(urls.find((url) => typeof url !== 'string' && !(url instanceof URL)))})`);
    }
    return store[loadThrough](where, urls, { signal, onProgress, revalidate, headers, label }, readParts);
  }
  const sources = [];
  try {
    for (const part of parts ?? [source]) sources.push({ name: partName(part), ...(await sourceChunks(where, part, { signal, headers })) });
    return await readParts(sources, onProgress);
  } catch (error) {
    for (const source of sources) await letGo(source);
    throw error;
  }
}

// ---------------------------------------------------------------------------
// The model

/** A language model in the wasm heap: its configuration, tokenizer and forward pass. */
export class Llama {
  #ptr = 0;
  #cacheMode;
  #headerDigest;
  #digest = null;
  #perLayer; // the per-layer embeddings' rows where they stay outside the heap (perLayerRows), or null
  #tableRange; // where the per-layer embeddings lie in the tensor data ({ offset, bytes }), or null
  #images = new ImageRows(); // the rows behind the ids of the images prepared (image-tokens.js)
  /** The ModelStore the model was loaded through (Llama.load's options.store), or null. */
  store = null;
  /**
   * Whether its sessions keep their prompts' prefixes in the store's prefix
   * cache and begin from the longest one stored (Llama.load's
   * options.storePrefixes, default true; without a store, nothing is kept).
   */
  storePrefixes = true;
  /** The vision encoder loaded beside the model (Llama.load's options.projector), or null. */
  projector = null;

  /**
   * Loads a GGUF file held whole in memory (bytes, or a GgufFile from
   * readGguf), its tensor data copied into the heap once -- but for
   * per-layer embeddings (gemma4), which by default stay in `input` and are
   * read from there (options.perLayerEmbeddings: see Llama.load). For a file
   * the size of a real model, Llama.load streams it instead.
   * @param {Uint8Array | ArrayBuffer | GgufFile} input
   */
  static fromGguf(input, options = {}) {
    const where = 'Llama.fromGguf';
    lib();
    const bytes = input instanceof GgufFile ? input.bytes : checkBytes(where, 'input', input);
    checkObject(where, 'options', options);
    checkKeys(where, options, ['perLayerEmbeddings', 'projector']);
    const perLayerEmbeddings = checkPerLayerEmbeddings(where, options.perLayerEmbeddings);
    const g = parseWhole(where, bytes);
    let model;
    try {
      model = opening(where, g, { perLayerEmbeddings }, bytes);
    } finally {
      lib().kvc_gguf_free(g);
    }
    let llama;
    try {
      model.take(bytes, 0);
      llama = model.done(bytes.length);
    } catch (error) {
      model.fail();
      throw error;
    }
    if (options.projector === undefined) return llama;
    try {
      llama.#attach(where, Projector.fromGguf(options.projector instanceof GgufFile ? options.projector.bytes : options.projector));
    } catch (error) {
      llama.free();
      throw error;
    }
    return llama;
  }

  /**
   * Loads a GGUF file from bytes, a Blob or File, a Response, a
   * ReadableStream or a URL, streamed into the wasm heap: JavaScript holds
   * one chunk at a time, never the file. `onProgress({ loaded, total })`
   * after every chunk (total null when unknown); `signal` aborts it, with
   * nothing left behind. Before the tensor data comes in, the weights and a
   * cache of `contextLength` positions (default: the file's context, at most
   * 4096) in `cacheMode` (default 'f32'; also the sessions' default mode)
   * are checked to fit the heap: a KvCacheError 'KVC_E_NOMEM' says how many
   * bytes are missing. With `store` (a ModelStore) a URL's file is kept in
   * the store: a later load reads it from there without a request (with
   * `revalidate`, one conditional request), a cut download resumes where it
   * stopped, and progress adds { fromStore, fromNetwork, restarted }; its
   * sessions keep their prompts' prefixes in the store's prefix cache
   * (ModelStore#prefixes) and a session begins from the longest one
   * stored, computing only the rest (`storePrefixes: false`: neither).
   * `perLayerEmbeddings` (gemma4's per-layer table, read a token's row at a
   * time): 'outside' (default: kept in JavaScript beside the heap, copied as
   * the file streams), 'heap', or { read(offset, length) }, a synchronous
   * reader of the file's bytes that every forward pass asks for its tokens'
   * rows. A Hugging Face name (hf:owner/repo/file.gguf, hf:owner/repo:Q4_K_M,
   * either with #revision) is resolved to its file's URL at
   * `huggingFace.endpoint` (with `huggingFace.token`), and `projector:
   * 'auto'` finds the mmproj GGUF beside it (store/hf.js).
   */
  static async load(source, options = {}) {
    const where = 'Llama.load';
    lib();
    const checked = loadOptions(where, options);
    const { onProgress, signal, contextLength, cacheMode, store, storePrefixes, revalidate, perLayerEmbeddings, huggingFace } = checked;
    let { projector } = checked;
    if (signal?.aborted) throw aborted(signal);
    const how = { store, signal, revalidate, huggingFace };
    let projectorHow = how;
    if (projector === 'auto') {
      // The projector beside a Hugging Face model, found in its repository.
      if (!isHfName(source)) throw new TypeError(`${where}: options.projector 'auto' finds the projector beside a model named hf:owner/repo...; the model here is ${shown(Array.isArray(source) ? 'a list of parts' : source)}`);
      const resolved = await resolveHfName(where, source, { huggingFace, projector: true, signal, store, revalidate });
      source = resolved.urls.length === 1 ? resolved.urls[0] : resolved.urls;
      how.headers = resolved.headers;
      how.label = source;
      projector = resolved.projector;
      projectorHow = { ...how, label: resolved.names.projector };
    }
    const llama = await loadFile(where, source, { ...how, onProgress },
      (file, progress) => readModel(where, file, { onProgress: progress, signal, contextLength, cacheMode, perLayerEmbeddings }));
    llama.store = store ?? null;
    llama.storePrefixes = storePrefixes;
    if (projector === undefined) return llama;
    try {
      const report = onProgress && ((progress) => onProgress({ ...progress, file: 'projector' }));
      llama.#attach(where, await loadFile(where, projector, { ...projectorHow, onProgress: report },
        (file, progress) => readStreamed(where, file, { onProgress: progress, signal }, (g, header) => openProjector(where, g, header))));
    } catch (error) {
      llama.free();
      throw error;
    }
    return llama;
  }

  // Keeps a projector that goes with this model (Projector#checkPair), or frees it and throws.
  #attach(where, projector) {
    try {
      projector.checkPair(where, this);
    } catch (error) {
      projector.free();
      throw error;
    }
    this.projector = projector;
  }

  constructor(internal) {
    const adopted = internal?.[fromPointer];
    if (!adopted) throw new TypeError('new Llama: use Llama.load or Llama.fromGguf');
    const { ptr, tokenizer, tensors, cacheMode, headerDigest, perLayer, tableRange, rerankTemplate } = adopted;
    this.#headerDigest = headerDigest;
    this.#perLayer = perLayer ?? null;
    this.#tableRange = tableRange ?? null;
    const api = lib();
    this.#ptr = ptr;
    this.#cacheMode = cacheMode ?? 'f32';
    this.tokenizer = tokenizer;
    /** The file's tensors: { name, type, typeId, dims, offset, bytes } (GgufFile.tensors). */
    this.tensors = tensors;
    /** A reranker's template of a query and a document (tokenizer.chat_template.rerank: {query}, {document}), or null. */
    this.rerankTemplate = rerankTemplate;
    this.config = Object.freeze({
      architecture: readCString(api.kvc_lm_architecture(ptr) >>> 0),
      dim: api.kvc_lm_dim(ptr) >>> 0,
      numLayers: api.kvc_lm_num_layers(ptr) >>> 0,
      hiddenDim: api.kvc_lm_ffn_dim(ptr) >>> 0,
      numHeads: api.kvc_lm_num_heads(ptr) >>> 0,
      numKvHeads: api.kvc_lm_num_kv_heads(ptr) >>> 0,
      headDim: api.kvc_lm_head_dim(ptr) >>> 0,
      vocabSize: api.kvc_lm_vocab_size(ptr) >>> 0,
      contextLength: api.kvc_lm_context_length(ptr) >>> 0,
      eps: api.kvc_lm_rms_eps(ptr),
      ropeBase: api.kvc_lm_rope_base(ptr),
      // Each layer's sliding window (0: global attention).
      layerWindows: Object.freeze(Array.from({ length: api.kvc_lm_num_layers(ptr) >>> 0 }, (_, l) => api.kvc_lm_layer_window(ptr, l) >>> 0)),
      // Each layer's kind: 'full', 'window', 'shared' (gemma4's shared-KV blocks), a recurrent layer's 'conv' (lfm2),
      // 'delta' (qwen35) or 'mamba2' (granitehybrid, nemotron_h), 'attn_mamba2' (falcon-h1's rows beside a Mamba-2 state),
      // or 'none' (nemotron_h's MLP-only blocks keep nothing).
      layerKinds: Object.freeze(Array.from({ length: api.kvc_lm_num_layers(ptr) >>> 0 }, (_, l) => LAYER_KINDS[api.kvc_lm_layer_kind(ptr, l)])),
      // Each layer's attention: its head size and KV heads (gemma4's window and global layers differ; 0 for a recurrent layer).
      layerHeadDims: Object.freeze(Array.from({ length: api.kvc_lm_num_layers(ptr) >>> 0 }, (_, l) => api.kvc_lm_layer_head_dim(ptr, l) >>> 0)),
      layerKvHeads: Object.freeze(Array.from({ length: api.kvc_lm_num_layers(ptr) >>> 0 }, (_, l) => api.kvc_lm_layer_kv_heads(ptr, l) >>> 0)),
      // The layer each shared layer attends over (-1 for any other layer).
      layerOwners: Object.freeze(Array.from({ length: api.kvc_lm_num_layers(ptr) >>> 0 }, (_, l) => api.kvc_lm_layer_owner(ptr, l) | 0)),
      // The recurrent layers' shape (null without them): as LayerKvCache's 'conv' and 'delta' options take it.
      recurrent: recurrentShape(api, ptr),
      // An embedding model's or a reranker's: the file's pooling ('none' for a model that generates), whether its
      // attention is causal, the size of its vectors, and a reranker's scores a text (0 without a classification head).
      ...embeddingConfig(api, ptr),
    });
    owned.adopt(this, ptr);
  }

  #live(where) {
    if (!this.#ptr) throw new TypeError(`Llama.${where}: the model was freed`);
    return this.#ptr;
  }

  /**
   * The file's digest, 16 hex digits: XXH64 (kvc_digest) of its header and
   * its tensor data. The same file gives the same digest in every build; a
   * changed byte, another digest. What a stored copy is checked by, and what
   * names the model a saved conversation belongs to. Computed once (a
   * gigabyte takes a few hundred milliseconds).
   */
  // XXH64 of the tensor data seeded by the header's: in one pass; or, for a
  // model with per-layer embeddings, wherever they are, in three -- the
  // bytes before the table, the table in chunks of DIGEST_CHUNK (taken as
  // the file loaded where it stays outside), the bytes after it -- each
  // seeded by the one before.
  // kvc_lm_digest reads packed matrices back as the file has them.
  #tensorDigest(api, ptr) {
    const size = api.kvc_lm_weights_bytes(ptr) >>> 0;
    if (!this.#tableRange) return api.kvc_lm_digest(ptr, 0, size, this.#headerDigest);
    const { offset: start, bytes } = this.#tableRange;
    if (this.#perLayer) return api.kvc_lm_digest(ptr, start, size - start, this.#perLayer.tableDigest);
    let digest = api.kvc_lm_digest(ptr, 0, start, this.#headerDigest);
    for (let at = 0; at < bytes; at += DIGEST_CHUNK) digest = api.kvc_lm_digest(ptr, start + at, Math.min(DIGEST_CHUNK, bytes - at), digest);
    return api.kvc_lm_digest(ptr, start + bytes, size - start - bytes, digest);
  }

  get digest() {
    const ptr = this.#live('digest');
    if (this.#digest === null) {
      const api = lib();
      this.#digest = BigInt.asUintN(64, this.#tensorDigest(api, ptr)).toString(16).padStart(16, '0');
    }
    return this.#digest;
  }

  /** { weights, scratch }: the bytes the model holds in the heap (its caches count apart: KvCache#memoryBytes). */
  get memoryBytes() {
    const ptr = this.#live('memoryBytes');
    return { weights: lib().kvc_lm_weights_bytes(ptr) >>> 0, scratch: lib().kvc_lm_scratch_bytes(ptr) >>> 0,
      perLayerOutside: this.#perLayer?.heldBytes ?? 0 };
  }

  /**
   * Throws a KvCacheError 'KVC_E_NOMEM' saying how many bytes are missing
   * when `extra` bytes (the weights, before they are allocated) and a cache
   * of `positions` positions in `mode` do not fit what the heap holds free
   * and can still grow by -- or, given `why`, always (an allocation that
   * failed anyway).
   */
  checkFits(where, positions, mode, extra, why = null) {
    const api = lib();
    const { layerKvHeads, layerHeadDims, layerWindows, layerKinds } = this.config;
    // Infinity: a layer's cache alone passes the 32-bit address space. A
    // window layer holds at most its window, its rollback, a page and a batch;
    // a recurrent layer its state, and another while it steps; a shared
    // or none layer nothing.
    const layerBytes = (window, l) => {
      if (layerKinds[l] === 'shared' || layerKinds[l] === 'none') return 0;
      const state = RECURRENT_KINDS.includes(layerKinds[l]) ? 2 * stateBytes(api, this.#ptr) : 0;
      if (state && layerKinds[l] !== 'attn_mamba2') return state;
      return state + sizeOrInfinity(api.kvc_layer_bytes_for(layerKvHeads[l], layerHeadDims[l], MODES.indexOf(mode),
        window ? Math.min(positions, window + WINDOW_ROLLBACK + 64 + C_LIMITS.KVC_LM_BATCH) : positions));
    };
    const cache = layerWindows.reduce((sum, window, l) => sum + layerBytes(window, l), 0);
    const room = heapLimitBytes() - heap().buffer.byteLength + (api.kvc_wasm_heap_free_bytes() >>> 0);
    if (cache + extra > room || why) {
      const [size, missing] = cache === Infinity
        ? ['a layer of it past the address space', 'a layer\'s cache alone is more than a 32-bit heap holds']
        : [`${cache} bytes`, `${cache + extra - room} bytes are missing`];
      const context = positions ? ` and a ${positions}-position ${mode} cache (${size})` : '';
      throw new KvCacheError(`${where}: ${extra} bytes of weights${context} do not fit the wasm heap (at most ` +
        `${heapLimitBytes()} bytes, room for ${room} more): ${why ?? missing}`, 'KVC_E_NOMEM');
    }
  }

  /**
   * A new generation session with its own cache. `maxRows` bounds every
   * layer's cache (evicting with { sinks, recent } when it fills; see
   * LayerKvCache#evict). With a `prefixCache` (a PrefixCache shared by
   * sessions of this model and mode), a prompt starts from the longest
   * prefix of it the prefix cache holds -- a fork, sharing its pages -- and
   * only the rest is computed; the prompt's cache is added to it afterwards.
   * With a `cache` (a KvCache of this model's geometry, say one restored
   * from a snapshot), the session continues it and owns it; its mode is the
   * cache's; `tokens` (what the saved session's `tokens` said) are the
   * tokens it was computed from -- one per position, and the pending one
   * when there is one -- which a reply continues from. `importance`
   * (default true): each token's attention goes to the cache's imp, which
   * eviction reads.
   */
  session(options = {}) {
    const where = 'llama.session';
    this.#live('session');
    if (this.config.pooling === 'rank') throw new TypeError(`${where}: this model is a reranker (pooling_type rank): it scores documents with rerank() and does not generate`);
    if (!this.config.causal) throw new TypeError(`${where}: this model is an encoder (each token sees its text both ways): it embeds texts with embed() and does not generate`);
    checkObject(where, 'options', options);
    checkKeys(where, options, SESSION_OPTIONS);
    if (options.cache !== undefined) {
      for (const key of ['mode', 'residualRows']) checkUnused(where, options, key, 'a session given a cache stores as that cache does');
    } else {
      checkUnused(where, options, 'tokens', 'they are those of a cache given, and no cache is');
    }
    const { mode = this.#cacheMode, residualRows, maxRows, sinks, recent, prefixCache, cache, tokens, importance = true } = options;
    if (typeof importance !== 'boolean') throw new TypeError(`${where}: options.importance must be a boolean (got ${shown(importance)})`);
    const session = new LlamaSession(this, { mode, residualRows, maxRows, sinks, recent, prefixCache, cache, importance });
    if (tokens !== undefined) session[restore](where, tokens);
    return session;
  }

  /**
   * A session saved by LlamaSession#save, on this model: its cache and
   * tokens back, to go on from. `options`: session()'s but mode,
   * residualRows, cache and tokens (they are the saved session's).
   */
  restoreSession(bytes, options = {}) {
    const where = 'llama.restoreSession';
    this.#live('restoreSession');
    const data = checkBytes(where, 'bytes', bytes);
    checkObject(where, 'options', options);
    for (const key of ['mode', 'residualRows', 'cache', 'tokens']) checkUnused(where, options, key, 'the saved session says it');
    const { tokens, ropeShift, cache } = readSaved(where, data);
    try {
      const session = this.session({ ...options, cache });
      session[restore](where, tokens, ropeShift);
      return session;
    } catch (error) {
      cache.free();
      throw error;
    }
  }

  /**
   * The forward pass on a cache: appends the tokens at the cache's next
   * positions and returns their logits, [rows x vocab] for the last `rows`
   * tokens: options.logits 'all' (default), 'last' or a count (0: none).
   * importance (default true): their attention goes to imp. verify: the
   * tokens are a speculative verify (the cache begins one; keep(cache, n)
   * ends it, keeping the first n). into: a Float32Array of at least rows x
   * vocab values that takes the logits (its first ones) and is returned, in
   * place of a new array each pass.
   */
  forward(cache, tokens, options = {}) {
    const where = 'Llama.forward';
    this.#live('forward');
    checkObject(where, 'options', options);
    checkKeys(where, options, FORWARD_OPTIONS);
    const { vocabSize } = this.config;
    if (!Array.isArray(tokens) || tokens.length === 0) throw new TypeError(`${where}: tokens must be a non-empty array of token ids`);
    for (const token of tokens) {
      if (!Number.isInteger(token) || token < 0 || token >= vocabSize) {
        throw new RangeError(`${where}: ${shown(token)} is not a token id (0 to ${vocabSize - 1})`);
      }
    }
    return this.#pass(where, cache, { tokens }, options);
  }

  /**
   * forward() for inputs given as rows of the model's embeddings in place of
   * tokens -- an image's, from its projector: `embeddings` [n × dim]. Options
   * as forward()'s, and `positions` ([n × 4] RoPE positions (t, y, x, e):
   * an image's grid for a model with multimodal RoPE; default the cache's)
   * and `span` (the n inputs attend each other both ways: Gemma 3's image
   * tokens; at most 512).
   */
  forwardEmbeddings(cache, embeddings, options = {}) {
    const where = 'Llama.forwardEmbeddings';
    this.#live('forwardEmbeddings');
    checkObject(where, 'options', options);
    checkKeys(where, options, [...FORWARD_OPTIONS, 'positions', 'span']);
    const { dim } = this.config;
    if (!(embeddings instanceof Float32Array) || embeddings.length === 0 || embeddings.length % dim !== 0) {
      throw new TypeError(`${where}: embeddings must be a non-empty Float32Array of rows of ${dim} values (got ${shown(embeddings)})`);
    }
    return this.#pass(where, cache, { embeddings }, options);
  }

  // The forward pass of tokens or embeddings (forward, forwardEmbeddings).
  #pass(where, cache, { tokens, embeddings }, { logits = 'all', importance = true, verify = false, into, positions, span = false }) {
    const ptr = this.#live('forward');
    const cachePtr = KvCache[modelPointer](where, 'cache', cache);
    const { contextLength, vocabSize, dim } = this.config;
    const n = tokens ? tokens.length : embeddings.length / dim;
    const rows = logits === 'all' ? n : logits === 'last' ? 1 : logits;
    checkInteger(where, 'options.logits', rows, 0, n);
    checkLogitsInto(where, into, rows, vocabSize);
    if (positions !== undefined && !(positions instanceof Uint32Array && positions.length === 4 * n)) {
      throw new TypeError(`${where}: options.positions must be a Uint32Array of 4 RoPE coordinates per input (${4 * n})`);
    }
    if (typeof span !== 'boolean') throw new TypeError(`${where}: options.span must be a boolean (got ${shown(span)})`);
    // The context bounds what attention reads: the rows a cache holds (a
    // sliding window's positions go on past it).
    if (cache.rows + n > contextLength) {
      throw new RangeError(`${where}: ${cache.rows} rows held and ${n} tokens exceed the model's context of ${contextLength}`);
    }
    const flags = (importance ? LM_IMPORTANCE : 0) | (verify ? LM_VERIFY : 0) | (span ? LM_SPAN : 0);
    // Per-layer embeddings outside the heap: the tokens' rows (an image's: token 0's), all read before the pass.
    const perLayer = this.#perLayer?.rows(tokens ?? new Array(n).fill(0)) ?? null;
    return callC(where, [tokens ? Uint32Array.from(tokens) : embeddings, positions ?? null, perLayer, 4 * rows * vocabSize],
      (inputPtr, positionsPtr, rowsPtr, logitsPtr) => lib().kvc_lm_forward_input(ptr, cachePtr, tokens ? inputPtr : 0,
        tokens ? 0 : inputPtr, n, positionsPtr, rowsPtr, logitsPtr, rows, flags),
      ([, , , logitsPtr]) => {
        if (!into) return copyOut('f32', logitsPtr, rows * vocabSize);
        into.set(heapView('f32', logitsPtr, rows * vocabSize));
        return into;
      }, { k: 'embeddings', v: 'embeddings', q: 'embeddings' });
  }

  /**
   * Reads the per-layer rows of `tokens` (ids) where the model reads them
   * asynchronously (options.perLayerEmbeddings.readAsync), so that forward
   * passes over them can run; for any other model, nothing to do. A
   * session's generate() and respond(), and so Chat, read what they pass.
   */
  async preparePerLayerRows(tokens) {
    this.#live('preparePerLayerRows');
    // An image's positions take token 0's rows (kvc_lm_forward_input).
    await this.#perLayer?.prepare(checkIds('Llama.preparePerLayerRows', 'tokens', tokens, this).map((t) => (isImageId(t) ? 0 : t)));
  }

  /** Whether forward passes read per-layer rows that preparePerLayerRows must read first. */
  get readsRowsAsync() {
    return this.#perLayer?.async ?? false;
  }

  /**
   * The embeddings of `texts` (a string, or an array of strings or of
   * token-id arrays): a Float32Array per text, in order. Texts are
   * tokenized as llama.cpp's server does (the vocabulary's begin, end and
   * separator tokens added; special tokens in the text taken as such) and
   * go many to a pass of the weights, each attending to itself alone (a
   * text's vector is the same alone or among others); no rows are kept.
   * `pooling`: 'mean', 'cls', 'last' (default: the file's pooling_type;
   * required for a model whose file gives none), or 'none' (a row per
   * token, embeddingDim values each, not normalised); the file's dense
   * layers follow. `normalize` (default true): each vector of length 1.
   * `dimensions`: its first that many values, normalised after
   * (Matryoshka). `prompt`: 'query' or 'document', what the model card of
   * the file's family puts before one (EMBEDDING_PROMPTS: EmbeddingGemma's,
   * Qwen3-Embedding's, nomic-embed's; none for another), or a string to put
   * before each text. A text longer than the context is a RangeError unless
   * `truncate: true` cuts it. `signal` aborts between passes;
   * `onProgress({ done, total })` after each.
   */
  async embed(texts, options = {}) {
    return embed(this, this.#live('embed'), texts, options);
  }

  /**
   * Scores of `documents` (strings) for `query` by a reranker (a file whose
   * pooling_type is rank: its classification head; Qwen3-Reranker's
   * "yes" probability, a BERT cross-encoder's logit): each document and the
   * query formatted into the file's rerank template (or put end to end as
   * llama.cpp does without one) and tokenized whole. Resolves to { scores
   * (in the documents' order), ranking: the topN (default all) best first,
   * { index, score, document } }. `truncate`, `signal` and `onProgress` as
   * embed()'s.
   */
  async rerank(query, documents, options = {}) {
    return rerank(this, this.#live('rerank'), query, documents, options);
  }

  /** Ends a verify that forward(…, { verify: true }) began: keeps its first n tokens, their attention added to imp. */
  keep(cache, n) {
    const where = 'Llama.keep';
    const ptr = this.#live('keep');
    const cachePtr = KvCache[modelPointer](where, 'cache', cache);
    checkInteger(where, 'n', n, 0, MAX_POSITIONS);
    checkStatus(where, lib().kvc_lm_keep(ptr, cachePtr, n));
  }

  #projectorOf(where) {
    this.#live(where.replace(/^Llama\./, ''));
    if (!this.projector) throw new TypeError(`${where}: the model was loaded without a projector (Llama.load's options.projector), so it takes no images`);
    return this.projector;
  }

  /**
   * How many positions an image of width x height takes, as llama.cpp's
   * mtmd counts them, without encoding anything: { image } of the encoder's
   * rows, { markers } of the text around and between its tiles, and their
   * { total }.
   */
  imageTokenCount({ width, height }) {
    const where = 'Llama.imageTokenCount';
    const projector = this.#projectorOf(where);
    const plan = projector.plan(width, height);
    const markers = this.#imageTokens(projector, plan, () => []).length;
    return { image: plan.tokens, markers, total: plan.tokens + markers };
  }

  // An image's ids in order: its markers' tokens and each tile's ids (tileIds(i)).
  #imageTokens(projector, plan, tileIds) {
    return projector.layoutOf(plan).flatMap((part) => {
      if (part.text !== undefined) return this.tokenizer.encode(part.text, { bos: false, special: true });
      if (part.piece !== undefined) return [pieceId(this.tokenizer, part.piece)];
      return tileIds(part.tile);
    });
  }

  /**
   * An image made ready for a conversation: decoded (imagePixels: a Blob or
   * File, an ImageBitmap, ImageData, a URL, encoded bytes with
   * options.decodeImage where the runtime cannot decode, or { width,
   * height, data } pixels), prepared and encoded as llama.cpp's mtmd does
   * for this projector, its rows kept by the model. Returns { digest,
   * width, height, tokens, imageTokens }: `tokens` are the ids that stand
   * for it where it goes in a prompt (its markers' tokens and an id per
   * encoder row, past the vocabulary), which sessions, Chat and prefix
   * caches take like text. The same pixels give the same ids, encoded once.
   */
  async prepareImage(image, { decodeImage } = {}) {
    const where = 'Llama.prepareImage';
    this.#projectorOf(where);
    return this.imageOf(await imagePixels(where, image, { decodeImage }));
  }

  /** prepareImage() of pixels at hand ({ width, height, data } RGBA), synchronously. */
  imageOf(pixels) {
    const where = 'Llama.imageOf';
    const projector = this.#projectorOf(where);
    const { width, height, data } = fromPixels(where, pixels ?? {});
    pixels = { width, height, data };
    // The pixels' digest, seeded by the projector's and the size: another projector, other ids.
    const seed = BigInt(`0x${projector.digest}`) ^ (BigInt(width) << 32n) ^ BigInt(height);
    const digest = BigInt.asUintN(64, withStaging(where, [data.length], ([at]) => {
      heap().u8.set(data, at);
      return lib().kvc_digest(at, data.length, seed);
    })).toString(16).padStart(16, '0');
    const held = this.#images.get(digest);
    if (held) return held.input;
    const plan = projector.plan(width, height);
    const tiles = plan.tiles.map((tile, i) => ({
      ...tile, embeddings: projector.encodeTile(pixels, plan, i),
      ids: Array.from({ length: tile.tokens }, (_, k) => imageId(tileIdBase(digest, i), k)),
    }));
    const input = Object.freeze({ digest, width, height, imageTokens: plan.tokens,
      tokens: Object.freeze(this.#imageTokens(projector, plan, (i) => tiles[i].ids)) });
    this.#images.add({ digest, tiles, input });
    return input;
  }

  /**
   * Whether `id` is a token id of the vocabulary or an image's (prepareImage;
   * one this model no longer holds fails only where its rows must be
   * computed again: a conversation restored after a reload holds them in its cache).
   */
  [knowsId](id) {
    return Number.isInteger(id) && id >= 0 && (id < this.config.vocabSize || (isImageId(id) && id <= 0xffffffff));
  }

  /** How far a multimodal-RoPE model's positions fall behind the cache's after `ids` (0 for any other model). */
  [ropeShiftAfter](ids) {
    return this.projector?.layout.mrope ? ropeShiftOf(this.#images, ids) : 0;
  }

  /**
   * forward() of ids that may hold images' (prepareImage): each run of text
   * and of an image tile in its own pass -- at RoPE positions `ropeShift`
   * behind the cache's for a model with multimodal RoPE -- the logits of
   * the last `logits` rows (into `into`, forward()'s option, when given).
   * Returns { logits, ropeShift } (the shift after).
   */
  [forwardIds](cache, ids, { logits = 'all', importance = true, verify = false, ropeShift = 0, into }) {
    const where = 'Llama.forward';
    const mrope = this.projector?.layout.mrope ?? false;
    const textPositions = (count, start) => {
      const positions = new Uint32Array(4 * count);
      for (let i = 0; i < count; i++) positions.set([start + i, start + i, start + i, 0], 4 * i);
      return positions;
    };
    // Text at the cache's own positions is forward()'s; at others, its pass with them.
    const text = (tokens, options) => (options.positions ? this.#pass(where, cache, { tokens }, options) : this.forward(cache, tokens, options));
    if (!ids.some(isImageId)) {
      const positions = mrope && ropeShift ? { positions: textPositions(ids.length, cache.nextPosition - ropeShift) } : {};
      return { logits: text(ids, { logits, importance, verify, into, ...positions }), ropeShift };
    }
    if (verify) throw new TypeError(`${where}: a verify takes text tokens only`);
    const n = ids.length, want = logits === 'all' ? n : logits === 'last' ? 1 : logits;
    checkInteger(where, 'options.logits', want, 0, n);
    const out = checkLogitsInto(where, into, want, this.config.vocabSize) ?? new Float32Array(want * this.config.vocabSize);
    let at = 0, shift = ropeShift;
    for (const run of runsOf(where, this.#images, ids)) {
      const count = run.tokens ? run.tokens.length : run.count;
      const rows = Math.max(0, at + count - (n - want)) - Math.max(0, at - (n - want));
      const start = cache.nextPosition - shift;
      // An image tile's tokens at (p, p + row, p + column, 0), p where the tile begins (mtmd's M-RoPE).
      let positions = mrope && run.tokens ? textPositions(count, start) : undefined;
      if (mrope && !run.tokens) {
        positions = new Uint32Array(4 * count);
        for (let i = 0, k = run.from; i < count; i++, k++) positions.set([start, start + Math.floor(k / run.tile.gridX), start + (k % run.tile.gridX), 0], 4 * i);
      }
      const options = { logits: rows, importance, ...(positions ? { positions } : {}) };
      const part = run.tokens ? text(run.tokens, options)
        : this.forwardEmbeddings(cache, run.tile.embeddings.subarray(run.from * this.config.dim, (run.from + count) * this.config.dim),
          { ...options, span: this.projector.layout.span === true && count <= C_LIMITS.KVC_LM_BATCH });
      // This run's last `rows` rows are rows [at + count - rows, at + count) of the ids: of the last `want`, from here.
      if (rows > 0) out.set(part, (at + count - rows - (n - want)) * this.config.vocabSize);
      if (!run.tokens && run.from + count === run.tile.tokens) shift += run.tile.tokens - Math.max(run.tile.gridX, run.tile.gridY);
      at += count;
    }
    return { logits: out, ropeShift: mrope ? shift : 0 };
  }

  /** Releases the model's weights (idempotent); later calls throw. */
  free() {
    this.projector?.free();
    this.#ptr = owned.release(this, this.#ptr);
    this.#perLayer = null; // a table kept in JavaScript goes with the model
  }

  [disposeSymbol]() { this.free(); }
}

/** A model with its cache: what generate() drives. */
export class LlamaSession {
  #bound;
  #importance;
  #history = []; // every token taken in or emitted, in order: the cache's, then the pending one
  #pending = null; // the last token emitted (or given), not in the cache yet
  #logits = null; // the array decoding's passes write their logits into ([logitsInto]), and a view of its first row
  #logitsRow = null;
  // With window layers: forks of the cache where a reply's prompt was taken
  // in ({ position, cache }, oldest first, at most CHECKPOINTS): a rewind
  // past what the window layers still hold goes back to the latest one
  // before its point, and takes in only the tokens after it.
  #checkpoints = [];
  // How far a multimodal-RoPE model's RoPE positions fall behind the cache's (image-tokens.js).
  #ropeShift = 0;
  // With the store's prefix cache: the positions the prompt being taken in
  // is kept at, and the forks kept there ({ tokens, cache, ropeShift }),
  // written to the store once the reply is over.
  #keepAt = [];
  #kept = [];
  #fromStore = null; // what the next reply's prompt took from the store: { tokens, seconds }
  #storedUpTo = 0; // the longest prefix of the session's tokens it restored or kept

  #storing = Promise.resolve();

  constructor(llama, { mode, residualRows, maxRows, sinks, recent, prefixCache, cache, importance }) {
    const { config } = llama;
    const { numLayers, numKvHeads, headDim } = config;
    if (prefixCache !== undefined && !(prefixCache instanceof PrefixCache)) {
      throw new TypeError('llama.session: prefixCache must be a PrefixCache');
    }
    if (cache !== undefined) {
      if (!(cache instanceof KvCache)) throw new TypeError('llama.session: cache must be a KvCache');
      if (!cacheFits(config, cache)) throw new TypeError(`llama.session: cache must have the model's ${numLayers} layers (${describeLayers(config)}; ${numKvHeads} KV heads x ${headDim} where the layers are alike)`);
    }
    this.llama = llama;
    this.prefixCache = prefixCache ?? null;
    this.cache = cache ?? new KvCache(config.layerKinds.some((kind) => kind !== 'full')
      ? { layers: cacheLayers(config, { mode, residualRows, maxRows, sinks, recent }) }
      : { numLayers, numKvHeads, headDim, mode, residualRows, maxRows, sinks, recent });
    this.#bound = { maxRows: maxRows ?? 0, sinks, recent };
    this.#importance = importance;
  }

  /**
   * Takes in a prompt's tokens: on a fresh session, the longest prefix of
   * them the prefix cache holds (at least 64 tokens) becomes the cache, a
   * fork of it, and only the rest is computed; then the prompt's cache goes
   * into the prefix cache for the next sessions (unless it evicted
   * positions: its rows no longer follow the tokens). A session that holds
   * positions already just computes the tokens. Returns how many came from
   * the prefix cache -- or, with options.logits, { reused, logits }: the
   * last token's logits, which is then always computed.
   * What comes next is what a session without a prefix cache computes; imp
   * differs only in that the matched positions keep the attention the
   * entry's later tokens gave them.
   */
  prefill(tokens, { logits = false } = {}) {
    let reused = 0;
    const fresh = this.cache.nextPosition === 0;
    // A PrefixCache holds no window layers (their past cannot be cut back to
    // a prefix); a hybrid's entries match whole, where a conversation returns.
    const shares = this.prefixCache && !this.llama.config.layerKinds.includes('window');
    if (shares && fresh) {
      const hit = this.prefixCache.match(logits ? tokens.slice(0, -1) : tokens);
      if (hit) {
        this.#adopt(hit.cache);
        reused = hit.length;
        this.#ropeShift = this.llama[ropeShiftAfter](tokens.slice(0, reused));
      }
    }
    // A model that cannot truncate every layer keeps a checkpoint where a
    // reply's prompt ends but for its last token: regenerating the reply
    // goes back there and computes that token again for its logits.
    const checkpoints = this.llama.config.layerKinds.some((kind) => kind !== 'full');
    const base = this.cache.nextPosition - reused; // the position of tokens[0]
    const layers = Array.from({ length: this.cache.numLayers }, (_, i) => this.cache.layer(i));
    const evicted = () => layers.some((layer) => layer.kind === 'full' && layer.seqLen !== layer.nextPosition);
    // The prompt is taken in up to each point a prefix is kept at (the
    // store's prefix cache) and the checkpoint, then the rest; a batch gives
    // the same rows as its parts.
    const keep = new Set([...this.#keepAt].map((at) => at - base).filter((cut) => cut > reused && cut <= tokens.length));
    const cuts = new Set(keep);
    if (reused < tokens.length - 1 && logits && checkpoints) cuts.add(tokens.length - 1);
    let from = reused;
    let last = null;
    for (const cut of [...cuts].sort((a, b) => a - b)) {
      if (cut > from) this.#take(tokens.slice(from, cut), { logits: 0 });
      from = cut;
      if (cut === tokens.length - 1 && logits && checkpoints) this.#checkpoint();
      if (keep.has(cut) && !evicted()) {
        this.#kept.push({ tokens: [...this.#history.slice(0, base), ...tokens.slice(0, cut)], cache: this.cache.clone(), ropeShift: this.#ropeShift });
      }
    }
    if (from < tokens.length) last = this.#take(tokens.slice(from), { logits: logits ? 'last' : 0 });
    if (shares && fresh && tokens.length > 0 && !evicted()) this.prefixCache.add(tokens, this.cache);
    if (checkpoints && tokens.length > 0 && !logits) this.#checkpoint();
    return logits ? { reused, logits: last } : reused;
  }

  get mode() {
    const layers = Array.from({ length: this.cache.numLayers }, (_, i) => this.cache.layer(i));
    return layers.find((layer) => layer.mode !== null).mode;
  }

  /** Every token the session has taken in or emitted, in order (a copy). */
  get tokens() {
    return this.#history.slice();
  }

  /** The last token emitted (or given), which the next forward pass takes in first; null when none. */
  get pending() {
    return this.#pending;
  }

  [hold](prompt, pending) {
    this.#history.push(...prompt);
    this.#pending = pending;
  }

  [take](token) {
    this.#history.push(token);
    this.#pending = token;
  }

  // Keeps a fork of the cache as it is now (a reply's prompt taken in).
  #checkpoint() {
    const position = this.cache.nextPosition;
    if (this.#checkpoints.at(-1)?.position === position) return;
    this.#checkpoints.push({ position, cache: this.cache.clone(), ropeShift: this.#ropeShift });
    while (this.#checkpoints.length > CHECKPOINTS) this.#checkpoints.shift().cache.free();
  }

  // Drops the checkpoints past `position`: the tokens they hold are no longer the session's.
  #dropCheckpoints(position) {
    while (this.#checkpoints.length && this.#checkpoints.at(-1).position > position) this.#checkpoints.pop().cache.free();
  }

  [rewind](n) {
    const cached = this.#history.length - (this.#pending === null ? 0 : 1);
    if (n >= this.#history.length) return 0;
    let again = 0;
    this.#dropCheckpoints(n);
    if (this.#cannotTruncateTo(n)) {
      // The window layers no longer hold what the positions before n saw,
      // or a recurrent layer's state cannot go back at all: back to the
      // latest checkpoint before n (or the start), and the tokens after it
      // taken in again.
      const from = this.#checkpoints.at(-1) ?? null;
      const restart = from ? from.cache.clone() : this.cache.clone();
      if (!from) restart.clear();
      this.cache.free();
      this.cache = restart;
      const held = from ? from.position : 0;
      this.#ropeShift = from ? from.ropeShift : 0;
      if (n > held) this.#take(this.#history.slice(held, n), { logits: 0 });
      again = n - held;
    } else if (n < cached) {
      this.cache.truncateLast(cached - n);
      this.#ropeShift = this.llama[ropeShiftAfter](this.#history.slice(0, n));
    }
    this.#history.length = n;
    this.#pending = null;
    return again;
  }

  // Whether the cache cannot simply drop the positions from n on: its
  // window layers no longer hold what the positions before n saw, or a
  // recurrent layer's state cannot go back at all.
  #cannotTruncateTo(n) {
    const cached = this.#history.length - (this.#pending === null ? 0 : 1);
    if (n >= cached) return false;
    const layers = Array.from({ length: this.cache.numLayers }, (_, i) => this.cache.layer(i));
    return layers.some((layer) => (layer.kind === 'window' && layer.exactRollback < cached - n) || RECURRENT_KINDS.includes(layer.kind));
  }

  [restore](where, tokens, ropeShift = null) {
    this.#dropCheckpoints(-1);
    const positions = this.cache.nextPosition;
    const { vocabSize } = this.llama.config;
    // An image's ids stand for positions the cache holds already: the image need not be held.
    if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t) && t >= 0 && (t < vocabSize || (isImageId(t) && t <= 0xffffffff)))) {
      throw new TypeError(`${where}: options.tokens must be an array of token ids (0 to ${vocabSize - 1}, or an image's)`);
    }
    if (tokens.length !== positions && tokens.length !== positions + 1) {
      throw new RangeError(`${where}: options.tokens must hold the cache's ${positions} positions' tokens, and the pending one if any (got ${tokens.length})`);
    }
    this.#history = tokens.slice();
    this.#pending = tokens.length > positions ? tokens.at(-1) : null;
    this.#ropeShift = ropeShift ?? this.llama[ropeShiftAfter](tokens.slice(0, positions));
  }

  // The forward pass of ids (text and images') after what the cache holds.
  // Ids with an image's go in as several passes (a run of text or of a tile
  // each): the cache is forked first (copy on write) and put back when a
  // later pass fails, so that a failed call appends nothing, as one pass's.
  #take(ids, { logits, verify = false, into }) {
    const before = ids.some(isImageId) ? this.cache.clone() : null;
    let out;
    try {
      out = this.llama[forwardIds](this.cache, ids, { logits, verify, importance: this.#importance, ropeShift: this.#ropeShift, into });
    } catch (error) {
      if (before) {
        this.cache.free();
        this.cache = before;
      }
      throw error;
    }
    before?.free();
    if (!verify) this.#ropeShift = out.ropeShift;
    return out.logits;
  }

  [taken](tokens) {
    // The pending token and these are in the cache now; a token sampled
    // after them will be pending (decode's [take]), or none when a draft ended it.
    this.#history.push(...tokens);
    this.#pending = null;
  }

  [pass](tokens, { verify = false, logits, into } = {}) {
    return this.#take(tokens, { verify, logits, into });
  }

  [logitsInto](rows) {
    const { vocabSize } = this.llama.config;
    if (!this.#logits || this.#logits.length < rows * vocabSize) {
      this.#logits = new Float32Array(rows * vocabSize);
      this.#logitsRow = this.#logits.subarray(0, vocabSize);
    }
    return rows === 1 ? this.#logitsRow : this.#logits;
  }

  // What forward() and verify() pass: `tokens` checked, after the pending
  // token (if any); `held`, how many went in before them; the logits of
  // `tokens` alone.
  #passAfterPending(where, tokens, verify) {
    checkTokens(where, tokens, this.llama);
    const input = this.#pending === null ? tokens : [this.#pending, ...tokens];
    return { held: input.length - tokens.length, logits: this[pass](input, { verify, logits: tokens.length }) };
  }

  /**
   * Appends the tokens -- after the pending token, if any, which goes in
   * first -- and returns their logits [m × vocab]; their attention goes to
   * imp. The session records them as it records a reply's: its tokens,
   * save() and the next reply go on from them.
   */
  forward(tokens) {
    const { logits } = this.#passAfterPending('LlamaSession.forward', tokens, false);
    this[taken](tokens);
    return logits;
  }

  /**
   * Verifies drafts in one forward pass: appends the tokens inside a verify
   * -- the pending token, if any, first, which stays -- and returns their
   * logits [m × vocab]; keep(n) then keeps the first n of them, which the
   * session records, and rolls back the rest.
   */
  verify(tokens) {
    const { held, logits } = this.#passAfterPending('LlamaSession.verify', tokens, true);
    const keep = (n) => {
      checkInteger('LlamaSession.verify().keep', 'n', n, 0, tokens.length);
      this.llama.keep(this.cache, held + n);
      this[taken](tokens.slice(0, n));
    };
    return { logits, keep };
  }

  /**
   * Generates a reply, streamed: an async generator of pieces { text,
   * tokens, stop, stats } -- text the tokens completed (a character split
   * over tokens comes whole, with its last token), stop null until the last
   * piece, which says why it stopped: 'end' (an end-of-generation token),
   * 'stop' (a stop string: the text stops before it), 'maxTokens',
   * 'context' (the model's context is full), 'abort' (options.signal);
   * stats (decode()'s, on the last piece) how it went.
   * `prompt` is text (encoded with <s> first on a fresh session; special
   * tokens in it taken as such with options.special) or token ids; it
   * follows what the session holds. Options: maxTokens (default 256),
   * temperature, topK, topP, minP, repeatPenalty, repeatLastN, seed
   * (sampling.js, llama.cpp's defaults), stop (strings), draft and minNgram
   * (speculative decoding), context: 'stop' (default: a reply that finds
   * the context full ends, and one that finds no room for its prompt takes
   * nothing in) or 'slide' (keep the first 4 positions and the newest,
   * half the context: positions then go on past the model's context, which
   * RoPE models read less well), signal, logprobs (true, or a count of
   * alternatives up to 20: each piece's logprobs [{ token, logprob, top:
   * [{ token, logprob }] }], the log-softmax of the model's own logits,
   * before sampling options reshape them). A prompt longer than the model's
   * context is a RangeError. An abort takes effect between tokens and
   * leaves the session as after the last whole token emitted; a stop
   * string, after the token that completed it.
   */
  async *generate(prompt, options = {}) {
    const where = 'LlamaSession.generate';
    const plan = this.#plan(where, options, GENERATE_OPTIONS);
    if (typeof prompt !== 'string') checkUnused(where, options, 'special', 'it says how text is encoded, and the prompt is token ids');
    const ids = typeof prompt === 'string'
      ? this.llama.tokenizer.encode(prompt, { special: plan.special, ...(this.#history.length > 0 ? { bos: false } : {}) })
      : checkIds(where, 'prompt', prompt, this.llama);
    const restored = this.#history.length === 0 ? await this.#restoreStored(ids, ids.length - 1) : 0;
    await this.llama.preparePerLayerRows([...this.#history, ...ids.slice(restored)]);
    this.#keepAt = this.#keepPoints(this.#history.length, [this.#history.length + ids.length - restored - 1]);
    yield* this.#stream(ids.slice(restored), plan);
  }

  /**
   * Generates what follows `conversation` -- the whole of it so far: text
   * (a chat template's rendering; special tokens in it are taken as such
   * and no <s> is added) or token ids -- streamed as generate()'s pieces,
   * with its options. Only what the session does not hold yet is computed:
   * text that goes on from the text of the session's tokens keeps them
   * (what the model emitted is never encoded again); else the session goes
   * back to where its tokens and the conversation's part, and takes in the
   * rest. With the store's prefix cache (Llama.load's storePrefixes), a
   * fresh session first restores the longest stored prefix of the
   * conversation, and the conversation is kept there but for its last
   * token -- and at the end of options.sharedPrefix, the start of its text
   * other conversations share (Chat passes its system prompt's rendering).
   * What Chat#send runs.
   */
  async *respond(conversation, options = {}) {
    const where = 'LlamaSession.respond';
    const plan = this.#plan(where, options, RESPOND_OPTIONS);
    const ids = typeof conversation === 'string'
      ? this.#conversationIds(conversation)
      : checkIds(where, 'conversation', conversation, this.llama);
    if (ids.length === 0) throw new TypeError(`${where}: conversation must hold a token`);
    await this.#restoreStored(ids, this.#history.length === 0 ? ids.length - 1 : commonPrefix(this.#history, ids));
    const common = commonPrefix(this.#history, ids);
    this.#keepAt = this.#keepPoints(common, [ids.length - 1, this.#sharedLength(conversation, ids, plan.sharedPrefix)]);
    const { contextLength } = this.llama.config;
    if (ids.length - common > contextLength) {
      throw new RangeError(`${where}: the conversation's ${ids.length - common} new tokens exceed the model's context of ${contextLength}`);
    }
    await this.llama.preparePerLayerRows(ids); // what a rewind takes in again, and the rest
    const again = this[rewind](common);
    yield* this.#stream(ids.slice(common), plan, again);
  }

  // With the store's prefix cache, a session begins from the longest stored
  // prefix of `ids` of at most `most` tokens -- its cache, read from the
  // store, and its tokens -- when it is fresh (`most`: all of ids but their
  // last token, whose logits the reply needs), or when going back to `most`
  // (where its tokens and ids part) would start over from the first token:
  // its layers cannot be cut back there and no checkpoint is at or before
  // it (a restored conversation keeps none; a thinking template that
  // renders an earlier reply without its reasoning parts there). Returns
  // how many tokens came from the store.
  async #restoreStored(ids, most) {
    const fresh = this.#history.length === 0 && this.cache.nextPosition === 0;
    if (!storedPrefixesOf(this.llama)) return 0;
    if (!fresh && !(this.#cannotTruncateTo(most) && !this.#checkpoints.some((checkpoint) => checkpoint.position <= most))) return 0;
    const started = performance.now();
    const found = await restoreLongest(this.llama, this.mode, ids, most);
    if (!found) return 0;
    if (!cacheFits(this.llama.config, found.cache)) {
      found.cache.free();
      return 0;
    }
    this.#dropCheckpoints(-1);
    this.#adopt(found.cache);
    this.#fromStore = { tokens: found.length, seconds: (performance.now() - started) / 1000 };
    this.#storedUpTo = found.length;
    this.#history = ids.slice(0, found.length);
    this.#pending = null;
    this.#ropeShift = found.ropeShift;
    return found.length;
  }

  // Takes `cache` (a prefix cache's fork, a stored prefix) in place of its
  // own, bounded as the session is: the entry's own bound came with it.
  #adopt(cache) {
    this.cache.free();
    this.cache = cache;
    const { maxRows, sinks, recent } = this.#bound;
    for (let i = 0; i < cache.numLayers; i++) {
      if (cache.layer(i).kind === 'full') cache.layer(i).setMaxRows(maxRows, { sinks, recent });
    }
  }

  // Of a prompt's points (token counts), those its prefixes are kept at:
  // each at least LEAST_PREFIX_TOKENS beyond the last one the session kept
  // or restored that its first `held` tokens still hold (a page's first
  // message after a restored system prompt adds a few tokens: not worth
  // another copy of the cache).
  #keepPoints(held, points) {
    const since = this.#storedUpTo <= held ? this.#storedUpTo : 0;
    const kept = keepPoints(this.llama, points, since);
    if (kept.length > 0) this.#storedUpTo = kept.at(-1);
    return kept;
  }

  // The tokens of `sharedPrefix`, the start of the conversation's text that
  // other conversations share (a system prompt and tools), when the ids
  // begin with them; else 0.
  #sharedLength(conversation, ids, sharedPrefix) {
    if (!sharedPrefix || typeof conversation !== 'string' || !conversation.startsWith(sharedPrefix)) return 0;
    const shared = this.llama.tokenizer.encode(sharedPrefix, { special: true, bos: false });
    return commonPrefix(shared, ids) === shared.length ? shared.length : 0;
  }

  // Writes the forks kept while the prompt was taken in to the store's
  // prefix cache, behind the reply: after its last piece, one at a time,
  // each only if no tab or worker stored it already. A write that fails (a
  // full store) keeps nothing and changes nothing else.
  #storeKept() {
    this.#keepAt = [];
    const kept = this.#kept.splice(0);
    const stored = storedPrefixesOf(this.llama);
    if (kept.length === 0) return;
    const { digest } = this.llama;
    const mode = this.mode;
    this.#storing = this.#storing.then(() => new Promise((resolve) => setTimeout(resolve, 0))).then(async () => {
      for (const { tokens, cache, ropeShift } of kept) {
        try {
          await stored.write(digest, mode, tokens, () => savedBytes(tokens, ropeShift, cache));
        } catch {
          // Not kept: a later session computes these tokens.
        } finally {
          cache.free();
        }
      }
    });
  }

  /** Resolves once the prefixes this session kept so far are in the store's prefix cache (or failed to go there). */
  whenStored() {
    return this.#storing;
  }

  // The ids of a conversation's text. Encoded afresh, the text of a reply
  // may split into other tokens than those the model emitted, and the
  // session would go back to before them (on a restored session with
  // recurrent or window layers, which keeps no checkpoint, to the start).
  // So when the text goes on from the text of the session's tokens -- all
  // of them, or all but the pending one (an end token the template writes
  // otherwise) -- the ids are those tokens, then the encoding's tokens
  // after them. Both texts are read by one decoder, so a SentencePiece
  // space before a segment reads alike in both. A template that renders a
  // reply otherwise than its tokens read (one that trims it, or drops an
  // earlier turn's reasoning) or an edited conversation gets the encoding:
  // the session goes back to where they part.
  #conversationIds(text) {
    const { tokenizer } = this.llama;
    const ids = tokenizer.encode(text, { special: true, bos: false });
    const held = this.#history;
    if (commonPrefix(held, ids) === held.length || held.some(isImageId)) return ids;
    for (const own of this.#pending === null ? [held] : [held, held.slice(0, -1)]) {
      const end = spelledBy(tokenizer, ids, tokenizer.decode(own, { special: true }));
      if (end >= 0) return [...own, ...ids.slice(end)];
    }
    return ids;
  }

  // generate()'s options, checked.
  #plan(where, options, keys) {
    checkObject(where, 'options', options);
    checkKeys(where, options, keys);
    // The sampler reads its own options (SAMPLING_OPTIONS) of the rest; constraintOf, CONSTRAINT_OPTIONS.
    const { signal, maxTokens = 256, stop = [], draft = 0, minNgram = 2, draftSession, context = 'stop', special = false, logprobs = false, constraintPrefix = '', sharedPrefix = '', ...sampling } = options;
    if (typeof sharedPrefix !== 'string') throw new TypeError(`${where}: options.sharedPrefix must be a string (got ${shown(sharedPrefix)})`);
    if (logprobs !== false && logprobs !== true) checkInteger(where, 'options.logprobs', logprobs, 0, MAX_TOP_LOGPROBS);
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError(`${where}: options.signal must be an AbortSignal (got ${shown(signal)})`);
    checkInteger(where, 'options.maxTokens', maxTokens, 0, 0x7fffffff);
    if (!Array.isArray(stop) || !stop.every((x) => typeof x === 'string' && x.length > 0)) {
      throw new TypeError(`${where}: options.stop must be an array of non-empty strings`);
    }
    if (context !== 'stop' && context !== 'slide') throw new RangeError(`${where}: options.context must be 'stop' or 'slide' (got ${shown(context)})`);
    if (!draft) checkUnused(where, options, 'minNgram', 'it sizes the n-grams drafts are looked up by, and draft is 0');
    if (!draft) checkUnused(where, options, 'draftSession', 'it drafts, and draft is 0');
    const constraint = constraintOf(where, options);
    if (typeof constraintPrefix !== 'string') throw new TypeError(`${where}: options.constraintPrefix must be a string (got ${shown(constraintPrefix)})`);
    if (constraintPrefix !== '' && !constraint) throw new TypeError(`${where}: options.constraintPrefix is given without a constraint (responseFormat, grammar, regex or structuralTag)`);
    if (constraint && draft) throw new TypeError(`${where}: options.draft must be 0 with a constrained reply (drafts are not verified under a constraint)`);
    if (draftSession !== undefined && this.llama.readsRowsAsync) {
      throw new TypeError(`${where}: options.draftSession drafts tokens whose per-layer rows this model reads asynchronously, which a verify cannot wait for: use prompt-lookup drafts (draft alone)`);
    }
    return { signal, maxTokens, stop, draft, minNgram, drafter: drafterOf(where, this, draftSession), context, special,
      sampler: createSampler(where, sampling), constraint, constraintPrefix, sharedPrefix, where, logprobs: logprobs === false ? null : logprobs === true ? 0 : logprobs };
  }

  // The pieces of a reply to `ids`, which follow what the session holds.
  // However it ends -- its end, a stop string, an abort, the caller's break
  // -- the session is left as far as the pieces went (a stop string: up to
  // the token that completed it).
  // `again`: the tokens a rewind before it took in again, which its stats count as computed.
  async *#stream(ids, { signal, maxTokens, stop, draft, minNgram, drafter, context, sampler: plain, constraint, constraintPrefix, where, logprobs }, again = 0) {
    const { tokenizer } = this.llama;
    const sampler = constraint ? await constrainedSampler(where, this.llama, constraint, plain, { after: constraintPrefix }) : plain;
    const makeRoom = context === 'slide' ? (needed) => this.#slide(needed) : null;
    // promptTokens: what the reply follows, the session's tokens and these.
    const stats = { ...decodeStats(), promptTokens: this.#history.length + ids.length, promptComputed: again,
      storedTokens: this.#fromStore?.tokens ?? 0, restoreSeconds: this.#fromStore?.seconds ?? 0 };
    this.#fromStore = null;
    const events = decodeWith(this, ids, { steps: maxTokens, draft, minNgram, drafter, stop: tokenizer.eogIds, sampler, makeRoom, stats, logprobs });
    // The reply continues the session's text: its first space stays unless no text came before (<s> alone; an image is none).
    const decoder = tokenizer.decoder({ after: [...this.#history, ...ids].filter((t) => !isImageId(t)) });
    const scores = (value) => (logprobs === null ? {} : { logprobs: [{ token: value.token, ...value.logprob }] });
    const text = new StopText(stop);
    let streamed = this.#history.length + ids.length; // the session's tokens as far as the pieces went
    let open = true;
    const close = () => {
      // Drafts a verify kept beyond the last piece go back.
      open = false;
      events.return();
      this[rewind](streamed);
    };
    try {
      for (;;) {
        if (signal?.aborted) {
          close();
          yield { text: text.flush(decoder.flush()), tokens: [], stop: 'abort', stats: endStats(stats, 'abort') };
          return;
        }
        if (sampler.constrained) await sampler.ready();
        // The token emitted last goes in with the next pass: its per-layer row first (readAsync).
        if (this.llama.readsRowsAsync && this.#history.length > 0) await this.llama.preparePerLayerRows(this.#history.slice(-1));
        const { value, done } = events.next();
        if (done) {
          open = false;
          const reason = { end: 'end', steps: 'maxTokens', context: 'context' }[value.stop];
          yield { text: text.flush(decoder.flush()), tokens: [], stop: reason, stats: { ...value, stop: reason } };
          return;
        }
        if (value.type !== 'token') continue;
        streamed++;
        const piece = text.push(decoder.push(value.token));
        if (piece.stopped) {
          close();
          yield { text: piece.text, tokens: [value.token], stop: 'stop', stats: endStats(stats, 'stop'), ...scores(value) };
          return;
        }
        yield { text: piece.text, tokens: [value.token], stop: null, stats: null, ...scores(value) };
        await nextTask(); // the caller's page, its abort, other work: between tokens
      }
    } finally {
      if (open) close();
      if (sampler.constrained) sampler.free();
      this.#storeKept();
    }
  }

  /**
   * A second session that goes on from where this one is, its own way: its
   * cache a fork of this one's (copy on write: they share every page until
   * one of them writes it, so a fork costs no forward pass and no copy of
   * the rows), its tokens, pending token and rewind checkpoints this
   * session's. What a branched conversation (the Prompt API's clone()) is.
   * Not during a verify.
   */
  clone() {
    const copy = new LlamaSession(this.llama, { prefixCache: this.prefixCache ?? undefined, cache: this.cache.clone(), importance: this.#importance });
    copy.#bound = { ...this.#bound };
    copy.#history = this.#history.slice();
    copy.#pending = this.#pending;
    copy.#ropeShift = this.#ropeShift;
    copy.#checkpoints = this.#checkpoints.map((checkpoint) => ({ ...checkpoint, cache: checkpoint.cache.clone() }));
    return copy;
  }

  /**
   * The session as bytes: its tokens and its cache's snapshot (the same
   * bytes from every build). Llama#restoreSession takes them back, in
   * another tab, worker or edge isolate. Not during a verify.
   */
  save() {
    return savedBytes(this.#history, this.#ropeShift, this.cache);
  }

  // 'slide': the first positions and the newest stay when `needed` more rows do not fit.
  #slide(needed) {
    return slideCache(this.cache, needed, this.llama.config.contextLength);
  }

  free() {
    this.#dropCheckpoints(-1);
    this.cache.free();
  }
}

// How many of `ids` read as `text` (decoded with their special tokens), or
// -1 when none of their beginnings does.
function spelledBy(tokenizer, ids, text) {
  const decoder = tokenizer.decoder({ special: true });
  let at = 0;
  for (let k = 0; k < ids.length && at < text.length; k++) {
    const piece = decoder.push(ids[k]);
    if (!text.startsWith(piece, at)) return -1;
    at += piece.length;
    if (at === text.length) return k + 1;
  }
  return -1;
}

// A layer kind's name by its kvc_kind value; the kinds that hold a state the runner steps.
const LAYER_KINDS = ['full', 'linear', 'window', 'conv', 'delta', 'shared', 'mamba2',
  'none', 'attn_mamba2'];
const RECURRENT_KINDS = ['conv', 'delta', 'mamba2', 'attn_mamba2'];

/** The shape of a model's recurrent layers (kvc_lm_recurrent_*), or null. */
function recurrentShape(api, ptr) {
  if (!api.kvc_lm_recurrent_channels(ptr)) return null;
  const kernel = api.kvc_lm_recurrent_kernel(ptr) >>> 0;
  const keyHeads = api.kvc_lm_recurrent_key_heads(ptr) >>> 0;
  if (!keyHeads) return Object.freeze({ channels: api.kvc_lm_recurrent_channels(ptr) >>> 0, kernel });
  const valueHeads = api.kvc_lm_recurrent_value_heads(ptr) >>> 0;
  const keyDim = api.kvc_lm_recurrent_key_dim(ptr) >>> 0;
  const valueDim = api.kvc_lm_recurrent_value_dim(ptr) >>> 0;
  return Object.freeze({ keyHeads, valueHeads, keyDim, valueDim, kernel });
}

/** The bytes of one recurrent layer's state (0 without them). */
function stateBytes(api, ptr) {
  return 4 * (api.kvc_lm_recurrent_state_len(ptr) >>> 0);
}

/**
 * The layers of a session's cache for a model of `config` (its kinds,
 * windows and recurrent shape), in `mode` with the session's bound: what
 * new KvCache({ layers }) takes.
 */
function cacheLayers(config, { mode, residualRows, maxRows, sinks, recent }) {
  const { layerWindows, layerKinds, layerKvHeads, layerHeadDims, layerOwners, recurrent } = config;
  return layerKinds.map((kind, l) => {
    const numKvHeads = layerKvHeads[l], headDim = layerHeadDims[l];
    if (kind === 'window') return { kind, window: layerWindows[l], rollback: WINDOW_ROLLBACK, numKvHeads, headDim, mode, residualRows };
    if (kind === 'shared') return { kind, owner: layerOwners[l] };
    if (kind === 'none') return { kind };
    if (kind === 'mamba2' || kind === 'attn_mamba2') {
      const { valueHeads: heads, valueDim, keyHeads: groups, keyDim: stateSize, kernel } = recurrent;
      // A layer of both (falcon-h1): a full layer's rows beside the state.
      return kind === 'mamba2' ? { kind, heads, headDim: valueDim, groups, stateSize, kernel }
        : { kind, numKvHeads, headDim, mode, residualRows, heads, ssmHeadDim: valueDim, groups, stateSize, kernel };
    }
    if (RECURRENT_KINDS.includes(kind)) return { kind, ...recurrent };
    return { kind: 'full', numKvHeads, headDim, mode, residualRows, maxRows, sinks, recent };
  });
}

/** Whether `cache` has the layers cacheLayers makes for a model of `config`. */
function cacheFits(config, cache) {
  return cache.numLayers === config.numLayers && Array.from({ length: cache.numLayers }, (_, i) => cache.layer(i)).every((layer, i) => layerFits(config, layer, i));
}

/** Whether `layer` is what cacheLayers makes for layer l of `config`. */
function layerFits(config, layer, l) {
  const kind = config.layerKinds[l];
  if (layer.kind !== kind) return false;
  if (RECURRENT_KINDS.includes(kind)) {
    const { channels, kernel, keyHeads = 0, valueHeads = 0, keyDim = 0, valueDim = 0 } = config.recurrent;
    const state = layer.kernel === kernel && layer.keyHeads === keyHeads && layer.valueHeads === valueHeads &&
      layer.keyDim === keyDim && layer.valueDim === valueDim && (kind !== 'conv' || layer.channels === channels);
    if (kind !== 'attn_mamba2' || !state) return state;
  }
  if (kind === 'shared') return layer.owner === config.layerOwners[l];
  if (kind === 'none') return true;
  return layer.window === config.layerWindows[l] && layer.numKvHeads === config.layerKvHeads[l] && layer.headDim === config.layerHeadDims[l];
}

// The positions a session's window layers keep beyond their window, so that
// a reply of up to this many tokens can be taken back by truncation (a
// longer rewind goes back to a checkpoint or prefills again).
const WINDOW_ROLLBACK = 64;

/** What kinds of layer a model has, in words: "all full", or "window 512 at 0, 1, 2; full at 5". */
function describeLayers({ layerKinds, layerWindows }) {
  if (layerKinds.every((kind) => kind === 'full')) return 'all full';
  const byKind = new Map();
  layerKinds.forEach((k, i) => {
    const kind = k === 'window' ? `window ${layerWindows[i]}` : k;
    byKind.set(kind, [...(byKind.get(kind) ?? []), i]);
  });
  return [...byKind].map(([kind, layers]) => `${kind} at ${layers.join(', ')}`).join('; ');
}

// The checkpoints a session with window layers keeps: the prompts of its
// last two replies (regenerate the last reply; edit the last message).
const CHECKPOINTS = 2;

// A sliding window keeps this many first positions (the attention sinks).
const SLIDE_SINKS = 4;

/**
 * The 'slide' context policy on a model's cache: when `needed` more rows do
 * not fit in `contextLength`, the first SLIDE_SINKS positions (the attention
 * sinks) and the newest stay -- half the context, or less for a long prompt
 * -- through the cache's eviction. Returns the rows it has room for then.
 * What LlamaSession#generate runs with context 'slide', for a cache kept
 * beside a session's (the demo's replica).
 */
export function slideCache(cache, needed, contextLength) {
  if (cache.rows + needed > contextLength) {
    const keep = Math.max(0, Math.min(Math.floor(contextLength / 2), contextLength - needed));
    const sinks = Math.min(SLIDE_SINKS, keep);
    cache.evict({ budget: keep, sinks, recent: keep - sinks });
  }
  return contextLength - cache.rows;
}

/** Streamed text with stop strings: holds back what may be the start of one, and ends before one. */
class StopText {
  #stops;
  #held = '';

  constructor(stops) {
    this.#stops = stops;
  }

  /** { text: what may be shown now, stopped: whether a stop string came (text ends before it) } */
  push(piece) {
    const text = this.#held + piece;
    for (const stop of this.#stops) {
      const at = text.indexOf(stop);
      if (at >= 0) {
        this.#held = '';
        return { text: text.slice(0, at), stopped: true };
      }
    }
    // Hold back the longest end of the text that begins a stop string.
    let hold = 0;
    for (const stop of this.#stops) {
      for (let n = Math.min(stop.length - 1, text.length); n > hold; n--) {
        if (text.endsWith(stop.slice(0, n))) {
          hold = n;
          break;
        }
      }
    }
    this.#held = text.slice(text.length - hold);
    return { text: text.slice(0, text.length - hold), stopped: false };
  }

  /** The text held back, with the decoder's last (incomplete) characters. */
  flush(rest) {
    const text = this.#held + rest;
    this.#held = '';
    return text;
  }
}


/** `tokens` checked: a non-empty array of token ids of llama's (its vocabulary's, or an image's it holds). */
function checkTokens(where, tokens, llama) {
  if (!Array.isArray(tokens) || tokens.length === 0 || !tokens.every((t) => llama[knowsId](t))) {
    throw new TypeError(`${where}: tokens must be a non-empty array of token ids (0 to ${llama.config.vocabSize - 1}, or a prepared image's)`);
  }
}

/** `ids` checked: an array of token ids of llama's (its vocabulary's, or an image's it holds). */
function checkIds(where, name, ids, llama) {
  if (!Array.isArray(ids) || !ids.every((t) => llama[knowsId](t))) {
    throw new TypeError(`${where}: ${name} must be text or an array of token ids (0 to ${llama.config.vocabSize - 1}, or a prepared image's)`);
  }
  return ids;
}

/**
 * Resolves after the current task: timers and messages (an abort) get their
 * turn. A message on a fresh channel, or a timer, whichever comes first: in
 * WebKit a worker's MessagePort messages pass through the page's thread, so
 * while the page is busy the message waits for it (a worker generated ten
 * times slower beside a busy page), and a timer, which runs on the worker's
 * own thread, is clamped to 4 ms once nested; elsewhere the message comes
 * first.
 */
function nextTask() {
  if (typeof globalThis.setImmediate === 'function') return new Promise((done) => globalThis.setImmediate(done));
  return new Promise((done) => {
    const channel = new MessageChannel();
    const end = () => {
      clearTimeout(timer);
      channel.port1.close();
      done();
    };
    const timer = setTimeout(end, 0);
    channel.port1.onmessage = end;
    channel.port2.postMessage(null);
  });
}

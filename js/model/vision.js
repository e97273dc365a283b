// A vision encoder: a projector file (GGUF, general.architecture clip, as
// llama.cpp's mtmd reads it) whose encoder runs in C (src/model/vision.c)
// on an image's tiles, each prepared as mtmd prepares it (image.c), giving
// rows of the language model's embeddings; and the markers the model's
// template puts around an image (mtmd's layout: text before, tiles with
// their row/column markers, the overview, text after).
//
//   const llama = await Llama.load(modelUrl, { projector: projectorUrl });
//   const image = await llama.projector.encode(await imagePixels(where, file));
//   // image.parts: [{ tokens }, { embeddings, tokens, gridX, gridY }, ...] in order
import { GgufError, checkTensorsPresent, describeGguf, parseWhole } from './gguf.js';
import { KvCacheError, checkBytes, checkInteger } from '../runtime/checks.js';
import {
  callC, checkStatus, copyOut, disposeSymbol, heap, lib, ownedObjects, readCString, statusName, u32At, withStaging,
} from '../runtime/runtime.js';

const owned = ownedObjects((ptr) => lib().kvc_vision_free(ptr));
const fromPointer = Symbol('fromPointer');
const MESSAGE_BYTES = 512;
// kvc_vision_plan's out array: tiles, rows, cols, overview, tokens, then 5 a tile.
const PLAN_HEADER = 5;
const PLAN_TILE = 5;
const MAX_TILES = 64;
const MAX_PLANNED_SIDE = 100000;
const MAX_PLANNED_PIXELS = 2 ** 30;

/**
 * How each projector type's model marks an image in its prompt: mtmd's
 * layout (tools/mtmd/mtmd.cpp). `begin`/`end`: text around the whole image
 * (parsed with special tokens); `tile(row, col)`: text before each tile of a
 * grid (1-based); `rowEnd`: text after each row but the last; `overview`:
 * [before, after] the whole-image tile, which comes after the grid;
 * `architectures`: the language models its file goes with; `span`: the
 * image's tokens attend each other both ways (mtmd_decode_use_non_causal,
 * llama.cpp b10257: Gemma 3, and Gemma 4 at every width, E2B's and E4B's
 * too); `mrope`: its positions are multimodal RoPE's (t, y, x).
 */
const LAYOUTS = {
  idefics3: {
    begin: '', end: '', tile: (row, col) => `<fake_token_around_image><row_${row}_col_${col}>`, rowEnd: ['\n'],
    overview: [['\n\n', '<fake_token_around_image>', '<global-img>'], ['<fake_token_around_image>']], architectures: ['llama'],
  },
  lfm2: {
    begin: '<|image_start|>', end: '<|image_end|>', tile: (row, col) => `<|img_row_${row}_col_${col}|>`, rowEnd: [],
    overview: [['<|img_thumbnail|>'], []], architectures: ['lfm2'],
  },
  gemma3: { begin: '<start_of_image>', end: '<end_of_image>', architectures: ['gemma3'], span: true },
  gemma4v: { begin: '<|image>', end: '<image|>', architectures: ['gemma4'], span: true },
  qwen3vl_merger: { begin: '<|vision_start|>', end: '<|vision_end|>', architectures: ['qwen35', 'qwen3vl'], mrope: true },
};

/**
 * The file being opened: the kvc_vision made from its header, its weights
 * region filled from the file's bytes as they come (opening's shape in
 * llama.js: take, done, fail).
 */
export function openProjector(where, g, bytes) {
  const api = lib();
  const { tensors, dataOffset, dataBytes } = describeGguf(where, g);
  // The header's digest (its bytes up to the tensor infos' end), the seed of the tensor data's (Projector#digest).
  const header = bytes.subarray(0, api.kvc_gguf_header_bytes(g) >>> 0);
  const headerDigest = withStaging(where, [header.length], ([at]) => {
    heap().u8.set(header, at);
    return api.kvc_digest(at, header.length, 0n);
  });
  const ptr = withStaging(where, [4, MESSAGE_BYTES], ([outPtr, message]) => {
    const status = api.kvc_vision_create(g, outPtr, message, MESSAGE_BYTES);
    if (status !== 0) {
      const why = readCString(message) || readCString(api.kvc_status_name(status) >>> 0);
      if (statusName(status) === 'KVC_E_NOMEM') throw new KvCacheError(`${where}: ${why}`, 'KVC_E_NOMEM');
      throw new GgufError(`the projector: ${why}`);
    }
    return u32At(outPtr);
  });
  const projector = new Projector({ [fromPointer]: { ptr, headerDigest } });
  const status = api.kvc_vision_alloc_weights(ptr);
  if (status !== 0) {
    projector.free();
    checkStatus(where, status);
  }
  const weights = api.kvc_vision_weights(ptr) >>> 0;
  let filled = 0;
  return {
    take(chunk, at) {
      const from = Math.max(at, dataOffset), to = Math.min(at + chunk.length, dataOffset + dataBytes);
      if (from >= to) return;
      heap().u8.set(chunk.subarray(from - at, to - at), weights + from - dataOffset);
      filled += to - from;
    },
    done(fileLength) {
      if (filled < dataBytes) {
        checkTensorsPresent(tensors, fileLength);
        throw new GgufError(`the projector is truncated: the file ends at byte ${fileLength}, its tensor data at ${dataOffset + dataBytes}`);
      }
      return projector;
    },
    fail() {
      projector.free();
    },
  };
}

// Per tokenizer, the tokens spelled as given texts (mtmd's lookup_token: the token whose text is exactly it).
const piecesOf = new WeakMap();

/** The id of the token whose text (special tokens spelled out) is `text`, or undefined. */
export function pieceId(tokenizer, text) {
  let pieces = piecesOf.get(tokenizer);
  if (!pieces) piecesOf.set(tokenizer, (pieces = new Map()));
  if (!pieces.has(text)) {
    let id = tokenizer.ids.get(text);
    for (let t = 0; id === undefined && t < tokenizer.vocabSize; t++) if (tokenizer.decode([t], { special: true }) === text) id = t;
    pieces.set(text, id);
  }
  return pieces.get(text);
}

/** A vision encoder in the wasm heap (Llama.load's options.projector, or Projector.fromGguf). */
export class Projector {
  #ptr = 0;
  #headerDigest;
  #digest = null;

  /** A projector file held whole in memory, its tensor data copied into the heap. */
  static fromGguf(input) {
    const where = 'Projector.fromGguf';
    lib();
    const bytes = checkBytes(where, 'input', input);
    const g = parseWhole(where, bytes);
    let file;
    try {
      file = openProjector(where, g, bytes);
    } finally {
      lib().kvc_gguf_free(g);
    }
    try {
      file.take(bytes, 0);
      return file.done(bytes.length);
    } catch (error) {
      file.fail();
      throw error;
    }
  }

  constructor(internal) {
    const adopted = internal?.[fromPointer];
    if (!adopted) throw new TypeError('new Projector: use Llama.load(model, { projector }) or Projector.fromGguf');
    const { ptr, headerDigest } = adopted;
    this.#ptr = ptr;
    this.#headerDigest = headerDigest;
    const api = lib();
    const type = readCString(api.kvc_vision_projector(ptr) >>> 0);
    /** { type: clip.projector_type, outputDim: the language model's embedding width it gives rows of } */
    this.config = Object.freeze({ type, outputDim: api.kvc_vision_output_dim(ptr) >>> 0 });
    this.layout = LAYOUTS[type];
    owned.adopt(this, ptr);
  }

  #live(where) {
    if (!this.#ptr) throw new TypeError(`Projector.${where}: the projector was freed`);
    return this.#ptr;
  }

  /**
   * Throws a sentence when this projector's file does not go with `llama`:
   * another embedding width, another architecture, or a vocabulary without
   * the markers its images are wrapped in.
   */
  checkPair(where, llama) {
    const { type, outputDim } = this.config;
    const { dim, architecture } = llama.config;
    if (outputDim !== dim) {
      throw new TypeError(`${where}: the projector gives rows of ${outputDim} values and the model's embeddings have ${dim}: they are not one model's files`);
    }
    if (!this.layout.architectures.includes(architecture)) {
      throw new TypeError(`${where}: a ${type} projector goes with ${this.layout.architectures.join(' or ')} models, not ${architecture}`);
    }
    const pieces = [...(this.layout.overview?.flat() ?? []), ...(this.layout.rowEnd ?? [])];
    const special = [this.layout.begin, this.layout.end, ...(this.layout.tile ? [this.layout.tile(1, 1)] : [])].filter(Boolean);
    for (const marker of [...pieces, ...special]) {
      // A special marker is found whole when taken as special tokens: fewer tokens than its spelling.
      const whole = pieces.includes(marker) ? pieceId(llama.tokenizer, marker) !== undefined
        : llama.tokenizer.encode(marker, { bos: false, special: true }).length < llama.tokenizer.encode(marker, { bos: false }).length;
      if (!whole) throw new TypeError(`${where}: the model's vocabulary has no ${JSON.stringify(marker)} token, which a ${type} projector's images are marked with`);
    }
  }

  /**
   * How an image of width x height goes in, as llama.cpp's mtmd makes it:
   * { tiles: [{ width, height, tokens, gridX, gridY }], rows, cols,
   * overview (the last tile is the whole image), tokens } -- without
   * encoding anything.
   */
  plan(width, height) {
    const where = 'Projector.plan';
    const ptr = this.#live('plan');
    // kvc_vision_plan's bounds: a side of 1 to 100000 pixels, at most 2^30 in all.
    checkInteger(where, 'width', width, 1, MAX_PLANNED_SIDE);
    checkInteger(where, 'height', height, 1, MAX_PLANNED_SIDE);
    if (width * height > MAX_PLANNED_PIXELS) throw new RangeError(`${where}: a ${width}x${height} image has more than ${MAX_PLANNED_PIXELS} pixels`);
    const out = callC(where, [4 * (PLAN_HEADER + PLAN_TILE * MAX_TILES)],
      (outPtr) => lib().kvc_vision_plan(ptr, width, height, outPtr, PLAN_HEADER + PLAN_TILE * MAX_TILES),
      ([outPtr]) => copyOut('u32', outPtr, PLAN_HEADER + PLAN_TILE * MAX_TILES));
    const [count, rows, cols, overview, tokens] = out;
    const tiles = Array.from({ length: count }, (_, i) => {
      const [tileWidth, tileHeight, tileTokens, gridX, gridY] = out.subarray(PLAN_HEADER + PLAN_TILE * i, PLAN_HEADER + PLAN_TILE * (i + 1));
      return { width: tileWidth, height: tileHeight, tokens: tileTokens, gridX, gridY };
    });
    return { tiles, rows, cols, overview: overview === 1, tokens };
  }

  /**
   * An image's parts, in the order the model reads them: { text } markers
   * (to be tokenized with special tokens), { piece } markers (the one token
   * spelled so) and { tile } indexes into plan.tiles -- mtmd's layout for
   * this projector type.
   */
  layoutOf(plan) {
    const { begin, end, tile, rowEnd = [], overview } = this.layout;
    const parts = [];
    const text = (t) => t && parts.push({ text: t });
    const piece = (t) => parts.push({ piece: t });
    text(begin);
    const grid = plan.rows * plan.cols;
    for (let row = 0; row < plan.rows; row++) {
      for (let col = 0; col < plan.cols; col++) {
        text(tile(row + 1, col + 1));
        parts.push({ tile: row * plan.cols + col });
      }
        if (row !== plan.rows - 1) rowEnd.forEach(piece);
    }
    if (plan.overview && overview) overview[0].forEach(piece);
    for (let i = grid; i < plan.tiles.length; i++) parts.push({ tile: i });
    if (plan.overview && overview) overview[1].forEach(piece);
    text(end);
    return parts;
  }

  /**
   * Encodes the tile `tile` of an image's RGBA pixels (imagePixels):
   * prepared as mtmd prepares it, through the encoder and projector:
   * Float32Array [tokens x outputDim].
   */
  encodeTile({ width, height, data }, plan, tile) {
    const where = 'Projector.encode';
    const ptr = this.#live('encode');
    const rows = plan.tiles[tile].tokens * this.config.outputDim;
    return callC(where, [data, 4 * rows],
      (pixelsPtr, outPtr) => lib().kvc_vision_encode_tile(ptr, pixelsPtr, width, height, tile, outPtr),
      ([, outPtr]) => copyOut('f32', outPtr, rows));
  }

  /** The file's digest, 16 hex digits: XXH64 (kvc_digest) of its header and tensor data, as Llama#digest. */
  get digest() {
    const ptr = this.#live('digest');
    const api = lib();
    this.#digest ??= BigInt.asUintN(64, api.kvc_digest(api.kvc_vision_weights(ptr) >>> 0, api.kvc_vision_weights_bytes(ptr) >>> 0,
      this.#headerDigest)).toString(16).padStart(16, '0');
    return this.#digest;
  }

  /** { weights, scratch }: the bytes the encoder holds in the heap. */
  get memoryBytes() {
    const ptr = this.#live('memoryBytes');
    return { weights: lib().kvc_vision_weights_bytes(ptr) >>> 0, scratch: lib().kvc_vision_scratch_bytes(ptr) >>> 0 };
  }

  /** Releases the encoder's weights (idempotent); later calls throw. */
  free() {
    this.#ptr = owned.release(this, this.#ptr);
  }

  [disposeSymbol]() { this.free(); }
}

// Byte-level BPE (tokenizer.ggml.model "gpt2": GPT-2, Llama 3, Qwen2/3,
// SmolLM): the pre-tokenizer the file names cuts text into words, each
// word's UTF-8 bytes are spelled in GPT-2's byte alphabet (a printable
// character per byte), and adjacent symbols merge in the order of the merge
// list -- the lowest rank first, the leftmost on a tie -- until no listed pair
// is left. Decoding maps the alphabet back to bytes.
// Gemma 4's BPE (tokenizer.ggml.model "gemma4") merges the same way over
// words spelled as SentencePiece spells them (its pre-tokenizer's
// pieceSpelling): raw characters, '▁' for a space, <0xNN> byte tokens for a
// character left without a token.

import { BytePieces, SPACE } from './byte-pieces.js';
import { MergeQueue } from './merge-queue.js';
import { preTokenizer, preTokenizerNames } from './pretokenize.js';

// GPT-2's byte alphabet: the printable Latin-1 bytes stand for themselves,
// the 68 others (controls, space, 0x7F-0xA0, 0xAD) for U+0100 onwards in
// byte order.
const BYTE_CHAR = [];
const CHAR_BYTE = new Int16Array(256 + 68).fill(-1);
for (let byte = 0, extra = 0; byte < 256; byte++) {
  const printable = (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || byte >= 0xae;
  const char = printable ? byte : 256 + extra++;
  BYTE_CHAR[byte] = String.fromCharCode(char);
  CHAR_BYTE[char] = byte;
}

// Words are cached with their ids; a chat's words repeat, a book's vocabulary
// is a few ten thousand words. Past this many the cache starts over.
const CACHE_WORDS = 1 << 16;
// Rank and left position in one number for the queue: ranks stay below 2^21
// and positions below 2^32, well inside a double's exact integers.
const POSITION = 2 ** 32;
const NEWLINE_RUN = /^\n+$/;

const utf8 = new TextEncoder();

/** `word` in GPT-2's byte alphabet. */
function spell(word) {
  let ascii = true;
  for (let i = 0; i < word.length && ascii; i++) ascii = word.charCodeAt(i) < 0x80;
  let spelled = '';
  if (ascii) {
    for (let i = 0; i < word.length; i++) spelled += BYTE_CHAR[word.charCodeAt(i)];
  } else {
    for (const byte of utf8.encode(word)) spelled += BYTE_CHAR[byte];
  }
  return spelled;
}

export class BytePairModel {
  /** No unknown token unless the file names one; the begin token as llama.cpp adds it for the pre-tokenizer. */
  static defaultUnkId = null;
  /** The pre-tokenizer llama.cpp gives every file of this model, whatever tokenizer.ggml.pre says (null: the file's). */
  static pre = null;

  static addsBos(pre) {
    return preTokenizer(this.pre ?? pre)?.addBos ?? false;
  }

  /** Its keys of a GGUF file, through fromGguf's checked reader. */
  static readGguf(read) {
    // llama.cpp reads a file without a pre-tokenizer with its default one.
    const pre = this.pre ?? read.string('tokenizer.ggml.pre') ?? 'default';
    return {
      merges: read.required('tokenizer.ggml.merges', read.strings('tokenizer.ggml.merges')),
      pre,
      // llama.cpp overrides the file's add_bos_token for such a pre-tokenizer (some Gemma 4 files say false).
      ...(preTokenizer(pre)?.forcesBos ? { addBos: true } : {}),
    };
  }

  /**
   * @param {{ tokens: string[], ids: Map<string, number>, merges: string[], pre: string, unkId: number | null }} vocab
   *   merges are "left right" strings, the first the most frequent (rank 0);
   *   pre a name preTokenizer() knows (the model's own where it has one).
   */
  constructor({ tokens, ids, merges, pre = 'default', unkId }) {
    if (!Array.isArray(merges) || !merges.every((m) => typeof m === 'string')) throw new TypeError('a BPE vocabulary needs its merges, an array of strings');
    pre = new.target.pre ?? pre;
    this.pre = preTokenizer(pre);
    if (this.pre === undefined) throw new TypeError(`pre-tokenizer ${JSON.stringify(pre)} is not one of ${preTokenizerNames().join(', ')}`);
    this.tokens = tokens;
    this.ids = ids;
    this.unkId = unkId;
    if (merges.length >= 2 ** 21) throw new TypeError(`${merges.length} merges are more than this tokenizer ranks (2^21)`);
    // "left right" -> rank; the first of a repeated merge counts, as in llama.cpp
    // (set from the last merge back, so that the first one's rank is set last).
    this.ranks = new Map();
    for (let rank = merges.length - 1; rank >= 0; rank--) {
      const merge = merges[rank];
      if (merge.indexOf(' ', 1) < 0) throw new TypeError(`merge ${rank} (${JSON.stringify(merge)}) is not two symbols with a space between`);
      this.ranks.set(merge, rank);
    }
    this.cache = new Map();
    // The byte tokens a character without a token falls back to, and decoding's '▁'.
    this.bytePieces = this.pre.pieceSpelling ? new BytePieces(tokens) : null;
  }

  /** Decoding drops nothing: every space is a word's (Gemma 4's text gets no space before it). */
  get stripsFirstSpace() {
    return false;
  }

  /** Appends the ids of `text` (no special tokens in it) to `out`. */
  encodeText(text, out) {
    const { pre, cache } = this;
    const normalized = pre.normalize ? text.normalize(pre.normalize) : text;
    // SentencePiece's spelling escapes the spaces of the whole text before the split, as llama.cpp does.
    for (const word of pre.split(pre.pieceSpelling ? normalized.replaceAll(' ', SPACE) : normalized)) {
      let ids = cache.get(word);
      if (ids === undefined) {
        ids = this.#encodeWord(pre.pieceSpelling ? word : spell(word));
        if (cache.size >= CACHE_WORDS) cache.clear();
        cache.set(word, ids);
      }
      for (const id of ids) out.push(id);
    }
  }

  #encodeWord(word) {
    const { ids, ranks } = this;
    const whole = ids.get(word);
    if (whole !== undefined && (this.pre.ignoreMerges || word.length === 1 || (this.pre.newlineRunsWhole && NEWLINE_RUN.test(word)))) return [whole];
    // One symbol per character of the spelled word.
    const symbols = Array.from(word);
    const n = symbols.length;
    const next = Int32Array.from({ length: n }, (_, i) => (i + 1 < n ? i + 1 : -1));
    const prev = Int32Array.from({ length: n }, (_, i) => i - 1);
    const queue = new MergeQueue((a, b) => a < b);
    const consider = (left, right) => {
      if (left < 0 || right < 0) return;
      const rank = ranks.get(symbols[left] + ' ' + symbols[right]);
      if (rank !== undefined) queue.push(rank * POSITION + left);
    };
    for (let i = 0; i + 1 < n; i++) consider(i, i + 1);
    while (queue.size > 0) {
      const entry = queue.pop();
      const left = entry % POSITION;
      const right = next[left];
      // Stale when a side has merged since: the pair there now is another merge, or none.
      if (symbols[left] === null || right < 0 || ranks.get(symbols[left] + ' ' + symbols[right]) !== (entry - left) / POSITION) continue;
      symbols[left] += symbols[right];
      symbols[right] = null;
      next[left] = next[right];
      if (next[right] >= 0) prev[next[right]] = left;
      consider(prev[left], left);
      consider(left, next[left]);
    }
    const out = [];
    for (let i = 0; i >= 0; i = next[i]) {
      const id = ids.get(symbols[i]);
      if (id !== undefined) out.push(id);
      else this.#spellOut(symbols[i], out);
    }
    return out;
  }

  // A symbol the merges left but the vocabulary lacks. Spelled as
  // SentencePiece spells: its UTF-8 bytes as byte tokens (a byte without one
  // is left out, as llama.cpp leaves it). In GPT-2's alphabet (a faulty
  // vocabulary): its characters one by one, the unknown token for those
  // missing too.
  #spellOut(symbol, out) {
    if (this.bytePieces !== null) {
      for (const byte of utf8.encode(symbol)) {
        const id = this.bytePieces.byteIds[byte];
        if (id >= 0) out.push(id);
      }
      return;
    }
    for (const char of symbol) {
      const id = this.ids.get(char) ?? this.unkId;
      if (id !== null) out.push(id);
    }
  }

  /** The bytes token `id` stands for in text (a character outside the alphabet stands for its own UTF-8). */
  tokenBytes(id) {
    if (this.bytePieces !== null) return this.bytePieces.tokenBytes(id);
    const token = this.tokens[id];
    const bytes = [];
    for (const char of token) {
      const code = char.codePointAt(0);
      const byte = code < CHAR_BYTE.length ? CHAR_BYTE[code] : -1;
      if (byte >= 0) bytes.push(byte);
      else bytes.push(...utf8.encode(char));
    }
    return Uint8Array.from(bytes);
  }
}

/** Gemma 4's BPE (tokenizer.ggml.model "gemma4"): llama.cpp splits every such file with its gemma4 pre-tokenizer. */
export class Gemma4Model extends BytePairModel {
  static pre = 'gemma4';
}

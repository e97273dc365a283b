// WordPiece (tokenizer.ggml.model "bert": BERT, bge, gte, all-MiniLM,
// nomic-embed) as llama.cpp reads it. Text is cut into words at whitespace,
// and every punctuation mark, ASCII symbol and CJK ideograph is a word of its
// own; control characters go, and as the vocabulary's normalizer says,
// accents go and letters are lower-cased. Each word is then spelled from the
// left, the longest piece first. llama.cpp's converter writes a word's first
// pieces with '▁' before them and its "##" pieces bare, so the word is
// spelled as '▁' + word; a word with a place where no piece starts is the
// unknown token whole. Decoding reads '▁' as a space: a text decodes with a
// space before its first word, as in llama.cpp (whose add_space_prefix,
// false for WordPiece, would drop it: a file that says true is refused).

import { SPACE } from './byte-pieces.js';
import { WHITE } from './pretokenize.js';

// What llama.cpp takes to be BERT's begin ([CLS]), separator ([SEP]) and
// unknown ([UNK]) tokens in a file that names none: their places in BERT's
// own vocabulary.
const BERT_IDS = { bos: 101, sep: 102, unk: 100 };

// llama.cpp's classes of a character, tested in this order: whitespace ends
// a word; a control character (\p{C} but unassigned ones), NUL and U+FFFD go;
// with accents stripped, every mark goes (spacing and enclosing ones too,
// not only Hugging Face's nonspacing ones); punctuation, the ASCII symbols
// and the CJK ideographs (BERT's ranges, one starting at U+2B920 as Hugging
// Face's Rust code has it) stand alone; the rest is part of a word.
const BREAK = 0;
const DROP = 1;
const MARK = 2;
const ALONE = 3;
const PART = 4;
const CLASSES = [
  [BREAK, new RegExp(`[${WHITE}]`, 'u')],
  [DROP, /[\p{Cc}\p{Cf}\p{Co}\p{Cs}\ufffd]/u],
  [MARK, /\p{M}/u],
  [ALONE, new RegExp('[\\p{P}$+<=>^`|~\\u{4e00}-\\u{9fff}\\u{3400}-\\u{4dbf}\\u{20000}-\\u{2a6df}\\u{2a700}-\\u{2b73f}' +
    '\\u{2b740}-\\u{2b81f}\\u{2b920}-\\u{2ceaf}\\u{f900}-\\u{faff}\\u{2f800}-\\u{2fa1f}]', 'u')],
];
const classOf = (char) => CLASSES.find(([, pattern]) => pattern.test(char))?.[0] ?? PART;
// ASCII, most of most texts, looked up.
const ASCII_CLASSES = Uint8Array.from({ length: 128 }, (_, code) => classOf(String.fromCharCode(code)));

const utf8 = new TextEncoder();

// One code point for one, as llama.cpp's tables map: the first of its
// canonical decomposition (so a Hangul syllable keeps its first jamo alone),
// and its simple lower case (İ is i, not i and a dot).
const firstOfNfd = (char) => (char < '\u00c0' ? char : String.fromCodePoint(char.normalize('NFD').codePointAt(0)));
const lower = (char) => (char === '\u0130' ? 'i' : char.toLowerCase());

export class WordPieceModel {
  /** llama.cpp's unknown token of a file that names none, and its add_bos_token and add_sep_token of one that does not say. */
  static defaultUnkId = BERT_IDS.unk;
  static addsBos = () => true;
  static addsSep = true;
  /**
   * What llama.cpp's WordPiece puts around a text with add_special: [CLS]
   * first and [SEP] last, whatever add_bos_token, add_eos_token and
   * add_sep_token say (they tell only its reranker how to join a pair).
   */
  static frame = Object.freeze({ bos: true, eos: false, sep: true });

  /**
   * Its keys of a GGUF file, through fromGguf's checked reader. llama.cpp
   * reads neither tokenizer.ggml.pre nor cls_token_id for WordPiece (its
   * [CLS] is the begin token).
   */
  static readGguf(read, tokenCount) {
    const named = (key, fallback) => {
      const id = read.id(key);
      if (id === null && fallback >= tokenCount) read.refuse(`${key} is missing, and the vocabulary has no token ${fallback}, which llama.cpp takes in its place`);
      if (id !== null && id >= tokenCount) read.refuse(`${key} is ${id}, not a token id (0 to ${tokenCount - 1})`);
      return id ?? fallback;
    };
    if (read.boolean('tokenizer.ggml.add_space_prefix')) read.refuse('tokenizer.ggml.add_space_prefix is true; this package decodes WordPiece with the first space kept');
    const lowercase = read.boolean('tokenizer.ggml.normalizer.lowercase') ?? true;
    return {
      bosId: named('tokenizer.ggml.bos_token_id', BERT_IDS.bos),
      sepId: named('tokenizer.ggml.seperator_token_id', BERT_IDS.sep), // sic: llama.cpp's spelling
      unkId: named('tokenizer.ggml.unknown_token_id', BERT_IDS.unk),
      lowercase,
      stripAccents: read.boolean('tokenizer.ggml.normalizer.strip_accents') ?? lowercase,
    };
  }

  /**
   * @param {{ tokens: string[], ids: Map<string, number>, unkId: number | null, lowercase?: boolean, stripAccents?: boolean }} vocab
   *   lowercase (default true) and stripAccents (default: as lowercase) are the BERT normalizer's.
   */
  constructor({ tokens, ids, unkId, lowercase = true, stripAccents = lowercase }) {
    if (unkId === null) throw new TypeError('a WordPiece vocabulary needs an unknown token');
    this.tokens = tokens;
    this.ids = ids;
    this.unkId = unkId;
    this.lowercase = lowercase;
    this.stripAccents = stripAccents;
    // No piece is longer than the longest token (in UTF-16 units, as JavaScript slices).
    this.longest = tokens.reduce((longest, token) => Math.max(longest, token.length), 0);
  }

  /** Decoding drops no space: llama.cpp's text of a WordPiece sequence keeps the one its first '▁' reads as. */
  get stripsFirstSpace() {
    return false;
  }

  /** Appends the ids of `text` (no special tokens in it) to `out`. */
  encodeText(text, out) {
    const { ids } = this;
    for (const word of this.words(text)) {
      const spelled = SPACE + word;
      const start = out.length;
      for (let at = 0; at < spelled.length;) {
        let end = Math.min(spelled.length, at + this.longest);
        let id;
        while (end > at && (id = ids.get(spelled.slice(at, end))) === undefined) end--;
        if (end === at) {
          out.length = start;
          break;
        }
        out.push(id);
        at = end;
      }
      if (out.length === start) out.push(this.unkId);
    }
  }

  /** The normalized words of `text`, cut as llama.cpp cuts them. */
  words(text) {
    const words = [];
    let word = '';
    for (let char of text) {
      if (this.stripAccents) char = firstOfNfd(char);
      const kind = char < '\u0080' ? ASCII_CLASSES[char.charCodeAt(0)] : classOf(char);
      if (kind === PART || (kind === MARK && !this.stripAccents)) {
        word += this.lowercase ? lower(char) : char;
      } else if (kind === BREAK || kind === ALONE) {
        if (word !== '') words.push(word);
        word = '';
        if (kind === ALONE) words.push(this.lowercase ? lower(char) : char);
      }
    }
    if (word !== '') words.push(word);
    return words;
  }

  /** The bytes token `id` stands for in text: its text with '▁' read as a space. */
  tokenBytes(id) {
    return utf8.encode(this.tokens[id].replaceAll(SPACE, ' '));
  }
}

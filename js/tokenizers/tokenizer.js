// The tokenizers of GGUF files: SentencePiece BPE ("llama"), byte-level BPE
// ("gpt2"), Gemma 4's BPE ("gemma4") and WordPiece ("bert"), picked by
// tokenizer.ggml.model from one table. This file does
// what they share, as llama.cpp does it: control and user-defined tokens
// written in the text are matched whole before the model sees the rest, the
// begin, end and separator tokens are added as the vocabulary says, and
// decoding streams bytes, holding a character's first bytes until its last
// one comes.

import { GgufError } from '../runtime/checks.js';
import { BytePairModel, Gemma4Model } from './bpe.js';
import { SentencePieceModel } from './spm.js';
import { WordPieceModel } from './wordpiece.js';

/** GGUF's token types (tokenizer.ggml.token_type), numbered as llama.cpp numbers them. */
export const TokenType = Object.freeze({ NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 });

// tokenizer.ggml.model -> the model that turns plain text into ids. Each
// model checks its own fields, reads its own keys (readGguf) and says whether
// llama.cpp adds the begin token when the file does not say (addsBos) and
// whether a pair's texts get a separator between them (addsSep: WordPiece's
// [SEP]); a model whose tokens around a text are fixed whatever the file says
// has them as its frame (WordPiece's [CLS] and [SEP]).
const MODELS = new Map([
  ['llama', SentencePieceModel],
  ['gpt2', BytePairModel],
  ['gemma4', Gemma4Model],
  ['bert', WordPieceModel],
]);

// A vocabulary that cannot be used; fromGguf reports it as the file's fault.
class VocabError extends TypeError {}

// End-of-turn markers llama.cpp takes as ends of generation wherever the
// vocabulary has them, making each a control token if the file did not (Gemma
// 4's <|tool_response> is user-defined there); from src/llama-vocab.cpp's list.
const END_MARKERS = ['<|eot_id|>', '<|im_end|>', '<|end|>', '<end_of_turn>', '<|endoftext|>', '<|eom_id|>', '<EOT>', '<|return|>', '<|end_of_text|>',
  '<eos>', '<turn|>', '<|tool_response>'];

const utf8 = new TextEncoder();
const NO_BYTES = new Uint8Array(0);

export class Tokenizer {
  /**
   * @param {object} vocab
   * @param {'llama' | 'gpt2' | 'gemma4' | 'bert'} [vocab.model] the tokenizer kind (default 'llama', SentencePiece)
   * @param {string[]} vocab.tokens
   * @param {number[]} [vocab.tokenTypes] a TokenType per token; without them the begin, end and
   *   separator tokens are control tokens, the unknown token unknown and the rest normal
   * @param {number[]} [vocab.scores] SentencePiece: a score per token
   * @param {string[]} [vocab.merges] BPE (byte-level and Gemma 4's): "left right", most frequent first
   * @param {string} [vocab.pre] byte-level BPE: the pre-tokenizer's name (default 'default'; Gemma 4's is always 'gemma4')
   * @param {number | null} vocab.bosId
   * @param {number | null} vocab.eosId
   * @param {number | null} [vocab.unkId] (SentencePiece default 0, WordPiece 100)
   * @param {number | null} [vocab.sepId] the separator (WordPiece's [SEP])
   * @param {boolean} [vocab.addBos] whether encode() puts the begin token first (default: as llama.cpp; WordPiece's
   *   encode() always does)
   * @param {boolean} [vocab.addEos] whether encode() puts the end token last (default false; WordPiece's encode() never does)
   * @param {boolean} [vocab.addSep] whether a separator goes between a pair's texts, as llama.cpp's reranker puts
   *   it (default: WordPiece's yes, others' no)
   * @param {boolean} [vocab.addSpacePrefix] SentencePiece: whether text gets a '▁' first (default true)
   * @param {boolean} [vocab.lowercase] WordPiece: whether letters are lower-cased (default true)
   * @param {boolean} [vocab.stripAccents] WordPiece: whether accents are stripped (default: as lowercase)
   * @param {string | null} [vocab.chatTemplate]
   * @param {number[]} [vocab.eogIds] more tokens that end a generation (tokenizer.ggml.eot_token_id, eom_token_id)
   */
  constructor({
    model = 'llama', tokens, tokenTypes, scores = null, merges = null, pre = 'default',
    bosId = null, eosId = null, unkId = MODELS.get(model)?.defaultUnkId ?? null, sepId = null,
    addBos, addEos = false, addSep = MODELS.get(model)?.addsSep ?? false, addSpacePrefix, lowercase, stripAccents,
    chatTemplate = null, eogIds = [],
  }) {
    const Model = MODELS.get(model);
    if (Model === undefined) throw new VocabError(`tokenizer model ${JSON.stringify(model)} is not one of ${[...MODELS.keys()].join(', ')}`);
    if (!Array.isArray(tokens) || !tokens.every((t) => typeof t === 'string')) throw new VocabError('tokens must be an array of strings');
    const id = (name, value) => {
      if (value !== null && !(Number.isInteger(value) && value >= 0 && value < tokens.length)) {
        throw new VocabError(`${name} is ${value}, not a token id (0 to ${tokens.length - 1})`);
      }
      return value;
    };
    this.model = model;
    this.tokens = tokens;
    this.bosId = id('bosId', bosId);
    this.eosId = id('eosId', eosId);
    this.unkId = id('unkId', unkId);
    this.sepId = id('sepId', sepId);
    this.addBos = addBos ?? Model.addsBos(pre);
    this.addEos = addEos;
    this.addSep = addSep;
    this.#frame = Model.frame ?? { bos: this.addBos, eos: this.addEos, sep: false };
    if (this.#frame.bos && this.bosId === null) throw new VocabError('the begin token is to be added but the vocabulary has none');
    if (this.#frame.eos && this.eosId === null) throw new VocabError('the end token is to be added but the vocabulary has none');
    if (this.#frame.sep && this.sepId === null) throw new VocabError('the separator is to be added but the vocabulary has none');
    this.chatTemplate = chatTemplate;
    this.tokenTypes = this.#types(tokenTypes);
    // Text -> id; llama.cpp refuses a vocabulary that spells two tokens alike (empty ones match nothing).
    this.ids = new Map();
    tokens.forEach((token, i) => {
      if (token === '') return;
      if (this.ids.has(token)) throw new VocabError(`tokens ${this.ids.get(token)} and ${i} are both ${JSON.stringify(token)}`);
      this.ids.set(token, i);
    });
    try {
      this.#textCoder = new Model({ tokens, ids: this.ids, scores, merges, pre, unkId: this.unkId, addSpacePrefix, lowercase, stripAccents });
    } catch (error) {
      throw error instanceof TypeError ? new VocabError(error.message) : error;
    }
    this.scores = scores ?? [];
    this.merges = merges ?? [];
    this.eogIds = this.#endsOfGeneration(eogIds.map((eog, i) => id(`eogIds[${i}]`, eog)));
    this.pre = this.#textCoder.pre?.name ?? null;
    this.#bytes = new Array(tokens.length);
  }

  /**
   * The tokens that end a generation, as llama.cpp gathers them: the end
   * token, those the file names (end of turn, end of message), and the
   * tokens spelled as the end markers of the chat formats it knows
   * (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, ...),
   * which become control tokens: taken whole by encode() only with
   * `special`, hidden by decode() without it.
   */
  #endsOfGeneration(named) {
    const eog = new Set([this.eosId, ...named].filter((t) => t !== null));
    for (const marker of END_MARKERS) {
      const t = this.ids.get(marker);
      if (t === undefined) continue;
      eog.add(t);
      this.tokenTypes[t] = TokenType.CONTROL;
    }
    return eog;
  }

  #textCoder;
  #frame; // what encode() puts around a text unless told otherwise: what llama.cpp's add_special adds
  #bytes; // per token, the bytes decoding gives it (filled as tokens are first decoded)
  #whole = new Map(); // `special` -> the WholeTokens encode() takes

  /**
   * The tokenizer stored in a GGUF file's metadata (the tokenizer.* keys):
   * a GgufFile, or any `{ get(key) }` that returns a key's value (strings,
   * numbers, booleans and arrays of those) or undefined when the file lacks
   * it -- a Map will do. Throws a GgufError naming what is wrong.
   */
  static fromGguf(source) {
    // A GgufFile's own get() throws on a missing key; its metadata map does not.
    const metadata = source.metadata instanceof Map ? source.metadata : source;
    const get = (key, check, what) => {
      const value = metadata.get(key);
      if (value !== undefined && !check(value)) throw new GgufError(`${key} is ${describe(value)}, not ${what}`);
      return value;
    };
    const read = {
      string: (key) => get(key, (v) => typeof v === 'string', 'a string'),
      boolean: (key) => get(key, (v) => typeof v === 'boolean', 'a boolean'),
      id: (key) => get(key, Number.isInteger, 'a token id') ?? null,
      strings: (key) => get(key, (v) => Array.isArray(v) && v.every((s) => typeof s === 'string'), 'an array of strings'),
      integers: (key) => get(key, (v) => Array.isArray(v) && v.every(Number.isInteger), 'an array of integers'),
      numbers: (key) => get(key, (v) => Array.isArray(v) && v.every((n) => typeof n === 'number'), 'an array of numbers'),
      required: (key, value) => {
        if (value === undefined) throw new GgufError(`${key} is missing`);
        return value;
      },
      refuse: (message) => {
        throw new GgufError(message);
      },
    };
    const model = read.required('tokenizer.ggml.model', read.string('tokenizer.ggml.model'));
    const Model = MODELS.get(model);
    if (Model === undefined) throw new GgufError(`tokenizer.ggml.model is ${JSON.stringify(model)}; this package reads ${[...MODELS.keys()].join(', ')}`);
    const tokens = read.required('tokenizer.ggml.tokens', read.strings('tokenizer.ggml.tokens'));
    const types = read.integers('tokenizer.ggml.token_type');
    if (types !== undefined && types.length < tokens.length) throw new GgufError(`tokenizer.ggml.token_type has ${types.length} entries for ${tokens.length} tokens`);
    const vocab = {
      model,
      tokens,
      tokenTypes: types?.slice(0, tokens.length),
      bosId: read.id('tokenizer.ggml.bos_token_id'),
      eosId: read.id('tokenizer.ggml.eos_token_id'),
      unkId: read.id('tokenizer.ggml.unknown_token_id') ?? Model.defaultUnkId,
      sepId: read.id('tokenizer.ggml.seperator_token_id'), // sic: llama.cpp's spelling
      addBos: read.boolean('tokenizer.ggml.add_bos_token'),
      addEos: read.boolean('tokenizer.ggml.add_eos_token'),
      addSep: read.boolean('tokenizer.ggml.add_sep_token'),
      chatTemplate: read.string('tokenizer.chat_template') ?? null,
      eogIds: ['tokenizer.ggml.eot_token_id', 'tokenizer.ggml.eom_token_id'].map(read.id).filter((t) => t !== null),
      ...Model.readGguf(read, tokens.length),
    };
    try {
      return new Tokenizer(vocab);
    } catch (error) {
      throw error instanceof VocabError ? new GgufError(`tokenizer: ${error.message}`) : error;
    }
  }

  get vocabSize() {
    return this.tokens.length;
  }

  /** The begin token's text (a chat template's bos_token); null when the vocabulary has none. */
  get bosToken() {
    return this.bosId === null ? null : this.decode([this.bosId], { special: true }) || null;
  }

  /** The end token's text (a chat template's eos_token); null when the vocabulary has none. */
  get eosToken() {
    return this.eosId === null ? null : this.decode([this.eosId], { special: true }) || null;
  }

  /**
   * Text to token ids. The control and user-defined tokens written in the
   * text are taken whole -- user-defined ones always, control ones (and the
   * unknown token) only with `special` (default false: text from a user does
   * not get to say <|im_start|>) -- and the text between them goes to the
   * model. `bos` / `eos` put the begin / end token around it and `sep` the
   * separator last; the defaults are what llama.cpp adds with add_special:
   * the vocabulary's add_bos_token / add_eos_token and no separator, but
   * WordPiece's [CLS] first and [SEP] last whatever the vocabulary says. Turn
   * them off for llama.cpp's ids without add_special, `bos` to continue a
   * sequence.
   */
  encode(text, { bos = this.#frame.bos, eos = this.#frame.eos, sep = this.#frame.sep, special = false } = {}) {
    if (typeof text !== 'string') throw new TypeError('Tokenizer.encode: text must be a string');
    const ids = [];
    if (bos) ids.push(this.#required(this.bosId, 'begin'));
    const whole = this.#wholeTokens(special);
    let at = 0;
    let startsSegment = true;
    for (let match = whole.find(text, 0); match !== null; match = whole.find(text, at)) {
      if (match.index > at) this.#textCoder.encodeText(text.slice(at, match.index), ids, startsSegment);
      ids.push(match.id);
      at = match.end;
      startsSegment = true;
    }
    if (at < text.length) this.#textCoder.encodeText(at === 0 ? text : text.slice(at), ids, startsSegment);
    if (eos) ids.push(this.#required(this.eosId, 'end'));
    if (sep) ids.push(this.#required(this.sepId, 'separator'));
    return ids;
  }

  /** Token ids to text: decoder() over the whole sequence (options as decoder()'s). */
  decode(ids, { special = false, after = [] } = {}) {
    const decoder = this.decoder({ special, after });
    let text = '';
    for (const id of ids) text += decoder.push(id);
    return text + decoder.flush();
  }

  /**
   * A streaming decoder: push(id) returns the text that id completes -- the
   * bytes of a character split over tokens wait until its last byte comes --
   * and flush() what is left (an unfinished character as U+FFFD). Control
   * tokens (and the unknown token) read as nothing unless `special`;
   * user-defined ones always read as written. A SentencePiece decoder drops
   * the space encoding put before the first word of a text -- so the text
   * of ids that continue others (`after`: the ids before them, read but not
   * returned) keeps its first space: it is what decoding them all adds to
   * the text of `after`.
   */
  decoder({ special = false, after = [] } = {}) {
    if (!Array.isArray(after)) throw new TypeError('Tokenizer.decoder: options.after must be an array of token ids');
    const text = new TextDecoder('utf-8', { ignoreBOM: true });
    let first = true;
    const decoder = {
      push: (id) => {
        if (!Number.isInteger(id) || id < 0 || id >= this.tokens.length) {
          throw new RangeError(`Tokenizer.decode: ${id} is not a token id of this vocabulary (0 to ${this.tokens.length - 1})`);
        }
        const type = this.tokenTypes[id];
        if (!special && (type === TokenType.CONTROL || type === TokenType.UNKNOWN)) return '';
        let bytes = this.#bytes[id] ??= this.#bytesOf(id);
        if (bytes.length === 0) return '';
        if (first) {
          first = false;
          if (this.#textCoder.stripsFirstSpace && bytes[0] === 0x20) bytes = bytes.subarray(1);
        }
        return text.decode(bytes, { stream: true });
      },
      flush: () => text.decode(),
    };
    for (const id of after) decoder.push(id);
    return decoder;
  }

  #bytesOf(id) {
    switch (this.tokenTypes[id]) {
      case TokenType.NORMAL:
      case TokenType.BYTE:
        return this.#textCoder.tokenBytes(id);
      case TokenType.CONTROL:
      case TokenType.UNKNOWN:
      case TokenType.USER_DEFINED:
        return utf8.encode(this.tokens[id]);
      default: // unused and undefined tokens read as nothing, as in llama.cpp
        return NO_BYTES;
    }
  }

  #types(given) {
    const n = this.tokens.length;
    if (given === undefined) {
      const types = new Uint8Array(n).fill(TokenType.NORMAL);
      for (const id of [this.bosId, this.eosId, this.sepId]) if (id !== null) types[id] = TokenType.CONTROL;
      if (this.unkId !== null) types[this.unkId] = TokenType.UNKNOWN;
      return types;
    }
    if (!Array.isArray(given) && !ArrayBuffer.isView(given)) throw new VocabError('tokenTypes must be an array of numbers');
    if (given.length !== n) throw new VocabError(`${given.length} token types for ${n} tokens`);
    // A type llama.cpp does not know is its "undefined" (0): a token that reads as nothing.
    return Uint8Array.from(given, (type) => (type >= 1 && type <= 6 ? type : 0));
  }

  // The tokens encode() takes whole: user-defined ones, and with `special`
  // control and unknown ones too.
  #wholeTokens(special) {
    let whole = this.#whole.get(special);
    if (whole === undefined) {
      whole = new WholeTokens();
      this.tokens.forEach((token, id) => {
        const type = this.tokenTypes[id];
        const taken = type === TokenType.USER_DEFINED || (special && (type === TokenType.CONTROL || type === TokenType.UNKNOWN));
        if (taken && token !== '') whole.add(token, id);
      });
      this.#whole.set(special, whole);
    }
    return whole;
  }

  #required(id, what) {
    if (id === null) throw new RangeError(`Tokenizer.encode: this vocabulary has no ${what} token`);
    return id;
  }
}

// Tokens found in text as Hugging Face finds its added tokens: the leftmost
// place one starts at, the longest one starting there. A trie over UTF-16
// units, entered only where some token's first unit is.
class WholeTokens {
  root = new Map();
  firstUnits = new Set();
  #starts = null;

  add(token, id) {
    let node = { next: this.root };
    for (let i = 0; i < token.length; i++) {
      let child = node.next.get(token[i]);
      if (child === undefined) node.next.set(token[i], (child = { next: new Map(), id: -1 }));
      node = child;
    }
    node.id = id;
    this.firstUnits.add(token[0]);
    this.#starts = null;
  }

  /** The first token found in `text` from `from` on: { index, end, id }, or null. */
  find(text, from) {
    if (this.firstUnits.size === 0) return null;
    this.#starts ??= new RegExp(`[${[...this.firstUnits].map((unit) => (/[\\\]^-]/.test(unit) ? `\\${unit}` : unit)).join('')}]`, 'g');
    const starts = this.#starts;
    starts.lastIndex = from;
    for (let start; (start = starts.exec(text)) !== null;) {
      let node = { next: this.root };
      let found = null;
      for (let i = start.index; i < text.length && (node = node.next.get(text[i])) !== undefined; i++) {
        if (node.id >= 0) found = { index: start.index, end: i + 1, id: node.id };
      }
      if (found !== null) return found;
    }
    return null;
  }
}

function describe(value) {
  if (Array.isArray(value)) return `an array (${value.length} entries) holding ${[...new Set(value.map((v) => typeof v))].join(' and ') || 'nothing'}`;
  return `${JSON.stringify(value)} (${typeof value})`;
}

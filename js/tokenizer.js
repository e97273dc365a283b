// The sentencepiece BPE tokenizer of llama-family GGUF files: encode by
// greedy merges in score order with byte fallback, decode with byte tokens
// and '▁' read as a space.

import { GgufError } from './gguf.js';

const SPACE = '\u2581'; // '▁'
const BYTE_PIECE = /^<0x([0-9A-Fa-f]{2})>$/;

export class Tokenizer {
  /**
   * @param {{ tokens: string[], scores: number[], bosId: number, eosId: number, unkId?: number }} vocab
   */
  constructor({ tokens, scores, bosId, eosId, unkId = 0 }) {
    this.tokens = tokens;
    this.scores = scores;
    this.bosId = bosId;
    this.eosId = eosId;
    this.unkId = unkId;
    this.ids = new Map(tokens.map((piece, id) => [piece, id]));
    // Byte-fallback ids, and the byte each byte piece stands for.
    this.byteIds = new Int32Array(256).fill(-1);
    this.pieceBytes = new Int16Array(tokens.length).fill(-1);
    tokens.forEach((piece, id) => {
      const match = BYTE_PIECE.exec(piece);
      if (match) {
        const byte = parseInt(match[1], 16);
        this.byteIds[byte] = id;
        this.pieceBytes[id] = byte;
      }
    });
  }

  /** The tokenizer stored in a GGUF file (tokenizer.ggml.* keys). */
  static fromGguf(gguf) {
    const tokens = gguf.get('tokenizer.ggml.tokens');
    const scores = gguf.get('tokenizer.ggml.scores');
    if (!Array.isArray(tokens) || !tokens.every((t) => typeof t === 'string') ||
        !Array.isArray(scores) || !scores.every((s) => typeof s === 'number') || tokens.length !== scores.length) {
      throw new GgufError('tokenizer.ggml.tokens and tokenizer.ggml.scores must be a string array and a number array of one length');
    }
    const id = (key, fallback) => {
      const value = fallback === undefined ? gguf.get(key) : gguf.metadata.get(key) ?? fallback;
      if (!Number.isInteger(value) || value < 0 || value >= tokens.length) throw new GgufError(`${key} is ${value}, not a token id`);
      return value;
    };
    return new Tokenizer({
      tokens,
      scores,
      bosId: id('tokenizer.ggml.bos_token_id'),
      eosId: id('tokenizer.ggml.eos_token_id'),
      unkId: id('tokenizer.ggml.unknown_token_id', 0),
    });
  }

  get vocabSize() {
    return this.tokens.length;
  }

  /**
   * Text to token ids: a '▁' prefix and '▁' for every space (as sentencepiece
   * does), one piece per character or its UTF-8 bytes when the vocabulary
   * lacks it, then merges of the adjacent pair with the best score until none
   * is in the vocabulary. `bos` prepends the begin-of-sequence id.
   */
  encode(text, { bos = true } = {}) {
    if (typeof text !== 'string') throw new TypeError('Tokenizer.encode: text must be a string');
    const ids = bos ? [this.bosId] : [];
    if (text.length === 0) return ids;
    const pieces = [];
    for (const char of SPACE + text.replaceAll(' ', SPACE)) {
      const id = this.ids.get(char);
      if (id !== undefined) {
        pieces.push(id);
        continue;
      }
      for (const byte of new TextEncoder().encode(char)) {
        pieces.push(this.byteIds[byte] >= 0 ? this.byteIds[byte] : this.unkId);
      }
    }
    for (;;) {
      let best = -1;
      let bestScore = -Infinity;
      let bestId = -1;
      for (let i = 0; i + 1 < pieces.length; i++) {
        const id = this.ids.get(this.tokens[pieces[i]] + this.tokens[pieces[i + 1]]);
        if (id !== undefined && this.scores[id] > bestScore) {
          best = i;
          bestScore = this.scores[id];
          bestId = id;
        }
      }
      if (best < 0) break;
      pieces.splice(best, 2, bestId);
    }
    return ids.concat(pieces);
  }

  /** Token ids to text (the whole sequence; see decoder() for streaming). */
  decode(ids) {
    const decoder = this.decoder();
    return ids.map((id) => decoder.push(id)).join('') + decoder.flush();
  }

  /**
   * A streaming decoder: push(id) returns the text that id completes (byte
   * tokens wait until their UTF-8 character is whole); flush() the rest.
   * The space sentencepiece puts before the first word is dropped.
   */
  decoder() {
    const bytes = new TextDecoder('utf-8');
    let first = true;
    const piece = (id) => {
      if (id === this.bosId || id === this.eosId || id === this.unkId) return '';
      let text = this.tokens[id].replaceAll(SPACE, ' ');
      if (first && text.startsWith(' ')) text = text.slice(1);
      first = false;
      return text;
    };
    return {
      push: (id) => {
        if (!Number.isInteger(id) || id < 0 || id >= this.tokens.length) {
          throw new RangeError(`Tokenizer.decode: ${id} is not a token id of this vocabulary (0 to ${this.tokens.length - 1})`);
        }
        const byte = this.pieceBytes[id];
        if (byte >= 0) {
          first = false;
          return bytes.decode(Uint8Array.of(byte), { stream: true });
        }
        return bytes.decode() + piece(id);
      },
      flush: () => bytes.decode(),
    };
  }
}

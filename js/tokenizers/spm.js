// SentencePiece BPE (tokenizer.ggml.model "llama"): '▁' for every space and
// one before the text, one piece per character (its UTF-8 bytes as <0xNN>
// pieces when the vocabulary lacks it), then the adjacent pair whose joined
// piece scores best merges, the leftmost on a tie, until no joined pair is a
// piece. Decoding reads '▁' as a space and <0xNN> as its byte.

import { MergeQueue } from './merge-queue.js';

const SPACE = '\u2581'; // '▁'
const BYTE_PIECE = /^<0x([0-9A-Fa-f]{2})>$/;
const utf8 = new TextEncoder();

const bestFirst = (a, b) => a.score > b.score || (a.score === b.score && a.left < b.left);

export class SentencePieceModel {
  /** llama.cpp's unknown token of a file that names none, and its begin token rule: always. */
  static defaultUnkId = 0;
  static addsBos = () => true;

  /** Its keys of a GGUF file, through fromGguf's checked reader. */
  static readGguf(read, tokenCount) {
    const scores = read.numbers('tokenizer.ggml.scores');
    if (scores?.length !== tokenCount) read.refuse('tokenizer.ggml.tokens and tokenizer.ggml.scores must be a string array and a number array of one length');
    return { scores, addSpacePrefix: read.boolean('tokenizer.ggml.add_space_prefix') };
  }

  /**
   * @param {{ tokens: string[], ids: Map<string, number>, scores: number[], unkId: number | null, addSpacePrefix: boolean }} vocab
   */
  constructor({ tokens, ids, scores, unkId, addSpacePrefix = true }) {
    if (!Array.isArray(scores) || scores.length !== tokens.length || !scores.every((s) => typeof s === 'number')) {
      throw new TypeError('a SentencePiece vocabulary needs a number score per token');
    }
    if (unkId === null) throw new TypeError('a SentencePiece vocabulary needs an unknown token');
    this.tokens = tokens;
    this.ids = ids;
    this.scores = scores;
    this.unkId = unkId;
    this.addSpacePrefix = addSpacePrefix;
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

  /** The space a decoder drops from the first piece: the one encoding put before the text. */
  get stripsFirstSpace() {
    return this.addSpacePrefix;
  }

  /** Appends the ids of `text` (no special tokens in it) to `out`; a segment's start gets the '▁' prefix. */
  encodeText(text, out, startsSegment) {
    const { tokens, ids, scores } = this;
    const pieces = [];
    const spaced = text.replaceAll(' ', SPACE);
    for (const char of this.addSpacePrefix && startsSegment ? SPACE + spaced : spaced) {
      const id = ids.get(char);
      if (id !== undefined) {
        pieces.push(id);
        continue;
      }
      for (const byte of utf8.encode(char)) pieces.push(this.byteIds[byte] >= 0 ? this.byteIds[byte] : this.unkId);
    }
    const n = pieces.length;
    const next = Int32Array.from({ length: n }, (_, i) => (i + 1 < n ? i + 1 : -1));
    const prev = Int32Array.from({ length: n }, (_, i) => i - 1);
    const queue = new MergeQueue(bestFirst);
    const consider = (left, right) => {
      if (left < 0 || right < 0) return;
      const id = ids.get(tokens[pieces[left]] + tokens[pieces[right]]);
      // A pair whose piece scores -Infinity or NaN never wins a comparison, so never merges.
      if (id === undefined || !(scores[id] > -Infinity)) return;
      queue.push({ score: scores[id], left, right, id, leftId: pieces[left], rightId: pieces[right] });
    };
    for (let i = 0; i + 1 < n; i++) consider(i, i + 1);
    while (queue.size > 0) {
      const { left, right, id, leftId, rightId } = queue.pop();
      // Stale: one side has merged since (pieces only grow, so ids never come back).
      if (pieces[left] !== leftId || pieces[right] !== rightId || next[left] !== right) continue;
      pieces[left] = id;
      pieces[right] = -1;
      next[left] = next[right];
      if (next[right] >= 0) prev[next[right]] = left;
      consider(prev[left], left);
      consider(left, next[left]);
    }
    for (let i = n > 0 ? 0 : -1; i >= 0; i = next[i]) out.push(pieces[i]);
  }

  /** The bytes token `id` stands for in text. */
  tokenBytes(id) {
    const byte = this.pieceBytes[id];
    return byte >= 0 ? Uint8Array.of(byte) : utf8.encode(this.tokens[id].replaceAll(SPACE, ' '));
  }
}

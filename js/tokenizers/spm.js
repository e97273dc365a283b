// SentencePiece BPE (tokenizer.ggml.model "llama"): '▁' for every space and
// one before the text, one piece per character (its UTF-8 bytes as <0xNN>
// pieces when the vocabulary lacks it), then the adjacent pair whose joined
// piece scores best merges, the leftmost on a tie, until no joined pair is a
// piece. Decoding reads '▁' as a space and <0xNN> as its byte.

import { BytePieces, SPACE } from './byte-pieces.js';
import { MergeQueue } from './merge-queue.js';

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
    this.bytePieces = new BytePieces(tokens);
  }

  /** The space a decoder drops from the first piece: the one encoding put before the text. */
  get stripsFirstSpace() {
    return this.addSpacePrefix;
  }

  /** Appends the ids of `text` (no special tokens in it) to `out`; a segment's start gets the '▁' prefix. */
  encodeText(text, out, startsSegment) {
    const { tokens, ids, scores } = this;
    const { byteIds } = this.bytePieces;
    const pieces = [];
    const spaced = text.replaceAll(' ', SPACE);
    for (const char of this.addSpacePrefix && startsSegment ? SPACE + spaced : spaced) {
      const id = ids.get(char);
      if (id !== undefined) {
        pieces.push(id);
        continue;
      }
      for (const byte of utf8.encode(char)) pieces.push(byteIds[byte] >= 0 ? byteIds[byte] : this.unkId);
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
    return this.bytePieces.tokenBytes(id);
  }
}

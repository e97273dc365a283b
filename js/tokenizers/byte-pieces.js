// SentencePiece's spelling, which Gemma 4's BPE shares: '▁' stands for a
// space, and a character the vocabulary lacks is written as its UTF-8 bytes,
// each the piece <0xNN>.

export const SPACE = '\u2581'; // '▁'
const BYTE_PIECE = /^<0x([0-9A-Fa-f]{2})>$/;
const utf8 = new TextEncoder();

export class BytePieces {
  /** @param {string[]} tokens the vocabulary, its byte pieces among them */
  constructor(tokens) {
    this.tokens = tokens;
    // Per byte, its piece's id (-1: none); per token, the byte it stands for (-1: not a byte piece).
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

  /** The bytes token `id` stands for in text: a byte piece's byte, any other piece's text with '▁' read as a space. */
  tokenBytes(id) {
    const byte = this.pieceBytes[id];
    return byte >= 0 ? Uint8Array.of(byte) : utf8.encode(this.tokens[id].replaceAll(SPACE, ' '));
  }
}

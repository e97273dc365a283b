// The pre-tokenizers of byte-level BPE vocabularies, by the name a GGUF file
// gives in tokenizer.ggml.pre (the names llama.cpp reads): regular
// expressions that cut text into words before any merge. They apply one after
// another, each to every piece the one before left; a match and the text
// between two matches are pieces of their own (Hugging Face's Split with
// "Isolated" behaviour), and no piece is looked past (a lookahead stops at
// its piece's end).

// \s and \S as Unicode's White_Space, which is what llama.cpp and Hugging
// Face tokenizers' Oniguruma take them to be; JavaScript's own \s also holds
// U+FEFF and lacks U+0085. (WordPiece's words end at the same characters.)
export const WHITE = '\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const SPACE = `[${WHITE}]`;
const NOT_SPACE = `[^${WHITE}]`;

// GPT-2's expression: contractions, letters, numbers, other symbols (each
// with one optional leading space), then whitespace, leaving a last space to
// the word after it.
const GPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WHITE}\\p{L}\\p{N}]+|${SPACE}+(?!${NOT_SPACE})|${SPACE}+`;

// Llama 3's expression, and Qwen2's with single digits: case-blind
// contractions (JavaScript has no (?i:...) group), a letter run with one
// leading non-letter, digit groups, symbols with the newlines after them,
// newline runs, then other whitespace as GPT-2 does.
// Qwen3.5's (letters) takes combining marks as letters.
const llama3Like = (digits, letters = '\\p{L}') =>
  `'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\\r\\n\\p{L}\\p{N}]?[${letters}]+|${digits}` +
  `| ?[^${WHITE}${letters}\\p{N}]+[\\r\\n]*|${SPACE}*[\\r\\n]+|${SPACE}+(?!${NOT_SPACE})|${SPACE}+`;

// Words by case, GPT-4o's (o200k, Phi-4-mini's) and Tekken's: a run of
// capitals then one of small letters, or the other way round, with one
// leading non-letter and, GPT-4o's, a contraction after it; digits; symbols
// with the newlines or slashes after them; then whitespace as Llama 3 splits
// it. `upper` and `lower` match one letter of each case.
const caseWords = ({ upper, lower, contraction = '', digits }) =>
  `[^\\r\\n\\p{L}\\p{N}]?${upper}*${lower}+${contraction}|[^\\r\\n\\p{L}\\p{N}]?${upper}+${lower}*${contraction}` +
  `|${digits}| ?[^${WHITE}\\p{L}\\p{N}]+[\\r\\n/]*|${SPACE}*[\\r\\n]+|${SPACE}+(?!${NOT_SPACE})|${SPACE}+`;

// GPT-4o's: Hugging Face's expression, which JavaScript reads as it is but
// for the case-blind contraction (JavaScript has no (?i:...) group, so it is
// spelled out as above); digit groups of three. (llama.cpp's engine has no
// \p{Lu} or \p{Ll} and approximates them, as Tekken's below says.)
const GPT4O = caseWords({
  upper: '[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]',
  lower: '[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]',
  contraction: "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?",
  digits: '\\p{N}{1,3}',
});

// Tekken's (Mistral's: Ministral 3, Mistral Nemo), single digits, as
// llama.cpp reads it: its regex engine knows no \p{Lu} or \p{Ll} and sees
// every letter past ASCII as one class, so a capital is a letter but a-z and
// a small letter one but A-Z -- é, É and 中 are either -- and a combining
// mark is no letter (the tokenizer.json's classes hold \p{M}).
const TEKKEN = caseWords({ upper: '(?:(?=\\p{L})[^a-z])', lower: '(?:(?=\\p{L})[^A-Z])', digits: '\\p{N}' });

/**
 * name -> { splits: expressions applied in turn, ignoreMerges: a word that is
 * a token as a whole is that token (Llama 3's tokenizer.json says so),
 * normalize: the Unicode form text is put in first (the vocabulary's
 * tokenizer.json normalizer, which GGUF does not record), addBos: whether
 * llama.cpp adds the begin token when the file does not say, forcesBos:
 * whether it adds it even when the file says not to, pieceSpelling: words
 * are spelled as SentencePiece spells them -- raw UTF-8 characters with '▁'
 * for a space, a missing character as <0xNN> byte tokens -- instead of in
 * GPT-2's byte alphabet, newlineRunsWhole: a word of newlines alone that is
 * a token is that token }.
 */
const PRE_TOKENIZERS = new Map([
  // llama.cpp's fallback for BPE files that name none.
  ['default', { splits: ['[\\p{P}\\$\\+<=>\\^~\\|]+', GPT2, '\\p{N}+', '[0-9][0-9][0-9]'] }],
  ['gpt-2', { splits: [GPT2] }],
  ['llama-bpe', { splits: [llama3Like('\\p{N}{1,3}')], ignoreMerges: true, addBos: true }],
  ['qwen2', { splits: [llama3Like('\\p{N}')], normalize: 'NFC' }],
  ['qwen35', { splits: [llama3Like('\\p{N}', '\\p{L}\\p{M}')], normalize: 'NFC' }],
  // SmolLM's tokenizer.json: Digits (each alone), then GPT-2's ByteLevel split.
  ['smollm', { splits: ['\\p{N}', GPT2] }],
  // Llama 3's expression without its merges rule or begin token (SmolLM3 writes smaug-bpe).
  ['dbrx', { splits: [llama3Like('\\p{N}{1,3}')] }],
  ['gpt-4o', { splits: [GPT4O] }],
  ['tekken', { splits: [TEKKEN], ignoreMerges: true, addBos: true }],
  // Gemma 4's: no cut into words -- merges run over each line whole, and
  // each run of newlines stands apart.
  ['gemma4', { splits: ['[^\\n]+|\\n+'], pieceSpelling: true, newlineRunsWhole: true, addBos: true, forcesBos: true }],
]);

// The names llama.cpp (llama-vocab.cpp) gives the same rules under: each
// splits, merges and begins as the row it names.
const SAME_RULES = new Map([
  ...['gpt-2', 'phi-2', 'mpt', 'olmo', 'jais', 'trillion', 'jina-es', 'jina-de', 'jina-v2-es', 'jina-v2-de', 'jina-v2-code'].map((name) => [name, 'gpt-2']),
  ...['llama3', 'llama-v3', 'llama-bpe', 'falcon3', 'falcon-h1', 'pixtral', 'lfm2'].map((name) => [name, 'llama-bpe']),
  ...['smollm', 'starcoder', 'refact', 'command-r', 'codeshell', 'exaone', 'minerva-7b'].map((name) => [name, 'smollm']),
  ...['qwen2', 'deepseek-r1-qwen'].map((name) => [name, 'qwen2']),
  ['qwen35', 'qwen35'],
  ...['dbrx', 'smaug-bpe'].map((name) => [name, 'dbrx']),
  ...['gpt-4o', 'llama4'].map((name) => [name, 'gpt-4o']),
  ['tekken', 'tekken'],
  ['gemma4', 'gemma4'],
  ['default', 'default'],
]);

/** The names of the pre-tokenizers this package reads (llama.cpp's names for them). */
export const preTokenizerNames = () => [...SAME_RULES.keys()];

/**
 * The pre-tokenizer `name`, or undefined when there is none of that name:
 * { name, split(text) -> words, ignoreMerges, normalize, addBos, forcesBos, pieceSpelling, newlineRunsWhole }.
 */
export function preTokenizer(name) {
  const row = PRE_TOKENIZERS.get(SAME_RULES.get(name));
  if (row === undefined) return undefined;
  const expressions = row.splits.map((source) => new RegExp(source, 'gu'));
  return {
    name,
    ignoreMerges: row.ignoreMerges ?? false,
    normalize: row.normalize ?? null,
    addBos: row.addBos ?? false,
    forcesBos: row.forcesBos ?? false,
    pieceSpelling: row.pieceSpelling ?? false,
    newlineRunsWhole: row.newlineRunsWhole ?? false,
    split: (text) => expressions.reduce((pieces, expression) => splitEach(pieces, expression), [text]),
  };
}

function splitEach(pieces, expression) {
  const out = [];
  for (const piece of pieces) {
    let at = 0;
    expression.lastIndex = 0;
    for (let match; (match = expression.exec(piece)) !== null;) {
      if (match.index > at) out.push(piece.slice(at, match.index));
      out.push(match[0]);
      at = expression.lastIndex;
    }
    if (at < piece.length) out.push(piece.slice(at));
  }
  return out;
}

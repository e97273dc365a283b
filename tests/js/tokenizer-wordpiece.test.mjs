// WordPiece (tokenizer.ggml.model "bert": bge, gte, all-MiniLM, nomic-embed)
// against its references. llama.cpp is the oracle -- what the runner is fed
// must be what llama.cpp feeds a BERT:
// - its own test vocabulary models/ggml-vocab-bert-bge.gguf (bge-small-en-v1.5,
//   uncased, 30522 tokens), taken from the llama.cpp source node-llama-cpp
//   ships (tests/runtimes/llamacpp-vocab.mjs): every .inp text gives exactly
//   its .out ids, as test-tokenizer-0 checks;
// - native llama.cpp (node-llama-cpp) over that file and over copies of it
//   with the normalizer's keys changed or the special ids left out: the mixed
//   corpus, BERT's own kinds of text and random strings give its ids, special
//   tokens read as text and as tokens, and decode to its detokenization but
//   for the spaces its detokenizer cleans away before punctuation
//   (clean_spaces), which this package's streaming decoder keeps;
// - Hugging Face's tokenizer (transformers.js, @lenml/tokenizers) built from
//   the same vocabulary as bge's tokenizer.json has it: BertNormalizer,
//   BertPreTokenizer, WordPiece with "##", [CLS] $A [SEP]. It differs from
//   llama.cpp in seven ways, each written out below: with the text changed
//   as HF_DIFFERENCES says and its word limit lifted, it gives llama.cpp's
//   ids for every text but those with '▁' written in them.
// The tests of the file skip, saying why, where node-llama-cpp, its source
// bundle or git is missing; a small vocabulary of our own checks the rules
// anywhere.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { TokenizerLoader } from '@lenml/tokenizers';
import { GgufError, readGguf } from '../../js/model/gguf.js';
import { TokenType, Tokenizer } from '../../js/tokenizers/tokenizer.js';
import { encodeGguf } from '../gguf/hf-vocab.mjs';
import { closeNativeLlamaCpp, nativeDetokenize, nativeLlamaCppMissing, nativeTokenize } from '../runtimes/llamacpp-native.mjs';
import { llamaCppVocab, llamaCppVocabMissing } from '../runtimes/llamacpp-vocab.mjs';
import { randomStrings, ready } from './helpers.mjs';
import { CORPUS } from './hf-tokenizers.mjs';

const VOCABULARY = 'bert-bge';

// BERT's own kinds of text beside the corpus: cased and accented words,
// combining marks, CJK (and ideographs past U+FFFF), Hangul, Devanagari's
// spacing vowel signs, ASCII and other symbols, emoji, whitespace and control
// characters of every kind, words longer than 100 characters, and special
// token spellings.
const BERT_TEXTS = [
  'Hello, World! HELLO world. Hello-world: hello_world (hello) [hello] {hello} <hello> "hello" \'hello\' don\'t it\'s',
  'Café naïve façade résumé coöperate Ångström ÉCOLE Straße İstanbul ΟΔΟΣ Σίσυφος ǅemal ﬁne ℌ',
  'e\u0301te\u0301 n\u0303 a\u0308\u0301 \u0301start x\u20dd',
  '日本語 中文 𠀀𠀁𪜀𫝀 한국어 ＡＢＣ　全角 ①② ㈱',
  'नमस्ते दुनिया किताब',
  '$100 + 5 = 105 < 200 > 50 ^ 2 `code` a|b ~x 3.14 1,000 2024-01-01 #tag @user 50% a&b *bold* \\ / ; :',
  '😀 👍🏽 👨\u200d👩\u200d👧 🇫🇷 ❤️ ✅ © ® ™ € £ ¥ ° ± × ÷',
  '▁ a▁b ▁the x▁ ▁▁',
  'a\u0085b\u000bc\u000cd\u001ce\u00adf\u200bg\u200dh\ufeffi\u0000j\ufffdk\ue000l\ud800m\u2028n\u3000o',
  `${'x'.repeat(101)} ${'unbelievable'.repeat(9)} ${'ab'.repeat(60)} ${'é'.repeat(101)}`,
  '[CLS] [SEP] [PAD] [MASK] [UNK] [unused0] [cls] ##ing [CLS]x[SEP]',
  'unaffable unbelievably antidisestablishmentarianism supercalifragilisticexpialidocious',
  '   \t\n\r\n  ',
];

// Pieces to draw random strings from: letters of both cases in and past
// ASCII, accents precomposed and combining, marks of each kind, CJK, Hangul,
// punctuation, symbols, whitespace and control characters, long words, and
// special token spellings.
const PIECES = ['a', 'b', 'Z', 'é', 'É', 'ß', 'İ', 'Σ', 'σ', 'ς', 'ǅ', 'ﬁ', 'hello', 'Hello', 'WORLD', 'un', 'able', 'ing', 'unbelievable',
  '\u0301', '\u0308', '\u093f', '\u093e', '\u20dd', 'न', '中', '文', '𠀀', '𫝀', '한', '국', 'の', 'ア', 'ا', 'Ж', '1', '23', '½', '①',
  '.', ',', '!', '?', '-', '_', "'", '"', '(', ']', '$', '+', '<', '^', '`', '|', '~', '…', '—', '“', '。', '，', '€', '©', '😀', '🏽',
  '\u200d', '\ufe0f', ' ', '  ', '\t', '\n', '\r\n', '\u00a0', '\u2009', '\u3000', '\u0085', '\u000b', '\u0000', '\u00ad', '\ufffd',
  '[CLS]', '[SEP]', '[UNK]', '[MASK]', '[', 'CLS', '##', '▁'];

// Where Hugging Face's tokenizer (transformers.js) reads text otherwise than
// llama.cpp, and the change to the text that makes it read as llama.cpp does.
// The first three are llama.cpp's own ways, Hugging Face's Rust tokenizers
// agreeing with transformers.js; the next two are transformers.js's, the Rust
// tokenizers agreeing with llama.cpp.
const HF_DIFFERENCES = [
  {
    // llama.cpp's NFD table holds one code point per character, the first of
    // its decomposition: a Hangul syllable keeps its leading consonant alone.
    why: 'a Hangul syllable is its first jamo alone to llama.cpp',
    change: (text) => text.replace(/[\uac00-\ud7a3]/g, (syllable) => syllable.normalize('NFD')[0]),
  },
  {
    // llama.cpp strips every mark (\p{M}) with the accents, Hugging Face the nonspacing ones (Mn).
    why: 'llama.cpp strips spacing and enclosing marks too (Devanagari\'s vowel signs)',
    change: (text) => text.normalize('NFD').replace(/[\p{Mc}\p{Me}]/gu, ''),
  },
  {
    // llama.cpp's whitespace is Unicode's White_Space, taken before it drops
    // control characters; Hugging Face drops these three as control characters.
    why: 'U+0085, vertical tab and form feed end a word to llama.cpp; Hugging Face drops them, joining the words',
    change: (text) => text.replace(/[\u0085\v\f]/g, ' '),
  },
  {
    // transformers.js lower-cases the text whole, with Σ final (ς) at a word's
    // end; llama.cpp (and the Rust tokenizers) one character at a time.
    why: 'Σ is σ to llama.cpp wherever it stands; transformers.js makes it ς at a word\'s end',
    change: (text) => text.replaceAll('Σ', 'σ'),
  },
  {
    // transformers.js looks for CJK ideographs one UTF-16 unit at a time and
    // so never finds those past U+FFFF; llama.cpp (and the Rust tokenizers) do.
    why: 'an ideograph past U+FFFF is a word of its own to llama.cpp; transformers.js leaves it in its word',
    change: (text) => text.replace(/[\u{20000}-\u{2a6df}\u{2a700}-\u{2b81f}\u{2b920}-\u{2ceaf}\u{2f800}-\u{2fa1f}]/gu, ' $& '),
  },
];
// And the sixth, in the vocabulary rather than the text: Hugging Face's
// WordPiece reads a word longer than max_input_chars_per_word (100) as [UNK];
// llama.cpp has no such limit and spells it.
const HF_WORD_LIMIT = 100;
// And the seventh, which no change of the text undoes: '▁' written in a
// word. llama.cpp's pieces mark a word's start with it, so there it starts a
// word's first piece ("a▁b" is ▁a ▁b); to Hugging Face it is a character
// like another ("a▁b" is [UNK]). Texts holding it are compared with
// llama.cpp alone.
const WORD_START = '\u2581';

/** llama.cpp's detokenizer's last step for this vocabulary (clean_spaces): spaces taken out before . , ! ? and around some apostrophes. */
const cleanSpaces = (text) => text.replace(/ (?=[?!.,])/g, '').replace(/ ' /g, "'").replace(/ (?='(?:[sm]|re|ve))/g, '');

let vocabulary = null; // { path, cases, metadata, ours }
// Why the vocabulary cannot be had, or why native llama.cpp cannot run on it (null: it can).
let vocabularyMissing = null;
let nativeMissing = null;
let folder = null;
before(async () => {
  vocabularyMissing = llamaCppVocabMissing(VOCABULARY);
  nativeMissing = vocabularyMissing ?? await nativeLlamaCppMissing();
  if (vocabularyMissing !== null) return;
  await ready(); // readGguf parses in wasm
  const { path, cases } = llamaCppVocab(VOCABULARY);
  const { metadata } = readGguf(readFileSync(path));
  vocabulary = { path, cases, metadata, ours: Tokenizer.fromGguf(metadata) };
});
after(async () => {
  await closeNativeLlamaCpp();
  if (folder !== null) rmSync(folder, { recursive: true, force: true });
});

/** The texts every reference is asked about: the corpus, BERT's texts, the .inp texts and 300 random strings. */
const allTexts = () => [...CORPUS, ...BERT_TEXTS, ...vocabulary.cases.map((c) => c.text), ...randomStrings(PIECES, { count: 300, seed: 17, longest: 25 })];

// A small vocabulary as llama.cpp's converter writes BERT's: word starts
// with '▁', "##" pieces bare, the special tokens as they are.
const SMALL = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '▁un', 'aff', 'able', '▁runn', '▁run', 'ing', 'n', '▁a', '▁,', '▁!', '▁$', '▁€', '▁中', '▁文',
  '▁cafe', '▁café', '▁Cafe', '▁x', '▁i'];
const small = (options = {}) => new Tokenizer({ model: 'bert', tokens: SMALL, unkId: 1, bosId: 2, sepId: 3, ...options });
const pieces = (tokenizer, ids) => ids.map((id) => tokenizer.tokens[id]);

test('wordpiece: a word is spelled from the left, the longest piece first, its first piece with \'▁\' and the rest bare', () => {
  const tokenizer = small();
  // ▁runn then ing, not ▁run, n and ing.
  assert.deepEqual(pieces(tokenizer, tokenizer.encode('unaffable running', { bos: false, sep: false })), ['▁un', 'aff', 'able', '▁runn', 'ing']);
});

test('wordpiece: a word with a place where no piece starts is the unknown token whole, not its spelled part and then [UNK]', () => {
  const tokenizer = small();
  assert.deepEqual(pieces(tokenizer, tokenizer.encode('unaffablez a ingx', { bos: false, sep: false })), ['[UNK]', '▁a', '[UNK]']);
  // A continuation piece cannot start a word: "ing" is a word's end only.
  assert.deepEqual(pieces(tokenizer, tokenizer.encode('ing', { bos: false, sep: false })), ['[UNK]']);
});

test('wordpiece: each punctuation mark, ASCII symbol and CJK ideograph is a word of its own; other symbols stay in their word', () => {
  const tokenizer = small();
  assert.deepEqual(pieces(tokenizer, tokenizer.encode('a,a!$a中文', { bos: false, sep: false })), ['▁a', '▁,', '▁a', '▁!', '▁$', '▁a', '▁中', '▁文']);
  assert.deepEqual(pieces(tokenizer, tokenizer.encode('€ a€', { bos: false, sep: false })), ['▁€', '[UNK]']);
});

test('wordpiece: whitespace of every kind ends a word; control characters leave nothing, not even a break; blank text has no words', () => {
  const tokenizer = small();
  assert.deepEqual(pieces(tokenizer, tokenizer.encode('\u00a0a\u2003a\u0085a\u000ba\u3000', { bos: false, sep: false })), ['▁a', '▁a', '▁a', '▁a']);
  assert.deepEqual(pieces(tokenizer, tokenizer.encode('ca\u200bf\u0000e\u00ad\ufeff', { bos: false, sep: false })), ['▁cafe']);
  assert.deepEqual(tokenizer.encode(' \t\n\r\n\u3000', { bos: false, sep: false }), []);
});

test('wordpiece: letters are lower-cased and accents stripped unless the vocabulary says not to (strip_accents follows lowercase)', () => {
  const read = (tokenizer, text) => pieces(tokenizer, tokenizer.encode(text, { bos: false, sep: false }));
  assert.deepEqual(read(small(), 'CAFÉ Café cafe\u0301 İ'), ['▁cafe', '▁cafe', '▁cafe', '▁i']);
  assert.deepEqual(read(small({ lowercase: false }), 'Cafe café CAFE'), ['▁Cafe', '▁café', '[UNK]']);
  // One character for one: İ lower-cased is i, not i and a combining dot.
  assert.deepEqual(read(small({ stripAccents: false }), 'CAFÉ cafe\u0301 İ'), ['▁café', '[UNK]', '▁i']);
  assert.deepEqual(read(small({ lowercase: false, stripAccents: true }), 'Café CAFÉ'), ['▁Cafe', '[UNK]']);
});

test('wordpiece: encode() puts [CLS] first and [SEP] last, as llama.cpp does with add_special; bos and sep off give its ids without', () => {
  const tokenizer = small();
  assert.deepEqual([tokenizer.addBos, tokenizer.addEos, tokenizer.addSep], [true, false, true]);
  assert.deepEqual(pieces(tokenizer, tokenizer.encode('a')), ['[CLS]', '▁a', '[SEP]']);
  assert.deepEqual(pieces(tokenizer, tokenizer.encode('')), ['[CLS]', '[SEP]']);
  assert.deepEqual(tokenizer.encode('', { bos: false, sep: false }), []);
  // Special tokens in the text are read as text unless `special`: "[", "sep", "]".
  assert.deepEqual(pieces(tokenizer, tokenizer.encode('a[SEP]a', { bos: false, sep: false, special: true })), ['▁a', '[SEP]', '▁a']);
  assert.deepEqual(pieces(tokenizer, tokenizer.encode('[SEP]', { bos: false, sep: false })), ['[UNK]', '[UNK]', '[UNK]']);
});

test('wordpiece: decoding reads \'▁\' as a space, so a text decodes with a space before its first word; [CLS] and [SEP] only with special', () => {
  const tokenizer = small();
  const ids = tokenizer.encode('Unaffable, café!');
  assert.equal(tokenizer.decode(ids), ' unaffable , cafe !');
  assert.equal(tokenizer.decode(ids, { special: true }), '[CLS] unaffable , cafe ![SEP]');
});

/** A small BERT vocabulary's GGUF metadata with `changes` (a key -> undefined takes it out). */
function smallGguf(changes = {}) {
  const metadata = new Map([['tokenizer.ggml.model', 'bert'], ['tokenizer.ggml.tokens', SMALL], ['tokenizer.ggml.unknown_token_id', 1],
    ['tokenizer.ggml.bos_token_id', 2], ['tokenizer.ggml.seperator_token_id', 3]]);
  for (const [key, value] of Object.entries(changes)) {
    if (value === undefined) metadata.delete(key);
    else metadata.set(key, value);
  }
  return metadata;
}

test('wordpiece: a GGUF file\'s add_bos_token, add_eos_token and add_sep_token are read (they join a pair for llama.cpp\'s reranker) but encode() frames with [CLS] and [SEP] whatever they say', () => {
  const unsaid = Tokenizer.fromGguf(smallGguf());
  assert.deepEqual([unsaid.addBos, unsaid.addEos, unsaid.addSep], [true, false, true]);
  // As the converter writes a tokenizer.json whose template is [CLS] $A [SEP] and [CLS] $A [SEP] $B [SEP].
  const said = Tokenizer.fromGguf(smallGguf({ 'tokenizer.ggml.add_bos_token': true, 'tokenizer.ggml.add_eos_token': true,
    'tokenizer.ggml.add_sep_token': false, 'tokenizer.ggml.eos_token_id': 3 }));
  assert.deepEqual([said.addBos, said.addEos, said.addSep, said.eosId], [true, true, false, 3]);
  const contrary = Tokenizer.fromGguf(smallGguf({ 'tokenizer.ggml.add_bos_token': false, 'tokenizer.ggml.add_eos_token': true,
    'tokenizer.ggml.add_sep_token': false, 'tokenizer.ggml.eos_token_id': 0 }));
  for (const tokenizer of [unsaid, said, contrary]) assert.deepEqual(pieces(tokenizer, tokenizer.encode('a')), ['[CLS]', '▁a', '[SEP]']);
});

test('wordpiece: a GGUF file without the begin, separator or unknown token is refused where BERT\'s places for them (101, 102, 100) are not in its vocabulary, naming the key', () => {
  for (const key of ['tokenizer.ggml.bos_token_id', 'tokenizer.ggml.seperator_token_id', 'tokenizer.ggml.unknown_token_id']) {
    assert.throws(() => Tokenizer.fromGguf(smallGguf({ [key]: undefined })), (error) => error instanceof GgufError && error.message.includes(`${key} is missing`), key);
    assert.throws(() => Tokenizer.fromGguf(smallGguf({ [key]: SMALL.length })), (error) => error instanceof GgufError && error.message.includes(`${key} is ${SMALL.length}, not a token id`), key);
  }
  assert.throws(() => Tokenizer.fromGguf(smallGguf({ 'tokenizer.ggml.normalizer.lowercase': 1 })), /tokenizer.ggml.normalizer.lowercase is 1 \(number\), not a boolean/);
});

test('wordpiece: a GGUF file whose add_space_prefix is true is refused: llama.cpp\'s detokenizer would drop the first space this package keeps', () => {
  assert.throws(() => Tokenizer.fromGguf(smallGguf({ 'tokenizer.ggml.add_space_prefix': true })), (error) => error instanceof GgufError && /tokenizer.ggml.add_space_prefix is true/.test(error.message));
  assert.equal(Tokenizer.fromGguf(smallGguf({ 'tokenizer.ggml.add_space_prefix': false })).decode([4, 5]), ' unaff');
});

test('bert: the GGUF file reads as llama.cpp reads it: [CLS] begins, [SEP] ends, [UNK] for what cannot be spelled, lower-cased with accents stripped', (t) => {
  if (vocabularyMissing !== null) return t.skip(vocabularyMissing);
  const { ours } = vocabulary;
  assert.equal(ours.model, 'bert');
  assert.equal(ours.vocabSize, 30522);
  assert.deepEqual(pieces(ours, [ours.bosId, ours.sepId, ours.unkId]), ['[CLS]', '[SEP]', '[UNK]']);
  assert.deepEqual([ours.addBos, ours.addEos, ours.addSep, ours.eosId], [true, false, true, null]);
  for (const token of ['[CLS]', '[SEP]', '[UNK]']) assert.equal(ours.tokenTypes[ours.ids.get(token)], TokenType.CONTROL, token);
  assert.deepEqual(pieces(ours, ours.encode('Héllo WORLD')), ['[CLS]', '▁hello', '▁world', '[SEP]']);
});

test('bert: every text of llama.cpp\'s ggml-vocab-bert-bge.gguf.inp gives exactly the ids of its .out (test-tokenizer-0: no special tokens added, those in the text read as text)', (t) => {
  if (vocabularyMissing !== null) return t.skip(vocabularyMissing);
  const { cases, ours } = vocabulary;
  for (const { text, ids } of cases) assert.deepEqual(ours.encode(text, { bos: false, sep: false }), ids, JSON.stringify(text));
  console.log(`# bert-bge: ${cases.length} of ${cases.length} .inp texts give the .out ids`);
});

/**
 * The texts' ids against native llama.cpp's over the file at `path` (the
 * vocabulary `ours` reads), special tokens read as text and as tokens, and
 * the ids' text against llama.cpp's detokenization of them; the number of
 * texts compared.
 */
async function compareNative(path, ours, texts) {
  for (const special of [false, true]) {
    for (const text of texts) {
      const ids = ours.encode(text, { bos: false, sep: false, special });
      assert.deepEqual(ids, await nativeTokenize(path, text, { special }), `${JSON.stringify(text)}, special: ${special}`);
      // With add_special llama.cpp puts its begin token and then its separator around them (llama-vocab.cpp, LLAMA_VOCAB_TYPE_WPM).
      assert.deepEqual(ours.encode(text, { special }), [ours.bosId, ...ids, ours.sepId]);
      const framed = [ours.bosId, ...ids, ours.sepId];
      for (const shown of [false, true]) {
        assert.equal(cleanSpaces(ours.decode(framed, { special: shown })), await nativeDetokenize(path, framed, { special: shown }), `${JSON.stringify(text)} decoded, special: ${shown}`);
      }
    }
  }
  return texts.length;
}

test('bert: the mixed corpus, BERT\'s texts, the .inp texts and 300 random strings give native llama.cpp\'s ids, with and without special tokens read, and decode as it detokenizes', async (t) => {
  if (nativeMissing !== null) return t.skip(nativeMissing);
  const { path, ours } = vocabulary;
  const count = await compareNative(path, ours, allTexts());
  // The package's decoding streams each token's text as llama.cpp's token_to_piece gives it, and so leaves
  // out the clean-up llama.cpp's whole-sequence detokenizer ends with for this vocabulary (clean_spaces).
  console.log(`# bert-bge: ${count} texts give native llama.cpp's ids and, spaces cleaned as it cleans them, its text`);
});

// Copies of the file as a converter might write it for other BERTs: cased,
// with accents kept, with the unknown and separator ids left to llama.cpp's
// defaults.
const VARIANTS = {
  'cased: normalizer.lowercase false (strip_accents follows it)': { 'tokenizer.ggml.normalizer.lowercase': false },
  'accents kept: normalizer.strip_accents false': { 'tokenizer.ggml.normalizer.strip_accents': false },
  'case kept, accents stripped': { 'tokenizer.ggml.normalizer.lowercase': false, 'tokenizer.ggml.normalizer.strip_accents': true },
  'no unknown or separator ids (llama.cpp takes 100 and 102)': { 'tokenizer.ggml.unknown_token_id': undefined, 'tokenizer.ggml.seperator_token_id': undefined },
};

/** The vocabulary's GGUF file as a vocabulary-only file, its keys changed as `changes` says (undefined: left out). */
function variantGguf(metadata, changes) {
  const entries = [
    { key: 'general.architecture', type: 'string', value: 'bert' },
    { key: 'tokenizer.ggml.model', type: 'string', value: 'bert' },
    { key: 'tokenizer.ggml.tokens', type: 'array', itemType: 'string', value: metadata.get('tokenizer.ggml.tokens') },
    { key: 'tokenizer.ggml.token_type', type: 'array', itemType: 'int32', value: metadata.get('tokenizer.ggml.token_type') },
    ...['unknown_token_id', 'seperator_token_id', 'padding_token_id', 'cls_token_id', 'mask_token_id']
      .map((name) => ({ key: `tokenizer.ggml.${name}`, type: 'uint32', value: metadata.get(`tokenizer.ggml.${name}`) })),
  ];
  for (const [key, value] of Object.entries(changes)) {
    const at = entries.findIndex((entry) => entry.key === key);
    if (at >= 0) entries.splice(at, 1);
    if (value !== undefined) entries.push({ key, type: 'bool', value });
  }
  return encodeGguf(entries);
}

for (const [name, changes] of Object.entries(VARIANTS)) {
  test(`bert, ${name}: the corpus, BERT's texts and random strings give native llama.cpp's ids and detokenize as it does`, async (t) => {
    if (nativeMissing !== null) return t.skip(nativeMissing);
    folder ??= mkdtempSync(join(tmpdir(), 'kvcache-wordpiece-'));
    const path = join(folder, `${Object.keys(VARIANTS).indexOf(name)}.gguf`);
    const bytes = variantGguf(vocabulary.metadata, changes);
    writeFileSync(path, bytes);
    const ours = Tokenizer.fromGguf(readGguf(bytes).metadata);
    assert.deepEqual([ours.bosId, ours.sepId, ours.unkId], [101, 102, 100]);
    await compareNative(path, ours, [...CORPUS, ...BERT_TEXTS, ...randomStrings(PIECES, { count: 100, seed: 23, longest: 25 })]);
  });
}

/** bge's tokenizer.json as Hugging Face has it, from the GGUF vocabulary (its "##" pieces back), with WordPiece's word limit `wordLimit`. */
function hfTokenizer(ours, wordLimit) {
  const vocab = {};
  ours.tokens.forEach((token, id) => {
    if (ours.tokenTypes[id] === TokenType.CONTROL) vocab[token] = id;
    else vocab[token.startsWith(WORD_START) ? token.slice(1) : `##${token}`] = id;
  });
  assert.equal(Object.keys(vocab).length, ours.vocabSize, 'the converter\'s spelling maps one token to one');
  const special = (id) => ({ id, content: ours.tokens[id], single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  const template = (token) => ({ SpecialToken: { id: token, type_id: 0 } });
  const tokenizerJSON = {
    version: '1.0',
    added_tokens: ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'].map((token) => special(ours.ids.get(token))),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [template('[CLS]'), { Sequence: { id: 'A', type_id: 0 } }, template('[SEP]')],
      pair: [template('[CLS]'), { Sequence: { id: 'A', type_id: 0 } }, template('[SEP]'), { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '[SEP]', type_id: 1 } }],
      special_tokens: Object.fromEntries(['[CLS]', '[SEP]'].map((token) => [token, { id: token, ids: [ours.ids.get(token)], tokens: [token] }])),
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: wordLimit, vocab },
  };
  const tokenizerConfig = { tokenizer_class: 'BertTokenizer', do_lower_case: true, cls_token: '[CLS]', sep_token: '[SEP]', unk_token: '[UNK]',
    pad_token: '[PAD]', mask_token: '[MASK]', model_max_length: 512 };
  return TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
}

test('bert: Hugging Face\'s tokenizer gives our ids for every text once the text is changed as HF_DIFFERENCES says and its word limit lifted; each difference is met', (t) => {
  if (vocabularyMissing !== null) return t.skip(vocabularyMissing);
  const { ours } = vocabulary;
  const hf = hfTokenizer(ours, HF_WORD_LIMIT);
  const unlimited = hfTokenizer(ours, Infinity);
  const asLlamaCpp = (text, differences = HF_DIFFERENCES) => differences.reduce((changed, { change }) => change(changed), text);
  const texts = allTexts().filter((text) => !text.includes(WORD_START));
  let differing = 0;
  for (const text of texts) {
    const ids = ours.encode(text, { special: true });
    assert.deepEqual(unlimited.encode(asLlamaCpp(text)), ids, JSON.stringify(text));
    assert.deepEqual(unlimited.encode(asLlamaCpp(text), { add_special_tokens: false }), ours.encode(text, { bos: false, sep: false, special: true }), JSON.stringify(text));
    if (JSON.stringify(hf.encode(text)) !== JSON.stringify(ids)) differing++;
  }
  // None of the differences is there for nothing: without it, some text reads otherwise.
  for (const difference of HF_DIFFERENCES) {
    const others = HF_DIFFERENCES.filter((d) => d !== difference);
    assert.ok(texts.some((text) => JSON.stringify(unlimited.encode(asLlamaCpp(text, others))) !== JSON.stringify(ours.encode(text, { special: true }))), difference.why);
  }
  assert.ok(texts.some((text) => JSON.stringify(hf.encode(asLlamaCpp(text))) !== JSON.stringify(ours.encode(text, { special: true }))), 'the word limit');
  console.log(`# bert-bge: ${texts.length} texts; Hugging Face's ids are ours for ${texts.length - differing}, and for the other ${differing} once the text is read as llama.cpp reads it`);
});

test('bert: a word longer than 100 characters and \'▁\' written in a word are [UNK] to Hugging Face but spelled by llama.cpp, and by us', async (t) => {
  if (nativeMissing !== null) return t.skip(nativeMissing);
  const { path, ours } = vocabulary;
  const hf = hfTokenizer(ours, HF_WORD_LIMIT);
  const cases = [['x'.repeat(100), ['▁xx', ...Array(49).fill('xx')]], ['x'.repeat(101), ['▁xx', ...Array(49).fill('xx'), 'x']],
    [`a${WORD_START}b`, ['▁a', '▁b']]];
  for (const [text, spelled] of cases) {
    const ids = ours.encode(text, { bos: false, sep: false });
    assert.deepEqual(pieces(ours, ids), spelled, text);
    assert.deepEqual(ids, await nativeTokenize(path, text), text);
    assert.deepEqual(hf.encode(text, { add_special_tokens: false }), text.length > HF_WORD_LIMIT || text.includes(WORD_START) ? [ours.unkId] : ids, text);
  }
});

// The tekken pre-tokenizer (Mistral's Tekken BPE: Ministral 3, Mistral Nemo)
// against llama.cpp, the oracle. llama.cpp has no tekken test vocabulary, so
// a real byte-level BPE one stands in: Llama 3's tokenizer.json, as the
// converter writes it (tests/js/hf-tokenizers.mjs), with tokenizer.ggml.pre
// "tekken" and general.architecture mistral3, written to a vocabulary-only
// GGUF file that native llama.cpp (node-llama-cpp) reads. The mixed corpus,
// texts whose case changes cut words, words that are tokens the merges do
// not reach (ignore_merges), and random strings must give native llama.cpp's
// ids, special tokens read as text and as tokens, and decode back to the
// text. Skips, saying why, where node-llama-cpp is missing.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { preTokenizer } from '../../js/tokenizers/pretokenize.js';
import { Tokenizer } from '../../js/tokenizers/tokenizer.js';
import { encodeGguf, metadataMap } from '../gguf/hf-vocab.mjs';
import { closeNativeLlamaCpp, nativeDetokenize, nativeLlamaCppMissing, nativeTokenize } from '../runtimes/llamacpp-native.mjs';
import { randomStrings } from './helpers.mjs';
import { CORPUS, VOCABULARIES, hfVocabulary } from './hf-tokenizers.mjs';

// Llama 3's vocabulary read with Tekken's rules.
const vocabulary = hfVocabulary({ ...VOCABULARIES.llama3, pre: 'tekken' });

// Words of Llama 3's vocabulary that are tokens whole but that its merges
// spell in three or four tokens: ignore_merges takes them whole.
const MERGES_MISS = [' tekrar', ' merkez', ' milyon', ' dikkat', 'ilmektedir', ' zdravot'];

// Texts whose words Tekken cuts by case: capitals then small letters, ASCII
// case only (every letter past ASCII is of either case to llama.cpp),
// combining marks apart from their letters.
const TEKKEN_TEXTS = [
  'HTTPServer iPhone McDonald McDONALD\'s ÉCOLE éCOLE École aÉb XMLHttpRequest getHTTPResponseCode iOS macOS',
  'camelCase PascalCase snake_case SCREAMING_CASE kebab-case ALLCAPS lowercase a A aB Ab AB ab',
  'ΑΒΓ αβγ Σοφία ПРИВЕТ Привет привет ǅemal ǅ ʰa aʰ Ⅻ ⅻ 中文ABC abc中文 ＡＢＣａｂｃ',
  'e\u0301te\u0301 E\u0301COLE cafe\u0301 n\u0303 \u0301a a\u0301b',
  "it's IT'S don't DON'T we'Ve a'lL 'S 's",
  'x 12345 ½٣① 3.14 a//\nb c///\r\n\r\nd /// \n\n e  \t\n f',
  MERGES_MISS.join(''),
  `Words${MERGES_MISS.join(',')}`,
];

// Pieces to draw random strings from: letters of both cases in and past
// ASCII, marks, digits, symbols, contraction shapes, whitespace of every
// kind, words that are tokens only whole, and special token spellings.
const PIECES = ['a', 'b', 'Z', 'Q', 'é', 'É', 'ß', 'İ', 'ſ', 'ǅ', 'ʰ', 'Σ', 'σ', 'Ж', 'ж', '中', 'の', 'HTTP', 'Server', 'iPhone', 'Mc', 'DON',
  "'", "'s", "'S", ' ', '  ', '\t', '\n', '\n\n', '\r', '\r\n', '\u00a0', '\u2009', '\u3000', '\u2028', '1', '23', '456', '٣', '½',
  '.', ',', '!', '?', '-', '_', '/', '//', '(', ')', '#', '$', '…', '"', '😀', '🏽', '\u200d', '\u0301', '\u093f', 'न', ...MERGES_MISS,
  '<|begin_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|reserved_special_token_3|>', '<|', '|>'];

let path = null; // the vocabulary-only GGUF file native llama.cpp reads
let folder = null;
let nativeMissing = null;
before(async () => {
  nativeMissing = await nativeLlamaCppMissing();
  if (nativeMissing !== null) return;
  folder = mkdtempSync(join(tmpdir(), 'kvcache-tekken-'));
  path = join(folder, 'vocab-tekken.gguf');
  const entries = [{ key: 'general.architecture', type: 'string', value: 'mistral3' }, ...vocabulary.entries];
  writeFileSync(path, encodeGguf(entries));
});
after(async () => {
  await closeNativeLlamaCpp();
  if (folder !== null) rmSync(folder, { recursive: true, force: true });
});

test('tekken: words are cut where ASCII capitals give way to small letters; a letter past ASCII is of either case; digits stand alone', () => {
  const { split } = preTokenizer('tekken');
  assert.deepEqual(split('HTTPServer iPhone McDonald McDONALD\'s'), ['HTTPServer', ' i', 'Phone', ' Mc', 'Donald', ' Mc', 'DONALD', "'s"]);
  // É and é count as capital and as small letter: " É" is a capital run ended by a letter of either case, "aÉb" one small run.
  assert.deepEqual(split(' ÉCOLE éCOLE aÉb'), [' É', 'COLE', ' é', 'COLE', ' aÉb']);
  // No contraction joins its word (GPT-4o's does); a combining mark is no letter.
  assert.deepEqual(split("don't e\u0301t"), ['don', "'t", ' e', '\u0301t']);
  assert.deepEqual(split('x 2024 a//\nb'), ['x', ' ', '2', '0', '2', '4', ' a', '//\n', 'b']);
});

test('tekken: llama.cpp\'s rules for it -- whole words before merges, the begin token added unless the file says not to', () => {
  const tekken = preTokenizer('tekken');
  assert.deepEqual([tekken.ignoreMerges, tekken.addBos, tekken.normalize], [true, true, null]);
  const { entries, ours } = vocabulary;
  assert.equal(ours.pre, 'tekken');
  const without = (key) => metadataMap(entries.filter((entry) => entry.key !== key));
  assert.equal(Tokenizer.fromGguf(without('tokenizer.ggml.add_bos_token')).addBos, true);
  const saysNo = metadataMap(entries.map((entry) => (entry.key === 'tokenizer.ggml.add_bos_token' ? { ...entry, value: false } : entry)));
  assert.equal(Tokenizer.fromGguf(saysNo).addBos, false);
  // The same vocabulary merging these words (GPT-4o's split cuts them alike) spells each in several tokens.
  const merging = hfVocabulary({ ...VOCABULARIES.llama3, pre: 'gpt-4o' }).ours;
  for (const word of MERGES_MISS) {
    assert.deepEqual(ours.encode(word, { bos: false }), [ours.ids.get(word.replace(' ', '\u0120'))], word);
    assert.ok(merging.encode(word, { bos: false }).length > 2, word);
  }
});

test('tekken: the mixed corpus and the case texts give native llama.cpp\'s ids, special tokens read as text and as tokens', async (t) => {
  if (nativeMissing !== null) return t.skip(nativeMissing);
  const { ours } = vocabulary;
  const texts = [...CORPUS, ...TEKKEN_TEXTS];
  for (const special of [false, true]) {
    for (const text of texts) {
      assert.deepEqual(ours.encode(text, { bos: false, special }), await nativeTokenize(path, text, { special }), `${JSON.stringify(text)}, special: ${special}`);
    }
  }
  console.log(`# tekken: ${texts.length} texts (${CORPUS.length} of the corpus) give native llama.cpp's ids, with and without special tokens`);
});

test('tekken: decode(encode(text)) gives the text back, as llama.cpp\'s detokenization of the same ids does (no spaces cleaned)', async (t) => {
  if (nativeMissing !== null) return t.skip(nativeMissing);
  const { ours } = vocabulary;
  for (const text of [...CORPUS, ...TEKKEN_TEXTS]) {
    for (const special of [false, true]) {
      const ids = ours.encode(text, { bos: false, special });
      assert.equal(ours.decode(ids, { special: true }), text, JSON.stringify(text));
      assert.equal(await nativeDetokenize(path, ids, { special: true }), text, JSON.stringify(text));
    }
  }
});

test('tekken: 300 random strings of mixed pieces give native llama.cpp\'s ids, special tokens read as text and as tokens, and decode back', async (t) => {
  if (nativeMissing !== null) return t.skip(nativeMissing);
  const { ours } = vocabulary;
  for (const text of randomStrings(PIECES, { count: 300, seed: 12, longest: 25 })) {
    for (const special of [false, true]) {
      const ids = ours.encode(text, { bos: false, special });
      assert.deepEqual(ids, await nativeTokenize(path, text, { special }), `${JSON.stringify(text)}, special: ${special}`);
      assert.equal(ours.decode(ids, { special: true }), text, JSON.stringify(text));
    }
  }
});

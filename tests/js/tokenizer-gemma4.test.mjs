// Gemma 4's tokenizer (tokenizer.ggml.model "gemma4") against llama.cpp, the
// oracle: llama.cpp's own test vocabulary models/ggml-vocab-gemma-4.gguf,
// taken from the llama.cpp source node-llama-cpp ships
// (tests/runtimes/llamacpp-vocab.mjs), read by this package's GGUF reader.
// Its .inp texts must give exactly its .out ids, as test-tokenizer-0 checks;
// the mixed corpus the other vocabularies pass (and the .inp texts) must give
// the ids of native llama.cpp's tokenizer (node-llama-cpp over the same
// file), with special tokens in the text read as text and as tokens; and
// decoding gives each text back. Skips, saying why, where node-llama-cpp,
// its source bundle or git is missing.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { readGguf } from '../../js/model/gguf.js';
import { TokenType, Tokenizer } from '../../js/tokenizers/tokenizer.js';
import { closeNativeLlamaCpp, nativeDetokenize, nativeLlamaCppMissing, nativeTokenize } from '../runtimes/llamacpp-native.mjs';
import { llamaCppVocab, llamaCppVocabMissing } from '../runtimes/llamacpp-vocab.mjs';
import { randomStrings, ready } from './helpers.mjs';
import { CORPUS } from './hf-tokenizers.mjs';

const VOCABULARY = 'gemma-4';

// Gemma 4's own kinds of text beside the corpus: its user-defined tool and
// channel markers, its turn markers, runs of newlines and spaces, tabs, and
// characters its vocabulary lacks (byte fallback).
const GEMMA4_TEXTS = [
  '<|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\nsimple<channel|>4<turn|>',
  '<|tool_call>call:f{a:<|"|>x y<|"|>}<tool_call|><|tool_response>response:f{r:1}<tool_response|>',
  '<bos><eos><pad></s><s>',
  'a\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nb',
  '\n \n\n \t\n\r\n\r\r  \t \u00a0 \u3000 x',
  '𝔘\u0001\ue000\u{10ffff}\u{e0061}',
];

// Pieces to draw random strings from: letters, marks and digits of many
// scripts, symbols, every kind of whitespace, characters the vocabulary
// lacks, and control, user-defined and lookalike token spellings. ('▁'
// itself is left out: written in text, it decodes as a space, in llama.cpp too.)
const PIECES = ['a', 'b', 'Z', 'é', 'ß', 'İ', 'ſ', "'", "'s", ' ', '  ', '   ', '\t', '\n', '\n\n', '\r', '\r\n', '\u00a0', '\u2009', '\u3000',
  '\u2028', '1', '23', '456', '٣', '½', '.', ',', '!', '?', '-', '_', '(', ')', '{', '}', '#', '$', '…', '—', '“', '"', '😀', '🏽', '\u200d',
  '♀', '\ufe0f', '🇫', '中', '文', 'の', '한', 'ا', 'ل', 'न', '\u093f', '\u0301', '𝔘', '\u0001', '\ue000', '\u{e0061}', 'hello', 'Hello',
  'WORLD', ' the', '<|', '|>', '<|im_start|>', '<|endoftext|>', '<bos>', '<eos>', '<|turn>', '<turn|>', '<|channel>', '<|"|>',
  '<|tool_response>', '</s>', '<s>', '<unused3>', '<mask>', '<0x41>'];

let vocabulary = null; // { path, cases, ours }
// Why the vocabulary cannot be had, or why native llama.cpp cannot run on it (null: it can).
let vocabularyMissing = null;
let nativeMissing = null;
before(async () => {
  vocabularyMissing = llamaCppVocabMissing(VOCABULARY);
  nativeMissing = vocabularyMissing ?? await nativeLlamaCppMissing();
  if (vocabularyMissing !== null) return;
  await ready(); // readGguf parses in wasm
  const { path, cases } = llamaCppVocab(VOCABULARY);
  vocabulary = { path, cases, ours: Tokenizer.fromGguf(readGguf(readFileSync(path)).metadata) };
});
after(() => closeNativeLlamaCpp());

test('gemma4: the GGUF file reads as llama.cpp reads it: BPE with its merges, the gemma4 pre-tokenizer, the begin token added', (t) => {
  if (vocabularyMissing !== null) return t.skip(vocabularyMissing);
  const { ours } = vocabulary;
  assert.equal(ours.model, 'gemma4');
  assert.equal(ours.pre, 'gemma4');
  assert.ok(ours.merges.length > 0, 'merges');
  assert.equal(ours.addBos, true);
  assert.equal(ours.encode('Hi')[0], ours.bosId);
  for (const marker of ['<|channel>', '<channel|>', '<|tool_call>', '<tool_call|>', '<tool_response|>', '<|"|>']) {
    assert.equal(ours.tokenTypes[ours.ids.get(marker)], TokenType.USER_DEFINED, marker);
  }
  // The file's user-defined <|tool_response> ends a generation, and so is a control token, as in llama.cpp.
  const ends = ['<eos>', '<turn|>', '<|tool_response>'].map((marker) => ours.ids.get(marker));
  assert.deepEqual([...ours.eogIds].sort((a, b) => a - b), ends.sort((a, b) => a - b));
  for (const end of ends) assert.equal(ours.tokenTypes[end], TokenType.CONTROL, ours.tokens[end]);
});

test('gemma4: every text of llama.cpp\'s ggml-vocab-gemma-4.gguf.inp gives exactly the ids of its .out (test-tokenizer-0: no begin token, special tokens as text)', (t) => {
  if (vocabularyMissing !== null) return t.skip(vocabularyMissing);
  const { cases, ours } = vocabulary;
  for (const { text, ids } of cases) assert.deepEqual(ours.encode(text, { bos: false }), ids, JSON.stringify(text));
  console.log(`# gemma-4: ${cases.length} of ${cases.length} .inp texts give the .out ids`);
});

test('gemma4: the mixed corpus, Gemma 4\'s markers and the .inp texts give native llama.cpp\'s ids, special tokens read as text and as tokens', async (t) => {
  if (nativeMissing !== null) return t.skip(nativeMissing);
  const { path, cases, ours } = vocabulary;
  const texts = [...CORPUS, ...GEMMA4_TEXTS, ...cases.map((c) => c.text)];
  for (const special of [false, true]) {
    for (const text of texts) {
      assert.deepEqual(ours.encode(text, { bos: false, special }), await nativeTokenize(path, text, { special }), `${JSON.stringify(text)}, special: ${special}`);
    }
  }
  console.log(`# gemma-4: ${texts.length} texts (${CORPUS.length} of the corpus) give native llama.cpp's ids, with and without special tokens`);
});

test('gemma4: decode(encode(text)) gives the text back, and llama.cpp\'s detokenization of the same ids wherever that gives the text back', async (t) => {
  if (nativeMissing !== null) return t.skip(nativeMissing);
  const { path, cases, ours } = vocabulary;
  let agreed = 0;
  let texts = 0;
  for (const text of [...CORPUS, ...GEMMA4_TEXTS, ...cases.map((c) => c.text)]) {
    for (const special of [false, true]) {
      const ids = ours.encode(text, { bos: false, special });
      texts++;
      assert.equal(ours.decode(ids, { special: true }), text, JSON.stringify(text));
      // llama.cpp's detokenizer cleans spaces before . , ! ? and some apostrophes for this vocabulary (clean_spaces).
      const native = await nativeDetokenize(path, ids, { special: true });
      if (native === text) agreed++;
      else assert.ok(/ [.,!?']/.test(text), `llama.cpp reads ${JSON.stringify(native)} for ${JSON.stringify(text)}`);
    }
  }
  console.log(`# gemma-4: ${texts} encodings decode to their text; llama.cpp's detokenizer gives ${agreed} of them back, the rest with spaces cleaned`);
});

test('gemma4: 300 random strings of mixed pieces give native llama.cpp\'s ids, special tokens read as text and as tokens, and decode back', async (t) => {
  if (nativeMissing !== null) return t.skip(nativeMissing);
  const { path, ours } = vocabulary;
  for (const text of randomStrings(PIECES, { count: 300, seed: 11, longest: 25 })) {
    for (const special of [false, true]) {
      const ids = ours.encode(text, { bos: false, special });
      assert.deepEqual(ids, await nativeTokenize(path, text, { special }), `${JSON.stringify(text)}, special: ${special}`);
      assert.equal(ours.decode(ids, { special: true }), text, JSON.stringify(text));
    }
  }
});

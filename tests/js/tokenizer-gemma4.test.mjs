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
import { ready } from './helpers.mjs';
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

let vocabulary = null; // { path, cases, ours }
let missing = null;
before(async () => {
  missing = llamaCppVocabMissing(VOCABULARY) ?? await nativeLlamaCppMissing();
  if (missing !== null) return;
  await ready(); // readGguf parses in wasm
  const { path, cases } = llamaCppVocab(VOCABULARY);
  vocabulary = { path, cases, ours: Tokenizer.fromGguf(readGguf(readFileSync(path)).metadata) };
});
after(() => closeNativeLlamaCpp());

test('gemma4: the GGUF file reads as llama.cpp reads it: BPE with its merges, the gemma4 pre-tokenizer, the begin token added', (t) => {
  if (missing !== null) return t.skip(missing);
  const { ours } = vocabulary;
  assert.equal(ours.model, 'gemma4');
  assert.equal(ours.pre, 'gemma4');
  assert.ok(ours.merges.length > 0, 'merges');
  assert.equal(ours.addBos, true);
  assert.equal(ours.encode('Hi')[0], ours.bosId);
  for (const marker of ['<|channel>', '<channel|>', '<|tool_call>', '<tool_call|>', '<|tool_response>', '<tool_response|>', '<|"|>']) {
    assert.equal(ours.tokenTypes[ours.ids.get(marker)], TokenType.USER_DEFINED, marker);
  }
});

test('gemma4: every text of llama.cpp\'s ggml-vocab-gemma-4.gguf.inp gives exactly the ids of its .out (test-tokenizer-0: no begin token, special tokens as text)', (t) => {
  if (missing !== null) return t.skip(missing);
  const { cases, ours } = vocabulary;
  for (const { text, ids } of cases) assert.deepEqual(ours.encode(text, { bos: false }), ids, JSON.stringify(text));
  console.log(`# gemma-4: ${cases.length} of ${cases.length} .inp texts give the .out ids`);
});

test('gemma4: the mixed corpus, Gemma 4\'s markers and the .inp texts give native llama.cpp\'s ids, special tokens read as text and as tokens', async (t) => {
  if (missing !== null) return t.skip(missing);
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
  if (missing !== null) return t.skip(missing);
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

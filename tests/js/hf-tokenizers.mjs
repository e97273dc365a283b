// Hugging Face's tokenizers as the tests' references: transformers.js (the
// @lenml/tokenizers fork) over the real Llama 3, Qwen3, GPT-2, GPT-4o (o200k,
// Phi-4-mini's split) and Gemma 3 tokenizer.json and tokenizer_config.json
// that @lenml/tokenizer-* ship, with
// each vocabulary as llama.cpp's converter writes it into GGUF metadata
// (tests/gguf/hf-vocab.mjs) and this package's Tokenizer read from that.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { TokenizerLoader } from '@lenml/tokenizers';
import { Tokenizer } from '../../js/tokenizers/tokenizer.js';
import { hfVocabMetadata, metadataMap } from '../gguf/hf-vocab.mjs';

// Meta's Llama 3 tokenizer.json as published now puts <|begin_of_text|> first
// (the copy in the package predates that, and the converter would name its
// pre-tokenizer smaug-bpe); with it the converter says llama-bpe and add_bos.
const LLAMA3_POST_PROCESSOR = {
  type: 'Sequence',
  processors: [
    { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [
        { SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } },
      ],
      special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [128000], tokens: ['<|begin_of_text|>'] } },
    },
  ],
};

/**
 * The vocabularies by name: the package whose files they are (`files`),
 * what replaces parts of its tokenizer.json (`patch`) and the pre-tokenizer
 * name the converter gives them (`pre`); a SentencePiece one (Gemma 3's)
 * names none and says whether text gets a space first (`addSpacePrefix`).
 */
export const VOCABULARIES = {
  llama3: { files: 'llama3', patch: { post_processor: LLAMA3_POST_PROCESSOR }, pre: 'llama-bpe' },
  qwen3: { files: 'qwen3', patch: {}, pre: 'qwen2' },
  gpt2: { files: 'gpt2', patch: {}, pre: 'gpt-2' },
  gpt4o: { files: 'gpt4o', patch: {}, pre: 'gpt-4o' },
  // Gemma 3's converter writes add_space_prefix false after the SentencePiece vocabulary.
  gemma3: { files: 'gemma3', patch: {}, addSpacePrefix: false },
};

/** Text of many kinds: English, code, numbers, emoji, scripts, whitespace runs, special tokens written in it. */
export const CORPUS = [
  "The quick brown fox jumps over the lazy dog. It's nine o'clock; they'll say we'd've known.",
  "I'M SURE YOU'RE RIGHT, DON'T YOU THINK? We'Ve a'lL seen 'em.",
  'function add(a, b) {\n\treturn a + b;\n}\n\nclass Stack:\n    def push(self, x):\n        self.items.append(x)  # O(1)\n\t\t# tabs\tand\tspaces\n',
  '0 7 42 123 1234 12345 123456 1234567 3.14159265358979 -273.15 1e-10 0xDEADBEEF 1,000,000 2024-05-17T12:34:56Z 99999999999999999999999',
  'I ❤️ emoji 😀😃 👍🏻👍🏼👍🏽👍🏾👍🏿 👨‍👩‍👧‍👦 🧑🏽‍💻 🏳️‍🌈 🇫🇷🇯🇵 🤷🏽‍♀️',
  '日本語のテキストと中文文本，还有한국어 문장도 있습니다。東京都渋谷区',
  'مرحبا بالعالم، كيف حالك؟ नमस्ते दुनिया, आप कैसे हैं? Привет, мир! Γειά σου κόσμε. สวัสดีชาวโลก',
  '   leading spaces\n\n\nthree newlines\r\nCRLF\t\ttabs    four spaces   \n \n  trailing   ',
  '\n',
  ' ',
  '',
  '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|im_start|>assistant\n<think>\nhmm\n</think>\nHello<|im_end|>\n<|endoftext|>',
  '<|im_start <|begin_of_text <| |> <|endoftext|x',
];

// The packages' tokenizer.json and tokenizer_config.json (read as JSON: their
// modules hold the same data as far slower JavaScript), read once each.
const require = createRequire(import.meta.url);
const filesOf = new Map();
function hfFiles(name) {
  if (!filesOf.has(name)) {
    const read = (file) => JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-${name}/models/${file}`), 'utf8'));
    filesOf.set(name, { json: read('tokenizer.json'), config: read('tokenizer_config.json') });
  }
  return filesOf.get(name);
}

/**
 * A vocabulary ({ files, patch, pre }, as VOCABULARIES holds them; `config`
 * replaces keys of its tokenizer_config.json) as both references see it: {
 * hf (transformers.js's tokenizer, made when first read), entries (the converter's GGUF metadata,
 * hfVocabMetadata's entries), config (tokenizer_config.json), ours
 * (Tokenizer.fromGguf of the entries) }.
 */
export function hfVocabulary({ files, patch, pre, addSpacePrefix, config: replaced = {} }) {
  const { json, config: packaged } = hfFiles(files);
  const config = { ...packaged, ...replaced };
  const tokenizerJson = { ...json, ...patch };
  const entries = hfVocabMetadata(tokenizerJson, config, { pre, addSpacePrefix });
  let hf = null; // built when first asked for: it takes a second or two
  return {
    get hf() {
      return (hf ??= TokenizerLoader.fromPreTrained({ tokenizerJSON: tokenizerJson, tokenizerConfig: config }));
    },
    entries, config, ours: Tokenizer.fromGguf(metadataMap(entries)),
  };
}

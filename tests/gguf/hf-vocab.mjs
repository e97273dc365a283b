// A Hugging Face tokenizer (tokenizer.json, tokenizer_config.json, optionally
// config.json) as GGUF metadata, written the way llama.cpp's
// convert_hf_to_gguf.py writes it -- a byte-level BPE one as _set_vocab_gpt2
// does (get_vocab_base and get_vocab_base_pre), a SentencePiece one as
// _set_vocab_sentencepiece does (_create_vocab_sentencepiece), then gguf-py's
// SpecialVocab.add_to_gguf -- so that a vocabulary the tests check against
// Hugging Face's own tokenizer is the one a converted model file would carry.
// encodeGguf() writes the entries as a GGUF v3 file (no tensors) that
// llama.cpp can read back.

import { createHash } from 'node:crypto';

// GGUF value types.
const TYPES = { uint32: 4, int32: 5, float32: 6, bool: 7, string: 8, array: 9 };
// gguf-py's TokenType.
const NORMAL = 1;
const UNKNOWN = 2;
const CONTROL = 3;
const USER_DEFINED = 4;
const UNUSED = 5;
const BYTE = 6;

// get_vocab_base_pre: the text the converter encodes, and what the sha256 of
// the ids' Python repr says the pre-tokenizer is (the rows for the
// vocabularies the tests use).
const CHECK_TEXT = '\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= нещо на Български \'\'\'\'\'\'```````""""......!!!!!!?????? I\'ve been \'told he\'s there, \'RE you sure? \'M not sure I\'ll make it, \'D you like some tea? We\'Ve a\'lL';
const PRE_BY_HASH = new Map([
  ['0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5', 'llama-bpe'], // Meta-Llama-3-8B
  ['c136ed14d01c2745d4f60a9596ae66800e2b61fa45643e72436041855ad4089d', 'smaug-bpe'], // Llama 3 without its begin token
  ['3ce83efda5659b07b1ad37ca97ca5797ea4285d9b9ab0dc679e4a720c9da7454', 'gpt-2'], // openai-community/gpt2
  ['e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea', 'qwen2'], // Qwen1.5-7B (Qwen2.5 and Qwen3 alike)
  ['d4540891389ea895b53b399da6ac824becc30f2fba0e9ddbb98f92e55ca0e97c', 'qwen2'], // Qwen3-Embedding-0.6B
  ['ccc2ef013c104be7bae2965776d611e1d7a8a2a9c547dd93a682c9a9fc80352e', 'gpt-4o'], // Xenova/gpt-4o (o200k: Phi-4-mini's split)
]);

/**
 * tokenizer.ggml.pre as the converter names it: `encode(text)` is the Hugging
 * Face tokenizer's encode with its special tokens added (Python's default).
 */
export function preTokenizerName(encode) {
  const hash = createHash('sha256').update(`[${encode(CHECK_TEXT).join(', ')}]`).digest('hex');
  const pre = PRE_BY_HASH.get(hash);
  if (pre === undefined) throw new Error(`BPE pre-tokenizer not recognized (chkhsh ${hash}), as the converter would say`);
  return pre;
}

// Model.does_token_look_special: added tokens some models forget to mark special.
function looksSpecial(text) {
  return ['<pad>', '<mask>', '<2mass>', '[@BOS@]'].includes(text) ||
    (text.startsWith('<|') && text.endsWith('|>')) ||
    (text.startsWith('<｜') && text.endsWith('｜>')) ||
    (text.startsWith('<unused') && text.endsWith('>'));
}

// SpecialVocab's merges: "a b" strings as they are, pairs joined by a space
// with any space inside a part written as U+0120 (chr(ord(' ') + 256)).
function mergeStrings(merges) {
  if (merges.length === 0 || typeof merges[0] === 'string') return merges;
  return merges.map((pair) => pair.map((part) => part.replaceAll(' ', '\u0120')).join(' '));
}

/**
 * The converter's GGUF entries for the tokenizer: [{ key, type, value }],
 * type a GGUF type name ('string', 'uint32', 'bool', 'array'; arrays carry
 * itemType), in the order the converter adds them. A byte-level BPE
 * tokenizer.json (its decoder ByteLevel) is written as _set_vocab_gpt2 does,
 * any other BPE one as a SentencePiece vocabulary (see sentencePieceVocab).
 * @param {object} tokenizerJson tokenizer.json
 * @param {object} tokenizerConfig tokenizer_config.json
 * @param {{ pre?: string, config?: object, addSpacePrefix?: boolean }} options pre: byte-level BPE,
 *   preTokenizerName()'s answer; config: config.json (its vocab_size pads the vocabulary, its
 *   *_token_id fill special ids); addSpacePrefix: SentencePiece, written when given (Gemma's converters write false)
 */
export function hfVocabMetadata(tokenizerJson, tokenizerConfig, { pre, config = {}, addSpacePrefix } = {}) {
  if (tokenizerJson.model?.type !== 'BPE') throw new Error('not a BPE tokenizer.json');
  const byteLevel = tokenizerJson.decoder?.type === 'ByteLevel';
  const { tokens, types, scores } = byteLevel ? byteLevelVocab(tokenizerJson, config) : sentencePieceVocab(tokenizerJson, tokenizerConfig, config);
  const entries = [
    { key: 'tokenizer.ggml.model', type: 'string', value: byteLevel ? 'gpt2' : 'llama' },
    { key: 'tokenizer.ggml.pre', type: 'string', value: byteLevel ? pre : 'default' },
    { key: 'tokenizer.ggml.tokens', type: 'array', itemType: 'string', value: tokens },
  ];
  if (scores) entries.push({ key: 'tokenizer.ggml.scores', type: 'array', itemType: 'float32', value: scores });
  entries.push({ key: 'tokenizer.ggml.token_type', type: 'array', itemType: 'int32', value: types });
  const special = specialVocab(tokenizerJson, tokenizerConfig, config);
  if (byteLevel) entries.push({ key: 'tokenizer.ggml.merges', type: 'array', itemType: 'string', value: mergeStrings(tokenizerJson.model.merges) });
  const idKeys = { bos: 'bos_token_id', eos: 'eos_token_id', unk: 'unknown_token_id', sep: 'seperator_token_id', pad: 'padding_token_id', mask: 'mask_token_id', eot: 'eot_token_id', eom: 'eom_token_id' };
  for (const [kind, id] of special.ids) {
    // gguf-py has no handler for cls (it warns and skips it).
    if (idKeys[kind]) entries.push({ key: `tokenizer.ggml.${idKeys[kind]}`, type: 'uint32', value: id });
  }
  for (const [kind, value] of special.add) entries.push({ key: `tokenizer.ggml.add_${kind}_token`, type: 'bool', value });
  if (special.chatTemplate !== null) entries.push({ key: 'tokenizer.chat_template', type: 'string', value: special.chatTemplate });
  // Gemma's set_vocab, after _set_vocab_sentencepiece.
  if (addSpacePrefix !== undefined && !byteLevel) entries.push({ key: 'tokenizer.ggml.add_space_prefix', type: 'bool', value: addSpacePrefix });
  return entries;
}

// The vocabulary's text by id: the model's, with the added tokens over it.
function byIdOf({ model, added_tokens: added = [] }) {
  const byId = [];
  for (const text in model.vocab) byId[model.vocab[text]] = text;
  const addedById = [];
  for (const token of added) {
    byId[token.id] = token.content;
    addedById[token.id] = token;
  }
  return { byId, addedById };
}

// get_vocab_base: one entry per id below vocab_size.
function byteLevelVocab(tokenizerJson, config) {
  const { byId, addedById } = byIdOf(tokenizerJson);
  const vocabSize = config.vocab_size ?? byId.length;
  const tokens = new Array(vocabSize);
  const types = new Array(vocabSize);
  for (let id = 0; id < vocabSize; id++) {
    const text = byId[id];
    const addedToken = addedById[id];
    if (text === undefined) {
      tokens[id] = `[PAD${id}]`;
      types[id] = UNUSED;
    } else if (addedToken === undefined) {
      tokens[id] = text;
      types[id] = NORMAL;
    } else if (addedToken.special || looksSpecial(text)) {
      // (The converter first round-trips an added token that is not "normalized"
      // through the tokenizer; for a token matched whole that gives it back unchanged.)
      tokens[id] = text;
      types[id] = CONTROL;
    } else {
      tokens[id] = text.replaceAll('\u2581', ' ');
      types[id] = USER_DEFINED;
    }
  }
  return { tokens, types, scores: null };
}

/**
 * _create_vocab_sentencepiece, from the tokenizer.json Hugging Face made of a
 * SentencePiece BPE tokenizer.model (byte fallback, '▁' for a space) where
 * the tests have no tokenizer.model: the model's pieces by id, a byte piece
 * <0xNN> BYTE, the unknown one UNKNOWN, the rest NORMAL; then every token of
 * tokenizer_config.json's added_tokens_decoder below vocab_size CONTROL
 * (special, or looking special) or USER_DEFINED (its '▁' written as spaces),
 * scored -1000. The scores tokenizer.model holds are not in tokenizer.json:
 * SentencePiece's BPE trainer scores its i-th piece -i, and Hugging Face's
 * converter orders the merges by the score of the piece they make, so a
 * piece's id orders them as its score does; a piece scores -id here, and the
 * merges are checked to come in that order (only the order counts to either
 * tokenizer: each merges the best-scoring pair first).
 */
function sentencePieceVocab(tokenizerJson, tokenizerConfig, config) {
  const { model } = tokenizerJson;
  const vocabSize = config.vocab_size ?? Object.keys(model.vocab).length;
  const tokens = Array.from({ length: vocabSize }, (_, id) => `[PAD${id}]`);
  const scores = new Array(vocabSize).fill(-10000);
  const types = new Array(vocabSize).fill(UNUSED);
  for (const text in model.vocab) {
    const id = model.vocab[text];
    if (id >= vocabSize) continue;
    tokens[id] = text;
    scores[id] = -id;
    types[id] = text === model.unk_token ? UNKNOWN : /^<0x[0-9A-F]{2}>$/.test(text) ? BYTE : NORMAL;
  }
  const added = Object.entries(tokenizerConfig.added_tokens_decoder ?? {});
  const addedIds = new Set(added.map(([id]) => Number(id)));
  let last = -1;
  for (const merge of model.merges) {
    const id = model.vocab[typeof merge === 'string' ? merge.replace(' ', '') : merge.join('')];
    if (addedIds.has(id)) continue;
    if (id < last) throw new Error(`merge ${JSON.stringify(merge)} makes piece ${id} after piece ${last}: the ids do not order the scores`);
    last = id;
  }
  for (const [key, { content, special }] of added) {
    const id = Number(key);
    if (id >= vocabSize) continue;
    const control = special || looksSpecial(content);
    tokens[id] = control ? content : content.replaceAll('\u2581', ' ');
    types[id] = control ? CONTROL : USER_DEFINED;
    scores[id] = -1000;
  }
  return { tokens, types, scores };
}

// SpecialVocab._try_load_from_tokenizer_json and _try_load_from_config_json:
// the special ids (the first found for a kind stays), whether to add them,
// and the chat template. Two branches are left out: a tokenizer without
// tokenizer_config.json, and a third end-like token (the converter's eom).
function specialVocab(tokenizerJson, tokenizerConfig, config) {
  const ids = new Map();
  const add = new Map();
  const kinds = ['bos', 'eos', 'unk', 'sep', 'pad', 'cls', 'mask'];
  const tc = { ...tokenizerConfig };
  const setId = (kind, id) => {
    if (Number.isInteger(id) && !ids.has(kind)) ids.set(kind, id);
  };
  let bos = tc.bos_token;
  let eos = tc.eos_token;
  const cls = tc.cls_token;
  const sep = tc.sep_token;
  if (!bos && cls) tc.bos_token = bos = cls;
  if (!eos && sep) tc.eos_token = eos = sep;
  const post = tokenizerJson.post_processor;
  for (const processor of post ? post.processors ?? [post] : []) {
    if (processor.type === 'RobertaProcessing') {
      for (const kind of ['bos', 'eos', 'sep']) add.set(kind, true);
      if (!cls) tc.cls_token = processor.cls?.[0] ?? bos;
      if (!sep) tc.sep_token = processor.sep?.[0] ?? eos;
      continue;
    }
    if (processor.type !== 'TemplateProcessing') continue;
    const single = processor.single ?? [];
    let pair = processor.pair ?? [];
    const first = single.length > 1 ? single[0].SpecialToken?.id : undefined;
    const last = single.length > 1 ? single.at(-1).SpecialToken?.id : undefined;
    if (first) add.set('bos', first === bos || first === cls);
    if (last) {
      if (last !== eos) {
        kinds.push('eot');
        tc.eot_token = eos;
        tc.eos_token = eos = last;
      }
      add.set('eos', last === eos);
    }
    if (pair.length > 0) {
      const start = first && pair[0].SpecialToken?.id === first ? 1 : 0;
      const stop = last && pair.at(-1).SpecialToken?.id === last ? -1 : undefined;
      pair = pair.slice(start, stop);
      const a = pair[0]?.Sequence?.id;
      const b = pair.at(-1)?.Sequence?.id;
      if (a === 'A' && b === 'B' && pair.length > 2) {
        const middle = pair.slice(1, -1);
        let addSep = false;
        const entry = middle[0].SpecialToken?.id;
        if (entry && (entry === sep || entry === eos) && !last) addSep = true;
        if (middle.length === 2) {
          const second = middle[1].SpecialToken?.id;
          if (second && (second === sep || second === eos)) addSep = true;
        }
        add.set('sep', addSep);
        if (addSep && !sep) tc.sep_token = eos;
      }
    }
  }
  const template = tc.chat_template ?? null;
  const chatTemplate = typeof template === 'string' ? template : null;
  const addedTokens = tokenizerJson.added_tokens ?? [];
  for (const kind of kinds) {
    if (typeof tc[`add_${kind}_token`] === 'boolean') add.set(kind, tc[`add_${kind}_token`]);
    const entry = tc[`${kind}_token`];
    const content = typeof entry === 'string' ? entry : typeof entry?.content === 'string' ? entry.content : null;
    if (content === null) continue;
    setId(kind, addedTokens.find((token) => token.content === content)?.id);
  }
  for (const kind of kinds) setId(kind, config[`${kind}_token_id`] ?? config.text_config?.[`${kind}_token_id`]);
  return { ids, add, chatTemplate };
}

/** The entries as a Map of plain values: what a GGUF reader gives for them. */
export const metadataMap = (entries) => new Map(entries.map(({ key, value }) => [key, value]));

/** The entries as a GGUF v3 file without tensors (a model file adds general.architecture and its hyperparameters to them). */
export function encodeGguf(entries) {
  const text = new TextEncoder();
  let buffer = new Uint8Array(1 << 20);
  let view = new DataView(buffer.buffer);
  let at = 0;
  const room = (bytes) => {
    if (at + bytes <= buffer.length) return;
    const grown = new Uint8Array(Math.max(buffer.length * 2, at + bytes));
    grown.set(buffer);
    buffer = grown;
    view = new DataView(buffer.buffer);
  };
  const u32 = (x) => (room(4), view.setUint32(at, x, true), (at += 4));
  const u64 = (x) => (room(8), view.setBigUint64(at, BigInt(x), true), (at += 8));
  const string = (s) => {
    room(8 + 3 * s.length);
    const { written } = text.encodeInto(s, buffer.subarray(at + 8));
    view.setBigUint64(at, BigInt(written), true);
    at += 8 + written;
  };
  const scalar = (type, v) => {
    if (type === 'string') return string(v);
    room(4);
    if (type === 'uint32') view.setUint32(at, v, true);
    else if (type === 'int32') view.setInt32(at, v, true);
    else if (type === 'float32') view.setFloat32(at, v, true);
    else if (type === 'bool') return (buffer[at++] = v ? 1 : 0);
    else throw new Error(`no GGUF type ${type}`);
    at += 4;
  };
  buffer.set(text.encode('GGUF'));
  at = 4;
  u32(3);
  u64(0);
  u64(entries.length);
  for (const { key, type, itemType, value } of entries) {
    string(key);
    u32(TYPES[type]);
    if (type !== 'array') {
      scalar(type, value);
      continue;
    }
    u32(TYPES[itemType]);
    u64(value.length);
    for (const item of value) scalar(itemType, item);
  }
  return buffer.slice(0, Math.ceil(at / 32) * 32);
}

// What the embedding agreement tests share: the token lists they embed
// (random ids, or texts of random words as a model's tokenizer encodes
// them), the cosine they bound, and a query and a document as llama.cpp's
// server tokenizes them (tests/js/embeddings-native.test.mjs, the tiny files;
// tests/integration/embeddings-native.test.mjs, the real geometries).
import { rng } from './helpers.mjs';

/** cos(a, b), in double. */
export function cosine(a, b) {
  let dot = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return dot / Math.sqrt(aa * bb);
}

/** `count` token lists of 1 to `longest` random ids below `vocab` (one of each bound), from `seed`. */
export function tokenLists(count, longest, vocab, seed) {
  const r = rng(seed);
  return Array.from({ length: count }, (_, i) => {
    const length = i === 0 ? 1 : i === 1 ? longest : 1 + r.int(longest);
    return Array.from({ length }, () => r.int(vocab));
  });
}

const WORDS = ('the a fox dog river tree slept under by night day quick brown lazy jumps over old field edge bread water salt '
  + 'winter children skated on it cold warm house road city light dark green red blue one two three four five six seven').split(' ');

/**
 * `count` texts of random words from `seed` as `llama`'s tokenizer encodes
 * them (its begin, end and separator tokens added), the first of one word,
 * the second of about `longest` tokens, none longer: ids whose text another
 * build of llama.cpp, which takes text, reads back as the same ids.
 */
export function textLists(llama, count, longest, seed) {
  const r = rng(seed);
  const encode = (words) => llama.tokenizer.encode(words.join(' '), { special: true });
  return Array.from({ length: count }, (_, i) => {
    let words = Array.from({ length: i === 0 ? 1 : i === 1 ? longest : 1 + r.int(longest) }, () => WORDS[r.int(WORDS.length)]);
    while (encode(words).length > longest) words = words.slice(0, Math.floor(words.length * 0.9));
    return encode(words);
  });
}

/**
 * llama.cpp's server's tokens of a query and a document: the file's
 * template filled and tokenized whole (no begin or end token added, special
 * tokens parsed), or without one [begin] query [end] [separator] document
 * [end] as its vocabulary says.
 */
export function rerankTokens(llama, query, document) {
  const { tokenizer } = llama;
  if (llama.rerankTemplate) {
    return tokenizer.encode(llama.rerankTemplate.replaceAll('{query}', query).replaceAll('{document}', document), { special: true, bos: false, eos: false, sep: false });
  }
  const bare = (text) => tokenizer.encode(text, { special: true, bos: false, eos: false, sep: false });
  const end = tokenizer.addEos ? [tokenizer.eosId] : [];
  return [...(tokenizer.addBos ? [tokenizer.bosId] : []), ...bare(query), ...end, ...(tokenizer.addSep ? [tokenizer.sepId] : []), ...bare(document), ...end];
}

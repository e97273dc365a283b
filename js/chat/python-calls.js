// LFM2.5's tool calls: a Python list of calls with keyword arguments,
// [get_weather(city='Paris', days=3)], between <|tool_call_start|> and
// <|tool_call_end|> (control tokens, which a reply's text leaves out). Its
// template prints a string argument in single quotes as it is, a number or
// a bool as Python's str() does; the model writes double quotes too.
//
// kwargsGrammar(where, name, parameters) is the EBNF of one call's keyword
// arguments for a tool's parameters schema (its properties in order, the
// optional ones may be left out); parsePythonCalls(text) reads the calls.
import { shown } from '../runtime/checks.js';
import { grammarRules, keyedProperties, keyedSequence, listOf, numberOf } from './call-grammar.js';
import { NUMBER_BOUNDS } from '../runtime/number-ranges.js';

// What a Python-style argument can be, by schema keyword; anything else is refused.
const ANNOTATIONS = ['title', 'description', 'default', 'examples', '$comment'];
const ARGUMENT_KEYWORDS = ['type', 'enum', 'const', 'anyOf', 'items', 'minItems', 'maxItems', 'minLength', 'maxLength', ...NUMBER_BOUNDS, ...ANNOTATIONS];

/** An EBNF string literal of `text`. */
const literal = (text) => JSON.stringify(text);

/** A value as the template prints it in a call: strings single-quoted, True/False/None, numbers as JSON has them. */
function pythonLiteral(value) {
  if (value === null) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'string') return `'${value}'`;
  if (typeof value === 'number') return String(value);
  return null;
}

/**
 * The EBNF (rule `root`) of a call's keyword arguments for `parameters` (an
 * object schema of properties), or a TypeError naming what a Python-style
 * call cannot carry.
 */
export function kwargsGrammar(where, name, parameters) {
  const { rules, rule, fail } = grammarRules(where, name);
  const value = (schema, path) => {
    if (schema === true || (schema && typeof schema === 'object' && Object.keys(schema).every((k) => ANNOTATIONS.includes(k)))) {
      fail(path, 'must say what the argument is (type, enum or const): a Python-style call has no free value');
    }
    if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) fail(path, `must be a schema object (got ${shown(schema)})`);
    for (const key of Object.keys(schema)) if (!ARGUMENT_KEYWORDS.includes(key)) fail(`${path}/${key}`, 'is not supported in a Python-style call (LFM2\'s)');
    const choices = [];
    const values = schema.const !== undefined ? [schema.const] : schema.enum;
    if (values !== undefined) {
      for (const v of values) {
        const text = pythonLiteral(v);
        if (text === null) fail(`${path}/enum`, `holds ${shown(v)}: a Python-style call takes strings, numbers, booleans and null`);
        choices.push(literal(text));
        if (typeof v === 'string') choices.push(literal(JSON.stringify(v)));
      }
      return rule(choices.join(' | '));
    }
    if (schema.anyOf !== undefined) return rule(schema.anyOf.map((s, i) => value(s, `${path}/anyOf/${i}`)).join(' | '));
    const types = [schema.type ?? []].flat();
    if (types.length === 0) fail(path, 'must say what the argument is (type, enum or const)');
    for (const type of types) {
      if (type === 'string') {
        const bound = schema.minLength !== undefined || schema.maxLength !== undefined ? `{${schema.minLength ?? 0},${schema.maxLength ?? ''}}` : '*';
        choices.push(`"'" [^'\\\\\\0-\\x1f]${bound} "'"`, `"\\"" [^"\\\\\\0-\\x1f]${bound} "\\""`);
      } else if (type === 'integer') {
        choices.push(numberOf(schema, '"-"? ("0" | [1-9] [0-9]*)', path, fail));
      } else if (type === 'number') {
        choices.push(numberOf(schema, '"-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?', path, fail));
      } else if (type === 'boolean') {
        choices.push('"True" | "False"');
      } else if (type === 'null') {
        choices.push('"None"');
      } else if (type === 'array') {
        if (schema.items === undefined) fail(path, 'must say what its items are (items)');
        choices.push(listOf(value(schema.items, `${path}/items`), schema, path, fail, '"," " "?'));
      } else {
        fail(`${path}/type`, `${shown(type)} is not an argument a Python-style call takes (string, integer, number, boolean, null, array)`);
      }
    }
    return rule(choices.map((c) => `(${c})`).join(' | '));
  };
  if (parameters?.type !== 'object') fail('', 'must be { type: \'object\', properties }');
  for (const key of Object.keys(parameters)) {
    if (!['type', 'properties', 'required', 'additionalProperties', ...ANNOTATIONS].includes(key)) fail(`/${key}`, 'is not supported in a Python-style call (LFM2\'s)');
  }
  const { properties, required } = keyedProperties(parameters, fail);
  const args = properties.map(([key, schema]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) fail(`/properties/${key}`, 'is not a Python keyword argument name');
    return { required: required.has(key), rule: rule(`${literal(`${key}=`)} ${value(schema, `/properties/${key}`)}`) };
  });
  return [`root ::= ${keyedSequence(rule, args, '", "')}`, ...rules].join('\n');
}

/**
 * The calls of a Python list of calls at `text`'s start ([f(a='x'), g()]):
 * [{ name, arguments }] and the text after the list, or null when it is not
 * one.
 */
export function parsePythonCalls(text) {
  let i = 0;
  const blank = () => { while (i < text.length && /\s/.test(text[i])) i++; };
  const take = (c) => {
    blank();
    if (text[i] !== c) throw new SyntaxError(c);
    i++;
  };
  const name = () => {
    blank();
    const m = /^[A-Za-z_][A-Za-z0-9_.-]*/.exec(text.slice(i));
    if (!m) throw new SyntaxError('name');
    i += m[0].length;
    return m[0];
  };
  const value = () => {
    blank();
    const c = text[i];
    if (c === "'" || c === '"') {
      let out = '';
      for (i++; i < text.length && text[i] !== c; i++) {
        if (text[i] === '\\' && i + 1 < text.length) out += { n: '\n', t: '\t', r: '\r' }[text[++i]] ?? text[i];
        else out += text[i];
      }
      take(c);
      return out;
    }
    if (c === '[') {
      i++;
      const out = [];
      blank();
      if (text[i] === ']') {
        i++;
        return out;
      }
      for (;;) {
        out.push(value());
        blank();
        if (text[i] === ',') { i++; continue; }
        take(']');
        return out;
      }
    }
    const m = /^(True|False|None|-?\d+(\.\d+)?([eE][+-]?\d+)?)/.exec(text.slice(i));
    if (!m) throw new SyntaxError('value');
    i += m[0].length;
    const named = { True: true, False: false, None: null };
    return m[0] in named ? named[m[0]] : Number(m[0]);
  };
  try {
    take('[');
    const calls = [];
    blank();
    if (text[i] === ']') return null;
    for (;;) {
      const call = { name: name(), arguments: {} };
      take('(');
      blank();
      if (text[i] !== ')') {
        for (;;) {
          const key = name();
          take('=');
          call.arguments[key] = value();
          blank();
          if (text[i] === ',') { i++; continue; }
          break;
        }
      }
      take(')');
      calls.push(call);
      blank();
      if (text[i] === ',') { i++; continue; }
      take(']');
      return { calls, rest: text.slice(i) };
    }
  } catch (error) {
    if (error instanceof SyntaxError) return null;
    throw error;
  }
}

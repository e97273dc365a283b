// Tool calls with XML parameters (Nemotron 3's, Qwen3-Coder's):
//   <tool_call>\n<function=f>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>
// A string parameter's value is written as it is (several lines if need
// be), any other's as JSON: what the templates print (`| string`, `| tojson`).
//
// parametersFormat(where, name, parameters) is the structural tag of one
// call's parameters for a tool's parameters schema (its properties in
// order, the optional ones may be left out); parseXmlCall(text, tools)
// reads one call.
import { keyedProperties, parseJson, toolFail } from './call-grammar.js';

// A string value stops at the `<` of its closing tag: it holds no `<` of its own.
const STRING_CHARACTERS = '[^<]';
// Nothing: what a parameter not required may be instead (the engine compiles no empty constant string).
const NOTHING = { type: 'grammar', grammar: 'root ::= ""' };

/** Whether a schema takes strings only: its type, or the values it lists. */
function takesStringsOnly(schema) {
  if (schema === null || typeof schema !== 'object') return false;
  if (schema.type !== undefined) return [schema.type].flat().every((t) => t === 'string');
  const values = schema.const !== undefined ? [schema.const] : schema.enum;
  return Array.isArray(values) && values.length > 0 && values.every((v) => typeof v === 'string');
}

// The format of a string parameter's text: its listed values, or text of its length without `<`.
function stringValue(fail, path, schema) {
  const values = schema.const !== undefined ? [schema.const] : schema.enum;
  if (values !== undefined) {
    if (values.some((v) => v.includes('<'))) fail(`${path}/enum`, 'holds a string with `<`, which an XML call\'s value cannot');
    return { type: 'grammar', grammar: `root ::= ${values.map((v) => JSON.stringify(v)).join(' | ')}` };
  }
  if (schema.format !== undefined || schema.pattern !== undefined) fail(path, 'has a format or pattern, which an XML call\'s string value does not take');
  const min = schema.minLength ?? 0;
  if (schema.maxLength !== undefined && schema.maxLength < min) fail(`${path}/maxLength`, 'is below minLength');
  return { type: 'grammar', grammar: `root ::= ${STRING_CHARACTERS}{${min},${schema.maxLength ?? ''}}` };
}

/**
 * The structural tag format of a call's parameters for `parameters` (an
 * object schema of properties), or a TypeError naming what an XML call
 * cannot carry.
 */
export function parametersFormat(where, name, parameters) {
  const fail = toolFail(where, name);
  if (parameters?.type !== 'object') fail('', 'must be { type: \'object\', properties }');
  const { properties, required } = keyedProperties(parameters, fail);
  const elements = properties.map(([key, schema]) => {
    const path = `/properties/${key}`;
    if (!/^[^<>\s]+$/.test(key)) fail(path, 'is not a name an XML call\'s <parameter=...> can hold');
    const value = takesStringsOnly(schema) ? stringValue(fail, path, schema) : { type: 'json_schema', json_schema: schema };
    const element = { type: 'sequence', elements: [{ type: 'const_string', value: `<parameter=${key}>\n` }, value, { type: 'const_string', value: '\n</parameter>\n' }] };
    return required.has(key) ? element : { type: 'or', elements: [element, NOTHING] };
  });
  if (elements.length === 0) return NOTHING;
  return elements.length === 1 ? elements[0] : { type: 'sequence', elements };
}

/**
 * The call in a <tool_call> block's text (`<function=f>` its parameters
 * `</function>`): { name, arguments }, each argument a string where the
 * tool's schema for it takes strings only (`tools`: toolRequest's), else
 * its JSON (its text if that is not JSON); null when it is not one.
 */
export function parseXmlCall(text, tools) {
  const fn = /^<function=([^>\n]+)>([\s\S]*)<\/function>$/.exec(text);
  if (!fn) return null;
  const properties = tools?.find((t) => t.function.name === fn[1])?.function.parameters.properties ?? {};
  const args = {};
  const rest = fn[2].replace(/<parameter=([^>\n]+)>\n?([\s\S]*?)\n?<\/parameter>/g, (whole, key, value) => {
    args[key] = argumentOf(value, properties[key]);
    return '';
  });
  return rest.trim() === '' ? { name: fn[1], arguments: args } : null;
}

function argumentOf(text, schema) {
  if (takesStringsOnly(schema)) return text;
  const value = parseJson(text);
  return value === undefined ? text : value;
}

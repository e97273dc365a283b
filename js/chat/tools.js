// Tool calls: an app's tools rendered by the model's own chat template, the
// call's arguments constrained to each tool's parameters schema, and the
// calls read back out of the reply, OpenAI-shaped. How a model calls a tool
// is its template's: the format is recognized from the template's text.
//
//   hermes  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, any
//           number of them, text around them (Qwen2.5, Qwen3, Granite 4.0;
//           SmolLM3, whose template reads its tools from `xml_tools`)
//   hermes-list  <tool_call>\n[{"name": "f", "arguments": {...}}, ...]\n</tool_call>:
//           a list of calls in each (Falcon-H1, Falcon 3)
//   xml     <tool_call>\n<function=f>\n<parameter=city>\nParis\n</parameter>\n
//           </function>\n</tool_call>, any number, text before them
//           (Nemotron 3, Qwen3-Coder: xml-calls.js)
//   llama3  {"name": "f", "parameters": {...}} as the whole reply, one call
//           (Llama 3.1, 3.2 and 3.3)
//   python  <|tool_call_start|>[f(city='Paris')]<|tool_call_end|>, text
//           around them (LFM2.5: python-calls.js)
//   gemma4  <|tool_call>call:f{city:<|"|>Paris<|"|>}<tool_call|>, any number
//           of them, text around them, a thought before them (Gemma 4:
//           gemma4-calls.js); read with its control tokens
//
// A template without tools (Gemma 3's) or with another format is refused
// when tools are given, naming the template's lack.
import { shown } from '../runtime/checks.js';
import { parseJson } from './call-grammar.js';
import { argumentsGrammar, parseGemma4Reply } from './gemma4-calls.js';
import { kwargsGrammar, parsePythonCalls } from './python-calls.js';
import { parametersFormat, parseXmlCall } from './xml-calls.js';

const FORMATS = {
  hermes: {
    begin: (name) => `<tool_call>\n{"name": ${JSON.stringify(name)}, "arguments": `,
    end: '}\n</tool_call>',
    trigger: '<tool_call>',
    parse: (text) => readToolCallBlocks(text, (inner) => {
      const call = parseCall(inner, 'arguments');
      return call && [call];
    }),
  },
  'hermes-list': {
    begin: (name) => `<tool_call>\n[{"name": ${JSON.stringify(name)}, "arguments": `,
    end: '}]\n</tool_call>',
    trigger: '<tool_call>',
    // The model is told to write [{"name", "arguments"}, ...]; the template prints past calls OpenAI-shaped.
    parse: (text) => readToolCallBlocks(text, (inner) => {
      const list = parseJson(inner);
      if (!Array.isArray(list)) return null;
      const calls = list.map((item) => callOf(item?.type === 'function' && item.function ? item.function : item, 'arguments'));
      return calls.length > 0 && calls.every(Boolean) ? calls : null;
    }),
  },
  xml: {
    begin: (name) => `<tool_call>\n<function=${name}>\n`,
    end: '</function>\n</tool_call>',
    trigger: '<tool_call>',
    content: (where, fn) => parametersFormat(where, fn.name, fn.parameters),
    parse: (text, withCalls, tools) => readToolCallBlocks(text, (inner) => {
      const call = parseXmlCall(inner, tools);
      return call && [call];
    }),
  },
  python: {
    begin: (name) => `<|tool_call_start|>[${name}(`,
    end: ')]<|tool_call_end|>',
    trigger: '<|tool_call_start|>',
    content: (where, fn) => ({ type: 'grammar', grammar: kwargsGrammar(where, fn.name, fn.parameters) }),
    // The markers are control tokens, which a reply's text leaves out: a call is a list of calls in it.
    parse: (text) => {
      const calls = [];
      let content = '';
      for (let i = 0; i < text.length;) {
        const parsed = text[i] === '[' ? parsePythonCalls(text.slice(i)) : null;
        if (parsed) {
          calls.push(...parsed.calls);
          i = text.length - parsed.rest.length;
        } else {
          content += text[i++];
        }
      }
      return { content: content.trim(), calls };
    },
  },
  gemma4: {
    begin: (name) => `<|tool_call>call:${name}`,
    end: '<tool_call|>',
    trigger: '<|tool_call>',
    adjacent: true,
    content: (where, fn) => ({ type: 'grammar', grammar: argumentsGrammar(where, fn.name, fn.parameters) }),
    // Its strings are quoted by a control token, its thought marked by two: the reply is read with them.
    special: true,
    parse: parseGemma4Reply,
  },
  llama3: {
    begin: (name) => `{"name": ${JSON.stringify(name)}, "parameters": `,
    end: '}',
    trigger: '{"name": ',
    single: true,
    parse: (text) => {
      const call = parseCall(text.replace(/^\s*<\|python_tag\|>/, '').trim(), 'parameters');
      return call ? { content: '', calls: [call] } : { content: text, calls: [] };
    },
  },
};

/** A call object's name and arguments ({ name, [argumentsKey] }, the arguments an object or its JSON text); null if it is none. */
function callOf(value, argumentsKey) {
  if (value === null || typeof value !== 'object' || typeof value.name !== 'string') return null;
  const args = typeof value[argumentsKey] === 'string' ? parseJson(value[argumentsKey]) : value[argumentsKey] ?? {};
  return args !== null && typeof args === 'object' && !Array.isArray(args) ? { name: value.name, arguments: args } : null;
}

const parseCall = (json, argumentsKey) => callOf(parseJson(json), argumentsKey);

/**
 * The calls of each <tool_call>...</tool_call> in `text` (`read(inner)`: its
 * calls, or null to leave the block in the text), and the text around them.
 */
function readToolCallBlocks(text, read) {
  const calls = [];
  const content = text.replace(/<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g, (whole, inner) => {
    const found = read(inner);
    if (!found) return whole;
    calls.push(...found);
    return '';
  });
  return { content: content.trim(), calls };
}

/** The tool-call format of a chat template's text ('hermes', 'hermes-list', 'xml', 'llama3', 'python', 'gemma4'), and the variable it reads tools from; null: it has none. */
export function toolFormatOf(source) {
  if (source.includes("'<|tool_call>call:'")) return { name: 'gemma4', variable: 'tools' };
  if (source.includes('<|tool_call_start|>')) return { name: 'python', variable: 'tools' };
  if (source.includes('<tool_call>') && source.includes('<function=')) return { name: 'xml', variable: 'tools' };
  // A list in the call: the template's instructions show it, as an escape in a string literal or a line break.
  if (/<tool_call>(\\n|\n)\[/.test(source)) return { name: 'hermes-list', variable: 'tools' };
  if (source.includes('<tool_call>')) return { name: 'hermes', variable: source.includes('xml_tools') ? 'xml_tools' : 'tools' };
  if (source.includes('"parameters": ') && /\btools\b/.test(source)) return { name: 'llama3', variable: 'tools' };
  return null;
}

/**
 * send()'s tools and toolChoice, checked against the template: the tools
 * OpenAI-shaped ({ type: 'function', function: { name, description,
 * parameters } }: what templates read), the template variables that carry
 * them, and the structural tag that constrains the calls (null when
 * toolChoice is 'none'). tools: [{ name, description, parameters }] or the
 * OpenAI shape; toolChoice: 'auto' (default: a call or text), 'required'
 * (at least one call), 'none', or { type: 'function', function: { name } }
 * (or { name }): that tool.
 */
export function toolRequest(where, templateSource, tools, toolChoice = 'auto') {
  if (!Array.isArray(tools) || tools.length === 0) throw new TypeError(`${where}: options.tools must be a non-empty array of { name, description, parameters } (got ${shown(tools)})`);
  const format = toolFormatOf(templateSource);
  if (!format) throw new TypeError(`${where}: options.tools: the model's chat template has no tool calls this package reads (<tool_call> JSON or XML, Llama 3's JSON, LFM2's Python calls or Gemma 4's calls)`);
  const shaped = tools.map((tool, i) => {
    const fn = tool?.type === 'function' ? tool.function : tool;
    if (fn === null || typeof fn !== 'object' || typeof fn.name !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(fn.name)) {
      throw new TypeError(`${where}: options.tools[${i}] must be { name, description, parameters } with a name of letters, digits, _ . - (got ${shown(tool)})`);
    }
    const parameters = fn.parameters ?? { type: 'object', properties: {} };
    if (parameters === null || typeof parameters !== 'object' || Array.isArray(parameters)) throw new TypeError(`${where}: options.tools[${i}].parameters must be a JSON Schema object`);
    return { type: 'function', function: { name: fn.name, ...(fn.description === undefined ? {} : { description: fn.description }), parameters } };
  });
  const names = shaped.map((t) => t.function.name);
  if (new Set(names).size !== names.length) throw new TypeError(`${where}: options.tools name a tool twice`);
  const forced = typeof toolChoice === 'object' && toolChoice !== null ? (toolChoice.function?.name ?? toolChoice.name) : null;
  if (!(['auto', 'required', 'none'].includes(toolChoice) || names.includes(forced))) {
    throw new TypeError(`${where}: options.toolChoice must be 'auto', 'required', 'none' or { type: 'function', function: { name } } naming one of the tools (got ${shown(toolChoice)})`);
  }
  const spec = FORMATS[format.name];
  const chosen = forced ? shaped.filter((t) => t.function.name === forced) : shaped;
  const tags = chosen.map(({ function: fn }) => ({
    type: 'tag', begin: spec.begin(fn.name), content: spec.content?.(where, fn) ?? { type: 'json_schema', json_schema: fn.parameters }, end: spec.end,
  }));
  const mustCall = forced !== null || toolChoice === 'required';
  const triggered = { type: 'triggered_tags', triggers: [spec.trigger], tags, at_least_one: false, stop_after_first: Boolean(spec.single) };
  let calls = triggered;
  // Calls written back to back (Gemma 4's) cannot be the engine's separated tags, which need a
  // separator: a call, then what a reply may say after one (text, more calls).
  if (mustCall) calls = spec.adjacent ? { type: 'sequence', elements: [{ type: 'or', elements: tags }, triggered] } : { type: 'tags_with_separator', tags, separator: '\n', at_least_one: true, stop_after_first: Boolean(spec.single) };
  const structuralTag = toolChoice === 'none' ? null : { type: 'structural_tag', format: calls };
  // SmolLM3's template prints each tool with `tool | string`: Python's repr of a dict, which
  // the engine has no filter for; the tools go to it as that text.
  const given = format.variable === 'xml_tools' ? shaped.map(pythonRepr) : shaped;
  return { format: format.name, variables: { [format.variable]: given }, structuralTag, tools: shaped };
}

/** A JSON value as Python's repr() prints it (str() of a dict, list, str, number, bool or None). */
export function pythonRepr(value) {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : String(value).replace(/e([+-])(\d)$/, 'e$10$2');
  if (typeof value === 'string') return pythonString(value);
  if (Array.isArray(value)) return `[${value.map(pythonRepr).join(', ')}]`;
  return `{${Object.entries(value).map(([k, v]) => `${pythonString(k)}: ${pythonRepr(v)}`).join(', ')}}`;
}

// Python's repr of a str: single quotes unless it has one and no double quote; \\, \n, \r, \t and the quote escaped, other controls as \xNN.
function pythonString(text) {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of text) {
    const code = ch.codePointAt(0);
    if (ch === '\\' || ch === quote) out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out + quote;
}

/** Whether a reply of a template's format is read with its control tokens written in it (Gemma 4's). */
export function readsControlTokens(format) {
  return FORMATS[format]?.special === true;
}

/**
 * A reply of a template's format (null: none) read: { content (the text
 * around the calls), toolCalls (OpenAI-shaped: { id, type: 'function',
 * function: { name, arguments (JSON text) } }; none unless `withCalls`),
 * reasoning (a thinking channel's text, '' when none) }. `idOf(i)` names
 * the i-th call; `tools` (toolRequest's) say which XML arguments are text.
 */
export function parseReply(format, text, withCalls, idOf, tools) {
  const spec = FORMATS[format];
  if (!spec || !(withCalls || spec.special)) return { content: text, toolCalls: [], reasoning: '' };
  const { content, calls, reasoning = '' } = spec.parse(text, withCalls, tools);
  return {
    content,
    reasoning,
    toolCalls: calls.map((call, i) => ({ id: idOf(i), type: 'function', function: { name: call.name, arguments: JSON.stringify(call.arguments) } })),
  };
}

/**
 * Messages as templates read them: an assistant turn's tool_calls with
 * their arguments as objects (OpenAI's are JSON text; templates print them
 * with tojson), and no tool_calls key where there are none (templates test
 * for the key).
 */
export function templateMessages(messages) {
  return messages.map((m) => {
    const { tool_calls: calls, ...rest } = m;
    if (!calls || calls.length === 0) return rest;
    return {
      ...rest,
      tool_calls: calls.map((c) => ({
        ...c, function: { ...c.function, arguments: typeof c.function.arguments === 'string' ? JSON.parse(c.function.arguments) : c.function.arguments },
      })),
    };
  });
}

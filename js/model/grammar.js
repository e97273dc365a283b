// Structured output: a reply constrained, token by token, to a JSON Schema,
// to any JSON, to a grammar (EBNF, the GBNF of llama.cpp's grammars among
// it), to a regular expression or to a structural tag (text in which tagged
// parts follow schemas: how tool calls are constrained). Each step's logits
// lose every token the constraint does not allow before the sampler sees
// them, so greedy and sampled decoding both obey it; once the constraint is
// complete only an end-of-generation token is allowed, and the reply ends.
//
// The engine is XGrammar (@mlc-ai/web-xgrammar, what WebLLM constrains
// with): its compiler turns a constraint into a pushdown automaton with a
// token mask precomputed per state for the model's vocabulary, and its
// matcher gives each step's mask in a fraction of a millisecond (npm run
// bench -- structured). It is imported the first
// time a reply is constrained, so an app that never constrains loads none
// of it. Its JSON Schema converter ignores some keywords and aborts on
// others; so a schema is checked here first, and a keyword the converter
// does not enforce is refused, naming it, when the request is made.
import { shown } from '../runtime/options.js';
import { TokenType } from '../tokenizers/tokenizer.js';
import { NUMBER_BOUNDS, checkNumberBounds, hasNumberBounds, numberRangeGrammar } from '../runtime/number-ranges.js';

/** generate()'s and respond()'s options that constrain the reply (at most one of them). */
export const CONSTRAINT_OPTIONS = ['responseFormat', 'grammar', 'regex', 'structuralTag'];

// Keywords that only annotate: taken, and nothing to enforce.
const ANNOTATIONS = ['title', 'description', '$schema', '$id', '$comment', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly'];
// Keywords the converter enforces, by the instance type they act on (any: every type).
const ENFORCED = {
  any: ['type', 'enum', 'const', 'anyOf', '$ref', '$defs', 'definitions'],
  object: ['properties', 'required', 'additionalProperties'],
  array: ['items', 'prefixItems', 'minItems', 'maxItems'],
  string: ['minLength', 'maxLength', 'pattern', 'format'],
  number: NUMBER_BOUNDS, // an integer's too (runtime/number-ranges.js makes their grammar)
};
const KNOWN = new Set([...ANNOTATIONS, ...Object.values(ENFORCED).flat()]);
// What the refused keywords would need, said when refusing them.
const REFUSED = {
  allOf: 'the converter does not enforce every part of it',
  oneOf: 'use anyOf (the converter reads oneOf as anyOf and does not check that only one matches)',
  not: 'the converter does not enforce it',
  uniqueItems: 'the converter does not enforce it',
  multipleOf: 'the converter does not enforce it on every number',
  if: 'the converter does not enforce conditionals', then: 'the converter does not enforce conditionals', else: 'the converter does not enforce conditionals',
  dependencies: 'the converter does not enforce it', dependentRequired: 'the converter does not enforce it', dependentSchemas: 'the converter does not enforce it',
  patternProperties: 'the converter does not enforce it', propertyNames: 'the converter does not enforce it',
  minProperties: 'the converter does not enforce it', maxProperties: 'the converter does not enforce it',
  contains: 'the converter does not enforce it', minContains: 'the converter does not enforce it', maxContains: 'the converter does not enforce it',
  additionalItems: 'use prefixItems and items', unevaluatedProperties: 'use additionalProperties', unevaluatedItems: 'use items',
};
// The string formats whose grammar held up (ajv took every string the tests
// drew through it, tests/js/structured.test.mjs); the converter's date, time and
// date-time let a 31st of February and a 60th minute through, its ipv4
// leading zeros (000.1.2.3), its email and hostname ignore maxLength: those
// are refused.
const FORMATS = ['uuid', 'ipv6'];
const TYPES = ['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'];

/**
 * Checks a JSON Schema for what the engine enforces: throws a TypeError
 * naming the first keyword (by its JSON pointer) it would not, or a
 * malformed one. `where` and `name` say whose parameter it is.
 */
export function checkSchema(where, name, schema) {
  const fail = (path, why) => { throw new TypeError(`${where}: ${name}${path || ''} ${why}`); };
  const visit = (node, path) => {
    if (typeof node === 'boolean') return;
    if (node === null || typeof node !== 'object' || Array.isArray(node)) fail(path, `must be a schema (an object or a boolean), not ${shown(node)}`);
    for (const key of Object.keys(node)) {
      if (key in REFUSED) fail(`${path}/${key}`, `is not supported: ${REFUSED[key]}`);
      if (!KNOWN.has(key)) fail(`${path}/${key}`, 'is not a keyword the engine enforces');
    }
    const { type } = node;
    if (type !== undefined && ![type].flat().every((t) => TYPES.includes(t))) fail(`${path}/type`, `must be one of ${TYPES.join(', ')} or an array of them (got ${shown(type)})`);
    // The converter reads a type's keywords only beside a type that names it (JSON Schema
    // would apply them to instances of that type and let others be); anyOf, only alone.
    const types = [type ?? []].flat();
    for (const [kind, keys] of Object.entries(ENFORCED)) {
      if (kind === 'any') continue;
      const key = keys.find((k) => node[k] !== undefined);
      const named = types.includes(kind) || (kind === 'number' && types.includes('integer'));
      if (key !== undefined && !named) fail(`${path}/${key}`, `needs type: '${kind}' beside it (the engine does not apply it otherwise)`);
    }
    if (node.anyOf !== undefined) {
      const beside = Object.keys(node).find((k) => k !== 'anyOf' && !ANNOTATIONS.includes(k) && k !== '$defs' && k !== 'definitions');
      if (beside !== undefined) fail(`${path}/${beside}`, 'beside anyOf is not supported: the engine takes anyOf alone (put it in each alternative)');
    }
    if (node.$ref !== undefined && (typeof node.$ref !== 'string' || !(node.$ref === '#' || node.$ref.startsWith('#/')))) {
      fail(`${path}/$ref`, `must point into the schema itself ('#' or '#/...'; got ${shown(node.$ref)})`);
    }
    if (node.$ref !== undefined && resolvePointer(schema, node.$ref) === undefined) fail(`${path}/$ref`, `points at nothing (${node.$ref})`);
    if (node.format !== undefined && !FORMATS.includes(node.format)) fail(`${path}/format`, `${shown(node.format)} is not a format the engine enforces (${FORMATS.join(', ')})`);
    if (node.pattern !== undefined) {
      checkPattern(fail, `${path}/pattern`, node.pattern);
      // JSON Schema's patterns match anywhere in a string; the engine's match all of it.
      const anchored = node.pattern.startsWith('^') && node.pattern.endsWith('$') && !node.pattern.endsWith('\\$');
      if (!anchored) fail(`${path}/pattern`, `must be anchored (^...$): the engine matches the whole string (got ${shown(node.pattern)})`);
    }
    if (node.properties !== undefined && node.additionalProperties !== undefined && node.additionalProperties !== false) {
      fail(`${path}/additionalProperties`, 'must be false beside properties: the engine lets an additional property take a declared one\'s name');
    }
    for (const key of ['minLength', 'maxLength', 'minItems', 'maxItems']) {
      if (node[key] !== undefined && !(Number.isInteger(node[key]) && node[key] >= 0)) fail(`${path}/${key}`, `must be an integer >= 0 (got ${shown(node[key])})`);
    }
    if (hasNumberBounds(node)) checkNumberBounds(fail, path, node);
    if (node.required !== undefined && !(Array.isArray(node.required) && node.required.every((r) => typeof r === 'string'))) {
      fail(`${path}/required`, 'must be an array of property names');
    }
    if (node.enum !== undefined && !(Array.isArray(node.enum) && node.enum.length > 0)) fail(`${path}/enum`, 'must be a non-empty array');
    for (const key of ['anyOf', 'prefixItems']) {
      if (node[key] === undefined) continue;
      if (!Array.isArray(node[key]) || node[key].length === 0) fail(`${path}/${key}`, 'must be a non-empty array of schemas');
      node[key].forEach((s, i) => visit(s, `${path}/${key}/${i}`));
    }
    for (const key of ['properties', '$defs', 'definitions']) {
      if (node[key] === undefined) continue;
      if (node[key] === null || typeof node[key] !== 'object' || Array.isArray(node[key])) fail(`${path}/${key}`, 'must be an object of schemas');
      for (const [k, s] of Object.entries(node[key])) visit(s, `${path}/${key}/${escapePointer(k)}`);
    }
    if (Array.isArray(node.items)) fail(`${path}/items`, 'must be one schema (a tuple is prefixItems)');
    for (const key of ['items', 'additionalProperties']) if (node[key] !== undefined) visit(node[key], `${path}/${key}`);
  };
  visit(schema, '');
  return schema;
}

function checkPattern(fail, path, pattern) {
  if (typeof pattern !== 'string') fail(path, `must be a string (got ${shown(pattern)})`);
  try {
    new RegExp(pattern, 'u');
  } catch (error) {
    fail(path, `is not a regular expression: ${error.message}`);
  }
  // The engine's regexes have no lookaround or backreferences.
  if (/\(\?[=!<]|\\[1-9]|\\k</.test(pattern)) fail(path, 'uses a lookaround or a backreference, which the engine does not have');
}

const escapePointer = (key) => key.replace(/~/g, '~0').replace(/\//g, '~1');

function resolvePointer(root, pointer) {
  let node = root;
  for (const part of pointer.slice(2).split('/').filter((p) => p !== '' || pointer === '#/')) {
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined;
    node = node[key];
  }
  return node;
}

/**
 * The constraint generate()'s or respond()'s options ask for, checked (at
 * most one of CONSTRAINT_OPTIONS): null, or { key, compile(compiler,
 * xgrammar) } where key names it for the compiled-grammar cache. Every JSON Schema in
 * it is checked (checkSchema).
 *   responseFormat: { type: 'json_object' } any JSON object;
 *     { type: 'json_schema', schema, strict } or OpenAI's { type:
 *     'json_schema', json_schema: { name, schema, strict } } -- always
 *     strict, as OpenAI's strict mode: no properties beyond the schema's;
 *     { type: 'text' }: none.
 *   grammar: EBNF text (XGrammar's dialect, which reads llama.cpp's GBNF), its rule `root` first.
 *   regex: a regular expression the whole reply matches (anchored or not).
 *   structuralTag: XGrammar's structural tag (an object; see its docs).
 */
export function constraintOf(where, options) {
  const given = CONSTRAINT_OPTIONS.filter((key) => options[key] !== undefined);
  if (given.length > 1) throw new TypeError(`${where}: options.${given[0]} and options.${given[1]} both constrain the reply: give one`);
  if (given.length === 0) return null;
  const [key] = given;
  const value = options[key];
  if (key === 'grammar') {
    if (typeof value !== 'string' || value.trim() === '') throw new TypeError(`${where}: options.grammar must be a grammar's text (EBNF or GBNF; got ${shown(value)})`);
    return { key: `grammar:${value}`, compile: (c) => c.compileGrammar(value, 'root') };
  }
  if (key === 'regex') {
    if (typeof value !== 'string') throw new TypeError(`${where}: options.regex must be a string (got ${shown(value)})`);
    checkPattern((path, why) => { throw new TypeError(`${where}: options${path} ${why}`); }, '.regex', value);
    const tag = { type: 'structural_tag', format: { type: 'regex', pattern: value } };
    return { key: `regex:${value}`, compile: (c) => c.compileStructuralTag(tag) };
  }
  if (key === 'structuralTag') {
    if (value === null || typeof value !== 'object') throw new TypeError(`${where}: options.structuralTag must be a structural tag object (got ${shown(value)})`);
    const { text, value: tag } = jsonCopy(where, 'options.structuralTag', value);
    const schemas = [];
    findSchemas(tag, '', schemas);
    for (const { path, schema } of schemas) checkSchema(where, `options.structuralTag${path}.json_schema`, schema);
    return {
      key: `tag:${text}`, literals: tagLiterals(tag),
      compile: async (c, xgrammar) => c.compileStructuralTag(JSON.stringify(await schemasAsGrammars(tag, xgrammar))),
    };
  }
  return responseFormatOf(where, value);
}

function responseFormatOf(where, format) {
  const name = 'options.responseFormat';
  if (format === null || typeof format !== 'object') throw new TypeError(`${where}: ${name} must be { type: 'json_schema' | 'json_object' | 'text', ... } (got ${shown(format)})`);
  if (format.type === 'text') return null;
  // Any JSON object (the engine's own JSON grammar allows an array too).
  if (format.type === 'json_object') return { key: 'json', compile: async (c, xgrammar) => c.compileGrammar(await schemaGrammar(xgrammar, { type: 'object' }), 'root') };
  if (format.type !== 'json_schema') throw new TypeError(`${where}: ${name}.type must be 'json_schema', 'json_object' or 'text' (got ${shown(format.type)})`);
  // OpenAI's shape nests the schema in json_schema; the short one has it at the top.
  const inner = format.json_schema ?? format;
  const named = format.json_schema ? `${name}.json_schema` : name;
  const { strict = true } = inner;
  if (inner.schema === undefined) throw new TypeError(`${where}: ${named}.schema is missing: the JSON Schema the reply is to match`);
  if (strict !== true) throw new TypeError(`${where}: ${named}.strict must be true (or left out): a reply has no properties beyond the schema's (got ${shown(strict)})`);
  const { text, value: schema } = jsonCopy(where, `${named}.schema`, inner.schema);
  checkSchema(where, `${named}.schema`, schema);
  return { key: `schema:${text}`, compile: async (c, xgrammar) => c.compileGrammar(await schemaGrammar(xgrammar, schema), 'root') };
}

// A value as JSON text and a copy read back from it: what is checked is what
// is compiled, whatever the caller does to its object meanwhile.
function jsonCopy(where, name, value) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new TypeError(`${where}: ${name} must be JSON (${error.message})`);
  }
  return { text, value: JSON.parse(text) };
}

// The longest run of whitespace a JSON reply may have between two of its tokens.
const MAX_BLANKS = 4;

/**
 * A checked schema with JSON Schema's defaults written out where the
 * engine's strict mode reads their absence otherwise: an array without
 * items takes any items, an object without properties any properties
 * (strict, the engine would allow none). A bounded number becomes a
 * constant string standing for its range, whose grammar (numberRangeGrammar)
 * goes into `ranges` and replaces the constant's in the EBNF (schemaGrammar).
 */
function withDefaults(node, ranges) {
  if (node === null || typeof node !== 'object') return node;
  if (Array.isArray(node)) return node.map((child) => withDefaults(child, ranges));
  if (hasNumberBounds(node)) {
    ranges.push(numberRangeGrammar(node));
    return { const: rangeMarker(ranges.length - 1) };
  }
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    out[key] = ['properties', '$defs', 'definitions'].includes(key)
      ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withDefaults(v, ranges)]))
      : ['enum', 'const', 'required', 'examples', 'default'].includes(key) ? value : withDefaults(value, ranges);
  }
  const types = [node.type ?? []].flat();
  if (types.includes('array') && out.items === undefined && out.prefixItems === undefined) out.items = true;
  if (types.includes('object') && out.properties === undefined && out.additionalProperties === undefined) out.additionalProperties = true;
  return out;
}

// The constant string that stands for bounded number i until the EBNF is made.
const rangeMarker = (i) => `kvc-number-range-${i}`;

/**
 * The EBNF of a checked schema: any whitespace between tokens, at most
 * MAX_BLANKS in a row (a reply cannot stall in blanks), strict. The
 * converter's strings of bounded length let control characters in raw,
 * which JSON forbids (its unbounded ones keep them out): their character
 * class is mended to the unbounded one's. A bounded number's rule is
 * runtime/number-ranges.js's.
 */
async function schemaGrammar(xgrammar, schema) {
  const ranges = [];
  const prepared = withDefaults(schema, ranges);
  let ebnf = await xgrammar.Testings._jsonSchemaToEBNF(JSON.stringify(prepared), true, undefined, undefined, true, MAX_BLANKS);
  ebnf = ebnf.replaceAll('[^"\\\\\\r\\n]', '[^"\\\\\\0-\\x1f]');
  ranges.forEach((grammar, i) => {
    ebnf = `${ebnf.replaceAll(`"\\"${rangeMarker(i)}\\""`, `kvc_number_range_${i}`)}\nkvc_number_range_${i} ::= ${grammar}`;
  });
  return ebnf;
}

// The text a structural tag spells out itself: its tags' begins and ends, triggers, separators, constant strings,
// and the string literals of its grammars (Gemma 4's <|"|> quotes a call's strings).
function tagLiterals(node, found = []) {
  if (node === null || typeof node !== 'object') return found;
  for (const [key, child] of Object.entries(node)) {
    if (typeof child === 'string' && ['begin', 'end', 'separator', 'value'].includes(key)) found.push(child);
    else if (typeof child === 'string' && key === 'grammar' && node.type === 'grammar') found.push(...grammarLiterals(child));
    else if (key === 'triggers' && Array.isArray(child)) found.push(...child.filter((t) => typeof t === 'string'));
    else tagLiterals(child, found);
  }
  return found;
}

// The string literals of EBNF text, read as JSON reads its strings (one with an escape JSON lacks is left out).
function grammarLiterals(ebnf) {
  const found = [];
  for (const [quoted] of ebnf.matchAll(/"(?:[^"\\]|\\.)*"/g)) {
    try {
      found.push(JSON.parse(quoted));
    } catch {
      // an EBNF escape (\xNN) JSON does not read: no control token's text
    }
  }
  return found;
}

// The json_schema formats in a structural tag, with where they are.
function findSchemas(node, path, found) {
  if (node === null || typeof node !== 'object') return;
  if (!Array.isArray(node) && node.type === 'json_schema' && 'json_schema' in node) found.push({ path, schema: node.json_schema });
  for (const [key, child] of Object.entries(node)) findSchemas(child, Array.isArray(node) ? `${path}[${key}]` : `${path}.${key}`, found);
}

// A structural tag with each json_schema format as the grammar of its
// schema, converted as a response format's is: the tag's own conversion
// lets whitespace run on without end, which a reply can stall in.
async function schemasAsGrammars(node, xgrammar) {
  if (node === null || typeof node !== 'object') return node;
  if (Array.isArray(node)) return Promise.all(node.map((child) => schemasAsGrammars(child, xgrammar)));
  if (node.type === 'json_schema' && 'json_schema' in node) {
    return { type: 'grammar', grammar: await schemaGrammar(xgrammar, node.json_schema) };
  }
  const out = {};
  for (const [key, child] of Object.entries(node)) out[key] = await schemasAsGrammars(child, xgrammar);
  return out;
}

// ---------------------------------------------------------------------------
// The engine, loaded on first use.

let engine = null;
/** The engine's package name, which Node, Deno, Bun and a page's import map resolve. */
export const GRAMMAR_ENGINE = ['@mlc-ai', 'web-xgrammar'].join('/');
let engineSource = GRAMMAR_ENGINE;

/**
 * Where constrained replies import the engine from: its package name by
 * default, which a browser resolves only through an import map or a
 * bundler; a URL of its lib/index.js otherwise (a worker, which sees no
 * import map, is sent the page's). Before the first constrained reply.
 */
export function setGrammarEngine(source) {
  const where = 'setGrammarEngine';
  if (!(source instanceof URL) && !(typeof source === 'string' && source.length > 0)) throw new TypeError(`${where}: source must be a URL or a non-empty string (got ${shown(source)})`);
  if (engine) throw new Error(`${where}: the engine is already loaded (from ${engineSource})`);
  engineSource = String(source);
}

/**
 * XGrammar's module. Its file is a UMD script published as an ES module:
 * imported, it sets globalThis.xgrammar, and where there is neither a
 * document nor a location (Node, Deno, Bun) it reads two CommonJS globals
 * to find itself, when its wasm is first instantiated. Those are lent to
 * it until then (its wasm is inline, so the path is never read) and taken
 * back.
 */
function loadEngine() {
  engine ??= (async () => {
    const lent = typeof document === 'undefined' && typeof location === 'undefined' && typeof globalThis.require === 'undefined';
    if (lent) {
      globalThis.require = () => ({ pathToFileURL: (path) => new URL(`file://${path}`) });
      globalThis.__filename = '/web-xgrammar.js';
    }
    // The engine binds console.log and console.error when its wasm is
    // instantiated, and writes its errors and warnings there: it is given
    // these, which hand what it writes to the call that made it (engineCall).
    const { log, error } = console;
    console.log = (...args) => engineWrote(log, args);
    console.error = (...args) => engineWrote(error, args);
    try {
      // A specifier bundlers leave alone: the engine's file names Node's url module, which
      // browser bundles cannot resolve; a page resolves it by its import map, or names its URL.
      const module = await import(/* webpackIgnore: true */ /* @vite-ignore */ engineSource);
      const xgrammar = module.GrammarCompiler ? module : globalThis.xgrammar;
      if (!xgrammar?.GrammarCompiler) throw new Error('@mlc-ai/web-xgrammar did not load');
      (await xgrammar.Grammar.builtinJSONGrammar()).dispose(); // its wasm, instantiated
      return xgrammar;
    } finally {
      console.log = log;
      console.error = error;
      if (lent) {
        delete globalThis.require;
        delete globalThis.__filename;
      }
      delete globalThis.xgrammar;
    }
  })();
  engine.catch(() => { engine = null; });
  return engine;
}

// What the engine wrote during the current engineCall (null: outside one, where it goes to the console).
let written = null;
function engineWrote(print, args) {
  if (written) written.push(args.join(' '));
  else print(...args);
}

/**
 * Runs an engine call, keeping what the engine writes from the console: an
 * error it throws (it aborts with "Aborted()") is a TypeError of `where`
 * saying `what` with the engine's own message.
 */
async function engineCall(where, what, call) {
  written = [];
  try {
    return await call();
  } catch (error) {
    const said = written.map((line) => line.replace(/^\[(FATAL|ERROR)\] \S+:\d+: /, '')).filter((line) => !/^Aborted\(/.test(line) && !/^\[WARNING\]/.test(line));
    throw new TypeError(`${where}: ${what}: ${said.length ? said.join('; ') : String(error?.message ?? error)}`, { cause: error });
  } finally {
    written = null;
  }
}

// Per tokenizer, per set of control tokens kept: its compiler, and the grammars it compiled, newest last.
const compilers = new WeakMap();
const GRAMMARS_KEPT = 32;

/**
 * The XGrammar compiler for a model's vocabulary (made once per tokenizer
 * and `kept`): control tokens are given as empty (so no constraint allows
 * them as text) but those in `kept` (ids, which a constraint spells out),
 * and the end-of-generation tokens are its stop tokens.
 */
async function compilerFor(where, tokenizer, vocabSize, kept) {
  let perTokenizer = compilers.get(tokenizer);
  if (!perTokenizer) compilers.set(tokenizer, (perTokenizer = new Map()));
  const key = kept.join(',');
  let entry = perTokenizer.get(key);
  if (!entry) {
    entry = (async () => {
      let xgrammar;
      try {
        xgrammar = await loadEngine();
      } catch (error) {
        throw new Error(`${where}: the structured-output engine (${engineSource}) did not load: ${error?.message ?? error}`, { cause: error });
      }
      const keep = new Set(kept);
      const tokens = tokenizer.tokens.map((token, id) => (tokenizer.tokenTypes[id] === TokenType.CONTROL && !keep.has(id) ? '' : token));
      const vocabType = tokenizer.model === 'gpt2' ? 'byte_level' : 'byte_fallback';
      const compiler = await engineCall(where, 'the model\'s vocabulary could not be prepared for constraints', async () => {
        const info = await xgrammar.TokenizerInfo.createTokenizerInfo(tokens, vocabType, false, vocabSize, [...tokenizer.eogIds]);
        return xgrammar.GrammarCompiler.createGrammarCompiler(info, false);
      });
      return { xgrammar, compiler, grammars: new Map() };
    })();
    perTokenizer.set(key, entry);
    entry.catch(() => perTokenizer.delete(key));
  }
  return entry;
}

// Per tokenizer: its control tokens, [id, text].
const controlTokens = new WeakMap();

/** The ids of the control tokens (not ending a generation) whose text `literals` spell out: LFM2's <|tool_call_start|>. */
function controlTokensIn(tokenizer, literals) {
  if (literals.length === 0) return [];
  let controls = controlTokens.get(tokenizer);
  if (!controls) {
    controls = [];
    tokenizer.tokens.forEach((text, id) => {
      if (tokenizer.tokenTypes[id] === TokenType.CONTROL && text !== '' && !tokenizer.eogIds.has(id)) controls.push([id, text]);
    });
    controlTokens.set(tokenizer, controls);
  }
  return controls.filter(([, text]) => literals.some((l) => l.includes(text))).map(([id]) => id).sort((a, b) => a - b);
}

/** The compiled grammar of `constraint` (constraintOf's) for a model's vocabulary: compiled once, kept for the next 31 others. */
export async function compiledGrammar(where, tokenizer, vocabSize, constraint) {
  const kept = controlTokensIn(tokenizer, constraint.literals ?? []);
  const { xgrammar, compiler, grammars } = await compilerFor(where, tokenizer, vocabSize, kept);
  let compiled = grammars.get(constraint.key);
  if (compiled) {
    grammars.delete(constraint.key);
  } else {
    compiled = await engineCall(where, 'the constraint does not compile', () => constraint.compile(compiler, xgrammar));
    if (grammars.size >= GRAMMARS_KEPT) {
      const [oldest, grammar] = grammars.entries().next().value;
      grammars.delete(oldest);
      grammar.dispose();
    }
  }
  grammars.set(constraint.key, compiled);
  return { xgrammar, compiled };
}

/**
 * A sampler (sampling.js's) whose choices the constraint bounds: before
 * each step, `await ready()` takes the matcher's mask of allowed tokens;
 * next(logits, history) sets the others to -Infinity and samples (logits
 * are the forward pass's own array, changed in place), then the matcher
 * takes the token. One next() per ready(): no drafts are verified under a
 * constraint. free() lets the matcher go. options.after: text the reply
 * continues, which the matcher takes first (a RangeError if the constraint
 * allows no reply beginning so).
 */
export async function constrainedSampler(where, llama, constraint, sampler, { after = '' } = {}) {
  const { xgrammar, compiled } = await compiledGrammar(where, llama.tokenizer, llama.config.vocabSize, constraint);
  const matcher = await engineCall(where, 'the constraint\'s matcher could not be made', () => xgrammar.GrammarMatcher.createGrammarMatcher(compiled));
  // Text the reply continues (written before it in the prompt): the constraint reads it first.
  if (after !== '' && !matcher._acceptString(after)) {
    matcher.dispose();
    throw new RangeError(`${where}: options.constraintPrefix ${shown(after)} does not begin a reply the constraint allows`);
  }
  let mask = null;
  return {
    options: sampler.options,
    constrained: true,
    async ready() {
      // Once its end-of-generation token is taken the reply has ended: there is no next step to mask.
      if (!matcher.isTerminated()) mask = await matcher.getNextTokenBitmask();
    },
    next(logits, history) {
      applyMask(logits, mask);
      const token = sampler.next(logits, history);
      mask = null;
      if (!matcher.acceptToken(token)) throw new Error(`${where}: the constraint's matcher refused token ${token}, which its mask allowed`);
      return token;
    },
    /** The step's mask (after ready()): a bit per token, 32 a word. */
    get mask() {
      return mask;
    },
    /** Whether the step's mask (after ready()) allows `token`. */
    allows(token) {
      return mask !== null && (mask[token >>> 5] & (1 << (token & 31))) !== 0;
    },
    /** Whether the constraint is complete (its end-of-generation token taken). */
    get complete() {
      return matcher.isTerminated();
    },
    free() {
      matcher.dispose();
    },
  };
}

/** Sets each logit whose bit is clear in `mask` (32 tokens a word, the lowest id in the lowest bit) to -Infinity. */
export function applyMask(logits, mask) {
  const n = logits.length;
  for (let w = 0; w < mask.length; w++) {
    let bits = ~mask[w];
    if (bits === 0) continue;
    const base = w << 5;
    while (bits !== 0) {
      const bit = 31 - Math.clz32(bits & -bits);
      if (base + bit < n) logits[base + bit] = -Infinity;
      bits &= bits - 1;
    }
  }
}

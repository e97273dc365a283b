// What the call formats whose arguments are not JSON (LFM2's Python calls,
// Gemma 4's calls, XML parameters) build theirs from: rules made one by
// one, lists with their bounds, keyed arguments where those not required
// may be left out, a tool's refusals, and a value's JSON where it is JSON.
import { shown } from '../runtime/checks.js';
import { checkNumberBounds, hasNumberBounds } from '../runtime/number-ranges.js';

/**
 * The EBNF of an argument of type 'integer' or 'number', written as JSON
 * writes it (`plain`, EBNF), within the bounds its schema has, if any
 * (runtime/number-ranges.js).
 */
export function numberOf(schema, plain, path, fail) {
  return hasNumberBounds(schema) ? checkNumberBounds(fail, path, schema) : plain;
}

/**
 * A grammar's rules as they are made: { rules (EBNF lines), rule(body)
 * (makes one, gives its name), fail(path, why) (a TypeError of `where`
 * naming tool `name`'s parameter at `path`) }.
 */
export function grammarRules(where, name) {
  const rules = [];
  let count = 0;
  return {
    rules,
    rule: (body) => {
      const id = `v${count++}`;
      rules.push(`${id} ::= ${body}`);
      return id;
    },
    fail: toolFail(where, name),
  };
}

/** fail(path, why): throws the TypeError of `where` naming tool `name`'s parameter at `path`. */
export function toolFail(where, name) {
  return (path, why) => { throw new TypeError(`${where}: options.tools: ${name}'s parameters${path} ${why}`); };
}

/** An object schema's properties as [key, schema] entries in order and its required keys, each of which must be one of them. */
export function keyedProperties(parameters, fail) {
  const properties = Object.entries(parameters.properties ?? {});
  const required = new Set(parameters.required ?? []);
  for (const r of required) if (!properties.some(([k]) => k === r)) fail('/required', `names ${shown(r)}, which is not a property`);
  return { properties, required };
}

/** The JSON value of `text`, or undefined when it is not JSON. */
export function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The EBNF of a list of `item` in [...] (`separator` between items, EBNF), bounded as an array schema's minItems and maxItems say. */
export function listOf(item, schema, path, fail, separator) {
  const min = schema.minItems ?? 0;
  const max = schema.maxItems;
  if (max !== undefined && max < min) fail(`${path}/maxItems`, 'is below minItems');
  if (max === 0) return '"[]"';
  const rest = `(${separator} ${item}){${Math.max(0, min - 1)},${max === undefined ? '' : max - 1}}`;
  return min > 0 ? `"[" ${item} ${rest} "]"` : `"[" (${item} ${rest})? "]"`;
}

/**
 * The EBNF of keyed arguments in their order, `separator` (EBNF) between
 * them, where those not required may be left out: `args` [{ rule,
 * required }], `rule(body)` making a rule and giving its name. An
 * expression: '""' when nothing need be there and nothing can.
 */
export function keyedSequence(rule, args, separator) {
  // tails[i]: the arguments from i on, each after the separator, each one not required free to be left out.
  const tails = [];
  for (let i = args.length - 1; i >= 1; i--) {
    const own = args[i].required ? `${separator} ${args[i].rule}` : `(${separator} ${args[i].rule})?`;
    tails[i] = rule(`${own}${i + 1 < args.length ? ` ${tails[i + 1]}` : ''}`);
  }
  // The first argument given is any up to the first required one; or none, when none is required.
  const starts = [];
  for (let i = 0; i < args.length; i++) {
    starts.push(`${args[i].rule}${i + 1 < args.length ? ` ${tails[i + 1]}` : ''}`);
    if (args[i].required) break;
  }
  if (!args.some((a) => a.required)) starts.push('""');
  return starts.length ? starts.join(' | ') : '""';
}

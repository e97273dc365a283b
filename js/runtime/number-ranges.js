// JSON Schema's number bounds (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, as numbers or as draft 4's booleans) as grammar: the EBNF (XGrammar's dialect) of exactly
// the JSON numbers a bounded schema takes, built here because the engine's
// own conversion lets numbers outside a range through.
//
// An integer's grammar takes every integer of its range, written as JSON
// writes integers (no leading zeros, no "-0"). A number's takes the decimals
// of its range with at most FRACTION_DIGITS digits after the point and an
// integer part below 10^INTEGER_DIGITS, no exponent: at most 15 significant
// digits, so distinct decimals read back as distinct doubles, and a reply
// meets an exclusive bound as the double a JSON parser reads too. The
// bounds are taken as the decimals JavaScript writes for them (the shortest
// that read back as the same double): a decimal at or past one of those is
// read as a double at or past the bound's.
//
// The grammar is deterministic -- at each character, the alternatives that
// go on begin with disjoint character classes (a trie of the strings'
// classes) -- which the engine's matcher keeps exact; alternatives sharing
// a prefix, as a plain union of the ranges' pieces would have them, it
// does not (it let "1.2651744" through "0" "." [5-9] [0-9] | [1-9] "."
// [0-9] | [1-9] "." [0-9] [0-9]).
//
//   numberRangeGrammar({ type: 'integer', minimum: 2, exclusiveMaximum: 10 })  // '[2-9]'
//   numberRangeGrammar({ type: 'number', minimum: -1.5, maximum: 2 })

import { shown } from './options.js';

/** Digits a bounded number may have after its decimal point. */
export const FRACTION_DIGITS = 6;
/** A bounded number's integer part is below 10 to this power. */
export const INTEGER_DIGITS = 9;

/** The bound keywords. */
export const NUMBER_BOUNDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'];

/** Whether a schema has any of NUMBER_BOUNDS. */
export const hasNumberBounds = (schema) => NUMBER_BOUNDS.some((k) => schema[k] !== undefined);

const SCALE = 10n ** BigInt(FRACTION_DIGITS);

/**
 * A finite number as an exact decimal scaled by 10^digits: { units, exact },
 * units the floor of value * 10^digits as a BigInt, exact whether nothing
 * was cut.
 */
function scaled(value, digits) {
  const [mantissa, exponent = '0'] = String(value).toLowerCase().split('e');
  const negative = mantissa.startsWith('-');
  const [whole, fraction = ''] = mantissa.replace('-', '').split('.');
  const allDigits = BigInt(whole + fraction);
  const shift = Number(exponent) - fraction.length + digits; // value * 10^digits = sign * allDigits * 10^shift
  let units = allDigits, exact = true;
  if (shift >= 0) {
    units = allDigits * 10n ** BigInt(shift);
  } else {
    const divisor = 10n ** BigInt(-shift);
    units = allDigits / divisor;
    exact = allDigits % divisor === 0n;
  }
  if (!negative) return { units, exact };
  return { units: exact ? -units : -units - 1n, exact }; // the floor of a negative value
}

/**
 * The inclusive range of units (the value times 10^digits, integers) a
 * schema's bounds leave: { lo, hi }, each a BigInt or null (unbounded).
 */
function unitRange(schema, digits) {
  let lo = null, hi = null;
  const raise = (bound) => { if (lo === null || bound > lo) lo = bound; };
  const lower = (bound) => { if (hi === null || bound < hi) hi = bound; };
  // Draft 4's exclusiveMinimum / exclusiveMaximum: true makes minimum / maximum exclusive.
  const above = (bound) => raise(scaled(bound, digits).units + 1n);
  const atLeast = (bound) => {
    const { units, exact } = scaled(bound, digits);
    raise(exact ? units : units + 1n);
  };
  const below = (bound) => {
    const { units, exact } = scaled(bound, digits);
    lower(exact ? units - 1n : units);
  };
  const atMost = (bound) => lower(scaled(bound, digits).units);
  const { minimum, maximum, exclusiveMinimum, exclusiveMaximum } = schema;
  if (minimum !== undefined) (exclusiveMinimum === true ? above : atLeast)(minimum);
  if (maximum !== undefined) (exclusiveMaximum === true ? below : atMost)(maximum);
  if (typeof exclusiveMinimum === 'number') above(exclusiveMinimum);
  if (typeof exclusiveMaximum === 'number') below(exclusiveMaximum);
  return { lo, hi };
}

// ---------------------------------------------------------------------------
// The strings, as sequences of character classes: a class is a bitmask over
// SYMBOLS; a sequence { classes, more } is its classes one character each,
// then (more) any number of digits.

const SYMBOLS = '0123456789.-';
const bit = (ch) => 1 << SYMBOLS.indexOf(ch);
const digitsFrom = (first, last) => ((1 << (last + 1)) - 1) & ~((1 << first) - 1);
const ANY_DIGIT = digitsFrom(0, 9);
const sequence = (classes, more = false) => ({ classes, more });
const chars = (text) => [...text].map(bit);
const joined = (a, b) => sequence([...a.classes, ...b.classes], b.more);

/** The digit strings of one length from x to y (strings of that length, x <= y). */
function digitsBetween(x, y) {
  if (x.length === 0) return [sequence([])];
  const first = Number(x[0]), last = Number(y[0]);
  if (first === last) return digitsBetween(x.slice(1), y.slice(1)).map((s) => sequence([bit(x[0]), ...s.classes]));
  const rest = x.length - 1;
  const out = [];
  const lowFull = /^0*$/.test(x.slice(1)), highFull = /^9*$/.test(y.slice(1));
  if (!lowFull) out.push(...digitsBetween(x.slice(1), '9'.repeat(rest)).map((s) => sequence([bit(x[0]), ...s.classes])));
  const from = lowFull ? first : first + 1, to = highFull ? last : last - 1;
  if (from <= to) out.push(sequence([digitsFrom(from, to), ...Array(rest).fill(ANY_DIGIT)]));
  if (!highFull) out.push(...digitsBetween('0'.repeat(rest), y.slice(1)).map((s) => sequence([bit(y[0]), ...s.classes])));
  return out;
}

/** The integers from a to b (BigInt, 0 <= a <= b; b null: no end) as JSON writes them. */
function naturals(a, b) {
  const out = [];
  const from = String(a).length, to = b === null ? from : String(b).length;
  for (let length = from; length <= to; length++) {
    const floor = length === 1 ? 0n : 10n ** BigInt(length - 1), ceiling = 10n ** BigInt(length) - 1n;
    const x = a > floor ? a : floor, y = b !== null && b < ceiling ? b : ceiling;
    if (x <= y) out.push(...digitsBetween(String(x), String(y)));
  }
  if (b === null) out.push(sequence([digitsFrom(1, 9), ...Array(to).fill(ANY_DIGIT)], true)); // every longer one
  return out;
}

/** Fraction parts for x to y units of 10^-FRACTION_DIGITS (0 <= x <= y < SCALE), none among them when x is 0. */
function fractions(x, y) {
  const out = x === 0n ? [sequence([])] : [];
  for (let k = 1; k <= FRACTION_DIGITS; k++) {
    // k digits f stand for f * 10^(FRACTION_DIGITS - k) units.
    const step = 10n ** BigInt(FRACTION_DIGITS - k);
    const from = (x + step - 1n) / step, to = y / step;
    if (from <= to) out.push(...digitsBetween(String(from).padStart(k, '0'), String(to).padStart(k, '0')).map((s) => sequence([bit('.'), ...s.classes])));
  }
  return out;
}

/** Decimals (no sign) for units a to b (0 <= a <= b). */
function decimals(a, b) {
  const whole = (units) => units / SCALE, part = (units) => units % SCALE;
  const withFraction = (integers, x, y) => integers.flatMap((i) => fractions(x, y).map((f) => joined(i, f)));
  const literal = (n) => [sequence(chars(String(n)))];
  const [ia, ib] = [whole(a), whole(b)];
  if (ia === ib) return withFraction(literal(ia), part(a), part(b));
  const out = withFraction(literal(ia), part(a), SCALE - 1n);
  if (ia + 1n <= ib - 1n) out.push(...withFraction(naturals(ia + 1n, ib - 1n), 0n, SCALE - 1n));
  out.push(...withFraction(literal(ib), 0n, part(b)));
  return out;
}

// ---------------------------------------------------------------------------
// The trie of a set of sequences, written as EBNF.

function classText(mask) {
  const digits = [];
  for (let d = 0; d <= 9; d++) if (mask & (1 << d)) digits.push(d);
  const others = [...SYMBOLS.slice(10)].filter((ch) => mask & bit(ch));
  if (digits.length === 0 && others.length === 1) return `"${others[0]}"`;
  if (digits.length === 1 && others.length === 0) return `"${digits[0]}"`;
  // Runs of digits as ranges.
  let text = '';
  for (let i = 0; i < digits.length;) {
    let j = i;
    while (j + 1 < digits.length && digits[j + 1] === digits[j] + 1) j++;
    text += j > i ? `${digits[i]}-${digits[j]}` : `${digits[i]}`;
    i = j + 1;
  }
  return `[${text}${others.map((ch) => (ch === '-' ? '\\-' : ch)).join('')}]`;
}

/** EBNF for the set of `sequences` (each from `at` on): deterministic, each choice's branches on disjoint classes. */
function trie(sequences, at = 0) {
  const ends = sequences.some((s) => s.classes.length === at && !s.more);
  const anyDigits = sequences.some((s) => s.classes.length === at && s.more);
  if (anyDigits) return '[0-9]*'; // any digits from here take every continuation the others have (all digits)
  const going = sequences.filter((s) => s.classes.length > at);
  if (going.length === 0) return ends ? '""' : null;
  // The first characters, cut into classes no two sequences' classes cross.
  const pieces = [];
  for (const s of going) {
    let mask = s.classes[at];
    for (let i = 0; i < pieces.length && mask; i++) {
      const common = pieces[i] & mask;
      if (!common) continue;
      if (common !== pieces[i]) pieces.push(pieces[i] & ~common), (pieces[i] = common);
      mask &= ~common;
    }
    if (mask) pieces.push(mask);
  }
  // Pieces that lead to the same continuation are one class again.
  const branches = new Map();
  for (const piece of pieces) {
    const rest = trie(going.filter((s) => s.classes[at] & piece), at + 1);
    branches.set(rest, (branches.get(rest) ?? 0) | piece);
  }
  const alternatives = [...branches].map(([rest, mask]) => (rest === '""' ? classText(mask) : `${classText(mask)} ${rest}`));
  const choice = alternatives.length === 1 ? alternatives[0] : `(${alternatives.join(' | ')})`;
  return ends ? `(${choice})?` : choice;
}

/**
 * The EBNF of the JSON numbers a schema of type 'integer' or 'number' (or
 * a list of just that type) with bounds takes, or null when it takes none (an empty range, or, for a
 * number, none below 10^INTEGER_DIGITS in magnitude).
 */
export function numberRangeGrammar(schema) {
  const integer = [schema.type].flat()[0] === 'integer';
  let { lo, hi } = unitRange(schema, integer ? 0 : FRACTION_DIGITS);
  if (!integer) {
    const limit = 10n ** BigInt(INTEGER_DIGITS) * SCALE - 1n; // |value| < 10^INTEGER_DIGITS
    if (lo === null || lo < -limit) lo = -limit;
    if (hi === null || hi > limit) hi = limit;
  }
  if (lo !== null && hi !== null && lo > hi) return null;
  const body = integer ? naturals : decimals;
  const sequences = [];
  // Negative values: "-" and the magnitudes from max(1, -hi) to -lo (none is written "-0").
  if (lo === null || lo < 0n) {
    const least = hi !== null && hi < 0n ? -hi : 1n;
    sequences.push(...body(least, lo === null ? null : -lo).map((s) => sequence([bit('-'), ...s.classes], s.more)));
  }
  if (hi === null || hi >= 0n) sequences.push(...body(lo !== null && lo > 0n ? lo : 0n, hi));
  return trie(sequences);
}

/**
 * A bounded number's keywords (numberRangeGrammar makes its grammar): finite
 * bounds (draft 4's exclusiveMinimum / exclusiveMaximum as booleans beside
 * minimum / maximum), one type of 'integer' or 'number', no enum or const
 * beside them, and a range some number is in. fail(path, why) throws;
 * returns the range's grammar (numberRangeGrammar).
 */
export function checkNumberBounds(fail, path, node) {
  for (const key of NUMBER_BOUNDS) {
    const value = node[key];
    if (value === undefined || Number.isFinite(value)) continue;
    const draft4 = typeof value === 'boolean' && key.startsWith('exclusive');
    const beside = key === 'exclusiveMinimum' ? 'minimum' : 'maximum';
    if (!draft4) fail(`${path}/${key}`, `must be a finite number${key.startsWith('exclusive') ? ' (or, as in draft 4, a boolean beside ' + beside + ')' : ''} (got ${shown(value)})`);
    if (node[beside] === undefined) fail(`${path}/${key}`, `as a boolean (draft 4) needs ${beside} beside it`);
  }
  const types = [node.type].flat();
  if (types.length !== 1) fail(`${path}/type`, `must be 'integer' or 'number' alone beside ${NUMBER_BOUNDS.filter((k) => node[k] !== undefined).join(', ')} (got ${shown(node.type)})`);
  for (const key of ['enum', 'const']) if (node[key] !== undefined) fail(`${path}/${key}`, 'beside number bounds is not supported: list only the values within them');
  const grammar = numberRangeGrammar(node);
  if (grammar === null) {
    fail(path, `has no ${types[0]} within its bounds${types[0] === 'number' ? ' (a number has at most 6 decimals and magnitude below 1e9)' : ''}: ${NUMBER_BOUNDS.filter((k) => node[k] !== undefined).map((k) => `${k} ${node[k]}`).join(', ')}`);
  }
  return grammar;
}

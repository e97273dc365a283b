// Options objects: every key a call does not know is refused, naming the
// nearest one it does (a misspelt `mdoe` would otherwise be silently
// ignored and its default used).

/** How a bad argument is shown in a message: 1.5, "2", null, a Float64Array. */
export function shown(value) {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'function') return 'a function';
  if (value === null || typeof value !== 'object') return String(value);
  const name = value.constructor?.name ?? 'object';
  return `${/^[AEIOU]/i.test(name) ? 'an' : 'a'} ${name}`;
}

// The edit distance of a and b (insertions, deletions, substitutions and
// swaps of neighbours): 'mdoe' is one swap from 'mode'.
function distance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/**
 * The known name closest to `name`, if it is close enough to be a slip
 * (case aside: a few letters off, or the start of a longer name, as
 * 'budget' of 'budgetBytes'), else null.
 */
export function nearest(name, known) {
  const lower = name.toLowerCase();
  let best = null;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const other = candidate.toLowerCase();
    const d = lower.length >= 3 && (other.startsWith(lower) || lower.startsWith(other)) ? 1 : distance(lower, other);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return bestDistance <= Math.max(1, Math.floor(Math.min(name.length, best?.length ?? 0) / 3)) ? best : null;
}

/**
 * Refuses an own key of `options` that is not in `known` with a TypeError
 * naming it and the nearest known key (or, when none is near, the list).
 * `what` names the object in the message ('options', 'policy', 'mode').
 */
export function checkKeys(where, options, known, what = 'options') {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const guess = nearest(key, known);
    const hint = guess ? `did you mean '${guess}'?` : `it takes ${known.map((k) => `'${k}'`).join(', ')}`;
    const unknown = what === 'options' ? `unknown option '${key}'` : `${what} has no option '${key}'`;
    throw new TypeError(`${where}: ${unknown} (${hint})`);
  }
}

/**
 * Refuses an option that is set (not undefined) but does nothing in the
 * configuration the other options chose; `why` says what it needs.
 */
export function checkUnused(where, options, key, why) {
  if (options[key] !== undefined) throw new TypeError(`${where}: option '${key}' does nothing here: ${why}`);
}

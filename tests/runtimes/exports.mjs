// Resolves a subpath of a package's exports map as a runtime or a bundler
// does: the first key, in the map's own order, among the conditions it
// matches. The tests play the bundler's part with it where there is none
// (the browser's import map, workerd's module list).
import { readFileSync } from 'node:fs';

/** The package.json of this repository. */
export const PACKAGE = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));

/** The target (e.g. './js/index.js') of `subpath` ('.', './llama') under `conditions`, or null. */
export function resolveExport(pkg, subpath, conditions) {
  let target = pkg.exports?.[subpath] ?? null;
  while (target !== null && typeof target === 'object') {
    const key = Object.keys(target).find((condition) => conditions.includes(condition));
    target = key === undefined ? null : target[key];
  }
  return target;
}

// The package's files at run time: where one is (beside this module, or
// where init({ locateFile }) says), and reading it in any runtime.
import { shown } from './options.js';

/**
 * The files the package loads at run time, by the names locateFile(name) is
 * asked for: the two builds of the module and the thread pool's worker.
 */
export const RUNTIME_FILES = Object.freeze({ simd128: 'kvcache.wasm', relaxed: 'kvcache-relaxed.wasm', poolWorker: 'pool-worker.js' });

/** Where a file of the package is: locateFile's answer, else `packaged()` (its place in the package). */
export function locate(options, name, packaged) {
  if (options.locateFile === undefined) return packaged();
  const where = options.locateFile(name);
  if (where instanceof URL || typeof where === 'string') return toUrl(where);
  throw new TypeError(`init: options.locateFile('${name}') must return a URL or a string (got ${shown(where)})`);
}

/**
 * A URL from a URL or a string: a string is resolved against the page (or a
 * worker's script) where there is one, else it is a file path or a file:
 * URL (Node, Deno, Bun), a relative path from the working directory.
 */
export function toUrl(where) {
  if (where instanceof URL) return where;
  if (globalThis.location?.href) return new URL(where, globalThis.location.href);
  if (/^[a-z][a-z0-9+.-]*:/i.test(where) && !/^[a-z]:[\\/]/i.test(where)) return new URL(where);
  const url = builtin('node:url');
  if (url) return url.pathToFileURL(where);
  return new URL(where);
}

// Node, Deno and Bun hand out their built-in modules through
// process.getBuiltinModule: no import specifier that a bundler would try to
// resolve for a browser, and nothing a browser or a Worker runtime lacks is
// reached there.
export function builtin(name) {
  return globalThis.process?.getBuiltinModule?.(name) ?? null;
}

/** The bytes (Node, Deno, Bun: a file) or the Response of a fetch, of `url`. */
export async function fetchFile(url) {
  const fs = url.protocol === 'file:' ? builtin('node:fs/promises') : null;
  if (fs) {
    try {
      return await fs.readFile(url);
    } catch (error) {
      throw Object.assign(new Error(`init: reading ${url} failed: ${error.code ?? error.message}`), { code: error.code });
    }
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`init: fetching ${url} failed with HTTP ${response.status}`);
  return response;
}


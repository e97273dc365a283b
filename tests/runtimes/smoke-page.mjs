// The smoke test in a browser (tests/runtimes/browsers.mjs: Chromium,
// Firefox, WebKit). A tiny node:http server serves a page, the package's
// files and the smoke modules; the page's import map resolves 'kvcache-wasm'
// as a bundler would for the browser (the exports map's "browser"
// condition), and init() fetches its .wasm itself.  Served cross-origin
// isolated (COOP + COEP), the page may run the package on worker threads;
// served plainly, on the page's thread alone.
import { existsSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchBrowser } from './browsers.mjs';
import { serveFiles } from './static-server.mjs';
import { PACKAGE, resolveExport } from './exports.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BROWSER_CONDITIONS = ['browser', 'import', 'default'];
// What the server serves besides the page: the package and the smoke modules.
const JINJA = 'node_modules/@huggingface/jinja/dist/index.js'; // the chat templates' one dependency
const SERVED = ['js/', 'dist/kvcache.wasm', 'dist/kvcache-relaxed.wasm', 'support/synthetic.mjs', 'tests/runtimes/', JINJA];

/** A page whose import map resolves the package's entry points as a bundler would for the browser. */
export function page() {
  const imports = Object.fromEntries(['.', './llama', './chat', './worker'].map((subpath) =>
    [`kvcache-wasm${subpath.slice(1)}`, resolveExport(PACKAGE, subpath, BROWSER_CONDITIONS).slice(1)]));
  imports['@huggingface/jinja'] = `/${JINJA}`;
  return `<!doctype html><meta charset="utf-8"><title>kvcache-wasm smoke</title><link rel="icon" href="data:,">
<script type="importmap">${JSON.stringify({ imports })}</script>`;
}

/** The repository file a request path names, when it is one the server serves; else null. */
export function fileFor(pathname) {
  const path = posix.normalize(pathname).slice(1); // normalizing '/…' leaves no '..'
  const served = SERVED.some((prefix) => (prefix.endsWith('/') ? path.startsWith(prefix) : path === prefix));
  const file = join(ROOT, path);
  return served && existsSync(file) && statSync(file).isFile() ? file : null;
}

function listen(isolated) {
  return serveFiles((pathname) => fileFor(pathname), { isolated, pages: { '/': page } });
}

/**
 * Runs smoke() in a fresh page of browser `name`, served cross-origin
 * isolated or not; resolves to { summary, version }. Rejects with the page's
 * errors when it fails or takes longer than timeoutMs (the browser is closed
 * either way).
 */
export async function smokeInBrowser(name, { timeoutMs, isolated }) {
  const server = await listen(isolated);
  let browser;
  let page;
  let timer;
  try {
    browser = await launchBrowser(name);
    page = await browser.open(`http://127.0.0.1:${server.address().port}/`);
    const run = page.evaluate(`async () => {
      const kv = await import('kvcache-wasm');
      const { smoke } = await import('/tests/runtimes/smoke.mjs');
      return smoke(kv);
    }`);
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the smoke test took longer than ${timeoutMs} ms`)), timeoutMs);
    });
    const summary = await Promise.race([run, late]);
    if (page.problems().length > 0) throw new Error('the page reported errors');
    return { summary, version: browser.version };
  } catch (error) {
    const problems = page?.problems() ?? [];
    error.message += problems.length > 0 ? `\n${problems.join('\n')}` : '';
    throw error;
  } finally {
    clearTimeout(timer);
    await browser?.close();
    server.close();
  }
}

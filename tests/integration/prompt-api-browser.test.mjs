// kvcache-wasm/prompt-api in real browsers (Chromium and Firefox): a page's
// LanguageModel with its model in a LlamaWorker, downloaded into the page's
// ModelStore (OPFS) -- 'downloadable' before the first create(), progress
// from 0 to 1, 'available' after a reload with no byte fetched again -- its
// sessions prompted, streamed, appended to, cloned, constrained to a JSON
// Schema and destroyed; and the same class inside a dedicated worker (the
// package bundled, as an app's bundler would), on stories260K.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { MODEL_MISSING, MODEL_PATH } from '../js/helpers.mjs';
import { browserMissing, launchBrowser } from '../runtimes/browsers.mjs';
import { serveFiles } from '../runtimes/static-server.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ROUTES = [
  ['/pkg/js/', join(ROOT, 'js')],
  ['/pkg/dist/', join(ROOT, 'dist')],
  ['/vendor/jinja/', join(ROOT, 'node_modules', '@huggingface', 'jinja', 'dist')],
  ['/vendor/xgrammar/', join(ROOT, 'node_modules', '@mlc-ai', 'web-xgrammar', 'lib')],
];
const PAGE = `<!doctype html><meta charset="utf-8"><title>prompt-api</title><link rel="icon" href="data:,">
<script type="importmap">{ "imports": { "kvcache-wasm": "/pkg/js/index.js", "kvcache-wasm/prompt-api": "/pkg/js/prompt-api.js",
  "kvcache-wasm/worker": "/pkg/js/worker.js", "@huggingface/jinja": "/vendor/jinja/index.js", "@mlc-ai/web-xgrammar": "/vendor/xgrammar/index.js" } }</script>
<script type="module">
// At load, before the user has touched the page: a create() that would download is refused, as Chrome's.
const { defineLanguageModel } = await import('kvcache-wasm/prompt-api');
const LanguageModel = defineLanguageModel({ model: new URL('/model.gguf', location.href).href, worker: true, init: { threads: 1 } });
const create = await LanguageModel.create().then(() => 'created', (e) => e.name);
// Told as a console warning: the driver's evaluate() would count as a user's gesture, and this must be read before any.
console.warn(\`at load: \${JSON.stringify({ activated: navigator.userActivation.hasBeenActive, create })}\`);
</script>`;

// In the page: the model in a LlamaWorker, through the page's store.
const IN_PAGE = `async () => {
  const { defineLanguageModel } = await import('kvcache-wasm/prompt-api');
  const { ModelStore } = await import('kvcache-wasm/worker');
  const store = await ModelStore.open({ name: 'prompt-api-test' });
  const LanguageModel = defineLanguageModel({ model: new URL('/model.gguf', location.href).href, worker: true, store, init: { threads: 1 } });
  const out = { before: await LanguageModel.availability() };
  const progress = [];
  const session = await LanguageModel.create({
    samplingMode: 'most-predictable',
    initialPrompts: [{ role: 'system', content: 'Once upon a time' }],
    monitor(m) { m.addEventListener('downloadprogress', (e) => progress.push(e.loaded)); },
  });
  out.progress = progress;
  out.after = await LanguageModel.availability();
  out.isLanguageModel = session instanceof LanguageModel;
  const copy = await session.clone();
  const constrained = await session.clone();
  out.reply = await session.prompt('there was a cat');
  let streamed = '';
  for await (const chunk of copy.promptStreaming('there was a cat')) streamed += chunk;
  out.streamed = streamed;
  const usage = session.contextUsage;
  await session.append('The cat was happy.');
  out.appended = session.contextUsage - usage;
  out.measured = await copy.measureContextUsage('The cat was happy.');
  out.json = await constrained.prompt('Rate it', { responseConstraint: { type: 'object', properties: { rating: { type: 'integer', minimum: 0, maximum: 5 } }, required: ['rating'], additionalProperties: false } });
  session.destroy();
  out.destroyed = await session.prompt('x').then(() => 'resolved', (e) => e.name);
  copy.destroy();
  constrained.destroy();
  out.stored = (await store.list()).map((m) => ({ complete: m.complete, size: m.size }));
  return out;
}`;

// After a reload: the file is whole in the store.
const RELOADED = `async () => {
  const { defineLanguageModel } = await import('kvcache-wasm/prompt-api');
  const { ModelStore } = await import('kvcache-wasm/worker');
  const store = await ModelStore.open({ name: 'prompt-api-test' });
  const LanguageModel = defineLanguageModel({ model: new URL('/model.gguf', location.href).href, worker: true, store, init: { threads: 1 } });
  const availability = await LanguageModel.availability();
  const session = await LanguageModel.create();
  const reply = await session.prompt('Tom');
  session.destroy();
  return { availability, reply };
}`;

// In a dedicated worker: the bundled package, the model loaded there.
const IN_WORKER = `async () => {
  const worker = new Worker('/worker.js', { type: 'module' });
  return new Promise((resolve, reject) => {
    worker.onmessage = ({ data }) => { worker.terminate(); (data.error ? reject(new Error(data.error)) : resolve(data)); };
    worker.onerror = (e) => reject(new Error(e.message));
  });
}`;
const WORKER_SCRIPT = `import { defineLanguageModel } from '/bundle/prompt-api.js';
try {
  const LanguageModel = defineLanguageModel({ model: '/model.gguf', init: { threads: 1, locateFile: (name) => '/pkg/dist/' + name } });
  const session = await LanguageModel.create({ samplingMode: 'most-predictable' });
  const reply = await session.prompt('Lily');
  const copy = await session.clone();
  postMessage({ reply, usage: session.contextUsage, copyUsage: copy.contextUsage, global: typeof globalThis.LanguageModel });
} catch (error) {
  postMessage({ error: String(error?.stack ?? error) });
}`;

/** Resolves once `page` has reloaded: its document complete, without the mark set before. */
async function reloadedPage(page) {
  for (let tries = 0; tries < 200; tries++) {
    const state = await page.evaluate('() => (window.beforeReload ? "old" : document.readyState)').catch(() => 'navigating');
    if (state === 'complete') return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the page did not reload in 10 s');
}

describe('kvcache-wasm/prompt-api in browsers', { skip: MODEL_MISSING ?? false }, () => {
  let server;
  let bundleDir;
  before(async () => {
    bundleDir = mkdtempSync(join(tmpdir(), 'kvcache-wasm-prompt-api-'));
    await build({ entryPoints: [join(ROOT, 'js', 'prompt-api.js')], bundle: true, format: 'esm', outfile: join(bundleDir, 'prompt-api.js'), logLevel: 'silent' });
    writeFileSync(join(bundleDir, 'worker.js'), WORKER_SCRIPT);
    const fileFor = (pathname) => {
      if (pathname === '/model.gguf') return MODEL_PATH;
      if (pathname === '/bundle/prompt-api.js') return join(bundleDir, 'prompt-api.js');
      if (pathname === '/worker.js') return join(bundleDir, 'worker.js');
      for (const [prefix, dir] of ROUTES) {
        if (!pathname.startsWith(prefix)) continue;
        const file = normalize(join(dir, pathname.slice(prefix.length)));
        return file.startsWith(dir + sep) && existsSync(file) && statSync(file).isFile() ? file : null;
      }
      return null;
    };
    server = await serveFiles(fileFor, { isolated: false, pages: { '/': () => PAGE } });
  });
  after(() => {
    server?.close();
    if (bundleDir) rmSync(bundleDir, { recursive: true, force: true });
  });

  for (const name of ['chromium', 'firefox']) {
    test(`${name}: a page's LanguageModel, its model in a worker and downloaded into the store once; and one inside a dedicated worker`, async (t) => {
      const missing = await browserMissing(name);
      if (missing) return t.skip(missing);
      const browser = await launchBrowser(name);
      try {
        const origin = `http://127.0.0.1:${server.address().port}`;
        const page = await browser.open(`${origin}/`);
        let told;
        for (let tries = 0; !(told = page.warnings().find((w) => w.includes('at load: '))) && tries < 400; tries++) await new Promise((resolve) => setTimeout(resolve, 50));
        assert.ok(told, 'the page told what create() did at load');
        assert.deepEqual(JSON.parse(told.slice(told.indexOf('at load: ') + 9)), { activated: false, create: 'NotAllowedError' });
        // The page's evaluate() runs as a user's gesture would (the driver's), so what follows may download.
        const out = await page.evaluate(IN_PAGE);
        assert.equal(out.before, 'downloadable');
        assert.equal(out.progress[0], 0);
        assert.equal(out.progress.at(-1), 1);
        assert.ok(out.progress.every((p, i) => i === 0 || p > out.progress[i - 1]), `progress ${out.progress}`);
        assert.equal(out.after, 'available');
        assert.ok(out.isLanguageModel);
        assert.equal(typeof out.reply, 'string');
        assert.ok(out.reply.length > 0);
        assert.equal(out.streamed, out.reply, 'the clone streams what the original replied');
        assert.ok(Math.abs(out.appended - (out.measured - 1)) <= 1, `${out.appended} added, ${out.measured} measured alone (the begin token held once)`);
        assert.ok(Number.isInteger(JSON.parse(out.json).rating), out.json);
        assert.equal(out.destroyed, 'AbortError');
        assert.deepEqual(out.stored, [{ complete: true, size: statSync(MODEL_PATH).size }]);
        // A reload (a new page would be a new browser context, with a store of its own).
        await page.evaluate('async () => { window.beforeReload = true; setTimeout(() => location.reload(), 20); return true; }');
        await reloadedPage(page);
        const again = await page.evaluate(RELOADED);
        assert.equal(again.availability, 'available', JSON.stringify(again));
        assert.equal(typeof again.reply, 'string');
        const inWorker = await page.evaluate(IN_WORKER);
        assert.equal(typeof inWorker.reply, 'string');
        assert.equal(inWorker.copyUsage, inWorker.usage);
        assert.equal(inWorker.global, 'undefined', 'defineLanguageModel installs nothing');
        assert.deepEqual(page.problems(), []);
        await page.close();
      } finally {
        await browser.close();
      }
    });
  }
});

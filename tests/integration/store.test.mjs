// The model store in every browser engine (tests/runtimes/browsers.mjs:
// Chromium, Firefox, WebKit) against a real HTTP server with ranges and
// faults (tests/runtimes/model-server.mjs): a model downloads once and the
// next load makes no request; a download cut at half resumes with at most
// 55% of the file more and loads the same model; a byte flipped where the
// store keeps the file is caught and the file downloaded again; the page
// and a worker loading the same model at once download it once (Web
// Locks); a conversation saved by name answers after a reload as it would
// have without one; a chat's system prompt kept in the store's prefix
// cache is restored after a reload (only the new message computed, the
// same reply), and two tabs writing the same prefixes at once keep each
// once; a store opened with the defaults, which asks the
// browser to keep its data, downloads without waiting for the answer. Load
// times are printed (the bench compares them).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import init from '../../js/index.js';
import { Llama } from '../../js/llama.js';
import { BROWSERS, browserMissing, launchBrowser } from '../runtimes/browsers.mjs';
import { serveModels } from '../runtimes/model-server.mjs';
import { fileFor, page } from '../runtimes/smoke-page.mjs';
import { staticHandler } from '../runtimes/static-server.mjs';
import { REAL_MODELS } from '../gguf/models.mjs';
import { MODEL_MISSING, MODEL_PATH } from '../js/helpers.mjs';

const KJV = REAL_MODELS['kjv-d512-h64'].path;
const MISSING = MODEL_MISSING ?? (existsSync(KJV) ? null : `the model file is absent: ${KJV}`);
const STEP_MS = 120000;
// The stories model downloads from loopback in well under a second; a load waiting on a prompt takes forever.
const DEFAULTS_MS = 10000;
let server;
let digests;

before(async () => {
  if (MISSING) return;
  await init();
  digests = {};
  for (const [name, path] of [['kjv', KJV], ['stories', MODEL_PATH]]) {
    const llama = Llama.fromGguf(new Uint8Array(readFileSync(path)));
    digests[name] = llama.digest;
    llama.free();
  }
  server = await serveModels({ '/models/kjv.gguf': KJV, '/models/stories.gguf': MODEL_PATH },
    { fallback: staticHandler(fileFor, { isolated: false, pages: { '/': page } }) });
});
after(() => server?.close());

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

for (const name of BROWSERS) {
  describe(`the model store in ${name}`, () => {
    let skipWhy = MISSING;
    let browser;
    let tab;
    const size = MISSING ? 0 : statSync(KJV).size;
    const step = (op, arg = {}) => tab.evaluate(`async (arg) => (await import('/tests/runtimes/store-page.mjs'))[arg.op](arg)`, { op, ...arg });
    const counted = async (fn) => {
      const before = { ...server.stats };
      const result = await fn();
      return { result, requests: server.stats.requests - before.requests, bytes: server.stats.bytes - before.bytes };
    };
    const it = (title, fn) => test(title, { timeout: STEP_MS }, (t) => (skipWhy ? t.skip(skipWhy) : fn(t)));
    const reload = async () => {
      await tab.evaluate('async () => { setTimeout(() => location.reload(), 20); return true; }');
      await sleep(500);
      for (let i = 0; i < 100; i++) {
        const loaded = await tab.evaluate("async () => document.readyState === 'complete'").catch(() => false);
        if (loaded) return;
        await sleep(100);
      }
    };

    before(async () => {
      skipWhy ??= await browserMissing(name);
      if (skipWhy) return;
      browser = await launchBrowser(name);
      tab = await browser.open(server.url('/'));
      const backend = await step('clear');
      console.log(`# ${browser.version}: the store's backend is ${backend}`);
    });
    after(async () => {
      await tab?.close().catch(() => {});
      await browser?.close();
    });

    it('a second load makes no request and loads the same model', async () => {
      const first = await counted(() => step('load', { url: '/models/kjv.gguf' }));
      assert.equal(first.result.error, undefined);
      assert.equal(first.result.digest, digests.kjv);
      assert.equal(first.bytes, size);
      const second = await counted(() => step('load', { url: '/models/kjv.gguf' }));
      assert.equal(second.requests, 0);
      assert.equal(second.result.digest, digests.kjv);
      assert.deepEqual([second.result.last.fromStore, second.result.last.fromNetwork], [size, 0]);
      console.log(`# ${name}: kjv-d512-h64 (${(size / 2 ** 20).toFixed(0)} MiB) first load ${first.result.ms.toFixed(0)} ms, from the store ${second.result.ms.toFixed(0)} ms`);
    });

    it('a download cut at half resumes: at most 55% of the file more, the same model', async () => {
      await step('clear');
      // Chromium and Firefox pass every byte they received to the page before a dropped connection's error.
      // WebKit holds up to ~30 MB it has not passed on yet, which the error discards: loopback speed loses half
      // of what came, 100 MB/s two thirds, 50 MB/s (a 400 Mbit/s connection) under 2%. It is cut at 50 MB/s.
      Object.assign(server.faults, { dropAt: Math.floor(size / 2), rate: name === 'webkit' ? 50e6 : undefined });
      const cut = await counted(() => step('load', { url: '/models/kjv.gguf' }));
      delete server.faults.rate;
      assert.ok(cut.result.error, 'the cut load failed');
      const [partial] = await step('list');
      assert.ok(partial.stored > 0.4 * size, `after ${cut.result.error}: ${JSON.stringify(partial)}`);
      const resumed = await counted(() => step('load', { url: '/models/kjv.gguf' }));
      assert.equal(resumed.result.error, undefined);
      assert.ok(resumed.bytes <= 0.55 * size, `the resume transferred ${resumed.bytes} of ${size} bytes`);
      assert.ok(resumed.result.last.fromStore > 0.4 * size);
      assert.equal(resumed.result.digest, digests.kjv);
      console.log(`# ${name}: cut at ${cut.bytes} bytes (${cut.result.error.split(':')[0]}); the resume took ${resumed.bytes} (${(100 * (cut.bytes + resumed.bytes) / size).toFixed(1)}% in all)`);
    });

    it('a byte flipped where the store keeps the file is caught, and the file downloaded again', async () => {
      const where = await step('damage', { piece: 5 });
      const again = await counted(() => step('load', { url: '/models/kjv.gguf' }));
      assert.equal(again.result.error, undefined, `after flipping a bit of ${where}`);
      assert.match(again.result.last.restarted, /the stored copy was damaged/);
      assert.equal(again.requests, 1);
      assert.equal(again.result.digest, digests.kjv);
      const after = await counted(() => step('load', { url: '/models/kjv.gguf' }));
      assert.equal(after.requests, 0);
    });

    it('the page and a worker loading one model at once download it once', async () => {
      await step('clear');
      const both = await counted(() => step('loadTwice', { url: '/models/kjv.gguf' }));
      assert.deepEqual(both.result.digests, [digests.kjv, digests.kjv]);
      assert.equal(both.requests, 1);
      assert.equal(both.bytes, size);
    });

    // WebKitGTK's WebDriver session has no navigator.storage (so no OPFS) and keeps Cache API entries only until
    // the page reloads (the cache's name stays, its entries go): nothing a page stores there outlives a reload.
    const reloadSkip = name === 'webkit'
      ? 'WebKitGTK under WebDriver keeps Cache API entries only until a reload, and has no OPFS: nothing stored survives one here' : null;
    it('a conversation saved by name answers after a reload as it would have without one', async (t) => {
      if (reloadSkip) return t.skip(reloadSkip);
      const saved = await step('converse', { url: '/models/stories.gguf', name: 'tale', turns: ['Once upon a time', 'The dog'] });
      await reload();
      const resumed = await counted(() => step('resume', { url: '/models/stories.gguf', name: 'tale' }));
      assert.equal(resumed.result.error, undefined);
      assert.equal(resumed.requests, 0);
      assert.equal(resumed.result.next, saved.next);
      const other = await step('resume', { url: '/models/kjv.gguf', name: 'tale' });
      assert.match(other.error, /was saved with another model file/);
      // The one error the page may show is the cut download's (Chromium logs the short body).
      assert.deepEqual(tab.problems().filter((p) => !/ERR_CONTENT_LENGTH_MISMATCH/.test(p)), []);
    });

    // WebKitGTK keeps nothing past a reload here (reloadSkip): there the model is loaded again in the same page.
    it('a chat\'s system prompt, kept in the store\'s prefix cache, is restored after a reload and the reply is the same', async () => {
      const url = '/models/stories.gguf';
      await step('clearPrefixes');
      const first = await step('systemChat', { url, text: 'Tell me a story.' });
      assert.equal(first.error, undefined);
      assert.equal(first.promptComputed, first.promptTokens, 'the first page computes everything');
      assert.equal(first.entries.length, 1, 'the system prompt (the first message adds too few tokens to keep apart)');
      if (!reloadSkip) await reload();
      const reference = await step('systemChat', { url, text: 'Where did she go?', storePrefixes: false });
      const second = await step('systemChat', { url, text: 'Where did she go?' });
      assert.equal(second.error, undefined);
      assert.deepEqual(second.tokens, reference.tokens);
      const [system] = first.entries;
      assert.equal(second.promptComputed, reference.promptTokens - system, `only the new message: ${second.promptComputed} of ${second.promptTokens}`);
    });

    it('two tabs storing the same prefixes at once keep each entry once, and reply alike', async (t) => {
      if (name === 'webkit') return t.skip('WebKitWebDriver drives one window here: a second open() navigates the first');
      const url = '/models/stories.gguf';
      await step('clearPrefixes');
      const other = await browser.open(server.url('/'));
      try {
        const otherStep = (op, arg = {}) => other.evaluate(`async (arg) => (await import('/tests/runtimes/store-page.mjs'))[arg.op](arg)`, { op, ...arg });
        const [here, there] = await Promise.all([step('systemChat', { url, text: 'The dog ran.' }), otherStep('systemChat', { url, text: 'The dog ran.' })]);
        assert.equal(here.error, undefined);
        assert.equal(there.error, undefined);
        assert.deepEqual(here.tokens, there.tokens);
        const entries = (await step('systemChat', { url, text: 'The dog ran.' })).entries;
        assert.deepEqual(entries, [here.entries[0]], 'the system prompt\'s entry, once');
      } finally {
        await other.close();
      }
    });

    // The other steps open their stores with persist: false. Firefox answers navigator.storage.persist() when its
    // user answers the prompt it shows, headless never: a download waiting for that answer would not begin.
    // The query names a file no step fetched before (the server ignores it), so no HTTP cache answers for the server.
    it('a store opened with the defaults downloads at once', async () => {
      let timer;
      const late = new Promise((resolve) => { timer = setTimeout(resolve, DEFAULTS_MS, { error: `no answer in ${DEFAULTS_MS} ms` }); });
      const first = await counted(() => Promise.race([step('load', { url: '/models/stories.gguf?defaults', options: {} }), late]))
        .finally(() => clearTimeout(timer));
      assert.equal(first.result.error, undefined, `the server saw ${first.requests} requests`);
      assert.equal(first.requests, 1);
      assert.equal(first.bytes, statSync(MODEL_PATH).size);
      assert.equal(first.result.digest, digests.stories);
      console.log(`# ${name}: stories260k from a store opened with the defaults in ${first.result.ms.toFixed(0)} ms`);
    });
  });
}

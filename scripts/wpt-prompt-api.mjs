#!/usr/bin/env node
// Runs the web-platform-tests of the Prompt API (WPT's ai/language-model/
// folder) against this package's LanguageModel (kvcache-wasm/prompt-api)
// in Chromium and Firefox, and prints what passed.
//
//   node scripts/wpt-prompt-api.mjs --wpt DIR [--browser chromium|firefox|both]
//        [--model PATH [--projector PATH]] [--filter TEXT]... [--budget SECONDS] [--json FILE] [--worker]
//        [--languages en,fr] [--max-tokens N (0: no cap)] [--verbose]
//
// DIR is a checkout (or a partial copy) of the web-platform-tests, WPT's own
// paths kept: DIR/ai/language-model/**/*.window.js are the tests,
// DIR/ai/resources/util.js their helpers, DIR/resources/testharness.js the
// harness; none of it is in this repository. The script serves DIR on
// http://localhost (a secure context, as the tests' .https. names want) with
// the package beside it under /pkg/ (the way the demo's server does, an
// import map naming the package's dependencies), and the model at PATH
// (default: models/stories260k.gguf) under /__wpt/model.gguf. Each
// `*.window.js` becomes a page as WPT's server makes one (testharness.js,
// testharnessreport.js, the META scripts, then the test), with this
// package's LanguageModel installed before the test's script runs.
// testharnessreport.js and testdriver.js are this script's own: the report
// hands each file's results to the runner (add_completion_callback), and
// test_driver.bless() waits for the runner to click a button it adds -- a
// real user activation, as WPT's runner gives one through WebDriver.
//
// One page at a time, each file under WPT's own timeout (10 s, or 60 s for
// META: timeout=long), and the whole run under --budget seconds per browser
// (default 840): files not started by then are listed as not run.
import { createServer } from 'node:http';
import { createReadStream, existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { extname, join, normalize, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CHROMIUM_FLAGS, browserMissing, launchBrowser } from '../tests/runtimes/browsers.mjs';
import { ISOLATION_HEADERS } from '../tests/runtimes/static-server.mjs';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
// gc(), which the garbage-collection tests call, as WPT's runner gives it to Chromium.
CHROMIUM_FLAGS.push('--js-flags=--expose-gc');
const STATUS = ['PASS', 'FAIL', 'TIMEOUT', 'NOTRUN', 'PRECONDITION_FAILED'];
const HARNESS_STATUS = ['OK', 'ERROR', 'TIMEOUT', 'PRECONDITION_FAILED'];
const MIME = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8', '.wasm': 'application/wasm', '.gguf': 'application/octet-stream',
  '.svg': 'image/svg+xml', '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif',
  '.wav': 'audio/wav', '.mp3': 'audio/mpeg', '.webm': 'video/webm', '.mp4': 'video/mp4', '.css': 'text/css; charset=utf-8',
};

const { values: args } = parseArgs({
  options: {
    wpt: { type: 'string' },
    browser: { type: 'string', default: 'both' },
    model: { type: 'string', default: join(root, 'models', 'stories260k.gguf') },
    projector: { type: 'string' },
    filter: { type: 'string', multiple: true },
    budget: { type: 'string', default: '840' },
    json: { type: 'string' },
    worker: { type: 'boolean', default: false },
    languages: { type: 'string', default: 'en' },
    'max-tokens': { type: 'string', default: '256' },
    verbose: { type: 'boolean', default: false },
  },
});
if (!args.wpt) {
  console.error('usage: node scripts/wpt-prompt-api.mjs --wpt DIR [--browser chromium|firefox|both] [--model PATH] [--filter TEXT]... [--budget SECONDS] [--json FILE] [--worker] [--languages en] [--max-tokens 256]');
  process.exit(2);
}
const wptRoot = resolve(args.wpt);
const modelPath = resolve(args.model);
const projectorPath = args.projector ? resolve(args.projector) : null;
const browsers = args.browser === 'both' ? ['chromium', 'firefox'] : [args.browser];
const budgetMs = Number(args.budget) * 1000;
for (const [what, path] of [['--wpt', join(wptRoot, 'ai', 'language-model')], ['--model', modelPath], ...(projectorPath ? [['--projector', projectorPath]] : []), ['the harness', join(wptRoot, 'resources', 'testharness.js')]]) {
  if (!existsSync(path)) {
    console.error(`wpt-prompt-api: ${what}: ${path} does not exist`);
    process.exit(2);
  }
}

// ---- the tests: every *.window.js under ai/language-model, its META lines read

function testFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...testFiles(path));
    else if (entry.name.endsWith('.window.js')) out.push(path);
  }
  return out.sort();
}

function metaOf(source) {
  const meta = { scripts: [], timeout: 'normal', title: null };
  for (const line of source.split('\n')) {
    const m = /^\/\/ META: *([a-z_]+)=(.*)$/.exec(line.trim());
    if (!m) {
      if (line.trim() && !line.startsWith('//')) break;
      continue;
    }
    const [, key, value] = m;
    if (key === 'script') meta.scripts.push(value.trim());
    else if (key === 'timeout') meta.timeout = value.trim();
    else if (key === 'title') meta.title = value.trim();
  }
  return meta;
}

// ---- what this script serves itself (no WPT code): the report, testdriver, the page of a test

const REPORT = `// The runner's testharnessreport.js: each file's results, for the runner to read.
add_completion_callback((tests, status) => {
  window.__wptResults = {
    harness: { status: status.status, message: status.message ?? null, stack: status.stack ?? null },
    tests: tests.map((t) => ({ name: t.name, status: t.status, message: t.message ?? null })),
  };
});
`;

const TESTDRIVER = `// The runner's testdriver.js: bless() puts a button on the page and waits
// for the runner to click it (a real click: the page gets a user activation,
// as WPT's own runner gives one through WebDriver), then runs its action in
// the click's handler; the other actions resolve at once.
(() => {
  const done = (value) => Promise.resolve(value);
  window.test_driver = {
    bless(intent, action) {
      return new Promise((resolve, reject) => {
        const button = document.createElement('button');
        button.id = '__wpt_bless';
        button.textContent = String(intent ?? 'bless');
        button.addEventListener('click', () => {
          button.remove();
          window.__wptBlessPending = false;
          try {
            resolve(typeof action === 'function' ? action() : undefined);
          } catch (error) {
            reject(error);
          }
        }, { once: true });
        document.body.append(button);
        window.__wptBlessPending = true;
      });
    },
    click: () => done(), send_keys: () => done(), action_sequence: () => done(), set_permission: () => done(),
    consume_user_activation: () => done(), set_test_context: () => {}, message_test: () => done(),
  };
  window.test_driver_internal = {};
})();
`;

const IMPORT_MAP = JSON.stringify({
  imports: {
    'kvcache-wasm': '/pkg/js/index.js',
    'kvcache-wasm/prompt-api': '/pkg/js/prompt-api.js',
    '@huggingface/jinja': '/vendor/jinja/index.js',
    '@mlc-ai/web-xgrammar': '/vendor/xgrammar/index.js',
  },
});

function pageOf(testPath) {
  const url = `/${relative(wptRoot, testPath).split(sep).join('/')}`;
  const meta = metaOf(readFileText(testPath));
  // The model's languages (stories260K's is English) and a cap on a reply's
  // length (a base model otherwise writes on to the context's end).
  const installOptions = {
    model: '/__wpt/model.gguf', ...(projectorPath && { projector: '/__wpt/mmproj.gguf' }), worker: args.worker, languages: args.languages.split(','),
    ...(Number(args['max-tokens']) > 0 && { maxTokens: Number(args['max-tokens']) }),
  };
  const scripts = meta.scripts.map((s) => `<script src="${s}"></script>`).join('\n');
  // The package's LanguageModel installed (replacing a browser's own), then
  // the test's script added: LanguageModel is there when it runs. The
  // harness is told (explicit_done) that its tests are all declared once
  // that script has run, since it comes after the load event.
  return `<!doctype html>
<meta charset="utf-8">
<meta name="timeout" content="${meta.timeout === 'long' ? 'long' : 'normal'}">
<title>${meta.title ?? url}</title>
<script type="importmap">${IMPORT_MAP}</script>
<script src="/resources/testharness.js"></script>
<script src="/resources/testharnessreport.js"></script>
<script>setup({ explicit_done: true });</script>
${scripts}
<div id="log"></div>
<script type="module">
import { installLanguageModel } from 'kvcache-wasm/prompt-api';
try {
  installLanguageModel({ ...${JSON.stringify(installOptions)}, replace: true });
} catch (error) {
  window.__wptInstallError = String(error && error.stack || error);
}
const script = document.createElement('script');
script.src = ${JSON.stringify(url)};
script.onload = () => done();
script.onerror = () => { window.__wptInstallError = 'the test script did not load'; done(); };
document.body.append(script);
</script>
`;
}

function readFileText(path) {
  return readFileSync(path, 'utf8');
}

// ---- the server: DIR, the package under /pkg/, its dependencies under /vendor/, the model

const ROUTES = [
  ['/pkg/js/', join(root, 'js')],
  ['/pkg/dist/', join(root, 'dist')],
  ['/vendor/jinja/', join(root, 'node_modules', '@huggingface', 'jinja', 'dist')],
  ['/vendor/xgrammar/', join(root, 'node_modules', '@mlc-ai', 'web-xgrammar', 'lib')],
  ['/__wpt/model.gguf', modelPath],
  ...(projectorPath ? [['/__wpt/mmproj.gguf', projectorPath]] : []),
  ['/', wptRoot],
];

function fileFor(pathname) {
  for (const [prefix, target] of ROUTES) {
    if (!pathname.startsWith(prefix)) continue;
    if (!prefix.endsWith('/')) return pathname === prefix ? target : null;
    const file = normalize(join(target, pathname.slice(prefix.length)));
    return file.startsWith(target + sep) || file === target ? file : null;
  }
  return null;
}

function startServer() {
  const server = createServer((request, response) => {
    const { pathname } = new URL(request.url, 'http://localhost');
    const path = decodeURIComponent(pathname);
    const send = (status, type, body) => {
      response.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', ...ISOLATION_HEADERS });
      response.end(body);
    };
    if (path === '/resources/testharnessreport.js') return send(200, MIME['.js'], REPORT);
    if (path === '/resources/testdriver.js') return send(200, MIME['.js'], TESTDRIVER);
    if (path === '/resources/testdriver-vendor.js') return send(200, MIME['.js'], '');
    if (path.endsWith('.window.html')) {
      const test = fileFor(path.replace(/\.html$/, '.js'));
      if (test && existsSync(test)) return send(200, MIME['.html'], pageOf(test));
    }
    const file = fileFor(path);
    if (!file || !existsSync(file) || !statSync(file).isFile()) return send(404, 'text/plain', `not found: ${path}\n`);
    response.writeHead(200, {
      'content-type': MIME[extname(file)] ?? 'application/octet-stream', 'content-length': statSync(file).size,
      'cache-control': 'no-store', ...ISOLATION_HEADERS,
    });
    if (request.method === 'HEAD') response.end();
    else createReadStream(file).pipe(response);
  });
  return new Promise((resolvePromise, reject) => {
    server.once('error', reject);
    // localhost: a secure context in both browsers, over plain HTTP.
    server.listen(0, '127.0.0.1', () => resolvePromise(server));
  });
}

// ---- a file run in a page: its results, or what went wrong

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function runFile(browser, base, testPath) {
  const rel = relative(wptRoot, testPath).split(sep).join('/');
  const meta = metaOf(readFileText(testPath));
  // WPT's harness timeouts (its own timer ends the file first), and a margin for loading.
  const limit = (meta.timeout === 'long' ? 60000 : 10000) + 20000;
  const started = Date.now();
  let page = null;
  try {
    page = await browser.open(`${base}${rel.replace(/\.js$/, '.html')}`);
    for (;;) {
      const state = await page.evaluate(`async () => ({ results: window.__wptResults ?? null, installError: window.__wptInstallError ?? null,
        blessing: window.__wptBlessPending === true })`);
      if (state.blessing) {
        await page.click('#__wpt_bless'); // the user activation bless() asks for
        continue;
      }
      if (state.results) return { file: rel, ms: Date.now() - started, ...state.results, installError: state.installError };
      if (Date.now() - started > limit) {
        return { file: rel, ms: Date.now() - started, harness: { status: 2, message: `no results after ${limit / 1000} s (the page hung)` }, tests: [], installError: state.installError };
      }
      await sleep(100);
    }
  } catch (error) {
    return { file: rel, ms: Date.now() - started, harness: { status: 1, message: `runner: ${error.message}` }, tests: [] };
  } finally {
    const problems = page?.problems?.() ?? [];
    if (args.verbose && problems.length) console.log(`    ${problems.join('\n    ')}`);
    await page?.close().catch(() => {});
  }
}

async function runBrowser(name, base, files) {
  const missing = await browserMissing(name);
  if (missing) {
    console.log(`${name}: skipped (${missing})`);
    return { browser: name, skipped: missing, files: [] };
  }
  const browser = await launchBrowser(name);
  console.log(`\n== ${browser.version}`);
  const results = [];
  const started = Date.now();
  try {
    for (const file of files) {
      const rel = relative(wptRoot, file).split(sep).join('/');
      if (Date.now() - started > budgetMs) {
        results.push({ file: rel, harness: { status: -1, message: 'not run: the run\'s budget was spent' }, tests: [] });
        continue;
      }
      const result = await runFile(browser, base, file);
      results.push(result);
      const counts = count([result]);
      const harness = HARNESS_STATUS[result.harness.status] ?? 'NOTRUN';
      console.log(`${rel}: ${counts.pass}/${counts.total} passed (harness ${harness}${result.harness.message ? `: ${result.harness.message}` : ''}; ${(result.ms / 1000).toFixed(1)} s)`);
      for (const t of result.tests) {
        if (t.status !== 0) console.log(`   ${STATUS[t.status]}  ${t.name}${t.message ? ` -- ${t.message.replace(/\s+/g, ' ').slice(0, 300)}` : ''}`);
      }
      if (result.installError) console.log(`   (install: ${result.installError.split('\n')[0]})`);
    }
  } finally {
    await browser.close();
  }
  return { browser: name, version: browser.version, files: results };
}

function count(fileResults) {
  const c = { files: fileResults.length, total: 0, pass: 0, fail: 0, timeout: 0, notrun: 0, precondition: 0, harnessErrors: 0 };
  for (const r of fileResults) {
    if (r.harness.status !== 0) c.harnessErrors++;
    for (const t of r.tests) {
      c.total++;
      c[['pass', 'fail', 'timeout', 'notrun', 'precondition'][t.status]]++;
    }
  }
  return c;
}

const files = testFiles(join(wptRoot, 'ai', 'language-model'))
  .filter((f) => !args.filter || args.filter.some((text) => f.includes(text)));
const server = await startServer();
const base = `http://localhost:${server.address().port}/`;
console.log(`serving ${files.length} test files at ${base} (model: ${relative(process.cwd(), modelPath) || modelPath}${projectorPath ? `, projector: ${relative(process.cwd(), projectorPath)}` : ''})`);
const report = [];
try {
  for (const name of browsers) report.push(await runBrowser(name, base, files));
} finally {
  server.close();
}
console.log('\n== summary');
for (const r of report) {
  if (r.skipped) continue;
  const c = count(r.files);
  console.log(`${r.version}: ${c.files} files (${c.harnessErrors} with a harness error or timeout), ${c.total} subtests: ${c.pass} passed, ${c.fail} failed, ${c.timeout} timed out, ${c.notrun} not run, ${c.precondition} precondition failed`);
}
if (args.json) writeFileSync(args.json, `${JSON.stringify(report, null, 1)}\n`);

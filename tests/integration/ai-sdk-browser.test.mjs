// kvcache-wasm/ai-sdk with the models in a LlamaWorker, through the AI SDK's
// own functions (`ai`, bundled for the page by esbuild): in Chromium on a
// plain page (an import map for the package, as tests/integration/worker.test.mjs
// serves it) and in Node (the worker on a Node thread), the same calls --
// text, a second turn from the cache, a stream aborted mid-way and the
// model used after it, an object of a schema, a tool call run by the SDK
// -- give the same results, and each holds on its own.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ai from 'ai';
import { browserMissing, launchBrowser } from '../runtimes/browsers.mjs';
import { serveFiles } from '../runtimes/static-server.mjs';
import { PACKAGE, resolveExport } from '../runtimes/exports.mjs';
import Ajv from 'ajv';
import { PEOPLE, PERSON_SCHEMA, aiSdkScenario } from '../runtimes/ai-sdk-scenario.mjs';
import { MODEL_MISSING, MODEL_PATH, ready } from '../js/helpers.mjs';
import { nodeWorker } from '../js/node-worker.mjs';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { VOCABULARIES, hfVocabulary } from '../js/hf-tokenizers.mjs';
import { LlamaWorker } from '../../js/worker.js';
import { kvcache } from '../../js/ai-sdk.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SERVED = ['js/', 'dist/', 'tests/runtimes/ai-sdk-scenario.mjs', 'node_modules/@huggingface/jinja/dist/', 'node_modules/@mlc-ai/web-xgrammar/lib/'];
// SIMD128 in both, as Node runs by default: a random model's greedy reply may meet a near-tie that relaxed SIMD's rounding tips the other way.
const WORKER_OPTIONS = { init: { isa: 'wasm-simd128', threads: 1 } };
// Llama 3.2's template, whose tool call is the whole reply, over Llama 3's vocabulary: a small random block.
const LLAMA32 = JSON.parse(readFileSync(new URL('../fixtures/chat-templates.json', import.meta.url), 'utf8'))['llama-3.2-instruct'];
const GEOMETRY = { ...GEOMETRIES.tiny, name: 'vocabulary', dim: 64, hiddenDim: 128, numHeads: 2, numKvHeads: 1, tied: true, contextLength: 2048 };

let dir = null;
before(async () => {
  await ready();
  dir = mkdtempSync(join(tmpdir(), 'kvcache-ai-sdk-'));
  const vocabulary = hfVocabulary({ ...VOCABULARIES.llama3, config: { eos_token: LLAMA32.eos_token, chat_template: LLAMA32.chat_template } });
  writeFileSync(join(dir, 'tools.gguf'), encodeGguf(randomLlama(GEOMETRY, { tokenizer: vocabulary.entries, seed: 5, mix: 'Q8_0' })));
  const { build } = await import('esbuild');
  await build({ stdin: { contents: "export * from 'ai';", resolveDir: ROOT }, bundle: true, format: 'esm', platform: 'browser', outfile: join(dir, 'ai.js'), logLevel: 'warning' });
});
after(() => dir && rmSync(dir, { recursive: true, force: true }));

const validPerson = new Ajv().compile(PERSON_SCHEMA);

/** What the scenario must give wherever it runs. */
function assertScenario(result) {
  assert.equal(result.finishReason, 'length');
  assert.equal(result.usage.outputTokens, 24);
  assert.ok(result.nextUsage.cacheReadTokens >= result.usage.inputTokens + result.usage.outputTokens - 1, `the first turn came from the cache: ${JSON.stringify(result.nextUsage)}`);
  assert.equal(result.nextUsage.cacheReadTokens + result.nextUsage.noCacheTokens, result.nextUsage.inputTokens);
  assert.ok(result.parts.includes('abort'), result.parts.join(' '));
  assert.ok(result.parts.filter((type) => type === 'text-delta').length <= 6, result.parts.join(' '));
  // The worker goes on until the abort reaches it: a few milliseconds, dozens of stories260K's tokens -- but not the 200 asked for.
  assert.ok(result.tokensAfterAbort < 150, `the reply stopped at the abort (${result.tokensAfterAbort} tokens)`);
  assert.equal(result.again, result.text, 'the model answers after the abort as before it');
  assert.ok(['cat', 'dog'].includes(result.object.pet) && typeof result.object.name === 'string' && result.object.name.length <= 12, JSON.stringify(result.object));
  assert.equal(result.people.length, PEOPLE);
  for (const person of result.people) assert.ok(validPerson(person), `${JSON.stringify(person)}: ${JSON.stringify(validPerson.errors)}`);
  assert.ok(new Set(result.people.map((p) => JSON.stringify(p))).size > PEOPLE * 0.8, 'the weights, not a fixed answer, chose them');
  assert.deepEqual(result.steps, ['tool-calls', 'tool-calls', 'length']);
  assert.equal(result.ran.length, 2);
  assert.deepEqual(result.calls, [['get_weather', { city: result.ran[0] }], ['get_time', { zone: result.ran[1] }]]);
}

let inNode = null;
test('Node: the models in a LlamaWorker on a Node thread, through the AI SDK', { skip: MODEL_MISSING ?? false }, async () => {
  inNode = await aiSdkScenario({ LlamaWorker, kvcache, ai }, {
    stories: new Uint8Array(readFileSync(MODEL_PATH)), tools: new Uint8Array(readFileSync(join(dir, 'tools.gguf'))),
    // A thread of eval'd script has CommonJS's exports and module as globals, which send the structured-output engine's
    // UMD file down its CommonJS path: taken away, as a worker of a module file has neither.
    workerOptions: { ...WORKER_OPTIONS, worker: () => nodeWorker('globalThis.exports = undefined; globalThis.module = undefined;') },
  });
  assertScenario(inNode);
});

function importMap() {
  const imports = Object.fromEntries(['./worker', './ai-sdk'].map((subpath) =>
    [`kvcache-wasm${subpath.slice(1)}`, resolveExport(PACKAGE, subpath, ['browser', 'default']).slice(1)]));
  imports['@huggingface/jinja'] = '/node_modules/@huggingface/jinja/dist/index.js';
  imports['@mlc-ai/web-xgrammar'] = '/node_modules/@mlc-ai/web-xgrammar/lib/index.js';
  imports.ai = '/ai.js';
  return `<script type="importmap">${JSON.stringify({ imports })}</script>`;
}

const page = () => `<!doctype html><meta charset="utf-8"><title>kvcache-wasm ai-sdk</title><link rel="icon" href="data:,">
${importMap()}
<script type="module">
import { LlamaWorker } from 'kvcache-wasm/worker';
import { kvcache } from 'kvcache-wasm/ai-sdk';
import * as ai from 'ai';
import { aiSdkScenario } from '/tests/runtimes/ai-sdk-scenario.mjs';
window.done = aiSdkScenario({ LlamaWorker, kvcache, ai }, { stories: '/model.gguf', tools: '/tools.gguf', workerOptions: ${JSON.stringify(WORKER_OPTIONS)} })
  .then((result) => ({ result }), (error) => ({ error: \`\${error}\${error?.stack ? \`\\n\${error.stack}\` : ''}\` }));
</script>`;

function fileFor(pathname) {
  if (pathname === '/model.gguf') return MODEL_PATH;
  if (['/tools.gguf', '/ai.js'].includes(pathname)) return join(dir, pathname.slice(1));
  const path = posix.normalize(pathname).slice(1);
  const file = join(ROOT, path);
  return SERVED.some((prefix) => path.startsWith(prefix)) && existsSync(file) && statSync(file).isFile() ? file : null;
}

test('Chromium: the same calls on a page, the models in a LlamaWorker, give what Node gave', { skip: MODEL_MISSING ?? false }, async (t) => {
  const missing = await browserMissing('chromium');
  if (missing) return t.skip(missing);
  const server = await serveFiles(fileFor, { isolated: false, pages: { '/': page } });
  const browser = await launchBrowser('chromium');
  try {
    const tab = await browser.open(`http://127.0.0.1:${server.address().port}/`);
    const { result, error } = await tab.evaluate('async () => window.done');
    assert.equal(error, undefined, error);
    t.diagnostic(`${browser.version}: ${JSON.stringify(result.text)}; ${result.parts.length} stream parts to the abort; ${JSON.stringify(result.object)}; called with ${JSON.stringify(result.calls)}`);
    assertScenario(result);
    // All but where the abort fell, which is timing.
    const same = ({ parts, tokensAfterAbort, ...rest }) => rest;
    if (inNode) assert.deepEqual(same(result), same(inNode), 'the page\'s results are Node\'s');
    assert.deepEqual([...tab.problems?.() ?? []], [], 'no console errors');
  } finally {
    await browser.close();
    server.close();
  }
});

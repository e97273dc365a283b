// The JavaScript examples of README.md and of every guide in docs/ (```js;
// ```javascript marks browser-only ones, not run here) run as written and
// print what their comments say; a Worker example (export default { fetch })
// is imported and fetched, and responds what its comment says (models it
// downloads by name stood in for by tiny random files). The README's quick
// start shows a progress bar that must survive a load of unknown size.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { MODEL_MISSING, MODEL_PATH } from './helpers.mjs';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { writeGgufFile } from '../gguf/writer.mjs';

const root = new URL('../../', import.meta.url);
const pages = ['README.md', ...readdirSync(new URL('docs/', root)).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
const text = Object.fromEntries(pages.map((page) => [page, readFileSync(new URL(page, root), 'utf8')]));
const examples = pages.flatMap((page) => [...text[page].matchAll(/```js\n([\s\S]*?)```/g)]
  .map((match, n) => ({ page, n: n + 1, source: match[1] })));

// Where the examples are: one that disappears, or moves without this table
// knowing, fails here rather than going untested in silence.
const EXPECTED = {
  'docs/ai-sdk.md': 1, // generateText, streamText, an object, through the AI SDK
  'docs/cache.md': 5, // a layer; shared layers; verify and accept; eviction and snapshots; forks and a prefix cache
  'docs/chat.md': 1, // streaming, Chat, save and restore
  'docs/embeddings.md': 1, // embed, search, rerank, answer with the chat
  'docs/install.md': 2, // a Cloudflare Worker; threads
  'docs/models.md': 1, // Llama.load from disk, generate
  'docs/prompt-api.md': 1, // LanguageModel.create, prompt, clone
  'docs/stored-models.md': 2, // a store in Node: a model downloaded once, a conversation restored; a system prompt computed once
  'docs/structured-output.md': 1, // a JSON Schema, a grammar, completions() with json_object
};

const indexUrl = new URL('../../js/index.js', import.meta.url).href;
const llamaUrl = new URL('../../js/llama.js', import.meta.url).href;
const chatUrl = new URL('../../js/chat.js', import.meta.url).href;
const promptApiUrl = new URL('../../js/prompt-api.js', import.meta.url).href;

// The models an example downloads by name, stood in for by tiny random files
// of their architectures (tests/gguf/models.mjs): the example's calls run,
// offline; what the real models compute is other tests' business.
const STAND_INS = {
  'hf:ggml-org/embeddinggemma-300M-GGUF:Q8_0': 'tiny-embeddinggemma',
  'hf:ggml-org/Qwen3-Reranker-0.6B-Q8_0-GGUF:Q8_0': 'tiny-qwen3-reranker',
};
const standInDir = mkdtempSync(join(tmpdir(), 'kvcache-readme-'));
after(() => rmSync(standInDir, { recursive: true, force: true }));

/** `example` with each name of STAND_INS read from its stand-in's file instead. */
function standingIn(example) {
  let source = example;
  for (const [name, geometry] of Object.entries(STAND_INS)) {
    if (!source.includes(`'${name}'`)) continue;
    const path = join(standInDir, `${geometry}.gguf`);
    writeGgufFile(path, randomLlama(GEOMETRIES[geometry], { mix: 'Q8_0' }));
    source = source.replaceAll(`'${name}'`, `await (await import('node:fs')).openAsBlob(${JSON.stringify(path)})`);
  }
  return source;
}

/** Runs an example as a module: the lines it printed, and the module. */
async function run(example, n) {
  const file = new URL(`./readme-example-${process.pid}-${n}.mjs`, import.meta.url);
  const printed = [];
  let module;
  const log = console.log;
  const source = standingIn(example)
    .replace("from 'kvcache-wasm'", `from '${indexUrl}'`)
    .replace("from 'kvcache-wasm/llama'", `from '${llamaUrl}'`)
    .replace("from 'kvcache-wasm/chat'", `from '${chatUrl}'`)
    .replace("from 'kvcache-wasm/prompt-api'", `from '${promptApiUrl}'`)
    .replace("'../shared/data/stories260k.gguf'", JSON.stringify(MODEL_PATH));
  await writeFile(file, source);
  try {
    console.log = (...args) => printed.push(args.join(' '));
    module = await import(file.href);
  } finally {
    console.log = log;
    await rm(fileURLToPath(file));
  }
  return { printed, module };
}

/** The numbers a `console.log(...); // a b c` line promises. */
function promised(example) {
  const comment = example.match(/console\.log\(.*\);\s*\/\/ (.*)/)[1];
  return comment.split(' ');
}

test('the README and the guides have their examples, where this test expects them', () => {
  const found = {};
  for (const { page } of examples) found[page] = (found[page] ?? 0) + 1;
  assert.deepEqual(found, EXPECTED);
  assert.equal(examples.length, 15);
});

examples.forEach(({ page, n, source: example }, i) => {
  test(`${page} example ${n} runs and prints what its comment says`, async (t) => {
    if (example.includes('stories260k.gguf') && MODEL_MISSING) return t.skip(MODEL_MISSING);
    const { printed: [line], module } = await run(example, i);
    if (typeof module.default?.fetch === 'function') {
      const response = await module.default.fetch(new Request('http://worker.test/'));
      assert.equal(await response.text(), example.match(/\/\/ responds: (.*)/)[1]);
      return;
    }
    const got = line.split(' ');
    promised(example).forEach((want, j) => {
      if (want !== '…') assert.equal(got[j], want, `value ${j + 1} of "${line}"`);
    });
  });
});

/** The README quick start's onProgress handler (its first ```javascript block), made with `bar` in scope. */
function quickStartProgress(readme, bar) {
  const quickStart = readme.match(/```javascript\n([\s\S]*?)```/)[1];
  const handler = quickStart.match(/onProgress: (\(\{ loaded, total \}\) => \{.*\}),/)?.[1];
  assert.ok(handler, 'the quick start has an onProgress: ({ loaded, total }) => { ... }, handler');
  return new Function('bar', `return (${handler});`)(bar);
}

test('the README quick start\'s progress bar takes a load of unknown size (total null, as for a compressed response)', () => {
  // As HTMLProgressElement's value does: a non-finite number is a TypeError.
  let value = 0;
  const bar = {
    get value() { return value; },
    set value(v) {
      if (!Number.isFinite(v)) throw new TypeError(`The provided double value is non-finite (${v})`);
      value = v;
    },
  };
  const onProgress = quickStartProgress(text['README.md'], bar);
  assert.doesNotThrow(() => onProgress({ loaded: 10, total: null }));
  assert.doesNotThrow(() => onProgress({ loaded: 10, total: 100 }));
  assert.equal(bar.value, 0.1);
});

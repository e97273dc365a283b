// The README's JavaScript examples (```js; ```javascript marks browser-only ones,
// not run here) run as written and print what their comments say;
// a Worker example (export default { fetch }) is imported and fetched, and
// responds what its comment says.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { MODEL_MISSING, MODEL_PATH } from './helpers.mjs';

const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8');
const examples = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((match) => match[1]);
const indexUrl = new URL('../../js/index.js', import.meta.url).href;
const llamaUrl = new URL('../../js/llama.js', import.meta.url).href;
const chatUrl = new URL('../../js/chat.js', import.meta.url).href;

/** Runs an example as a module: the lines it printed, and the module. */
async function run(example, n) {
  const file = new URL(`./readme-example-${process.pid}-${n}.mjs`, import.meta.url);
  const printed = [];
  let module;
  const log = console.log;
  const source = example
    .replace("from 'kvcache-wasm'", `from '${indexUrl}'`)
    .replace("from 'kvcache-wasm/llama'", `from '${llamaUrl}'`)
    .replace("from 'kvcache-wasm/chat'", `from '${chatUrl}'`)
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

test('the README has its examples', () => {
  assert.equal(examples.length, 8);
});

examples.forEach((example, n) => {
  test(`README example ${n + 1} runs and prints what its comment says`, async (t) => {
    if (example.includes('stories260k.gguf') && MODEL_MISSING) return t.skip(MODEL_MISSING);
    const { printed: [line], module } = await run(example, n);
    if (typeof module.default?.fetch === 'function') {
      const response = await module.default.fetch(new Request('http://worker.test/'));
      assert.equal(await response.text(), example.match(/\/\/ responds: (.*)/)[1]);
      return;
    }
    const got = line.split(' ');
    promised(example).forEach((want, i) => {
      if (want !== '…') assert.equal(got[i], want, `value ${i + 1} of "${line}"`);
    });
  });
});

// The README's JavaScript example runs as written.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile, rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

test('the README example runs and prints what its comment says', async () => {
  const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8');
  const example = readme.match(/```js\n([\s\S]*?)```/)[1];
  const indexUrl = new URL('../../js/index.js', import.meta.url).href;
  const source = example.replace("from 'kvcache-wasm'", `from '${indexUrl}'`);
  const file = new URL(`./readme-example-${process.pid}.mjs`, import.meta.url);
  const printed = [];
  const log = console.log;
  await writeFile(file, source);
  try {
    console.log = (...args) => printed.push(args.join(' '));
    await import(file.href);
  } finally {
    console.log = log;
    await rm(fileURLToPath(file));
  }
  const [seqLen, head2Rows, memoryBytes] = printed[0].split(' ').map(Number);
  assert.deepEqual([seqLen, head2Rows], [2, 1]);
  assert.ok(memoryBytes > 0);
});

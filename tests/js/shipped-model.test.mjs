// The model a fresh clone runs (models/stories260k.gguf, the demo's and the
// CLI's default): the file models/README.md describes -- its sha256 and
// size as that page gives them -- and a model that loads and writes the
// opening published with it.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ready } from './helpers.mjs';
import { Llama } from '../../js/llama.js';

await ready();
const file = fileURLToPath(new URL('../../models/stories260k.gguf', import.meta.url));
const readme = readFileSync(new URL('../../models/README.md', import.meta.url), 'utf8');

test('models/stories260k.gguf is the file its README describes: the sha256 and size it gives', () => {
  const [, sha256, bytes] = /sha256 `([0-9a-f]{64})`, ([\d,]+) bytes/.exec(readme) ?? [];
  assert.ok(sha256, 'the README gives the sha256 and size');
  const data = readFileSync(file);
  assert.equal(data.length, Number(bytes.replaceAll(',', '')));
  assert.equal(createHash('sha256').update(data).digest('hex'), sha256);
});

test('models/stories260k.gguf loads and, greedy from <s>, writes the opening published with it', () => {
  const llama = Llama.fromGguf(readFileSync(file));
  try {
    const [, opening] = /writes the opening published with the model: "([^."]+)/.exec(readme.replace(/\s+/g, ' ')) ?? [];
    assert.ok(opening, 'the README quotes the opening');
    const session = llama.session();
    const ids = [];
    let { logits } = session.prefill([llama.tokenizer.bosId], { logits: true });
    for (let i = 0; i < 24; i++) {
      let best = 0;
      for (let j = 1; j < logits.length; j++) if (logits[j] > logits[best]) best = j;
      ids.push(best);
      ({ logits } = session.prefill([llama.tokenizer.bosId, ...ids], { logits: true }));
    }
    session.free();
    const text = llama.tokenizer.decode(ids).trimStart();
    assert.ok(text.startsWith(opening), text);
  } finally {
    llama.free();
  }
});

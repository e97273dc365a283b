// Split GGUF files (llama.cpp's gguf-split: `<name>-0000k-of-0000N.gguf`,
// the first part with every metadata entry, each with split.no, split.count
// and split.tensors.count, the tensors shared out in order): the parts load
// as the one file they were cut from -- the same tensors and the same logits
// to the bit -- given as a list or found from one part's URL, through a
// store each part stored and resumed on its own; a missing, foreign,
// misplaced or truncated part is refused by name.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KvCache } from '../../js/index.js';
import { Llama, ModelStore } from '../../js/llama.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf, splitSpec } from '../gguf/writer.mjs';
import { serveModels } from '../runtimes/model-server.mjs';
import { ready } from './helpers.mjs';

const spec = randomLlama(GEOMETRIES.tiny, { mix: 'Q4_K_M', seed: 3 });
const whole = encodeGguf(spec);
const parts = splitSpec(spec, 3).map(encodeGguf);
const PROMPT = [1, 5, 9, 200, 31, 7, 64, 2];
let dir;
let server;

before(async () => {
  await ready();
  dir = mkdtempSync(join(tmpdir(), 'kvc-split-'));
  const files = {};
  parts.forEach((bytes, i) => {
    const name = `tiny-${String(i + 1).padStart(5, '0')}-of-00003.gguf`;
    writeFileSync(join(dir, name), bytes);
    files[`/models/${name}`] = join(dir, name);
  });
  // Another model's part 2, and a part 2 that says it is part 3.
  const other = splitSpec(randomLlama(GEOMETRIES.tiny, { mix: 'Q8_0', seed: 4 }), 2).map(encodeGguf);
  writeFileSync(join(dir, 'foreign.gguf'), other[1]);
  files['/models/mixed-00001-of-00003.gguf'] = files['/models/tiny-00001-of-00003.gguf'];
  files['/models/mixed-00002-of-00003.gguf'] = join(dir, 'foreign.gguf');
  files['/models/mixed-00003-of-00003.gguf'] = files['/models/tiny-00003-of-00003.gguf'];
  files['/models/gap-00001-of-00003.gguf'] = files['/models/tiny-00001-of-00003.gguf'];
  files['/models/gap-00003-of-00003.gguf'] = files['/models/tiny-00003-of-00003.gguf'];
  server = await serveModels(files);
});
after(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The logits of PROMPT, all positions. */
function logits(llama) {
  const { numLayers, numKvHeads, headDim } = llama.config;
  const cache = new KvCache({ numLayers, numKvHeads, headDim });
  try {
    return llama.forward(cache, PROMPT);
  } finally {
    cache.free();
  }
}

test('the parts load as the file they were cut from: the same tensors, the same logits to the bit', async () => {
  const one = Llama.fromGguf(whole);
  const joined = await Llama.load(parts);
  const described = (llama) => [...llama.tensors.values()].map(({ name, type, dims }) => [name, type, dims]);
  assert.deepEqual(described(joined), described(one));
  assert.deepEqual(joined.config, one.config);
  assert.deepEqual(Buffer.from(logits(joined).buffer), Buffer.from(logits(one).buffer));
  const blobs = await Llama.load(parts.map((bytes, i) => new File([bytes], `tiny-0000${i + 1}-of-00003.gguf`)));
  assert.equal(blobs.digest, joined.digest);
  for (const llama of [one, joined, blobs]) llama.free();
});

test('one part\'s URL finds the others; through a store each part is stored, and the next load makes no request', async () => {
  const one = Llama.fromGguf(whole);
  const expected = Buffer.from(logits(one).buffer);
  one.free();
  const found = await Llama.load(server.url('/models/tiny-00002-of-00003.gguf'));
  assert.deepEqual(Buffer.from(logits(found).buffer), expected);
  found.free();
  const store = await ModelStore.open({ directory: join(dir, 'store'), persist: false });
  const size = parts.reduce((sum, p) => sum + p.length, 0);
  server.faults.dropAt = Math.floor(parts[0].length / 2);
  await assert.rejects(Llama.load(server.url('/models/tiny-00001-of-00003.gguf'), { store }), { name: 'TypeError' });
  const before = server.stats.bytes;
  const stored = await Llama.load(server.url('/models/tiny-00001-of-00003.gguf'), { store });
  assert.ok(server.stats.bytes - before < size, 'part 1 resumed');
  assert.deepEqual(Buffer.from(logits(stored).buffer), expected);
  const entries = await store.list();
  assert.equal(entries.length, 3);
  assert.ok(entries.every((e) => e.complete && e.digest === stored.digest));
  stored.free();
  const requests = server.stats.requests;
  const again = await Llama.load(server.url('/models/tiny-00003-of-00003.gguf'), { store });
  assert.equal(server.stats.requests, requests);
  assert.deepEqual(Buffer.from(logits(again).buffer), expected);
  again.free();
});

test('a missing, foreign, misplaced or truncated part is refused by name', async () => {
  await assert.rejects(Llama.load(server.url('/models/gap-00001-of-00003.gguf')), /gap-00002-of-00003\.gguf was 404/);
  await assert.rejects(Llama.load(server.url('/models/mixed-00001-of-00003.gguf')),
    /mixed-00002-of-00003\.gguf is not part 2 of 3 of this model: its split\.no is 1 \(part 2\), split\.count 2 and split\.tensors\.count \d+, where the first part's is \d+/);
  await assert.rejects(Llama.load([parts[1], parts[0], parts[2]]), /a part given as bytes or a stream is not part 1 of 3/);
  await assert.rejects(Llama.load([parts[0], parts[1]]), /is not part 1 of 2 of this model: its split\.no is 0 \(part 1\), split\.count 3/);
  await assert.rejects(Llama.load([parts[0], parts[1], parts[2].subarray(0, parts[2].length - 100)]), /truncated/);
  await assert.rejects(Llama.load([parts[0]]), /a split model's parts are two or more sources \(got 1\)/);
});

// Gemma 4's per-layer embeddings outside the wasm heap: kept in JavaScript
// (a view of Llama.fromGguf's bytes, or copied as Llama.load streams the
// file), or read through the app's own reader, synchronous (here Node's
// fs.readSync on the file) or asynchronous (here a Blob of it) -- each gives
// exactly the logits of the table in the heap, holds the table's bytes out of
// the weights, and names the file by the same digest; a read that fails
// mid-prefill fails the pass whole and leaves the cache as it was.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openAsBlob, openSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Llama } from '../../js/llama.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { bitsEqual, ready } from './helpers.mjs';
import { PROMPT } from './session-cases.mjs';

let bytes, dir, path, fd;
before(async () => {
  await ready();
  bytes = encodeGguf(randomLlama(GEOMETRIES['tiny-gemma4'], { mix: 'Q4_K_M', seed: 5 }));
  dir = mkdtempSync(join(tmpdir(), 'kvcache-per-layer-'));
  path = join(dir, 'tiny-gemma4.gguf');
  writeFileSync(path, bytes);
  fd = openSync(path, 'r');
});
after(() => {
  closeSync(fd);
  rmSync(dir, { recursive: true, force: true });
});

/** Node's reader of the file: `length` bytes at `offset`. */
const fileReader = (reads = { count: 0 }) => ({
  read(offset, length) {
    reads.count++;
    const out = new Uint8Array(length);
    readSync(fd, out, 0, length, offset);
    return out;
  },
});

/** The logits of PROMPT's prefill and of five steps after it, in one array each. */
function run(llama) {
  const session = llama.session();
  const out = [llama.forward(session.cache, PROMPT, { logits: 'all' })];
  for (const token of [5, 6, 7, 8, 9]) out.push(llama.forward(session.cache, [token], { logits: 'last' }));
  session.free();
  return out;
}

test('the per-layer embeddings outside the heap, in JavaScript or read from the file, give the logits of the table in the heap', async () => {
  const table = randomLlama(GEOMETRIES['tiny-gemma4'], { mix: 'Q4_K_M', seed: 5 }).tensors.find((t) => t.name === 'per_layer_token_embd.weight');
  const inHeap = Llama.fromGguf(bytes, { perLayerEmbeddings: 'heap' });
  const kept = Llama.fromGguf(bytes);
  const reads = { count: 0 };
  const fromFile = Llama.fromGguf(bytes, { perLayerEmbeddings: fileReader(reads) });
  const streamed = await Llama.load(await openAsBlob(path));
  const expected = run(inHeap);
  for (const llama of [kept, fromFile, streamed]) {
    const got = run(llama);
    got.forEach((logits, i) => assert.ok(bitsEqual(logits, expected[i]), `pass ${i}`));
  }
  assert.ok(reads.count > 0 && reads.count <= new Set(PROMPT).size + 5 * 2, `rows read once a distinct token a pass (${reads.count})`);
  const tableBytes = inHeap.tensors.get('per_layer_token_embd.weight').bytes;
  assert.equal(kept.memoryBytes.weights, inHeap.memoryBytes.weights - tableBytes);
  assert.equal(fromFile.memoryBytes.weights, inHeap.memoryBytes.weights - tableBytes);
  assert.equal(kept.memoryBytes.perLayerOutside, tableBytes);
  assert.equal(streamed.memoryBytes.perLayerOutside, tableBytes);
  assert.equal(fromFile.memoryBytes.perLayerOutside, 0);
  assert.equal(inHeap.memoryBytes.perLayerOutside, 0);
  assert.ok(table && tableBytes > 0);
  // One file, one digest, wherever its table is.
  for (const llama of [kept, fromFile, streamed]) assert.equal(llama.digest, inHeap.digest);
  for (const llama of [inHeap, kept, fromFile, streamed]) llama.free();
});

test('a read that fails mid-prefill fails the pass whole: the cache is as it was, and goes on as one that never saw it', () => {
  let failAfter = Infinity;
  let reads = 0;
  const reader = {
    read(offset, length) {
      if (++reads > failAfter) throw new Error('the storage went away');
      const out = new Uint8Array(length);
      readSync(fd, out, 0, length, offset);
      return out;
    },
  };
  const llama = Llama.fromGguf(bytes, { perLayerEmbeddings: reader });
  const session = llama.session();
  llama.forward(session.cache, PROMPT.slice(0, 50), { logits: 0 });
  const before = session.cache.serialize();
  const memory = session.cache.memoryBytes;
  reads = 0;
  failAfter = 20; // inside the next prefill's reads
  assert.throws(() => llama.forward(session.cache, PROMPT.slice(50), { logits: 0 }), /the storage went away/);
  assert.deepEqual(session.cache.serialize(), before);
  assert.equal(session.cache.memoryBytes, memory);
  failAfter = Infinity;
  const other = llama.session();
  llama.forward(other.cache, PROMPT.slice(0, 50), { logits: 0 });
  assert.ok(bitsEqual(llama.forward(session.cache, PROMPT.slice(50), { logits: 'last' }), llama.forward(other.cache, PROMPT.slice(50), { logits: 'last' })));
  other.free();
  session.free();
  llama.free();
});

test('bad perLayerEmbeddings options and readers are refused, naming them', () => {
  assert.throws(() => Llama.fromGguf(bytes, { perLayerEmbeddings: 'disk' }), /options\.perLayerEmbeddings must be 'outside', 'heap', \{ read\(offset, length\) \} or \{ readAsync\(offset, length\) \}/);
  assert.throws(() => Llama.fromGguf(bytes, { perLayer: 'heap' }), /perLayer/);
  const short = Llama.fromGguf(bytes, { perLayerEmbeddings: { read: (offset, length) => new Uint8Array(length - 1) } });
  const session = short.session();
  assert.throws(() => short.forward(session.cache, [1, 2, 3]), /options\.perLayerEmbeddings\.read\(\d+, \d+\) must give a Uint8Array of \d+ bytes/);
  assert.equal(session.cache.nextPosition, 0);
  session.free();
  short.free();
});

test('an asynchronous reader (a Blob of the file) serves a session\'s replies, which match the table in the heap; a bare forward pass asks for its rows first', async () => {
  const blob = await openAsBlob(path);
  let reads = 0;
  const readAsync = async (offset, length) => {
    reads++;
    return new Uint8Array(await blob.slice(offset, offset + length).arrayBuffer());
  };
  const fromBlob = await Llama.load(blob, { perLayerEmbeddings: { readAsync } });
  const inHeap = Llama.fromGguf(bytes, { perLayerEmbeddings: 'heap' });
  assert.equal(fromBlob.memoryBytes.perLayerOutside, 0);
  assert.equal(fromBlob.digest, inHeap.digest);
  const replies = [];
  for (const llama of [inHeap, fromBlob]) {
    const session = llama.session();
    const tokens = [];
    for await (const piece of session.respond(PROMPT.slice(0, 80), { temperature: 0, maxTokens: 24, draft: 4 })) tokens.push(...piece.tokens);
    for await (const piece of session.respond([...PROMPT.slice(0, 80), ...tokens, 11, 12], { temperature: 0, maxTokens: 8 })) tokens.push(...piece.tokens);
    replies.push(tokens);
    session.free();
  }
  assert.deepEqual(replies[1], replies[0]);
  assert.ok(reads > 0);
  // A forward pass of its own reads no rows: they are read first, asynchronously.
  const session = fromBlob.session();
  assert.throws(() => fromBlob.forward(session.cache, [900, 901]), /token 900's per-layer row is not read yet/);
  assert.equal(session.cache.nextPosition, 0);
  await fromBlob.preparePerLayerRows([900, 901]);
  assert.ok(bitsEqual(fromBlob.forward(session.cache, [900, 901]), inHeap.forward(inHeap.session().cache, [900, 901])));
  await assert.rejects(() => session.generate([1, 2], { draft: 2, draftSession: inHeap.session() }).next(), /draftSession/);
  session.free();
  // A read that fails: the reply fails before any pass, and the session is as it was.
  const failing = await Llama.load(blob, { perLayerEmbeddings: { readAsync: async () => { throw new Error('the object store went away'); } } });
  const cut = failing.session();
  await assert.rejects(async () => {
    for await (const piece of cut.respond(PROMPT.slice(0, 40), { maxTokens: 4 })) assert.ok(piece);
  }, /the object store went away/);
  assert.equal(cut.cache.nextPosition, 0);
  assert.deepEqual(cut.tokens, []);
  cut.free();
  failing.free();
  fromBlob.free();
  inHeap.free();
});

// Llama.load from a server that has no model at the URL: a 404, or the HTML
// page a dev server answers in place of a file it lacks (status 200), is
// refused saying what the response was -- not "not a GGUF file" -- from a
// Response, a URL, and through LlamaWorker.load (the package's worker, run
// here on a Node thread that stands in for a Web Worker). A fetched body
// waiting unread (a split model's first part while the others are fetched)
// is read whole after its Response is collected.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { GgufError, Llama } from '../../js/llama.js';
import { LlamaWorker } from '../../js/worker.js';
import { sourceChunks } from '../../js/store/sources.js';
import { ready } from './helpers.mjs';
import { nodeWorker } from './node-worker.mjs';

const PAGE = '<!DOCTYPE html>\n<html><head><title>App</title></head><body><div id="app"></div></body></html>\n';
// Path -> [status, content type, body].
const ROUTES = {
  '/fallback.gguf': [200, 'text/html; charset=utf-8', PAGE], // a dev server's fallback page
  '/unlabelled.gguf': [200, 'application/octet-stream', PAGE], // an HTML page by its first bytes only
  '/bytes.bin': [200, 'application/octet-stream', Buffer.alloc(300_000, 7)],
};

let server;
let base;
before(async () => {
  await ready();
  server = createServer((request, response) => {
    const [status, type, body] = ROUTES[request.url] ?? [404, 'text/plain', 'Not Found'];
    response.writeHead(status, { 'content-type': type }).end(body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => server?.close());

/** The message a load of `path` is refused with, as a GgufError. */
async function refusal(load) {
  let refused;
  await assert.rejects(load(), (error) => {
    refused = error;
    return error instanceof GgufError;
  });
  return refused.message;
}

const missing = (where) => `${where}: the response for ${base}/missing.gguf was 404 Not Found, not a model file`;
const fallback = (where) => `${where}: the server answered ${base}/fallback.gguf with an HTML page (content type text/html; charset=utf-8) ` +
  'where a GGUF file was expected';

test('a fetched body left unread is read whole after its Response is collected', async () => {
  setFlagsFromString('--expose-gc');
  const collect = runInNewContext('gc');
  const { chunks } = await sourceChunks('test', `${base}/bytes.bin`);
  // Node's fetch cancels an unlocked body when its Response is collected (its finalizer runs a task later).
  for (let round = 0; round < 3; round++) {
    collect();
    await new Promise((resolve) => { setTimeout(resolve, 10); });
  }
  let read = 0;
  for await (const chunk of chunks) read += chunk.length;
  assert.equal(read, 300_000);
});

test('Llama.load of a 404 Response or URL names the status, its text and the URL', async () => {
  assert.equal(await refusal(async () => Llama.load(await fetch(`${base}/missing.gguf`))), missing('Llama.load'));
  assert.equal(await refusal(() => Llama.load(`${base}/missing.gguf`)), missing('Llama.load'));
  assert.equal(await refusal(() => Llama.load(new URL('/missing.gguf', base))), missing('Llama.load'));
});

test('Llama.load of an HTML page says the server answered with one where a GGUF file was expected', async () => {
  assert.equal(await refusal(async () => Llama.load(await fetch(`${base}/fallback.gguf`))), fallback('Llama.load'));
  assert.equal(await refusal(() => Llama.load(`${base}/fallback.gguf`)), fallback('Llama.load'));
  // Not labelled HTML, but it begins as a page.
  assert.equal(await refusal(() => Llama.load(`${base}/unlabelled.gguf`)),
    `Llama.load: the server answered ${base}/unlabelled.gguf with an HTML page (it begins <!DOCTYPE) where a GGUF file was expected`);
});

describe('LlamaWorker.load', () => {
  let worker;
  before(() => {
    worker = new LlamaWorker({ worker: () => nodeWorker(), init: { threads: 1 } });
  });
  after(() => worker?.terminate());

  test('refuses a 404 and an HTML page as Llama.load does: a Response on the page, a URL in the worker', async () => {
    assert.equal(await refusal(async () => worker.load(await fetch(`${base}/missing.gguf`))), missing('LlamaWorker.load'));
    assert.equal(await refusal(async () => worker.load(await fetch(`${base}/fallback.gguf`))), fallback('LlamaWorker.load'));
    assert.equal(await refusal(() => worker.load(`${base}/missing.gguf`)), missing('Llama.load'));
    assert.equal(await refusal(() => worker.load(`${base}/fallback.gguf`)), fallback('Llama.load'));
  });

  test('refuses a per-layer embeddings reader, whose functions cannot go to the worker', async () => {
    await assert.rejects(worker.load(`${base}/missing.gguf`, { perLayerEmbeddings: { read: () => new Uint8Array(0) } }),
      /LlamaWorker\.load: options\.perLayerEmbeddings must be 'outside' or 'heap' for a model in a worker/);
  });
});

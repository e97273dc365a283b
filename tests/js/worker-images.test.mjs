// Images through the worker (kvcache-wasm/worker): a model loaded with its
// projector in the package's worker (on a Node thread standing in for a Web
// Worker, node-worker.mjs) prepares an image as the same files do on this
// thread -- the same digest and token ids -- and a Chat or completions()
// over its RemoteSession replies to a message with an image as over a
// LlamaSession. An image crosses without a copy: pixels decoded on the page
// are transferred (their buffer leaves the page), and where the worker can
// decode (a browser's worker has createImageBitmap and OffscreenCanvas, stood
// in here by a PNG decoder) an encoded image goes to it as it is. Bad input
// is refused saying why.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { PNG } from 'pngjs';
import { Llama } from '../../js/llama.js';
import { LlamaWorker } from '../../js/worker.js';
import { Chat, completions } from '../../js/chat.js';
import { encodeGguf } from '../gguf/writer.mjs';
import { TINY_PROJECTORS, pairedLanguageModel, randomProjector } from '../gguf/vision.mjs';
import { encodePng, testImage } from '../runtimes/png.mjs';
import { ready } from './helpers.mjs';
import { nodeWorker } from './node-worker.mjs';

const GEOMETRY = TINY_PROJECTORS.idefics3;
const REPLY = { temperature: 0, maxTokens: 6 };
const QUESTION = 'What is in the picture?';

// A worker that decodes images as a browser's does: createImageBitmap and an
// OffscreenCanvas to read its pixels, over a PNG decoder; `decoded` counts
// the images it was sent encoded.
const DECODING = `
  const { PNG } = require('node:module').createRequire(${JSON.stringify(createRequire(import.meta.url).resolve('pngjs'))})('pngjs');
  globalThis.decoded = 0;
  globalThis.createImageBitmap = async (blob) => {
    globalThis.decoded++;
    const { width, height, data } = PNG.sync.read(Buffer.from(await blob.arrayBuffer()));
    return { width, height, data, close() {} };
  };
  globalThis.OffscreenCanvas = class {
    getContext() {
      let drawn;
      return {
        drawImage: (bitmap) => { drawn = bitmap; },
        getImageData: () => ({ width: drawn.width, height: drawn.height, data: new Uint8ClampedArray(drawn.data) }),
      };
    }
  };`;

/** A PNG decoder for the page, as an app passes decodeImage: each call's pixels are a buffer of their own. */
const decodePng = (bytes) => {
  const { width, height, data } = PNG.sync.read(Buffer.from(bytes));
  return { width, height, data: new Uint8Array(data) };
};

let modelBytes;
let projectorBytes;
let local; // the same files on this thread: what the worker's answers are compared with
const image = testImage(40, 30, 7);
const png = encodePng(image);

before(async () => {
  await ready();
  modelBytes = encodeGguf(pairedLanguageModel(GEOMETRY, { seed: 3 }));
  projectorBytes = encodeGguf(randomProjector(GEOMETRY, { seed: 3 }));
  local = Llama.fromGguf(modelBytes, { projector: projectorBytes });
});
after(() => local?.free());

/** A local reply to `parts` on a fresh session: the text. */
async function localReply(parts) {
  const chat = new Chat(local.session());
  let text = '';
  for await (const piece of chat.send(parts, REPLY)) text += piece.text;
  chat.free();
  return text;
}

describe('a model and its projector in the worker', () => {
  let worker;
  let remote;
  before(async () => {
    worker = new LlamaWorker({ worker: () => nodeWorker(), init: { threads: 1 } });
    remote = await worker.load(modelBytes, { projector: projectorBytes });
  });
  after(() => worker?.terminate());

  test('tells the projector and counts an image\'s positions as the local model does', async () => {
    assert.deepEqual(remote.projector.config, local.projector.config);
    for (const size of [{ width: 40, height: 30 }, { width: 1000, height: 700 }]) {
      assert.deepEqual(await remote.imageTokenCount(size), local.imageTokenCount(size));
    }
  });

  test('prepares pixels as the local model does, the app\'s own pixels left as they were', async () => {
    const given = { ...image, data: image.data.slice() };
    const prepared = await remote.prepareImage(given);
    const expected = await local.prepareImage(image);
    assert.equal(prepared.digest, expected.digest);
    assert.deepEqual(prepared.tokens, [...expected.tokens]);
    assert.equal(prepared.imageTokens, expected.imageTokens);
    assert.deepEqual(given.data, image.data, 'the app\'s pixels are copied, not taken');
  });

  test('decodes with options.decodeImage on the page, and transfers the decoded pixels (their buffer leaves the page)', async () => {
    let decoded;
    const prepared = await remote.prepareImage(png, { decodeImage: (bytes) => (decoded = decodePng(bytes)) });
    assert.equal(prepared.digest, (await local.prepareImage(image)).digest);
    assert.equal(decoded.data.byteLength, 0, 'the decoded pixels were transferred, not copied');
  });

  test('a Chat over a RemoteSession replies to an image as over a LlamaSession', async () => {
    const parts = [{ type: 'image', image }, { type: 'text', text: QUESTION }];
    const chat = new Chat(await remote.session());
    let text = '';
    for await (const piece of chat.send(parts, REPLY)) text += piece.text;
    assert.ok(text.length > 0, 'a reply came');
    assert.equal(text, await localReply(parts));
    assert.equal(chat.messages[0].content[0].image.digest, (await local.prepareImage(image)).digest);
    await chat.free();
  });

  test('refuses an empty image and an encoded one this runtime cannot decode, saying why', async () => {
    await assert.rejects(remote.prepareImage({ width: 0, height: 0, data: new Uint8Array(0) }),
      (error) => error instanceof RangeError && /RemoteLlama\.prepareImage: an image's width must be a whole number from 1/.test(error.message));
    await assert.rejects(remote.prepareImage(png),
      (error) => error instanceof TypeError && /this runtime cannot decode images; pass \{ width, height, data \} pixels or a decodeImage/.test(error.message));
    await assert.rejects(remote.prepareImage(image, { decode: decodePng }), /RemoteLlama\.prepareImage: .*decode/);
  });
});

describe('a worker that decodes images itself', () => {
  let worker;
  let remote;
  let thread;
  before(async () => {
    worker = new LlamaWorker({ worker: () => (thread = nodeWorker(DECODING)), init: { threads: 1 } });
    remote = await worker.load(new Blob([modelBytes]), { projector: new Blob([projectorBytes]) });
  });
  after(() => worker?.terminate());

  test('is sent a Blob as it is (this thread has no decoder), and prepares it as the local model does', async () => {
    assert.equal(typeof globalThis.createImageBitmap, 'undefined', 'the page cannot decode');
    const prepared = await remote.prepareImage(new Blob([png], { type: 'image/png' }));
    assert.equal(prepared.digest, (await local.prepareImage(image)).digest);
    assert.ok(thread, 'the worker was started');
  });

  test('completions() over its RemoteSession take an image_url, decoded in the worker', async () => {
    const url = `data:image/png;base64,${Buffer.from(png).toString('base64')}`;
    const client = completions(await remote.session());
    const response = await client.chat.completions.create({
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: QUESTION }] }],
      temperature: 0, max_tokens: REPLY.maxTokens,
    });
    assert.equal(response.choices[0].message.content, await localReply([{ type: 'image', image }, { type: 'text', text: QUESTION }]));
  });

  test('refuses a Blob that holds no image, as the worker\'s decoder does', async () => {
    await assert.rejects(remote.prepareImage(new Blob(['not an image'])), (error) => error instanceof TypeError && /could not be decoded/.test(error.message));
  });
});

describe('a model without a projector in the worker', () => {
  let worker;
  let remote;
  before(async () => {
    worker = new LlamaWorker({ worker: () => nodeWorker(), init: { threads: 1 } });
    remote = await worker.load(modelBytes);
  });
  after(() => worker?.terminate());

  test('has none, and refuses an image and a message with one before anything goes to the worker', async () => {
    assert.equal(remote.projector, null);
    await assert.rejects(remote.prepareImage(image), /RemoteLlama\.prepareImage: the model was loaded without a projector/);
    await assert.rejects(remote.imageTokenCount({ width: 4, height: 4 }), /RemoteLlama\.imageTokenCount: the model was loaded without a projector/);
    const chat = new Chat(await remote.session());
    await assert.rejects(async () => {
      for await (const piece of chat.send([{ type: 'image', image }, { type: 'text', text: QUESTION }])) assert.fail(`a piece came: ${piece.text}`);
    }, /loaded without a projector/);
    assert.deepEqual(chat.messages, [], 'the refused message changed nothing');
    await chat.free();
  });
});

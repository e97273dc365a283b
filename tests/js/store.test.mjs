// The model store in Node (a folder), against a real HTTP server with
// ranges and faults: a model downloads once and loads from the store after;
// a cut download resumes with a Range request; a server that ignores ranges
// or whose file changed restarts it, saying so; a damaged stored copy is
// dropped and downloaded again; a full disk is refused naming the bytes; a
// conversation saved by name comes back after the model is loaded again,
// and is refused on another model.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Llama, ModelStore } from '../../js/llama.js';
import { Chat } from '../../js/chat.js';
import { openBackend } from '../../js/store/backends.js';
import { REAL_MODELS } from '../gguf/models.mjs';
import { serveModels } from '../runtimes/model-server.mjs';
import { MODEL_MISSING, MODEL_PATH, ready } from './helpers.mjs';

const KJV = REAL_MODELS['kjv-d512-h64'].path;
const MISSING = MODEL_MISSING ?? (existsSync(KJV) ? null : `the model file is absent: ${KJV}`);
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
let server;
let dir;
let expected; // each file's Llama#digest, loaded straight from its bytes

before(async () => {
  await ready();
  if (MISSING) return;
  server = await serveModels({ '/models/kjv.gguf': KJV, '/models/stories.gguf': MODEL_PATH });
  expected = {};
  for (const [name, path] of [['kjv', KJV], ['stories', MODEL_PATH]]) {
    const llama = Llama.fromGguf(new Uint8Array(readFileSync(path)));
    expected[name] = llama.digest;
    llama.free();
  }
});
after(() => server?.close());
beforeEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = mkdtempSync(join(tmpdir(), 'kvc-store-'));
  if (server) for (const key of Object.keys(server.faults)) delete server.faults[key];
});
after(() => dir && rmSync(dir, { recursive: true, force: true }));

function storeTest(name, fn) {
  test(name, (t) => (MISSING ? t.skip(MISSING) : fn(t)));
}

const open = () => ModelStore.open({ directory: dir, persist: false });

/** Llama.load through the store; resolves to { llama, last progress, network bytes and requests it took }. */
async function load(store, path, options = {}) {
  const before = { ...server.stats };
  let last = null;
  const llama = await Llama.load(server.url(path), { store, onProgress: (p) => { last = p; }, ...options });
  return { llama, last, bytes: server.stats.bytes - before.bytes, requests: server.stats.requests - before.requests };
}

/** The files of the only entry's stored pieces, in order. */
function pieceFiles() {
  const [entry] = readdirSync(join(dir, 'models'));
  return readdirSync(join(dir, 'models', entry)).filter((n) => /^\d+$/.test(n)).sort().map((n) => join(dir, 'models', entry, n));
}

/** The stored pieces of the only entry, concatenated (the file as the store holds it). */
function storedBytes() {
  return Buffer.concat(pieceFiles().map((file) => readFileSync(file)));
}

storeTest('a second load reads the store: no request, the same model', async () => {
  const store = await open();
  const size = readFileSync(KJV).length;
  const first = await load(store, '/models/kjv.gguf');
  assert.equal(first.llama.digest, expected.kjv);
  assert.equal(first.bytes, size);
  assert.deepEqual([first.last.fromStore, first.last.fromNetwork, first.last.restarted], [0, size, null]);
  first.llama.free();
  const second = await load(store, '/models/kjv.gguf');
  assert.equal(second.requests, 0);
  assert.equal(second.llama.digest, expected.kjv);
  assert.deepEqual([second.last.loaded, second.last.fromStore, second.last.fromNetwork], [size, size, 0]);
  assert.equal(second.llama.store, store);
  second.llama.free();
  const [entry] = await store.list();
  assert.deepEqual({ ...entry, etag: undefined, lastModified: undefined, storedAt: undefined },
    { key: server.url('/models/kjv.gguf'), name: null, size, stored: size, complete: true, digest: expected.kjv, etag: undefined, lastModified: undefined, storedAt: undefined });
  assert.ok((await store.usage()).bytes >= size);
  assert.equal(sha256(storedBytes()), sha256(readFileSync(KJV)));
});

storeTest('a download cut at half resumes from where it stopped: at most 55% more, bit-identical', async () => {
  const store = await open();
  const size = readFileSync(KJV).length;
  server.faults.dropAt = Math.floor(size / 2);
  await assert.rejects(load(store, '/models/kjv.gguf'));
  const [partial] = await store.list();
  assert.equal(partial.complete, false);
  assert.ok(partial.stored > 0.4 * size && partial.stored <= size / 2, `${partial.stored} of ${size} stored`);
  const ranges = server.stats.ranges;
  const resumed = await load(store, '/models/kjv.gguf');
  assert.equal(server.stats.ranges, ranges + 1);
  assert.ok(resumed.bytes <= 0.55 * size, `the resume transferred ${resumed.bytes} of ${size} bytes`);
  assert.equal(resumed.last.fromStore, partial.stored);
  assert.equal(resumed.last.fromNetwork, size - partial.stored);
  assert.equal(resumed.llama.digest, expected.kjv);
  assert.equal(sha256(storedBytes()), sha256(readFileSync(KJV)));
  resumed.llama.free();
});

storeTest('an aborted download keeps what came, and the next load resumes it', async () => {
  const store = await open();
  const controller = new AbortController();
  let seen = 0;
  await assert.rejects(Llama.load(server.url('/models/kjv.gguf'), {
    store, signal: controller.signal,
    onProgress: (p) => { seen = p.loaded; if (p.loaded > 30e6) controller.abort(); },
  }), { name: 'AbortError' });
  const [partial] = await store.list();
  assert.ok(partial.stored > 0 && partial.stored <= seen && !partial.complete);
  const resumed = await load(store, '/models/kjv.gguf');
  assert.equal(resumed.last.fromStore, partial.stored);
  assert.equal(resumed.llama.digest, expected.kjv);
  resumed.llama.free();
});

storeTest('a download that stalls goes on waiting until the app aborts it; what came is kept and the next load resumes', async () => {
  const store = await open();
  const size = readFileSync(KJV).length;
  server.faults.stallAt = Math.floor(size / 2);
  const controller = new AbortController();
  let timer = null;
  // The app's watchdog: no progress for half a second aborts the load.
  const watch = () => {
    clearTimeout(timer);
    timer = setTimeout(() => controller.abort(new Error('no progress for 500 ms')), 500);
  };
  watch();
  await assert.rejects(Llama.load(server.url('/models/kjv.gguf'), { store, signal: controller.signal, onProgress: watch }), /no progress for 500 ms/);
  clearTimeout(timer);
  const [partial] = await store.list();
  assert.ok(partial.stored > 0.4 * size && partial.stored <= size / 2, `${partial.stored} of ${size} stored`);
  const resumed = await load(store, '/models/kjv.gguf');
  assert.ok(resumed.bytes <= 0.6 * size);
  assert.equal(resumed.llama.digest, expected.kjv);
  resumed.llama.free();
});

storeTest('a server that ignores Range, or whose file changed, restarts the download and says so', async () => {
  for (const fault of [{ noRanges: true }, { etag: '"another-file"' }]) {
    rmSync(dir, { recursive: true, force: true });
    const store = await open();
    const size = readFileSync(KJV).length;
    server.faults.dropAt = Math.floor(size / 3);
    await assert.rejects(load(store, '/models/kjv.gguf'));
    Object.assign(server.faults, fault);
    const again = await load(store, '/models/kjv.gguf');
    assert.match(again.last.restarted, /the server sent the whole file/);
    assert.equal(again.last.fromStore, 0);
    assert.equal(again.bytes, size);
    assert.equal(again.llama.digest, expected.kjv);
    assert.equal(sha256(storedBytes()), sha256(readFileSync(KJV)));
    again.llama.free();
    for (const key of Object.keys(server.faults)) delete server.faults[key];
  }
});

storeTest('a damaged stored copy (a flipped byte, a truncated piece, a missing piece) is dropped and downloaded again', async () => {
  const damages = [
    (files) => { const b = readFileSync(files[3]); b[1000] ^= 0x40; writeFileSync(files[3], b); },
    (files) => truncateSync(files.at(-1), 100),
    (files) => rmSync(files[5]),
    (files) => { const b = readFileSync(files[0]); b[200] ^= 1; writeFileSync(files[0], b); }, // the header
  ];
  const store = await open();
  (await load(store, '/models/kjv.gguf')).llama.free();
  for (const damage of damages) {
    damage(pieceFiles());
    const again = await load(store, '/models/kjv.gguf');
    assert.match(again.last.restarted, /the stored copy was damaged/);
    assert.equal(again.requests, 1);
    assert.equal(again.llama.digest, expected.kjv);
    again.llama.free();
    const back = await load(store, '/models/kjv.gguf');
    assert.equal(back.requests, 0);
    back.llama.free();
  }
});

storeTest('a 404, an HTML page or a file that is not a model is refused and nothing is stored', async () => {
  const store = await open();
  server.faults.notFound = true;
  await assert.rejects(load(store, '/models/kjv.gguf'), /was 404/);
  assert.deepEqual(await store.list(), []);
  delete server.faults.notFound;
  const notModel = mkdtempSync(join(tmpdir(), 'kvc-not-model-'));
  writeFileSync(join(notModel, 'x.gguf'), Buffer.alloc(5 << 20, 7));
  const other = await serveModels({ '/x.gguf': join(notModel, 'x.gguf') });
  try {
    await assert.rejects(Llama.load(other.url('/x.gguf'), { store }), { name: 'GgufError' });
    assert.deepEqual(await store.list(), []);
  } finally {
    await other.close();
    rmSync(notModel, { recursive: true, force: true });
  }
});

storeTest('a store without the room is refused naming the bytes needed and free; one that fills mid-way keeps its partial entry', async () => {
  const real = await open();
  const folder = await openBackend('folder', 'default', dir);
  const size = readFileSync(KJV).length;
  // The same folder, saying 10 MB are free; then filling after 3 pieces.
  const small = new ModelStore({ ...folder, space: async () => ({ quota: 10e6, used: 0 }) }, 'small', false);
  await assert.rejects(load(small, '/models/kjv.gguf'), (error) => {
    assert.equal(error.name, 'QuotaExceededError');
    assert.match(error.message, new RegExp(`needs ${size} more bytes; .* has 10000000 free`));
    return true;
  });
  assert.deepEqual(await real.list(), []);
  let pieces = 0;
  const filling = new ModelStore({
    ...folder,
    async put(path, bytes) {
      if (/\/\d+$/.test(path) && ++pieces > 3) throw new DOMException('full', 'QuotaExceededError');
      return folder.put(path, bytes);
    },
  }, 'filling', false);
  await assert.rejects(load(filling, '/models/kjv.gguf'), (error) => {
    assert.equal(error.name, 'QuotaExceededError');
    assert.match(error.message, /needs \d+ more bytes; \d+ are free \(12582912 bytes are stored, to resume from\)/);
    return true;
  });
  const [partial] = await real.list();
  assert.deepEqual([partial.complete, partial.stored], [false, 3 * (4 << 20)]);
  const resumed = await load(real, '/models/kjv.gguf');
  assert.equal(resumed.last.fromStore, partial.stored);
  assert.equal(resumed.llama.digest, expected.kjv);
  resumed.llama.free();
});

storeTest('two loads of one model at once download it once and both get it', async () => {
  const store = await open();
  const before = server.stats.requests;
  const [a, b] = await Promise.all([load(store, '/models/kjv.gguf'), load(store, '/models/kjv.gguf')]);
  assert.equal(server.stats.requests - before, 1);
  assert.equal(a.llama.digest, expected.kjv);
  assert.equal(b.llama.digest, expected.kjv);
  a.llama.free();
  b.llama.free();
});

storeTest('revalidate asks the server once: unchanged, the store serves; changed, the new file replaces it', async () => {
  const store = await open();
  (await load(store, '/models/kjv.gguf')).llama.free();
  const same = await load(store, '/models/kjv.gguf', { revalidate: true });
  assert.deepEqual([same.requests, same.bytes], [1, 0]);
  same.llama.free();
  server.faults.etag = '"a-new-version"';
  const changed = await load(store, '/models/kjv.gguf', { revalidate: true });
  assert.equal(changed.last.restarted, 'the server has a newer file');
  assert.equal(changed.llama.digest, expected.kjv);
  changed.llama.free();
  const [entry] = await store.list();
  assert.equal(entry.etag, '"a-new-version"');
});

storeTest('a conversation saved by name continues bit-identically after the model is loaded again; another model is refused', async () => {
  const store = await open();
  const greedy = { temperature: 0, maxTokens: 12 };
  const reply = async (chat, text) => {
    let out = '';
    for await (const piece of chat.send(text, greedy)) out += piece.text;
    return out;
  };
  const first = (await load(store, '/models/stories.gguf')).llama;
  const chat = new Chat(first.session());
  await reply(chat, 'Once upon a time');
  await chat.save('story');
  const continued = await reply(chat, 'The cat');
  first.free();
  const again = (await load(store, '/models/stories.gguf')).llama;
  const restored = await Chat.restore(again, 'story');
  assert.equal(restored.messages.length, 2);
  assert.equal(await reply(restored, 'The cat'), continued);
  assert.deepEqual((await store.conversations()).map((c) => [c.name, c.model]), [['story', expected.stories]]);
  const other = (await load(store, '/models/kjv.gguf')).llama;
  await assert.rejects(Chat.restore(other, 'story'), /the conversation "story" was saved with another model file/);
  await assert.rejects(Chat.restore(again, 'nothing'), /no conversation is saved as "nothing"/);
  assert.equal(await store.deleteConversation('story'), true);
  assert.deepEqual(await store.conversations(), []);
  other.free();
  again.free();
});

storeTest('bad input is refused naming the parameter', async () => {
  const store = await open();
  await assert.rejects(Llama.load(server.url('/models/kjv.gguf'), { store: {} }), /options.store must be a ModelStore/);
  await assert.rejects(Llama.load(readFileSync(MODEL_PATH), { store }), /loads through options.store from a URL/);
  await assert.rejects(Llama.load(server.url('/models/kjv.gguf'), { store, revalidate: 'yes' }), /options.revalidate must be a boolean/);
  await assert.rejects(ModelStore.open({ name: '../x' }), /options.name must be/);
  await assert.rejects(ModelStore.open({ backend: 'floppy' }), /options.backend must be one of 'opfs', 'folder', 'cache'/);
  await assert.rejects(store.delete(42), /key is its URL/);
  assert.equal(await store.delete(server.url('/models/nothing.gguf')), false);
  const chat = new Chat(Llama.fromGguf(readFileSync(MODEL_PATH)).session());
  await assert.rejects(chat.save('x'), /saved by name in a ModelStore/);
  await assert.rejects(chat.save(''), /name must be a string of 1 to 256 characters/);
  chat.free();
});

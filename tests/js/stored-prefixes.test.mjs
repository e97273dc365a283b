// The store's prefix cache in Node (a folder store): a session of a model
// loaded through a store keeps its prompt's prefixes there behind the reply,
// and a later session -- of the model loaded again, as after a reload --
// that begins with a stored prefix restores it and computes only the rest,
// replying exactly as a session that computed everything (greedy), for full
// attention, window and recurrent layers and in f32 and q8 caches. A Chat's
// system prompt is kept on its own, for the next page's first message (a
// prompt is kept where it adds at least 64 tokens to what is kept). A
// damaged entry is deleted and its tokens computed again; a full store
// keeps none and replies the same; eviction keeps the entries within the
// budget; deleting the model deletes its entries;
// { storePrefixes: false } keeps and restores nothing. A restored hybrid
// chat whose template renders an earlier reply otherwise than the model
// said it (as thinking templates drop its reasoning) goes back to the
// stored prefix at that reply's prompt -- as the unreloaded chat goes back
// to its checkpoint there -- not to its first token.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Llama, ModelStore } from '../../js/llama.js';
import { openBackend } from '../../js/store/backends.js';
import { Chat } from '../../js/chat.js';
import { LlamaWorker } from '../../js/worker.js';
import { nodeWorker } from './node-worker.mjs';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { serveModels } from '../runtimes/model-server.mjs';
import { MODEL_PATH, forwardTokens, ready } from './helpers.mjs';
import { defineLanguageModel } from '../../js/prompt-api.js';
import { PROMPT } from './session-cases.mjs';

const VARIANTS = ['tiny-llama3', 'tiny-gemma3', 'tiny-qwen35', 'tiny-lfm2'];
let server;
let dir;
let files;

before(async () => {
  await ready();
  dir = mkdtempSync(join(tmpdir(), 'kvc-prefixes-'));
  files = { '/models/stories.gguf': MODEL_PATH };
  for (const variant of VARIANTS) {
    const path = join(dir, `${variant}.gguf`);
    writeFileSync(path, encodeGguf(randomLlama({ ...GEOMETRIES[variant], contextLength: 1024 }, { mix: 'F32', seed: 5 })));
    files[`/models/${variant}.gguf`] = path;
  }
  // A hybrid with a chat template's control tokens, for chats.
  const chatModel = join(dir, 'qwen35-chat.gguf');
  writeFileSync(chatModel, encodeGguf(randomLlama({ ...GEOMETRIES['tiny-qwen35'], contextLength: 1024 }, { mix: 'Q8_0', seed: 11, control: ['<|im_start|>', '<|im_end|>'] })));
  files['/models/qwen35-chat.gguf'] = chatModel;
  server = await serveModels(files);
});
after(() => {
  server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

let stores = 0;
const openStore = () => ModelStore.open({ directory: join(dir, `store-${stores++}`), persist: false });
const load = (store, name, options = {}) => Llama.load(server.url(`/models/${name}.gguf`), { store, ...options });

/** A session's greedy reply to token ids: its tokens and its last piece's stats. */
async function replyTo(session, ids, maxTokens = 12) {
  const tokens = [];
  let stats = null;
  for await (const piece of session.respond(ids, { temperature: 0, maxTokens })) {
    tokens.push(...piece.tokens);
    stats = piece.stats ?? stats;
  }
  return { tokens, stats };
}

// Two prompts that share their first 180 tokens.
const FIRST = PROMPT.slice(0, 200);
const SECOND = [...PROMPT.slice(0, 180), ...PROMPT.slice(20, 60)];

for (const variant of VARIANTS) {
  for (const cacheMode of ['f32', 'q8']) {
    test(`${variant} (${cacheMode}): a page after a reload restores the stored prefix and replies as one that computed everything`, async () => {
      const store = await openStore();
      const first = await load(store, variant, { cacheMode });
      const session = first.session();
      const cold = await replyTo(session, FIRST);
      assert.equal(cold.stats.promptComputed, FIRST.length, 'the first page computes its whole prompt');
      await session.whenStored();
      const entries = await store.prefixes.list();
      assert.deepEqual(entries.map((e) => [e.tokens, e.model, e.mode]), [[FIRST.length - 1, first.digest, cacheMode]]);
      session.free();
      first.free();

      // A reload: the model loaded again from the store, a new session.
      const again = await load(store, variant, { cacheMode });
      const restored = await replyTo(again.session(), FIRST);
      assert.deepEqual(restored.tokens, cold.tokens, 'the same reply, greedy');
      assert.equal(restored.stats.promptComputed, 1, 'only the prompt\'s last token is computed');

      // A prompt that shares only a part of the stored one computes it all, the same as a model without the store's prefixes.
      const plain = await load(store, variant, { cacheMode, storePrefixes: false });
      const expected = await replyTo(plain.session(), SECOND);
      const other = await replyTo(again.session(), SECOND);
      assert.deepEqual(other.tokens, expected.tokens);
      assert.equal(expected.stats.promptComputed, SECOND.length);
      plain.free();
      again.free();
    });
  }
}

test('a Chat keeps its system prompt as a prefix of its own: the next page\'s first message restores it and computes only itself', async () => {
  const store = await openStore();
  const system = Array.from({ length: 8 }, (_, i) => `Rule ${i + 1}: answer in short sentences.`).join(' ');
  const first = await load(store, 'stories');
  const chat = new Chat(first.session(), { system });
  let cold = null;
  for await (const piece of chat.send('Once upon a time', { temperature: 0, maxTokens: 8 })) cold = piece.stats ?? cold;
  await chat.session.whenStored();
  const kept = (await store.prefixes.list()).map((e) => e.tokens);
  // The first prompt adds fewer than 64 tokens to the system prompt: it is not kept apart.
  assert.equal(kept.length, 1, 'the system prompt');
  assert.ok(kept[0] >= 64 && kept[0] < cold.promptTokens - 1, `the system prompt's ${kept[0]} tokens of ${cold.promptTokens}`);
  first.free();

  const again = await load(store, 'stories');
  const reference = await load(store, 'stories', { storePrefixes: false });
  const send = async (llama) => {
    const next = new Chat(llama.session(), { system });
    const tokens = [];
    let stats = null;
    for await (const piece of next.send('The little dog', { temperature: 0, maxTokens: 8 })) {
      tokens.push(...piece.tokens);
      stats = piece.stats ?? stats;
    }
    return { tokens, stats };
  };
  const restored = await send(again);
  const computed = await send(reference);
  assert.deepEqual(restored.tokens, computed.tokens);
  assert.equal(restored.stats.promptComputed, computed.stats.promptTokens - kept[0]);
  again.free();
  reference.free();
});

test('a damaged entry is deleted and its tokens computed again, with the same reply', async () => {
  const store = await openStore();
  const llama = await load(store, 'tiny-llama3');
  const session = llama.session();
  const expected = await replyTo(session, FIRST);
  await session.whenStored();
  session.free();
  const [entry] = await store.prefixes.list();
  // One byte of the snapshot flipped: its CRC-32 no longer matches.
  const where = join(store.where, 'prefixes');
  const group = readdirSync(where)[0];
  const file = join(where, group, entry.name, 'session');
  const bytes = readFileSync(file);
  bytes[bytes.length - 100] ^= 0x40;
  writeFileSync(file, bytes);
  const next = llama.session();
  const reply = await replyTo(next, FIRST);
  assert.deepEqual(reply.tokens, expected.tokens);
  assert.equal(reply.stats.promptComputed, FIRST.length, 'computed again');
  await next.whenStored();
  assert.equal((await store.prefixes.list()).length, 1, 'and stored again');
  next.free();
  llama.free();
});

test('eviction keeps the entries within the budget, the least recently used going first; deleting the model deletes its entries', async () => {
  const store = await openStore();
  const llama = await load(store, 'tiny-llama3');
  const prompts = [0, 1, 2, 3].map((k) => PROMPT.slice(k * 10, k * 10 + 120));
  const session0 = llama.session();
  await replyTo(session0, prompts[0], 1);
  await session0.whenStored();
  const [one] = await store.prefixes.list();
  store.prefixes.budgetBytes = Math.floor(2.5 * one.bytes);
  for (const prompt of prompts.slice(1)) {
    const session = llama.session();
    await replyTo(session, prompt, 1);
    await session.whenStored();
    session.free();
  }
  const usage = await store.prefixes.usage();
  assert.ok(usage.bytes <= usage.budgetBytes, `${usage.bytes} bytes within ${usage.budgetBytes}`);
  assert.equal(usage.entries, 2);
  assert.deepEqual((await store.prefixes.list()).map((e) => e.tokens), [119, 119]);
  assert.ok((await store.usage()).bytes >= usage.bytes, 'the store\'s usage counts them');
  await store.delete(server.url('/models/tiny-llama3.gguf'));
  assert.deepEqual(await store.prefixes.list(), []);
  session0.free();
  llama.free();
});

test('{ storePrefixes: false } keeps nothing and restores nothing; a bad value is refused naming it', async () => {
  const store = await openStore();
  const llama = await load(store, 'tiny-llama3', { storePrefixes: false });
  const session = llama.session();
  await replyTo(session, FIRST, 2);
  await session.whenStored();
  assert.deepEqual(await store.prefixes.list(), []);
  await assert.rejects(load(store, 'tiny-llama3', { storePrefixes: 'no' }), /options\.storePrefixes must be a boolean/);
  session.free();
  llama.free();
});

// A template that renders every reply but the last one otherwise than it was said (as a thinking template drops the reasoning).
const FORGETFUL = "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' and not loop.last %}(a reply){% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

test('a restored hybrid chat whose template re-renders the last reply goes back to the stored prefix of its prompt, computing what the unreloaded chat computes', async () => {
  const store = await openStore();
  const first = Array.from({ length: 60 }, (_, i) => `word${(i * 37) % 101}`).join(' ');
  const send = async (chat, text) => {
    const tokens = [];
    let stats = null;
    for await (const piece of chat.send(text, { temperature: 0, maxTokens: 12 })) {
      tokens.push(...piece.tokens);
      stats = piece.stats ?? stats;
    }
    return { tokens, stats };
  };
  const llama = await load(store, 'qwen35-chat');
  const chat = new Chat(llama.session(), { template: FORGETFUL });
  await send(chat, first);
  await chat.save('forgetful');
  await chat.session.whenStored();
  const unreloaded = await send(chat, 'go on');
  assert.ok(unreloaded.stats.promptComputed < unreloaded.stats.promptTokens / 2, 'the unreloaded chat goes back to its checkpoint');

  for (const storePrefixes of [true, false]) {
    const again = await load(store, 'qwen35-chat', { storePrefixes });
    const restored = await Chat.restore(again, 'forgetful', { template: FORGETFUL });
    const continued = await send(restored, 'go on');
    assert.deepEqual(continued.tokens, unreloaded.tokens);
    if (storePrefixes) {
      assert.equal(continued.stats.promptComputed, unreloaded.stats.promptComputed, 'from the stored prefix, as from the checkpoint');
      assert.ok(continued.stats.storedTokens > 0);
    } else {
      assert.equal(continued.stats.promptComputed, continued.stats.promptTokens, 'without stored prefixes: from the first token');
    }
    again.free();
  }
  llama.free();
});

test('a session in a LlamaWorker keeps its prefixes in the store the page opened, and this thread restores them', async () => {
  const store = await openStore();
  const worker = new LlamaWorker({ worker: nodeWorker, init: { threads: 1 } });
  try {
    const remote = await worker.load(server.url('/models/tiny-llama3.gguf'), { store });
    const session = await remote.session();
    const cold = await replyTo(session, FIRST);
    assert.equal(cold.stats.promptComputed, FIRST.length);
    await session.whenStored();
    assert.deepEqual((await store.prefixes.list()).map((e) => e.tokens), [FIRST.length - 1]);
    const here = await load(store, 'tiny-llama3');
    const warm = await replyTo(here.session(), FIRST);
    assert.deepEqual(warm.tokens, cold.tokens);
    assert.equal(warm.stats.storedTokens, FIRST.length - 1);
    here.free();
  } finally {
    worker.terminate();
  }
});

test('the Prompt API\'s initialPrompts, taken in by one page\'s create(), are restored by the next page\'s', async () => {
  const store = await openStore();
  const initialPrompts = [{ role: 'system', content: 'Once upon a time there was a little girl who liked to read. '.repeat(6) }];
  const first = await load(store, 'stories');
  const computedFirst = await forwardTokens(first, async () => defineLanguageModel({ model: first }).create({ initialPrompts }));
  let entries = [];
  for (let i = 0; i < 100 && entries.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    entries = await store.prefixes.list();
  }
  assert.equal(entries.length, 1, 'the initial prompts, kept behind create()');
  assert.equal(entries[0].tokens, computedFirst, 'all that create() computed');
  const second = await load(store, 'stories');
  const computedSecond = await forwardTokens(second, async () => defineLanguageModel({ model: second }).create({ initialPrompts }));
  assert.equal(computedSecond, 0, 'the next page computes none of them');
  first.free();
  second.free();
  // A model the Prompt API loads itself, told to keep no prefixes.
  const other = await openStore();
  const LanguageModel = defineLanguageModel({ model: server.url('/models/stories.gguf'), store: other, storePrefixes: false });
  const session = await LanguageModel.create({ initialPrompts });
  await session.prompt('Hello', { signal: AbortSignal.timeout(60000) });
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.deepEqual(await other.prefixes.list(), []);
  session.destroy();
  assert.throws(() => defineLanguageModel({ model: server.url('/models/stories.gguf'), storePrefixes: 'no' }), /options\.storePrefixes must be a boolean/);
});

test('a full store keeps no entry and the reply is the same; the next session computes its prompt', async () => {
  const directory = join(dir, `store-${stores++}`);
  const folder = await openBackend('folder', 'default', directory);
  // The model goes in; every prefix entry's write finds the disk full.
  const full = new ModelStore({
    ...folder,
    async put(path, bytes) {
      if (path.startsWith('prefixes/')) throw new DOMException('full', 'QuotaExceededError');
      return folder.put(path, bytes);
    },
  }, 'full', false);
  const llama = await load(full, 'tiny-llama3');
  const plain = await load(full, 'tiny-llama3', { storePrefixes: false });
  const session = llama.session();
  const reply = await replyTo(session, FIRST);
  await session.whenStored();
  assert.deepEqual(reply.tokens, (await replyTo(plain.session(), FIRST)).tokens);
  assert.deepEqual(await full.prefixes.list(), []);
  const next = await replyTo(llama.session(), FIRST);
  assert.deepEqual(next.tokens, reply.tokens);
  assert.equal(next.stats.promptComputed, FIRST.length);
  llama.free();
  plain.free();
});

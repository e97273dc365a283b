// The model store in a browser page (tests/integration/store.test.mjs and the
// bench): each export is one step the Node side calls through
// page.evaluate, returning plain data.
import init from 'kvcache-wasm';
import { Llama, ModelStore } from 'kvcache-wasm/llama';
import { Chat } from 'kvcache-wasm/chat';
import { LlamaWorker } from 'kvcache-wasm/worker';

let started = null;
const ready = () => (started ??= init({ threads: 1 }));
const errorText = (error) => `${error?.name}: ${error?.message}`;

/** Empties the store; says which backend it is. */
export async function clear() {
  const store = await ModelStore.open({ persist: false });
  for (const m of await store.list()) await store.delete(m.key);
  for (const c of await store.conversations()) await store.deleteConversation(c.name);
  return store.backend;
}

/** Llama.load(url, { store }), the store opened with `options`: { ms, digest, last progress } or { error, last }. */
export async function load({ url, options = { persist: false } }) {
  await ready();
  const store = await ModelStore.open(options);
  let last = null;
  const t0 = performance.now();
  try {
    const llama = await Llama.load(url, { store, onProgress: (p) => { last = p; } });
    const ms = performance.now() - t0;
    const { digest } = llama;
    llama.free();
    return { ms, digest, last, backend: store.backend };
  } catch (error) {
    return { error: errorText(error), last };
  }
}

/** Llama.load(url) without a store (the first load's yardstick): { ms }. */
export async function loadPlain({ url }) {
  await ready();
  const t0 = performance.now();
  const llama = await Llama.load(url);
  const ms = performance.now() - t0;
  llama.free();
  return { ms };
}

/** The same model loaded in this page and in a worker at once, both through the store: their digests. */
export async function loadTwice({ url }) {
  await ready();
  const store = await ModelStore.open({ persist: false });
  const worker = new LlamaWorker({ init: { threads: 1 } });
  try {
    const [here, there] = await Promise.all([
      Llama.load(url, { store }),
      worker.ready().then(() => worker.load(url, { store })),
    ]);
    const digests = [here.digest, await there.digest];
    here.free();
    return { digests };
  } finally {
    worker.terminate();
  }
}

/** Flips one bit of the stored entry's `piece`-th piece, where the backend keeps it. */
export async function damage({ piece }) {
  const store = await ModelStore.open({ persist: false });
  if (store.backend === 'opfs') {
    const models = await (await (await navigator.storage.getDirectory()).getDirectoryHandle('kvcache-wasm-default')).getDirectoryHandle('models');
    const [entry] = await Array.fromAsync(models.values());
    const names = (await Array.fromAsync(entry.keys())).filter((n) => /^\d+$/.test(n)).sort();
    const handle = await entry.getFileHandle(names[piece]);
    const bytes = new Uint8Array(await (await handle.getFile()).arrayBuffer());
    bytes[1000] ^= 0x10;
    const writable = await handle.createWritable();
    await writable.write(bytes);
    await writable.close();
    return names[piece];
  }
  const cache = await caches.open('kvcache-wasm-default');
  const keys = (await cache.keys()).filter((r) => /\/models\/\w+\/\d+$/.test(r.url)).sort((a, b) => a.url.localeCompare(b.url));
  const bytes = new Uint8Array(await (await cache.match(keys[piece])).arrayBuffer());
  bytes[1000] ^= 0x10;
  await cache.put(keys[piece], new Response(bytes));
  return keys[piece].url;
}

const GREEDY = { temperature: 0, maxTokens: 8 };
async function reply(chat, text) {
  let out = '';
  for await (const piece of chat.send(text, GREEDY)) out += piece.text;
  return out;
}

/**
 * A conversation of `turns` messages on the stored model, saved as `name`,
 * then one more turn: { next (that turn's reply), promptTokens }.
 */
export async function converse({ url, name, turns }) {
  await ready();
  const store = await ModelStore.open({ persist: false });
  const llama = await Llama.load(url, { store });
  const chat = new Chat(llama.session());
  for (const text of turns) await reply(chat, text);
  await chat.save(name);
  const next = await reply(chat, 'And then?');
  const promptTokens = chat.session.tokens.length;
  chat.free();
  llama.free();
  return { next, promptTokens };
}

/** After a reload: the model from the store, the conversation `name` restored, its next turn: { next, requests }. */
export async function resume({ url, name }) {
  await ready();
  const store = await ModelStore.open({ persist: false });
  const llama = await Llama.load(url, { store });
  try {
    const chat = await Chat.restore(llama, name);
    const next = await reply(chat, 'And then?');
    chat.free();
    return { next };
  } catch (error) {
    return { error: errorText(error) };
  } finally {
    llama.free();
  }
}

/** What the store lists. */
export async function list() {
  const store = await ModelStore.open({ persist: false });
  return store.list();
}

/** Text of about `tokens` tokens (at least tokens - 64) for `llama`'s tokenizer. */
function textOf(llama, tokens) {
  let words = 16;
  for (;;) {
    const text = Array.from({ length: words }, (_, i) => `word${(i * 7919) % 997}`).join(' ');
    const n = llama.tokenizer.encode(text).length;
    if (n >= tokens - 64) return text;
    words = Math.ceil(words * Math.min(4, tokens / n));
  }
}

/** The model from the store, and a user message of about `tokens` tokens answered with 8 in a session of `mode`, saved as `name`: { tokens }. */
export async function prepareConversation({ url, name, tokens, mode = 'f32' }) {
  await ready();
  const store = await ModelStore.open({ persist: false });
  const llama = await Llama.load(url, { store, contextLength: tokens + 256 });
  const text = textOf(llama, tokens);
  const chat = new Chat(llama.session({ mode }));
  for await (const piece of chat.send(text, { maxTokens: 8, temperature: 0 })) void piece;
  await chat.save(name);
  const held = chat.session.tokens.length;
  chat.free();
  llama.free();
  return { tokens: held };
}

/**
 * The first token of the next message of the conversation `name`: restored
 * (Chat.restore, its time included) and re-read by a fresh session, on the
 * model loaded from the store: { restoreMs, restoredMs, rereadMs }.
 */
export async function timeFirstToken({ url, name, tokens, mode = 'f32' }) {
  await ready();
  const store = await ModelStore.open({ persist: false });
  const llama = await Llama.load(url, { store, contextLength: tokens + 256 });
  try {
    const next = { maxTokens: 1, temperature: 0 };
    let t = performance.now();
    const chat = await Chat.restore(llama, name);
    const restoreMs = performance.now() - t;
    let restoredMs = null;
    for await (const piece of chat.send('And then?', next)) restoredMs ??= (void piece, performance.now() - t);
    const messages = chat.messages.slice(0, -1);
    chat.free();
    const plain = await Llama.load(url, { store, contextLength: tokens + 256, storePrefixes: false });
    const fresh = new Chat(plain.session({ mode }));
    t = performance.now();
    let rereadMs = null;
    for await (const piece of fresh.send(messages, next)) rereadMs ??= (void piece, performance.now() - t);
    fresh.free();
    plain.free();
    return { restoreMs, restoredMs, rereadMs };
  } catch (error) {
    return { error: errorText(error) };
  } finally {
    llama.free();
  }
}

// A system prompt of about 100 tokens for the stories model.
const SYSTEM = 'Once upon a time there was a little girl who liked to read. '.repeat(6);

/** Drops every entry of the store's prefix cache: how many there were. */
export async function clearPrefixes() {
  const store = await ModelStore.open({ persist: false });
  return store.prefixes.delete();
}

/**
 * A Chat with SYSTEM on the stored model answering `text` (greedy), its
 * prefixes written: { tokens, promptTokens, promptComputed, entries (the
 * prefix cache's, by token count), storedMs (how long after the reply the
 * prefixes were in the store) }.
 */
export async function systemChat({ url, text, storePrefixes = true }) {
  await ready();
  const store = await ModelStore.open({ persist: false });
  const llama = await Llama.load(url, { store, storePrefixes });
  try {
    const chat = new Chat(llama.session(), { system: SYSTEM });
    const tokens = [];
    let stats = null;
    for await (const piece of chat.send(text, GREEDY)) {
      tokens.push(...piece.tokens);
      stats = piece.stats ?? stats;
    }
    const t = performance.now();
    await chat.session.whenStored();
    const storedMs = performance.now() - t;
    const entries = (await store.prefixes.list()).map((e) => e.tokens);
    chat.free();
    return { tokens, promptTokens: stats.promptTokens, promptComputed: stats.promptComputed, entries, storedMs };
  } catch (error) {
    return { error: errorText(error) };
  } finally {
    llama.free();
  }
}

/**
 * A page whose chat begins with a system prompt of about `tokens` tokens
 * (the same text in every page) and answers `message` with one token, in a
 * session of `mode`: { firstTokenMs, promptTokens, promptComputed,
 * storedTokens, restoreMs, storedMs (writing its prefixes, behind the
 * reply), entryBytes (the system prompt's entry) }. `fresh`: the store's
 * prefix cache is emptied first.
 */
export async function systemPromptPage({ url, tokens, mode, message, fresh = false }) {
  await ready();
  const store = await ModelStore.open({ persist: false });
  if (fresh) await store.prefixes.delete();
  const llama = await Llama.load(url, { store, contextLength: tokens + 256 });
  try {
    const chat = new Chat(llama.session({ mode }), { system: textOf(llama, tokens) });
    const t = performance.now();
    let firstTokenMs = null;
    let stats = null;
    for await (const piece of chat.send(message, { maxTokens: 1, temperature: 0 })) {
      firstTokenMs ??= performance.now() - t;
      stats = piece.stats ?? stats;
    }
    const written = performance.now();
    await chat.session.whenStored();
    const storedMs = performance.now() - written;
    const entries = await store.prefixes.list();
    const system = entries.reduce((least, e) => (least === null || e.tokens < least.tokens ? e : least), null);
    chat.free();
    return { firstTokenMs, promptTokens: stats.promptTokens, promptComputed: stats.promptComputed, storedTokens: stats.storedTokens,
      restoreMs: stats.restoreSeconds * 1000, storedMs, entryBytes: system?.bytes ?? 0 };
  } catch (error) {
    return { error: errorText(error) };
  } finally {
    llama.free();
  }
}

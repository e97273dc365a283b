// Stored models and conversations in each browser engine, as an app sees
// them: a model of SmolLM2-135M's geometry in Q8_0 (random valid weights,
// kept in the same folder as the llm benchmark's) served by a local HTTP
// server that counts what it sends (tests/runtimes/model-server.mjs).
// - Loads: without a store, the first through one (download and store at
//   once), the second (from the store, no request).
// - A conversation of ~2k tokens saved by name: its next message's first
//   token after Chat.restore, against a fresh session re-reading the whole
//   conversation, in the same page on the same model. In Chromium and
//   Firefox the page reloads between saving and restoring; WebKitGTK's
//   WebDriver session keeps nothing stored past a reload, so there both
//   run in the page that saved it.
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GEOMETRIES, REAL_MODELS, modelFile, randomLlama } from '../tests/gguf/models.mjs';
import { BROWSERS, browserMissing, launchBrowser } from '../tests/runtimes/browsers.mjs';
import { serveModels } from '../tests/runtimes/model-server.mjs';
import { fileFor, page } from '../tests/runtimes/smoke-page.mjs';
import { staticHandler } from '../tests/runtimes/static-server.mjs';

const MODELS = join(tmpdir(), 'kvcache-wasm-bench-models');
const CONVERSATION_TOKENS = 2048;
const SYSTEM_TOKENS = 2048;
// The geometries of the prefix rows: where each runs (the 1B and the hybrid are too slow to prefill in every browser here).
const PREFIX_MODELS = [
  { geometry: 'smollm2-135m', label: 'SmolLM2-135M', where: ['node', 'chromium', 'firefox'] },
  { geometry: 'llama-3.2-1b', label: 'Llama-3.2-1B', where: ['node'] },
  { geometry: 'qwen3.5-0.8b', label: 'Qwen3.5-0.8B (hybrid)', where: ['node', 'chromium'] },
];
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

async function reload(tab) {
  await tab.evaluate('async () => { setTimeout(() => location.reload(), 20); return true; }');
  await sleep(500);
  for (let i = 0; i < 100; i++) {
    if (await tab.evaluate("async () => document.readyState === 'complete'").catch(() => false)) return;
    await sleep(100);
  }
}

export async function run({ quick = false } = {}) {
  const loadTitle = 'Loading a model through a ModelStore: without a store, the first load (download and store), the second (from the store), ms';
  const loadColumns = ['browser', 'backend', 'file MiB', 'no store ms', 'first load ms', 'from the store ms', 'no store ÷ from the store', 'bytes from the network (second load)'];
  const chatTitle = `A saved conversation of ~${quick ? 64 : CONVERSATION_TOKENS} tokens: its next message's first token after Chat.restore, against re-reading it, ms`;
  const chatColumns = ['browser', 'reloaded', 'cache mode', 'conversation tokens', 'Chat.restore ms', 'first token, restored ms', 'first token, re-read ms', 're-read ÷ restored'];
  mkdirSync(MODELS, { recursive: true });
  const file = quick ? REAL_MODELS['kjv-d512-h64'].path
    : modelFile(MODELS, 'smollm2-135m-Q8_0', () => randomLlama(GEOMETRIES['smollm2-135m'], { mix: 'Q8_0', seed: 1 }));
  const label = quick ? 'kjv-d512-h64' : 'SmolLM2-135M geometry, Q8_0';
  const server = await serveModels({ '/models/model.gguf': file }, { fallback: staticHandler(fileFor, { isolated: false, pages: { '/': page } }) });
  const loads = [];
  const chats = [];
  const prefixes = [];
  const notes = [];
  const prefixFiles = Object.fromEntries((quick ? PREFIX_MODELS.slice(0, 1) : PREFIX_MODELS).map(({ geometry }) => [geometry,
    quick ? REAL_MODELS['kjv-d512-h64'].path : modelFile(MODELS, `${geometry}-Q8_0`, () => randomLlama(GEOMETRIES[geometry], { mix: 'Q8_0', seed: 1 }))]));
  const prefixServer = await serveModels(Object.fromEntries(Object.entries(prefixFiles).map(([g, path]) => [`/models/${g}.gguf`, path])),
    { fallback: staticHandler(fileFor, { isolated: false, pages: { '/': page } }) });
  const systemTokens = quick ? 256 : SYSTEM_TOKENS;
  const prefixRow = (where, reloaded, label, mode, cold, warm) => {
    if (cold.error || warm.error) throw new Error(`${where} ${label} ${mode}: ${cold.error ?? warm.error}`);
    prefixes.push([where, reloaded, label, mode, cold.promptTokens, warm.storedTokens, cold.entryBytes / 1e6, cold.firstTokenMs, warm.firstTokenMs,
      cold.firstTokenMs / warm.firstTokenMs, warm.restoreMs, cold.entryBytes / 1e6 / (warm.restoreMs / 1000), cold.storedMs]);
  };
  /** The prefix rows of one runtime: `step(op, arg)` runs a store-page step there, `reload()` between the two pages. */
  const prefixRows = async (where, step, reload, reloaded) => {
    for (const { geometry, label, where: runs } of quick ? PREFIX_MODELS.slice(0, 1) : PREFIX_MODELS) {
      if (!runs.includes(where) && !quick) continue;
      for (const mode of quick ? ['f32'] : ['f32', 'q8']) {
        const arg = { url: `/models/${geometry}.gguf`, tokens: systemTokens, mode };
        const cold = await step('systemPromptPage', { ...arg, message: 'Hello there.', fresh: true });
        if (reload) await reload();
        const warm = await step('systemPromptPage', { ...arg, message: 'What is new today?' });
        prefixRow(where, reloaded, quick ? 'kjv-d512-h64' : label, mode, cold, warm);
      }
    }
  };
  try {
    for (const name of quick ? ['chromium'] : BROWSERS) {
      const missing = await browserMissing(name);
      if (missing) {
        notes.push(`${name} skipped: ${missing}`);
        continue;
      }
      const browser = await launchBrowser(name);
      try {
        const tab = await browser.open(server.url('/'));
        const step = (op, arg = {}) => tab.evaluate(`async (arg) => (await import('/tests/runtimes/store-page.mjs'))[arg.op](arg)`, { op, ...arg });
        const url = '/models/model.gguf';
        const backend = await step('clear');
        const plain = await step('loadPlain', { url });
        const first = await step('load', { url });
        const before = server.stats.bytes;
        const second = await step('load', { url });
        if (first.error || second.error) throw new Error(`${name}: ${first.error ?? second.error}`);
        loads.push([name, backend, statSync(file).size / 2 ** 20, plain.ms, first.ms, second.ms, plain.ms / second.ms, server.stats.bytes - before]);

        for (const mode of quick ? ['f32'] : ['f32', 'q8']) {
          const conversation = { url, name: `bench-${mode}`, tokens: quick ? 64 : CONVERSATION_TOKENS, mode };
          const saved = await step('prepareConversation', conversation);
          const reloads = name !== 'webkit';
          if (reloads) await reload(tab);
          const timed = await step('timeFirstToken', conversation);
          if (timed.error) throw new Error(`${name}: ${timed.error}`);
          chats.push([name, reloads ? 'yes' : 'no (WebKitGTK keeps nothing past one)', mode, saved.tokens, timed.restoreMs, timed.restoredMs, timed.rereadMs,
            timed.rereadMs / timed.restoredMs]);
        }
        await tab.close();
        if (quick ? name === 'chromium' : PREFIX_MODELS.some((m) => m.where.includes(name))) {
          const prefixTab = await browser.open(prefixServer.url('/'));
          const prefixStep = (op, arg = {}) => prefixTab.evaluate(`async (arg) => (await import('/tests/runtimes/store-page.mjs'))[arg.op](arg)`, { op, ...arg });
          const reloads = name !== 'webkit';
          await prefixRows(name, prefixStep, reloads ? () => reload(prefixTab) : null, reloads ? 'yes' : 'no');
          await prefixTab.close();
        }
        notes.push(browser.version);
      } finally {
        await browser.close();
      }
    }
    // Node: the same steps on a folder store; the next page is the model loaded again.
    const home = mkdtempSync(join(tmpdir(), 'kvc-bench-store-'));
    const cacheHome = process.env.XDG_CACHE_HOME;
    process.env.XDG_CACHE_HOME = home;
    try {
      const steps = await import('../tests/runtimes/store-page.mjs');
      await prefixRows('node', (op, arg) => steps[op]({ ...arg, url: prefixServer.url(arg.url) }), null, 'no (loaded again)');
    } finally {
      if (cacheHome === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = cacheHome;
      rmSync(home, { recursive: true, force: true });
    }
    notes.push(`Node ${process.version}`);
  } finally {
    await server.close();
    await prefixServer.close();
  }
  const common = `${label}, ${(statSync(file).size / 2 ** 20).toFixed(0)} MiB, random weights, served from 127.0.0.1 by a Node HTTP server; one thread; ${notes.join('; ')}.`;
  const prefixTitle = `A page whose chat begins with a ${systemTokens}-token system prompt an earlier page computed: its first token, restored from the store's prefix cache, against the earlier page's`;
  const prefixColumns = ['runtime', 'reloaded', 'geometry', 'cache mode', 'prompt tokens', 'restored tokens', 'entry MB', 'first page: first token ms',
    'next page: first token ms', 'first ÷ next', 'restore ms', 'restore MB/s', 'writing it, behind the reply, ms'];
  return [
    { name: 'store-prefix', title: prefixTitle, columns: prefixColumns, rows: prefixes, notes: [
      `${quick ? 'kjv-d512-h64' : 'Q8_0 files of random weights at each geometry'}, served from 127.0.0.1; one thread; ${notes.join('; ')}. ` +
      'First page: the store\'s prefix cache emptied, the model loaded through the store, new Chat(session, { system }) sends one message and ' +
      'replies one token (its first token\'s time is the prefill of the system prompt and the message); its prefixes are written after the reply ' +
      '(the last column). Next page: a reload (Node: the model loaded again from the same folder store), the same system prompt and another ' +
      'message: the session restores the system prompt\'s entry (restored tokens) and computes only the message. Restore: stats.restoreSeconds -- ' +
      'finding the entry, reading it in 4 MiB pieces (one ahead) and KvCache.deserializeFrom into the cache\'s pages, with its CRC-32 checked; ' +
      'MB/s is the entry\'s bytes over it. WebKitGTK keeps nothing past a reload here: its next page is the same page. Where a restore\'s time goes ' +
      '(a 95 MB f32 snapshot, profiled apart, in a page whose wasm memory a restore touched before): Chromium reads OPFS at 490-790 MB/s ' +
      '(File.slice().arrayBuffer() of 4 MiB pieces on the page\'s thread) and deserializes from memory at 1.1 GB/s, 500-630 MB/s together; Firefox ' +
      '535 MB/s and 1.45 GB/s, 400 MB/s together; Node reads its folder at 2.7-3.9 GB/s and deserializes at 0.9-1.1 GB/s (the CRC-32, at 2.1 GB/s, ' +
      'is its largest part). A next page\'s first restore also touches fresh wasm memory for the whole cache, which the rows above include.'] },
    { name: 'store-load', title: loadTitle, columns: loadColumns, rows: loads, notes: [
      `${common} No store: Llama.load(url), streamed into the heap. First: Llama.load(url, { store }) on an empty store, the file stored as it loads. ` +
      'From the store: the same call again; the server counts the bytes it sent during it. WebKitGTK here has no navigator.storage, so its store is the Cache API.'] },
    { name: 'store-conversation', title: chatTitle, columns: chatColumns, rows: chats, notes: [
      `${common} The conversation: one user message of that many tokens and an 8-token reply in a session of that cache mode, saved with ` +
      'chat.save(name) (the snapshot holds its keys and values: 95 MB in f32, 28 MB in q8). Restored: ' +
      'Chat.restore(llama, name) from the store (its ms included in the first token\'s), then send(\'And then?\') until its first piece. Re-read: a new ' +
      'session (of a model loaded with storePrefixes: false, so that nothing is restored) sent the same messages and the new one, until its first ' +
      'piece. The model is loaded from the store before either. Chat.restore reads the conversation\'s file whole, then deserializes it.'] },
  ];
}

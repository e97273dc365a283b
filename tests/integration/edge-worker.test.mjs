// The edge worker example (examples/edge-worker/) in a local workerd, with
// the stories260K model: 100 conversations share a 256-token system prompt,
// each goes on across requests and across a restart of workerd (its cache
// restored from its Durable Object's storage on disk), and every reply is
// what one uninterrupted session in Node generates; the isolate after the
// restart restores the system prompt's cache from the Durable Object the
// first one stored it in. Within workerd's 128 MB.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Llama, generate } from '../../js/llama.js';
import { SYSTEM_TEXT, SYSTEM_TOKENS, REPLY_TOKENS } from '../../examples/edge-worker/prompt.mjs';
import { findBinary } from '../runtimes/binaries.mjs';
import { embedded, packageModules, serveWorkerd } from '../runtimes/workerd.mjs';
import { MODEL_MISSING, MODEL_PATH, ready } from '../js/helpers.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WORKER = 'examples/edge-worker/worker.mjs';
const TIMEOUT_MS = 120000;
const CONVERSATIONS = 100;
const ISOLATE_BYTES = 128 << 20;
// What the conversations say: a few openings and follow-ups, mixed.
const FIRST = [' One day, Tom', ' The bird', ' Max was a good dog.', ' Then it started to rain.', ' Tom smiled.'];
const SECOND = [' What happened next?', ' They went home.', ' The sun came out.'];

const workerd = findBinary('workerd');
const skipWhy = workerd.missing ?? MODEL_MISSING;

let dir;
let server = null;

function configText() {
  const modules = [
    ...[WORKER, 'examples/edge-worker/prompt.mjs'].map((file) => `(name = "${file}", esModule = embed ${embedded(dir, join(ROOT, file))})`),
    `(name = "examples/edge-worker/model.gguf", data = embed ${embedded(dir, MODEL_PATH)})`,
    ...packageModules(dir, WORKER),
  ];
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "chat", worker = .chat),
    (name = "storage", disk = (path = ${JSON.stringify(join(dir, 'storage'))}, writable = true)),
  ],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "chat")],
);
const chat :Workerd.Worker = (
  modules = [
    ${modules.join(',\n    ')}
  ],
  compatibilityDate = "2026-01-01",
  bindings = [
    (name = "CONVERSATIONS", durableObjectNamespace = "Conversation"),
    (name = "SYSTEM_PROMPTS", durableObjectNamespace = "SystemPrompt"),
  ],
  durableObjectNamespaces = [
    (className = "Conversation", uniqueKey = "kvcache-wasm-edge-worker-test", enableSql = true),
    (className = "SystemPrompt", uniqueKey = "kvcache-wasm-edge-worker-test-prompts", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "storage"),
);
`;
}

async function start() {
  mkdirSync(join(dir, 'storage'), { recursive: true });
  server = await serveWorkerd(workerd.path, [join(dir, 'config.capnp')], ['http'], { timeoutMs: TIMEOUT_MS });
}

function stop() {
  server?.close();
  server = null;
}

async function ask(path, body) {
  const response = await fetch(`http://127.0.0.1:${server.ports.http}${path}`, {
    method: body ? 'POST' : 'GET',
    body: body && JSON.stringify(body),
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  const text = await response.text();
  assert.equal(response.status, 200, `${path}: ${text}\n${server.stderr()}`);
  return JSON.parse(text);
}

/** Runs `step(i)` for i < n, `width` at a time. */
async function inParallel(n, width, step) {
  const results = new Array(n);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) {
      const i = next++;
      results[i] = await step(i);
    }
  }));
  return results;
}

before(async () => {
  if (skipWhy) return;
  await ready();
  dir = mkdtempSync(join(tmpdir(), 'kvcache-wasm-edge-'));
  writeFileSync(join(dir, 'config.capnp'), configText());
});

after(() => {
  stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test(`the edge worker serves ${CONVERSATIONS} conversations sharing a ${SYSTEM_TOKENS}-token system prompt, across requests and a restart, as uninterrupted sessions`, { timeout: 10 * TIMEOUT_MS }, async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  // The reference: one uninterrupted session per pair of messages, in Node.
  const llama = Llama.fromGguf(new Uint8Array(readFileSync(MODEL_PATH)));
  const system = llama.tokenizer.encode(SYSTEM_TEXT).slice(0, SYSTEM_TOKENS);
  assert.equal(system.length, SYSTEM_TOKENS);
  const expected = new Map();
  const reference = (a, b) => {
    const key = `${a}|${b}`;
    if (!expected.has(key)) {
      const session = llama.session({ mode: 'q8' });
      const first = generate(session, [...system, ...llama.tokenizer.encode(FIRST[a], { bos: false })], { steps: REPLY_TOKENS, stopAtEos: false }).tokens;
      const second = generate(session, llama.tokenizer.encode(SECOND[b], { bos: false }), { steps: REPLY_TOKENS, stopAtEos: false }).tokens;
      session.free();
      expected.set(key, { first, second });
    }
    return expected.get(key);
  };
  const said = (i) => ({ a: i % FIRST.length, b: (i * 7) % SECOND.length });

  await start();
  const started = performance.now();
  const firsts = await inParallel(CONVERSATIONS, 8, (i) => ask(`/chat/c${i}`, { message: FIRST[said(i).a] }));
  const firstSeconds = (performance.now() - started) / 1000;
  const afterFirst = await ask('/stats');
  firsts.forEach((reply, i) => {
    assert.deepEqual(reply.tokens, reference(said(i).a, said(i).b).first, `conversation ${i}, first reply`);
    assert.equal(reply.restored, false);
  });
  const reused = firsts.filter((reply) => reply.prefixTokens >= SYSTEM_TOKENS).length;
  assert.ok(reused >= CONVERSATIONS - 8, `${reused} of ${CONVERSATIONS} first replies reused the system prompt's cache`);
  const separate = firsts.reduce((sum, reply) => sum + reply.memoryBytes, 0);
  assert.ok(afterFirst.cacheBytes < separate / 2, `the caches hold ${afterFirst.cacheBytes} bytes, ${separate} counted apart`);
  assert.ok(afterFirst.heapBytes < ISOLATE_BYTES, `the wasm heap is ${afterFirst.heapBytes} bytes`);

  // Half the conversations go on now, the other half after a restart.
  const half = CONVERSATIONS / 2;
  const secondReply = async (i) => {
    const reply = await ask(`/chat/c${i}`, { message: SECOND[said(i).b] });
    assert.deepEqual(reply.tokens, reference(said(i).a, said(i).b).second, `conversation ${i}, second reply`);
    return reply;
  };
  await inParallel(half, 8, (i) => secondReply(i));
  stop();
  await start();
  assert.equal(afterFirst.systemPrompt, 'computed', 'the first isolate computes the system prompt');
  const restarted = await inParallel(half, 8, (i) => secondReply(half + i));
  assert.ok(restarted.every((reply) => reply.restored), 'after the restart, every conversation came back from storage');
  // A new conversation in the cold isolate: the system prompt restored from storage, not computed.
  const fresh = await ask(`/chat/c${CONVERSATIONS}`, { message: FIRST[0] });
  assert.deepEqual(fresh.tokens, reference(0, 0).first, 'a new conversation after the restart');
  assert.ok(fresh.prefixTokens >= SYSTEM_TOKENS, `the new conversation reused ${fresh.prefixTokens} tokens`);
  const afterAll = await ask('/stats');
  assert.equal(afterAll.systemPrompt, 'restored', 'the cold isolate restores the system prompt from its Durable Object');
  assert.ok(afterAll.heapBytes < ISOLATE_BYTES, `the wasm heap is ${afterAll.heapBytes} bytes`);
  stop();
  t.diagnostic(`${CONVERSATIONS} conversations: first replies in ${firstSeconds.toFixed(1)} s, ${reused} from the shared prompt; ` +
    `caches ${afterFirst.cacheBytes} bytes against ${separate} apart (${(separate / afterFirst.cacheBytes).toFixed(1)}x), ` +
    `prefix cache ${afterFirst.prefixEntries} entries / ${afterFirst.prefixBytes} bytes; wasm heap ${(afterFirst.heapBytes / 2 ** 20).toFixed(1)} MiB`);
});

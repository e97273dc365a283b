// The live demo in every browser engine (tests/runtimes/browsers.mjs:
// Chromium, Firefox, WebKit): a chat with stories260K in the page's worker
// -- a reply streams piece by piece, Stop aborts it, the context's end shows
// the chosen policy (stop, then slide) and never an error, a file that does
// not load leaves the chat running and says why in one place -- with the
// panels following it on the page's replica (its replayed speculative
// decoding against the worker's own figures); the synthetic stream, its
// inputs refused rather than clamped, its charts cleared on reset; the page
// without horizontal overflow at 420 px; branches sharing their prefix; the
// eviction panel evicting for real; a windowed model (gemma3, Chromium) with
// its global layers' rows growing and its window layers' flat in the memory
// panel; a model with its projector, a picture dropped into the chat shown
// with its token count and sent with a message, the reply the same as in
// Node; the search panel's hits, their similarities and rerank scores the
// ones Node gives; nothing erring anywhere. The demo is served by `npm start`
// itself, as a fresh clone runs it, with the model the repository ships.
// Screenshots go to a temporary folder the test names.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../web-demo/server.mjs';
import { BROWSERS, browserMissing, launchBrowser } from '../runtimes/browsers.mjs';
import { MODEL_MISSING, MODEL_PATH } from '../js/helpers.mjs';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf, writeGgufFile } from '../gguf/writer.mjs';
import { TINY_PROJECTORS, pairedLanguageModel, randomProjector } from '../gguf/vision.mjs';
import { encodePng, testImage } from '../runtimes/png.mjs';
import { serveHub } from '../runtimes/hf-server.mjs';
import { ready } from '../js/helpers.mjs';
import { Llama } from '../../js/llama.js';
import { Chat } from '../../js/chat.js';

const TOKENS = 100;
const WAIT_MS = 180000;
const START_MS = 90000;
const NARROW = 420;
const CONTEXT = 512; // stories260K's
// What each engine loads and how many threads it can run (the runtime
// matrix, tests/integration/runtimes.test.mjs, says why).
const EXPECTED = {
  chromium: { isa: 'wasm-relaxed-simd', threaded: true },
  firefox: { isa: 'wasm-relaxed-simd', threaded: true },
  webkit: { isa: 'wasm-simd128', threaded: false },
};
const MODES = ['f32', 'q8', 'q8k', 'q8v', 'q4', 'q8k+q4v'];

// A model that takes pictures, its projector and a picture (PNG: the pixels
// every browser decodes are the ones Node is given), and what Node replies.
const VISION = TINY_PROJECTORS.idefics3;
const PICTURE = testImage(48, 36, 5);
const QUESTION = 'What is in the picture?';
const PICTURE_REPLY_TOKENS = 12;
const vision = {};

// The search panel's paragraphs (the first search takes all but the last), its question, and the hits it
// shows: the nearest that many (a paragraph of two lines is one: paragraphs are blocks between blank lines).
const PARAGRAPHS = [
  'The fox slept under the old oak tree at the edge of the field.',
  'Bread needs flour, water, salt and time to rise.',
  'The river froze early that winter,\nand the children skated on it.',
  'A fox has a bushy tail and hunts at night.',
  'The library opens at nine and closes at six, except on Sundays.',
  'Owls sleep by day in hollow trees and hunt mice after dark.',
  'The train to the coast leaves every hour from platform two.',
  'Moss grows on the north side of the old stone wall.',
];
const SEARCH_QUESTION = 'Where did the fox sleep?';
const SEARCH_HITS = 5;
let searchCase = null;

/**
 * The search panel's files, tiny and random (their ranks mean nothing, but
 * are the same bits on every run), written for the server, and what Node's
 * Llama gives with them: each paragraph's similarity to the question, with
 * EmbeddingGemma's prompts, and its rerank score. Made once, for every engine.
 */
function searchFiles() {
  searchCase ??= (async () => {
    const paths = { embedderPath: join(artifacts, 'search-embedder.gguf'), rerankerPath: join(artifacts, 'search-reranker.gguf') };
    writeGgufFile(paths.embedderPath, randomLlama(GEOMETRIES['tiny-embeddinggemma'], { mix: 'Q8_0' }));
    writeGgufFile(paths.rerankerPath, randomLlama(GEOMETRIES['tiny-qwen3-reranker'], { mix: 'Q8_0' }));
    const embedder = Llama.fromGguf(readFileSync(paths.embedderPath));
    const reranker = Llama.fromGguf(readFileSync(paths.rerankerPath));
    try {
      const documents = await embedder.embed(PARAGRAPHS.map((paragraph) => `title: none | text: ${paragraph}`));
      const [query] = await embedder.embed(`task: search result | query: ${SEARCH_QUESTION}`);
      const { scores } = await reranker.rerank(SEARCH_QUESTION, PARAGRAPHS);
      return { paths, similarities: documents.map((vector) => vector.reduce((sum, x, i) => sum + x * query[i], 0)), scores };
    } finally {
      embedder.free();
      reranker.free();
    }
  })();
  return searchCase;
}

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** `npm start` as a fresh clone runs it (no option but a free port): { url, output, close() }. */
async function npmStart() {
  const child = spawn('npm', ['start', '--', '--port', '0'], { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start printed no address in ${START_MS / 1000} s:\n${output}`)), START_MS);
    child.stdout.on('data', (chunk) => {
      output += chunk;
      const address = output.match(/kvcache-wasm demo: (\S+)/);
      if (address && output.includes('Ctrl-C stops the server.')) {
        clearTimeout(timer);
        resolve(address[1]);
      }
    });
    child.stderr.on('data', (chunk) => { output += chunk; });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`npm start exited with ${code}:\n${output}`));
    });
  });
  // npm runs the server in a child of its own: the whole group stops.
  return { url, output, close: () => { try { process.kill(-child.pid, 'SIGTERM'); } catch { /* gone already */ } } };
}

let server;
let artifacts;
before(async () => {
  server = await npmStart();
  assert.match(server.output, /model: \S*models\/stories260k\.gguf \(the page finds it/, 'npm start serves the model the repository ships');
  artifacts = mkdtempSync(join(tmpdir(), 'kvcache-demo-'));
  await ready();
  vision.model = encodeGguf(pairedLanguageModel(VISION, { mix: 'Q8_0', seed: 21 }));
  vision.projector = encodeGguf(randomProjector(VISION, { mix: 'Q8_0', seed: 21 }));
  vision.png = encodePng(PICTURE);
  const llama = Llama.fromGguf(vision.model, { projector: vision.projector });
  try {
    vision.count = llama.imageTokenCount(PICTURE);
    vision.digest = (await llama.prepareImage(PICTURE)).digest;
    const chat = new Chat(llama.session());
    vision.reply = '';
    for await (const piece of chat.send([{ type: 'image', image: PICTURE }, { type: 'text', text: QUESTION }], { temperature: 0, maxTokens: PICTURE_REPLY_TOKENS })) vision.reply += piece.text;
  } finally {
    llama.free();
  }
});
after(() => server?.close());

for (const name of BROWSERS) {
  describe(`the demo in ${name}`, () => {
    let skipWhy = null;
    // The shared-prefix and eviction panels' logic is the package's, the same in every engine;
    // WebKit's one SIMD128 thread took 14-17 s for each (5-7 s elsewhere) of npm test's 25 minutes.
    const panelSkip = name === 'webkit'
      ? 'WebKit: this panel runs in Chromium and Firefox (its branches take WebKit three times as long)' : null;
    let browser;
    let page;

    before(async () => {
      skipWhy = await browserMissing(name);
      if (skipWhy) return;
      browser = await launchBrowser(name);
      page = await browser.open(server.url);
      // Bounded here, so that a start that never ends says at which step it stopped.
      const start = await page.evaluate(`async () => Promise.race([
        window.demo.ready.then(() => 'ready'),
        new Promise((resolve) => setTimeout(() => resolve(window.demo.startup), ${START_MS})),
      ])`);
      assert.equal(start, 'ready', `${name}: the page did not start in ${START_MS} ms: stopped at ${start}`);
    });
    after(() => browser?.close());

    const snapshot = () => page.evaluate('async () => window.demo.snapshot()');
    /** Enters a value as a user does, the input's change included (Playwright's fill sends none before a blur). */
    const enter = (selector, value) => page.evaluate(`async ([s, v]) => {
      const input = document.querySelector(s);
      input.value = v;
      input.dispatchEvent(new Event('input', { bubbles: true }));
      input.dispatchEvent(new Event('change', { bubbles: true }));
    }`, [selector, value]);
    const text = (selector) => page.evaluate('async (s) => document.querySelector(s).textContent', selector);
    /** The state once the page has drawn it: charts redraw on the next animation frame, not on each step. */
    const drawnSnapshot = async () => {
      await page.evaluate('async () => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
      return snapshot();
    };
    /** Polls the page until `done(snapshot)` holds. */
    async function waitFor(done, what, read = snapshot) {
      const deadline = Date.now() + WAIT_MS;
      for (;;) {
        const state = await read();
        if (done(state)) return state;
        if (Date.now() > deadline) assert.fail(`${name}: waited ${WAIT_MS} ms for ${what}; last state ${JSON.stringify(state).slice(0, 600)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    async function noProblems(state) {
      state ??= await snapshot();
      assert.deepEqual([...page.problems(), ...state.errors], [], 'no console errors, page errors or failed requests');
      assert.equal(state.statusIsError, false, `the status is no error: ${state.status}`);
    }
    async function screenshot(t, what, detail) {
      const file = join(artifacts, `demo-${name}-${what}.png`);
      await page.screenshot(file);
      t.diagnostic(`screenshot: ${file} (${detail})`);
    }
    /** Sends a message with these max tokens and waits for the reply's end; returns the state and that reply. */
    async function chatTurn(message, { maxTokens = 256 } = {}) {
      const before = (await snapshot()).chat.replies.length;
      await page.fill('#max-tokens', String(maxTokens));
      await page.fill('#chat-input', message);
      await page.click('#send');
      const state = await waitFor((s) => !s.replying && s.chat.replies.length > before && s.chat.replies.at(-1).stop !== null, 'the reply\'s end');
      return { state, reply: state.chat.replies.at(-1) };
    }
    /** After a reply Stop ended: the chat keeps what `kept` says came, the page's caches follow the worker's session, and the next turn goes on. */
    async function stoppedThenNextTurn(state, reply, kept) {
      assert.equal(state.chat.messages.at(-1).content, reply.text, kept);
      assert.equal(state.position, state.chat.workerCache.nextPosition, 'the page\'s caches follow the worker\'s session');
      const next = await chatTurn('Then it rained.', { maxTokens: 20 });
      assert.ok(next.reply.pieces > 0 && ['end', 'maxTokens'].includes(next.reply.stop), `the next turn: ${JSON.stringify(next.reply)}`);
      assert.equal(next.state.position, next.state.chat.workerCache.nextPosition);
      await noProblems(next.state);
    }
    /** A new chat in `policy`, then turns until the replica holds `positions` positions, or the context stopped a reply. */
    async function chatUntil(positions, { policy = 'stop' } = {}) {
      await page.select('#source', 'model');
      await page.select('#context-policy', policy);
      await page.click('#new-chat');
      await waitFor((s) => s.chat.open && s.chat.replies.length === 0 && s.source === 'model', 'a new chat');
      let state;
      for (let turn = 0; turn < 8; turn++) {
        ({ state } = await chatTurn('Once upon a time', { maxTokens: 600 }));
        if (state.position >= positions || state.chat.replies.at(-1).stop === 'context') break;
      }
      return drawnSnapshot();
    }

    /** The synthetic stream, run fast until `tokens` tokens and a rollback, paused. */
    async function runSynthetic() {
      await page.select('#source', 'synthetic');
      await page.fill('#speed', '200');
      await page.click('#start');
      await waitFor((s) => s.tokens >= TOKENS && s.stats.rollbacks > 0 && s.seqLenWentDown, `${TOKENS} tokens and a rollback`);
      await page.click('#start'); // pause
      return drawnSnapshot();
    }

    function checkPanels(state, source) {
      assert.equal(state.source, source);
      for (const mode of MODES) {
        assert.ok(state.chartPoints[mode] > 0, `the memory chart has points for ${mode}`);
        assert.ok(state.memoryBytes[mode] > 0);
        assert.equal(state.displayedBytes[mode], state.memoryBytes[mode], `the page shows ${mode}'s memoryBytes`);
      }
      assert.ok(state.memoryBytes.q8 < state.memoryBytes.f32, 'q8 holds fewer bytes than f32');
      // (Not so q4 at a demo's hundred or two positions: its 64 newest rows are kept in f32
      // beside their codes, so it holds less than f32 only past ~140 positions and less than
      // q8 past ~600 at head_dim 128 -- README, Storage.)
      assert.ok(state.stats.rollbacks >= 1, 'a rollback happened');
      assert.ok(state.seqLenWentDown, 'the cache length went down');
      assert.ok(state.accuracyPoints > 0, 'the accuracy chart has points');
      // The rough edges: distinct byte labels in one unit, whole-number token ticks.
      const bytes = state.tickLabels['memory.y'];
      assert.equal(new Set(bytes).size, bytes.length, `distinct byte labels: ${bytes}`);
      assert.ok(bytes.every((label) => /^\d+(\.\d+)? (B|KiB|MiB)$/.test(label)), `byte labels: ${bytes}`);
      for (const axis of ['memory.x', 'accuracy.x', 'importance.x']) {
        assert.ok(state.tickLabels[axis].length > 0 && state.tickLabels[axis].every((label) => /^\d+$/.test(label)), `${axis}: whole ticks ${state.tickLabels[axis]}`);
      }
    }

    test('chats with stories260K in the worker: the reply streams, the panels follow it on the replica, the replay matches the worker', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (MODEL_MISSING) return t.skip(MODEL_MISSING);
      let state = await snapshot();
      assert.equal(state.model, 'stories260K', 'stories260K found and loaded');
      assert.equal(state.source, 'model');
      assert.match(state.chat.templateNote, /no chat template.*PLAIN_TEMPLATE/, 'the page says it chats through the plain template');
      assert.equal(await page.evaluate('async () => document.body.dataset.kernels'), EXPECTED[name].isa);
      // Before any token: no stale labels, nothing but an empty range.
      assert.deepEqual(state.tickLabels['memory.y'] ?? [], [], 'an empty memory chart has no byte labels');
      assert.deepEqual(state.xRange.memory, [0, 1]);
      // A reply, watched while it streams: pieces come before its end.
      await page.fill('#max-tokens', '256');
      await page.fill('#chat-input', 'Lily had a red ball.');
      await page.click('#send');
      const streaming = await waitFor((s) => s.replying && s.chat.replies.length === 1 && s.chat.replies[0].pieces > 0 || s.chat.replies[0]?.stop, 'the first piece');
      state = await waitFor((s) => !s.replying && s.chat.replies[0]?.stop, 'the reply\'s end');
      const [reply] = state.chat.replies;
      t.diagnostic(`${reply.pieces} pieces, seen streaming at ${streaming.chat.replies[0].pieces}; stop ${reply.stop}; worker: ${JSON.stringify(state.chat.workerStats)}`);
      assert.ok(streaming.replying && streaming.chat.replies[0].stop === null, 'a piece was shown while the reply went on');
      assert.ok(reply.pieces > 10 && reply.text.length > 20, `a reply of ${reply.pieces} pieces: ${JSON.stringify(reply.text.slice(0, 80))}`);
      assert.ok(['end', 'maxTokens'].includes(reply.stop), reply.stop);
      assert.deepEqual(state.chat.messages.map((m) => m.role), ['user', 'assistant']);
      assert.equal(state.chat.messages[1].content, reply.text, 'the chat keeps the reply the page showed');
      assert.equal(await text('#chat-log .message.assistant .text'), reply.text);
      // The replica against the worker: the same tokens, the same speculative decoding.
      const { workerStats, workerCache } = state.chat;
      assert.equal(state.position, workerCache.nextPosition, 'the replica holds the positions the worker does');
      assert.equal(state.seqLen, workerCache.rows);
      for (const key of ['tokens', 'forwardPasses', 'drafted', 'accepted', 'rollbacks']) {
        assert.equal(state.stats[key], workerStats[key], `the replayed ${key} are the worker's`);
      }
      state = await drawnSnapshot();
      checkPanels(state, 'model');
      assert.equal(state.accuracyMetric, 'KL vs f32 (nats)', 'the accuracy axis names its metric');
      // The threads panel in a chat: a step timed on the replica, the worker's threads shown.
      assert.ok(state.timing.all > 0 && state.timing.one > 0, `step timed: ${JSON.stringify(state.timing)}`);
      assert.match(await text('#threads-worker'), /^\d+ \(wasm-/);
      if (EXPECTED[name].threaded) assert.ok(state.workerThreads.threads > 1 || availableParallelism() === 1, `the worker runs ${state.workerThreads.threads} threads`);
      else assert.equal(state.workerThreads.threads, 1);
      await screenshot(t, 'chat', `${reply.pieces} pieces, ${state.stats.rollbacks} rollbacks replayed`);
      await noProblems(state);
    });

    test('JSON on: the reply, constrained in the worker to the editor\'s schema, parses and matches it; a schema the engine does not enforce is refused, naming the keyword', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (MODEL_MISSING) return t.skip(MODEL_MISSING);
      await page.click('#json-mode');
      assert.equal(await page.evaluate('async () => document.querySelector("#json-schema-editor").hidden'), false, 'the editor shows');
      const before = (await snapshot()).chat.replies.length;
      await page.fill('#max-tokens', '200');
      await page.fill('#chat-input', 'Tom and his dog.');
      await page.click('#send');
      let state = await waitFor((s) => !s.replying && s.chat.replies[before]?.stop, 'the JSON reply\'s end');
      const value = JSON.parse(state.chat.replies[before].text);
      assert.ok(typeof value.name === 'string' && value.name.length <= 16 && ['happy', 'sad'].includes(value.mood), JSON.stringify(value));
      await page.fill('#json-schema', '{ "type": "string", "format": "date" }');
      await page.fill('#chat-input', 'Again.');
      await page.click('#send');
      state = await waitFor((s) => !s.replying && s.chat.replies.length > before + 1, 'the refusal');
      assert.match(await text('#chat-log .notice:last-child'), /Refused: .*format "date" is not a format the engine enforces/);
      await page.click('#json-mode');
      await noProblems(state);
    });

    test('Stop aborts a reply: it ends as far as it came, short of the same reply let run, and the next turn goes on', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (MODEL_MISSING) return t.skip(MODEL_MISSING);
      const MESSAGE = 'Tom saw a dog.';
      const MAX_TOKENS = 200; // stories260K goes on to the context's end after it
      const newChat = async () => {
        await page.click('#new-chat');
        await waitFor((s) => s.chat.open && s.chat.replies.length === 0, 'a new chat');
      };
      // The reply let run: a new chat samples its first reply with the same seed.
      await newChat();
      const { reply: whole } = await chatTurn(MESSAGE, { maxTokens: MAX_TOKENS });
      await newChat();
      await page.fill('#max-tokens', String(MAX_TOKENS));
      await page.fill('#chat-input', MESSAGE);
      // Stop, clicked from the page as soon as a few characters of the reply have shown.
      await page.evaluate(`async () => {
        document.getElementById('send').click();
        await new Promise((resolve) => {
          const poll = setInterval(() => {
            if ((document.querySelector('#chat-log .message.assistant .text')?.textContent.length ?? 0) >= 8) {
              clearInterval(poll);
              document.getElementById('stop').click();
              resolve();
            }
          }, 1);
        });
      }`);
      const state = await waitFor((s) => !s.replying && s.chat.replies[0]?.stop, 'the aborted reply\'s end');
      const [reply] = state.chat.replies;
      // The page ends the reply where it shows it: the worker stops within a token of the abort
      // (tests/integration/worker.test.mjs), or had finished; what it sent beyond is not shown.
      t.diagnostic(`stopped after ${reply.pieces} pieces; the reply let run: ${whole.pieces} pieces, ${whole.stop}`);
      assert.equal(reply.stop, 'abort');
      assert.ok(reply.pieces < whole.pieces, `${reply.pieces} pieces, short of ${whole.pieces}`);
      assert.ok(whole.text.startsWith(reply.text), 'what came is the reply\'s beginning');
      assert.match(state.chat.notices.at(-1).text, /^Stopped: the reply is kept as far as it came/);
      await stoppedThenNextTurn(state, reply, 'the chat keeps what came');
    });

    test('Stop while the page is still showing a reply ends it at once, however far the worker got', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (MODEL_MISSING) return t.skip(MODEL_MISSING);
      const SETTLE_MS = 500;
      await page.click('#new-chat');
      await waitFor((s) => s.chat.open && s.chat.replies.length === 0, 'a new chat');
      // A long reply: stories260K writes it in the worker faster than the page runs it through its caches and shows it.
      await page.fill('#max-tokens', '400');
      await page.fill('#chat-input', 'Tom saw a dog.');
      // Stop once some of the reply has shown; then what the page shows, SETTLE_MS later and a second after that.
      const seen = await page.evaluate(`async (settle) => {
        const shown = () => document.querySelector('#chat-log .message.assistant .text')?.textContent ?? '';
        const pieces = () => window.demo.snapshot().chat.replies.at(-1).pieces;
        const controls = () => ({ send: !document.getElementById('send').disabled, stop: !document.getElementById('stop').disabled });
        document.getElementById('send').click();
        await new Promise((resolve) => {
          const poll = setInterval(() => {
            if (shown().length >= 8) {
              clearInterval(poll);
              resolve();
            }
          }, 1);
        });
        document.getElementById('stop').click();
        const atStop = { text: shown(), pieces: pieces() };
        await new Promise((resolve) => setTimeout(resolve, settle));
        const settled = { text: shown(), ...controls() };
        await new Promise((resolve) => setTimeout(resolve, 1000));
        return { atStop, settled, later: { text: shown(), pieces: pieces() } };
      }`, SETTLE_MS);
      const state = await waitFor((s) => !s.replying && s.chat.replies[0]?.stop, 'the stopped reply\'s end');
      const [reply] = state.chat.replies;
      t.diagnostic(`${seen.atStop.pieces} pieces (${seen.atStop.text.length} characters) shown at Stop, ${seen.settled.text.length} ` +
        `characters ${SETTLE_MS} ms later, ${seen.later.pieces} pieces (${seen.later.text.length} characters) a second after`);
      assert.equal(seen.later.text, seen.settled.text, `the shown reply stopped growing within ${SETTLE_MS} ms of Stop`);
      assert.ok(seen.later.pieces <= seen.atStop.pieces + 1, 'at most the piece on its way at Stop came after it');
      assert.deepEqual([seen.settled.send, seen.settled.stop], [true, false], `Send is enabled again and Stop disabled within ${SETTLE_MS} ms`);
      assert.equal(reply.stop, 'abort');
      assert.equal(reply.text, seen.later.text);
      assert.match(state.chat.notices.at(-1).text, new RegExp(`^Stopped: the reply is kept as far as it came \\(${reply.tokens} tokens\\)`));
      await stoppedThenNextTurn(state, reply, 'the chat keeps what was shown');
    });

    test('the context\'s end shows the policy: "stop" ends the reply and says so, "slide" goes on past it; never an error', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (MODEL_MISSING) return t.skip(MODEL_MISSING);
      // Filling 512 positions with WebKit's page replaying every token in six modes (SIMD128, one
      // thread) took 74 of npm test's 25 minutes; the policies are the package's, the same in every
      // engine, and this test holds them in Chromium and Firefox.
      if (name === 'webkit') return t.skip('WebKit: the context policies run in Chromium and Firefox (filling the context in WebKit takes over a minute)');
      let state = await chatUntil(Infinity, { policy: 'stop' });
      const stopped = state.chat.replies.at(-1);
      assert.equal(stopped.stop, 'context', `a reply met the context: ${JSON.stringify(state.chat.replies.map((r) => r.stop))}`);
      assert.equal(state.chat.workerCache.rows, CONTEXT, 'the worker\'s cache is full');
      assert.equal(state.seqLen, CONTEXT, 'so is the replica\'s');
      assert.equal(state.chat.notices.at(-1).kind, 'policy');
      assert.match(state.chat.notices.at(-1).text, /^The context is full: 512 of 512 positions\. Policy "stop"/);
      await noProblems(state);
      // One more turn finds no room: it takes nothing in and says the same.
      ({ state } = await chatTurn('And then?', { maxTokens: 50 }));
      assert.equal(state.chat.replies.at(-1).stop, 'context');
      assert.equal(state.chat.replies.at(-1).pieces, 1, 'only the piece that says why');
      assert.equal(state.chat.notices.at(-1).kind, 'policy');
      await screenshot(t, 'context-stop', `${state.chat.replies.length} turns, the context full`);
      await noProblems(state);
      // "slide": the same full chat goes on, the first positions and the newest kept.
      await page.select('#context-policy', 'slide');
      ({ state } = await chatTurn('Once upon a time', { maxTokens: 300 }));
      const slid = state.chat.replies.at(-1);
      t.diagnostic(`slide: ${JSON.stringify(state.chat.workerCache)}, reply stop ${slid.stop}, ${slid.pieces} pieces`);
      assert.notEqual(slid.stop, 'context');
      assert.ok(slid.pieces > 1);
      assert.ok(state.chat.workerCache.nextPosition > CONTEXT, 'positions went on past the context');
      assert.ok(state.chat.workerCache.rows <= CONTEXT, 'within the context\'s rows');
      assert.equal(state.seqLen, state.chat.workerCache.rows, 'the replica slid as the worker did');
      assert.deepEqual(state.shownPositions.slice(0, 4), [0, 1, 2, 3], 'the first positions stay');
      assert.match(await text('#context-meter'), /slid: the first 4 and the newest kept/);
      await screenshot(t, 'context-slide', `positions ${state.chat.workerCache.nextPosition}, rows ${state.chat.workerCache.rows}`);
      await noProblems(state);
    });

    test('a file that does not load leaves the chat as it was and says why in one place', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (MODEL_MISSING) return t.skip(MODEL_MISSING);
      await page.select('#source', 'model');
      const before = await waitFor((s) => s.chat.open && !s.replying, 'an open chat');
      await page.evaluate(`async () => {
        const input = document.getElementById('model-file');
        const files = new DataTransfer();
        files.items.add(new File([new TextEncoder().encode('not a GGUF file at all, just text')], 'broken.gguf'));
        input.files = files.files;
        input.dispatchEvent(new Event('change', { bubbles: true }));
      }`);
      let state = await waitFor((s) => s.loadNote?.kind === 'refused', 'the load to be refused');
      t.diagnostic(`load note: ${state.loadNote.text}`);
      assert.match(state.loadNote.text, /^broken\.gguf was not loaded: .+\. Still chatting with stories260K\.$/);
      assert.equal(await text('#load-note'), state.loadNote.text, 'the page shows it');
      assert.equal(state.model, 'stories260K');
      assert.equal(await text('#model-name'), 'stories260K');
      assert.deepEqual(state.chat.messages, before.chat.messages, 'the chat is the one before');
      assert.equal(state.status, before.status, 'the status still says what runs');
      await noProblems(state);
      const next = await chatTurn('The sun was hot.', { maxTokens: 20 });
      assert.ok(next.reply.pieces > 0, 'the model before still answers');
      await screenshot(t, 'failed-load', state.loadNote.text);
      await noProblems(next.state);
    });

    test('runs the synthetic stream: memory per mode, rollbacks, a step timed on all threads and on one, charts cleared on reset', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      const state = await runSynthetic();
      checkPanels(state, 'synthetic');
      assert.equal(state.accuracyMetric, 'rel. error vs f32', 'the accuracy axis names its metric');
      if (EXPECTED[name].threaded) {
        assert.ok(state.threads.threads > 1 || availableParallelism() === 1, `the page runs ${state.threads.threads} threads (${state.threads.reason})`);
      } else {
        assert.equal(state.threads.threads, 1);
        assert.match(await text('#threads-note'), /^Fewer threads than cores: .+\.$/, 'the page says why one thread');
      }
      assert.ok(state.timing.all > 0 && state.timing.one > 0, `step timed: ${JSON.stringify(state.timing)}`);
      assert.equal(await text('#threads'), String(state.threads.threads));
      assert.match(await text('#speedup'), /^\d+\.\d\d×$/);
      await screenshot(t, 'synthetic', `${state.tokens} positions, ${state.stats.rollbacks} rollbacks, ${state.threads.threads} threads`);
      await page.click('#reset');
      const cleared = await drawnSnapshot();
      assert.deepEqual(cleared.xRange.memory, [0, 1], 'no stale x range after reset');
      assert.deepEqual(cleared.xRange.accuracy, [0, 1]);
      assert.deepEqual(cleared.tickLabels['memory.y'], [], 'no "0 KiB" labels on an empty chart');
      assert.equal(cleared.chartPoints.f32, 0);
      await noProblems(cleared);
    });

    test('synthetic inputs run as given or are refused, never clamped: head_dim 7 runs as 7, 0 KV heads is refused', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      await page.select('#source', 'synthetic');
      await enter('#heads', '8');
      await enter('#head-dim', '7');
      let state = await snapshot();
      assert.deepEqual(state.synthetic && [state.synthetic.heads, state.synthetic.headDim], [8, 7], 'head_dim 7 runs as 7');
      assert.match(state.status, /8 KV heads × head_dim 7/);
      assert.equal(state.inputNote, '');
      for (let i = 0; i < 20; i++) await page.click('#step');
      state = await snapshot();
      assert.ok(state.tokens > 0 && state.memoryBytes.f32 > 0, `steps at head_dim 7: ${state.tokens} positions`);
      await enter('#heads', '0');
      state = await snapshot();
      assert.deepEqual([state.synthetic.heads, state.synthetic.headDim], [8, 7], 'the run before goes on');
      assert.match(state.inputNote, /^Refused: KV heads must be a whole number from 1 to 64 \(got "0"\)\. Running: synthetic, 8 KV heads × head_dim 7/);
      assert.match(state.status, /8 KV heads × head_dim 7/, 'the status says what runs');
      await enter('#heads', '2.5');
      assert.match((await snapshot()).inputNote, /KV heads must be a whole number/);
      await enter('#heads', '8');
      await enter('#head-dim', '128');
      state = await snapshot();
      assert.equal(state.inputNote, '');
      assert.deepEqual([state.synthetic.heads, state.synthetic.headDim], [8, 128]);
      await noProblems(state);
    });

    test('the shared-prefix panel branches conversations that hold the prefix once', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (panelSkip) return t.skip(panelSkip);
      const source = MODEL_MISSING ? 'synthetic' : 'model';
      if (source === 'model') {
        await chatUntil(150);
      } else {
        await page.select('#source', source);
        await page.fill('#speed', '200');
        await page.click('#start');
        await waitFor((s) => s.position >= 150, '150 positions');
      }
      await page.fill('#branch-count', '8');
      await page.fill('#branch-tokens', '16');
      await page.click('#branch');
      const state = await drawnSnapshot();
      const { branches } = state;
      assert.equal(branches.count, 8);
      assert.equal(branches.texts.length, 8);
      assert.ok(branches.sharedBytes > 0, 'the branches hold what they wrote');
      // Each branch copies at most the partly filled last page of each
      // sequence (63 positions) besides its own 16: from 150 positions on,
      // under half of what a deep copy holds.
      assert.ok(branches.deepBytes > 2 * branches.sharedBytes,
        `8 branches hold ${branches.sharedBytes} bytes shared, ${branches.deepBytes} as deep copies`);
      if (source === 'model') assert.ok(new Set(branches.texts).size > 1, `the branches went their own ways: ${JSON.stringify(branches.texts)}`);
      assert.match(await text('#branch-ratio'), /^\d+\.\d×$/);
      assert.equal(await text('#branches'), '8');
      await page.fill('#branch-count', '0');
      await page.click('#branch');
      assert.match((await snapshot()).inputNote, /^Refused: Branches must be a whole number from 1 to 32/, 'a count out of range is refused');
      await page.fill('#branch-count', '8');
      await screenshot(t, 'branches', `${source}: ${(branches.deepBytes / branches.sharedBytes).toFixed(1)}x less than deep copies`);
      await noProblems();
    });

    test('the eviction panel evicts for real: it shows the cache\'s own plan, evicts to it, and maxRows keeps every cache within the budget', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (panelSkip) return t.skip(panelSkip);
      const source = MODEL_MISSING ? 'synthetic' : 'model';
      const BUDGET = 48;
      if (source === 'model') await chatUntil(150);
      else await runSynthetic();
      await page.fill('#budget', String(BUDGET));
      // Step past an open verify: eviction waits for accept.
      for (let i = 0; i < 20 && (await snapshot()).verifying; i++) await page.click('#step');
      const before = await drawnSnapshot();
      assert.equal(before.verifying, false);
      assert.deepEqual(before.importance.positions, before.shownPositions, 'the panel draws the positions the cache holds');
      assert.equal(before.importance.kept.length, BUDGET, 'the plan keeps the budget');
      assert.ok(before.rows.every((rows) => rows > BUDGET), `rows before: ${before.rows}`);
      await page.click('#evict');
      const after = await drawnSnapshot();
      assert.equal(after.evictions, 1);
      assert.ok(after.rows.every((rows) => rows === BUDGET), `rows after: ${after.rows}`);
      assert.deepEqual(after.shownPositions, before.importance.kept, 'evict kept what the panel showed');
      assert.deepEqual(after.shownPositions.slice(0, 4), [0, 1, 2, 3], 'the sinks stay');
      assert.equal(after.shownPositions.at(-1), before.position - 1, 'the newest stays');
      assert.equal(after.position, before.position, 'positions go on where they were');
      for (const mode of ['f32', 'q8']) assert.ok(after.memoryBytes[mode] < before.memoryBytes[mode], `${mode} memory went down`);
      // Bounded: appends evict first; only an open verify's drafts (at most 8) go past the budget.
      await page.check('#bound');
      let bounded;
      if (source === 'model') {
        ({ state: bounded } = await chatTurn('The end.', { maxTokens: 60 }));
      } else {
        await page.click('#start');
        await waitFor((s) => s.position >= after.position + 60, '60 more positions');
        await page.click('#start');
        bounded = await snapshot();
      }
      assert.ok(bounded.position > after.position, 'more positions came');
      assert.ok(bounded.rows.every((rows) => rows <= BUDGET + 8), `rows while bounded: ${bounded.rows}`);
      assert.ok(bounded.memoryBytes.f32 <= after.memoryBytes.f32 * (BUDGET + 8) / BUDGET, 'memory stays flat');
      await page.check('#bound'); // unchecked again for the tests after
      await screenshot(t, 'eviction', `${source}, budget ${BUDGET}, position ${bounded.position}, rows ${Math.max(...bounded.rows)}`);
      await noProblems();
    });

    test('a windowed model (gemma3) chats like the others, and the memory panel shows its global layers\' rows growing and its window layers\' flat', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (name !== 'chromium') return t.skip('Chromium: a file picked from disk (setInputFiles) is the way in here, and the layers\' bookkeeping is the package\'s, the same in every engine');
      const file = join(artifacts, 'tiny-gemma3.gguf');
      writeGgufFile(file, randomLlama(GEOMETRIES['tiny-gemma3'], { mix: 'Q8_0', seed: 11 }));
      await page.select('#source', 'model');
      await page.setInputFiles('#model-file', [file]);
      let state = await waitFor((s) => (s.model === 'tiny-gemma3.gguf' && s.chat.open && s.chat.workerCache?.windowLayers > 0) || s.loadNote?.kind === 'refused', 'the gemma3 file to load');
      assert.notEqual(state.loadNote?.kind, 'refused', state.loadNote?.text);
      assert.equal(state.layerRows.shown, true, 'the layers chart shows for a windowed model');
      for (let turn = 0; turn < 6 && state.chat.workerCache.nextPosition < 300; turn++) ({ state } = await chatTurn('Once upon a time', { maxTokens: 80 }));
      state = await drawnSnapshot();
      const { positions, global, window } = state.layerRows;
      t.diagnostic(`positions ${positions}; global layer rows ${global}; window layer rows ${window}`);
      assert.ok(positions.at(-1) >= 300, `positions reached ${positions.at(-1)}`);
      assert.deepEqual(global, positions, 'a global layer holds every position');
      // Window 16, rollback 64, and up to a page (64) before sliding: flat however long the chat.
      assert.ok(window.every((rows) => rows <= 16 + 64 + 64), `window layer rows ${window}`);
      assert.equal(state.chat.workerCache.windowLayers, 7);
      assert.match(await text('#context-meter'), /its 7 sliding-window layers hold \d+ rows each at most/);
      await screenshot(t, 'windowed-model', `gemma3 at ${positions.at(-1)} positions: global ${global.at(-1)} rows, window ${window.at(-1)}`);
      await noProblems(state);
    });

    test('with a projector, a picture dropped into the chat shows as a thumbnail with its token count and goes with the message: the pixels and their positions are Node\'s, and the reply on SIMD128', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      /** A file as the page gets one from a picker: set on `selector`'s input, its change sent. */
      const pick = (selector, name, bytes) => page.evaluate(`async ([selector, name, base64]) => {
        const files = new DataTransfer();
        files.items.add(new File([Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))], name));
        const input = document.querySelector(selector);
        input.files = files.files;
        input.dispatchEvent(new Event('change', { bubbles: true }));
      }`, [selector, name, Buffer.from(bytes).toString('base64')]);
      /** A picture dropped on the page. */
      const drop = (name, bytes) => page.evaluate(`async ([name, base64]) => {
        const files = new DataTransfer();
        files.items.add(new File([Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))], name, { type: 'image/png' }));
        document.dispatchEvent(new DragEvent('drop', { dataTransfer: files, bubbles: true, cancelable: true }));
      }`, [name, Buffer.from(bytes).toString('base64')]);
      await page.select('#source', 'model');
      await pick('#model-file', 'vision.gguf', vision.model);
      let state = await waitFor((s) => (s.model === 'vision.gguf' && s.chat.open) || s.loadNote?.kind === 'refused', 'the model to load');
      assert.notEqual(state.loadNote?.kind, 'refused', state.loadNote?.text);
      // Without its projector the model takes no picture, and says so.
      await drop('picture.png', vision.png);
      state = await waitFor((s) => s.inputNote !== '', 'the picture to be refused');
      assert.match(state.inputNote, /^Refused: picture\.png is a picture, and vision\.gguf has no projector to see it: load its mmproj GGUF first/);
      assert.deepEqual(state.attachments, []);
      await pick('#projector-file', 'mmproj.gguf', vision.projector);
      state = await waitFor((s) => (s.projector?.name === 'mmproj.gguf' && s.chat.open) || s.loadNote?.kind === 'refused', 'the projector to load');
      assert.deepEqual(state.projector, { name: 'mmproj.gguf', type: 'idefics3' }, state.loadNote?.text);
      assert.equal(await text('#projector-name'), 'mmproj.gguf (idefics3)');
      // The picture, dropped: its thumbnail and the positions it will take, as the package counts them.
      await drop('picture.png', vision.png);
      state = await waitFor((s) => s.attachments.length === 1 || s.inputNote !== '', 'the picture to attach');
      assert.deepEqual(state.attachments, [{ name: 'picture.png', width: PICTURE.width, height: PICTURE.height, count: vision.count }], state.inputNote);
      assert.match(await text('#attachments'), new RegExp(`picture\\.png: 48×36, ${vision.count.total} positions`));
      await screenshot(t, 'picture-attached', `the picture waiting for the message: ${vision.count.total} positions`);
      await page.fill('#temperature', '0');
      const { state: replied, reply } = await chatTurn(QUESTION, { maxTokens: PICTURE_REPLY_TOKENS });
      await page.fill('#temperature', '0.8');
      t.diagnostic(`reply to the picture (${reply.stop}): ${JSON.stringify(reply.text)}`);
      assert.ok(reply.pieces > 0 && ['end', 'maxTokens'].includes(reply.stop), JSON.stringify(reply));
      const [question] = replied.chat.messages;
      assert.deepEqual(question.content.map((part) => part.type), ['image', 'text']);
      assert.equal(question.content[0].image.digest, vision.digest, 'the worker decoded the very pixels Node was given');
      // Node runs SIMD128: a random model's greedy reply may meet a near-tie that relaxed SIMD's rounding tips the other way.
      if (EXPECTED[name].isa === 'wasm-simd128') assert.equal(reply.text, vision.reply, 'the reply is the one Node gives');
      else t.diagnostic(`${EXPECTED[name].isa}: the reply is not compared with Node's (SIMD128; tests/integration/worker.test.mjs compares it on SIMD128 in every engine)`);
      assert.deepEqual(replied.chat.sentImages, [{ name: 'picture.png', width: 48, height: 36, positions: vision.count.total }]);
      assert.deepEqual(replied.chat.thumbnails, [{ complete: true, width: 48 }], 'the user\'s message shows the picture');
      assert.deepEqual(replied.attachments, [], 'sent, the picture leaves the next message');
      await screenshot(t, 'picture-chat', `${vision.count.total} positions for a 48×36 picture; reply ${JSON.stringify(reply.text)}`);
      await noProblems(replied);
    });

    test('the stored-model picker lists stories260K with its size; after a reload the conversation is back, its cache as it was', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (MODEL_MISSING) return t.skip(MODEL_MISSING);
      // As tests/integration/store.test.mjs finds: nothing a page stores outlives a reload there.
      if (name === 'webkit') return t.skip('WebKitGTK under WebDriver keeps Cache API entries only until a reload, and has no OPFS');
      let state = await snapshot();
      const stored = state.stored.find((m) => m.key.endsWith('/models/stories260k.gguf'));
      assert.deepEqual(stored && [stored.complete, stored.size], [true, statSync(MODEL_PATH).size], `the picker lists ${JSON.stringify(state.stored)}`);
      if (state.model !== 'stories260K') {
        // Picked from the store's list (a windowed model may be loaded from disk by now).
        await page.evaluate(`async (key) => [...document.querySelectorAll('#stored-list li')]
          .find((li) => li.querySelector('[data-key]').dataset.key === key).querySelector('button').click()`, stored.key);
        await waitFor((s) => s.model === 'stories260k.gguf' && s.chat.open && !s.replying, 'stories260K from the store (named by its file)');
      }
      await page.select('#source', 'model');
      await page.click('#new-chat');
      await waitFor((s) => s.chat.open && s.chat.replies.length === 0, 'a new chat');
      const { state: before } = await chatTurn('Lily had a red ball.', { maxTokens: 30 });
      await page.evaluate('async () => { setTimeout(() => location.reload(), 20); return true; }');
      await new Promise((resolve) => setTimeout(resolve, 500));
      const start = await waitFor((ready) => ready === 'ready', 'the reloaded page to start',
        () => page.evaluate(`async () => window.demo ? Promise.race([window.demo.ready.then(() => 'ready'),
          new Promise((resolve) => setTimeout(() => resolve(window.demo.startup), 1000))]) : 'loading'`).catch(() => 'loading'));
      assert.equal(start, 'ready');
      state = await waitFor((s) => s.chat.open && s.model === 'stories260K', 'the reloaded page\'s chat');
      assert.deepEqual(state.chat.messages, before.chat.messages, 'the conversation is back');
      assert.equal(state.restored, before.chat.messages.length);
      assert.equal(state.chat.workerCache.nextPosition, before.chat.workerCache.nextPosition, 'the worker\'s cache holds what it held');
      assert.equal(state.position, state.chat.workerCache.nextPosition, 'the page\'s replica follows it');
      assert.equal(await page.evaluate("async () => document.querySelectorAll('#chat-log .message').length"), before.chat.messages.length);
      const next = await chatTurn('The sun was hot.', { maxTokens: 20 });
      assert.ok(next.reply.pieces > 0, 'the restored conversation goes on');
      await screenshot(t, 'restored-chat', `${state.restored} messages restored; stored: ${JSON.stringify(state.stored)}`);
      await noProblems(next.state);
    });

    test('the search panel: pasted paragraphs and a question give the nearest 5, each with the similarity and rerank score Node gives, best first; vectors kept; Stop stops', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (name === 'webkit') return t.skip('WebKit: the search panel runs in Chromium and Firefox (WebKitWebDriver drives one window, and this test opens a page of its own)');
      const { paths, similarities, scores } = await searchFiles();
      // As npm start -- --embedder FILE --reranker FILE serves them; the page on Node's build (on relaxed SIMD
      // these files' similarities and scores are Node's to about 1e-3 only).
      const served = await startServer({ port: 0, ...paths });
      const search = await browser.open(`${served.url}?isa=wasm-simd128`);
      const read = () => search.evaluate('async () => window.demo.snapshot()');
      /** Searches the first `count` paragraphs, pasted; the state once the search ended. */
      async function searchFor(count) {
        await search.fill('#search-paragraphs', PARAGRAPHS.slice(0, count).join('\n\n'));
        await search.fill('#search-question', SEARCH_QUESTION);
        await search.click('#search');
        return waitFor((s) => !s.search.searching && s.search.note !== null && s.search.note.kind !== 'loading', 'the search\'s end', read);
      }
      /** The hits are the nearest of the first `count` paragraphs by Node's similarities, each with Node's similarity and score, best score first. */
      function checkHits(state, count) {
        assert.equal(state.search.note.kind, 'loaded', state.search.note.text);
        const { hits } = state.search;
        const nearest = similarities.slice(0, count).map((similarity, index) => ({ index, similarity }))
          .sort((a, b) => b.similarity - a.similarity).slice(0, SEARCH_HITS).map(({ index }) => index);
        const byIndex = (a, b) => a - b;
        assert.deepEqual(hits.map((hit) => hit.index).sort(byIndex), nearest.sort(byIndex), `the nearest ${SEARCH_HITS} of ${count}`);
        for (const { index, paragraph, similarity, score } of hits) {
          assert.equal(paragraph, PARAGRAPHS[index]);
          assert.ok(Math.abs(similarity - similarities[index]) <= 1e-6, `paragraph ${index}: similarity ${similarity}, Node's ${similarities[index]}`);
          assert.ok(Math.abs(score - scores[index]) <= 1e-6, `paragraph ${index}: rerank score ${score}, Node's ${scores[index]}`);
        }
        assert.ok(hits.every((hit, i) => i === 0 || hits[i - 1].score >= hit.score), `best first: ${hits.map((hit) => hit.score)}`);
        assert.deepEqual(state.search.shown, hits.map(({ index, similarity, score }) =>
          `paragraph ${index + 1}: similarity ${similarity.toFixed(4)}, rerank score ${score.toFixed(4)}`), 'the page shows them');
      }
      try {
        assert.deepEqual(await search.evaluate('async () => window.demo.ready'), { model: true });
        let state = await read();
        const kernels = await search.evaluate('async () => [document.body.dataset.kernels, document.getElementById("threads-worker").textContent]');
        assert.ok(kernels[0] === 'wasm-simd128' && kernels[1].endsWith('(wasm-simd128)'), `the page and its worker on SIMD128: ${kernels}`);
        assert.deepEqual([state.search.embedder, state.search.reranker], ['search-embedder.gguf', 'search-reranker.gguf']);
        assert.deepEqual(state.search.prompts, { query: 'task: search result | query: ', document: 'title: none | text: ' }, 'a gemma-embedding file gets EmbeddingGemma\'s prompts');
        state = await searchFor(PARAGRAPHS.length - 1);
        t.diagnostic(`${state.search.note.text} Hits: ${state.search.shown.join('; ')}`);
        checkHits(state, PARAGRAPHS.length - 1);
        assert.equal(state.search.embedded, PARAGRAPHS.length - 1);
        const passes = state.search.progress.at(-1);
        assert.ok(state.search.progress.some((p) => p.what === `embedding ${PARAGRAPHS.length - 1} of ${PARAGRAPHS.length - 1} paragraphs`), 'progress while embedding');
        assert.ok(passes.what.startsWith('reranking') && passes.done === passes.total, `the last pass: ${JSON.stringify(passes)}`);
        // One paragraph more: only it is embedded, the others' vectors kept.
        state = await searchFor(PARAGRAPHS.length);
        checkHits(state, PARAGRAPHS.length);
        assert.deepEqual([state.search.embedded, state.search.kept], [1, PARAGRAPHS.length]);
        await search.evaluate('async () => document.getElementById("panel-search").scrollIntoView()');
        const file = join(artifacts, `demo-${name}-search.png`);
        await search.screenshot(file);
        t.diagnostic(`screenshot: ${file} (${SEARCH_HITS} hits of ${PARAGRAPHS.length} paragraphs)`);
        // Stop, clicked as the search starts: it ends there, with no hits, and Search is there again.
        await search.evaluate('async () => { document.getElementById("search").click(); document.getElementById("search-stop").click(); }');
        state = await waitFor((s) => !s.search.searching, 'the stopped search\'s end', read);
        assert.deepEqual(state.search.note, { text: 'Stopped: no hits.', kind: 'end' });
        assert.deepEqual(state.search.hits, []);
        assert.deepEqual(await search.evaluate('async () => [document.getElementById("search").disabled, document.getElementById("search-stop").disabled]'), [false, true]);
        assert.deepEqual([...search.problems(), ...state.errors], [], 'no console errors, page errors or failed requests');
        assert.equal(state.statusIsError, false, state.status);
      } finally {
        await search.close();
        await served.close();
      }
    });

    test(`no horizontal overflow at ${NARROW} px, in the chat and on the synthetic stream`, async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      // Last: WebKitWebDriver drives one window, which this page takes over.
      const narrow = await browser.open(server.url, { width: NARROW, height: 900 });
      try {
        await narrow.evaluate('async () => window.demo.ready');
        // A window that does not go so narrow (MiniBrowser's): the demo in a 420 px frame of it, its own viewport.
        const windowWidth = await narrow.evaluate('async () => document.documentElement.clientWidth');
        const framed = windowWidth > NARROW;
        if (framed) {
          t.diagnostic(`${name}'s window is ${windowWidth} px at the narrowest: the demo in a ${NARROW} px iframe of it`);
          await narrow.evaluate(`async ([width, height]) => {
            const frame = document.createElement('iframe');
            Object.assign(frame, { src: '/', width: String(width), height: String(height) });
            frame.style.cssText = 'position: fixed; inset: 0 auto auto 0; border: 0; background: #fff; z-index: 10';
            document.body.append(frame);
            await new Promise((resolve) => frame.addEventListener('load', resolve, { once: true }));
            await frame.contentWindow.demo.ready;
          }`, [NARROW, 900]);
        }
        const target = framed ? 'document.querySelector("iframe").contentWindow' : 'window';
        const inPage = (body, arg) => narrow.evaluate(`async (arg) => { const w = ${target}; const d = w.document; ${body} }`, arg);
        const set = (id, value) => inPage(`const input = d.getElementById(arg[0]); input.value = arg[1];
          input.dispatchEvent(new Event('input', { bubbles: true })); input.dispatchEvent(new Event('change', { bubbles: true }));`, [id, value]);
        for (const source of MODEL_MISSING ? ['synthetic'] : ['model', 'synthetic']) {
          await set('source', source);
          if (source === 'model') {
            const read = () => inPage('return w.demo.snapshot();');
            // Send and the input stay disabled until the chat opens (the model loads after the source changes).
            await waitFor((s) => s.chat.open, 'the narrow page\'s chat to open', read);
            await set('max-tokens', '40');
            await set('chat-input', 'A long message to wrap: abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz.');
            await inPage('d.getElementById("send").click();');
            await waitFor((s) => !s.replying && s.chat.replies[0]?.stop, 'the narrow page\'s reply to end', read);
          }
          await inPage('await new Promise((resolve) => w.requestAnimationFrame(() => w.requestAnimationFrame(resolve)));');
          const state = await inPage('return w.demo.snapshot();');
          const file = join(artifacts, `demo-${name}-narrow-${source}.png`);
          await narrow.screenshot(file);
          t.diagnostic(`screenshot: ${file} (${JSON.stringify(state.overflow)})`);
          assert.ok(state.overflow.clientWidth <= NARROW, `a narrow page: ${state.overflow.clientWidth} px`);
          assert.ok(state.overflow.scrollWidth <= state.overflow.clientWidth, `${source}: ${state.overflow.scrollWidth} px of content in ${state.overflow.clientWidth}`);
          assert.deepEqual([...narrow.problems(), ...state.errors], []);
        }
      } finally {
        await narrow.close();
      }
    });
  });
}

test('the demo server serves the package files with the right MIME types and nothing outside them', async () => {
  const get = (path) => fetch(new URL(path, server.url));
  const type = async (path) => (await get(path)).headers.get('content-type');
  assert.equal(await type('/pkg/dist/kvcache.wasm'), 'application/wasm');
  assert.match(await type('/pkg/js/index.js'), /^text\/javascript/);
  assert.match(await type('/pkg/js/llama-worker.js'), /^text\/javascript/);
  assert.match(await type('/vendor/jinja/index.js'), /^text\/javascript/);
  assert.match(await type('/support/synthetic.mjs'), /^text\/javascript/);
  assert.match(await type('/'), /^text\/html/);
  assert.equal((await get('/pkg/js/../../package.json')).status, 404);
  assert.equal((await get('/pkg/js/%2e%2e/%2e%2e/package.json')).status, 404);
  assert.equal((await get('/src/core/layer.c')).status, 404);
  const page = await get('/');
  assert.equal(page.headers.get('cross-origin-opener-policy'), 'same-origin', 'served cross-origin isolated');
  assert.equal(page.headers.get('cross-origin-embedder-policy'), 'require-corp');
  const models = await (await get('/api/models')).json();
  assert.equal(models['stories260k.gguf'], true, 'the model the repository ships is served');
  assert.equal(models['mmproj.gguf'], false, 'no projector unless npm start names one');
  assert.equal(models.hfEndpoint, null, 'the catalogue resolves at the Hub unless npm start names an endpoint');
  assert.equal((await get('/models/mmproj.gguf')).status, 404);
});

test('npm start -- --model FILE --mmproj FILE: the page starts with the model and its projector, and takes a picture', async (t) => {
  const why = await browserMissing('chromium');
  if (why) return t.skip(why);
  const [modelPath, projectorPath] = [join(artifacts, 'served-vision.gguf'), join(artifacts, 'served-mmproj.gguf')];
  writeFileSync(modelPath, vision.model);
  writeFileSync(projectorPath, vision.projector);
  const served = await startServer({ port: 0, modelPath, projectorPath });
  const browser = await launchBrowser('chromium');
  try {
    const page = await browser.open(served.url);
    assert.deepEqual(await page.evaluate('async () => window.demo.ready'), { model: true });
    const state = await page.evaluate('async () => window.demo.snapshot()');
    assert.equal(state.model, 'served-vision.gguf');
    assert.deepEqual(state.projector, { name: 'served-mmproj.gguf', type: 'idefics3' });
    const count = await page.evaluate(`async (base64) => {
      const files = new DataTransfer();
      files.items.add(new File([Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))], 'picture.png', { type: 'image/png' }));
      document.dispatchEvent(new DragEvent('drop', { dataTransfer: files, bubbles: true, cancelable: true }));
      for (let i = 0; i < 600 && window.demo.snapshot().attachments.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
      return window.demo.snapshot().attachments[0]?.count;
    }`, Buffer.from(vision.png).toString('base64'));
    assert.deepEqual(count, vision.count);
    assert.deepEqual([...page.problems(), ...state.errors], []);
  } finally {
    await browser.close();
    await served.close();
  }
});

test('without a model beside the project the page says so, and how to chat, on the synthetic stream it opens', async (t) => {
  const why = await browserMissing('chromium');
  if (why) return t.skip(why);
  const bare = await startServer({ port: 0, modelPath: join(artifacts, 'no-such-model.gguf') });
  const browser = await launchBrowser('chromium');
  try {
    const page = await browser.open(bare.url);
    assert.deepEqual(await page.evaluate('async () => window.demo.ready'), { model: false });
    const shown = await page.evaluate(`() => {
      const note = document.getElementById('no-model-note');
      return { visible: !note.hidden && note.offsetHeight > 0, text: note.textContent.replace(/\\s+/g, ' '), source: document.getElementById('source').value };
    }`);
    assert.equal(shown.source, 'synthetic');
    assert.ok(shown.visible, 'the note is shown');
    assert.match(shown.text, /No model was found .*stories260k\.gguf.*pick or drop/);
  } finally {
    await browser.close();
    await bare.close();
  }
});

test('the catalogue: a chat model by its hf: name, downloaded with one click with its progress, resumed after a cut, remembered after a reload', async (t) => {
  const why = await browserMissing('chromium');
  if (why) return t.skip(why);
  if (MODEL_MISSING) return t.skip(MODEL_MISSING);
  // A stand-in for the Hub (its API, resolve's redirect to a CDN on another port, ranges there) serving a small real
  // model under the catalogue's first name; npm start -- --hf-endpoint points the page at it.
  const NAME = 'hf:unsloth/SmolLM2-135M-Instruct-GGUF:Q8_0';
  const size = statSync(MODEL_PATH).size;
  const hub = await serveHub({ 'unsloth/SmolLM2-135M-Instruct-GGUF': { files: { 'SmolLM2-135M-Instruct-Q8_0.gguf': MODEL_PATH } } });
  const served = await startServer({ port: 0, hfEndpoint: hub.endpoint });
  const browser = await launchBrowser('chromium');
  try {
    const page = await browser.open(served.url);
    assert.deepEqual(await page.evaluate('async () => window.demo.ready'), { model: true });
    const snapshot = () => page.evaluate('async () => window.demo.snapshot()');
    const entryOf = (state) => state.catalogue.find((e) => e.name === NAME);
    async function waitFor(done, what) {
      const deadline = Date.now() + 60000;
      for (;;) {
        const state = await snapshot();
        if (done(state)) return state;
        if (Date.now() > deadline) assert.fail(`waited for ${what}; last state ${JSON.stringify({ catalogue: state.catalogue, note: state.loadNote })}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    let state = await snapshot();
    assert.deepEqual(state.catalogue.map((e) => [e.label, e.kind]), [['SmolLM2-135M-Instruct', 'chat'], ['Qwen3.5-0.8B', 'chat'], ['LFM2.5-1.2B-Instruct', 'chat'],
      ['Gemma 3 1B', 'chat'], ['Gemma 4 E2B', 'chat'], ['EmbeddingGemma-300M', 'embedding'], ['Qwen3-Reranker-0.6B', 'reranker']]);
    assert.ok(state.catalogue.every((e) => e.name.startsWith('hf:') && e.state === 'absent'), JSON.stringify(state.catalogue));
    const button = `#catalogue-list li[data-name="${NAME}"] button`;
    // The first click: the download goes slowly, its progress shown, and the connection drops at 60%.
    hub.cdn.faults.rate = 500_000;
    hub.cdn.faults.dropAt = Math.floor(size * 0.6);
    await page.click(button);
    state = await waitFor((s) => entryOf(s).state === 'downloading' && s.catalogueProgress?.loaded > 0, 'the download\'s progress');
    const shown = await page.evaluate(`async () => document.querySelector('#catalogue-list li[data-name="${NAME}"] .state').textContent`);
    assert.match(shown, /^downloading: \d+ KiB of 1\.1 MiB/);
    state = await waitFor((s) => entryOf(s).state === 'partial', 'the cut download to show as partial');
    const partial = entryOf(state);
    assert.ok(partial.stored > 0 && partial.stored <= size * 0.6 && partial.size === size, JSON.stringify(partial));
    assert.equal(state.loadNote.kind, 'refused');
    assert.equal(await page.evaluate(`async () => document.querySelector('${button}').textContent`), 'Resume');
    // The second click resumes: one Range request, only the missing bytes, then the chat.
    delete hub.cdn.faults.rate;
    const { bytes, ranges } = hub.cdn.stats;
    await page.click(button);
    state = await waitFor((s) => s.model === 'SmolLM2-135M-Instruct' && s.chat.open && entryOf(s).state === 'stored', 'the resumed model\'s chat');
    assert.equal(hub.cdn.stats.ranges, ranges + 1);
    assert.equal(hub.cdn.stats.bytes - bytes, size - partial.stored, 'the resume fetched only what was missing');
    assert.equal(state.catalogueProgress.fromStore, partial.stored);
    await page.fill('#max-tokens', '12');
    await page.fill('#chat-input', 'Once upon a time');
    await page.click('#send');
    state = await waitFor((s) => !s.replying && s.chat.replies.length > 0 && s.chat.replies.at(-1).stop !== null, 'the reply');
    assert.ok(state.chat.replies.at(-1).pieces > 0, JSON.stringify(state.chat.replies));
    // After a reload the catalogue shows it stored, and a click chats with no request.
    await page.evaluate('async () => { setTimeout(() => location.reload(), 20); return true; }');
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (let i = 0; i < 600; i++) {
      const ready = await page.evaluate('async () => (window.demo ? window.demo.ready.then(() => true) : false)').catch(() => false);
      if (ready) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    state = await waitFor((s) => entryOf(s)?.state === 'stored', 'the reloaded page\'s catalogue');
    assert.equal(entryOf(state).size, size);
    const requests = hub.requests.length + hub.cdn.stats.requests;
    await page.click(button);
    state = await waitFor((s) => s.model === 'SmolLM2-135M-Instruct' && s.chat.open, 'the stored model\'s chat');
    assert.equal(hub.requests.length + hub.cdn.stats.requests, requests, 'from the store: no request');
    await page.screenshot(join(artifacts, 'demo-chromium-catalogue.png'));
    t.diagnostic(`screenshot: ${join(artifacts, 'demo-chromium-catalogue.png')} (the catalogue, ${NAME} stored)`);
  } finally {
    await browser.close();
    await served.close();
    await hub.close();
  }
});

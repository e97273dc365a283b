// The worker API in a page (kvcache-wasm/worker and kvcache-wasm/chat, as an
// app imports them, bundled or not): a model loaded in the worker, a reply
// streamed while the page's thread is watched for blocking, an abort in the
// middle of one, and a chat saved and restored. Returns what the test
// (tests/integration/worker.test.mjs, tests/integration/runtimes.test.mjs) compares with the
// same calls in Node.
//
//   const result = await workerSmoke({ LlamaWorker, Chat }, '/model.gguf');
//   const bundled = await workerSmoke({ LlamaWorker, Chat }, './model.gguf', { worker, init: { locateFile } });
//   const constrained = await workerSmoke({ LlamaWorker, Chat }, '/model.gguf', {}, { constrained: true });

export const WORKER_PROMPT = 'Once upon a time';
export const WORKER_TOKENS = 24;
export const ABORT_AFTER = 5;
export const CHAT_SYSTEM = 'Tom and his dog.';
export const CHAT_TURNS = ['Tom had a red ball.', 'Then it rained.'];
export const CHAT_TOKENS = 12;
// A reply while the page's thread is held: the worker must go on without it.
export const PAGE_HELD_MS = 400;
export const HELD_TOKENS = 16;
// A reply constrained to a JSON Schema, in the worker (its engine imported there).
export const CONSTRAINED = { temperature: 0, maxTokens: 80, responseFormat: { type: 'json_schema', schema: { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, kind: { enum: ['dog', 'cat'] } }, required: ['name', 'kind'] } } };

/** Watches the page's thread: the longest gap between timer ticks, and (Chromium) its long tasks. */
export function watchMainThread() {
  let last = performance.now();
  let maxGapMs = 0;
  let running = true;
  const tick = () => {
    const now = performance.now();
    maxGapMs = Math.max(maxGapMs, now - last);
    last = now;
    if (running) setTimeout(tick, 0);
  };
  setTimeout(tick, 0);
  let longTasks = null;
  let observer = null;
  if (globalThis.PerformanceObserver?.supportedEntryTypes?.includes('longtask')) {
    longTasks = [];
    observer = new PerformanceObserver((list) => longTasks.push(...list.getEntries().map((e) => Math.round(e.duration))));
    observer.observe({ type: 'longtask' });
  }
  return {
    stop() {
      running = false;
      observer?.disconnect();
      return { maxGapMs, longTasks };
    },
  };
}

async function reply(chat, text) {
  let out = '';
  for await (const piece of chat.send(text, { temperature: 0, maxTokens: CHAT_TOKENS })) out += piece.text;
  return out;
}

export async function workerSmoke({ LlamaWorker, Chat }, modelUrl, workerOptions = {}, { constrained: withConstraint = false } = {}) {
  const worker = new LlamaWorker(workerOptions);
  try {
    const { kernelInfo, threadInfo } = await worker.ready();
    const progress = [];
    const model = await worker.load(modelUrl, { onProgress: ({ loaded }) => progress.push(loaded) });

    // A reply, the page's thread watched while it streams.
    const session = await model.session();
    const watch = watchMainThread();
    const started = performance.now();
    let firstPieceMs = null;
    const tokens = [];
    let text = '';
    let stop = null;
    for await (const piece of session.generate(WORKER_PROMPT, { temperature: 0, maxTokens: WORKER_TOKENS })) {
      firstPieceMs ??= performance.now() - started;
      tokens.push(...piece.tokens);
      text += piece.text;
      stop = piece.stop;
    }
    const generateMs = performance.now() - started;
    const { maxGapMs, longTasks } = watch.stop();
    await session.free();

    // An abort after ABORT_AFTER pieces: how many tokens still came, how long it took.
    const controller = new AbortController();
    const aborted = await model.session();
    let seen = 0;
    let abortedAt = null;
    let piecesAfterAbort = 0;
    let abortMs = null;
    let abortStop = null;
    for await (const piece of aborted.generate(WORKER_PROMPT, { temperature: 0, maxTokens: 400, signal: controller.signal })) {
      if (abortedAt !== null && piece.tokens.length > 0) piecesAfterAbort++;
      if (piece.tokens.length > 0 && ++seen === ABORT_AFTER) {
        controller.abort();
        abortedAt = performance.now();
      }
      if (piece.stop) {
        abortStop = piece.stop;
        abortMs = performance.now() - abortedAt;
      }
    }
    const abortedTokens = await aborted.tokens();
    await aborted.free();

    // A reply while the page's thread is held, from its first piece on: the worker goes on
    // without the page (WebKit routes a worker's MessagePort through the page's thread).
    const held = await model.session();
    const pieces = held.generate(WORKER_PROMPT, { temperature: 0, maxTokens: HELD_TOKENS });
    let last = (await pieces.next()).value;
    const until = performance.now() + PAGE_HELD_MS;
    while (performance.now() < until) { /* the page's thread held */ }
    for await (const piece of pieces) last = piece;
    const heldPage = { workerSeconds: last.stats.seconds, tokens: last.stats.tokens };
    await held.free();

    // A chat of two turns, and the same chat saved after the first and restored.
    const chat = new Chat(await model.session(), { system: CHAT_SYSTEM });
    const first = await reply(chat, CHAT_TURNS[0]);
    const saved = await chat.save();
    const second = await reply(chat, CHAT_TURNS[1]);
    const restored = await Chat.restore(model, saved);
    const restoredSecond = await reply(restored, CHAT_TURNS[1]);
    const messages = chat.messages;
    await chat.free();
    await restored.free();

    let constrained = null;
    if (withConstraint) {
      const json = await model.session();
      constrained = '';
      for await (const piece of json.generate(WORKER_PROMPT, CONSTRAINED)) constrained += piece.text;
      await json.free();
    }
    await model.free();
    return {
      kernelInfo, threads: threadInfo.threads, progress, tokens, text, stop, firstPieceMs, generateMs, maxGapMs, longTasks,
      abort: { seen, piecesAfterAbort, abortMs, stop: abortStop, sessionTokens: abortedTokens.length }, heldPage,
      chat: { first, second, restoredSecond, savedBytes: saved.length, messages }, constrained,
    };
  } finally {
    worker.terminate();
  }
}

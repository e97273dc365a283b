// What worker-smoke.mjs must see, from the same calls in Node on the same
// model: the greedy tokens after its prompt and the chat's replies. Shared by
// the plain-page test (tests/integration/worker.test.mjs) and the bundled apps
// (tests/integration/runtimes.test.mjs).
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { Llama, generate } from '../../js/llama.js';
import { Chat } from '../../js/chat.js';
import { ABORT_AFTER, CONSTRAINED, CHAT_SYSTEM, CHAT_TOKENS, CHAT_TURNS, HELD_TOKENS, PAGE_HELD_MS, WORKER_PROMPT, WORKER_TOKENS } from './worker-smoke.mjs';

/** Node's results on the model at `path` (init() must have run). */
export async function workerExpected(path) {
  const llama = Llama.fromGguf(new Uint8Array(readFileSync(path)));
  try {
    const session = llama.session();
    const tokens = generate(session, llama.tokenizer.encode(WORKER_PROMPT), { steps: WORKER_TOKENS, stopAtEos: false }).tokens;
    session.free();
    const chat = new Chat(llama.session(), { system: CHAT_SYSTEM });
    const replies = [];
    for (const turn of CHAT_TURNS) {
      let text = '';
      for await (const piece of chat.send(turn, { temperature: 0, maxTokens: CHAT_TOKENS })) text += piece.text;
      replies.push(text);
    }
    chat.free();
    const json = llama.session();
    let constrained = '';
    for await (const piece of json.generate(WORKER_PROMPT, CONSTRAINED)) constrained += piece.text;
    json.free();
    return { constrained, tokens, text: llama.tokenizer.decode(tokens), promptTokens: llama.tokenizer.encode(WORKER_PROMPT).length, replies,
      fileBytes: statSync(path).size };
  } finally {
    llama.free();
  }
}

/** Asserts a workerSmoke result against Node's. */
export function assertWorkerResult(result, expected) {
  assert.deepEqual(result.tokens, expected.tokens, 'the tokens Node generates');
  assert.equal(result.text, expected.text);
  assert.equal(result.stop, 'maxTokens');
  assert.equal(result.progress.at(-1), expected.fileBytes, 'the load reported its progress to the end');
  assert.equal(result.abort.stop, 'abort');
  // Pieces the worker sent before the abort reached it still come (stories260K makes one in
  // 2 ms); the worker checks the signal before every token (generate.test.mjs: none after it).
  assert.equal(result.abort.sessionTokens, expected.promptTokens + ABORT_AFTER + result.abort.piecesAfterAbort,
    'the session holds the prompt and the pieces that came');
  assert.equal(result.heldPage.tokens, HELD_TOKENS);
  assert.ok(result.heldPage.workerSeconds * 1000 < PAGE_HELD_MS,
    `the worker's reply ended while the page's thread was held ${PAGE_HELD_MS} ms (it took ${(result.heldPage.workerSeconds * 1000).toFixed(0)} ms)`);
  assert.deepEqual([result.chat.first, result.chat.second], expected.replies, 'the chat Node has');
  assert.equal(result.chat.restoredSecond, result.chat.second, 'the restored chat goes on as the original');
  assert.deepEqual(result.chat.messages.map((m) => m.role), ['system', 'user', 'assistant', 'user', 'assistant']);
  if (result.constrained !== null) {
    assert.equal(result.constrained, expected.constrained, 'the constrained reply Node gives');
    JSON.parse(result.constrained);
  }
}

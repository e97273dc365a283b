// Chat (kvcache-wasm/chat) on the real stories260K model: the conversation
// rendered by its template and held in the session's cache, so that a turn
// computes only its new tokens; a system prompt shared through a
// PrefixCache; an edited turn, an abort, a save and a restore.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { PrefixCache } from '../../js/index.js';
import { Llama } from '../../js/llama.js';
import { Chat, ChatTemplate, PLAIN_TEMPLATE } from '../../js/chat.js';
import { MODEL_MISSING, MODEL_PATH, forwardTokens, ready } from './helpers.mjs';

// ChatML written out: stories260K knows none of its markers as tokens, so they are text to it.
const CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
const GREEDY = { temperature: 0, maxTokens: 16 };
let llama;

before(async () => {
  await ready();
  if (!MODEL_MISSING) llama = Llama.fromGguf(new Uint8Array(readFileSync(MODEL_PATH)));
});

function modelTest(name, fn) {
  test(name, (t) => (MODEL_MISSING ? t.skip(MODEL_MISSING) : fn(t)));
}

async function send(chat, input, options = GREEDY) {
  let text = '';
  let last;
  for await (const piece of chat.send(input, options)) {
    text += piece.text;
    last = piece;
  }
  return { text, last };
}

const encodeRendered = (text) => llama.tokenizer.encode(text, { special: true, bos: false });

modelTest('a chat holds its rendering in the session, and a second turn computes only its new tokens', async () => {
  const chat = new Chat(llama.session(), { system: 'Tom and his dog.', template: CHATML });
  const template = new ChatTemplate(CHATML);
  const first = await send(chat, 'Tom had a red ball.');
  assert.equal(first.last.stop, 'maxTokens');
  assert.deepEqual(chat.messages, [
    { role: 'system', content: 'Tom and his dog.' }, { role: 'user', content: 'Tom had a red ball.' }, { role: 'assistant', content: first.text },
  ]);
  const held = chat.session.tokens.length;
  const secondPrompt = encodeRendered(template.render([...chat.messages, { role: 'user', content: 'Then it rained.' }]));
  let common = 0;
  while (chat.session.tokens[common] === secondPrompt[common]) common++;
  assert.ok(common > held - 24, `the rendering keeps what the session holds: ${common} of ${held} tokens`);
  const computed = await forwardTokens(llama, () => send(chat, 'Then it rained.'));
  // What the cache does not hold (the session's last token is pending, not in it) in one pass,
  // then one pass a generated token (the first comes with the prompt's).
  const cached = Math.min(common, held - 1);
  assert.equal(computed, secondPrompt.length - cached + GREEDY.maxTokens - 1);
  assert.deepEqual(chat.session.tokens.slice(0, secondPrompt.length), secondPrompt);
  chat.free();
});

modelTest('a file without a chat template chats through the plain one: the begin token, then each message on its own line', async () => {
  assert.equal(llama.tokenizer.chatTemplate, null);
  const chat = new Chat(llama.session());
  const reply = await send(chat, 'Tom had a red ball.');
  const prompt = encodeRendered(new ChatTemplate(PLAIN_TEMPLATE, { bosToken: llama.tokenizer.bosToken }).render([{ role: 'user', content: 'Tom had a red ball.' }]));
  assert.equal(prompt[0], llama.tokenizer.bosId);
  assert.deepEqual(chat.session.tokens.slice(0, prompt.length), prompt);
  assert.ok(reply.text.length > 0);
  chat.free();
});

modelTest('chats whose sessions share a PrefixCache compute their common system prompt once', async () => {
  const prefixCache = new PrefixCache({ budgetBytes: 64 << 20 });
  const system = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog, Max. '.repeat(3);
  const stats = [];
  for (const message of ['The sun was hot.', 'It started to rain.', 'Max found a stick.']) {
    const chat = new Chat(llama.session({ prefixCache }), { system, template: CHATML });
    stats.push((await send(chat, message)).last.stats);
    chat.free();
  }
  const systemTokens = encodeRendered(new ChatTemplate(CHATML).render([{ role: 'system', content: system }], { addGenerationPrompt: false })).length;
  assert.equal(stats[0].prefixTokens, 0);
  for (const s of stats.slice(1)) assert.ok(s.prefixTokens >= systemTokens, `${s.prefixTokens} of the system prompt's ${systemTokens} tokens from the prefix cache`);
  prefixCache.free();
});

modelTest('an edited conversation goes back to where it parts from what the session holds', async () => {
  const chat = new Chat(llama.session(), { template: CHATML });
  await send(chat, 'Tom had a red ball.');
  await send(chat, 'Then it rained.');
  const edited = [...chat.messages.slice(0, 2), { role: 'assistant', content: 'He threw it.' }, { role: 'user', content: 'Then?' }];
  const again = await send(chat, edited);
  const fresh = new Chat(llama.session(), { template: CHATML });
  const expected = await send(fresh, edited);
  assert.equal(again.text, expected.text, 'the same reply as a chat that only ever saw the edited conversation');
  assert.deepEqual(chat.session.tokens, fresh.session.tokens);
  assert.deepEqual(chat.messages, fresh.messages);
  chat.free();
  fresh.free();
});

modelTest('an aborted reply joins the conversation as far as it came, and the chat goes on', async () => {
  const chat = new Chat(llama.session(), { template: CHATML });
  const controller = new AbortController();
  let pieces = 0;
  let text = '';
  for await (const piece of chat.send('Tom had a red ball.', { ...GREEDY, maxTokens: 200, signal: controller.signal })) {
    text += piece.text;
    if (++pieces === 6) controller.abort();
  }
  assert.equal(chat.messages.at(-1).content, text);
  const next = await send(chat, 'Then it rained.');
  assert.equal(next.last.stop, 'maxTokens');
  chat.free();
});

modelTest('a chat saved and restored goes on as the original does', async () => {
  const chat = new Chat(llama.session({ mode: 'q8' }), { system: 'Tom and his dog.', template: CHATML });
  await send(chat, 'Tom had a red ball.');
  const bytes = await chat.save();
  const original = await send(chat, 'Then it rained.');
  const restored = await Chat.restore(llama, bytes, { template: CHATML });
  assert.equal(restored.session.mode, 'q8');
  const again = await send(restored, 'Then it rained.');
  assert.equal(again.text, original.text);
  assert.deepEqual(restored.messages, chat.messages);
  chat.free();
  restored.free();
});

modelTest('a refused call changes nothing, and Chat.restore refuses bytes that are not a saved chat', async () => {
  const chat = new Chat(llama.session(), { template: CHATML });
  await send(chat, 'Tom had a red ball.');
  const [messages, tokens] = [chat.messages, chat.session.tokens];
  await assert.rejects(send(chat, 'Then?', { maxTokens: -1 }), { name: 'RangeError', message: /maxTokens/ });
  await assert.rejects(send(chat, [{ role: 'narrator', content: 'x' }]), { name: 'TypeError', message: /messages\[0\]/ });
  assert.deepEqual(chat.messages, messages);
  assert.deepEqual(chat.session.tokens, tokens);
  await assert.rejects(Chat.restore(llama, new Uint8Array(40)), { message: /not a saved chat/ });
  const saved = await chat.save();
  await assert.rejects(Chat.restore(llama, saved.subarray(0, 30)), { message: /truncated|not a saved session/ });
  assert.throws(() => new Chat({}), { name: 'TypeError', message: /session must be a LlamaSession or a RemoteSession/ });
  assert.throws(() => new Chat(llama.session(), { sytem: 'x' }), { message: /did you mean 'system'/ });
  chat.free();
});

// A conversation continued after a reload (Chat#save, then Chat.restore)
// against the same conversation never saved, on a hybrid model (tiny random
// qwen35: gated delta rules; lfm2: short convolutions), a window model
// (tiny random gemma3, window 16) and a full-attention one (qwen3), in
// cache modes f32, q8 and q4: the second reply emits exactly the unreloaded
// one's tokens (greedy), and both compute only the new message's tokens and
// the template's around it. The reply's text encodes to other tokens than
// the model emitted, and a restored session keeps no checkpoint to go back
// to: the session's own tokens are kept -- but for an end token the
// template writes otherwise (</s> or <s> where it writes <|im_end|>).
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { Llama } from '../../js/llama.js';
import { Chat, ChatTemplate } from '../../js/chat.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';
import { forwardTokens, ready } from './helpers.mjs';

const CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
const GREEDY = { temperature: 0, maxTokens: 24 };
const SECOND = 'go on';
// A model of each kind, and a first message its reply to which ends as `ends` says.
const CASES = [
  { variant: 'tiny-qwen35', seed: 11, first: 'the cat sat on a mat', ends: 'maxTokens' },
  { variant: 'tiny-qwen35', seed: 2, first: 'why', ends: '<|im_end|>' },
  { variant: 'tiny-lfm2', seed: 2, first: 'and then', ends: '</s>' },
  // Gemma 3's tied embeddings make a random model repeat one token: an output matrix of its own makes it say more.
  { variant: 'tiny-gemma3', seed: 11, first: 'the cat sat on a mat', ends: 'maxTokens', untied: true },
  { variant: 'tiny-qwen3', seed: 11, first: 'the cat sat on a mat', ends: 'maxTokens' },
];
const MODES = ['f32', 'q8', 'q4'];
const models = new Map();

before(async () => {
  await ready();
  for (const { variant, seed, untied } of CASES) {
    const geometry = { ...GEOMETRIES[variant], ...(untied ? { tied: false } : {}) };
    const spec = randomLlama(geometry, { mix: 'Q8_0', seed, control: ['<|im_start|>', '<|im_end|>'] });
    models.set(`${variant} ${seed}`, Llama.fromGguf(encodeGguf(spec)));
  }
});

// A turn of `chat`: its reply's tokens, how it ended, its stats, and the tokens the forward passes took in.
async function send(chat, message) {
  const tokens = [];
  let last;
  const computed = await forwardTokens(chat.session.llama, async () => {
    for await (const piece of chat.send(message, GREEDY)) {
      tokens.push(...piece.tokens);
      last = piece;
    }
  });
  return { tokens, stop: last.stop, stats: last.stats, computed };
}

for (const { variant, seed, first, ends } of CASES) {
  for (const mode of MODES) {
    test(`a ${variant} chat (${mode}) restored after a reply ending on ${ends} goes on as the unreloaded one, computing only its new message`, async () => {
      const llama = models.get(`${variant} ${seed}`);
      const chat = new Chat(llama.session({ mode }), { template: CHATML });
      const one = await send(chat, first);
      const held = chat.session.tokens;
      assert.equal(ends === 'maxTokens' ? one.stop : llama.tokenizer.tokens[held.at(-1)], ends);
      const bytes = await chat.save();
      // The reply's text, encoded again, is other tokens than those the model emitted.
      const rendering = new ChatTemplate(CHATML).render([...chat.messages, { role: 'user', content: SECOND }], { addGenerationPrompt: true });
      const encoded = llama.tokenizer.encode(rendering, { special: true, bos: false });
      assert.notDeepEqual(encoded.slice(0, held.length - 1), held.slice(0, -1));

      const unreloaded = await send(chat, SECOND);
      const restored = await Chat.restore(llama, bytes, { template: CHATML });
      const continued = await send(restored, SECOND);
      assert.deepEqual(continued.tokens, unreloaded.tokens);
      assert.deepEqual(restored.session.tokens, chat.session.tokens);
      assert.deepEqual(continued.stats.promptTokens, unreloaded.stats.promptTokens);
      // The cache held all of the session's tokens but the pending one: the rest of the prompt is computed, no more.
      const cached = held.length - 1;
      for (const [name, turn] of [['unreloaded', unreloaded], ['restored', continued]]) {
        assert.equal(turn.stats.promptComputed, turn.stats.promptTokens - cached, `${name}: ${turn.stats.promptComputed} of ${turn.stats.promptTokens} prompt tokens computed`);
        assert.equal(turn.computed, turn.stats.promptComputed + turn.tokens.length - 1, `${name}: what the forward passes took in`);
      }
      // The session's own tokens stay, as the model emitted them (an end token the template writes otherwise goes).
      const own = ends === '</s>' ? held.slice(0, -1) : held;
      assert.deepEqual(chat.session.tokens.slice(0, own.length), own);
      chat.free();
      restored.free();
    });
  }
}

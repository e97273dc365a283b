// What the session tests of the 2026 architectures share
// (tests/js/window-session.test.mjs, tests/js/hybrid-session.test.mjs): a
// prompt whose n-grams repeat, a reply that counts what the forward passes
// took in, and a model one of whose tokens computes NaN.
import { Llama } from '../../js/llama.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';

/** A prompt that repeats, so that prompt-lookup drafts are found and accepted. */
export const PROMPT = [1, ...Array.from({ length: 200 }, (_, i) => 3 + ((i % 37) * 11) % 900)];

/** The token whose embedding poisonedLlama makes NaN, and a 1200-token prompt (chunks of 512, 512, 176) holding it in its third chunk. */
export const POISON = 999;
export const POISONED_PROMPT = Array.from({ length: 1200 }, (_, i) => (i === 1100 ? POISON : 3 + ((i * 31) % 900)));

/** A model of geometry `variant` (F32, a 4096-token context) whose token POISON's embedding is NaN: what it touches is not finite. */
export function poisonedLlama(variant) {
  const spec = randomLlama({ ...GEOMETRIES[variant], contextLength: 4096 }, { mix: 'F32', seed: 11 });
  const embeddings = spec.tensors.find((t) => t.name === 'token_embd.weight');
  const drawn = embeddings.data;
  embeddings.data = () => {
    const bytes = drawn();
    const { dim } = GEOMETRIES[variant];
    new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4).fill(NaN, POISON * dim, (POISON + 1) * dim);
    return bytes;
  };
  return Llama.fromGguf(encodeGguf(spec));
}

/** The tokens a session's reply to `conversation` gives (greedy), and the tokens its forward passes took in. */
export async function reply(session, conversation, maxTokens) {
  const llama = session.llama;
  let computed = 0;
  const forward = llama.forward.bind(llama);
  llama.forward = (cache, tokens, options) => {
    computed += tokens.length;
    return forward(cache, tokens, options);
  };
  const tokens = [];
  try {
    for await (const piece of session.respond(conversation, { temperature: 0, maxTokens })) tokens.push(...piece.tokens);
  } finally {
    delete llama.forward;
  }
  return { tokens, computed };
}

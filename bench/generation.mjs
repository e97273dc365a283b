// Text generation on the stories260K model: plain against speculative
// (prompt-lookup drafts) decoding, per cache mode. Skipped, saying why, when
// the model file is absent.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Llama, generate } from '../js/llama.js';

const MODEL = process.env.KVCACHE_WASM_MODEL ?? fileURLToPath(new URL('../../shared/data/stories260k.gguf', import.meta.url));
const STEPS = 200;
const REPEATS = 7;

export function run({ quick = false } = {}) {
  const title = `Generation, stories260K, ${STEPS} greedy tokens from <s> (best of ${quick ? 1 : REPEATS})`;
  const columns = ['mode', 'drafts k', 'tokens/s', 'tokens per forward', 'drafts accepted', 'cache bytes'];
  if (!existsSync(MODEL)) return [{ name: 'generation', title, columns, rows: [], notes: [`skipped: no model at ${MODEL} (set KVCACHE_WASM_MODEL)`] }];
  const llama = Llama.fromGguf(new Uint8Array(readFileSync(MODEL)));
  // Warm the JIT on every path first, so that no row pays for compiling.
  for (const draft of [0, 4]) generate(llama.session(), [llama.tokenizer.bosId], { steps: STEPS, draft, stopAtEos: false });
  const rows = [];
  for (const mode of ['f32', 'q8', 'q4']) {
    for (const draft of quick ? [0, 4] : [0, 2, 4, 6]) {
      let best = null;
      for (let i = 0; i < (quick ? 1 : REPEATS); i++) {
        const session = llama.session({ mode });
        const { stats } = generate(session, [llama.tokenizer.bosId], { steps: STEPS, draft, stopAtEos: false });
        const result = { stats, bytes: session.cache.memoryBytes };
        if (!best || stats.seconds < best.stats.seconds) best = result;
        session.free();
      }
      const { stats, bytes } = best;
      rows.push([mode, draft, stats.tokens / stats.seconds, stats.tokens / stats.forwardPasses,
        draft ? `${stats.accepted}/${stats.drafted} (${((100 * stats.accepted) / stats.drafted).toFixed(1)}%)` : '-', bytes]);
    }
  }
  return [{ name: 'generation', title, columns, rows, notes: ['The forward pass is plain JavaScript and costs per token processed, so drafts that fail cost time: tokens per forward is the figure that carries to a model whose forward pass is memory-bound.'] }];
}

// The llama entry on the package's cache, for a runtime to compare with
// Node: load a GGUF and generate greedily with speculative drafts (appends,
// attendHeads, attendCausal, beginVerify and accept on a q8 KvCache). The
// caller has run init().
const STEPS = 80; // enough for prompt lookup to draft: verifies and rollbacks happen

/** Generates STEPS tokens after 'Once upon a time' from the GGUF `bytes`; returns the tokens, the text and how many verifies and rollbacks it made. */
export function llamaSmoke(llama, bytes) {
  const model = llama.Llama.fromGguf(bytes);
  const session = model.session({ mode: 'q8' });
  try {
    const prompt = model.tokenizer.encode('Once upon a time');
    const { tokens, stats } = llama.generate(session, prompt, { steps: STEPS, draft: 4 });
    return { tokens, text: model.tokenizer.decode(tokens), verifies: stats.verifies, rollbacks: stats.rollbacks };
  } finally {
    session.free();
  }
}

// An edge worker that serves many conversations with one small llama model,
// all of them starting from one system prompt.
//
//   POST /chat/<id>   {"message": "..."}   -> {"reply", "tokens", ...}
//   GET  /stats                             -> what the isolate's caches hold
//
// Each conversation is a Durable Object: it keeps its KV cache in memory
// while it lives, and as a snapshot in its storage between requests, so a
// conversation goes on after its isolate is evicted or the server restarts.
// Conversations in one isolate share the system prompt's cache through a
// PrefixCache: a new conversation forks it (copy-on-write pages, no copy)
// and computes only its own message, and the prompt's pages are held once,
// however many conversations use them. The system prompt's cache is
// computed once, not once per isolate: the first isolate stores its
// snapshot in a Durable Object (SystemPrompt), and a cold isolate streams
// it from there into its pages (KvCache.deserializeFrom) instead.
//
// The model is a data module beside this file (model.gguf: any llama GGUF;
// the tests use stories260K); see README.md for wrangler and workerd.
import init, { KvCache, PrefixCache, memoryStats } from 'kvcache-wasm';
import { Llama, generate } from 'kvcache-wasm/llama';
import MODEL from './model.gguf';
import { REPLY_TOKENS, SYSTEM_TEXT, SYSTEM_TOKENS } from './prompt.mjs';

const MODE = 'q8';
// A Durable Object's storage takes values of up to 128 KiB: a snapshot goes in chunks.
const CHUNK_BYTES = 120 << 10;

/** The isolate's model and prefix cache, made by the first request. */
let shared = null;

function isolateState(env) {
  shared ??= (async () => {
    await init(); // no threads in a Worker: one
    const llama = Llama.fromGguf(new Uint8Array(MODEL));
    const system = llama.tokenizer.encode(SYSTEM_TEXT).slice(0, SYSTEM_TOKENS);
    const prefixCache = new PrefixCache({ budgetBytes: 16 << 20 });
    const systemPrompt = await warmSystemPrompt(env, llama, system, prefixCache);
    return { llama, system, prefixCache, systemPrompt };
  })();
  return shared;
}

/** A stream's chunks as an async iterable. */
async function* chunksOf(stream) {
  const reader = stream.getReader();
  for (let read = await reader.read(); !read.done; read = await reader.read()) yield read.value;
}

/**
 * Puts the system prompt's cache into the isolate's prefix cache: streamed
 * from the SystemPrompt object that keeps it (one per model file, cache
 * mode and prompt), or computed and stored there for the next isolate.
 * Returns which it was.
 */
async function warmSystemPrompt(env, llama, system, prefixCache) {
  const key = `${llama.digest}:${MODE}:${system.join(',')}`;
  const stub = env.SYSTEM_PROMPTS.get(env.SYSTEM_PROMPTS.idFromName(key));
  const stored = await stub.fetch('https://system-prompt/');
  if (stored.ok) {
    const cache = await KvCache.deserializeFrom(chunksOf(stored.body), Number(stored.headers.get('content-length')));
    prefixCache.add(system, cache);
    cache.free();
    return 'restored';
  }
  const session = llama.session({ mode: MODE });
  session.prefill(system);
  prefixCache.add(system, session.cache);
  await stub.fetch('https://system-prompt/', { method: 'PUT', body: session.cache.serialize() });
  session.free();
  return 'computed';
}

/** Where the system prompt's cache is kept between isolates: its snapshot in chunks. */
export class SystemPrompt {
  constructor(ctx) {
    this.ctx = ctx;
  }

  async fetch(request) {
    if (request.method === 'PUT') {
      const bytes = new Uint8Array(await request.arrayBuffer());
      const entries = { meta: { bytes: bytes.length, chunks: Math.ceil(bytes.length / CHUNK_BYTES) } };
      for (let i = 0; i < entries.meta.chunks; i++) entries[`snapshot:${i}`] = bytes.slice(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES);
      await this.ctx.storage.put(entries);
      return new Response(null, { status: 204 });
    }
    const meta = await this.ctx.storage.get('meta');
    if (!meta) return new Response(null, { status: 404 });
    const storage = this.ctx.storage;
    let next = 0;
    const body = new ReadableStream({
      async pull(controller) {
        if (next === meta.chunks) return controller.close();
        controller.enqueue(new Uint8Array(await storage.get(`snapshot:${next++}`)));
      },
    });
    return new Response(body, { headers: { 'content-length': String(meta.bytes) } });
  }
}

/** The turn's prompt as token ids: a message after the conversation so far. */
function messageTokens(llama, message) {
  if (typeof message !== 'string' || message.length === 0 || message.length > 2000) {
    throw new RangeError('message must be a string of 1 to 2000 characters');
  }
  return llama.tokenizer.encode(message, { bos: false });
}

export class Conversation {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
    this.session = null;
  }

  /** The session, from memory, else from storage; null for a new conversation. */
  async #restore(llama) {
    if (this.session) return false;
    const meta = await this.ctx.storage.get('meta');
    if (!meta) return false;
    const chunks = await this.ctx.storage.get(Array.from({ length: meta.chunks }, (_, i) => `snapshot:${i}`));
    const bytes = new Uint8Array(meta.bytes);
    for (let i = 0, at = 0; i < meta.chunks; i++) {
      const chunk = new Uint8Array(chunks.get(`snapshot:${i}`));
      bytes.set(chunk, at);
      at += chunk.length;
    }
    this.session = llama.session({ cache: KvCache.deserialize(bytes), tokens: meta.tokens });
    return true;
  }

  async #save() {
    const bytes = this.session.cache.serialize();
    const meta = { bytes: bytes.length, chunks: Math.ceil(bytes.length / CHUNK_BYTES), tokens: this.session.tokens };
    const entries = { meta };
    for (let i = 0; i < entries.meta.chunks; i++) entries[`snapshot:${i}`] = bytes.slice(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES);
    await this.ctx.storage.put(entries);
  }

  async fetch(request) {
    const { llama, system, prefixCache } = await isolateState(this.env);
    let words;
    try {
      words = messageTokens(llama, (await request.json()).message);
    } catch (error) {
      return Response.json({ error: `bad request: ${error.message}` }, { status: 400 });
    }
    const restored = await this.#restore(llama);
    let prompt = words; // a session goes on from its last reply's last token
    if (!this.session) {
      this.session = llama.session({ mode: MODE, prefixCache });
      prompt = [...system, ...words];
    }
    if (this.session.cache.rows + 1 + prompt.length + REPLY_TOKENS > llama.config.contextLength) {
      return Response.json({ error: 'the conversation is as long as the model can read' }, { status: 413 });
    }
    const { tokens, stats } = generate(this.session, prompt, { steps: REPLY_TOKENS, stopAtEos: false });
    await this.#save();
    return Response.json({
      reply: llama.tokenizer.decode(tokens),
      tokens,
      prefixTokens: stats.prefixTokens,
      restored,
      nextPosition: this.session.cache.nextPosition,
      memoryBytes: this.session.cache.memoryBytes,
    });
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const chat = url.pathname.match(/^\/chat\/([\w-]{1,64})$/);
    if (chat && request.method === 'POST') {
      return env.CONVERSATIONS.get(env.CONVERSATIONS.idFromName(chat[1])).fetch(request);
    }
    if (url.pathname === '/stats' && request.method === 'GET') {
      const { prefixCache, systemPrompt } = await isolateState(env);
      return Response.json({ ...memoryStats(), prefixEntries: prefixCache.size, prefixBytes: prefixCache.bytes, systemPrompt });
    }
    return new Response('POST /chat/<id> {"message": "..."}, or GET /stats\n', { status: 404 });
  },
};

// llama.cpp's multimodal library (mtmd) as the oracle for images: the npm
// package @fugood/llama.node (llama.cpp build b10257 with mtmd, its prebuilt
// CPU binary), which scripts/test.mjs installs into build-tools/llama-node
// (scripts/toolchain.mjs ensureMtmdOracle). node-llama-cpp, the oracle of
// llamacpp-native.mjs, binds no mtmd.
//
//   const why = await mtmdMissing();                       // a reason to skip, or null
//   const layout = await mtmdTokenize(model, projector, `${MEDIA_MARKER}What is it?`, [png]);
//   const n = await mtmdImageTokens(model, projector, png); // one image's tokens
//   const p = await mtmdNextTokenProbs(model, projector, { prompt, imagePaths: [png], vocab, nProbs: 1024 });  // Map id -> p
//   const vectors = await secondOpinionEmbeddings(model, [ids1, ids2]);  // llama.cpp's embeddings, this build's
//   await closeMtmd();
//
// `node tests/runtimes/mtmd-native.mjs --table` prints llama.cpp's image token
// counts and layouts for every projector type and test image shape.
//
// Each (model, projector) pair is loaded once and kept until another is asked
// for: a context of an f32 cache (keys and values), flash attention off, on
// the CPU, as llamacpp-native.mjs runs llama.cpp. The image goes where the
// prompt has MEDIA_MARKER, mtmd's default marker.
import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mtmdOracleDir } from '../../scripts/toolchain.mjs';

/** Where an image goes in a prompt: mtmd's default media marker, which @fugood/llama.node keeps. */
export const MEDIA_MARKER = '<__media__>';

const entry = join(mtmdOracleDir, 'node_modules', '@fugood', 'llama.node', 'lib', 'index.js');
const CHILD_FLAG = '--mtmd-child';
const DONE = '\u0001mtmd-done';

// llama.cpp runs in a child process: a GGML_ASSERT or a crash in it ends the
// process it is in, @fugood/llama.node prints its log to stdout, and
// that log is where mtmd says how many tokens an image chunk holds (the
// tokens the binding returns are positions: fewer, for M-RoPE's images).
let child = null;
let requests = 0;

function startChild() {
  const proc = fork(fileURLToPath(import.meta.url), [CHILD_FLAG], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], serialization: 'advanced' });
  const state = { proc, pending: new Map(), tail: [], partial: '' };
  const remember = (line) => {
    state.tail.push(line);
    if (state.tail.length > 40) state.tail.shift();
  };
  proc.stdout.on('data', (data) => {
    const lines = (state.partial + data).split('\n');
    state.partial = lines.pop();
    for (const line of lines) {
      const done = line.startsWith(DONE) ? state.pending.get(Number(line.slice(DONE.length))) : null;
      if (done) {
        done.logged = true;
        settle(state, done);
      } else {
        for (const request of state.pending.values()) request.lines.push(line);
        remember(line);
      }
    }
  });
  proc.stderr.on('data', (data) => String(data).split('\n').forEach(remember));
  proc.on('message', ({ id, result, error }) => {
    const request = state.pending.get(id);
    if (!request) return;
    Object.assign(request, { replied: true, result, error });
    settle(state, request);
  });
  proc.on('exit', (code, signal) => {
    if (child === state) child = null;
    const why = `llama.cpp's process ended (${signal ?? `exit ${code}`}): ${state.tail.filter((l) => l.trim()).slice(-8).join(' | ')}`;
    for (const request of state.pending.values()) request.reject(new Error(why));
    state.pending.clear();
  });
  idle(state);
  return state;
}

function settle(state, request) {
  if (!request.replied || !request.logged) return;
  state.pending.delete(request.id);
  if (state.pending.size === 0) idle(state);
  if (request.error) request.reject(new Error(request.error));
  else request.resolve({ result: request.result, lines: request.lines });
}

// The child keeps the parent alive only while a request waits on it.
function idle(state) {
  state.proc.unref();
  state.proc.channel?.unref();
  state.proc.stdout.unref?.();
  state.proc.stderr.unref?.();
}

function busy(state) {
  state.proc.ref();
  state.proc.channel?.ref();
  state.proc.stdout.ref?.();
  state.proc.stderr.ref?.();
}

/** Runs operation `op` in the child: { result, lines (its log while it ran) }. */
function call(op, ...args) {
  child ??= startChild();
  const state = child;
  const id = ++requests;
  return new Promise((resolve, reject) => {
    state.pending.set(id, { id, resolve, reject, lines: [], replied: false, logged: false });
    busy(state);
    state.proc.send({ id, op, args });
  });
}

/** Why llama.cpp's mtmd cannot run here, or null. */
export async function mtmdMissing() {
  if (!existsSync(entry)) return `@fugood/llama.node is not installed in ${mtmdOracleDir} (npm test installs it)`;
  try {
    await call('start');
    return null;
  } catch (error) {
    return `@fugood/llama.node does not start here: ${error.message}`;
  }
}

/**
 * The token layout mtmd makes of `text` with an image at each MEDIA_MARKER
 * (mtmd_tokenize: the begin token and each type's markers as mtmd adds
 * them), read from @fugood/llama.node's tokenize(text, { media_paths }).
 * That gives { tokens, has_media, chunk_pos, chunk_pos_media,
 * bitmap_hashes }: `tokens` an Int32Array of the text tokens' ids with -1
 * (LLAMA_TOKEN_NULL) in each image position's place -- one per token, but
 * for M-RoPE (qwen3vl) one per position, max(rows, columns) an image --,
 * chunk_pos the index in it of every chunk's first entry, chunk_pos_media
 * those of the image chunks, bitmap_hashes "source:<hash>" per image then
 * "chunk:<index>:<positions>:<hash>" per image chunk. An image chunk's
 * tokens are in mtmd's log ("Chunk i: type=IMAGE, n_tokens=, n_pos="),
 * read here. (Without an image the binding gives { tokens, has_media } alone.) Returns `{ tokens, chunks }`, chunks
 * [{ type: 'text', tokens: [ids] } | { type: 'image', tokens, positions }]:
 * an image's tiles (idefics3's, lfm2's) each a chunk of their own between
 * the text of their markers.
 */
export async function mtmdTokenize(modelPath, projectorPath, text, imagePaths = [], options = {}) {
  const { result, lines } = await call('tokenize', modelPath, projectorPath, text, imagePaths, options);
  const tokens = Int32Array.from(result.tokens);
  if (!result.has_media) return { tokens, chunks: [{ type: 'text', tokens: Array.from(tokens) }] };
  const logged = lines.map((line) => /Chunk (\d+): type=(\w+), n_tokens=(\d+)(?:, n_pos=(\d+))?/.exec(line)).filter(Boolean);
  const starts = [...result.chunk_pos, tokens.length];
  if (logged.length !== result.chunk_pos.length) throw new Error(`mtmd logged ${logged.length} chunks, the binding gave ${result.chunk_pos.length}`);
  const chunks = logged.map(([, , type, n, positions], i) => (type === 'IMAGE'
    ? { type: 'image', tokens: Number(n), positions: Number(positions) }
    : { type: 'text', tokens: Array.from(tokens.subarray(starts[i], starts[i + 1])) }));
  return { tokens, chunks };
}

/** How many tokens llama.cpp gives one image (all its tiles' image tokens, no marker). */
export async function mtmdImageTokens(modelPath, projectorPath, imagePath, options = {}) {
  const { chunks } = await mtmdTokenize(modelPath, projectorPath, MEDIA_MARKER, [imagePath], options);
  return chunks.reduce((n, c) => n + (c.type === 'image' ? c.tokens : 0), 0);
}

/**
 * The text llama.cpp reports a token by in a completion's probabilities
 * (llama.rn's tokens_to_output_formatted_string: common_token_to_piece with
 * control and unknown tokens as their text, '▁' as a space, a lone byte of
 * 0x80 and up as "byte: \xhh"), from a synthetic SentencePiece vocabulary
 * ({ tokens, types }, models.mjs's syntheticVocab).
 */
export function reportedText(vocab, id) {
  const piece = vocab.tokens[id];
  const type = vocab.types[id];
  if (type === 6) {
    const byte = parseInt(piece.slice(3, 5), 16);
    return byte >= 0x80 ? `byte: \\x${byte.toString(16)}` : String.fromCharCode(byte);
  }
  if (type === 1) return piece.replaceAll('\u2581', ' ');
  return piece;
}

/** The sampling settings under which llama.cpp's reported probabilities are softmax(logits), no sampler changing them. */
const RAW_SOFTMAX = {
  temperature: 1, top_k: 0, top_p: 1, min_p: 0, typical_p: 1, typ_p: 1, top_n_sigma: -1, mirostat: 0,
  penalty_last_n: 0, penalty_repeat: 1, penalty_freq: 0, penalty_present: 0, dry_multiplier: 0, xtc_probability: 0, xtc_threshold: 0,
};

/**
 * llama.cpp's next-token probabilities after `prompt` (its images at
 * MEDIA_MARKER, from `imagePaths`), the top `nProbs` of them (the whole
 * vocabulary when nProbs is its size, the default) as a Map id -> p. They
 * are the model's softmax of the last position's logits: temperature 1 and
 * every sampler that would reshape them off (RAW_SOFTMAX; the binding's
 * defaults are temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, DRY 1.75,
 * XTC 0.1). llama.cpp reports each token by its text, so `vocab` ({ tokens,
 * types }, the file's synthetic vocabulary: spec.vocab) maps it back; a
 * vocabulary in which two tokens read the same is refused (vision.mjs's
 * pairedLanguageModel has none).
 */
export async function mtmdNextTokenProbs(modelPath, projectorPath, { prompt, imagePaths = [], vocab, nProbs = vocab.tokens.length, threads = 2, ...options }) {
  const idOf = new Map();
  for (let id = 0; id < vocab.tokens.length; id++) {
    const text = reportedText(vocab, id);
    if (idOf.has(text)) throw new RangeError(`tokens ${idOf.get(text)} and ${id} both read ${JSON.stringify(text)}: llama.cpp's probabilities cannot be told apart`);
    idOf.set(text, id);
  }
  const settings = { prompt, media_paths: imagePaths, n_predict: 1, n_probs: nProbs, seed: 1, ...RAW_SOFTMAX };
  const { result } = await call('completion', modelPath, projectorPath, { threads, ...options }, settings);
  const probs = new Map();
  // The binding's completion_probabilities gather every completion the context has made: this one's is the last.
  for (const { tok_str: text, prob } of result.completion_probabilities.at(-1).probs) {
    if (!idOf.has(text)) throw new RangeError(`llama.cpp reported a token ${JSON.stringify(text)} the vocabulary does not hold`);
    probs.set(idOf.get(text), prob);
  }
  return probs;
}

/** KL(llama.cpp's next-token probabilities `theirs`, a Map id -> p || the softmax of `logits`, the runner's). */
export function divergenceFrom(theirs, logits) {
  let max = -Infinity;
  for (const l of logits) max = Math.max(max, l);
  let sum = 0;
  for (const l of logits) sum += Math.exp(l - max);
  let kl = 0;
  for (const [id, p] of theirs) if (p > 0) kl += p * Math.log(p / Math.max(Math.exp(logits[id] - max) / sum, 1e-30));
  return kl;
}

/**
 * A second opinion on llama.cpp's embeddings (llamacpp-native.mjs's
 * nativeEmbeddings is the first): this build's, through llama.rn's
 * embedding(), for each token list of `texts`, a Float32Array each, not
 * normalised (embd_normalize -1; the binding's default is 2, Euclidean).
 * `pooling` (a POOLING_TYPES name) overrides the file's, rank excepted:
 * embedding() copies the model's width out of rank pooling's two outputs.
 * The binding takes text, not ids, and llama.rn tokenizes it with the
 * special tokens only where the vocabulary adds a begin token (so it keeps
 * none of Qwen3-Embedding's end tokens: one written in the text is read as
 * the control token it is). So each list is given as text: the binding's
 * pieces of it less the begin and end tokens llama.rn adds itself, less
 * the space SentencePiece puts back in front; and a list is refused unless
 * the tokens llama.rn logs it evaluated are that list. Its quirks, minded:
 * embedding() clears the cache but keeps the previous prompt's tokens as
 * evaluated, so a list sharing a prefix with the one before would skip it
 * -- and clearCache(true), which forgets them, does nothing for a model
 * without a cache (gemma-embedding) -- so each list has a context of its
 * own; and it keeps the first model's width for every later one in the
 * process (a static), so the process is started again for another file.
 */
export async function secondOpinionEmbeddings(path, texts, { pooling, threads = 2 } = {}) {
  if (pooling === 'rank') throw new RangeError("@fugood/llama.node's embedding() cannot read rank pooling's output");
  if (child?.embeddingModel !== undefined && child.embeddingModel !== path) await closeMtmd();
  const contextSize = Math.max(256, ...texts.map((ids) => ids.length + 1));
  const vectors = [];
  for (const ids of texts) {
    child ??= startChild();
    child.embeddingModel = path;
    const { result, lines } = await call('embedding', path, ids, { threads, contextSize, batchSize: contextSize, pooling });
    const evaluated = lines.map((line) => /prompt_tokens = ([\d ]*)/.exec(line)?.[1].trim().split(/\s+/).map(Number)).filter(Boolean).at(-1);
    if (evaluated?.join() !== ids.join()) {
      throw new RangeError(`@fugood/llama.node evaluated [${evaluated}] for [${ids}] (given as ${JSON.stringify(result.text)}): these ids do not survive its text round trip`);
    }
    vectors.push(Float32Array.from(result.embedding));
  }
  return vectors;
}

/** Ends llama.cpp's process (it is started again when asked for). */
export async function closeMtmd() {
  const state = child;
  child = null;
  if (!state) return;
  const ended = new Promise((resolve) => state.proc.once('exit', resolve));
  busy(state);
  state.proc.disconnect();
  await ended;
}

// ---------------------------------------------------------------------------
// The child: @fugood/llama.node, one (model, projector) pair loaded at a time.

async function childMain() {
  const lib = createRequire(import.meta.url)(entry);
  let loaded = null; // { key, context }
  // A context for a (model, projector) pair, or for embeddings (no projector; `pooling` the file's when undefined).
  const contextFor = async (modelPath, projectorPath, { threads = 2, contextSize = 8192, batchSize = 2048, pooling } = {}) => {
    const key = JSON.stringify([modelPath, projectorPath, threads, contextSize, batchSize, pooling]);
    if (loaded?.key !== key) {
      await loaded?.context.release();
      loaded = null;
      const context = await lib.loadModel({
        model: modelPath, n_ctx: contextSize, n_batch: batchSize, n_ubatch: batchSize, n_threads: threads, n_gpu_layers: 0,
        flash_attn_type: 'off', cache_type_k: 'f32', cache_type_v: 'f32', ctx_shift: false,
        ...(projectorPath ? {} : { embedding: true, pooling_type: pooling, n_parallel: 1 }),
      });
      if (projectorPath && !context.initMultimodal({ path: projectorPath, use_gpu: false })) {
        await context.release();
        throw new Error(`llama.cpp's mtmd refused ${projectorPath} beside ${modelPath}`);
      }
      loaded = { key, context };
    }
    return loaded.context;
  };
  const operations = {
    start: async () => {
      await lib.loadModule();
      return true;
    },
    tokenize: async (modelPath, projectorPath, text, imagePaths, options) => {
      const result = await (await contextFor(modelPath, projectorPath, options)).tokenize(text, { media_paths: imagePaths });
      return { ...result, tokens: Array.from(result.tokens) };
    },
    completion: async (modelPath, projectorPath, options, settings) => (await contextFor(modelPath, projectorPath, options)).completion(settings),
    embedding: async (modelPath, ids, options) => {
      const context = await contextFor(modelPath, null, options);
      const { metadata } = context.getModelInfo();
      const architecture = metadata['general.architecture'];
      // '4': LLAMA_POOLING_TYPE_RANK, as the binding gives a key's value (a string).
      if (options.pooling === undefined && metadata[`${architecture}.pooling_type`] === '4') {
        throw new RangeError("@fugood/llama.node's embedding() cannot read rank pooling's output: give another pooling");
      }
      const flag = (name) => metadata[`tokenizer.ggml.${name}`] === 'true';
      const bos = Number(metadata['tokenizer.ggml.bos_token_id']);
      const eos = Number(metadata['tokenizer.ggml.eos_token_id']);
      let body = ids;
      if (flag('add_bos_token') && body[0] === bos) body = body.slice(1);
      if (flag('add_bos_token') && flag('add_eos_token') && body.at(-1) === eos) body = body.slice(0, -1);
      let text = await context.detokenize(body);
      if (metadata['tokenizer.ggml.model'] === 'llama' && flag('add_space_prefix')) text = text.replace(/^ /, '');
      try {
        return { text, embedding: Array.from((await context.embedding(text, { embd_normalize: -1 })).embedding) };
      } finally {
        await context.release();
        loaded = null;
      }
    },
  };
  process.on('message', async ({ id, op, args }) => {
    let reply;
    try {
      reply = { id, result: await operations[op](...args) };
    } catch (error) {
      reply = { id, error: error.message };
    }
    process.stdout.write(`\n${DONE}${id}\n`);
    process.send(reply);
  });
  process.on('disconnect', async () => {
    await loaded?.context.release();
    process.exit(0);
  });
}

// ---------------------------------------------------------------------------
// node tests/runtimes/mtmd-native.mjs --table: llama.cpp's image token counts
// and prompt layouts for each projector type, on the real models'
// preprocessing (vision.mjs's narrowed geometries) and the tiny geometries,
// for each of png.mjs's IMAGE_SHAPES -- a markdown table on stdout.

/** A chunk list as text: markers by their pieces, image chunks as [tokens] (and /positions where they differ). */
function layoutText(chunks, vocab) {
  const parts = chunks.map((c) => (c.type === 'image'
    ? `[${c.tokens}${c.positions !== c.tokens ? `, ${c.positions} positions` : ''}]`
    : c.tokens.map((id) => JSON.stringify(vocab.tokens[id]).slice(1, -1)).join(' ')));
  return parts.length > 9 ? `${parts.slice(0, 4).join(' ')} ... (${parts.length} chunks) ... ${parts.slice(-4).join(' ')}` : parts.join(' ');
}

async function printTable() {
  const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { PROJECTOR_GEOMETRIES, narrowed, pairedLanguageModel, randomProjector } = await import('../gguf/vision.mjs');
  const { writeGgufFile } = await import('../gguf/writer.mjs');
  const { IMAGE_SHAPES, encodePng, testImage } = await import('./png.mjs');
  const dir = mkdtempSync(join(tmpdir(), 'kvc-mtmd-table-'));
  try {
    const images = Object.entries(IMAGE_SHAPES).map(([name, [width, height]], i) => {
      const path = join(dir, `${name}.png`);
      writeFileSync(path, encodePng(testImage(width, height, i + 1)));
      return { name, width, height, path };
    });
    const geometries = Object.values(PROJECTOR_GEOMETRIES).map((g) => (g.name.startsWith('tiny-') ? g : narrowed(g)));
    const layouts = [];
    console.log(`| projector (type) | ${images.map((i) => `${i.name} ${i.width}x${i.height}`).join(' | ')} |`);
    console.log(`| --- | ${images.map(() => '---').join(' | ')} |`);
    for (const g of geometries) {
      const model = join(dir, `${g.name}-lm.gguf`), projector = join(dir, `${g.name}-mmproj.gguf`);
      const language = pairedLanguageModel(g);
      writeGgufFile(model, language);
      writeGgufFile(projector, randomProjector(g));
      const cells = [];
      for (const image of images) {
        try {
          const { chunks } = await mtmdTokenize(model, projector, `${MEDIA_MARKER}Q`, [image.path]);
          const tiles = chunks.filter((c) => c.type === 'image');
          cells.push(`${tiles.reduce((n, c) => n + c.tokens, 0)}${tiles.length > 1 ? ` (${tiles.length} chunks)` : ''}`);
          if (image.name === 'large' || image.name === 'square') layouts.push(`- ${g.name}, ${image.name}: ${layoutText(chunks, language.vocab)}`);
        } catch (error) {
          cells.push(`refused: ${error.message.slice(0, 80)}`);
        }
      }
      console.log(`| ${g.name} (${g.type}) | ${cells.join(' | ')} |`);
    }
    console.log(`\nLayouts of "${MEDIA_MARKER}Q" (markers by their pieces, image chunks as [tokens]):\n\n${layouts.join('\n')}`);
  } finally {
    await closeMtmd();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes(CHILD_FLAG)) await childMain();
  else if (process.argv.includes('--table')) await printTable();
}

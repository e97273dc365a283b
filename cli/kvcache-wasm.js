#!/usr/bin/env node
// kvcache-wasm generate | chat | embed | rerank: text from a GGUF model, with
// this package's cache doing the attention. generate continues a prompt;
// chat talks, turn by turn, through the file's chat template. With --mmproj
// (the model's vision encoder) images go in too. Text is printed as it
// comes; how far the model's file has loaded, why a reply stopped, tokens/s
// and the cache's memory go to stderr. embed and rerank print JSON lines:
// an embedding model's vectors, a reranker's scores.
import { existsSync, openAsBlob, readFileSync, statSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import init, { COMPONENTS, KvCacheError, MODES, Q4_MAX_RESIDUAL_ROWS } from '../js/index.js';
import { GgufError, Llama, ModelStore } from '../js/llama.js';
import { Chat } from '../js/chat.js';
import { MEDIA_MARKER, idsOf } from '../js/chat/content.js';
import { MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE } from '../js/model/images.js';
import { isHfName } from '../js/store/hf.js';

const COMMANDS = ['generate', 'chat', 'embed', 'rerank'];
// The commands that take the model as the positional FILE too.
const FILE_COMMANDS = ['embed', 'rerank'];
// The model a clone of the repository runs without --model (models/README.md); the npm package has none.
const SHIPPED_MODEL = fileURLToPath(new URL('../models/stories260k.gguf', import.meta.url));
// A chat reply's length by default: at most a quarter of the model's context,
// which leaves the rest to the conversation (stories260K's 512 positions: 128).
const MAX_REPLY_TOKENS = 512;
const USAGE = `usage: kvcache-wasm generate [--model PATH] [--prompt TEXT] [--steps N] [options]
       kvcache-wasm chat [--model PATH] [--system TEXT] [--max-tokens N] [options]
       kvcache-wasm embed FILE [--text TEXT ...] [--pooling P] [--dimensions N] [--raw] [--truncate]
       kvcache-wasm rerank FILE --query TEXT [--text DOCUMENT ...] [--top-n N] [--truncate]
       kvcache-wasm --version | --help

  generate continues --prompt; chat reads your messages from stdin, one a
  line, and answers each through the file's chat template (/image PATH adds
  an image to the next message; /reset starts over; /exit, Ctrl-D or the end
  of input ends). Ctrl-C stops a reply and the chat goes on; at an empty
  prompt it ends the chat (exit code 0), and a second Ctrl-C before a reply
  has stopped ends the program at once (130). How far the model's file has
  loaded goes to stderr.

  embed prints a JSON line for each --text (or each non-empty line of stdin
  without one), in order: {"index", "text", "embedding"}, an embedding
  model's vector (EmbeddingGemma, Qwen3-Embedding, ...), normalised. rerank
  prints {"index", "score", "text"} for each document, best first, a
  reranker's scores (Qwen3-Reranker, a BERT cross-encoder) for --query. FILE
  may be given as --model.

  --model PATH         a GGUF model: llama, qwen2, qwen3, gemma3, smollm3 or phi3; F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
                       Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL or IQ4_XS tensors (default, in a clone of the repository: its
                       models/stories260k.gguf); or a Hugging Face name, hf:owner/repo:Q4_K_M or
                       hf:owner/repo/file.gguf (#revision after either), downloaded once into the store
                       in ~/.cache/kvcache-wasm, from $HF_ENDPOINT (default https://huggingface.co) with $HF_TOKEN
  --mmproj PATH        the model's vision encoder, llama.cpp's mmproj GGUF (SmolVLM2, LFM2-VL, Gemma 3, Gemma 4,
                       Qwen3-VL / Qwen3.5): the model then takes images; an hf: name, or auto (the
                       mmproj*.gguf beside an hf: model)
  --image PATH         a PNG or JPEG image, with --mmproj (may be given more than once): generate puts the
                       images where --prompt has ${MEDIA_MARKER}, one each, else after the prompt (as
                       llama.cpp's mtmd-cli); chat sends them with your first message, before its text
  --prompt TEXT        generate: text to continue (default: none, start from <s>)
  --steps N            generate: tokens to generate, at most (default 256)
  --system TEXT        chat: a system prompt
  --max-tokens N       chat: tokens a reply has, at most (default: a quarter of the model's
                       context, at most 512)
  --stop TEXT          end a reply before TEXT (may be given more than once)
  --context POLICY     when the model's context is full: stop (default), or slide (keep the first
                       positions and the newest, and go on)
  --mode M             how the cache stores keys and values (default f32):
                       ${MODES.join(', ')}
  --cache-type-k T     how it stores keys alone: ${COMPONENTS.join(', ')} (default f32)
  --cache-type-v T     and values
  --residual-rows R    q4: the newest rows kept in f32, 0 to ${Q4_MAX_RESIDUAL_ROWS} (default 64)
  --draft K            speculative decoding with up to K prompt-lookup drafts (default 0: off)
  --temperature T      sampling temperature, 0 for greedy (default: generate 0, chat 0.8)
  --top-k K            sample from the K likeliest tokens, 0 for all (default 40)
  --top-p P            ... the fewest whose probabilities reach P (default 0.95)
  --min-p P            ... at least P times the likeliest's probability (default 0.05)
  --repeat-penalty F   divide the logits of recent tokens by F (default 1: off)
  --repeat-last-n N    the tokens that counts as recent (default 64)
  --seed S             seed of the sampler (default: generate 1, chat a random one)
  --json-schema FILE   every reply is JSON matching the JSON Schema in FILE (a keyword the engine
                       does not enforce is refused, naming it)
  --grammar FILE       every reply follows the grammar in FILE (GBNF or EBNF, its rule root first)
  --threads N          threads for the matmuls and attention (default: what the machine has)
  --text TEXT          embed: a text; rerank: a document (may be given more than once)
  --pooling P          embed: mean, cls, last or none (default: the file's; a model whose file
                       gives none needs it)
  --dimensions N       embed: each vector's first N values, normalised after (Matryoshka)
  --raw                embed: the vectors as the model gives them, not normalised
  --truncate           embed, rerank: cut a text longer than the model's context to it
  --query TEXT         rerank: what the documents are scored for
  --top-n N            rerank: print the N best (default: all)`;

class UsageError extends Error {}

/** The text of the file an option names, or a UsageError saying why not. */
function readFile(option, path) {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`--${option} ${path} cannot be read: ${error.code ?? error.message}`);
  }
}
/** A model file that did not load: its message says which and why, in a sentence. */
class LoadError extends Error {}

// --image's decoders, pngjs and jpeg-js, are the CLI's alone (the package
// takes pixels, or decodes with the runtime's own decoder, which Node lacks),
// imported only when an image is given. A file's size is checked against the
// package's bounds before its pixels are allocated.
function checkImageSize(width, height) {
  if (!(width >= 1 && height >= 1 && width <= MAX_IMAGE_SIDE && height <= MAX_IMAGE_SIDE && width * height <= MAX_IMAGE_PIXELS)) {
    throw new Error(`it is ${width}x${height} pixels, and an image is 1 to ${MAX_IMAGE_SIDE} pixels a side, ${MAX_IMAGE_PIXELS} in all`);
  }
}

const IMAGE_FORMATS = [
  {
    name: 'PNG',
    magic: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
    async decode(bytes) {
      // IHDR, the first chunk, holds the size.
      checkImageSize(bytes.readUInt32BE(16), bytes.readUInt32BE(20));
      const { PNG } = await import('pngjs');
      const { width, height, data } = PNG.sync.read(bytes);
      return { width, height, data };
    },
  },
  {
    name: 'JPEG',
    magic: [0xff, 0xd8, 0xff],
    async decode(bytes) {
      const { decode } = await import('jpeg-js');
      const { width, height, data } = decode(bytes, {
        useTArray: true, formatAsRGBA: true, maxResolutionInMP: MAX_IMAGE_PIXELS / 1e6, maxMemoryUsageInMB: (8 * MAX_IMAGE_PIXELS) / 2 ** 20,
      });
      checkImageSize(width, height);
      return { width, height, data };
    },
  },
];

/** An image file's pixels ({ width, height, data } RGBA), or a UsageError naming it and why not. */
async function readImage(path) {
  let bytes;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw new UsageError(`--image ${path} cannot be read: ${error.code ?? error.message}`);
  }
  const format = IMAGE_FORMATS.find(({ magic }) => magic.every((byte, i) => bytes[i] === byte));
  if (!format) throw new UsageError(`--image ${path} is not a PNG or JPEG image`);
  try {
    return await format.decode(bytes);
  } catch (error) {
    throw new UsageError(`--image ${path} is a ${format.name} file that does not decode: ${error.message}`);
  }
}

const STOPPED = {
  end: 'the end of the text',
  stop: 'a stop string',
  context: "a full context: the model's positions are all taken (--context slide goes on)",
  abort: 'Ctrl-C',
};

function parse(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        model: { type: 'string' },
        mmproj: { type: 'string' },
        image: { type: 'string', multiple: true, default: [] },
        prompt: { type: 'string', default: '' },
        steps: { type: 'string', default: '256' },
        system: { type: 'string' },
        'max-tokens': { type: 'string' },
        stop: { type: 'string', multiple: true, default: [] },
        context: { type: 'string', default: 'stop' },
        mode: { type: 'string' },
        'cache-type-k': { type: 'string' },
        'cache-type-v': { type: 'string' },
        'residual-rows': { type: 'string' },
        draft: { type: 'string', default: '0' },
        temperature: { type: 'string' },
        'top-k': { type: 'string', default: '40' },
        'top-p': { type: 'string', default: '0.95' },
        'min-p': { type: 'string', default: '0.05' },
        'repeat-penalty': { type: 'string', default: '1' },
        'repeat-last-n': { type: 'string', default: '64' },
        seed: { type: 'string' },
        'json-schema': { type: 'string' },
        grammar: { type: 'string' },
        threads: { type: 'string' },
        text: { type: 'string', multiple: true, default: [] },
        pooling: { type: 'string' },
        dimensions: { type: 'string' },
        raw: { type: 'boolean' },
        truncate: { type: 'boolean' },
        query: { type: 'string' },
        'top-n': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    });
  } catch (error) {
    // parseArgs explains over three lines; the first says it.
    throw new UsageError(error.message.split('\n')[0]);
  }
  const { values, positionals } = parsed;
  if (values.help) return { help: true };
  if (values.version) return { version: true };
  const [command] = positionals;
  if (FILE_COMMANDS.includes(command) && positionals.length === 2) {
    if (values.model !== undefined) throw new UsageError(`${command} takes one model: FILE (${positionals[1]}) or --model (${values.model})`);
    values.model = positionals.pop();
  }
  if (COMMANDS.includes(command) && positionals.length === 2 && values.model === undefined) {
    throw new UsageError(`${command} takes the model as --model ${positionals[1]}`);
  }
  if (positionals.length !== 1 || !COMMANDS.includes(command)) {
    throw new UsageError(positionals.length ? `unknown command ${positionals.join(' ')}` : 'missing command');
  }
  const given = (name) => argv.some((arg) => arg === `--${name}` || arg.startsWith(`--${name}=`));
  const only = (name, where) => {
    if (given(name) && command !== where) throw new UsageError(`--${name} goes with ${where}, not ${command}`);
  };
  only('prompt', 'generate');
  only('steps', 'generate');
  only('system', 'chat');
  only('max-tokens', 'chat');
  for (const name of ['pooling', 'dimensions', 'raw']) only(name, 'embed');
  for (const name of ['query', 'top-n']) only(name, 'rerank');
  const textual = FILE_COMMANDS.includes(command);
  for (const name of ['text', 'truncate']) {
    if (given(name) && !textual) throw new UsageError(`--${name} goes with embed or rerank, not ${command}`);
  }
  if (textual) {
    for (const name of ['mmproj', 'image', 'mode', 'cache-type-k', 'cache-type-v', 'residual-rows', 'draft', 'stop', 'json-schema', 'grammar', 'seed', 'temperature']) {
      if (given(name)) throw new UsageError(`--${name} goes with generate or chat, not ${command}`);
    }
    if (command === 'rerank' && (values.query === undefined || values.query === '')) throw new UsageError('rerank needs --query TEXT: what the documents are scored for');
    if (values.pooling !== undefined && !['mean', 'cls', 'last', 'none'].includes(values.pooling)) {
      throw new UsageError(`--pooling must be mean, cls, last or none (got ${values.pooling})`);
    }
    if (values.text.some((text) => text === '')) throw new UsageError('--text must be a non-empty text');
  }
  const integer = (name, min, max = Number.MAX_SAFE_INTEGER, value = values[name]) => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < min || n > max) {
      throw new UsageError(`--${name} must be an integer from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ' up'} (got ${value})`);
    }
    return n;
  };
  const number = (name, min, max, value = values[name]) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
      throw new UsageError(`--${name} must be a number from ${min} to ${max} (got ${value})`);
    }
    return n;
  };
  if (!values.model) {
    if (!existsSync(SHIPPED_MODEL)) throw new UsageError('--model is required: the path of a GGUF file');
    values.model = SHIPPED_MODEL;
  }
  const model = isHfName(values.model) ? null : statSync(values.model, { throwIfNoEntry: false });
  if (model && !model.isFile()) throw new UsageError(`--model must be a GGUF file, and ${values.model} is a directory`);
  if (values.mmproj === 'auto' && !isHfName(values.model)) {
    throw new UsageError(`--mmproj auto finds the projector beside a model named hf:owner/repo..., and --model is ${values.model}`);
  }
  // An hf: model and its projector come through the store, both named: a file on disk goes with a file.
  if (values.mmproj !== undefined && values.mmproj !== 'auto' && isHfName(values.model) !== isHfName(values.mmproj)) {
    throw new UsageError(`--model ${values.model} and --mmproj ${values.mmproj}: with an hf: name, give the other as an hf: name too (or --mmproj auto)`);
  }
  if (values.mmproj !== undefined && values.mmproj !== 'auto' && !isHfName(values.mmproj)) {
    const projector = statSync(values.mmproj, { throwIfNoEntry: false });
    if (!projector) throw new UsageError(`--mmproj ${values.mmproj}: no such file`);
    if (!projector.isFile()) throw new UsageError(`--mmproj must be a GGUF file, and ${values.mmproj} is a directory`);
  }
  if (values.image.length > 0 && values.mmproj === undefined) {
    throw new UsageError('--image needs --mmproj: the model takes images through its vision encoder, an mmproj GGUF');
  }
  // With a projector, each marker of the prompt is an image's place; without one it is text.
  const markers = values.prompt.split(MEDIA_MARKER).length - 1;
  if (values.mmproj !== undefined && markers > 0 && markers !== values.image.length) {
    throw new UsageError(`--prompt has ${markers} ${MEDIA_MARKER} marker${markers === 1 ? '' : 's'} and ${values.image.length} --image: one image a marker`);
  }
  const perComponent = values['cache-type-k'] !== undefined || values['cache-type-v'] !== undefined;
  if (perComponent && values.mode !== undefined) throw new UsageError('--mode and --cache-type-k/--cache-type-v say the same: give one or the other');
  if (values.mode !== undefined && !MODES.includes(values.mode)) throw new UsageError(`--mode must be one of ${MODES.join(', ')} (got ${values.mode})`);
  for (const name of ['cache-type-k', 'cache-type-v']) {
    if (values[name] !== undefined && !COMPONENTS.includes(values[name])) {
      throw new UsageError(`--${name} must be one of ${COMPONENTS.join(', ')} (got ${values[name]})`);
    }
  }
  const mode = perComponent ? { keys: values['cache-type-k'] ?? 'f32', values: values['cache-type-v'] ?? 'f32' } : values.mode ?? 'f32';
  const q4 = [values.mode, values['cache-type-k'], values['cache-type-v']].some((name) => name?.includes('q4'));
  if (values['residual-rows'] !== undefined && !q4) {
    throw new UsageError('--residual-rows sizes the f32 window of 4-bit storage: it goes with a q4 mode or cache type');
  }
  if (!['stop', 'slide'].includes(values.context)) throw new UsageError(`--context must be stop or slide (got ${values.context})`);
  if (values.stop.some((text) => text === '')) throw new UsageError('--stop must be a non-empty text');
  const chat = command === 'chat';
  if (values['json-schema'] !== undefined && values.grammar !== undefined) throw new UsageError('--json-schema and --grammar both constrain the reply: give one');
  const constraint = {};
  if (values['json-schema'] !== undefined) {
    let schema;
    try {
      schema = JSON.parse(readFile('json-schema', values['json-schema']));
    } catch (error) {
      if (error instanceof UsageError) throw error;
      throw new UsageError(`--json-schema ${values['json-schema']} is not JSON: ${error.message}`);
    }
    constraint.responseFormat = { type: 'json_schema', schema };
  }
  if (values.grammar !== undefined) constraint.grammar = readFile('grammar', values.grammar);
  if (Object.keys(constraint).length > 0 && integer('draft', 0) > 0) throw new UsageError('--draft goes without --json-schema and --grammar: drafts are not verified under a constraint');
  return {
    command,
    model: values.model,
    texts: values.text,
    embedding: {
      ...(values.pooling !== undefined && { pooling: values.pooling }),
      ...(values.dimensions !== undefined && { dimensions: integer('dimensions', 1) }),
      ...(values.raw && { normalize: false }),
      ...(values.truncate && { truncate: true }),
    },
    query: values.query,
    topN: values['top-n'] === undefined ? undefined : integer('top-n', 1),
    projector: values.mmproj,
    images: values.image,
    prompt: values.prompt,
    system: values.system,
    // chat's default depends on the model's context: chatCommand sets it.
    maxTokens: !chat ? integer('steps', 1) : values['max-tokens'] === undefined ? undefined : integer('max-tokens', 1),
    session: {
      mode,
      residualRows: values['residual-rows'] === undefined ? undefined : integer('residual-rows', 0, Q4_MAX_RESIDUAL_ROWS),
    },
    threads: values.threads === undefined ? undefined : integer('threads', 1, 64),
    generation: {
      stop: values.stop,
      context: values.context,
      draft: integer('draft', 0),
      temperature: values.temperature === undefined ? (chat ? 0.8 : 0) : number('temperature', 0, 100),
      topK: integer('top-k', 0),
      topP: number('top-p', 0, 1),
      minP: number('min-p', 0, 1),
      repeatPenalty: number('repeat-penalty', 0, 100),
      repeatLastN: integer('repeat-last-n', 0),
      seed: values.seed === undefined ? (chat ? Math.floor(Math.random() * 2 ** 32) : 1) : integer('seed', 0, 2 ** 32 - 1),
      ...constraint,
    },
  };
}

async function loadModule(options) {
  try {
    await init(options);
  } catch (error) {
    // A source checkout that has not been built yet: build it once.
    const toolchain = new URL('../scripts/toolchain.mjs', import.meta.url);
    if (!/ENOENT/.test(error?.message) || !existsSync(toolchain)) throw error;
    const { buildWasm, ensureToolchain } = await import(toolchain);
    ensureToolchain();
    buildWasm();
    await init(options);
  }
}

const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

/**
 * Why a model file (or its projector, `projector` when it was loading) did
 * not load, as a LoadError naming it; anything else (a bug) as it came.
 */
function refusal(path, projector, error) {
  const reason = error.message.replace(/^Llama\.load: /, '').replace(/^the projector: /, '');
  const file = projector ?? path;
  if (error instanceof KvCacheError && error.code === 'KVC_E_NOMEM') return new LoadError(`${file} does not fit in memory: ${reason}`);
  if (error instanceof GgufError) return new LoadError(`${file} is not usable: ${reason}`);
  // Llama.load's check that the two files are one model's.
  if (projector && error instanceof TypeError) return new LoadError(`--mmproj ${projector} does not go with --model ${path}: ${reason}`);
  return error;
}

/**
 * The model (and its projector, given one), streamed from disk into the
 * heap (a file is never whole in memory), saying on stderr how far it is: a
 * file of hundreds of MB takes seconds. A terminal's line counts up as the
 * files come; a log or a pipe gets a line when it starts and one when it is
 * done.
 */
async function loadModel(path, projectorPath) {
  if (isHfName(path)) return loadNamed(path, projectorPath);
  const name = projectorPath ? `${basename(path)} and ${basename(projectorPath)}` : basename(path);
  const file = await openAsBlob(path);
  const projector = projectorPath && await openAsBlob(projectorPath);
  const total = file.size + (projector?.size ?? 0);
  const started = performance.now();
  const live = process.stderr.isTTY;
  let drawn = -Infinity;
  const draw = (loaded) => {
    drawn = performance.now();
    process.stderr.write(`\rloading ${name}: ${mib(loaded)} of ${mib(total)} (${total ? Math.floor((100 * loaded) / total) : 100}%)`);
  };
  if (live) draw(0);
  else console.error(`loading ${name} (${mib(total)})`);
  let llama;
  let loading = null; // the projector's path once it loads
  try {
    llama = await Llama.load(file, {
      ...(projector && { projector }),
      onProgress: ({ loaded, file: which }) => {
        if (which === 'projector') loading = projectorPath;
        // Ten redraws a second are enough to see it move.
        if (live && performance.now() - drawn >= 100) draw(which === 'projector' ? file.size + loaded : loaded);
      },
    });
  } catch (error) {
    if (live) process.stderr.write('\n');
    throw refusal(path, loading, error);
  }
  const done = `loaded ${name}: ${mib(total)} in ${((performance.now() - started) / 1000).toFixed(1)} s`;
  process.stderr.write(live ? `\r${done}\x1b[K\n` : `${done}\n`);
  return llama;
}

/**
 * A model named hf:owner/repo... (and its projector: a name, or 'auto'),
 * downloaded into the store in the user's cache folder (the next
 * run reads it from there; a cut download resumes), resolved at
 * $HF_ENDPOINT (default the Hub) with $HF_TOKEN, as huggingface_hub reads
 * them.
 */
async function loadNamed(path, projectorPath) {
  const name = projectorPath ? `${path} and ${projectorPath === 'auto' ? 'its projector' : projectorPath}` : path;
  const store = await ModelStore.open();
  const { HF_ENDPOINT: endpoint, HF_TOKEN: token } = process.env;
  const huggingFace = { ...(endpoint && { endpoint }), ...(token && { token }) };
  const started = performance.now();
  const live = process.stderr.isTTY;
  let drawn = -Infinity;
  let last = { loaded: 0, total: null, fromNetwork: 0 };
  const draw = ({ loaded, total, file }) => {
    drawn = performance.now();
    process.stderr.write(`\rloading ${file === 'projector' ? 'the projector' : path}: ${mib(loaded)}${total ? ` of ${mib(total)}` : ''}\x1b[K`);
  };
  console.error(`loading ${name} (through the store in ${store.where})`);
  let llama;
  try {
    llama = await Llama.load(path, {
      store, huggingFace, ...(projectorPath && { projector: projectorPath }),
      onProgress: (progress) => {
        last = progress;
        if (live && performance.now() - drawn >= 100) draw(progress);
      },
    });
  } catch (error) {
    if (live) process.stderr.write('\n');
    // A name the Hub does not resolve, or refuses: its message says which and why.
    if (error instanceof TypeError && error.message.includes(': hf:')) throw new LoadError(error.message.replace(/^Llama\.load: /, ''));
    throw refusal(path, null, error);
  }
  const done = `loaded ${name} in ${((performance.now() - started) / 1000).toFixed(1)} s (${mib(last.fromNetwork ?? 0)} downloaded)`;
  process.stderr.write(live ? `\r${done}\x1b[K\n` : `${done}\n`);
  return llama;
}

/** Streams pieces to stdout; returns the last one (its stop and stats). */
async function print(pieces) {
  let last;
  for await (const piece of pieces) {
    process.stdout.write(piece.text);
    last = piece;
  }
  return last;
}

/**
 * Ctrl-C -- a SIGINT -- stops the reply under way; between replies, or a
 * second time before the reply has stopped, it ends the program.
 */
function interrupts() {
  let controller = null;
  process.on('SIGINT', () => {
    if (controller && !controller.signal.aborted) controller.abort();
    else process.exit(130);
  });
  return {
    /** Prints the pieces of reply(signal), a signal Ctrl-C aborts; returns the last. */
    async print(reply) {
      controller = new AbortController();
      try {
        return await print(reply(controller.signal));
      } finally {
        controller = null;
      }
    },
  };
}

const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;

function report(llama, session, options, { stop, stats }, asked) {
  const { temperature, seed, draft } = options.generation;
  if (stop !== 'maxTokens') console.error(`\nstopped at ${STOPPED[stop]}, after ${stats?.tokens ?? 'some'} of ${asked} tokens`);
  if (stats) {
    const sampling = temperature === 0 ? 'greedy' : `temperature ${temperature}, seed ${seed}`;
    console.error(`\n${stats.tokens} tokens in ${stats.seconds.toFixed(2)} s: ${(stats.tokens / stats.seconds).toFixed(1)} tokens/s (${sampling})`);
    if (draft > 0) {
      const rate = stats.drafted ? ((100 * stats.accepted) / stats.drafted).toFixed(1) : '0.0';
      console.error(`speculative: up to ${draft} drafts, ${stats.verifies} verifies, ${stats.accepted} of ${stats.drafted} drafts accepted (${rate}%), ` +
        `${(stats.tokens / stats.forwardPasses).toFixed(2)} tokens per forward pass, ${stats.rollbacks} rollbacks`);
    }
  }
  const { cache } = session;
  console.error(`cache: ${session.mode}, ${llama.config.numLayers} layers, ${cache.nextPosition} positions, ${kib(cache.memoryBytes)} (capacity ${kib(cache.capacityBytes)})`);
}

/**
 * Images (pixels) encoded by the model's projector (Llama#prepareImage),
 * each said on stderr: its size, the positions it takes, how long it took.
 */
async function prepareImages(llama, images) {
  const prepared = [];
  for (const { path, pixels } of images) {
    const started = performance.now();
    const image = await llama.prepareImage(pixels);
    const { image: rows, markers, total } = llama.imageTokenCount(pixels);
    console.error(`image ${basename(path)}: ${pixels.width}x${pixels.height}, ${total} positions (${rows} from the encoder, ${markers} of markers), ` +
      `encoded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    prepared.push(image);
  }
  return prepared;
}

/**
 * generate's prompt as token ids: its text, and the images where its
 * markers are or, without markers, after it (llama.cpp's mtmd-cli); with
 * images, special tokens in the text are read as such, as mtmd reads them.
 */
async function promptIds(llama, options) {
  const { tokenizer } = llama;
  if (options.images.length === 0) return tokenizer.encode(options.prompt);
  const images = await prepareImages(llama, options.images);
  const text = options.prompt.includes(MEDIA_MARKER) ? options.prompt : options.prompt + MEDIA_MARKER.repeat(images.length);
  return [...(tokenizer.addBos ? [tokenizer.bosId] : []), ...await idsOf('kvcache-wasm generate', llama, text, images)];
}

async function generateCommand(llama, options) {
  const session = llama.session(options.session);
  const prompt = await promptIds(llama, options);
  if (prompt.length > llama.config.contextLength) {
    throw new UsageError(`--prompt is ${prompt.length} tokens, more than the model's context of ${llama.config.contextLength}`);
  }
  // The prompt as given, then the continuation as the decoder gives it: the
  // spaces between the two are the decoder's to get right, not this.
  process.stdout.write(options.prompt);
  const last = await interrupts().print((signal) => session.generate(prompt, { ...options.generation, maxTokens: options.maxTokens, signal }));
  process.stdout.write('\n');
  report(llama, session, options, last, options.maxTokens);
  session.free();
}

async function chatCommand(llama, options) {
  const { architecture, numLayers, contextLength } = llama.config;
  const maxTokens = options.maxTokens ?? Math.max(1, Math.min(MAX_REPLY_TOKENS, Math.floor(contextLength / 4)));
  const interactive = process.stdin.isTTY && process.stdout.isTTY;
  const startChat = () => new Chat(llama.session(options.session), options.system === undefined ? {} : { system: options.system });
  let chat = startChat();
  // Images for the next message: --image's, then each /image's.
  let images = await prepareImages(llama, options.images);
  const ctrlC = interrupts();
  // On a terminal readline edits the line and echoes it, with the terminal
  // in raw mode: Ctrl-C is then a key readline reports, not a signal.
  const lines = createInterface({ input: process.stdin, terminal: interactive, ...(interactive ? { output: process.stdout, prompt: '> ' } : {}) });
  let exited = false;
  if (interactive) {
    lines.on('SIGINT', () => {
      if (lines.line === '') {
        process.stdout.write('^C');
        lines.close();
        return;
      }
      // Text typed and not sent: dropped (left on the screen, as a shell does), and a new prompt.
      lines.write(null, { ctrl: true, name: 'e' });
      process.stdout.write('^C\n');
      lines.write(null, { ctrl: true, name: 'u' });
    });
    console.error(`${architecture}, ${numLayers} layers, context ${contextLength}; ${llama.projector ? '/image PATH adds a picture to your next message, ' : ''}/reset starts over, /exit ends`);
    lines.prompt();
  }
  for await (const line of lines) {
    const text = line.trim();
    if (text === '/exit') {
      exited = true;
      break;
    }
    if (text === '/reset') {
      chat.free();
      chat = startChat();
      images = [];
    } else if (text === '/image' || text.startsWith('/image ')) {
      // As llama.cpp's mtmd-cli: the image goes with the next message, before its text.
      const path = text.slice('/image'.length).trim();
      try {
        if (!llama.projector) throw new UsageError('this model takes no images: give its projector as --mmproj');
        if (path === '') throw new UsageError('/image takes the path of a PNG or JPEG file');
        images.push(...await prepareImages(llama, [{ path, pixels: await readImage(path) }]));
      } catch (error) {
        if (!(error instanceof UsageError)) throw error;
        console.error(`kvcache-wasm chat: ${error.message.replace(/^--image /, '')}`);
      }
    } else if (text !== '') {
      if (interactive) {
        // While a reply prints the terminal is in its own mode again: Ctrl-C
        // is a SIGINT (ctrlC stops the reply), and what is typed meanwhile
        // waits for the next prompt.
        lines.pause();
        process.stdin.setRawMode(false);
      }
      const message = images.length ? [...images.map((image) => ({ type: 'image', image })), { type: 'text', text }] : text;
      images = [];
      const last = await ctrlC.print((signal) => chat.send(message, { ...options.generation, maxTokens, signal }));
      if (interactive) process.stdin.setRawMode(true);
      process.stdout.write('\n');
      if (last.stop === 'maxTokens') console.error(`[stopped at ${maxTokens} tokens (--max-tokens)]`);
      else if (last.stop !== 'end') console.error(`[stopped at ${STOPPED[last.stop]}, after ${last.stats.tokens} tokens]`);
    }
    if (interactive) lines.prompt();
  }
  lines.close();
  // Ctrl-D or Ctrl-C left the cursor after the prompt.
  if (interactive && !exited) process.stdout.write('\n');
  report(llama, chat.session, options, { stop: 'maxTokens', stats: null }, maxTokens);
  chat.free();
}

/** The texts of --text, or else stdin's non-empty lines. */
async function textsOf(options) {
  if (options.texts.length > 0) return options.texts;
  const texts = [];
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) if (line.trim() !== '') texts.push(line);
  if (texts.length === 0) throw new UsageError(`${options.command} has no text: give --text TEXT or lines on stdin`);
  return texts;
}

/** embed: a JSON line a text, its vector. */
async function embedCommand(llama, options) {
  const texts = await textsOf(options);
  const vectors = await llama.embed(texts, options.embedding);
  vectors.forEach((vector, index) => process.stdout.write(`${JSON.stringify({ index, text: texts[index], embedding: Array.from(vector) })}\n`));
}

/** rerank: a JSON line a document, best first. */
async function rerankCommand(llama, options) {
  const texts = await textsOf(options);
  const topN = Math.min(options.topN ?? texts.length, texts.length);
  const { ranking } = await llama.rerank(options.query, texts, { topN, ...(options.embedding.truncate && { truncate: true }) });
  for (const { index, score, document } of ranking) process.stdout.write(`${JSON.stringify({ index, score, text: document })}\n`);
}

async function main() {
  const options = parse(process.argv.slice(2));
  if (options.help) {
    console.log(USAGE);
    return 0;
  }
  if (options.version) {
    console.log(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version);
    return 0;
  }
  if (!isHfName(options.model) && !existsSync(options.model)) {
    console.error(`kvcache-wasm ${options.command}: no model file at ${options.model}`);
    return 2;
  }
  // Images are read before the model loads: a file that is no image is refused at once.
  const images = [];
  for (const path of options.images) images.push({ path, pixels: await readImage(path) });
  options.images = images;
  await loadModule(options.threads === undefined ? {} : { threads: options.threads });
  const llama = await loadModel(options.model, options.projector);
  const run = { generate: generateCommand, chat: chatCommand, embed: embedCommand, rerank: rerankCommand };
  await run[options.command](llama, options);
  return 0;
}

main().then((code) => {
  process.exitCode = code;
}, (error) => {
  const command = process.argv.slice(2).find((arg) => COMMANDS.includes(arg)) ?? 'generate';
  if (error instanceof UsageError) {
    console.error(`kvcache-wasm: ${error.message} (kvcache-wasm --help lists the options)`);
    process.exitCode = 2;
  } else if (error instanceof TypeError && /: (options\.(responseFormat|grammar)|the constraint does not compile)/.test(error.message)) {
    // The schema or grammar a file holds, refused: what --json-schema or --grammar gave.
    const option = /responseFormat/.test(error.message) ? '--json-schema' : '--grammar';
    console.error(`kvcache-wasm ${command}: ${option} is refused: ${error.message.replace(/^[\w.]+: /, '')}`);
    process.exitCode = 2;
  } else if ((error instanceof TypeError || error instanceof RangeError) && /^Llama\.(embed|rerank): /.test(error.message)) {
    // What the model cannot do with the texts: a generation model without --pooling, a text past the context, ...
    const said = error.message.replace(/^[\w.]+: /, '').replace(/options\.(pooling|truncate|dimensions)( ?:? ?true)?/g, '--$1');
    console.error(`kvcache-wasm ${command}: ${said}`);
    process.exitCode = 2;
  } else if (error instanceof LoadError) {
    console.error(`kvcache-wasm ${command}: ${error.message}`);
    process.exitCode = 1;
  } else {
    console.error(`kvcache-wasm: ${error.stack ?? error}`);
    process.exitCode = 1;
  }
});

#!/usr/bin/env node
// kvcache-wasm generate | chat: text from a GGUF model, with this package's
// cache doing the attention. generate continues a prompt; chat talks, turn
// by turn, through the file's chat template. Text is printed as it comes;
// how far the model's file has loaded, why a reply stopped, tokens/s and
// the cache's memory go to stderr.
import { existsSync, openAsBlob, readFileSync, statSync } from 'node:fs';
import { basename } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import init, { COMPONENTS, KvCacheError, MODES, Q4_MAX_RESIDUAL_ROWS } from '../js/index.js';
import { GgufError, Llama } from '../js/llama.js';
import { Chat } from '../js/chat.js';

const COMMANDS = ['generate', 'chat'];
// A chat reply's length by default: at most a quarter of the model's context,
// which leaves the rest to the conversation (stories260K's 512 positions: 128).
const MAX_REPLY_TOKENS = 512;
const USAGE = `usage: kvcache-wasm generate --model PATH [--prompt TEXT] [--steps N] [options]
       kvcache-wasm chat --model PATH [--system TEXT] [--max-tokens N] [options]
       kvcache-wasm --version | --help

  generate continues --prompt; chat reads your messages from stdin, one a
  line, and answers each through the file's chat template (/reset starts
  over; /exit, Ctrl-D or the end of input ends). Ctrl-C stops a reply and
  the chat goes on; at an empty prompt it ends the chat (exit code 0), and a
  second Ctrl-C before a reply has stopped ends the program at once (130).
  How far the model's file has loaded goes to stderr.

  --model PATH         a GGUF model: llama, qwen2, qwen3, gemma3, smollm3 or phi3; F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
                       Q5_1, Q4_K, Q5_K or Q6_K tensors (e.g. stories260k.gguf)
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
  --threads N          threads for the matmuls and attention (default: what the machine has)`;

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
  if (!values.model) throw new UsageError('--model is required: the path of a GGUF file');
  const model = statSync(values.model, { throwIfNoEntry: false });
  if (model && !model.isFile()) throw new UsageError(`--model must be a GGUF file, and ${values.model} is a directory`);
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

/** Why a model file did not load, as a LoadError naming it; anything else (a bug) as it came. */
function refusal(path, error) {
  const reason = error.message.replace(/^Llama\.load: /, '');
  if (error instanceof KvCacheError && error.code === 'KVC_E_NOMEM') return new LoadError(`${path} does not fit in memory: ${reason}`);
  if (error instanceof GgufError) return new LoadError(`${path} is not usable: ${reason}`);
  return error;
}

/**
 * The model, streamed from disk into the heap (its file is never whole in
 * memory), saying on stderr how far it is: a file of hundreds of MB takes
 * seconds. A terminal's line counts up as the file comes; a log or a pipe
 * gets a line when it starts and one when it is done.
 */
async function loadModel(path) {
  const name = basename(path);
  const file = await openAsBlob(path);
  const started = performance.now();
  const live = process.stderr.isTTY;
  let drawn = -Infinity;
  const draw = (loaded) => {
    drawn = performance.now();
    process.stderr.write(`\rloading ${name}: ${mib(loaded)} of ${mib(file.size)} (${file.size ? Math.floor((100 * loaded) / file.size) : 100}%)`);
  };
  if (live) draw(0);
  else console.error(`loading ${name} (${mib(file.size)})`);
  let llama;
  try {
    // Ten redraws a second are enough to see it move.
    llama = await Llama.load(file, live ? { onProgress: ({ loaded }) => performance.now() - drawn >= 100 && draw(loaded) } : {});
  } catch (error) {
    if (live) process.stderr.write('\n');
    throw refusal(path, error);
  }
  const done = `loaded ${name}: ${mib(file.size)} in ${((performance.now() - started) / 1000).toFixed(1)} s`;
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

async function generateCommand(llama, options) {
  const { tokenizer } = llama;
  const session = llama.session(options.session);
  const prompt = tokenizer.encode(options.prompt);
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
    console.error(`${architecture}, ${numLayers} layers, context ${contextLength}; /reset starts over, /exit ends`);
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
    } else if (text !== '') {
      if (interactive) {
        // While a reply prints the terminal is in its own mode again: Ctrl-C
        // is a SIGINT (ctrlC stops the reply), and what is typed meanwhile
        // waits for the next prompt.
        lines.pause();
        process.stdin.setRawMode(false);
      }
      const last = await ctrlC.print((signal) => chat.send(text, { ...options.generation, maxTokens, signal }));
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
  if (!existsSync(options.model)) {
    console.error(`kvcache-wasm ${options.command}: no model file at ${options.model}`);
    return 2;
  }
  await loadModule(options.threads === undefined ? {} : { threads: options.threads });
  const llama = await loadModel(options.model);
  await (options.command === 'chat' ? chatCommand : generateCommand)(llama, options);
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
  } else if (error instanceof LoadError) {
    console.error(`kvcache-wasm ${command}: ${error.message}`);
    process.exitCode = 1;
  } else {
    console.error(`kvcache-wasm: ${error.stack ?? error}`);
    process.exitCode = 1;
  }
});

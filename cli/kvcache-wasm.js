#!/usr/bin/env node
// kvcache-wasm generate | chat: text from a GGUF model, with this package's
// cache doing the attention. generate continues a prompt; chat talks, turn
// by turn, through the file's chat template. Text is printed as it comes;
// why a reply stopped, tokens/s and the cache's memory go to stderr.
import { existsSync, openAsBlob, readFileSync, statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import init, { COMPONENTS, MODES, Q4_MAX_RESIDUAL_ROWS } from '../js/index.js';
import { GgufError, Llama } from '../js/llama.js';
import { Chat } from '../js/chat.js';

const COMMANDS = ['generate', 'chat'];
const USAGE = `usage: kvcache-wasm generate --model PATH [--prompt TEXT] [--steps N] [options]
       kvcache-wasm chat --model PATH [--system TEXT] [--max-tokens N] [options]
       kvcache-wasm --version | --help

  generate continues --prompt; chat reads your messages from stdin, one a
  line, and answers each through the file's chat template (/reset starts
  over, /exit or end of input ends; Ctrl-C stops a reply).

  --model PATH         a GGUF model: llama, qwen2 or qwen3; F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
                       Q5_1, Q4_K, Q5_K or Q6_K tensors (e.g. stories260k.gguf)
  --prompt TEXT        generate: text to continue (default: none, start from <s>)
  --steps N            generate: tokens to generate, at most (default 256)
  --system TEXT        chat: a system prompt
  --max-tokens N       chat: tokens a reply has, at most (default 512)
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
  --threads N          threads for the matmuls and attention (default: what the machine has)`;

class UsageError extends Error {}

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
        'max-tokens': { type: 'string', default: '512' },
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
  return {
    command,
    model: values.model,
    prompt: values.prompt,
    system: values.system,
    maxTokens: chat ? integer('max-tokens', 1) : integer('steps', 1),
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

/** Streams pieces to stdout; returns the last one (its stop and stats). */
async function print(pieces) {
  let last;
  for await (const piece of pieces) {
    process.stdout.write(piece.text);
    last = piece;
  }
  return last;
}

/** Ctrl-C aborts the reply under way (if any); otherwise it ends the program. */
function interrupts() {
  let controller = null;
  process.on('SIGINT', () => {
    if (controller && !controller.signal.aborted) controller.abort();
    else process.exit(130);
  });
  return {
    signal() {
      controller = new AbortController();
      return controller.signal;
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
  process.stdout.write(tokenizer.decode(prompt));
  const signal = interrupts().signal();
  const last = await print(session.generate(prompt, { ...options.generation, maxTokens: options.maxTokens, signal }));
  process.stdout.write('\n');
  report(llama, session, options, last, options.maxTokens);
  session.free();
}

async function chatCommand(llama, options) {
  const interactive = process.stdin.isTTY && process.stdout.isTTY;
  const startChat = () => new Chat(llama.session(options.session), options.system === undefined ? {} : { system: options.system });
  let chat = startChat();
  const ctrlC = interrupts();
  const lines = createInterface({ input: process.stdin, terminal: interactive });
  if (interactive) {
    console.error(`${llama.config.architecture}, ${llama.config.numLayers} layers, context ${llama.config.contextLength}; /reset starts over, /exit ends`);
    process.stdout.write('> ');
  }
  for await (const line of lines) {
    const text = line.trim();
    if (text === '/exit') break;
    if (text === '/reset') {
      chat.free();
      chat = startChat();
    } else if (text !== '') {
      const last = await print(chat.send(text, { ...options.generation, maxTokens: options.maxTokens, signal: ctrlC.signal() }));
      process.stdout.write('\n');
      if (last.stop !== 'end') console.error(`[stopped at ${STOPPED[last.stop] ?? `${options.maxTokens} tokens (--max-tokens)`}]`);
    }
    if (interactive) process.stdout.write('> ');
  }
  lines.close();
  report(llama, chat.session, options, { stop: 'maxTokens', stats: null }, options.maxTokens);
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
  // Streamed from disk into the heap: a model's file is never whole in memory.
  const llama = await Llama.load(await openAsBlob(options.model));
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
  } else if (error instanceof GgufError) {
    console.error(`kvcache-wasm ${command}: the model file is not usable: ${error.message}`);
    process.exitCode = 1;
  } else {
    console.error(`kvcache-wasm: ${error.stack ?? error}`);
    process.exitCode = 1;
  }
});

#!/usr/bin/env node
// kvcache-wasm generate: text from a llama GGUF, with this package's cache
// doing the attention. Prints the text as it is produced, then (on stderr)
// tokens/s, the cache's memory and the speculative statistics.
import { existsSync, openAsBlob, readFileSync, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import init, { COMPONENTS, MODES, Q4_MAX_RESIDUAL_ROWS } from '../js/index.js';
import { GgufError, Llama, generate } from '../js/llama.js';

const USAGE = `usage: kvcache-wasm generate --model PATH [--prompt TEXT] [--steps N]
         [--mode M | --cache-type-k T --cache-type-v T] [--residual-rows R]
         [--draft K] [--temperature T --seed S]
       kvcache-wasm --version | --help

  --model PATH         a GGUF model: llama, qwen2 or qwen3; F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
                       Q5_1, Q4_K, Q5_K or Q6_K tensors (e.g. stories260k.gguf)
  --prompt TEXT        text to continue (default: none, start from <s>)
  --steps N            tokens to generate, at most (default 256)
  --mode M             how the cache stores keys and values (default f32):
                       ${MODES.join(', ')}
  --cache-type-k T     how it stores keys alone: ${COMPONENTS.join(', ')} (default f32)
  --cache-type-v T     and values
  --residual-rows R    q4: the newest rows kept in f32, 0 to ${Q4_MAX_RESIDUAL_ROWS} (default 64)
  --draft K            speculative decoding with up to K prompt-lookup drafts (default 0: off)
  --temperature T      sampling temperature (default 0: greedy)
  --seed S             seed of the sampler (default 1)`;

class UsageError extends Error {}

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
        mode: { type: 'string' },
        'cache-type-k': { type: 'string' },
        'cache-type-v': { type: 'string' },
        'residual-rows': { type: 'string' },
        draft: { type: 'string', default: '0' },
        temperature: { type: 'string', default: '0' },
        seed: { type: 'string', default: '1' },
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
  if (positionals[0] === 'generate' && positionals.length === 2 && values.model === undefined) {
    throw new UsageError(`generate takes the model as --model ${positionals[1]}`);
  }
  if (positionals.length !== 1 || positionals[0] !== 'generate') {
    throw new UsageError(positionals.length ? `unknown command ${positionals.join(' ')}` : 'missing command');
  }
  const integer = (name, min, max = Number.MAX_SAFE_INTEGER) => {
    const value = Number(values[name]);
    if (!/^\d+$/.test(values[name]) || value < min || value > max) {
      throw new UsageError(`--${name} must be an integer from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ' up'} (got ${values[name]})`);
    }
    return value;
  };
  if (!values.model) throw new UsageError('--model is required: the path of a llama GGUF file');
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
  const temperature = Number(values.temperature);
  if (values.temperature.trim() === '' || !Number.isFinite(temperature) || temperature < 0) {
    throw new UsageError(`--temperature must be a number >= 0 (got ${values.temperature})`);
  }
  const q4 = [values.mode, values['cache-type-k'], values['cache-type-v']].some((name) => name?.includes('q4'));
  if (values['residual-rows'] !== undefined && !q4) {
    throw new UsageError('--residual-rows sizes the f32 window of 4-bit storage: it goes with a q4 mode or cache type');
  }
  return {
    model: values.model,
    prompt: values.prompt,
    steps: integer('steps', 1),
    mode,
    residualRows: values['residual-rows'] === undefined ? undefined : integer('residual-rows', 0, Q4_MAX_RESIDUAL_ROWS),
    draft: integer('draft', 0),
    temperature,
    seed: integer('seed', 0),
  };
}

async function loadModule() {
  try {
    await init();
  } catch (error) {
    // A source checkout that has not been built yet: build it once.
    const toolchain = new URL('../scripts/toolchain.mjs', import.meta.url);
    if (!/ENOENT/.test(error?.message) || !existsSync(toolchain)) throw error;
    const { buildWasm, ensureToolchain } = await import(toolchain);
    ensureToolchain();
    buildWasm();
    await init();
  }
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
    console.error(`kvcache-wasm generate: no model file at ${options.model}`);
    return 2;
  }
  await loadModule();
  // Streamed from disk into the heap: a model's file is never whole in memory.
  const llama = await Llama.load(await openAsBlob(options.model));
  const { tokenizer } = llama;
  const session = llama.session({ mode: options.mode, residualRows: options.residualRows });
  const prompt = tokenizer.encode(options.prompt);
  if (prompt.length > llama.config.contextLength) {
    throw new UsageError(`--prompt is ${prompt.length} tokens, more than the model's context of ${llama.config.contextLength}`);
  }
  const decoder = tokenizer.decoder();
  process.stdout.write(prompt.map((id) => decoder.push(id)).join(''));
  const { stats } = generate(session, prompt, {
    steps: options.steps,
    draft: options.draft,
    temperature: options.temperature,
    seed: options.seed,
    onToken: (id) => process.stdout.write(decoder.push(id)),
  });
  process.stdout.write(`${decoder.flush()}\n`);

  const sampling = options.temperature === 0 ? 'greedy' : `temperature ${options.temperature}, seed ${options.seed}`;
  const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;
  const stopped = { end: 'stopped at the end of the text', context: `stopped: the model's context of ${llama.config.contextLength} positions is full` };
  if (stats.stop !== 'steps') console.error(`\n${stopped[stats.stop]}, after ${stats.tokens} of ${options.steps} tokens`);
  console.error(`\n${stats.tokens} tokens in ${stats.seconds.toFixed(2)} s: ${(stats.tokens / stats.seconds).toFixed(1)} tokens/s (${sampling})`);
  console.error(`cache: ${session.mode}, ${llama.config.numLayers} layers, ${session.cache.seqLen} positions, ${kib(session.cache.memoryBytes)} (capacity ${kib(session.cache.capacityBytes)})`);
  if (options.draft > 0) {
    const rate = stats.drafted ? ((100 * stats.accepted) / stats.drafted).toFixed(1) : '0.0';
    console.error(`speculative: up to ${options.draft} drafts, ${stats.verifies} verifies, ${stats.accepted} of ${stats.drafted} drafts accepted (${rate}%), ` +
      `${(stats.tokens / stats.forwardPasses).toFixed(2)} tokens per forward pass, ${stats.rollbacks} rollbacks`);
  }
  session.free();
  return 0;
}

main().then((code) => {
  process.exitCode = code;
}, (error) => {
  if (error instanceof UsageError) {
    console.error(`kvcache-wasm: ${error.message} (kvcache-wasm --help lists the options)`);
    process.exitCode = 2;
  } else if (error instanceof GgufError) {
    console.error(`kvcache-wasm generate: ${process.argv.slice(2).includes('--model') ? 'the model file' : 'the model'} is not usable: ${error.message}`);
    process.exitCode = 1;
  } else {
    console.error(`kvcache-wasm: ${error.stack ?? error}`);
    process.exitCode = 1;
  }
});

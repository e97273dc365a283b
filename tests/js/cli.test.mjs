// The command line: npx kvcache-wasm generate | chat ...
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MODEL_MISSING, MODEL_PATH } from './helpers.mjs';

const cli = fileURLToPath(new URL('../../cli/kvcache-wasm.js', import.meta.url));
const run = (...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
/** The CLI with `input` on stdin (not a terminal: no prompt marks). */
const runWith = (input, ...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', input });

function modelTest(name, fn) {
  test(name, (t) => (MODEL_MISSING ? t.skip(MODEL_MISSING) : fn(t)));
}

modelTest('generate prints the story and, at the end, tokens/s and the cache memory', () => {
  const result = run('generate', '--model', MODEL_PATH, '--steps', '40');
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stdout, /^Once upon a time, there was a little girl named Lily\./);
  assert.match(result.stderr, /40 tokens in [\d.]+ s: [\d.]+ tokens\/s \(greedy\)/);
  assert.match(result.stderr, /cache: f32, 5 layers, 40 positions, [\d.]+ KiB/);
});

modelTest('generate --mode q8 --draft 4 prints the same greedy text and its speculative statistics', () => {
  const plain = run('generate', '--model', MODEL_PATH, '--steps', '60', '--mode', 'q8');
  const speculative = run('generate', '--model', MODEL_PATH, '--steps', '60', '--mode', 'q8', '--draft', '4');
  assert.equal(speculative.status, 0, speculative.stderr);
  assert.equal(speculative.stdout, plain.stdout);
  assert.match(speculative.stderr, /speculative: up to 4 drafts, \d+ verifies, \d+ of \d+ drafts accepted \([\d.]+%\), [\d.]+ tokens per forward pass, \d+ rollbacks/);
});

modelTest('generate --cache-type-k q8 --cache-type-v q4 stores keys in 8 bits and values in 4, --mode q4 both, with the same greedy text here', () => {
  const mixed = run('generate', '--model', MODEL_PATH, '--steps', '40', '--cache-type-k', 'q8', '--cache-type-v', 'q4');
  const q4 = run('generate', '--model', MODEL_PATH, '--steps', '40', '--mode', 'q4', '--residual-rows', '32');
  const f32 = run('generate', '--model', MODEL_PATH, '--steps', '40');
  assert.equal(mixed.status, 0, mixed.stderr);
  assert.match(mixed.stderr, /cache: q8k\+q4v, 5 layers, 40 positions/);
  assert.match(q4.stderr, /cache: q4, 5 layers, 40 positions/);
  assert.equal(mixed.stdout, f32.stdout);
  assert.equal(q4.stdout, f32.stdout);
});

test('generate refuses an unknown mode or cache type, and --mode beside --cache-type-k, naming the option', () => {
  for (const [args, option] of [
    [['--mode', 'q5'], '--mode'], [['--cache-type-k', 'q16'], '--cache-type-k'], [['--cache-type-v', 'int4'], '--cache-type-v'],
    [['--mode', 'q4', '--cache-type-k', 'q8'], '--mode and --cache-type-k'], [['--mode', 'q4', '--residual-rows', '-1'], '--residual-rows'],
    [['--mode', 'q4', '--residual-rows', '4097'], '--residual-rows must be an integer from 0 to 4096 (got 4097)'],
    [['--mode', 'q8', '--residual-rows', '32'], '--residual-rows sizes the f32 window of 4-bit storage: it goes with a q4 mode or cache type'],
  ]) {
    const result = run('generate', '--model', 'any.gguf', ...args);
    assert.equal(result.status, 2, `${args.join(' ')}: ${result.stderr}`);
    assert.ok(result.stderr.includes(option), result.stderr);
  }
});

modelTest('generate continues a prompt, and samples with a temperature and a seed', () => {
  const first = run('generate', '--model', MODEL_PATH, '--prompt', 'The dog', '--steps', '30', '--temperature', '0.9', '--seed', '3');
  const again = run('generate', '--model', MODEL_PATH, '--prompt', 'The dog', '--steps', '30', '--temperature', '0.9', '--seed', '3');
  assert.equal(first.status, 0, first.stderr);
  assert.match(first.stdout, /^The dog/);
  assert.equal(again.stdout, first.stdout, 'the same seed, the same text');
  assert.match(first.stderr, /temperature 0\.9, seed 3/);
});

test('generate says clearly when the model file is missing', () => {
  const result = run('generate', '--model', 'no/such/model.gguf');
  assert.equal(result.status, 2);
  assert.match(result.stderr, /no model file at no\/such\/model\.gguf/);
});

test('every bad flag value or command exits 2 with one line naming it', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvcache-cli-'));
  try {
    for (const [args, message] of [
      [['generate'], /--model is required/],
      [['generate', 'model.gguf'], /generate takes the model as --model model\.gguf/],
      [['generate', '--model', dir], /--model must be a GGUF file, and .* is a directory/],
      [['generate', '--model', 'x', '--steps=-3'], /--steps must be an integer from 1 up \(got -3\)/],
      [['generate', '--model', 'x', '--steps', '-3'], /Option '--steps' argument is ambiguous\./],
      [['generate', '--model', 'x', '--steps', '2.5'], /--steps must be an integer/],
      [['generate', '--model', 'x', '--draft=-1'], /--draft must be an integer from 0 up \(got -1\)/],
      [['generate', '--model', 'x', '--seed', 'abc'], /--seed must be an integer/],
      [['generate', '--model', 'x', '--mode', 'q3'], /--mode must be one of f32, q8, q8k, q8v, q4, q4k, q4v, q8k\+q4v, q4k\+q8v/],
      [['generate', '--model', 'x', '--temperature', 'warm'], /--temperature must be a number/],
      [['generate', '--model', 'x', '--bogus'], /Unknown option '--bogus'/],
      [['generate', '--model', 'x', '--top-k', '1.5'], /--top-k must be an integer from 0 up \(got 1\.5\)/],
      [['generate', '--model', 'x', '--top-p', '1.2'], /--top-p must be a number from 0 to 1 \(got 1\.2\)/],
      [['generate', '--model', 'x', '--min-p', 'x'], /--min-p must be a number from 0 to 1/],
      [['generate', '--model', 'x', '--repeat-penalty=-1'], /--repeat-penalty must be a number from 0 to 100/],
      [['generate', '--model', 'x', '--context', 'wrap'], /--context must be stop or slide \(got wrap\)/],
      [['generate', '--model', 'x', '--stop', ''], /--stop must be a non-empty text/],
      [['generate', '--model', 'x', '--threads', '0'], /--threads must be an integer from 1 to 64/],
      [['generate', '--model', 'x', '--system', 'hi'], /--system goes with chat, not generate/],
      [['chat', '--model', 'x', '--prompt', 'hi'], /--prompt goes with generate, not chat/],
      [['chat', '--model', 'x', '--steps', '3'], /--steps goes with generate, not chat/],
      [['chat', 'model.gguf'], /chat takes the model as --model model\.gguf/],
      [['speak'], /unknown command speak/],
      [[], /missing command/],
    ]) {
      const result = run(...args);
      assert.equal(result.status, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message);
      assert.equal(result.stderr.trim().split('\n').length, 1, `one line: ${result.stderr}`);
      assert.match(result.stderr, /^kvcache-wasm: .*\(kvcache-wasm --help lists the options\)\n$/);
    }
  } finally {
    rmSync(dir, { recursive: true });
  }
  const help = run('--help');
  assert.equal(help.status, 0);
  assert.match(help.stdout, /usage:/);
});

test('--version prints the package version', () => {
  const result = run('--version');
  assert.equal(result.status, 0, result.stderr);
  assert.equal(result.stdout.trim(), JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version);
});

modelTest('generate says why it stopped before --steps: the end of the text, or a full context', () => {
  const full = run('generate', '--model', MODEL_PATH, '--steps', '600', '--temperature', '0.7', '--seed', '5');
  assert.equal(full.status, 0, full.stderr);
  assert.match(full.stderr, /stopped (at the end of the text|: the model's context of 512 positions is full), after \d+ of 600 tokens/);
  const steps = run('generate', '--model', MODEL_PATH, '--steps', '20');
  assert.doesNotMatch(steps.stderr, /stopped/, 'no reason when --steps is reached');
});

modelTest('a prompt longer than the context exits 2 with one line', () => {
  const result = run('generate', '--model', MODEL_PATH, '--prompt', 'Once upon a time '.repeat(200));
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /^kvcache-wasm: --prompt is \d+ tokens, more than the model's context of 512/);
});

modelTest('a truncated model file is refused with the reader\'s reason', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvcache-cli-'));
  try {
    const file = join(dir, 'cut.gguf');
    writeFileSync(file, readFileSync(MODEL_PATH).subarray(0, 500000));
    const result = run('generate', '--model', file);
    assert.equal(result.status, 1);
    assert.match(result.stderr, /not usable: truncated: tensor blk\.\d\.[a-z_.]+ /);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

modelTest('generate --stop ends the text before the stop string and says so', () => {
  const plain = run('generate', '--model', MODEL_PATH, '--steps', '40');
  const stopped = run('generate', '--model', MODEL_PATH, '--steps', '40', '--stop', 'Lily');
  assert.equal(stopped.status, 0, stopped.stderr);
  assert.equal(stopped.stdout, `${plain.stdout.slice(0, plain.stdout.indexOf('Lily'))}\n`);
  assert.match(stopped.stderr, /stopped at a stop string, after \d+ of 40 tokens/);
});

modelTest('generate --context slide goes on past a full context', () => {
  const result = run('generate', '--model', MODEL_PATH, '--prompt', 'Once upon a time '.repeat(100), '--steps', '200', '--context', 'slide',
    '--temperature', '0.8', '--seed', '2', '--repeat-penalty', '1.1');
  assert.equal(result.status, 0, result.stderr);
  assert.doesNotMatch(result.stderr, /full context/);
  const stop = run('generate', '--model', MODEL_PATH, '--prompt', 'Once upon a time '.repeat(100), '--steps', '200',
    '--temperature', '0.8', '--seed', '2', '--repeat-penalty', '1.1');
  assert.match(stop.stderr, /stopped at a full context/);
});

modelTest('chat answers each line of stdin in turn, through one cache, and reports it at the end', () => {
  const result = runWith('Tom had a red ball.\nThen it rained.\n', 'chat', '--model', MODEL_PATH, '--temperature', '0', '--max-tokens', '30');
  assert.equal(result.status, 0, result.stderr);
  const replies = result.stdout.split('\n').filter((line) => line.trim() !== '');
  assert.ok(replies.length >= 2, result.stdout);
  assert.match(result.stderr, /cache: f32, 5 layers, \d+ positions/);
  const positions = Number(/(\d+) positions/.exec(result.stderr)[1]);
  assert.ok(positions > 60, `both turns are in the cache: ${positions} positions`);
});

modelTest('chat /reset starts a new conversation and /exit ends the program', () => {
  const once = runWith('Tom had a red ball.\n', 'chat', '--model', MODEL_PATH, '--temperature', '0', '--max-tokens', '20');
  const reset = runWith('Tom had a red ball.\n/reset\nTom had a red ball.\n/exit\nnever read\n', 'chat', '--model', MODEL_PATH, '--temperature', '0', '--max-tokens', '20');
  assert.equal(reset.status, 0, reset.stderr);
  assert.equal(reset.stdout, once.stdout.repeat(2), 'after /reset, the same reply to the same message');
});

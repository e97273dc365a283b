// The command line: npx kvcache-wasm generate | chat ...
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGgufHeader } from '../gguf/writer.mjs';
import { MODEL_MISSING, MODEL_PATH } from './helpers.mjs';

const cli = fileURLToPath(new URL('../../cli/kvcache-wasm.js', import.meta.url));
const run = (...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
/** The CLI with `input` on stdin (not a terminal: no prompt marks). */
const runWith = (input, ...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', input });

function modelTest(name, fn) {
  test(name, (t) => (MODEL_MISSING ? t.skip(MODEL_MISSING) : fn(t)));
}

// A terminal for the CLI: Node has no pseudo-terminal of its own, Python's pty module has.
const relay = fileURLToPath(new URL('./pty-relay.py', import.meta.url));
const NO_TERMINAL = spawnSync('python3', ['-c', 'import pty, termios'], { encoding: 'utf8' }).status === 0 ? null
  : 'no pseudo-terminal to run the CLI in: tests/js/pty-relay.py needs python3 with its pty module';

function terminalTest(name, fn) {
  test(name, (t) => (MODEL_MISSING || NO_TERMINAL ? t.skip(MODEL_MISSING ?? NO_TERMINAL) : fn(t)));
}

// What a terminal shows of its escape sequences (readline's cursor moves): nothing.
const ESCAPES = /\x1b\[[0-9;?]*[A-Za-z]/g;

/**
 * The CLI in a pseudo-terminal (pty-relay.py): type(keys) types;
 * until(pattern, what) waits until the screen's text after the last match
 * matches and returns the match; exit is the exit code; close() ends it.
 */
function inTerminal(...args) {
  const child = spawn('python3', [relay, process.execPath, cli, ...args]);
  let shown = '';
  let from = 0;
  let closed = false;
  let wake = () => {};
  // A CLI that has ended takes no more keys: until() says what it showed.
  child.stdin.on('error', () => {});
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (text) => {
    shown += text;
    wake();
  });
  const exit = new Promise((resolve) => {
    child.on('close', (code) => {
      closed = true;
      wake();
      resolve(code);
    });
  });
  const screen = () => shown.replace(ESCAPES, '');
  return {
    get screen() {
      return screen();
    },
    type: (keys) => child.stdin.write(keys),
    async until(pattern, what, seconds = 30) {
      const deadline = Date.now() + seconds * 1000;
      for (;;) {
        const match = pattern.exec(screen().slice(from));
        if (match) {
          from += match.index + match[0].length;
          return match;
        }
        if (closed || Date.now() > deadline) {
          assert.fail(`${what}: not on the terminal after ${closed ? 'the CLI ended' : `${seconds} s`}; it shows:\n${screen()}`);
        }
        await new Promise((resolve) => {
          wake = resolve;
          setTimeout(resolve, 200);
        });
      }
    },
    exit,
    close() {
      if (!closed) child.kill();
    },
  };
}

modelTest('generate prints the story and, at the end, tokens/s and the cache memory', () => {
  const result = run('generate', '--model', MODEL_PATH, '--steps', '40');
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stdout, /^Once upon a time, there was a little girl named Lily\./);
  assert.match(result.stderr, /40 tokens in [\d.]+ s: [\d.]+ tokens\/s \(greedy\)/);
  assert.match(result.stderr, /cache: f32, 5 layers, 40 positions, [\d.]+ KiB/);
});

modelTest('generate --json-schema FILE prints JSON that matches the schema; --grammar FILE text the grammar gives; a schema or grammar the engine refuses exits 2 saying why', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvcache-cli-'));
  try {
    const schema = { type: 'object', properties: { hero: { type: 'string', maxLength: 12 }, friends: { type: 'array', items: { enum: ['cat', 'dog'] }, maxItems: 2 } }, required: ['hero', 'friends'] };
    writeFileSync(join(dir, 'schema.json'), JSON.stringify(schema));
    const json = run('generate', '--model', MODEL_PATH, '--json-schema', join(dir, 'schema.json'), '--steps', '120', '--temperature', '0.8');
    assert.equal(json.status, 0, json.stderr);
    const value = JSON.parse(json.stdout);
    assert.ok(typeof value.hero === 'string' && value.hero.length <= 12 && value.friends.every((f) => ['cat', 'dog'].includes(f)), json.stdout);
    writeFileSync(join(dir, 'story.gbnf'), 'root ::= "Once upon a time, " [a-z ]{1,20} "."\n');
    const story = run('generate', '--model', MODEL_PATH, '--grammar', join(dir, 'story.gbnf'), '--steps', '60', '--temperature', '0.8');
    assert.equal(story.status, 0, story.stderr);
    assert.match(story.stdout.trim(), /^Once upon a time, [a-z ]{1,20}\.$/);
    writeFileSync(join(dir, 'date.json'), JSON.stringify({ type: 'string', format: 'date-time' }));
    const refused = run('generate', '--model', MODEL_PATH, '--json-schema', join(dir, 'date.json'));
    assert.equal(refused.status, 2);
    assert.match(refused.stderr, /--json-schema is refused: .*format "date-time" is not a format the engine enforces/);
    writeFileSync(join(dir, 'bad.gbnf'), 'root ::= nope\n');
    const bad = run('generate', '--model', MODEL_PATH, '--grammar', join(dir, 'bad.gbnf'));
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--grammar is refused: the constraint does not compile: .*Rule "nope" is not defined/);
    const both = run('generate', '--model', MODEL_PATH, '--grammar', join(dir, 'story.gbnf'), '--json-schema', join(dir, 'schema.json'));
    assert.equal(both.status, 2);
    assert.match(both.stderr, /--json-schema and --grammar both constrain the reply/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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

test('generate without --model runs the model the repository ships (models/stories260k.gguf): its published opening', () => {
  const result = run('generate', '--steps', '24');
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stdout, /^\s*Once upon a time, there was a little girl named Lily/);
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

modelTest('a prompt longer than the context exits 2 with one line after the loading lines', () => {
  const result = run('generate', '--model', MODEL_PATH, '--prompt', 'Once upon a time '.repeat(200));
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /^loading .*\nloaded .*\nkvcache-wasm: --prompt is \d+ tokens, more than the model's context of 512 [^\n]*\n$/);
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

modelTest('loading the model says so on stderr, a line when it starts and one when it is done, where stderr is no terminal', () => {
  const result = run('generate', '--model', MODEL_PATH, '--steps', '5');
  assert.equal(result.status, 0, result.stderr);
  const name = basename(MODEL_PATH).replaceAll('.', '\\.');
  const size = `${(statSync(MODEL_PATH).size / 2 ** 20).toFixed(1)} MiB`;
  assert.match(result.stderr, new RegExp(`^loading ${name} \\(${size}\\)\\nloaded ${name}: ${size} in \\d+\\.\\d s\\n`));
  assert.doesNotMatch(result.stderr, /\r/, 'no redraw');
  assert.doesNotMatch(result.stdout, /load/);
});

test('a model too big for memory, or a file that is no model, is refused in one sentence naming the file: exit 1, no stack trace', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvcache-cli-'));
  try {
    // A header whose feed-forward matrices are 6 GiB of F32, and no data:
    // the loader's check that the weights fit the heap refuses it first.
    const big = join(dir, 'big.gguf');
    writeFileSync(big, encodeGgufHeader(randomLlama({ ...GEOMETRIES.tiny, hiddenDim: 1 << 20 }, { mix: 'F32' })));
    const notes = join(dir, 'notes.gguf');
    writeFileSync(notes, 'these are notes, not a model\n'.repeat(50));
    for (const [file, reason] of [
      [big, /^does not fit in memory: \d+ bytes of weights and a \d+-position f32 cache \(\d+ bytes\) do not fit the wasm heap .*: \d+ bytes are missing$/],
      [notes, /^is not usable: not a GGUF file/],
    ]) {
      const result = run('generate', '--model', file);
      assert.equal(result.status, 1, result.stderr);
      assert.doesNotMatch(result.stderr, /^ {4}at /m, 'no stack trace');
      const last = result.stderr.trimEnd().split('\n').at(-1);
      assert.ok(last.startsWith(`kvcache-wasm generate: ${file} `), last);
      assert.match(last.slice(`kvcache-wasm generate: ${file} `.length), reason);
    }
  } finally {
    rmSync(dir, { recursive: true });
  }
});

modelTest("chat's replies stop by default at a quarter of the model's context (stories260K: 128 of 512 tokens), before it fills", () => {
  // Sampled with seed 25, the reply to this line runs on past the whole context.
  const result = runWith('Tom had a red ball.\n', 'chat', '--model', MODEL_PATH, '--temperature', '1', '--seed', '25');
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stderr, /\[stopped at 128 tokens \(--max-tokens\)\]/);
  assert.doesNotMatch(result.stderr, /full context/);
});

modelTest('generate prints the prompt as given, then the continuation as it follows it: "The dog", then a space', () => {
  for (const prompt of ['The dog', ' The dog']) {
    const result = run('generate', '--model', MODEL_PATH, '--prompt', prompt, '--steps', '8');
    assert.equal(result.status, 0, result.stderr);
    assert.ok(result.stdout.startsWith(`${prompt} `), JSON.stringify(result.stdout));
  }
});

terminalTest('chat in a terminal echoes what is typed, and Ctrl-C stops a reply: the chat goes on', async (t) => {
  // Sampled with seed 25, the reply to this line runs some 2800 tokens
  // before its end (seconds): the Ctrl-C comes while it runs.
  const chat = inTerminal('chat', '--model', MODEL_PATH, '--max-tokens', '100000', '--context', 'slide', '--temperature', '1', '--seed', '25');
  try {
    await chat.until(/> $/, 'the prompt');
    chat.type('Tom had a red ball.');
    await chat.until(/^Tom had a red ball\.$/, 'the typed text, echoed', 10);
    chat.type('\r');
    await chat.until(/\n[^\n]*[a-z]{2}/i, 'the reply');
    chat.type('\x03');
    const [, tokens] = await chat.until(/\n\[stopped at Ctrl-C, after (\d+) tokens\]\r?\n> $/, 'the reply stopped, and a new prompt');
    assert.ok(Number(tokens) < 2000, `stopped after ${tokens} tokens: well before its end`);
    t.diagnostic(`Ctrl-C stopped the reply after ${tokens} tokens`);
    chat.type('/exit\r');
    assert.equal(await chat.exit, 0, chat.screen);
    assert.match(chat.screen, /\rloaded stories260k\.gguf: 1\.1 MiB in \d+\.\d s\r?\n/, 'the loading line, redrawn');
    assert.match(chat.screen, /cache: f32, 5 layers, \d+ positions/);
  } finally {
    chat.close();
  }
});

terminalTest('chat in a terminal: Ctrl-C drops a line being typed, and at an empty prompt ends the chat, as Ctrl-D does (exit code 0)', async () => {
  const chat = inTerminal('chat', '--model', MODEL_PATH);
  try {
    await chat.until(/> $/, 'the prompt');
    chat.type('Tom had');
    await chat.until(/^Tom had$/, 'the typed text, echoed', 10);
    chat.type('\x03');
    await chat.until(/^\^C\r?\n> $/, 'the text dropped, and a new prompt');
    chat.type('\x03');
    assert.equal(await chat.exit, 0, chat.screen);
    assert.match(chat.screen, /> \^C\r?\ncache: f32, 5 layers, \d+ positions/);
  } finally {
    chat.close();
  }
  const ended = inTerminal('chat', '--model', MODEL_PATH);
  try {
    await ended.until(/> $/, 'the prompt');
    ended.type('\x04');
    assert.equal(await ended.exit, 0, ended.screen);
    assert.match(ended.screen, /> \r?\ncache: f32, 5 layers, \d+ positions/);
  } finally {
    ended.close();
  }
});

// Fuzzing the C core with libFuzzer (tests/fuzz): the harnesses built with
// clang under ASan + UBSan into build-fuzz, then run side by side for a
// bounded time each. Each starts from a copy of the committed
// corpus in the OS temp dir (the repository's corpus stays small) and writes
// crash inputs to a temp dir whose path is printed. Prints a table
// (harness, seconds, executions, exec/s, corpus size, result) and fails on
// any crash, leak or timeout.
//
//   node scripts/fuzz.mjs [--seconds 60]   fuzz (npm run fuzz; --seconds 3600 for a long run)
//   node scripts/fuzz.mjs --seeds          rewrite the generated seeds of tests/fuzz/corpus
//
// `await fuzz({ seconds })` is the step npm test runs: true when every harness ran clean.
import { spawn } from 'node:child_process';
import { cpSync, createWriteStream, mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ensureClang, sanitizerEnv } from './sanitize.mjs';
import { buildPreset, ensureToolchain, log, presetBuildDir, root, runOrThrow } from './toolchain.mjs';

export const fuzzBuildDir = presetBuildDir('fuzz');
const corpusDir = join(root, 'tests', 'fuzz', 'corpus');
const harnessDir = join(fuzzBuildDir, 'tests', 'fuzz');
const harnesses = [
  { name: 'fuzz_ops', corpus: 'ops' },
  { name: 'fuzz_snapshot', corpus: 'snapshot' },
  { name: 'fuzz_gguf', corpus: 'gguf' },
];

// One input running this long is a hang (libFuzzer's -timeout, seconds).
const inputTimeout = 30;

function buildFuzzers() {
  ensureToolchain({ wasm: false });
  ensureClang('fuzzer,address,undefined');
  log('fuzz build (clang, libFuzzer + ASan + UBSan)');
  buildPreset('fuzz');
}

/** What libFuzzer's log says about the run. */
function summarize(logText, exitCode) {
  const stat = (name) => Number((logText.match(new RegExp(`stat::${name}:\\s+(\\d+)`)) ?? [])[1] ?? NaN);
  let result = 'ok';
  if (exitCode !== 0) {
    // libFuzzer's own notes name AddressSanitizer too: match the reports' first lines.
    if (/invariant violated/.test(logText)) result = 'INVARIANT';
    else if (/ERROR: libFuzzer: timeout/.test(logText)) result = 'TIMEOUT';
    else if (/ERROR: libFuzzer: out-of-memory/.test(logText)) result = 'OOM';
    else if (/ERROR: LeakSanitizer/.test(logText)) result = 'LEAK';
    else if (/runtime error:/.test(logText)) result = 'UB';
    else if (/ERROR: AddressSanitizer/.test(logText)) result = 'ASAN';
    else result = `CRASH (exit ${exitCode})`;
  }
  return { executions: stat('number_of_executed_units'), execPerSec: stat('average_exec_per_sec'), result };
}

/** Runs one harness for `seconds`; resolves to its row of the table. */
function runHarness({ name, corpus }, seconds, workDir) {
  const workCorpus = join(workDir, `corpus-${corpus}`);
  const artifacts = join(workDir, `crashes-${name}`);
  mkdirSync(artifacts, { recursive: true });
  cpSync(join(corpusDir, corpus), workCorpus, { recursive: true });
  const logPath = join(workDir, `${name}.log`);
  const logFile = createWriteStream(logPath);
  const args = [`-max_total_time=${seconds}`, '-print_final_stats=1', `-timeout=${inputTimeout}`,
    '-rss_limit_mb=4096', `-artifact_prefix=${artifacts}/`, workCorpus];
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(join(harnessDir, name), args, { cwd: workDir, env: { ...process.env, ...sanitizerEnv } });
    child.stdout.pipe(logFile, { end: false });
    child.stderr.pipe(logFile, { end: false });
    // libFuzzer stops itself; this only guards against a harness that cannot.
    const guard = setTimeout(() => child.kill('SIGKILL'), (seconds + 5 * inputTimeout + 60) * 1000);
    child.on('close', (code, signal) => {
      clearTimeout(guard);
      logFile.end(() => {
        const text = readFileSync(logPath, 'utf8');
        const exitCode = code ?? (signal ? 128 : 1);
        resolve({
          name, seconds: (Date.now() - started) / 1000, corpusSize: readdirSync(workCorpus).length,
          logPath, artifacts, text, ...summarize(text, exitCode),
        });
      });
    });
  });
}

function printTable(rows) {
  const header = ['harness', 'seconds', 'executions', 'exec/s', 'corpus', 'result'];
  const cells = rows.map((r) => [r.name, r.seconds.toFixed(0), String(r.executions), String(r.execPerSec),
    String(r.corpusSize), r.result]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const line = (c) => c.map((x, i) => (i === 0 || i === c.length - 1 ? x.padEnd(widths[i]) : x.padStart(widths[i])))
    .join('  ').trimEnd();
  console.log(line(header));
  for (const c of cells) console.log(line(c));
}

/** Builds the harnesses and fuzzes them in parallel; true when all ran clean. */
export async function fuzz({ seconds = 60 } = {}) {
  try {
    buildFuzzers();
  } catch (error) {
    console.error(`fuzz build: ${error.message}`);
    return false;
  }
  const workDir = mkdtempSync(join(tmpdir(), 'kvc-fuzz-'));
  log(`fuzzing ${harnesses.map((h) => h.name).join(', ')} for ${seconds} s each, in parallel`);
  console.log(`work dir (corpus copies, logs, crash inputs): ${workDir}`);
  const rows = await Promise.all(harnesses.map((h) => runHarness(h, seconds, workDir)));
  printTable(rows);
  for (const row of rows.filter((r) => r.result !== 'ok')) {
    console.log(`\n${row.name}: ${row.result}; log ${row.logPath}; crash inputs in ${row.artifacts}`);
    console.log(row.text.split('\n').filter((l) => !/^#\d+/.test(l)).slice(-40).join('\n'));
    console.log(`reproduce: ${join(harnessDir, row.name)} <crash input>  (KVC_FUZZ_TRACE=1 prints each call)`);
  }
  return rows.every((r) => r.result === 'ok');
}

/** Rewrites the generated seeds of tests/fuzz/corpus (make_seeds.c). */
export function writeSeeds() {
  buildFuzzers();
  log('writing the generated seeds of tests/fuzz/corpus');
  runOrThrow(join(harnessDir, 'kvc_fuzz_seeds'), [corpusDir]);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { seconds: { type: 'string', default: '60' }, seeds: { type: 'boolean', default: false } },
  });
  if (values.seeds) {
    writeSeeds();
  } else {
    const seconds = Number(values.seconds);
    if (!Number.isInteger(seconds) || seconds < 1) {
      console.error(`--seconds: a whole number of seconds >= 1, not ${values.seconds}`);
      process.exit(2);
    }
    process.exit((await fuzz({ seconds })) ? 0 : 1);
  }
}

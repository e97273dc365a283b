// The benchmark harness runs (npm run bench -- --quick) and fills every
// column with numbers. Timings themselves are not asserted: they belong to
// npm run bench, not to tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { placeholder, splice, withEverySection } from '../../bench/docs.mjs';

const index = fileURLToPath(new URL('../../bench/index.mjs', import.meta.url));
const root = fileURLToPath(new URL('../..', import.meta.url));
const SUITES = ['attention', 'append', 'rollback', 'snapshot', 'generation', 'sharing', 'window', 'llm', 'chat', 'store', 'structured', 'native', 'vision', 'embeddings'];
const section = (page, name) => {
  const start = page.indexOf(`<!-- bench:${name}:start -->`);
  const end = page.indexOf(`<!-- bench:${name}:end -->`);
  assert.ok(start >= 0 && end > start, `a section of ${name}`);
  return { start, end: end + `<!-- bench:${name}:end -->`.length, text: page.slice(start, end) };
};

test('npm run bench -- --quick runs every benchmark and produces numbers in every column', { timeout: 660000 }, () => {
  const out = mkdtempSync(join(tmpdir(), 'kvcache-bench-'));
  try {
    const run = spawnSync(process.execPath, [index, '--quick', '--out', out], { encoding: 'utf8', timeout: 600000 });
    assert.equal(run.status, 0, run.stderr);
    const { machine, tables } = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8'));
    assert.ok(machine.cpu && machine.node);
    assert.deepEqual(tables.map((t) => t.name), ['attention', 'attention-targets', 'attention-ratios', 'attention-q4', 'attention-relaxed', 'attention-pages', 'attention-profile', 'append', 'rollback', 'verify', 'snapshot', 'generation', 'sharing-forks', 'sharing-prefix', 'sharing-prompt-api', 'window', 'llm', 'llm-load', 'chat', 'store-prefix', 'store-load', 'store-conversation', 'structured', 'native', 'native-profile', 'vision', 'vision-agreement', 'embeddings', 'embeddings-memory']);
    for (const table of tables) {
      if (table.rows.length === 0) {
        assert.match(table.notes.join(' '), /skipped/, `${table.name} has rows or says why not`);
        continue;
      }
      for (const row of table.rows) {
        assert.equal(row.length, table.columns.length);
        row.slice(1).forEach((value, i) => {
          if (typeof value === 'string') return; // a label, or why a cell does not apply
          assert.ok(Number.isFinite(value) && value >= 0, `${table.name}: ${table.columns[i + 1]} is ${value}`);
        });
        assert.ok(row.some((value) => typeof value === 'number' && value > 0), `${table.name}: a row of numbers`);
      }
    }
    assert.match(run.stdout, /Decode attention, one layer/);
  } finally {
    rmSync(out, { recursive: true });
  }
});

test('--write-docs rewrites its own suite\'s section of the page, and only that', { timeout: 660000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvcache-bench-docs-'));
  try {
    const file = join(dir, 'performance.md');
    const header = '# Performance\n\nA hand-written header, kept as it is.\n';
    const sections = SUITES.map((name) => (name === 'rollback' ? `<!-- bench:rollback:start -->\n## rollback\n\nstale rollback figures\n<!-- bench:rollback:end -->`
      : name === 'attention' ? `<!-- bench:attention:start -->\n## attention\n\nattention figures of another run\n<!-- bench:attention:end -->`
        : placeholder(name)));
    const before = `${header}\n${sections.join('\n\n')}\n\nA closing paragraph.\n`;
    writeFileSync(file, before);
    const run = spawnSync(process.execPath, [index, 'rollback', '--quick', '--write-docs', '--docs-file', file], { encoding: 'utf8', timeout: 600000 });
    assert.equal(run.status, 0, run.stderr);
    const after = readFileSync(file, 'utf8');
    // Everything before and after the rollback section is byte for byte what it was.
    const old = section(before, 'rollback');
    const now = section(after, 'rollback');
    assert.equal(after.slice(0, now.start), before.slice(0, old.start));
    assert.equal(after.slice(now.end), before.slice(old.end));
    for (const name of SUITES) assert.equal(after.split(`<!-- bench:${name}:start -->`).length, 2, `one section of ${name}`);
    // The section: this run's tables, the machine line, the command that reproduces them.
    assert.doesNotMatch(now.text, /stale rollback figures/);
    assert.match(now.text, /^## rollback$/m);
    assert.match(now.text, /^### Rollback cost vs context/m);
    assert.match(now.text, /^Machine: .+, \d+ cores, \d+ GiB, \w+ \w+; Node v\d+\.\d+\.\d+ \(V8 .+\); kvcache-wasm .+; \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z; --quick\.$/m);
    assert.ok(now.text.includes('`npm run bench -- rollback --quick --write-docs`'), 'the command that reproduces the tables');
    assert.ok(!after.includes(root), 'no path of this machine in the page');

    // A page whose markers are broken is refused before any suite runs, and left as it was.
    const broken = `${before}\n<!-- bench:rollback:end -->\n`;
    writeFileSync(file, broken);
    const refused = spawnSync(process.execPath, [index, 'rollback', '--quick', '--write-docs', '--docs-file', file], { encoding: 'utf8', timeout: 600000 });
    assert.equal(refused.status, 2);
    assert.match(refused.stderr, /markers of rollback/);
    assert.equal(readFileSync(file, 'utf8'), broken);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('the page\'s sections: one per suite, in order, a missing one added as not measured yet', () => {
  const page = readFileSync(join(root, 'docs', 'performance.md'), 'utf8');
  const starts = SUITES.map((name) => section(page, name).start);
  assert.deepEqual(starts, [...starts].sort((a, b) => a - b), 'in the bench\'s order');
  assert.ok(!page.includes(root), 'no path of this machine in the page');

  const without = withEverySection('# Performance\n', SUITES);
  assert.deepEqual(SUITES.map((name) => section(without, name).text.trim().split('\n').at(-1)),
    SUITES.map((name) => `Not measured yet: run \`npm run bench -- ${name} --write-docs\`.`));
  // A section added where it belongs: before the first suite after it that has one.
  const some = `# P\n\n${placeholder('append')}\n\n${placeholder('llm')}\n`;
  const added = splice(some, 'sharing', placeholder('sharing'), SUITES);
  assert.ok(section(added, 'append').start < section(added, 'sharing').start && section(added, 'sharing').start < section(added, 'llm').start);
  assert.throws(() => splice(`${some}<!-- bench:llm:start -->`, 'llm', 'x', SUITES), /markers of llm/);
});

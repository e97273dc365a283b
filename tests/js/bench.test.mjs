// The benchmark harness runs (npm run bench -- --quick) and fills every
// column with numbers. Timings themselves are not asserted: they belong to
// npm run bench, not to tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const index = fileURLToPath(new URL('../../bench/index.mjs', import.meta.url));

test('npm run bench -- --quick runs every benchmark and produces numbers in every column', { timeout: 660000 }, () => {
  const out = mkdtempSync(join(tmpdir(), 'kvcache-bench-'));
  try {
    const run = spawnSync(process.execPath, [index, '--quick', '--out', out], { encoding: 'utf8', timeout: 600000 });
    assert.equal(run.status, 0, run.stderr);
    const { machine, tables } = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8'));
    assert.ok(machine.cpu && machine.node);
    assert.deepEqual(tables.map((t) => t.name), ['attention', 'attention-targets', 'attention-ratios', 'attention-q4', 'attention-relaxed', 'attention-pages', 'attention-profile', 'append', 'rollback', 'snapshot', 'generation', 'sharing-forks', 'sharing-prefix', 'llm', 'llm-load', 'chat']);
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

// npm run bench: builds the wasm module if needed, runs every benchmark and
// prints one table each, the comparisons side by side.
//   npm run bench -- [name ...]     only the named benchmarks
import init from '../js/index.js';
import { buildWasm, ensureToolchain, wasmUpToDate } from '../scripts/toolchain.mjs';

const benchmarks = {
  rollback: () => import('./rollback.mjs'),
  generation: () => import('./generation.mjs'),
};

const wanted = process.argv.slice(2);
for (const name of wanted) {
  if (!benchmarks[name]) {
    console.error(`unknown benchmark ${name}; known: ${Object.keys(benchmarks).join(', ')}`);
    process.exit(2);
  }
}
if (!wasmUpToDate()) {
  ensureToolchain();
  buildWasm();
}
await init();

function cell(value) {
  if (value === null || value === undefined) return '-';
  if (typeof value !== 'number') return String(value);
  if (Number.isInteger(value)) return String(value);
  return value < 10 ? value.toFixed(2) : value.toFixed(1);
}

function printTable({ title, columns, rows, note }) {
  if (note) {
    console.log(`\n${title}\n\n${note}`);
    return;
  }
  const cells = rows.map((row) => row.map(cell));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)));
  const line = (values) => `| ${values.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join(' | ')} |`;
  console.log(`\n${title}\n`);
  console.log(line(columns));
  console.log(`|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`);
  for (const row of cells) console.log(line(row));
}

for (const [name, load] of Object.entries(benchmarks)) {
  if (wanted.length && !wanted.includes(name)) continue;
  printTable((await load()).run());
}

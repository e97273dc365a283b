// The benchmarks' tables as markdown: the renderer bench/results/latest.md
// is written with, and --write-docs, which splices a suite's tables into
// docs/performance.md between its markers
//   <!-- bench:NAME:start --> ... <!-- bench:NAME:end -->
// and leaves the rest of the page alone (the hand-written header, the other
// suites' sections). Each section says the machine, the date and the command
// that reproduces its tables; a suite not run yet has a section that says so.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
export const DOCS_FILE = resolve(root, 'docs', 'performance.md');

function cell(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return '-';
  if (typeof value !== 'number') return String(value);
  if (Number.isInteger(value)) return String(value);
  const magnitude = Math.abs(value);
  if (magnitude >= 1e5) return value.toExponential(2);
  return magnitude >= 100 ? value.toFixed(0) : magnitude >= 10 ? value.toFixed(1) : magnitude >= 0.1 ? value.toFixed(2) : value.toPrecision(2);
}

/** Text as markdown shows it: a <s> (a token's name) would start an HTML element. */
const literal = (text) => text.replace(/<(?=[A-Za-z/!])/g, '&lt;');

/** One table ({ title, columns, rows, notes }) as markdown: a heading, the table, its notes. */
export function markdown({ title: rawTitle, columns: rawColumns, rows, notes: rawNotes = [] }) {
  const [title, columns, notes] = [literal(rawTitle), rawColumns.map(literal), rawNotes.map(literal)];
  const cells = rows.map((row) => row.map((value) => literal(cell(value))));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)));
  const line = (values) => `| ${values.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join(' | ')} |`;
  return [
    `### ${title}`, '',
    line(columns),
    `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...cells.map(line), '',
    ...notes.map((note) => `${note}`), '',
  ].join('\n');
}

/** The machine a run was on (what latest.json records as `machine`), as one line. */
export function machineLine(machine, quick = false) {
  return `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.platform}; Node ${machine.node} (V8 ${machine.v8}); ` +
    `kvcache-wasm ${machine.kvcache}; ${machine.date}${quick ? '; --quick' : ''}.`;
}

/** The command that reproduces suite `name`'s tables (and rewrites its section). */
export function command(name, { quick = false, files, threads } = {}) {
  const filters = ['llm', 'native'].includes(name) ? [files && `--files ${files}`, threads && `--threads ${threads}`].filter(Boolean) : [];
  return ['npm run bench --', name, ...(quick ? ['--quick'] : []), ...filters, '--write-docs'].join(' ');
}

const START = (name) => `<!-- bench:${name}:start -->`;
const END = (name) => `<!-- bench:${name}:end -->`;

/** Paths of this machine in a table's notes (a skipped suite's reason) written relative to the repository. */
function portable(text) {
  const swaps = [[`${root}/`, ''], [root, '.'], [`${dirname(root)}/`, '../'], [`${resolve(tmpdir())}/`, '$TMPDIR/'], [`${homedir()}/`, '~/']];
  return swaps.reduce((out, [from, to]) => (from.length > 2 ? out.split(from).join(to) : out), text);
}

/** The section of a suite not run yet. */
export function placeholder(name) {
  return `${START(name)}\n## ${name}\n\nNot measured yet: run \`${command(name)}\`.\n${END(name)}`;
}

/**
 * Suite `name`'s section: its tables as latest.md has them, under the
 * machine and date they ran on and the command that reproduces them.
 * `options` are the run's (quick, files, threads).
 */
export function section(name, tables, machine, options = {}) {
  const stamp = [
    machineLine(machine, options.quick), '',
    `Reproduce every table below with \`${command(name, options)}\`; its figures and ratios are from one run.` +
      (options.quick ? ' **--quick**: a small subset that checks the harness in seconds, not figures to quote.' : ''),
  ];
  return portable([START(name), `## ${name}`, '', ...stamp, '', ...tables.map(markdown)].join('\n').trimEnd()) + `\n${END(name)}`;
}

/** Where suite `name`'s section starts and ends in `page` (end past its marker), or null; throws on a broken pair. */
function locate(page, name) {
  const starts = page.split(START(name)).length - 1;
  const ends = page.split(END(name)).length - 1;
  if (starts === 0 && ends === 0) return null;
  const start = page.indexOf(START(name));
  const end = page.indexOf(END(name));
  if (starts !== 1 || ends !== 1 || end < start) throw new Error(`the page's markers of ${name} are not one ${START(name)} followed by one ${END(name)}`);
  return { start, end: end + END(name).length };
}

/**
 * `page` with suite `name`'s section replaced by `text`; a suite without one
 * gets it before the first of the suites after it in `order` that has one
 * (else at the end), and every suite of `order` without a section gets a
 * placeholder. Nothing outside the replaced section changes.
 */
export function splice(page, name, text, order = [name]) {
  const at = locate(page, name);
  if (at) return page.slice(0, at.start) + text + page.slice(at.end);
  const later = order.slice(order.indexOf(name) + 1).map((next) => locate(page, next)).find(Boolean);
  if (later) return `${page.slice(0, later.start)}${text}\n\n${page.slice(later.start)}`;
  return `${page.trimEnd()}\n\n${text}\n`;
}

/** `page` with a placeholder for every suite of `order` that has no section. */
export function withEverySection(page, order) {
  return order.reduce((out, name) => (locate(out, name) ? out : splice(out, name, placeholder(name), order)), page);
}

/** Throws, saying why, if --write-docs could not splice sections into `file` (checked before the suites run). */
export function checkDocs(file = DOCS_FILE, order = []) {
  if (existsSync(file)) withEverySection(readFileSync(file, 'utf8'), order);
}

/**
 * Writes suite `name`'s tables into `file` (docs/performance.md unless
 * given): its section replaced, a placeholder added for any suite of `order`
 * that has none. A missing file starts as a bare heading.
 */
export function writeDocs(name, tables, machine, options = {}, { file = DOCS_FILE, order = [name] } = {}) {
  const before = existsSync(file) ? readFileSync(file, 'utf8') : '# Performance\n';
  const after = withEverySection(splice(before, name, section(name, tables, machine, options), order), order);
  mkdirSync(dirname(file), { recursive: true });
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, after);
  renameSync(partial, file);
  return after;
}

// npm run bench: builds what is missing, runs the benchmarks, prints one
// table each (the comparisons side by side, from one process), and writes
// them as markdown and JSON, with the machine they ran on.
//   npm run bench -- [name ...] [--quick] [--files NAME,...] [--threads N,...] [--out DIR]
//                    [--write-docs [--docs-file PATH]]
//     --quick  a small subset in seconds (npm test runs it so that the
//              harness cannot rot)
//     --files  llm and native only: these of their files (geometry-mix,
//              as llama-3.2-1b-F16), not all of them
//     --threads llm and native only: these of their thread counts (1, 2)
//     --out    where results go (default bench/results; with --quick,
//              nothing is written unless --out is given)
//     --write-docs  also rewrite each suite's section of docs/performance.md
//              as the suite finishes (bench/docs.mjs), the other sections kept
//     --docs-file   that page somewhere else (the tests write a copy)
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, arch, platform } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import init, { kernelIsa, version } from '../js/index.js';
import { DOCS_FILE, checkDocs, machineLine, markdown, writeDocs } from './docs.mjs';
import {
  buildNative, buildWasm, builtUpToDate, ensureToolchain, relaxedBuildDir, relaxedWasmPath, root, run as runCommand,
  wasmBuildDir, wasmPath, nativeBuildDir,
} from '../scripts/toolchain.mjs';

const benchmarks = {
  attention: () => import('./attention.mjs'),
  append: () => import('./append.mjs'),
  rollback: () => import('./rollback.mjs'),
  snapshot: () => import('./snapshot.mjs'),
  generation: () => import('./generation.mjs'),
  sharing: () => import('./sharing.mjs'),
  window: () => import('./window.mjs'),
  llm: () => import('./llm.mjs'),
  chat: () => import('./chat.mjs'),
  store: () => import('./store.mjs'),
  structured: () => import('./structured.mjs'),
  native: () => import('./native.mjs'),
  vision: () => import('./vision.mjs'),
  embeddings: () => import('./embeddings.mjs'),
};

const { values: options, positionals: wanted } = parseArgs({
  allowPositionals: true,
  options: {
    quick: { type: 'boolean', default: false }, files: { type: 'string' }, threads: { type: 'string' }, out: { type: 'string' },
    'write-docs': { type: 'boolean', default: false }, 'docs-file': { type: 'string' },
  },
});
if (options['docs-file'] && !options['write-docs']) {
  console.error('--docs-file names the page --write-docs writes: give both');
  process.exit(2);
}
const docsFile = options['docs-file'] ?? DOCS_FILE;
if (options['write-docs']) {
  try {
    checkDocs(docsFile, Object.keys(benchmarks));
  } catch (error) {
    console.error(`--write-docs: ${docsFile}: ${error.message}`);
    process.exit(2);
  }
}
for (const name of wanted) {
  if (!benchmarks[name]) {
    console.error(`unknown benchmark ${name}; known: ${Object.keys(benchmarks).join(', ')}`);
    process.exit(2);
  }
}

// What the benchmarks need: the modules and the bench programs, each newer than
// the C sources (a modules-only build leaves the programs behind), then the npm
// comparisons.  The relaxed build's profile is there only where clang 19 is.
const relaxedProfile = join(relaxedBuildDir, 'bench', 'kernel-profile.js');
const needed = [wasmPath, relaxedWasmPath, join(wasmBuildDir, 'bench', 'kvcache-scalar.wasm'),
  join(wasmBuildDir, 'bench', 'kvcache-contiguous.wasm'), join(wasmBuildDir, 'bench', 'naive-attend.wasm'),
  join(wasmBuildDir, 'bench', 'kernel-profile.js'), join(wasmBuildDir, 'bench', 'weights-bench.js'), join(nativeBuildDir, 'kvc_bench_native'),
  ...(existsSync(relaxedProfile) ? [relaxedProfile] : [])];
if (!builtUpToDate(needed)) {
  ensureToolchain();
  buildNative();
  buildWasm();
}
if (!existsSync(join(root, 'node_modules', 'onnxruntime-web')) && runCommand('npm', ['install', '--no-audit', '--no-fund']) !== 0) {
  process.exit(1);
}
await init();

const machine = {
  date: new Date().toISOString(),
  cpu: cpus()[0]?.model ?? 'unknown',
  cores: cpus().length,
  memoryGiB: Math.round(totalmem() / 2 ** 30),
  platform: `${platform()} ${arch()}`,
  node: process.version,
  v8: process.versions.v8,
  kvcache: `${version()} (${kernelIsa()})`,
};
const header = machineLine(machine, options.quick);
console.log(header);

const tables = [];
for (const [name, load] of Object.entries(benchmarks)) {
  if (wanted.length && !wanted.includes(name)) continue;
  const started = new Date().toISOString();
  const own = await (await load()).run({ quick: options.quick, files: options.files?.split(','), threads: options.threads?.split(',').map(Number) });
  for (const table of own) {
    tables.push(table);
    console.log(`\n${markdown(table)}`);
  }
  if (options['write-docs']) {
    // Each suite's section as it finishes, dated when it started: a later suite that fails leaves it written.
    writeDocs(name, own, { ...machine, date: started }, { quick: options.quick, files: options.files, threads: options.threads },
      { file: docsFile, order: Object.keys(benchmarks) });
    console.log(`\n${name}: its section of ${docsFile} rewritten`);
  }
}

const out = options.out ?? (options.quick ? null : join(root, 'bench', 'results'));
if (out) {
  mkdirSync(out, { recursive: true });
  const suffix = wanted.length ? `-${wanted.join('-')}` : '';
  writeFileSync(join(out, `latest${suffix}.md`), `# kvcache-wasm benchmarks\n\n${header}\n\n${tables.map(markdown).join('\n')}`);
  writeFileSync(join(out, `latest${suffix}.json`), `${JSON.stringify({ machine, quick: options.quick, tables }, null, 1)}\n`);
  console.log(`\nwritten: ${join(out, `latest${suffix}.md`)} and .json`);
}

// A tiny app per bundler, built from the packed tarball by the real tool, as
// a web developer builds one: `import * as kv from 'kvcache-wasm'` and the
// smoke test (smoke.mjs) over it; and, given a model, kvcache-wasm/worker
// and kvcache-wasm/chat running it in a worker (worker-smoke.mjs). Each
// bundler must find the two .wasm files and the two worker scripts by itself
// from the package's literal `new URL('…', import.meta.url)` references --
// except esbuild, which follows none of them (evanw/esbuild#795): its app
// builds the model worker as a second entry, copies the rest beside the
// bundle and says where with locateFile, as the README tells.
//
//   const apps = await buildApps(tarball, work, model);   // { name: { dir, version, warnings } | { skip } }
//   const server = await serveStatic(apps.Vite.dir, { isolated: true });
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, posix } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { serveFiles } from './static-server.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'node_modules', '.bin');
const BUILD_TIMEOUT_MS = 240000;

// The smoke modules, copied into each app with their imports made local.
const SMOKE = [['tests/runtimes/smoke.mjs', 'smoke.mjs'], ['tests/runtimes/parallel.mjs', 'parallel.mjs'],
  ['support/synthetic.mjs', 'synthetic.mjs'], ['tests/runtimes/worker-smoke.mjs', 'worker-smoke.mjs']];
// The model the worker runs, beside the app's page.
const MODEL_FILE = 'model.gguf';

/**
 * The app's entry: runs the smoke test, then the worker's, and leaves their
 * outcomes in globalThis.smokeDone and globalThis.workerDone (null without
 * a model). `ownWorker`: the app starts the model worker from its own
 * bundle of it (a bundler that does not bundle the package's); `locateFile`:
 * it says where the package's files are (a bundler that emits none).
 */
function main({ ownWorker = false, locateFile = false }, withModel) {
  const init = locateFile ? ', init: { locateFile }' : '';
  const worker = ownWorker ? `, { worker: () => new Worker(new URL('./llama-worker.js', import.meta.url), { type: 'module' })${init} }` : '';
  return `import * as kv from 'kvcache-wasm';
import { LlamaWorker } from 'kvcache-wasm/worker';
import { Chat } from 'kvcache-wasm/chat';
import { smoke } from './smoke.mjs';
import { workerSmoke } from './worker-smoke.mjs';
${locateFile ? 'const locateFile = (name) => new URL(`./${name}`, import.meta.url);' : ''}
const outcome = (run) => run.then((result) => ({ result }), (error) => ({ error: \`\${error}\${error?.stack ? \`\\n\${error.stack}\` : ''}\` }));
globalThis.smokeDone = outcome(smoke(kv, ${locateFile ? '{ locateFile }' : 'undefined'}).then((summary) => ({ summary, kernel: kv.kernelInfo() })));
globalThis.workerDone = ${withModel ? `globalThis.smokeDone.then(() => outcome(workerSmoke({ LlamaWorker, Chat }, './${MODEL_FILE}'${worker})))` : 'null'};
`;
}

const page = (script) => `<!doctype html><meta charset="utf-8"><title>kvcache-wasm bundled</title><link rel="icon" href="data:,">
<script type="module" src="${script}"></script>
`;

function pkgVersion(name) {
  return JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')).version;
}

// How each bundler builds the app in `dir` into `dir/out`. `config` writes
// what it needs beside main.js; `args` is its command line.
const BUNDLERS = [
  {
    name: 'Vite', pkg: 'vite',
    files: { 'index.html': page('./main.js') },
    args: ['vite', 'build', '--outDir', 'out', '--emptyOutDir'],
  },
  {
    name: 'webpack', pkg: 'webpack',
    files: {
      // Each .wasm (the model runner's kernels among them) is above webpack's 244 KiB hint for an asset.
      'webpack.config.mjs': `export default { mode: 'production', entry: './main.js', target: 'web', devtool: false,
  output: { path: new URL('./out/', import.meta.url).pathname, filename: 'main.js', clean: true },
  performance: { maxAssetSize: 512 * 1024 } };
`,
      'out.html': page('./main.js'),
    },
    args: ['webpack', '--config', 'webpack.config.mjs'],
    page: 'out.html',
  },
  {
    name: 'esbuild', pkg: 'esbuild', ownWorker: true, locateFile: true,
    files: { 'out.html': page('./main.js') },
    // The model worker is an entry of its own: esbuild bundles no worker it finds in the code.
    args: ['esbuild', 'main.js', 'node_modules/kvcache-wasm/js/llama-worker.js', '--bundle', '--format=esm', '--platform=browser',
      '--outdir=out', '--entry-names=[name]', '--log-level=warning'],
    page: 'out.html',
    // esbuild emits no files for new URL(…, import.meta.url): the app copies them.
    copy: ['dist/kvcache.wasm', 'dist/kvcache-relaxed.wasm', 'js/pool-worker.js'],
  },
  {
    name: 'Rollup', pkg: 'rollup', ownWorker: true,
    files: {
      'rollup.config.mjs': `import { nodeResolve } from ${JSON.stringify(join(ROOT, 'node_modules', '@rollup', 'plugin-node-resolve', 'dist', 'es', 'index.js'))};
import { importMetaAssets } from ${JSON.stringify(join(ROOT, 'node_modules', '@web', 'rollup-plugin-import-meta-assets', 'index.mjs'))};
// The model worker is an entry of its own (the plugin copies a worker's script, unbundled); the app's
// own reference to it is to that entry's output, not to a file of its folder.
export default {
  input: { main: 'main.js', 'llama-worker': 'node_modules/kvcache-wasm/js/llama-worker.js' },
  output: { dir: 'out', format: 'es', entryFileNames: '[name].js' },
  plugins: [nodeResolve({ browser: true }), importMetaAssets({ exclude: 'main.js' })],
};
`,
      'out.html': page('./main.js'),
    },
    args: ['rollup', '--config', 'rollup.config.mjs'],
    page: 'out.html',
  },
  {
    name: 'Parcel', pkg: 'parcel',
    // Parcel reads a package's "exports" (kvcache-wasm/chat, /worker) only when the app asks it to.
    packageJson: { '@parcel/resolver-default': { packageExports: true } },
    files: { 'index.html': page('./main.js') },
    args: ['parcel', 'build', 'index.html', '--dist-dir', 'out', '--no-cache', '--no-source-maps', '--public-url', './'],
  },
];

export const BUNDLER_NAMES = BUNDLERS.map((b) => b.name);

// Children see no npm_* variables and no node:test context.
const childEnv = Object.fromEntries(Object.entries(process.env)
  .filter(([name]) => !name.startsWith('npm_') && name !== 'NODE_TEST_CONTEXT'));

/** Runs `command` in `cwd`; { output } (stdout and stderr), or throws with them. */
async function run(command, args, cwd) {
  try {
    const { stdout, stderr } = await promisify(execFile)(command, args, {
      cwd, env: { ...childEnv, NO_COLOR: '1', FORCE_COLOR: '0' }, timeout: BUILD_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 64 << 20,
    });
    return { output: `${stdout}${stderr}` };
  } catch (error) {
    throw new Error(`${command} ${args.join(' ')} failed (${error.signal ?? error.code}):\n${error.stdout ?? ''}${error.stderr ?? ''}`);
  }
}

/**
 * Builds one app per bundler under `work`, each with the tarball installed
 * (and `model`, a GGUF file's path, copied beside its page, if given):
 * { [name]: { dir, version, warnings, output } } (`warnings`: the lines
 * of the build's output that warn), or { skip } where the bundler is not
 * installed.
 */
export async function buildApps(tarball, work, model = null) {
  const apps = {};
  for (const bundler of BUNDLERS) {
    if (!existsSync(join(ROOT, 'node_modules', bundler.pkg, 'package.json'))) {
      apps[bundler.name] = { skip: `${bundler.pkg} is not installed (npm ci)` };
      continue;
    }
    const dir = join(work, bundler.name.toLowerCase());
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: `${bundler.pkg}-app`, private: true, type: 'module', ...bundler.packageJson })}\n`);
    await run('npm', ['install', tarball, '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], dir);
    for (const [from, to] of SMOKE) {
      writeFileSync(join(dir, to), readFileSync(join(ROOT, from), 'utf8').replace(/'(\.\.\/)+support\/synthetic\.mjs'/g, "'./synthetic.mjs'"));
    }
    writeFileSync(join(dir, 'main.js'), main(bundler, model !== null));
    for (const [file, text] of Object.entries(bundler.files)) writeFileSync(join(dir, file), text);
    const [command, ...args] = bundler.args;
    const { output } = await run(join(BIN, command), args, dir);
    const out = join(dir, 'out');
    if (bundler.page) copyFileSync(join(dir, bundler.page), join(out, 'index.html'));
    for (const file of bundler.copy ?? []) copyFileSync(join(dir, 'node_modules', 'kvcache-wasm', file), join(out, posix.basename(file)));
    if (model) copyFileSync(model, join(out, MODEL_FILE));
    // The app is the package and the smoke test: any warning is about the package.
    const warnings = output.split('\n').filter((line) => /warn|\(!\)|\u26a0/i.test(line));
    apps[bundler.name] = { dir: out, version: `${bundler.name} ${pkgVersion(bundler.pkg)}`, warnings, output };
  }
  return apps;
}

/**
 * A Cloudflare Worker app from the tarball, run by `wrangler dev` (which
 * bundles it, with the package's "workerd" entry, and serves it in a local
 * workerd): resolves to { url, version, output(), close() } once it is
 * ready. wrangler 4 needs Node 22 (`node`). Request.cf is not fetched (this
 * machine has no network: wrangler would warn about that, not about us).
 */
export async function wranglerDev(tarball, work, node, { timeoutMs = BUILD_TIMEOUT_MS } = {}) {
  const dir = join(work, 'wrangler');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'wrangler-app', private: true, type: 'module' })}\n`);
  await run('npm', ['install', tarball, '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], dir);
  for (const [from, to] of SMOKE) {
    writeFileSync(join(dir, to), readFileSync(join(ROOT, from), 'utf8').replace(/'(\.\.\/)+support\/synthetic\.mjs'/g, "'./synthetic.mjs'"));
  }
  writeFileSync(join(dir, 'worker.mjs'), `import * as kv from 'kvcache-wasm';
import { smoke } from './smoke.mjs';
export default { async fetch() { return Response.json(await smoke(kv)); } };
`);
  writeFileSync(join(dir, 'wrangler.toml'), 'name = "kvcache-wasm-smoke"\nmain = "worker.mjs"\ncompatibility_date = "2026-01-01"\n');
  const wrangler = join(ROOT, 'node_modules', 'wrangler', 'bin', 'wrangler.js');
  const port = await new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => { const p = probe.address().port; probe.close(() => resolve(p)); });
  });
  const child = spawn(node, [wrangler, 'dev', '--ip', '127.0.0.1', '--port', String(port), '--log-level', 'info'], {
    cwd: dir, env: { ...childEnv, NO_COLOR: '1', WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' },
    stdio: ['ignore', 'pipe', 'pipe'], detached: true,
  });
  let output = '';
  const close = () => { try { process.kill(-child.pid, 'SIGTERM'); } catch { /* gone already */ } };
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`wrangler dev was not ready in ${timeoutMs} ms:\n${output}`)), timeoutMs);
      const listen = (chunk) => {
        output += chunk;
        if (/Ready on http/.test(output)) { clearTimeout(timer); resolve(); }
      };
      child.stdout.on('data', listen);
      child.stderr.on('data', listen);
      child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`wrangler dev exited (${code}):\n${output}`)); });
    });
  } catch (error) {
    close();
    throw error;
  }
  return { url: `http://127.0.0.1:${port}/`, version: `wrangler ${pkgVersion('wrangler')}`, output: () => output, close };
}

/** Serves the files of `dir` on 127.0.0.1 (cross-origin isolated or not); resolves to the server. */
export function serveStatic(dir, { isolated }) {
  return serveFiles((pathname) => {
    const file = join(dir, posix.normalize(pathname).slice(1) || 'index.html');
    return file.startsWith(dir) && statSync(file, { throwIfNoEntry: false })?.isFile() ? file : null;
  }, { isolated });
}

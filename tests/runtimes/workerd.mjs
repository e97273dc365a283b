// Runs workerd. serveWorkerd() starts `workerd serve` on any config and waits
// for its ports. startWorkerd() serves workerd-worker.mjs as Cloudflare would
// run it: a generated config (capnp) lists every module -- the Worker, the
// smoke modules, the package's js files as ES modules and dist/kvcache.wasm
// as a wasm module -- under its path in this repository, so relative imports
// resolve as on disk. The bare specifiers the Worker imports are small
// re-export modules to the exports map's targets under wrangler's
// conditions: the part a bundler plays. Two Workers run, one per way of
// loading the wasm (see the Worker), each on its own port.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PACKAGE, resolveExport } from './exports.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WRANGLER_CONDITIONS = ['workerd', 'worker', 'browser', 'import', 'default'];
const WORKER = 'tests/runtimes/workerd-worker.mjs';
const SOURCES = ['tests/runtimes/smoke.mjs', 'tests/runtimes/parallel.mjs', 'tests/runtimes/llama-smoke.mjs', 'support/synthetic.mjs'];

// What the Worker imports from the package, and the names each re-exports.
const SPECIFIERS = [
  ['kvcache-wasm', '.', ['*', 'default']],
  ['kvcache-wasm/llama', './llama', ['*']],
  ['kvcache-wasm/kvcache.wasm', './kvcache.wasm', ['default']],
];

// One Worker per way of loading the wasm. "module" runs at a compatibility
// date before workerd had FinalizationRegistry (2025-05-05), which the
// package must not need; "default" at a current one.
const WORKERS = [
  { socket: 'module-init', init: 'module', compatibilityDate: '2024-09-23' },
  { socket: 'default-init', init: 'default', compatibilityDate: '2026-01-01' },
];

/** A module re-exporting `names` of the repository file `target` to the module named `name`. */
function reexport(name, target, names) {
  let from = posix.relative(posix.dirname(name), target);
  if (!from.startsWith('.')) from = `./${from}`;
  const source = names.map((what) => (what === '*' ? `export * from '${from}';` : `export { ${what} } from '${from}';`));
  return source.join('\n');
}

/** `file`, a path in the repository, as a capnp embed relative to the config's directory. */
export function embedded(configDir, file) {
  return JSON.stringify(relative(configDir, file).split('\\').join('/'));
}

/**
 * The capnp module entries of the package for a Worker at `worker` (a
 * repository path): its js files as ES modules and its .wasm files as wasm
 * modules under their repository paths, and beside the Worker the modules
 * its bare specifiers resolve to, re-exporting the exports map's targets
 * under wrangler's conditions (what a bundler does).
 */
export function packageModules(configDir, worker) {
  const embed = (file) => embedded(configDir, join(ROOT, file));
  const packageJs = readdirSync(join(ROOT, 'js'), { recursive: true }).map((f) => f.split('\\').join('/'))
    .filter((f) => f.endsWith('.js')).map((f) => `js/${f}`);
  return [
    ...packageJs.map((file) => `(name = "${file}", esModule = embed ${embed(file)})`),
    `(name = "dist/kvcache.wasm", wasm = embed ${embed('dist/kvcache.wasm')})`,
    `(name = "dist/kvcache-relaxed.wasm", wasm = embed ${embed('dist/kvcache-relaxed.wasm')})`,
    ...SPECIFIERS.map(([specifier, subpath, names]) => {
      const target = resolveExport(PACKAGE, subpath, WRANGLER_CONDITIONS).replace(/^\.\//, '');
      const name = posix.join(posix.dirname(worker), specifier); // workerd resolves a bare name beside its importer
      return `(name = "${name}", esModule = ${JSON.stringify(reexport(name, target, names))})`;
    }),
  ];
}

function configText(configDir) {
  const modules = [
    ...[WORKER, ...SOURCES].map((file) => `(name = "${file}", esModule = embed ${embedded(configDir, join(ROOT, file))})`),
    ...packageModules(configDir, WORKER),
  ];
  const services = WORKERS.map(({ socket, init, compatibilityDate }) =>
    `(name = "${socket}", worker = (modules = .modules, compatibilityDate = "${compatibilityDate}", ` +
    `bindings = [(name = "INIT", text = "${init}")]))`);
  const sockets = WORKERS.map(({ socket }) =>
    `(name = "${socket}", address = "127.0.0.1:0", http = (), service = "${socket}")`);
  return [
    'using Workerd = import "/workerd/workerd.capnp";',
    `const config :Workerd.Config = (services = [${services.join(', ')}], sockets = [${sockets.join(', ')}]);`,
    `const modules :List(Workerd.Worker.Module) = [\n  ${modules.join(',\n  ')}\n];`,
    '',
  ].join('\n');
}

/**
 * Runs `workerd serve` with `args` (a config and its options) and waits until
 * every socket in `sockets` listens; workerd reports each port on a control
 * pipe. Resolves to { ports: { socket: port }, close, stderr }; rejects, with
 * workerd's stderr, when it exits first or takes longer than timeoutMs.
 */
export function serveWorkerd(binary, args, sockets, { timeoutMs, env = process.env, cleanUp = () => {} }) {
  const child = spawn(binary, ['serve', ...args, '--control-fd=3'], { env, stdio: ['ignore', 'ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const close = () => {
    child.kill('SIGKILL');
    cleanUp();
  };
  return new Promise((resolve, reject) => {
    const ports = {};
    // Also called when workerd exits after listening (a crash, or close()): then it only cleans up again.
    const fail = (why) => {
      close();
      reject(new Error(`workerd ${why}\n${stderr}`));
    };
    const timer = setTimeout(() => fail(`did not listen within ${timeoutMs} ms`), timeoutMs);
    child.once('exit', (code, signal) => fail(`exited (${signal ?? code}) before listening`));
    child.once('error', (error) => fail(`did not start: ${error.message}`));
    let control = '';
    child.stdio[3].on('data', (chunk) => {
      control += chunk;
      const lines = control.split('\n');
      control = lines.pop();
      for (const line of lines) {
        const event = JSON.parse(line);
        if (event.event === 'listen') ports[event.socket] = event.port;
      }
      if (sockets.every((socket) => socket in ports)) {
        clearTimeout(timer);
        resolve({ ports, close, stderr: () => stderr });
      }
    });
  });
}

/**
 * Serves workerd-worker.mjs on free ports with a generated config. Resolves
 * to { urls: { module, default }, close, stderr } (see serveWorkerd).
 */
export async function startWorkerd(binary, { timeoutMs }) {
  const dir = mkdtempSync(join(tmpdir(), 'kvcache-wasm-workerd-'));
  writeFileSync(join(dir, 'config.capnp'), configText(dir));
  const server = await serveWorkerd(binary, [join(dir, 'config.capnp')], WORKERS.map((w) => w.socket), {
    timeoutMs, cleanUp: () => rmSync(dir, { recursive: true, force: true }),
  });
  const urls = Object.fromEntries(WORKERS.map(({ socket, init }) => [init, `http://127.0.0.1:${server.ports[socket]}`]));
  return { ...server, urls };
}

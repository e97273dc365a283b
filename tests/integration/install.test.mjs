// Installing from git, as the README's Install section says: npm clones the
// repository, installs its devDependencies and runs its `prepare` script
// (scripts/prepare.mjs), which builds the .wasm modules with Emscripten -- or,
// without Emscripten on PATH, stops the install with one sentence saying
// what to do. Never a package that installs and then fails at init(). The
// repository installed is this working tree as it is (a scratch git
// repository of its tracked and untracked files), so the test sees what a
// commit of it would give -- but for its devDependencies, which npm would
// install before `prepare` (this repository's test tools, over a gigabyte:
// minutes, and nothing of the package's own); `prepare` needs none of them.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { have } from '../../scripts/toolchain.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TIMEOUT_MS = 600000;

// Children see no npm_* variables (npm reads npm_config_* as its own settings) and no node:test context.
const childEnv = Object.fromEntries(Object.entries(process.env)
  .filter(([name]) => !name.startsWith('npm_') && name !== 'NODE_TEST_CONTEXT'));

let work;
let repository; // a file: URL of the scratch repository

/** A folder of links to every program on PATH but Emscripten's (emcc, emcmake, ...): a PATH without it. */
function pathWithoutEmscripten() {
  const bin = join(work, 'bin-without-emscripten');
  mkdirSync(bin);
  const seen = new Set();
  for (const dir of (childEnv.PATH ?? '').split(delimiter)) {
    let names;
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      if (name.startsWith('em') || seen.has(name)) continue;
      seen.add(name);
      symlinkSync(join(dir, name), join(bin, name));
    }
  }
  return bin;
}

/** `npm install <repository>` in a fresh app; { ok, output, app }. */
async function installFromGit(name, env) {
  const app = join(work, name);
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), `${JSON.stringify({ name, private: true, type: 'module' })}\n`);
  try {
    const { stdout, stderr } = await promisify(execFile)('npm', ['install', '--no-audit', '--no-fund', `git+${repository}`], {
      cwd: app, env: { ...childEnv, ...env }, timeout: TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 64 << 20,
    });
    return { ok: true, output: stdout + stderr, app };
  } catch (error) {
    return { ok: false, output: `${error.stdout ?? ''}${error.stderr ?? ''}`, code: error.code, app };
  }
}

before(() => {
  work = mkdtempSync(join(tmpdir(), 'kvcache-wasm-git-'));
  const source = join(work, 'repository');
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0').filter(Boolean).filter((file) => statSync(join(ROOT, file), { throwIfNoEntry: false })?.isFile());
  for (const file of files) cpSync(join(ROOT, file), join(source, file));
  const manifest = JSON.parse(readFileSync(join(source, 'package.json'), 'utf8'));
  delete manifest.devDependencies;
  writeFileSync(join(source, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  rmSync(join(source, 'package-lock.json'), { force: true });
  const git = (...args) => execFileSync('git', args, { cwd: source, env: childEnv, stdio: 'ignore' });
  git('init', '-q');
  git('add', '-A');
  git('-c', 'user.name=test', '-c', 'user.email=test@localhost', 'commit', '-q', '-m', 'the working tree');
  repository = pathToFileURL(source).href;
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

// The two installs run side by side: each spends most of its time in npm and the build.
describe('installing from git', { concurrency: 2 }, () => {
  test('a git dependency builds its .wasm during npm install where Emscripten is on PATH, and runs', { timeout: TIMEOUT_MS }, async (t) => {
    if (!have('emcc') || !have('cmake')) return t.skip('Emscripten or CMake is not on PATH here: the building path cannot run');
    const { ok, output, app } = await installFromGit('with-emscripten', {});
    assert.ok(ok, output);
    writeFileSync(join(app, 'app.mjs'), `
      import init, { LayerKvCache, kernelIsa, threadCount } from 'kvcache-wasm';
      await init();
      const cache = new LayerKvCache({ numKvHeads: 1, headDim: 4 });
      cache.append(new Float32Array(4).fill(1), new Float32Array(4).fill(2));
      console.log(kernelIsa(), threadCount() > 1, cache.attend(new Float32Array(4).fill(0.5), 0).out[0]);`);
    const run = await promisify(execFile)(process.execPath, ['app.mjs'], { cwd: app, env: childEnv });
    assert.equal(run.stdout.trim(), 'wasm-simd128 true 2');
  });
  
  test('a git dependency without Emscripten stops npm install with one sentence saying what to do', { timeout: TIMEOUT_MS }, async () => {
    const { ok, output, app } = await installFromGit('without-emscripten', { PATH: pathWithoutEmscripten() });
    assert.equal(ok, false, 'the install fails');
    const sentence = output.split('\n').find((line) => line.includes('kvcache-wasm: this checkout has no built dist/kvcache.wasm'));
    assert.ok(sentence, output);
    assert.match(sentence, /install the packed package instead \(npm install kvcache-wasm, or the \.tgz that `npm pack` makes/);
    assert.match(sentence, /or install Emscripten and CMake .* and run the install again\.$/);
    assert.deepEqual(readdirSync(app).sort(), ['package.json'], 'nothing was installed');
  });
});

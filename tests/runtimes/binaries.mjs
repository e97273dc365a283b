// The runtimes the tests drive, and esbuild, from the npm packages that
// ship them (devDependencies). Each keeps its binary in an optional
// per-platform package (@deno/linux-x64-glibc, @oven/bun-linux-x64,
// @cloudflare/workerd-linux-64, @esbuild/linux-x64, ...); its postinstall
// script then links the binary into the main package, and bun's moves it
// there. npm may skip those scripts (--ignore-scripts, or scripts not
// allowed), so both places are tried: the platform package first, then the
// main one.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);

// Where the binary is inside the platform package or the main package.
const BINARY_PATHS = {
  deno: ['deno'],
  bun: ['bin/bun', 'bin/bun.exe'],
  workerd: ['bin/workerd'],
  esbuild: ['bin/esbuild'],
};

function packageDir(name, from = require) {
  try {
    return dirname(from.resolve(`${name}/package.json`));
  } catch {
    return null;
  }
}

/** The first line `binary --version` prints, or null when it does not run. */
function versionOf(binary) {
  const result = spawnSync(binary, ['--version'], { encoding: 'utf8', timeout: 30000 });
  return result.status === 0 ? result.stdout.trim().split('\n')[0] : null;
}

/**
 * The binary of the npm package `name` ('deno', 'bun', 'workerd' or 'esbuild'):
 * { path, version }, or { missing } saying why there is none.
 */
export function findBinary(name) {
  const main = packageDir(name);
  if (!main) return { missing: `the npm package ${name} is not installed (npm ci)` };
  const mainRequire = createRequire(join(main, 'package.json'));
  const { optionalDependencies = {} } = JSON.parse(readFileSync(join(main, 'package.json'), 'utf8'));
  const platformDirs = Object.keys(optionalDependencies).map((dep) => packageDir(dep, mainRequire)).filter(Boolean);
  for (const dir of [...platformDirs, main]) {
    for (const relative of BINARY_PATHS[name]) {
      const path = join(dir, relative);
      const version = existsSync(path) ? versionOf(path) : null;
      if (version) return { path, version };
    }
  }
  return { missing: `no ${name} binary for ${process.platform}-${process.arch} runs: its platform package (an optional dependency of ${name}) is missing` };
}

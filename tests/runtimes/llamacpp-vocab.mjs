// llama.cpp's own tokenizer test vocabularies -- models/ggml-vocab-NAME.gguf
// with its .inp texts and .out ids, the pairs tests/test-tokenizer-0.cpp
// checks -- taken at run time from the llama.cpp source node-llama-cpp ships
// as a git bundle (scripts/toolchain.mjs ensureNativeLlamaCpp installs it),
// never copied into this repository. The three files are extracted once into
// a folder beside the installed package and read from there after.
//
//   const why = llamaCppVocabMissing('gemma-4');   // a reason to skip, or null
//   const { path, cases } = llamaCppVocab('gemma-4');  // the .gguf's path; cases [{ text, ids }]
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { have, nativeLlamaCppDir } from '../../scripts/toolchain.mjs';

const bundle = join(nativeLlamaCppDir, 'node_modules', 'node-llama-cpp', 'llama', 'gitRelease.bundle');
const extracted = join(nativeLlamaCppDir, 'llama-vocab-models');
// test-tokenizer-0's separator of the texts in a .inp file.
const SEPARATOR = '\n__ggml_vocab_test__\n';

const filesOf = (name) => ['', '.inp', '.out'].map((suffix) => `ggml-vocab-${name}.gguf${suffix}`);

/** Why llama.cpp's vocabulary `name` (say 'gemma-4') cannot be had here, or null once its files are extracted. */
export function llamaCppVocabMissing(name) {
  if (typeof name !== 'string' || !/^[\w.-]+$/.test(name)) throw new TypeError(`llamaCppVocabMissing: name must be a vocabulary name such as 'gemma-4', not ${JSON.stringify(name)}`);
  const files = filesOf(name);
  if (files.every((file) => existsSync(join(extracted, file)))) return null;
  if (!existsSync(bundle)) return `node-llama-cpp's llama.cpp source bundle is not at ${bundle} (npm test installs node-llama-cpp)`;
  if (!have('git')) return 'git is not on PATH: it reads llama.cpp\'s vocabularies out of node-llama-cpp\'s source bundle';
  const clone = mkdtempSync(join(tmpdir(), 'kvcache-llama-bundle-'));
  try {
    const git = (args, options) => spawnSync('git', args, { maxBuffer: 1 << 30, ...options });
    const cloned = git(['clone', '--bare', '--quiet', bundle, clone], { encoding: 'utf8' });
    if (cloned.status !== 0) return `git could not clone node-llama-cpp's llama.cpp bundle: ${cloned.stderr.trim()}`;
    mkdirSync(extracted, { recursive: true });
    for (const file of files) {
      const shown = git(['--git-dir', clone, 'show', `HEAD:models/${file}`]);
      if (shown.status !== 0) return `llama.cpp's source in node-llama-cpp has no models/${file}`;
      // Written whole under another name first: a test reading the folder meanwhile sees the file complete or absent.
      const partial = join(extracted, `${file}.${process.pid}.partial`);
      writeFileSync(partial, shown.stdout);
      renameSync(partial, join(extracted, file));
    }
    return null;
  } finally {
    rmSync(clone, { recursive: true, force: true });
  }
}

/**
 * llama.cpp's vocabulary `name`, after llamaCppVocabMissing(name) said null:
 * { path: its .gguf, cases: [{ text, ids }] }, the .inp texts and .out ids
 * paired as test-tokenizer-0 pairs them (ids without the begin token, special
 * tokens in the text read as text).
 */
export function llamaCppVocab(name) {
  const [gguf, inp, out] = filesOf(name).map((file) => join(extracted, file));
  const raw = readFileSync(inp, 'utf8');
  const texts = [];
  for (let at = 0; at < raw.length;) {
    const next = raw.indexOf(SEPARATOR, at);
    texts.push(raw.slice(at, next < 0 ? raw.length : next));
    if (next < 0) break;
    at = next + SEPARATOR.length;
  }
  // One line of ids per text; the newline ending the last line ends no text.
  const lines = readFileSync(out, 'utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length !== texts.length) throw new Error(`${name}: ${texts.length} texts in the .inp file but ${lines.length} lines of ids in the .out file`);
  const cases = texts.map((text, i) => {
    const line = lines[i].trim();
    return { text, ids: line === '' ? [] : line.split(' ').map(Number) };
  });
  return { path: gguf, cases };
}

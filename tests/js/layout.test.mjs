// The package's JavaScript is in folders by concern, and imports point one
// way: the model may use the cache and the runtime, never the reverse; the
// tokenizers know no cache; the store (where a model's bytes come from, and
// where files and conversations are kept) knows no model; chat knows no
// model (it renders for any session); the page's side of the worker reads
// the model's sources. Nothing
// in a folder imports an entry point (the files at js/'s top, which are the
// package's public face) -- but a folder may start a worker script (a new
// thread, not an import).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const js = fileURLToPath(new URL('../../js/', import.meta.url));

// What each folder may import besides itself.
const MAY_IMPORT = {
  runtime: ['dist'], // the .wasm modules it loads
  cache: ['runtime'],
  tokenizers: ['runtime'],
  store: ['runtime'],
  model: ['runtime', 'cache', 'tokenizers', 'store', '@mlc-ai/web-xgrammar'],
  chat: ['runtime', 'store', '@huggingface/jinja'],
  workers: ['runtime', 'model', 'store'],
  'prompt-api': ['runtime', 'chat', 'model', 'store', 'workers'],
};

function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.js') ? [relative(js, path).split('\\').join('/')] : [];
  });
}

/** The specifiers a module imports statically, dynamically or as a worker's or a file's URL. */
function imports(file) {
  const text = readFileSync(join(js, file), 'utf8').replace(/^\s*(\/\/|\*).*$/gm, '');
  return [...text.matchAll(/(?:\bfrom|\bimport\(?|new URL\()\s*'([^']+)'/g)].map((match) => match[1]);
}

/** The folder a specifier points into from `file`, '' for js/'s top, or the bare package name. */
function folderOf(file, specifier) {
  if (!specifier.startsWith('.')) return specifier;
  const target = posix.normalize(posix.join(posix.dirname(file), specifier));
  if (/^\.\.\/dist\/[^/]+\.wasm$/.test(target)) return 'dist';
  if (target.startsWith('../')) return `outside js/ (${target})`;
  return target.includes('/') ? target.split('/')[0] : '';
}

const WORKER_SCRIPTS = new Set(['llama-worker.js', 'pool-worker.js']);
const startsWorker = (file, specifier) => WORKER_SCRIPTS.has(posix.normalize(posix.join(posix.dirname(file), specifier)));

const files = sources(js);

test('js/ holds entry points and worker scripts at its top, everything else in a folder of its concern', () => {
  const top = files.filter((file) => !file.includes('/')).sort();
  assert.deepEqual(top, ['ai-sdk.js', 'chat.js', 'index.js', 'llama-worker.js', 'llama.js', 'pool-worker.js', 'prompt-api.js', 'worker.js', 'workerd.js']);
  const folders = [...new Set(files.filter((file) => file.includes('/')).map((file) => file.split('/')[0]))].sort();
  assert.deepEqual(folders, Object.keys(MAY_IMPORT).sort());
});

for (const folder of Object.keys(MAY_IMPORT)) {
  test(`${folder}/ imports only ${[folder, ...MAY_IMPORT[folder]].join(', ')}`, () => {
    const allowed = new Set([folder, ...MAY_IMPORT[folder]]);
    const wrong = files.filter((file) => file.startsWith(`${folder}/`)).flatMap((file) => imports(file)
      .filter((specifier) => !specifier.startsWith('node:') && !startsWorker(file, specifier))
      .filter((specifier) => !allowed.has(folderOf(file, specifier)))
      .map((specifier) => `${file} imports ${specifier}`));
    assert.deepEqual(wrong, []);
  });
}

test('the layout check sees a wrong import', () => {
  assert.equal(folderOf('cache/layer.js', '../model/llama.js'), 'model');
  assert.equal(folderOf('model/llama.js', '../llama.js'), '');
  assert.equal(folderOf('runtime/runtime.js', '../../dist/kvcache.wasm'), 'dist');
  assert.equal(folderOf('cache/layer.js', '../../tests/js/helpers.mjs'), 'outside js/ (../tests/js/helpers.mjs)');
  assert.ok(imports('model/llama.js').includes('../cache/model.js'));
});

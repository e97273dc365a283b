// Hugging Face model names (js/store/hf.js) against a local server that
// answers as the Hub's endpoints do (tests/runtimes/hf-server.mjs: the API's
// file list, resolve answered with a 302 to a CDN on another port, ranges
// there, 401 / 403 / 404): each form of name resolves to the right URLs, and
// the files load -- through Llama.load, a store (keyed by the resolved URL,
// listed under the name, resumed with Range, remembered offline), a
// LlamaWorker -- and each wrong name or refused access says so, naming it.
import { test, before, after } from 'node:test';
import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Llama, ModelStore } from '../../js/llama.js';
import { LlamaWorker } from '../../js/worker.js';
import { DEFAULT_ENDPOINT, hfOptions, parseHfName, resolveHfName } from '../../js/store/hf.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { TINY_PROJECTORS, pairedLanguageModel, randomProjector } from '../gguf/vision.mjs';
import { encodeGguf, splitSpec } from '../gguf/writer.mjs';
import { serveHub } from '../runtimes/hf-server.mjs';
import { ready } from './helpers.mjs';
import { nodeWorker } from './node-worker.mjs';

const STORIES = fileURLToPath(new URL('../../../shared/data/stories260k.gguf', import.meta.url));
const TOKEN = 'hf_test_token';
let dir;
let hub;
let files; // local paths by role
let digests; // Llama#digest of each local model

before(async () => {
  await ready();
  dir = mkdtempSync(join(tmpdir(), 'kvc-hf-'));
  const write = (name, bytes) => {
    writeFileSync(join(dir, name), bytes);
    return join(dir, name);
  };
  const tiny = randomLlama(GEOMETRIES.tiny, { mix: 'Q4_K_M', seed: 5 });
  const g = TINY_PROJECTORS.idefics3;
  files = {
    stories: STORIES,
    tiny: write('tiny.gguf', encodeGguf(tiny)),
    parts: splitSpec(tiny, 3).map((spec, i) => write(`tiny-part${i + 1}.gguf`, encodeGguf(spec))),
    vlm: write('vlm.gguf', encodeGguf(pairedLanguageModel(g, { seed: 2 }))),
    mmprojF16: write('mmproj-f16.gguf', encodeGguf(randomProjector(g, { mix: 'F16', seed: 3 }))),
    mmprojQ8: write('mmproj-q8.gguf', encodeGguf(randomProjector(g, { mix: 'Q8_0', seed: 3 }))),
  };
  digests = {};
  for (const role of ['stories', 'tiny', 'vlm']) {
    const llama = Llama.fromGguf(readFileSync(files[role]));
    digests[role] = llama.digest;
    llama.free();
  }
  // The parts read as one file (their split.* entries kept): the digest a load of them has.
  const joined = await Llama.load(files.parts.map((path, i) => new File([readFileSync(path)], `tiny-0000${i + 1}-of-00003.gguf`)));
  digests.split = joined.digest;
  joined.free();
  hub = await serveHub({
    'test/stories-GGUF': {
      files: { 'stories260k-Q8_0.gguf': files.stories, 'stories260k-Q4_K_M.gguf': files.stories, 'stories260k-UD-Q4_K_XL.gguf': files.stories },
      revisions: { v2: { 'stories260k-Q8_0.gguf': files.tiny }, '0123abcd': { 'stories260k-Q8_0.gguf': files.stories } },
    },
    'test/one': { files: { 'model-F32.gguf': files.stories } },
    'test/split-GGUF': {
      files: Object.fromEntries(files.parts.map((path, i) => [`Q4_K_M/tiny-Q4_K_M-0000${i + 1}-of-00003.gguf`, path])),
    },
    'test/nested': { files: { 'quants/q8/stories260k.Q8_0.gguf': files.stories } },
    'test/vision-GGUF': {
      files: { 'vlm-Q8_0.gguf': files.vlm, 'vlm-F16.gguf': files.vlm, 'mmproj-vlm-F16.gguf': files.mmprojF16, 'mmproj-vlm-Q8_0.gguf': files.mmprojQ8 },
    },
    'test/private': { private: true, token: TOKEN, files: { 'stories260k-Q8_0.gguf': files.stories } },
    'test/gated': { gated: true, token: TOKEN, files: { 'stories260k-Q8_0.gguf': files.stories } },
  });
});
after(async () => {
  await hub?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const options = () => ({ huggingFace: { endpoint: hub.endpoint } });
const resolveUrl = (repo, rev, path) => `${hub.endpoint}/${repo}/resolve/${rev}/${path}`;
const resolve = (name, more = {}) => resolveHfName('test', name, { ...options(), ...more });

test('a file, a quantization tag in any case, the default tag, a one-model repository: each resolves to its resolve URL', async () => {
  const q8 = resolveUrl('test/stories-GGUF', 'main', 'stories260k-Q8_0.gguf');
  assert.deepEqual((await resolve('hf:test/stories-GGUF/stories260k-Q8_0.gguf')).urls, [q8]);
  assert.deepEqual((await resolve('hf:test/stories-GGUF:Q8_0')).urls, [q8]);
  assert.deepEqual((await resolve('hf:test/stories-GGUF:q8_0')).urls, [q8]); // llama.cpp's tags are case-blind
  assert.deepEqual((await resolve('hf:test/stories-GGUF:UD-Q4_K_XL')).urls, [resolveUrl('test/stories-GGUF', 'main', 'stories260k-UD-Q4_K_XL.gguf')]);
  // No tag: Q4_K_M, as llama.cpp's -hf; a repository of one model: that one.
  assert.deepEqual((await resolve('hf:test/stories-GGUF')).urls, [resolveUrl('test/stories-GGUF', 'main', 'stories260k-Q4_K_M.gguf')]);
  const one = await resolve('hf:test/one');
  assert.deepEqual(one.urls, [resolveUrl('test/one', 'main', 'model-F32.gguf')]);
  assert.equal(one.names.model, 'hf:test/one/model-F32.gguf');
  assert.equal(one.projector, null);
});

test('a file of a nested path, and a revision (a branch, a commit) in the URL and the name', async () => {
  assert.deepEqual((await resolve('hf:test/nested/quants/q8/stories260k.Q8_0.gguf')).urls,
    [resolveUrl('test/nested', 'main', 'quants/q8/stories260k.Q8_0.gguf')]);
  assert.deepEqual((await resolve('hf:test/nested:Q8_0')).urls, [resolveUrl('test/nested', 'main', 'quants/q8/stories260k.Q8_0.gguf')]);
  const v2 = await resolve('hf:test/stories-GGUF:Q8_0#v2');
  assert.deepEqual(v2.urls, [resolveUrl('test/stories-GGUF', 'v2', 'stories260k-Q8_0.gguf')]);
  assert.equal(v2.names.model, 'hf:test/stories-GGUF/stories260k-Q8_0.gguf#v2');
  assert.deepEqual((await resolve('hf:test/stories-GGUF/stories260k-Q8_0.gguf#0123abcd')).urls, [resolveUrl('test/stories-GGUF', '0123abcd', 'stories260k-Q8_0.gguf')]);
  // The revision's own file loads: v2 holds another model than main.
  const llama = await Llama.load('hf:test/stories-GGUF:Q8_0#v2', options());
  assert.equal(llama.digest, digests.tiny);
  llama.free();
});

test('a split model: every part found by its tag or from one part, and loaded as the one file', async () => {
  const parts = [1, 2, 3].map((k) => resolveUrl('test/split-GGUF', 'main', `Q4_K_M/tiny-Q4_K_M-0000${k}-of-00003.gguf`));
  assert.deepEqual((await resolve('hf:test/split-GGUF:Q4_K_M')).urls, parts);
  assert.deepEqual((await resolve('hf:test/split-GGUF/Q4_K_M/tiny-Q4_K_M-00002-of-00003.gguf')).urls, parts);
  const llama = await Llama.load('hf:test/split-GGUF:q4_k_m', options());
  assert.equal(llama.digest, digests.split); // every part, read as the one file
  const tiny = Llama.fromGguf(readFileSync(files.tiny));
  assert.deepEqual(llama.config, tiny.config); // the model the parts were cut from
  tiny.free();
  llama.free();
});

test('an endpoint of the app: a mirror at a path of its own, with or without a slash; the default is the Hub', async () => {
  for (const endpoint of [`${hub.endpoint}/mirror`, `${hub.endpoint}/mirror/`]) {
    const resolved = await resolveHfName('test', 'hf:test/stories-GGUF:Q8_0', { huggingFace: { endpoint } });
    assert.deepEqual(resolved.urls, [`${hub.endpoint}/mirror/test/stories-GGUF/resolve/main/stories260k-Q8_0.gguf`]);
  }
  const llama = await Llama.load('hf:test/stories-GGUF:Q8_0', { huggingFace: { endpoint: new URL('/mirror', hub.endpoint) } });
  assert.equal(llama.digest, digests.stories);
  llama.free();
  assert.equal(hfOptions('test', undefined).endpoint, DEFAULT_ENDPOINT);
  assert.equal(DEFAULT_ENDPOINT, 'https://huggingface.co');
});

test('a file loads through the 302 to the CDN: the model is the file\'s, and the token goes to the endpoint, not to the CDN', async () => {
  const before = hub.cdn.stats.requests;
  const llama = await Llama.load('hf:test/private:Q8_0', { huggingFace: { endpoint: hub.endpoint, token: TOKEN } });
  assert.equal(llama.digest, digests.stories);
  llama.free();
  assert.equal(hub.cdn.stats.requests, before + 1);
  const front = hub.requests.filter((r) => r.path.startsWith('/test/private/') || r.path.startsWith('/api/models/test/private'));
  assert.ok(front.length >= 2 && front.every((r) => r.authorization === `Bearer ${TOKEN}`), JSON.stringify(front));
});

test('projector \'auto\': the mmproj beside the model, of its quantization (else F16), loaded and paired with it', async () => {
  const resolved = await resolve('hf:test/vision-GGUF:Q8_0', { projector: true });
  assert.equal(resolved.projector, resolveUrl('test/vision-GGUF', 'main', 'mmproj-vlm-Q8_0.gguf'));
  assert.equal((await resolve('hf:test/vision-GGUF:F16', { projector: true })).projector, resolveUrl('test/vision-GGUF', 'main', 'mmproj-vlm-F16.gguf'));
  const llama = await Llama.load('hf:test/vision-GGUF:Q8_0', { ...options(), projector: 'auto' });
  assert.equal(llama.digest, digests.vlm);
  assert.equal(llama.projector.config.type, 'idefics3');
  llama.free();
  // A projector named as a model is: resolved the same way.
  const named = await Llama.load('hf:test/vision-GGUF:Q8_0', { ...options(), projector: 'hf:test/vision-GGUF/mmproj-vlm-F16.gguf' });
  assert.ok(named.projector);
  named.free();
  await assert.rejects(Llama.load(STORIES, { projector: 'auto' }), /projector 'auto' finds the projector beside a model named hf:/);
  await assert.rejects(Llama.load('hf:test/one', { ...options(), projector: 'auto' }), /hf:test\/one: the repository has no projector \(mmproj\*\.gguf\)/);
});

test('through a store: keyed by the resolve URL, listed under the name, resumed with Range, then loaded by its name with no request', async () => {
  const store = await ModelStore.open({ directory: join(dir, 'store') });
  const name = 'hf:test/stories-GGUF:Q8_0';
  hub.cdn.faults.dropAt = 500_000;
  await assert.rejects(Llama.load(name, { ...options(), store }), /terminated|stopped at byte \d+ of 1182656/);
  let [entry] = await store.list();
  assert.equal(entry.key, resolveUrl('test/stories-GGUF', 'main', 'stories260k-Q8_0.gguf'));
  assert.equal(entry.name, name); // the name it was downloaded by
  assert.ok(!entry.complete && entry.stored > 0 && entry.stored < entry.size, JSON.stringify(entry));
  const { bytes, ranges } = hub.cdn.stats;
  let progress = null;
  const llama = await Llama.load(name, { ...options(), store, onProgress: (p) => { progress = p; } });
  assert.equal(llama.digest, digests.stories);
  llama.free();
  assert.equal(hub.cdn.stats.ranges, ranges + 1); // resumed
  assert.equal(hub.cdn.stats.bytes - bytes, 1182656 - entry.stored); // only what was missing
  assert.equal(progress.fromStore, entry.stored);
  const partial = entry;
  [entry] = await store.list();
  assert.ok(entry.complete);
  // Stored whole: the name loads with no request at all (so offline too).
  const requests = hub.requests.length;
  const cdnRequests = hub.cdn.stats.requests;
  const again = await Llama.load(name, { ...options(), store });
  assert.equal(again.digest, digests.stories);
  again.free();
  assert.equal(hub.requests.length, requests);
  assert.equal(hub.cdn.stats.requests, cdnRequests);
  // revalidate asks the endpoint again (the file list, and the file's validators: a 304 keeps the stored copy).
  const revalidated = await Llama.load(name, { ...options(), store, revalidate: true });
  revalidated.free();
  assert.ok(hub.requests.length > requests);
  assert.equal(hub.cdn.stats.bytes, bytes + (1182656 - partial.stored)); // nothing downloaded again
  // Deleted: the name resolves, and downloads, again.
  await store.delete(entry.key);
  const fresh = await Llama.load(name, { ...options(), store });
  fresh.free();
  assert.equal(hub.cdn.stats.bytes, bytes + (1182656 - partial.stored) + 1182656);
});

test('LlamaWorker.load takes a name, its endpoint and projector \'auto\' to the worker', async () => {
  const worker = new LlamaWorker({ worker: nodeWorker, init: { threads: 1 } });
  try {
    const model = await worker.load('hf:test/vision-GGUF:Q8_0', { huggingFace: { endpoint: new URL(hub.endpoint) }, projector: 'auto' });
    assert.equal(model.projector.config.type, 'idefics3');
    await model.free();
  } finally {
    worker.terminate();
  }
});

test('refused, naming the name: an unknown repository (404), a missing quantization (listing those there are), a missing file, a revision', async () => {
  await assert.rejects(Llama.load('hf:test/nothing:Q4_K_M', options()), /Llama\.load: hf:test\/nothing:Q4_K_M: there is no repository test\/nothing \(.* answered 404\)/);
  await assert.rejects(Llama.load('hf:test/stories-GGUF:Q5_K_M', options()),
    /hf:test\/stories-GGUF:Q5_K_M: the repository has no Q5_K_M file; its quantizations: Q4_K_M, Q8_0, UD-Q4_K_XL/);
  await assert.rejects(Llama.load('hf:test/split-GGUF:Q8_0', options()), /its quantizations: Q4_K_M$/);
  await assert.rejects(Llama.load('hf:test/stories-GGUF/stories260k-Q2_K.gguf', options()),
    /the repository has no file stories260k-Q2_K\.gguf; its GGUF files: stories260k-Q8_0\.gguf, /);
  await assert.rejects(Llama.load('hf:test/stories-GGUF:Q8_0#v9', options()), /the repository test\/stories-GGUF has no revision v9/);
});

test('refused: a private repository without its token (401), a gated one without a token or with one that has no access (403)', async () => {
  await assert.rejects(Llama.load('hf:test/private:Q8_0', options()),
    /hf:test\/private:Q8_0: .* answered 401: the repository test\/private does not exist or is private; if it is private, pass a token .*options\.huggingFace\.token/);
  await assert.rejects(Llama.load('hf:test/private:Q8_0', { huggingFace: { endpoint: hub.endpoint, token: 'hf_other' } }),
    /answered 401: .*the token given has no access to it/);
  await assert.rejects(Llama.load('hf:test/gated:Q8_0', options()),
    /hf:test\/gated:Q8_0: test\/gated is gated: accept its licence at http:\/\/127\.0\.0\.1:\d+\/test\/gated while logged in, and pass a token/);
  await assert.rejects(Llama.load('hf:test/gated:Q8_0', { huggingFace: { endpoint: hub.endpoint, token: 'hf_other' } }),
    /was 403 Forbidden, not a model file \(access is refused: a gated model needs its licence accepted, and a token of that account\)/);
  const llama = await Llama.load('hf:test/gated:Q8_0', { huggingFace: { endpoint: hub.endpoint, token: TOKEN } });
  llama.free();
});

test('a name that does not parse, and bad options, are refused saying why', async () => {
  const bad = {
    'hf:': /names no repository/,
    'hf:test': /names no repository/,
    'hf:test/repo:': /an empty quantization tag/,
    'hf:test/repo:Q4:Q8': /more than one quantization tag/,
    'hf:test/repo:Q4_K_M/file.gguf': /a quantization tag and a file path together/,
    'hf:test/repo/notes.txt': /is not a \.gguf file/,
    'hf:test/repo/../x.gguf': /is not a file's/,
    'hf:-x/repo:Q8_0': /the owner "-x" is not a Hugging Face name/,
    'hf:test/repo:Q8_0#': /revision "" is no branch/,
  };
  for (const [name, why] of Object.entries(bad)) {
    assert.throws(() => parseHfName('Llama.load', name), (error) => error instanceof TypeError && why.test(error.message)
      && error.message.includes(JSON.stringify(name)) && /a name is hf:owner\/repo\/path\/file\.gguf or hf:owner\/repo:QUANT/.test(error.message), name);
  }
  await assert.rejects(Llama.load('hf:test', options()), /Llama\.load: the model name "hf:test" does not parse/);
  await assert.rejects(Llama.load('hf:test/one', { huggingFace: { endpoint: 'ftp://x' } }), /options\.huggingFace\.endpoint must be an http\(s\) URL/);
  await assert.rejects(Llama.load('hf:test/one', { huggingFace: { endpoint: hub.endpoint, token: 42 } }), /options\.huggingFace\.token must be a non-empty string/);
  await assert.rejects(Llama.load('hf:test/one', { huggingFace: { endpoint: hub.endpoint, tokens: 'x' } }), /options\.huggingFace has no option tokens/);
  await assert.rejects(Llama.load('hf:test/one', { huggingFace: 'x' }), /options\.huggingFace must be an object/);
});

/** The CLI run with `env` added (asynchronously: the hub answers from this process). */
function cli(env, ...args) {
  const child = spawn(process.execPath, [fileURLToPath(new URL('../../cli/kvcache-wasm.js', import.meta.url)), ...args],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  return new Promise((resolve) => child.on('close', (status) => resolve({ status, stdout, stderr })));
}

test('the CLI takes --model hf:..., resolved at $HF_ENDPOINT, kept in the store of the user\'s cache folder', async () => {
  const env = { HF_ENDPOINT: hub.endpoint, XDG_CACHE_HOME: join(dir, 'cache') };
  const first = await cli(env, 'generate', '--model', 'hf:test/stories-GGUF:Q8_0', '--prompt', 'Once upon a time', '--steps', '6');
  assert.equal(first.status, 0, first.stderr);
  assert.ok(first.stdout.length > 0);
  assert.match(first.stderr, /loaded hf:test\/stories-GGUF:Q8_0 in [\d.]+ s \(1\.1 MiB downloaded\)/);
  const cdn = hub.cdn.stats.requests;
  const second = await cli(env, 'generate', '--model', 'hf:test/stories-GGUF:Q8_0', '--prompt', 'Once upon a time', '--steps', '6');
  assert.equal(second.stdout, first.stdout); // greedy: the same text, from the stored file
  assert.match(second.stderr, /\(0\.0 MiB downloaded\)/);
  assert.equal(hub.cdn.stats.requests, cdn);
  const missing = await cli(env, 'generate', '--model', 'hf:test/nothing:Q8_0');
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /kvcache-wasm generate: hf:test\/nothing:Q8_0: there is no repository test\/nothing/);
  const auto = await cli(env, 'generate', '--model', 'model.gguf', '--mmproj', 'auto');
  assert.equal(auto.status, 2);
  assert.match(auto.stderr, /--mmproj auto finds the projector beside a model named hf:/);
  const mixed = await cli(env, 'generate', '--model', 'hf:test/vision-GGUF:Q8_0', '--mmproj', 'mmproj.gguf');
  assert.equal(mixed.status, 2);
  assert.match(mixed.stderr, /with an hf: name, give the other as an hf: name too \(or --mmproj auto\)/);
  const vision = await cli(env, 'generate', '--model', 'hf:test/vision-GGUF:Q8_0', '--mmproj', 'auto', '--steps', '2');
  assert.equal(vision.status, 0, vision.stderr);
  assert.match(vision.stderr, /loaded hf:test\/vision-GGUF:Q8_0 and its projector in/);
});

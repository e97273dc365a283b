// Hugging Face model names, as llama.cpp's -hf and node-llama-cpp's hf:
// taught people to write them, resolved to the URLs of the files they name:
//
//   hf:owner/repo/path/to/file.gguf     a file of the repository
//   hf:owner/repo:Q4_K_M                the file of that quantization (the tag's
//                                       case does not matter); hf:owner/repo
//                                       alone is its Q4_K_M file, or its one model
//   ...#revision                        a branch, tag or commit (default main),
//                                       as node-llama-cpp's hf: URIs give one
//
// The repository's file list comes from {endpoint}/api/models/{owner}/{repo}
// (/revision/{rev}); each file is {endpoint}/{owner}/{repo}/resolve/{rev}/{path},
// which Hugging Face answers with a redirect to its CDN (fetch follows it).
// A model cut in parts (-00001-of-00003.gguf) resolves to every part; a
// projector (mmproj*.gguf) beside the model is found when asked for. A
// store remembers what a name resolved to: a stored model loads by its name
// with no request, offline too.
import { shown } from '../runtime/options.js';
import { aborted } from './sources.js';
import { recallName, rememberName } from './store.js';

/** Where names resolve by default. */
export const DEFAULT_ENDPOINT = 'https://huggingface.co';
/** The quantization a name without one asks for (llama.cpp's default). */
const DEFAULT_TAG = 'Q4_K_M';
const NAME_FORMS = 'hf:owner/repo/path/file.gguf or hf:owner/repo:QUANT (Q4_K_M, Q8_0, ...), either with #revision';
// Hugging Face's rule for an owner's or a repository's name.
const ID = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?$/;
const TAG = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const PART = /-(\d{5})-of-(\d{5})$/;
// A quantization tag at the end of a file's stem (the stem's part after its last separator, UD- of unsloth's kept).
const QUANT_AT_END = /(?:^|[-._])((?:UD-)?(?:I?Q\d+(?:_[A-Z0-9]+)*|T?Q\d_\d|B?F16|F32|F64|MXFP4(?:_MOE)?))$/i;
// The projectors an 'auto' projector prefers, after one of the model's own quantization.
const PROJECTOR_ORDER = ['F16', 'BF16', 'Q8_0', 'F32'];

/** Whether `source` is a Hugging Face model name (a string beginning "hf:"). */
export function isHfName(source) {
  return typeof source === 'string' && source.startsWith('hf:');
}

/**
 * A name's parts: { owner, repo, path (a file's, else null), tag (else
 * null), revision (else null) }, or a TypeError saying why it does not parse.
 */
export function parseHfName(where, name) {
  const refuse = (why) => new TypeError(`${where}: the model name ${shown(name)} does not parse: ${why}; a name is ${NAME_FORMS}`);
  if (!isHfName(name)) throw refuse('it does not begin hf:');
  let rest = name.slice(3);
  let revision = null;
  const hash = rest.indexOf('#');
  if (hash >= 0) {
    revision = rest.slice(hash + 1);
    rest = rest.slice(0, hash);
    if (revision === '' || /[\s#?]/.test(revision) || revision.split('/').some((s) => s === '' || s === '.' || s === '..')) {
      throw refuse(`its revision ${shown(revision)} is no branch, tag or commit`);
    }
  }
  const segments = rest.split('/');
  if (segments.length < 2) throw refuse('it names no repository (owner/repo)');
  const [owner, repoAndTag, ...path] = segments;
  let [repo, tag = null, ...more] = repoAndTag.split(':');
  if (more.length > 0 || tag === '') throw refuse(`${shown(repoAndTag)} has ${tag === '' ? 'an empty' : 'more than one'} quantization tag`);
  if (!ID.test(owner)) throw refuse(`the owner ${shown(owner)} is not a Hugging Face name`);
  if (!ID.test(repo)) throw refuse(`the repository ${shown(repo)} is not a Hugging Face name`);
  if (path.length === 0) {
    if (tag !== null && !TAG.test(tag)) throw refuse(`the quantization tag ${shown(tag)} is not one`);
    return { owner, repo, path: null, tag, revision };
  }
  if (tag !== null) throw refuse('a quantization tag and a file path together (give one of them)');
  if (path.some((s) => s === '' || s === '.' || s === '..' || /[\s?]/.test(s))) throw refuse(`the path ${shown(path.join('/'))} is not a file's`);
  if (!/\.gguf$/i.test(path.at(-1))) throw refuse(`the file ${shown(path.at(-1))} is not a .gguf file`);
  return { owner, repo, path: path.join('/'), tag: null, revision };
}

/** huggingFace options, checked: { endpoint (no trailing slash), token (or null) }. */
export function hfOptions(where, options) {
  if (options === undefined) return { endpoint: DEFAULT_ENDPOINT, token: null };
  if (typeof options !== 'object' || options === null) throw new TypeError(`${where}: options.huggingFace must be an object { endpoint, token } (got ${shown(options)})`);
  const unknown = Object.keys(options).filter((key) => key !== 'endpoint' && key !== 'token');
  if (unknown.length > 0) throw new TypeError(`${where}: options.huggingFace has no option ${unknown.join(', ')} (it takes endpoint and token)`);
  const { endpoint = DEFAULT_ENDPOINT, token = null } = options;
  let url;
  try {
    url = new URL(String(endpoint));
  } catch {
    url = null;
  }
  if ((typeof endpoint !== 'string' && !(endpoint instanceof URL)) || !url || !/^https?:$/.test(url.protocol) || url.search || url.hash) {
    throw new TypeError(`${where}: options.huggingFace.endpoint must be an http(s) URL without a query (got ${shown(endpoint)})`);
  }
  if (token !== null && (typeof token !== 'string' || token === '' || /\s/.test(token))) {
    throw new TypeError(`${where}: options.huggingFace.token must be a non-empty string without spaces (got ${typeof token === 'string' ? 'a string with spaces' : shown(token)})`);
  }
  return { endpoint: url.href.replace(/\/+$/, ''), token };
}

const encodePath = (path) => path.split('/').map(encodeURIComponent).join('/');
const baseName = (path) => path.split('/').at(-1);
/** A file's stem: its name without .gguf and without a part's -00001-of-00003. */
const stemOf = (path) => baseName(path).replace(/\.gguf$/i, '').replace(PART, '');
const isProjector = (path) => /^mmproj/i.test(baseName(path)) && /\.gguf$/i.test(path);
const isModel = (path) => /\.gguf$/i.test(path) && !isProjector(path) && !/imatrix/i.test(baseName(path));

/** The quantization a file's name says (its stem's end, else a folder named as one), upper-cased; null when none. */
function quantOf(path) {
  const match = QUANT_AT_END.exec(stemOf(path));
  if (match) return match[1].toUpperCase();
  const folder = path.split('/').slice(0, -1).reverse().find((s) => QUANT_AT_END.test(`-${s}`));
  return folder ? folder.toUpperCase() : null;
}

/** Whether `path` is a file of quantization `tag` (case-blind): its stem ends in it, or a folder of its path is it. */
function hasTag(path, tag) {
  const upper = tag.toUpperCase();
  const stem = stemOf(path).toUpperCase();
  if (stem === upper || (stem.endsWith(upper) && /[-._]/.test(stem[stem.length - upper.length - 1]))) return true;
  return path.split('/').slice(0, -1).some((s) => s.toUpperCase() === upper);
}

/**
 * The files `path` names: itself, or every part of the split model it is a
 * part of (each found in `files`, in order); a missing one is refused.
 */
function partsOf(where, name, path, files) {
  const match = PART.exec(path.replace(/\.gguf$/i, ''));
  if (!match) return [path];
  const count = Number(match[2]);
  const stem = path.replace(/-\d{5}-of-\d{5}\.gguf$/i, '');
  const parts = Array.from({ length: count }, (_, i) => `${stem}-${String(i + 1).padStart(5, '0')}-of-${match[2]}.gguf`);
  const missing = parts.filter((p) => !files.includes(p));
  if (missing.length > 0) throw new TypeError(`${where}: ${name}: the repository lacks part${missing.length > 1 ? 's' : ''} ${missing.join(', ')} of the split model ${baseName(path)}`);
  return parts;
}

/** The repository's file list at `revision` from the endpoint's API, or an error naming the name and saying why not. */
async function listFiles(where, name, { owner, repo, revision }, { endpoint, token, signal }) {
  const api = `${endpoint}/api/models/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}${revision ? `/revision/${encodeURIComponent(revision)}` : ''}`;
  let response;
  try {
    response = await fetch(api, { signal, headers: token ? { authorization: `Bearer ${token}` } : {} });
  } catch (error) {
    if (signal?.aborted) throw aborted(signal);
    throw new TypeError(`${where}: ${name}: ${api} could not be reached (${error.message})`, { cause: error });
  }
  const repository = `${owner}/${repo}`;
  const page = `${endpoint}/${repository}`;
  const code = response.headers.get('x-error-code');
  if (!response.ok) response.body?.cancel().catch(() => {});
  if (response.status === 401) {
    throw new TypeError(`${where}: ${name}: ${endpoint} answered 401: the repository ${repository} does not exist or is private` +
      (token ? ', and the token given has no access to it' : '; if it is private, pass a token with access to it (options.huggingFace.token)'));
  }
  if (response.status === 403) {
    throw new TypeError(`${where}: ${name}: ${repository} is gated (${endpoint} answered 403${code ? ` ${code}` : ''}): accept its licence at ${page} ` +
      `while logged in, and pass a token of that account (options.huggingFace.token)`);
  }
  if (response.status === 404) {
    const what = code === 'RevisionNotFound' || (revision && code !== 'RepoNotFound') ? `the repository ${repository} has no revision ${revision}, or does not exist`
      : `there is no repository ${repository}`;
    throw new TypeError(`${where}: ${name}: ${what} (${endpoint} answered 404)`);
  }
  if (!response.ok) throw new TypeError(`${where}: ${name}: ${api} answered ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`);
  let info;
  try {
    info = await response.json();
  } catch {
    info = null;
  }
  if (!Array.isArray(info?.siblings)) throw new TypeError(`${where}: ${name}: ${api} did not answer with a repository's file list (siblings)`);
  if (info.gated && !token) {
    throw new TypeError(`${where}: ${name}: ${repository} is gated: accept its licence at ${page} while logged in, and pass a token of that account (options.huggingFace.token)`);
  }
  return info.siblings.map((s) => s?.rfilename).filter((f) => typeof f === 'string');
}

/** The model file `tag` picks among `files` (every part, when split), or an error listing the quantizations there are. */
function pickByTag(where, name, tag, files) {
  const models = files.filter(isModel).sort((a, b) => a.split('/').length - b.split('/').length || a.localeCompare(b));
  const first = (list) => list.find((f) => !PART.test(f.replace(/\.gguf$/i, '')) || /-00001-of-/.test(f));
  let chosen = first(models.filter((f) => hasTag(f, tag ?? DEFAULT_TAG)));
  const stems = [...new Set(models.map((f) => `${f.split('/').slice(0, -1).join('/')}/${stemOf(f)}`))];
  if (!chosen && tag === null && stems.length === 1) chosen = first(models); // a repository of one model: hf:owner/repo is it
  if (chosen) return chosen;
  const quants = [...new Set(models.map((f) => quantOf(f) ?? baseName(f)))].sort();
  if (models.length === 0) throw new TypeError(`${where}: ${name}: the repository has no GGUF model file`);
  throw new TypeError(`${where}: ${name}: the repository has no ${tag ?? `${DEFAULT_TAG} (the default)`} file; its quantizations: ${quants.join(', ')}`);
}

/** The projector 'auto' finds beside `model` among `files`: of the model's quantization, else F16, BF16, Q8_0, F32, else the first. */
function pickProjector(where, name, model, files) {
  const projectors = files.filter(isProjector).sort();
  if (projectors.length === 0) throw new TypeError(`${where}: ${name}: the repository has no projector (mmproj*.gguf) to go with ${baseName(model)}`);
  const own = quantOf(model);
  for (const tag of [own, ...PROJECTOR_ORDER]) {
    const found = tag && projectors.find((p) => hasTag(p, tag));
    if (found) return found;
  }
  return projectors[0];
}

/**
 * Resolves a name: { urls (the model's file, or its parts in order),
 * projector (its URL, or null), headers (the token's, for every request),
 * names: { model, projector } (the hf: names of the files resolved, for the
 * store to list) }. With `projector` true, the repository's projector is
 * found too. With a store, a name it resolved before (at this endpoint, all
 * of whose files it holds whole) resolves from there with no request
 * (`revalidate` asks the endpoint again); a name that resolves is
 * remembered.
 */
export async function resolveHfName(where, name, { huggingFace, projector = false, signal, store = null, revalidate = false } = {}) {
  const parsed = parseHfName(where, name);
  const { endpoint, token } = hfOptions(where, huggingFace);
  const headers = token ? { authorization: `Bearer ${token}` } : {};
  const key = `${endpoint} ${name}${projector ? ' +projector' : ''}`;
  const remembered = store ? await store[recallName](key) : null;
  if (remembered && !revalidate) return { ...remembered, headers };
  let files;
  try {
    files = await listFiles(where, name, parsed, { endpoint, token, signal });
  } catch (error) {
    // Offline, what the store remembers serves.
    if (remembered && error instanceof TypeError && / could not be reached /.test(error.message)) return { ...remembered, headers };
    throw error;
  }
  const revision = parsed.revision ?? 'main';
  let path = parsed.path;
  if (path !== null && !files.includes(path)) {
    const gguf = files.filter((f) => /\.gguf$/i.test(f));
    throw new TypeError(`${where}: ${name}: the repository has no file ${path}${gguf.length ? `; its GGUF files: ${gguf.join(', ')}` : ''}`);
  }
  path ??= pickByTag(where, name, parsed.tag, files);
  const fileName = (p) => `hf:${parsed.owner}/${parsed.repo}/${p}${parsed.revision ? `#${parsed.revision}` : ''}`;
  const url = (p) => `${endpoint}/${encodeURIComponent(parsed.owner)}/${encodeURIComponent(parsed.repo)}/resolve/${encodeURIComponent(revision)}/${encodePath(p)}`;
  const parts = partsOf(where, name, path, files);
  const projectorPath = projector ? pickProjector(where, name, path, files) : null;
  const resolved = {
    urls: parts.map(url),
    projector: projectorPath && url(projectorPath),
    names: { model: fileName(path), projector: projectorPath && fileName(projectorPath) },
  };
  if (store) await store[rememberName](key, resolved);
  return { ...resolved, headers };
}


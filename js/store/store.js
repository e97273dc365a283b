// A model store: model files downloaded once and kept where the runtime
// keeps large files (backends.js), and conversations saved beside them.
//
// A model is an entry keyed by its URL: its bytes as pieces of at most
// PIECE_BYTES, each written whole, and meta.json (the URL, the server's
// validators, the pieces, complete or not, the digest of what loaded). A
// download writes a partial entry piece by piece; a later load resumes it
// with a Range request validated by If-Range. An entry is complete once
// every byte is there and the model loaded from them; each later load
// checks the digest of what it read against the stored one, and a damaged
// copy is dropped and downloaded again.
//
//   const store = await ModelStore.open();
//   const llama = await Llama.load(url, { store, onProgress });   // the second time: no network
//   await store.list(); await store.delete(url); await store.usage();
import { checkObject, shown } from '../runtime/checks.js';
import { toUrl } from '../runtime/files.js';
import { checkKeys } from '../runtime/options.js';
import { aborted, checkResponse, letGo, sourceChunks } from './sources.js';
import { BACKENDS, jsonBytes, openBackend, readMeta } from './backends.js';
import { StoredPrefixes } from './prefixes.js';

const PIECE_BYTES = 4 << 20;
const WRITE_BEHIND_BYTES = 64 << 20;
const READ_AHEAD = 4;
const OPEN_OPTIONS = ['name', 'backend', 'directory', 'persist'];
// A piece's file name: its offset, zero-padded so names sort as offsets.
const pieceName = (offset) => String(offset).padStart(15, '0');

/** The internal entry points Llama.load and Chat use. */
export const loadThrough = Symbol('loadThrough');
export const putConversation = Symbol('putConversation');
export const getConversation = Symbol('getConversation');
// What a model's name (hf.js) resolved to, remembered: [rememberName](key, resolved), [recallName](key).
export const rememberName = Symbol('rememberName');
export const recallName = Symbol('recallName');

/** A short, stable file name for a key (an FNV-1a pair over its UTF-16 code units). */
function idOf(key) {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = 0; i < key.length; i++) {
    a = Math.imul(a ^ key.charCodeAt(i), 0x01000193);
    b = Math.imul(b ^ key.charCodeAt(i), 0x5bd1e995);
    b ^= b >>> 15;
  }
  return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
}

/** The bytes an entry's stored pieces hold. */
const storedLength = (meta) => meta.pieces.reduce((sum, [, length]) => sum + length, 0);

// Loads of one model in this realm, in turn, where there are no Web Locks (Node, Deno, Bun).
const turns = new Map();

/**
 * Runs `body` holding the lock `name`: a Web Lock where the runtime has
 * them (another tab's load of the same model waits, then finds it stored),
 * else a turn among this realm's loads.
 */
function locked(name, signal, body) {
  const locks = globalThis.navigator?.locks;
  if (typeof locks?.request === 'function') return locks.request(name, signal ? { signal } : {}, body);
  const run = (turns.get(name) ?? Promise.resolve()).then(body);
  const settled = run.catch(() => {});
  turns.set(name, settled);
  settled.then(() => turns.get(name) === settled && turns.delete(name));
  return run;
}

export class ModelStore {
  #backend;
  #name;
  #persist;
  #asked = false;
  #prefixes;

  /**
   * Opens the store `name` (default 'default'): in the origin private file
   * system of a page or worker, a folder in Node, Deno and Bun
   * (options.directory; default $XDG_CACHE_HOME or ~/.cache, then
   * kvcache-wasm/<name>), or the Cache API where OPFS cannot write.
   * options.backend picks one ('opfs', 'folder', 'cache'). A browser is
   * asked to keep the store's data when a first download begins, which
   * does not wait for its answer (navigator.storage.persist(); options.persist
   * false: never).
   */
  static async open(options = {}) {
    const where = 'ModelStore.open';
    checkObject(where, 'options', options);
    checkKeys(where, options, OPEN_OPTIONS);
    const { name = 'default', backend, directory, persist = true } = options;
    if (typeof name !== 'string' || !/^[\w.-]{1,64}$/.test(name)) {
      throw new TypeError(`${where}: options.name must be 1 to 64 letters, digits, '_', '.' or '-' (got ${shown(name)})`);
    }
    if (backend !== undefined && !BACKENDS.includes(backend)) {
      throw new RangeError(`${where}: options.backend must be one of ${BACKENDS.map((b) => `'${b}'`).join(', ')} (got ${shown(backend)})`);
    }
    if (directory !== undefined && typeof directory !== 'string') throw new TypeError(`${where}: options.directory must be a string (got ${shown(directory)})`);
    for (const kind of backend ? [backend] : BACKENDS) {
      const opened = await openBackend(kind, name, directory);
      if (opened) return new ModelStore(opened, name, persist !== false);
    }
    throw new Error(`${where}: ${backend ? `the ${backend} backend` : 'no backend (OPFS, a folder, the Cache API)'} can store files here`);
  }

  constructor(backend, name, persist) {
    if (!backend?.put) throw new TypeError('new ModelStore: use ModelStore.open');
    this.#backend = backend;
    this.#name = name;
    this.#persist = persist;
    this.#prefixes = new StoredPrefixes(backend, name, locked);
  }

  /**
   * The store's prefix cache (StoredPrefixes): sessions' caches kept under
   * the tokens they hold, which a later session of the same model and
   * cache mode -- in this page or another, a worker, after a reload --
   * restores instead of computing those tokens again. A model loaded
   * through the store uses it unless loaded with { storePrefixes: false }.
   * list(), delete(), usage(), budgetBytes.
   */
  get prefixes() { return this.#prefixes; }

  /** ModelStore.open's options that open this store again (in a worker). */
  get openOptions() {
    return { name: this.#name, backend: this.#backend.kind, ...(this.#backend.kind === 'folder' && { directory: this.#backend.where }), persist: this.#persist };
  }

  /** The store's name, its backend ('opfs', 'folder' or 'cache') and where that keeps it. */
  get name() { return this.#name; }
  get backend() { return this.#backend.kind; }
  get where() { return this.#backend.where; }

  /**
   * The stored models: { key (the URL), size (null while unknown), stored
   * (bytes held), complete, digest (Llama#digest, once complete), etag,
   * lastModified, storedAt }, complete ones first.
   */
  async list() {
    const out = [];
    for (const id of await this.#backend.names('models')) {
      const meta = await this.#meta(`models/${id}`);
      if (!meta) continue;
      out.push({
        key: meta.url, name: meta.name ?? null, size: meta.size, stored: storedLength(meta),
        complete: meta.complete, digest: meta.digest, etag: meta.etag, lastModified: meta.lastModified, storedAt: meta.storedAt,
      });
    }
    return out.sort((a, b) => Number(b.complete) - Number(a.complete) || a.key.localeCompare(b.key));
  }

  /** Deletes the model stored under `key` (its URL), complete or partial, and its prefix cache's entries. True when there was one. */
  async delete(key) {
    const dir = `models/${idOf(keyOf('ModelStore.delete', key))}`;
    const meta = await this.#meta(dir);
    await this.#backend.remove(dir);
    if (meta?.digest) await this.prefixes.delete({ model: meta.digest });
    return meta !== null;
  }

  /**
   * { bytes, quota, available }: the bytes the store's models and
   * conversations hold, and the runtime's quota and free bytes (null where
   * it does not say).
   */
  async usage() {
    let bytes = (await this.list()).reduce((sum, m) => sum + m.stored, 0);
    for (const c of await this.conversations()) bytes += c.bytes;
    bytes += (await this.prefixes.usage()).bytes;
    const space = await this.#backend.space();
    return { bytes, quota: space?.quota ?? null, available: space ? Math.max(0, space.quota - space.used) : null };
  }

  /** Asks the browser to keep the store's data under storage pressure (navigator.storage.persist()); false where it cannot. */
  async persist() {
    return (await globalThis.navigator?.storage?.persist?.()) ?? false;
  }

  /** The saved conversations: { name, model (its model's digest: list()'s), bytes, savedAt }. */
  async conversations() {
    const out = [];
    for (const id of await this.#backend.names('conversations')) {
      const meta = await this.#meta(`conversations/${id}`);
      if (meta) out.push({ name: meta.name, model: meta.model.digest, bytes: meta.bytes, savedAt: meta.savedAt });
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Deletes the conversation saved as `name`. True when there was one. */
  async deleteConversation(name) {
    const dir = `conversations/${idOf(checkName('ModelStore.deleteConversation', name))}`;
    const had = (await this.#meta(dir)) !== null;
    await this.#backend.remove(dir);
    return had;
  }

  #meta(dir) {
    return readMeta(this.#backend, dir);
  }

  /** Stores a conversation's bytes under `name`, with its model's identity ({ digest }). */
  async [putConversation](name, bytes, model) {
    const dir = `conversations/${idOf(name)}`;
    await this.#backend.put(`${dir}/chat`, bytes);
    await this.#backend.put(`${dir}/meta.json`, jsonBytes({ name, model, bytes: bytes.length, savedAt: new Date().toISOString() }));
  }

  /** { bytes, model } of the conversation saved as `name`, or null. */
  async [getConversation](name) {
    const dir = `conversations/${idOf(name)}`;
    const meta = await this.#meta(dir);
    if (!meta || meta.name !== name) return null;
    const bytes = await this.#backend.read(`${dir}/chat`);
    return bytes?.length === meta.bytes ? { bytes, model: meta.model } : null;
  }

  /** Remembers what the name `key` resolved to ({ urls, projector, names }). */
  async [rememberName](key, resolved) {
    await this.#backend.put(`names/${idOf(key)}/meta.json`, jsonBytes({ key, ...resolved }));
  }

  /** What the name `key` resolved to, while the store holds every file of it whole; else null. */
  async [recallName](key) {
    const meta = await this.#meta(`names/${idOf(key)}`);
    if (meta?.key !== key) return null;
    for (const url of [...meta.urls, ...(meta.projector ? [meta.projector] : [])]) {
      if (!(await this.#meta(`models/${idOf(url)}`))?.complete) return null;
    }
    return { urls: meta.urls, projector: meta.projector, names: meta.names };
  }

  /**
   * Llama.load through the store: `consume(parts, onProgress)` reads the
   * sources of `urls` (one file, or the parts of a split one: [{ name,
   * total, chunks }]) into a model and gives the Llama. Each part's bytes
   * come from its stored entry, and from the network for what it lacks,
   * stored as they come. Progress adds fromStore and fromNetwork (bytes)
   * and, when a download started over, restarted (why). `headers` go with
   * every request (a token's); `label` is the name the files are listed
   * under (an hf: name), or null.
   */
  async [loadThrough](where, urls, { signal, onProgress, revalidate = false, headers = {}, label = null }, consume) {
    const keys = urls.map((url) => keyOf(where, url));
    const dirs = keys.map((key) => `models/${idOf(key)}`);
    return locked(`kvcache-wasm:${this.#name}:${dirs[0]}`, signal, async () => {
      const report = { fromStore: 0, fromNetwork: 0, restarted: null };
      for (let attempt = 0; ; attempt++) {
        const parts = [];
        try {
          for (const [i, key] of keys.entries()) parts.push(await this.#part(where, key, dirs[i], { signal, revalidate, report, headers, label }));
          let llama;
          try {
            llama = await consume(parts.map(({ name, total, chunks }) => ({ name, total, chunks })), progress(onProgress, report));
          } catch (error) {
            if (error?.name !== 'GgufError') throw error;
            // A stored file that no longer reads is damage; a downloaded one that does not read was no model: not kept.
            if (parts.some((part) => part.stored)) throw damage(error.message);
            for (const dir of dirs) await this.#backend.remove(dir);
            throw error;
          }
          if (parts.some((part) => part.stored && part.meta.digest !== llama.digest)) {
            llama.free();
            throw damage('its bytes changed since they were stored');
          }
          for (const part of parts) if (!part.stored) await part.finish(llama.digest);
          return llama;
        } catch (error) {
          for (const part of parts) await letGo(part);
          // A stored copy that is not what was stored: dropped, and downloaded once more.
          if (!error?.[damaged] || attempt > 0) throw error;
          for (const [i, part] of parts.entries()) if (part.stored) await this.#backend.remove(dirs[i]);
          report.restarted = `the stored copy was damaged (${error.message}); downloading it again`;
        }
      }
    });
  }

  /**
   * One file's source through the store: { name, total, chunks, stored
   * (complete before this load), meta, finish(digest) (marks a download
   * complete) }: the stored entry, or what it lacks from the network.
   */
  async #part(where, key, dir, { signal, revalidate, report, headers: given, label }) {
    const backend = this.#backend;
    let meta = await this.#meta(dir);
    if (meta && meta.url !== key) meta = null; // another key with this id: replaced
    let response = null;
    if (meta?.complete) {
      if (revalidate) response = await conditionalFetch(key, meta, signal, given);
      if (!response) return { name: key, total: meta.size, chunks: storedChunks(backend, dir, meta, report, signal), stored: true, meta };
      await backend.remove(dir);
      report.restarted = 'the server has a newer file';
      meta = null;
    }
    if (this.#persist && !this.#asked) {
      // Asked, not awaited: Firefox answers when its user answers a prompt (headless, never), and the download cannot wait for that.
      this.#asked = true;
      this.persist().catch(() => {});
    }
    let have = meta ? storedLength(meta) : 0;
    if (!response) {
      const headers = have > 0 ? { ...given, range: `bytes=${have}-`, 'if-range': meta.etag ?? meta.lastModified } : { ...given };
      if (have > 0 && !headers['if-range']) delete headers['if-range'];
      response = await fetch(key, { signal, headers });
    }
    checkResponse(where, response);
    const resumed = have > 0 && response.status === 206 && resumeMatches(response, meta, have);
    if (have > 0 && !resumed) {
      await backend.remove(dir);
      report.restarted = response.status === 206 ? 'the server\'s file changed since the download began'
        : 'the server sent the whole file (it does not resume, or its file changed)';
      have = 0;
      meta = null;
      if (response.status !== 200) {
        response.body?.cancel().catch(() => {});
        response = await fetch(key, { signal, headers: given });
        checkResponse(where, response);
      }
    }
    if (!meta) {
      const length = Number(response.headers.get('content-length'));
      meta = {
        url: key, name: label, size: Number.isSafeInteger(length) && length > 0 && !response.headers.get('content-encoding') ? length : null,
        etag: response.headers.get('etag'), lastModified: response.headers.get('last-modified'),
        pieces: [], complete: false, digest: null, storedAt: null,
      };
    }
    await this.#checkSpace(where, key, meta.size === null ? null : meta.size - have);
    const network = await sourceChunks(where, response, { signal });
    const stored = have > 0 ? storedChunks(backend, dir, meta, report, signal) : null;
    const writer = pieceWriter(where, backend, dir, meta, have, () => this.#backend.space());
    const chunks = (async function* all() {
      if (stored) yield* stored;
      let complete = false;
      try {
        for await (const chunk of network.chunks) {
          await writer.add(chunk);
          report.fromNetwork += chunk.length;
          yield chunk;
        }
        complete = true;
      } finally {
        // A drop or an abort keeps what came, to resume from; a write that failed fails a load that did not.
        const flushed = writer.flush();
        if (complete) await flushed;
        else await flushed.catch(() => {});
      }
      if (meta.size !== null && writer.at !== meta.size) {
        throw new TypeError(`${where}: the download of ${key} stopped at byte ${writer.at} of ${meta.size}; what came is stored: load it again to resume`);
      }
    })();
    return {
      name: key, total: meta.size, chunks, stored: false, meta,
      cancel: network.cancel,
      async finish(digest) {
        Object.assign(meta, { size: writer.at, complete: true, digest, storedAt: new Date().toISOString() });
        await backend.put(`${dir}/meta.json`, jsonBytes(meta));
      },
    };
  }

  /** Refuses, naming the bytes, a download that the runtime says will not fit. */
  async #checkSpace(where, key, needed) {
    if (needed === null) return;
    const space = await this.#backend.space();
    if (space && needed > space.quota - space.used) {
      throw new DOMException(`${where}: storing ${key} needs ${needed} more bytes; ${this.where} has ${Math.max(0, space.quota - space.used)} free`, 'QuotaExceededError');
    }
  }
}

const damaged = Symbol('damaged');
const damage = (why) => Object.assign(new Error(why), { [damaged]: true });

/** A key from a URL or a string (resolved as Llama.load resolves it). */
function keyOf(where, url) {
  if (typeof url !== 'string' && !(url instanceof URL)) throw new TypeError(`${where}: a stored model's key is its URL, a string or a URL (got ${shown(url)})`);
  return toUrl(url).href;
}

/** A conversation's name, checked. */
export function checkName(where, name) {
  if (typeof name !== 'string' || name.length === 0 || name.length > 256) throw new TypeError(`${where}: name must be a string of 1 to 256 characters (got ${shown(name)})`);
  return name;
}

function progress(onProgress, report) {
  return onProgress && ((p) => onProgress({ ...p, fromStore: report.fromStore, fromNetwork: report.fromNetwork, restarted: report.restarted }));
}

/** A 206's Content-Range begins at `have` of the stored size, and its validator is the stored one. */
function resumeMatches(response, meta, have) {
  const range = /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(response.headers.get('content-range') ?? '');
  if (!range || Number(range[1]) !== have) return false;
  if (meta.size !== null && range[2] !== '*' && Number(range[2]) !== meta.size) return false;
  const etag = response.headers.get('etag');
  return !(meta.etag && etag && etag !== meta.etag);
}

/** A revalidation of a complete entry: null when the server says it is current (304) or cannot be asked; else the new file's response. */
async function conditionalFetch(key, meta, signal, given) {
  const headers = { ...given };
  if (meta.etag) headers['if-none-match'] = meta.etag;
  if (meta.lastModified) headers['if-modified-since'] = meta.lastModified;
  let response;
  try {
    response = await fetch(key, { signal, headers });
  } catch (error) {
    if (signal?.aborted) throw aborted(signal);
    return null; // offline: the stored copy serves
  }
  if (response.status === 304 || !response.ok) {
    response.body?.cancel().catch(() => {});
    return null;
  }
  if (meta.etag && response.headers.get('etag') === meta.etag) {
    response.body?.cancel().catch(() => {});
    return null;
  }
  return response;
}

/**
 * The stored pieces of an entry, in order, READ_AHEAD of them read at once
 * (a file system reads several faster than one after another); a missing or
 * short piece is damage.
 */
async function* storedChunks(backend, dir, meta, report, signal) {
  const reads = [];
  let next = 0;
  const readAhead = () => {
    while (reads.length < READ_AHEAD && next < meta.pieces.length) {
      const [offset, length] = meta.pieces[next++];
      const bytes = backend.read(`${dir}/${pieceName(offset)}`);
      bytes.catch(() => {}); // awaited in turn; one read after a failure is never awaited
      reads.push({ offset, length, bytes });
    }
  };
  let at = 0;
  readAhead();
  while (reads.length > 0) {
    if (signal?.aborted) throw aborted(signal);
    const { offset, length, bytes: reading } = reads.shift();
    readAhead();
    if (offset !== at) throw damage(`piece at ${offset} where ${at} was expected`);
    const bytes = await reading;
    if (!bytes || bytes.length !== length) throw damage(`the piece at byte ${offset} is ${bytes ? `${bytes.length} bytes, not ${length}` : 'missing'}`);
    at += length;
    report.fromStore += length;
    yield bytes;
  }
}

/**
 * Gathers a download's chunks into pieces and stores each one whole, then
 * the entry's meta.json with it: what is stored is always a prefix of the
 * file that meta.json lists. The writes run behind the download, up to
 * WRITE_BEHIND_BYTES ahead of them: the network is read as fast as the
 * model takes it, so that a connection that drops loses nothing the
 * browser had received (a fetch's queued chunks go with its error), and
 * storage as slow as a browser's file system writes (30 MB/s here) does not
 * hold the load back. flush() stores a last, shorter piece and waits for
 * every write; `at` is the bytes stored.
 */
function pieceWriter(where, backend, dir, meta, have, space) {
  let piece = new Uint8Array(PIECE_BYTES);
  let fill = 0;
  let queued = 0; // bytes of pieces waiting for their write
  let next = have; // the offset of the next piece
  let writing = Promise.resolve();
  let failed = null;
  const store = async (offset, bytes) => {
    try {
      await backend.put(`${dir}/${pieceName(offset)}`, bytes);
      meta.pieces.push([offset, bytes.length]);
      writer.at += bytes.length;
      await backend.put(`${dir}/meta.json`, jsonBytes(meta));
    } catch (error) {
      if (error?.name !== 'QuotaExceededError') throw error;
      const s = await space().catch(() => null);
      const needed = meta.size === null ? bytes.length : meta.size - writer.at;
      throw new DOMException(`${where}: storing ${meta.url} needs ${needed} more bytes; ${s ? `${Math.max(0, s.quota - s.used)} are free` : 'the store is full'} (${writer.at} bytes are stored, to resume from)`, 'QuotaExceededError');
    } finally {
      queued -= bytes.length;
    }
  };
  const enqueue = () => {
    const bytes = piece.subarray(0, fill);
    const offset = next;
    next += fill;
    queued += fill;
    writing = writing.then(() => (failed ? undefined : store(offset, bytes))).catch((error) => { failed ??= error; });
    piece = new Uint8Array(PIECE_BYTES);
    fill = 0;
  };
  const writer = {
    at: have,
    async add(chunk) {
      if (failed) throw failed;
      for (let from = 0; from < chunk.length;) {
        const n = Math.min(chunk.length - from, PIECE_BYTES - fill);
        piece.set(chunk.subarray(from, from + n), fill);
        fill += n;
        from += n;
        if (fill === PIECE_BYTES) enqueue();
      }
      if (queued > WRITE_BEHIND_BYTES) await writing;
    },
    async flush() {
      if (fill > 0 && !failed) enqueue();
      await writing;
      if (failed) throw failed;
    },
  };
  return writer;
}

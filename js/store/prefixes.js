// The store's prefix cache: sessions' caches kept on disk under the tokens
// they hold, so that a later page, tab, worker or isolate that begins with
// the same tokens restores them instead of computing them again.
//
// An entry is a folder prefixes/<group>/<length>-<hash>/ with `session`
// (what the runner saved: its tokens, then the cache's snapshot, whose
// CRC-32 finds damage) and meta.json (the group's model digest and mode,
// the entry's length and bytes, when it was saved and last used). A group
// is one model file in one cache mode. The folder's name carries the
// token count and a hash of the tokens, so a lookup lists one folder and
// hashes the prompt once; the tokens saved in the entry are what a match
// is checked against. Entries are written whole or not at all (meta.json
// last), under a lock shared by the tabs and workers of an origin; the
// least recently used go when the entries' bytes pass the budget.
//
// This file knows no model: the runner (model/stored-prefixes.js) says what
// a group, an entry's tokens and its bytes are.

import { jsonBytes, readMeta } from './backends.js';

/** The least tokens an entry holds: shorter prefixes cost more to look up and store than to compute. */
export const LEAST_PREFIX_TOKENS = 64;
// The budget when the app sets none: a tenth of the store's quota, at most this.
const DEFAULT_BUDGET_CAP = 2 ** 31;
const DEFAULT_BUDGET_SHARE = 0.1;
// Reads of an entry's file: pieces of this size, one read ahead of the one being used.
const READ_BYTES = 4 << 20;

/** A folder name for a group: its model's digest and its cache mode. */
const groupName = (model, mode) => `${String(model).replace(/[^\w]/g, '').slice(0, 32)}-${mode}`;

/**
 * The hash of each prefix of `tokens` at the lengths asked, in one pass: a
 * 64-bit FNV-1a pair over the ids, as 16 hex digits. A name, not a proof:
 * a match is checked against the entry's own tokens.
 */
function prefixHashes(tokens, lengths) {
  const wanted = new Set(lengths);
  const out = new Map();
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = 0; i < tokens.length && out.size < wanted.size; i++) {
    const t = tokens[i] >>> 0;
    for (let shift = 0; shift < 32; shift += 8) {
      const byte = (t >>> shift) & 0xff;
      a = Math.imul(a ^ byte, 0x01000193);
      b = Math.imul(b ^ byte, 0x5bd1e995);
      b ^= b >>> 15;
    }
    if (wanted.has(i + 1)) out.set(i + 1, (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0'));
  }
  return out;
}

const entryName = (length, hash) => `${length}-${hash}`;
const parseName = (name) => {
  const match = /^(\d+)-([0-9a-f]{16})$/.exec(name);
  return match ? { length: Number(match[1]), hash: match[2] } : null;
};

export class StoredPrefixes {
  #backend;
  #locked;
  #lockName;
  #budgetBytes = null;

  /** The prefix cache of a ModelStore (ModelStore#prefixes): `locked(name, body)` runs body under the store's lock. */
  constructor(backend, storeName, locked) {
    this.#backend = backend;
    this.#locked = locked;
    this.#lockName = `kvcache-wasm:${storeName}:prefixes`;
  }

  /**
   * The bytes the entries may hold; when a write passes it, the least
   * recently used entries go. null (the default): a tenth of the store's
   * quota, at most 2 GiB (where the runtime gives no quota, 2 GiB).
   */
  get budgetBytes() { return this.#budgetBytes; }
  set budgetBytes(value) {
    if (value !== null && !(Number.isSafeInteger(value) && value >= 0)) {
      throw new TypeError(`StoredPrefixes.budgetBytes must be null or a whole number of bytes (got ${String(value)})`);
    }
    this.#budgetBytes = value;
  }

  async #budget() {
    if (this.#budgetBytes !== null) return this.#budgetBytes;
    const space = await this.#backend.space().catch(() => null);
    return space ? Math.min(DEFAULT_BUDGET_CAP, Math.floor(space.quota * DEFAULT_BUDGET_SHARE)) : DEFAULT_BUDGET_CAP;
  }

  /**
   * The stored entries of the group (model, mode) whose tokens may begin
   * `tokens`, at most `most` long, longest first: [{ length, name }]. Only
   * names are compared here: read() checks the entry's tokens.
   */
  async candidates(model, mode, tokens, most = tokens.length) {
    const names = (await this.#backend.names(`prefixes/${groupName(model, mode)}`)).map((name) => ({ name, ...parseName(name) }))
      .filter((entry) => entry.length >= LEAST_PREFIX_TOKENS && entry.length <= most);
    const hashes = prefixHashes(tokens, names.map((entry) => entry.length));
    return names.filter((entry) => hashes.get(entry.length) === entry.hash).sort((x, y) => y.length - x.length);
  }

  /**
   * An entry's bytes as pieces, read as they are used (one read ahead), and
   * its size: { byteLength, chunks }; null when it is gone. Marks it used.
   */
  async read(model, mode, name) {
    const dir = `prefixes/${groupName(model, mode)}/${name}`;
    const meta = await this.#meta(dir);
    if (!meta || meta.model !== model || meta.mode !== mode) return null;
    const file = await this.#backend.open(`${dir}/session`);
    if (file?.size !== meta.bytes) {
      await file?.close?.();
      return null;
    }
    meta.usedAt = Date.now();
    this.#backend.put(`${dir}/meta.json`, jsonBytes(meta)).catch(() => {}); // recency only: a lost write costs nothing
    return { byteLength: file.size, chunks: readAhead(file) };
  }

  /**
   * Stores `bytes` (made by `save()`, called only when the entry is not
   * stored yet) as the entry of `tokens`, then evicts the least recently
   * used entries beyond the budget. Returns whether it was written.
   */
  async write(model, mode, tokens, save) {
    const [hash] = prefixHashes(tokens, [tokens.length]).values();
    const dir = `prefixes/${groupName(model, mode)}/${entryName(tokens.length, hash)}`;
    return this.#locked(this.#lockName, null, async () => {
      if (await this.#meta(dir)) return false; // another tab or worker wrote it
      const bytes = save();
      const budget = await this.#budget();
      if (bytes.length > budget) return false;
      await this.#evict(budget - bytes.length);
      await this.#backend.put(`${dir}/session`, bytes);
      const now = Date.now();
      await this.#backend.put(`${dir}/meta.json`, jsonBytes({ model, mode, tokens: tokens.length, bytes: bytes.length, savedAt: now, usedAt: now }));
      return true;
    });
  }

  /** Deletes one entry (damaged, or of a deleted model). */
  async remove(model, mode, name) {
    await this.#locked(this.#lockName, null, () => this.#backend.remove(`prefixes/${groupName(model, mode)}/${name}`));
  }

  /** Every entry: { model (its model's digest), mode, tokens, bytes, savedAt, usedAt (ms since the epoch), name }, most recently used first. */
  async list() {
    const out = [];
    for (const group of await this.#backend.names('prefixes')) {
      for (const name of await this.#backend.names(`prefixes/${group}`)) {
        const meta = await this.#meta(`prefixes/${group}/${name}`);
        if (meta) out.push({ model: meta.model, mode: meta.mode, tokens: meta.tokens, bytes: meta.bytes, savedAt: meta.savedAt, usedAt: meta.usedAt, name });
      }
    }
    return out.sort((a, b) => b.usedAt - a.usedAt);
  }

  /**
   * Deletes entries: one (a list() item), or all of a model ({ model }:
   * its digest), or all (no argument). Returns how many went.
   */
  async delete(which) {
    const entries = (await this.list()).filter((e) => which === undefined ||
      (which.name === undefined ? e.model === which.model : e.model === which.model && e.mode === which.mode && e.name === which.name));
    await this.#locked(this.#lockName, null, async () => {
      for (const e of entries) await this.#backend.remove(`prefixes/${groupName(e.model, e.mode)}/${e.name}`);
    });
    return entries.length;
  }

  /** { entries, bytes, budgetBytes }: what the prefix cache holds and may hold. */
  async usage() {
    const entries = await this.list();
    return { entries: entries.length, bytes: entries.reduce((sum, e) => sum + e.bytes, 0), budgetBytes: await this.#budget() };
  }

  // The least recently used entries go until the rest hold at most `room` bytes.
  async #evict(room) {
    const entries = await this.list();
    let bytes = entries.reduce((sum, e) => sum + e.bytes, 0);
    while (bytes > room && entries.length > 0) {
      const oldest = entries.pop();
      await this.#backend.remove(`prefixes/${groupName(oldest.model, oldest.mode)}/${oldest.name}`);
      bytes -= oldest.bytes;
    }
  }

  #meta(dir) {
    return readMeta(this.#backend, dir);
  }
}

/** A file's pieces of READ_BYTES, the next one read while the caller uses the last. */
async function* readAhead(file) {
  let at = 0;
  const next = () => {
    const reading = at < file.size ? file.read(at, Math.min(READ_BYTES, file.size - at)) : null;
    at += READ_BYTES;
    reading?.catch(() => {}); // awaited in turn
    return reading;
  };
  try {
    for (let reading = next(); reading;) {
      const bytes = await reading;
      reading = next();
      yield bytes;
    }
  } finally {
    await file.close?.();
  }
}

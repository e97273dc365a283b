// Where a ModelStore keeps its files: the Origin Private File System in a
// page or worker, a folder in Node / Deno / Bun, the Cache API where OPFS
// cannot write. Each is the same five operations over paths of the form
// 'models/<id>/<file>':
//   read(path) -> Uint8Array | null     put(path, bytes): replaced whole, or not at all
//   names(dir) -> the files in dir       remove(dir): dir and all it holds
//   space() -> { quota, used } in bytes, or null where the runtime does not say
//   open(path) -> { size, read(at, length) -> Uint8Array, close() } | null: a
//     file read in pieces (a large one need not be in memory whole)
import { builtin } from '../runtime/files.js';

/** A JSON value as bytes, and back. */
export const jsonBytes = (value) => new TextEncoder().encode(JSON.stringify(value));
const json = (bytes) => JSON.parse(new TextDecoder().decode(bytes));

/** The meta.json of an entry's folder `dir`, or null: none there, or one that does not parse (no entry). */
export async function readMeta(backend, dir) {
  try {
    const bytes = await backend.read(`${dir}/meta.json`);
    return bytes ? json(bytes) : null;
  } catch {
    return null;
  }
}

/** The backends by name, in the order open() tries them. */
export const BACKENDS = ['opfs', 'folder', 'cache'];

/** The default folder of a store named `name` in Node, Deno or Bun: $XDG_CACHE_HOME or ~/.cache, then kvcache-wasm/name. */
function defaultFolder(name) {
  const path = builtin('node:path');
  const os = builtin('node:os');
  const cacheHome = globalThis.process?.env?.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(cacheHome, 'kvcache-wasm', name);
}

/** A backend of `kind` for the store `name`, or null where this runtime has none (a probe write must succeed). */
export async function openBackend(kind, name, directory) {
  const backend = kind === 'opfs' ? await opfsBackend(name)
    : kind === 'folder' ? folderBackend(directory ?? (builtin('node:os') ? defaultFolder(name) : null))
      : await cacheBackend(name);
  if (!backend) return null;
  try {
    await backend.put('probe', new Uint8Array([1]));
    const back = await backend.read('probe');
    if (back?.length !== 1) return null;
  } catch {
    return null; // a Safari private window's OPFS, a read-only folder
  }
  return backend;
}

function folderBackend(root) {
  const fs = builtin('node:fs/promises');
  const path = builtin('node:path');
  if (!fs || !root) return null;
  let written = 0;
  const at = (p) => path.join(root, ...p.split('/'));
  return {
    kind: 'folder',
    where: root,
    async read(p) {
      try {
        return new Uint8Array(await fs.readFile(at(p)));
      } catch (error) {
        if (error.code === 'ENOENT') return null;
        throw error;
      }
    },
    async put(p, bytes) {
      // Written beside, then renamed over: a reader sees the old file or the new, never half of one.
      await fs.mkdir(path.dirname(at(p)), { recursive: true });
      const partial = `${at(p)}.${globalThis.process?.pid ?? 0}.${written++}.partial`;
      try {
        await fs.writeFile(partial, bytes);
        await fs.rename(partial, at(p));
      } catch (error) {
        await fs.rm(partial, { force: true });
        if (error.code === 'ENOSPC' || error.code === 'EDQUOT') throw new DOMException(`the disk is full (${error.code})`, 'QuotaExceededError');
        throw error;
      }
    },
    async open(p) {
      let handle;
      try {
        handle = await fs.open(at(p), 'r');
      } catch (error) {
        if (error.code === 'ENOENT') return null;
        throw error;
      }
      const { size } = await handle.stat();
      return {
        size,
        async read(position, length) {
          const bytes = new Uint8Array(length);
          const { bytesRead } = await handle.read(bytes, 0, length, position);
          if (bytesRead !== length) throw new Error(`${p} ended at byte ${position + bytesRead}, before ${position + length}`);
          return bytes;
        },
        close: () => handle.close(),
      };
    },
    async names(dir) {
      try {
        return (await fs.readdir(at(dir))).filter((n) => !n.endsWith('.partial'));
      } catch (error) {
        if (error.code === 'ENOENT') return [];
        throw error;
      }
    },
    async remove(dir) {
      await fs.rm(at(dir), { recursive: true, force: true });
    },
    async space() {
      if (!fs.statfs) return null;
      await fs.mkdir(root, { recursive: true });
      const s = await fs.statfs(root);
      return { quota: s.blocks * s.bsize, used: (s.blocks - s.bavail) * s.bsize };
    },
  };
}

async function opfsBackend(name) {
  const storage = globalThis.navigator?.storage;
  if (typeof storage?.getDirectory !== 'function') return null;
  let top;
  try {
    top = await (await storage.getDirectory()).getDirectoryHandle(`kvcache-wasm-${name}`, { create: true });
  } catch {
    return null;
  }
  // The directory handle of `parts`, made on the way when `create`; null when one is missing.
  const dirOf = async (parts, create) => {
    let dir = top;
    for (const part of parts) {
      try {
        dir = await dir.getDirectoryHandle(part, { create });
      } catch (error) {
        if (error.name === 'NotFoundError' || error.name === 'TypeMismatchError') return null;
        throw error;
      }
    }
    return dir;
  };
  const split = (p) => {
    const parts = p.split('/');
    return [parts.slice(0, -1), parts.at(-1)];
  };
  return {
    kind: 'opfs',
    where: `the origin private file system, kvcache-wasm-${name}`,
    async read(p) {
      const [parts, file] = split(p);
      const dir = await dirOf(parts, false);
      if (!dir) return null;
      try {
        return new Uint8Array(await (await (await dir.getFileHandle(file)).getFile()).arrayBuffer());
      } catch (error) {
        if (error.name === 'NotFoundError') return null;
        throw error;
      }
    },
    async open(p) {
      const [parts, name] = split(p);
      const dir = await dirOf(parts, false);
      let file;
      try {
        file = await (await dir?.getFileHandle(name))?.getFile();
      } catch (error) {
        if (error.name === 'NotFoundError') return null;
        throw error;
      }
      return file ? blobFile(file) : null;
    },
    async put(p, bytes) {
      const [parts, file] = split(p);
      const handle = await (await dirOf(parts, true)).getFileHandle(file, { create: true });
      if (typeof handle.createWritable === 'function') {
        // A writable commits on close, whole: until then the file keeps what it had.
        const writable = await handle.createWritable();
        try {
          await writable.write(bytes);
          await writable.close();
        } catch (error) {
          await writable.abort().catch(() => {});
          throw error;
        }
        return;
      }
      // A worker without writables (older WebKit): a sync handle, flushed.
      const sync = await handle.createSyncAccessHandle();
      try {
        sync.truncate(0);
        sync.write(bytes, { at: 0 });
        sync.flush();
      } finally {
        sync.close();
      }
    },
    async names(dir) {
      const handle = await dirOf(dir.split('/'), false);
      if (!handle) return [];
      const out = [];
      for await (const key of handle.keys()) out.push(key);
      return out;
    },
    async remove(dir) {
      const [parts, last] = split(dir);
      const parent = await dirOf(parts, false);
      await parent?.removeEntry(last, { recursive: true }).catch((error) => {
        if (error.name !== 'NotFoundError') throw error;
      });
    },
    space: () => browserSpace(),
  };
}

async function cacheBackend(name) {
  if (typeof globalThis.caches?.open !== 'function') return null;
  let cache;
  try {
    cache = await caches.open(`kvcache-wasm-${name}`);
  } catch {
    return null; // an opaque origin
  }
  // Requests need an http(s) URL: the paths under a host that resolves nowhere.
  const base = 'https://kvcache-wasm.invalid/';
  const request = (p) => new Request(base + p);
  return {
    kind: 'cache',
    where: `the Cache API, kvcache-wasm-${name}`,
    async read(p) {
      const response = await cache.match(request(p));
      return response ? new Uint8Array(await response.arrayBuffer()) : null;
    },
    async open(p) {
      const response = await cache.match(request(p));
      return response ? blobFile(await response.blob()) : null;
    },
    async put(p, bytes) {
      await cache.put(request(p), new Response(bytes, { headers: { 'content-length': String(bytes.length) } }));
    },
    async names(dir) {
      const prefix = `${base}${dir}/`;
      const names = (await cache.keys()).map((r) => r.url).filter((u) => u.startsWith(prefix))
        .map((u) => u.slice(prefix.length).split('/')[0]);
      return [...new Set(names)];
    },
    async remove(dir) {
      const prefix = `${base}${dir}/`;
      for (const r of await cache.keys()) if (r.url.startsWith(prefix)) await cache.delete(r);
    },
    space: () => browserSpace(),
  };
}

/** A Blob (an OPFS file, a cached response's body) read in pieces. */
function blobFile(blob) {
  return {
    size: blob.size,
    read: async (position, length) => new Uint8Array(await blob.slice(position, position + length).arrayBuffer()),
  };
}

async function browserSpace() {
  const estimate = await globalThis.navigator?.storage?.estimate?.();
  return estimate && Number.isFinite(estimate.quota) ? { quota: estimate.quota, used: estimate.usage ?? 0 } : null;
}

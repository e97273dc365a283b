// An HTTP server of model files on 127.0.0.1 for the store's tests: ETag,
// Last-Modified, byte ranges (Range, If-Range) as a file server answers them,
// the requests and bytes it sent counted, and faults the test sets between
// loads:
//   faults.dropAt    -- the next response of a file stops after this many bytes of it (then cleared)
//   faults.noRanges  -- Range is ignored: every answer is the whole file, 200
//   faults.notFound  -- every model path answers 404
//   faults.etag      -- a validator of the test's in place of the file's (a file that changed)
//   faults.stallAt   -- the next response of a file stops sending after this many bytes, the connection kept open (then cleared)
//   faults.rate      -- bytes a second the server sends at most (a network's bandwidth; default: as fast as it can)
// Any other path goes to `fallback(request, response)` (a static server), or 404.
import { createServer } from 'node:http';
import { statSync } from 'node:fs';
import { open } from 'node:fs/promises';

/** Resolves to { server, url(path), stats, faults, close() } serving `files` ({ '/models/x.gguf': path }). */
export async function serveModels(files, { headers = {}, fallback = null } = {}) {
  const stats = { requests: 0, bytes: 0, ranges: 0 };
  const faults = {};
  const server = createServer((request, response) => {
    const { pathname } = new URL(request.url, 'http://127.0.0.1');
    const file = files[pathname];
    if (!file) {
      if (fallback) return fallback(request, response);
      response.writeHead(404, headers);
      return response.end();
    }
    stats.requests++;
    if (faults.notFound) {
      response.writeHead(404, headers);
      return response.end();
    }
    const { size, mtime } = statSync(file);
    const etag = faults.etag ?? `"${size.toString(16)}-${mtime.getTime().toString(16)}"`;
    const lastModified = mtime.toUTCString();
    const validators = { etag, 'last-modified': lastModified, 'accept-ranges': faults.noRanges ? 'none' : 'bytes' };
    if (request.headers['if-none-match'] === etag) {
      response.writeHead(304, { ...headers, ...validators });
      return response.end();
    }
    let start = 0;
    let end = size - 1;
    let status = 200;
    const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.range ?? '');
    const ifRange = request.headers['if-range'];
    if (range && !faults.noRanges && (!ifRange || ifRange === etag || ifRange === lastModified)) {
      start = Number(range[1]);
      end = range[2] ? Math.min(Number(range[2]), size - 1) : size - 1;
      if (start >= size) {
        response.writeHead(416, { ...headers, 'content-range': `bytes */${size}` });
        return response.end();
      }
      status = 206;
      stats.ranges++;
    }
    const length = end - start + 1;
    response.writeHead(status, {
      ...headers, ...validators, 'content-type': 'application/octet-stream', 'content-length': length,
      ...(status === 206 && { 'content-range': `bytes ${start}-${end}/${size}` }),
    });
    const dropAt = faults.dropAt ?? Infinity;
    const stallAt = faults.stallAt ?? Infinity;
    delete faults.dropAt;
    delete faults.stallAt;
    send(file, start, length, { dropAt, stallAt, rate: faults.rate, stats, request, response });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const base = `http://127.0.0.1:${server.address().port}`;
  return {
    server, stats, faults,
    url: (path) => `${base}${path}`,
    close: () => new Promise((resolve) => {
      server.closeAllConnections?.();
      server.close(resolve);
    }),
  };
}

const SEND_BYTES = 1 << 16;

/**
 * Sends `length` bytes of `file` from `start`, at most `rate` bytes a second,
 * waiting for the socket to drain; after `dropAt` bytes the connection is cut
 * (the client sees fewer bytes than content-length said), after `stallAt`
 * nothing more is sent and the connection stays open.
 */
async function send(file, start, length, { dropAt, stallAt, rate, stats, request, response }) {
  const handle = await open(file);
  const began = Date.now();
  let closed = false;
  request.on('close', () => { closed = true; });
  try {
    const buffer = Buffer.alloc(SEND_BYTES);
    for (let sent = 0; sent < length && !closed && !response.destroyed;) {
      const n = Math.min(SEND_BYTES, length - sent, dropAt - sent, stallAt - sent);
      if (sent >= stallAt) return; // nothing more, until the client gives up (the connection stays open)
      if (n <= 0) {
        response.destroy();
        return;
      }
      const { bytesRead } = await handle.read(buffer, 0, n, start + sent);
      const early = rate ? (sent + bytesRead) / rate * 1000 - (Date.now() - began) : 0;
      if (early > 1) await new Promise((resolve) => { setTimeout(resolve, early); });
      sent += bytesRead;
      stats.bytes += bytesRead;
      if (!response.write(buffer.subarray(0, bytesRead))) await drained(response);
    }
    response.end();
  } finally {
    await handle.close();
  }
}

/** Resolves when `response` drains or closes (at once if the client went away: a write then returns false and no event comes). */
function drained(response) {
  return new Promise((resolve) => {
    if (response.destroyed) {
      resolve();
      return;
    }
    const done = () => {
      response.off('drain', done);
      response.off('close', done);
      resolve();
    };
    response.on('drain', done);
    response.on('close', done);
  });
}

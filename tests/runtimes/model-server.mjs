// An HTTP server of model files on 127.0.0.1 for the store's tests: ETag,
// Last-Modified, byte ranges (Range, If-Range) as a file server answers them,
// the requests and bytes it sent counted, and faults the test sets between
// loads:
//   faults.dropAt    -- the next response of a file stops after this many bytes of it (then cleared)
//   faults.noRanges  -- Range is ignored: every answer is the whole file, 200
//   faults.notFound  -- every model path answers 404
//   faults.etag      -- a validator of the test's in place of the file's (a file that changed)
// Any other path goes to `fallback(request, response)` (a static server), or 404.
import { createServer } from 'node:http';
import { createReadStream, statSync } from 'node:fs';

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
    const dropAt = faults.dropAt;
    delete faults.dropAt;
    const stream = createReadStream(file, { start, end });
    let sent = 0;
    stream.on('data', (chunk) => {
      if (dropAt !== undefined && sent + chunk.length > dropAt) {
        const part = chunk.subarray(0, Math.max(0, dropAt - sent));
        stats.bytes += part.length;
        stream.destroy();
        // The connection cut mid-body: the client sees fewer bytes than content-length.
        response.write(part, () => response.destroy());
        return;
      }
      sent += chunk.length;
      stats.bytes += chunk.length;
      if (!response.write(chunk)) {
        stream.pause();
        response.once('drain', () => stream.resume());
      }
    });
    stream.on('end', () => response.end());
    request.on('close', () => stream.destroy());
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

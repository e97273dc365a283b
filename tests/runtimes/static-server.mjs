// A static file server on 127.0.0.1 for the browser tests: `fileFor(path)`
// names the file a request path serves (or null: 404), `pages` answers some
// paths with generated HTML; cross-origin isolated (COOP + COEP: what
// SharedArrayBuffer, and so threads, need) or not.
import { createServer } from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { extname } from 'node:path';

/** The headers that make a page cross-origin isolated. */
export const ISOLATION_HEADERS = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
};

const MIME = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };

/** The request handler of serveFiles (for a server that serves these files beside others). */
export function staticHandler(fileFor, { isolated, pages = {} }) {
  const headers = isolated ? ISOLATION_HEADERS : {};
  return (request, response) => {
    const { pathname } = new URL(request.url, 'http://127.0.0.1');
    if (pages[pathname]) {
      response.writeHead(200, { 'content-type': MIME['.html'], ...headers });
      return response.end(pages[pathname]());
    }
    const file = fileFor(decodeURIComponent(pathname));
    if (!file) {
      response.writeHead(404);
      return response.end();
    }
    // Streamed, with its length: a model file may be gigabytes.
    response.writeHead(200, { 'content-type': MIME[extname(file)] ?? 'application/octet-stream', 'content-length': statSync(file).size, ...headers });
    return createReadStream(file).pipe(response);
  };
}

/** Resolves to the listening server (server.address().port); close it with server.close(). */
export function serveFiles(fileFor, options) {
  const server = createServer(staticHandler(fileFor, options));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

// The demo's static server: the page, the package as a user's app would load
// it (its built ESM and .wasm, under /pkg/), uPlot, @huggingface/jinja (the
// chat templates' engine), the synthetic K/V
// generator, and the stories260K model the repository ships in models/ (or
// the model and projector files npm start names), with the embedding model
// and the reranker npm start names for the search panel. Every response carries the headers that make the page cross-origin
// isolated (COOP same-origin, COEP require-corp), so that the browser lets
// the package run on worker threads. No framework: node:http and a table of
// routes.
import { createServer } from 'node:http';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { basename, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
export const DEFAULT_MODEL = join(root, 'models', 'stories260k.gguf');

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.gguf': 'application/octet-stream',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

// Cross-origin isolation: SharedArrayBuffer, and so the package's threads.
const ISOLATION = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
};

// URL prefix -> directory (or file) it serves from.
function routes({ modelPath, projectorPath, embedderPath, rerankerPath }) {
  return [
    ['/pkg/js/', join(root, 'js')],
    ['/pkg/dist/kvcache.wasm', join(root, 'dist', 'kvcache.wasm')],
    ['/pkg/dist/kvcache-relaxed.wasm', join(root, 'dist', 'kvcache-relaxed.wasm')],
    ['/vendor/uplot/', join(root, 'node_modules', 'uplot', 'dist')],
    ['/vendor/jinja/', join(root, 'node_modules', '@huggingface', 'jinja', 'dist')],
    ['/vendor/xgrammar/', join(root, 'node_modules', '@mlc-ai', 'web-xgrammar', 'lib')],
    ['/support/synthetic.mjs', join(root, 'support', 'synthetic.mjs')],
    ['/models/stories260k.gguf', modelPath],
    ...[['/models/mmproj.gguf', projectorPath], ['/models/embedder.gguf', embedderPath], ['/models/reranker.gguf', rerankerPath]].filter(([, path]) => path),
    ['/', join(root, 'web-demo')],
  ];
}

/** The file a request path maps to, or null (also for any path escaping its directory). */
function fileFor(pathname, table) {
  for (const [prefix, target] of table) {
    if (!pathname.startsWith(prefix)) continue;
    if (!prefix.endsWith('/')) return pathname === prefix ? target : null;
    const rest = decodeURIComponent(pathname.slice(prefix.length)) || 'index.html';
    const file = normalize(join(target, rest));
    return file.startsWith(target + sep) ? file : null;
  }
  return null;
}

/**
 * Starts the server on 127.0.0.1. `port` 0 picks a free one. The model at
 * `modelPath` is served as /models/stories260k.gguf (the page loads it at
 * start), its projector at `projectorPath` (if any) as /models/mmproj.gguf,
 * an embedding model at `embedderPath` and a reranker at `rerankerPath` (if
 * any) as /models/embedder.gguf and /models/reranker.gguf (the page loads
 * them for its search panel).
 * `hfEndpoint`: where the page's catalogue resolves its hf: names (a mirror
 * of Hugging Face, a company's proxy; default: the page's default,
 * https://huggingface.co).
 * @returns {Promise<{ url: string, close: () => Promise<void> }>}
 */
export function startServer({ port = 8080, modelPath = DEFAULT_MODEL, projectorPath = null, embedderPath = null, rerankerPath = null, hfEndpoint = null } = {}) {
  const table = routes({ modelPath, projectorPath, embedderPath, rerankerPath });
  const served = (path) => path !== null && existsSync(path);
  const server = createServer((request, response) => {
    const { pathname } = new URL(request.url, 'http://127.0.0.1');
    if (pathname === '/api/models') {
      response.writeHead(200, { 'content-type': MIME['.json'], 'cache-control': 'no-store', ...ISOLATION });
      // What is served, and the files' own names for the page to show.
      response.end(JSON.stringify({
        'stories260k.gguf': existsSync(modelPath), 'mmproj.gguf': served(projectorPath),
        'embedder.gguf': served(embedderPath), 'reranker.gguf': served(rerankerPath),
        modelName: basename(modelPath), projectorName: projectorPath && basename(projectorPath),
        embedderName: embedderPath && basename(embedderPath), rerankerName: rerankerPath && basename(rerankerPath), hfEndpoint,
      }));
      return;
    }
    const file = fileFor(pathname, table);
    if (!file || !existsSync(file) || !statSync(file).isFile()) {
      response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8', ...ISOLATION });
      response.end(`not found: ${pathname}\n`);
      return;
    }
    response.writeHead(200, {
      'content-type': MIME[extname(file)] ?? 'application/octet-stream',
      'content-length': statSync(file).size,
      'cache-control': 'no-cache',
      ...ISOLATION,
    });
    if (request.method === 'HEAD') response.end();
    else createReadStream(file).pipe(response);
  });
  return new Promise((resolvePromise, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: actual } = server.address();
      resolvePromise({
        url: `http://127.0.0.1:${actual}/`,
        close: () => new Promise((done) => server.close(() => done())),
      });
    });
  });
}

// A stand-in for Hugging Face's endpoints on 127.0.0.1, for the tests of
// hf: model names. As the Hub answers:
//   GET /api/models/{owner}/{repo}[/revision/{rev}]  { id, sha, gated, siblings: [{ rfilename }] }
//   GET /{owner}/{repo}/resolve/{rev}/{path}         302 to the file on a second server (another port,
//                                                    as the Hub's CDN), which serves ranges (model-server.mjs)
// A private repository answers 401 without its token (as an unknown one does on the Hub without a
// token: here an unknown one answers 404, RepoNotFound); a gated one lists its files (gated
// 'manual') and answers a file's request 403 (GatedRepo) without the token of an account that
// accepted its licence; an unknown revision answers 404 (RevisionNotFound). Every answer carries
// CORS headers, and a preflight (OPTIONS) is answered, so that a page of another origin can use it.
// Everything answers under /mirror as well (an endpoint with a path: a company's proxy).
//
//   const hub = await serveHub({ 'owner/repo': { files: { 'model-Q8_0.gguf': localPath } } });
//   hub.endpoint; hub.cdn.stats; hub.cdn.faults.dropAt = 100_000; hub.requests; await hub.close();
// A repository: { files: { path: localPath }, revisions: { rev: { path: localPath } }, token, gated }.
import { createServer } from 'node:http';
import { serveModels } from './model-server.mjs';

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-headers': 'authorization, range, if-range, if-none-match, if-modified-since',
  'access-control-expose-headers': 'content-length, content-range, etag, last-modified, accept-ranges, x-error-code, location',
  // The demo's page is cross-origin isolated (COEP require-corp): a CORS answer passes.
  'cross-origin-resource-policy': 'cross-origin',
};

/** Answers a preflight on `server` itself, before its own handler sees the request. */
function answerPreflights(server) {
  const handlers = server.listeners('request');
  server.removeAllListeners('request');
  server.on('request', (request, response) => {
    if (request.method === 'OPTIONS') {
      response.writeHead(204, { ...CORS, 'access-control-allow-methods': 'GET, HEAD' });
      return response.end();
    }
    for (const handler of handlers) handler(request, response);
  });
}

export async function serveHub(repos) {
  // Every file of every revision on the CDN, at a path of its own.
  const cdnFiles = {};
  const cdnPath = (repo, rev, path) => `/cdn/${repo}/${rev}/${path}`;
  for (const [repo, spec] of Object.entries(repos)) {
    for (const [rev, files] of Object.entries({ main: spec.files ?? {}, ...spec.revisions })) {
      for (const [path, local] of Object.entries(files)) cdnFiles[cdnPath(repo, rev, path)] = local;
    }
  }
  const cdn = await serveModels(cdnFiles, { headers: CORS });
  answerPreflights(cdn.server);
  const requests = []; // { method, path, authorization } of each request the front answered
  const answer = (response, status, body, headers = {}) => {
    response.writeHead(status, { ...CORS, 'content-type': 'application/json', ...headers });
    response.end(body === null ? undefined : JSON.stringify(body));
  };
  const server = createServer((request, response) => {
    // The same endpoints under /mirror too: a proxy that serves the Hub at a path of its own.
    const pathname = new URL(request.url, 'http://127.0.0.1').pathname.replace(/^\/mirror(?=\/)/, '');
    const authorization = request.headers.authorization ?? null;
    requests.push({ method: request.method, path: decodeURIComponent(pathname), authorization });
    const api = /^\/api\/models\/([^/]+)\/([^/]+)(?:\/revision\/([^/]+))?$/.exec(pathname);
    const resolve = /^\/([^/]+)\/([^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(pathname);
    const match = api ?? resolve;
    if (!match) return answer(response, 404, { error: 'Not Found' });
    const repo = `${decodeURIComponent(match[1])}/${decodeURIComponent(match[2])}`;
    const spec = repos[repo];
    if (!spec) return answer(response, 404, { error: 'Repository not found' }, { 'x-error-code': 'RepoNotFound' });
    const bearer = authorization?.replace(/^Bearer /, '') ?? null;
    if (spec.private && bearer !== spec.token) {
      return answer(response, 401, { error: 'Invalid credentials in Authorization header' }, { 'x-error-code': 'RepoNotFound' });
    }
    const rev = decodeURIComponent((api ? api[3] : resolve[3]) ?? 'main');
    const files = rev === 'main' ? spec.files ?? {} : spec.revisions?.[rev];
    if (!files) return answer(response, 404, { error: `Revision Not Found for url: ${pathname}` }, { 'x-error-code': 'RevisionNotFound' });
    if (api) {
      return answer(response, 200, {
        id: repo, sha: `sha-${rev}`, private: Boolean(spec.private), gated: spec.gated ? 'manual' : false,
        siblings: ['.gitattributes', 'README.md', ...Object.keys(files)].map((rfilename) => ({ rfilename })),
      });
    }
    const path = resolve[4].split('/').map(decodeURIComponent).join('/');
    if (!files[path]) return answer(response, 404, { error: 'Entry not found' }, { 'x-error-code': 'EntryNotFound' });
    if (spec.gated && bearer !== spec.token) {
      return answer(response, 403, { error: `Access to model ${repo} is restricted` }, { 'x-error-code': 'GatedRepo' });
    }
    // As the Hub: a redirect to the file on its CDN (here another port).
    response.writeHead(302, { ...CORS, location: cdn.url(cdnPath(repo, rev, path).split('/').map(encodeURIComponent).join('/')) });
    return response.end();
  });
  answerPreflights(server);
  await new Promise((resolvePromise, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolvePromise);
  });
  return {
    endpoint: `http://127.0.0.1:${server.address().port}`,
    cdn,
    requests,
    close: async () => {
      server.closeAllConnections?.();
      await new Promise((done) => server.close(done));
      await cdn.close();
    },
  };
}

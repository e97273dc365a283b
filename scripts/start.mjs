// npm start: builds what is missing (the wasm module, the demo's npm
// packages), then serves the live demo and prints its address.
//   npm start -- [--port 8080] [--model PATH] [--mmproj PATH] [--embedder PATH] [--reranker PATH] [--hf-endpoint URL]
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startServer, DEFAULT_MODEL } from '../web-demo/server.mjs';
import { buildWasm, ensureToolchain, root, run, wasmUpToDate } from './toolchain.mjs';

const usage = 'usage: npm start -- [--port N] [--model PATH] [--mmproj PATH (the model\'s projector: it then takes pictures)]' +
  ' [--embedder PATH] [--reranker PATH (an embedding model and a reranker: the page\'s search panel loads them)]' +
  ' [--hf-endpoint URL (where the catalogue\'s hf: names resolve; default $HF_ENDPOINT, else https://huggingface.co)]';
let options;
try {
  ({ values: options } = parseArgs({
    options: {
      port: { type: 'string', default: '8080' },
      model: { type: 'string', default: DEFAULT_MODEL },
      mmproj: { type: 'string' },
      embedder: { type: 'string' },
      reranker: { type: 'string' },
      'hf-endpoint': { type: 'string', default: process.env.HF_ENDPOINT || undefined },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (error) {
  console.error(`${error.message}\n${usage}`);
  process.exit(2);
}
if (options.help) {
  console.log(usage);
  process.exit(0);
}
const hfEndpoint = options['hf-endpoint'] ?? null;
if (hfEndpoint !== null && !/^https?:\/\/[^\s]+$/.test(hfEndpoint)) {
  console.error(`--hf-endpoint must be an http(s) URL (got ${hfEndpoint})\n${usage}`);
  process.exit(2);
}
const port = Number(options.port);
if (!/^\d+$/.test(options.port) || port > 65535) {
  console.error(`--port must be an integer from 0 to 65535 (got ${options.port})\n${usage}`);
  process.exit(2);
}

if (!wasmUpToDate()) {
  ensureToolchain();
  buildWasm();
}
if (!existsSync(join(root, 'node_modules', 'uplot'))) {
  if (run('npm', ['install', '--no-audit', '--no-fund']) !== 0) process.exit(1);
}
try {
  for (const option of ['mmproj', 'embedder', 'reranker']) {
    if (options[option] !== undefined && !existsSync(options[option])) {
      console.error(`--${option} ${options[option]}: no such file\n${usage}`);
      process.exit(2);
    }
  }
  const { url } = await startServer({
    port, modelPath: options.model, projectorPath: options.mmproj ?? null,
    embedderPath: options.embedder ?? null, rerankerPath: options.reranker ?? null, hfEndpoint,
  });
  console.log(`\nkvcache-wasm demo: ${url}`);
  console.log(existsSync(options.model)
    ? `model: ${options.model} (the page finds it; you can also pick or drop any llama GGUF)`
    : `model: none at ${options.model}; the synthetic stream needs none, or pick or drop a GGUF in the page`);
  if (options.mmproj !== undefined) console.log(`projector: ${options.mmproj} (the page loads it with the model: drop a picture into the chat)`);
  if (options.embedder !== undefined) console.log(`embedding model: ${options.embedder} (the page's search panel loads it)`);
  if (options.reranker !== undefined) console.log(`reranker: ${options.reranker} (the page's search panel loads it)`);
  if (hfEndpoint !== null) console.log(`the catalogue's hf: names resolve at ${hfEndpoint}`);
  console.log('Ctrl-C stops the server.');
} catch (error) {
  console.error(error.code === 'EADDRINUSE' ? `port ${port} is in use: npm start -- --port ${port + 1}` : error.message);
  process.exit(1);
}

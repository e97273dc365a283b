// The Worker of the workerd test, written as a Cloudflare Worker is: the
// package and its .wasm come in as modules, compiled before the Worker runs
// (workerd cannot compile wasm from bytes at run time). The config plays the
// bundler's part: 'kvcache-wasm' is the exports map's "workerd" entry.
// env.INIT says how to load: 'module' passes the imported WebAssembly.Module
// to init({ module }); otherwise the Worker entry's own init() finds it.
import init, * as kv from 'kvcache-wasm';
import * as llama from 'kvcache-wasm/llama';
import kvcacheWasm from 'kvcache-wasm/kvcache.wasm';
import { smoke } from './smoke.mjs';
import { llamaSmoke } from './llama-smoke.mjs';

export default {
  async fetch(request, env) {
    const options = env.INIT === 'module' ? { module: kvcacheWasm } : undefined;
    const { pathname } = new URL(request.url);
    try {
      if (pathname === '/smoke') return Response.json(await smoke(kv, options));
      if (pathname === '/llama' && request.method === 'POST') {
        await init(options);
        return Response.json(llamaSmoke(llama, new Uint8Array(await request.arrayBuffer())));
      }
      return new Response(`no route ${request.method} ${pathname}`, { status: 404 });
    } catch (error) {
      return new Response(String(error?.stack ?? error), { status: 500 });
    }
  },
};

// What Node, Deno and Bun run: the package imported by its name (each
// runtime resolves the exports map with its own conditions), the smoke test,
// and its summary as one line of JSON on stdout.
import * as kv from 'kvcache-wasm';
import { smoke } from './smoke.mjs';

console.log(JSON.stringify(await smoke(kv)));

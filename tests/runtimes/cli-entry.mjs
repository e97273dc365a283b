// What Node, Deno and Bun run: the package imported by its name (each
// runtime resolves the exports map with its own conditions), the smoke test,
// and its summary as one line of JSON on stdout. The first argument, when
// given, is init()'s `threads`.
import * as kv from 'kvcache-wasm';
import { smoke } from './smoke.mjs';

const args = globalThis.Deno?.args ?? globalThis.process?.argv.slice(2) ?? [];
const threads = args[0] === undefined ? undefined : Number(args[0]);
console.log(JSON.stringify(await smoke(kv, threads === undefined ? undefined : { threads })));

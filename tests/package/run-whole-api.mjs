// Runs whole-api.ts once tsc has compiled it beside this file, on the GGUF
// named on the command line (if any); prints the parts that ran as JSON.
import { readFileSync } from 'node:fs';
import { useWholeApi } from './whole-api.js';

const [modelPath] = process.argv.slice(2);
console.log(JSON.stringify(await useWholeApi(modelPath ? new Uint8Array(readFileSync(modelPath)) : null)));

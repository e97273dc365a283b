// The package's sizes as the README states them, measured from `npm pack`:
// the tarball, unpacked, its file count, and each .wasm raw and gzipped
// (gzip -9). `node scripts/package-sizes.mjs --write` puts the sentence in
// README.md; tests/integration/package.test.mjs checks that it is what the build
// gives (the packed figure within PACKED_SLACK), so the text cannot drift.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { root } from './toolchain.mjs';

export const WASM_FILES = ['kvcache.wasm', 'kvcache-relaxed.wasm'];
// The sentence, with one group per figure (in the order sizesSentence writes them).
export const SIZES_PATTERN = /The package is ([\d.]+) kB packed \(([\d.]+) kB unpacked, (\d+) files\); `kvcache\.wasm` is ([\d,]+) bytes \(([\d,]+) gzipped\) and `kvcache-relaxed\.wasm` ([\d,]+) bytes \(([\d,]+) gzipped\)\./;

const kB = (bytes) => (bytes / 1000).toFixed(1);
const grouped = (n) => n.toLocaleString('en-US');

/** What `npm pack --json` says of a tarball, and the .wasm files' sizes. */
export function measure(packed, distDir = join(root, 'dist')) {
  const wasm = WASM_FILES.map((file) => {
    const bytes = readFileSync(join(distDir, file));
    return { raw: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
  });
  return { packed: packed.size, unpacked: packed.unpackedSize, files: packed.entryCount, wasm };
}

// The tarball's gzip stream, unlike its contents, varies from machine to
// machine (tar entry order follows the file system, the deflate output the
// zlib build): the same files packed 281.6 kB on one and 281.7 kB on another.
// The packed figure may differ by this much; every other figure is exact.
export const PACKED_SLACK = 1000;

/** Whether the README's `stated` sentence describes `sizes`. */
export function describes(stated, sizes) {
  const figure = stated?.match(SIZES_PATTERN);
  if (!figure) return false;
  const statedPacked = Number(figure[1]) * 1000;
  return Math.abs(statedPacked - sizes.packed) <= PACKED_SLACK &&
    stated.replace(figure[1], kB(sizes.packed)) === sizesSentence(sizes);
}

/** The README's sentence for `sizes`. */
export function sizesSentence({ packed, unpacked, files, wasm: [simd, relaxed] }) {
  return `The package is ${kB(packed)} kB packed (${kB(unpacked)} kB unpacked, ${files} files); \`kvcache.wasm\` is ` +
    `${grouped(simd.raw)} bytes (${grouped(simd.gzip)} gzipped) and \`kvcache-relaxed.wasm\` ${grouped(relaxed.raw)} bytes ` +
    `(${grouped(relaxed.gzip)} gzipped).`;
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv.includes('--write')) {
  // The README is in the package: its new figures change its size, so
  // measure again until the sentence describes the package it is in.
  const readmePath = join(root, 'README.md');
  for (let round = 0; ; round++) {
    const [packed] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json'],
      { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    const readme = readFileSync(readmePath, 'utf8');
    if (!SIZES_PATTERN.test(readme)) throw new Error('README.md has no sizes sentence to replace');
    const sizes = measure(packed);
    const sentence = sizesSentence(sizes);
    if (describes(readme.match(SIZES_PATTERN)[0], sizes)) {
      console.log(sentence);
      break;
    }
    if (round === 5) throw new Error('the sizes do not settle');
    writeFileSync(readmePath, readme.replace(SIZES_PATTERN, sentence));
  }
}

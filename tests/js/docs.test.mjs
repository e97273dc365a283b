// The documentation holds together: the README stays a front page (short,
// with a link to every guide in docs/), and every relative link of the README
// and the guides reaches a file that exists -- and, with a #fragment, a
// heading of that file; the models guide names a file to download for each
// architecture the runner reads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import init from '../../js/index.js';
import { Llama } from '../../js/llama.js';
import { GEOMETRIES, randomLlama } from '../gguf/models.mjs';
import { encodeGguf } from '../gguf/writer.mjs';

const root = fileURLToPath(new URL('../../', import.meta.url));
const guides = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`);
const pages = ['README.md', ...guides];
const text = Object.fromEntries(pages.map((page) => [page, readFileSync(join(root, page), 'utf8')]));
const README_MAX_LINES = 260;

/** Markdown without its fenced code blocks and code spans, where a [x](y) is no link. */
function prose(markdown) {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** The link targets of a page: [text](target), angle-bracketed or not, titles dropped. */
function links(markdown) {
  return [...prose(markdown).matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => match[1]);
}

/** GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchors(markdown) {
  const seen = new Map();
  const out = new Set();
  const headings = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').matchAll(/^#{1,6}\s+(.*?)\s*#*\s*$/gm);
  for (const [, heading] of headings) {
    const base = heading.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    out.add(count ? `${base}-${count}` : base);
  }
  return out;
}

const external = (target) => /^[a-z][a-z0-9+.-]*:/i.test(target);

test(`README.md is a front page: at most ${README_MAX_LINES} lines`, () => {
  const lines = text['README.md'].split('\n').length - (text['README.md'].endsWith('\n') ? 1 : 0);
  assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines: move the detail to a guide in docs/`);
});

test('README.md links every guide in docs/', () => {
  const linked = new Set(links(text['README.md']).filter((target) => !external(target))
    .map((target) => posix.normalize(target.split('#')[0])));
  assert.ok(guides.length > 0);
  assert.deepEqual(guides.filter((guide) => !linked.has(guide)), [], 'guides the README does not link');
});

for (const page of pages) {
  test(`${page}: every relative link reaches a file that exists, and a heading when it names one`, () => {
    const broken = [];
    for (const target of links(text[page])) {
      if (external(target)) continue;
      const [path, fragment] = target.split('#');
      const file = path ? join(root, dirname(page), decodeURIComponent(path)) : join(root, page);
      if (!existsSync(file)) {
        broken.push(`${target}: no such file`);
        continue;
      }
      if (fragment && statSync(file).isFile() && file.endsWith('.md')) {
        if (!anchors(readFileSync(file, 'utf8')).has(decodeURIComponent(fragment))) broken.push(`${target}: no such heading`);
      }
    }
    assert.deepEqual(broken, []);
  });
}

test('docs/models.md names a file to download for every architecture the runner reads: its publisher\'s repository and file name', async () => {
  // The runner's own list, from its refusal of an architecture it does not read.
  await init();
  const s = randomLlama(GEOMETRIES['tiny-qwen2'], { mix: 'F32' });
  const metadata = s.metadata.map(([key, value]) => [key === 'general.architecture' ? key : key.replace(/^qwen2\./, 'none.'), key === 'general.architecture' ? 'none' : value]);
  let reads;
  try {
    Llama.fromGguf(encodeGguf({ ...s, metadata })).free();
  } catch (error) {
    reads = error.message.match(/this runner reads (.*)$/)?.[1].split(', ');
  }
  assert.ok(reads?.length > 0, 'the runner names the architectures it reads');
  // A row of the table: | `architecture` | model | `publisher/repository` | `file.gguf` ...
  const rows = [...text['docs/models.md'].matchAll(/^\|\s*`([\w.-]+)`\s*\|[^|]*\|\s*`([\w.-]+\/[\w.-]+)`\s*\|\s*`([^`]+\.gguf)`/gm)];
  const named = new Set(rows.map(([, architecture]) => architecture));
  assert.deepEqual(reads.filter((architecture) => !named.has(architecture)), [], 'architectures with no file named in docs/models.md');
});

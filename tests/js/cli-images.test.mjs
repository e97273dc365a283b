// The command line with images: kvcache-wasm generate | chat --mmproj FILE
// --image FILE. What it prints is what the package gives for the same files
// and pixels in this process (a session's generate for a raw prompt, a
// Chat's reply for a message), and a raw prompt's images at its markers are
// laid out as llama.cpp's mtmd lays them out (skipped, saying why, where
// @fugood/llama.node is missing); bad input exits with one line saying why.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import jpeg from 'jpeg-js';
import { Llama } from '../../js/llama.js';
import { Chat } from '../../js/chat.js';
import { encodeGguf } from '../gguf/writer.mjs';
import { TINY_PROJECTORS, pairedLanguageModel, randomProjector } from '../gguf/vision.mjs';
import { encodePng, testImage } from '../runtimes/png.mjs';
import { closeMtmd, mtmdMissing, mtmdTokenize } from '../runtimes/mtmd-native.mjs';
import { isImageId } from '../../js/model/image-tokens.js';
import { MODEL_MISSING, MODEL_PATH, ready } from './helpers.mjs';

const cli = fileURLToPath(new URL('../../cli/kvcache-wasm.js', import.meta.url));
const run = (...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
const runWith = (input, ...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', input });

const GEOMETRY = TINY_PROJECTORS.idefics3;
const STEPS = 8;
const PROMPT = 'A picture:';
const QUESTION = 'What is in it?';
const image = testImage(40, 30, 11);
const other = testImage(24, 36, 12);

let dir;
let files;
let llama; // the same files in this process
before(async () => {
  await ready();
  dir = mkdtempSync(join(tmpdir(), 'kvcache-cli-images-'));
  const model = encodeGguf(pairedLanguageModel(GEOMETRY, { seed: 5 }));
  const projector = encodeGguf(randomProjector(GEOMETRY, { seed: 5 }));
  files = {
    model: join(dir, 'model.gguf'), projector: join(dir, 'mmproj.gguf'),
    png: join(dir, 'image.png'), otherPng: join(dir, 'other.png'), jpeg: join(dir, 'image.jpg'), text: join(dir, 'notes.png'),
  };
  writeFileSync(files.model, model);
  writeFileSync(files.projector, projector);
  writeFileSync(files.png, encodePng(image));
  writeFileSync(files.otherPng, encodePng(other));
  writeFileSync(files.jpeg, jpeg.encode(image, 90).data);
  writeFileSync(files.text, 'these are notes, not an image\n');
  llama = Llama.fromGguf(model, { projector });
});
after(async () => {
  await closeMtmd();
  llama?.free();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A greedy continuation of `ids` in this process, STEPS tokens at most. */
async function continuation(ids) {
  const session = llama.session();
  let text = '';
  for await (const piece of session.generate(ids, { temperature: 0, maxTokens: STEPS })) text += piece.text;
  session.free();
  return text;
}

/** A greedy chat reply to `parts` in this process. */
async function reply(parts, maxTokens) {
  const chat = new Chat(llama.session());
  let text = '';
  for await (const piece of chat.send(parts, { temperature: 0, maxTokens })) text += piece.text;
  chat.free();
  return text;
}

// A raw prompt with a marker for each of two images: digits and signs, which the paired vocabularies
// spell alike in llama.cpp's SentencePiece and the package's (vision.test.mjs).
const MARKED = '1+1=<__media__>2+2=<__media__>';

/** MARKED as the CLI's ids: the begin token and each piece of text, each image at its marker. */
async function markedIds() {
  const [first, second] = [await llama.prepareImage(image), await llama.prepareImage(other)];
  return [...llama.tokenizer.encode('1+1=', { special: true }), ...first.tokens, ...llama.tokenizer.encode('2+2=', { special: true, bos: false }), ...second.tokens];
}

/** The last line of stderr, the one that says why the CLI stopped. */
const lastLine = (result) => result.stderr.trimEnd().split('\n').at(-1);

describe('generate --mmproj --image', () => {
  test('puts the image after the prompt, as a session given the prompt\'s tokens and then the image\'s continues it', async () => {
    const result = run('generate', '--model', files.model, '--mmproj', files.projector, '--image', files.png, '--prompt', PROMPT, '--steps', String(STEPS));
    assert.equal(result.status, 0, result.stderr);
    const prepared = await llama.prepareImage(image);
    assert.equal(result.stdout, `${PROMPT}${await continuation([...llama.tokenizer.encode(PROMPT, { special: true }), ...prepared.tokens])}\n`);
    const { image: rows, markers, total } = llama.imageTokenCount(image);
    assert.match(result.stderr, new RegExp(`image image\\.png: 40x30, ${total} positions \\(${rows} from the encoder, ${markers} of markers\\)`));
  });

  test('puts each image at its <__media__> marker, in order; at the prompt\'s end a marker is where no marker puts it', async () => {
    const marked = run('generate', '--model', files.model, '--mmproj', files.projector, '--image', files.png, '--image', files.otherPng,
      '--prompt', MARKED, '--steps', String(STEPS));
    assert.equal(marked.status, 0, marked.stderr);
    const ids = await markedIds();
    assert.equal(marked.stdout, `${MARKED}${await continuation(ids)}\n`);
    const atEnd = run('generate', '--model', files.model, '--mmproj', files.projector, '--image', files.png, '--prompt', `${PROMPT}<__media__>`, '--steps', String(STEPS));
    const after = run('generate', '--model', files.model, '--mmproj', files.projector, '--image', files.png, '--prompt', PROMPT, '--steps', String(STEPS));
    assert.equal(atEnd.stdout.replace('<__media__>', ''), after.stdout);
  });

  test('lays the prompt out as llama.cpp\'s mtmd does: the same text and marker tokens around as many image tokens', async (t) => {
    const missing = await mtmdMissing();
    if (missing) return t.skip(missing);
    // The ids the CLI continues (the test above).
    const ids = await markedIds();
    const { chunks } = await mtmdTokenize(files.model, files.projector, MARKED, [files.png, files.otherPng]);
    assert.deepEqual(ids.filter((id) => !isImageId(id)), chunks.filter((c) => c.type === 'text').flatMap((c) => c.tokens));
    assert.equal(ids.filter(isImageId).length, chunks.filter((c) => c.type === 'image').reduce((n, c) => n + c.tokens, 0));
  });

  test('reads a JPEG as jpeg-js decodes it', async () => {
    const result = run('generate', '--model', files.model, '--mmproj', files.projector, '--image', files.jpeg, '--prompt', PROMPT, '--steps', String(STEPS));
    assert.equal(result.status, 0, result.stderr);
    const decoded = jpeg.decode(readFileSync(files.jpeg), { useTArray: true, formatAsRGBA: true });
    const prepared = await llama.prepareImage({ width: decoded.width, height: decoded.height, data: decoded.data });
    assert.equal(result.stdout, `${PROMPT}${await continuation([...llama.tokenizer.encode(PROMPT, { special: true }), ...prepared.tokens])}\n`);
  });
});

describe('chat --mmproj --image', () => {
  test('sends the image with the first message, before its text, as a Chat does; /image PATH the same with the next', async () => {
    const expected = await reply([{ type: 'image', image }, { type: 'text', text: QUESTION }], STEPS);
    const given = runWith(`${QUESTION}\n`, 'chat', '--model', files.model, '--mmproj', files.projector, '--image', files.png, '--temperature', '0', '--max-tokens', String(STEPS));
    assert.equal(given.status, 0, given.stderr);
    assert.equal(given.stdout.trim(), expected.trim());
    const typed = runWith(`/image ${files.text}\n/image ${files.png}\n${QUESTION}\n`, 'chat', '--model', files.model, '--mmproj', files.projector,
      '--temperature', '0', '--max-tokens', String(STEPS));
    assert.equal(typed.status, 0, typed.stderr);
    assert.equal(typed.stdout.trim(), expected.trim(), 'the refused /image left nothing behind');
    assert.match(typed.stderr, /kvcache-wasm chat: .*notes\.png is not a PNG or JPEG image\n/);
  });
});

describe('bad input', () => {
  test('--image without --mmproj, a file that is no image, a missing one, or markers and images that do not pair, exit 2 in a line, before the model loads', () => {
    for (const [args, reason] of [
      [['--image', files.png], /--image needs --mmproj: the model takes images through its vision encoder/],
      [['--mmproj', files.projector, '--image', files.text], /--image .*notes\.png is not a PNG or JPEG image/],
      [['--mmproj', files.projector, '--image', join(dir, 'absent.png')], /--image .*absent\.png cannot be read: ENOENT/],
      [['--mmproj', files.projector, '--image', files.png, '--prompt', 'a<__media__>b<__media__>'], /--prompt has 2 <__media__> markers and 1 --image: one image a marker/],
      [['--mmproj', join(dir, 'absent.gguf')], /--mmproj .*absent\.gguf: no such file/],
    ]) {
      const result = run('generate', '--model', files.model, ...args);
      assert.equal(result.status, 2, result.stderr);
      assert.doesNotMatch(result.stderr, /loading/);
      assert.equal(result.stderr.trimEnd().split('\n').length, 1, result.stderr);
      assert.match(result.stderr, reason);
    }
  });

  test('a PNG larger than an image may be is refused from its header, before its pixels are decoded', () => {
    const huge = Buffer.from(encodePng(testImage(2, 2)));
    huge.writeUInt32BE(100000, 16);
    const file = join(dir, 'huge.png');
    writeFileSync(file, huge);
    const result = run('generate', '--model', files.model, '--mmproj', files.projector, '--image', file);
    assert.equal(result.status, 2, result.stderr);
    assert.match(lastLine(result), /--image .*huge\.png is a PNG file that does not decode: it is 100000x2 pixels, and an image is 1 to 16384 pixels a side/);
  });

  test('a projector that is no projector, or another model\'s, exits 1 naming it', (t) => {
    const notProjector = run('generate', '--model', files.model, '--mmproj', files.model);
    assert.equal(notProjector.status, 1, notProjector.stderr);
    assert.match(lastLine(notProjector), new RegExp(`^kvcache-wasm generate: ${files.model.replaceAll('.', '\\.')} is not usable: this file is not a projector`));
    if (MODEL_MISSING) return t.skip(MODEL_MISSING);
    const mismatched = run('generate', '--model', MODEL_PATH, '--mmproj', files.projector);
    assert.equal(mismatched.status, 1, mismatched.stderr);
    assert.match(lastLine(mismatched), /^kvcache-wasm generate: --mmproj .*mmproj\.gguf does not go with --model .*stories260k\.gguf: /);
    assert.doesNotMatch(mismatched.stderr, /^ {4}at /m, 'no stack trace');
  });
});

// PNG files for the image tests: the encoder (node:zlib, every row filter 0,
// 8-bit RGB or RGBA) and deterministic test pictures with structure --
// gradients, shapes and a little noise -- in the shapes the image tests
// cover. PNG because it is lossless: the pixels llama.cpp decodes (stb_image)
// are the ones the package is given, so a difference is never the codec's.
// (Users send JPEG; llama.cpp decodes it with stb_image, the package ships no
// decoder, so the tests compare on PNG.)
//
//   const { width, height, data } = testImage(333, 517, 1);   // RGBA
//   writeFileSync(path, encodePng({ width, height, data }));
//   for (const [name, [w, h]] of Object.entries(IMAGE_SHAPES)) ...
import { deflateSync } from 'node:zlib';
import { PNG } from 'pngjs';
import { seededRandom } from '../../js/model/sampling.js';

/**
 * The shapes the image tests cover, [width, height]: square, wide, tall,
 * tiny, larger than every projector's budget, odd, and 1x1 (the least
 * llama.cpp could be given).
 */
export const IMAGE_SHAPES = {
  square: [512, 512],
  wide: [1024, 256],
  tall: [256, 1024],
  tiny: [8, 8],
  large: [4000, 3000],
  odd: [333, 517],
  'odd-square': [1000, 999],
  single: [1, 1],
};

const CRC_TABLE = Uint32Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 255] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** One PNG chunk: length, type, data, CRC of type and data. */
function chunk(type, data) {
  const out = new Uint8Array(12 + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, data.length);
  out.set(Buffer.from(type, 'latin1'), 4);
  out.set(data, 8);
  view.setUint32(8 + data.length, crc32(out.subarray(4, 8 + data.length)));
  return out;
}

/**
 * A PNG of `width` x `height` 8-bit pixels, `data` RGBA or RGB row-major
 * (its length says which), every row filter 0 (none).
 */
export function encodePng({ width, height, data }) {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) {
    throw new RangeError(`a PNG is at least 1x1, not ${width}x${height}`);
  }
  const channels = data.length / (width * height);
  if (channels !== 3 && channels !== 4) throw new RangeError(`${data.length} bytes are neither RGB nor RGBA for ${width}x${height}`);
  const stride = width * channels;
  const raw = new Uint8Array((stride + 1) * height);
  for (let y = 0; y < height; y++) raw.set(data.subarray(y * stride, (y + 1) * stride), y * (stride + 1) + 1);
  const header = new Uint8Array(13);
  const view = new DataView(header.buffer);
  view.setUint32(0, width);
  view.setUint32(4, height);
  header[8] = 8; // bits per channel
  header[9] = channels === 4 ? 6 : 2; // colour type: RGBA or RGB
  const signature = Uint8Array.of(137, 80, 78, 71, 13, 10, 26, 10);
  const parts = [signature, chunk('IHDR', header), chunk('IDAT', deflateSync(raw)), chunk('IEND', new Uint8Array(0))];
  return Buffer.concat(parts);
}


/**
 * A `width` x `height` RGBA picture (alpha 255) from `seed`: a diagonal
 * colour gradient, a few filled discs and rectangles of flat colour at
 * places drawn from the seed, and noise of +-8 -- edges, flat regions and
 * texture, so that resizing and patching are exercised, not only smooth
 * ramps. The same seed and size give the same pixels.
 */
export function testImage(width, height, seed = 1) {
  const random = seededRandom(seed);
  const shapes = Array.from({ length: 6 }, (_, i) => ({
    disc: i % 2 === 0,
    cx: random() * width, cy: random() * height,
    r: (0.08 + 0.2 * random()) * Math.min(width, height) + 1,
    colour: [random() * 255, random() * 255, random() * 255],
  }));
  const data = new Uint8Array(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const u = width > 1 ? x / (width - 1) : 0.5, v = height > 1 ? y / (height - 1) : 0.5;
      let colour = [255 * u, 255 * v, 255 * (1 - (u + v) / 2)];
      for (const s of shapes) {
        const dx = x - s.cx, dy = y - s.cy;
        const inside = s.disc ? dx * dx + dy * dy <= s.r * s.r : Math.abs(dx) <= s.r && Math.abs(dy) <= s.r / 2;
        if (inside) colour = s.colour;
      }
      const at = 4 * (y * width + x);
      for (let c = 0; c < 3; c++) data[at + c] = Math.max(0, Math.min(255, Math.round(colour[c] + 16 * (random() - 0.5))));
      data[at + 3] = 255;
    }
  }
  return { width, height, data };
}

/** A PNG file's pixels, { width, height, data: RGBA }: the decodeImage tests give where the runtime decodes none (Node). */
export function decodePng(bytes) {
  const { width, height, data } = PNG.sync.read(Buffer.from(bytes));
  return { width, height, data: new Uint8Array(data) };
}

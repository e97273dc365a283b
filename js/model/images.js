// Images as the vision encoders take them: RGBA pixels, whatever the app
// holds. The browser decodes with its own decoder (createImageBitmap, an
// OffscreenCanvas); the package carries no image codec, so where the
// runtime has none (Node, Deno, Bun, workerd) an encoded image needs the
// app's `decodeImage(bytes) → { width, height, data }`.
//
//   const { width, height, data } = await imagePixels('chat.send', file);
//   const same = await imagePixels(where, { width: 2, height: 1, data: rgba });
import { shown } from '../runtime/options.js';

// The largest side an image may have, and the most pixels: far past any
// encoder's budget (it is resized down), short of what would not fit a heap.
export const MAX_IMAGE_SIDE = 16384;
export const MAX_IMAGE_PIXELS = 64 << 20;

const isBlob = (value) => typeof Blob !== 'undefined' && value instanceof Blob;
const isBitmapLike = (value) => ['ImageBitmap', 'HTMLImageElement', 'HTMLCanvasElement', 'OffscreenCanvas', 'VideoFrame', 'SVGImageElement']
  .some((name) => typeof globalThis[name] === 'function' && value instanceof globalThis[name]);

/** Checks an image's size; returns its pixel count. */
function checkSize(where, width, height) {
  for (const [name, side] of [['width', width], ['height', height]]) {
    if (!Number.isInteger(side) || side < 1 || side > MAX_IMAGE_SIDE) {
      throw new RangeError(`${where}: an image's ${name} must be a whole number from 1 to ${MAX_IMAGE_SIDE} pixels (got ${shown(side)})`);
    }
  }
  if (width * height > MAX_IMAGE_PIXELS) throw new RangeError(`${where}: a ${width}x${height} image has more than ${MAX_IMAGE_PIXELS} pixels`);
  return width * height;
}

/** { width, height, data } with data RGBA (4 bytes a pixel) or RGB (3), checked: as RGBA. */
export function fromPixels(where, { width, height, data }) {
  const pixels = checkSize(where, width, height);
  if (!(data instanceof Uint8Array || data instanceof Uint8ClampedArray)) {
    throw new TypeError(`${where}: an image's data must be a Uint8Array or Uint8ClampedArray of RGBA (or RGB) bytes (got ${shown(data)})`);
  }
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (bytes.length === 4 * pixels) return { width, height, data: bytes };
  if (bytes.length === 3 * pixels) {
    const rgba = new Uint8Array(4 * pixels);
    for (let i = 0; i < pixels; i++) {
      rgba[4 * i] = bytes[3 * i];
      rgba[4 * i + 1] = bytes[3 * i + 1];
      rgba[4 * i + 2] = bytes[3 * i + 2];
      rgba[4 * i + 3] = 255;
    }
    return { width, height, data: rgba };
  }
  throw new RangeError(`${where}: a ${width}x${height} image's data must hold ${4 * pixels} RGBA or ${3 * pixels} RGB bytes (got ${bytes.length})`);
}

/** A decoded bitmap's pixels, drawn on an OffscreenCanvas. */
function fromBitmap(where, bitmap) {
  if (typeof OffscreenCanvas !== 'function') throw new TypeError(`${where}: this runtime has no OffscreenCanvas to read an image's pixels from; pass { width, height, data }`);
  const width = bitmap.width ?? bitmap.displayWidth, height = bitmap.height ?? bitmap.displayHeight;
  checkSize(where, width, height);
  const canvas = new OffscreenCanvas(width, height);
  const context = canvas.getContext('2d', { willReadFrequently: true });
  context.drawImage(bitmap, 0, 0);
  return fromPixels(where, context.getImageData(0, 0, width, height));
}

/** Encoded bytes (PNG, JPEG, ...) decoded by the app's decoder, or the runtime's. */
async function fromEncoded(where, bytes, decodeImage, type) {
  if (decodeImage) return fromPixels(where, await decodeImage(bytes));
  if (typeof createImageBitmap !== 'function') {
    throw new TypeError(`${where}: this runtime cannot decode images; pass { width, height, data } pixels or a decodeImage(bytes) option`);
  }
  let bitmap;
  try {
    bitmap = await createImageBitmap(new Blob([bytes], type ? { type } : {}));
  } catch (error) {
    throw new TypeError(`${where}: the image could not be decoded (${error?.message ?? error})`);
  }
  try {
    return fromBitmap(where, bitmap);
  } finally {
    bitmap.close?.();
  }
}

/**
 * An image's pixels, { width, height, data: Uint8Array RGBA }, from a Blob
 * or File, an ImageBitmap (or image element, canvas, VideoFrame), ImageData,
 * a URL (fetched), encoded bytes (a Uint8Array or ArrayBuffer of PNG, JPEG,
 * ...) or { width, height, data } RGBA or RGB bytes. `decodeImage(bytes)`
 * decodes where the runtime cannot.
 */
export async function imagePixels(where, image, { decodeImage } = {}) {
  if (decodeImage !== undefined && typeof decodeImage !== 'function') {
    throw new TypeError(`${where}: options.decodeImage must be a function (bytes) => { width, height, data } (got ${shown(decodeImage)})`);
  }
  if (image instanceof ArrayBuffer) return fromEncoded(where, new Uint8Array(image), decodeImage);
  if (image instanceof Uint8Array) return fromEncoded(where, image, decodeImage);
  if (isBlob(image)) return fromEncoded(where, new Uint8Array(await image.arrayBuffer()), decodeImage, image.type);
  if (typeof image === 'string' || image instanceof URL) {
    const response = await fetch(image);
    if (!response.ok) throw new TypeError(`${where}: the image at ${String(image)} could not be fetched (HTTP ${response.status})`);
    return fromEncoded(where, new Uint8Array(await response.arrayBuffer()), decodeImage, response.headers.get('content-type'));
  }
  if (isBitmapLike(image)) return fromBitmap(where, image);
  if (image && typeof image === 'object' && 'width' in image && 'height' in image && 'data' in image) return fromPixels(where, image);
  throw new TypeError(`${where}: an image must be a Blob or File, an ImageBitmap, ImageData, a URL, encoded bytes or { width, height, data } (got ${shown(image)})`);
}

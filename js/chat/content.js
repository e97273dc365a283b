// A message's content as apps send it: text, or parts -- { type: 'text',
// text }, { type: 'image', image } (anything Llama#prepareImage takes) and
// OpenAI's { type: 'image_url', image_url: { url } } -- and how a
// conversation with images becomes token ids: each image prepared (decoded,
// encoded, its ids kept by the model), the template rendering a marker where
// it goes (llama.cpp's server joins a message's parts as this does: text
// parts on lines of their own, nothing around an image), the rendering cut
// at the markers and the images' ids put there.
import { shown } from '../runtime/options.js';

// Where an image goes in a rendering: mtmd's default media marker.
export const MEDIA_MARKER = '<__media__>';

/** Whether a message's content holds parts (an array) rather than text. */
export const hasParts = (content) => Array.isArray(content);

/** `content`'s parts checked (messages[i].content): a copy. */
export function checkParts(where, i, content) {
  return content.map((part, j) => {
    const at = `messages[${i}].content[${j}]`;
    if (part?.type === 'text' && typeof part.text === 'string') return { type: 'text', text: part.text };
    if (part?.type === 'image' && part.image !== undefined && part.image !== null) return { type: 'image', image: part.image };
    if (part?.type === 'image_url' && typeof (part.image_url?.url ?? part.image_url) === 'string') {
      return { type: 'image', image: part.image_url?.url ?? part.image_url };
    }
    throw new TypeError(`${where}: ${at} must be { type: 'text', text }, { type: 'image', image } or { type: 'image_url', image_url: { url } } (got ${shown(part)})`);
  });
}

/** Whether a part's image is one Llama#prepareImage gave (its ids at hand). */
const prepared = (image) => typeof image?.digest === 'string' && Array.isArray(image.tokens);

/**
 * The messages with every image prepared by `llama` (Llama#prepareImage;
 * decodeImage where the runtime cannot decode): { type: 'image', image:
 * { digest, width, height, tokens, imageTokens } }. A message without
 * images is itself.
 */
export async function prepareImages(where, llama, messages, { decodeImage } = {}) {
  const out = [];
  for (const m of messages) {
    if (!hasParts(m.content) || !m.content.some((part) => part.type === 'image' && !prepared(part.image))) {
      out.push(m);
      continue;
    }
    if (typeof llama.prepareImage !== 'function') throw new TypeError(`${where}: this session's model takes no images`);
    const content = [];
    for (const part of m.content) {
      content.push(part.type === 'image' && !prepared(part.image) ? { type: 'image', image: await llama.prepareImage(part.image, { decodeImage }) } : part);
    }
    out.push({ ...m, content });
  }
  return out;
}

/** A message as its template reads it: parts joined into text, MEDIA_MARKER where each image goes. */
export function renderedContent(content) {
  if (!hasParts(content)) return content;
  let text = '';
  let afterImage = false;
  for (const part of content) {
    if (part.type === 'image') {
      text += MEDIA_MARKER;
      afterImage = true;
    } else {
      if (!afterImage && text !== '') text += '\n';
      text += part.text;
      afterImage = false;
    }
  }
  return text;
}

/** The images of `messages`, in order. */
export const imagesOf = (messages) => messages.flatMap((m) => (hasParts(m.content) ? m.content.filter((p) => p.type === 'image').map((p) => p.image) : []));

/**
 * A rendering with MEDIA_MARKERs as token ids: each piece of text between
 * them encoded by `llama`'s tokenizer (special tokens taken, no begin token:
 * the template writes it; a RemoteLlama's in its worker), each marker
 * replaced by its image's ids, in order.
 */
export async function idsOf(where, llama, text, images) {
  const pieces = text.split(MEDIA_MARKER);
  if (pieces.length - 1 !== images.length) {
    throw new TypeError(`${where}: the chat template placed ${pieces.length - 1} of the conversation's ${images.length} images`);
  }
  const options = { special: true, bos: false };
  const encoder = typeof llama.tokenizer.encode === 'function' ? llama.tokenizer : llama;
  const encoded = await Promise.all(pieces.map((piece) => encoder.encode(piece, options)));
  return encoded.flatMap((ids, i) => [...ids, ...(i < images.length ? images[i].tokens : [])]);
}

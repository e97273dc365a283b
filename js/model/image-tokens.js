// An image in a conversation is token ids like its text: each of its
// positions gets an id of its own past the vocabulary (IMAGE_BIT set),
// derived from the image's digest, its tile and the position in the tile --
// so the same image in the same place is the same ids, which a session's
// history, a prefix cache and a saved conversation compare as they compare
// text, and nothing is encoded or computed twice. A model keeps the rows
// behind the ids of the images it prepared (ImageRows), which a forward
// pass reads in place of the token embeddings.
//
//   const image = await llama.prepareImage(file);   // image.tokens: markers and image ids
//   chat / session / completions take image.tokens where the image goes.

/** The bit that marks an image position's id. */
export const IMAGE_BIT = 0x80000000;

/** Whether `id` is an image position's. */
export const isImageId = (id) => id >= IMAGE_BIT;

// The images a model keeps the rows of, the least recently prepared let go past it.
const KEPT_IMAGES = 32;

/** The first id of tile `tile` of the image whose digest is `digest` (16 hex digits). */
export function tileIdBase(digest, tile) {
  const high = parseInt(digest.slice(0, 8), 16), low = parseInt(digest.slice(8, 16), 16);
  return (high ^ Math.imul(low + tile, 0x9e3779b1)) >>> 1; // 31 bits
}

/** The id of position k of a tile whose first id is `base`. */
export const imageId = (base, k) => (IMAGE_BIT | ((base + k) & 0x7fffffff)) >>> 0;

/**
 * A model's prepared images: id -> { tile, index } (tile: { embeddings
 * [tokens × dim], tokens, gridX, gridY, positions }), the least recently
 * added image let go past KEPT_IMAGES.
 */
export class ImageRows {
  #byId = new Map();
  #images = new Map(); // digest -> the image ({ digest, tiles: [{ ids, ... }], ... })

  /** Keeps the rows of `image` ({ digest, tiles: [{ ids, ... }] }). */
  add(image) {
    this.#images.delete(image.digest);
    this.#images.set(image.digest, image);
    for (const tile of image.tiles) tile.ids.forEach((id, index) => this.#byId.set(id, { tile, index }));
    while (this.#images.size > KEPT_IMAGES) {
      const [digest, old] = this.#images.entries().next().value;
      this.#images.delete(digest);
      for (const tile of old.tiles) for (const id of tile.ids) this.#byId.delete(id);
    }
  }

  /** The image prepared with this digest, if still held (now the most recently used). */
  get(digest) {
    const image = this.#images.get(digest);
    if (image) {
      this.#images.delete(digest);
      this.#images.set(digest, image);
    }
    return image;
  }

  has(id) {
    return this.#byId.has(id);
  }

  /** The tile and index of image id `id`, or undefined when no image held has it. */
  of(id) {
    return this.#byId.get(id);
  }
}

/**
 * Splits ids into runs a forward pass takes at once: { tokens } of text, and
 * { tile, from, count } of consecutive positions of one image tile.
 */
export function runsOf(where, rows, ids) {
  const runs = [];
  for (let i = 0; i < ids.length;) {
    if (!isImageId(ids[i])) {
      let j = i;
      while (j < ids.length && !isImageId(ids[j])) j++;
      runs.push({ tokens: ids.slice(i, j) });
      i = j;
      continue;
    }
    const first = rows.of(ids[i]);
    if (!first) throw new RangeError(`${where}: an image in the conversation is no longer held by the model: prepare it again (llama.prepareImage)`);
    let j = i + 1;
    while (j < ids.length && rows.of(ids[j])?.tile === first.tile && rows.of(ids[j]).index === first.index + (j - i)) j++;
    runs.push({ tile: first.tile, from: first.index, count: j - i });
    i = j;
  }
  return runs;
}

/**
 * How far a multimodal-RoPE model's RoPE positions fall behind the cache's
 * after `ids`: an image tile of T tokens on a grid of gridX × gridY moves
 * the position on by max(gridX, gridY), not T (mtmd's n_pos).
 */
export function ropeShiftOf(rows, ids) {
  let shift = 0;
  for (let i = 0; i < ids.length; i++) {
    const at = isImageId(ids[i]) ? rows.of(ids[i]) : null;
    if (at && at.index === at.tile.tokens - 1) shift += at.tile.tokens - Math.max(at.tile.gridX, at.tile.gridY);
  }
  return shift;
}

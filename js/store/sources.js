// Where a model file's bytes come from, as chunks: bytes in memory, a Blob
// or File (a picked file, OPFS, Node's fs.openAsBlob), a Response, a
// ReadableStream, or a URL to fetch. A loader reads them one chunk at a time
// straight into the wasm heap, so that JavaScript holds one chunk, never the
// file. A response that holds no model -- an HTTP error, or the HTML page a
// dev server answers in place of a file it lacks -- is refused saying what
// it was, not read as a GGUF file that is not one.
import { GgufError } from '../runtime/checks.js';
import { shown } from '../runtime/options.js';

// Bytes read from a Blob at a time, and the most a byte stream (a fetch's
// body) is read into at a time: one buffer, reused (other streams come in
// the chunks they have).
const BLOB_CHUNK_BYTES = 8 << 20;
const STREAM_BUFFER_BYTES = 1 << 20;
// How an HTML page begins (after any whitespace); a GGUF file begins "GGUF".
const HTML_START = /^\s*(<!doctype|<html)/i;

/** An AbortSignal's reason as the error to throw (a DOMException 'AbortError' by default). */
export function aborted(signal) {
  return signal.reason ?? new DOMException('the load was aborted', 'AbortError');
}

/**
 * { total, chunks, cancel }: the source's size in bytes where it is known
 * (else null), an async iterator of its bytes as Uint8Arrays, and a
 * function that lets go of a stream (a fetch's body) whose chunks were never
 * asked for -- an iterator's return() before its first next() runs none of
 * its code. `signal` aborts between chunks (and a fetch in flight);
 * `headers` go with a URL's request (a token's).
 */
export async function sourceChunks(where, source, { signal, headers } = {}) {
  if (typeof source === 'string' || source instanceof URL) source = await fetch(source, { signal, headers });
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const bytes = source instanceof Uint8Array ? source
      : source instanceof ArrayBuffer ? new Uint8Array(source) : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    return { total: bytes.length, chunks: (async function* whole() { yield bytes; })() };
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    const blob = source;
    return {
      total: blob.size,
      chunks: (async function* slices() {
        for (let at = 0; at < blob.size; at += BLOB_CHUNK_BYTES) {
          if (signal?.aborted) throw aborted(signal);
          yield new Uint8Array(await blob.slice(at, at + BLOB_CHUNK_BYTES).arrayBuffer());
        }
      })(),
    };
  }
  let total = null;
  let page = 'the stream holds an HTML page'; // what a body that begins as one is
  if (typeof Response !== 'undefined' && source instanceof Response) {
    checkResponse(where, source);
    if (!source.body) throw new TypeError(`${where}: the Response has no body`);
    const length = Number(source.headers.get('content-length'));
    // A compressed response's length is not the file's.
    if (Number.isSafeInteger(length) && length > 0 && !source.headers.get('content-encoding')) total = length;
    page = answeredHtml(source);
    source = source.body;
  }
  if (typeof ReadableStream !== 'undefined' && source instanceof ReadableStream) {
    return { total, ...streamChunks(where, source, signal, page) };
  }
  throw new TypeError(`${where}: source must be bytes, a Blob or File, a Response, a ReadableStream or a URL (got ${shown(source)})`);
}

/**
 * Lets go of a source of sourceChunks, read or not: its iterator ended, and
 * a stream whose chunks were never asked for cancelled.
 */
export async function letGo({ chunks, cancel }) {
  await chunks.return?.().catch(() => {});
  cancel?.();
}

/**
 * Refuses a Response that holds no model file, with a GgufError saying what
 * it was: an HTTP error (its status, status text and URL), or an HTML page
 * by its content type (a dev server's fallback page, status 200). Its body
 * is cancelled then.
 */
export function checkResponse(where, response) {
  const type = response.headers.get('content-type');
  let problem = null;
  if (!response.ok) {
    const status = `${response.status}${response.statusText ? ` ${response.statusText}` : ''}`;
    const hint = response.status === 401 ? ' (the file is private: a token with access to it is needed)'
      : response.status === 403 ? ' (access is refused: a gated model needs its licence accepted, and a token of that account)' : '';
    problem = `the response${response.url ? ` for ${response.url}` : ''} was ${status}, not a model file${hint}`;
  } else if (type !== null && /^\s*text\/html\b/i.test(type)) {
    problem = `${answeredHtml(response)} (content type ${type}) where a GGUF file was expected`;
  }
  if (problem === null) return;
  response.body?.cancel().catch(() => {});
  throw new GgufError(`${where}: ${problem}`);
}

function answeredHtml(response) {
  return `the server answered${response.url ? ` ${response.url}` : ''} with an HTML page`;
}

/**
 * A stream's { chunks, cancel }. A byte stream (a fetch's body) is read into
 * one buffer again and again (a BYOB reader), each chunk a view of it valid
 * until the next is asked for: a gigabyte's load then leaves no gigabyte of
 * chunks for the garbage collector, which a page busy loading may not run.
 * Any other stream gives the chunks it has. A first chunk that begins as an
 * HTML page is refused: `page` says whose it is. The reader is taken at
 * once, not at the first chunk: a fetch's body left unlocked is cancelled
 * when its Response is collected (Node's fetch does), and a split model's
 * first part waits unread while the others are fetched.
 */
function streamChunks(where, stream, signal, page) {
  let reader;
  let buffer = null;
  try {
    reader = stream.getReader({ mode: 'byob' });
    buffer = new ArrayBuffer(STREAM_BUFFER_BYTES);
  } catch {
    reader = stream.getReader(); // not a byte stream
  }
  const cancel = () => { reader.cancel().catch(() => {}); };
  async function* chunks() {
    let first = true;
    try {
      for (;;) {
        if (signal?.aborted) throw aborted(signal);
        const { value, done } = await (buffer ? reader.read(new Uint8Array(buffer)) : reader.read());
        if (done) return;
        if (!(value instanceof Uint8Array)) throw new TypeError(`${where}: the stream gave ${shown(value)}, not bytes`);
        if (buffer) buffer = value.buffer; // the read transferred it: this is the same memory, to read into next
        const html = first ? HTML_START.exec(new TextDecoder().decode(value.subarray(0, 64))) : null;
        if (html) throw new GgufError(`${where}: ${page} (it begins ${html[1]}) where a GGUF file was expected`);
        first = false;
        yield value;
      }
    } finally {
      cancel();
    }
  }
  return { chunks: chunks(), cancel };
}

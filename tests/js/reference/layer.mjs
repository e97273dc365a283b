// One layer's cache in plain JS, written from include/kvcache.h and
// README.md for the differential soak test: simple and obviously right rather
// than fast. Per head, a list of rows with their absolute positions; per
// position held, a slot with its importance and alive mask; every rule
// (q8 window and field, the q4 residual window and its f32 copies, memory
// formula, eviction policy, truncation by position, verify sessions, max
// rows) spelled out where it applies.
import { Q8_WINDOW, dequantizeRow, freezeField, quantizeRow, quantizeRowQ4 } from './q8.mjs';

const RESIDUAL_ROWS = 64; // KVC_Q4_RESIDUAL_ROWS
const ROLLBACK_ROWS = 64; // KVC_Q4_ROLLBACK_ROWS
const PAGE = 64; // KVC_PAGE_ELEMS: copies go a page at a time

/** A call the library refuses; `code` is the kvc_status name it returns. */
export class Refusal extends Error {
  constructor(code) {
    super(`refused with ${code}`);
    this.code = code;
  }
}

/** An eviction policy with the binding's defaults filled in: sinks 4 (at
 * most budget), recent half of the rest. */
export function withDefaults(budget, sinks, recent) {
  const s = sinks ?? Math.min(4, budget);
  return { budget, sinks: s, recent: recent ?? Math.floor((budget - s) / 2) };
}

// How each mode stores keys and values.
const STORAGE = {
  f32: { key: 'f32', value: 'f32' },
  q8: { key: 'q8', value: 'q8' },
  q8k: { key: 'q8', value: 'f32' },
  q8v: { key: 'f32', value: 'q8' },
  q4: { key: 'q4', value: 'q4' },
  q4k: { key: 'q4', value: 'f32' },
  q4v: { key: 'f32', value: 'q4' },
  'q8k+q4v': { key: 'q8', value: 'q4' },
  'q4k+q8v': { key: 'q4', value: 'q8' },
};

// One stored row of one component: `read` is what head_keys/head_values give
// (the f32 row, or a quantized row dequantized); `codes` and `scale` are set
// for a quantized row, and `exact`, the row as appended, for a q4 one (its
// f32 copy, read while the row is in the residual window and has it). The
// field cannot change while a quantized row exists (only a rewind to position
// W or below unfreezes it, and that drops every row at W or after), so its
// reading is fixed when it is stored.
function storedEntry(x, storage, field) {
  if (storage === 'f32') return { read: Float32Array.from(x) };
  const { codes, scale } = storage === 'q4' ? quantizeRowQ4(x, field) : quantizeRow(x, field);
  const entry = { read: dequantizeRow(codes, scale, field), codes, scale };
  if (storage === 'q4') entry.exact = Float32Array.from(x);
  return entry;
}

// The first of a q4 store's rows from W on (counted among those) whose f32
// copy it keeps once it holds n of them: the copies of the newest
// RESIDUAL_ROWS + ROLLBACK_ROWS at least, older ones let go a page at a time.
function copiesFrom(base, n) {
  const keep = RESIDUAL_ROWS + ROLLBACK_ROWS;
  if (n < base + keep + PAGE) return base;
  return base + Math.floor((n - keep - base) / PAGE) * PAGE;
}

export class ReferenceLayer {
  constructor({ numKvHeads, headDim, mode = 'f32' }) {
    this.H = numKvHeads;
    this.d = headDim;
    this.mode = mode;
    this.storage = STORAGE[mode];
    this.quantized = { key: this.storage.key !== 'f32', value: this.storage.value !== 'f32' };
    this.slots = []; // { position, imp (an f32 value), alive: boolean[H] }, positions increasing
    // Per head: rows { position, key, value } in position order, the field of
    // each component, and where a q4 component's copies start (among its
    // rows from W on).
    this.heads = Array.from({ length: numKvHeads }, () => ({
      rows: [], field: { key: null, value: null }, copies: { key: 0, value: 0 },
    }));
    this.nextPosition = 0;
    this.fieldFrozen = false;
    this.policy = { maxRows: 0, sinks: 0, recent: 0 };
    this.verifying = false;
    this.verifyBase = 0;
  }

  get seqLen() { return this.slots.length; }
  get draftLen() { return this.verifying ? this.slots.length - this.verifyBase : 0; }
  positions() { return Uint32Array.from(this.slots, (s) => s.position); }
  get imp() { return Float32Array.from(this.slots, (s) => s.imp); }
  headLen(h) { return this.heads[h].rows.length; }
  headPositions(h) { return Uint32Array.from(this.heads[h].rows, (row) => row.position); }
  headKeys(h) { return this.#rowsOf(h, 'key'); }
  headValues(h) { return this.#rowsOf(h, 'value'); }

  #rowsOf(h, component) {
    const rows = this.headRows(h).rows;
    const out = new Float32Array(rows.length * this.d);
    rows.forEach((row, i) => out.set(row[component].read, i * this.d));
    return out;
  }

  /** Rows from W on that head h holds among its first `count` rows. */
  #fromWindow(head, count = head.rows.length) {
    return head.rows.slice(0, count).filter((row) => row.position >= Q8_WINDOW).length;
  }

  /** The first row (among those from W on) that a q4 component of a head
   * reads from its f32 copy, holding n rows from W on: the newest
   * RESIDUAL_ROWS, those that still have their copies. */
  #windowFirst(head, component, n) {
    return Math.min(Math.max(n - RESIDUAL_ROWS, head.copies[component]), n);
  }

  /** Head h's first `count` rows (all by default) as attention reads them
   * then -- a q4 row of the residual window as appended -- with the fields
   * of its quantized components.  A query of attendCausal that sees fewer
   * rows reads them as the layer held them when they were all it held. */
  headRows(h, count = this.heads[h].rows.length) {
    const head = this.heads[h];
    const n = this.#fromWindow(head, count);
    const first = { key: this.#windowFirst(head, 'key', n), value: this.#windowFirst(head, 'value', n) };
    let index = 0; // among rows from W on
    const rows = head.rows.slice(0, count).map((row) => {
      if (row.position < Q8_WINDOW) return row;
      const viewed = { position: row.position };
      for (const component of ['key', 'value']) {
        const entry = row[component];
        viewed[component] = entry.exact && index >= first[component] ? { read: entry.exact } : entry;
      }
      index++;
      return viewed;
    });
    return { rows, keyField: head.field.key, valueField: head.field.value };
  }

  /** Lets the q4 copies go that the layer will not need once each head has
   * `upcoming(h)` more rows from W on. */
  #releaseCopies(upcoming = () => 0) {
    this.heads.forEach((head, h) => {
      const n = this.#fromWindow(head);
      for (const component of ['key', 'value']) {
        if (this.storage[component] === 'q4') head.copies[component] = copiesFrom(head.copies[component], n + upcoming(h));
      }
    });
  }

  /** What a restored snapshot keeps of the copies: the residual window's. */
  restored() {
    for (const head of this.heads) {
      const n = this.#fromWindow(head);
      for (const component of ['key', 'value']) head.copies[component] = this.#windowFirst(head, component, n);
    }
  }

  /** The memory formula of kvc_layer_memory_bytes, term by term. */
  get memoryBytes() {
    const { H, d } = this;
    let bytes = this.slots.length * (4 + 4 + Math.ceil(H / 8)); // imp, position, alive map
    // A q4 row: its scale, a 2-bit shift per 16 channels, two codes a byte.
    const q4Row = 4 + Math.ceil(Math.ceil(d / 16) / 4) + Math.ceil(d / 2);
    for (const component of ['key', 'value']) {
      const storage = this.storage[component];
      for (const head of this.heads) {
        for (const row of head.rows) {
          if (storage === 'f32' || row.position < Q8_WINDOW) bytes += d * 4;
          else bytes += storage === 'q8' ? d + 4 : q4Row;
        }
        if (storage === 'q4') {
          const n = this.#fromWindow(head);
          bytes += (n - this.#windowFirst(head, component, n)) * d * 4; // the window's copies
        }
      }
      if (storage !== 'f32' && this.fieldFrozen) bytes += H * d * 4;
    }
    return bytes;
  }

  /** append_n: n positions, k and v [n × H × d], alive [n × H] bytes or null (all alive). */
  appendN(n, k, v, alive) {
    if (n === 0) return;
    const { H, d, policy } = this;
    const bounded = policy.maxRows > 0 && !this.verifying;
    if (bounded && n > policy.maxRows) throw new Refusal('KVC_E_LENGTH');
    const live = (i, h) => alive === null || alive[i * H + h] !== 0;
    for (let i = 0; i < n; i++) {
      for (let h = 0; h < H; h++) {
        if (!live(i, h)) continue;
        const at = (i * H + h) * d;
        if (!allFinite(k, at, at + d)) throw new Refusal('KVC_E_NONFINITE_KEY');
        if (!allFinite(v, at, at + d)) throw new Refusal('KVC_E_NONFINITE_VALUE');
      }
    }
    // The new positions are always kept: room for them is made first.
    if (bounded && this.slots.length + n > policy.maxRows) {
      this.#evictTo(policy.maxRows - n, policy.sinks, policy.recent);
    }
    // Outside a verify, the q4 copies that will not be needed go first.
    if (!this.verifying) {
      this.#releaseCopies((h) => {
        let rows = 0;
        for (let i = 0; i < n; i++) rows += Number(live(i, h) && this.nextPosition + i >= Q8_WINDOW);
        return rows;
      });
    }
    for (let i = 0; i < n; i++) {
      const mask = Array.from({ length: H }, (_, h) => live(i, h));
      this.#appendOne(k.subarray(i * H * d, (i + 1) * H * d), v.subarray(i * H * d, (i + 1) * H * d), mask);
    }
  }

  #appendOne(k, v, alive) {
    const { d } = this;
    const position = this.nextPosition;
    if ((this.quantized.key || this.quantized.value) && position === Q8_WINDOW) this.#freeze();
    for (let h = 0; h < this.H; h++) {
      if (!alive[h]) continue;
      const head = this.heads[h];
      const storage = (component) => (position >= Q8_WINDOW ? this.storage[component] : 'f32');
      head.rows.push({
        position,
        key: storedEntry(k.subarray(h * d, (h + 1) * d), storage('key'), head.field.key),
        value: storedEntry(v.subarray(h * d, (h + 1) * d), storage('value'), head.field.value),
      });
    }
    this.slots.push({ position, imp: 0, alive });
    this.nextPosition = position + 1;
  }

  // The field of every quantized component from the head's rows at positions
  // below W that it still holds (all of its rows, at this moment).
  #freeze() {
    for (const head of this.heads) {
      for (const component of ['key', 'value']) {
        if (!this.quantized[component]) continue;
        const window = head.rows.filter((row) => row.position < Q8_WINDOW).map((row) => row[component].read);
        head.field[component] = freezeField(window, this.d);
      }
    }
    this.fieldFrozen = true;
  }

  /** Rewinds nextPosition by n (to 0 at most); the slots and rows at or after it go. */
  truncateLast(n) {
    if (this.verifying) throw new Refusal('KVC_E_VERIFYING');
    this.#dropFrom(Math.max(0, this.nextPosition - n));
  }

  #dropFrom(cut) {
    this.slots = this.slots.filter((slot) => slot.position < cut);
    for (const head of this.heads) {
      head.rows = head.rows.filter((row) => row.position < cut);
      // Copies of the rows left stay; below the first copy, none come back.
      const n = this.#fromWindow(head);
      for (const component of ['key', 'value']) head.copies[component] = Math.min(head.copies[component], n);
    }
    this.nextPosition = cut;
    if (cut <= Q8_WINDOW) this.fieldFrozen = false;
  }

  clear() {
    this.verifying = false;
    this.#dropFrom(0);
  }

  accumulateImp(probs) {
    if (!probsValid(probs)) throw new Refusal('KVC_E_PROBS');
    this.slots.forEach((slot, p) => { slot.imp = Math.fround(slot.imp + probs[p]); });
  }

  /** Adds head h's row probabilities at the slots of its rows. */
  accumulateImpHead(h, probs) {
    if (!probsValid(probs)) throw new Refusal('KVC_E_PROBS');
    let row = 0;
    for (const slot of this.slots) {
      if (slot.alive[h]) slot.imp = Math.fround(slot.imp + probs[row++]);
    }
  }

  /** The positions kept by the policy: the first `sinks`, the `recent`
   * newest, and between them the highest imp, ties to the older. */
  plan(budget, sinks, recent) {
    checkPolicy(budget, sinks, recent);
    return this.#kept(budget, sinks, recent);
  }

  #kept(budget, sinks, recent) {
    const L = this.slots.length;
    if (L <= budget) return this.positions();
    const s = Math.min(sinks, budget);
    const r = Math.min(recent, budget - s);
    const middle = [];
    for (let i = s; i < L - r; i++) middle.push(i);
    middle.sort((a, b) => this.slots[b].imp - this.slots[a].imp || a - b);
    const keep = new Set(middle.slice(0, budget - s - r));
    for (let i = 0; i < s; i++) keep.add(i);
    for (let i = L - r; i < L; i++) keep.add(i);
    return Uint32Array.from(this.slots.filter((_, i) => keep.has(i)), (slot) => slot.position);
  }

  evict(budget, sinks, recent) {
    checkPolicy(budget, sinks, recent);
    if (this.verifying) throw new Refusal('KVC_E_VERIFYING');
    this.#evictTo(budget, sinks, recent);
  }

  // Keeps what the policy keeps (sinks and recent clipped to the budget).
  // Every kept row reads as before: a q4 component keeps the copies of the
  // kept rows of its residual window, and lets every other copy go.
  #evictTo(budget, sinks, recent) {
    const kept = new Set(this.#kept(budget, sinks, recent));
    this.slots = this.slots.filter((slot) => kept.has(slot.position));
    for (const head of this.heads) {
      const fromW = head.rows.filter((row) => row.position >= Q8_WINDOW);
      for (const component of ['key', 'value']) {
        const first = this.#windowFirst(head, component, fromW.length);
        const keptFromW = fromW.filter((row) => kept.has(row.position)).length;
        const keptCopies = fromW.filter((row, i) => i >= first && kept.has(row.position)).length;
        head.copies[component] = keptFromW - keptCopies;
      }
      head.rows = head.rows.filter((row) => kept.has(row.position));
    }
  }

  setMaxRows(maxRows, sinks, recent) {
    if (maxRows > 0) checkPolicy(maxRows, sinks, recent);
    this.policy = maxRows > 0 ? { maxRows, sinks, recent } : { maxRows: 0, sinks: 0, recent: 0 };
  }

  beginVerify() {
    if (this.verifying) throw new Refusal('KVC_E_VERIFYING');
    this.verifying = true;
    this.verifyBase = this.slots.length;
  }

  /** Keeps the first j drafts: the newest draftLen − j positions are rewound. */
  accept(j) {
    if (!this.verifying) throw new Refusal('KVC_E_NOT_VERIFYING');
    if (j > this.draftLen) throw new Refusal('KVC_E_ACCEPT');
    this.#dropFrom(this.nextPosition - (this.draftLen - j));
    this.verifying = false;
    // The j kept drafts count as appended: back down to maxRows, keeping them.
    const { maxRows, sinks } = this.policy;
    if (maxRows > 0 && j > 0 && this.slots.length > maxRows) {
      const recent = Math.min(Math.max(this.policy.recent, j), maxRows);
      this.#evictTo(maxRows, Math.min(sinks, maxRows - recent), recent);
    }
    this.#releaseCopies(); // the drafts kept may push rows out of the window
  }

  /** A deep copy; refused during a verify. */
  clone() {
    if (this.verifying) throw new Refusal('KVC_E_VERIFYING');
    const copy = new ReferenceLayer({ numKvHeads: this.H, headDim: this.d, mode: this.mode });
    // Rows and fields are never changed in place, only replaced: sharing them is a deep copy.
    copy.slots = this.slots.map((slot) => ({ ...slot }));
    copy.heads = this.heads.map((head) => ({ rows: [...head.rows], field: { ...head.field }, copies: { ...head.copies } }));
    copy.nextPosition = this.nextPosition;
    copy.fieldFrozen = this.fieldFrozen;
    copy.policy = { ...this.policy };
    return copy;
  }
}

function checkPolicy(budget, sinks, recent) {
  if (budget === 0 || sinks > budget || recent > budget - sinks) throw new Refusal('KVC_E_BUDGET');
}

function probsValid(probs) {
  return probs.every((p) => Number.isFinite(p) && p >= 0);
}

function allFinite(x, from, to) {
  for (let i = from; i < to; i++) {
    if (!Number.isFinite(x[i])) return false;
  }
  return true;
}

// One layer's cache in plain JS, written from include/kvcache.h and
// README.md for the differential soak test: simple and obviously right rather
// than fast. Per head, a list of rows with their absolute positions; per
// position held, a slot with its importance and alive mask; every rule
// (q8 window and field, memory formula, eviction policy, truncation by
// position, verify sessions, max rows) spelled out where it applies.
import { Q8_WINDOW, dequantizeRow, freezeField, quantizeRow } from './q8.mjs';

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

const QUANTIZED = {
  f32: { key: false, value: false },
  q8: { key: true, value: true },
  q8k: { key: true, value: false },
  q8v: { key: false, value: true },
};

// One stored row of one component: `read` is what head_keys/head_values give
// (the f32 row, or a quantized row dequantized); `codes` and `scale` are set
// for a quantized row. The field cannot change while a quantized row exists
// (only a rewind to position W or below unfreezes it, and that drops every
// row at W or after), so its reading is fixed when it is stored.
function storedEntry(x, quantize, field) {
  if (!quantize) return { read: Float32Array.from(x) };
  const { codes, scale } = quantizeRow(x, field);
  return { read: dequantizeRow(codes, scale, field), codes, scale };
}

export class ReferenceLayer {
  constructor({ numKvHeads, headDim, mode = 'f32' }) {
    this.H = numKvHeads;
    this.d = headDim;
    this.mode = mode;
    this.quantized = QUANTIZED[mode];
    this.slots = []; // { position, imp (an f32 value), alive: boolean[H] }, positions increasing
    // Per head: rows { position, key, value } in position order, and the field of each component.
    this.heads = Array.from({ length: numKvHeads }, () => ({ rows: [], field: { key: null, value: null } }));
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
    const { rows } = this.heads[h];
    const out = new Float32Array(rows.length * this.d);
    rows.forEach((row, i) => out.set(row[component].read, i * this.d));
    return out;
  }

  /** The rows of head h as attention sees them, with the fields of its quantized components. */
  headRows(h) {
    const head = this.heads[h];
    return { rows: head.rows, keyField: head.field.key, valueField: head.field.value };
  }

  /** The memory formula of kvc_layer_memory_bytes, term by term. */
  get memoryBytes() {
    const { H, d } = this;
    let bytes = this.slots.length * (4 + 4 + Math.ceil(H / 8)); // imp, position, alive map
    for (const component of ['key', 'value']) {
      const quantized = this.quantized[component];
      for (const head of this.heads) {
        for (const row of head.rows) bytes += quantized && row.position >= Q8_WINDOW ? d + 4 : d * 4;
      }
      if (quantized && this.fieldFrozen) bytes += H * d * 4;
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
      const quantize = (component) => this.quantized[component] && position >= Q8_WINDOW;
      head.rows.push({
        position,
        key: storedEntry(k.subarray(h * d, (h + 1) * d), quantize('key'), head.field.key),
        value: storedEntry(v.subarray(h * d, (h + 1) * d), quantize('value'), head.field.value),
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
    for (const head of this.heads) head.rows = head.rows.filter((row) => row.position < cut);
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
  #evictTo(budget, sinks, recent) {
    const kept = new Set(this.#kept(budget, sinks, recent));
    this.slots = this.slots.filter((slot) => kept.has(slot.position));
    for (const head of this.heads) head.rows = head.rows.filter((row) => kept.has(row.position));
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
  }

  /** A deep copy; refused during a verify. */
  clone() {
    if (this.verifying) throw new Refusal('KVC_E_VERIFYING');
    const copy = new ReferenceLayer({ numKvHeads: this.H, headDim: this.d, mode: this.mode });
    // Rows and fields are never changed in place, only replaced: sharing them is a deep copy.
    copy.slots = this.slots.map((slot) => ({ ...slot }));
    copy.heads = this.heads.map((head) => ({ rows: [...head.rows], field: { ...head.field } }));
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

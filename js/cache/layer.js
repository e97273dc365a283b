// LayerKvCache: one layer's cache, full or sliding-window attention (rows of
// keys and values), recurrent: linear attention (an f64 state), a short
// convolution or a gated delta rule (f32 states), or shared: no rows of its
// own, it names the earlier layer of its KvCache whose rows it reads, or
// none: it holds nothing and takes no positions. A thin
// class over one C kvc_layer pointer; include/kvcache.h has the rules.
import {
  callC, callOut, checkStatus, copyOut, disposeSymbol, heapView, lib, ownedObjects, readCString, sizeOrInfinity, u32At,
} from '../runtime/runtime.js';
import {
  KvCacheError, checkAccepted, checkAlive, checkFloat32, checkInteger, checkInto, checkObject, checkPolicy, shown,
} from '../runtime/checks.js';
import { COMPONENTS, C_CODES, C_LIMITS, MODES } from '../runtime/constants.js';
import { checkKeys, checkUnused } from '../runtime/options.js';
import { cloneHandle, deserializeHandle, serializeHandle } from './snapshot.js';

export { COMPONENTS, MODES };
export const Q8_WINDOW = C_LIMITS.KVC_Q8_WINDOW;
export const Q4_RESIDUAL_ROWS = C_LIMITS.KVC_Q4_RESIDUAL_ROWS;
export const Q4_MAX_RESIDUAL_ROWS = C_LIMITS.KVC_Q4_MAX_RESIDUAL_ROWS;
export const MAX_KV_HEADS = C_LIMITS.KVC_MAX_KV_HEADS;
export const MAX_HEAD_DIM = C_LIMITS.KVC_MAX_HEAD_DIM;
export const MAX_POSITIONS = C_LIMITS.KVC_MAX_POSITIONS;
const KIND_LINEAR = C_CODES.KVC_KIND_LINEAR;
const KIND_WINDOW = C_CODES.KVC_KIND_WINDOW;
const KIND_NAMES = { 0: 'full', [KIND_LINEAR]: 'linear', [KIND_WINDOW]: 'window', [C_CODES.KVC_KIND_CONV]: 'conv',
  [C_CODES.KVC_KIND_DELTA]: 'delta', [C_CODES.KVC_KIND_SHARED]: 'shared', [C_CODES.KVC_KIND_MAMBA2]: 'mamba2',
  [C_CODES.KVC_KIND_NONE]: 'none', [C_CODES.KVC_KIND_ATTN_MAMBA2]: 'attn_mamba2' };
/** The most layers a KvCache holds, and so the largest owner a shared layer names. */
export const MAX_LAYERS = 4096;
const MAX_CHANNELS = C_LIMITS.KVC_MAX_CHANNELS;
const MAX_CONV_KERNEL = C_LIMITS.KVC_MAX_CONV_KERNEL;

const adoptPointer = Symbol('adoptPointer');
const owned = ownedObjects((ptr) => lib().kvc_layer_free(ptr));

const quoted = (names) => names.map((name) => `'${name}'`).join(', ');

/** The kvc_mode of a `mode` option: one of MODES, or { keys, values } with
 * each of COMPONENTS ('f32' where left out). */
export function modeOf(where, mode) {
  if (mode === undefined) return 0;
  if (typeof mode === 'string') {
    const code = MODES.indexOf(mode);
    if (code < 0) throw new RangeError(`${where}: mode must be one of ${quoted(MODES)} or { keys, values } (got ${shown(mode)})`);
    return code;
  }
  if (mode === null || typeof mode !== 'object' || Array.isArray(mode)) {
    throw new TypeError(`${where}: mode must be a string or an object { keys, values } (got ${shown(mode)})`);
  }
  checkKeys(where, mode, ['keys', 'values'], 'mode');
  const component = (name) => {
    const value = mode[name] ?? 'f32';
    const code = COMPONENTS.indexOf(value);
    if (code < 0) throw new RangeError(`${where}: mode.${name} must be one of ${quoted(COMPONENTS)} (got ${shown(value)})`);
    return code;
  };
  const keys = component('keys'), values = component('values');
  return callOut(where, (outPtr) => lib().kvc_mode_of(keys, values, outPtr));
}

/** Whether a kvc_mode has a component with a residual window (q4: the rows residualRows sizes). */
function hasResidualWindow(mode) {
  const exports = lib();
  return exports.kvc_component_keeps_window(exports.kvc_mode_component(mode, 0)) === 1 ||
    exports.kvc_component_keeps_window(exports.kvc_mode_component(mode, 1)) === 1;
}

// What a layer's constructor takes, by kind.
const FULL_OPTIONS = ['kind', 'numKvHeads', 'headDim', 'mode', 'residualRows', 'maxRows', 'sinks', 'recent'];
const LINEAR_OPTIONS = ['kind', 'numHeads', 'numFeatures', 'valueDim', 'phaseMass'];
const WINDOW_OPTIONS = ['kind', 'numKvHeads', 'headDim', 'mode', 'residualRows', 'window', 'rollback'];
const CONV_OPTIONS = ['kind', 'channels', 'kernel'];
const DELTA_OPTIONS = ['kind', 'keyHeads', 'valueHeads', 'keyDim', 'valueDim', 'kernel'];
const SHARED_OPTIONS = ['kind', 'owner'];
const NONE_OPTIONS = ['kind'];
const MAMBA2_OPTIONS = ['kind', 'heads', 'headDim', 'groups', 'stateSize', 'kernel'];
const ATTN_MAMBA2_OPTIONS = ['kind', 'numKvHeads', 'headDim', 'mode', 'residualRows', 'heads', 'ssmHeadDim', 'groups', 'stateSize', 'kernel'];
const OPTIONS = {
  full: FULL_OPTIONS, linear: LINEAR_OPTIONS, window: WINDOW_OPTIONS, conv: CONV_OPTIONS, delta: DELTA_OPTIONS, shared: SHARED_OPTIONS,
  mamba2: MAMBA2_OPTIONS,
  none: NONE_OPTIONS, attn_mamba2: ATTN_MAMBA2_OPTIONS,
};

/**
 * A delta or Mamba-2 layer's shape, checked, by its options' names: the
 * heads, the groups they read (a divisor: a delta rule's key heads,
 * Mamba-2's groups of B and C), the sizes of each, and the taps.
 */
function headsShape(where, options, [headsName, groupsName, headSizeName, groupSizeName]) {
  const heads = checkInteger(where, headsName, options[headsName], 1, MAX_KV_HEADS);
  const groups = checkInteger(where, groupsName, options[groupsName], 1, MAX_KV_HEADS);
  if (heads % groups !== 0) throw new RangeError(`${where}: ${headsName} must be a multiple of ${groupsName} (got ${heads} and ${groups})`);
  const headSize = checkInteger(where, headSizeName, options[headSizeName], 1, MAX_HEAD_DIM);
  const groupSize = checkInteger(where, groupSizeName, options[groupSizeName], 1, MAX_HEAD_DIM);
  const kernel = checkInteger(where, 'kernel', options.kernel, 2, MAX_CONV_KERNEL);
  return { heads, groups, headSize, groupSize, kernel };
}

/** A layer of rows' shape, checked: its heads, head size, mode and q4 window (null: the default). */
function rowsShape(where, options) {
  const numKvHeads = checkInteger(where, 'numKvHeads', options.numKvHeads, 1, MAX_KV_HEADS);
  const headDim = checkInteger(where, 'headDim', options.headDim, 1, MAX_HEAD_DIM);
  const mode = modeOf(where, options.mode);
  const residualRows = options.residualRows === undefined ? null
    : checkInteger(where, 'residualRows', options.residualRows, 0, Q4_MAX_RESIDUAL_ROWS);
  if (!hasResidualWindow(mode)) checkUnused(where, options, 'residualRows', 'it sizes the f32 window of a q4 component, and this mode has none');
  return { numKvHeads, headDim, mode, residualRows };
}

/** A new layer of rows given its q4 window and eviction policy (null: none); freed if either is refused. */
function withRowOptions(where, ptr, residualRows, policy) {
  const exports = lib();
  try {
    if (residualRows !== null) checkStatus(where, exports.kvc_layer_set_residual_rows(ptr, residualRows));
    if (policy) checkStatus(where, exports.kvc_layer_set_max_rows(ptr, policy.budget, policy.sinks, policy.recent));
  } catch (error) {
    exports.kvc_layer_free(ptr);
    throw error;
  }
  return ptr;
}

/** Creates a C layer from constructor options; returns its pointer. */
export function createLayer(where, options) {
  checkObject(where, 'options', options);
  const exports = lib();
  const kind = options.kind ?? 'full';
  if (OPTIONS[kind]) checkKeys(where, options, OPTIONS[kind]);
  if (kind === 'full' || kind === 'window') {
    const { numKvHeads, headDim, mode, residualRows } = rowsShape(where, options);
    if (options.maxRows === undefined) {
      checkUnused(where, options, 'sinks', 'it goes with maxRows');
      checkUnused(where, options, 'recent', 'it goes with maxRows');
    }
    const policy = options.maxRows === undefined ? null
      : checkPolicy(where, 'options', { budget: options.maxRows, sinks: options.sinks, recent: options.recent });
    const window = kind === 'window' ? checkInteger(where, 'window', options.window, 1, MAX_POSITIONS) : 0;
    const rollback = kind === 'window' ? checkInteger(where, 'rollback', options.rollback ?? 0, 0, MAX_POSITIONS) : 0;
    const ptr = callOut(where, (outPtr) => (kind === 'window'
      ? exports.kvc_layer_create_window(numKvHeads, headDim, mode, window, rollback, outPtr)
      : exports.kvc_layer_create(numKvHeads, headDim, mode, outPtr)));
    return withRowOptions(where, ptr, residualRows, policy);
  } else if (kind === 'linear') {
    const numHeads = checkInteger(where, 'numHeads', options.numHeads, 1, MAX_KV_HEADS);
    const numFeatures = checkInteger(where, 'numFeatures', options.numFeatures, 1, MAX_HEAD_DIM);
    const valueDim = checkInteger(where, 'valueDim', options.valueDim, 1, MAX_HEAD_DIM);
    const phaseMass = options.phaseMass ?? 0;
    if (typeof phaseMass !== 'number' || !(phaseMass >= 0) || !Number.isFinite(phaseMass)) {
      throw new RangeError(`${where}: phaseMass must be a finite number >= 0 (got ${shown(phaseMass)})`);
    }
    return callOut(where, (outPtr) => exports.kvc_layer_create_linear(numHeads, numFeatures, valueDim, phaseMass, outPtr));
  } else if (kind === 'conv') {
    const channels = checkInteger(where, 'channels', options.channels, 1, MAX_CHANNELS);
    const kernel = checkInteger(where, 'kernel', options.kernel, 2, MAX_CONV_KERNEL);
    return callOut(where, (outPtr) => exports.kvc_layer_create_conv(channels, kernel, outPtr));
  } else if (kind === 'delta') {
    const { heads, groups, headSize, groupSize, kernel } = headsShape(where, options, ['valueHeads', 'keyHeads', 'valueDim', 'keyDim']);
    return callOut(where, (outPtr) => exports.kvc_layer_create_delta(groups, heads, groupSize, headSize, kernel, outPtr));
  } else if (kind === 'mamba2') {
    const { heads, groups, headSize, groupSize, kernel } = headsShape(where, options, ['heads', 'groups', 'headDim', 'stateSize']);
    return callOut(where, (outPtr) => exports.kvc_layer_create_mamba2(heads, headSize, groups, groupSize, kernel, outPtr));
  } else if (kind === 'attn_mamba2') {
    const { numKvHeads, headDim, mode, residualRows } = rowsShape(where, options);
    const { heads, groups, headSize, groupSize, kernel } = headsShape(where, options, ['heads', 'groups', 'ssmHeadDim', 'stateSize']);
    const ptr = callOut(where, (outPtr) => exports.kvc_layer_create_attn_mamba2(numKvHeads, headDim, mode, heads, headSize, groups,
      groupSize, kernel, outPtr));
    return withRowOptions(where, ptr, residualRows, null);
  } else if (kind === 'shared') {
    // Whether it names an earlier layer of rows is for the KvCache it joins to check.
    const owner = checkInteger(where, 'owner', options.owner, 0, MAX_LAYERS - 1);
    return callOut(where, (outPtr) => exports.kvc_layer_create_shared(owner, outPtr));
  } else if (kind === 'none') {
    return callOut(where, (outPtr) => exports.kvc_layer_create_none(outPtr));
  }
  throw new RangeError(`${where}: kind must be 'full', 'window', 'linear', 'conv', 'delta', 'mamba2', 'attn_mamba2', 'shared' or 'none' (got ${shown(kind)})`);
}

/** Wraps a C layer: owned (freed by free() or the finalizer) when `owner` is
 * null, else borrowed from a KvCache, usable while owner.isLive(). */
export function wrapLayer(ptr, owner = null) {
  return new LayerKvCache({ [adoptPointer]: { ptr, owner } });
}

/**
 * The KV cache of one transformer layer.
 *   new LayerKvCache({ numKvHeads, headDim, mode?, residualRows?, maxRows?, sinks?, recent? })   full attention
 *     mode: 'f32' (default), 'q8', 'q8k', 'q8v', 'q4', ... (MODES) or { keys, values }
 *   new LayerKvCache({ kind: 'window', window, rollback?, numKvHeads, headDim, mode?, residualRows? })
 *     sliding-window attention: a query sees the newest `window` positions; the layer
 *     lets go of older rows, keeping `rollback` more (default 0) for truncateLast
 *   new LayerKvCache({ kind: 'linear', numHeads, numFeatures, valueDim, phaseMass? })
 *   new LayerKvCache({ kind: 'conv', channels, kernel })      a short convolution (LFM2's)
 *   new LayerKvCache({ kind: 'delta', keyHeads, valueHeads, keyDim, valueDim, kernel })
 *     a gated delta rule with its convolution in front (Qwen3.5's)
 *   new LayerKvCache({ kind: 'mamba2', heads, headDim, groups, stateSize, kernel })
 *     a Mamba-2 selective scan with its convolution in front (Granite 4.0-H's);
 *     its geometry reads as a delta layer's: keyHeads the groups, valueHeads the
 *     heads, keyDim the state size, valueDim headDim.  The model runner steps
 *     these three (include/kvcache.h: kvc_layer_conv_n, kvc_layer_delta_n, kvc_layer_mamba2_n)
 *   new LayerKvCache({ kind: 'attn_mamba2', numKvHeads, headDim, mode?, residualRows?, heads, ssmHeadDim, groups, stateSize, kernel })
 *     a full layer's rows and a Mamba-2 state in one (Falcon-H1's blocks):
 *     appends and attention go to the rows, kvc_layer_mamba2_n to the state;
 *     forks, verify, truncateLast (the state's last call only) and
 *     snapshots take both (include/kvcache.h: kvc_layer_create_attn_mamba2)
 *   new LayerKvCache({ kind: 'shared', owner })
 *     holds nothing: in a KvCache, it reads the rows of layer `owner`, an earlier
 *     full or window layer (Gemma 4's shared-KV blocks)
 *   new LayerKvCache({ kind: 'none' })
 *     holds nothing and takes no positions (Nemotron-H's MLP-only blocks)
 */
export class LayerKvCache {
  #ptr = 0;
  #owner = null;
  #linear = false;
  #rows = true;
  #kind = 'full';
  #numKvHeads = 0;
  #headDim = 0;

  constructor(options) {
    const adopted = options?.[adoptPointer];
    const ptr = adopted ? adopted.ptr : createLayer('new LayerKvCache', options);
    const exports = lib();
    this.#ptr = ptr;
    this.#owner = adopted?.owner ?? null;
    const kind = exports.kvc_layer_kind(ptr);
    this.#linear = kind === KIND_LINEAR;
    this.#kind = KIND_NAMES[kind] ?? 'full';
    this.#rows = this.#kind === 'full' || this.#kind === 'window' || this.#kind === 'attn_mamba2';
    this.#numKvHeads = exports.kvc_layer_num_kv_heads(ptr) >>> 0;
    this.#headDim = exports.kvc_layer_head_dim(ptr) >>> 0;
    if (!this.#owner) owned.adopt(this, ptr);
  }

  // The live pointer, or a TypeError naming the method once freed.
  #live(where) {
    if (!this.#ptr) throw new TypeError(`LayerKvCache.${where}: the cache was freed`);
    if (this.#owner && !this.#owner.isLive()) {
      throw new TypeError(`LayerKvCache.${where}: the KvCache that owns this layer was freed`);
    }
    return this.#ptr;
  }

  // After the caller's own code has run (a getter of `into`, a policy or an
  // alive proxy), the pointer taken before must still be live: a call that
  // raced free() is refused, never run on freed memory.
  #stillLive(where, ptr) {
    if (this.#live(where) !== ptr) throw new TypeError(`LayerKvCache.${where}: the cache was freed`);
  }

  // The live pointer of a full-attention layer.
  #full(where) {
    const ptr = this.#live(where);
    if (this.#linear) throw new TypeError(`LayerKvCache.${where}: this is a linear layer (it has no rows; see linearStep)`);
    if (this.#kind === 'shared') {
      throw new KvCacheError(`LayerKvCache.${where}: this is a shared layer (it holds no rows: it reads those of layer ${this.owner}, its owner); nothing was changed`, 'KVC_E_KIND');
    }
    if (this.#kind === 'none') throw new KvCacheError(`LayerKvCache.${where}: this is a none layer (it holds nothing); nothing was changed`, 'KVC_E_KIND');
    if (!this.#rows) throw new TypeError(`LayerKvCache.${where}: this is a ${this.#kind} layer (it has no rows, but a recurrent state)`);
    return ptr;
  }

  // The live pointer of a linear layer.
  #linearOnly(where) {
    const ptr = this.#live(where);
    if (!this.#linear) throw new TypeError(`LayerKvCache.${where}: this is a full-attention layer (it has no linear state)`);
    return ptr;
  }

  #checkHead(where, kvHead) {
    return checkInteger(`LayerKvCache.${where}`, 'kvHead', kvHead, 0, this.#numKvHeads - 1);
  }

  get kind() { this.#live('kind'); return this.#kind; }
  /** A shared layer's owner: the index of the layer of its KvCache whose rows it reads (null for other kinds). */
  get owner() {
    const ptr = this.#live('owner');
    return this.#kind === 'shared' ? lib().kvc_layer_owner(ptr) >>> 0 : null;
  }
  /** A window layer's window: the positions a query sees (0 for other kinds). */
  get window() { return lib().kvc_layer_window(this.#live('window')) >>> 0; }
  /** A window layer's rollback: the positions it keeps beyond its window for truncateLast (0 for other kinds). */
  get rollback() { return lib().kvc_layer_window_rollback(this.#live('rollback')) >>> 0; }
  get numKvHeads() { this.#live('numKvHeads'); return this.#numKvHeads; }
  get headDim() { this.#live('headDim'); return this.#headDim; }
  /** How keys and values are stored: one of MODES (null for a linear layer). */
  get mode() {
    const ptr = this.#live('mode');
    return this.#rows ? MODES[lib().kvc_layer_mode(ptr)] : null;
  }
  /** The same per component: { keys, values }, each 'f32', 'q8' or 'q4' (null for a linear layer). */
  get components() {
    const ptr = this.#live('components');
    if (!this.#rows) return null;
    const mode = lib().kvc_layer_mode(ptr);
    return { keys: COMPONENTS[lib().kvc_mode_component(mode, 0)], values: COMPONENTS[lib().kvc_mode_component(mode, 1)] };
  }
  /** The newest rows a q4 component reads in f32 (its residual window). */
  get residualRows() { return lib().kvc_layer_residual_rows(this.#live('residualRows')) >>> 0; }
  /** The most positions truncateLast can take back leaving the cache exactly as if they had never been appended (Infinity without q4 components). */
  get exactRollback() {
    const ptr = this.#live('exactRollback');
    if (!this.#rows) return 0;
    return sizeOrInfinity(lib().kvc_layer_exact_rollback(ptr));
  }
  /** Positions held, one slot each: appended (dead heads included) minus truncated and evicted. */
  get seqLen() { return lib().kvc_layer_seq_len(this.#live('seqLen')) >>> 0; }
  get memoryBytes() { return lib().kvc_layer_memory_bytes(this.#live('memoryBytes')) >>> 0; }
  get capacityBytes() { return lib().kvc_layer_capacity_bytes(this.#live('capacityBytes')) >>> 0; }
  /** The part of memoryBytes held in pages shared with a fork (clone) or the cache it was forked from. */
  get sharedBytes() { return lib().kvc_layer_shared_bytes(this.#live('sharedBytes')) >>> 0; }
  /** True while the per-channel field is frozen (seqLen > 64 with a quantized component). */
  get fieldFrozen() { return lib().kvc_layer_field_frozen(this.#live('fieldFrozen')) !== 0; }
  get numHeads() { return lib().kvc_layer_num_heads(this.#live('numHeads')) >>> 0; }
  get numFeatures() { return lib().kvc_layer_num_features(this.#live('numFeatures')) >>> 0; }
  get valueDim() { return lib().kvc_layer_value_dim(this.#live('valueDim')) >>> 0; }
  get phaseMass() { return lib().kvc_layer_phase_mass(this.#live('phaseMass')); }
  /** A conv or delta layer's shape (0 for other kinds): the convolution's channels and taps, the delta rule's heads and sizes. */
  get channels() { return lib().kvc_layer_channels(this.#live('channels')) >>> 0; }
  get kernel() { return lib().kvc_layer_conv_kernel(this.#live('kernel')) >>> 0; }
  get keyHeads() { return lib().kvc_layer_key_heads(this.#live('keyHeads')) >>> 0; }
  get valueHeads() { return lib().kvc_layer_value_heads(this.#live('valueHeads')) >>> 0; }
  get keyDim() { return lib().kvc_layer_key_dim(this.#live('keyDim')) >>> 0; }
  /** A conv or delta layer's committed f32 state: the convolution's newest inputs, then each value head's keyDim × valueDim matrix (empty for other kinds). */
  get recurrentState() {
    const ptr = this.#live('recurrentState');
    const n = lib().kvc_layer_state_len(ptr) >>> 0;
    if (!n) return new Float32Array(0);
    return this.#read('recurrentState', 'f32', n, (dst) => lib().kvc_layer_recurrent_state(ptr, dst, n));
  }
  /** Steps a recurrent layer has taken, tentative ones included (0 for a layer of rows). */
  get steps() { return lib().kvc_layer_steps(this.#live('steps')) >>> 0; }
  /** True while a speculative verify is open. */
  get verifying() { return lib().kvc_layer_verifying(this.#live('verifying')) !== 0; }
  /** Draft positions (rows or tentative steps) since beginVerify(). */
  get draftLen() { return lib().kvc_layer_draft_len(this.#live('draftLen')) >>> 0; }

  /** A copy of the importance vector, one slot per position (empty for a linear layer). */
  get imp() {
    const ptr = this.#live('imp');
    if (!this.#rows) return new Float32Array(0);
    const n = this.seqLen;
    return this.#read('imp', 'f32', n, (dst) => lib().kvc_layer_imp(ptr, dst, n));
  }

  /** A copy of the committed linear state [numHeads × numFeatures × valueDim] (empty for a full layer). */
  get linearState() {
    const ptr = this.#live('linearState');
    if (!this.#linear) return new Float64Array(0);
    const n = this.#stateLen();
    return this.#read('linearState', 'f64', n, (dst) => lib().kvc_layer_linear_state(ptr, dst, n));
  }

  /** Copies of the tentative states of an open verify, one per tentative step, back to back. */
  get linearScratch() {
    const ptr = this.#live('linearScratch');
    if (!this.#linear) return new Float64Array(0);
    const n = this.draftLen * this.#stateLen();
    return this.#read('linearScratch', 'f64', n, (dst) => lib().kvc_layer_linear_scratch(ptr, dst, n));
  }

  #stateLen() {
    return this.numHeads * this.numFeatures * this.valueDim;
  }

  // Runs `copy(dst)` into staging memory and returns a copy of `count` elements.
  #read(method, view, count, copy) {
    const bytes = view === 'f64' ? 8 : 4;
    return callC(`LayerKvCache.${method}`, [count * bytes], copy, ([dst]) => copyOut(view, dst, count));
  }

  /** Appends one position: k and v are [numKvHeads × headDim]. */
  append(k, v, alive) {
    this.#appendPositions('append', 1, k, v, alive);
  }

  /** Appends n positions (prefill): k and v are [n × numKvHeads × headDim], alive [n × numKvHeads]. */
  appendBatch(k, v, alive) {
    const where = 'LayerKvCache.appendBatch';
    this.#full('appendBatch');
    checkFloat32(where, 'k', k);
    const stride = this.#numKvHeads * this.#headDim;
    if (k.length % stride !== 0) {
      throw new RangeError(`${where}: k must have a length that is a multiple of numKvHeads × headDim = ${stride} (got ${k.length})`);
    }
    this.#appendPositions('appendBatch', k.length / stride, k, v, alive);
  }

  #appendPositions(method, n, k, v, alive) {
    const where = `LayerKvCache.${method}`;
    const ptr = this.#full(method);
    const count = n * this.#numKvHeads * this.#headDim;
    checkFloat32(where, 'k', k, count);
    checkFloat32(where, 'v', v, count);
    const mask = checkAlive(where, alive, n * this.#numKvHeads);
    this.#stillLive(method, ptr); // a proxy for alive may have freed the cache
    if (n === 0) return;
    callC(where, [k, v, mask], (kPtr, vPtr, maskPtr) => lib().kvc_layer_append_n(ptr, n, kPtr, vPtr, maskPtr));
  }

  /**
   * Attention of q [headDim] over the rows of kvHead. Returns { out, probs }:
   * out [headDim], probs one per stored row of the head. Pass `into` to reuse
   * output arrays (out of length headDim, probs at least headLen(kvHead) long).
   */
  attend(q, kvHead, into) {
    const where = 'LayerKvCache.attend';
    const ptr = this.#full('attend');
    checkFloat32(where, 'q', q, this.#headDim);
    return this.#attendQueries(where, ptr, q, 1, kvHead, into,
      (qPtr, outPtr, probsPtr) => lib().kvc_layer_attend(ptr, qPtr, kvHead, outPtr, probsPtr));
  }

  /**
   * The G query heads that share kvHead (grouped-query attention), in one
   * pass over its rows: q is [G × headDim]. Returns { out [G × headDim],
   * probs [G × headLen(kvHead)] }; each query's result is attend()'s, bit for bit.
   */
  attendGroup(q, kvHead, into) {
    const where = 'LayerKvCache.attendGroup';
    const ptr = this.#full('attendGroup');
    const G = this.#queryCount(where, q, 'G');
    return this.#attendQueries(where, ptr, q, G, kvHead, into,
      (qPtr, outPtr, probsPtr) => lib().kvc_layer_attend_group(ptr, qPtr, G, kvHead, outPtr, probsPtr));
  }

  /**
   * A whole layer in one call: q holds numQueryHeads = G × numKvHeads
   * queries [numQueryHeads × headDim], query head i served by KV head
   * ⌊i / G⌋. Returns { out [numQueryHeads × headDim], probs }: probs is
   * [numQueryHeads × seqLen] (weights at each position, 0 where the head
   * stored nothing) when `into.probs` is given, else null (not computed).
   */
  attendHeads(q, into) {
    const where = 'LayerKvCache.attendHeads';
    const ptr = this.#full('attendHeads');
    const d = this.#headDim;
    const H = this.#numKvHeads;
    checkFloat32(where, 'q', q);
    if (q.length === 0 || q.length % (d * H) !== 0) {
      throw new RangeError(`${where}: q must hold a multiple of numKvHeads = ${H} queries of headDim = ${d} values (got length ${q.length})`);
    }
    const numQueryHeads = q.length / d;
    return this.#attendInto(where, ptr, q, numQueryHeads, numQueryHeads * this.seqLen, into, true,
      (qPtr, outPtr, probsPtr) => lib().kvc_layer_attend_heads(ptr, qPtr, numQueryHeads, outPtr, probsPtr));
  }

  /**
   * m queries at once (speculative verify, chunked prefill): q is [m × headDim]
   * and query i sees positions 0 .. seqLen − m + i. Returns { out [m × headDim],
   * probs [m × headLen(kvHead)] } with zeros where a query does not see a row;
   * each query's result is bit-for-bit attend() at its length.
   */
  attendCausal(q, kvHead, into) {
    const where = 'LayerKvCache.attendCausal';
    const ptr = this.#full('attendCausal');
    const m = this.#queryCount(where, q, 'm');
    const seqLen = this.seqLen;
    if (m > seqLen) {
      throw new RangeError(`${where}: q holds ${m} queries but the cache has only ${seqLen} positions`);
    }
    return this.#attendQueries(where, ptr, q, m, kvHead, into,
      (qPtr, outPtr, probsPtr) => lib().kvc_layer_attend_causal(ptr, qPtr, m, kvHead, outPtr, probsPtr));
  }

  // How many queries of headDim values q holds, at least one (`count` is
  // what the message calls them).
  #queryCount(where, q, count) {
    const d = this.#headDim;
    checkFloat32(where, 'q', q);
    if (q.length === 0 || q.length % d !== 0) {
      throw new RangeError(`${where}: q must hold ${count} ≥ 1 queries of headDim = ${d} values (got length ${q.length})`);
    }
    return q.length / d;
  }

  #attendQueries(where, ptr, q, m, kvHead, into, call) {
    this.#checkHead(where.slice('LayerKvCache.'.length), kvHead);
    return this.#attendInto(where, ptr, q, m, m * this.headLen(kvHead), into, false, call);
  }

  // call(qPtr, outPtr, probsPtr) for `queries` queries whose probs take
  // `rows` floats, into `into`'s arrays where given. probs are computed
  // always, or (optionalProbs) only when into.probs is given, else null.
  #attendInto(where, ptr, q, queries, rows, into, optionalProbs, call) {
    const length = queries * this.#headDim;
    if (into !== undefined) checkObject(where, 'into', into);
    let out = into?.out === undefined ? undefined : checkInto(where, into, 'out', length);
    if (out && out.length !== length) {
      throw new RangeError(`${where}: into.out must have length ${length} (got ${out.length})`);
    }
    let probs = into?.probs === undefined ? undefined : checkInto(where, into, 'probs', rows);
    const withProbs = probs !== undefined || !optionalProbs;
    this.#stillLive(where.slice('LayerKvCache.'.length), ptr); // into's getters may have freed the cache
    return callC(where, [q, length * 4, withProbs ? rows * 4 : null], call, ([, outPtr, probsPtr]) => {
      const outView = heapView('f32', outPtr, length);
      if (out) out.set(outView);
      else out = outView.slice();
      if (!withProbs) return { out, probs: null };
      const probsView = heapView('f32', probsPtr, rows);
      if (probs) {
        probs.set(probsView);
        if (probs.length !== rows) probs = probs.subarray(0, rows);
      } else {
        probs = probsView.slice();
      }
      return { out, probs };
    });
  }

  /** Rewinds the last n positions: nextPosition goes back by n (to 0 at most) and the rows at or after it go; before any eviction, the last min(n, seqLen) rows. Not during a verify: use accept. */
  truncateLast(n) {
    const where = 'LayerKvCache.truncateLast';
    const ptr = this.#full('truncateLast');
    checkInteger(where, 'n', n, 0, Number.MAX_SAFE_INTEGER);
    checkStatus(where, lib().kvc_layer_truncate_last(ptr, Math.min(n, MAX_POSITIONS)));
  }

  /** Empties the cache (or zeroes a linear state), keeping its shape; ends a verify. */
  clear() {
    lib().kvc_layer_clear(this.#live('clear'));
  }

  /** imp[p] += probs[p] for every position; probs has length seqLen. */
  accumulateImp(probs) {
    const where = 'LayerKvCache.accumulateImp';
    const ptr = this.#full('accumulateImp');
    checkFloat32(where, 'probs', probs, this.seqLen);
    callC(where, [probs], (probsPtr) => lib().kvc_layer_accumulate_imp(ptr, probsPtr, probs.length));
  }

  /** Adds one head's row probabilities (as attend returns them) at that head's positions. */
  accumulateImpHead(kvHead, probs) {
    const where = 'LayerKvCache.accumulateImpHead';
    const ptr = this.#full('accumulateImpHead');
    this.#checkHead('accumulateImpHead', kvHead);
    checkFloat32(where, 'probs', probs, this.headLen(kvHead));
    callC(where, [probs], (probsPtr) => lib().kvc_layer_accumulate_imp_head(ptr, kvHead, probsPtr, probs.length));
  }

  /** Rows stored for kvHead (0 for a head that was never alive). */
  headLen(kvHead) {
    const ptr = this.#full('headLen');
    this.#checkHead('headLen', kvHead);
    return lib().kvc_layer_head_len(ptr, kvHead) >>> 0;
  }

  /** The head's keys, [headLen × headDim] f32 (a dequantized copy when quantized). */
  headKeys(kvHead) {
    return this.#copyRows('headKeys', kvHead, 'kvc_layer_head_keys', 'f32', this.#headDim);
  }

  /** The head's values, [headLen × headDim] f32 (a dequantized copy when quantized). */
  headValues(kvHead) {
    return this.#copyRows('headValues', kvHead, 'kvc_layer_head_values', 'f32', this.#headDim);
  }

  /** The position of each stored row of kvHead, ascending. */
  headPositions(kvHead) {
    return this.#copyRows('headPositions', kvHead, 'kvc_layer_head_positions', 'u32', 1);
  }

  #copyRows(method, kvHead, cFunction, view, perRow) {
    const ptr = this.#full(method);
    this.#checkHead(method, kvHead);
    const count = this.headLen(kvHead) * perRow;
    return this.#read(method, view, count, (dst) => lib()[cFunction](ptr, kvHead, dst, count));
  }

  /**
   * One step of a linear layer: phiK, phiQ and decay (optional, default all
   * ones) are [numHeads × numFeatures], v is [numHeads × valueDim]. Returns
   * the output [numHeads × valueDim] (into `out` when given). During a verify
   * the step is tentative.
   */
  linearStep(phiK, phiQ, v, decay, out) {
    return this.#step('linearStep', phiK, phiQ, v, decay, out, this.numFeatures, ['phiK', 'phiQ'],
      'kvc_layer_linear_step');
  }

  /**
   * linearStep with the vmf_phase feature map: thetaK and thetaQ are
   * [numHeads × numFeatures/2] phases, φ(θ) = [cos(mθ), sin(mθ)],
   * m = 1 / (1 + phaseMass).
   */
  linearStepPhase(thetaK, thetaQ, v, decay, out) {
    const where = 'LayerKvCache.linearStepPhase';
    this.#linearOnly('linearStepPhase');
    const numFeatures = this.numFeatures;
    if (numFeatures % 2 !== 0) {
      throw new RangeError(`${where}: the vmf_phase feature map needs an even numFeatures (this layer has ${numFeatures})`);
    }
    return this.#step('linearStepPhase', thetaK, thetaQ, v, decay, out, numFeatures / 2,
      ['thetaK', 'thetaQ'], 'kvc_layer_linear_step_phase');
  }

  #step(method, keyIn, queryIn, v, decay, out, inWidth, [keyName, queryName], cFunction) {
    const where = `LayerKvCache.${method}`;
    const ptr = this.#linearOnly(method);
    const H = this.numHeads;
    const F = this.numFeatures;
    const dv = this.valueDim;
    checkFloat32(where, keyName, keyIn, H * inWidth);
    checkFloat32(where, queryName, queryIn, H * inWidth);
    checkFloat32(where, 'v', v, H * dv);
    if (decay !== undefined && decay !== null) checkFloat32(where, 'decay', decay, H * F);
    if (out !== undefined) checkFloat32(where, 'out', out, H * dv);
    return callC(where, [keyIn, queryIn, v, decay ?? null, H * dv * 4],
      (kPtr, qPtr, vPtr, decayPtr, outPtr) => lib()[cFunction](ptr, decayPtr, kPtr, qPtr, vPtr, outPtr),
      ([, , , , outPtr]) => {
        const result = heapView('f32', outPtr, H * dv);
        if (!out) return result.slice();
        out.set(result);
        return out;
      },
      { k: keyName, q: queryName, v: 'v' });
  }

  /** Opens a speculative verify: appends (or linear steps) from now on are drafts. */
  beginVerify() {
    checkStatus('LayerKvCache.beginVerify', lib().kvc_layer_begin_verify(this.#live('beginVerify')));
  }

  /** Keeps the first j draft positions and closes the verify; accept(0) rejects them all. With maxRows, j > 0 then evicts back to it. */
  accept(j) {
    const where = 'LayerKvCache.accept';
    const ptr = this.#live('accept');
    checkAccepted(where, j, this.verifying ? this.draftLen : undefined);
    checkStatus(where, lib().kvc_layer_accept(ptr, j));
  }

  /** Drops every draft position and closes the verify: accept(0). */
  reject() {
    checkStatus('LayerKvCache.reject', lib().kvc_layer_accept(this.#live('reject'), 0));
  }

  /** The absolute position of each slot (seqLen of them, increasing): 0, 1, 2, … until the cache evicts. */
  positions() {
    const ptr = this.#full('positions');
    const n = this.seqLen;
    return this.#read('positions', 'u32', n, (dst) => lib().kvc_layer_positions(ptr, dst, n));
  }

  /** The absolute position the next append gets (its RoPE position). */
  get nextPosition() { return lib().kvc_layer_next_position(this.#live('nextPosition')) >>> 0; }

  /**
   * Keeps at most `budget` positions: the first `sinks` (default 4), the
   * `recent` newest (default half the rest), and between them those with the
   * most attention (imp), in order; the rest are dropped in place, nothing
   * requantized. Returns the absolute positions kept.
   */
  evict(policy) {
    const where = 'LayerKvCache.evict';
    const ptr = this.#full('evict');
    const { budget, sinks, recent } = checkPolicy(where, 'policy', policy);
    this.#stillLive('evict', ptr);
    checkStatus(where, lib().kvc_layer_evict(ptr, budget, sinks, recent));
    return this.positions();
  }

  /** A sliding window: keeps the first `sinks` and the newest window − sinks positions. Returns the positions kept. */
  slideWindow(window, sinks = Math.min(4, window)) {
    const where = 'LayerKvCache.slideWindow';
    const ptr = this.#full('slideWindow');
    checkInteger(where, 'window', window, 1, MAX_POSITIONS);
    checkInteger(where, 'sinks', sinks, 0, window);
    checkStatus(where, lib().kvc_layer_slide_window(ptr, window, sinks));
    return this.positions();
  }

  /** The absolute positions evict(policy) would keep, without evicting. */
  evictionPlan(policy) {
    const where = 'LayerKvCache.evictionPlan';
    const ptr = this.#full('evictionPlan');
    const { budget, sinks, recent } = checkPolicy(where, 'policy', policy);
    this.#stillLive('evictionPlan', ptr);
    const n = Math.min(this.seqLen, budget);
    return callC(where, [n * 4, 4], (dst, countPtr) => lib().kvc_layer_eviction_plan(ptr, budget, sinks, recent, dst, n, countPtr),
      ([dst, countPtr]) => copyOut('u32', dst, u32At(countPtr)));
  }

  /**
   * Bounds the cache: an append that would take it past maxRows first
   * evicts with { sinks, recent } (evict's defaults). A verify's drafts go
   * past it; accept(j > 0) evicts back to it, keeping the accepted positions,
   * and a rejected verify changes nothing. 0 turns it off.
   */
  setMaxRows(maxRows, options = {}) {
    const where = 'LayerKvCache.setMaxRows';
    checkObject(where, 'options', options);
    checkKeys(where, options, ['sinks', 'recent']);
    const { sinks, recent } = options;
    const ptr = this.#full('setMaxRows');
    checkInteger(where, 'maxRows', maxRows, 0, MAX_POSITIONS);
    if (maxRows === 0) {
      checkUnused(where, { sinks, recent }, 'sinks', 'maxRows 0 turns the bound off');
      checkUnused(where, { sinks, recent }, 'recent', 'maxRows 0 turns the bound off');
    }
    const policy = maxRows === 0 ? { budget: 0, sinks: 0, recent: 0 } : checkPolicy(where, 'options', { budget: maxRows, sinks, recent });
    this.#stillLive('setMaxRows', ptr);
    checkStatus(where, lib().kvc_layer_set_max_rows(ptr, policy.budget, policy.sinks, policy.recent));
  }

  /**
   * The whole cache as bytes (a versioned, checksummed snapshot; the same
   * bytes from every build): save it to IndexedDB or OPFS, or send it to a
   * worker, and restore it with LayerKvCache.deserialize. Not during a verify.
   */
  serialize() {
    return serializeHandle('LayerKvCache.serialize', 'kvc_layer', this.#live('serialize'));
  }

  /** A new cache from serialize()'s bytes; corrupt, truncated or foreign bytes throw a KvCacheError saying why. */
  static deserialize(bytes) {
    return wrapLayer(deserializeHandle('LayerKvCache.deserialize', 'kvc_layer', bytes));
  }

  /**
   * An independent copy (fork a conversation), copy-on-write: it shares
   * every page with this cache until either writes into one. Not during a verify.
   */
  clone() {
    return wrapLayer(cloneHandle('LayerKvCache.clone', 'kvc_layer', this.#live('clone')));
  }

  /** Releases the cache's memory now. Idempotent; any later call throws. */
  free() {
    if (this.#owner) {
      throw new TypeError('LayerKvCache.free: this layer belongs to a KvCache; free the KvCache instead');
    }
    this.#ptr = owned.release(this, this.#ptr);
  }

  [disposeSymbol]() { this.free(); }

  toString() {
    if (!this.#ptr || (this.#owner && !this.#owner.isLive())) return 'LayerKvCache{freed}';
    const ptr = this.#ptr;
    const length = lib().kvc_layer_describe(ptr, 0, 0) >>> 0;
    return callC('LayerKvCache.toString', [length + 1], (buf) => {
      lib().kvc_layer_describe(ptr, buf, length + 1);
      return 0; // a length, not a status
    }, ([buf]) => readCString(buf));
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return this.toString();
  }
}


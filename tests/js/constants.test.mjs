// The names and limits the package shares with C: include/kvcache.h is their
// source. Each is checked three ways -- the header's text, what the built
// module reports (kvc_status_symbol, kvc_constant_name/_value,
// kvc_mode_name, kvc_component_name) and what the package exports -- and
// init() must refuse a module that disagrees with the loader.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import init, {
  COMPONENTS, KvCache, LayerKvCache, MAX_HEAD_DIM, MAX_KV_HEADS, MAX_POSITIONS, MODES, Q4_MAX_RESIDUAL_ROWS,
  Q4_RESIDUAL_ROWS, Q8_WINDOW, memoryStats,
} from '../../js/index.js';
import { C_LIMITS, checkNames } from '../../js/constants.js';
import { lib, readCString, statusName } from '../../js/runtime.js';

const HEADER = readFileSync(new URL('../../include/kvcache.h', import.meta.url), 'utf8');

/** The value of `#define name value` in the header, as a number. */
function defined(name) {
  const match = HEADER.match(new RegExp(`^#define ${name} (\\S+)`, 'm'));
  assert.ok(match, `kvcache.h defines ${name}`);
  return Number(match[1].replace(/u$/, ''));
}

/** The header's kvc_status enumerators by value. */
function headerStatuses() {
  const body = HEADER.match(/typedef enum kvc_status \{([\s\S]*?)\} kvc_status;/)[1];
  const statuses = [];
  for (const [, name, value] of body.matchAll(/(KVC_\w+) = (\d+)/g)) statuses[Number(value)] = name;
  return statuses;
}

/** What the module reports: its constants by name, its modes and components in enum order. */
function moduleNames() {
  const e = lib();
  const list = (nameOf) => {
    const names = [];
    for (let ptr; (ptr = nameOf(names.length) >>> 0) !== 0;) names.push(readCString(ptr));
    return names;
  };
  return {
    constants: Object.fromEntries(list(e.kvc_constant_name).map((name, i) => [name, e.kvc_constant_value(i) >>> 0])),
    modes: list(e.kvc_mode_name),
    components: list(e.kvc_component_name),
  };
}

before(() => init());

test('every status is named as the header names it, and others as "status N"', () => {
  const statuses = headerStatuses();
  assert.ok(statuses.length > 40 && statuses.every(Boolean), 'the header numbers its statuses 0, 1, 2, ... without a gap');
  statuses.forEach((name, value) => assert.equal(statusName(value), name, `status ${value}`));
  assert.equal(statusName(statuses.length), `status ${statuses.length}`);
});

test('the exported limits are the header\'s and the module\'s', () => {
  const exported = {
    KVC_Q8_WINDOW: Q8_WINDOW, KVC_MAX_KV_HEADS: MAX_KV_HEADS, KVC_MAX_HEAD_DIM: MAX_HEAD_DIM, KVC_MAX_POSITIONS: MAX_POSITIONS,
    KVC_Q4_RESIDUAL_ROWS: Q4_RESIDUAL_ROWS, KVC_Q4_MAX_RESIDUAL_ROWS: Q4_MAX_RESIDUAL_ROWS,
  };
  const { constants } = moduleNames();
  for (const [name, value] of Object.entries({ ...C_LIMITS, ...exported })) {
    assert.equal(value, defined(name), `${name} in kvcache.h`);
    assert.equal(value, constants[name], `${name} in kvcache.wasm`);
  }
  assert.equal(C_LIMITS.KVC_MAX_THREADS, defined('KVC_MAX_THREADS'));
  assert.equal(constants.KVC_MODE_COUNT, MODES.length);
});

test('MODES and COMPONENTS are the module\'s names, in kvc_mode and kvc_component order', () => {
  const { modes, components } = moduleNames();
  assert.deepEqual(MODES, modes);
  assert.deepEqual(COMPONENTS, components);
  for (const [value, name] of MODES.entries()) {
    const layer = new LayerKvCache({ numKvHeads: 1, headDim: 4, mode: name });
    assert.equal(layer.mode, name);
    assert.match(layer.toString(), new RegExp(`mode=${name.replace('+', '\\+')} `), `value ${value}`);
    layer.free();
  }
  assert.equal(readCString(lib().kvc_status_name(2) >>> 0), `mode is not one of ${MODES.join(', ')}`);
});

test('init() refuses a module whose limits or names differ from the loader\'s', () => {
  const same = moduleNames();
  assert.doesNotThrow(() => checkNames(same));
  const changed = (edit) => {
    const names = structuredClone(same);
    edit(names);
    return () => checkNames(names);
  };
  const refused = /init: this kvcache\.wasm does not match the loader/;
  assert.throws(changed((n) => { n.constants.KVC_MAX_HEAD_DIM = 2048; }), /its KVC_MAX_HEAD_DIM is 2048, the loader's 4096/);
  assert.throws(changed((n) => { delete n.constants.KVC_MAX_THREADS; }), /its KVC_MAX_THREADS is missing/);
  assert.throws(changed((n) => { n.modes.push('q2'); }), refused);
  assert.throws(changed((n) => { n.modes.reverse(); }), refused);
  assert.throws(changed((n) => { n.components.pop(); }), refused);
});

test('memoryStats reads kvc_memory_usage through the module\'s accessors', () => {
  const before = memoryStats();
  const cache = new KvCache({ numLayers: 3, numKvHeads: 2, headDim: 8 });
  cache.appendLayerBatch(0, new Float32Array(2 * 8).fill(1), new Float32Array(2 * 8).fill(2));
  const during = memoryStats();
  assert.equal(during.layers, before.layers + 3);
  assert.ok(during.pages > before.pages, 'the append took pages');
  assert.equal(during.cacheBytes - before.cacheBytes, cache.memoryBytes);
  cache.free();
  assert.deepEqual({ ...memoryStats(), heapBytes: 0 }, { ...before, heapBytes: 0 });
});

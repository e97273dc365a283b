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
import { C_CODES, C_LIMITS, checkNames } from '../../js/runtime/constants.js';
import {
  MEMORY_INITIAL_PAGES, MEMORY_MAXIMUM_PAGES, importsFor, lib, readCString, statusName, unsharedMemoryImport,
} from '../../js/runtime/runtime.js';

const HEADER = readFileSync(new URL('../../include/kvcache.h', import.meta.url), 'utf8');

/** The value of `#define name value` in the header, as a number. */
function defined(name) {
  const match = HEADER.match(new RegExp(`^#define ${name} (\\S+)`, 'm'));
  assert.ok(match, `kvcache.h defines ${name}`);
  return Number(match[1].replace(/u$/, ''));
}

/** The value of an enumerator (`NAME = value`) or a `#define` in the header, as a number. */
function code(name) {
  const match = HEADER.match(new RegExp(`\\b${name} = (\\d+)\\b`));
  return match ? Number(match[1]) : defined(name);
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

test('the codes the package passes and reads are the header\'s and the module\'s', () => {
  const { constants } = moduleNames();
  for (const [name, value] of Object.entries(C_CODES)) {
    assert.equal(value, code(name), `${name} in kvcache.h`);
    assert.equal(value, constants[name], `${name} in kvcache.wasm`);
  }
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
  assert.throws(changed((n) => { n.constants.KVC_GGUF_STRING = 9; }), /its KVC_GGUF_STRING is 9, the loader's 8/);
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

/** The limits, in 64 KiB pages, of the memory a module's bytes import: { initial, maximum }. */
function memoryImport(bytes) {
  let at = 8; // magic and version
  const leb = () => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = bytes[at++];
      value += (byte & 0x7f) * 2 ** shift;
      if (!(byte & 0x80)) return value;
    }
  };
  const name = () => {
    const length = leb();
    at += length;
  };
  while (at < bytes.length) {
    const id = bytes[at++];
    const end = leb() + at;
    if (id === 2) { // imports
      for (let count = leb(); count > 0; count--) {
        name();
        name();
        const kind = bytes[at++];
        assert.equal(kind, kind === 0 ? 0 : 2, 'the module imports functions and one memory');
        if (kind === 0) leb();
        else {
          const flags = bytes[at++];
          const initial = leb();
          return { initial, maximum: flags & 1 ? leb() : null };
        }
      }
    }
    at = end;
  }
  return null;
}

test('the loader\'s memory is the one both builds import (CMakeLists.txt: INITIAL_MEMORY, MAXIMUM_MEMORY)', () => {
  for (const file of ['kvcache.wasm', 'kvcache-relaxed.wasm']) {
    const limits = memoryImport(readFileSync(new URL(`../../dist/${file}`, import.meta.url)));
    assert.deepEqual(limits, { initial: MEMORY_INITIAL_PAGES, maximum: MEMORY_MAXIMUM_PAGES }, file);
  }
});

test('where no shared memory can be made, the module compiles with its memory import unshared and runs on one', async () => {
  const bytes = readFileSync(new URL('../../dist/kvcache.wasm', import.meta.url));
  const unshared = unsharedMemoryImport(bytes);
  assert.deepEqual(memoryImport(unshared), memoryImport(bytes), 'the same limits');
  assert.equal(unshared.filter((byte, i) => byte !== bytes[i]).length, 1, 'one byte changed: the flags');
  const memory = new WebAssembly.Memory({ initial: MEMORY_INITIAL_PAGES, maximum: MEMORY_MAXIMUM_PAGES });
  const { exports } = await WebAssembly.instantiate(await WebAssembly.compile(unshared), importsFor(memory));
  exports._initialize?.();
  assert.equal(readCStringIn(memory, exports.kvc_status_symbol(12) >>> 0), 'KVC_E_NOMEM');
});

/** A NUL-terminated string at `ptr` of `memory`. */
function readCStringIn(memory, ptr) {
  const u8 = new Uint8Array(memory.buffer);
  return new TextDecoder().decode(u8.slice(ptr, u8.indexOf(0, ptr)));
}

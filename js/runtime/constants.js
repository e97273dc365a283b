// The limits, codes and names of include/kvcache.h that the package exports,
// checks arguments against and passes to C. C is their source; they are
// written here too because options are checked, and the constants exported,
// before init() has loaded anything. init() compares each with the module's own
// (kvc_constant_name/_value, kvc_mode_name, kvc_component_name) and refuses
// a module that disagrees, as it refuses one of another ABI: the two cannot
// drift apart unnoticed. (Status names need no copy: they are read from the
// module, runtime.js statusName.)

/** The header's macros the package uses, by their C names. */
export const C_LIMITS = Object.freeze({
  KVC_Q8_WINDOW: 64,
  KVC_MAX_KV_HEADS: 4096,
  KVC_MAX_HEAD_DIM: 4096,
  KVC_MAX_POSITIONS: 0x7fffffff,
  KVC_MAX_THREADS: 64,
  KVC_Q4_RESIDUAL_ROWS: 64,
  KVC_Q4_MAX_RESIDUAL_ROWS: 4096,
  KVC_LM_BATCH: 512,
  KVC_MAX_CHANNELS: 65536,
  KVC_MAX_CONV_KERNEL: 16,
  KVC_MAX_STEP_TOKENS: 4096,
});

/** The header's enumerators and flags the package reads or passes, by their C names. */
export const C_CODES = Object.freeze({
  KVC_KIND_LINEAR: 1,
  KVC_KIND_WINDOW: 2,
  KVC_KIND_CONV: 3,
  KVC_KIND_DELTA: 4,
  KVC_KIND_SHARED: 5,
  KVC_KIND_MAMBA2: 6,
  KVC_KIND_NONE: 7,
  KVC_KIND_ATTN_MAMBA2: 8,
  KVC_LM_IMPORTANCE: 1,
  KVC_LM_VERIFY: 2,
  KVC_LM_SPAN: 4,
  KVC_GGUF_UINT8: 0,
  KVC_GGUF_INT8: 1,
  KVC_GGUF_UINT16: 2,
  KVC_GGUF_INT16: 3,
  KVC_GGUF_UINT32: 4,
  KVC_GGUF_INT32: 5,
  KVC_GGUF_FLOAT32: 6,
  KVC_GGUF_BOOL: 7,
  KVC_GGUF_STRING: 8,
  KVC_GGUF_ARRAY: 9,
  KVC_GGUF_UINT64: 10,
  KVC_GGUF_INT64: 11,
  KVC_GGUF_FLOAT64: 12,
  KVC_PROFILE_EMBED: 0,
  KVC_PROFILE_NORM: 1,
  KVC_PROFILE_QUANTIZE: 2,
  KVC_PROFILE_QKV: 3,
  KVC_PROFILE_ROPE: 4,
  KVC_PROFILE_APPEND: 5,
  KVC_PROFILE_ATTEND: 6,
  KVC_PROFILE_WO: 7,
  KVC_PROFILE_RECURRENT: 8,
  KVC_PROFILE_GATE_UP: 9,
  KVC_PROFILE_ACTIVATION: 10,
  KVC_PROFILE_DOWN: 11,
  KVC_PROFILE_RESIDUAL: 12,
  KVC_PROFILE_LOGITS: 13,
  KVC_PROFILE_POOL_WAIT: 14,
  KVC_PROFILE_OPS: 15,
});

// A mode's name by its kvc_mode value; each is also a string `mode` takes.
export const MODES = ['f32', 'q8', 'q8k', 'q8v', 'q4', 'q4k', 'q4v', 'q8k+q4v', 'q4k+q8v'];
// A component's storage by its kvc_component value.
export const COMPONENTS = ['f32', 'q8', 'q4'];

/**
 * Throws unless `module` -- { constants: { name: value }, modes, components },
 * as the wasm module reports them -- has every limit, code and name above.
 */
export function checkNames(module) {
  const differ = (what, ours, theirs) => {
    throw new Error(`init: this kvcache.wasm does not match the loader (its ${what} is ${theirs}, the loader's ${ours}); rebuild both`);
  };
  for (const [name, value] of Object.entries({ ...C_LIMITS, ...C_CODES })) {
    if (module.constants[name] !== value) differ(name, value, module.constants[name] ?? 'missing');
  }
  const list = (names) => JSON.stringify(names);
  if (list(module.modes) !== list(MODES)) differ('list of modes', list(MODES), list(module.modes));
  if (list(module.components) !== list(COMPONENTS)) differ('list of components', list(COMPONENTS), list(module.components));
}

/* gemm-f32-wasmrelaxed.c -- F32 weights with f32x4.relaxed_madd: one rounding
 * or two, as the engine does it, the same on every call (so every promise of
 * weights.h holds within the set), equal to the other sets' to rounding. */
#include <wasm_simd128.h>

#define KVC_FLOAT_NAME kvc_gemm_f32__wasmrelaxed
#define KVC_FLOAT_MAC(acc, w, x) acc = wasm_f32x4_relaxed_madd(w, x, acc)
#include "gemm-f32-wasmsimd.c"

/* kvc_scores_f32 with the relaxed fused multiply-add, f32x4.relaxed_madd: one
 * rounding or two, as the hardware does it -- the same on every call on one
 * machine, so every exactness promise holds within the build, but not the
 * SIMD128 set's bits. */
#include <wasm_simd128.h>

#define MAC(acc, a, b) acc = wasm_f32x4_relaxed_madd(a, b, acc)
#define KVC_SCORES_F32_NAME kvc_scores_f32__wasmrelaxed
#include "scores-f32-wasmsimd.c"

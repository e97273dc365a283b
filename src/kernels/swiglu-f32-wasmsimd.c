#include "exp-f32-wasmsimd.h"
#include "kernels.h"
#include "map-f32-wasmsimd.h"

/* The scalar kernel's operations on four lanes: the same bits. */
static inline v128_t swiglu4(v128_t x, v128_t up) {
    const v128_t t = kvc_exp4_f32(wasm_f32x4_neg(wasm_f32x4_abs(x)));
    const v128_t numerator = wasm_v128_bitselect(x, wasm_f32x4_mul(x, t), wasm_f32x4_ge(x, wasm_f32x4_const_splat(0.0f)));
    return wasm_f32x4_mul(wasm_f32x4_div(numerator, wasm_f32x4_add(wasm_f32x4_const_splat(1.0f), t)), up);
}

void kvc_swiglu_f32__wasmsimd(size_t n, float *gate, const float *up) {
    kvc_map2_f32(swiglu4, n, gate, up, gate);
}

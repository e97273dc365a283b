#include <float.h>
#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"

int kvc_all_finite__wasmsimd(size_t n, const float *x) {
    /* |x| <= FLT_MAX is false for +-Inf and for NaN (every compare with NaN is). */
    const v128_t limit = wasm_f32x4_const_splat(FLT_MAX);
    v128_t finite = wasm_i32x4_const_splat(-1);
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        finite = wasm_v128_and(finite, wasm_f32x4_le(wasm_f32x4_abs(wasm_v128_load(x + j)), limit));
    }
    if (j < n) {
        float tail[4] = {0.0f};
        memcpy(tail, x + j, (n - j) * sizeof(float));
        finite = wasm_v128_and(finite, wasm_f32x4_le(wasm_f32x4_abs(wasm_v128_load(tail)), limit));
    }
    return wasm_i32x4_all_true(finite);
}

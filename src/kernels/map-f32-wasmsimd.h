/* map-f32-wasmsimd.h -- an element-wise kernel of two f32 inputs on four
 * lanes: y[j] = op(a[j], b[j]), the last n mod 4 lanes through a padded
 * vector.  Each vector is read before its result is stored, so y may alias
 * a or b. */
#ifndef KVC_MAP_F32_WASMSIMD_H
#define KVC_MAP_F32_WASMSIMD_H

#include <string.h>
#include <wasm_simd128.h>

typedef v128_t kvc_map_f32x4_fn(v128_t a, v128_t b);

static inline void kvc_map2_f32(kvc_map_f32x4_fn *op, size_t n, const float *a, const float *b, float *y) {
    size_t j = 0;
    for (; j + 4 <= n; j += 4) wasm_v128_store(y + j, op(wasm_v128_load(a + j), wasm_v128_load(b + j)));
    if (j < n) {
        float a_tail[4] = {0.0f}, b_tail[4] = {0.0f};
        memcpy(a_tail, a + j, (n - j) * sizeof(float));
        memcpy(b_tail, b + j, (n - j) * sizeof(float));
        wasm_v128_store(a_tail, op(wasm_v128_load(a_tail), wasm_v128_load(b_tail)));
        memcpy(y + j, a_tail, (n - j) * sizeof(float));
    }
}

#endif /* KVC_MAP_F32_WASMSIMD_H */

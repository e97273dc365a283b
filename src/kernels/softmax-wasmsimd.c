#include <wasm_simd128.h>

#include "exp-f32.h"
#include "kernels.h"

/* kvc_exp_f32 of four lanes: the same operations, lane by lane. */
static v128_t exp4(v128_t x) {
    const v128_t n = wasm_f32x4_sub(
        wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_const_splat(KVC_EXP_LOG2E)),
                       wasm_f32x4_const_splat(KVC_EXP_ROUND)),
        wasm_f32x4_const_splat(KVC_EXP_ROUND));
    v128_t r = wasm_f32x4_sub(x, wasm_f32x4_mul(n, wasm_f32x4_const_splat(KVC_EXP_LN2_HI)));
    r = wasm_f32x4_sub(r, wasm_f32x4_mul(n, wasm_f32x4_const_splat(KVC_EXP_LN2_LO)));
    v128_t p = wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_const_splat(KVC_EXP_C5), r),
                              wasm_f32x4_const_splat(KVC_EXP_C4));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_const_splat(KVC_EXP_C3));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_const_splat(KVC_EXP_C2));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_const_splat(KVC_EXP_C1));
    const v128_t scale = wasm_i32x4_shl(
        wasm_i32x4_add(wasm_i32x4_trunc_sat_f32x4(n), wasm_i32x4_const_splat(127)), 23);
    const v128_t e = wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_mul(r, scale), p), scale);
    /* Below KVC_EXP_MIN (and for NaN): 0. */
    return wasm_v128_and(e, wasm_f32x4_ge(x, wasm_f32x4_const_splat(KVC_EXP_MIN)));
}

static void softmax_row(size_t n, float *z) {
    v128_t vmax = wasm_v128_load32_splat(z);
    size_t p = 0;
    for (; p + 4 <= n; p += 4) vmax = wasm_f32x4_pmax(vmax, wasm_v128_load(z + p));
    float lanes[4];
    wasm_v128_store(lanes, vmax);
    float max = lanes[0];
    for (int lane = 1; lane < 4; lane++) {
        if (max < lanes[lane]) max = lanes[lane];
    }
    for (; p < n; p++) {
        if (max < z[p]) max = z[p];
    }
    const v128_t vmax_all = wasm_f32x4_splat(max);
    v128_t sums = wasm_f32x4_const_splat(0.0f);
    for (p = 0; p + 4 <= n; p += 4) {
        const v128_t e = exp4(wasm_f32x4_sub(wasm_v128_load(z + p), vmax_all));
        wasm_v128_store(z + p, e);
        sums = wasm_f32x4_add(sums, e);
    }
    wasm_v128_store(lanes, sums);
    for (; p < n; p++) {
        z[p] = kvc_exp_f32(z[p] - max);
        lanes[p % 4] += z[p];
    }
    const float inverse = 1.0f / ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]));
    const v128_t vinverse = wasm_f32x4_splat(inverse);
    for (p = 0; p + 4 <= n; p += 4) wasm_v128_store(z + p, wasm_f32x4_mul(wasm_v128_load(z + p), vinverse));
    for (; p < n; p++) z[p] = z[p] * inverse;
}

void kvc_softmax__wasmsimd(size_t G, size_t n, float *z, size_t z_stride) {
    for (size_t g = 0; g < G; g++) softmax_row(n, z + g * z_stride);
}

#include <wasm_simd128.h>

#include "exp-f32.h"
#include "exp-f32-wasmsimd.h"
#include "kernels.h"

static void softmax_row(size_t n, float *z, float *max, float *sum) {
    v128_t vmax = wasm_v128_load32_splat(z);
    size_t p = 0;
    for (; p + 4 <= n; p += 4) vmax = wasm_f32x4_pmax(vmax, wasm_v128_load(z + p));
    float lanes[4];
    wasm_v128_store(lanes, vmax);
    float m = lanes[0];
    for (int lane = 1; lane < 4; lane++) {
        if (m < lanes[lane]) m = lanes[lane];
    }
    for (; p < n; p++) {
        if (m < z[p]) m = z[p];
    }
    const v128_t vmax_all = wasm_f32x4_splat(m);
    v128_t sums = wasm_f32x4_const_splat(0.0f);
    for (p = 0; p + 4 <= n; p += 4) {
        const v128_t e = kvc_exp4_f32(wasm_f32x4_sub(wasm_v128_load(z + p), vmax_all));
        wasm_v128_store(z + p, e);
        sums = wasm_f32x4_add(sums, e);
    }
    wasm_v128_store(lanes, sums);
    for (; p < n; p++) {
        z[p] = kvc_exp_f32(z[p] - m);
        lanes[p % 4] += z[p];
    }
    const float total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    const float inverse = 1.0f / total;
    const v128_t vinverse = wasm_f32x4_splat(inverse);
    for (p = 0; p + 4 <= n; p += 4) wasm_v128_store(z + p, wasm_f32x4_mul(wasm_v128_load(z + p), vinverse));
    for (; p < n; p++) z[p] = z[p] * inverse;
    *max = m;
    *sum = total;
}

void kvc_softmax__wasmsimd(size_t G, size_t n, float *z, size_t z_stride, float *max, float *sum) {
    for (size_t g = 0; g < G; g++) softmax_row(n, z + g * z_stride, max + g, sum + g);
}

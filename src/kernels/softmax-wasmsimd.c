#include <math.h>
#include <wasm_simd128.h>

#include "kernels.h"

void kvc_softmax__wasmsimd(size_t n, float *z) {
    /* The maximum is order-independent, so lanes give the scalar result. */
    v128_t vmax = wasm_f32x4_splat(z[0]);
    size_t p = 0;
    for (; p + 4 <= n; p += 4) vmax = wasm_f32x4_pmax(vmax, wasm_v128_load(z + p));
    float max = wasm_f32x4_extract_lane(vmax, 0);
    float lanes[4];
    wasm_v128_store(lanes, vmax);
    for (int lane = 1; lane < 4; lane++) {
        if (max < lanes[lane]) max = lanes[lane];
    }
    for (; p < n; p++) {
        if (max < z[p]) max = z[p];
    }
    /* exp and the sum stay scalar, in index order, so the sum is the scalar one. */
    float sum = 0.0f;
    for (p = 0; p < n; p++) {
        z[p] = expf(z[p] - max);
        sum += z[p];
    }
    const v128_t vsum = wasm_f32x4_splat(sum);
    for (p = 0; p + 4 <= n; p += 4) wasm_v128_store(z + p, wasm_f32x4_div(wasm_v128_load(z + p), vsum));
    for (; p < n; p++) z[p] = z[p] / sum;
}

#include <wasm_simd128.h>

#include "kernels.h"

void kvc_conv_taps_f32__wasmsimd(size_t C, size_t K, const float *x, const float *w, float *y) {
    /* Lanes run across channels, the taps in the scalar order: its bits. */
    size_t c = 0;
    for (; c + 4 <= C; c += 4) {
        v128_t acc = wasm_f32x4_const_splat(0.0f);
        for (size_t k = 0; k < K; k++)
            acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_v128_load(x + k * C + c), wasm_v128_load(w + k * C + c)));
        wasm_v128_store(y + c, acc);
    }
    for (; c < C; c++) {
        float acc = 0.0f;
        for (size_t k = 0; k < K; k++) acc = acc + x[k * C + c] * w[k * C + c];
        y[c] = acc;
    }
}

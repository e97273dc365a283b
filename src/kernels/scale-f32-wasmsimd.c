#include <wasm_simd128.h>

#include "kernels.h"

void kvc_scale_f32__wasmsimd(size_t n, float a, float *x) {
    const v128_t va = wasm_f32x4_splat(a);
    size_t j = 0;
    for (; j + 4 <= n; j += 4) wasm_v128_store(x + j, wasm_f32x4_mul(wasm_v128_load(x + j), va));
    for (; j < n; j++) x[j] = x[j] * a;
}

#include <wasm_simd128.h>

#include "exp-f32.h"
#include "exp-f32-wasmsimd.h"
#include "kernels.h"

/* The exponentials and products four segments at a time; the total in
 * segment order, as the scalar kernel adds it. */
void kvc_softmax_merge__wasmsimd(size_t S, const float *max, const float *sum, float *weight) {
    float m = max[0];
    for (size_t s = 1; s < S; s++) {
        if (m < max[s]) m = max[s];
    }
    const v128_t vm = wasm_f32x4_splat(m);
    size_t s = 0;
    for (; s + 4 <= S; s += 4) {
        const v128_t e = kvc_exp4_f32(wasm_f32x4_sub(wasm_v128_load(max + s), vm));
        wasm_v128_store(weight + s, wasm_f32x4_mul(e, wasm_v128_load(sum + s)));
    }
    for (; s < S; s++) weight[s] = kvc_exp_f32(max[s] - m) * sum[s];
    float total = 0.0f;
    for (s = 0; s < S; s++) total += weight[s];
    const v128_t vtotal = wasm_f32x4_splat(total);
    for (s = 0; s + 4 <= S; s += 4)
        wasm_v128_store(weight + s, wasm_f32x4_div(wasm_v128_load(weight + s), vtotal));
    for (; s < S; s++) weight[s] = weight[s] / total;
}

#include <wasm_simd128.h>

#include "kernels.h"

void kvc_ssm_step_f32__wasmsimd(size_t ds, size_t dv, float dA, float dt, const float *x, const float *B,
                                const float *C, const float *src, float *dst, float *out) {
    /* Lanes run across values: each value's sum over states keeps the scalar
     * order, so the results are the scalar ones bit for bit. */
    const v128_t a = wasm_f32x4_splat(dA);
    size_t j = 0;
    for (; j + 4 <= dv; j += 4) {
        const v128_t xdt = wasm_f32x4_mul(wasm_v128_load(x + j), wasm_f32x4_splat(dt));
        v128_t o = wasm_f32x4_const_splat(0.0f);
        for (size_t i = 0; i < ds; i++) {
            const v128_t s = wasm_f32x4_add(wasm_f32x4_mul(a, wasm_v128_load(src + i * dv + j)),
                                            wasm_f32x4_mul(wasm_f32x4_splat(B[i]), xdt));
            wasm_v128_store(dst + i * dv + j, s);
            o = wasm_f32x4_add(o, wasm_f32x4_mul(s, wasm_f32x4_splat(C[i])));
        }
        wasm_v128_store(out + j, o);
    }
    for (; j < dv; j++) {
        const float xdt = x[j] * dt;
        float o = 0.0f;
        for (size_t i = 0; i < ds; i++) {
            const float s = dA * src[i * dv + j] + B[i] * xdt;
            dst[i * dv + j] = s;
            o = o + s * C[i];
        }
        out[j] = o;
    }
}

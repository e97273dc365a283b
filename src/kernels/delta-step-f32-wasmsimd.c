#include <wasm_simd128.h>

#include "kernels.h"

void kvc_delta_step_f32__wasmsimd(size_t dk, size_t dv, float alpha, float beta, const float *k, const float *v,
                                  const float *q, const float *src, float *dst, float *d, float *out) {
    /* Lanes run across values: each value's sums over keys keep the scalar
     * order, so the results are the scalar ones bit for bit. */
    const v128_t a = wasm_f32x4_splat(alpha);
    size_t j = 0;
    for (; j + 4 <= dv; j += 4) {
        v128_t acc = wasm_f32x4_const_splat(0.0f);
        for (size_t i = 0; i < dk; i++) {
            const v128_t s = wasm_f32x4_mul(a, wasm_v128_load(src + i * dv + j));
            acc = wasm_f32x4_add(acc, wasm_f32x4_mul(s, wasm_f32x4_splat(k[i])));
        }
        const v128_t dj = wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(v + j), acc), wasm_f32x4_splat(beta));
        wasm_v128_store(d + j, dj);
        v128_t o = wasm_f32x4_const_splat(0.0f);
        for (size_t i = 0; i < dk; i++) {
            const v128_t s = wasm_f32x4_add(wasm_f32x4_mul(a, wasm_v128_load(src + i * dv + j)),
                                            wasm_f32x4_mul(wasm_f32x4_splat(k[i]), dj));
            wasm_v128_store(dst + i * dv + j, s);
            o = wasm_f32x4_add(o, wasm_f32x4_mul(s, wasm_f32x4_splat(q[i])));
        }
        wasm_v128_store(out + j, o);
    }
    for (; j < dv; j++) {
        float acc = 0.0f;
        for (size_t i = 0; i < dk; i++) acc = acc + (alpha * src[i * dv + j]) * k[i];
        d[j] = (v[j] - acc) * beta;
        float o = 0.0f;
        for (size_t i = 0; i < dk; i++) {
            const float s = alpha * src[i * dv + j] + k[i] * d[j];
            dst[i * dv + j] = s;
            o = o + s * q[i];
        }
        out[j] = o;
    }
}

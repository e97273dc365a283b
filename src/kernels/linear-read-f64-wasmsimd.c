#include <wasm_simd128.h>

#include "kernels.h"

void kvc_linear_read_f64__wasmsimd(size_t num_features, size_t dv, const double *phi_q,
                                   const double *S, double *out) {
    /* Lanes run across values; each value's sum over features keeps the
     * scalar order, so the result is the scalar one bit for bit.  Eight
     * values at a time read whole cache lines of each state row. */
    size_t j = 0;
    for (; j + 8 <= dv; j += 8) {
        v128_t acc0 = wasm_f64x2_const_splat(0.0);
        v128_t acc1 = acc0, acc2 = acc0, acc3 = acc0;
        for (size_t f = 0; f < num_features; f++) {
            const v128_t phi = wasm_f64x2_splat(phi_q[f]);
            const double *row = S + f * dv + j;
            acc0 = wasm_f64x2_add(acc0, wasm_f64x2_mul(phi, wasm_v128_load(row)));
            acc1 = wasm_f64x2_add(acc1, wasm_f64x2_mul(phi, wasm_v128_load(row + 2)));
            acc2 = wasm_f64x2_add(acc2, wasm_f64x2_mul(phi, wasm_v128_load(row + 4)));
            acc3 = wasm_f64x2_add(acc3, wasm_f64x2_mul(phi, wasm_v128_load(row + 6)));
        }
        wasm_v128_store(out + j, acc0);
        wasm_v128_store(out + j + 2, acc1);
        wasm_v128_store(out + j + 4, acc2);
        wasm_v128_store(out + j + 6, acc3);
    }
    for (; j < dv; j++) {
        double acc = 0.0;
        for (size_t f = 0; f < num_features; f++) acc += phi_q[f] * S[f * dv + j];
        out[j] = acc;
    }
}

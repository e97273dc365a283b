#include <wasm_simd128.h>

#include "kernels.h"

void kvc_linear_update_f64__wasmsimd(size_t num_features, size_t dv, const double *decay,
                                     const double *phi_k, const double *v, const double *src,
                                     double *dst) {
    for (size_t f = 0; f < num_features; f++) {
        const v128_t vdecay = wasm_f64x2_splat(decay[f]);
        const v128_t vphi = wasm_f64x2_splat(phi_k[f]);
        const double *row = src + f * dv;
        double *out = dst + f * dv;
        size_t j = 0;
        for (; j + 2 <= dv; j += 2) {
            v128_t kept = wasm_f64x2_mul(vdecay, wasm_v128_load(row + j));
            v128_t added = wasm_f64x2_mul(vphi, wasm_v128_load(v + j));
            wasm_v128_store(out + j, wasm_f64x2_add(kept, added));
        }
        if (j < dv) out[j] = decay[f] * row[j] + phi_k[f] * v[j];
    }
}

#include "kernels.h"
#include "map-f32-wasmsimd.h"
#include "sigmoid-f32-wasmsimd.h"

/* The scalar kernel's operations on four lanes: the same bits. */
static inline v128_t swiglu4(v128_t x, v128_t up) {
    return wasm_f32x4_mul(kvc_times_sigmoid4_f32(x, x), up);
}

void kvc_swiglu_f32__wasmsimd(size_t n, float *gate, const float *up) {
    kvc_map2_f32(swiglu4, n, gate, up, gate);
}

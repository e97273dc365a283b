#include "kernels.h"
#include "map-f32-wasmsimd.h"
#include "sigmoid-f32-wasmsimd.h"

/* The scalar kernel's operations on four lanes: the same bits. */
static inline v128_t gelu4(v128_t x) {
    const v128_t z = wasm_f32x4_mul(
        x, wasm_f32x4_add(wasm_f32x4_const_splat(KVC_GELU_Z1),
                          wasm_f32x4_mul(wasm_f32x4_const_splat(KVC_GELU_Z3), wasm_f32x4_mul(x, x))));
    return kvc_times_sigmoid4_f32(x, z);
}

static inline v128_t geglu4(v128_t x, v128_t up) { return wasm_f32x4_mul(gelu4(x), up); }

/* No gate: the map's second input (the row itself) goes unread. */
static inline v128_t gelu4_of_first(v128_t x, v128_t unused) {
    (void)unused;
    return gelu4(x);
}

void kvc_geglu_f32__wasmsimd(size_t n, float *gate, const float *up) {
    if (up) kvc_map2_f32(geglu4, n, gate, up, gate);
    else kvc_map2_f32(gelu4_of_first, n, gate, gate, gate);
}

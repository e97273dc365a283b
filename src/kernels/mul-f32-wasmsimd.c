#include "kernels.h"
#include "map-f32-wasmsimd.h"

void kvc_mul_f32__wasmsimd(size_t d, const float *a, const float *b, float *y) {
    kvc_map2_f32(wasm_f32x4_mul, d, a, b, y);
}

/* kernels.c -- the kernel tables and the one place that picks among them. */
#include "kernels.h"

const kvc_kernels kvc_kernels_scalar = {
    .isa = "scalar",
    .dot_f32 = kvc_dot_f32__scalar,
    .dot_f32_i8 = kvc_dot_f32_i8__scalar,
    .axpy_f32 = kvc_axpy_f32__scalar,
    .axpy_i8 = kvc_axpy_i8__scalar,
    .mul_f32 = kvc_mul_f32__scalar,
    .quantize_row = kvc_quantize_row__scalar,
    .dequantize_row = kvc_dequantize_row__scalar,
    .all_finite = kvc_all_finite__scalar,
    .softmax = kvc_softmax__scalar,
};

#if defined(__wasm_simd128__)
const kvc_kernels kvc_kernels_wasmsimd = {
    .isa = "wasm-simd128",
    .dot_f32 = kvc_dot_f32__wasmsimd,
    .dot_f32_i8 = kvc_dot_f32_i8__wasmsimd,
    .axpy_f32 = kvc_axpy_f32__wasmsimd,
    .axpy_i8 = kvc_axpy_i8__wasmsimd,
    .mul_f32 = kvc_mul_f32__wasmsimd,
    .quantize_row = kvc_quantize_row__wasmsimd,
    .dequantize_row = kvc_dequantize_row__wasmsimd,
    .all_finite = kvc_all_finite__wasmsimd,
    .softmax = kvc_softmax__wasmsimd,
};
#endif

const kvc_kernels *kvc_kernels_active(void) {
#if defined(__wasm_simd128__)
    return &kvc_kernels_wasmsimd;
#else
    return &kvc_kernels_scalar;
#endif
}

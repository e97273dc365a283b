/* kernels.c -- the kernel tables and the one place that picks among them. */
#include "kernels.h"

#define KVC_SCALAR_ENTRY(op) .op = kvc_##op##__scalar,
const kvc_kernels kvc_kernels_scalar = {
    .isa = "scalar",
    KVC_KERNEL_OPS(KVC_SCALAR_ENTRY)
};

#if defined(__wasm_simd128__)
#define KVC_WASMSIMD_ENTRY(op) .op = kvc_##op##__wasmsimd,
const kvc_kernels kvc_kernels_wasmsimd = {
    .isa = "wasm-simd128",
    KVC_KERNEL_OPS(KVC_WASMSIMD_ENTRY)
};
#endif

const kvc_kernels *kvc_kernels_active(void) {
#if defined(__wasm_simd128__)
    return &kvc_kernels_wasmsimd;
#else
    return &kvc_kernels_scalar;
#endif
}

/* kernels.c -- the kernel tables and the one place that picks among them. */
#include "kernels.h"

#define KVC_SCALAR_ENTRY(op) .op = kvc_##op##__scalar,
const kvc_kernels kvc_kernels_scalar = {
    .isa = "scalar",
    KVC_KERNEL_OPS(KVC_SCALAR_ENTRY)
};

#if defined(KVC_WITH_WASMSIMD)
#define KVC_WASMSIMD_ENTRY(op) .op = kvc_##op##__wasmsimd,
const kvc_kernels kvc_kernels_wasmsimd = {
    .isa = "wasm-simd128",
    KVC_KERNEL_OPS(KVC_WASMSIMD_ENTRY)
};
#endif

#if defined(KVC_WITH_WASMRELAXED)
/* The SIMD128 table with the relaxed kernels in place of theirs. */
#pragma clang diagnostic ignored "-Winitializer-overrides"
const kvc_kernels kvc_kernels_wasmrelaxed = {
    .isa = "wasm-relaxed-simd",
    KVC_KERNEL_OPS(KVC_WASMSIMD_ENTRY)
    .scores_f32 = kvc_scores_f32__wasmrelaxed,
    .weighted_sum_f32 = kvc_weighted_sum_f32__wasmrelaxed,
};
#endif

const kvc_kernels *kvc_kernels_active(void) {
#if defined(KVC_WITH_WASMRELAXED)
    return &kvc_kernels_wasmrelaxed;
#elif defined(KVC_WITH_WASMSIMD)
    return &kvc_kernels_wasmsimd;
#else
    return &kvc_kernels_scalar;
#endif
}

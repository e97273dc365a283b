/*
 * kernels.h -- the inner loops of the cache, behind one table.
 *
 * Every operation has a portable scalar version (the reference, also the one
 * native builds run) and a wasm SIMD128 version.  The core reaches them only
 * through kvc_kernels_active(); nothing outside this directory knows which
 * set runs.  Kernels know nothing of caches: they see plain arrays.
 *
 * Exactness contract between the two sets, checked by tests/c/test_kernels.c:
 *  - quantize_row, dequantize_row, mul_f32, all_finite, softmax, axpy_*,
 *    linear_update_f64 and linear_read_f64 are bit-identical across sets
 *    (the same operations in the same order for each element; the linear
 *    read vectorises across values, never across the feature sum);
 *  - the reductions dot_f32 and dot_f32_i8, and nothing else, may sum in a
 *    different order: they agree to rounding.
 */
#ifndef KVC_KERNELS_H
#define KVC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Floor of a row scale: an all-zero row gets this scale and zero codes. */
#define KVC_Q8_SCALE_FLOOR 1e-30f
/* Largest code magnitude; -128 is never produced, so codes are symmetric. */
#define KVC_Q8_CODE_MAX 127.0f

/* The signature of each operation. */

/* sum_j a[j] * b[j] */
typedef float kvc_dot_f32_fn(size_t d, const float *a, const float *b);
/* sum_j a[j] * (float)codes[j] */
typedef float kvc_dot_f32_i8_fn(size_t d, const float *a, const int8_t *codes);
/* y[j] += alpha * x[j] */
typedef void kvc_axpy_f32_fn(size_t d, float alpha, const float *x, float *y);
/* y[j] += alpha * (float)codes[j] */
typedef void kvc_axpy_i8_fn(size_t d, float alpha, const int8_t *codes, float *y);
/* y[j] = a[j] * b[j]; y may alias a or b */
typedef void kvc_mul_f32_fn(size_t d, const float *a, const float *b, float *y);
/* Quantizes x against the per-channel field (all > 0):
 *   t = x / field (saturated to +-FLT_MAX), s = max(max|t| / 127, floor),
 *   codes = clamp(round_half_even(t / s), -127, 127).
 * Returns s.  x must be finite. */
typedef float kvc_quantize_row_fn(size_t d, const float *x, const float *field, int8_t *codes);
/* x[j] = ((float)codes[j] * scale) * field[j] */
typedef void kvc_dequantize_row_fn(size_t d, const int8_t *codes, float scale, const float *field,
                                   float *x);
/* 1 if every x[j] is finite (not NaN, not +-Inf), else 0 */
typedef int kvc_all_finite_fn(size_t n, const float *x);
/* In place: z <- softmax(z) = exp(z - max z) / sum, the sum taken in index
 * order.  n >= 1. */
typedef void kvc_softmax_fn(size_t n, float *z);

/* Linear attention, one head, f64: for every feature f,
 *   dst[f][j] = decay[f] * src[f][j] + phi_k[f] * v[j]    (dst may be src)
 * with S rows of dv values. */
typedef void kvc_linear_update_f64_fn(size_t num_features, size_t dv, const double *decay,
                                      const double *phi_k, const double *v, const double *src,
                                      double *dst);
/* out[j] = sum_f phi_q[f] * S[f][j], summed from 0.0 in feature order. */
typedef void kvc_linear_read_f64_fn(size_t num_features, size_t dv, const double *phi_q,
                                    const double *S, double *out);

/* The one list of operations: the table, the declarations of every
 * implementation and the tests all follow it. */
#define KVC_KERNEL_OPS(X) \
    X(dot_f32)            \
    X(dot_f32_i8)         \
    X(axpy_f32)           \
    X(axpy_i8)            \
    X(mul_f32)            \
    X(quantize_row)       \
    X(dequantize_row)     \
    X(all_finite)         \
    X(softmax)            \
    X(linear_update_f64)  \
    X(linear_read_f64)

#define KVC_KERNEL_MEMBER(op) kvc_##op##_fn *op;
typedef struct kvc_kernels {
    const char *isa;
    KVC_KERNEL_OPS(KVC_KERNEL_MEMBER)
} kvc_kernels;
#undef KVC_KERNEL_MEMBER

/* The set this build runs: wasm SIMD128 when compiled for it, else scalar. */
const kvc_kernels *kvc_kernels_active(void);

/* The individual sets, for the tests that hold them against each other.
 * Implementations are named kvc_<op>__<isa>, one file each: <op>-<isa>.c. */
#define KVC_KERNEL_DECLARE_SCALAR(op) kvc_##op##_fn kvc_##op##__scalar;
KVC_KERNEL_OPS(KVC_KERNEL_DECLARE_SCALAR)
#undef KVC_KERNEL_DECLARE_SCALAR
extern const kvc_kernels kvc_kernels_scalar;

#if defined(__wasm_simd128__)
#define KVC_KERNEL_DECLARE_WASMSIMD(op) kvc_##op##_fn kvc_##op##__wasmsimd;
KVC_KERNEL_OPS(KVC_KERNEL_DECLARE_WASMSIMD)
#undef KVC_KERNEL_DECLARE_WASMSIMD
extern const kvc_kernels kvc_kernels_wasmsimd;
#endif

#endif /* KVC_KERNELS_H */

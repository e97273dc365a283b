/*
 * kernels.h -- the inner loops of the cache, behind one table.
 *
 * Every operation has a portable scalar version (the reference, also the one
 * native builds run) and a wasm SIMD128 version.  The core reaches them only
 * through kvc_kernels_active(); nothing outside this directory knows which
 * set runs.  Kernels know nothing of caches: they see plain arrays.
 *
 * Exactness contract between the two sets, checked by tests/c/test_kernels.c:
 *  - quantize_row, dequantize_row, mul_f32, all_finite, softmax and the
 *    element-wise parts are bit-identical across sets (same f32 operations in
 *    the same order per element);
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

typedef struct kvc_kernels {
    const char *isa;
    /* sum_j a[j] * b[j] */
    float (*dot_f32)(size_t d, const float *a, const float *b);
    /* sum_j a[j] * (float)codes[j] */
    float (*dot_f32_i8)(size_t d, const float *a, const int8_t *codes);
    /* y[j] += alpha * x[j] */
    void (*axpy_f32)(size_t d, float alpha, const float *x, float *y);
    /* y[j] += alpha * (float)codes[j] */
    void (*axpy_i8)(size_t d, float alpha, const int8_t *codes, float *y);
    /* y[j] = a[j] * b[j]; y may alias a or b */
    void (*mul_f32)(size_t d, const float *a, const float *b, float *y);
    /* Quantizes x against the per-channel field (all > 0):
     *   t = x / field (saturated to +-FLT_MAX), s = max(max|t| / 127, floor),
     *   codes = clamp(round_half_even(t / s), -127, 127).
     * Returns s.  x must be finite. */
    float (*quantize_row)(size_t d, const float *x, const float *field, int8_t *codes);
    /* x[j] = ((float)codes[j] * scale) * field[j] */
    void (*dequantize_row)(size_t d, const int8_t *codes, float scale, const float *field,
                           float *x);
    /* 1 if every x[j] is finite (not NaN, not +-Inf), else 0 */
    int (*all_finite)(size_t n, const float *x);
    /* In place: z <- softmax(z) = exp(z - max z) / sum, the sum taken in index
     * order.  n >= 1. */
    void (*softmax)(size_t n, float *z);
} kvc_kernels;

/* The set this build runs: wasm SIMD128 when compiled for it, else scalar. */
const kvc_kernels *kvc_kernels_active(void);

/* The individual sets, for the tests that hold them against each other. */
extern const kvc_kernels kvc_kernels_scalar;
#if defined(__wasm_simd128__)
extern const kvc_kernels kvc_kernels_wasmsimd;
#endif

/* Scalar kernels (one file each: <op>-scalar.c). */
float kvc_dot_f32__scalar(size_t d, const float *a, const float *b);
float kvc_dot_f32_i8__scalar(size_t d, const float *a, const int8_t *codes);
void kvc_axpy_f32__scalar(size_t d, float alpha, const float *x, float *y);
void kvc_axpy_i8__scalar(size_t d, float alpha, const int8_t *codes, float *y);
void kvc_mul_f32__scalar(size_t d, const float *a, const float *b, float *y);
float kvc_quantize_row__scalar(size_t d, const float *x, const float *field, int8_t *codes);
void kvc_dequantize_row__scalar(size_t d, const int8_t *codes, float scale, const float *field,
                                float *x);
int kvc_all_finite__scalar(size_t n, const float *x);
void kvc_softmax__scalar(size_t n, float *z);

#if defined(__wasm_simd128__)
/* wasm SIMD128 kernels (one file each: <op>-wasmsimd.c). */
float kvc_dot_f32__wasmsimd(size_t d, const float *a, const float *b);
float kvc_dot_f32_i8__wasmsimd(size_t d, const float *a, const int8_t *codes);
void kvc_axpy_f32__wasmsimd(size_t d, float alpha, const float *x, float *y);
void kvc_axpy_i8__wasmsimd(size_t d, float alpha, const int8_t *codes, float *y);
void kvc_mul_f32__wasmsimd(size_t d, const float *a, const float *b, float *y);
float kvc_quantize_row__wasmsimd(size_t d, const float *x, const float *field, int8_t *codes);
void kvc_dequantize_row__wasmsimd(size_t d, const int8_t *codes, float scale, const float *field,
                                  float *x);
int kvc_all_finite__wasmsimd(size_t n, const float *x);
void kvc_softmax__wasmsimd(size_t n, float *z);
#endif

#endif /* KVC_KERNELS_H */

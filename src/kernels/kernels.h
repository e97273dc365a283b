/*
 * kernels.h -- the inner loops of the cache, behind one table.
 *
 * Every operation has a portable scalar version (the reference, also the one
 * native builds run) and a wasm SIMD128 version; the relaxed-SIMD build
 * replaces two of them.  The core reaches them only
 * through kvc_kernels_active(); nothing outside this directory knows which
 * set runs.  Kernels know nothing of caches: they see plain arrays.
 *
 * Exactness contract between the two sets, checked by tests/c/test_kernels.c:
 *  - every kernel but scores_f32 is bit-identical across sets: the same
 *    operations in the same order for each element (sums over rows or
 *    features are never reordered; softmax sums in four lanes in both and
 *    segments merge in order; the q8 scores sum exactly in integers);
 *  - scores_f32, a dot product, may sum in another order: it agrees to
 *    rounding.
 */
#ifndef KVC_KERNELS_H
#define KVC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Floor of a row scale: an all-zero row gets this scale and zero codes. */
#define KVC_Q8_SCALE_FLOOR 1e-30f
/* Where x / c saturates: a huge x over a tiny c keeps a finite ratio, and at
 * 2^127 rather than FLT_MAX the row reads back finite too (127 * (FLT_MAX /
 * 127) rounds up to +Inf in f32; 127 * (2^127 / 127) stays below FLT_MAX). */
#define KVC_Q8_RATIO_MAX 0x1p127f
/* Largest code magnitude; -128 (-8 in 4 bits) is never produced, so codes
 * are symmetric. */
#define KVC_Q8_CODE_MAX 127.0f
#define KVC_Q4_CODE_MAX 7.0f
/* The most channels a row has (kvcache.h's KVC_MAX_HEAD_DIM). */
#define KVC_KERNEL_MAX_DIM 4096
/* Largest code of a query for the int8 key path: 14 bits.  Measured
 * against f32 (tests/c/test_attend.c, the outlier keys at d = 128) one such
 * code vector adds a few thousandths of the error the rows' own 8 or 4
 * bits make, where the two i16 vectors (hi and lo) it replaces cost twice
 * the products per code; and 14 bits are what two 7-bit digits hold, should
 * a set take the relaxed i8 x i7 dot product. */
#define KVC_QUERY_CODE_MAX 8191.0f
/* Largest code of a value sum's weight: i16. */
#define KVC_Q16_CODE_MAX 32767.0f
/* The channels whose i16 x i8 products sum exactly in i32:
 * 512 * 32767 * 127 < 2^31. */
#define KVC_Q8_DOT_BLOCK 512
/* And the rows whose i16 weight x i8 code products sum exactly in i32:
 * 256 * 32767 * 127 < 2^31. */
#define KVC_Q8_SUM_ROWS 256

/* The signature of each operation. */

/* Attention scores of G queries [G x d] against n f32 rows [n x d]:
 *   z[g * z_stride + p] = dot(q_g, k_p) / sqrt_d.
 * One query's dot with one row is computed the same way whatever G and n,
 * so a group gives every query its single-query scores bit for bit. */
typedef void kvc_scores_f32_fn(size_t G, size_t n, size_t d, const float *q, const float *keys,
                               float sqrt_d, float *z, size_t z_stride);
/* Attention scores of G coded queries (query g's i16 codes at codes + g *
 * d, as quantize_query makes them with KVC_QUERY_CODE_MAX; its scale,
 * 1/sqrt(d) folded in, at scales[g]) against n quantized rows (each a
 * 4-byte scale s_p, then d codes), to z[g * z_stride + p]:
 *   z = dot * (s_p * scales[g])
 * with dot = sum_j code[j] * row_code[j] summed exactly in i32 over blocks
 * of KVC_Q8_DOT_BLOCK channels, the blocks added in f32 in order: one
 * multiply a score and a row scale's product shared by the group, the same
 * bits from every kernel set. */
typedef void kvc_scores_q8_fn(size_t G, size_t n, size_t d, const int16_t *codes,
                              const float *scales, const uint8_t *qrows, float *z,
                              size_t z_stride);
/* The same against n 4-bit rows (each a 4-byte scale, shifts and codes,
 * q4-pack.h): the bits scores_q8 gives for the rows unpack_q4 makes of them. */
typedef kvc_scores_q8_fn kvc_scores_q4_fn;
/* i16 codes of a query or of a value sum's weights, code_max at most
 * KVC_Q16_CODE_MAX (an integer): s = max(max|x| / code_max, floor),
 * codes = clamp(round_half_even(x / s), -code_max, code_max).  Returns s;
 * NaN (with zero codes) when an x[j] is NaN, so that what it scales is NaN. */
typedef float kvc_quantize_query_fn(size_t d, const float *x, float code_max, int16_t *codes);
/* out[g][j] += sum_p w[g * w_stride + p] * rows[p][j], added in row order,
 * for G queries over n f32 rows [n x d]; out is [G x d]. */
typedef void kvc_weighted_sum_f32_fn(size_t G, size_t n, size_t d, const float *w,
                                     size_t w_stride, const float *rows, float *out);
/* For G queries over n <= KVC_Q8_SUM_ROWS quantized rows, one after another
 * from rows (each kvc_q8_row_bytes(d): a 4-byte scale, not read here, then d
 * codes), with i16 weights w16 (query g's at w16 + g * w_stride) and one f32
 * scale per query:
 *   out[g][j] = out[g][j] + (float)acc * w_scales[g],  acc = sum_p w16[g][p] * codes_p[j]
 * the sum exact in i32: the same bits from every kernel set.  out is [G x d]. */
typedef void kvc_weighted_sum_q8_fn(size_t G, size_t n, size_t d, const int16_t *w16,
                                    size_t w_stride, const float *w_scales,
                                    const uint8_t *rows, float *out);
/* y[j] = a[j] * b[j]; y may alias a or b */
typedef void kvc_mul_f32_fn(size_t d, const float *a, const float *b, float *y);
/* Quantizes x against the per-channel field (all > 0):
 *   t = x / field (saturated to +-KVC_Q8_RATIO_MAX), s = max(max|t| / 127, floor),
 *   codes = clamp(round_half_even(t / s), -127, 127).
 * Returns s.  x must be finite. */
typedef float kvc_quantize_row_fn(size_t d, const float *x, const float *field, int8_t *codes);
/* A 4-bit row (q4-pack.h) against the same field: t as above, each group of
 * 16 channels stepped by step_g = scale * 2^(shift_g - 3), scale =
 * max(max|t| / 7, floor), shift_g the smallest in 0..3 with max_g|t| <=
 * max|t| * 2^(shift_g - 3); codes = clamp(round_half_even(t / step_g), -7,
 * 7).  Writes the shifts and the packed codes to `packed`; returns the row's
 * scale, scale / 8 (the scale of its int8 codes code << shift).
 * d <= KVC_KERNEL_MAX_DIM; x finite. */
typedef float kvc_quantize_row_q4_fn(size_t d, const float *x, const float *field,
                                     uint8_t *packed);
/* n 4-bit rows (each its 4-byte scale, shifts and codes) as the int8 rows
 * the q8 kernels read (the scale, then d codes, code << shift): 4-bit keys
 * and values go through the q8 kernels' exact integer sums, a row unpacked
 * once for every query of a group. */
typedef void kvc_unpack_q4_fn(size_t n, size_t d, const uint8_t *q4rows, uint8_t *q8rows);
/* x[j] = ((float)codes[j] * scale) * field[j] */
typedef void kvc_dequantize_row_fn(size_t d, const int8_t *codes, float scale, const float *field,
                                   float *x);
/* 1 if every x[j] is finite (not NaN, not +-Inf), else 0 */
typedef int kvc_all_finite_fn(size_t n, const float *x);
/* In place, each of G rows of n >= 1 scores (row g at z + g * z_stride):
 * z <- exp(z - max) * (1 / sum), with kvc_exp_f32 (exp-f32.h) and the sum
 * taken in four lanes (p mod 4) combined as (l0 + l1) + (l2 + l3); the
 * row's max and sum go to max[g] and sum[g], to merge segments later. */
typedef void kvc_softmax_fn(size_t G, size_t n, float *z, size_t z_stride, float *max,
                            float *sum);
/* The weights that merge S >= 1 segments of one softmax (each a softmax of
 * its own, with softmax's max and sum), in order: M = the largest max,
 *   weight[s] = exp(max[s] - M) * sum[s] / total,  total = the sum of those
 * products in segment order.  The merged probabilities are each segment's
 * times its weight, and the weights are a convex combination (one segment:
 * exactly 1). */
typedef void kvc_softmax_merge_fn(size_t S, const float *max, const float *sum, float *weight);
/* x[j] = x[j] * a */
typedef void kvc_scale_f32_fn(size_t n, float a, float *x);
/* SwiGLU's gate, in place: gate[i] = silu(gate[i]) * up[i], silu(x) =
 * x / (1 + e^-x) with t = e^-|x| by kvc_exp_f32 (exp-f32.h), which never
 * overflows: x / (1 + t) for x >= 0, (x t) / (1 + t) below.  Within a few
 * ulp of silu's value, but below x = KVC_EXP_MIN (-87.34, where e^x leaves
 * the normal floats) a zero of x's sign, where |silu(x)| < 1.1e-36; NaN for
 * a NaN gate and for -Inf (-Inf * 0). */
typedef void kvc_swiglu_f32_fn(size_t n, float *gate, const float *up);

/* Linear attention, one head, f64: for every feature f,
 *   dst[f][j] = decay[f] * src[f][j] + phi_k[f] * v[j]    (dst may be src)
 * with S rows of dv values. */
typedef void kvc_linear_update_f64_fn(size_t num_features, size_t dv, const double *decay,
                                      const double *phi_k, const double *v, const double *src,
                                      double *dst);
/* out[j] = sum_f phi_q[f] * S[f][j], summed from 0.0 in feature order. */
typedef void kvc_linear_read_f64_fn(size_t num_features, size_t dv, const double *phi_q,
                                    const double *S, double *out);

/* One head of the gated delta rule, f32, S [dk x dv] (row i paired with
 * k[i]; dst may be src), d [dv] a workspace:
 *   d[j] = beta (v[j] - sum_i (alpha S[i][j]) k[i]);
 *   dst[i][j] = alpha S[i][j] + k[i] d[j];  out[j] = sum_i dst[i][j] q[i]
 * every sum from 0 in key order. */
typedef void kvc_delta_step_f32_fn(size_t dk, size_t dv, float alpha, float beta, const float *k, const float *v,
                                   const float *q, const float *src, float *dst, float *d, float *out);
/* One head of Mamba-2's selective scan, f32, S [ds x dv] (row i paired with
 * B[i] and C[i]; dst may be src):
 *   dst[i][j] = dA src[i][j] + B[i] (x[j] dt);  out[j] = sum_i dst[i][j] C[i]
 * the sum from 0 in state order. */
typedef void kvc_ssm_step_f32_fn(size_t ds, size_t dv, float dA, float dt, const float *x, const float *B,
                                 const float *C, const float *src, float *dst, float *out);
/* A convolution's output for one token: y[c] = sum_k x[k][c] w[k][c] from
 * 0 in tap order, x and w K rows of C (the inputs oldest first; the taps). */
typedef void kvc_conv_taps_f32_fn(size_t C, size_t K, const float *x, const float *w, float *y);

/* The one list of operations: the table, the declarations of every
 * implementation and the tests all follow it. */
#define KVC_KERNEL_OPS(X) \
    X(scores_f32)         \
    X(scores_q8)          \
    X(scores_q4)          \
    X(quantize_query)     \
    X(weighted_sum_f32)   \
    X(weighted_sum_q8)    \
    X(mul_f32)            \
    X(quantize_row)       \
    X(quantize_row_q4)    \
    X(unpack_q4)          \
    X(dequantize_row)     \
    X(all_finite)         \
    X(softmax)            \
    X(softmax_merge)      \
    X(scale_f32)          \
    X(swiglu_f32)         \
    X(linear_update_f64)  \
    X(linear_read_f64)    \
    X(delta_step_f32)     \
    X(ssm_step_f32)       \
    X(conv_taps_f32)

#define KVC_KERNEL_MEMBER(op) kvc_##op##_fn *op;
typedef struct kvc_kernels {
    const char *isa;
    KVC_KERNEL_OPS(KVC_KERNEL_MEMBER)
} kvc_kernels;
#undef KVC_KERNEL_MEMBER

/* The set this build runs: wasm relaxed SIMD or SIMD128 when the library
 * holds it (KVC_WITH_WASMRELAXED, KVC_WITH_WASMSIMD: CMakeLists.txt sets
 * them, the ISA flags being on the kernel files only), else scalar. */
const kvc_kernels *kvc_kernels_active(void);


/* The individual sets, for the tests that hold them against each other.
 * Implementations are named kvc_<op>__<isa>, one file each: <op>-<isa>.c. */
#define KVC_KERNEL_DECLARE_SCALAR(op) kvc_##op##_fn kvc_##op##__scalar;
KVC_KERNEL_OPS(KVC_KERNEL_DECLARE_SCALAR)
#undef KVC_KERNEL_DECLARE_SCALAR
extern const kvc_kernels kvc_kernels_scalar;

#if defined(KVC_WITH_WASMSIMD)
#define KVC_KERNEL_DECLARE_WASMSIMD(op) kvc_##op##_fn kvc_##op##__wasmsimd;
KVC_KERNEL_OPS(KVC_KERNEL_DECLARE_WASMSIMD)
#undef KVC_KERNEL_DECLARE_WASMSIMD
extern const kvc_kernels kvc_kernels_wasmsimd;
#endif

/* The relaxed-SIMD set (KVC_RELAXED_SIMD builds): the SIMD128 set but for
 * the f32 dot products and weighted sums, with a fused multiply-add.  (Its
 * i8 x i7 dot product is not used for the int8 rows: a 14-bit query code
 * takes two 7-bit digits, two relaxed dots per 16 codes where dot_i16x8
 * takes two as well, and V8 on x86 without AVX-VNNI makes each relaxed dot
 * three instructions against one and an add; issue 12 measured the
 * four-digit form slower.) */
#if defined(KVC_WITH_WASMRELAXED)
kvc_scores_f32_fn kvc_scores_f32__wasmrelaxed;
kvc_weighted_sum_f32_fn kvc_weighted_sum_f32__wasmrelaxed;
extern const kvc_kernels kvc_kernels_wasmrelaxed;
#endif

#endif /* KVC_KERNELS_H */

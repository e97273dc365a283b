/*
 * weights.h -- matrices multiplied in their GGUF encoding: one traits row per
 * ggml tensor type (ggml's type_traits is the model), the activation
 * encodings their kernels read, and the kernels.
 *
 * A weight matrix is `rows` rows of n values, each row nb = n / block_values
 * blocks laid out exactly as ggml lays them out (F32, F16, BF16, Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS).  A product with T
 * activation rows first codes each activation row with its type's encoding
 * (`quantize` of kvc_act_encoding_of(type->act)), then runs the type's gemm.
 * Kernels see plain arrays: they know no model, no cache, no file.
 *
 * Determinism.  The value for (row r, token t) depends on that row and that
 * token's coded activations only -- never on `rows`, `T`, where r and t sit
 * in the call, or how a caller splits the rows into chunks (thread pools,
 * a verify batch of k tokens against k single steps).  Each gemm computes
 * it as:
 *   - integer types: per block b an exact integer dot (and the integer sums
 *     an offset or a k-quant's mins need), then the block's value v_b in f32
 *     by the formula beside the type's row in weights.c; v_b added to accumulator
 *     b mod 4 (each starting at +0), in block order; y = (a0 + a1) + (a2 + a3).
 *     Every set computes exactly this: scalar, SIMD128 and relaxed SIMD give
 *     the same bits (the relaxed i8 x i7 dot product is exact and the same on
 *     every engine, as its second operand is kept to 0..127).
 *   - float types: acc_k accumulates w_j * x_j over j = k mod 4 in order of
 *     j (w_j the weight's exact f32 value), from +0; y = (a0 + a1) + (a2 + a3).
 *     Scalar and SIMD128 give the same bits (a multiply and an add each,
 *     never fused); relaxed SIMD uses f32x4.relaxed_madd, fused or not as
 *     the engine does it: within its own set the same bits whatever the
 *     call's shape, against the others equal to rounding.
 */
#ifndef KVC_WEIGHTS_H
#define KVC_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

/* The integer types' block layouts, written once for the traits table and
 * every kernel file (ggml-common.h's block_* structs): bytes per block and,
 * for the 32-value types, value = (q - offset) * d, or q * d + m where an
 * f16 min m follows the f16 scale d.  Suffixed with the kernel files' type
 * names, which kernel templates paste. */
#define KVC_BLOCK_BYTES_q8_0 34 /* d, 32 i8 codes */
#define KVC_BLOCK_BYTES_q4_0 18 /* d, 16 bytes of nibbles */
#define KVC_BLOCK_BYTES_q4_1 20 /* d, m, 16 bytes of nibbles */
#define KVC_BLOCK_BYTES_q5_0 22 /* d, the u32 of fifth bits, nibbles */
#define KVC_BLOCK_BYTES_q5_1 24 /* d, m, the u32 of fifth bits, nibbles */
#define KVC_BLOCK_BYTES_q4_k 144
#define KVC_BLOCK_BYTES_q5_k 176
#define KVC_BLOCK_BYTES_q6_k 210
#define KVC_BLOCK_BYTES_q2_k 84  /* 16 scale-min bytes, 64 bytes of 2-bit codes, d, dmin */
#define KVC_BLOCK_BYTES_q3_k 110 /* 32 bytes of high bits, 64 of 2-bit codes, 12 of scales, d */
#define KVC_CODE_OFFSET_q8_0 0
#define KVC_CODE_OFFSET_q4_0 8
#define KVC_CODE_OFFSET_q4_1 0
#define KVC_CODE_OFFSET_q5_0 16
#define KVC_CODE_OFFSET_q5_1 0
#define KVC_HAS_MIN_q8_0 0
#define KVC_HAS_MIN_q4_0 0
#define KVC_HAS_MIN_q4_1 1
#define KVC_HAS_MIN_q5_0 0
#define KVC_HAS_MIN_q5_1 1
/* IQ4_NL and IQ4_XS: 4-bit indices (ggml's nibble packing) into ggml's
 * non-linear table kvalues_iq4nl, signed values -127..113. */
#define KVC_BLOCK_BYTES_iq4_nl 18 /* d, 16 bytes of nibbles */
#define KVC_CODE_OFFSET_iq4_nl 0
#define KVC_HAS_MIN_iq4_nl 0
#define KVC_BLOCK_BYTES_iq4_xs 136 /* d, u16 scales_h, 4 bytes scales_l, 128 bytes of nibbles */
#define KVC_IQ4_VALUES -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113

/* The kernel sets; a build has the sets up to the one it runs. */
typedef enum kvc_weight_set {
    KVC_WEIGHT_SCALAR,
    KVC_WEIGHT_WASMSIMD,
    KVC_WEIGHT_WASMRELAXED,
    KVC_WEIGHT_SETS
} kvc_weight_set;

/* The set this build runs: relaxed SIMD or SIMD128 when compiled for it,
 * else scalar. */
kvc_weight_set kvc_weight_set_active(void);
/* "scalar", "wasm-simd128", "wasm-relaxed-simd". */
const char *kvc_weight_set_name(kvc_weight_set set);

/* How a gemm reads its activations. */
typedef enum kvc_act_kind {
    /* The f32 values themselves (F32, F16 and BF16 weights: llama.cpp
     * rounds such activations to f16 or bf16; kept f32 here, as accurate as
     * the product can be, and the weights' own rounding dominates anyway). */
    KVC_ACT_F32,
    /* q8 blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; llama.cpp:
     * q8_0/q8_1). */
    KVC_ACT_Q8_32,
    /* q8 blocks of 256 (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS; llama.cpp: q8_K):
     * one scale per super-block, so the scaled sub-block dots sum in integers.  With
     * outlier activations it costs about twice q8x32's error
     * (docs/weight-kernels.md has the figures). */
    KVC_ACT_Q8_256,
    KVC_ACT_KINDS
} kvc_act_kind;

/*
 * A q8 activation row of n values in blocks of B (32 or 256), n a multiple
 * of B -- ours, not a file format; laid out for the kernels' loads, and
 * carrying exactly the values llama.cpp's CPU code gives its q8_0 / q8_1
 * (B = 32) and q8_K (B = 256) blocks (ggml's quantize_row_q8_0_ref,
 * q8_1_ref and q8_K_ref):
 *   codes       [n]      i8, -127..127 (the relaxed dot products read these)
 *   codes16     [n]      i16, the same codes (the SIMD128 ones read these,
 *                        eight products to an i32x4.dot_i16x8_s, no widening)
 *   scales      [n / B]  f32, block b's d_b
 *   sums        [n / 16] i16, the sum of each 16 consecutive codes
 *   value_sums  [n / 32] f32, B = 32 only: block b's s_b, what Q4_1's and
 *                        Q5_1's mins multiply (q8_1's s)
 * q8x32, per block: amax = the largest |x| (NaN if an x is NaN), d = amax /
 *   127, id = d != 0 ? 1 / d : 0, code = clamp(round_half_away(x * id),
 *   -127, 127) (C's roundf), 0 where x * id is NaN; d_b = d rounded to f16
 *   (nearest, ties to even, subnormal halves kept; 65520 and up Inf), read
 *   back as f32; s_b = d * (the sum of the block's codes) rounded to f16 the
 *   same way (the unrounded d).
 * q8x256, per block: m = the x of largest |x|, with its sign (max x, or min
 *   x where -min x > max x; NaN if an x is NaN), iscale = m != 0 ? -127 / m
 *   : 0, code = clamp(round_half_even(x * iscale), -127, 127), 0 where
 *   x * iscale is NaN, d_b = m != 0 ? 1 / iscale : 0 (f32, not rounded):
 *   negative where m is positive, the codes negated alike.  (ggml takes the
 *   first x of largest |x|: on a tie of +a and -a the sign of d_b and of the
 *   codes may differ from its, every value d_b * code and every product the
 *   same.)
 * f32 arithmetic in exactly those orders, the same bytes from every set (a
 * NaN d_b or s_b stored as the quiet NaN 0x7fc00000).  A NaN or infinite x
 * makes its block's d_b NaN or infinite (and s_b NaN), so that every
 * product it enters is NaN (ggml's maxima pass over a NaN, which then
 * vanishes as a zero code: ours keep it, so that it shows).  As in
 * llama.cpp, a q8x32 d or s of 65520 or more gets an infinite d_b or s_b:
 * then the block's products, or its Q4_1 and Q5_1 ones, are Inf or NaN.
 */
#define KVC_ACT_Q8_CODES16_AT(n) (n)
#define KVC_ACT_Q8_SCALES_AT(n) (3 * (n))
#define KVC_ACT_Q8_SUMS_AT(n, B) (3 * (n) + 4 * ((n) / (B)))
#define KVC_ACT_Q8_VALUE_SUMS_AT(n) (KVC_ACT_Q8_SUMS_AT(n, 32) + 2 * ((n) / 16))
#define KVC_ACT_Q8_ROW_BYTES(n, B) \
    (KVC_ACT_Q8_SUMS_AT(n, B) + 2 * ((n) / 16) + ((B) == 32 ? 4 * ((n) / 32) : 0))

/* Codes a row of n activations x into xa (encoding's row bytes). */
typedef void kvc_quantize_act_fn(size_t n, const float *x, uint8_t *xa);

typedef struct kvc_act_encoding {
    kvc_act_kind kind;
    const char *name;
    uint32_t block_values; /* n must be a multiple of it */
    uint32_t block_bytes;  /* a row of n values takes n / block_values * block_bytes */
    kvc_quantize_act_fn *quantize[KVC_WEIGHT_SETS]; /* NULL: a set this build lacks */
} kvc_act_encoding;

const kvc_act_encoding *kvc_act_encoding_of(kvc_act_kind kind);

/* out[i] = the f32 value of element first + i of a weight row, i < count
 * (the reference: ggml's dequantize_row_* arithmetic, value for value). */
typedef void kvc_dequantize_fn(const uint8_t *row, size_t first, size_t count, float *out);

/* y[t * y_stride + r] = dot(weight row r, activation row t), r < rows,
 * t < T: row r at w + r * row_bytes (n values), activation row t at
 * xa + t * xa_stride, coded as the type's act encoding.  n a multiple of
 * the type's block_values.  T == 1 (decode) streams each weight row once;
 * T > 1 (prefill, verify) reads each weight block once for up to four
 * tokens.  Results as the determinism paragraph above says. */
typedef void kvc_gemm_fn(size_t n, size_t rows, size_t T, const uint8_t *w, size_t row_bytes,
                         const uint8_t *xa, size_t xa_stride, float *y, size_t y_stride);

/*
 * Packed layouts.  A type may name a layout its matrices are packed into
 * once, at load: the rows in tiles of `rows`, the tile's blocks interleaved
 * so that one SIMD dot product serves every row of the tile (lane r
 * accumulating row r, no horizontal sum per block) -- in place, in the
 * bytes the file's layout took (no second copy).  Tile k is rows k R ..
 * k R + R - 1 (R = rows), at w + k R row_bytes; only whole tiles are packed,
 * a matrix's last rows mod R rows keep the file's layout.  A packed gemm is
 * called as a type's gemm is, with w at a tile: rows mod R is not 0 only in
 * a call that ends the matrix, whose last rows mod R rows it multiplies as
 * the type's own gemm does.  Each (row, token) gets exactly the bits the
 * type's gemm gives it in the file's layout, in every set: packing changes
 * where a block's bytes are, never its value or the order of the sums.
 */
/* Packs the R rows (row_bytes each, n values) at tile in place; scratch
 * holds R row_bytes bytes. */
typedef void kvc_pack_fn(size_t n, size_t row_bytes, uint8_t *tile, uint8_t *scratch);
/* Block b of row `lane` of a packed tile, as the file lays it out (the
 * type's block_bytes), into block. */
typedef void kvc_unpack_block_fn(const uint8_t *tile, size_t lane, size_t b, uint8_t *block);

typedef struct kvc_weight_packing {
    const char *name; /* "Q8_0x4" */
    uint32_t rows;    /* rows a tile interleaves */
    kvc_pack_fn *pack;
    kvc_unpack_block_fn *unpack_block;
    kvc_gemm_fn *gemm[KVC_WEIGHT_SETS]; /* NULL: a set this build lacks */
} kvc_weight_packing;

typedef struct kvc_weight_type {
    uint32_t ggml_id;      /* ggml_type */
    const char *name;      /* "Q4_K" */
    uint32_t block_values; /* values per block */
    uint32_t block_bytes;  /* bytes per block */
    kvc_act_kind act;      /* what its gemm reads */
    kvc_dequantize_fn *dequantize;
    kvc_gemm_fn *gemm[KVC_WEIGHT_SETS]; /* NULL: a set this build lacks */
    const kvc_weight_packing *packing;  /* the layout packed at load; NULL: the file's */
} kvc_weight_type;

/* The bytes of a type's largest block (Q6_K's), for a block on the stack. */
#define KVC_MAX_BLOCK_BYTES 256

/* The row of ggml type `ggml_id`, or NULL when it is not supported. */
const kvc_weight_type *kvc_weight_type_of(uint32_t ggml_id);
/* The supported types, in table order; *count their number. */
const kvc_weight_type *kvc_weight_types(size_t *count);
/* ggml's name of any type it defines ("IQ2_XXS", also for types not
 * supported here), or NULL for an id ggml does not define. */
const char *kvc_ggml_type_name(uint32_t ggml_id);
/* Writes the supported names, "F32, F16, ...", NUL-terminated, to buf (at
 * most size bytes, cut short when it does not fit; size 0 writes nothing).
 * @return : the length the whole list takes, without the NUL. */
size_t kvc_weight_type_list(char *buf, size_t size);

/* ---- the kernels, named kvc_<op>_<type>__<set>, one file each:
 * gemm-<type>-<set>.c (the scalar file also holds the type's dequantize);
 * quantize-act-<encoding>-<set>.c ---- */

#define KVC_WEIGHT_TYPE_LIST(X) X(f32) X(f16) X(bf16) X(q8_0) X(q4_0) X(q4_1) X(q5_0) X(q5_1) \
    X(q4_k) X(q5_k) X(q6_k) \
    X(q2_k) X(q3_k) X(iq4_nl) X(iq4_xs)
/* The types with a relaxed-SIMD gemm of their own (the others run their
 * SIMD128 gemm in the relaxed set: Q8_0's codes and the IQ4 table's values
 * are signed, where the i8 x i7 dot product is not exact, and the exact
 * relaxed ways for IQ4 measured no faster: docs/weight-kernels.md). */
#define KVC_WEIGHT_RELAXED_LIST(X) X(f32) X(f16) X(bf16) X(q4_0) X(q4_1) X(q5_0) X(q5_1) \
    X(q4_k) X(q5_k) X(q6_k) \
    X(q2_k) X(q3_k)

#define KVC_DECLARE_WEIGHT_SCALAR(t) kvc_dequantize_fn kvc_dequantize_##t; \
    kvc_gemm_fn kvc_gemm_##t##__scalar;
KVC_WEIGHT_TYPE_LIST(KVC_DECLARE_WEIGHT_SCALAR)
#undef KVC_DECLARE_WEIGHT_SCALAR
kvc_quantize_act_fn kvc_quantize_act_f32;
kvc_quantize_act_fn kvc_quantize_act_q8_32__scalar;
/* The packed layouts, kvc_<op>_<layout>[__<set>]: pack-<layout>.c, the
 * scalar gemm in the type's scalar file, gemm-<layout>-<set>.c. */
kvc_pack_fn kvc_pack_q8_0x4;
kvc_unpack_block_fn kvc_unpack_block_q8_0x4;
kvc_gemm_fn kvc_gemm_q8_0x4__scalar;
kvc_pack_fn kvc_pack_q4_kx4;
kvc_unpack_block_fn kvc_unpack_block_q4_kx4;
kvc_gemm_fn kvc_gemm_q4_kx4__scalar;
kvc_quantize_act_fn kvc_quantize_act_q8_256__scalar;

#if defined(KVC_WITH_WASMSIMD)
#define KVC_DECLARE_WEIGHT_WASMSIMD(t) kvc_gemm_fn kvc_gemm_##t##__wasmsimd;
KVC_WEIGHT_TYPE_LIST(KVC_DECLARE_WEIGHT_WASMSIMD)
#undef KVC_DECLARE_WEIGHT_WASMSIMD
kvc_gemm_fn kvc_gemm_q8_0x4__wasmsimd;
kvc_gemm_fn kvc_gemm_q4_kx4__wasmsimd;
kvc_quantize_act_fn kvc_quantize_act_q8_32__wasmsimd;
kvc_quantize_act_fn kvc_quantize_act_q8_256__wasmsimd;
#endif

#if defined(KVC_WITH_WASMRELAXED)
#define KVC_DECLARE_WEIGHT_WASMRELAXED(t) kvc_gemm_fn kvc_gemm_##t##__wasmrelaxed;
KVC_WEIGHT_RELAXED_LIST(KVC_DECLARE_WEIGHT_WASMRELAXED)
#undef KVC_DECLARE_WEIGHT_WASMRELAXED
kvc_gemm_fn kvc_gemm_q4_kx4__wasmrelaxed;
#endif

#endif /* KVC_WEIGHTS_H */

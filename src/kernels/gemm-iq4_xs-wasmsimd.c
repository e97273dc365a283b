/*
 * gemm-iq4_xs-wasmsimd.c -- IQ4_XS weights in SIMD128 (gemm-iq4_xs-scalar.c
 * has the layout): each sub-block's nibbles looked up in the table by a
 * swizzle, sign-extended and scaled by ls_j - 32 once, then dotted exactly.
 * Decode takes a row's super-blocks four at a time (lane k: super-block
 * 4 i + k), prefill one against four tokens, in four accumulators by
 * super-block index: the scalar kernel's values lane for lane.  The table's
 * values are signed, so the relaxed i8 x i7 dot product cannot take them:
 * the relaxed set runs this kernel.
 */
#include "dot-codes-wasmsimd.h"
#include "weights-wasmsimd.h"

/* S[i] = lanes summing to S of one super-block against block b of
 * activation rows a[i], i < count (1, or a tile's 4): each sub-block's
 * values scaled once for every row, one sub-block a loop turn (unrolled,
 * the engine would load every sub-block's activations at once and spill
 * them). */
static inline void iq4_xs_dots(const uint8_t *block, const kvc_act_q8_row *a, size_t count, size_t b, v128_t *S) {
    for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_const_splat(0);
#pragma clang loop unroll(disable)
    for (size_t j = 0; j < 8; j++) {
        v128_t t0, t1;
        kvc_iq4_i8x16(wasm_v128_load(block + 8 + 16 * j), &t0, &t1);
        const kvc_codes32 c = kvc_codes32_of_i8_scaled(t0, t1, wasm_i16x8_splat((int16_t)kvc_iq4_xs_scale(block, j)));
        const size_t at = 256 * b + 32 * j;
        for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_add(S[i], kvc_dot32(&c, a[i].codes + at, a[i].codes16 + at));
    }
}

static inline v128_t iq4_xs_block_partial(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    v128_t S;
    iq4_xs_dots(block, a, 1, b, &S);
    return S;
}

static inline v128_t iq4_xs_values(v128_t S, v128_t d, v128_t da) {
    return wasm_f32x4_mul(wasm_f32x4_mul(d, da), wasm_f32x4_convert_i32x4(S));
}

static v128_t iq4_xs_values4(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    v128_t S[4];
    KVC_DECODE_GROUP_LOOP
    for (size_t k = 0; k < 4; k++) S[k] = iq4_xs_block_partial(block + k * KVC_BLOCK_BYTES_iq4_xs, a, b + k);
    return iq4_xs_values(kvc_horizontal_sums4_i32(S), kvc_f16_gather4(block, KVC_BLOCK_BYTES_iq4_xs),
                         wasm_v128_load(a->scales + 4 * b));
}

static float iq4_xs_value1(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    const v128_t S = iq4_xs_block_partial(block, a, b);
    const v128_t v = iq4_xs_values(kvc_sum_i32x4(S), kvc_f16_splat(block), wasm_v128_load32_splat(a->scales + 4 * b));
    return wasm_f32x4_extract_lane(v, 0);
}

static v128_t iq4_xs_tile_value(const uint8_t *block, const kvc_act_q8_row a[4], const kvc_token_tile *tile,
                                size_t n, size_t b) {
    v128_t S[4];
    iq4_xs_dots(block, a, 4, b, S);
    return iq4_xs_values(kvc_horizontal_sums4_i32(S), kvc_f16_splat(block),
                         kvc_gather32(tile->row, KVC_ACT_Q8_SCALES_AT(n) + 4 * b));
}

void kvc_gemm_iq4_xs__wasmsimd(size_t n, size_t rows, size_t T, const uint8_t *w, size_t row_bytes,
                               const uint8_t *xa, size_t xa_stride, float *y, size_t y_stride) {
    kvc_gemm_blocks(iq4_xs_values4, iq4_xs_value1, iq4_xs_tile_value, 256, KVC_BLOCK_BYTES_iq4_xs, n, rows, T, w,
                    row_bytes, xa, xa_stride, y, y_stride);
}

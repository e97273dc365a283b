/*
 * mac_floor.c -- the arithmetic floor of the weight products (weights_bench):
 * the best loop of the integer multiply-add they are made of, on operands
 * in L1 with nothing decoded or scaled, at the register tile each phase
 * allows.  Compiled with the build's SIMD flags, as the kernels are.
 */
#include <stddef.h>
#include <wasm_simd128.h>

#include "mac_floor.h"

static int32_t lanes_sum(const v128_t *acc, size_t count) {
    v128_t sum = wasm_i32x4_const_splat(0);
    for (size_t i = 0; i < count; i++) sum = wasm_i32x4_add(sum, acc[i]);
    return wasm_i32x4_extract_lane(sum, 0) + wasm_i32x4_extract_lane(sum, 3);
}

/* i32x4.dot_i16x8_s, 4 rows x 1 token: 32 multiply-adds a step of 8 values. */
void mac_floor_i16_decode(void *ctx) {
    mac_floor_job *f = ctx;
    v128_t acc[4] = {wasm_i32x4_const_splat(0), wasm_i32x4_const_splat(0), wasm_i32x4_const_splat(0),
                     wasm_i32x4_const_splat(0)};
    for (size_t rep = 0; rep < MAC_FLOOR_REPS; rep++) {
        for (size_t k = 0; k < MAC_FLOOR_K; k += 8) {
            const v128_t a = wasm_v128_load(f->a16[0] + k);
            for (size_t r = 0; r < 4; r++) acc[r] = wasm_i32x4_add(acc[r], wasm_i32x4_dot_i16x8(wasm_v128_load(f->w16[r] + k), a));
        }
    }
    f->sink = lanes_sum(acc, 4);
}

/* The same, 2 rows x 4 tokens: 64 multiply-adds a step. */
void mac_floor_i16_prefill(void *ctx) {
    mac_floor_job *f = ctx;
    v128_t acc[8];
    for (size_t i = 0; i < 8; i++) acc[i] = wasm_i32x4_const_splat(0);
    for (size_t rep = 0; rep < MAC_FLOOR_REPS; rep++) {
        for (size_t k = 0; k < MAC_FLOOR_K; k += 8) {
            const v128_t w0 = wasm_v128_load(f->w16[0] + k), w1 = wasm_v128_load(f->w16[1] + k);
            for (size_t t = 0; t < 4; t++) {
                const v128_t a = wasm_v128_load(f->a16[t] + k);
                acc[t] = wasm_i32x4_add(acc[t], wasm_i32x4_dot_i16x8(w0, a));
                acc[4 + t] = wasm_i32x4_add(acc[4 + t], wasm_i32x4_dot_i16x8(w1, a));
            }
        }
    }
    f->sink = lanes_sum(acc, 8);
}

#ifdef __wasm_relaxed_simd__
/* 32 products of codes 0..63 with activations, widened by the scale: the
 * k-quants' chain (dot-codes-wasmrelaxed.h). */
static inline v128_t relaxed_chain(const int8_t *a, const int8_t *w, v128_t scale) {
    const v128_t pairs = wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(a), wasm_v128_load(w)),
                                        wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(a + 16), wasm_v128_load(w + 16)));
    return wasm_i32x4_dot_i16x8(pairs, scale);
}

/* 4 rows x 1 token: 128 multiply-adds a step of 32 values. */
static void i8_decode(void *ctx) {
    mac_floor_job *f = ctx;
    const v128_t scale = wasm_i16x8_splat(3);
    v128_t acc[4] = {wasm_i32x4_const_splat(0), wasm_i32x4_const_splat(0), wasm_i32x4_const_splat(0),
                     wasm_i32x4_const_splat(0)};
    for (size_t rep = 0; rep < MAC_FLOOR_REPS; rep++) {
        for (size_t k = 0; k < MAC_FLOOR_K; k += 32) {
            for (size_t r = 0; r < 4; r++) acc[r] = wasm_i32x4_add(acc[r], relaxed_chain(f->a8[0] + k, f->w8[r] + k, scale));
        }
    }
    f->sink = lanes_sum(acc, 4);
}

/* 2 rows x 4 tokens: 256 multiply-adds a step. */
static void i8_prefill(void *ctx) {
    mac_floor_job *f = ctx;
    const v128_t scale = wasm_i16x8_splat(3);
    v128_t acc[8];
    for (size_t i = 0; i < 8; i++) acc[i] = wasm_i32x4_const_splat(0);
    for (size_t rep = 0; rep < MAC_FLOOR_REPS; rep++) {
        for (size_t k = 0; k < MAC_FLOOR_K; k += 32) {
            for (size_t t = 0; t < 4; t++) {
                acc[t] = wasm_i32x4_add(acc[t], relaxed_chain(f->a8[t] + k, f->w8[0] + k, scale));
                acc[4 + t] = wasm_i32x4_add(acc[4 + t], relaxed_chain(f->a8[t] + k, f->w8[1] + k, scale));
            }
        }
    }
    f->sink = lanes_sum(acc, 8);
}

void (*const mac_floor_i8_decode)(void *job) = i8_decode;
void (*const mac_floor_i8_prefill)(void *job) = i8_prefill;
#else
void (*const mac_floor_i8_decode)(void *job) = NULL;
void (*const mac_floor_i8_prefill)(void *job) = NULL;
#endif


/* mac_floor.h -- the arithmetic floor's loops (mac_floor.c), each a timing
 * of weights_bench: MAC_FLOOR_REPS passes over dots of MAC_FLOOR_K values. */
#ifndef KVC_BENCH_MAC_FLOOR_H
#define KVC_BENCH_MAC_FLOOR_H

#include <stdint.h>

#define MAC_FLOOR_K 1024    /* values a dot: the operands stay in L1 */
#define MAC_FLOOR_REPS 2000 /* passes over them a timing */

typedef struct mac_floor_job {
    int16_t w16[4][MAC_FLOOR_K], a16[4][MAC_FLOOR_K]; /* weights (codes 0..63) and activations */
    int8_t w8[4][MAC_FLOOR_K], a8[4][MAC_FLOOR_K];    /* the same as i8 */
    volatile int32_t sink;
} mac_floor_job;

/* SIMD128's i32x4.dot_i16x8_s: 4 rows x 1 token (decode), 2 rows x 4 tokens (prefill). */
void mac_floor_i16_decode(void *job);
void mac_floor_i16_prefill(void *job);

/* The relaxed build's k-quant chain (two i16x8.relaxed_dot_i8x16_i7x16_s
 * added, widened by i32x4.dot_i16x8_s), the same tiles; NULL in the
 * SIMD128 build. */
extern void (*const mac_floor_i8_decode)(void *job);
extern void (*const mac_floor_i8_prefill)(void *job);

#endif /* KVC_BENCH_MAC_FLOOR_H */

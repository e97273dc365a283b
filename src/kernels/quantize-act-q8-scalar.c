/* quantize-act-q8-scalar.c -- activations to q8x32 and q8x256 rows, with
 * their sums of 16 (weights.h has the definitions: llama.cpp's q8_0 / q8_1
 * and q8_K); the reference the SIMD quantizer gives byte for byte. */
#include <math.h>

#include "weights-scalar.h"

/* The largest |x|, NaN once an x is NaN. */
static float block_amax(size_t B, const float *x) {
    float amax = 0.0f;
    for (size_t i = 0; i < B; i++) {
        const float a = fabsf(x[i]);
        if (!(a <= amax) && amax == amax) amax = a;
    }
    return amax;
}

/* The x of largest |x| with its sign: max x, or min x where -min x > max x
 * (both from 0: the same choice, and +0 for a block of zeros); NaN if an x
 * is NaN. */
static float block_signed_max(size_t B, const float *x) {
    float max = 0.0f, min = 0.0f;
    for (size_t i = 0; i < B; i++) {
        if (x[i] != x[i]) return x[i];
        if (x[i] > max) max = x[i];
        if (x[i] < min) min = x[i];
    }
    return -min > max ? min : max;
}

/* A rounded r as a code: clamped to +-127, 0 for a NaN. */
static int8_t code_of(float r) {
    if (r != r) return 0;
    return (int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
}

/* Little-endian, as wasm stores an i16. */
static void put_i16(uint8_t *p, int32_t v) {
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)((v >> 8) & 0xff);
}

/* Block b's codes (set in xa's codes) into codes16 and its sums of 16;
 * returns the sum of its codes. */
static int32_t put_block_copies(size_t B, size_t n, size_t b, uint8_t *xa) {
    const int8_t *codes = (const int8_t *)xa;
    int32_t block_sum = 0;
    for (size_t g = B * b / 16; g < B * (b + 1) / 16; g++) {
        int32_t sum = 0;
        for (size_t i = 16 * g; i < 16 * g + 16; i++) {
            put_i16(xa + KVC_ACT_Q8_CODES16_AT(n) + 2 * i, codes[i]);
            sum += codes[i];
        }
        put_i16(xa + KVC_ACT_Q8_SUMS_AT(n, B) + 2 * g, sum);
        block_sum += sum;
    }
    return block_sum;
}

void kvc_quantize_act_q8_32__scalar(size_t n, const float *x, uint8_t *xa) {
    int8_t *codes = (int8_t *)xa;
    for (size_t b = 0; b < n / 32; b++) {
        const float d = block_amax(32, x + 32 * b) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        /* roundf: half away from zero */
        for (size_t i = 32 * b; i < 32 * b + 32; i++) codes[i] = code_of(roundf(x[i] * id));
        kvc_put_act_q8_32_block(xa, n, b, d, put_block_copies(32, n, b, xa));
    }
}

void kvc_quantize_act_q8_256__scalar(size_t n, const float *x, uint8_t *xa) {
    int8_t *codes = (int8_t *)xa;
    for (size_t b = 0; b < n / 256; b++) {
        const float m = block_signed_max(256, x + 256 * b);
        const float iscale = m != 0.0f ? -127.0f / m : 0.0f;
        /* rintf: half to even, in the default rounding mode */
        for (size_t i = 256 * b; i < 256 * b + 256; i++) codes[i] = code_of(rintf(x[i] * iscale));
        put_block_copies(256, n, b, xa);
        kvc_put_act_q8_256_block(xa, n, b, m != 0.0f ? 1.0f / iscale : 0.0f);
    }
}

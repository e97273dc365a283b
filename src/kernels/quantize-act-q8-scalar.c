/* quantize-act-q8-scalar.c -- activations to q8 blocks of 32 or 256 with
 * their sums of 16 (weights.h has the definition); the reference the SIMD
 * quantizer gives byte for byte. */
#include <math.h>
#include <string.h>

#include "weights.h"

/* The largest |x|, NaN once an x is NaN. */
static float block_amax(size_t B, const float *x) {
    float amax = 0.0f;
    for (size_t i = 0; i < B; i++) {
        const float a = fabsf(x[i]);
        if (!(a <= amax) && amax == amax) amax = a;
    }
    return amax;
}

static int8_t code_of(float x, float d) {
    /* rintf rounds half to even in the default rounding mode. */
    const float r = rintf(x / d);
    if (r != r) return 0;
    return (int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
}

/* Little-endian, as wasm stores an i16. */
static void put_i16(uint8_t *p, int32_t v) {
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)((v >> 8) & 0xff);
}

static void quantize_q8(size_t B, size_t n, const float *x, uint8_t *xa) {
    int8_t *codes = (int8_t *)xa;
    uint8_t *codes16 = xa + KVC_ACT_Q8_CODES16_AT(n), *scales = xa + KVC_ACT_Q8_SCALES_AT(n);
    uint8_t *sums = xa + KVC_ACT_Q8_SUMS_AT(n, B);
    for (size_t b = 0; b < n / B; b++) {
        const float d = block_amax(B, x + B * b) / 127.0f;
        memcpy(scales + 4 * b, &d, sizeof d);
        for (size_t i = B * b; i < B * b + B; i++) codes[i] = code_of(x[i], d);
    }
    for (size_t i = 0; i < n; i++) put_i16(codes16 + 2 * i, codes[i]);
    for (size_t g = 0; g < n / 16; g++) {
        int32_t sum = 0;
        for (size_t i = 16 * g; i < 16 * g + 16; i++) sum += codes[i];
        put_i16(sums + 2 * g, sum);
    }
}

void kvc_quantize_act_q8_32__scalar(size_t n, const float *x, uint8_t *xa) {
    quantize_q8(32, n, x, xa);
}

void kvc_quantize_act_q8_256__scalar(size_t n, const float *x, uint8_t *xa) {
    quantize_q8(256, n, x, xa);
}

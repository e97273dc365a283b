/* fuzz_input.c -- bytes and value blocks of a fuzz input (ops_format.h). */
#include "fuzz_input.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "ops_format.h"

uint8_t fuzz_byte(fuzz_input *in) {
    return in->at < in->end ? *in->at++ : 0;
}

uint16_t fuzz_u16(fuzz_input *in) {
    const uint16_t lo = fuzz_byte(in);
    return (uint16_t)(lo | fuzz_byte(in) << 8);
}

int fuzz_done(const fuzz_input *in) {
    return in->at >= in->end;
}

uint64_t fuzz_rng_next(fuzz_rng *rng) {
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double fuzz_rng_unit(fuzz_rng *rng) {
    return (double)(fuzz_rng_next(rng) >> 11) * 0x1p-53;
}

static double rng_normal(fuzz_rng *rng) {
    const double u = 1.0 - fuzz_rng_unit(rng), v = fuzz_rng_unit(rng);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

float fuzz_palette(uint8_t b) {
    static const float palette[32] = {
        0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -2.0f, 3.0f, 0x1p-149f, -0x1p-149f, 1e-40f,
        FLT_MIN, -FLT_MIN, 1e-20f, 1e-10f, 1e10f, 1e15f, -1e15f, 1e20f, 1e30f, -1e30f,
        1e38f, FLT_MAX, -FLT_MAX, NAN, -NAN, INFINITY, -INFINITY, 0.1f, 100.0f, -100.0f,
        65504.0f, 1e-5f};
    return palette[b % 32];
}

void fuzz_fill(fuzz_input *in, float *x, size_t n) {
    const uint8_t style = fuzz_byte(in);
    const unsigned param = style / FUZZ_VALUES_COUNT;
    fuzz_rng rng = {0};
    switch (style % FUZZ_VALUES_COUNT) {
    case FUZZ_VALUES_NORMAL:
    case FUZZ_VALUES_UNIT:
    case FUZZ_VALUES_INTS:
    case FUZZ_VALUES_WIDE:
        rng.state = (uint64_t)fuzz_byte(in) << 8 | style;
        break;
    default:
        break;
    }
    switch (style % FUZZ_VALUES_COUNT) {
    case FUZZ_VALUES_NORMAL: {
        const double scale = ldexp(1.0, (int)param - 16);
        for (size_t i = 0; i < n; i++) x[i] = (float)(rng_normal(&rng) * scale);
        break;
    }
    case FUZZ_VALUES_UNIT:
        for (size_t i = 0; i < n; i++) x[i] = (float)fuzz_rng_unit(&rng);
        break;
    case FUZZ_VALUES_INTS:
        for (size_t i = 0; i < n; i++) x[i] = (float)((int)(fuzz_rng_next(&rng) % 17) - 8);
        break;
    case FUZZ_VALUES_CONST: {
        const float c = fuzz_palette(fuzz_byte(in));
        for (size_t i = 0; i < n; i++) x[i] = c;
        break;
    }
    case FUZZ_VALUES_PALETTE:
        for (size_t i = 0; i < n; i++) x[i] = fuzz_palette(fuzz_byte(in));
        break;
    case FUZZ_VALUES_RAW:
        for (size_t i = 0; i < n; i++) {
            uint32_t bits = fuzz_u16(in);
            bits |= (uint32_t)fuzz_u16(in) << 16;
            memcpy(&x[i], &bits, sizeof bits);
        }
        break;
    case FUZZ_VALUES_ZERO:
        for (size_t i = 0; i < n; i++) x[i] = 0.0f;
        break;
    default: /* FUZZ_VALUES_WIDE */
        for (size_t i = 0; i < n; i++) {
            const int exponent = (int)(fuzz_rng_next(&rng) % 41) - 20;
            x[i] = (float)(rng_normal(&rng) * pow(10.0, exponent));
        }
        break;
    }
    const uint8_t inject = fuzz_byte(in);
    if (inject & 1) {
        const size_t at = fuzz_u16(in);
        const float value = fuzz_palette(fuzz_byte(in));
        if (n) x[at % n] = value;
    }
}

/*
 * fuzz_input.h -- reading a fuzz input: bytes (0 past the end) and blocks
 * of float values (ops_format.h).
 */
#ifndef KVC_FUZZ_INPUT_H
#define KVC_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct fuzz_input {
    const uint8_t *at, *end;
} fuzz_input;

uint8_t fuzz_byte(fuzz_input *in);
uint16_t fuzz_u16(fuzz_input *in);
int fuzz_done(const fuzz_input *in);

/* The palette of values worth trying: zeros of both signs, denormals, the
 * normal range's ends, huge and tiny powers of ten, NaN and the infinities. */
float fuzz_palette(uint8_t b);
/* Fills x[n] from a value block of the input. */
void fuzz_fill(fuzz_input *in, float *x, size_t n);

/* A deterministic generator (splitmix64), for values and masks. */
typedef struct fuzz_rng {
    uint64_t state;
} fuzz_rng;

uint64_t fuzz_rng_next(fuzz_rng *rng);
/* uniform in [0, 1) */
double fuzz_rng_unit(fuzz_rng *rng);

#endif /* KVC_FUZZ_INPUT_H */

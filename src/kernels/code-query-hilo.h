/*
 * code-query-hilo.h -- the q8 key path's query coding of the scalar and
 * SIMD128 sets: a query (already q * c_K, at a power-of-two scale) as two
 * i16 code vectors, hi (its codes) and lo (the codes of what hi leaves,
 * x - hi * s_hi in f32), each with its scale.  One vector alone is off by up
 * to s_hi / 2 = max|x| / 65534 a channel, which costs more than the 1e-3 the
 * design allows when the query has outlier channels and attention is peaky
 * (tests/c/test_attend.c measured 4.2e-3); hi and lo together are off by
 * about 2^-24 max|x|.  Shared so that both sets code the same way, with
 * their own quantize_query.
 */
#ifndef KVC_CODE_QUERY_HILO_H
#define KVC_CODE_QUERY_HILO_H

#include "kernels.h"

static inline void kvc_code_query_hilo(kvc_quantize_query_fn *quantize, size_t d, float *x,
                                       uint8_t *codes, float *scales) {
    int16_t *hi = (int16_t *)codes, *lo = hi + d;
    scales[0] = quantize(d, x, hi);
    for (size_t j = 0; j < d; j++) x[j] = x[j] - (float)hi[j] * scales[0];
    scales[1] = quantize(d, x, lo);
}

#endif /* KVC_CODE_QUERY_HILO_H */

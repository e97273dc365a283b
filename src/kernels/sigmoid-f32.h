/*
 * sigmoid-f32.h -- x times the logistic sigmoid of z, the one expression of
 * SwiGLU's silu (z = x) and of GELU's tanh form (0.5 (1 + tanh(u)) is the
 * sigmoid of 2u), for every kernel set.
 *
 * x / (1 + e^-z) with t = e^-|z| by kvc_exp_f32 (exp-f32.h), which never
 * overflows: x / (1 + t) for z >= 0, (x t) / (1 + t) below -- no 1 - (...)
 * to cancel at either end.  Below z = KVC_EXP_MIN (-87.34) t is 0 and the
 * value a zero of x's sign (the sigmoid under 1.2e-38 there); NaN for a NaN
 * z (t = 0, x t) and for x = -Inf at z = -Inf (-Inf * 0).
 */
#ifndef KVC_SIGMOID_F32_H
#define KVC_SIGMOID_F32_H

#include <math.h>

#include "exp-f32.h"

static inline float kvc_times_sigmoid_f32(float x, float z) {
    const float t = kvc_exp_f32(-fabsf(z));
    const float numerator = z >= 0.0f ? x : x * t;
    return numerator / (1.0f + t);
}

#endif /* KVC_SIGMOID_F32_H */

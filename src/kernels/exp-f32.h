/*
 * exp-f32.h -- the exponential of the softmax, one definition for every
 * kernel set.
 *
 * exp(x) = 2^n * (1 + r p(r)): n = round(x * log2(e)) by the 1.5 * 2^23
 * trick, r = x - n * ln2 in two steps (Cody-Waite), p a degree-4 minimax
 * polynomial on [-ln2/2, ln2/2], 2^n built in the exponent bits.  Within 2.5
 * ulp of e^x for -87.33 <= x <= 88 (tests/c/test_kernels.c checks), and 0
 * below, where e^x leaves the normal floats.  Only f32 multiplies and adds in a fixed order (no FMA): the
 * scalar function here and the SIMD lanes of exp-f32-wasmsimd.h give the
 * same bits.
 */
#ifndef KVC_EXP_F32_H
#define KVC_EXP_F32_H

#include <stdint.h>
#include <string.h>

/* Minimax coefficients of the XNNPACK f32 exp (rr2_p5). */
#define KVC_EXP_LOG2E 0x1.715476p+0f
#define KVC_EXP_ROUND 0x1.8p23f          /* 1.5 * 2^23 */
#define KVC_EXP_LN2_HI 0x1.62E400p-1f    /* ln 2 with its last bits cleared */
#define KVC_EXP_LN2_LO 0x1.7F7D1Cp-20f   /* ln 2 - KVC_EXP_LN2_HI */
#define KVC_EXP_C5 0x1.0F9F9Cp-7f
#define KVC_EXP_C4 0x1.573A1Ap-5f
#define KVC_EXP_C3 0x1.555A80p-3f
#define KVC_EXP_C2 0x1.FFFDC6p-2f
#define KVC_EXP_C1 0x1.FFFFF6p-1f
#define KVC_EXP_MIN -0x1.5D589Ep6f       /* -87.336548: below, 0 */

static inline float kvc_exp_f32(float x) {
    if (!(x >= KVC_EXP_MIN)) return 0.0f;
    const float n = (x * KVC_EXP_LOG2E + KVC_EXP_ROUND) - KVC_EXP_ROUND;
    float r = x - n * KVC_EXP_LN2_HI;
    r = r - n * KVC_EXP_LN2_LO;
    float p = KVC_EXP_C5 * r + KVC_EXP_C4;
    p = p * r + KVC_EXP_C3;
    p = p * r + KVC_EXP_C2;
    p = p * r + KVC_EXP_C1;
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    /* 2^n * (1 + r * p), as 2^n + (r * 2^n) * p */
    return (r * scale) * p + scale;
}

#endif /* KVC_EXP_F32_H */

#include <math.h>
#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "wasmsimd-reduce.h"

/* clamp(round_half_even(x / scale), -code_max, code_max) as i32 lanes. */
static v128_t codes_i32(v128_t x, v128_t scale, v128_t code_max) {
    v128_t r = wasm_f32x4_nearest(wasm_f32x4_div(x, scale));
    r = wasm_f32x4_pmin(r, code_max);
    r = wasm_f32x4_pmax(r, wasm_f32x4_neg(code_max));
    return wasm_i32x4_trunc_sat_f32x4(r);
}

float kvc_quantize_query__wasmsimd(size_t d, const float *x, float code_max, int16_t *codes) {
    /* Zero padding moves no maximum and makes zero codes, which are dropped. */
    const size_t d4 = d & ~(size_t)3;
    float x_tail[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    memcpy(x_tail, x + d4, (d - d4) * sizeof(float));
    v128_t vmax = wasm_f32x4_abs(wasm_v128_load(x_tail));
    v128_t nan = wasm_f32x4_ne(vmax, vmax);
    for (size_t j = 0; j < d4; j += 4) {
        const v128_t v = wasm_f32x4_abs(wasm_v128_load(x + j));
        vmax = wasm_f32x4_pmax(vmax, v);
        nan = wasm_v128_or(nan, wasm_f32x4_ne(v, v));
    }
    if (wasm_v128_any_true(nan)) { /* NaN scales every product it meets */
        memset(codes, 0, d * sizeof(int16_t));
        return NAN;
    }
    float scale = kvc_max_lanes_f32x4(vmax) / code_max;
    if (scale < KVC_Q8_SCALE_FLOOR) scale = KVC_Q8_SCALE_FLOOR;
    const v128_t vscale = wasm_f32x4_splat(scale), vmax_code = wasm_f32x4_splat(code_max);
    size_t j = 0;
    for (; j + 8 <= d; j += 8) {
        const v128_t a = codes_i32(wasm_v128_load(x + j), vscale, vmax_code);
        const v128_t b = codes_i32(wasm_v128_load(x + j + 4), vscale, vmax_code);
        wasm_v128_store(codes + j, wasm_i16x8_narrow_i32x4(a, b));
    }
    if (j < d) {
        float rest[8] = {0.0f};
        int16_t rest_codes[8];
        memcpy(rest, x + j, (d - j) * sizeof(float));
        const v128_t a = codes_i32(wasm_v128_load(rest), vscale, vmax_code);
        const v128_t b = codes_i32(wasm_v128_load(rest + 4), vscale, vmax_code);
        wasm_v128_store(rest_codes, wasm_i16x8_narrow_i32x4(a, b));
        memcpy(codes + j, rest_codes, (d - j) * sizeof(int16_t));
    }
    return scale;
}

/* wasmsimd-reduce.h -- the largest of a vector's four f32 lanes, as the
 * scalar kernels take a maximum (a lane replaces it only when larger). */
#ifndef KVC_WASMSIMD_REDUCE_H
#define KVC_WASMSIMD_REDUCE_H

#include <wasm_simd128.h>

static inline float kvc_max_lanes_f32x4(v128_t v) {
    float lanes[4];
    wasm_v128_store(lanes, v);
    float max = lanes[0];
    for (int lane = 1; lane < 4; lane++) {
        if (max < lanes[lane]) max = lanes[lane];
    }
    return max;
}

#endif /* KVC_WASMSIMD_REDUCE_H */

/*
 * wasmsimd-convert.h -- int8 codes to f32 lanes, for the wasm SIMD128 kernels.
 *
 * The plain route, f32x4.convert_i32x4_s after i32x4.extend_*_i16x8_s, is
 * folded by LLVM 14 into a conversion from i16 that wasm lacks, and then
 * split into 4 extract_lane / convert / replace_lane steps per vector.
 * Adding the codes to the bits of 1.5 * 2^23 and subtracting that number
 * gives the same exact floats (integers below 2^22 are exact there) in two
 * instructions that LLVM leaves alone.
 */
#ifndef KVC_WASMSIMD_CONVERT_H
#define KVC_WASMSIMD_CONVERT_H

#include <wasm_simd128.h>

/* (float)x for each i32 lane, |x| < 2^22. */
static inline v128_t kvc_small_i32x4_to_f32x4(v128_t x) {
    const v128_t magic = wasm_f32x4_const_splat(12582912.0f);
    return wasm_f32x4_sub(wasm_i32x4_add(magic, x), magic);
}

/* The four codes in lanes 0..3 (low) or 4..7 (high) of an i16x8 vector, as f32. */
static inline v128_t kvc_low_i16x8_to_f32x4(v128_t codes_i16) {
    return kvc_small_i32x4_to_f32x4(wasm_i32x4_extend_low_i16x8(codes_i16));
}

static inline v128_t kvc_high_i16x8_to_f32x4(v128_t codes_i16) {
    return kvc_small_i32x4_to_f32x4(wasm_i32x4_extend_high_i16x8(codes_i16));
}

#endif /* KVC_WASMSIMD_CONVERT_H */

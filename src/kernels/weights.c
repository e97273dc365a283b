/* weights.c -- the traits table of the weight types and of the activation
 * encodings, and the one place that picks a kernel set for them. */
#include <string.h>

#include "weights.h"

#if defined(KVC_WITH_WASMSIMD)
#define KVC_WASMSIMD(op) op##__wasmsimd
#else
#define KVC_WASMSIMD(op) NULL
#endif
#if defined(KVC_WITH_WASMRELAXED)
#define KVC_WASMRELAXED(op) op##__wasmrelaxed
#define KVC_WASMRELAXED_AS_SIMD(op) op##__wasmsimd
#else
#define KVC_WASMRELAXED(op) NULL
#define KVC_WASMRELAXED_AS_SIMD(op) NULL
#endif

#define KVC_GEMMS(t) {kvc_gemm_##t##__scalar, KVC_WASMSIMD(kvc_gemm_##t), KVC_WASMRELAXED(kvc_gemm_##t)}

/*
 * Each integer type's block value v_b, from its weight block (ggml's fields,
 * f16 read exactly as f32) and the activation block (d_a, codes a_i, sums,
 * s_a; weights.h):
 *   Q8_0  (d * d_a) * S,                  S = sum w_i a_i
 *   Q4_0  (d * d_a) * (S - 8 A),          S = sum q_i a_i, q the 4-bit code, A = sum a_i
 *   Q5_0  (d * d_a) * (S - 16 A),         q the 5-bit code
 *   Q4_1, Q5_1  (d * d_a) * S + m * s_a   (llama.cpp's, with q8_1's s)
 *   Q4_K, Q5_K  (d * d_a) * S - (dmin * d_a) * M,
 *               S = sum_j sc_j sum_{i in j} q_i a_i, M = sum_j m_j A_j over the
 *               eight sub-blocks j of 32 (6-bit sc_j and m_j)
 *   Q6_K  (d * d_a) * S,  S = sum_g sc_g (sum_{i in g} q_i a_i - 32 A_g) over
 *               the sixteen sub-blocks g of 16 (i8 sc_g, q the 6-bit code)
 *   Q2_K  (d * d_a) * S - (dmin * d_a) * M,  S = sum_g sc_g sum_{i in g} q_i a_i,
 *               M = sum_g m_g A_g over the sixteen sub-blocks g of 16 (4-bit
 *               sc_g and m_g, q the 2-bit code)
 *   Q3_K  (d * d_a) * S,  S = sum_g sc_g (sum_{i in g} q_i a_i - 4 A_g) over
 *               the sixteen sub-blocks g of 16 (sc_g the 6-bit scale - 32, q
 *               the 3-bit code: 2 bits and the hmask bit)
 *   IQ4_NL  (d * d_a) * S,                S = sum t_i a_i, t_i = kvalues_iq4nl[q_i]
 *   IQ4_XS  (d * d_a) * S,  S = sum_j (ls_j - 32) sum_{i in j} t_i a_i over the
 *               eight sub-blocks j of 32 (6-bit ls_j, t_i as IQ4_NL's)
 * integers exact in i32, each product and sum one f32 rounding, left to
 * right as written; the integer converted to f32 (rounded) where it meets
 * a float.
 */
/* The packed layouts (weights.h): a gemm per set, as a type's. */
static const kvc_weight_packing q8_0x4 = {
    "Q8_0x4", 4, kvc_pack_q8_0x4, kvc_unpack_block_q8_0x4,
    {kvc_gemm_q8_0x4__scalar, KVC_WASMSIMD(kvc_gemm_q8_0x4), KVC_WASMRELAXED_AS_SIMD(kvc_gemm_q8_0x4)}};
static const kvc_weight_packing q4_kx4 = {
    "Q4_Kx4", 4, kvc_pack_q4_kx4, kvc_unpack_block_q4_kx4, KVC_GEMMS(q4_kx4)};

static const kvc_weight_type types[] = {
    {0, "F32", 1, 4, KVC_ACT_F32, kvc_dequantize_f32, KVC_GEMMS(f32), NULL},
    {1, "F16", 1, 2, KVC_ACT_F32, kvc_dequantize_f16, KVC_GEMMS(f16), NULL},
    {30, "BF16", 1, 2, KVC_ACT_F32, kvc_dequantize_bf16, KVC_GEMMS(bf16), NULL},
    {8, "Q8_0", 32, KVC_BLOCK_BYTES_q8_0, KVC_ACT_Q8_32, kvc_dequantize_q8_0,
     {kvc_gemm_q8_0__scalar, KVC_WASMSIMD(kvc_gemm_q8_0), KVC_WASMRELAXED_AS_SIMD(kvc_gemm_q8_0)}, &q8_0x4},
    {2, "Q4_0", 32, KVC_BLOCK_BYTES_q4_0, KVC_ACT_Q8_32, kvc_dequantize_q4_0, KVC_GEMMS(q4_0), NULL},
    {3, "Q4_1", 32, KVC_BLOCK_BYTES_q4_1, KVC_ACT_Q8_32, kvc_dequantize_q4_1, KVC_GEMMS(q4_1), NULL},
    {6, "Q5_0", 32, KVC_BLOCK_BYTES_q5_0, KVC_ACT_Q8_32, kvc_dequantize_q5_0, KVC_GEMMS(q5_0), NULL},
    {7, "Q5_1", 32, KVC_BLOCK_BYTES_q5_1, KVC_ACT_Q8_32, kvc_dequantize_q5_1, KVC_GEMMS(q5_1), NULL},
    {12, "Q4_K", 256, KVC_BLOCK_BYTES_q4_k, KVC_ACT_Q8_256, kvc_dequantize_q4_k, KVC_GEMMS(q4_k), &q4_kx4},
    {13, "Q5_K", 256, KVC_BLOCK_BYTES_q5_k, KVC_ACT_Q8_256, kvc_dequantize_q5_k, KVC_GEMMS(q5_k), NULL},
    {14, "Q6_K", 256, KVC_BLOCK_BYTES_q6_k, KVC_ACT_Q8_256, kvc_dequantize_q6_k, KVC_GEMMS(q6_k), NULL},
    {10, "Q2_K", 256, KVC_BLOCK_BYTES_q2_k, KVC_ACT_Q8_256, kvc_dequantize_q2_k, KVC_GEMMS(q2_k), NULL},
    {11, "Q3_K", 256, KVC_BLOCK_BYTES_q3_k, KVC_ACT_Q8_256, kvc_dequantize_q3_k, KVC_GEMMS(q3_k), NULL},
    {20, "IQ4_NL", 32, KVC_BLOCK_BYTES_iq4_nl, KVC_ACT_Q8_32, kvc_dequantize_iq4_nl,
     {kvc_gemm_iq4_nl__scalar, KVC_WASMSIMD(kvc_gemm_iq4_nl), KVC_WASMRELAXED_AS_SIMD(kvc_gemm_iq4_nl)}, NULL},
    {23, "IQ4_XS", 256, KVC_BLOCK_BYTES_iq4_xs, KVC_ACT_Q8_256, kvc_dequantize_iq4_xs,
     {kvc_gemm_iq4_xs__scalar, KVC_WASMSIMD(kvc_gemm_iq4_xs), KVC_WASMRELAXED_AS_SIMD(kvc_gemm_iq4_xs)}, NULL},
};
#define TYPE_COUNT (sizeof types / sizeof types[0])

/* Quantization never uses relaxed instructions: the relaxed set codes
 * activations with the SIMD128 quantizer, the same bytes. */
#define KVC_QUANTIZERS(e) \
    {kvc_quantize_act_##e##__scalar, KVC_WASMSIMD(kvc_quantize_act_##e), \
     KVC_WASMRELAXED_AS_SIMD(kvc_quantize_act_##e)}
static const kvc_act_encoding encodings[KVC_ACT_KINDS] = {
    {KVC_ACT_F32, "f32", 1, 4, {kvc_quantize_act_f32, kvc_quantize_act_f32, kvc_quantize_act_f32}},
    {KVC_ACT_Q8_32, "q8x32", 32, KVC_ACT_Q8_ROW_BYTES(32, 32), KVC_QUANTIZERS(q8_32)},
    {KVC_ACT_Q8_256, "q8x256", 256, KVC_ACT_Q8_ROW_BYTES(256, 256), KVC_QUANTIZERS(q8_256)},
};

/* ggml_type's names by id (ggml.h); NULL where ggml defines no type. */
static const char *const ggml_names[] = {
    "F32", "F16", "Q4_0", "Q4_1", NULL, NULL, "Q5_0", "Q5_1", "Q8_0", "Q8_1",
    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
    "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
    "BF16", NULL, NULL, NULL, "TQ1_0", "TQ2_0", NULL, NULL, NULL, "MXFP4",
    "NVFP4", "Q1_0", "Q2_0",
};

kvc_weight_set kvc_weight_set_active(void) {
#if defined(KVC_WITH_WASMRELAXED)
    return KVC_WEIGHT_WASMRELAXED;
#elif defined(KVC_WITH_WASMSIMD)
    return KVC_WEIGHT_WASMSIMD;
#else
    return KVC_WEIGHT_SCALAR;
#endif
}

const char *kvc_weight_set_name(kvc_weight_set set) {
    static const char *const names[KVC_WEIGHT_SETS] = {"scalar", "wasm-simd128", "wasm-relaxed-simd"};
    return set < KVC_WEIGHT_SETS ? names[set] : NULL;
}

const kvc_act_encoding *kvc_act_encoding_of(kvc_act_kind kind) {
    return kind < KVC_ACT_KINDS ? &encodings[kind] : NULL;
}

const kvc_weight_type *kvc_weight_type_of(uint32_t ggml_id) {
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        if (types[i].ggml_id == ggml_id) return &types[i];
    }
    return NULL;
}

const kvc_weight_type *kvc_weight_types(size_t *count) {
    *count = TYPE_COUNT;
    return types;
}

const char *kvc_ggml_type_name(uint32_t ggml_id) {
    return ggml_id < sizeof ggml_names / sizeof ggml_names[0] ? ggml_names[ggml_id] : NULL;
}

size_t kvc_weight_type_list(char *buf, size_t size) {
    size_t length = 0;
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        const char *parts[2] = {i ? ", " : "", types[i].name};
        for (size_t p = 0; p < 2; p++) {
            for (const char *c = parts[p]; *c; c++, length++) {
                if (length + 1 < size) buf[length] = *c;
            }
        }
    }
    if (size) buf[length < size ? length : size - 1] = '\0';
    return length;
}

/*
 * arch.c -- the architectures the runner reads, one descriptor each (as
 * llama.cpp's llama-arch.cpp): what tells its block from llama's.  The
 * tensor names are GGUF's and the same for all of them (lm.c); an
 * architecture adds tensors (biases, q/k norms, post-norms) or fuses them
 * (phi3's attn_qkv and gate-and-up ffn_up), says how RoPE pairs channels
 * (llama.cpp's LLAMA_ROPE_TYPE_NORM for llama and smollm3, NEOX for qwen2/3,
 * gemma3 and phi3), which FFN gate it has, and which layers attend over a
 * sliding window or rotate nothing.  What any architecture may have is read
 * for all (lm.c): rope.dimension_count below the head size (partial RoPE),
 * RoPE factors (Llama 3's rope_freqs, LongRoPE's long and short ones) and
 * rope.scaling.attn_factor.
 */
#include <string.h>

#include "model.h"

static const kvc_arch archs[] = {
    {"llama", KVC_ROPE_ADJACENT, 0, KVC_ACT_SWIGLU, 0, 0.0f, 0},
    {"qwen2", KVC_ROPE_HALVES, KVC_ARCH_QKV_BIAS, KVC_ACT_SWIGLU, 0, 0.0f, 0},
    {"qwen3", KVC_ROPE_HALVES, KVC_ARCH_QK_NORM, KVC_ACT_SWIGLU, 0, 0.0f, 0},
    /* Five windowed layers to a global one; the windowed ones at RoPE base
     * 10000 whatever the file says (llama.cpp's rope_freq_base_train_swa). */
    {"gemma3", KVC_ROPE_HALVES, KVC_ARCH_QK_NORM | KVC_ARCH_POST_NORMS | KVC_ARCH_EMBED_SCALE, KVC_ACT_GEGLU_TANH, 6,
     10000.0f, 0},
    /* llama's block; every fourth layer without RoPE (llama.cpp's n_no_rope_layer_step). */
    {"smollm3", KVC_ROPE_ADJACENT, 0, KVC_ACT_SWIGLU, 0, 0.0f, 4},
    /* Phi-3.x, Phi-4-mini: fused projections, LongRoPE (lm.c), partial RoPE
     * (Phi-4-mini: 96 of 128).  No window: llama.cpp ignores the
     * attention.sliding_window the converter writes. */
    {"phi3", KVC_ROPE_HALVES, KVC_ARCH_FUSED_QKV | KVC_ARCH_FUSED_GATE_UP, KVC_ACT_SWIGLU, 0, 0.0f, 0},
};

const kvc_arch *kvc_arch_of(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        if (strlen(archs[i].name) == len && memcmp(archs[i].name, name, len) == 0) return &archs[i];
    }
    return NULL;
}

const kvc_arch *kvc_archs(size_t *count) {
    *count = sizeof archs / sizeof archs[0];
    return archs;
}

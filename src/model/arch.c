/*
 * arch.c -- the architectures the runner reads, one descriptor each (as
 * llama.cpp's llama-arch.cpp): what tells its block from llama's.  The
 * tensor names are GGUF's and the same for all of them (lm.c); an
 * architecture adds tensors (biases, q/k norms, post-norms) or fuses them
 * (phi3's attn_qkv and gate-and-up ffn_up), says how RoPE pairs channels
 * (llama.cpp's LLAMA_ROPE_TYPE_NORM for llama and smollm3, NEOX for qwen2/3,
 * gemma3 and phi3), which FFN gate it has, and which layers attend over a
 * sliding window or rotate nothing, and which kind of recurrent layer the
 * hybrids (lfm2, qwen35) have in place of attention, and which blocks share
 * another's keys and values (gemma4), and which norm a block has and where
 * (bert's LayerNorms after each sub-block).  What any architecture may have is read
 * for all (lm.c): rope.dimension_count below the head size (partial RoPE),
 * RoPE factors (Llama 3's rope_freqs, LongRoPE's long and short ones) and
 * rope.scaling.attn_factor.
 */
#include <string.h>

#include "model.h"

static const kvc_arch archs[] = {
    {.name = "llama", .rope = KVC_ROPE_ADJACENT, .activation = KVC_ACT_SWIGLU},
    {.name = "qwen2", .rope = KVC_ROPE_HALVES, .flags = KVC_ARCH_QKV_BIAS, .activation = KVC_ACT_SWIGLU},
    /* Its embedding models pool the last token; its rerankers score it
     * with the softmax of cls.output's "yes" and "no" rows. */
    {.name = "qwen3", .rope = KVC_ROPE_HALVES, .flags = KVC_ARCH_QK_NORM | KVC_ARCH_RANK_LAST, .activation = KVC_ACT_SWIGLU},
    /* Five windowed layers to a global one (or as attention.sliding_window_pattern
     * says); the windowed ones at RoPE base rope.freq_base_swa, 10000 without
     * it (llama.cpp's rope_freq_base_train_swa). */
    {.name = "gemma3", .rope = KVC_ROPE_HALVES,
     .flags = KVC_ARCH_QK_NORM | KVC_ARCH_POST_NORMS | KVC_ARCH_EMBED_SCALE | KVC_ARCH_LOGIT_SOFTCAP | KVC_ARCH_WINDOW_PATTERN,
     .activation = KVC_ACT_GEGLU_TANH, .global_every = 6, .window_rope_base = 10000.0f},
    /* EmbeddingGemma: Gemma 3's block as an encoder -- every token sees its
     * text both ways, a window layer the positions within half its window
     * either side -- without a logit cap (it gives no logits). */
    {.name = "gemma-embedding", .rope = KVC_ROPE_HALVES,
     .flags = KVC_ARCH_QK_NORM | KVC_ARCH_POST_NORMS | KVC_ARCH_EMBED_SCALE | KVC_ARCH_WINDOW_PATTERN | KVC_ARCH_BIDIRECTIONAL,
     .activation = KVC_ACT_GEGLU_TANH, .global_every = 6, .window_rope_base = 10000.0f},
    /* BERT (bge, gte, all-MiniLM; llama.cpp's src/models/bert.cpp): an
     * encoder of blocks normed after -- a LayerNorm of each sub-block's
     * residual sum -- learned positions and the first token type added to
     * the embedding and normed, biases on every product, an FFN of GELU
     * without a gate, no RoPE (every layer skips it). */
    {.name = "bert", .rope = KVC_ROPE_HALVES,
     .flags = KVC_ARCH_BIDIRECTIONAL | KVC_ARCH_NORM_AFTER | KVC_ARCH_LAYER_NORM | KVC_ARCH_POSITION_EMBD |
              KVC_ARCH_TOKEN_TYPES | KVC_ARCH_BIASES,
     .activation = KVC_ACT_GELU_TANH, .nope_every = 1},
    /* nomic-bert (nomic-embed-text): BERT's block with RoPE on halves in
     * place of learned positions, q, k and v in one tensor, SwiGLU. */
    {.name = "nomic-bert", .rope = KVC_ROPE_HALVES,
     .flags = KVC_ARCH_BIDIRECTIONAL | KVC_ARCH_NORM_AFTER | KVC_ARCH_LAYER_NORM | KVC_ARCH_TOKEN_TYPES | KVC_ARCH_BIASES |
              KVC_ARCH_FUSED_QKV,
     .activation = KVC_ACT_SWIGLU},
    /* Gemma 4 (llama.cpp's src/models/gemma4.cpp): Gemma 3's block, window
     * and global layers of their own head sizes and RoPE (the global ones'
     * partial RoPE as rope_freqs factors of 1e30), V normed without a
     * weight, q.k unscaled, the last attention.shared_kv_layers blocks
     * reading the rows of the last window and global blocks before them,
     * per-layer embeddings, each block's output scaled, logits soft-capped. */
    {.name = "gemma4", .rope = KVC_ROPE_HALVES,
     .flags = KVC_ARCH_QK_NORM | KVC_ARCH_POST_NORMS | KVC_ARCH_EMBED_SCALE | KVC_ARCH_V_NORM | KVC_ARCH_LOGIT_SOFTCAP |
              KVC_ARCH_SHARED_KV | KVC_ARCH_PER_LAYER_INPUT | KVC_ARCH_WINDOW_PATTERN | KVC_ARCH_OUTPUT_SCALE,
     .activation = KVC_ACT_GEGLU_TANH, .global_every = 6, .window_rope_base = 10000.0f, .attention_scale = 1.0f,
     .logit_softcap = 30.0f},
    /* llama's block; every fourth layer without RoPE (llama.cpp's n_no_rope_layer_step). */
    {.name = "smollm3", .rope = KVC_ROPE_ADJACENT, .activation = KVC_ACT_SWIGLU, .nope_every = 4},
    /* Ministral 3 (text): llama's block; YaRN in its RoPE (read for every
     * architecture, lm.c) and Llama 4's attention temperature. */
    {.name = "mistral3", .rope = KVC_ROPE_ADJACENT, .flags = KVC_ARCH_QUERY_TEMPERATURE, .activation = KVC_ACT_SWIGLU},
    /* Phi-3.x, Phi-4-mini: fused projections, LongRoPE (lm.c), partial RoPE
     * (Phi-4-mini: 96 of 128).  No window: llama.cpp ignores the
     * attention.sliding_window the converter writes. */
    {.name = "phi3", .rope = KVC_ROPE_HALVES, .flags = KVC_ARCH_FUSED_QKV | KVC_ARCH_FUSED_GATE_UP,
     .activation = KVC_ACT_SWIGLU},
    /* LFM2: short convolutions where head_count_kv (a list, one per layer)
     * is 0, GQA with q/k norms elsewhere; the final norm is token_embd_norm. */
    {.name = "lfm2", .rope = KVC_ROPE_HALVES, .flags = KVC_ARCH_QK_NORM, .activation = KVC_ACT_SWIGLU,
     .recurrent = KVC_KIND_CONV, .output_norm = "token_embd_norm.weight"},
    /* Qwen3.5: gated delta rules, every fourth layer gated attention (q/k
     * norms, RoPE on part of a head: IMROPE, which is NeoX's for text);
     * each block's FFN normed by post_attention_norm. */
    {.name = "qwen35", .rope = KVC_ROPE_HALVES, .flags = KVC_ARCH_QK_NORM | KVC_ARCH_GATED_ATTN,
     .activation = KVC_ACT_SWIGLU, .recurrent = KVC_KIND_DELTA, .recurrent_layers = KVC_RECURRENT_BUT_INTERVAL,
     .attention_every = 4, .ffn_norm = "post_attention_norm.weight"},
    /* Granite 4.0-H (llama.cpp's granite-hybrid.cpp): Mamba-2 where
     * head_count_kv is 0, attention elsewhere (without positions when
     * rope.scaling.finetuned is false, as the converter writes it), SwiGLU,
     * Granite's multipliers. */
    /* Falcon-H1 (llama.cpp's falcon-h1.cpp): in every layer attention (RoPE
     * on halves) and Mamba-2 read the same normed input and their outputs
     * are summed (a layer of both in the cache); SwiGLU normed by ffn_norm
     * (a tensor without .weight); muP's multipliers folded into the weights
     * by the converter. */
    {.name = "falcon-h1", .rope = KVC_ROPE_HALVES, .activation = KVC_ACT_SWIGLU, .recurrent = KVC_KIND_ATTN_MAMBA2,
     .recurrent_layers = KVC_RECURRENT_BESIDE_ATTENTION, .ffn_norm = "ffn_norm"},
    {.name = "granitehybrid", .rope = KVC_ROPE_ADJACENT, .flags = KVC_ARCH_MULTIPLIERS | KVC_ARCH_ROPE_SWITCH,
     .activation = KVC_ACT_SWIGLU, .recurrent = KVC_KIND_MAMBA2},
    /* Nemotron-H (llama.cpp's nemotron-h.cpp): one sub-block a block, each
     * normed by attn_norm -- Mamba-2 where head_count_kv and
     * feed_forward_length are 0, attention without positions (RoPE type
     * NONE: nope_every 1) where head_count_kv is not, an MLP of squared ReLU
     * where feed_forward_length is not; biases where the file has them. */
    {.name = "nemotron_h", .rope = KVC_ROPE_ADJACENT, .flags = KVC_ARCH_BIASES | KVC_ARCH_EPS_FALLBACK,
     .activation = KVC_ACT_RELU_SQUARED, .nope_every = 1, .recurrent = KVC_KIND_MAMBA2,
     .recurrent_layers = KVC_RECURRENT_WITHOUT_KV_OR_FFN, .ffn_norm = "attn_norm.weight"},
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

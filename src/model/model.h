/*
 * model.h -- the model runner's room: a language model read from a GGUF
 * file, its weights left in their GGUF encoding, and its forward pass on a
 * model cache (kvc_model).  It sits above the core: it uses the cache
 * through the public API and the thread pool, and the weight kernels
 * through their table (kernels/weights.h); nothing below knows a model.
 */
#ifndef KVC_MODEL_ROOM_H
#define KVC_MODEL_ROOM_H

#include "kvcache.h"
#include "../kernels/weights.h"

/* How an architecture pairs the channels of a head that RoPE rotates: the
 * first rope_dims of them (rope.dimension_count; the rest pass through). */
typedef enum kvc_rope_pairing {
    KVC_ROPE_ADJACENT, /* (2i, 2i + 1): ggml's "normal" RoPE, llama's GGUF layout */
    KVC_ROPE_HALVES    /* (i, i + rope_dims / 2): NeoX's (qwen2, qwen3, phi3) */
} kvc_rope_pairing;

/* How a RoPE table turns the first `dims` channels of a head: pair i by
 * the angle position * base^(-2i / dims) / factor_i (factors NULL: all 1),
 * its cos and sin times `scale`.  freq_scale below 1 interpolates the angle
 * (linear scaling: the angle times it); YaRN (ext_factor 1) takes the
 * interpolated angle for the pairs past corr_high, the original one for
 * those before corr_low, a mix between, and scales cos and sin by
 * 1 + 0.1 ln(1 / freq_scale) besides -- ggml's rope_yarn. */
typedef struct kvc_rope_params {
    size_t dims;
    float base;
    const float *factors;
    float scale;
    float freq_scale, ext_factor, corr_low, corr_high;
    /* Multimodal RoPE (rope.dimension_sections; all 0: none): pair i turns
     * by one of a position's 4 coordinates (t, y, x, e), interleaved as
     * qwen35's IMROPE: i % 3 == 1 below 3 sections[1] takes y, == 2 below
     * 3 sections[2] x, == 0 below 3 sections[0] t, the rest e. */
    uint32_t sections[4];
} kvc_rope_params;

/* What a block of an architecture has beyond llama's. */
enum {
    KVC_ARCH_QKV_BIAS = 1u << 0,   /* attn_{q,k,v}.bias (qwen2) */
    KVC_ARCH_QK_NORM = 1u << 1,    /* attn_{q,k}_norm: RMSNorm of each head of q and k (qwen3) */
    KVC_ARCH_POST_NORMS = 1u << 2, /* post_attention_norm and post_ffw_norm: RMSNorm of what the
                                      attention and the FFN add, before they are added (gemma3) */
    KVC_ARCH_EMBED_SCALE = 1u << 3, /* the embeddings times sqrt(dim) (gemma3) */
    KVC_ARCH_FUSED_QKV = 1u << 4,   /* attn_qkv: q's rows, then k's, then v's, in place of
                                       attn_{q,k,v} when the file has it (phi3) */
    KVC_ARCH_FUSED_GATE_UP = 1u << 5, /* ffn_up: the gate's rows, then up's; no ffn_gate (phi3) */
    KVC_ARCH_GATED_ATTN = 1u << 6,    /* attn_q: per head its queries, then as many gates; the
                                         attention's output times sigmoid(gate) (qwen35) */
    KVC_ARCH_V_NORM = 1u << 7,        /* V RMS-normalised per head, without a weight; a block
                                         without attn_v takes its V from attn_k's product (gemma4) */
    KVC_ARCH_LOGIT_SOFTCAP = 1u << 8, /* final_logit_softcapping (else kvc_arch.logit_softcap):
                                         logits = cap * tanh(logits / cap) */
    KVC_ARCH_SHARED_KV = 1u << 9,     /* attention.shared_kv_layers: the last blocks attend over the
                                         rows of the last block of their kind that owns rows (gemma4) */
    KVC_ARCH_PER_LAYER_INPUT = 1u << 10, /* embedding_length_per_layer_input: per-layer embeddings
                                            (per_layer_token_embd and its projection) gated into
                                            each block's output (gemma4) */
    KVC_ARCH_WINDOW_PATTERN = 1u << 11, /* attention.sliding_window_pattern, a list of the windowed
                                           layers or their period, in place of global_every (gemma4) */
    KVC_ARCH_OUTPUT_SCALE = 1u << 12,   /* layer_output_scale ([1], optional): each block's output,
                                           the residual stream, times it (gemma4) */
    KVC_ARCH_QUERY_TEMPERATURE = 1u << 13, /* attention.temperature_scale s: the queries at position p
                                              times 1 + s ln(floor(p / original context) + 1)
                                              (mistral3: Llama 4's attention temperature) */
    KVC_ARCH_BIDIRECTIONAL = 1u << 14, /* an encoder: each token attends its whole text both ways
                                          (unless attention.causal says otherwise), a window layer
                                          the positions within window / 2 either side, llama.cpp's
                                          LLAMA_SWA_TYPE_SYMMETRIC (gemma-embedding) */
    KVC_ARCH_RANK_LAST = 1u << 15,     /* rank pooling reads the text's last token and softmaxes
                                          cls.output's rows (qwen3's rerankers: "yes", "no") */
    KVC_ARCH_NORM_AFTER = 1u << 16,    /* each sub-block's output added to its input, then the sum
                                          normed (attn_output_norm, layer_output_norm): no norm
                                          before a sub-block, none at the end (bert) */
    KVC_ARCH_LAYER_NORM = 1u << 17,    /* the block's norms are LayerNorms (a weight and a bias,
                                          attention.layer_norm_epsilon), the embeddings normed by
                                          token_embd_norm (bert) */
    KVC_ARCH_POSITION_EMBD = 1u << 18, /* learned absolute positions: position_embd's row of a
                                          token's position added to its embedding (bert) */
    KVC_ARCH_TOKEN_TYPES = 1u << 19,   /* token_types' first row ("sentence A") added to every
                                          token's embedding, where the file has it (bert) */
    KVC_ARCH_BIASES = 1u << 20,        /* a bias after every product where the file has one: q, k,
                                          v (or the fused qkv), the attention's output, the FFN's
                                          up and down (bert) */
    KVC_ARCH_MULTIPLIERS = 1u << 21,   /* Granite's multipliers, each where the file has it: the
                                          embeddings times embedding_scale, each sub-block's output
                                          times residual_scale, q.k times attention.scale (in place
                                          of 1 / sqrt(head size)), the logits times 1 / logit_scale */
    KVC_ARCH_ROPE_SWITCH = 1u << 22,   /* rope.scaling.finetuned false (true without it): no layer
                                          rotates (Granite 4.0-H's attention has no positions) */
    KVC_ARCH_EPS_FALLBACK = 1u << 23   /* attention.layer_norm_epsilon required, the RMSNorms'
                                          eps layer_norm_rms_epsilon where the file has it, else
                                          that one (nemotron_h) */
};

/* The FFN's gate: silu(gate) * up (SwiGLU) or gelu(gate) * up with GELU's
 * tanh approximation (GeGLU, gemma3); or none, gelu(up) (bert) or relu(up)^2
 * (nemotron_h). */
typedef enum kvc_activation {
    KVC_ACT_SWIGLU,
    KVC_ACT_GEGLU_TANH,
    KVC_ACT_GELU_TANH, /* no gate: gelu(x Wup), GELU's tanh form (bert) */
    KVC_ACT_RELU_SQUARED /* no gate: relu(x Wup)^2 (nemotron_h) */
} kvc_activation;

/* Which layers of a hybrid are its recurrent ones. */
typedef enum kvc_recurrent_layers {
    KVC_RECURRENT_WITHOUT_KV,      /* a layer whose head_count_kv (a list, one per layer) is 0 (lfm2, granitehybrid) */
    KVC_RECURRENT_BUT_INTERVAL,    /* every layer but each full_attention_interval-th (qwen35) */
    KVC_RECURRENT_WITHOUT_KV_OR_FFN, /* a layer whose head_count_kv and feed_forward_length (lists)
                                       are both 0; one whose feed_forward_length is not 0 is an
                                       MLP alone, without a mixer, and keeps nothing (KVC_KIND_NONE);
                                       a mixer's block has no FFN (nemotron_h) */
    KVC_RECURRENT_BESIDE_ATTENTION   /* every layer, beside its attention: a layer of both (falcon-h1) */
} kvc_recurrent_layers;

/* One architecture: the data that tells its block from llama's. */
typedef struct kvc_arch {
    const char *name; /* general.architecture, and the prefix of its metadata keys */
    kvc_rope_pairing rope;
    unsigned flags;
    kvc_activation activation;
    /* With <arch>.attention.sliding_window in the file: layer l attends
     * globally when (l + 1) % global_every == 0, the others over the window;
     * 0: every layer globally. */
    size_t global_every;
    /* The windowed layers' RoPE base (0: the file's rope.freq_base). */
    float window_rope_base;
    /* Layer l rotates no channel when (l + 1) % nope_every == 0 (0: every layer rotates). */
    size_t nope_every;
    /* The kind of its recurrent layers (KVC_KIND_CONV, KVC_KIND_DELTA,
     * KVC_KIND_MAMBA2; KVC_KIND_FULL for none) and which layers they are. */
    kvc_kind recurrent;
    kvc_recurrent_layers recurrent_layers;
    /* qwen35: full_attention_interval when the file does not say. */
    size_t attention_every;
    /* The FFN's norm and the final norm under their names in the file
     * (NULL: ffn_norm.weight, output_norm.weight). */
    const char *ffn_norm, *output_norm;
    /* The attention's scale of q.k (0: 1 / sqrt(head size)). */
    float attention_scale;
    /* KVC_ARCH_LOGIT_SOFTCAP: the cap where the file gives none (0: none). */
    float logit_softcap;
} kvc_arch;

/* What differs from layer to layer: its kind (full, window, shared, or the
 * architecture's recurrent kind), its attention's window (0: global), its
 * RoPE table (KVC_ROPE_GLOBAL, KVC_ROPE_WINDOW or KVC_ROPE_NONE), the sizes
 * of its attention and FFN (gemma4's window and global layers differ in
 * head size, its shared-KV blocks in FFN width), and a shared layer's owner:
 * the layer whose rows it attends over. */
enum { KVC_ROPE_GLOBAL, KVC_ROPE_WINDOW, KVC_ROPE_NONE };
typedef struct kvc_layer_plan {
    kvc_kind kind;
    size_t window;
    int rope_table;
    size_t head_dim, kv_heads, rope_dims, ffn_dim;
    size_t owner;
} kvc_layer_plan;

/* The geometry of a model's recurrent layers (recurrent.c's): the
 * convolution's channels and taps; the delta rule's heads and sizes. */
typedef struct kvc_recurrent_shape {
    size_t channels, kernel;
    size_t key_heads, value_heads, key_dim, value_dim;
    size_t state_len; /* floats of one layer's state */
} kvc_recurrent_shape;

/* The architecture named `name` (length len), or NULL. */
const kvc_arch *kvc_arch_of(const char *name, size_t len);
/* The table, in order; *count its rows. */
const kvc_arch *kvc_archs(size_t *count);

/* A weight: rows x cols values in its GGUF encoding (a vector is one row),
 * at `offset` within the model's weights, `data` once they are allocated.
 * ggml lists dims innermost first: [cols, rows].  It may be a range of the
 * rows of a tensor of the file (a fused one's q, k, v, gate or up). */
typedef struct kvc_tensor {
    const kvc_weight_type *type; /* NULL: the tensor is absent */
    const uint8_t *data;
    uint64_t offset; /* in the file's tensor data, which may pass 4 GiB where a table stays outside */
    size_t cols;
    size_t rows;
    size_t row_bytes;
    /* The layout its whole tiles of rows are packed in (kvc_lm_pack_weights;
     * weights.h), NULL: the file's. */
    const kvc_weight_packing *packing;
} kvc_tensor;

/* out[i] = the value of column first + i of row r of t, i < count, in
 * whichever layout t is. */
void kvc_tensor_values(const kvc_tensor *t, size_t r, size_t first, size_t count, float *out);

typedef struct kvc_block {
    kvc_tensor attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
    kvc_tensor bq, bk, bv;     /* KVC_ARCH_QKV_BIAS */
    kvc_tensor q_norm, k_norm; /* KVC_ARCH_QK_NORM: [head_dim] each */
    kvc_tensor post_attn_norm, post_ffn_norm; /* KVC_ARCH_POST_NORMS */
    /* A recurrent layer in place of attention: its input projection (lfm2's
     * shortconv.in_proj: B, C, x; qwen35's attn_qkv: q, k, v), the
     * convolution's taps [channels x kernel] and the output projection
     * (shortconv.out_proj, ssm_out); qwen35's gate z (attn_gate), write
     * strength (ssm_beta) and decay (ssm_alpha, ssm_dt.bias, ssm_a), and
     * the norm of each head's output (ssm_norm). */
    kvc_tensor in_proj, conv, out_proj;
    kvc_tensor z_proj, beta_proj, alpha_proj, dt_bias, decay_rate, head_norm;
    /* Mamba-2's (ssm_in's rows split: z_proj, in_proj's x, B, C, then
     * dt_proj): the convolution's bias, the skip D, and head_norm its
     * grouped norm [groups x inner / groups]; F32 all but the products. */
    kvc_tensor dt_proj, conv_bias, skip;
    /* KVC_ARCH_PER_LAYER_INPUT: the gate of the block's slice of the
     * per-layer input (inp_gate), its projection back (proj), that
     * projection's norm (post_norm), and the block's output scale
     * (layer_output_scale, [1]; optional). */
    kvc_tensor ple_gate, ple_proj, ple_norm, out_scale;
    /* KVC_ARCH_BIASES: the attention's output's, the FFN's up and down
     * biases; KVC_ARCH_LAYER_NORM: the post norms' biases. */
    kvc_tensor bo, b_up, b_down, post_attn_norm_bias, post_ffn_norm_bias;
} kvc_block;

/* What a forward pass works in, sized for `tokens` tokens and grown on
 * demand (forward.c). */
typedef struct kvc_lm_scratch {
    size_t bytes;     /* what the arrays below take */
    size_t tokens;    /* what the arrays below are sized for */
    size_t positions; /* and the attention arrays for this many rows */
    float *x, *xb, *q, *k, *v, *att, *gate, *up; /* activations */
    float *wide;      /* [tokens x widest]: a recurrent layer's input projection, or q with its gates */
    float *mixed;     /* [tokens x dim or value heads x value_dim]: what a recurrent layer gives out */
    float *rates;     /* [tokens x 2 value heads]: a delta layer's decays, then write strengths */
    float *taps;      /* [channels x kernel]: a convolution's taps, as f32 */
    float *rope;      /* per table (KVC_ROPE_GLOBAL, KVC_ROPE_WINDOW), a row of head_dim per
                         token: rope_dims / 2 cos, then as many sin */
    uint8_t *codes;   /* the activations coded for the weights' kernels */
    float *qh, *oh;   /* one query head's queries and outputs [tokens x head_dim] */
    float *probs;     /* a head's attention [tokens x positions] */
    float *mass;      /* the attention each token gave each slot, summed over heads */
    float *vector;    /* a vector weight (norm, bias) of another type than F32, as f32 */
    float *rope_factors; /* the RoPE factors (kvc_lm.rope_freqs), as f32 when they are not F32 */
    float *per_layer; /* [tokens x layers x per_layer_dim]: each token's per-layer inputs */
    float *query_scale; /* [tokens]: KVC_ARCH_QUERY_TEMPERATURE's factor of each token's queries */
    float *gelu;      /* GELU's table (kvc_gelu_table_fill), for a block with a GELU */
    /* KVC_LM_RANGES (kvc_lm_encode): per token the first and end slot it
     * attends in a global layer [2 x tokens], then in a window layer. */
    const uint32_t *ranges;
} kvc_lm_scratch;

/* A pass's flag beside kvc_lm_forward's: each token attends over its range
 * of scratch.ranges (kvc_lm_encode's). */
#define KVC_LM_RANGES (1u << 16)

/* The importance a verify's tokens gave, held until kvc_lm_keep: per layer,
 * [tokens x slots] masses and the slots' positions. */
typedef struct kvc_lm_pending {
    size_t tokens; /* 0: none held */
    size_t slots;  /* per layer */
    float *mass;   /* [layers x tokens x slots] */
    uint32_t *positions; /* [layers x slots] */
    size_t capacity; /* floats mass holds */
    size_t position_capacity;
} kvc_lm_pending;

struct kvc_lm {
    const kvc_arch *arch;
    /* num_kv_heads and ffn_dim: the most any layer has; head_dim: the global
     * layers' (kvc_layer_plan says each layer's) */
    size_t num_layers, dim, num_heads, num_kv_heads, head_dim, ffn_dim, vocab_size, context_length;
    size_t rope_dims; /* the channels of a head RoPE rotates: even, <= head_dim */
    size_t window_head_dim, window_rope_dims; /* the same of the window layers */
    size_t widest_head; /* the larger of the two head sizes */
    float rms_eps, rope_base, window_rope_base;
    float logit_softcap; /* KVC_ARCH_LOGIT_SOFTCAP: the cap (0: none) */
    /* The embeddings' and each sub-block's output's factors, the logits'
     * divisor (KVC_ARCH_EMBED_SCALE's sqrt(dim), KVC_ARCH_MULTIPLIERS'; 0:
     * none) and q.k's scale (0: 1 / sqrt(head size)). */
    float embed_scale, residual_scale, logit_scale, attention_scale;
    size_t per_layer_dim; /* KVC_ARCH_PER_LAYER_INPUT: each block's slice of a token's per-layer input (0: none) */
    float rope_scale; /* rope.scaling.attn_factor: RoPE's cos and sin times it (1: none) */
    /* The global and window layers' RoPE (the global ones' factors set as a
     * pass begins, from rope_freqs). */
    kvc_rope_params rope_global, rope_window;
    /* KVC_ARCH_QUERY_TEMPERATURE: attention.temperature_scale, and the
     * positions a step of it spans (rope.scaling.original_context_length). */
    float temperature_scale;
    size_t temperature_floor;
    size_t window; /* attention.sliding_window (0: none) */
    kvc_layer_plan *plans; /* [num_layers] */
    kvc_recurrent_shape recurrent; /* of the recurrent layers, if any */
    /* The file's tensor data: as it is in the file, then (kvc_lm_pack_weights)
     * with the matrices of a type that has a packed layout packed. */
    uint8_t *weights;
    size_t weights_bytes;
    int packed; /* kvc_lm_pack_weights has run */
    /* rope_freqs: the per-pair divisors of RoPE's angles [rope_dims / 2] it
     * uses, Llama 3's rope_freqs.weight or one of LongRoPE's (lm.c), or absent. */
    kvc_tensor token_embd, output_norm, output, rope_freqs;
    /* bert's embedding: position_embd [dim x context] (KVC_ARCH_POSITION_EMBD),
     * token_types [dim x types] (KVC_ARCH_TOKEN_TYPES), token_embd_norm and
     * its bias (KVC_ARCH_LAYER_NORM). */
    kvc_tensor position_embd, token_types, embd_norm, embd_norm_bias;
    /* KVC_ARCH_PER_LAYER_INPUT: the per-layer embeddings [layers x
     * per_layer_dim per token], the projection of the embedding that joins
     * them, and its norm [per_layer_dim]. */
    kvc_tensor per_layer_embd, per_layer_proj, per_layer_norm;
    /* The per-layer embeddings' bytes in the file's tensor data while they
     * stay outside the weights (kvc_lm_keep_per_layer_outside; 0: inside). */
    uint64_t outside_offset, outside_bytes;
    uint64_t data_bytes; /* the file's tensor data, whose part the weights region holds */
    kvc_block *blocks;
    /* An embedding model's: the file's pooling (<arch>.pooling_type; none:
     * a model that generates), whether its attention is causal, the dense
     * layers after pooling (sentence-transformers' Dense modules: dense_2
     * with its bias, dense_3) and what they give (embedding_dim); a
     * reranker's classification head: cls (and bias; tanh after it) and
     * cls.output (and bias) of rank_outputs rows. */
    kvc_pooling pooling;
    int causal;
    kvc_tensor dense_2, dense_2_bias, dense_3, cls, cls_bias, cls_out, cls_out_bias;
    size_t embedding_dim, rank_outputs;
    kvc_lm_scratch scratch;
    kvc_lm_pending pending;
};

/* ---- lm.c ---- */
/* Calls fn(t, context) for every tensor the model binds (absent ones too;
 * the tied output as well as token_embd, which it copies). */
void kvc_lm_each_tensor(kvc_lm *lm, void (*fn)(kvc_tensor *t, void *context), void *context);

/* ---- forward.c: an embedding model's pass ---- */
/* A vector weight as f32: itself when it is F32 (every file llama.cpp's
 * converter writes), else dequantized into `buffer` [t->cols]. */
const float *kvc_vector_f32(const kvc_tensor *t, float *buffer);
/* The n tokens through every block in one chunk, at RoPE positions
 * `positions` [n x 4] (t, y, x, e), each attending over its range of
 * `ranges` (KVC_LM_RANGES) of the block's rows, held in an f32 layer made
 * for the block and freed after it, or convolved over its own text (a
 * conv layer); the final norm of each into hidden [n x dim].  No delta or
 * shared layer. */
kvc_status kvc_lm_encode(kvc_lm *lm, const uint32_t *tokens, size_t n, const uint32_t *positions, const uint32_t *ranges,
                         float *hidden);

/* ---- refusal.c: what a reader of a model file says when it refuses ---- */
/* Where a reader's sentences go: message_len bytes of message (NULL: nowhere). */
typedef struct kvc_says {
    char *message;
    size_t message_len;
} kvc_says;
/* Writes a sentence (printf's format, cut to fit) where `says` says; returns status. */
kvc_status kvc_refuse(const kvc_says *says, kvc_status status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* Tensor `name`'s row of the weight table for ggml type `id`; NULL, with
 * KVC_E_WEIGHT_TYPE's sentence (the type, and the types this runner reads)
 * said, when the table lacks it. */
const kvc_weight_type *kvc_tensor_type(const kvc_says *says, const char *name, uint32_t id);
/* KVC_OK when `gguf` holds at least six tensors for each of `blocks` blocks
 * (every block of a language model or an encoder has six at least), else
 * KVC_E_MODEL_FILE saying so of metadata `key`: a block count the file
 * cannot hold is refused before the blocks are allocated. */
kvc_status kvc_refuse_block_count(const kvc_says *says, const kvc_gguf *gguf, const char *key, size_t blocks);

/* Frees the scratch's arrays (forward.c). */
void kvc_lm_scratch_free(kvc_lm_scratch *scratch);

/* ---- ops.c: the block's element-wise arithmetic, on f32 rows ---- */
/* out = x * (1 / sqrt(mean(x^2) + eps)) * weight (NULL: no weight), the mean summed in double. */
void kvc_rmsnorm(size_t n, const float *x, const float *weight, float eps, float *out);
/* cos and sin of each pair's angle at `position`, as rope says: table[i],
 * table[dims / 2 + i] for i < dims / 2. */
void kvc_rope_table(const kvc_rope_params *rope, size_t position, float *table);
/* The same at a multimodal position (t, y, x, e), each pair at the
 * coordinate rope->sections gives it (t without sections). */
void kvc_rope_table_at(const kvc_rope_params *rope, const uint32_t position[4], float *table);
/* Rotates the first rope_dims channels of each of `heads` heads of x
 * [heads x head_dim] by the table; the others stay. */
void kvc_rope_apply(size_t heads, size_t head_dim, size_t rope_dims, kvc_rope_pairing pairing, const float *table,
                    float *x);
/* gate = silu(gate) * up */
void kvc_swiglu(size_t n, float *gate, const float *up);
/* GELU as llama.cpp's CPU code computes it (GGML_GELU_FP16): x rounded to
 * f16 and looked up in a table of the tanh form's value at every f16,
 * rounded to f16 in turn; 0 at -10 and below, x at 10 and above.  Its
 * table holds KVC_GELU_TABLE floats, indexed by an f16's bits; a tanhf a
 * value would move near-tie top-1s away from llama.cpp's. */
#define KVC_GELU_TABLE ((size_t)65536)
/* Fills the table: gelu(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
void kvc_gelu_table_fill(float *table);
/* gate = gelu(gate) * up, through the table */
void kvc_geglu(const float *table, size_t n, float *gate, const float *up);
/* x = gelu(x), through the table */
void kvc_gelu(const float *table, size_t n, float *x);
/* x = relu(x)^2: ggml_relu, then ggml_sqr */
void kvc_relu_squared(size_t n, float *x);
/* out = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias, mean and
 * variance summed in double (ggml_norm's, then its mul and add) */
void kvc_layernorm(size_t n, const float *x, const float *weight, const float *bias, float eps, float *out);
/* x += y */
void kvc_add(size_t n, float *x, const float *y);
/* x = cap * tanh(x / cap) */
void kvc_softcap(size_t n, float *x, float cap);

/* ---- matmul.c: products with weights, on the thread pool ---- */
/* One product of a pass: y[t * y_stride + r] = dot(row r of w, x_t). */
typedef struct kvc_product {
    const kvc_tensor *w;
    float *y;
    size_t y_stride;
} kvc_product;
/* The products of `count` (<= 4) weights with the same T activation rows x
 * [T x cols] (every w has `cols` columns), in one job: the activations are
 * coded once per encoding into `codes`, then the rows of every weight go to
 * the pool in chunks of fixed size.  A profile charges the coding to
 * KVC_PROFILE_QUANTIZE and the products to op. */
void kvc_matmul(kvc_profile_op op, size_t count, const kvc_product *products, const float *x, size_t T,
                uint8_t *codes);
/* Bytes kvc_matmul's `codes` needs for T rows of n columns of `type`. */
size_t kvc_matmul_codes_bytes(const kvc_weight_type *type, size_t n, size_t T);

#endif /* KVC_MODEL_ROOM_H */

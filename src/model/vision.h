/*
 * vision.h -- the runner's image encoders: a projector file (GGUF,
 * general.architecture "clip", llama.cpp's mtmd) read beside a language
 * model, the image preprocessing mtmd does (image.c), and the encoder and
 * projector head that turn an image's pixels into rows of the language
 * model's embeddings (vision.c).  Like model.h it sits above the core and
 * the weight kernels; a projector type is a row of data, not a file.
 */
#ifndef KVC_VISION_ROOM_H
#define KVC_VISION_ROOM_H

#include "model.h"

/* clip.projector_type, as llama.cpp names them. */
typedef enum kvc_projector_kind {
    KVC_PROJECTOR_IDEFICS3, /* "idefics3": SigLIP, pixel shuffle, linear (SmolVLM, SmolVLM2) */
    KVC_PROJECTOR_LFM2,     /* "lfm2": SigLIP2 NaFlex, pixel unshuffle, LayerNorm, 2-layer MLP (LFM2-VL) */
    KVC_PROJECTOR_GEMMA3,   /* "gemma3": SigLIP at 896², 4x4 average pool, RMSNorm, projection */
    KVC_PROJECTOR_QWEN3VL,  /* "qwen3vl_merger": Qwen's ViT, 2D RoPE, 2x2 merge (Qwen3-VL, Qwen3.5) */
    KVC_PROJECTOR_GEMMA4V,  /* "gemma4v": Gemma 4's vision tower */
    KVC_PROJECTOR_COUNT
} kvc_projector_kind;

/* What preprocessing needs of a projector file (image.c reads it:
 * kvc_image_params_read), as llama.cpp's clip_hparams has it. */
typedef struct kvc_image_params {
    kvc_projector_kind kind;
    size_t image_size;   /* clip.vision.image_size */
    size_t patch_size;   /* clip.vision.patch_size */
    size_t merge;        /* patches merged per side into one token (n_merge; 1: none) */
    size_t min_pixels, max_pixels; /* dynamic resolution's bounds (0: fixed size) */
    size_t longest_edge; /* idefics3's preproc_image_size (0: none) */
    float mean[3], std[3]; /* clip.vision.image_mean / image_std */
} kvc_image_params;

/* How one image becomes the encoder's inputs: `tiles` tiles (a
 * thumbnail/overview last where the kind has one), laid out rows x cols
 * (0 x 0: one whole image), each tile's pixel size and the tokens the
 * encoder gives for it, and a grid of (grid_x x grid_y) tokens for M-RoPE
 * and markers. */
#define KVC_IMAGE_MAX_TILES 64
typedef struct kvc_image_tile {
    size_t width, height; /* the tile's pixels, as the encoder takes them */
    size_t tokens;        /* what the encoder gives for it */
    size_t grid_x, grid_y; /* those tokens as a grid (grid_x * grid_y == tokens) */
} kvc_image_tile;
typedef struct kvc_image_plan {
    size_t tiles;
    size_t rows, cols;  /* the tiles before the overview, row-major (0, 0: none) */
    int overview;       /* the last tile is the whole image, smaller (idefics3's global, lfm2's thumbnail) */
    size_t tokens;      /* all tiles' */
    kvc_image_tile tile[KVC_IMAGE_MAX_TILES];
} kvc_image_plan;

/* ---- the encoder (vision.c reads it, vision-encode.c runs it) ---- */

/* The activation of the encoder's FFN (clip.use_gelu, clip.use_silu;
 * neither: GELU's quick form) and of a projector's MLP.  ggml's CPU code
 * computes both GELUs through a table of f16: the input rounded to f16,
 * the table's f16 result read back (GELU: 0 at -10 and below, x at 10 and
 * above, the table between). */
typedef enum kvc_vision_act {
    KVC_VISION_GELU,       /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    KVC_VISION_GELU_QUICK, /* x / (1 + e^(-1.702 x)) */
    KVC_VISION_SILU        /* x / (1 + e^-x) */
} kvc_vision_act;

/* How the patches learn where they are: a learned table of side x side
 * rows added as it is (the tile's grid must be the table's), or resized to
 * the tile's grid first -- by ggml's bilinear resize with antialiasing, as
 * resize_position_embeddings does by default (SigLIP2 NaFlex: lfm2), or by
 * its plain bilinear resize with aligned corners (qwen3vl: what llama.cpp
 * b10257 computes, up and down) -- or two tables of `side` rows, [D, side,
 * 2]: the row of the patch's column added, then the row of its row
 * (gemma4v's lookups; a grid up to side a side). */
typedef enum kvc_vision_positions {
    KVC_VISION_POS_TABLE,
    KVC_VISION_POS_RESIZED,
    KVC_VISION_POS_RESIZED_CORNERS,
    KVC_VISION_POS_XY
} kvc_vision_positions;

/* How q and k turn by the patch's place, each head alike (ggml's RoPE with
 * the design's base; a patch at column x, row y of the grid):
 *  - HALVES_XY (gemma4v): the head's first half by x, its second by y, NeoX
 *    pairs (i, i + d/4) within each half;
 *  - QUARTERS_YX (qwen3vl's M-RoPE, GGML_ROPE_TYPE_VISION): pairs
 *    (i, i + d/2), the first d/4 of them by y, the next d/4 by x, each
 *    quarter's frequencies starting afresh. */
typedef enum kvc_vision_rope { KVC_VISION_ROPE_NONE, KVC_VISION_ROPE_HALVES_XY, KVC_VISION_ROPE_QUARTERS_YX } kvc_vision_rope;

/* The blocks' norms: LayerNorm (weight and bias) or RMSNorm (weight). */
typedef enum kvc_vision_norm { KVC_VISION_LAYERNORM_BLOCKS, KVC_VISION_RMSNORM_BLOCKS } kvc_vision_norm;

/* One step of a projector, after the encoder's blocks, on the tokens as a
 * grid (gx x gy, row-major). */
typedef enum kvc_vision_op {
    KVC_VISION_GROUP,     /* merge x merge consecutive tokens one token (the patches are in
                             block order already: qwen3vl's spatial merge) */
    KVC_VISION_SHUFFLE,   /* pixel shuffle: each merge x merge patches one token, their rows
                             concatenated (dy outer, dx inner); a grid not a multiple of merge
                             padded with zero patches (build_patch_merge_permute) */
    KVC_VISION_POOL,      /* the average of each merge x merge patches (ggml_pool_2d: summed
                             in f32, ky outer, then divided); the grid's remainder dropped */
    KVC_VISION_LAYERNORM, /* LayerNorm at eps, times the weight, plus the bias (each optional) */
    KVC_VISION_RMSNORM,   /* RMSNorm at the file's eps, times the weight */
    KVC_VISION_LINEAR,    /* a product with `tensor`.weight, plus its .bias where the file has it */
    KVC_VISION_LINEAR_T,  /* a product with `tensor` stored transposed ([out, in], ggml's ne0 the
                             output: gemma3's mm.input_projection) */
    KVC_VISION_ACT,       /* the design's projector activation */
    KVC_VISION_SCALE,     /* times sqrt(width) (gemma4v's pooler) */
    KVC_VISION_STANDARDIZE /* (x - `tensor`_bias) * `tensor`_scale where the file has both */
} kvc_vision_op;

#define KVC_VISION_MAX_STEPS 8
typedef struct kvc_vision_step {
    kvc_vision_op op;
    const char *tensor; /* its tensors' name before ".weight" / ".bias" (NULL: none) */
    float eps;          /* LAYERNORM's (0: the file's) */
} kvc_vision_step;

/* The products a block makes, each with Gemma 4's clamps where the design
 * reads them (Gemma4ClippableLinear: <weight>.input_min / input_max of its
 * input, output_min / output_max of its output, scalars; absent: none). */
enum { KVC_VISION_Q, KVC_VISION_K, KVC_VISION_V, KVC_VISION_O, KVC_VISION_GATE, KVC_VISION_UP, KVC_VISION_DOWN,
       KVC_VISION_PRODUCTS };
enum { KVC_VISION_INPUT_MIN, KVC_VISION_INPUT_MAX, KVC_VISION_OUTPUT_MIN, KVC_VISION_OUTPUT_MAX, KVC_VISION_BOUNDS };

/* A projector type: a row of vision.c's table. */
typedef struct kvc_vision_design {
    const char *name; /* clip.projector_type */
    kvc_projector_kind kind;
    kvc_vision_positions positions;
    const char *merge_key; /* the key of n_merge (NULL: none) */
    size_t merge;          /* n_merge when the file does not say */
    /* Older converters wrote the FFN's up and down under each other's
     * names: llama.cpp swaps them back when ffn_down takes the model's
     * width (clip.cpp's is_ffn_swapped). */
    int ffn_swappable;
    kvc_vision_act head_act; /* KVC_VISION_ACT's */
    kvc_vision_norm norm;    /* the blocks' */
    /* The pixels times pixel_scale plus pixel_bias before the patch kernel
     * (gemma4v: 2x - 1; scale 0: as given). */
    float pixel_scale, pixel_bias;
    kvc_vision_rope rope;
    float rope_theta;
    /* The patches reordered after the position table is added so that each
     * merge x merge block of the grid is consecutive (qwen3vl), rows of
     * blocks in row-major order, each block's patches row by row. */
    int block_order;
    /* Blocks with v.deepstack.<l>.* give features of their output too,
     * appended to each row the projector gives (qwen3vl's deepstack). */
    int deepstack;
    float attention_scale; /* of q.k (0: 1 / sqrt(head size)) */
    int v_norm;            /* V RMS-normalised per head, without a weight (gemma4v) */
    int clamps;            /* the products read their clamps (Gemma4ClippableLinear) */
    size_t steps;
    kvc_vision_step step[KVC_VISION_MAX_STEPS];
} kvc_vision_design;

/* An encoder block (build_vit): pre-norm attention and FFN, each product
 * [KVC_VISION_Q ...] with its bias and clamps; q and k norms (per head when
 * a head's size); the norms of what attention and the FFN add; the
 * block's output scale (absent ones: type NULL, skipped; no gate: GELU of
 * up, else GELU(gate) * up). */
typedef struct kvc_vision_block {
    kvc_tensor ln1_w, ln1_b, ln2_w, ln2_b;
    kvc_tensor w[KVC_VISION_PRODUCTS], b[KVC_VISION_PRODUCTS];
    kvc_tensor clamp[KVC_VISION_PRODUCTS][KVC_VISION_BOUNDS];
    kvc_tensor q_norm, k_norm, attn_post_norm, ffn_post_norm, out_scale;
    /* deepstack: the block's output, merge x merge patches a row, through
     * LayerNorm, fc1, GELU, fc2 (fc1 absent: none). */
    kvc_tensor ds_norm_w, ds_norm_b, ds_fc1, ds_fc1_b, ds_fc2, ds_fc2_b;
} kvc_vision_block;

/* What an encode works in, grown on demand (vision-encode.c). */
typedef struct kvc_vision_scratch {
    float *arena;       /* the activations */
    size_t arena_floats;
    uint8_t *codes;     /* the activations coded for the weights' kernels */
    size_t codes_bytes;
    float *transposed;  /* LINEAR_T's weight as f32 [out x in], made at the first encode */
} kvc_vision_scratch;

struct kvc_vision {
    const kvc_vision_design *design;
    kvc_image_params image; /* preprocessing's parameters (image.c fills mean and std) */
    size_t dim, heads, head_dim, ffn_dim, layers;
    size_t patch_size, merge;
    size_t side;        /* the position table's grid: side x side patches (POS_XY: up to side a side) */
    size_t out_dim;     /* the width of each token the projector gives (with its deepstack features) */
    float eps;          /* clip.vision.attention.layer_norm_epsilon */
    kvc_vision_act act; /* the blocks' FFN */
    /* patch_w2: a second patch kernel, its product added (qwen3vl's conv3d
     * as two conv2d; absent: none) */
    kvc_tensor patch_w, patch_w2, patch_b, position, pre_ln_w, pre_ln_b, post_ln_w, post_ln_b;
    size_t deepstack_layers, deepstack_width; /* the blocks with deepstack, and each one's width */
    kvc_vision_block *blocks;
    kvc_tensor step_w[KVC_VISION_MAX_STEPS], step_b[KVC_VISION_MAX_STEPS];
    kvc_tensor step_clamp[KVC_VISION_MAX_STEPS][KVC_VISION_BOUNDS];
    size_t step_width[KVC_VISION_MAX_STEPS + 1]; /* a token's width before step i, and after the last */
    uint8_t *weights;
    size_t weights_bytes;
    kvc_vision_scratch scratch;
};

/* The tokens the projector leaves of a grid of gx x gy patches, gx and gy
 * set to their grid; 0 when the encoder cannot take the grid (vision.c). */
size_t kvc_vision_grid_tokens(const kvc_vision *vision, size_t *gx, size_t *gy);
/* Frees the scratch (vision-encode.c). */
void kvc_vision_scratch_free(kvc_vision_scratch *scratch);

#endif /* KVC_VISION_ROOM_H */

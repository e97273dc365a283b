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

/* How llama.cpp's mtmd resizes an image (its img_tool::resize): the filter
 * (its bilinear, which maps corner to corner, or its bicubic, a = -0.5 on
 * a 4x4 neighbourhood, clamped at the edges) and the fit: stretched to the
 * target, or letterboxed -- scaled by the smaller of the two ratios (each
 * side the ceiling of side x scale, at most the target's), centred (offset
 * (target - side) / 2, rounded down) on the pad colour.  An image already of
 * the target's size is copied as it is. */
typedef enum kvc_image_filter { KVC_IMAGE_BILINEAR, KVC_IMAGE_BICUBIC } kvc_image_filter;
typedef enum kvc_image_fit { KVC_IMAGE_STRETCH, KVC_IMAGE_LETTERBOX } kvc_image_fit;
typedef struct kvc_image_resize {
    kvc_image_filter filter;
    kvc_image_fit fit;
    uint8_t pad[3]; /* RGB */
} kvc_image_resize;

/* How an image becomes tiles (mtmd's preprocessor of the projector type):
 *  FIXED: resized to image_size x image_size (gemma3);
 *  DYNAMIC: resized to a multiple of patch_size x merge on each side, within
 *    min_pixels..max_pixels, keeping its aspect ("smart resize": qwen3vl,
 *    gemma4v);
 *  LONGEST_EDGE: fitted into longest_edge, each side rounded up to a
 *    multiple of image_size, cut into image_size tiles, then the whole
 *    image at image_size x image_size as the last tile (idefics3; no
 *    longest_edge: that last tile alone);
 *  LFM2: smart-resized whole (the thumbnail); an image more than
 *    2 x tile_size on a side is first cut into a grid of tile_size tiles
 *    (min_tiles to max_tiles of them, the grid's aspect nearest the image's)
 *    and the thumbnail goes last. */
typedef enum kvc_image_layout {
    KVC_IMAGE_FIXED,
    KVC_IMAGE_DYNAMIC,
    KVC_IMAGE_LONGEST_EDGE,
    KVC_IMAGE_LFM2
} kvc_image_layout;

/* How many tokens the encoder gives for a tile of w x h pixels
 * (llama.cpp's clip_n_output_tokens), p the patch size, m the merge:
 *  POOLED: (w / p) * (h / p) / (m * m) (gemma3, gemma4v, idefics3), as a
 *    grid of w / (p m) x h / (p m);
 *  MERGED_CEIL: ceil(w / (p m)) * ceil(h / (p m)) (lfm2);
 *  PAIRS: (w / 2p) * (h / 2p) (qwen3vl: two patches a side, whatever m). */
typedef enum kvc_image_token_rule {
    KVC_IMAGE_TOKENS_POOLED,
    KVC_IMAGE_TOKENS_MERGED_CEIL,
    KVC_IMAGE_TOKENS_PAIRS
} kvc_image_token_rule;

/* What preprocessing needs of a projector file (image.c reads it:
 * kvc_image_params_read), as llama.cpp's clip_hparams has it after its
 * load_hparams. */
typedef struct kvc_image_params {
    kvc_projector_kind kind;
    kvc_image_layout layout;
    kvc_image_token_rule token_rule;
    size_t image_size;   /* clip.vision.image_size */
    size_t patch_size;   /* clip.vision.patch_size */
    size_t merge;        /* patches merged per side into one token (n_merge; 1: none) */
    size_t min_pixels, max_pixels; /* dynamic resolution's bounds (0: fixed size) */
    size_t longest_edge; /* idefics3's clip.vision.preproc_image_size (0: none) */
    size_t tile_size, min_tiles, max_tiles; /* lfm2's tiles (0: none) */
    kvc_image_resize whole; /* the image resized whole: fixed, dynamic, overview, thumbnail */
    kvc_image_resize tiles; /* the image resized before it is cut into tiles */
    float mean[3], std[3]; /* clip.vision.image_mean / image_std */
} kvc_image_params;

/* The limits of an image: at most KVC_IMAGE_MAX_SIDE pixels a side and
 * KVC_IMAGE_MAX_PIXELS in all (llama.cpp computes with 32-bit ints: past
 * that its products overflow, and no wasm memory holds such an image). */
#define KVC_IMAGE_MAX_SIDE ((size_t)100000)
#define KVC_IMAGE_MAX_PIXELS ((size_t)1 << 30)
/* A tile's pixels at most: llama.cpp's smart resize of a 1 x 100000 image
 * for gemma4v gives 48 x 253968 (12 million); 3 floats a pixel must stay
 * addressable in wasm. */
#define KVC_IMAGE_MAX_TILE_PIXELS ((size_t)1 << 26)

/* How one image becomes the encoder's inputs: `tiles` tiles in the order
 * mtmd puts them in the prompt -- rows x cols tiles row-major, then the
 * overview when `overview` (idefics3's global image, lfm2's thumbnail: the
 * marker that goes before it is the lead's to emit) -- each tile's pixel
 * size, the tokens the encoder gives for it as a grid (grid_x x grid_y ==
 * tokens; M-RoPE's, qwen3vl), and where its pixels come from: the whole
 * image resized (`resize`) to resized_width x resized_height, the tile the
 * width x height pixels at (x, y) of that. */
#define KVC_IMAGE_MAX_TILES 64
typedef struct kvc_image_tile {
    size_t width, height;  /* the tile's pixels, as the encoder takes them */
    size_t tokens;         /* what the encoder gives for it */
    size_t grid_x, grid_y; /* those tokens as a grid (grid_x * grid_y == tokens) */
    size_t resized_width, resized_height; /* the whole image resized to this ... */
    size_t x, y;                          /* ... and the tile cut from here */
    kvc_image_resize resize;
} kvc_image_tile;
typedef struct kvc_image_plan {
    size_t image_width, image_height; /* the image planned for */
    size_t tiles;
    size_t rows, cols;  /* the tiles before the overview, row-major (0, 0: none) */
    int overview;       /* the last tile is the overview (idefics3's global image, lfm2's thumbnail) */
    size_t tokens;      /* all tiles' */
    kvc_image_tile tile[KVC_IMAGE_MAX_TILES];
} kvc_image_plan;

/* kvc_projector_kind_of():
 * The kind whose clip.projector_type is these `len` bytes; KVC_PROJECTOR_COUNT
 * for a name that is none of them (or NULL). */
kvc_projector_kind kvc_projector_kind_of(const char *name, size_t len);

/* kvc_projector_name():
 * @return : clip.projector_type of `kind` ("idefics3"), NULL out of range. */
const char *kvc_projector_name(kvc_projector_kind kind);

/* kvc_image_params_read():
 * Reads what preprocessing needs from a projector file (general.architecture
 * "clip"): clip.projector_type (or clip.vision.projector_type), the image and
 * patch sizes, the merge (clip.vision.projector.scale_factor;
 * clip.vision.spatial_merge_size for qwen3vl), idefics3's longest edge,
 * image_mean and image_std, and what llama.cpp's load_hparams sets for the
 * type: its filters and fits, its pixel budgets from its token limits, lfm2's
 * tiles.  Each value is range-checked: sizes 1 to 4096 (a patch times a
 * merge at most 1024), a fixed or tile size a whole number of merged
 * patches, mean finite, std finite and nonzero.  On a refusal `message`
 * (may be NULL; message_len bytes, NUL-terminated, cut to fit) names the key
 * or the type, and *params is unchanged.
 * @return : KVC_OK, KVC_E_NULL_POINTER (gguf or params), KVC_E_ARCH (not a
 *           clip file, or a projector type not among kvc_projector_kind) or
 *           KVC_E_MODEL_FILE (a key missing or out of range). */
kvc_status kvc_image_params_read(const kvc_gguf *gguf, kvc_image_params *params, char *message,
                                 size_t message_len);

/* kvc_image_plan_of():
 * How an image of width x height pixels becomes the encoder's tiles and the
 * tokens each gives, exactly as mtmd decides it (the same sizes, the same
 * float arithmetic).  *plan is written only on success.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_LENGTH (a side 0 or above
 *           KVC_IMAGE_MAX_SIDE, more than KVC_IMAGE_MAX_PIXELS, more than
 *           KVC_IMAGE_MAX_TILES tiles or a tile of more than
 *           KVC_IMAGE_MAX_TILE_PIXELS) or KVC_E_MODEL_FILE (params no
 *           kvc_image_params_read gives, or a tile of no tokens). */
kvc_status kvc_image_plan_of(const kvc_image_params *params, size_t width, size_t height,
                             kvc_image_plan *plan);

/* kvc_image_tile_pixels():
 * Tile `tile` of `plan` as the encoder takes it: tile.height x tile.width
 * pixels, RGB interleaved, each channel (x / 255 - mean) / std in f32 --
 * from the image's RGBA bytes (width x height x 4, row-major; alpha is
 * dropped, as stb_image drops it when llama.cpp asks for 3 channels),
 * resized with llama.cpp's filter and fit bit for bit, then cut.  `out`
 * receives tile.width * tile.height * 3 floats.  Scratch: none; each output
 * pixel is computed from the source where it lands.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_LENGTH (tile not below
 *           plan->tiles, width x height not the plan's image, or a tile
 *           kvc_image_plan_of could not have made: outside its resized
 *           image, an unknown filter or fit) or KVC_E_MODEL_FILE (a mean or
 *           std not finite, a std of 0); nothing is written on error. */
kvc_status kvc_image_tile_pixels(const kvc_image_params *params, const kvc_image_plan *plan, size_t tile,
                                 const uint8_t *rgba, size_t width, size_t height, float *out);

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
 * block's output scale, one value or one per channel (absent ones: type
 * NULL, skipped; no gate: GELU of up, else GELU(gate) * up). */
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
/* The floats of the GELU tables: GELU's and quick GELU's value for each of the 65536 f16. */
#define KVC_VISION_GELU_TABLES (2 * KVC_GELU_TABLE)

typedef struct kvc_vision_scratch {
    float *arena;       /* the activations */
    size_t arena_floats;
    uint8_t *codes;     /* the activations coded for the weights' kernels */
    size_t codes_bytes;
    float *transposed;  /* LINEAR_T's weight as f32 [out x in], made at the first encode */
    uint16_t *kernels;  /* the patch kernels in f16, one after the other, made at the first encode */
    float *gelu;        /* GELU and quick GELU of every f16 (by its bits), 2 x 65536, made at the first encode */
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

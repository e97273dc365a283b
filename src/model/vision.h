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

#endif /* KVC_VISION_ROOM_H */

/*
 * image.c -- what llama.cpp's mtmd does to an image before its encoder
 * sees it, up to the pixels: the preprocessing parameters of a projector
 * file (its load_hparams: a row of the table below per projector type, the
 * file's keys over the row's defaults) and the plan of an image -- the
 * sizes it is resized to, the tiles cut from it, in the order mtmd puts
 * them in the prompt, and the tokens the encoder gives for each.  The sizes
 * are mtmd's to the pixel: its float arithmetic is redone in float, step
 * for step (llama.cpp build b10257's mtmd-image.cpp, clip.cpp).  The pixels
 * themselves are image-resize.c's.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vision.h"

/* One projector type: what its load_hparams sets and which preprocessor
 * mtmd gives it. */
typedef struct projector_row {
    const char *name; /* clip.projector_type */
    kvc_image_layout layout;
    kvc_image_token_rule token_rule;
    const char *merge_key; /* the key that overrides `merge` */
    size_t merge;
    size_t min_tokens, max_tokens; /* set_limit_image_tokens (0: none) */
    size_t tile_size, min_tiles, max_tiles;
    kvc_image_resize whole, tiles;
} projector_row;

#define SCALE_FACTOR_KEY "clip.vision.projector.scale_factor"
#define STRETCH_BILINEAR {KVC_IMAGE_BILINEAR, KVC_IMAGE_STRETCH, {0, 0, 0}}
#define LETTERBOX_BILINEAR {KVC_IMAGE_BILINEAR, KVC_IMAGE_LETTERBOX, {0, 0, 0}}
#define LETTERBOX_BICUBIC {KVC_IMAGE_BICUBIC, KVC_IMAGE_LETTERBOX, {0, 0, 0}}

/* In kvc_projector_kind's order.  The fits are clip_hparams' defaults where
 * load_hparams sets none: letterboxed on black for a whole image and for the
 * image before tiling, stretched for an overview; lfm2's thumbnail is its
 * overview.  lfm2's tiles are mtmd's constants (LFM2.5-VL's processor). */
static const projector_row PROJECTORS[KVC_PROJECTOR_COUNT] = {
    [KVC_PROJECTOR_IDEFICS3] = {.name = "idefics3", .layout = KVC_IMAGE_LONGEST_EDGE,
                                .token_rule = KVC_IMAGE_TOKENS_POOLED, .merge_key = SCALE_FACTOR_KEY, .merge = 1,
                                .whole = STRETCH_BILINEAR, .tiles = LETTERBOX_BICUBIC},
    [KVC_PROJECTOR_LFM2] = {.name = "lfm2", .layout = KVC_IMAGE_LFM2, .token_rule = KVC_IMAGE_TOKENS_MERGED_CEIL,
                            .merge_key = SCALE_FACTOR_KEY, .merge = 1, .min_tokens = 64, .max_tokens = 256,
                            .tile_size = 512, .min_tiles = 2, .max_tiles = 10,
                            .whole = STRETCH_BILINEAR, .tiles = LETTERBOX_BILINEAR},
    [KVC_PROJECTOR_GEMMA3] = {.name = "gemma3", .layout = KVC_IMAGE_FIXED, .token_rule = KVC_IMAGE_TOKENS_POOLED,
                              .merge_key = SCALE_FACTOR_KEY, .merge = 4,
                              .whole = LETTERBOX_BILINEAR, .tiles = LETTERBOX_BILINEAR},
    [KVC_PROJECTOR_QWEN3VL] = {.name = "qwen3vl_merger", .layout = KVC_IMAGE_DYNAMIC,
                               .token_rule = KVC_IMAGE_TOKENS_PAIRS, .merge_key = "clip.vision.spatial_merge_size",
                               .merge = 2, .min_tokens = 8, .max_tokens = 4096,
                               .whole = LETTERBOX_BILINEAR, .tiles = LETTERBOX_BILINEAR},
    [KVC_PROJECTOR_GEMMA4V] = {.name = "gemma4v", .layout = KVC_IMAGE_DYNAMIC, .token_rule = KVC_IMAGE_TOKENS_POOLED,
                               .merge_key = SCALE_FACTOR_KEY, .merge = 3, .min_tokens = 40, .max_tokens = 280,
                               .whole = LETTERBOX_BILINEAR, .tiles = LETTERBOX_BILINEAR},
};

kvc_projector_kind kvc_projector_kind_of(const char *name, size_t len) {
    for (int k = 0; name && k < KVC_PROJECTOR_COUNT; k++) {
        if (strlen(PROJECTORS[k].name) == len && memcmp(PROJECTORS[k].name, name, len) == 0) {
            return (kvc_projector_kind)k;
        }
    }
    return KVC_PROJECTOR_COUNT;
}

const char *kvc_projector_name(kvc_projector_kind kind) {
    return (unsigned)kind < KVC_PROJECTOR_COUNT ? PROJECTORS[kind].name : NULL;
}

/* ---- reading a projector file ---- */

typedef struct clip_source {
    const kvc_gguf *gguf;
    kvc_says says;
} clip_source;

static size_t find_key(const clip_source *src, const char *key) {
    return kvc_gguf_find(src->gguf, key, strlen(key));
}

/* The largest image, patch or tile size a file may give: llama.cpp's sizes
 * are 32-bit ints, and no encoder takes more. */
#define IMAGE_MAX_PARAM 4096

/* A whole number from 1 to `max` at `key`, or `fallback` when absent (0:
 * required). */
static kvc_status size_key(clip_source *src, const char *key, size_t fallback, size_t max, size_t *out) {
    const size_t i = find_key(src, key);
    if (i == KVC_GGUF_NONE) {
        if (fallback) {
            *out = fallback;
            return KVC_OK;
        }
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s is missing", key);
    }
    uint64_t value;
    if (kvc_gguf_uint64(src->gguf, i, 0, &value) != KVC_OK || value < 1 || value > max) {
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s is not a whole number from 1 to %zu", key, max);
    }
    *out = (size_t)value;
    return KVC_OK;
}

/* Three floats at `key` (an array of at least three numbers, as llama.cpp
 * takes the first three); std's must be nonzero. */
static kvc_status rgb_key(clip_source *src, const char *key, int nonzero, float out[3]) {
    const size_t i = find_key(src, key);
    size_t count = 0;
    if (i == KVC_GGUF_NONE || kvc_gguf_value(src->gguf, i, NULL, NULL, &count) != KVC_OK || count < 3) {
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s is missing or has fewer than 3 numbers", key);
    }
    for (size_t c = 0; c < 3; c++) {
        double value;
        if (kvc_gguf_number(src->gguf, i, c, &value) != KVC_OK || !(fabs(value) <= 1e6) ||
            (nonzero && !(fabs(value) >= 1e-6))) {
            return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s[%zu] is not a usable number", key, c);
        }
        out[c] = (float)value;
    }
    return KVC_OK;
}

static int string_is(const clip_source *src, size_t i, const char *text, const char **got, size_t *len) {
    return kvc_gguf_string(src->gguf, i, 0, got, len) == KVC_OK && *len == strlen(text) &&
           memcmp(*got, text, *len) == 0;
}

static kvc_status read_kind(clip_source *src, kvc_projector_kind *kind) {
    const char *got = "";
    size_t len = 0;
    size_t i = find_key(src, "general.architecture");
    if (i == KVC_GGUF_NONE || !string_is(src, i, "clip", &got, &len)) {
        return kvc_refuse(&src->says, KVC_E_ARCH, "not a projector file: general.architecture is \"%.*s\", not \"clip\"",
                      (int)(len < 64 ? len : 64), got);
    }
    i = find_key(src, "clip.projector_type");
    if (i == KVC_GGUF_NONE) {
        i = find_key(src, "clip.vision.projector_type");
    }
    if (i == KVC_GGUF_NONE || kvc_gguf_string(src->gguf, i, 0, &got, &len) != KVC_OK) {
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata clip.projector_type is missing");
    }
    *kind = kvc_projector_kind_of(got, len);
    if (*kind == KVC_PROJECTOR_COUNT) {
        return kvc_refuse(&src->says, KVC_E_ARCH,
                      "projector type \"%.*s\" is not one this runner reads (idefics3, lfm2, gemma3, "
                      "qwen3vl_merger, gemma4v)",
                      (int)(len < 64 ? len : 64), got);
    }
    return KVC_OK;
}

kvc_status kvc_image_params_read(const kvc_gguf *gguf, kvc_image_params *params, char *message,
                                 size_t message_len) {
    clip_source src = {gguf, {message, message_len}};
    if (!gguf || !params) {
        return kvc_refuse(&src.says, KVC_E_NULL_POINTER, "no file or no parameters");
    }
    kvc_image_params p;
    memset(&p, 0, sizeof p);
    kvc_status status = read_kind(&src, &p.kind);
    if (status != KVC_OK) {
        return status;
    }
    const projector_row *row = &PROJECTORS[p.kind];
    p.layout = row->layout;
    p.token_rule = row->token_rule;
    p.whole = row->whole;
    p.tiles = row->tiles;
    p.tile_size = row->tile_size;
    p.min_tiles = row->min_tiles;
    p.max_tiles = row->max_tiles;
    if ((status = size_key(&src, "clip.vision.image_size", 0, IMAGE_MAX_PARAM, &p.image_size)) != KVC_OK ||
        (status = size_key(&src, "clip.vision.patch_size", 0, IMAGE_MAX_PARAM, &p.patch_size)) != KVC_OK ||
        (status = size_key(&src, row->merge_key, row->merge, 64, &p.merge)) != KVC_OK ||
        (status = rgb_key(&src, "clip.vision.image_mean", 0, p.mean)) != KVC_OK ||
        (status = rgb_key(&src, "clip.vision.image_std", 1, p.std)) != KVC_OK) {
        return status;
    }
    const size_t merged_patch = p.patch_size * p.merge;
    if (merged_patch > 1024) {
        return kvc_refuse(&src.says, KVC_E_MODEL_FILE, "patch size %zu times merge %zu is above 1024", p.patch_size,
                      p.merge);
    }
    if (p.token_rule == KVC_IMAGE_TOKENS_PAIRS && p.merge != 2) {
        return kvc_refuse(&src.says, KVC_E_MODEL_FILE, "%s merges 2 patches a side, the file says %zu", row->name,
                      p.merge);
    }
    /* A tile of image_size pixels must pool into a whole grid of tokens
     * (its patches: the floor, as the encoder's convolution takes them;
     * SmolVLM2's 384 / 14 is 27, three times 9). */
    if ((p.layout == KVC_IMAGE_FIXED || p.layout == KVC_IMAGE_LONGEST_EDGE) &&
        (p.image_size < p.patch_size || (p.image_size / p.patch_size) % p.merge)) {
        return kvc_refuse(&src.says, KVC_E_MODEL_FILE, "image size %zu is not a whole number of patches %zu x merge %zu",
                      p.image_size, p.patch_size, p.merge);
    }
    if (p.layout == KVC_IMAGE_LONGEST_EDGE && find_key(&src, "clip.vision.preproc_image_size") != KVC_GGUF_NONE) {
        /* At most 6 tiles a side: 7 x 7 + 1 tiles when float rounding adds
         * one, within KVC_IMAGE_MAX_TILES. */
        status = size_key(&src, "clip.vision.preproc_image_size", 0, 6 * p.image_size, &p.longest_edge);
        if (status != KVC_OK) {
            return status;
        }
    }
    if (row->max_tokens) {
        const uint64_t area = (uint64_t)merged_patch * merged_patch;
        if (row->max_tokens * area > INT32_MAX) {
            return kvc_refuse(&src.says, KVC_E_MODEL_FILE, "%zu tokens of %zu pixels a side pass 2^31 pixels",
                          row->max_tokens, merged_patch);
        }
        p.min_pixels = (size_t)(row->min_tokens * area);
        p.max_pixels = (size_t)(row->max_tokens * area);
    }
    *params = p;
    if (message && message_len) {
        message[0] = 0;
    }
    return KVC_OK;
}

/* ---- mtmd's sizes, in its float arithmetic ---- */

static int round_by(float x, int f) { return (int)roundf(x / (float)f) * f; }
static int ceil_by(float x, int f) { return (int)ceilf(x / (float)f) * f; }
static int floor_by(float x, int f) { return (int)floorf(x / (float)f) * f; }
static int max_int(int a, int b) { return a > b ? a : b; }

/* Transformers' "smart resize" as mtmd's calc_size_preserved_ratio has it:
 * each side rounded to a multiple of `align`, then scaled down (or up) as a
 * whole when the area passes max_pixels (or falls short of min_pixels). */
static void smart_resize(int w, int h, int align, int min_pixels, int max_pixels, int *out_w, int *out_h) {
    int h_bar = max_int(align, round_by((float)h, align));
    int w_bar = max_int(align, round_by((float)w, align));
    if ((long long)h_bar * w_bar > max_pixels) {
        const float beta = sqrtf((float)(h * w) / (float)max_pixels);
        h_bar = max_int(align, floor_by((float)h / beta, align));
        w_bar = max_int(align, floor_by((float)w / beta, align));
    } else if ((long long)h_bar * w_bar < min_pixels) {
        const float beta = sqrtf((float)min_pixels / (float)(h * w));
        h_bar = ceil_by((float)h * beta, align);
        w_bar = ceil_by((float)w * beta, align);
    }
    *out_w = w_bar;
    *out_h = h_bar;
}

/* idefics3's refined size: the image fitted into longest_edge, each side
 * rounded up to a multiple of `align` (mtmd's other calc_size_preserved_ratio). */
static void fit_longest_edge(int w, int h, int align, int longest_edge, int *out_w, int *out_h) {
    const float scale_w = (float)longest_edge / (float)w, scale_h = (float)longest_edge / (float)h;
    const float scale = scale_h < scale_w ? scale_h : scale_w;
    *out_w = ceil_by((float)w * scale, align);
    *out_h = ceil_by((float)h * scale, align);
}

/* lfm2's grid (mtmd_image_preprocessor_lfm2::get_grid_layout): of the grids
 * of min_tiles to max_tiles tiles, taken by area, the one whose aspect is
 * nearest the image's; on an exact tie, the later one when the image covers
 * more than half of it.  mtmd orders grids of one area by std::sort, not
 * stably; for its 2 to 10 tiles that order never decides: two grids of one
 * area never tie as the nearest (a grid of another area always lies nearer
 * their midpoint). */
static void lfm2_grid(const kvc_image_params *p, int w, int h, int *cols, int *rows) {
    const float aspect = (float)w / (float)h;
    const float area = (float)(w * h);
    const int tile = (int)p->tile_size;
    float best_diff = FLT_MAX;
    *cols = *rows = 1;
    for (int n = (int)p->min_tiles; n <= (int)p->max_tiles; n++) {
        for (int gw = 1; gw <= n; gw++) {
            if (n % gw) {
                continue;
            }
            const int gh = n / gw;
            const float diff = fabsf(aspect - (float)gw / (float)gh);
            if (diff < best_diff) {
                best_diff = diff;
                *cols = gw;
                *rows = gh;
            } else if (diff == best_diff && area > 0.5f * (float)(tile * tile * gw * gh)) {
                *cols = gw;
                *rows = gh;
            }
        }
    }
}

/* Tokens of a tile of w x h pixels (clip_n_output_tokens), as a grid. */
static void tile_tokens(const kvc_image_params *p, kvc_image_tile *t) {
    const size_t mp = p->patch_size * p->merge;
    switch (p->token_rule) {
    case KVC_IMAGE_TOKENS_POOLED:
        t->tokens = (t->width / p->patch_size) * (t->height / p->patch_size) / (p->merge * p->merge);
        t->grid_x = t->width / p->patch_size / p->merge;
        t->grid_y = t->height / p->patch_size / p->merge;
        break;
    case KVC_IMAGE_TOKENS_MERGED_CEIL:
        t->grid_x = (t->width + mp - 1) / mp;
        t->grid_y = (t->height + mp - 1) / mp;
        t->tokens = t->grid_x * t->grid_y;
        break;
    case KVC_IMAGE_TOKENS_PAIRS:
        t->grid_x = t->width / (2 * p->patch_size);
        t->grid_y = t->height / (2 * p->patch_size);
        t->tokens = t->grid_x * t->grid_y;
        break;
    }
}

/* Appends a tile: `resize` of the whole image to rw x rh, the w x h at (x, y). */
static kvc_status add_tile(const kvc_image_params *p, kvc_image_plan *plan, const kvc_image_resize *resize,
                           int rw, int rh, int x, int y, int w, int h) {
    if (plan->tiles == KVC_IMAGE_MAX_TILES) {
        return KVC_E_LENGTH;
    }
    kvc_image_tile *t = &plan->tile[plan->tiles++];
    t->resize = *resize;
    t->resized_width = (size_t)rw;
    t->resized_height = (size_t)rh;
    t->x = (size_t)x;
    t->y = (size_t)y;
    t->width = (size_t)w;
    t->height = (size_t)h;
    tile_tokens(p, t);
    plan->tokens += t->tokens;
    return KVC_OK;
}

/* Tiles of `size` pixels cut row-major from the image resized (p->tiles)
 * to rw x rh, a grid of cols x rows; the last ones in a row or column
 * narrower where rw or rh is not a multiple (mtmd's slices). */
static kvc_status add_grid(const kvc_image_params *p, kvc_image_plan *plan, int rw, int rh, int size, int cols,
                           int rows) {
    if ((size_t)cols * (size_t)rows >= KVC_IMAGE_MAX_TILES) {
        return KVC_E_LENGTH;
    }
    plan->cols = (size_t)cols;
    plan->rows = (size_t)rows;
    for (int y = 0; y < rh; y += size) {
        for (int x = 0; x < rw; x += size) {
            const int w = rw - x < size ? rw - x : size, h = rh - y < size ? rh - y : size;
            kvc_status status = add_tile(p, plan, &p->tiles, rw, rh, x, y, w, h);
            if (status != KVC_OK) {
                return status;
            }
        }
    }
    return plan->tiles == plan->cols * plan->rows ? KVC_OK : KVC_E_LENGTH;
}

static int params_usable(const kvc_image_params *p) {
    return (unsigned)p->kind < KVC_PROJECTOR_COUNT && p->patch_size >= 1 && p->merge >= 1 &&
           p->patch_size * p->merge <= 1024 && p->image_size >= 1 && p->image_size <= IMAGE_MAX_PARAM &&
           p->longest_edge <= 6 * p->image_size && p->max_pixels <= INT32_MAX &&
           p->min_pixels <= p->max_pixels && p->tile_size <= IMAGE_MAX_PARAM && p->max_tiles < KVC_IMAGE_MAX_TILES &&
           (unsigned)p->token_rule <= KVC_IMAGE_TOKENS_PAIRS;
}

kvc_status kvc_image_plan_of(const kvc_image_params *params, size_t width, size_t height, kvc_image_plan *plan) {
    if (!params || !plan) {
        return KVC_E_NULL_POINTER;
    }
    if (width == 0 || height == 0 || width > KVC_IMAGE_MAX_SIDE || height > KVC_IMAGE_MAX_SIDE ||
        width > KVC_IMAGE_MAX_PIXELS / height) {
        return KVC_E_LENGTH;
    }
    if (!params_usable(params)) {
        return KVC_E_MODEL_FILE;
    }
    const kvc_image_params *p = params;
    const int w = (int)width, h = (int)height, size = (int)p->image_size;
    const int align = (int)(p->patch_size * p->merge);
    kvc_image_plan out;
    memset(&out, 0, sizeof out);
    out.image_width = width;
    out.image_height = height;
    kvc_status status = KVC_OK;
    int rw, rh;
    switch (p->layout) {
    case KVC_IMAGE_FIXED:
        status = add_tile(p, &out, &p->whole, size, size, 0, 0, size, size);
        break;
    case KVC_IMAGE_DYNAMIC:
        if (p->min_pixels == 0) {
            return KVC_E_MODEL_FILE;
        }
        smart_resize(w, h, align, (int)p->min_pixels, (int)p->max_pixels, &rw, &rh);
        status = add_tile(p, &out, &p->whole, rw, rh, 0, 0, rw, rh);
        break;
    case KVC_IMAGE_LONGEST_EDGE:
        /* No longest edge: mtmd's refined size is 0 x 0, no tiles. */
        if (p->longest_edge) {
            fit_longest_edge(w, h, size, (int)p->longest_edge, &rw, &rh);
            status = add_grid(p, &out, rw, rh, size, (int)ceilf((float)rw / (float)size),
                              (int)ceilf((float)rh / (float)size));
        }
        if (status == KVC_OK) {
            out.overview = 1;
            status = add_tile(p, &out, &p->whole, size, size, 0, 0, size, size);
        }
        break;
    case KVC_IMAGE_LFM2: {
        if (p->min_pixels == 0 || p->tile_size == 0 || p->min_tiles < 1 || p->min_tiles > p->max_tiles) {
            return KVC_E_MODEL_FILE;
        }
        const int tile = (int)p->tile_size;
        /* Tiled past twice the tile size on a side (mtmd's
         * max_pixels_tolerance, compared in float). */
        if ((float)w > (float)tile * 2.0f || (float)h > (float)tile * 2.0f) {
            int cols, rows;
            lfm2_grid(p, w, h, &cols, &rows);
            status = add_grid(p, &out, tile * cols, tile * rows, tile, cols, rows);
        }
        /* The thumbnail, after the tiles; alone, it is still emitted as
         * the thumbnail (b10257 sets the overview for every image). */
        if (status == KVC_OK) {
            smart_resize(w, h, align, (int)p->min_pixels, (int)p->max_pixels, &rw, &rh);
            out.overview = 1;
            status = add_tile(p, &out, &p->whole, rw, rh, 0, 0, rw, rh);
        }
        break;
    }
    default:
        return KVC_E_MODEL_FILE;
    }
    if (status != KVC_OK) {
        return status;
    }
    for (size_t t = 0; t < out.tiles; t++) {
        const kvc_image_tile *tile = &out.tile[t];
        if (tile->tokens == 0) {
            return KVC_E_MODEL_FILE;
        }
        if (tile->width > KVC_IMAGE_MAX_TILE_PIXELS / tile->height) {
            return KVC_E_LENGTH;
        }
    }
    *plan = out;
    return KVC_OK;
}

/*
 * test_image.c -- image preprocessing as llama.cpp's mtmd does it
 * (src/model/image.c, image-resize.c): a projector file's parameters, the
 * plan of an image (tiles, sizes, tokens) and a tile's pixels.
 *
 * The expected values come from two places, neither of them the code under
 * test: arithmetic done by hand from llama.cpp's formulas (the comments
 * show it), and a plain reference written here from llama.cpp's code
 * (whole-image resizes into a buffer, then a crop; the sizes from its
 * functions as it writes them).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "gguf_builder.h"
#include "model/vision.h"

/* ---- projector files ---- */

/* What the file being built says; NULL / 0: the key is left out. */
static struct {
    const char *arch, *type;
    uint32_t image_size, patch_size, merge, longest_edge;
    const char *merge_key;
    float mean[3], std[3];
    int mean_count;
} clip;

static size_t clip_metadata(gb_file *b) {
    size_t n = 0;
    if (clip.arch) {
        gb_key(b, "general.architecture", KVC_GGUF_STRING);
        gb_string(b, clip.arch);
        n++;
    }
    if (clip.type) {
        gb_key(b, "clip.projector_type", KVC_GGUF_STRING);
        gb_string(b, clip.type);
        n++;
    }
    const struct {
        const char *key;
        uint32_t value;
    } sizes[] = {{"clip.vision.image_size", clip.image_size},
                 {"clip.vision.patch_size", clip.patch_size},
                 {clip.merge_key, clip.merge},
                 {"clip.vision.preproc_image_size", clip.longest_edge}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i].key && sizes[i].value) {
            gb_key(b, sizes[i].key, KVC_GGUF_UINT32);
            gb_u32(b, sizes[i].value);
            n++;
        }
    }
    if (clip.mean_count) {
        gb_key(b, "clip.vision.image_mean", KVC_GGUF_ARRAY);
        gb_array(b, KVC_GGUF_FLOAT32, (uint64_t)clip.mean_count);
        for (int c = 0; c < clip.mean_count; c++) {
            gb_f32(b, clip.mean[c % 3]);
        }
        gb_key(b, "clip.vision.image_std", KVC_GGUF_ARRAY);
        gb_array(b, KVC_GGUF_FLOAT32, 3);
        for (int c = 0; c < 3; c++) {
            gb_f32(b, clip.std[c]);
        }
        n += 2;
    }
    return n;
}

/* A projector file of `type` as llama.cpp's converter writes the real
 * models' (SmolVLM2-256M, LFM2-VL, Gemma 3, Qwen3-VL, Gemma 4). */
static void clip_like(const char *type) {
    memset(&clip, 0, sizeof clip);
    clip.arch = "clip";
    clip.type = type;
    clip.patch_size = 16;
    clip.merge_key = "clip.vision.projector.scale_factor";
    const float half[3] = {0.5f, 0.5f, 0.5f};
    memcpy(clip.mean, half, sizeof half);
    memcpy(clip.std, half, sizeof half);
    clip.mean_count = 3;
    if (!strcmp(type, "idefics3")) {
        clip.image_size = 512;
        clip.merge = 4;
        clip.longest_edge = 2048;
    } else if (!strcmp(type, "lfm2")) {
        clip.image_size = 256;
        clip.merge = 2;
    } else if (!strcmp(type, "gemma3")) {
        clip.image_size = 896;
        clip.patch_size = 14;
    } else if (!strcmp(type, "qwen3vl_merger")) {
        clip.image_size = 768;
        clip.merge_key = "clip.vision.spatial_merge_size";
        clip.merge = 2;
    } else {
        clip.image_size = 768;
    }
}

/* Reads the file clip describes into *params (its status). */
static kvc_status read_clip(kvc_image_params *params, char *message, size_t message_len) {
    size_t header = 0;
    gb_file file = gb_build(3, clip_metadata, NULL, 0, KVC_GGUF_DEFAULT_ALIGNMENT, &header);
    kvc_gguf *gguf = NULL;
    kvc_status status = kvc_gguf_parse(file.bytes, file.len, &gguf, NULL);
    free(file.bytes);
    if (status != KVC_OK) {
        return status;
    }
    status = kvc_image_params_read(gguf, params, message, message_len);
    kvc_gguf_free(gguf);
    return status;
}

static int read_type(const char *type, kvc_image_params *params) {
    clip_like(type);
    char message[200];
    return read_clip(params, message, sizeof message) == KVC_OK;
}

TEST(params_take_llama_cpp_defaults_per_type) {
    kvc_image_params p;
    CHECK(read_type("gemma3", &p));
    CHECK(p.kind == KVC_PROJECTOR_GEMMA3 && p.layout == KVC_IMAGE_FIXED);
    CHECK(p.merge == 4); /* load_hparams: n_merge 4 when the file has no scale_factor */
    CHECK(p.whole.filter == KVC_IMAGE_BILINEAR && p.whole.fit == KVC_IMAGE_LETTERBOX);
    CHECK(p.image_size == 896 && p.patch_size == 14 && p.mean[1] == 0.5f && p.std[2] == 0.5f);

    CHECK(read_type("qwen3vl_merger", &p));
    /* set_limit_image_tokens(8, 4096) with patch 16, merge 2: 1024 pixels a token */
    CHECK(p.merge == 2 && p.min_pixels == 8 * 1024 && p.max_pixels == 4096 * 1024);

    CHECK(read_type("gemma4v", &p));
    /* n_merge 3; set_limit_image_tokens(40, 280): 48 x 48 pixels a token */
    CHECK(p.merge == 3 && p.min_pixels == 40 * 2304 && p.max_pixels == 280 * 2304);

    CHECK(read_type("lfm2", &p));
    CHECK(p.merge == 2 && p.min_pixels == 64 * 1024 && p.max_pixels == 256 * 1024);
    CHECK(p.tile_size == 512 && p.min_tiles == 2 && p.max_tiles == 10);
    CHECK(p.whole.fit == KVC_IMAGE_STRETCH && p.tiles.fit == KVC_IMAGE_LETTERBOX);

    CHECK(read_type("idefics3", &p));
    CHECK(p.longest_edge == 2048 && p.merge == 4 && p.min_pixels == 0);
    CHECK(p.whole.filter == KVC_IMAGE_BILINEAR && p.whole.fit == KVC_IMAGE_STRETCH);
    CHECK(p.tiles.filter == KVC_IMAGE_BICUBIC && p.tiles.fit == KVC_IMAGE_LETTERBOX);

    for (int k = 0; k < KVC_PROJECTOR_COUNT; k++) {
        const char *name = kvc_projector_name((kvc_projector_kind)k);
        CHECK(name && kvc_projector_kind_of(name, strlen(name)) == (kvc_projector_kind)k);
    }
    CHECK(kvc_projector_kind_of("gemma4", 6) == KVC_PROJECTOR_COUNT); /* a prefix is not a name */
    CHECK(kvc_projector_kind_of(NULL, 0) == KVC_PROJECTOR_COUNT);
    CHECK(kvc_projector_name(KVC_PROJECTOR_COUNT) == NULL);

    /* The file's merge key over the default. */
    clip_like("gemma3");
    clip.merge = 2;
    CHECK_STATUS(read_clip(&p, NULL, 0), KVC_OK);
    CHECK(p.merge == 2);
}

TEST(params_refuse_what_llama_cpp_cannot_use) {
    kvc_image_params p, before;
    memset(&before, 0x5a, sizeof before);
    char message[200];

    clip_like("mlp");
    p = before;
    CHECK_STATUS(read_clip(&p, message, sizeof message), KVC_E_ARCH);
    CHECK(strstr(message, "\"mlp\"") != NULL);
    CHECK(!memcmp(&p, &before, sizeof p));

    clip_like("gemma3");
    clip.arch = "llama";
    CHECK_STATUS(read_clip(&p, message, sizeof message), KVC_E_ARCH);
    CHECK(strstr(message, "general.architecture") != NULL);

    clip_like("gemma3");
    clip.image_size = 0;
    CHECK_STATUS(read_clip(&p, message, sizeof message), KVC_E_MODEL_FILE);
    CHECK(strstr(message, "clip.vision.image_size") != NULL);

    clip_like("gemma3");
    clip.mean_count = 0;
    CHECK_STATUS(read_clip(&p, message, sizeof message), KVC_E_MODEL_FILE);
    CHECK(strstr(message, "image_mean") != NULL);

    clip_like("gemma3");
    clip.std[1] = 0.0f;
    CHECK_STATUS(read_clip(&p, message, sizeof message), KVC_E_MODEL_FILE);
    CHECK(strstr(message, "image_std[1]") != NULL);

    clip_like("gemma3");
    clip.mean[0] = NAN;
    CHECK_STATUS(read_clip(&p, message, sizeof message), KVC_E_MODEL_FILE);

    clip_like("gemma4v");
    clip.patch_size = 4096;
    CHECK_STATUS(read_clip(&p, message, sizeof message), KVC_E_MODEL_FILE);
    CHECK(strstr(message, "1024") != NULL);

    clip_like("gemma3");
    clip.image_size = 910; /* 65 patches of 14, not a multiple of 4 */
    CHECK_STATUS(read_clip(&p, message, sizeof message), KVC_E_MODEL_FILE);

    clip_like("idefics3");
    clip.longest_edge = 7 * 512; /* more tiles than a plan holds */
    CHECK_STATUS(read_clip(&p, message, sizeof message), KVC_E_MODEL_FILE);
    CHECK(strstr(message, "preproc_image_size") != NULL);

    clip_like("qwen3vl_merger");
    clip.merge = 3;
    CHECK_STATUS(read_clip(&p, message, sizeof message), KVC_E_MODEL_FILE);

    CHECK_STATUS(kvc_image_params_read(NULL, &p, NULL, 0), KVC_E_NULL_POINTER);
    CHECK(!memcmp(&p, &before, sizeof p));
}

/* ---- token counts: by hand, and from llama.cpp's formulas written here ---- */

/* llama.cpp's img_tool::calc_size_preserved_ratio (min/max pixels). */
static void ref_smart(int width, int height, int f, int min_pixels, int max_pixels, int *ow, int *oh) {
    int h_bar = (int)roundf((float)height / (float)f) * f;
    int w_bar = (int)roundf((float)width / (float)f) * f;
    if (h_bar < f) h_bar = f;
    if (w_bar < f) w_bar = f;
    if (h_bar * w_bar > max_pixels) {
        float beta = sqrtf((float)(height * width) / (float)max_pixels);
        h_bar = (int)floorf(((float)height / beta) / (float)f) * f;
        w_bar = (int)floorf(((float)width / beta) / (float)f) * f;
        if (h_bar < f) h_bar = f;
        if (w_bar < f) w_bar = f;
    } else if (h_bar * w_bar < min_pixels) {
        float beta = sqrtf((float)min_pixels / (float)(height * width));
        h_bar = (int)ceilf(((float)height * beta) / (float)f) * f;
        w_bar = (int)ceilf(((float)width * beta) / (float)f) * f;
    }
    *ow = w_bar;
    *oh = h_bar;
}

/* lfm2's grid: get_target_ratios (insertion order, then by area, stably)
 * and find_closest_aspect_ratio. */
static void ref_lfm2_grid(int width, int height, int *gw, int *gh) {
    int ratios[64][2], n = 0;
    for (int k = 2; k <= 10; k++) {
        for (int w = 1; w <= k; w++) {
            for (int h = 1; h <= k; h++) {
                int found = 0;
                for (int i = 0; i < n; i++) {
                    found |= ratios[i][0] == w && ratios[i][1] == h;
                }
                if (w * h >= 2 && w * h <= 10 && !found) {
                    ratios[n][0] = w;
                    ratios[n][1] = h;
                    n++;
                }
            }
        }
    }
    for (int i = 1; i < n; i++) { /* insertion sort: stable */
        for (int j = i; j > 0 && ratios[j][0] * ratios[j][1] < ratios[j - 1][0] * ratios[j - 1][1]; j--) {
            int t0 = ratios[j][0], t1 = ratios[j][1];
            ratios[j][0] = ratios[j - 1][0];
            ratios[j][1] = ratios[j - 1][1];
            ratios[j - 1][0] = t0;
            ratios[j - 1][1] = t1;
        }
    }
    float aspect = (float)width / (float)height, best = 3.0e38f, area = (float)(width * height);
    *gw = *gh = 1;
    for (int i = 0; i < n; i++) {
        float diff = fabsf(aspect - (float)ratios[i][0] / (float)ratios[i][1]);
        if (diff < best) {
            best = diff;
            *gw = ratios[i][0];
            *gh = ratios[i][1];
        } else if (diff == best && area > 0.5f * (float)(512 * 512 * ratios[i][0] * ratios[i][1])) {
            *gw = ratios[i][0];
            *gh = ratios[i][1];
        }
    }
}

/* The tokens mtmd puts in the prompt for an image (the files of clip_like),
 * and its tiles. */
static size_t ref_tokens(const char *type, int width, int height, size_t *tiles) {
    if (!strcmp(type, "gemma3")) { /* fixed 896: (896 / 14)^2 / 4^2 */
        *tiles = 1;
        return (size_t)(64 * 64) / 16;
    }
    if (!strcmp(type, "qwen3vl_merger")) {
        int w, h;
        ref_smart(width, height, 32, 8 * 1024, 4096 * 1024, &w, &h);
        *tiles = 1;
        return (size_t)(w / 32) * (size_t)(h / 32);
    }
    if (!strcmp(type, "gemma4v")) {
        int w, h;
        ref_smart(width, height, 48, 40 * 2304, 280 * 2304, &w, &h);
        *tiles = 1;
        return (size_t)((w / 16) * (h / 16) / 9);
    }
    if (!strcmp(type, "idefics3")) { /* 64 tokens a 512 tile: (512 / 16)^2 / 4^2 */
        float scale = fminf(2048.0f / (float)width, 2048.0f / (float)height);
        int rw = (int)ceilf(((float)width * scale) / 512.0f) * 512;
        int rh = (int)ceilf(((float)height * scale) / 512.0f) * 512;
        *tiles = (size_t)(rw / 512) * (size_t)(rh / 512) + 1;
        return *tiles * 64;
    }
    /* lfm2: ceil(side / 32) a side for the thumbnail, 256 a 512 tile */
    int w, h;
    ref_smart(width, height, 32, 64 * 1024, 256 * 1024, &w, &h);
    size_t tokens = (size_t)((w + 31) / 32) * (size_t)((h + 31) / 32);
    *tiles = 1;
    if ((float)width > 1024.0f || (float)height > 1024.0f) {
        int gw, gh;
        ref_lfm2_grid(width, height, &gw, &gh);
        *tiles += (size_t)(gw * gh);
        tokens += (size_t)(gw * gh) * 256;
    }
    return tokens;
}

static const int SHAPES[][2] = {{512, 512}, {1280, 320}, {320, 1280}, {1, 1}, {3, 7}, {4000, 3000}, {333, 517},
                                {1024, 1024}, {1025, 600}, {2000, 1000}, {960, 720}, {100000, 16}};
static const char *TYPES[] = {"idefics3", "lfm2", "gemma3", "qwen3vl_merger", "gemma4v"};

TEST(plan_tokens_follow_llama_cpp_formulas) {
    for (size_t k = 0; k < sizeof TYPES / sizeof TYPES[0]; k++) {
        kvc_image_params p;
        CHECK(read_type(TYPES[k], &p));
        for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
            kvc_image_plan plan;
            CHECK_STATUS(kvc_image_plan_of(&p, (size_t)SHAPES[s][0], (size_t)SHAPES[s][1], &plan), KVC_OK);
            size_t tiles;
            const size_t tokens = ref_tokens(TYPES[k], SHAPES[s][0], SHAPES[s][1], &tiles);
            if (plan.tokens != tokens || plan.tiles != tiles) {
                char what[160];
                snprintf(what, sizeof what, "%s %dx%d: %zu tokens in %zu tiles, llama.cpp's %zu in %zu", TYPES[k],
                         SHAPES[s][0], SHAPES[s][1], plan.tokens, plan.tiles, tokens, tiles);
                test_fail(__FILE__, __LINE__, what);
                return;
            }
            size_t sum = 0;
            for (size_t t = 0; t < plan.tiles; t++) {
                CHECK(plan.tile[t].grid_x * plan.tile[t].grid_y == plan.tile[t].tokens);
                sum += plan.tile[t].tokens;
            }
            CHECK(sum == plan.tokens);
        }
    }
}

/* Token counts worked by hand from llama.cpp's formulas. */
TEST(plan_tokens_by_hand) {
    kvc_image_params p;
    kvc_image_plan plan;

    CHECK(read_type("qwen3vl_merger", &p));
    /* 1x1: each side rounds up to 32; 32 x 32 < 8192, beta = sqrt(8192) = 90.5,
     * ceil(90.5 / 32) = 3: 96 x 96, 3 x 3 tokens */
    CHECK_STATUS(kvc_image_plan_of(&p, 1, 1, &plan), KVC_OK);
    CHECK(plan.tiles == 1 && plan.tile[0].width == 96 && plan.tile[0].height == 96 && plan.tokens == 9);
    CHECK(plan.tile[0].grid_x == 3 && plan.tile[0].grid_y == 3);
    /* 333 x 517: rounds to 320 x 512 (within budget): 10 x 16 */
    CHECK_STATUS(kvc_image_plan_of(&p, 333, 517, &plan), KVC_OK);
    CHECK(plan.tile[0].width == 320 && plan.tile[0].height == 512 && plan.tokens == 160);
    /* 4000 x 3000: 4000 x 3008 is over 4096 x 1024; beta = 1.6915:
     * floor(1773.6 / 32) = 55, floor(2364.8 / 32) = 73 -> 2336 x 1760 */
    CHECK_STATUS(kvc_image_plan_of(&p, 4000, 3000, &plan), KVC_OK);
    CHECK(plan.tile[0].width == 2336 && plan.tile[0].height == 1760 && plan.tokens == 73 * 55);

    CHECK(read_type("gemma4v", &p));
    /* 1x1: 48 x 48 < 92160, beta = 303.6, ceil(303.6 / 48) = 7: 336 x 336, 7 x 7 */
    CHECK_STATUS(kvc_image_plan_of(&p, 1, 1, &plan), KVC_OK);
    CHECK(plan.tile[0].width == 336 && plan.tokens == 49);
    /* 4000 x 3000: 3984 x 3024 is over 645120; beta = 4.3129:
     * floor(695.6 / 48) = 14, floor(927.4 / 48) = 19 */
    CHECK_STATUS(kvc_image_plan_of(&p, 4000, 3000, &plan), KVC_OK);
    CHECK(plan.tile[0].width == 912 && plan.tile[0].height == 672 && plan.tokens == 19 * 14);

    CHECK(read_type("gemma3", &p));
    CHECK_STATUS(kvc_image_plan_of(&p, 3, 7, &plan), KVC_OK);
    CHECK(plan.tiles == 1 && plan.tile[0].width == 896 && plan.tokens == 256 && plan.tile[0].grid_x == 16);

    CHECK(read_type("lfm2", &p));
    /* 3 x 7: 32 x 32 < 65536, beta = sqrt(65536 / 21) = 55.86:
     * ceil(167.6 / 32) = 6, ceil(391.0 / 32) = 13 -> one 192 x 416 image, 78 tokens,
     * after the thumbnail's marker */
    CHECK_STATUS(kvc_image_plan_of(&p, 3, 7, &plan), KVC_OK);
    CHECK(plan.tiles == 1 && plan.overview && plan.rows == 0 && plan.tokens == 78);
    CHECK(plan.tile[0].width == 192 && plan.tile[0].height == 416);
    /* 4000 x 3000: tiled (4000 > 1024); aspect 4/3, nearest of the grids of 2 to
     * 10 tiles: 3 x 2 (1.5); thumbnail: beta = 6.766, 18 x 13 -> 6 x 256 + 234 */
    CHECK_STATUS(kvc_image_plan_of(&p, 4000, 3000, &plan), KVC_OK);
    CHECK(plan.cols == 3 && plan.rows == 2 && plan.tiles == 7 && plan.overview);
    CHECK(plan.tile[0].width == 512 && plan.tile[5].x == 1024 && plan.tile[5].y == 512);
    CHECK(plan.tile[0].resized_width == 1536 && plan.tile[0].resized_height == 1024);
    CHECK(plan.tile[6].width == 576 && plan.tile[6].height == 416 && plan.tokens == 6 * 256 + 234);

    CHECK(read_type("idefics3", &p));
    /* 1 x 1: fitted to 2048 x 2048: 4 x 4 tiles of 512, then the global image */
    CHECK_STATUS(kvc_image_plan_of(&p, 1, 1, &plan), KVC_OK);
    CHECK(plan.rows == 4 && plan.cols == 4 && plan.tiles == 17 && plan.overview && plan.tokens == 17 * 64);
    /* 960 x 720: scale 2048 / 960 = 2.1333334f; 720 x that is 1536.0001f, whose
     * ceiling over 512 is 4, not 3: a 4 x 4 grid (llama.cpp's float rounding,
     * which later versions fixed with doubles) */
    CHECK_STATUS(kvc_image_plan_of(&p, 960, 720, &plan), KVC_OK);
    CHECK(plan.cols == 4 && plan.rows == 4 && plan.tile[0].resized_height == 2048);
    /* 2000 x 1000: 2048 x 1024 exactly: 4 x 2 */
    CHECK_STATUS(kvc_image_plan_of(&p, 2000, 1000, &plan), KVC_OK);
    CHECK(plan.cols == 4 && plan.rows == 2 && plan.tiles == 9 && plan.tile[8].width == 512);
    CHECK(plan.tile[8].resize.filter == KVC_IMAGE_BILINEAR && plan.tile[0].resize.filter == KVC_IMAGE_BICUBIC);

    /* No preproc_image_size: the global image alone. */
    clip_like("idefics3");
    clip.longest_edge = 0;
    CHECK_STATUS(read_clip(&p, NULL, 0), KVC_OK);
    CHECK_STATUS(kvc_image_plan_of(&p, 4000, 3000, &plan), KVC_OK);
    CHECK(plan.tiles == 1 && plan.overview && plan.rows == 0 && plan.tokens == 64);
}

TEST(plan_refuses_bad_sizes) {
    kvc_image_params p;
    CHECK(read_type("gemma4v", &p));
    kvc_image_plan plan, before;
    memset(&before, 0x33, sizeof before);
    plan = before;
    CHECK_STATUS(kvc_image_plan_of(&p, 0, 10, &plan), KVC_E_LENGTH);
    CHECK_STATUS(kvc_image_plan_of(&p, 10, 0, &plan), KVC_E_LENGTH);
    CHECK_STATUS(kvc_image_plan_of(&p, 100001, 10, &plan), KVC_E_LENGTH);
    CHECK_STATUS(kvc_image_plan_of(&p, 10, 100001, &plan), KVC_E_LENGTH);
    CHECK_STATUS(kvc_image_plan_of(&p, 100000, 100000, &plan), KVC_E_LENGTH); /* past 2^30 pixels */
    CHECK_STATUS(kvc_image_plan_of(&p, SIZE_MAX, SIZE_MAX, &plan), KVC_E_LENGTH);
    CHECK_STATUS(kvc_image_plan_of(NULL, 10, 10, &plan), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_image_plan_of(&p, 10, 10, NULL), KVC_E_NULL_POINTER);
    CHECK(!memcmp(&plan, &before, sizeof plan));
    kvc_image_params broken = p;
    broken.patch_size = 0;
    CHECK_STATUS(kvc_image_plan_of(&broken, 10, 10, &plan), KVC_E_MODEL_FILE);
    broken = p;
    broken.layout = (kvc_image_layout)99;
    CHECK_STATUS(kvc_image_plan_of(&broken, 10, 10, &plan), KVC_E_MODEL_FILE);
    CHECK(!memcmp(&plan, &before, sizeof plan));
    /* The largest allowed: 100000 a side within 2^30 pixels. */
    CHECK_STATUS(kvc_image_plan_of(&p, 100000, 10000, &plan), KVC_OK);
    /* A thin image, scaled past its budget by llama.cpp's smart resize:
     * 1 x 100000 rounds to 48 x 99984, over 645120; beta = sqrt(100000 /
     * 645120) = 0.3937, floor(253992 / 48) = 5291 -> 48 x 253968 */
    CHECK_STATUS(kvc_image_plan_of(&p, 1, 100000, &plan), KVC_OK);
    CHECK(plan.tile[0].width == 48 && plan.tile[0].height == 253968 && plan.tokens == 5291);
    /* A tile past KVC_IMAGE_MAX_TILE_PIXELS (patches of 1 pixel, a huge budget) */
    broken = p;
    broken.patch_size = 1;
    broken.merge = 1;
    broken.max_pixels = INT32_MAX;
    plan = before;
    CHECK_STATUS(kvc_image_plan_of(&broken, 10000, 10000, &plan), KVC_E_LENGTH);
    CHECK(!memcmp(&plan, &before, sizeof plan));
}

/* ---- pixels: llama.cpp's filters written plainly, whole images ---- */

typedef struct rgb_image {
    int w, h;
    uint8_t *px; /* w * h * 3 */
} rgb_image;

static rgb_image rgb_new(int w, int h) {
    rgb_image img = {w, h, calloc((size_t)w * (size_t)h * 3, 1)};
    return img;
}

static uint8_t *at(const rgb_image *img, int x, int y) { return img->px + ((size_t)y * img->w + x) * 3; }

/* img_tool::resize_bilinear */
static rgb_image ref_bilinear(const rgb_image *src, int tw, int th) {
    rgb_image dst = rgb_new(tw, th);
    float x_ratio = tw > 1 ? (float)(src->w - 1) / (float)(tw - 1) : 0.0f;
    float y_ratio = th > 1 ? (float)(src->h - 1) / (float)(th - 1) : 0.0f;
    for (int y = 0; y < th; y++) {
        for (int x = 0; x < tw; x++) {
            float px = (float)x * x_ratio, py = (float)y * y_ratio;
            int x0 = (int)px, y0 = (int)py;
            if (x0 > src->w - 1) x0 = src->w - 1;
            if (y0 > src->h - 1) y0 = src->h - 1;
            int x1 = x0 + 1 > src->w - 1 ? src->w - 1 : x0 + 1;
            int y1 = y0 + 1 > src->h - 1 ? src->h - 1 : y0 + 1;
            float xf = px - (float)x0, yf = py - (float)y0;
            for (int c = 0; c < 3; c++) {
                float p00 = at(src, x0, y0)[c], p10 = at(src, x1, y0)[c];
                float p01 = at(src, x0, y1)[c], p11 = at(src, x1, y1)[c];
                float top = p00 + (p10 - p00) * xf, bottom = p01 + (p11 - p01) * xf;
                at(&dst, x, y)[c] = (uint8_t)(top + (bottom - top) * yf);
            }
        }
    }
    return dst;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* img_tool::resize_bicubic, its loops as they are */
static rgb_image ref_bicubic(const rgb_image *img, int tw, int th) {
    rgb_image dst = rgb_new(tw, th);
    const int nx = img->w, ny = img->h;
    float C[5] = {0};
    float tx = (float)nx / (float)tw, ty = (float)ny / (float)th;
    for (int i = 0; i < th; i++) {
        for (int j = 0; j < tw; j++) {
            int x = (int)(tx * (float)j), y = (int)(ty * (float)i);
            float dx = tx * (float)j - (float)x, dy = ty * (float)i - (float)y;
            for (int k = 0; k < 3; k++) {
                float Cc = 0, d0, d2, d3, a0, a1, a2, a3;
                for (int jj = 0; jj <= 3; jj++) {
                    int row = clampi(y - 1 + jj, 0, ny - 1);
                    int base = at(img, clampi(x, 0, nx - 1), row)[k];
                    d0 = (float)(at(img, clampi(x - 1, 0, nx - 1), row)[k] - base);
                    d2 = (float)(at(img, clampi(x + 1, 0, nx - 1), row)[k] - base);
                    d3 = (float)(at(img, clampi(x + 2, 0, nx - 1), row)[k] - base);
                    a0 = (float)base;
                    a1 = (float)(-1.0 / 3 * d0 + d2 - 1.0 / 6 * d3);
                    a2 = (float)(1.0 / 2 * d0 + 1.0 / 2 * d2);
                    a3 = (float)(-1.0 / 6 * d0 - 1.0 / 2 * d2 + 1.0 / 6 * d3);
                    C[jj] = a0 + a1 * dx + a2 * dx * dx + a3 * dx * dx * dx;
                    d0 = C[0] - C[1];
                    d2 = C[2] - C[1];
                    d3 = C[3] - C[1];
                    a0 = C[1];
                    a1 = (float)(-1.0 / 3 * d0 + d2 - 1.0 / 6 * d3);
                    a2 = (float)(1.0 / 2 * d0 + 1.0 / 2 * d2);
                    a3 = (float)(-1.0 / 6 * d0 - 1.0 / 2 * d2 + 1.0 / 6 * d3);
                    Cc = a0 + a1 * dy + a2 * dy * dy + a3 * dy * dy * dy;
                }
                float r = fminf(fmaxf(roundf(Cc), 0.0f), 255.0f);
                at(&dst, j, i)[k] = (uint8_t)r;
            }
        }
    }
    return dst;
}

/* img_tool::resize: a copy at the same size, else stretched or letterboxed
 * (PAD_CEIL) on `pad` */
static rgb_image ref_resize(const rgb_image *src, int tw, int th, const kvc_image_resize *how) {
    if (tw == src->w && th == src->h) {
        rgb_image dst = rgb_new(tw, th);
        memcpy(dst.px, src->px, (size_t)tw * th * 3);
        return dst;
    }
    rgb_image (*filter)(const rgb_image *, int, int) =
        how->filter == KVC_IMAGE_BICUBIC ? ref_bicubic : ref_bilinear;
    if (how->fit == KVC_IMAGE_STRETCH) {
        return filter(src, tw, th);
    }
    float scale = fminf((float)tw / (float)src->w, (float)th / (float)src->h);
    int nw = (int)ceilf((float)src->w * scale), nh = (int)ceilf((float)src->h * scale);
    if (nw > tw) nw = tw;
    if (nh > th) nh = th;
    rgb_image inner = filter(src, nw, nh), dst = rgb_new(tw, th);
    for (int i = 0; i < tw * th; i++) {
        memcpy(dst.px + (size_t)i * 3, how->pad, 3);
    }
    int ox = (tw - nw) / 2, oy = (th - nh) / 2;
    for (int y = 0; y < nh; y++) {
        memcpy(at(&dst, ox, oy + y), at(&inner, 0, y), (size_t)nw * 3);
    }
    free(inner.px);
    return dst;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* Every tile of the plan of a random image against the reference: the
 * whole image resized, cut, normalised -- bit for bit. */
static int tiles_match(const kvc_image_params *p, int w, int h) {
    rgb_image src = rgb_new(w, h);
    uint8_t *rgba = malloc((size_t)w * h * 4);
    for (int i = 0; i < w * h; i++) {
        for (int c = 0; c < 4; c++) {
            rgba[(size_t)i * 4 + c] = (uint8_t)rng();
        }
        memcpy(src.px + (size_t)i * 3, rgba + (size_t)i * 4, 3); /* alpha dropped */
    }
    kvc_image_plan plan;
    int ok = kvc_image_plan_of(p, (size_t)w, (size_t)h, &plan) == KVC_OK;
    rgb_image whole = {0, 0, NULL}; /* the tiles of a grid share it */
    for (size_t t = 0; ok && t < plan.tiles; t++) {
        const kvc_image_tile *tile = &plan.tile[t];
        if (t == 0 || memcmp(&tile->resize, &plan.tile[t - 1].resize, sizeof tile->resize) ||
            tile->resized_width != plan.tile[t - 1].resized_width ||
            tile->resized_height != plan.tile[t - 1].resized_height) {
            free(whole.px);
            whole = ref_resize(&src, (int)tile->resized_width, (int)tile->resized_height, &tile->resize);
        }
        float *out = malloc(tile->width * tile->height * 3 * sizeof(float));
        ok = kvc_image_tile_pixels(p, &plan, t, rgba, (size_t)w, (size_t)h, out) == KVC_OK;
        for (size_t y = 0; ok && y < tile->height; y++) {
            for (size_t x = 0; ok && x < tile->width; x++) {
                const uint8_t *u = at(&whole, (int)(tile->x + x), (int)(tile->y + y));
                for (int c = 0; c < 3; c++) {
                    float want = ((float)u[c] / 255.0f - p->mean[c]) / p->std[c];
                    ok &= memcmp(&want, &out[(y * tile->width + x) * 3 + c], sizeof want) == 0;
                }
            }
        }
        free(out);
    }
    free(whole.px);
    free(rgba);
    free(src.px);
    return ok;
}

/* Small parameters of each layout, so that the reference's whole images
 * stay small. */
static kvc_image_params small_params(const char *type) {
    kvc_image_params p;
    read_type(type, &p);
    const float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f}, std[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    memcpy(p.mean, mean, sizeof mean);
    memcpy(p.std, std, sizeof std);
    p.patch_size = 2;
    switch (p.layout) {
    case KVC_IMAGE_FIXED: p.image_size = 24; break;
    case KVC_IMAGE_LONGEST_EDGE: p.image_size = 16; p.longest_edge = 40; break;
    case KVC_IMAGE_DYNAMIC:
    case KVC_IMAGE_LFM2:
        p.min_pixels = 4 * (p.patch_size * p.merge) * (p.patch_size * p.merge);
        p.max_pixels = 64 * (p.patch_size * p.merge) * (p.patch_size * p.merge);
        p.tile_size = 12;
        break;
    }
    return p;
}

TEST(tile_pixels_match_llama_cpp_filters) {
    static const int sizes[][2] = {{1, 1}, {2, 3}, {7, 5}, {13, 29}, {40, 9}, {31, 31}, {53, 17}, {16, 16}};
    for (size_t k = 0; k < sizeof TYPES / sizeof TYPES[0]; k++) {
        const kvc_image_params p = small_params(TYPES[k]);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            if (!tiles_match(&p, sizes[s][0], sizes[s][1])) {
                char what[96];
                snprintf(what, sizeof what, "%s %dx%d differs from llama.cpp's filters", TYPES[k], sizes[s][0],
                         sizes[s][1]);
                test_fail(__FILE__, __LINE__, what);
                return;
            }
        }
    }
}

/* The same at the real sizes, once per type on one odd image. */
TEST(tile_pixels_match_at_real_sizes) {
    for (size_t k = 0; k < sizeof TYPES / sizeof TYPES[0]; k++) {
        kvc_image_params p;
        CHECK(read_type(TYPES[k], &p));
        CHECK(tiles_match(&p, 333, 217));
    }
    kvc_image_params p;
    CHECK(read_type("lfm2", &p));
    CHECK(tiles_match(&p, 1100, 300)); /* tiled: 4 x 1 (aspect 3.67 nearest 4) */
}

/* Letterboxing by hand: a 4 x 2 image into 6 x 6 (gemma3's fit) lies in
 * 6 x 3 (ceil(2 x 1.5)) at row (6 - 3) / 2 = 1, black above and below. */
TEST(letterbox_geometry_and_normalisation) {
    kvc_image_params p = small_params("gemma3");
    p.image_size = 6;
    p.merge = 1;
    p.mean[0] = p.mean[1] = p.mean[2] = 0.0f;
    p.std[0] = p.std[1] = p.std[2] = 1.0f;
    uint8_t rgba[4 * 2 * 4];
    memset(rgba, 255, sizeof rgba);
    kvc_image_plan plan;
    CHECK_STATUS(kvc_image_plan_of(&p, 4, 2, &plan), KVC_OK);
    float out[6 * 6 * 3];
    CHECK_STATUS(kvc_image_tile_pixels(&p, &plan, 0, rgba, 4, 2, out), KVC_OK);
    for (int y = 0; y < 6; y++) {
        for (int x = 0; x < 6; x++) {
            const float want = (y >= 1 && y < 4) ? 1.0f : 0.0f; /* white is 255 / 255 */
            CHECK(out[(y * 6 + x) * 3] == want && out[(y * 6 + x) * 3 + 2] == want);
        }
    }
    /* (x / 255 - mean) / std, channel by channel */
    p.mean[1] = 0.5f;
    p.std[1] = 0.25f;
    CHECK_STATUS(kvc_image_tile_pixels(&p, &plan, 0, rgba, 4, 2, out), KVC_OK);
    CHECK(out[(2 * 6) * 3 + 1] == 2.0f && out[1] == -2.0f);
}

TEST(tile_pixels_refuse_bad_input) {
    kvc_image_params p = small_params("lfm2");
    uint8_t rgba[30 * 30 * 4] = {0};
    kvc_image_plan plan;
    CHECK_STATUS(kvc_image_plan_of(&p, 30, 30, &plan), KVC_OK);
    /* 30 > 2 x 12: tiled; aspect 1 ties 2 x 2 and 3 x 3, and 900 pixels cover
     * more than half of 3 x 3 tiles of 144: 9 tiles, then the thumbnail */
    CHECK(plan.tiles == 10 && plan.rows == 3);
    float out[64 * 64 * 3], before[64 * 64 * 3];
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        out[i] = before[i] = 7.0f;
    }
    CHECK_STATUS(kvc_image_tile_pixels(&p, &plan, plan.tiles, rgba, 30, 30, out), KVC_E_LENGTH);
    CHECK_STATUS(kvc_image_tile_pixels(&p, &plan, 0, rgba, 31, 30, out), KVC_E_LENGTH);
    CHECK_STATUS(kvc_image_tile_pixels(&p, &plan, 0, NULL, 30, 30, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_image_tile_pixels(&p, &plan, 0, rgba, 30, 30, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_image_tile_pixels(NULL, &plan, 0, rgba, 30, 30, out), KVC_E_NULL_POINTER);
    kvc_image_plan broken = plan;
    broken.tile[1].x = broken.tile[1].resized_width; /* cut past the resized image */
    CHECK_STATUS(kvc_image_tile_pixels(&p, &broken, 1, rgba, 30, 30, out), KVC_E_LENGTH);
    broken = plan;
    broken.tiles = KVC_IMAGE_MAX_TILES + 1;
    CHECK_STATUS(kvc_image_tile_pixels(&p, &broken, 0, rgba, 30, 30, out), KVC_E_LENGTH);
    broken = plan;
    broken.tile[0].resize.filter = (kvc_image_filter)7;
    CHECK_STATUS(kvc_image_tile_pixels(&p, &broken, 0, rgba, 30, 30, out), KVC_E_LENGTH);
    kvc_image_params zero_std = p;
    zero_std.std[2] = 0.0f;
    CHECK_STATUS(kvc_image_tile_pixels(&zero_std, &plan, 0, rgba, 30, 30, out), KVC_E_MODEL_FILE);
    CHECK(!memcmp(out, before, sizeof out));
}

RUN_TESTS(CASE(params_take_llama_cpp_defaults_per_type), CASE(params_refuse_what_llama_cpp_cannot_use),
          CASE(plan_tokens_follow_llama_cpp_formulas), CASE(plan_tokens_by_hand), CASE(plan_refuses_bad_sizes),
          CASE(tile_pixels_match_llama_cpp_filters), CASE(tile_pixels_match_at_real_sizes),
          CASE(letterbox_geometry_and_normalisation), CASE(tile_pixels_refuse_bad_input))

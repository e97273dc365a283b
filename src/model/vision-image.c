/*
 * vision-image.c -- an image through a projector: its plan (image.c's, from
 * the projector file's preprocessing parameters) flattened for callers that
 * cannot read a struct (the JS loader), and a tile of it prepared and
 * encoded in one call.
 */
#include <string.h>

#include "../core/internal.h"
#include "vision.h"

/* The words kvc_vision_plan writes before the tiles, and per tile. */
enum { PLAN_HEADER = 5, PLAN_TILE = 5 };

kvc_status kvc_vision_plan(const kvc_vision *vision, size_t width, size_t height, uint32_t *out, size_t out_len) {
    if (!vision || !out) return KVC_E_NULL_POINTER;
    kvc_image_plan plan;
    kvc_status status = kvc_image_plan_of(&vision->image, width, height, &plan);
    if (status != KVC_OK) return status;
    if (out_len < PLAN_HEADER + PLAN_TILE * plan.tiles) return KVC_E_LENGTH;
    const uint32_t header[PLAN_HEADER] = {(uint32_t)plan.tiles, (uint32_t)plan.rows, (uint32_t)plan.cols,
                                          (uint32_t)(plan.overview != 0), (uint32_t)plan.tokens};
    memcpy(out, header, sizeof header);
    for (size_t i = 0; i < plan.tiles; i++) {
        const kvc_image_tile *t = &plan.tile[i];
        const uint32_t tile[PLAN_TILE] = {(uint32_t)t->width, (uint32_t)t->height, (uint32_t)t->tokens,
                                          (uint32_t)t->grid_x, (uint32_t)t->grid_y};
        memcpy(out + PLAN_HEADER + PLAN_TILE * i, tile, sizeof tile);
    }
    return KVC_OK;
}

kvc_status kvc_vision_encode_tile(kvc_vision *vision, const uint8_t *rgba, size_t width, size_t height, size_t tile,
                                  float *out) {
    if (!vision || !rgba || !out) return KVC_E_NULL_POINTER;
    kvc_image_plan plan;
    kvc_status status = kvc_image_plan_of(&vision->image, width, height, &plan);
    if (status != KVC_OK) return status;
    if (tile >= plan.tiles) return KVC_E_LENGTH;
    const kvc_image_tile *t = &plan.tile[tile];
    /* The preprocessing's count and the encoder's must be one: a projector
     * whose parameters disagree with its encoder is refused, not guessed. */
    if (kvc_vision_tokens(vision, t->width, t->height) != t->tokens) return KVC_E_MODEL_FILE;
    float *pixels = kvc_realloc_array(NULL, t->width * t->height, 3 * sizeof(float));
    if (!pixels) return KVC_E_NOMEM;
    status = kvc_image_tile_pixels(&vision->image, &plan, tile, rgba, width, height, pixels);
    if (status == KVC_OK) status = kvc_vision_encode(vision, pixels, t->width, t->height, out);
    kvc_free(pixels);
    return status;
}

/*
 * image-resize.c -- a tile's pixels as llama.cpp's mtmd hands them to the
 * encoder: the image resized with its filter (img_tool's bilinear or
 * bicubic, in its float arithmetic, so that the u8 results match bit for
 * bit), stretched or letterboxed, cut, then normalised.  Each output pixel
 * is computed where it lands from the source, so a tile costs its own
 * pixels, not the whole resized image, and no scratch is needed.
 */
#include <math.h>
#include <string.h>

#include "vision.h"

/* The source image: RGBA bytes, alpha never read. */
typedef struct rgba_image {
    const uint8_t *px;
    int w, h;
} rgba_image;

static float channel(const rgba_image *img, int x, int y, int c) {
    return (float)img->px[((size_t)y * (size_t)img->w + (size_t)x) * 4 + (size_t)c];
}

static int clamp_int(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }

static float lerp(float s, float e, float t) { return s + (e - s) * t; }

/* Pixel (x, y) of `img` resized to tw x th by mtmd's bilinear: corner to
 * corner (the source's first and last pixels land on the target's), each
 * channel truncated to u8. */
static void bilinear(const rgba_image *img, int tw, int th, int x, int y, uint8_t rgb[3]) {
    const float x_ratio = tw > 1 ? (float)(img->w - 1) / (float)(tw - 1) : 0.0f;
    const float y_ratio = th > 1 ? (float)(img->h - 1) / (float)(th - 1) : 0.0f;
    const float px = (float)x * x_ratio, py = (float)y * y_ratio;
    const int x0 = (int)px < img->w - 1 ? (int)px : img->w - 1;
    const int y0 = (int)py < img->h - 1 ? (int)py : img->h - 1;
    const int x1 = x0 + 1 < img->w - 1 ? x0 + 1 : img->w - 1;
    const int y1 = y0 + 1 < img->h - 1 ? y0 + 1 : img->h - 1;
    const float xf = px - (float)x0, yf = py - (float)y0;
    for (int c = 0; c < 3; c++) {
        const float top = lerp(channel(img, x0, y0, c), channel(img, x1, y0, c), xf);
        const float bottom = lerp(channel(img, x0, y1, c), channel(img, x1, y1, c), xf);
        rgb[c] = (uint8_t)lerp(top, bottom, yf);
    }
}

/* One cubic step of mtmd's bicubic (from ViT.cpp): the coefficients in
 * double, stored in float, the polynomial in float. */
static float cubic(float p0, float p1, float p2, float p3, float t) {
    const float d0 = p0 - p1, d2 = p2 - p1, d3 = p3 - p1, a0 = p1;
    const float a1 = (float)(-1.0 / 3 * d0 + d2 - 1.0 / 6 * d3);
    const float a2 = (float)(1.0 / 2 * d0 + 1.0 / 2 * d2);
    const float a3 = (float)(-1.0 / 6 * d0 - 1.0 / 2 * d2 + 1.0 / 6 * d3);
    return a0 + a1 * t + a2 * t * t + a3 * t * t * t;
}

/* Pixel (x, y) of `img` resized to tw x th by mtmd's bicubic: the source
 * point x * (w / tw) (no half-pixel shift), a 4x4 neighbourhood clamped at
 * the edges, each channel rounded and clamped to u8. */
static void bicubic(const rgba_image *img, int tw, int th, int x, int y, uint8_t rgb[3]) {
    const float tx = (float)img->w / (float)tw, ty = (float)img->h / (float)th;
    const int sx = (int)(tx * (float)x), sy = (int)(ty * (float)y);
    const float dx = tx * (float)x - (float)sx, dy = ty * (float)y - (float)sy;
    int cols[4];
    for (int i = 0; i < 4; i++) {
        cols[i] = clamp_int(sx - 1 + i, 0, img->w - 1);
    }
    for (int c = 0; c < 3; c++) {
        float rows[4];
        for (int j = 0; j < 4; j++) {
            const int row = clamp_int(sy - 1 + j, 0, img->h - 1);
            rows[j] = cubic(channel(img, cols[0], row, c), channel(img, cols[1], row, c),
                            channel(img, cols[2], row, c), channel(img, cols[3], row, c), dx);
        }
        const float v = roundf(cubic(rows[0], rows[1], rows[2], rows[3], dy));
        rgb[c] = (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
    }
}

static void filtered(const rgba_image *img, kvc_image_filter filter, int tw, int th, int x, int y, uint8_t rgb[3]) {
    if (filter == KVC_IMAGE_BICUBIC) {
        bicubic(img, tw, th, x, y, rgb);
    } else {
        bilinear(img, tw, th, x, y, rgb);
    }
}

/* Where a letterboxed image lies in its tw x th target: scaled by the
 * smaller ratio, each side the ceiling, centred (mtmd's PAD_CEIL). */
typedef struct letterbox {
    int w, h, x, y;
} letterbox;

static letterbox letterbox_of(const rgba_image *img, int tw, int th) {
    const float scale_w = (float)tw / (float)img->w, scale_h = (float)th / (float)img->h;
    const float scale = scale_h < scale_w ? scale_h : scale_w;
    letterbox box;
    box.w = (int)ceilf((float)img->w * scale);
    box.h = (int)ceilf((float)img->h * scale);
    box.w = box.w < tw ? box.w : tw;
    box.h = box.h < th ? box.h : th;
    box.x = (tw - box.w) / 2;
    box.y = (th - box.h) / 2;
    return box;
}

/* Pixel (x, y) of the image resized to tw x th as `resize` says. */
static void resized(const rgba_image *img, const kvc_image_resize *resize, int tw, int th, const letterbox *box,
                    int x, int y, uint8_t rgb[3]) {
    if (tw == img->w && th == img->h) {
        for (int c = 0; c < 3; c++) {
            rgb[c] = (uint8_t)channel(img, x, y, c);
        }
    } else if (resize->fit == KVC_IMAGE_STRETCH) {
        filtered(img, resize->filter, tw, th, x, y, rgb);
    } else if (x >= box->x && x < box->x + box->w && y >= box->y && y < box->y + box->h) {
        filtered(img, resize->filter, box->w, box->h, x - box->x, y - box->y, rgb);
    } else {
        memcpy(rgb, resize->pad, 3);
    }
}

static int tile_usable(const kvc_image_tile *t) {
    return t->width >= 1 && t->height >= 1 && t->width <= KVC_IMAGE_MAX_TILE_PIXELS / t->height &&
           t->resized_width <= KVC_IMAGE_MAX_TILE_PIXELS && t->resized_height <= KVC_IMAGE_MAX_TILE_PIXELS && t->x < t->resized_width && t->y < t->resized_height &&
           t->width <= t->resized_width - t->x && t->height <= t->resized_height - t->y &&
           (t->resize.filter == KVC_IMAGE_BILINEAR || t->resize.filter == KVC_IMAGE_BICUBIC) &&
           (t->resize.fit == KVC_IMAGE_STRETCH || t->resize.fit == KVC_IMAGE_LETTERBOX);
}

kvc_status kvc_image_tile_pixels(const kvc_image_params *params, const kvc_image_plan *plan, size_t tile,
                                 const uint8_t *rgba, size_t width, size_t height, float *out) {
    if (!params || !plan || !rgba || !out) {
        return KVC_E_NULL_POINTER;
    }
    if (tile >= plan->tiles || plan->tiles > KVC_IMAGE_MAX_TILES || width != plan->image_width ||
        height != plan->image_height || width == 0 || height == 0 || width > KVC_IMAGE_MAX_SIDE ||
        height > KVC_IMAGE_MAX_SIDE || !tile_usable(&plan->tile[tile])) {
        return KVC_E_LENGTH;
    }
    for (int c = 0; c < 3; c++) {
        if (!isfinite(params->mean[c]) || !isfinite(params->std[c]) || params->std[c] == 0.0f) {
            return KVC_E_MODEL_FILE;
        }
    }
    const kvc_image_tile *t = &plan->tile[tile];
    const rgba_image img = {rgba, (int)width, (int)height};
    const int tw = (int)t->resized_width, th = (int)t->resized_height;
    const letterbox box = letterbox_of(&img, tw, th);
    for (size_t i = 0; i < t->height; i++) {
        for (size_t j = 0; j < t->width; j++) {
            uint8_t rgb[3];
            resized(&img, &t->resize, tw, th, &box, (int)(t->x + j), (int)(t->y + i), rgb);
            float *dst = out + (i * t->width + j) * 3;
            for (int c = 0; c < 3; c++) {
                dst[c] = ((float)rgb[c] / 255.0f - params->mean[c]) / params->std[c];
            }
        }
    }
    return KVC_OK;
}

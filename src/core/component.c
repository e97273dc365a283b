/*
 * component.c -- the component formats (kvc_component), one traits row each,
 * and the modes composed of two of them.
 *
 * What the core knows of a format is its row here: whether it quantizes,
 * the bytes of its rows, whether it keeps f32 copies of its newest rows
 * (the residual window), its kernels and what a valid row of it is.  The
 * rest of src/core consults the row and never names a format, as ggml's
 * type_traits serve its tensor types: a new format is a row, its kernels
 * (src/kernels, a scalar reference beside each SIMD version) and its tests.
 */
#include <string.h>

#include "internal.h"
#include "../kernels/q4-pack.h"
#include "../kernels/q8-rows.h"

/* ---- the q8 format: a scale and d codes -127..127 ---- */

static float quantize_q8(const kvc_kernels *set, size_t d, const float *x, const float *field,
                         uint8_t *codes) {
    return set->quantize_row(d, x, field, (int8_t *)codes);
}

static kvc_scores_q8_fn *scores_q8(const kvc_kernels *set) {
    return set->scores_q8;
}

static kvc_weighted_sum_q8_fn *values_q8(const kvc_kernels *set) {
    return set->weighted_sum_q8;
}

/* 1 if one of the fields (nibbles or bytes) of the n bytes at p holds its
 * most negative code: only its top bit set, a q4 code of -8 or a q8 code of
 * -128, for fields of 4 or 8 bits.  Eight bytes at a time as one word, the
 * zero-field test of x ^ the top bits, exact as to whether a word has such a
 * field: fast in plain C, which the core is (SIMD flags go on the kernel
 * files only).  The last word is padded with zeros, which never match. */
static int any_most_negative(const uint8_t *p, size_t n, unsigned field_bits) {
    const uint64_t ones = field_bits == 4 ? 0x1111111111111111ull : 0x0101010101010101ull;
    const uint64_t tops = ones << (field_bits - 1);
    uint64_t found = 0;
    for (size_t j = 0; j < n; j += 8) {
        uint64_t x = 0;
        if (n - j >= 8) memcpy(&x, p + j, 8);
        else memcpy(&x, p + j, n - j);
        const uint64_t y = x ^ tops; /* such a field becomes 0 */
        found |= (y - ones) & ~y & tops;
    }
    return found != 0;
}

static int codes_valid_q8(size_t d, const uint8_t *codes) {
    return !any_most_negative(codes, d, 8);
}

/* ---- the q4 format: a scale, 2-bit shifts and 4-bit codes (q4-pack.h) ---- */

static float quantize_q4(const kvc_kernels *set, size_t d, const float *x, const float *field,
                         uint8_t *codes) {
    return set->quantize_row_q4(d, x, field, codes);
}

static kvc_scores_q8_fn *scores_q4(const kvc_kernels *set) {
    return set->scores_q4;
}

static kvc_unpack_q4_fn *unpack_q4(const kvc_kernels *set) {
    return set->unpack_q4;
}

/* Codes -7..7, no shift bits past the row's groups, and the pad nibble of
 * an odd last block 0: the rows quantize_row_q4 makes. */
static int codes_valid_q4(size_t d, const uint8_t *codes) {
    const size_t shift_bytes = kvc_q4_shift_bytes(d), code_bytes = (d + 1) / 2;
    const size_t used = kvc_q4_groups(d) % 4;
    const uint8_t unused_shift_bits = used ? (uint8_t)(0xFF << (2 * used)) : 0;
    int bad = (codes[shift_bytes - 1] & unused_shift_bits) != 0;
    bad |= any_most_negative(codes + shift_bytes, code_bytes, 4);
    if ((d % KVC_Q4_BLOCK) % 2) bad |= (codes[shift_bytes + code_bytes - 1] >> 4) != 0;
    return !bad;
}

/* ---- the table ---- */

static size_t f32_row_bytes(size_t d) {
    return d * sizeof(float);
}

static const kvc_component_traits traits[KVC_COMPONENT_COUNT] = {
    [KVC_COMPONENT_F32] = {.name = "f32", .row_bytes = f32_row_bytes},
    [KVC_COMPONENT_Q8] = {.name = "q8", .quantized = 1, .row_bytes = kvc_q8_row_bytes, .quantize = quantize_q8,
                          .scores = scores_q8, .values = values_q8, .codes_valid = codes_valid_q8},
    [KVC_COMPONENT_Q4] = {.name = "q4", .quantized = 1, .keeps_copies = 1, .row_bytes = kvc_q4_row_bytes,
                          .quantize = quantize_q4, .scores = scores_q4, .unpack = unpack_q4,
                          .values = values_q8, .codes_valid = codes_valid_q4},
};

const kvc_component_traits *kvc_component_traits_of(kvc_component type) {
    return (unsigned)type < KVC_COMPONENT_COUNT ? &traits[type] : NULL;
}

int kvc_component_keeps_window(kvc_component component) {
    const kvc_component_traits *row = kvc_component_traits_of(component);
    return row ? row->keeps_copies : 0;
}

/* ---- modes: a pair of components each ---- */

/* Keys, values of each kvc_mode in order: the one place a mode is composed. */
static const kvc_component mode_components[KVC_MODE_COUNT][2] = {
    {KVC_COMPONENT_F32, KVC_COMPONENT_F32}, {KVC_COMPONENT_Q8, KVC_COMPONENT_Q8},
    {KVC_COMPONENT_Q8, KVC_COMPONENT_F32},  {KVC_COMPONENT_F32, KVC_COMPONENT_Q8},
    {KVC_COMPONENT_Q4, KVC_COMPONENT_Q4},   {KVC_COMPONENT_Q4, KVC_COMPONENT_F32},
    {KVC_COMPONENT_F32, KVC_COMPONENT_Q4},  {KVC_COMPONENT_Q8, KVC_COMPONENT_Q4},
    {KVC_COMPONENT_Q4, KVC_COMPONENT_Q8},
};

kvc_status kvc_mode_of(kvc_component keys, kvc_component values, kvc_mode *mode) {
    if (!mode) return KVC_E_NULL_POINTER;
    for (int m = 0; m < KVC_MODE_COUNT; m++) {
        if (mode_components[m][0] == keys && mode_components[m][1] == values) {
            *mode = (kvc_mode)m;
            return KVC_OK;
        }
    }
    return KVC_E_MODE;
}

kvc_component kvc_mode_component(kvc_mode mode, int is_values) {
    if ((unsigned)mode >= KVC_MODE_COUNT) return KVC_COMPONENT_F32;
    return mode_components[mode][is_values ? 1 : 0];
}

const kvc_component_traits *kvc_mode_traits(kvc_mode mode, int is_values) {
    return &traits[kvc_mode_component(mode, is_values)];
}

size_t kvc_quantized_components(kvc_mode mode) {
    return (size_t)kvc_mode_traits(mode, 0)->quantized + (size_t)kvc_mode_traits(mode, 1)->quantized;
}

int kvc_mode_keeps_copies(kvc_mode mode) {
    return kvc_mode_traits(mode, 0)->keeps_copies || kvc_mode_traits(mode, 1)->keeps_copies;
}

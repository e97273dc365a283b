/*
 * segment.c -- attention of G queries over one segment of a head's rows, and
 * the merge of a query's segments.
 *
 * Every attention call splits each head's rows at multiples of
 * KVC_SEGMENT_ROWS, whatever the number of threads (attend.c), and runs this
 * on each segment, in three passes over its rows: the scores of every query
 * against every row (each key row read once for the group), the exponentials
 * of each query's scores less the segment's max (the set's softmax), and the
 * weighted sum of the value rows by them (each value row read once for the
 * group).  What a segment leaves -- per query its max, the sum of its
 * exponentials, and that unnormalised sum of values -- is merged in segment
 * order: out = sum_s weight_s out_s, and a segment's exponentials times its
 * weight are its probabilities (softmax_merge).  Since the boundaries and
 * the order are fixed, so is every bit of the result.
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "../kernels/q8-rows.h"

/* Quantized value rows per tile: about 32 KiB of them, and within what an
 * i32 sums exactly. */
static size_t value_tile_rows(size_t d) {
    const size_t rows = 32768 / (d + sizeof(float));
    return rows < 8 ? 8 : rows > KVC_Q8_SUM_ROWS ? KVC_Q8_SUM_ROWS : rows;
}

static size_t round_up16(size_t bytes) {
    return (bytes + 15) & ~(size_t)15;
}

/* The parts of a scratch, in bytes, in the order kvc_scratch_init lays them out. */
#define SCRATCH_PARTS 11

static void scratch_sizes(size_t G, size_t d, size_t sizes[SCRATCH_PARTS]) {
    const size_t tile_rows = value_tile_rows(d);
    sizes[0] = round_up16(G * KVC_SEGMENT_ROWS * sizeof(float)); /* z */
    sizes[1] = round_up16(2 * G * tile_rows * sizeof(int16_t));  /* tile_w16 */
    sizes[2] = round_up16(2 * G * sizeof(float));                /* tile_w_scales */
    sizes[3] = round_up16(G * tile_rows * sizeof(float));        /* tile_w */
    sizes[4] = round_up16(tile_rows * sizeof(float));            /* tile_scales */
    sizes[5] = round_up16(G * d * sizeof(float));                /* out */
    sizes[6] = round_up16(G * sizeof(float));                    /* max */
    sizes[7] = round_up16(G * sizeof(float));                    /* sum */
    sizes[8] = round_up16(tile_rows * kvc_q8_row_bytes(d));      /* tile_q8 */
    sizes[9] = round_up16(d * sizeof(float));                    /* row_f32 */
    sizes[10] = round_up16(d * sizeof(float));                   /* ones */
}

size_t kvc_scratch_bytes(size_t G, size_t d) {
    size_t sizes[SCRATCH_PARTS], total = 0;
    scratch_sizes(G, d, sizes);
    for (int i = 0; i < SCRATCH_PARTS; i++) total += sizes[i];
    return total;
}

void kvc_scratch_init(kvc_scratch *scratch, void *block, size_t G, size_t d) {
    size_t sizes[SCRATCH_PARTS];
    scratch_sizes(G, d, sizes);
    float *parts[SCRATCH_PARTS];
    uint8_t *at = block;
    for (int i = 0; i < SCRATCH_PARTS; i++) {
        parts[i] = (float *)at;
        at += sizes[i];
    }
    scratch->z = parts[0];
    scratch->tile_w16 = (int16_t *)parts[1];
    scratch->tile_w_scales = parts[2];
    scratch->tile_w = parts[3];
    scratch->tile_scales = parts[4];
    scratch->out = parts[5];
    scratch->max = parts[6];
    scratch->sum = parts[7];
    scratch->tile_q8 = (uint8_t *)parts[8];
    scratch->row_f32 = parts[9];
    scratch->ones = parts[10];
    for (size_t j = 0; j < d; j++) scratch->ones[j] = 1.0f;
    scratch->tile_rows = value_tile_rows(d);
}

size_t kvc_queries_bytes(size_t count, size_t d) {
    return round_up16(count * d * sizeof(int16_t)) + round_up16(count * sizeof(float)) +
           round_up16(2 * d * sizeof(float));
}

/* The exponent e of max |x[j]| (frexpf's: max |x| * 2^-e in [1/2, 1)); 0
 * when every x[j] is zero. */
static int exponent_of_max(const float *x, size_t n) {
    float max_abs = 0.0f;
    for (size_t j = 0; j < n; j++) {
        if (max_abs < fabsf(x[j])) max_abs = fabsf(x[j]);
    }
    int e = 0;
    frexpf(max_abs, &e);
    return e;
}

/* 2^k as a float, for k in [-126, 127]. */
static float pow2f(int k) {
    const uint32_t bits = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* y[j] = x[j] * 2^-e, exact unless y[j] is subnormal, for the e of
 * exponent_of_max: two factors, since 2^-e alone may not be a float. */
static void scale_by_pow2(float *y, const float *x, size_t n, int e) {
    const int half = -e / 2;
    const float a = pow2f(half), b = pow2f(-e - half);
    for (size_t j = 0; j < n; j++) y[j] = (x[j] * a) * b;
}

/* For quantized keys, each query q goes to the integer dots as q~ = q * c_K
 * in KVC_QUERY_CODE_MAX-bit codes, with one scale that 1/sqrt(d) is folded
 * into: a score is then one multiply of its integer dot (kernels.h).
 *
 * q~ is coded at a power-of-two scale, its largest lane in [1/2, 1), and the
 * code scale is taken back by the same power: the codes are q~'s own, but
 * q~ cannot overflow (q and c_K each come scaled below 1 before they are
 * multiplied: an overflow would make NaN codes), and the codes' scale floor
 * (1e-30) is never met (a field at its own floor, a head whose window rows
 * were all zero, makes q~ about 1e-30: the floored scale would round it to
 * integers).  Only the scale taken back can overflow, to scores of +-Inf or
 * NaN, when q * c_K exceeds FLT_MAX. */
void kvc_queries_prepare(kvc_queries *queries, const float *q, size_t count,
                         const kvc_rows_view *keys, size_t d, void *block) {
    const kvc_kernels *kernels = kvc_kernels_active();
    uint8_t *at = block;
    queries->q = q;
    queries->codes = (int16_t *)(void *)at;
    at += round_up16(count * d * sizeof(int16_t));
    queries->code_scales = (float *)(void *)at;
    at += round_up16(count * sizeof(float));
    float *field = (float *)(void *)at, *q_field = field + d;
    if (!keys->field) return; /* no quantized key rows: no codes */
    const float sqrt_d = sqrtf((float)d);
    const int e_field = exponent_of_max(keys->field, d);
    scale_by_pow2(field, keys->field, d, e_field);
    for (size_t g = 0; g < count; g++) {
        const int e_q = exponent_of_max(q + g * d, d);
        scale_by_pow2(q_field, q + g * d, d, e_q);
        kernels->mul_f32(d, q_field, field, q_field);
        const int e = exponent_of_max(q_field, d);
        scale_by_pow2(q_field, q_field, d, e);
        const float scale = kernels->quantize_query(d, q_field, KVC_QUERY_CODE_MAX, queries->codes + g * d);
        queries->code_scales[g] = ldexpf(scale / sqrt_d, e_q + e_field + e);
    }
}

/* Rows [first, first + count) of a view, split into its three parts: f32
 * rows [part[0].first, + part[0].count), quantized rows [part[1]...) and
 * the residual window's rows [part[2]...), each counted in its own sequence. */
typedef struct rows_range {
    size_t first, count;
} rows_range;

static void split_rows(const kvc_rows_view *view, size_t first, size_t count, rows_range part[3]) {
    const size_t lens[3] = {view->rows->len, view->q_count, view->recent_count};
    size_t start = 0; /* of the part, in the view */
    for (int i = 0; i < 3; i++) {
        const size_t lo = first > start ? first : start;
        const size_t hi_view = first + count, hi_part = start + lens[i];
        const size_t hi = hi_view < hi_part ? hi_view : hi_part;
        part[i].first = lo - start;
        part[i].count = hi > lo ? hi - lo : 0;
        if (part[i].count == 0) part[i].first = 0;
        start += lens[i];
    }
    part[2].first += view->recent_first;
}

/* The kernels see rows in runs that lie in one page: what a run of rows
 * adds does not depend on where the runs break (scores row by row, f32
 * sums in row order into `out`), so neither does any bit of a result.  The
 * int8 values' kernel takes a tile's rows as pointers instead: its sums are
 * exact over the whole tile, in registers. */

static void scores_f32_paged(const kvc_kernels *kernels, size_t G, const kvc_paged *rows,
                             size_t first, size_t count, size_t d, const float *q, float sqrt_d,
                             float *z, size_t z_stride) {
    for (size_t done = 0; done < count;) {
        const size_t run = kvc_paged_run(rows, first + done, count - done);
        kernels->scores_f32(G, run, d, q, (const float *)(const void *)kvc_paged_at(rows, first + done),
                            sqrt_d, z + done, z_stride);
        done += run;
    }
}

/* Scores against quantized rows with `score` (their format's), a page's
 * run at a time. */
static void scores_quantized_paged(kvc_scores_q8_fn *score, size_t G, const kvc_paged *qrows,
                                   size_t first, size_t count, size_t d, const int16_t *codes,
                                   const float *scales, float *z, size_t z_stride) {
    for (size_t done = 0; done < count;) {
        const size_t run = kvc_paged_run(qrows, first + done, count - done);
        score(G, run, d, codes, scales, kvc_paged_at(qrows, first + done), z + done, z_stride);
        done += run;
    }
}

/* Value rows [first, first + count) of qrows, count <= the scratch's tile,
 * one after another as the sums read them: 4-bit rows unpacked with
 * `unpack` into the scratch's tile as int8 rows; int8 rows where they lie if
 * one page holds them all, else copied there from their pages (a tile spans
 * a few: the copy reads what the sums would read from memory anyway, and
 * lets their loop walk one pointer down rows that stay in cache). */
static const uint8_t *value_tile(kvc_unpack_q4_fn *unpack, const kvc_paged *qrows, size_t first,
                                 size_t count, size_t d, kvc_scratch *scratch) {
    if (!unpack) {
        if (kvc_paged_run(qrows, first, count) == count) return kvc_paged_at(qrows, first);
        kvc_paged_read(qrows, first, count, scratch->tile_q8);
        return scratch->tile_q8;
    }
    for (size_t done = 0; done < count;) {
        const size_t run = kvc_paged_run(qrows, first + done, count - done);
        unpack(run, d, kvc_paged_at(qrows, first + done), scratch->tile_q8 + done * kvc_q8_row_bytes(d));
        done += run;
    }
    return scratch->tile_q8;
}

static void weighted_sum_f32_paged(const kvc_kernels *kernels, size_t G, const kvc_paged *rows,
                                   size_t first, size_t count, size_t d, const float *w,
                                   size_t w_stride, float *out) {
    for (size_t done = 0; done < count;) {
        const size_t run = kvc_paged_run(rows, first + done, count - done);
        kernels->weighted_sum_f32(G, run, d, w + done, w_stride,
                                  (const float *)(const void *)kvc_paged_at(rows, first + done), out);
        done += run;
    }
}

/* The row scales of a tile vary by more than this factor: its weights need
 * their lo codes too (sum_quantized_values). */
#define KVC_VALUE_SCALE_SPREAD 8.0f
/* And by more than this one, more than hi and lo resolve: the tile's rows
 * are summed in f32 (rows of values ~1e14 beside rows of ~1, say). */
#define KVC_VALUE_SCALE_RANGE 4096.0f

/* out[g] += sum over the quantized value rows of w_p * codes_p, w_p = pi_p *
 * s_p, a tile of rows at a time (c_V is applied after); out is [G x d].  The
 * weights of a tile go to the integer dot products as i16 codes with one
 * scale per query (where widening every code to f32 cost two conversions and
 * a multiply-add per code and query), each off by at most 2^-16 of the
 * tile's largest weight.  Where the rows' scales are alike, that is about
 * 1e-4 of out (tests/c/test_attend.c measures it).  Where they are not (a
 * channel far above its field makes a few rows' scales large and their other
 * codes small), the rows of small scale -- small weights, large codes --
 * would lose up to a percent of what they add: then the weights go as two
 * code vectors, hi and what it leaves, lo, as queries do, and the sum is as
 * good as f32's -- while the scales span less than 2^12; beyond that (the
 * rows of large scale leave the others' weights under lo's last step) each
 * row is read as codes * scale and added in f32, in row order. */
static void sum_quantized_values(const kvc_kernels *kernels, size_t G, const float *pi,
                                 size_t pi_stride, const kvc_rows_view *values, size_t q_first,
                                 size_t q_count, size_t d, float *out, kvc_scratch *scratch) {
    const kvc_paged *qrows = values->qrows;
    kvc_unpack_q4_fn *unpack = kvc_traits_unpack(values->traits, kernels);
    kvc_weighted_sum_q8_fn *weighted_sum = values->traits->values(kernels);
    const size_t tile = scratch->tile_rows;
    int16_t *codes = scratch->tile_w16;
    float *code_scales = scratch->tile_w_scales, *scales = scratch->tile_scales;
    const size_t row_bytes = kvc_q8_row_bytes(d);
    for (size_t first = 0; first < q_count; first += tile) {
        const size_t rows = q_count - first < tile ? q_count - first : tile;
        const uint8_t *tile_rows = value_tile(unpack, qrows, q_first + first, rows, d, scratch);
        float min_s = kvc_q8_row_scale(tile_rows), max_s = min_s;
        for (size_t t = 0; t < rows; t++) {
            scales[t] = kvc_q8_row_scale(tile_rows + t * row_bytes);
            min_s = fminf(min_s, scales[t]);
            max_s = fmaxf(max_s, scales[t]);
        }
        if (max_s > KVC_VALUE_SCALE_RANGE * min_s) {
            for (size_t t = 0; t < rows; t++) {
                kernels->dequantize_row(d, kvc_q8_row_codes(tile_rows + t * row_bytes), scales[t], scratch->ones, scratch->row_f32);
                kernels->weighted_sum_f32(G, 1, d, pi + first + t, pi_stride, scratch->row_f32, out);
            }
            continue;
        }
        const int with_lo = max_s > KVC_VALUE_SCALE_SPREAD * min_s;
        for (size_t g = 0; g < G; g++) {
            float *w = scratch->tile_w + g * tile;
            const float *pi_g = pi + g * pi_stride + first;
            kernels->mul_f32(rows, pi_g, scales, w);
            /* A tile of tiny weights (rows of tiny values) would meet the
             * codes' scale floor: coded then at a power-of-two scale, as the
             * queries are, it keeps its 16 bits. */
            int e = 0;
            float s_hi = kernels->quantize_query(rows, w, KVC_Q16_CODE_MAX, codes + g * tile);
            if (s_hi <= KVC_Q8_SCALE_FLOOR) {
                e = exponent_of_max(w, rows);
                scale_by_pow2(w, w, rows, e);
                s_hi = kernels->quantize_query(rows, w, KVC_Q16_CODE_MAX, codes + g * tile);
            }
            code_scales[g] = ldexpf(s_hi, e);
            if (!with_lo) continue;
            for (size_t t = 0; t < rows; t++) w[t] = w[t] - (float)codes[g * tile + t] * s_hi;
            code_scales[G + g] = ldexpf(kernels->quantize_query(rows, w, KVC_Q16_CODE_MAX, codes + (G + g) * tile), e);
        }
        weighted_sum(G, rows, d, codes, tile, code_scales, tile_rows, out);
        if (with_lo) weighted_sum(G, rows, d, codes + G * tile, tile, code_scales + G, tile_rows, out);
    }
}

void kvc_attend_segment(const kvc_queries *queries, size_t first_query, size_t G,
                        const kvc_rows_view *keys, const kvc_rows_view *values, size_t d,
                        size_t first, size_t count, float *z, size_t z_stride,
                        const kvc_partials *partials, kvc_scratch *scratch) {
    const kvc_kernels *kernels = kvc_kernels_active();
    const float sqrt_d = sqrtf((float)d);
    float *out = scratch->out;
    const int16_t *codes = queries->codes + first_query * d;
    const float *code_scales = queries->code_scales + first_query;
    rows_range part[3];

    /* Scores in row order: f32 rows, quantized rows, the residual window. */
    split_rows(keys, first, count, part);
    float *z_at = z;
    scores_f32_paged(kernels, G, keys->rows, part[0].first, part[0].count, d,
                     queries->q + first_query * d, sqrt_d, z_at, z_stride);
    z_at += part[0].count;
    if (part[1].count)
        scores_quantized_paged(keys->traits->scores(kernels), G, keys->qrows, part[1].first,
                               part[1].count, d, codes, code_scales, z_at, z_stride);
    z_at += part[1].count;
    scores_f32_paged(kernels, G, keys->recent, part[2].first, part[2].count, d,
                     queries->q + first_query * d, sqrt_d, z_at, z_stride);
    kernels->softmax(G, count, z, z_stride, scratch->max, scratch->sum);
    /* Values: the quantized rows' sum (times the field), then the f32 rows',
     * then the residual window's, each in row order. */
    memset(out, 0, G * d * sizeof(float));
    split_rows(values, first, count, part);
    const size_t q_at = part[0].count, recent_at = part[0].count + part[1].count;
    if (part[1].count) {
        sum_quantized_values(kernels, G, z + q_at, z_stride, values, part[1].first, part[1].count, d,
                             out, scratch);
        for (size_t g = 0; g < G; g++) kernels->mul_f32(d, out + g * d, values->field, out + g * d);
    }
    weighted_sum_f32_paged(kernels, G, values->rows, part[0].first, part[0].count, d, z, z_stride, out);
    weighted_sum_f32_paged(kernels, G, values->recent, part[2].first, part[2].count, d, z + recent_at,
                           z_stride, out);
    /* Query g's segments lie `stride` apart, so that a query's are in a row. */
    for (size_t g = 0; g < G; g++) {
        partials->max[g * partials->stride] = scratch->max[g];
        partials->sum[g * partials->stride] = scratch->sum[g];
        memcpy(partials->out + g * partials->stride * d, out + g * d, d * sizeof(float));
    }
}

void kvc_merge_segments(size_t S, size_t d, const float *max, const float *sum,
                        const float *outs, float *weights, float *out) {
    const kvc_kernels *kernels = kvc_kernels_active();
    memset(out, 0, d * sizeof(float));
    if (S == 0) return;
    kernels->softmax_merge(S, max, sum, weights);
    kernels->weighted_sum_f32(1, S, d, weights, S, outs, out);
}

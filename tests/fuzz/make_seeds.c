/*
 * make_seeds.c -- writes the seed corpus of the fuzz harnesses:
 *   corpus/snapshot/  real snapshots of small layers and models: every
 *                     mode, empty, field unfrozen and frozen, evicted under
 *                     max_rows, linear (plain and vmf_phase), recurrent
 *                     (conv, delta, Mamba-2, rows beside a Mamba-2 state),
 *                     hybrid models;
 *   corpus/ops/       scripted call sequences in the format of ops_format.h,
 *                     one story each (the file name says which);
 *   corpus/gguf/      small GGUF files of each version (the C tests'
 *                     fixture: every value type, arrays of arrays, tensors
 *                     of known and unknown types, their data), one with a
 *                     larger alignment, and empty ones.
 * Usage: kvc_fuzz_seeds <corpus directory>  (node scripts/fuzz.mjs --seeds).
 * It writes only its own files: the inputs the fuzzer found and the corpus
 * keeps (regress-*) stay as they are.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_builder.h"
#include "kvcache.h"
#include "ops_format.h"

static const char *corpus_dir;

static void write_file(const char *surface, const char *name, const uint8_t *bytes, size_t size) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", corpus_dir, surface, name);
    FILE *file = fopen(path, "wb");
    if (!file || fwrite(bytes, 1, size, file) != size || fclose(file) != 0) {
        fprintf(stderr, "kvc_fuzz_seeds: cannot write %s\n", path);
        exit(1);
    }
}

static void must(kvc_status status, const char *what) {
    if (status != KVC_OK) {
        fprintf(stderr, "kvc_fuzz_seeds: %s: %s\n", what, kvc_status_name(status));
        exit(1);
    }
}

/* ---- snapshot seeds ---- */

static const char *const mode_names[KVC_MODE_COUNT] = {"f32", "q8", "q8k", "q8v", "q4",
                                                       "q4k", "q4v", "q8k-q4v", "q4k-q8v"};

/* Deterministic values with a few outlier channels, as keys have. */
static float value_at(size_t position, size_t h, size_t j, int is_values) {
    const unsigned x = (unsigned)(position * 7919 + h * 104729 + j * 1299709 + (size_t)is_values * 15485863);
    const float base = (float)((x >> 3) % 2001) / 1000.0f - 1.0f;
    return j % 5 == 1 && !is_values ? base * 12.0f : base;
}

/* Appends positions [first, first + count) to a full layer; head 1 skips
 * every third position. */
static void append_positions(kvc_layer *layer, size_t first, size_t count) {
    const size_t H = kvc_layer_num_kv_heads(layer), d = kvc_layer_head_dim(layer);
    float *k = malloc(H * d * sizeof(float)), *v = malloc(H * d * sizeof(float));
    uint8_t *alive = malloc(H);
    if (!k || !v || !alive) exit(1);
    for (size_t p = first; p < first + count; p++) {
        for (size_t h = 0; h < H; h++) {
            alive[h] = !(h == 1 && p % 3 == 0);
            for (size_t j = 0; j < d; j++) {
                k[h * d + j] = value_at(p, h, j, 0);
                v[h * d + j] = value_at(p, h, j, 1);
            }
        }
        must(kvc_layer_append(layer, k, v, alive), "append");
    }
    free(k);
    free(v);
    free(alive);
}

/* Every head's attention at one query, its probabilities added to imp. */
static void attend_and_accumulate(kvc_layer *layer) {
    const size_t H = kvc_layer_num_kv_heads(layer), d = kvc_layer_head_dim(layer);
    const size_t L = kvc_layer_seq_len(layer);
    float *q = malloc(H * d * sizeof(float)), *out = malloc(H * d * sizeof(float));
    float *probs = malloc((H * L + 1) * sizeof(float)), *sum = calloc(L + 1, sizeof(float));
    if (!q || !out || !probs || !sum) exit(1);
    for (size_t i = 0; i < H * d; i++) q[i] = value_at(L, i / d, i % d, 0);
    must(kvc_layer_attend_heads(layer, q, H, out, probs), "attend_heads");
    for (size_t i = 0; i < H * L; i++) sum[i % L] += probs[i];
    must(kvc_layer_accumulate_imp(layer, sum, L), "accumulate_imp");
    free(q);
    free(out);
    free(probs);
    free(sum);
}

static kvc_layer *full_layer(size_t H, size_t d, kvc_mode mode, size_t positions) {
    kvc_layer *layer;
    must(kvc_layer_create(H, d, mode, &layer), "create");
    append_positions(layer, 0, positions);
    return layer;
}

enum { LINEAR_H = 2, LINEAR_F = 4, LINEAR_DV = 3 };

static kvc_layer *linear_layer(size_t steps, int phase) {
    const size_t H = LINEAR_H, F = LINEAR_F, dv = LINEAR_DV;
    kvc_layer *layer;
    must(kvc_layer_create_linear(H, F, dv, phase ? 0.25 : 0.0, &layer), "create_linear");
    float decay[LINEAR_H * LINEAR_F], key[LINEAR_H * LINEAR_F], query[LINEAR_H * LINEAR_F];
    float v[LINEAR_H * LINEAR_DV], out[LINEAR_H * LINEAR_DV];
    for (size_t s = 0; s < steps; s++) {
        for (size_t i = 0; i < H * F; i++) {
            decay[i] = 0.9f;
            key[i] = value_at(s, i, 0, 0);
            query[i] = value_at(s, i, 1, 1);
        }
        for (size_t i = 0; i < H * dv; i++) v[i] = value_at(s, i, 2, 1);
        must(phase ? kvc_layer_linear_step_phase(layer, decay, key, query, v, out)
                   : kvc_layer_linear_step(layer, decay, key, query, v, out),
             "linear_step");
    }
    return layer;
}

/* A conv (value_heads 0) or delta layer of small geometry after `steps` steps of values_at inputs. */
static kvc_layer *recurrent_layer(size_t value_heads, size_t steps) {
    enum { CHANNELS = 6, KEY_HEADS = 1, KEY_DIM = 2, VALUE_DIM = 2, TAPS = 3 };
    kvc_layer *layer;
    must(value_heads ? kvc_layer_create_delta(KEY_HEADS, value_heads, KEY_DIM, VALUE_DIM, TAPS, &layer)
                     : kvc_layer_create_conv(CHANNELS, TAPS, &layer),
         "create recurrent");
    const size_t C = kvc_layer_channels(layer);
    float x[16], w[16 * TAPS], alpha[4], beta[4], out[16];
    for (size_t i = 0; i < C * TAPS; i++) w[i] = value_at(0, i, 3, 1);
    for (size_t s = 0; s < steps; s++) {
        for (size_t i = 0; i < C; i++) x[i] = value_at(s, i, 0, 1);
        for (size_t h = 0; h < value_heads; h++) {
            alpha[h] = 0.9f;
            beta[h] = 0.5f;
        }
        must(value_heads ? kvc_layer_delta_n(layer, 1, x, w, alpha, beta, 1e-6f, out) : kvc_layer_conv_n(layer, 1, x, w, out),
             "recurrent step");
    }
    return layer;
}

enum { SSM_HEADS = 2, SSM_HEAD_DIM = 2, SSM_GROUPS = 1, SSM_STATE = 2, SSM_TAPS = 3 };

/* Steps [first, first + count) of values_at inputs through a Mamba-2 state
 * (a Mamba-2 layer's, or one beside rows). */
static void mamba2_steps(kvc_layer *layer, size_t first, size_t count) {
    const size_t C = kvc_layer_channels(layer);
    float x[16], w[16 * SSM_TAPS], bias[16], dt[SSM_HEADS], dt_bias[SSM_HEADS], a[SSM_HEADS], d[SSM_HEADS];
    float out[SSM_HEADS * SSM_HEAD_DIM];
    for (size_t i = 0; i < C * SSM_TAPS; i++) w[i] = value_at(0, i, 3, 1);
    for (size_t i = 0; i < C; i++) bias[i] = value_at(1, i, 3, 1);
    for (size_t h = 0; h < SSM_HEADS; h++) {
        dt_bias[h] = value_at(2, h, 3, 1);
        a[h] = -1.0f - (float)h;
        d[h] = 0.5f;
    }
    for (size_t s = first; s < first + count; s++) {
        for (size_t i = 0; i < C; i++) x[i] = value_at(s, i, 0, 1);
        for (size_t h = 0; h < SSM_HEADS; h++) dt[h] = value_at(s, h, 1, 1);
        must(kvc_layer_mamba2_n(layer, 1, x, w, bias, dt, dt_bias, a, d, out), "mamba2 step");
    }
}

static kvc_layer *mamba2_layer(size_t steps) {
    kvc_layer *layer;
    must(kvc_layer_create_mamba2(SSM_HEADS, SSM_HEAD_DIM, SSM_GROUPS, SSM_STATE, SSM_TAPS, &layer), "create_mamba2");
    mamba2_steps(layer, 0, steps);
    return layer;
}

/* A layer of rows (H heads of d, `mode`) and a Mamba-2 state, at `positions`. */
static kvc_layer *attn_mamba2_layer(size_t H, size_t d, kvc_mode mode, size_t positions) {
    kvc_layer *layer;
    must(kvc_layer_create_attn_mamba2(H, d, mode, SSM_HEADS, SSM_HEAD_DIM, SSM_GROUPS, SSM_STATE, SSM_TAPS, &layer),
         "create_attn_mamba2");
    append_positions(layer, 0, positions);
    mamba2_steps(layer, 0, positions);
    return layer;
}

static void write_layer(const char *name, kvc_layer *layer) {
    const size_t size = kvc_layer_snapshot_size(layer);
    uint8_t *bytes = malloc(size);
    if (!bytes) exit(1);
    must(kvc_layer_serialize(layer, bytes, size), "serialize");
    write_file("snapshot", name, bytes, size);
    free(bytes);
    kvc_layer_free(layer);
}

static void write_model(const char *name, kvc_layer **layers, size_t count) {
    kvc_model *model;
    must(kvc_model_create(layers, count, &model), "model_create");
    const size_t size = kvc_model_snapshot_size(model);
    uint8_t *bytes = malloc(size);
    if (!bytes) exit(1);
    must(kvc_model_serialize(model, bytes, size), "model_serialize");
    write_file("snapshot", name, bytes, size);
    free(bytes);
    kvc_model_free(model);
}

static void snapshot_seeds(void) {
    char name[64];
    for (int mode = 0; mode < KVC_MODE_COUNT; mode++) {
        snprintf(name, sizeof name, "layer-%s-empty", mode_names[mode]);
        write_layer(name, full_layer(2, 4, (kvc_mode)mode, 0));
        snprintf(name, sizeof name, "layer-%s-10-unfrozen", mode_names[mode]);
        write_layer(name, full_layer(2, 4, (kvc_mode)mode, 10));
        snprintf(name, sizeof name, "layer-%s-70-frozen", mode_names[mode]);
        write_layer(name, full_layer(2, 4, (kvc_mode)mode, 70));
        /* 80 positions, heavy hitters kept under max_rows 24. */
        kvc_layer *evicted = full_layer(3, 2, (kvc_mode)mode, 80);
        attend_and_accumulate(evicted);
        must(kvc_layer_set_max_rows(evicted, 24, 4, 8), "set_max_rows");
        append_positions(evicted, 80, 2);
        snprintf(name, sizeof name, "layer-%s-evicted-max-rows", mode_names[mode]);
        write_layer(name, evicted);
    }
    write_layer("layer-linear-5-steps", linear_layer(5, 0));
    write_layer("layer-linear-phase-3-steps", linear_layer(3, 1));
    write_layer("layer-conv-4-steps", recurrent_layer(0, 4));
    write_layer("layer-delta-5-steps", recurrent_layer(2, 5));
    write_layer("layer-mamba2-5-steps", mamba2_layer(5));
    write_layer("layer-attn-mamba2-q8-70-frozen", attn_mamba2_layer(2, 4, KVC_MODE_Q8, 70));
    write_layer("layer-attn-mamba2-q4-10", attn_mamba2_layer(2, 4, KVC_MODE_Q4, 10));
    kvc_layer *falcon_like[2] = {attn_mamba2_layer(2, 4, KVC_MODE_F32, 3), attn_mamba2_layer(1, 4, KVC_MODE_Q8, 3)};
    write_model("model-attn-mamba2-3", falcon_like, 2);
    kvc_layer *lfm2_like[3] = {recurrent_layer(0, 3), full_layer(2, 4, KVC_MODE_F32, 3), recurrent_layer(2, 3)};
    write_model("model-conv-full-delta-3", lfm2_like, 3);

    kvc_layer *hybrid[3] = {full_layer(2, 4, KVC_MODE_Q8, 66), full_layer(1, 4, KVC_MODE_F32, 66),
                            linear_layer(66, 1)};
    write_model("model-hybrid-66-frozen", hybrid, 3);
    kvc_layer *small[2] = {full_layer(1, 2, KVC_MODE_Q8V, 3), full_layer(2, 2, KVC_MODE_Q8K, 3)};
    write_model("model-two-full-3", small, 2);
    kvc_layer *evicted[2] = {full_layer(2, 2, KVC_MODE_Q8, 72), full_layer(1, 3, KVC_MODE_F32, 72)};
    for (int i = 0; i < 2; i++) {
        attend_and_accumulate(evicted[i]);
        must(kvc_layer_evict(evicted[i], 16, 2, 6), "evict");
    }
    write_model("model-evicted-72", evicted, 2);
}

/* ---- ops seeds: scripts in the format of ops_format.h ---- */

typedef struct script {
    uint8_t bytes[2048];
    size_t len;
} script;

enum { PALETTE_ONE = 2, PALETTE_DENORMAL = 7, PALETTE_1E30 = 18, PALETTE_FLT_MAX = 21, PALETTE_NAN = 23,
       PALETTE_INF = 25 };

static void put(script *s, unsigned byte) {
    if (s->len == sizeof s->bytes) exit(1);
    s->bytes[s->len++] = (uint8_t)byte;
}

static void put_u16(script *s, unsigned x) {
    put(s, x & 0xff);
    put(s, x >> 8);
}

static void world(script *s, unsigned layers) {
    put(s, layers - 1);
}

static void full(script *s, kvc_mode mode, unsigned H, unsigned d) {
    put(s, mode);
    put(s, H - 1);
    put(s, d - 1);
}

static void linear(script *s, unsigned H, unsigned F, unsigned dv, unsigned phase_mass) {
    put(s, KVC_MODE_COUNT);
    put(s, H - 1);
    put(s, F - 1);
    put(s, dv - 1);
    put(s, phase_mass);
}

static void call(script *s, enum fuzz_op op, unsigned target) {
    put(s, op);
    put(s, target);
}

/* A call whose nth allocation fails (and every later one when persistent). */
static void call_failing(script *s, enum fuzz_op op, unsigned target, unsigned nth, int persistent) {
    put(s, 0x80 | op);
    put(s, (nth - 1) | (persistent ? 0x80 : 0));
    put(s, target);
}

/* A value block of a seeded kind, or ZERO; no injection. */
static void values(script *s, enum fuzz_values kind, unsigned param, unsigned seed) {
    put(s, kind + FUZZ_VALUES_COUNT * param);
    if (kind != FUZZ_VALUES_ZERO) put(s, seed);
    put(s, 0);
}

/* ... with the palette value `palette` at element `at`. */
static void values_with(script *s, enum fuzz_values kind, unsigned param, unsigned seed, unsigned at,
                        unsigned palette) {
    put(s, kind + FUZZ_VALUES_COUNT * param);
    if (kind != FUZZ_VALUES_ZERO) put(s, seed);
    put(s, 1);
    put_u16(s, at);
    put(s, palette);
}

static void normal(script *s, unsigned seed) {
    values(s, FUZZ_VALUES_NORMAL, 16, seed); /* N(0, 1) */
}

/* append_n of n positions, normal values: every head alive (mask NULL) or,
 * masked, each head dead with probability 1/4. */
static void script_append_n(script *s, unsigned target, unsigned n, unsigned seed, int masked) {
    call(s, FUZZ_OP_APPEND_N, target);
    put(s, n);
    if (masked) {
        put(s, FUZZ_MASK_RANDOM + 4 * 1);
        put(s, seed);
    } else {
        put(s, FUZZ_MASK_NULL);
    }
    normal(s, seed);
    normal(s, seed + 1);
    put(s, 0);
}

static void append_n(script *s, unsigned target, unsigned n, unsigned seed) {
    script_append_n(s, target, n, seed, 0);
}

static void append_n_masked(script *s, unsigned target, unsigned n, unsigned seed) {
    script_append_n(s, target, n, seed, 1);
}

static void attend(script *s, unsigned target, unsigned head, unsigned seed) {
    call(s, FUZZ_OP_ATTEND, target);
    put(s, head);
    normal(s, seed);
    put(s, 0);
}

static void attend_every_way(script *s, unsigned target, unsigned seed) {
    attend(s, target, 0, seed);
    call(s, FUZZ_OP_ATTEND_GROUP, target);
    put(s, 2);
    put(s, 0);
    normal(s, seed + 1);
    put(s, 0);
    call(s, FUZZ_OP_ATTEND_HEADS, target);
    put(s, 1); /* G = 2 */
    normal(s, seed + 2);
    put(s, 0);
    call(s, FUZZ_OP_ATTEND_CAUSAL, target);
    put(s, 3);
    put(s, 0);
    normal(s, seed + 3);
    put(s, 0);
}

static void accumulate(script *s, unsigned target, unsigned seed) {
    call(s, FUZZ_OP_ACCUMULATE_IMP, target);
    put(s, 2); /* the right length */
    values(s, FUZZ_VALUES_UNIT, 0, seed);
}

static void three(script *s, enum fuzz_op op, unsigned target, unsigned a, unsigned b, unsigned c) {
    call(s, op, target);
    put(s, a);
    put(s, b);
    put(s, c);
}

static void one(script *s, enum fuzz_op op, unsigned target, unsigned a) {
    call(s, op, target);
    put(s, a);
}

static void linear_steps(script *s, unsigned target, unsigned steps, int phase, unsigned seed) {
    for (unsigned i = 0; i < steps; i++) {
        call(s, phase ? FUZZ_OP_LINEAR_STEP_PHASE : FUZZ_OP_LINEAR_STEP, target);
        put(s, 0); /* a decay */
        values(s, FUZZ_VALUES_UNIT, 0, seed + i);
        normal(s, seed + i + 1);
        normal(s, seed + i + 2);
        normal(s, seed + i + 3);
    }
}

static void write_script(const char *name, const script *s) {
    write_file("ops", name, s->bytes, s->len);
}

static void ops_seeds(void) {
    script s = {0};
    world(&s, 1);
    full(&s, KVC_MODE_F32, 2, 8);
    append_n(&s, 0, 12, 1);
    attend_every_way(&s, 0, 10);
    accumulate(&s, 0, 20);
    three(&s, FUZZ_OP_EVICT, 0, 8, 2, 3);
    three(&s, FUZZ_OP_EVICTION_PLAN, 0, 6, 1, 2), put(&s, 2);
    one(&s, FUZZ_OP_SNAPSHOT, 0, 0);
    call(&s, FUZZ_OP_CLONE, 0);
    append_n(&s, 0, 1, 30);
    one(&s, FUZZ_OP_TRUNCATE, 0, 2);
    write_script("f32-attend-evict-snapshot", &s);

    s = (script){0};
    world(&s, 1);
    full(&s, KVC_MODE_Q8, 3, 8);
    append_n_masked(&s, 0, 70, 2);
    attend_every_way(&s, 0, 11);
    one(&s, FUZZ_OP_TRUNCATE, 0, 10); /* back to 60: the field unfreezes */
    append_n_masked(&s, 0, 5, 3);
    one(&s, FUZZ_OP_SNAPSHOT, 0, 3), put_u16(&s, 700); /* a flipped byte, a cut */
    attend_every_way(&s, 0, 12);
    write_script("q8-window-masks-truncate", &s);

    s = (script){0};
    world(&s, 1);
    full(&s, KVC_MODE_Q8K, 2, 8);
    three(&s, FUZZ_OP_SET_MAX_ROWS, 0, 40, 4, 8);
    append_n(&s, 0, 30, 4);
    accumulate(&s, 0, 21);
    append_n(&s, 0, 30, 5); /* past max_rows: evicts first */
    accumulate(&s, 0, 22);
    append_n(&s, 0, 16, 6);
    one(&s, FUZZ_OP_SNAPSHOT, 0, 0);
    call(&s, FUZZ_OP_SLIDE_WINDOW, 0), put(&s, 20), put(&s, 4);
    attend_every_way(&s, 0, 13);
    write_script("q8k-max-rows-eviction", &s);

    s = (script){0};
    world(&s, 1);
    full(&s, KVC_MODE_Q8V, 2, 8);
    append_n(&s, 0, 62, 7);
    call(&s, FUZZ_OP_BEGIN_VERIFY, 0);
    append_n(&s, 0, 4, 8); /* drafts across the window */
    attend_every_way(&s, 0, 14);
    one(&s, FUZZ_OP_ACCEPT, 0, 1);
    one(&s, FUZZ_OP_SNAPSHOT, 0, 0);
    call(&s, FUZZ_OP_BEGIN_VERIFY, 0);
    append_n(&s, 0, 1, 9);
    one(&s, FUZZ_OP_ACCEPT, 0, 0);
    write_script("q8v-verify-across-window", &s);

    /* 4 bits: past the residual window and the rollback copies (32 + 64 +
     * 64 rows from the window on), truncated within them and past them,
     * a verify, evicted, restored. */
    s = (script){0};
    world(&s, 2);
    full(&s, KVC_MODE_Q4, 2, 40);
    full(&s, KVC_MODE_Q8K_Q4V, 1, 17);
    for (unsigned i = 0; i < 5; i++) append_n_masked(&s, 0, 50, 20 + i);
    append_n(&s, 1, 240, 26);
    attend_every_way(&s, 0, 15);
    one(&s, FUZZ_OP_TRUNCATE, 0, 40);
    one(&s, FUZZ_OP_TRUNCATE, 0, 90);
    attend_every_way(&s, 0, 16);
    call(&s, FUZZ_OP_BEGIN_VERIFY, 1);
    append_n(&s, 1, 5, 27);
    one(&s, FUZZ_OP_ACCEPT, 1, 2);
    accumulate(&s, 1, 23);
    three(&s, FUZZ_OP_EVICT, 1, 100, 4, 20);
    one(&s, FUZZ_OP_SNAPSHOT, 0, 0);
    one(&s, FUZZ_OP_SNAPSHOT, 1, 0);
    attend_every_way(&s, 1, 17);
    write_script("q4-window-rollback-evict", &s);

    s = (script){0};
    world(&s, 1);
    full(&s, KVC_MODE_F32, 2, 4);
    call(&s, FUZZ_OP_APPEND, 0); /* NaN in a live key: refused */
    put(&s, FUZZ_MASK_NULL);
    values_with(&s, FUZZ_VALUES_NORMAL, 16, 1, 2, PALETTE_NAN);
    normal(&s, 2);
    put(&s, 0);
    call(&s, FUZZ_OP_APPEND, 0); /* +Inf in a dead head's value: not read */
    put(&s, FUZZ_MASK_BYTES), put(&s, 7), put(&s, 0);
    normal(&s, 3);
    values_with(&s, FUZZ_VALUES_NORMAL, 16, 4, 5, PALETTE_INF);
    put(&s, 0);
    call(&s, FUZZ_OP_APPEND_N, 0); /* FLT_MAX keys, 1e30 values */
    put(&s, 3), put(&s, FUZZ_MASK_NULL);
    values(&s, FUZZ_VALUES_CONST, 0, PALETTE_FLT_MAX);
    values(&s, FUZZ_VALUES_CONST, 0, PALETTE_1E30);
    put(&s, 0);
    append_n(&s, 0, 4, 5);
    attend(&s, 0, 1, 15);
    call(&s, FUZZ_OP_ACCUMULATE_IMP, 0); /* a negative probability: refused */
    put(&s, 2);
    values(&s, FUZZ_VALUES_NORMAL, 16, 6);
    for (int i = 0; i < 4; i++) { /* 1e38 each: imp overflows to +Inf */
        call(&s, FUZZ_OP_ACCUMULATE_IMP, 0);
        put(&s, 2);
        values(&s, FUZZ_VALUES_CONST, 0, 20);
    }
    three(&s, FUZZ_OP_EVICT, 0, 4, 1, 1);
    one(&s, FUZZ_OP_SNAPSHOT, 0, 1), put_u16(&s, 30);
    write_script("odd-values-nan-inf-huge", &s);

    s = (script){0};
    world(&s, 1);
    full(&s, KVC_MODE_Q8, 1, 4);
    call(&s, FUZZ_OP_APPEND_N, 0);
    put(&s, 70), put(&s, FUZZ_MASK_NULL);
    values(&s, FUZZ_VALUES_CONST, 0, PALETTE_DENORMAL);
    values(&s, FUZZ_VALUES_ZERO, 0, 0);
    put(&s, 0);
    call(&s, FUZZ_OP_APPEND_N, 0);
    put(&s, 3), put(&s, FUZZ_MASK_NULL);
    normal(&s, 7);
    values(&s, FUZZ_VALUES_ZERO, 0, 0);
    put(&s, 0);
    attend_every_way(&s, 0, 16);
    one(&s, FUZZ_OP_SNAPSHOT, 0, 2), put_u16(&s, 100);
    write_script("q8-denormals-and-zeros", &s);

    s = (script){0};
    world(&s, 2);
    linear(&s, 2, 4, 3, 1);
    full(&s, KVC_MODE_F32, 1, 4);
    linear_steps(&s, 0, 3, 0, 40);
    linear_steps(&s, 0, 1, 1, 50);
    call(&s, FUZZ_OP_BEGIN_VERIFY, 0);
    linear_steps(&s, 0, 2, 1, 60);
    one(&s, FUZZ_OP_ACCEPT, 0, 1);
    one(&s, FUZZ_OP_SNAPSHOT, 0, 0);
    call(&s, FUZZ_OP_CLONE, 0);
    call(&s, FUZZ_OP_LINEAR_STEP, 0); /* a NaN decay: refused */
    put(&s, 0);
    values_with(&s, FUZZ_VALUES_UNIT, 0, 1, 3, PALETTE_NAN);
    normal(&s, 1), normal(&s, 2), normal(&s, 3);
    write_script("linear-steps-verify", &s);

    s = (script){0};
    world(&s, 3);
    full(&s, KVC_MODE_Q8, 2, 4);
    full(&s, KVC_MODE_F32, 1, 4);
    linear(&s, 1, 2, 2, 0);
    append_n(&s, 0, 66, 8);
    append_n(&s, 1, 66, 9);
    linear_steps(&s, 2, 66, 0, 70);
    one(&s, FUZZ_OP_MODEL_CREATE, 0, 0);
    call(&s, FUZZ_OP_MODEL_BEGIN_VERIFY, 0);
    append_n(&s, 0, 2, 10);
    append_n(&s, 1, 2, 11);
    linear_steps(&s, 2, 2, 0, 80);
    one(&s, FUZZ_OP_MODEL_ACCEPT, 0, 1);
    one(&s, FUZZ_OP_MODEL_SNAPSHOT, 0, 0);
    call(&s, FUZZ_OP_MODEL_CLONE, 0);
    three(&s, FUZZ_OP_MODEL_EVICT, 0, 20, 2, 4);
    one(&s, FUZZ_OP_MODEL_TRUNCATE, 0, 3); /* a linear layer: refused */
    call(&s, FUZZ_OP_MODEL_CLEAR, 0);
    write_script("model-hybrid-verify-snapshot", &s);

    s = (script){0};
    world(&s, 2);
    full(&s, KVC_MODE_F32, 2, 4);
    full(&s, KVC_MODE_Q8, 1, 8);
    append_n(&s, 0, 70, 12);
    append_n(&s, 1, 70, 13);
    one(&s, FUZZ_OP_MODEL_CREATE, 0, 0);
    one(&s, FUZZ_OP_MODEL_TRUNCATE, 0, 10);
    one(&s, FUZZ_OP_MODEL_SNAPSHOT, 0, 0);
    append_n(&s, 0, 1, 14); /* layer 0 a position ahead: a runner mid-step */
    one(&s, FUZZ_OP_MODEL_SNAPSHOT, 0, 0);
    call(&s, FUZZ_OP_MODEL_CLONE, 0);
    one(&s, FUZZ_OP_MODEL_CREATE, 0, 1); /* already in a model: refused */
    write_script("model-full-truncate-mid-step", &s);

    s = (script){0};
    world(&s, 2);
    full(&s, KVC_MODE_Q8, 2, 4);
    full(&s, KVC_MODE_F32, 2, 4);
    for (unsigned nth = 1; nth <= 4; nth++) {
        call_failing(&s, FUZZ_OP_APPEND_N, 0, nth, nth % 2);
        put(&s, 20), put(&s, FUZZ_MASK_NULL);
        normal(&s, nth), normal(&s, nth + 1);
        put(&s, 0);
    }
    append_n(&s, 0, 60, 15);
    append_n(&s, 1, 60, 16);
    call_failing(&s, FUZZ_OP_CLONE, 0, 2, 0);
    call_failing(&s, FUZZ_OP_SNAPSHOT, 0, 3, 1), put(&s, 0);
    call_failing(&s, FUZZ_OP_ATTEND, 0, 1, 0), put(&s, 0), normal(&s, 3), put(&s, 1);
    call_failing(&s, FUZZ_OP_EVICT, 1, 1, 0), put(&s, 10), put(&s, 2), put(&s, 2);
    call_failing(&s, FUZZ_OP_MODEL_CREATE, 0, 2, 0), put(&s, 0);
    one(&s, FUZZ_OP_MODEL_CREATE, 0, 0);
    call_failing(&s, FUZZ_OP_MODEL_CLONE, 0, 3, 1);
    call_failing(&s, FUZZ_OP_MODEL_SNAPSHOT, 0, 2, 0), put(&s, 0);
    write_script("allocation-failures", &s);

    s = (script){0};
    world(&s, 1);
    full(&s, KVC_MODE_F32, 1, 1);
    for (unsigned which = 0; which < 16; which++) {
        one(&s, FUZZ_OP_CREATE_INVALID, 0, which);
        if (which == 4 || which == 14) put(&s, 9); /* a mode byte; a palette byte */
    }
    write_script("create-refusals", &s);

    s = (script){0};
    world(&s, 2);
    full(&s, KVC_MODE_Q8K, 2, 4);
    linear(&s, 1, 3, 2, 2);
    append_n(&s, 0, 5, 17);
    one(&s, FUZZ_OP_TRUNCATE, 1, 1);                  /* linear: kind */
    attend(&s, 1, 0, 18);                               /* linear: kind */
    linear_steps(&s, 0, 1, 0, 90);                      /* full: kind */
    linear_steps(&s, 1, 1, 1, 91);                      /* odd features: refused */
    one(&s, FUZZ_OP_ACCEPT, 0, 0);                      /* not verifying */
    three(&s, FUZZ_OP_EVICT, 0, 0, 0, 0);               /* budget 0 */
    call(&s, FUZZ_OP_SLIDE_WINDOW, 0), put(&s, 2), put(&s, 3); /* sinks above the window */
    three(&s, FUZZ_OP_EVICTION_PLAN, 0, 3, 1, 1), put(&s, 0);  /* kept too short */
    three(&s, FUZZ_OP_EVICTION_PLAN, 0, 3, 1, 1), put(&s, 1);  /* no count */
    three(&s, FUZZ_OP_SET_MAX_ROWS, 0, 255, 0, 0);      /* above KVC_MAX_POSITIONS */
    call(&s, FUZZ_OP_ACCUMULATE_IMP, 0), put(&s, 0), values(&s, FUZZ_VALUES_UNIT, 0, 1); /* length */
    attend(&s, 0, 2, 19);                               /* head out of range */
    call(&s, FUZZ_OP_ATTEND_GROUP, 0), put(&s, 0), put(&s, 0), normal(&s, 1), put(&s, 0); /* G = 0 */
    call(&s, FUZZ_OP_ATTEND_HEADS, 0), put(&s, 7), normal(&s, 1), put(&s, 0); /* not a multiple */
    call(&s, FUZZ_OP_ATTEND_CAUSAL, 0), put(&s, 6), put(&s, 0), normal(&s, 1), put(&s, 0); /* m > L */
    call(&s, FUZZ_OP_BEGIN_VERIFY, 0);
    call(&s, FUZZ_OP_BEGIN_VERIFY, 0);                  /* verifying already */
    one(&s, FUZZ_OP_TRUNCATE, 0, 1);                    /* verifying */
    call(&s, FUZZ_OP_CLONE, 0);                         /* verifying */
    one(&s, FUZZ_OP_SNAPSHOT, 0, 0);                    /* verifying */
    one(&s, FUZZ_OP_ACCEPT, 0, 255);                    /* above the drafts */
    call(&s, FUZZ_OP_CLEAR, 0);                         /* ends the verify */
    write_script("refusals", &s);

    /* Forks sharing pages: writes on either side (appends into a shared
     * partial page, imp, eviction, a verify under max_rows, a freeze),
     * swaps, and the copies failing midway. */
    s = (script){0};
    world(&s, 2);
    full(&s, KVC_MODE_Q8, 3, 8);
    full(&s, KVC_MODE_F32, 2, 4);
    append_n_masked(&s, 0, 40, 30);
    one(&s, FUZZ_OP_FORK, 0, 0);
    append_n(&s, 0, 40, 31);                            /* crosses the window: the field freezes */
    one(&s, FUZZ_OP_FORK, 0, 1);                        /* swap: the fork goes on, unfrozen */
    append_n(&s, 0, 60, 32);
    one(&s, FUZZ_OP_FORK, 0, 0);
    accumulate(&s, 0, 33);
    three(&s, FUZZ_OP_EVICT, 0, 50, 4, 8);
    one(&s, FUZZ_OP_FORK, 0, 1);
    one(&s, FUZZ_OP_TRUNCATE, 0, 70);
    append_n(&s, 0, 5, 34);
    append_n(&s, 1, 70, 35);
    one(&s, FUZZ_OP_FORK, 1, 0);
    three(&s, FUZZ_OP_SET_MAX_ROWS, 1, 60, 2, 4);
    call(&s, FUZZ_OP_BEGIN_VERIFY, 1);
    append_n(&s, 1, 4, 36);
    one(&s, FUZZ_OP_ACCEPT, 1, 3);
    attend_every_way(&s, 0, 37);
    for (unsigned nth = 1; nth <= 3; nth++) {
        one(&s, FUZZ_OP_FORK, 0, 0);
        call_failing(&s, FUZZ_OP_APPEND, 0, nth, nth % 2);
        put(&s, FUZZ_MASK_NULL), normal(&s, 40 + nth), normal(&s, 50 + nth), put(&s, 0);
        call_failing(&s, FUZZ_OP_ACCUMULATE_IMP, 0, nth, 0);
        put(&s, 2), values(&s, FUZZ_VALUES_UNIT, 0, 60 + nth);
        call_failing(&s, FUZZ_OP_EVICT, 0, nth, 1), put(&s, 30), put(&s, 3), put(&s, 5);
    }
    call_failing(&s, FUZZ_OP_FORK, 0, 1, 0), put(&s, 0);
    one(&s, FUZZ_OP_FORK, 0, 2);
    one(&s, FUZZ_OP_MODEL_CREATE, 0, 0);
    one(&s, FUZZ_OP_FORK, 1, 0);
    three(&s, FUZZ_OP_MODEL_EVICT, 0, 20, 2, 4);
    write_script("forks-sharing-pages", &s);
}

/* ---- GGUF seeds ---- */

static void write_gguf(const char *name, gb_file file) {
    write_file("gguf", name, file.bytes, file.len);
    free(file.bytes);
}

static void gguf_seeds(void) {
    size_t header;
    for (uint32_t version = 1; version <= 3; version++) {
        char name[32];
        snprintf(name, sizeof name, "every-type-v%u", (unsigned)version);
        write_gguf(name, gb_fixture(version, KVC_GGUF_DEFAULT_ALIGNMENT, &header));
        snprintf(name, sizeof name, "empty-v%u", (unsigned)version);
        write_gguf(name, gb_build(version, NULL, NULL, 0, KVC_GGUF_DEFAULT_ALIGNMENT, &header));
    }
    write_gguf("every-type-v3-aligned-64", gb_fixture(3, 64, &header));
    /* A model the runner reads (kvc_lm_create), in F32 and Q8_0. */
    const gb_llama_spec llama = {.arch = "llama"};
    gb_llama model;
    gb_llama_tensors(&model, 0, 0);
    write_gguf("llama-f32", gb_llama_build(&llama, &model));
    gb_llama_tensors(&model, 8, 1);
    write_gguf("llama-q8_0-tied", gb_llama_build(&llama, &model));
    /* Projectors the image encoder reads (kvc_vision_create). */
    const gb_projector idefics3 = gb_projector_spec("idefics3", GB_F16), lfm2 = gb_projector_spec("lfm2", GB_Q8_0),
                       gemma3 = gb_projector_spec("gemma3", GB_F32), gemma4v = gb_projector_spec("gemma4v", GB_F16),
                       qwen3vl = gb_projector_spec("qwen3vl_merger", GB_Q8_0);
    write_gguf("projector-idefics3-f16", gb_projector_build(&idefics3));
    write_gguf("projector-lfm2-q8_0", gb_projector_build(&lfm2));
    write_gguf("projector-gemma3-f32", gb_projector_build(&gemma3));
    write_gguf("projector-gemma4v-f16", gb_projector_build(&gemma4v));
    write_gguf("projector-qwen3vl-q8_0", gb_projector_build(&qwen3vl));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: kvc_fuzz_seeds <corpus directory (with ops/, snapshot/ and gguf/)>\n");
        return 2;
    }
    corpus_dir = argv[1];
    snapshot_seeds();
    ops_seeds();
    gguf_seeds();
    return 0;
}

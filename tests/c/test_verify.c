/*
 * test_verify.c -- speculative verify, per layer and per model: the session
 * rules (begin twice, accept without begin, accept above the drafts, what a
 * verify refuses, clear), and the property the whole feature exists for: a
 * speculative run -- begin, k draft positions in every layer, accept j --
 * leaves every layer bit-identical to a plain run that appended only the
 * accepted positions: rows, positions, imp, memory_bytes, the q8 field,
 * attend outputs, linear states and steps.  Also the model-level rollback by
 * truncation back below the q8 window.  (accept's cost claim -- a pass over
 * the dropped positions, or one state copy -- is not timed here; what can be
 * observed of it is that accept keeps the allocation.)
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define W KVC_Q8_WINDOW
#define MAX_FULL 4
#define MAX_LINEAR 2
#define LEN 140 /* positions of a script */
#define MAX_K 6

/* ---- a hybrid model's inputs ---- */

typedef struct full_shape {
    size_t H, d;
} full_shape;

typedef struct linear_shape {
    size_t H, F, dv;
    int phase, decay;
    double phase_mass;
} linear_shape;

/* Masked heads (test_data_make's script: gaps, a head dead below W, a head
 * never alive) and odd sizes. */
static const full_shape full_shapes[MAX_FULL] = {{5, 8}, {3, 12}, {6, 5}, {4, 9}};
static const linear_shape linear_shapes[MAX_LINEAR] = {{2, 5, 3, 0, 1, 0.0},
                                                       {3, 4, 7, 1, 0, 0.5}};

/* What each layer is fed: the true positions, and other (junk) positions for
 * the drafts that will be rejected. */
typedef struct script {
    size_t num_full, num_linear;
    kvc_mode modes[MAX_FULL];
    test_data truth[MAX_FULL], junk[MAX_FULL];
    test_steps truth_steps[MAX_LINEAR], junk_steps[MAX_LINEAR];
} script;

static script script_make(uint64_t seed, const kvc_mode *modes, size_t num_full,
                          size_t num_linear) {
    script s;
    memset(&s, 0, sizeof s);
    s.num_full = num_full;
    s.num_linear = num_linear;
    for (size_t i = 0; i < num_full; i++) {
        const full_shape f = full_shapes[i];
        s.modes[i] = modes[i];
        s.truth[i] = test_data_make(seed * 16 + i, LEN, f.H, f.d, 1);
        s.junk[i] = test_data_make(seed * 16 + 8 + i, LEN, f.H, f.d, 1);
    }
    for (size_t i = 0; i < num_linear; i++) {
        const linear_shape l = linear_shapes[i];
        s.truth_steps[i] = test_steps_make(seed * 16 + 4 + i, LEN, l.H, l.F, l.dv, l.phase,
                                           l.decay);
        s.junk_steps[i] = test_steps_make(seed * 16 + 12 + i, LEN, l.H, l.F, l.dv, l.phase,
                                          l.decay);
    }
    return s;
}

static void script_free(script *s) {
    for (size_t i = 0; i < s->num_full; i++) {
        test_data_free(&s->truth[i]);
        test_data_free(&s->junk[i]);
    }
    for (size_t i = 0; i < s->num_linear; i++) {
        test_steps_free(&s->truth_steps[i]);
        test_steps_free(&s->junk_steps[i]);
    }
}

/* A model whose layers hold the first `len` true positions: the full layers
 * first, then the linear ones.  NULL if a call failed. */
static kvc_model *model_with(const script *s, size_t len) {
    kvc_layer *layers[MAX_FULL + MAX_LINEAR] = {NULL};
    const size_t L = s->num_full + s->num_linear;
    int ok = 1;
    for (size_t i = 0; i < s->num_full; i++) {
        layers[i] = test_layer_with(&s->truth[i], len, s->modes[i]);
        ok = ok && layers[i];
    }
    for (size_t i = 0; i < s->num_linear; i++) {
        layers[s->num_full + i] =
            test_linear_with(&s->truth_steps[i], len, linear_shapes[i].phase_mass);
        ok = ok && layers[s->num_full + i];
    }
    kvc_model *model = NULL;
    if (ok && kvc_model_create(layers, L, &model) == KVC_OK) return model;
    for (size_t i = 0; i < L; i++) kvc_layer_free(layers[i]);
    printf("  model_with: a call failed\n");
    return NULL;
}

/* Appends to every layer of `model` the true positions [first, first + count),
 * in one call per layer or (one_by_one) one call per position.  Linear
 * layers write their outputs to outs[i] (may be NULL). */
static kvc_status append_truth(kvc_model *model, const script *s, size_t first, size_t count,
                               int one_by_one, float **outs) {
    kvc_status status = KVC_OK;
    for (size_t i = 0; i < s->num_full && status == KVC_OK; i++) {
        kvc_layer *layer = kvc_model_layer(model, i);
        if (!one_by_one) status = test_data_append(layer, &s->truth[i], first, count);
        for (size_t p = first; one_by_one && p < first + count && status == KVC_OK; p++)
            status = test_data_append(layer, &s->truth[i], p, 1);
    }
    for (size_t i = 0; i < s->num_linear && status == KVC_OK; i++) {
        status = test_steps_take(kvc_model_layer(model, s->num_full + i), &s->truth_steps[i],
                                 first, count, outs ? outs[i] : NULL);
    }
    return status;
}

/* Appends junk positions [first, first + count) to every layer; linear
 * outputs go after the `skip` rows of outs[i]. */
static kvc_status append_junk(kvc_model *model, const script *s, size_t first, size_t count,
                              float **outs, size_t skip) {
    kvc_status status = KVC_OK;
    for (size_t i = 0; i < s->num_full && status == KVC_OK; i++)
        status = test_data_append(kvc_model_layer(model, i), &s->junk[i], first, count);
    for (size_t i = 0; i < s->num_linear && status == KVC_OK; i++) {
        const linear_shape l = linear_shapes[i];
        status = test_steps_take(kvc_model_layer(model, s->num_full + i), &s->junk_steps[i],
                                 first, count, outs[i] + skip * l.H * l.dv);
    }
    return status;
}

/* ---- one speculative round against the plain run ---- */

/* One head's causal attend of the drafts' queries. */
typedef struct head_queries {
    float *q, *out, *probs; /* [k x d], [k x d], [k x head_len] */
    size_t head_len;        /* rows of the head while the drafts are in */
} head_queries;

/* attend_causal of the first m queries on every head of the full layers of
 * `model`; runs[i][h] gets q from the caller and out/probs from the call.
 * With `compare` set, checks them against `want` (the same queries run on
 * the speculative model): out rows and each probs row's first head_len
 * entries, bit for bit. */
static int attend_drafts(const kvc_model *model, const script *s, size_t m,
                         head_queries **runs, head_queries **want) {
    for (size_t i = 0; i < s->num_full; i++) {
        const kvc_layer *layer = kvc_model_layer(model, i);
        const size_t d = s->truth[i].d;
        for (size_t h = 0; h < s->truth[i].H; h++) {
            head_queries *r = &runs[i][h];
            r->head_len = kvc_layer_head_len(layer, h);
            r->out = test_alloc(m * d * sizeof(float));
            r->probs = test_alloc(m * r->head_len * sizeof(float) + 1);
            if (kvc_layer_attend_causal(layer, r->q, m, h, r->out, r->probs) != KVC_OK) return 0;
            if (!want) continue;
            const head_queries *w = &want[i][h];
            int ok = test_bits_equal(r->out, w->out, m * d);
            for (size_t q = 0; q < m && ok; q++)
                ok = test_bits_equal(r->probs + q * r->head_len, w->probs + q * w->head_len,
                                     r->head_len);
            if (!ok) {
                printf("  layer %zu head %zu: causal attend differs from the drafts'\n", i, h);
                return 0;
            }
        }
    }
    return 1;
}

/* imp += the probs of the first m queries (query by query, head by head),
 * each row sliced to the head's length now. */
static int accumulate_drafts(kvc_model *model, const script *s, size_t m, head_queries **runs) {
    for (size_t i = 0; i < s->num_full; i++) {
        kvc_layer *layer = kvc_model_layer(model, i);
        for (size_t q = 0; q < m; q++) {
            for (size_t h = 0; h < s->truth[i].H; h++) {
                const head_queries *r = &runs[i][h];
                if (kvc_layer_accumulate_imp_head(layer, h, r->probs + q * r->head_len,
                                                  kvc_layer_head_len(layer, h)) != KVC_OK)
                    return 0;
            }
        }
    }
    return 1;
}

static head_queries **queries_new(const script *s, size_t k, test_rng *rng) {
    head_queries **runs = test_alloc(s->num_full * sizeof(head_queries *));
    for (size_t i = 0; i < s->num_full; i++) {
        runs[i] = test_alloc(s->truth[i].H * sizeof(head_queries));
        for (size_t h = 0; h < s->truth[i].H; h++) {
            runs[i][h].q = test_alloc(k * s->truth[i].d * sizeof(float));
            test_fill_normal(rng, runs[i][h].q, k * s->truth[i].d);
        }
    }
    return runs;
}

/* Frees runs; with `keep_q`, the queries stay (they belong to another). */
static void queries_free(const script *s, head_queries **runs, int keep_q) {
    for (size_t i = 0; i < s->num_full; i++) {
        for (size_t h = 0; h < s->truth[i].H; h++) {
            if (!keep_q) free(runs[i][h].q);
            free(runs[i][h].out);
            free(runs[i][h].probs);
        }
        free(runs[i]);
    }
    free(runs);
}

/* Linear outputs of a round: [k x H x dv] per linear layer. */
static float **outs_new(const script *s, size_t k) {
    float **outs = test_alloc(MAX_LINEAR * sizeof(float *));
    for (size_t i = 0; i < s->num_linear; i++)
        outs[i] = test_alloc(k * linear_shapes[i].H * linear_shapes[i].dv * sizeof(float) + 1);
    return outs;
}

static void outs_free(float **outs) {
    for (size_t i = 0; i < MAX_LINEAR; i++) free(outs[i]);
    free(outs);
}

/* 1 if every layer of the model verifies with k drafts. */
static int drafts_are(const kvc_model *model, size_t k) {
    int ok = kvc_model_verifying(model);
    for (size_t i = 0; i < kvc_model_num_layers(model) && ok; i++)
        ok = kvc_layer_verifying(kvc_model_layer(model, i)) &&
             kvc_layer_draft_len(kvc_model_layer(model, i)) == k;
    return ok;
}

/* One round: `spec` verifies k drafts whose first j are the next true
 * positions, attends the drafts causally, accepts j and adds the accepted
 * queries' probs to imp; `plain` appends the j true positions, attends the
 * same j queries and adds their probs.  The two must then be equal, and the
 * accepted queries' outputs (causal attend, linear steps) too.
 * @return : 1 if every check held. */
static int speculative_round(kvc_model *spec, kvc_model *plain, const script *s, size_t k,
                             size_t j, test_rng *rng, int one_by_one) {
    const size_t base = kvc_model_seq_len(spec);
    head_queries **drafts = queries_new(s, k, rng), **accepted = queries_new(s, 0, rng);
    float **spec_outs = outs_new(s, k), **plain_outs = outs_new(s, k);
    for (size_t i = 0; i < s->num_full; i++) {
        for (size_t h = 0; h < s->truth[i].H; h++) {
            free(accepted[i][h].q);
            accepted[i][h].q = drafts[i][h].q;
        }
    }
    int ok = kvc_model_begin_verify(spec) == KVC_OK &&
             append_truth(spec, s, base, j, one_by_one, spec_outs) == KVC_OK &&
             append_junk(spec, s, base + j, k - j, spec_outs, j) == KVC_OK &&
             drafts_are(spec, k) && kvc_model_seq_len(spec) == base + k &&
             attend_drafts(spec, s, k, drafts, NULL) && kvc_model_accept(spec, j) == KVC_OK &&
             !kvc_model_verifying(spec) && accumulate_drafts(spec, s, j, drafts);
    ok = ok && append_truth(plain, s, base, j, 0, plain_outs) == KVC_OK &&
         (j == 0 || (attend_drafts(plain, s, j, accepted, drafts) &&
                     accumulate_drafts(plain, s, j, accepted)));
    for (size_t i = 0; i < s->num_linear && ok; i++)
        ok = test_bits_equal(spec_outs[i], plain_outs[i],
                             j * linear_shapes[i].H * linear_shapes[i].dv);
    ok = ok && kvc_model_seq_len(spec) == base + j && test_models_equal(spec, plain);
    if (!ok) printf("  round at %zu with k=%zu j=%zu differs\n", base, k, j);
    queries_free(s, accepted, 1);
    queries_free(s, drafts, 0);
    outs_free(spec_outs);
    outs_free(plain_outs);
    return ok;
}

/* What the rounds of a run covered around the q8 window. */
typedef struct coverage {
    size_t thawed; /* drafts froze the field, accept went back to <= W */
    size_t kept;   /* began at or below W, accepted past it */
} coverage;

/* Rounds from `prefill` true positions until the script runs out: random k
 * in 1..6 (6 when the verify starts within 6 of W, so that the drafts cross
 * it) and random j in 0..k. */
static int speculative_run(const script *s, size_t prefill, uint64_t seed, coverage *cov) {
    kvc_model *spec = model_with(s, prefill), *plain = model_with(s, prefill);
    test_rng rng = test_rng_new(seed);
    int ok = spec && plain;
    for (int round = 0; ok && kvc_model_seq_len(spec) + MAX_K <= LEN; round++) {
        const size_t base = kvc_model_seq_len(spec);
        size_t k = 1 + test_rng_u32(&rng) % MAX_K;
        if (base <= W && base + MAX_K > W) k = MAX_K;
        const size_t j = test_rng_u32(&rng) % (k + 1);
        ok = speculative_round(spec, plain, s, k, j, &rng, round % 2);
        if (base + k > W && base + j <= W) cov->thawed++;
        if (base <= W && base + j > W) cov->kept++;
    }
    kvc_model_free(spec);
    kvc_model_free(plain);
    return ok;
}

/* ---- the property ---- */

TEST(speculative_run_should_equal_plain_run_in_every_mode) {
    static const size_t prefills[] = {0, 50, 59};
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        const kvc_mode modes[3] = {test_modes[mi], test_modes[mi], test_modes[mi]};
        coverage cov = {0, 0};
        for (size_t pi = 0; pi < 3; pi++) {
            script s = script_make(400 + mi * 4 + pi, modes, 3, 2);
            CHECK(speculative_run(&s, prefills[pi], 400 + mi * 4 + pi, &cov));
            script_free(&s);
        }
        /* Both ways across the window were exercised. */
        CHECK(cov.thawed > 0 && cov.kept > 0);
    }
}

TEST(speculative_run_should_equal_plain_run_with_mixed_modes) {
    static const kvc_mode modes[4] = {KVC_MODE_Q8V, KVC_MODE_F32, KVC_MODE_Q8, KVC_MODE_Q8K};
    coverage cov = {0, 0};
    script s = script_make(420, modes, 4, 2);
    CHECK(speculative_run(&s, 55, 420, &cov));
    CHECK(cov.thawed + cov.kept > 0);
    script_free(&s);
}

/* A rollback by truncation: append `good` true positions and `junk` junk
 * ones, truncate the model back to `back`, and go on with true positions
 * (speculative rounds, then plain appends to the end). */
typedef struct rollback {
    size_t good, junk, back;
} rollback;

TEST(model_truncate_below_window_then_reappend_should_equal_plain) {
    static const rollback scenarios[] = {
        {70, 20, 58}, /* frozen from true rows; back below W */
        {50, 30, 45}, /* the junk froze the field; back below W */
        {64, 7, 64},  /* back to exactly W */
        {70, 10, 65}, /* back to W + 1: the field stays */
        {100, 5, 90}, /* never below W */
    };
    /* Every mode in one model, and no linear layer: it can be truncated. */
    static const kvc_mode modes[4] = {KVC_MODE_F32, KVC_MODE_Q8, KVC_MODE_Q8K, KVC_MODE_Q8V};
    script s = script_make(430, modes, 4, 0);
    for (size_t si = 0; si < sizeof scenarios / sizeof scenarios[0]; si++) {
        const rollback r = scenarios[si];
        kvc_model *model = model_with(&s, r.good), *prefix = model_with(&s, r.back);
        kvc_model *plain = model_with(&s, r.back);
        CHECK(model != NULL && prefix != NULL && plain != NULL);
        CHECK_OK(append_junk(model, &s, r.good, r.junk, NULL, 0));
        CHECK_OK(kvc_model_truncate_last(model, r.good + r.junk - r.back));
        CHECK(kvc_model_seq_len(model) == r.back);
        CHECK(test_models_equal(model, prefix));
        test_rng rng = test_rng_new(430 + si);
        for (size_t round = 0; round < 6; round++)
            CHECK(speculative_round(model, plain, &s, 1 + round, round / 2, &rng, 0));
        const size_t now = kvc_model_seq_len(model);
        CHECK_OK(append_truth(model, &s, now, LEN - now, 0, NULL));
        CHECK_OK(append_truth(plain, &s, now, LEN - now, 1, NULL));
        CHECK(test_models_equal(model, plain));
        kvc_model_free(model);
        kvc_model_free(prefix);
        kvc_model_free(plain);
    }
    script_free(&s);
}

/* ---- one layer ---- */

TEST(accept_j_should_equal_appending_only_the_first_j_positions) {
    static const size_t bases[] = {10, 60, 62, 64, 70};
    const size_t H = 5, d = 8;
    test_data truth = test_data_make(440, 80, H, d, 1), junk = test_data_make(441, 80, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        for (size_t bi = 0; bi < sizeof bases / sizeof bases[0]; bi++) {
            const size_t base = bases[bi];
            for (size_t k = 1; k <= MAX_K; k++) {
                for (size_t j = 0; j <= k; j++) {
                    kvc_layer *layer = test_layer_with(&truth, base, test_modes[mi]);
                    kvc_layer *plain = test_layer_with(&truth, base + j, test_modes[mi]);
                    CHECK(layer != NULL && plain != NULL);
                    CHECK_OK(kvc_layer_begin_verify(layer));
                    CHECK_OK(test_data_append(layer, &truth, base, j));
                    CHECK_OK(test_data_append(layer, &junk, base + j, k - j));
                    CHECK(kvc_layer_draft_len(layer) == k);
                    CHECK_OK(kvc_layer_accept(layer, j));
                    CHECK(test_layers_equal(layer, plain));
                    kvc_layer_free(layer);
                    kvc_layer_free(plain);
                }
            }
        }
    }
    test_data_free(&truth);
    test_data_free(&junk);
}

TEST(draft_len_should_count_positions_appended_since_begin) {
    test_data data = test_data_make(442, 40, 3, 8, 1);
    kvc_layer *layer = test_layer_with(&data, 10, KVC_MODE_Q8);
    CHECK(layer != NULL);
    CHECK(kvc_layer_verifying(layer) == 0 && kvc_layer_draft_len(layer) == 0);
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK(kvc_layer_verifying(layer) == 1 && kvc_layer_draft_len(layer) == 0);
    CHECK_OK(test_data_append(layer, &data, 10, 3));
    CHECK(kvc_layer_draft_len(layer) == 3);
    /* A refused append is no draft. */
    data.k[(13 * 3 + 0) * 8] = test_nonfinite[0];
    CHECK_STATUS(test_data_append(layer, &data, 13, 1), KVC_E_NONFINITE_KEY);
    CHECK(kvc_layer_draft_len(layer) == 3);
    CHECK_OK(kvc_layer_accept(layer, 1));
    CHECK(kvc_layer_verifying(layer) == 0 && kvc_layer_draft_len(layer) == 0);
    CHECK(kvc_layer_seq_len(layer) == 11);
    kvc_layer_free(layer);
    test_data_free(&data);
}

/* A full layer (q8, its 3 drafts across W) and a linear one, each verifying
 * with 3 drafts. */
typedef struct pair {
    test_data data;
    test_steps steps;
    kvc_layer *layers[2];
} pair;

static int pair_make(pair *p, uint64_t seed) {
    p->data = test_data_make(seed, 70, 3, 8, 1);
    p->steps = test_steps_make(seed, 10, 2, 4, 4, (int)(seed % 2), 1);
    p->layers[0] = test_layer_with(&p->data, 62, KVC_MODE_Q8);
    p->layers[1] = test_linear_with(&p->steps, 5, 0.0);
    return p->layers[0] && p->layers[1] && kvc_layer_begin_verify(p->layers[0]) == KVC_OK &&
           kvc_layer_begin_verify(p->layers[1]) == KVC_OK &&
           test_data_append(p->layers[0], &p->data, 62, 3) == KVC_OK &&
           test_steps_take(p->layers[1], &p->steps, 5, 3, NULL) == KVC_OK;
}

static void pair_free(pair *p) {
    kvc_layer_free(p->layers[0]);
    kvc_layer_free(p->layers[1]);
    test_data_free(&p->data);
    test_steps_free(&p->steps);
}

TEST(begin_verify_twice_should_return_verifying_and_keep_the_drafts) {
    pair p;
    CHECK(pair_make(&p, 443));
    for (int i = 0; i < 2; i++) {
        CHECK_REFUSED(p.layers[i], kvc_layer_begin_verify(p.layers[i]), KVC_E_VERIFYING);
        CHECK(kvc_layer_draft_len(p.layers[i]) == 3);
    }
    pair_free(&p);
}

TEST(accept_without_begin_should_return_not_verifying) {
    pair p;
    CHECK(pair_make(&p, 444));
    for (int i = 0; i < 2; i++) {
        CHECK_OK(kvc_layer_accept(p.layers[i], 2));
        /* The accept ended the verify: a second one has nothing to accept. */
        CHECK_REFUSED(p.layers[i], kvc_layer_accept(p.layers[i], 0), KVC_E_NOT_VERIFYING);
    }
    pair_free(&p);
    kvc_layer *fresh;
    CHECK_OK(kvc_layer_create(2, 8, KVC_MODE_F32, &fresh));
    CHECK_STATUS(kvc_layer_accept(fresh, 0), KVC_E_NOT_VERIFYING);
    kvc_layer_free(fresh);
}

TEST(accept_above_draft_len_should_return_accept_and_change_nothing) {
    pair p;
    CHECK(pair_make(&p, 445));
    for (int i = 0; i < 2; i++) {
        CHECK_REFUSED(p.layers[i], kvc_layer_accept(p.layers[i], 4), KVC_E_ACCEPT);
        CHECK_REFUSED(p.layers[i], kvc_layer_accept(p.layers[i], (size_t)-1), KVC_E_ACCEPT);
        /* Still verifying: accept(3) keeps every draft. */
        CHECK_OK(kvc_layer_accept(p.layers[i], 3));
    }
    pair_free(&p);
}

TEST(truncate_and_clone_during_verify_should_return_verifying) {
    pair p;
    CHECK(pair_make(&p, 446));
    CHECK_REFUSED(p.layers[0], kvc_layer_truncate_last(p.layers[0], 1), KVC_E_VERIFYING);
    for (int i = 0; i < 2; i++) {
        kvc_layer *copy = p.layers[i];
        CHECK_STATUS(kvc_layer_clone(p.layers[i], &copy), KVC_E_VERIFYING);
        CHECK(copy == NULL);
        /* Once the verify is over, both work again. */
        CHECK_OK(kvc_layer_accept(p.layers[i], 1));
        CHECK_OK(kvc_layer_clone(p.layers[i], &copy));
        CHECK(test_layers_equal(copy, p.layers[i]));
        kvc_layer_free(copy);
    }
    CHECK_OK(kvc_layer_truncate_last(p.layers[0], 1));
    pair_free(&p);
}

TEST(clear_should_end_a_verify) {
    pair p;
    CHECK(pair_make(&p, 447));
    for (int i = 0; i < 2; i++) {
        kvc_layer_clear(p.layers[i]);
        CHECK(kvc_layer_verifying(p.layers[i]) == 0 && kvc_layer_draft_len(p.layers[i]) == 0);
        CHECK_STATUS(kvc_layer_accept(p.layers[i], 0), KVC_E_NOT_VERIFYING);
        CHECK_OK(kvc_layer_begin_verify(p.layers[i]));
    }
    pair_free(&p);
}

TEST(verify_calls_should_refuse_null_layer) {
    CHECK_STATUS(kvc_layer_begin_verify(NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_accept(NULL, 0), KVC_E_NULL_POINTER);
    CHECK(kvc_layer_verifying(NULL) == 0 && kvc_layer_draft_len(NULL) == 0);
    CHECK_STATUS(kvc_model_begin_verify(NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_model_accept(NULL, 0), KVC_E_NULL_POINTER);
    CHECK(kvc_model_verifying(NULL) == 0);
}

TEST(accept_should_keep_the_allocation) {
    pair p;
    CHECK(pair_make(&p, 448));
    for (int i = 0; i < 2; i++) {
        const size_t reserved = kvc_layer_capacity_bytes(p.layers[i]);
        CHECK_OK(kvc_layer_accept(p.layers[i], 1));
        CHECK(kvc_layer_capacity_bytes(p.layers[i]) == reserved);
    }
    pair_free(&p);
}

/* ---- the model's session ---- */

/* A hybrid model (2 full q8 layers, 1 linear) verifying 2 drafts of junk. */
static kvc_model *verifying_model(script *s) {
    static const kvc_mode modes[2] = {KVC_MODE_Q8, KVC_MODE_Q8K};
    *s = script_make(450, modes, 2, 1);
    kvc_model *model = model_with(s, 63);
    float **outs = outs_new(s, 2);
    const int ok = model && kvc_model_begin_verify(model) == KVC_OK &&
                   append_junk(model, s, 63, 2, outs, 0) == KVC_OK;
    outs_free(outs);
    if (ok) return model;
    kvc_model_free(model);
    return NULL;
}

TEST(model_begin_verify_twice_should_return_verifying_and_change_nothing) {
    script s;
    kvc_model *model = verifying_model(&s);
    CHECK(model != NULL);
    CHECK_MODEL_REFUSED(model, kvc_model_begin_verify(model), KVC_E_VERIFYING);
    kvc_model_free(model);
    script_free(&s);
}

TEST(model_begin_verify_should_begin_none_when_one_layer_verifies) {
    script s;
    kvc_model *model = verifying_model(&s);
    CHECK(model != NULL);
    CHECK_OK(kvc_model_accept(model, 0));
    CHECK_OK(kvc_layer_begin_verify(kvc_model_layer(model, 1)));
    CHECK(kvc_model_verifying(model) == 1);
    CHECK_STATUS(kvc_model_begin_verify(model), KVC_E_VERIFYING);
    CHECK(kvc_layer_verifying(kvc_model_layer(model, 0)) == 0);
    CHECK(kvc_layer_verifying(kvc_model_layer(model, 2)) == 0);
    kvc_model_free(model);
    script_free(&s);
}

TEST(model_accept_without_begin_should_return_not_verifying) {
    script s;
    kvc_model *model = verifying_model(&s);
    CHECK(model != NULL);
    CHECK_OK(kvc_model_accept(model, 1));
    CHECK(kvc_model_verifying(model) == 0 && kvc_model_seq_len(model) == 64);
    CHECK_MODEL_REFUSED(model, kvc_model_accept(model, 0), KVC_E_NOT_VERIFYING);
    kvc_model_free(model);
    script_free(&s);
}

TEST(model_accept_above_drafts_should_return_accept_and_change_nothing) {
    script s;
    kvc_model *model = verifying_model(&s);
    CHECK(model != NULL);
    CHECK_MODEL_REFUSED(model, kvc_model_accept(model, 3), KVC_E_ACCEPT);
    CHECK(drafts_are(model, 2));
    CHECK_OK(kvc_model_accept(model, 2));
    CHECK(kvc_model_seq_len(model) == 65);
    kvc_model_free(model);
    script_free(&s);
}

TEST(model_truncate_and_clone_during_verify_should_return_verifying) {
    static const kvc_mode modes[2] = {KVC_MODE_Q8, KVC_MODE_F32};
    script s = script_make(451, modes, 2, 0);
    kvc_model *model = model_with(&s, 70);
    CHECK(model != NULL);
    CHECK_OK(kvc_model_begin_verify(model));
    CHECK_OK(append_truth(model, &s, 70, 2, 0, NULL));
    CHECK_MODEL_REFUSED(model, kvc_model_truncate_last(model, 1), KVC_E_VERIFYING);
    kvc_model *copy = (kvc_model *)model;
    CHECK_MODEL_REFUSED(model, kvc_model_clone(model, &copy), KVC_E_VERIFYING);
    CHECK(copy == NULL);
    kvc_model_free(model);
    script_free(&s);
}

TEST(model_clear_should_end_a_verify) {
    script s;
    kvc_model *model = verifying_model(&s);
    CHECK(model != NULL);
    kvc_model_clear(model);
    CHECK(kvc_model_verifying(model) == 0 && kvc_model_seq_len(model) == 0);
    CHECK_STATUS(kvc_model_accept(model, 0), KVC_E_NOT_VERIFYING);
    CHECK_OK(kvc_model_begin_verify(model));
    kvc_model_free(model);
    script_free(&s);
}

RUN_TESTS(CASE(speculative_run_should_equal_plain_run_in_every_mode),
          CASE(speculative_run_should_equal_plain_run_with_mixed_modes),
          CASE(model_truncate_below_window_then_reappend_should_equal_plain),
          CASE(accept_j_should_equal_appending_only_the_first_j_positions),
          CASE(draft_len_should_count_positions_appended_since_begin),
          CASE(begin_verify_twice_should_return_verifying_and_keep_the_drafts),
          CASE(accept_without_begin_should_return_not_verifying),
          CASE(accept_above_draft_len_should_return_accept_and_change_nothing),
          CASE(truncate_and_clone_during_verify_should_return_verifying),
          CASE(clear_should_end_a_verify),
          CASE(verify_calls_should_refuse_null_layer),
          CASE(accept_should_keep_the_allocation),
          CASE(model_begin_verify_twice_should_return_verifying_and_change_nothing),
          CASE(model_begin_verify_should_begin_none_when_one_layer_verifies),
          CASE(model_accept_without_begin_should_return_not_verifying),
          CASE(model_accept_above_drafts_should_return_accept_and_change_nothing),
          CASE(model_truncate_and_clone_during_verify_should_return_verifying),
          CASE(model_clear_should_end_a_verify))

/*
 * test_evict.c -- bounding a layer: which positions eviction keeps (the
 * first `sinks`, the `recent` newest, between them the highest importance,
 * ties to the older, order kept) on hand-made and random importance; the plan
 * that evicts nothing; the sliding window; what every head holds afterwards in
 * every mode (the same bytes as before for the kept positions: nothing
 * requantized, the field kept, imp and positions aligned); appends and
 * truncation after an eviction; the max_rows bound on appends; argument
 * errors; model eviction; running out of memory.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define W KVC_Q8_WINDOW

/* ---- the policy, computed the slow way ---- */

/* keep[s] = 1 for each slot of a layer with importance imp [L] that
 * kvc_layer_evict(budget, sinks, recent) keeps: every slot when L <= budget;
 * else the first sinks, the last recent, and one by one the highest
 * importance left between them (a scan from the oldest with a strict
 * comparison: ties go to the older). */
static void reference_keep(const float *imp, size_t L, size_t budget, size_t sinks,
                           size_t recent, uint8_t *keep) {
    memset(keep, L <= budget, L);
    if (L <= budget) return;
    for (size_t s = 0; s < sinks; s++) keep[s] = 1;
    for (size_t s = L - recent; s < L; s++) keep[s] = 1;
    for (size_t taken = sinks + recent; taken < budget; taken++) {
        size_t best = L;
        for (size_t s = sinks; s < L - recent; s++) {
            if (!keep[s] && (best == L || imp[s] > imp[best])) best = s;
        }
        keep[best] = 1;
    }
}

/* The absolute positions `reference_keep` keeps of `state` (a layer's
 * test_state) into kept; returns how many. */
static size_t reference_kept(const test_state *state, size_t budget, size_t sinks,
                             size_t recent, uint32_t *kept) {
    uint8_t *keep = test_alloc(state->seq_len);
    reference_keep(state->imp, state->seq_len, budget, sinks, recent, keep);
    size_t count = 0;
    for (size_t s = 0; s < state->seq_len; s++) {
        if (keep[s]) kept[count++] = state->slots[s];
    }
    free(keep);
    return count;
}

/* A flag per absolute position (below `state`'s next position) set for the
 * `count` positions of kept. */
static uint8_t *position_flags(const test_state *state, const uint32_t *kept, size_t count) {
    uint8_t *flags = test_alloc(state->next_position + 1);
    for (size_t i = 0; i < count; i++) flags[kept[i]] = 1;
    return flags;
}

/* 1 if `layer` holds exactly the positions of `from` (a state of a layer that
 * held them all) that `keep` flags, as `from` held them: its slots, the
 * importance of each (with_imp), and for every head the same row bytes
 * (head_keys / head_values: a quantized row dequantizes to the same floats,
 * so its codes, scale and field are those of before) at the same absolute
 * positions, in order. */
static int holds_kept(const kvc_layer *layer, const test_state *from, const uint8_t *keep,
                      int with_imp) {
    test_state *now = test_state_take(layer);
    const size_t d = from->head_dim;
    int ok = !now->read_errors && now->num_kv_heads == from->num_kv_heads;
    size_t slot = 0;
    for (size_t s = 0; s < from->seq_len && ok; s++) {
        if (!keep[from->slots[s]]) continue;
        ok = slot < now->seq_len && now->slots[slot] == from->slots[s] &&
             (!with_imp || memcmp(&now->imp[slot], &from->imp[s], sizeof(float)) == 0);
        slot++;
    }
    ok = ok && slot == now->seq_len;
    if (!ok) printf("  slots or imp differ\n");
    for (size_t h = 0; h < from->num_kv_heads && ok; h++) {
        size_t row = 0;
        for (size_t r = 0; r < from->head_len[h] && ok; r++) {
            if (!keep[from->positions[h][r]]) continue;
            ok = row < now->head_len[h] && now->positions[h][row] == from->positions[h][r] &&
                 memcmp(now->keys[h] + row * d, from->keys[h] + r * d, d * sizeof(float)) == 0 &&
                 memcmp(now->values[h] + row * d, from->values[h] + r * d, d * sizeof(float)) == 0;
            row++;
        }
        ok = ok && row == now->head_len[h];
        if (!ok) printf("  head %zu holds other rows\n", h);
    }
    test_state_free(now);
    return ok;
}

/* For a q4 layer that evicted and appended on, beside one that never
 * evicted: their residual windows (the newest rows of each) differ, so a
 * kept row reads back as the other layer's or, where only this one's window
 * holds it in f32, as appended.  1 if every row of `layer` does. */
static int rows_as_plain_or_appended(const kvc_layer *layer, const test_state *plain,
                                     const test_data *data) {
    test_state *now = test_state_take(layer);
    const size_t d = data->d, H = data->H;
    int ok = !now->read_errors;
    for (size_t h = 0; h < H && ok; h++) {
        size_t p_row = 0;
        for (size_t r = 0; r < now->head_len[h] && ok; r++) {
            const uint32_t p = now->positions[h][r];
            while (p_row < plain->head_len[h] && plain->positions[h][p_row] < p) p_row++;
            ok = p_row < plain->head_len[h] && plain->positions[h][p_row] == p;
            for (int is_values = 0; is_values < 2 && ok; is_values++) {
                const float *got = (is_values ? now->values[h] : now->keys[h]) + r * d;
                const float *as_plain = (is_values ? plain->values[h] : plain->keys[h]) + p_row * d;
                const float *appended = (is_values ? data->v : data->k) + (p * H + h) * d;
                ok = memcmp(got, as_plain, d * 4) == 0 || memcmp(got, appended, d * 4) == 0;
            }
        }
        if (!ok) printf("  head %zu holds other rows\n", h);
    }
    test_state_free(now);
    return ok;
}

/* Adds random importance to every slot: multiples of 1/4 up to 1, so that
 * sums are exact and ties frequent. */
static kvc_status add_imp(kvc_layer *layer, test_rng *rng) {
    const size_t L = kvc_layer_seq_len(layer);
    float *probs = test_alloc(L * sizeof(float));
    for (size_t s = 0; s < L; s++) probs[s] = 0.25f * (float)(test_rng_u32(rng) % 5);
    const kvc_status status = kvc_layer_accumulate_imp(layer, probs, L);
    free(probs);
    return status;
}

/* An f32 layer of one head holding L positions with importance imp [L]. */
static kvc_layer *layer_with_imp(const float *imp, size_t L) {
    test_data data = test_data_make(7, L, 1, 2, 0);
    kvc_layer *layer = test_layer_with(&data, L, KVC_MODE_F32);
    test_data_free(&data);
    if (layer && kvc_layer_accumulate_imp(layer, imp, L) == KVC_OK) return layer;
    kvc_layer_free(layer);
    return NULL;
}

/* 1 if the layer's slots are the count positions of `want`. */
static int positions_are(const kvc_layer *layer, const uint32_t *want, size_t count) {
    uint32_t got[64];
    if (kvc_layer_seq_len(layer) != count || count > 64 ||
        kvc_layer_positions(layer, got, 64) != KVC_OK || memcmp(got, want, count * 4) != 0) {
        printf("  positions differ from the expected %zu\n", count);
        return 0;
    }
    return 1;
}

/* ---- which positions ---- */

typedef struct policy_case {
    size_t budget, sinks, recent, count;
    uint32_t kept[12];
} policy_case;

static const float hand_imp[10] = {5, 0, 3, 9, 1, 9, 2, 0, 7, 4};

static const policy_case hand_cases[] = {
    {4, 1, 1, 4, {0, 3, 5, 9}},                     /* the two 9s between the ends */
    {3, 0, 0, 3, {3, 5, 8}},                        /* no sinks, no recent */
    {1, 0, 0, 1, {3}},                              /* 9 at 3 and 5: the older */
    {5, 2, 3, 5, {0, 1, 7, 8, 9}},                  /* budget = sinks + recent */
    {4, 0, 2, 4, {3, 5, 8, 9}},                     /* recent only */
    {4, 3, 0, 4, {0, 1, 2, 3}},                     /* sinks only */
    {6, 1, 0, 6, {0, 2, 3, 5, 8, 9}},
    {3, 0, 1, 3, {3, 5, 9}},
    {2, 1, 1, 2, {0, 9}},
    {9, 0, 0, 9, {0, 1, 2, 3, 4, 5, 6, 8, 9}},      /* 0 at 1 and 7: the newer goes */
    {10, 2, 2, 10, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}, /* budget >= seq_len: nothing happens */
    {12, 0, 0, 10, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
};

static const float zero_imp[10] = {0};

static const policy_case zero_imp_cases[] = {
    {4, 1, 1, 4, {0, 1, 2, 9}}, /* every tie goes to the older */
    {3, 0, 0, 3, {0, 1, 2}},
    {3, 0, 3, 3, {7, 8, 9}},
};

/* For each case: the plan, then the eviction, on a fresh layer with imp. */
static int cases_hold(const float *imp, const policy_case *cases, size_t count) {
    for (size_t c = 0; c < count; c++) {
        const policy_case *pc = &cases[c];
        kvc_layer *layer = layer_with_imp(imp, 10);
        if (!layer) return 0;
        uint32_t kept[12];
        size_t n = 99;
        int ok = kvc_layer_eviction_plan(layer, pc->budget, pc->sinks, pc->recent, kept, 12, &n) ==
                     KVC_OK &&
                 n == pc->count && memcmp(kept, pc->kept, n * 4) == 0 &&
                 kvc_layer_evict(layer, pc->budget, pc->sinks, pc->recent) == KVC_OK &&
                 positions_are(layer, pc->kept, pc->count) &&
                 kvc_layer_next_position(layer) == 10;
        /* imp follows its positions. */
        float got[10];
        ok = ok && kvc_layer_imp(layer, got, 10) == KVC_OK;
        for (size_t i = 0; i < pc->count && ok; i++) ok = got[i] == imp[pc->kept[i]];
        kvc_layer_free(layer);
        if (!ok) {
            printf("  case budget %zu sinks %zu recent %zu failed\n", pc->budget, pc->sinks,
                   pc->recent);
            return 0;
        }
    }
    return 1;
}

TEST(evict_should_keep_sinks_recent_and_the_highest_imp_between_on_hand_made_imp) {
    CHECK(cases_hold(hand_imp, hand_cases, sizeof hand_cases / sizeof hand_cases[0]));
    CHECK(cases_hold(zero_imp, zero_imp_cases, sizeof zero_imp_cases / sizeof zero_imp_cases[0]));
}

TEST(evict_should_keep_what_the_policy_gives_on_random_imp_over_many_rounds) {
    /* Appends, importance and evictions interleaved: positions stop being
     * slots after the first eviction, and the plan and the eviction must
     * follow the absolute positions. */
    test_rng rng = test_rng_new(1001);
    const size_t H = 2, d = 3;
    test_data data = test_data_make(1001, 2400, H, d, 0);
    kvc_layer *layer = test_layer_with(&data, 0, KVC_MODE_F32);
    CHECK(layer != NULL);
    uint32_t want[2400], kept[2400];
    size_t appended = 0, evicted_rounds = 0;
    for (int round = 0; round < 300; round++) {
        const size_t n = 1 + test_rng_u32(&rng) % 8;
        CHECK_OK(test_data_append(layer, &data, appended, n));
        appended += n;
        CHECK_OK(add_imp(layer, &rng));
        const size_t L = kvc_layer_seq_len(layer);
        const size_t budget = 1 + test_rng_u32(&rng) % (L + 2);
        const size_t sinks = test_rng_u32(&rng) % 3 ? test_rng_u32(&rng) % (budget + 1) / 2 : 0;
        const size_t room = budget - sinks;
        const size_t recent = test_rng_u32(&rng) % 3 ? test_rng_u32(&rng) % (room + 1) : 0;
        test_state *before = test_state_take(layer);
        const size_t count = reference_kept(before, budget, sinks, recent, want);
        size_t got = 0;
        CHECK_OK(kvc_layer_eviction_plan(layer, budget, sinks, recent, kept, 2400, &got));
        CHECK(got == count && memcmp(kept, want, count * 4) == 0);
        CHECK(test_state_matches(layer, before));
        CHECK_OK(kvc_layer_evict(layer, budget, sinks, recent));
        uint8_t *flags = position_flags(before, want, count);
        CHECK(holds_kept(layer, before, flags, 1));
        CHECK(kvc_layer_next_position(layer) == appended);
        evicted_rounds += count < L;
        free(flags);
        test_state_free(before);
    }
    CHECK(evicted_rounds > 100);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(evict_should_change_nothing_when_seq_len_is_within_budget) {
    test_rng rng = test_rng_new(1002);
    test_data data = test_data_make(1002, 100, 3, 8, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 100, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(add_imp(layer, &rng));
        test_state *before = test_state_take(layer);
        CHECK_OK(kvc_layer_evict(layer, 100, 10, 10));
        CHECK_OK(kvc_layer_evict(layer, 1000, 0, 0));
        CHECK_OK(kvc_layer_slide_window(layer, 100, 4));
        CHECK(test_state_matches(layer, before));
        test_state_free(before);
        kvc_layer_free(layer);
    }
    /* An empty layer too. */
    kvc_layer *empty;
    CHECK_OK(kvc_layer_create(2, 4, KVC_MODE_Q8, &empty));
    CHECK_OK(kvc_layer_evict(empty, 1, 0, 1));
    size_t count = 7;
    CHECK_OK(kvc_layer_eviction_plan(empty, 1, 0, 1, NULL, 0, &count));
    CHECK(count == 0 && kvc_layer_seq_len(empty) == 0);
    kvc_layer_free(empty);
    test_data_free(&data);
}

TEST(eviction_plan_should_give_the_kept_positions_and_change_nothing) {
    test_rng rng = test_rng_new(1003);
    test_data data = test_data_make(1003, 150, 5, 8, 1);
    static const size_t policies[][3] = {{40, 4, 8}, {40, 0, 0}, {12, 12, 0}, {12, 0, 12},
                                         {1, 0, 1}, {1, 1, 0}, {149, 3, 3}, {150, 0, 0}};
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 150, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(add_imp(layer, &rng));
        test_state *before = test_state_take(layer);
        for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
            const size_t *p = policies[i];
            uint32_t want[150], kept[151];
            const size_t count = reference_kept(before, p[0], p[1], p[2], want);
            size_t got = 0;
            kept[count] = 0xdeadbeef;
            /* Room for exactly min(seq_len, budget) positions is enough. */
            CHECK_OK(kvc_layer_eviction_plan(layer, p[0], p[1], p[2], kept, count, &got));
            CHECK(got == count && memcmp(kept, want, count * 4) == 0);
            CHECK(kept[count] == 0xdeadbeef);
            CHECK(test_state_matches(layer, before));
            /* ... and it is what evict then keeps. */
            kvc_layer *copy;
            CHECK_OK(kvc_layer_clone(layer, &copy));
            CHECK_OK(kvc_layer_evict(copy, p[0], p[1], p[2]));
            uint32_t *slots = test_alloc(count * 4);
            CHECK_OK(kvc_layer_positions(copy, slots, count));
            CHECK(memcmp(slots, want, count * 4) == 0);
            free(slots);
            kvc_layer_free(copy);
        }
        test_state_free(before);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(slide_window_should_keep_the_sinks_and_the_newest_positions) {
    test_rng rng = test_rng_new(1004);
    test_data data = test_data_make(1004, 200, 4, 8, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 100, test_modes[mi]);
        CHECK(layer != NULL);
        /* Importance must not matter. */
        CHECK_OK(add_imp(layer, &rng));
        test_state *before = test_state_take(layer);
        CHECK_OK(kvc_layer_slide_window(layer, 20, 4));
        uint32_t want[20];
        for (uint32_t i = 0; i < 4; i++) want[i] = i;
        for (uint32_t i = 4; i < 20; i++) want[i] = 100 - 20 + i;
        CHECK(positions_are(layer, want, 20));
        uint8_t *flags = position_flags(before, want, 20);
        CHECK(holds_kept(layer, before, flags, 1));
        free(flags);
        test_state_free(before);
        /* Again after more appends; then a window without sinks. */
        CHECK_OK(test_data_append(layer, &data, 100, 50));
        CHECK_OK(kvc_layer_slide_window(layer, 20, 4));
        for (uint32_t i = 4; i < 20; i++) want[i] = 150 - 20 + i;
        CHECK(positions_are(layer, want, 20));
        CHECK_OK(kvc_layer_slide_window(layer, 5, 0));
        for (uint32_t i = 0; i < 5; i++) want[i] = 145 + i;
        CHECK(positions_are(layer, want, 5));
        CHECK(kvc_layer_next_position(layer) == 150);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

/* ---- what the heads hold ---- */

TEST(evict_should_keep_exactly_the_kept_rows_of_every_head_in_every_mode) {
    /* Masked heads (gaps, a head dead below the window, a head never alive),
     * positions on both sides of 64, two evictions with appends between. */
    test_rng rng = test_rng_new(1005);
    const size_t H = 5, d = 12, len = 200;
    test_data data = test_data_make(1005, len, H, d, 1);
    static const size_t policies[2][3] = {{40, 4, 8}, {30, 0, 0}};
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        const kvc_mode mode = test_modes[mi];
        kvc_layer *layer = test_layer_with(&data, 150, mode);
        CHECK(layer != NULL);
        for (int round = 0; round < 2; round++) {
            CHECK_OK(add_imp(layer, &rng));
            test_state *before = test_state_take(layer);
            const size_t *p = policies[round];
            uint32_t kept[200];
            const size_t count = reference_kept(before, p[0], p[1], p[2], kept);
            CHECK(count == p[0]);
            CHECK_OK(kvc_layer_evict(layer, p[0], p[1], p[2]));
            uint8_t *flags = position_flags(before, kept, count);
            CHECK(holds_kept(layer, before, flags, 1));
            free(flags);
            /* Some kept rows on each side of the window. */
            CHECK(kept[0] < W && kept[count - 1] >= W);
            /* The field stays (frozen in a quantized mode), and so does the
             * next position; memory follows the formula for what is held. */
            CHECK(kvc_layer_field_frozen(layer) == (mode != KVC_MODE_F32));
            CHECK(kvc_layer_next_position(layer) == before->next_position);
            size_t windows[2 * 5];
            test_window_rows(layer, &data, windows);
            CHECK(kvc_layer_memory_bytes(layer) ==
                  test_expected_memory_with(&data, kept, count, mode != KVC_MODE_F32, mode, windows));
            test_state_free(before);
            if (round == 0) CHECK_OK(test_data_append(layer, &data, 150, 50));
        }
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(evict_below_the_window_should_leave_the_field_unfrozen) {
    test_rng rng = test_rng_new(1006);
    const size_t H = 3, d = 8;
    test_data data = test_data_make(1006, 50, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 50, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(add_imp(layer, &rng));
        test_state *before = test_state_take(layer);
        uint32_t kept[50];
        const size_t count = reference_kept(before, 10, 2, 2, kept);
        CHECK_OK(kvc_layer_evict(layer, 10, 2, 2));
        uint8_t *flags = position_flags(before, kept, count);
        CHECK(holds_kept(layer, before, flags, 1));
        CHECK(kvc_layer_field_frozen(layer) == 0);
        CHECK(kvc_layer_memory_bytes(layer) ==
              test_expected_memory_of(&data, kept, count, 0, test_modes[mi]));
        free(flags);
        test_state_free(before);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

/* A layer in `mode` that appended, in order, only the kept positions of
 * data (with their masks). */
static kvc_layer *layer_of_positions(const test_data *data, const uint32_t *kept, size_t count,
                                     kvc_mode mode) {
    kvc_layer *layer = test_layer_with(data, 0, mode);
    for (size_t i = 0; i < count && layer; i++) {
        if (test_data_append(layer, data, kept[i], 1) != KVC_OK) {
            kvc_layer_free(layer);
            layer = NULL;
        }
    }
    return layer;
}

TEST(attend_f32_after_evict_should_equal_a_layer_of_only_the_kept_positions) {
    test_rng rng = test_rng_new(1007);
    const size_t H = 5, d = 12;
    test_data data = test_data_make(1007, 160, H, d, 1);
    kvc_layer *layer = test_layer_with(&data, 160, KVC_MODE_F32);
    CHECK(layer != NULL);
    CHECK_OK(add_imp(layer, &rng));
    test_state *before = test_state_take(layer);
    uint32_t kept[160];
    const size_t count = reference_kept(before, 50, 4, 10, kept);
    test_state_free(before);
    CHECK_OK(kvc_layer_evict(layer, 50, 4, 10));
    kvc_layer *fresh = layer_of_positions(&data, kept, count, KVC_MODE_F32);
    CHECK(fresh != NULL);
    float q[12], out[12], want[12], probs[160], want_probs[160], rows[160 * 12], vals[160 * 12];
    for (size_t h = 0; h < H; h++) {
        const size_t n = kvc_layer_head_len(layer, h);
        CHECK(n == kvc_layer_head_len(fresh, h));
        CHECK_OK(kvc_layer_head_keys(layer, h, rows, sizeof rows / 4));
        CHECK_OK(kvc_layer_head_values(layer, h, vals, sizeof vals / 4));
        for (int i = 0; i < 4; i++) {
            test_fill_normal(&rng, q, d);
            CHECK_OK(kvc_layer_attend(layer, q, h, out, probs));
            CHECK_OK(kvc_layer_attend(fresh, q, h, want, want_probs));
            CHECK(test_bits_equal(out, want, d) && test_bits_equal(probs, want_probs, n));
            CHECK_OK(kvc_attention_head(q, rows, vals, n, d, want, want_probs));
            CHECK(test_bits_equal(out, want, d) && test_bits_equal(probs, want_probs, n));
        }
    }
    kvc_layer_free(fresh);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(attend_quantized_after_evict_should_follow_the_kept_rows) {
    /* The rows are those of before (see above); attend over them stays
     * within 5e-3 of f32 attention over their dequantized floats: what the
     * 14-bit query code and the value weights' i16 codes leave (measured
     * 2.2e-3; a row misread would be far off). */
    test_rng rng = test_rng_new(1008);
    const size_t H = 5, d = 16;
    test_data data = test_data_make(1008, 160, H, d, 1);
    float q[16], out[16], want[16], probs[160], rows[160 * 16], vals[160 * 16];
    double worst = 0.0;
    for (size_t mi = 0; mi < TEST_QUANTIZED_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 160, test_quantized_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(add_imp(layer, &rng));
        CHECK_OK(kvc_layer_evict(layer, 50, 4, 10));
        for (size_t h = 0; h < H; h++) {
            const size_t n = kvc_layer_head_len(layer, h);
            CHECK_OK(kvc_layer_head_keys(layer, h, rows, sizeof rows / 4));
            CHECK_OK(kvc_layer_head_values(layer, h, vals, sizeof vals / 4));
            for (int i = 0; i < 4 && n; i++) {
                test_fill_normal(&rng, q, d);
                CHECK_OK(kvc_layer_attend(layer, q, h, out, probs));
                CHECK_OK(kvc_attention_head(q, rows, vals, n, d, want, NULL));
                const double err = test_rel_error(out, want, d);
                worst = err > worst ? err : worst;
            }
        }
        kvc_layer_free(layer);
    }
    printf("  quantized attend after evict vs f32 over the kept rows: %.3g\n", worst);
    CHECK(worst <= 5e-3);
    test_data_free(&data);
}

/* ---- after an eviction ---- */

TEST(appends_after_evict_should_continue_at_the_next_position) {
    /* The field was frozen before the eviction and stays: the new rows are
     * the bytes a layer that never evicted gets for them. */
    test_rng rng = test_rng_new(1009);
    const size_t H = 5, d = 12, len = 220;
    test_data data = test_data_make(1009, len, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *plain = test_layer_with(&data, len, test_modes[mi]);
        kvc_layer *layer = test_layer_with(&data, 150, test_modes[mi]);
        CHECK(plain != NULL && layer != NULL);
        CHECK_OK(add_imp(layer, &rng));
        test_state *before = test_state_take(layer);
        uint32_t kept[220];
        size_t count = reference_kept(before, 40, 4, 8, kept);
        test_state_free(before);
        CHECK_OK(kvc_layer_evict(layer, 40, 4, 8));
        CHECK(kvc_layer_next_position(layer) == 150);
        /* One by one, then several at once. */
        for (size_t p = 150; p < 160; p++) {
            CHECK_OK(test_data_append(layer, &data, p, 1));
            CHECK(kvc_layer_next_position(layer) == p + 1);
        }
        CHECK_OK(test_data_append(layer, &data, 160, len - 160));
        for (size_t p = 150; p < len; p++) kept[count++] = (uint32_t)p;
        test_state *all = test_state_take(plain);
        uint8_t *flags = position_flags(all, kept, count);
        if (test_mode_has_q4(test_modes[mi])) CHECK(rows_as_plain_or_appended(layer, all, &data));
        else CHECK(holds_kept(layer, all, flags, 0));
        CHECK(kvc_layer_next_position(layer) == len);
        size_t windows[2 * 5];
        test_window_rows(layer, &data, windows);
        CHECK(kvc_layer_memory_bytes(layer) ==
              test_expected_memory_with(&data, kept, count, test_modes[mi] != KVC_MODE_F32,
                                        test_modes[mi], windows));
        /* New slots start at zero importance. */
        float imp[220];
        CHECK_OK(kvc_layer_imp(layer, imp, 220));
        for (size_t s = 40; s < count; s++) CHECK(imp[s] == 0.0f);
        free(flags);
        test_state_free(all);
        kvc_layer_free(plain);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(truncate_after_evict_should_rewind_positions_not_slots) {
    test_rng rng = test_rng_new(1010);
    const size_t H = 5, d = 12, len = 150;
    test_data data = test_data_make(1010, len, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        const kvc_mode mode = test_modes[mi];
        kvc_layer *plain = test_layer_with(&data, len, mode);
        kvc_layer *layer = test_layer_with(&data, len, mode);
        CHECK(plain != NULL && layer != NULL);
        test_state *all = test_state_take(plain);
        CHECK_OK(add_imp(layer, &rng));
        test_state *before = test_state_take(layer);
        uint32_t kept[150];
        size_t count = reference_kept(before, 30, 3, 6, kept);
        test_state_free(before);
        CHECK_OK(kvc_layer_evict(layer, 30, 3, 6));
        /* Within the recent positions: the next append is the first dropped
         * one, and appending them again gives what never evicting gives. */
        CHECK_OK(kvc_layer_truncate_last(layer, 4));
        count -= 4;
        CHECK(kvc_layer_seq_len(layer) == count);
        CHECK(kvc_layer_next_position(layer) == len - 4 && kept[count - 1] == len - 5);
        CHECK(kvc_layer_field_frozen(layer) == (mode != KVC_MODE_F32));
        uint8_t *flags = position_flags(all, kept, count);
        CHECK(holds_kept(layer, all, flags, 0));
        free(flags);
        CHECK_OK(test_data_append(layer, &data, len - 4, 4));
        count += 4;
        flags = position_flags(all, kept, count);
        CHECK(holds_kept(layer, all, flags, 0));
        free(flags);
        /* Into a gap: rewinding positions that were evicted drops no slot,
         * only the next position moves back. */
        CHECK_OK(kvc_layer_truncate_last(layer, 6)); /* the recent ones */
        count -= 6;
        CHECK(kvc_layer_next_position(layer) == len - 6);
        const size_t gap = (len - 6) - (kept[count - 1] + 1u); /* evicted positions before them */
        CHECK(gap > 0);
        CHECK_OK(kvc_layer_truncate_last(layer, gap));
        CHECK(kvc_layer_seq_len(layer) == count && kvc_layer_next_position(layer) == kept[count - 1] + 1u);
        /* One more: the last kept slot goes. */
        CHECK_OK(kvc_layer_truncate_last(layer, 1));
        count -= 1;
        CHECK(kvc_layer_seq_len(layer) == count && kvc_layer_next_position(layer) == kept[count]);
        size_t windows[2 * 5];
        test_window_rows(layer, &data, windows);
        CHECK(kvc_layer_memory_bytes(layer) ==
              test_expected_memory_with(&data, kept, count, mode != KVC_MODE_F32 && kept[count] > W,
                                        mode, windows));
        /* Everything: back to position 0. */
        CHECK_OK(kvc_layer_truncate_last(layer, 1000));
        CHECK(kvc_layer_seq_len(layer) == 0 && kvc_layer_next_position(layer) == 0);
        CHECK(kvc_layer_field_frozen(layer) == 0 && kvc_layer_memory_bytes(layer) == 0);
        test_state_free(all);
        kvc_layer_free(plain);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(model_truncate_after_evict_should_keep_the_layers_at_one_next_position) {
    /* Layers evict by their own imp, so they hold different slots; a rewind
     * by n positions leaves every layer at the same next position. */
    const size_t H = 2, d = 4, len = 90;
    test_data data = test_data_make(1012, len, H, d, 1);
    kvc_layer *layers[2] = {test_layer_with(&data, len, KVC_MODE_Q8), test_layer_with(&data, len, KVC_MODE_F32)};
    CHECK(layers[0] != NULL && layers[1] != NULL);
    float probs[90];
    for (size_t l = 0; l < 2; l++) {
        for (size_t p = 0; p < len; p++) probs[p] = (float)((p * (l + 3)) % 11);
        CHECK_OK(kvc_layer_accumulate_imp(layers[l], probs, len));
    }
    kvc_model *model;
    CHECK_OK(kvc_model_create(layers, 2, &model));
    CHECK_OK(kvc_model_evict(model, 20, 2, 0)); /* no recent: the newest may go */
    for (size_t n = 1; n <= 40; n += 13) {
        CHECK_OK(kvc_model_truncate_last(model, n));
        CHECK(kvc_layer_next_position(kvc_model_layer(model, 0)) == kvc_layer_next_position(kvc_model_layer(model, 1)));
        CHECK(kvc_model_seq_len(model) == kvc_layer_next_position(kvc_model_layer(model, 0)));
    }
    CHECK(kvc_model_seq_len(model) == len - 1 - 14 - 27 - 40);
    kvc_model_free(model);
    test_data_free(&data);
}

TEST(truncate_after_evict_back_below_the_window_should_unfreeze_the_field) {
    /* Importance on positions below 60 only: the heavy hitters kept are all
     * below the window, so rewinding to position 64 leaves them all and the
     * field thaws; appending position 64 freezes it again. */
    const size_t H = 4, d = 8, len = 120;
    test_data data = test_data_make(1011, len, H, d, 1);
    float probs[120] = {0};
    for (size_t p = 0; p < 60; p++) probs[p] = 1.0f + (float)(p % 7);
    for (size_t mi = 0; mi < TEST_QUANTIZED_MODE_COUNT; mi++) {
        const kvc_mode mode = test_quantized_modes[mi];
        kvc_layer *layer = test_layer_with(&data, len, mode);
        CHECK(layer != NULL);
        CHECK_OK(kvc_layer_accumulate_imp(layer, probs, len));
        CHECK_OK(kvc_layer_evict(layer, 20, 2, 5));
        CHECK(kvc_layer_field_frozen(layer) == 1);
        uint32_t kept[20];
        CHECK_OK(kvc_layer_positions(layer, kept, 20));
        CHECK(kept[14] < 60 && kept[15] == len - 5);
        CHECK_OK(kvc_layer_truncate_last(layer, 5));
        CHECK(kvc_layer_next_position(layer) == len - 5 && kvc_layer_field_frozen(layer) == 1);
        CHECK_OK(kvc_layer_truncate_last(layer, len - 5 - W));
        CHECK(kvc_layer_seq_len(layer) == 15 && kvc_layer_next_position(layer) == W);
        CHECK(kvc_layer_field_frozen(layer) == 0);
        CHECK(kvc_layer_memory_bytes(layer) == test_expected_memory_of(&data, kept, 15, 0, mode));
        CHECK_OK(test_data_append(layer, &data, W, 1));
        CHECK(kvc_layer_field_frozen(layer) == 1);
        CHECK(kvc_layer_next_position(layer) == W + 1);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

/* ---- max_rows ---- */

TEST(max_rows_should_bound_appends_and_keep_the_newest_positions) {
    /* Each append that would pass max_rows first evicts to max_rows - n:
     * the same as evicting by hand before appending. */
    static const size_t chunks[] = {1, 3, 7, 18, 1, 1, 12, 5, 2, 18, 8, 1, 4, 6, 11, 1, 9, 13};
    const size_t max_rows = 20, sinks = 2, recent = 5, len = 440;
    test_rng rng = test_rng_new(1012);
    test_data data = test_data_make(1012, len, 4, 8, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 0, test_modes[mi]);
        kvc_layer *mirror = test_layer_with(&data, 0, test_modes[mi]);
        CHECK(layer != NULL && mirror != NULL);
        CHECK_OK(kvc_layer_set_max_rows(layer, max_rows, sinks, recent));
        size_t at = 0;
        for (size_t round = 0; at < 380; round++) {
            const size_t n = chunks[round % (sizeof chunks / sizeof chunks[0])];
            if (kvc_layer_seq_len(mirror) + n > max_rows) {
                const size_t budget = max_rows - n, s = sinks < budget ? sinks : budget;
                const size_t r = recent < budget - s ? recent : budget - s;
                CHECK_OK(kvc_layer_evict(mirror, budget, s, r));
            }
            CHECK_OK(test_data_append(mirror, &data, at, n));
            CHECK_OK(test_data_append(layer, &data, at, n));
            at += n;
            CHECK(kvc_layer_seq_len(layer) <= max_rows);
            CHECK(kvc_layer_next_position(layer) == at);
            uint32_t slots[20];
            const size_t L = kvc_layer_seq_len(layer);
            CHECK_OK(kvc_layer_positions(layer, slots, 20));
            for (size_t i = 0; i < n; i++) CHECK(slots[L - n + i] == at - n + i);
            /* n <= max_rows - sinks: the sinks stay. */
            CHECK(slots[0] == 0 && (L < 2 || slots[1] == 1));
            CHECK(test_layers_equal(layer, mirror));
            /* Importance between appends, the same on both. */
            test_rng copy = rng;
            CHECK_OK(add_imp(layer, &rng));
            CHECK_OK(add_imp(mirror, &copy));
        }
        /* n = max_rows keeps only the new positions, sinks or not. */
        CHECK_OK(test_data_append(layer, &data, at, max_rows));
        uint32_t slots[20];
        CHECK_OK(kvc_layer_positions(layer, slots, 20));
        CHECK(kvc_layer_seq_len(layer) == max_rows && slots[0] == at);
        CHECK(kvc_layer_next_position(layer) == at + max_rows);
        kvc_layer_free(layer);
        kvc_layer_free(mirror);
    }
    test_data_free(&data);
}

TEST(append_of_more_than_max_rows_should_return_length_and_change_nothing) {
    test_data data = test_data_make(1013, 100, 3, 8, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 30, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(kvc_layer_set_max_rows(layer, 10, 1, 1));
        CHECK_REFUSED(layer, test_data_append(layer, &data, 30, 11), KVC_E_LENGTH);
        CHECK_REFUSED(layer, test_data_append(layer, &data, 30, 60), KVC_E_LENGTH);
        /* Setting the bound evicts nothing by itself: the next append does. */
        CHECK(kvc_layer_seq_len(layer) == 30);
        CHECK_OK(test_data_append(layer, &data, 30, 10));
        CHECK(kvc_layer_seq_len(layer) == 10 && kvc_layer_next_position(layer) == 40);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(max_rows_zero_should_turn_the_bound_off) {
    test_data data = test_data_make(1014, 100, 3, 8, 1);
    kvc_layer *layer = test_layer_with(&data, 0, KVC_MODE_Q8);
    kvc_layer *plain = test_layer_with(&data, 0, KVC_MODE_Q8);
    CHECK(layer != NULL && plain != NULL);
    CHECK_OK(kvc_layer_set_max_rows(layer, 10, 2, 2));
    CHECK_OK(kvc_layer_set_max_rows(layer, 0, 0, 0));
    CHECK_OK(test_data_append(layer, &data, 0, 100));
    CHECK_OK(test_data_append(plain, &data, 0, 100));
    CHECK(test_layers_equal(layer, plain));
    /* With a policy given along with 0, still off. */
    CHECK_OK(kvc_layer_set_max_rows(layer, 0, 3, 4));
    CHECK_OK(test_data_append(layer, &data, 0, 50));
    CHECK(kvc_layer_seq_len(layer) == 150);
    kvc_layer_free(layer);
    kvc_layer_free(plain);
    test_data_free(&data);
}

TEST(max_rows_should_let_a_verify_pass_it_until_accept) {
    test_data data = test_data_make(1015, 100, 3, 8, 1);
    kvc_layer *layer = test_layer_with(&data, 0, KVC_MODE_Q8);
    CHECK(layer != NULL);
    CHECK_OK(kvc_layer_set_max_rows(layer, 10, 1, 2));
    for (size_t p = 0; p < 70; p += 10) CHECK_OK(test_data_append(layer, &data, p, 10));
    CHECK(kvc_layer_seq_len(layer) == 10);
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK_OK(test_data_append(layer, &data, 70, 4));
    CHECK(kvc_layer_seq_len(layer) == 14 && kvc_layer_draft_len(layer) == 4);
    CHECK_OK(kvc_layer_accept(layer, 2));
    CHECK(kvc_layer_next_position(layer) == 72);
    CHECK_OK(test_data_append(layer, &data, 72, 1));
    CHECK(kvc_layer_seq_len(layer) == 10 && kvc_layer_next_position(layer) == 73);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(max_rows_should_bound_a_decoder_that_always_verifies) {
    /* Speculative decoding appends only inside verifies: accept(j > 0) brings
     * the layer back to max_rows, keeping the accepted positions, so it never
     * holds more than max_rows + drafts. */
    test_data data = test_data_make(1016, 400, 2, 8, 1);
    kvc_layer *layer = test_layer_with(&data, 0, KVC_MODE_Q8);
    CHECK(layer != NULL);
    CHECK_OK(kvc_layer_set_max_rows(layer, 12, 2, 3));
    CHECK_OK(test_data_append(layer, &data, 0, 12));
    size_t at = 12;
    for (int round = 0; round < 60; round++) {
        const size_t drafts = 1 + (size_t)round % 5, accepted = (size_t)round % (drafts + 1);
        CHECK_OK(kvc_layer_begin_verify(layer));
        CHECK_OK(test_data_append(layer, &data, at, drafts));
        CHECK(kvc_layer_seq_len(layer) <= 12 + drafts);
        CHECK(kvc_layer_draft_len(layer) == drafts);
        CHECK_OK(kvc_layer_accept(layer, accepted));
        at += accepted;
        CHECK(kvc_layer_next_position(layer) == at);
        CHECK(kvc_layer_seq_len(layer) == 12);
        uint32_t slots[12];
        CHECK_OK(kvc_layer_positions(layer, slots, 12));
        CHECK(slots[0] == 0 && slots[1] == 1);
        for (size_t i = 0; i < accepted; i++) CHECK(slots[11 - i] == at - 1 - i);
    }
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(a_rejected_verify_should_leave_a_layer_over_max_rows_as_it_was) {
    /* A bound set below what the layer holds waits for the next append or
     * accepted draft; a rejected verify is not one. */
    test_data data = test_data_make(1017, 80, 2, 8, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 70, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(kvc_layer_set_max_rows(layer, 20, 2, 4));
        test_state *before = test_state_take(layer);
        CHECK_OK(kvc_layer_begin_verify(layer));
        CHECK_OK(test_data_append(layer, &data, 70, 5));
        CHECK_OK(kvc_layer_accept(layer, 0));
        CHECK(kvc_layer_seq_len(layer) == 70 && test_state_matches(layer, before));
        CHECK_OK(kvc_layer_begin_verify(layer));
        CHECK_OK(test_data_append(layer, &data, 70, 5));
        CHECK_OK(kvc_layer_accept(layer, 3));
        CHECK(kvc_layer_seq_len(layer) == 20 && kvc_layer_next_position(layer) == 73);
        test_state_free(before);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(clone_of_an_evicted_layer_should_keep_its_positions_and_max_rows) {
    test_rng rng = test_rng_new(1024);
    test_data data = test_data_make(1024, 200, 4, 8, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 120, test_modes[mi]), *copy;
        CHECK(layer != NULL);
        CHECK_OK(add_imp(layer, &rng));
        CHECK_OK(kvc_layer_evict(layer, 30, 2, 4));
        CHECK_OK(kvc_layer_set_max_rows(layer, 32, 3, 3));
        CHECK_OK(kvc_layer_clone(layer, &copy));
        CHECK(test_layers_equal(copy, layer));
        for (size_t p = 120; p < 200; p += 8) {
            CHECK_OK(test_data_append(layer, &data, p, 8));
            CHECK_OK(test_data_append(copy, &data, p, 8));
            CHECK(kvc_layer_seq_len(copy) <= 32);
        }
        CHECK(test_layers_equal(copy, layer));
        kvc_layer_free(copy);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

/* ---- refusals ---- */

TEST(evict_and_plan_should_refuse_a_bad_budget_and_change_nothing) {
    test_data data = test_data_make(1016, 80, 3, 8, 1);
    kvc_layer *layer = test_layer_with(&data, 80, KVC_MODE_Q8);
    CHECK(layer != NULL);
    uint32_t kept[80];
    size_t count = 0;
    static const size_t bad[][3] = {{0, 0, 0}, {5, 6, 0}, {5, 0, 6}, {5, 3, 3}, {5, 1, (size_t)-1},
                                    {5, (size_t)-1, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const size_t *b = bad[i];
        CHECK_REFUSED(layer, kvc_layer_evict(layer, b[0], b[1], b[2]), KVC_E_BUDGET);
        CHECK_REFUSED(layer, kvc_layer_eviction_plan(layer, b[0], b[1], b[2], kept, 80, &count),
                      KVC_E_BUDGET);
        if (b[0]) /* max_rows 0 is no bound, not a bad one */
            CHECK_REFUSED(layer, kvc_layer_set_max_rows(layer, b[0], b[1], b[2]), KVC_E_BUDGET);
    }
    CHECK_REFUSED(layer, kvc_layer_slide_window(layer, 0, 0), KVC_E_BUDGET);
    /* A bound past KVC_MAX_POSITIONS could not travel in a snapshot to a 32-bit build. */
    CHECK_REFUSED(layer, kvc_layer_set_max_rows(layer, (size_t)KVC_MAX_POSITIONS + 1, 1, 1), KVC_E_BUDGET);
    CHECK_OK(kvc_layer_set_max_rows(layer, KVC_MAX_POSITIONS, 1, 1));
    CHECK_OK(kvc_layer_set_max_rows(layer, 0, 0, 0));
    CHECK_REFUSED(layer, kvc_layer_slide_window(layer, 4, 5), KVC_E_BUDGET);
    CHECK_STATUS(kvc_layer_evict(NULL, 4, 1, 1), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_slide_window(NULL, 4, 1), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_eviction_plan(NULL, 4, 1, 1, kept, 80, &count), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_set_max_rows(NULL, 4, 1, 1), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_set_max_rows(NULL, 0, 0, 0), KVC_E_NULL_POINTER);
    /* The plan: room for min(seq_len, budget) positions, and its pointers. */
    count = 99;
    CHECK_REFUSED(layer, kvc_layer_eviction_plan(layer, 40, 1, 1, kept, 39, &count), KVC_E_LENGTH);
    CHECK_REFUSED(layer, kvc_layer_eviction_plan(layer, 100, 1, 1, kept, 79, &count),
                  KVC_E_LENGTH);
    CHECK_REFUSED(layer, kvc_layer_eviction_plan(layer, 40, 1, 1, NULL, 40, &count),
                  KVC_E_NULL_POINTER);
    CHECK_REFUSED(layer, kvc_layer_eviction_plan(layer, 40, 1, 1, kept, 40, NULL),
                  KVC_E_NULL_POINTER);
    CHECK(count == 99);
    CHECK_OK(kvc_layer_eviction_plan(layer, 100, 1, 1, kept, 80, &count));
    CHECK(count == 80);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(eviction_calls_on_a_linear_layer_should_return_kind) {
    test_steps steps = test_steps_make(1017, 3, 2, 4, 4, 0, 1);
    kvc_layer *layer = test_linear_with(&steps, 3, 0.0);
    CHECK(layer != NULL);
    uint32_t kept[4];
    size_t count;
    CHECK_REFUSED(layer, kvc_layer_evict(layer, 2, 1, 1), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_slide_window(layer, 2, 1), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_eviction_plan(layer, 2, 1, 1, kept, 4, &count), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_set_max_rows(layer, 2, 1, 1), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_set_max_rows(layer, 0, 0, 0), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_positions(layer, kept, 4), KVC_E_KIND);
    CHECK(kvc_layer_next_position(layer) == 0 && kvc_layer_next_position(NULL) == 0);
    kvc_layer_free(layer);
    test_steps_free(&steps);
}

TEST(evict_during_a_verify_should_return_verifying_and_plan_should_still_work) {
    test_data data = test_data_make(1018, 80, 3, 8, 1);
    kvc_layer *layer = test_layer_with(&data, 70, KVC_MODE_Q8);
    CHECK(layer != NULL);
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK_OK(test_data_append(layer, &data, 70, 3));
    CHECK_REFUSED(layer, kvc_layer_evict(layer, 10, 1, 1), KVC_E_VERIFYING);
    CHECK_REFUSED(layer, kvc_layer_slide_window(layer, 10, 1), KVC_E_VERIFYING);
    uint32_t kept[10];
    size_t count = 0;
    CHECK_REFUSED(layer, kvc_layer_eviction_plan(layer, 10, 1, 1, kept, 10, &count), KVC_OK);
    CHECK(count == 10 && kept[0] == 0 && kept[9] == 72);
    CHECK_OK(kvc_layer_accept(layer, 3));
    CHECK_OK(kvc_layer_evict(layer, 10, 1, 1));
    CHECK(kvc_layer_seq_len(layer) == 10);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(positions_should_refuse_short_buffer_and_null) {
    test_data data = test_data_make(1019, 20, 2, 4, 1);
    kvc_layer *layer = test_layer_with(&data, 0, KVC_MODE_F32);
    CHECK(layer != NULL);
    uint32_t slots[20];
    CHECK_OK(kvc_layer_positions(layer, NULL, 0));
    CHECK_OK(test_data_append(layer, &data, 0, 20));
    CHECK_STATUS(kvc_layer_positions(layer, slots, 19), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_positions(layer, NULL, 20), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_positions(NULL, slots, 20), KVC_E_NULL_POINTER);
    CHECK_OK(kvc_layer_positions(layer, slots, 20));
    for (uint32_t s = 0; s < 20; s++) CHECK(slots[s] == s);
    kvc_layer_free(layer);
    test_data_free(&data);
}

/* ---- models ---- */

TEST(model_evict_should_evict_each_full_layer_by_its_own_imp_and_leave_linear_layers) {
    test_rng rng = test_rng_new(1020);
    test_hybrid h = test_hybrid_make(1020, 140);
    kvc_model *model = test_hybrid_model(&h, 120);
    CHECK(model != NULL);
    /* Different importance in each full layer. */
    CHECK_OK(add_imp(kvc_model_layer(model, 0), &rng));
    CHECK_OK(add_imp(kvc_model_layer(model, 1), &rng));
    test_state **before = test_model_state_take(model);
    uint32_t kept[2][120];
    size_t count[2];
    for (size_t i = 0; i < 2; i++) count[i] = reference_kept(before[i], 30, 2, 4, kept[i]);
    CHECK(count[0] == 30 && count[1] == 30 && memcmp(kept[0], kept[1], 30 * 4) != 0);
    CHECK_OK(kvc_model_evict(model, 30, 2, 4));
    for (size_t i = 0; i < 2; i++) {
        uint8_t *flags = position_flags(before[i], kept[i], count[i]);
        CHECK(holds_kept(kvc_model_layer(model, i), before[i], flags, 1));
        free(flags);
    }
    CHECK(test_state_matches(kvc_model_layer(model, 2), before[2]));
    /* The model's position count is the least next position: unchanged. */
    CHECK(kvc_model_seq_len(model) == 120);
    CHECK(kvc_model_memory_bytes(model) ==
          test_expected_memory_of(&h.data[0], kept[0], 30, 1, KVC_MODE_Q8) +
              test_expected_memory_of(&h.data[1], kept[1], 30, 0, KVC_MODE_F32) +
              kvc_layer_memory_bytes(kvc_model_layer(model, 2)));
    test_model_state_free(before);
    /* Appends go on at position 120 in every layer. */
    CHECK_OK(test_data_append(kvc_model_layer(model, 0), &h.data[0], 120, 20));
    CHECK(kvc_model_seq_len(model) == 120);
    CHECK_OK(test_data_append(kvc_model_layer(model, 1), &h.data[1], 120, 20));
    CHECK_OK(test_steps_take(kvc_model_layer(model, 2), &h.steps, 120, 20, NULL));
    CHECK(kvc_model_seq_len(model) == 140);
    CHECK(kvc_layer_seq_len(kvc_model_layer(model, 0)) == 50);
    /* Within budget: nothing. */
    before = test_model_state_take(model);
    CHECK_OK(kvc_model_evict(model, 50, 2, 4));
    CHECK(test_model_state_matches(model, before));
    test_model_state_free(before);
    kvc_model_free(model);
    test_hybrid_free(&h);
}

TEST(model_evict_should_refuse_a_bad_budget_or_a_verify_and_change_nothing) {
    test_hybrid h = test_hybrid_make(1021, 100);
    kvc_model *model = test_hybrid_model(&h, 90);
    CHECK(model != NULL);
    CHECK_MODEL_REFUSED(model, kvc_model_evict(model, 0, 0, 0), KVC_E_BUDGET);
    CHECK_MODEL_REFUSED(model, kvc_model_evict(model, 10, 11, 0), KVC_E_BUDGET);
    CHECK_MODEL_REFUSED(model, kvc_model_evict(model, 10, 5, 6), KVC_E_BUDGET);
    CHECK_STATUS(kvc_model_evict(NULL, 10, 1, 1), KVC_E_NULL_POINTER);
    CHECK_OK(kvc_model_begin_verify(model));
    CHECK_MODEL_REFUSED(model, kvc_model_evict(model, 10, 1, 1), KVC_E_VERIFYING);
    CHECK_OK(kvc_model_accept(model, 0));
    CHECK_OK(kvc_model_evict(model, 10, 1, 1));
    CHECK(kvc_layer_seq_len(kvc_model_layer(model, 1)) == 10);
    kvc_model_free(model);
    /* Linear layers only: nothing to evict. */
    kvc_layer *linear = test_linear_with(&h.steps, 5, 0.0);
    CHECK(linear != NULL);
    CHECK_OK(kvc_model_create(&linear, 1, &model));
    CHECK_MODEL_REFUSED(model, kvc_model_evict(model, 1, 0, 1), KVC_OK);
    kvc_model_free(model);
    test_hybrid_free(&h);
}

/* ---- out of memory ---- */

typedef struct evict_ctx {
    kvc_layer *layer;
    kvc_model *model;
    size_t budget, sinks, recent;
    uint32_t *kept;
    size_t kept_len, count;
} evict_ctx;

static kvc_status op_evict(void *ctx) {
    evict_ctx *e = ctx;
    return kvc_layer_evict(e->layer, e->budget, e->sinks, e->recent);
}

static kvc_status op_plan(void *ctx) {
    evict_ctx *e = ctx;
    return kvc_layer_eviction_plan(e->layer, e->budget, e->sinks, e->recent, e->kept, e->kept_len,
                                   &e->count);
}

static kvc_status op_model_evict(void *ctx) {
    evict_ctx *e = ctx;
    return kvc_model_evict(e->model, e->budget, e->sinks, e->recent);
}

TEST(evict_and_plan_should_fail_cleanly_on_allocation_failure) {
    test_rng rng = test_rng_new(1022);
    test_data data = test_data_make(1022, 120, 4, 8, 1);
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        for (int persistent = 0; persistent < 2; persistent++) {
            kvc_layer *layer = test_layer_with(&data, 120, test_modes[mi]), *want;
            CHECK(layer != NULL);
            CHECK_OK(add_imp(layer, &rng));
            CHECK_OK(kvc_layer_clone(layer, &want));
            CHECK_OK(kvc_layer_evict(want, 30, 2, 3));
            /* The plan: a failed one leaves the count and the buffer too. */
            uint32_t kept[31];
            kept[0] = 0xdeadbeef;
            evict_ctx e = {layer, NULL, 30, 2, 3, kept, 31, 12345};
            test_fault_arm(1, persistent);
            CHECK_STATUS(op_plan(&e), KVC_E_NOMEM);
            test_fault_arm(0, 0);
            CHECK(e.count == 12345 && kept[0] == 0xdeadbeef);
            CHECK(test_run_with_faults(op_plan, &e, layer, persistent, TEST_KEEPS_NONE) == 1);
            CHECK(e.count == 30);
            CHECK(test_run_with_faults(op_evict, &e, layer, persistent, TEST_KEEPS_NONE) == 1);
            CHECK(test_layers_equal(layer, want));
            /* Nothing to evict: nothing allocated. */
            CHECK(test_run_with_faults(op_evict, &e, layer, persistent, TEST_KEEPS_NONE) == 0);
            kvc_layer_free(layer);
            kvc_layer_free(want);
        }
    }
    CHECK(test_fault_remove() == 0);
    test_data_free(&data);
}

TEST(model_evict_should_fail_cleanly_on_allocation_failure) {
    test_rng rng = test_rng_new(1023);
    test_hybrid h = test_hybrid_make(1023, 110);
    CHECK_OK(test_fault_install());
    for (int persistent = 0; persistent < 2; persistent++) {
        kvc_model *model = test_hybrid_model(&h, 110), *want;
        CHECK(model != NULL);
        CHECK_OK(add_imp(kvc_model_layer(model, 0), &rng));
        CHECK_OK(add_imp(kvc_model_layer(model, 1), &rng));
        CHECK_OK(kvc_model_clone(model, &want));
        CHECK_OK(kvc_model_evict(want, 25, 1, 4));
        evict_ctx e = {NULL, model, 25, 1, 4, NULL, 0, 0};
        CHECK(test_run_with_faults_on_model(op_model_evict, &e, model, persistent,
                                            TEST_KEEPS_NONE) == 1);
        CHECK(test_models_equal(model, want));
        kvc_model_free(model);
        kvc_model_free(want);
    }
    CHECK(test_fault_remove() == 0);
    test_hybrid_free(&h);
}

RUN_TESTS(CASE(evict_should_keep_sinks_recent_and_the_highest_imp_between_on_hand_made_imp),
          CASE(evict_should_keep_what_the_policy_gives_on_random_imp_over_many_rounds),
          CASE(evict_should_change_nothing_when_seq_len_is_within_budget),
          CASE(eviction_plan_should_give_the_kept_positions_and_change_nothing),
          CASE(slide_window_should_keep_the_sinks_and_the_newest_positions),
          CASE(evict_should_keep_exactly_the_kept_rows_of_every_head_in_every_mode),
          CASE(evict_below_the_window_should_leave_the_field_unfrozen),
          CASE(attend_f32_after_evict_should_equal_a_layer_of_only_the_kept_positions),
          CASE(attend_quantized_after_evict_should_follow_the_kept_rows),
          CASE(appends_after_evict_should_continue_at_the_next_position),
          CASE(truncate_after_evict_should_rewind_positions_not_slots),
          CASE(model_truncate_after_evict_should_keep_the_layers_at_one_next_position),
          CASE(truncate_after_evict_back_below_the_window_should_unfreeze_the_field),
          CASE(max_rows_should_bound_appends_and_keep_the_newest_positions),
          CASE(append_of_more_than_max_rows_should_return_length_and_change_nothing),
          CASE(max_rows_zero_should_turn_the_bound_off),
          CASE(max_rows_should_let_a_verify_pass_it_until_accept),
          CASE(max_rows_should_bound_a_decoder_that_always_verifies),
          CASE(a_rejected_verify_should_leave_a_layer_over_max_rows_as_it_was),
          CASE(clone_of_an_evicted_layer_should_keep_its_positions_and_max_rows),
          CASE(evict_and_plan_should_refuse_a_bad_budget_and_change_nothing),
          CASE(eviction_calls_on_a_linear_layer_should_return_kind),
          CASE(evict_during_a_verify_should_return_verifying_and_plan_should_still_work),
          CASE(positions_should_refuse_short_buffer_and_null),
          CASE(model_evict_should_evict_each_full_layer_by_its_own_imp_and_leave_linear_layers),
          CASE(model_evict_should_refuse_a_bad_budget_or_a_verify_and_change_nothing),
          CASE(evict_and_plan_should_fail_cleanly_on_allocation_failure),
          CASE(model_evict_should_fail_cleanly_on_allocation_failure))

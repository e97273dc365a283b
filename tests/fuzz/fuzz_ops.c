/*
 * fuzz_ops.c -- libFuzzer harness: sequences of API calls on layers and
 * models (the input format is in ops_format.h).
 *
 * The harness keeps a world of 1..3 layers, full (any mode) or linear,
 * optionally owned by a model, and beside each layer a reference of what it
 * must hold (reference.h), updated by the rules of include/kvcache.h.  For
 * every call it works out which errors apply; the call must return one of
 * them (or succeed when none does, or return KVC_E_NOMEM when an injected
 * allocation failure hit it), and only a successful call is applied to the
 * reference.  After every call the whole world is checked against the
 * references (check.h), so a refused call that changed anything, a row in
 * the wrong place, a wrong memory_bytes, or an attention result that is not
 * what the definition gives is a crash.  ASan and UBSan watch every call.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fuzz_alloc.h"
#include "fuzz_input.h"
#include "kvcache.h"
#include "ops_format.h"
#include "reference.h"

/* Calls per input: enough for long stories, few enough to stay fast. */
#define MAX_CALLS 256

typedef struct slot {
    kvc_layer *layer; /* owned by the world, or by world.model */
    ref_layer ref;
    /* A fork kept beside it (FUZZ_OP_FORK), sharing its pages: whatever is
     * done to the layer must leave the fork as its reference says. */
    kvc_layer *fork;
    ref_layer fork_ref;
} slot;

static struct world {
    size_t count;
    slot slots[FUZZ_MAX_LAYERS];
    kvc_model *model; /* NULL, or the owner of every slot's layer */
} world;

static float *floats(size_t n) {
    return fuzz_buffer(n * sizeof(float));
}

/* ---- injected allocation failures: armed for the one call an operation
 * is about ---- */

static struct {
    unsigned nth;
    int persistent;
} pending;

static void arm(void) {
    if (pending.nth) fuzz_alloc_arm(pending.nth, pending.persistent);
}

/* @return : 1 if an allocation of the call failed. */
static int disarm(void) {
    pending.nth = 0;
    return fuzz_alloc_disarm();
}

/* ---- the world ---- */

static void world_read(fuzz_input *in) {
    static const double phase_masses[] = FUZZ_PHASE_MASSES;
    world.count = 1 + fuzz_byte(in) % FUZZ_MAX_LAYERS;
    world.model = NULL;
    for (size_t i = 0; i < world.count; i++) {
        slot *s = &world.slots[i];
        s->fork = NULL;
        const uint8_t kind = fuzz_byte(in);
        kvc_status status;
        if (kind % (KVC_MODE_COUNT + 1) < KVC_MODE_COUNT) {
            const size_t H = 1 + fuzz_byte(in) % FUZZ_MAX_H;
            size_t d = 1 + fuzz_byte(in) % FUZZ_MAX_D;
            if (H * d > FUZZ_MAX_HD) d = FUZZ_MAX_HD / H;
            const kvc_mode mode = (kvc_mode)(kind % (KVC_MODE_COUNT + 1));
            status = kvc_layer_create(H, d, mode, &s->layer);
            ref_init_full(&s->ref, H, d, mode);
        } else {
            const size_t H = 1 + fuzz_byte(in) % FUZZ_MAX_LINEAR_H;
            const size_t F = 1 + fuzz_byte(in) % FUZZ_MAX_F, dv = 1 + fuzz_byte(in) % FUZZ_MAX_DV;
            const double phase_mass = phase_masses[fuzz_byte(in) % 5];
            status = kvc_layer_create_linear(H, F, dv, phase_mass, &s->layer);
            ref_init_linear(&s->ref, H, F, dv, phase_mass);
        }
        FUZZ_REQUIRE(status == KVC_OK);
    }
}

static void drop_fork(slot *s) {
    if (!s->fork) return;
    kvc_layer_free(s->fork);
    ref_free(&s->fork_ref);
    s->fork = NULL;
}

static void world_free(void) {
    if (world.model) kvc_model_free(world.model);
    for (size_t i = 0; i < world.count; i++) {
        if (!world.model) kvc_layer_free(world.slots[i].layer);
        ref_free(&world.slots[i].ref);
        drop_fork(&world.slots[i]);
    }
    world.model = NULL;
    world.count = 0;
    /* Every page went with its last holder. */
    kvc_memory_usage usage;
    kvc_memory_stats(&usage);
    FUZZ_REQUIRE(usage.pages == 0 && usage.layers == 0 && usage.cache_bytes == 0);
}

static int any_verifying(void) {
    for (size_t i = 0; i < world.count; i++) {
        if (world.slots[i].ref.verifying) return 1;
    }
    return 0;
}

static int positions_agree(void) {
    for (size_t i = 1; i < world.count; i++) {
        if (ref_positions_taken(&world.slots[i].ref) != ref_positions_taken(&world.slots[0].ref)) return 0;
    }
    return 1;
}

static void check_world(void) {
    size_t memory = 0, least = (size_t)-1, every = 0;
    for (size_t i = 0; i < world.count; i++) {
        const slot *s = &world.slots[i];
        if (s->fork) {
            check_layer(s->fork, &s->fork_ref);
            every += ref_memory_bytes(&s->fork_ref);
            FUZZ_REQUIRE(kvc_layer_shared_bytes(s->fork) <= ref_memory_bytes(&s->fork_ref));
        }
        FUZZ_REQUIRE(kvc_layer_shared_bytes(s->layer) <= ref_memory_bytes(&s->ref));
        every += ref_memory_bytes(&s->ref);
    }
    /* Every page once: no more than the layers' bytes, counted apart. */
    kvc_memory_usage usage;
    kvc_memory_stats(&usage);
    FUZZ_REQUIRE(usage.cache_bytes <= every && usage.layers >= world.count);
    for (size_t i = 0; i < world.count; i++) {
        check_layer(world.slots[i].layer, &world.slots[i].ref);
        memory += kvc_layer_memory_bytes(world.slots[i].layer);
        const size_t taken = ref_positions_taken(&world.slots[i].ref);
        if (taken < least) least = taken;
    }
    const kvc_model *model = world.model;
    if (!model) return;
    FUZZ_REQUIRE(kvc_model_num_layers(model) == world.count);
    for (size_t i = 0; i < world.count; i++) FUZZ_REQUIRE(kvc_model_layer(model, i) == world.slots[i].layer);
    FUZZ_REQUIRE(kvc_model_layer(model, world.count) == NULL);
    FUZZ_REQUIRE(kvc_model_seq_len(model) == least);
    FUZZ_REQUIRE(kvc_model_memory_bytes(model) == memory);
    FUZZ_REQUIRE(kvc_model_capacity_bytes(model) >= memory);
    FUZZ_REQUIRE(kvc_model_verifying(model) == any_verifying());
    FUZZ_REQUIRE((kvc_model_snapshot_size(model) == 0) == any_verifying());
}

/* Puts a copy of a slot's layer (a clone, a restored snapshot) in its
 * place, so that the calls that follow run on the copy's own buffers; in a
 * model the copy was only to be checked, and is freed. */
static void replace_layer(slot *s, kvc_layer *copy) {
    if (world.model) {
        kvc_layer_free(copy);
        return;
    }
    kvc_layer_free(s->layer);
    s->layer = copy;
}

static void replace_model(kvc_model *copy) {
    kvc_model_free(world.model);
    world.model = copy;
    for (size_t i = 0; i < world.count; i++) world.slots[i].layer = kvc_model_layer(copy, i);
}

/* ---- what applies to a call ---- */

static int full(const slot *s) {
    return s->ref.kind == KVC_KIND_FULL;
}

/* Geometry of the buffers a full-layer call gets: a linear layer refuses
 * the call before reading them, and gets one element. */
static size_t heads_of(const slot *s) {
    return full(s) ? s->ref.full.H : 0;
}

static size_t dim_of(const slot *s) {
    return full(s) ? s->ref.full.d : 1;
}

/* 1 if an element of a live head's slice of x [n x H x d] is NaN or +-Inf. */
static int live_nonfinite(const float *x, size_t n, size_t H, size_t d, const uint8_t *alive) {
    for (size_t i = 0; i < n * H; i++) {
        if ((!alive || alive[i]) && !check_finite(x + i * d, d)) return 1;
    }
    return 0;
}

static int probs_refused(const float *probs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(probs[i]) || probs[i] < 0.0f) return 1;
    }
    return 0;
}

static status_set policy_errors(size_t budget, size_t sinks, size_t recent) {
    return budget == 0 || sinks > budget || recent > budget - sinks ? STATUS(KVC_E_BUDGET) : 0;
}

/* The n byte of truncations and the j byte of accepts. */
static size_t count_byte(fuzz_input *in, size_t modulus) {
    const uint8_t b = fuzz_byte(in);
    return b == 255 ? (size_t)-1 : b % modulus;
}

/* ---- appending ---- */

static uint8_t *read_mask(fuzz_input *in, size_t n, size_t H) {
    const uint8_t kind = fuzz_byte(in), param = kind / 4;
    if (kind % 4 == FUZZ_MASK_NULL) return NULL;
    uint8_t *alive = fuzz_buffer(n * H);
    if (kind % 4 == FUZZ_MASK_ALL) {
        memset(alive, 1 + param % 255, n * H);
    } else if (kind % 4 == FUZZ_MASK_RANDOM) {
        fuzz_rng rng = {(uint64_t)fuzz_byte(in) << 8 | kind};
        for (size_t i = 0; i < n * H; i++) alive[i] = fuzz_rng_next(&rng) % 4 >= param % 4;
    } else {
        for (size_t i = 0; i < n * H; i++) alive[i] = fuzz_byte(in);
    }
    return alive;
}

static void op_append(fuzz_input *in, slot *s, int batch) {
    size_t n = batch ? fuzz_byte(in) % 80 : 1;
    const size_t H = full(s) ? s->ref.full.H : 1, d = dim_of(s);
    if (full(s) && s->ref.full.next_position + n > FUZZ_MAX_POSITIONS) n = 0;
    if (!batch && n == 0) return;
    uint8_t *alive = read_mask(in, n, H);
    float *k = floats(n * H * d), *v = floats(n * H * d);
    fuzz_fill(in, k, n * H * d);
    fuzz_fill(in, v, n * H * d);
    const uint8_t nulls = fuzz_byte(in) % 16;
    const float *k_arg = nulls == 1 ? NULL : k, *v_arg = nulls == 2 ? NULL : v;

    status_set errors = 0;
    if (!full(s)) {
        errors = STATUS(KVC_E_KIND);
    } else if (n > 0) {
        const ref_full *f = &s->ref.full;
        if (!k_arg || !v_arg) errors |= STATUS(KVC_E_NULL_POINTER);
        if (f->max_rows && !s->ref.verifying && n > f->max_rows) errors |= STATUS(KVC_E_LENGTH);
        if (live_nonfinite(k, n, H, d, alive)) errors |= STATUS(KVC_E_NONFINITE_KEY);
        if (live_nonfinite(v, n, H, d, alive)) errors |= STATUS(KVC_E_NONFINITE_VALUE);
    }
    arm();
    const kvc_status status = batch ? kvc_layer_append_n(s->layer, n, k_arg, v_arg, alive)
                                    : kvc_layer_append(s->layer, k_arg, v_arg, alive);
    /* n = 0 succeeds at once: nothing is appended, nothing evicted. */
    if (check_status(status, errors, n > 0, disarm()) && n > 0)
        ref_append(&s->ref.full, s->ref.verifying, n, k, v, alive);
    free(alive);
    free(k);
    free(v);
}

/* ---- attention ---- */

/* The single-query attend of query q on head h must give `out` and (when
 * given) `probs` bit for bit; and both must be right (check_attention). */
static void check_as_attend(const slot *s, size_t h, const float *q, const float *out,
                            const float *probs) {
    const size_t d = s->ref.full.d, n = ref_head_len(&s->ref.full, h);
    float *single = floats(d), *single_probs = floats(n);
    FUZZ_REQUIRE(kvc_layer_attend(s->layer, q, h, single, single_probs) == KVC_OK);
    FUZZ_REQUIRE(memcmp(single, out, d * sizeof(float)) == 0);
    if (probs) FUZZ_REQUIRE(n == 0 || memcmp(single_probs, probs, n * sizeof(float)) == 0);
    check_attention(s->layer, &s->ref, h, q, single, single_probs, n);
    free(single);
    free(single_probs);
}

static void op_attend(fuzz_input *in, slot *s) {
    const size_t H = heads_of(s), d = dim_of(s);
    const size_t h = fuzz_byte(in) % (H + 1);
    float *q = floats(d), *out = floats(d);
    fuzz_fill(in, q, d);
    const size_t n = full(s) && h < H ? ref_head_len(&s->ref.full, h) : 0;
    float *probs = fuzz_byte(in) & 1 ? NULL : floats(n);

    status_set errors = 0;
    if (!full(s)) errors = STATUS(KVC_E_KIND);
    else if (h >= H) errors = STATUS(KVC_E_KV_HEAD);
    else if (!check_finite(q, d)) errors = STATUS(KVC_E_NONFINITE_QUERY);
    /* One workspace a call, none for a head with no rows (kvcache.h). */
    const int allocates = full(s) && h < H && n > 0;
    arm();
    const kvc_status status = kvc_layer_attend(s->layer, q, h, out, probs);
    if (check_status(status, errors, allocates, disarm()))
        check_attention(s->layer, &s->ref, h, q, out, probs, n);
    free(q);
    free(out);
    free(probs);
}

/* The buffers of a call of `count` queries on head h (room for one when count
 * is 0, a refused call): q [count x d] read from the input, out, and probs
 * [count x head_len(h)] or NULL as the input's next byte says. */
typedef struct head_queries {
    float *q, *out, *probs;
    size_t n; /* head_len(h), 0 for a head that is not there */
} head_queries;

static head_queries read_head_queries(fuzz_input *in, const slot *s, size_t count, size_t h) {
    const size_t d = dim_of(s), queries = count ? count : 1;
    head_queries b = {floats(queries * d), floats(queries * d), NULL, 0};
    fuzz_fill(in, b.q, queries * d);
    b.n = full(s) && h < heads_of(s) ? ref_head_len(&s->ref.full, h) : 0;
    if (!(fuzz_byte(in) & 1)) b.probs = floats(queries * b.n);
    return b;
}

static void free_head_queries(head_queries *b) {
    free(b->q);
    free(b->out);
    free(b->probs);
}

static void op_attend_group(fuzz_input *in, slot *s) {
    const size_t G = fuzz_byte(in) % 5, H = heads_of(s), d = dim_of(s);
    const size_t h = fuzz_byte(in) % (H + 1);
    head_queries b = read_head_queries(in, s, G, h);
    const float *q = b.q, *out = b.out, *probs = b.probs;
    const size_t n = b.n;

    status_set errors = 0;
    if (!full(s)) errors = STATUS(KVC_E_KIND);
    else if (h >= H) errors = STATUS(KVC_E_KV_HEAD);
    else if (G == 0) errors = STATUS(KVC_E_LENGTH);
    else if (!check_finite(q, G * d)) errors = STATUS(KVC_E_NONFINITE_QUERY);
    arm();
    const kvc_status status = kvc_layer_attend_group(s->layer, q, G, h, b.out, b.probs);
    if (check_status(status, errors, 1, disarm())) {
        for (size_t g = 0; g < G; g++)
            check_as_attend(s, h, q + g * d, out + g * d, probs ? probs + g * n : NULL);
    }
    free_head_queries(&b);
}

static void op_attend_heads(fuzz_input *in, slot *s) {
    const uint8_t shape = fuzz_byte(in);
    const size_t H = heads_of(s), d = dim_of(s), G = 1 + shape % 3;
    size_t queries = G * (H ? H : 1);
    if (shape % 8 == 7) queries++;
    if (shape % 8 == 6) queries = 0;
    const size_t L = full(s) ? s->ref.full.len : 0;
    float *q = floats(queries * d), *out = floats(queries * d);
    fuzz_fill(in, q, queries * d);
    float *probs = fuzz_byte(in) & 1 ? NULL : floats(queries * L);

    status_set errors = 0;
    if (!full(s)) errors = STATUS(KVC_E_KIND);
    else if (queries == 0 || queries % H != 0) errors = STATUS(KVC_E_NUM_HEADS);
    else if (!check_finite(q, queries * d)) errors = STATUS(KVC_E_NONFINITE_QUERY);
    arm();
    const kvc_status status = kvc_layer_attend_heads(s->layer, q, queries, out, probs);
    if (check_status(status, errors, 1, disarm())) {
        const size_t per_head = queries / H;
        for (size_t i = 0; i < queries; i++) {
            const size_t h = i / per_head, n = ref_head_len(&s->ref.full, h);
            float *head_probs = floats(n);
            /* Row i: the head's weights at the slots it stored, 0 elsewhere. */
            size_t r = 0;
            for (size_t slot_index = 0; probs && slot_index < L; slot_index++) {
                const float p = probs[i * L + slot_index];
                if (s->ref.full.alive[slot_index * H + h]) head_probs[r++] = p;
                else FUZZ_REQUIRE(p == 0.0f && !signbit(p));
            }
            check_as_attend(s, h, q + i * d, out + i * d, probs ? head_probs : NULL);
            free(head_probs);
        }
    }
    free(q);
    free(out);
    free(probs);
}

/* Query i of a causal attend sees the slots before L - m + i + 1: compare it
 * with attend on a clone truncated there (not during a verify: clone and
 * truncate_last refuse then). */
static void check_causal_query(const slot *s, size_t h, size_t visible, const float *q,
                               const float *out, const float *probs, size_t seen) {
    const ref_full *f = &s->ref.full;
    const size_t d = f->d;
    if (s->ref.verifying) return;
    kvc_layer *prefix;
    FUZZ_REQUIRE(kvc_layer_clone(s->layer, &prefix) == KVC_OK);
    const size_t cut = visible < f->len ? f->position[visible] : f->next_position;
    FUZZ_REQUIRE(kvc_layer_truncate_last(prefix, f->next_position - cut) == KVC_OK);
    FUZZ_REQUIRE(kvc_layer_seq_len(prefix) == visible && kvc_layer_head_len(prefix, h) == seen);
    float *single = floats(d), *single_probs = floats(seen);
    FUZZ_REQUIRE(kvc_layer_attend(prefix, q, h, single, single_probs) == KVC_OK);
    FUZZ_REQUIRE(memcmp(single, out, d * sizeof(float)) == 0);
    if (probs) FUZZ_REQUIRE(seen == 0 || memcmp(single_probs, probs, seen * sizeof(float)) == 0);
    free(single);
    free(single_probs);
    kvc_layer_free(prefix);
}

static void op_attend_causal(fuzz_input *in, slot *s) {
    const size_t L = full(s) ? s->ref.full.len : 0, H = heads_of(s), d = dim_of(s);
    const size_t m = fuzz_byte(in) % (L + 2 < 18 ? L + 2 : 18);
    const size_t h = fuzz_byte(in) % (H + 1);
    head_queries b = read_head_queries(in, s, m, h);
    const float *q = b.q, *out = b.out, *probs = b.probs;
    const size_t n = b.n;

    status_set errors = 0;
    if (!full(s)) errors = STATUS(KVC_E_KIND);
    else if (m == 0 || m > L) errors = STATUS(KVC_E_LENGTH);
    else if (h >= H) errors = STATUS(KVC_E_KV_HEAD);
    else if (!check_finite(q, m * d)) errors = STATUS(KVC_E_NONFINITE_QUERY);
    arm();
    const kvc_status status = kvc_layer_attend_causal(s->layer, q, m, h, b.out, b.probs);
    if (check_status(status, errors, 1, disarm())) {
        const ref_full *f = &s->ref.full;
        for (size_t i = 0; i < m; i++) {
            const size_t visible = L - m + i + 1;
            size_t seen = 0;
            for (size_t slot_index = 0; slot_index < visible; slot_index++) seen += f->alive[slot_index * H + h];
            const float *row = probs ? probs + i * n : NULL;
            for (size_t r = seen; row && r < n; r++) FUZZ_REQUIRE(row[r] == 0.0f);
            check_attention(s->layer, &s->ref, h, q + i * d, out + i * d, row, seen);
            check_causal_query(s, h, visible, q + i * d, out + i * d, row, seen);
        }
    }
    free_head_queries(&b);
}

/* ---- positions and importance ---- */

static void op_truncate(fuzz_input *in, slot *s) {
    const size_t n = count_byte(in, 96);
    status_set errors = 0;
    if (!full(s)) errors = STATUS(KVC_E_KIND);
    else if (s->ref.verifying) errors = STATUS(KVC_E_VERIFYING);
    arm();
    const kvc_status status = kvc_layer_truncate_last(s->layer, n);
    if (check_status(status, errors, 0, disarm())) ref_truncate(&s->ref.full, n);
}

/* The length byte: the right length, or one more, or one less. */
static size_t length_byte(fuzz_input *in, size_t right) {
    const uint8_t b = fuzz_byte(in) % 8;
    if (b == 0) return right + 1;
    if (b == 1 && right > 0) return right - 1;
    return right;
}

static void op_accumulate(fuzz_input *in, slot *s, int per_head) {
    const size_t H = heads_of(s);
    const size_t h = per_head ? fuzz_byte(in) % (H + 1) : 0;
    const size_t right = !full(s) ? 0 : per_head ? (h < H ? ref_head_len(&s->ref.full, h) : 0) : s->ref.full.len;
    const size_t n = length_byte(in, right);
    float *probs = floats(n);
    fuzz_fill(in, probs, n);

    status_set errors = 0;
    if (!full(s)) errors = STATUS(KVC_E_KIND);
    else if (per_head && h >= H) errors = STATUS(KVC_E_KV_HEAD);
    else if (n != right) errors = STATUS(KVC_E_LENGTH);
    else if (probs_refused(probs, n)) errors = STATUS(KVC_E_PROBS);
    arm();
    const kvc_status status = per_head ? kvc_layer_accumulate_imp_head(s->layer, h, probs, n)
                                       : kvc_layer_accumulate_imp(s->layer, probs, n);
    /* Out of memory only when imp pages are shared: with the slot's fork. */
    if (check_status(status, errors, s->fork != NULL, disarm())) {
        if (per_head) ref_accumulate_head(&s->ref.full, h, probs);
        else ref_accumulate(&s->ref.full, probs);
    }
    free(probs);
}

/* ---- copies: clone and snapshots ---- */

static void op_clone(slot *s) {
    kvc_layer *copy = (kvc_layer *)s; /* must come back NULL on error */
    arm();
    const kvc_status status = kvc_layer_clone(s->layer, &copy);
    if (!check_status(status, s->ref.verifying ? STATUS(KVC_E_VERIFYING) : 0, 1, disarm())) {
        FUZZ_REQUIRE(copy == NULL);
        return;
    }
    check_layer(copy, &s->ref);
    size_t size, copy_size;
    uint8_t *bytes = check_serialize(s->layer, &size), *copy_bytes = check_serialize(copy, &copy_size);
    FUZZ_REQUIRE(size == copy_size && memcmp(bytes, copy_bytes, size) == 0);
    free(bytes);
    free(copy_bytes);
    replace_layer(s, copy);
}

/* Keeps a fork of the layer beside it (b % 3 == 0), swaps the two (1: the
 * fork's writes then meet the pages of the layer it came from), or drops
 * the fork (2). */
static void op_fork(fuzz_input *in, slot *s) {
    const uint8_t variant = fuzz_byte(in) % 3;
    if (variant == 0) {
        kvc_layer *fork = (kvc_layer *)s; /* must come back NULL on error */
        arm();
        const kvc_status status = kvc_layer_clone(s->layer, &fork);
        if (!check_status(status, s->ref.verifying ? STATUS(KVC_E_VERIFYING) : 0, 1, disarm())) {
            FUZZ_REQUIRE(fork == NULL);
            return;
        }
        drop_fork(s);
        s->fork = fork;
        ref_copy(&s->fork_ref, &s->ref);
        FUZZ_REQUIRE(kvc_layer_shared_bytes(fork) == kvc_layer_memory_bytes(fork) || !full(s));
    } else if (variant == 1 && s->fork && !world.model) {
        kvc_layer *layer = s->layer;
        const ref_layer ref = s->ref;
        s->layer = s->fork;
        s->ref = s->fork_ref;
        s->fork = layer;
        s->fork_ref = ref;
    } else if (variant == 2) {
        drop_fork(s);
    }
}

/* A changed byte or a cut end (as `variant` says): refused, and nothing built. */
static void check_damaged_refused(fuzz_input *in, uint8_t variant, const uint8_t *bytes, size_t size,
                                  int model) {
    if (!(variant & 3)) return;
    const size_t where = fuzz_u16(in) % size;
    uint8_t *damaged = fuzz_buffer(size);
    memcpy(damaged, bytes, size);
    if (variant & 1) {
        damaged[where] ^= (uint8_t)(1 + variant / 4 % 255);
        void *out = damaged;
        const kvc_status status = model ? kvc_model_deserialize(damaged, size, (kvc_model **)&out)
                                        : kvc_layer_deserialize(damaged, size, (kvc_layer **)&out);
        FUZZ_REQUIRE(status != KVC_OK && out == NULL);
    }
    if (variant & 2) {
        void *out = damaged;
        const kvc_status status = model ? kvc_model_deserialize(bytes, where, (kvc_model **)&out)
                                        : kvc_layer_deserialize(bytes, where, (kvc_layer **)&out);
        FUZZ_REQUIRE(status != KVC_OK && out == NULL);
    }
    free(damaged);
}

static void op_snapshot(fuzz_input *in, slot *s) {
    const uint8_t variant = fuzz_byte(in);
    if (s->ref.verifying) {
        uint8_t bytes[64];
        FUZZ_REQUIRE(kvc_layer_snapshot_size(s->layer) == 0);
        FUZZ_REQUIRE(kvc_layer_serialize(s->layer, bytes, sizeof bytes) == KVC_E_VERIFYING);
        return;
    }
    size_t size;
    uint8_t *bytes = check_serialize(s->layer, &size);
    kvc_layer *restored = (kvc_layer *)s;
    arm();
    const kvc_status status = kvc_layer_deserialize(bytes, size, &restored);
    if (check_status(status, 0, 1, disarm())) {
        check_layer(restored, &s->ref);
        size_t again_size;
        uint8_t *again = check_serialize(restored, &again_size);
        FUZZ_REQUIRE(again_size == size && memcmp(again, bytes, size) == 0);
        free(again);
        replace_layer(s, restored);
    } else {
        FUZZ_REQUIRE(restored == NULL);
    }
    check_damaged_refused(in, variant, bytes, size, 0);
    free(bytes);
}

/* ---- eviction ---- */

static void op_evict(fuzz_input *in, slot *s, int window) {
    size_t budget, sinks, recent;
    status_set errors = 0;
    if (window) {
        budget = fuzz_byte(in) % 80;
        sinks = fuzz_byte(in) % 16;
        recent = sinks <= budget ? budget - sinks : 0;
        if (sinks > budget) errors = STATUS(KVC_E_BUDGET);
    } else {
        budget = fuzz_byte(in) % 80;
        sinks = fuzz_byte(in) % 16;
        recent = fuzz_byte(in) % 40;
    }
    if (!full(s)) errors |= STATUS(KVC_E_KIND);
    errors |= policy_errors(budget, sinks, recent);
    if (s->ref.verifying) errors |= STATUS(KVC_E_VERIFYING);
    arm();
    const kvc_status status = window ? kvc_layer_slide_window(s->layer, budget, sinks)
                                     : kvc_layer_evict(s->layer, budget, sinks, recent);
    if (check_status(status, errors, 1, disarm())) ref_evict(&s->ref.full, budget, sinks, recent);
}

static void op_eviction_plan(fuzz_input *in, slot *s) {
    const size_t budget = fuzz_byte(in) % 80, sinks = fuzz_byte(in) % 16, recent = fuzz_byte(in) % 40;
    const uint8_t variant = fuzz_byte(in) % 4;
    const size_t L = full(s) ? s->ref.full.len : 0, keeps = L < budget ? L : budget;
    const size_t kept_len = variant == 0 && keeps > 0 ? keeps - 1 : keeps;
    uint32_t *kept = fuzz_buffer(kept_len * sizeof(uint32_t));
    size_t count = (size_t)-1;

    status_set errors = 0;
    if (!full(s)) errors |= STATUS(KVC_E_KIND);
    errors |= policy_errors(budget, sinks, recent);
    if (variant == 1) errors |= STATUS(KVC_E_NULL_POINTER);
    if (kept_len < keeps) errors |= STATUS(KVC_E_LENGTH);
    arm();
    const kvc_status status =
        kvc_layer_eviction_plan(s->layer, budget, sinks, recent, kept, kept_len, variant == 1 ? NULL : &count);
    if (check_status(status, errors, 1, disarm())) {
        const ref_full *f = &s->ref.full;
        uint8_t *keep = fuzz_buffer(L);
        ref_plan(f, budget, sinks, recent, keep);
        FUZZ_REQUIRE(count == keeps);
        size_t written = 0;
        for (size_t slot_index = 0; slot_index < L; slot_index++) {
            if (keep[slot_index]) FUZZ_REQUIRE(written < count && kept[written++] == f->position[slot_index]);
        }
        FUZZ_REQUIRE(written == count);
        free(keep);
    }
    free(kept);
}

static void op_set_max_rows(fuzz_input *in, slot *s) {
    const uint8_t b = fuzz_byte(in);
    const size_t max_rows = b == 255 ? (size_t)KVC_MAX_POSITIONS + 1 : b % 100;
    const size_t sinks = fuzz_byte(in) % 16, recent = fuzz_byte(in) % 40;
    status_set errors = 0;
    if (!full(s)) errors |= STATUS(KVC_E_KIND);
    if (max_rows && (policy_errors(max_rows, sinks, recent) || max_rows > KVC_MAX_POSITIONS))
        errors |= STATUS(KVC_E_BUDGET);
    arm();
    const kvc_status status = kvc_layer_set_max_rows(s->layer, max_rows, sinks, recent);
    if (check_status(status, errors, 0, disarm())) {
        s->ref.full.max_rows = max_rows;
        s->ref.full.sinks = max_rows ? sinks : 0;
        s->ref.full.recent = max_rows ? recent : 0;
    }
}

/* ---- speculative verify ---- */

static void op_begin_verify(slot *s) {
    arm();
    const kvc_status status = kvc_layer_begin_verify(s->layer);
    if (check_status(status, s->ref.verifying ? STATUS(KVC_E_VERIFYING) : 0, 0, disarm()))
        ref_begin_verify(&s->ref);
}

/* accept(j) allocates only to evict back to max_rows: j > 0 and the rows it
 * keeps more than max_rows (kvcache.h). */
static int accept_allocates(const ref_layer *ref, size_t j) {
    if (ref->kind != KVC_KIND_FULL || !ref->full.max_rows || j == 0 || j > ref_draft_len(ref)) return 0;
    return ref->full.len - (ref_draft_len(ref) - j) > ref->full.max_rows;
}

static void op_accept(fuzz_input *in, slot *s) {
    const size_t j = count_byte(in, 10);
    status_set errors = 0;
    if (!s->ref.verifying) errors = STATUS(KVC_E_NOT_VERIFYING);
    else if (j > ref_draft_len(&s->ref)) errors = STATUS(KVC_E_ACCEPT);
    arm();
    const kvc_status status = kvc_layer_accept(s->layer, j);
    if (check_status(status, errors, accept_allocates(&s->ref, j), disarm())) ref_accept(&s->ref, j);
}

/* ---- linear layers ---- */

static void op_linear_step(fuzz_input *in, slot *s, int phase) {
    const ref_linear *lin = &s->ref.linear;
    const int linear = !full(s);
    const size_t H = linear ? lin->H : 1, F = linear ? lin->F : 2, dv = linear ? lin->dv : 1;
    if (linear && lin->steps + lin->tentative >= FUZZ_MAX_POSITIONS) return;
    const size_t in_len = phase ? F / 2 : F;
    float *decay = fuzz_byte(in) & 1 ? NULL : floats(H * F);
    if (decay) fuzz_fill(in, decay, H * F);
    float *key = floats(H * in_len), *query = floats(H * in_len), *v = floats(H * dv);
    fuzz_fill(in, key, H * in_len);
    fuzz_fill(in, query, H * in_len);
    fuzz_fill(in, v, H * dv);
    float *out = floats(H * dv), *expected = floats(H * dv);

    status_set errors = 0;
    if (!linear) errors |= STATUS(KVC_E_KIND);
    if (phase && F % 2) errors |= STATUS(KVC_E_NUM_FEATURES);
    if (decay && !check_finite(decay, H * F)) errors |= STATUS(KVC_E_NONFINITE_DECAY);
    if (!check_finite(key, H * in_len)) errors |= STATUS(KVC_E_NONFINITE_KEY);
    if (!check_finite(query, H * in_len)) errors |= STATUS(KVC_E_NONFINITE_QUERY);
    if (!check_finite(v, H * dv)) errors |= STATUS(KVC_E_NONFINITE_VALUE);
    arm();
    const kvc_status status = phase ? kvc_layer_linear_step_phase(s->layer, decay, key, query, v, out)
                                    : kvc_layer_linear_step(s->layer, decay, key, query, v, out);
    if (check_status(status, errors, s->ref.verifying, disarm())) {
        ref_step(&s->ref.linear, s->ref.verifying, decay, key, query, v, phase, expected);
        FUZZ_REQUIRE(memcmp(out, expected, H * dv * sizeof(float)) == 0);
    }
    free(decay);
    free(key);
    free(query);
    free(v);
    free(out);
    free(expected);
}

/* ---- models ---- */

static void op_model_create(fuzz_input *in) {
    const uint8_t variant = fuzz_byte(in) % 4;
    kvc_layer *layers[FUZZ_MAX_LAYERS + 1];
    size_t count = world.count;
    for (size_t i = 0; i < count; i++) layers[i] = world.slots[i].layer;
    status_set errors = 0;
    if (world.model) errors |= STATUS(KVC_E_LAYERS); /* already in a model */
    if (variant == 1) {
        layers[count] = layers[0];
        count++;
        errors |= STATUS(KVC_E_LAYERS);
    } else if (variant == 2) {
        count = 0;
        errors |= STATUS(KVC_E_LAYERS);
    } else if (variant == 3) {
        layers[count - 1] = NULL;
        errors |= STATUS(KVC_E_NULL_POINTER);
    }
    if (any_verifying()) errors |= STATUS(KVC_E_VERIFYING);
    if (!positions_agree()) errors |= STATUS(KVC_E_LAYERS);
    kvc_model *model = (kvc_model *)&world;
    arm();
    const kvc_status status = kvc_model_create(layers, count, &model);
    if (!check_status(status, errors, 1, disarm())) {
        FUZZ_REQUIRE(model == NULL);
        return;
    }
    world.model = model;
    /* The model owns its layers: freeing one alone is a no-op. */
    kvc_layer_free(world.slots[0].layer);
}

static void op_model_truncate(fuzz_input *in) {
    const size_t n = count_byte(in, 96);
    status_set errors = world.model ? 0 : STATUS(KVC_E_NULL_POINTER);
    for (size_t i = 0; world.model && i < world.count; i++) {
        if (!full(&world.slots[i])) errors |= STATUS(KVC_E_KIND);
        if (world.slots[i].ref.verifying) errors |= STATUS(KVC_E_VERIFYING);
    }
    arm();
    const kvc_status status = kvc_model_truncate_last(world.model, n);
    if (check_status(status, errors, 0, disarm())) {
        for (size_t i = 0; i < world.count; i++) ref_truncate(&world.slots[i].ref.full, n);
    }
}

static void op_model_clear(void) {
    kvc_model_clear(world.model);
    for (size_t i = 0; world.model && i < world.count; i++) ref_clear(&world.slots[i].ref);
}

static void op_model_begin_verify(void) {
    status_set errors = !world.model ? STATUS(KVC_E_NULL_POINTER) : any_verifying() ? STATUS(KVC_E_VERIFYING) : 0;
    arm();
    const kvc_status status = kvc_model_begin_verify(world.model);
    if (check_status(status, errors, 0, disarm())) {
        for (size_t i = 0; i < world.count; i++) ref_begin_verify(&world.slots[i].ref);
    }
}

static void op_model_accept(fuzz_input *in) {
    const size_t j = count_byte(in, 10);
    status_set errors = world.model ? 0 : STATUS(KVC_E_NULL_POINTER);
    const size_t drafts = world.count ? ref_draft_len(&world.slots[0].ref) : 0;
    for (size_t i = 0; world.model && i < world.count; i++) {
        if (!world.slots[i].ref.verifying) errors |= STATUS(KVC_E_NOT_VERIFYING);
        if (ref_draft_len(&world.slots[i].ref) != drafts) errors |= STATUS(KVC_E_ACCEPT);
    }
    if (world.model && j > drafts) errors |= STATUS(KVC_E_ACCEPT);
    int allocates = 0;
    for (size_t i = 0; i < world.count; i++) allocates |= accept_allocates(&world.slots[i].ref, j);
    arm();
    const kvc_status status = kvc_model_accept(world.model, j);
    if (check_status(status, errors, allocates, disarm())) {
        for (size_t i = 0; i < world.count; i++) ref_accept(&world.slots[i].ref, j);
    }
}

static void op_model_evict(fuzz_input *in) {
    const size_t budget = fuzz_byte(in) % 80, sinks = fuzz_byte(in) % 16, recent = fuzz_byte(in) % 40;
    status_set errors = 0;
    if (!world.model) errors = STATUS(KVC_E_NULL_POINTER);
    else errors = policy_errors(budget, sinks, recent) | (any_verifying() ? STATUS(KVC_E_VERIFYING) : 0);
    arm();
    const kvc_status status = kvc_model_evict(world.model, budget, sinks, recent);
    if (check_status(status, errors, 1, disarm())) {
        for (size_t i = 0; i < world.count; i++) {
            if (full(&world.slots[i])) ref_evict(&world.slots[i].ref.full, budget, sinks, recent);
        }
    }
}

/* A copy of the model (clone, restored snapshot) holds what the references
 * say; it replaces the model. */
static void check_and_use_model(kvc_model *copy) {
    FUZZ_REQUIRE(kvc_model_num_layers(copy) == world.count);
    for (size_t i = 0; i < world.count; i++) check_layer(kvc_model_layer(copy, i), &world.slots[i].ref);
    replace_model(copy);
}

static void op_model_clone(void) {
    kvc_model *copy = (kvc_model *)&world;
    status_set errors = !world.model ? STATUS(KVC_E_NULL_POINTER) : any_verifying() ? STATUS(KVC_E_VERIFYING) : 0;
    arm();
    const kvc_status status = kvc_model_clone(world.model, &copy);
    if (!check_status(status, errors, 1, disarm())) {
        FUZZ_REQUIRE(copy == NULL);
        return;
    }
    if (positions_agree()) {
        size_t size, copy_size;
        uint8_t *bytes = check_serialize_model(world.model, &size);
        uint8_t *copy_bytes = check_serialize_model(copy, &copy_size);
        FUZZ_REQUIRE(size == copy_size && memcmp(bytes, copy_bytes, size) == 0);
        free(bytes);
        free(copy_bytes);
    }
    check_and_use_model(copy);
}

static void op_model_snapshot(fuzz_input *in) {
    const uint8_t variant = fuzz_byte(in);
    uint8_t small[64];
    if (!world.model) {
        FUZZ_REQUIRE(kvc_model_snapshot_size(NULL) == 0);
        FUZZ_REQUIRE(kvc_model_serialize(NULL, small, sizeof small) == KVC_E_NULL_POINTER);
        return;
    }
    if (any_verifying()) {
        FUZZ_REQUIRE(kvc_model_snapshot_size(world.model) == 0);
        FUZZ_REQUIRE(kvc_model_serialize(world.model, small, sizeof small) == KVC_E_VERIFYING);
        return;
    }
    if (!positions_agree()) {
        /* A runner between two layers of a step: no snapshot. */
        const size_t size = kvc_model_snapshot_size(world.model);
        uint8_t *bytes = fuzz_buffer(size);
        FUZZ_REQUIRE(kvc_model_serialize(world.model, bytes, size) == KVC_E_LAYERS);
        free(bytes);
        return;
    }
    size_t size;
    uint8_t *bytes = check_serialize_model(world.model, &size);
    kvc_model *restored = (kvc_model *)&world;
    arm();
    const kvc_status status = kvc_model_deserialize(bytes, size, &restored);
    if (check_status(status, 0, 1, disarm())) {
        size_t again_size;
        uint8_t *again = check_serialize_model(restored, &again_size);
        FUZZ_REQUIRE(again_size == size && memcmp(again, bytes, size) == 0);
        free(again);
        check_and_use_model(restored);
    } else {
        FUZZ_REQUIRE(restored == NULL);
    }
    check_damaged_refused(in, variant, bytes, size, 1);
    free(bytes);
}

/* ---- refused creation, NULL arguments ---- */

/* Every call on a NULL layer or model: KVC_E_NULL_POINTER, or 0 from an
 * accessor, or nothing from free and clear. */
static void check_null_refused(void) {
    const status_set null = STATUS(KVC_E_NULL_POINTER);
    float x[4] = {0};
    uint8_t bytes[4] = {0};
    kvc_layer *layer = (kvc_layer *)&world;
    kvc_model *model = (kvc_model *)&world;
    size_t count;
    check_status(kvc_layer_append(NULL, x, x, NULL), null, 0, 0);
    check_status(kvc_layer_attend(NULL, x, 0, x, NULL), null, 0, 0);
    check_status(kvc_layer_truncate_last(NULL, 1), null, 0, 0);
    check_status(kvc_layer_accumulate_imp(NULL, x, 0), null, 0, 0);
    check_status(kvc_layer_evict(NULL, 1, 0, 0), null, 0, 0);
    check_status(kvc_layer_eviction_plan(NULL, 1, 0, 0, NULL, 0, &count), null, 0, 0);
    check_status(kvc_layer_set_max_rows(NULL, 0, 0, 0), null, 0, 0);
    check_status(kvc_layer_begin_verify(NULL), null, 0, 0);
    check_status(kvc_layer_accept(NULL, 0), null, 0, 0);
    check_status(kvc_layer_linear_step(NULL, NULL, x, x, x, x), null, 0, 0);
    check_status(kvc_layer_serialize(NULL, bytes, sizeof bytes), null, 0, 0);
    check_status(kvc_layer_clone(NULL, &layer), null, 0, 0);
    FUZZ_REQUIRE(layer == NULL);
    check_status(kvc_layer_deserialize(NULL, 0, &layer), null, 0, 0);
    check_status(kvc_model_create(NULL, 1, &model), null, 0, 0);
    FUZZ_REQUIRE(model == NULL);
    FUZZ_REQUIRE(kvc_layer_seq_len(NULL) == 0 && kvc_layer_memory_bytes(NULL) == 0 &&
                 kvc_layer_capacity_bytes(NULL) == 0 && kvc_layer_snapshot_size(NULL) == 0 &&
                 kvc_layer_describe(NULL, NULL, 0) == 0 && kvc_layer_steps(NULL) == 0 &&
                 kvc_model_num_layers(NULL) == 0 && kvc_model_memory_bytes(NULL) == 0);
    kvc_layer_free(NULL);
    kvc_layer_clear(NULL);
    kvc_model_free(NULL);
    for (int s = -1; s < 40; s++) FUZZ_REQUIRE(kvc_status_name((kvc_status)s) != NULL);
}

static void op_create_invalid(fuzz_input *in) {
    const uint8_t which = fuzz_byte(in) % 18;
    kvc_layer *layer = (kvc_layer *)&world;
    kvc_status status, expected;
    switch (which) {
    case 0: status = kvc_layer_create(0, 4, KVC_MODE_F32, &layer), expected = KVC_E_NUM_KV_HEADS; break;
    case 1: status = kvc_layer_create(KVC_MAX_KV_HEADS + 1, 4, KVC_MODE_Q8, &layer), expected = KVC_E_NUM_KV_HEADS; break;
    case 2: status = kvc_layer_create(2, 0, KVC_MODE_Q8K, &layer), expected = KVC_E_HEAD_DIM; break;
    case 3: status = kvc_layer_create(2, KVC_MAX_HEAD_DIM + 1, KVC_MODE_Q8V, &layer), expected = KVC_E_HEAD_DIM; break;
    case 4: status = kvc_layer_create(2, 4, (kvc_mode)(KVC_MODE_COUNT + fuzz_byte(in)), &layer), expected = KVC_E_MODE; break;
    case 5: status = kvc_layer_create(2, 4, KVC_MODE_F32, NULL), expected = KVC_E_NULL_POINTER, layer = NULL; break;
    case 6: status = kvc_layer_create_linear(0, 2, 2, 0.0, &layer), expected = KVC_E_NUM_HEADS; break;
    case 7: status = kvc_layer_create_linear(1, 0, 2, 0.0, &layer), expected = KVC_E_NUM_FEATURES; break;
    case 8: status = kvc_layer_create_linear(1, KVC_MAX_HEAD_DIM + 1, 2, 0.0, &layer), expected = KVC_E_NUM_FEATURES; break;
    case 9: status = kvc_layer_create_linear(1, 2, 0, 0.0, &layer), expected = KVC_E_VALUE_DIM; break;
    case 10: status = kvc_layer_create_linear(1, 2, 2, -1.0, &layer), expected = KVC_E_PHASE_MASS; break;
    case 11: status = kvc_layer_create_linear(1, 2, 2, NAN, &layer), expected = KVC_E_PHASE_MASS; break;
    case 12: status = kvc_layer_create_linear(1, 2, 2, INFINITY, &layer), expected = KVC_E_PHASE_MASS; break;
    case 13: {
        const float q[1] = {1.0f};
        float out[1];
        status = kvc_attention_head(q, q, q, 1, 0, out, NULL), expected = KVC_E_HEAD_DIM, layer = NULL;
        break;
    }
    case 14: {
        const float q[2] = {fuzz_palette(fuzz_byte(in)), NAN};
        float out[2], probs[1];
        status = kvc_attention_head(q, q, q, 1, 2, out, probs), expected = KVC_E_NONFINITE_QUERY, layer = NULL;
        break;
    }
    case 15: status = kvc_layer_create_window(2, 4, KVC_MODE_Q8, 0, fuzz_byte(in), &layer), expected = KVC_E_WINDOW; break;
    case 16:
        status = kvc_layer_create_window(2, 4, KVC_MODE_F32, 1 + fuzz_byte(in), (size_t)KVC_MAX_POSITIONS + 1 + fuzz_byte(in), &layer);
        expected = KVC_E_WINDOW;
        break;
    default:
        check_null_refused();
        return;
    }
    FUZZ_REQUIRE(status == expected && layer == NULL);
}

/* ---- the driver ---- */

static const char *const op_names[FUZZ_OP_COUNT] = {
    "append", "append_n", "attend", "attend_group", "attend_heads", "attend_causal",
    "truncate_last", "accumulate_imp", "accumulate_imp_head", "clone", "clear", "snapshot",
    "evict", "slide_window", "eviction_plan", "set_max_rows", "begin_verify", "accept",
    "linear_step", "linear_step_phase", "model_create", "model_truncate_last", "model_clear",
    "model_begin_verify", "model_accept", "model_evict", "model_clone", "model_snapshot",
    "reset", "create_invalid", "fork"};

static void run_op(fuzz_input *in, unsigned op, slot *s) {
    switch (op) {
    case FUZZ_OP_APPEND: op_append(in, s, 0); break;
    case FUZZ_OP_APPEND_N: op_append(in, s, 1); break;
    case FUZZ_OP_ATTEND: op_attend(in, s); break;
    case FUZZ_OP_ATTEND_GROUP: op_attend_group(in, s); break;
    case FUZZ_OP_ATTEND_HEADS: op_attend_heads(in, s); break;
    case FUZZ_OP_ATTEND_CAUSAL: op_attend_causal(in, s); break;
    case FUZZ_OP_TRUNCATE: op_truncate(in, s); break;
    case FUZZ_OP_ACCUMULATE_IMP: op_accumulate(in, s, 0); break;
    case FUZZ_OP_ACCUMULATE_IMP_HEAD: op_accumulate(in, s, 1); break;
    case FUZZ_OP_CLONE: op_clone(s); break;
    case FUZZ_OP_CLEAR: kvc_layer_clear(s->layer), ref_clear(&s->ref); break;
    case FUZZ_OP_SNAPSHOT: op_snapshot(in, s); break;
    case FUZZ_OP_EVICT: op_evict(in, s, 0); break;
    case FUZZ_OP_SLIDE_WINDOW: op_evict(in, s, 1); break;
    case FUZZ_OP_EVICTION_PLAN: op_eviction_plan(in, s); break;
    case FUZZ_OP_SET_MAX_ROWS: op_set_max_rows(in, s); break;
    case FUZZ_OP_BEGIN_VERIFY: op_begin_verify(s); break;
    case FUZZ_OP_ACCEPT: op_accept(in, s); break;
    case FUZZ_OP_LINEAR_STEP: op_linear_step(in, s, 0); break;
    case FUZZ_OP_LINEAR_STEP_PHASE: op_linear_step(in, s, 1); break;
    case FUZZ_OP_MODEL_CREATE: op_model_create(in); break;
    case FUZZ_OP_MODEL_TRUNCATE: op_model_truncate(in); break;
    case FUZZ_OP_MODEL_CLEAR: op_model_clear(); break;
    case FUZZ_OP_MODEL_BEGIN_VERIFY: op_model_begin_verify(); break;
    case FUZZ_OP_MODEL_ACCEPT: op_model_accept(in); break;
    case FUZZ_OP_MODEL_EVICT: op_model_evict(in); break;
    case FUZZ_OP_MODEL_CLONE: op_model_clone(); break;
    case FUZZ_OP_MODEL_SNAPSHOT: op_model_snapshot(in); break;
    case FUZZ_OP_RESET: world_free(), world_read(in); break;
    case FUZZ_OP_FORK: op_fork(in, s); break;
    default: op_create_invalid(in); break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int installed;
    if (!installed) fuzz_alloc_install(), installed = 1;
    fuzz_input in = {data, data + size};
    fuzz_context("reading the world header");
    world_read(&in);
    check_world();
    for (size_t call = 0; call < MAX_CALLS && !fuzz_done(&in); call++) {
        const uint8_t opcode = fuzz_byte(&in);
        if (opcode & 0x80) {
            const uint8_t f = fuzz_byte(&in);
            pending.nth = 1 + f % 8;
            pending.persistent = f >> 7;
        }
        const unsigned op = (opcode & 0x7f) % FUZZ_OP_COUNT;
        const size_t target = fuzz_byte(&in) % world.count;
        fuzz_context("call %zu: %s on layer %zu%s", call, op_names[op], target,
                     pending.nth ? " with an allocation failing" : "");
        run_op(&in, op, &world.slots[target]);
        disarm();
        check_world();
    }
    fuzz_context("attending every head at the end");
    for (size_t i = 0; i < world.count; i++) {
        if (full(&world.slots[i])) check_attend_every_head(world.slots[i].layer, &world.slots[i].ref);
    }
    world_free();
    return 0;
}

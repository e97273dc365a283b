/*
 * test_recurrent.c -- the recurrent kinds of 2026's hybrid models: a short
 * convolution (LFM2), a gated delta rule with its convolution in front
 * (Qwen3.5) and a Mamba-2 selective scan with its convolution in front
 * (Granite 4.0-H, Nemotron-H, Falcon-H1), against a reference of their
 * definitions written here; a call
 * of T tokens against T calls of one; the same bits at any thread count;
 * speculative verify (accept(j) is plain decoding of j tokens, a reject
 * changes nothing); taking back the last call; snapshots, forks, byte
 * counts, refused input and running out of memory.
 *
 * Why the comparisons are bit for bit: the reference does the library's
 * documented operations on the same operands in the same order (sums from
 * 0 in tap or key order, the L2 norm's squares in double), and the library
 * and tests are built with -ffp-contract=off; the SIMD128 kernels put their
 * lanes across channels and values, so every element sees the scalar
 * sequence.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "core/internal.h"

/* A small Qwen3.5-like geometry: 2 key heads, 4 value heads, odd-ish dims;
 * as Mamba-2's, 2 groups of B and C of state size DK, 4 heads of DV. */
#define HK 2
#define HV 4
#define DK 8
#define DV 12
#define TAPS 4
#define CH (2 * HK * DK + HV * DV)
#define MAX_T 24

/* ---- the reference ---- */

typedef struct reference {
    float conv[(TAPS - 1) * CH]; /* newest inputs, oldest first */
    float S[HV][DK * DV];
} reference;

/* One token through the convolution: y[c] = sum_k in[k][c] w[c][k]. */
static void reference_conv(reference *r, size_t C, const float *x, const float *w, float *y) {
    float in[TAPS * CH];
    memcpy(in, r->conv, (TAPS - 1) * C * sizeof(float));
    memcpy(in + (TAPS - 1) * C, x, C * sizeof(float));
    for (size_t c = 0; c < C; c++) {
        float acc = 0.0f;
        for (size_t k = 0; k < TAPS; k++) acc = acc + in[k * C + c] * w[c * TAPS + k];
        y[c] = acc;
    }
    memcpy(r->conv, in + C, (TAPS - 1) * C * sizeof(float));
}

static void reference_l2(float *x, size_t n, float eps, float scale) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float norm = sqrtf((float)sum);
    const float s = 1.0f / (norm > eps ? norm : eps);
    for (size_t i = 0; i < n; i++) x[i] = x[i] * s * scale;
}

/* One token of the gated delta rule as kvc_layer_delta_n documents it. */
static void reference_delta(reference *r, const float *x, const float *w, const float *alpha, const float *beta,
                            float eps, float *out) {
    float y[CH];
    reference_conv(r, CH, x, w, y);
    for (size_t c = 0; c < CH; c++) y[c] = y[c] / (1.0f + expf(-y[c]));
    for (size_t h = 0; h < HK; h++) {
        reference_l2(y + h * DK, DK, eps, 1.0f / sqrtf((float)DK));
        reference_l2(y + HK * DK + h * DK, DK, eps, 1.0f);
    }
    for (size_t h = 0; h < HV; h++) {
        const float *q = y + (h % HK) * DK, *k = y + HK * DK + (h % HK) * DK, *v = y + 2 * HK * DK + h * DV;
        float *S = r->S[h];
        for (size_t i = 0; i < DK * DV; i++) S[i] = alpha[h] * S[i];
        for (size_t j = 0; j < DV; j++) {
            float sk = 0.0f;
            for (size_t i = 0; i < DK; i++) sk = sk + S[i * DV + j] * k[i];
            const float d = (v[j] - sk) * beta[h];
            for (size_t i = 0; i < DK; i++) S[i * DV + j] = S[i * DV + j] + k[i] * d;
        }
        for (size_t j = 0; j < DV; j++) {
            float o = 0.0f;
            for (size_t i = 0; i < DK; i++) o = o + S[i * DV + j] * q[i];
            out[h * DV + j] = o;
        }
    }
}

/* ggml's softplus: x itself above 20. */
static float reference_softplus(float x) {
    return x > 20.0f ? x : logf(1.0f + expf(x));
}

/* One token of Mamba-2 as kvc_layer_mamba2_n documents it. */
static void reference_mamba2(reference *r, const float *x, const float *w, const float *bias, const float *dt,
                             const float *dt_bias, const float *a, const float *d, float *out) {
    float y[CH];
    reference_conv(r, CH, x, w, y);
    for (size_t c = 0; c < CH; c++) {
        const float v = y[c] + bias[c];
        y[c] = v / (1.0f + expf(-v));
    }
    for (size_t h = 0; h < HV; h++) {
        const size_t g = h / (HV / HK);
        const float *xh = y + h * DV, *B = y + HV * DV + g * DK, *C = y + HV * DV + HK * DK + g * DK;
        const float step = reference_softplus(dt[h] + dt_bias[h]), decay = expf(step * a[h]);
        float *S = r->S[h];
        for (size_t j = 0; j < DV; j++) {
            float o = 0.0f;
            for (size_t i = 0; i < DK; i++) {
                S[i * DV + j] = decay * S[i * DV + j] + B[i] * (xh[j] * step);
                o = o + S[i * DV + j] * C[i];
            }
            out[h * DV + j] = o + xh[j] * d[h];
        }
    }
}

/* ---- inputs ---- */

typedef struct inputs {
    float x[MAX_T * CH];
    float w[CH * TAPS];
    float alpha[MAX_T * HV], beta[MAX_T * HV];
    float bias[CH], dt[MAX_T * HV], dt_bias[HV], a[HV], d[HV]; /* Mamba-2's */
} inputs;

static inputs make_inputs(uint64_t seed) {
    inputs in;
    test_rng rng = test_rng_new(seed);
    test_fill_normal(&rng, in.x, MAX_T * CH);
    test_fill_normal(&rng, in.w, CH * TAPS);
    for (size_t i = 0; i < MAX_T * HV; i++) {
        in.alpha[i] = 0.6f + 0.4f * test_rng_unit(&rng);
        in.beta[i] = test_rng_unit(&rng);
    }
    test_fill_normal(&rng, in.bias, CH);
    test_fill_normal(&rng, in.dt, MAX_T * HV);
    for (size_t h = 0; h < HV; h++) {
        in.dt_bias[h] = h == 2 ? 21.0f : test_rng_unit(&rng) - 0.5f; /* head 2: softplus' linear side */
        in.a[h] = -expf(2.0f * test_rng_unit(&rng) - 1.0f);             /* -exp(A_log), as converted */
        in.d[h] = test_rng_unit(&rng);
    }
    return in;
}

#define EPS 1e-6f

/* A delta layer of the geometry above (NULL when it could not be made: the
 * calls on it then fail with KVC_E_NULL_POINTER). */
static kvc_layer *new_delta(void) {
    kvc_layer *layer = NULL;
    (void)kvc_layer_create_delta(HK, HV, DK, DV, TAPS, &layer);
    return layer;
}

/* Tokens [from, from + T) of `in` through the layer in one call. */
static kvc_status delta_tokens(kvc_layer *layer, const inputs *in, size_t from, size_t T, float *out) {
    return kvc_layer_delta_n(layer, T, in->x + from * CH, in->w, in->alpha + from * HV, in->beta + from * HV, EPS, out);
}

static kvc_layer *new_mamba2(void) {
    kvc_layer *layer = NULL;
    (void)kvc_layer_create_mamba2(HV, DV, HK, DK, TAPS, &layer);
    return layer;
}

static kvc_status mamba2_tokens(kvc_layer *layer, const inputs *in, size_t from, size_t T, float *out) {
    return kvc_layer_mamba2_n(layer, T, in->x + from * CH, in->w, in->bias, in->dt + from * HV, in->dt_bias, in->a,
                              in->d, out);
}

static void delta_reference(reference *r, const inputs *in, size_t t, float *out) {
    reference_delta(r, in->x + t * CH, in->w, in->alpha + t * HV, in->beta + t * HV, EPS, out);
}

static void mamba2_reference(reference *r, const inputs *in, size_t t, float *out) {
    reference_mamba2(r, in->x + t * CH, in->w, in->bias, in->dt + t * HV, in->dt_bias, in->a, in->d, out);
}

/* The kinds with heads, each of this geometry: a state of STATE_LEN floats,
 * HV x DV outputs a token.  The tests below hold for both. */
typedef struct heads_kind {
    kvc_kind kind;
    kvc_layer *(*make)(void);
    kvc_status (*tokens)(kvc_layer *layer, const inputs *in, size_t from, size_t T, float *out);
    void (*reference)(reference *r, const inputs *in, size_t t, float *out);
} heads_kind;

static const heads_kind KINDS[] = {
    {KVC_KIND_DELTA, new_delta, delta_tokens, delta_reference},
    {KVC_KIND_MAMBA2, new_mamba2, mamba2_tokens, mamba2_reference},
};
#define FOR_EACH_KIND(k) for (const heads_kind *k = KINDS; k < KINDS + sizeof KINDS / sizeof KINDS[0]; k++)

static void state_of(const kvc_layer *layer, float *state) {
    CHECK_OK(kvc_layer_recurrent_state(layer, state, kvc_layer_state_len(layer)));
}

#define STATE_LEN ((TAPS - 1) * CH + HV * DK * DV)

/* ---- the definitions ---- */

TEST(delta_and_mamba2_layers_should_give_the_bits_of_their_definitions_token_by_token) {
    const inputs in = make_inputs(1);
    FOR_EACH_KIND(k) {
        kvc_layer *layer = k->make();
        reference r;
        memset(&r, 0, sizeof r);
        for (size_t t = 0; t < MAX_T; t++) {
            float want[HV * DV], got[HV * DV];
            k->reference(&r, &in, t, want);
            CHECK_OK(k->tokens(layer, &in, t, 1, got));
            CHECK(memcmp(got, want, sizeof want) == 0);
        }
        float state[STATE_LEN];
        state_of(layer, state);
        CHECK(memcmp(state, r.conv, sizeof r.conv) == 0);
        for (size_t h = 0; h < HV; h++) CHECK(memcmp(state + (TAPS - 1) * CH + h * DK * DV, r.S[h], sizeof r.S[h]) == 0);
        CHECK(kvc_layer_kind(layer) == k->kind && kvc_layer_steps(layer) == MAX_T);
        CHECK(kvc_layer_seq_len(layer) == 0);
        kvc_layer_free(layer);
    }
}

TEST(conv_layer_should_give_the_bits_of_its_definition) {
    const size_t C = 37;
    const inputs in = make_inputs(2);
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create_conv(C, TAPS, &layer));
    reference r;
    memset(&r, 0, sizeof r);
    for (size_t t = 0; t < MAX_T; t++) {
        float want[CH], got[CH];
        reference_conv(&r, C, in.x + t * C, in.w, want);
        CHECK_OK(kvc_layer_conv_n(layer, 1, in.x + t * C, in.w, got));
        CHECK(memcmp(got, want, C * sizeof(float)) == 0);
    }
    float state[(TAPS - 1) * 37];
    CHECK(kvc_layer_state_len(layer) == (TAPS - 1) * C);
    state_of(layer, state);
    CHECK(memcmp(state, r.conv, sizeof state) == 0);
    kvc_layer_free(layer);
}

TEST(a_call_of_t_tokens_should_give_the_bits_of_t_calls_of_one) {
    const inputs in = make_inputs(3);
    static const size_t splits[] = {1, 3, 7, 13};
    FOR_EACH_KIND(k) {
        float want[MAX_T * HV * DV], want_state[STATE_LEN];
        kvc_layer *one = k->make();
        for (size_t t = 0; t < MAX_T; t++) CHECK_OK(k->tokens(one, &in, t, 1, want + t * HV * DV));
        state_of(one, want_state);
        kvc_layer_free(one);
        for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
            kvc_layer *layer = k->make();
            float got[MAX_T * HV * DV], state[STATE_LEN];
            for (size_t t = 0; t < MAX_T; t += splits[s]) {
                const size_t T = MAX_T - t < splits[s] ? MAX_T - t : splits[s];
                CHECK_OK(k->tokens(layer, &in, t, T, got + t * HV * DV));
            }
            state_of(layer, state);
            CHECK(memcmp(got, want, sizeof got) == 0);
            CHECK(memcmp(state, want_state, sizeof state) == 0);
            kvc_layer_free(layer);
        }
    }
}

/* A layer's state after 10 tokens, 8 drafts and accept(5): a replay's. */
static void accept_some(const heads_kind *k, const inputs *in, float *state) {
    kvc_layer *layer = k->make();
    float out[MAX_T * HV * DV];
    CHECK_OK(k->tokens(layer, in, 0, 10, out));
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK_OK(k->tokens(layer, in, 10, 8, out));
    CHECK_OK(kvc_layer_accept(layer, 5));
    state_of(layer, state);
    kvc_layer_free(layer);
}

TEST(delta_and_mamba2_layers_should_give_the_same_bits_on_any_number_of_threads) {
    const inputs in = make_inputs(4);
    FOR_EACH_KIND(k) {
        float want[MAX_T * HV * DV], got[MAX_T * HV * DV], want_state[STATE_LEN], got_state[STATE_LEN];
        CHECK_OK(kvc_set_threads(1));
        kvc_layer *layer = k->make();
        CHECK_OK(k->tokens(layer, &in, 0, MAX_T, want));
        kvc_layer_free(layer);
        accept_some(k, &in, want_state);
        const size_t min_work = kvc_pool_set_min_work(0); /* every call on the pool */
        for (size_t threads = 2; threads <= 4; threads++) {
            const kvc_status status = kvc_set_threads(threads);
            if (status == KVC_E_THREADS) {
                test_skip("kvc_set_threads: this build's threads are started by the JS loader (wasm); "
                          "tests/js/hybrid.test.mjs compares thread counts");
                break;
            }
            CHECK_OK(status);
            layer = k->make();
            CHECK_OK(k->tokens(layer, &in, 0, MAX_T, got));
            CHECK(memcmp(got, want, sizeof got) == 0);
            kvc_layer_free(layer);
            accept_some(k, &in, got_state);
            CHECK(memcmp(got_state, want_state, sizeof got_state) == 0);
        }
        kvc_pool_set_min_work(min_work);
        CHECK_OK(kvc_set_threads(1));
    }
}

/* ---- speculative verify and taking back ---- */

/* What a verify of k drafts holds besides the state, in floats: a second
 * state (the drafts'), one more after every KVC_MARK_EVERY-th draft that a
 * later one stepped past, and each draft's inputs, convolved channels and
 * two gates a head. */
#define VERIFY_LEN(k) ((1 + ((k) - 1) / KVC_MARK_EVERY) * STATE_LEN + (k) * (2 * CH + 2 * HV))

TEST(accept_j_of_k_drafts_should_give_plain_decodings_state_and_reject_should_change_nothing) {
    const inputs in = make_inputs(5);
    const size_t prefix = 5;
    FOR_EACH_KIND(kind) {
        for (size_t k = 1; k <= 13; k++) { /* up to three marks */
            for (size_t j = 0; j <= k; j++) {
                /* The drafts in one call, or a call each (accept then steps again over several calls' inputs). */
                for (int one_a_call = 0; one_a_call < 2; one_a_call++) {
                    kvc_layer *plain = kind->make(), *spec = kind->make();
                    float out[MAX_T * HV * DV], drafts[MAX_T * HV * DV], want[STATE_LEN], got[STATE_LEN];
                    CHECK_OK(kind->tokens(plain, &in, 0, prefix + j, out));
                    CHECK_OK(kind->tokens(spec, &in, 0, prefix, out));
                    CHECK_OK(kvc_layer_begin_verify(spec));
                    if (one_a_call) {
                        for (size_t t = 0; t < k; t++) CHECK_OK(kind->tokens(spec, &in, prefix + t, 1, drafts + t * HV * DV));
                    } else {
                        CHECK_OK(kind->tokens(spec, &in, prefix, k, drafts));
                    }
                    /* Each draft's output is plain decoding's. */
                    CHECK(memcmp(drafts, out + prefix * HV * DV, j * HV * DV * sizeof(float)) == 0);
                    CHECK(kvc_layer_draft_len(spec) == k);
                    CHECK(kvc_layer_memory_bytes(spec) == (STATE_LEN + VERIFY_LEN(k)) * sizeof(float));
                    CHECK_OK(kvc_layer_accept(spec, j));
                    state_of(plain, want);
                    state_of(spec, got);
                    CHECK(memcmp(got, want, sizeof got) == 0);
                    CHECK(kvc_layer_steps(spec) == prefix + j);
                    CHECK(kvc_layer_memory_bytes(spec) == STATE_LEN * sizeof(float));
                    /* And it goes on as plain decoding does. */
                    float a[HV * DV], b[HV * DV];
                    CHECK_OK(kind->tokens(plain, &in, prefix + j, 1, a));
                    CHECK_OK(kind->tokens(spec, &in, prefix + j, 1, b));
                    CHECK(memcmp(a, b, sizeof a) == 0);
                    kvc_layer_free(plain);
                    kvc_layer_free(spec);
                }
            }
        }
    }
}

TEST(a_conv_layers_accept_j_should_keep_plain_decodings_newest_inputs) {
    const inputs in = make_inputs(11);
    const size_t prefix = 2; /* fewer than the taps keep: accept(j) shifts kept inputs and drafts' together */
    for (size_t k = 1; k <= 8; k++) {
        for (size_t j = 0; j <= k; j++) {
            kvc_layer *plain, *spec;
            CHECK_OK(kvc_layer_create_conv(CH, TAPS, &plain));
            CHECK_OK(kvc_layer_create_conv(CH, TAPS, &spec));
            float out[MAX_T * CH], want[(TAPS - 1) * CH], got[(TAPS - 1) * CH];
            CHECK_OK(kvc_layer_conv_n(plain, prefix + j, in.x, in.w, out));
            CHECK_OK(kvc_layer_conv_n(spec, prefix, in.x, in.w, out));
            CHECK_OK(kvc_layer_begin_verify(spec));
            CHECK_OK(kvc_layer_conv_n(spec, k, in.x + prefix * CH, in.w, out));
            /* The state, the drafts' and each draft's inputs. */
            CHECK(kvc_layer_memory_bytes(spec) == (2 * (TAPS - 1) + k) * CH * sizeof(float));
            CHECK_OK(kvc_layer_accept(spec, j));
            state_of(plain, want);
            state_of(spec, got);
            CHECK(memcmp(got, want, sizeof got) == 0);
            CHECK(kvc_layer_steps(spec) == prefix + j);
            kvc_layer_free(plain);
            kvc_layer_free(spec);
        }
    }
}

TEST(truncate_last_should_take_back_exactly_the_last_call_and_nothing_else) {
    const inputs in = make_inputs(6);
    FOR_EACH_KIND(k) {
        kvc_layer *layer = k->make();
        float out[MAX_T * HV * DV], before[STATE_LEN], after[STATE_LEN];
        CHECK_OK(k->tokens(layer, &in, 0, 4, out));
        state_of(layer, before);
        CHECK_OK(k->tokens(layer, &in, 4, 3, out));
        CHECK_STATUS(kvc_layer_truncate_last(layer, 2), KVC_E_KIND);
        CHECK_STATUS(kvc_layer_truncate_last(layer, 4), KVC_E_KIND);
        CHECK_OK(kvc_layer_truncate_last(layer, 0));
        CHECK_OK(kvc_layer_truncate_last(layer, 3));
        state_of(layer, after);
        CHECK(memcmp(before, after, sizeof before) == 0);
        CHECK(kvc_layer_steps(layer) == 4);
        /* Once: the call before is not held. */
        CHECK_STATUS(kvc_layer_truncate_last(layer, 4), KVC_E_KIND);
        /* A verify's drafts overwrite what it would have taken back. */
        CHECK_OK(k->tokens(layer, &in, 4, 3, out));
        CHECK_OK(kvc_layer_begin_verify(layer));
        CHECK_STATUS(kvc_layer_truncate_last(layer, 3), KVC_E_VERIFYING);
        CHECK_OK(k->tokens(layer, &in, 7, 2, out));
        CHECK_OK(kvc_layer_accept(layer, 0));
        CHECK_STATUS(kvc_layer_truncate_last(layer, 3), KVC_E_KIND);
        kvc_layer_free(layer);
    }
}

/* ---- forks, snapshots, bytes ---- */

TEST(a_fork_should_copy_the_state_and_go_its_own_way) {
    const inputs in = make_inputs(7);
    FOR_EACH_KIND(k) {
        kvc_layer *layer = k->make(), *fork;
        float out[MAX_T * HV * DV], a[HV * DV], b[HV * DV], state[STATE_LEN], fork_state[STATE_LEN];
        CHECK_OK(k->tokens(layer, &in, 0, 6, out));
        CHECK_OK(kvc_layer_clone(layer, &fork));
        CHECK(kvc_layer_kind(fork) == k->kind && kvc_layer_steps(fork) == 6);
        CHECK_OK(k->tokens(fork, &in, 10, 3, out));
        CHECK_OK(k->tokens(layer, &in, 6, 1, a));
        kvc_layer *again;
        CHECK_OK(kvc_layer_clone(layer, &again));
        state_of(layer, state);
        state_of(again, fork_state);
        CHECK(memcmp(state, fork_state, sizeof state) == 0);
        CHECK_OK(k->tokens(again, &in, 7, 1, a));
        CHECK_OK(k->tokens(layer, &in, 7, 1, b));
        CHECK(memcmp(a, b, sizeof a) == 0);
        kvc_layer_free(again);
        kvc_layer_free(fork);
        kvc_layer_free(layer);
    }
}

TEST(a_snapshot_should_restore_bit_for_bit_and_go_on_the_same) {
    const inputs in = make_inputs(8);
    kvc_layer *layers[3] = {new_delta(), new_mamba2(), NULL};
    CHECK_OK(kvc_layer_create_conv(CH, TAPS, &layers[2]));
    float out[MAX_T * CH];
    for (size_t l = 0; l < 3; l++) {
        kvc_layer *layer = layers[l];
        if (l < 2) CHECK_OK(KINDS[l].tokens(layer, &in, 0, 9, out));
        else CHECK_OK(kvc_layer_conv_n(layer, 9, in.x, in.w, out));
        const size_t len = kvc_layer_snapshot_size(layer);
        uint8_t *snap = test_alloc(len);
        CHECK_OK(kvc_layer_serialize(layer, snap, len));
        kvc_layer *back;
        CHECK_OK(kvc_layer_deserialize(snap, len, &back));
        CHECK(kvc_layer_kind(back) == kvc_layer_kind(layer) && kvc_layer_steps(back) == 9);
        float a[STATE_LEN], b[STATE_LEN];
        state_of(layer, a);
        state_of(back, b);
        CHECK(memcmp(a, b, kvc_layer_state_len(layer) * sizeof(float)) == 0);
        float x[CH] = {0}, y[CH] = {0}; /* a delta or Mamba-2 step gives HV x DV of them, a conv step CH */
        if (l < 2) {
            CHECK_OK(KINDS[l].tokens(layer, &in, 9, 1, x));
            CHECK_OK(KINDS[l].tokens(back, &in, 9, 1, y));
        } else {
            CHECK_OK(kvc_layer_conv_n(layer, 1, in.x + 9 * CH, in.w, x));
            CHECK_OK(kvc_layer_conv_n(back, 1, in.x + 9 * CH, in.w, y));
        }
        CHECK(memcmp(x, y, sizeof x) == 0);
        /* Every byte changed is refused (the checksum), and every truncation. */
        for (size_t i = 0; i < len; i += 7) {
            snap[i] ^= 0x10;
            kvc_layer *bad = NULL;
            CHECK(kvc_layer_deserialize(snap, len, &bad) != KVC_OK && bad == NULL);
            snap[i] ^= 0x10;
        }
        for (size_t cut = 0; cut < len; cut += 5) {
            kvc_layer *bad = NULL;
            CHECK(kvc_layer_deserialize(snap, cut, &bad) != KVC_OK && bad == NULL);
        }
        kvc_layer_free(back);
        free(snap);
        kvc_layer_free(layer);
    }
}

TEST(memory_bytes_should_be_the_state_and_describe_should_name_the_kind) {
    static const char *const names[] = {"kind=delta", "kind=mamba2"};
    FOR_EACH_KIND(k) {
        kvc_layer *layer = k->make();
        CHECK(kvc_layer_memory_bytes(layer) == STATE_LEN * sizeof(float));
        CHECK(kvc_layer_capacity_bytes(layer) >= STATE_LEN * sizeof(float));
        CHECK(kvc_layer_channels(layer) == CH && kvc_layer_conv_kernel(layer) == TAPS);
        CHECK(kvc_layer_key_heads(layer) == HK && kvc_layer_value_heads(layer) == HV);
        CHECK(kvc_layer_key_dim(layer) == DK && kvc_layer_value_dim(layer) == DV);
        char text[256];
        CHECK(kvc_layer_describe(layer, text, sizeof text) > 0);
        CHECK(strstr(text, names[k - KINDS]) != NULL);
        kvc_layer_free(layer);
    }
}

/* ---- refused input ---- */

TEST(create_should_refuse_geometry_out_of_range) {
    kvc_layer *layer = (kvc_layer *)1;
    CHECK_STATUS(kvc_layer_create_conv(0, 3, &layer), KVC_E_CONV);
    CHECK(layer == NULL);
    CHECK_STATUS(kvc_layer_create_conv(8, 1, &layer), KVC_E_CONV);
    CHECK_STATUS(kvc_layer_create_conv(8, KVC_MAX_CONV_KERNEL + 1, &layer), KVC_E_CONV);
    CHECK_STATUS(kvc_layer_create_conv(KVC_MAX_CHANNELS + 1, 3, &layer), KVC_E_CONV);
    CHECK_STATUS(kvc_layer_create_conv(8, 3, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_create_delta(0, 4, 8, 8, 4, &layer), KVC_E_NUM_HEADS);
    CHECK_STATUS(kvc_layer_create_delta(3, 4, 8, 8, 4, &layer), KVC_E_NUM_HEADS);
    CHECK_STATUS(kvc_layer_create_delta(2, 4, 0, 8, 4, &layer), KVC_E_NUM_FEATURES);
    CHECK_STATUS(kvc_layer_create_delta(2, 4, 8, KVC_MAX_HEAD_DIM + 1, 4, &layer), KVC_E_VALUE_DIM);
    CHECK_STATUS(kvc_layer_create_delta(64, 64, 4096, 4096, 4, &layer), KVC_E_CONV);
    /* Mamba-2: heads, head_dim, groups, state size, taps. */
    CHECK_STATUS(kvc_layer_create_mamba2(4, 8, 0, 8, 4, &layer), KVC_E_NUM_HEADS);
    CHECK_STATUS(kvc_layer_create_mamba2(4, 8, 3, 8, 4, &layer), KVC_E_NUM_HEADS);
    CHECK_STATUS(kvc_layer_create_mamba2(4, 8, 2, 0, 4, &layer), KVC_E_NUM_FEATURES);
    CHECK_STATUS(kvc_layer_create_mamba2(4, 0, 2, 8, 4, &layer), KVC_E_VALUE_DIM);
    CHECK_STATUS(kvc_layer_create_mamba2(4, 8, 2, 8, 1, &layer), KVC_E_CONV);
    CHECK_STATUS(kvc_layer_create_mamba2(4, 8, 2, 8, 4, NULL), KVC_E_NULL_POINTER);
    CHECK(layer == NULL);
}

/* Each of `places` in turn NaN, then `infinity`: a step of tokens 0 and 1 is refused as non-finite. */
static void check_refuses_nonfinite(kvc_status (*tokens)(kvc_layer *, const inputs *, size_t, size_t, float *),
                                    kvc_layer *layer, inputs *in, float *const *places, size_t count, float infinity,
                                    float *out) {
    for (size_t p = 0; p < count; p++) {
        const float saved = *places[p];
        *places[p] = NAN;
        CHECK_STATUS(tokens(layer, in, 0, 2, out), KVC_E_NONFINITE_INPUT);
        *places[p] = infinity;
        CHECK_STATUS(tokens(layer, in, 0, 2, out), KVC_E_NONFINITE_INPUT);
        *places[p] = saved;
    }
}

TEST(a_step_should_refuse_bad_input_and_change_nothing) {
    inputs in = make_inputs(9);
    kvc_layer *layer = new_delta();
    float out[MAX_T * HV * DV], before[STATE_LEN], after[STATE_LEN];
    CHECK_OK(delta_tokens(layer, &in, 0, 3, out));
    state_of(layer, before);
    float *places[] = {&in.x[CH + 5], &in.w[7], &in.alpha[HV + 1], &in.beta[2 * HV - 1]};
    check_refuses_nonfinite(delta_tokens, layer, &in, places, sizeof places / sizeof places[0], INFINITY, out);
    CHECK_STATUS(kvc_layer_delta_n(layer, 1, in.x, in.w, in.alpha, in.beta, 0.0f, out), KVC_E_NONFINITE_INPUT);
    CHECK_STATUS(kvc_layer_delta_n(layer, 0, in.x, in.w, in.alpha, in.beta, EPS, out), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_delta_n(layer, KVC_MAX_STEP_TOKENS + 1, in.x, in.w, in.alpha, in.beta, EPS, out), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_delta_n(layer, 1, in.x, in.w, NULL, in.beta, EPS, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_conv_n(layer, 1, in.x, in.w, out), KVC_E_KIND);
    /* The calls of rows are not for it. */
    CHECK_STATUS(kvc_layer_append(layer, in.x, in.x, NULL), KVC_E_KIND);
    state_of(layer, after);
    CHECK(memcmp(before, after, sizeof before) == 0);
    CHECK(kvc_layer_steps(layer) == 3);
    kvc_layer *full;
    CHECK_OK(kvc_layer_create(1, 8, KVC_MODE_F32, &full));
    CHECK_STATUS(kvc_layer_delta_n(full, 1, in.x, in.w, in.alpha, in.beta, EPS, out), KVC_E_KIND);
    CHECK_STATUS(kvc_layer_recurrent_state(full, before, STATE_LEN), KVC_E_KIND);
    CHECK_STATUS(kvc_layer_mamba2_n(full, 1, in.x, in.w, in.bias, in.dt, in.dt_bias, in.a, in.d, out), KVC_E_KIND);
    kvc_layer_free(full);
    kvc_layer_free(layer);
}

TEST(a_mamba2_step_should_refuse_bad_input_and_change_nothing) {
    inputs in = make_inputs(11);
    kvc_layer *layer = new_mamba2();
    float out[MAX_T * HV * DV], before[STATE_LEN], after[STATE_LEN];
    CHECK_OK(mamba2_tokens(layer, &in, 0, 3, out));
    state_of(layer, before);
    float *places[] = {&in.x[CH + 5], &in.w[7], &in.bias[3], &in.dt[HV + 1], &in.dt_bias[1], &in.a[3], &in.d[0]};
    check_refuses_nonfinite(mamba2_tokens, layer, &in, places, sizeof places / sizeof places[0], -INFINITY, out);
    const float *x = in.x, *w = in.w, *dt = in.dt, *bias = in.dt_bias, *a = in.a, *d = in.d;
    CHECK_STATUS(kvc_layer_mamba2_n(layer, 1, x, w, NULL, NULL, bias, a, d, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_mamba2_n(layer, 1, x, w, NULL, dt, NULL, a, d, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_mamba2_n(layer, 1, x, w, NULL, dt, bias, NULL, d, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_mamba2_n(layer, 1, x, w, NULL, dt, bias, a, NULL, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_mamba2_n(layer, 0, x, w, NULL, dt, bias, a, d, out), KVC_E_LENGTH);
    CHECK_STATUS(delta_tokens(layer, &in, 0, 1, out), KVC_E_KIND);
    state_of(layer, after);
    CHECK(memcmp(before, after, sizeof before) == 0);
    CHECK(kvc_layer_steps(layer) == 3);
    /* Without a convolution bias: the same as a bias of zeros. */
    kvc_layer *plain = new_mamba2(), *zeros = new_mamba2();
    float got[HV * DV], want[HV * DV];
    memset(in.bias, 0, sizeof in.bias);
    CHECK_OK(kvc_layer_mamba2_n(plain, 1, x, w, NULL, dt, bias, a, d, got));
    CHECK_OK(mamba2_tokens(zeros, &in, 0, 1, want));
    CHECK(memcmp(got, want, sizeof got) == 0);
    kvc_layer_free(plain);
    kvc_layer_free(zeros);
    kvc_layer_free(layer);
}

TEST(out_of_memory_should_fail_the_call_and_keep_the_state) {
    const inputs in = make_inputs(10);
    CHECK_OK(test_fault_install());
    FOR_EACH_KIND(k) {
        kvc_layer *layer = k->make();
        float out[MAX_T * HV * DV], before[STATE_LEN], after[STATE_LEN];
        CHECK_OK(k->tokens(layer, &in, 0, 2, out));
        state_of(layer, before);
        for (int verify = 0; verify < 2; verify++) {
            if (verify) CHECK_OK(kvc_layer_begin_verify(layer));
            for (long at = 0; at < 8; at++) { /* the lane, the drafts' four arrays and scratch, the call's window */
                test_fault_arm(at, 0);
                const kvc_status status = k->tokens(layer, &in, 2, 5, out);
                test_fault_arm(-1, 0);
                if (status == KVC_OK) {
                    if (verify) CHECK_OK(kvc_layer_accept(layer, 0));
                    else CHECK_OK(kvc_layer_truncate_last(layer, 5));
                    if (verify) CHECK_OK(kvc_layer_begin_verify(layer));
                } else {
                    CHECK_STATUS(status, KVC_E_NOMEM);
                }
                state_of(layer, after);
                CHECK(memcmp(before, after, sizeof before) == 0);
                CHECK(kvc_layer_steps(layer) == 2);
            }
            if (verify) CHECK_OK(kvc_layer_accept(layer, 0));
        }
        kvc_layer_free(layer);
    }
    CHECK(test_fault_remove() == 0);
}

RUN_TESTS(CASE(delta_and_mamba2_layers_should_give_the_bits_of_their_definitions_token_by_token),
          CASE(conv_layer_should_give_the_bits_of_its_definition),
          CASE(a_call_of_t_tokens_should_give_the_bits_of_t_calls_of_one),
          CASE(delta_and_mamba2_layers_should_give_the_same_bits_on_any_number_of_threads),
          CASE(accept_j_of_k_drafts_should_give_plain_decodings_state_and_reject_should_change_nothing),
          CASE(a_conv_layers_accept_j_should_keep_plain_decodings_newest_inputs),
          CASE(truncate_last_should_take_back_exactly_the_last_call_and_nothing_else),
          CASE(a_fork_should_copy_the_state_and_go_its_own_way),
          CASE(a_snapshot_should_restore_bit_for_bit_and_go_on_the_same),
          CASE(memory_bytes_should_be_the_state_and_describe_should_name_the_kind),
          CASE(create_should_refuse_geometry_out_of_range),
          CASE(a_step_should_refuse_bad_input_and_change_nothing),
          CASE(a_mamba2_step_should_refuse_bad_input_and_change_nothing),
          CASE(out_of_memory_should_fail_the_call_and_keep_the_state))

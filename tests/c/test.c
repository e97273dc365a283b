#include "test.h"
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static void release_kept_forks(void);

void test_fail(const char *file, int line, const char *what) {
    printf("  FAIL %s:%d: %s\n", file, line, what);
    failures++;
}

void test_skip(const char *why) {
    printf("  SKIP part: %s\n", why);
}

int test_main(int argc, char **argv, const test_case *cases, size_t count) {
    /* KVC_TEST_THREADS=n runs every case on a pool of n threads, every job
     * of two tasks or more on the pool however small (natively:
     * scripts/sanitize.mjs does so under the sanitizers). */
    const char *threads = getenv("KVC_TEST_THREADS");
    if (threads) {
        if (kvc_set_threads((size_t)strtoul(threads, NULL, 10)) != KVC_OK) {
            printf("KVC_TEST_THREADS=%s: kvc_set_threads refused it\n", threads);
            return 2;
        }
        kvc_pool_set_min_work(0);
    }
    size_t ran = 0;
    for (size_t i = 0; i < count; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0) continue;
        int before = failures;
        cases[i].run();
        release_kept_forks(); /* checked within the case that made them */
        printf("%s %s\n", failures == before ? "ok  " : "FAIL", cases[i].name);
        ran++;
    }
    if (threads) kvc_set_threads(1); /* the pool's threads end before the process */
    if (ran == 0) {
        printf("no case named %s\n", argc > 1 ? argv[1] : "(any)");
        return 2;
    }
    return failures ? 1 : 0;
}

test_rng test_rng_new(uint64_t seed) {
    test_rng rng = {seed * 0x9E3779B97F4A7C15ull + 1};
    return rng;
}

uint32_t test_rng_u32(test_rng *rng) {
    /* splitmix64 */
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

float test_rng_unit(test_rng *rng) {
    return (float)(test_rng_u32(rng) >> 8) / 16777216.0f;
}

uint16_t test_f16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    const uint32_t sign = (u >> 16) & 0x8000u;
    if ((u & 0x7fffffffu) < 0x38800000u) return (uint16_t)sign; /* below the smallest normal half */
    const int exponent = (int)((u >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(sign | (uint32_t)exponent << 10 | ((u >> 13) & 0x3ff));
}

float test_rng_normal(test_rng *rng) {
    double u1 = ((double)test_rng_u32(rng) + 1.0) / 4294967297.0;
    double u2 = (double)test_rng_u32(rng) / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void test_fill_keys(test_rng *rng, float *k, size_t rows, size_t first_position, size_t H,
                    size_t d) {
    for (size_t r = 0; r < rows; r++) {
        double position = (double)(first_position + r);
        for (size_t h = 0; h < H; h++) {
            float *x = k + (r * H + h) * d;
            for (size_t j = 0; j < d; j++) x[j] = test_rng_normal(rng);
            /* Outlier channels: a fixed few per head, large and mostly one-signed. */
            for (size_t o = 0; o < 3 && o < d; o++) {
                size_t j = (h * 7 + o * 13 + 5) % d;
                x[j] = (float)(10.0 * (o + 1)) + 2.0f * x[j];
            }
            /* RoPE-like: rotate pair (2i, 2i+1) by position * 10000^(-2i/d). */
            for (size_t i = 0; 2 * i + 1 < d; i++) {
                double angle = position * pow(10000.0, -2.0 * (double)i / (double)d);
                double c = cos(angle), s = sin(angle);
                double a = x[2 * i], b = x[2 * i + 1];
                x[2 * i] = (float)(a * c - b * s);
                x[2 * i + 1] = (float)(a * s + b * c);
            }
        }
    }
}

void test_fill_normal(test_rng *rng, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = test_rng_normal(rng);
}

double test_rel_error(const float *a, const float *b, size_t n) {
    double max_diff = 0.0, max_ref = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)a[i] - (double)b[i]);
        if (diff > max_diff || diff != diff) max_diff = diff;
        if (fabs((double)b[i]) > max_ref) max_ref = fabs((double)b[i]);
    }
    return max_diff / max_ref;
}

int test_bits_equal(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

int test_refused(const char *file, int line, const char *what, kvc_status got,
                 kvc_status expected, int unchanged) {
    if (got == expected && unchanged) return 1;
    char message[256];
    snprintf(message, sizeof message, "%s returned %d (%s), expected %d (%s)%s", what, (int)got,
             kvc_status_name(got), (int)expected, kvc_status_name(expected),
             unchanged ? "" : ", and changed what it was called on");
    test_fail(file, line, message);
    return 0;
}

uint32_t test_crc32(const uint8_t *p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

void *test_alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        printf("test harness: out of memory\n");
        exit(3);
    }
    return p;
}

/* ---- scripted data ---- */

static int scripted_alive(test_rng *rng, size_t position, size_t h) {
    float u = test_rng_unit(rng);
    switch (h) {
    case 0: return 1;
    case 1: return u < 0.7f;
    case 2: return position >= KVC_Q8_WINDOW && u < 0.7f;
    case 3: return 0;
    default: return u < 0.5f;
    }
}

test_data test_data_make(uint64_t seed, size_t n, size_t H, size_t d, int masked) {
    test_rng rng = test_rng_new(seed);
    test_data data = {n, H, d, NULL, NULL, NULL};
    data.k = test_alloc(n * H * d * sizeof(float));
    data.v = test_alloc(n * H * d * sizeof(float));
    data.alive = test_alloc(n * H);
    test_fill_keys(&rng, data.k, n, 0, H, d);
    test_fill_normal(&rng, data.v, n * H * d);
    for (size_t p = 0; p < n; p++) {
        for (size_t h = 0; h < H; h++) {
            data.alive[p * H + h] = (uint8_t)(masked ? scripted_alive(&rng, p, h) : 1);
        }
    }
    return data;
}

void test_data_free(test_data *data) {
    free(data->k);
    free(data->v);
    free(data->alive);
    data->k = data->v = NULL;
    data->alive = NULL;
}

/* KVC_TEST_FORKS=1: after every append through test_data_append the layer
 * is forked and the fork kept until its next one (the oldest of 64 go), so
 * that every later write -- an append into a partly filled page, imp, an
 * eviction, a freeze -- meets pages a fork shares, and copies them: every
 * test that appends this way then runs on pages as forks have them, and
 * each kept fork must still serialize to the bytes it had when it was made
 * (scripts/sanitize.mjs runs the C tests so, under the sanitizers). */
#define TEST_FORKS_KEPT 64
static struct {
    const kvc_layer *of;
    kvc_layer *fork;
    uint8_t *bytes; /* its snapshot when made */
    size_t len;
} kept_forks[TEST_FORKS_KEPT];
static size_t kept_next;
static int fault_installed; /* the failing allocator's counts must see no fork */

int test_forks_kept(void) {
    static int on = -1;
    if (on < 0) on = getenv("KVC_TEST_FORKS") != NULL;
    return on;
}

/* The serialized bytes of a layer (malloc'd), or NULL. */
static uint8_t *bytes_of(const kvc_layer *layer, size_t *len) {
    *len = kvc_layer_snapshot_size(layer);
    uint8_t *bytes = *len ? malloc(*len) : NULL;
    if (bytes && kvc_layer_serialize(layer, bytes, *len) != KVC_OK) {
        free(bytes);
        bytes = NULL;
    }
    return bytes;
}

/* Checks kept fork i against its bytes, and lets it go. */
static void release_kept_fork(size_t i) {
    if (kept_forks[i].fork) {
        size_t len;
        uint8_t *now = bytes_of(kept_forks[i].fork, &len);
        if (!now || len != kept_forks[i].len || memcmp(now, kept_forks[i].bytes, len) != 0)
            test_fail(__FILE__, __LINE__, "a kept fork changed when the layer it came from was written (KVC_TEST_FORKS)");
        free(now);
    }
    kvc_layer_free(kept_forks[i].fork);
    free(kept_forks[i].bytes);
    memset(&kept_forks[i], 0, sizeof kept_forks[i]);
}

static void release_kept_forks(void) {
    for (size_t i = 0; i < TEST_FORKS_KEPT; i++) release_kept_fork(i);
}

static void keep_a_fork(const kvc_layer *layer) {
    if (!test_forks_kept() || fault_installed || kvc_layer_verifying(layer)) return;
    size_t i = 0;
    while (i < TEST_FORKS_KEPT && kept_forks[i].of != layer) i++;
    if (i == TEST_FORKS_KEPT) i = kept_next++ % TEST_FORKS_KEPT;
    release_kept_fork(i);
    if (kvc_layer_clone(layer, &kept_forks[i].fork) != KVC_OK) return;
    kept_forks[i].of = layer;
    kept_forks[i].bytes = bytes_of(kept_forks[i].fork, &kept_forks[i].len);
}

kvc_status test_data_append(kvc_layer *layer, const test_data *data, size_t first, size_t count) {
    const size_t stride = data->H * data->d;
    const kvc_status status = kvc_layer_append_n(layer, count, data->k + first * stride,
                                                 data->v + first * stride, data->alive + first * data->H);
    if (status == KVC_OK) keep_a_fork(layer);
    return status;
}

size_t test_data_rows(const test_data *data, size_t h, size_t first, size_t last) {
    size_t rows = 0;
    for (size_t p = first; p < last; p++) rows += data->alive[p * data->H + h] != 0;
    return rows;
}

size_t test_data_head(const test_data *data, size_t len, size_t h, int is_values, float *rows,
                      uint32_t *positions) {
    const float *src = is_values ? data->v : data->k;
    size_t count = 0;
    for (size_t p = 0; p < len; p++) {
        if (!data->alive[p * data->H + h]) continue;
        if (rows) memcpy(rows + count * data->d, src + (p * data->H + h) * data->d,
                         data->d * sizeof(float));
        if (positions) positions[count] = (uint32_t)p;
        count++;
    }
    return count;
}

kvc_layer *test_layer_with(const test_data *data, size_t len, kvc_mode mode) {
    kvc_layer *layer = NULL;
    kvc_status status = kvc_layer_create(data->H, data->d, mode, &layer);
    if (status == KVC_OK) status = test_data_append(layer, data, 0, len);
    if (status == KVC_OK) return layer;
    printf("  test_layer_with: %s\n", kvc_status_name(status));
    kvc_layer_free(layer);
    return NULL;
}

int test_grown_in_every_mode(const test_data *data, const size_t *lengths, size_t count,
                             test_layer_check check, void *ctx) {
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(data, 0, test_modes[mi]);
        int ok = layer != NULL;
        for (size_t li = 0, at = 0; li < count && ok; at = lengths[li++]) {
            const kvc_status status = test_data_append(layer, data, at, lengths[li] - at);
            if (status != KVC_OK)
                printf("  mode %d: appending to %zu positions: %s\n", (int)test_modes[mi],
                       lengths[li], kvc_status_name(status));
            ok = status == KVC_OK && check(layer, ctx);
        }
        kvc_layer_free(layer);
        if (!ok) return 0;
    }
    return 1;
}

const kvc_mode test_modes[TEST_MODE_COUNT] = {
    KVC_MODE_F32, KVC_MODE_Q8,  KVC_MODE_Q8K,     KVC_MODE_Q8V,    KVC_MODE_Q4,
    KVC_MODE_Q4K, KVC_MODE_Q4V, KVC_MODE_Q8K_Q4V, KVC_MODE_Q4K_Q8V};
const kvc_mode test_quantized_modes[TEST_QUANTIZED_MODE_COUNT] = {
    KVC_MODE_Q8, KVC_MODE_Q8K, KVC_MODE_Q8V, KVC_MODE_Q4, KVC_MODE_Q4K, KVC_MODE_Q4V,
    KVC_MODE_Q8K_Q4V, KVC_MODE_Q4K_Q8V};
const float test_nonfinite[3] = {NAN, INFINITY, -INFINITY};

kvc_status test_head_rows(const kvc_layer *layer, size_t h, int is_values, float *dst,
                          size_t dst_len) {
    return is_values ? kvc_layer_head_values(layer, h, dst, dst_len)
                     : kvc_layer_head_keys(layer, h, dst, dst_len);
}

int test_mode_quantizes(kvc_mode mode, int is_values) {
    return kvc_mode_component(mode, is_values) != KVC_COMPONENT_F32;
}

int test_mode_has_q4(kvc_mode mode) {
    return kvc_mode_component(mode, 0) == KVC_COMPONENT_Q4 ||
           kvc_mode_component(mode, 1) == KVC_COMPONENT_Q4;
}

size_t test_expected_memory_of(const test_data *data, const uint32_t *positions, size_t count,
                               int frozen, kvc_mode mode) {
    return test_expected_memory_with(data, positions, count, frozen, mode, NULL);
}

void test_window_rows(const kvc_layer *layer, const test_data *data, size_t *windows) {
    const size_t H = data->H, d = data->d, L = kvc_layer_seq_len(layer);
    uint32_t *slots = test_alloc(L * sizeof(uint32_t) + 4);
    float *rows = test_alloc(L * d * sizeof(float) + 4);
    (void)kvc_layer_positions(layer, slots, L);
    for (size_t h = 0; h < H; h++) {
        for (int is_values = 0; is_values < 2; is_values++) {
            size_t *window = &windows[2 * h + is_values];
            *window = 0;
            if (kvc_mode_component(kvc_layer_mode(layer), is_values) != KVC_COMPONENT_Q4) continue;
            (void)test_head_rows(layer, h, is_values, rows, L * d);
            size_t r = 0;
            for (size_t s = 0; s < L; s++) {
                const size_t p = slots[s];
                if (!data->alive[p * H + h]) continue;
                const float *x = (is_values ? data->v : data->k) + (p * H + h) * d;
                *window += p >= KVC_Q8_WINDOW && test_bits_equal(rows + r * d, x, d);
                r++;
            }
        }
    }
    free(slots);
    free(rows);
}

size_t test_expected_memory_with(const test_data *data, const uint32_t *positions, size_t count,
                                 int frozen, kvc_mode mode, const size_t *windows) {
    const size_t H = data->H, d = data->d;
    size_t bytes = count * (8 + (H + 7) / 8); /* imp and position (4 + 4), alive map */
    for (size_t h = 0; h < H; h++) {
        for (int is_values = 0; is_values < 2; is_values++) {
            const kvc_component type = kvc_mode_component(mode, is_values);
            size_t quantized = 0; /* rows from W on */
            for (size_t i = 0; i < count; i++) {
                const size_t p = positions ? positions[i] : i;
                if (!data->alive[p * H + h]) continue;
                if (type == KVC_COMPONENT_F32 || p < KVC_Q8_WINDOW) bytes += d * 4;
                else quantized++;
            }
            if (type == KVC_COMPONENT_Q8) bytes += quantized * (d + 4);
            /* q4: codes, and f32 copies of the newest KVC_Q4_RESIDUAL_ROWS */
            if (type == KVC_COMPONENT_Q4) {
                const size_t window = windows ? windows[2 * h + is_values]
                                      : quantized < KVC_Q4_RESIDUAL_ROWS ? quantized : KVC_Q4_RESIDUAL_ROWS;
                const size_t row = 4 + ((d + 15) / 16 + 3) / 4 + (d + 1) / 2; /* scale, shifts, codes */
                bytes += quantized * row + window * d * 4;
            }
        }
    }
    for (int is_values = 0; is_values < 2; is_values++) {
        if (frozen && test_mode_quantizes(mode, is_values)) bytes += H * d * 4;
    }
    return bytes;
}

size_t test_expected_memory(const test_data *data, size_t len, kvc_mode mode) {
    return test_expected_memory_of(data, NULL, len, mode != KVC_MODE_F32 && len > KVC_Q8_WINDOW,
                                   mode);
}

/* ---- observable state ---- */

/* The linear part of a state: geometry, steps, state and tentative states. */
static void take_linear(const kvc_layer *layer, test_state *s) {
    s->num_heads = kvc_layer_num_heads(layer);
    s->num_features = kvc_layer_num_features(layer);
    s->value_dim = kvc_layer_value_dim(layer);
    s->phase_mass = kvc_layer_phase_mass(layer);
    s->steps = kvc_layer_steps(layer);
    s->state_len = s->num_heads * s->num_features * s->value_dim;
    s->state = test_alloc(s->state_len * sizeof(double));
    s->scratch = test_alloc(s->draft_len * s->state_len * sizeof(double));
    if (kvc_layer_linear_state(layer, s->state, s->state_len) != KVC_OK) s->read_errors++;
    if (kvc_layer_linear_scratch(layer, s->scratch, s->draft_len * s->state_len) != KVC_OK)
        s->read_errors++;
}

test_state *test_state_take(const kvc_layer *layer) {
    test_state *s = test_alloc(sizeof *s);
    s->kind = (int)kvc_layer_kind(layer);
    s->verifying = kvc_layer_verifying(layer);
    s->draft_len = kvc_layer_draft_len(layer);
    s->memory_bytes = kvc_layer_memory_bytes(layer);
    s->owner = kvc_layer_owner(layer);
    if (s->kind == KVC_KIND_SHARED || s->kind == KVC_KIND_NONE) return s; /* nothing else to read: it holds nothing */
    if (s->kind == KVC_KIND_LINEAR) {
        take_linear(layer, s);
        return s;
    }
    s->recurrent_len = kvc_layer_state_len(layer);
    if (s->recurrent_len) {
        s->steps = kvc_layer_steps(layer);
        s->recurrent = test_alloc(s->recurrent_len * sizeof(float));
        if (kvc_layer_recurrent_state(layer, s->recurrent, s->recurrent_len) != KVC_OK) s->read_errors++;
    }
    const size_t H = kvc_layer_num_kv_heads(layer), d = kvc_layer_head_dim(layer);
    s->num_kv_heads = H;
    s->head_dim = d;
    s->seq_len = kvc_layer_seq_len(layer);
    s->mode = (int)kvc_layer_mode(layer);
    s->field_frozen = kvc_layer_field_frozen(layer);
    s->next_position = kvc_layer_next_position(layer);
    s->imp = test_alloc(s->seq_len * sizeof(float));
    if (kvc_layer_imp(layer, s->imp, s->seq_len) != KVC_OK) s->read_errors++;
    s->slots = test_alloc(s->seq_len * sizeof(uint32_t));
    if (kvc_layer_positions(layer, s->slots, s->seq_len) != KVC_OK) s->read_errors++;
    s->head_len = test_alloc(H * sizeof(size_t));
    s->keys = test_alloc(H * sizeof(float *));
    s->values = test_alloc(H * sizeof(float *));
    s->positions = test_alloc(H * sizeof(uint32_t *));
    s->out = test_alloc(H * sizeof(float *));
    s->probs = test_alloc(H * sizeof(float *));
    test_rng rng = test_rng_new(0x5eed);
    float *q = test_alloc(d * sizeof(float));
    test_fill_normal(&rng, q, d);
    for (size_t h = 0; h < H; h++) {
        const size_t n = kvc_layer_head_len(layer, h);
        s->head_len[h] = n;
        s->keys[h] = test_alloc(n * d * sizeof(float));
        s->values[h] = test_alloc(n * d * sizeof(float));
        s->positions[h] = test_alloc(n * sizeof(uint32_t));
        s->out[h] = test_alloc(d * sizeof(float));
        s->probs[h] = test_alloc(n * sizeof(float));
        s->read_errors += kvc_layer_head_keys(layer, h, s->keys[h], n * d) != KVC_OK;
        s->read_errors += kvc_layer_head_values(layer, h, s->values[h], n * d) != KVC_OK;
        s->read_errors += kvc_layer_head_positions(layer, h, s->positions[h], n) != KVC_OK;
        s->read_errors += kvc_layer_attend(layer, q, h, s->out[h], s->probs[h]) != KVC_OK;
    }
    free(q);
    return s;
}

static int state_differs(const char *what, size_t h) {
    printf("  state differs: %s (head %zu)\n", what, h);
    return 0;
}

/* The linear part of test_state_equal. */
static int linear_equal(const test_state *a, const test_state *b) {
    if (a->num_heads != b->num_heads || a->num_features != b->num_features ||
        a->value_dim != b->value_dim || memcmp(&a->phase_mass, &b->phase_mass, sizeof(double)))
        return state_differs("linear geometry or phase_mass", 0);
    if (a->steps != b->steps) return state_differs("steps", 0);
    if (memcmp(a->state, b->state, a->state_len * sizeof(double)) != 0)
        return state_differs("linear state", 0);
    if (memcmp(a->scratch, b->scratch, a->draft_len * a->state_len * sizeof(double)) != 0)
        return state_differs("linear scratch", 0);
    return 1;
}

int test_state_equal(const test_state *a, const test_state *b) {
    if (a->read_errors || b->read_errors) return state_differs("a read failed", 0);
    if (a->kind != b->kind) return state_differs("kind", 0);
    if (a->verifying != b->verifying || a->draft_len != b->draft_len)
        return state_differs("verifying or draft_len", 0);
    if (a->memory_bytes != b->memory_bytes) return state_differs("memory_bytes", 0);
    if (a->owner != b->owner) return state_differs("owner", 0);
    if (a->kind == KVC_KIND_SHARED || a->kind == KVC_KIND_NONE) return 1;
    if (a->kind == KVC_KIND_LINEAR) return linear_equal(a, b);
    if (a->num_kv_heads != b->num_kv_heads || a->head_dim != b->head_dim || a->mode != b->mode)
        return state_differs("geometry or mode", 0);
    if (a->recurrent_len != b->recurrent_len || a->steps != b->steps) return state_differs("recurrent steps", 0);
    if (a->recurrent_len && memcmp(a->recurrent, b->recurrent, a->recurrent_len * sizeof(float)) != 0)
        return state_differs("recurrent state", 0);
    if (a->seq_len != b->seq_len) return state_differs("seq_len", 0);
    if (a->next_position != b->next_position) return state_differs("next_position", 0);
    if (memcmp(a->slots, b->slots, a->seq_len * sizeof(uint32_t)) != 0)
        return state_differs("positions", 0);
    if (a->field_frozen != b->field_frozen) return state_differs("field_frozen", 0);
    if (memcmp(a->imp, b->imp, a->seq_len * sizeof(float)) != 0) return state_differs("imp", 0);
    const size_t d = a->head_dim;
    for (size_t h = 0; h < a->num_kv_heads; h++) {
        const size_t n = a->head_len[h];
        if (n != b->head_len[h]) return state_differs("head_len", h);
        if (memcmp(a->keys[h], b->keys[h], n * d * sizeof(float)) != 0)
            return state_differs("head_keys", h);
        if (memcmp(a->values[h], b->values[h], n * d * sizeof(float)) != 0)
            return state_differs("head_values", h);
        if (memcmp(a->positions[h], b->positions[h], n * sizeof(uint32_t)) != 0)
            return state_differs("head_positions", h);
        if (memcmp(a->out[h], b->out[h], d * sizeof(float)) != 0)
            return state_differs("attend out", h);
        if (memcmp(a->probs[h], b->probs[h], n * sizeof(float)) != 0)
            return state_differs("attend probs", h);
    }
    return 1;
}

int test_state_matches(const kvc_layer *layer, const test_state *before) {
    test_state *now = test_state_take(layer);
    int equal = test_state_equal(now, before);
    test_state_free(now);
    return equal;
}

int test_layers_equal(const kvc_layer *a, const kvc_layer *b) {
    test_state *state = test_state_take(b);
    int equal = test_state_matches(a, state);
    test_state_free(state);
    return equal;
}

void test_state_free(test_state *state) {
    if (!state) return;
    for (size_t h = 0; h < state->num_kv_heads; h++) {
        free(state->keys[h]);
        free(state->values[h]);
        free(state->positions[h]);
        free(state->out[h]);
        free(state->probs[h]);
    }
    free(state->keys);
    free(state->values);
    free(state->positions);
    free(state->out);
    free(state->probs);
    free(state->head_len);
    free(state->imp);
    free(state->slots);
    free(state->state);
    free(state->scratch);
    free(state->recurrent);
    free(state);
}

int test_layer_round_trips(const kvc_layer *layer) {
    const size_t len = kvc_layer_snapshot_size(layer);
    uint8_t *bytes = test_alloc(len), *again = test_alloc(len);
    kvc_layer *restored = NULL;
    const int round_trips = kvc_layer_serialize(layer, bytes, len) == KVC_OK &&
                            kvc_layer_deserialize(bytes, len, &restored) == KVC_OK && test_layers_equal(restored, layer) &&
                            kvc_layer_serialize(restored, again, len) == KVC_OK && memcmp(bytes, again, len) == 0;
    kvc_layer_free(restored);
    free(bytes);
    free(again);
    return round_trips;
}

uint8_t *test_model_snapshot(const kvc_model *model, size_t *len) {
    *len = kvc_model_snapshot_size(model);
    uint8_t *bytes = test_alloc(*len);
    if (kvc_model_serialize(model, bytes, *len) != KVC_OK) {
        free(bytes);
        return NULL;
    }
    return bytes;
}

int test_models_equal(const kvc_model *a, const kvc_model *b) {
    const size_t L = kvc_model_num_layers(a);
    if (L != kvc_model_num_layers(b) || kvc_model_seq_len(a) != kvc_model_seq_len(b) ||
        kvc_model_memory_bytes(a) != kvc_model_memory_bytes(b) ||
        kvc_model_verifying(a) != kvc_model_verifying(b)) {
        printf("  models differ: layers, seq_len, memory_bytes or verifying\n");
        return 0;
    }
    for (size_t i = 0; i < L; i++) {
        if (!test_layers_equal(kvc_model_layer(a, i), kvc_model_layer(b, i))) {
            printf("  models differ at layer %zu\n", i);
            return 0;
        }
    }
    return 1;
}

test_state **test_model_state_take(const kvc_model *model) {
    const size_t L = kvc_model_num_layers(model);
    test_state **states = test_alloc((L + 1) * sizeof(test_state *));
    for (size_t i = 0; i < L; i++) states[i] = test_state_take(kvc_model_layer(model, i));
    return states;
}

int test_model_state_matches(const kvc_model *model, test_state *const *before) {
    const size_t L = kvc_model_num_layers(model);
    for (size_t i = 0; i < L; i++) {
        if (!before[i] || !test_state_matches(kvc_model_layer(model, i), before[i])) {
            printf("  model layer %zu changed\n", i);
            return 0;
        }
    }
    return before[L] == NULL;
}

void test_model_state_free(test_state **states) {
    for (size_t i = 0; states && states[i]; i++) test_state_free(states[i]);
    free(states);
}

/* ---- scripted linear steps ---- */

test_steps test_steps_make(uint64_t seed, size_t n, size_t H, size_t F, size_t dv, int phase,
                           int with_decay) {
    test_rng rng = test_rng_new(seed);
    test_steps steps = {n, H, F, dv, phase ? F / 2 : F, phase, NULL, NULL, NULL, NULL};
    const size_t inputs = n * H * steps.in_len;
    steps.key = test_alloc(inputs * sizeof(float));
    steps.query = test_alloc(inputs * sizeof(float));
    steps.v = test_alloc(n * H * dv * sizeof(float));
    test_fill_normal(&rng, steps.key, inputs);
    test_fill_normal(&rng, steps.query, inputs);
    test_fill_normal(&rng, steps.v, n * H * dv);
    if (phase) {
        for (size_t i = 0; i < inputs; i++) {
            steps.key[i] *= 3.0f;
            steps.query[i] *= 3.0f;
        }
    }
    if (with_decay) {
        steps.decay = test_alloc(n * H * F * sizeof(float));
        for (size_t i = 0; i < n * H * F; i++) steps.decay[i] = 0.5f + 0.5f * test_rng_unit(&rng);
    }
    return steps;
}

void test_steps_free(test_steps *steps) {
    free(steps->decay);
    free(steps->key);
    free(steps->query);
    free(steps->v);
    steps->decay = steps->key = steps->query = steps->v = NULL;
}

kvc_status test_steps_take(kvc_layer *layer, const test_steps *steps, size_t first,
                           size_t count, float *out) {
    const size_t H = steps->H;
    float *scratch = out ? NULL : test_alloc(H * steps->dv * sizeof(float));
    kvc_status status = KVC_OK;
    for (size_t i = first; i < first + count && status == KVC_OK; i++) {
        const float *decay = steps->decay ? steps->decay + i * H * steps->F : NULL;
        const float *key = steps->key + i * H * steps->in_len;
        const float *query = steps->query + i * H * steps->in_len;
        const float *v = steps->v + i * H * steps->dv;
        float *o = out ? out + (i - first) * H * steps->dv : scratch;
        status = steps->phase ? kvc_layer_linear_step_phase(layer, decay, key, query, v, o)
                              : kvc_layer_linear_step(layer, decay, key, query, v, o);
    }
    free(scratch);
    return status;
}

kvc_layer *test_linear_with(const test_steps *steps, size_t count, double phase_mass) {
    kvc_layer *layer = NULL;
    kvc_status status =
        kvc_layer_create_linear(steps->H, steps->F, steps->dv, phase_mass, &layer);
    if (status == KVC_OK) status = test_steps_take(layer, steps, 0, count, NULL);
    if (status == KVC_OK) return layer;
    printf("  test_linear_with: %s\n", kvc_status_name(status));
    kvc_layer_free(layer);
    return NULL;
}

/* ---- a hybrid model ---- */

test_hybrid test_hybrid_make(uint64_t seed, size_t len) {
    test_hybrid h = {{test_data_make(seed, len, 5, 8, 1), test_data_make(seed + 1, len, 3, 6, 1)},
                     test_steps_make(seed, len, 2, 4, 3, 1, 1)};
    return h;
}

void test_hybrid_free(test_hybrid *h) {
    test_data_free(&h->data[0]);
    test_data_free(&h->data[1]);
    test_steps_free(&h->steps);
}

kvc_model *test_hybrid_model(const test_hybrid *h, size_t len) {
    kvc_layer *layers[3] = {test_layer_with(&h->data[0], len, KVC_MODE_Q8),
                            test_layer_with(&h->data[1], len, KVC_MODE_F32),
                            test_linear_with(&h->steps, len, 0.25)};
    kvc_model *model = NULL;
    if (layers[0] && layers[1] && layers[2] && kvc_model_create(layers, 3, &model) == KVC_OK)
        return model;
    for (size_t i = 0; i < 3; i++) kvc_layer_free(layers[i]);
    printf("  test_hybrid_model: a call failed\n");
    return NULL;
}

kvc_status test_hybrid_append(kvc_model *model, const test_hybrid *h, size_t at, size_t n) {
    kvc_status status = KVC_OK;
    for (size_t i = 0; i < 2 && status == KVC_OK; i++)
        status = test_data_append(kvc_model_layer(model, i), &h->data[i], at, n);
    if (status == KVC_OK)
        status = test_steps_take(kvc_model_layer(model, 2), &h->steps, at, n, NULL);
    return status;
}

/* ---- the failing allocator ---- */

static struct {
    long calls;    /* malloc and realloc calls since the last arm */
    long fail_at;  /* the call that fails; 0: none */
    int persistent;
    long failures; /* calls failed since the last arm */
    long live;     /* blocks allocated and not yet freed */
} fault;

static int fault_now(void) {
    fault.calls++;
    const int fail = fault.fail_at > 0 && (fault.persistent ? fault.calls >= fault.fail_at
                                                            : fault.calls == fault.fail_at);
    fault.failures += fail;
    return fail;
}

static void *fault_malloc(void *user, size_t bytes) {
    (void)user;
    if (fault_now()) return NULL;
    void *block = malloc(bytes);
    fault.live += block != NULL;
    return block;
}

static void *fault_realloc(void *user, void *block, size_t bytes) {
    (void)user;
    if (fault_now()) return NULL; /* the old block stays, as C realloc */
    void *grown = realloc(block, bytes);
    fault.live += grown != NULL && block == NULL;
    return grown;
}

static void fault_free(void *user, void *block) {
    (void)user;
    if (!block) return;
    fault.live--;
    free(block);
}

static const kvc_allocator fault_hook = {fault_malloc, fault_realloc, fault_free, NULL};

const kvc_allocator *test_fault_allocator(void) {
    return &fault_hook;
}

kvc_status test_fault_install(void) {
    release_kept_forks(); /* made by the other allocator */
    memset(&fault, 0, sizeof fault);
    fault_installed = 1;
    return kvc_set_allocator(&fault_hook);
}

long test_fault_remove(void) {
    kvc_set_allocator(NULL);
    fault_installed = 0;
    return fault.live;
}

void test_fault_arm(long fail_at, int persistent) {
    fault.calls = 0;
    fault.failures = 0;
    fault.fail_at = fail_at;
    fault.persistent = persistent;
}

long test_fault_live(void) {
    return fault.live;
}

kvc_status test_out_rule(kvc_status status, const void *out) {
    return status != KVC_OK && out != NULL ? KVC_E_LENGTH : status;
}

/* What test_run_with_faults watches: a layer or a model (either may be NULL). */
typedef struct watched_state {
    test_state *layer;
    test_state **model;
} watched_state;

static watched_state watch(const kvc_layer *layer, const kvc_model *model) {
    watched_state w = {layer ? test_state_take(layer) : NULL,
                       model ? test_model_state_take(model) : NULL};
    return w;
}

static long run_with_faults(test_fallible op, void *ctx, const kvc_layer *layer,
                            const kvc_model *model, int persistent, int keeps) {
    watched_state before = watch(layer, model);
    long failed = 0;
    for (long n = 1; n <= 100000; n++) {
        const long live = fault.live;
        test_fault_arm(n, persistent);
        const kvc_status status = op(ctx);
        const long failed_calls = fault.failures;
        test_fault_arm(0, 0);
        if (status == KVC_OK && failed_calls == 0) break;
        const int ok = status == KVC_E_NOMEM && failed_calls > 0 &&
                       (keeps == TEST_KEEPS_OWNED || fault.live == live) &&
                       (!layer || test_state_matches(layer, before.layer)) &&
                       (!model || test_model_state_matches(model, before.model));
        if (!ok) {
            printf("  allocation %ld failing (%s): status %s, %ld failed, %ld live before, "
                   "%ld after\n", n, persistent ? "persistent" : "transient",
                   kvc_status_name(status), failed_calls, live, fault.live);
            failed = -1;
            break;
        }
        failed++;
    }
    test_state_free(before.layer);
    test_model_state_free(before.model);
    return failed;
}

long test_run_with_faults(test_fallible op, void *ctx, const kvc_layer *watched,
                          int persistent, int keeps) {
    return run_with_faults(op, ctx, watched, NULL, persistent, keeps);
}

long test_run_with_faults_on_model(test_fallible op, void *ctx, const kvc_model *watched,
                                   int persistent, int keeps) {
    return run_with_faults(op, ctx, NULL, watched, persistent, keeps);
}

void test_check_holds_nothing(const kvc_layer *layer, const char *described) {
    CHECK(kvc_layer_memory_bytes(layer) == 0 && kvc_layer_shared_bytes(layer) == 0);
    CHECK(kvc_layer_seq_len(layer) == 0 && kvc_layer_num_kv_heads(layer) == 0 && kvc_layer_steps(layer) == 0);
    char text[256];
    CHECK(kvc_layer_describe(layer, text, sizeof text) < sizeof text);
    CHECK(strstr(text, described) != NULL);
}

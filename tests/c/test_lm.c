/*
 * test_lm.c -- the model runner: a GGUF model's tensors bound where the
 * weights will lie, refusals that name what is wrong, and the forward pass
 * on a model cache: a token's logits the same bits alone, in a batch, in
 * chunks and on any number of threads; a verify kept or rejected leaving
 * the cache as plain decoding does; failures that change nothing.
 *
 * The models are small, written here (gguf_builder.c) and filled with
 * random weights of sane scale after kvc_lm_create, as a loader streams a
 * file's tensor data in.  What the arithmetic computes is held against a
 * reference and against llama.cpp in the JS tests (tests/js/model.test.mjs).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "gguf_builder.h"
#include "kernels/weights-scalar.h"
#include "model/model.h"
#include "test.h"

/* ---- a small model (gguf_builder.h) ---- */

enum { DIM = GB_DIM, LAYERS = GB_LAYERS, HEADS = GB_HEADS, KV_HEADS = GB_KV_HEADS, HEAD_DIM = GB_HEAD_DIM, FFN = GB_FFN,
       VOCAB = GB_VOCAB, CONTEXT = GB_CONTEXT };
#define GGML_F32 0
#define GGML_Q8_0 8
#define GGML_IQ2_XXS 16

/* Random weights of sane scale for tensor t of the parsed file: norms near 1,
 * matrices ~N(0, 1/sqrt(cols)) (Q8_0: a block scale of that over 127, codes
 * uniform). */
static void fill_tensor(uint8_t *weights, const kvc_gguf *gguf, size_t t, test_rng *rng) {
    const char *name;
    size_t name_len, n_dims;
    uint32_t type;
    uint64_t dims[KVC_GGUF_MAX_DIMS], offset;
    kvc_gguf_tensor(gguf, t, &name, &name_len, &type, &n_dims, dims, &offset, NULL);
    uint8_t *at = weights + offset;
    const size_t values = (size_t)(dims[0] * (n_dims > 1 ? dims[1] : 1));
    const float scale = 1.0f / sqrtf((float)dims[0]);
    if (type == GGML_F32) {
        for (size_t i = 0; i < values; i++) {
            const float x = n_dims == 1 ? 1.0f + 0.1f * test_rng_normal(rng) : scale * test_rng_normal(rng);
            memcpy(at + 4 * i, &x, 4);
        }
        return;
    }
    for (size_t b = 0; b < values / 32; b++, at += 34) {
        const uint16_t d = test_f16_bits(2.0f * scale / 127.0f);
        memcpy(at, &d, 2);
        for (size_t j = 0; j < 32; j++) at[2 + j] = (uint8_t)(int8_t)((int)(test_rng_u32(rng) % 255) - 127);
    }
}

typedef struct test_model {
    kvc_lm *lm;
    gb_file file;
} test_model;

/* A model of `type` matrices, its weights random from `seed`. */
static gb_llama_spec spec = {.arch = "llama"};

static kvc_status make_model(uint32_t type, int tied, uint64_t seed, test_model *out, char *message, size_t message_len) {
    gb_llama m;
    gb_llama_tensors(&m, type, tied);
    out->file = gb_llama_build(&spec, &m);
    out->lm = NULL;
    kvc_gguf *gguf;
    kvc_status status = kvc_gguf_parse(out->file.bytes, out->file.len, &gguf, NULL);
    if (status != KVC_OK) {
        if (message) kvc_gguf_explain(out->file.bytes, out->file.len, message, message_len);
        return status;
    }
    status = kvc_lm_create(gguf, &out->lm, message, message_len);
    if (status == KVC_OK && kvc_lm_weights(out->lm) != NULL) status = KVC_E_LENGTH; /* not allocated yet */
    if (status == KVC_OK) status = kvc_lm_alloc_weights(out->lm);
    if (status == KVC_OK) {
        test_rng rng = test_rng_new(seed);
        for (size_t t = 0; t < kvc_gguf_tensor_count(gguf); t++) fill_tensor(kvc_lm_weights(out->lm), gguf, t, &rng);
    }
    kvc_gguf_free(gguf);
    return status;
}

static void free_model(test_model *m) {
    kvc_lm_free(m->lm);
    free(m->file.bytes);
}

/* A cache of LAYERS layers of KV_HEADS x HEAD_DIM in `mode`. */
static kvc_model *make_cache(kvc_mode mode) {
    kvc_layer *layers[LAYERS];
    for (size_t l = 0; l < LAYERS; l++) {
        if (kvc_layer_create(KV_HEADS, HEAD_DIM, mode, &layers[l]) != KVC_OK) return NULL;
    }
    kvc_model *cache;
    return kvc_model_create(layers, LAYERS, &cache) == KVC_OK ? cache : NULL;
}

static void tokens_of(uint32_t *tokens, size_t n, uint64_t seed) {
    test_rng rng = test_rng_new(seed);
    for (size_t i = 0; i < n; i++) tokens[i] = test_rng_u32(&rng) % VOCAB;
}

static int same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* ---- creation ---- */

TEST(create_reads_the_shape_and_binds_every_tensor_of_the_file) {
    test_model m;
    char message[256];
    const kvc_status made = make_model(GGML_Q8_0, 0, 1, &m, message, sizeof message);
    if (made != KVC_OK) test_fail(__FILE__, __LINE__, message);
    CHECK_OK(made);
    CHECK(strcmp(kvc_lm_architecture(m.lm), "llama") == 0);
    CHECK(kvc_lm_num_layers(m.lm) == LAYERS && kvc_lm_dim(m.lm) == DIM && kvc_lm_num_heads(m.lm) == HEADS);
    CHECK(kvc_lm_num_kv_heads(m.lm) == KV_HEADS && kvc_lm_head_dim(m.lm) == HEAD_DIM && kvc_lm_ffn_dim(m.lm) == FFN);
    CHECK(kvc_lm_vocab_size(m.lm) == VOCAB && kvc_lm_context_length(m.lm) == CONTEXT);
    CHECK(kvc_lm_rms_eps(m.lm) == 1e-5f && kvc_lm_rope_base(m.lm) == 10000.0f);
    CHECK(kvc_lm_weights_bytes(m.lm) > 0 && kvc_lm_weights(m.lm) != NULL && message[0] == '\0');
    free_model(&m);
}

/* ---- RoPE on part of a head (phi3: 96 channels of 128) ---- */

TEST(rope_turns_the_first_rope_dims_channels_of_a_head_scaled_and_leaves_the_rest) {
    /* Two heads of 8, RoPE on 4: pairs (0, 2) and (1, 3) in halves, (0, 1)
     * and (2, 3) adjacent; angles pos * base^(-2i / 4) / factor_i. */
    const float factors[2] = {2.0f, 4.0f};
    float table[4];
    const kvc_rope_params rope = {.dims = 4, .base = 100.0f, .factors = factors, .scale = 1.5f, .freq_scale = 1.0f};
    kvc_rope_table(&rope, 3, table);
    const float theta[2] = {3.0f / 2.0f, 3.0f * 0.1f / 4.0f};
    for (size_t i = 0; i < 2; i++) {
        CHECK(fabsf(table[i] - 1.5f * cosf(theta[i])) < 1e-6f && fabsf(table[2 + i] - 1.5f * sinf(theta[i])) < 1e-6f);
    }
    const kvc_rope_pairing pairings[2] = {KVC_ROPE_HALVES, KVC_ROPE_ADJACENT};
    for (size_t p = 0; p < 2; p++) {
        float x[16];
        for (size_t i = 0; i < 16; i++) x[i] = (float)(i + 1);
        kvc_rope_apply(2, 8, 4, pairings[p], table, x);
        for (size_t h = 0; h < 2; h++) {
            const float *head = x + 8 * h;
            const float in = (float)(8 * h + 1);
            for (size_t i = 0; i < 2; i++) {
                const size_t a = p == 0 ? i : 2 * i, b = p == 0 ? i + 2 : 2 * i + 1;
                const float x0 = in + (float)a, x1 = in + (float)b;
                CHECK(fabsf(head[a] - (x0 * table[i] - x1 * table[2 + i])) < 1e-5f);
                CHECK(fabsf(head[b] - (x0 * table[2 + i] + x1 * table[i])) < 1e-5f);
            }
            for (size_t i = 4; i < 8; i++) CHECK(head[i] == in + (float)i);
        }
    }
}

/* ---- GELU as llama.cpp's CPU code computes it ---- */

TEST(gelu_is_the_tanh_form_at_the_input_rounded_to_f16_rounded_to_f16_and_exact_past_ten) {
    float *table = malloc(KVC_GELU_TABLE * sizeof *table);
    CHECK(table != NULL);
    kvc_gelu_table_fill(table);
    for (int i = -1300; i <= 1300; i++) {
        const float x = (float)i * 0.00937f, up = 1.0f + (float)(i % 7) * 0.25f;
        float y = x, gate = x;
        kvc_gelu(table, 1, &y);
        kvc_geglu(table, 1, &gate, &up);
        if (x <= -10.0f) CHECK(y == 0.0f);
        else if (x >= 10.0f) CHECK(y == x);
        else {
            const double h = kvc_f16_round(x);
            const double want = 0.5 * h * (1.0 + tanh(0.7978845608028654 * h * (1.0 + 0.044715 * h * h)));
            CHECK(kvc_f16_round(y) == y);                                  /* an f16 */
            /* f16's rounding of the result, and f32's of 1 + tanh: where tanh
             * nears -1 that sum is x's size times f32's epsilon. */
            CHECK(fabs(y - want) <= fabs(want) * 0x1p-10 + fabs(h) * 0x1p-23);
        }
        CHECK(gate == y * up);
    }
    free(table);
}

/* A 1B model's F16 weights are 2.5 GB: one region the loader fills, which
 * wasm's heap gives on its first allocation too, and after it has refused a
 * growth (its malloc grows the heap by less than 2 GiB a call, and by whole
 * blocks once a growth was refused; alloc.c). */
static void check_alloc_weights_gives_a_region_of_2_5_gib(void) {
    gb_llama m;
    gb_llama_tensors(&m, GGML_F32, 0);
    m.t[m.count - 1].offset = (uint64_t)5 << 29; /* output.weight at 2.5 GiB: a gap the region keeps */
    gb_file file = gb_llama_build(&spec, &m);
    kvc_gguf *gguf;
    CHECK_OK(kvc_gguf_parse(file.bytes, file.len, &gguf, NULL));
    kvc_lm *lm;
    const kvc_status made = kvc_lm_create(gguf, &lm, NULL, 0);
    kvc_gguf_free(gguf);
    free(file.bytes);
    CHECK_OK(made);
    const size_t bytes = kvc_lm_weights_bytes(lm);
    CHECK(bytes > ((size_t)5 << 29));
    const kvc_status allocated = kvc_lm_alloc_weights(lm);
    uint8_t *weights = kvc_lm_weights(lm);
    if (weights) weights[0] = weights[bytes - 1] = 1; /* both ends are the model's */
    kvc_lm_free(lm);
    CHECK_OK(allocated);
    CHECK(weights != NULL);
}

TEST(alloc_weights_gives_a_region_of_more_than_2_gib_on_a_fresh_heap) {
    check_alloc_weights_gives_a_region_of_2_5_gib();
}

TEST(alloc_weights_gives_a_region_of_more_than_2_gib_after_the_heap_refused_a_growth) {
    /* 3 GiB more than a fresh wasm heap holds: a growth of 2 GiB or more, which
     * wasm's malloc refuses (natively it may be given: then it is freed). */
    void *volatile refused = malloc((size_t)3 << 30);
    free(refused);
    check_alloc_weights_gives_a_region_of_2_5_gib();
}

TEST(create_refuses_what_it_cannot_run_and_says_what) {
    char message[256];
    test_model m;
    spec.arch = "mamba";
    CHECK_STATUS(make_model(GGML_Q8_0, 0, 1, &m, message, sizeof message), KVC_E_ARCH);
    CHECK(m.lm == NULL && strstr(message, "architecture mamba is not supported; this runner reads llama, qwen2, qwen3"));
    free(m.file.bytes);
    spec.arch = "llama";
    spec.omit_head_count = 1;
    CHECK_STATUS(make_model(GGML_Q8_0, 0, 1, &m, message, sizeof message), KVC_E_MODEL_FILE);
    CHECK(strstr(message, "metadata llama.attention.head_count is missing"));
    free(m.file.bytes);
    spec.omit_head_count = 0;
    /* A block count no file of these tensors holds, refused before its blocks are allocated (the fuzzer's find). */
    spec.block_count = 1u << 24;
    CHECK_STATUS(make_model(GGML_Q8_0, 0, 1, &m, message, sizeof message), KVC_E_MODEL_FILE);
    CHECK(strstr(message, "metadata llama.block_count is 16777216, and the file holds 21 tensors: not enough for them"));
    free(m.file.bytes);
    spec.block_count = 0;
    /* 2^20 heads of 4096: a query 2^32 wide, which a 32-bit size_t would
     * wrap to 0 -- refused as a shape, like any size past 2^24. */
    spec.head_count = 1u << 20;
    spec.key_length = 4096;
    CHECK_STATUS(make_model(GGML_Q8_0, 0, 1, &m, message, sizeof message), KVC_E_MODEL_FILE);
    CHECK(strstr(message, "an attention shape this runner does not compute: 1048576 heads of 4096"));
    free(m.file.bytes);
    spec.head_count = 0;
    spec.key_length = 0;

    /* A type the runner does not read, a wrong shape, a missing tensor. */
    gb_llama t;
    struct { kvc_status status; const char *says; } cases[] = {
        {KVC_E_WEIGHT_TYPE, "tensor blk.0.attn_q.weight has type IQ2_XXS; this runner reads F32, F16, BF16, Q8_0"},
        {KVC_E_MODEL_FILE, "tensor blk.1.ffn_up.weight is [64, 100], expected [64, 128]"},
        {KVC_E_MODEL_FILE, "tensor output_norm.weight is missing"},
    };
    for (size_t c = 0; c < 3; c++) {
        gb_llama_tensors(&t, GGML_Q8_0, 0);
        for (size_t i = 0; i < t.count; i++) {
            if (c == 0 && strcmp(t.t[i].name, "blk.0.attn_q.weight") == 0) {
                t.t[i].type = GGML_IQ2_XXS;
                t.t[i].bytes = DIM * HEADS * HEAD_DIM / 256 * 66;
            }
            if (c == 1 && strcmp(t.t[i].name, "blk.1.ffn_up.weight") == 0) t.t[i].dims[1] = 100;
            if (c == 2 && strcmp(t.t[i].name, "output_norm.weight") == 0) t.t[i].name = "output_norm.weights";
        }
        gb_file file = gb_llama_build(&spec, &t);
        kvc_gguf *gguf;
        CHECK_OK(kvc_gguf_parse(file.bytes, file.len, &gguf, NULL));
        kvc_lm *lm = (kvc_lm *)1;
        CHECK_STATUS(kvc_lm_create(gguf, &lm, message, sizeof message), cases[c].status);
        CHECK(lm == NULL);
        if (!strstr(message, cases[c].says)) {
            test_fail(__FILE__, __LINE__, message);
            return;
        }
        kvc_gguf_free(gguf);
        free(file.bytes);
    }
}

TEST(tied_embeddings_are_read_as_the_output) {
    test_model m;
    CHECK_OK(make_model(GGML_Q8_0, 1, 1, &m, NULL, 0));
    kvc_model *cache = make_cache(KVC_MODE_F32);
    uint32_t tokens[3];
    tokens_of(tokens, 3, 2);
    float logits[VOCAB];
    CHECK_OK(kvc_lm_forward(m.lm, cache, tokens, 3, logits, 1, 0));
    for (size_t i = 0; i < VOCAB; i++) CHECK(isfinite(logits[i]));
    kvc_model_free(cache);
    free_model(&m);
}

/* ---- the forward pass ---- */

/* Logits of `n` tokens through a fresh cache: `steps` tokens a call. */
static int run(test_model *m, kvc_mode mode, const uint32_t *tokens, size_t n, size_t steps, uint32_t flags,
               float *logits, kvc_model **kept) {
    kvc_model *cache = make_cache(mode);
    int ok = cache != NULL;
    for (size_t at = 0; ok && at < n; at += steps) {
        const size_t count = n - at < steps ? n - at : steps;
        ok = kvc_lm_forward(m->lm, cache, tokens + at, count, logits + at * VOCAB, count, flags) == KVC_OK;
    }
    if (kept) *kept = cache;
    else kvc_model_free(cache);
    return ok;
}

TEST(a_token_gets_the_same_logits_alone_in_a_batch_and_in_chunks_in_every_mode) {
    test_model m;
    CHECK_OK(make_model(GGML_Q8_0, 0, 3, &m, NULL, 0));
    enum { N = 140 };
    uint32_t tokens[N];
    tokens_of(tokens, N, 4);
    float *one = test_alloc(N * VOCAB * sizeof(float));
    float *batch = test_alloc(N * VOCAB * sizeof(float));
    float *chunks = test_alloc(N * VOCAB * sizeof(float));
    for (kvc_mode mode = 0; mode < KVC_MODE_COUNT; mode++) {
        kvc_model *a, *b;
        CHECK(run(&m, mode, tokens, N, 1, KVC_LM_IMPORTANCE, one, &a));
        CHECK(run(&m, mode, tokens, N, N, KVC_LM_IMPORTANCE, batch, &b));
        CHECK(run(&m, mode, tokens, N, 37, KVC_LM_IMPORTANCE, chunks, NULL));
        CHECK(same_bits(one, batch, N * VOCAB) && same_bits(one, chunks, N * VOCAB));
        CHECK(test_models_equal(a, b)); /* rows, imp, positions, memory */
        kvc_model_free(a);
        kvc_model_free(b);
    }
    for (size_t i = 0; i < N * VOCAB; i++) CHECK(isfinite(one[i]));
    free(one), free(batch), free(chunks);
    free_model(&m);
}

TEST(embeddings_in_place_of_tokens_give_the_logits_and_rows_of_the_tokens_they_embed) {
    test_model m;
    CHECK_OK(make_model(GGML_Q8_0, 0, 5, &m, NULL, 0));
    enum { N = 40, FROM = 12, IMAGE = 20 };
    uint32_t tokens[N];
    tokens_of(tokens, N, 6);
    /* The rows of tokens FROM .. FROM + IMAGE, as an encoder would give them. */
    const kvc_tensor *table = &m.lm->token_embd;
    float *rows = test_alloc(IMAGE * DIM * sizeof(float));
    for (size_t t = 0; t < IMAGE; t++) table->type->dequantize(table->data + tokens[FROM + t] * table->row_bytes, 0, DIM, rows + t * DIM);
    float *want = test_alloc(N * VOCAB * sizeof(float));
    float *got = test_alloc(N * VOCAB * sizeof(float));
    kvc_model *a, *b = make_cache(KVC_MODE_F32);
    CHECK(run(&m, KVC_MODE_F32, tokens, N, N, KVC_LM_IMPORTANCE, want, &a));
    CHECK_OK(kvc_lm_forward(m.lm, b, tokens, FROM, got, FROM, KVC_LM_IMPORTANCE));
    CHECK_OK(kvc_lm_forward_input(m.lm, b, NULL, rows, IMAGE, NULL, NULL, got + FROM * VOCAB, IMAGE, KVC_LM_IMPORTANCE));
    CHECK_OK(kvc_lm_forward(m.lm, b, tokens + FROM + IMAGE, N - FROM - IMAGE, got + (FROM + IMAGE) * VOCAB,
                            N - FROM - IMAGE, KVC_LM_IMPORTANCE));
    CHECK(same_bits(want, got, N * VOCAB));
    CHECK(test_models_equal(a, b));
    /* The cache's positions given as (p, p, p, 0) are the cache's positions. */
    kvc_model *c = make_cache(KVC_MODE_F32);
    uint32_t positions[4 * N];
    for (size_t t = 0; t < N; t++) positions[4 * t] = positions[4 * t + 1] = positions[4 * t + 2] = (uint32_t)t, positions[4 * t + 3] = 0;
    CHECK_OK(kvc_lm_forward_input(m.lm, c, tokens, NULL, N, positions, NULL, got, N, KVC_LM_IMPORTANCE));
    CHECK(same_bits(want, got, N * VOCAB));
    kvc_model_free(c);
    /* Bad input changes nothing. */
    CHECK_STATUS(kvc_lm_forward_input(m.lm, b, NULL, NULL, 1, NULL, NULL, NULL, 0, 0), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_lm_forward_input(m.lm, b, tokens, rows, 1, NULL, NULL, NULL, 0, 0), KVC_E_KIND);
    CHECK_STATUS(kvc_lm_forward_input(m.lm, b, NULL, rows, 0, NULL, NULL, NULL, 0, 0), KVC_E_LENGTH);
    rows[3] = NAN;
    CHECK(kvc_lm_forward_input(m.lm, b, NULL, rows, IMAGE, NULL, NULL, NULL, 0, 0) != KVC_OK);
    CHECK(test_models_equal(a, b));
    kvc_model_free(a), kvc_model_free(b);
    free(rows), free(want), free(got);
    free_model(&m);
}

TEST(a_prefill_longer_than_a_batch_goes_in_chunks_and_gives_the_logits_asked_for) {
    test_model m;
    CHECK_OK(make_model(GGML_Q8_0, 0, 5, &m, NULL, 0));
    const size_t n = KVC_LM_BATCH + 90;
    uint32_t *tokens = test_alloc(n * sizeof(uint32_t));
    tokens_of(tokens, n, 6);
    float *all = test_alloc(n * VOCAB * sizeof(float));
    CHECK(run(&m, KVC_MODE_Q8, tokens, n, 100, 0, all, NULL));
    kvc_model *cache = make_cache(KVC_MODE_Q8);
    float *last = test_alloc(120 * VOCAB * sizeof(float));
    CHECK_OK(kvc_lm_forward(m.lm, cache, tokens, n, last, 120, 0));
    CHECK(same_bits(last, all + (n - 120) * VOCAB, 120 * VOCAB)); /* rows from both chunks */
    CHECK(kvc_model_seq_len(cache) == n);
    kvc_model_free(cache);
    free(tokens), free(all), free(last);
    free_model(&m);
}

/* Three threads, every product on the pool however small (*min_work: the
 * pool's threshold before); 0, the case skipped, where this build runs no
 * pool threads of its own. */
static int three_threads(size_t *min_work) {
    if (kvc_set_threads(3) != KVC_OK) {
        test_skip("this build runs no pool threads of its own (wasm: tests/js/model.test.mjs compares thread counts)");
        return 0;
    }
    *min_work = kvc_pool_set_min_work(0);
    return 1;
}

/* Back to one thread and the pool's threshold. */
static void one_thread(size_t min_work) {
    kvc_pool_set_min_work(min_work);
    kvc_set_threads(1);
}

TEST(logits_do_not_depend_on_the_number_of_threads) {
    test_model m;
    CHECK_OK(make_model(GGML_Q8_0, 0, 7, &m, NULL, 0));
    enum { N = 70 };
    uint32_t tokens[N];
    tokens_of(tokens, N, 8);
    float *one = test_alloc(N * VOCAB * sizeof(float));
    float *many = test_alloc(N * VOCAB * sizeof(float));
    CHECK(run(&m, KVC_MODE_Q8, tokens, N, 9, KVC_LM_IMPORTANCE, one, NULL));
    size_t min_work;
    if (three_threads(&min_work)) {
        CHECK(run(&m, KVC_MODE_Q8, tokens, N, 9, KVC_LM_IMPORTANCE, many, NULL));
        one_thread(min_work);
        CHECK(same_bits(one, many, N * VOCAB));
    }
    free(one), free(many);
    free_model(&m);
}

TEST(a_profile_times_each_operation_of_the_passes_made_while_it_is_on) {
    test_model m;
    CHECK_OK(make_model(GGML_Q8_0, 0, 9, &m, NULL, 0));
    enum { N = 40 };
    uint32_t tokens[N];
    tokens_of(tokens, N, 10);
    float *logits = test_alloc(N * VOCAB * sizeof(float));
    double ms[KVC_PROFILE_OPS];
    CHECK(kvc_profile_start(NULL, KVC_PROFILE_OPS) == KVC_E_NULL_POINTER);
    CHECK(kvc_profile_start(ms, KVC_PROFILE_OPS - 1) == KVC_E_LENGTH);
    CHECK_OK(kvc_profile_start(ms, KVC_PROFILE_OPS));
    CHECK(run(&m, KVC_MODE_F32, tokens, N, 8, KVC_LM_IMPORTANCE, logits, NULL)); /* chunks, then steps */
    CHECK(run(&m, KVC_MODE_F32, tokens, 4, 1, KVC_LM_IMPORTANCE, logits, NULL));
    kvc_profile_stop();
    /* What every block of this model does takes time; it has no recurrent layer. */
    const kvc_profile_op done[] = {KVC_PROFILE_EMBED, KVC_PROFILE_NORM, KVC_PROFILE_QUANTIZE, KVC_PROFILE_QKV,
                                   KVC_PROFILE_ROPE, KVC_PROFILE_APPEND, KVC_PROFILE_ATTEND, KVC_PROFILE_WO,
                                   KVC_PROFILE_GATE_UP, KVC_PROFILE_ACTIVATION, KVC_PROFILE_DOWN,
                                   KVC_PROFILE_RESIDUAL, KVC_PROFILE_LOGITS};
    for (size_t i = 0; i < sizeof done / sizeof done[0]; i++) CHECK(ms[done[i]] > 0.0);
    CHECK(ms[KVC_PROFILE_RECURRENT] == 0.0);
    for (size_t op = 0; op < KVC_PROFILE_OPS; op++) CHECK(ms[op] >= 0.0);
    /* Stopped: the totals stay as they were. */
    double kept[KVC_PROFILE_OPS];
    memcpy(kept, ms, sizeof ms);
    CHECK(run(&m, KVC_MODE_F32, tokens, N, N, 0, logits, NULL));
    CHECK(memcmp(kept, ms, sizeof ms) == 0);
    free(logits);
    free_model(&m);
}

TEST(a_verify_kept_or_rejected_leaves_the_cache_and_imp_as_plain_decoding) {
    test_model m;
    CHECK_OK(make_model(GGML_Q8_0, 0, 9, &m, NULL, 0));
    enum { PROMPT = 80, DRAFTS = 5 };
    uint32_t tokens[PROMPT + DRAFTS];
    tokens_of(tokens, PROMPT + DRAFTS, 10);
    for (size_t keep = 0; keep <= DRAFTS; keep++) {
        kvc_model *plain = make_cache(KVC_MODE_Q8);
        kvc_model *spec_cache = make_cache(KVC_MODE_Q8);
        float *expected = test_alloc((PROMPT + keep + 1) * VOCAB * sizeof(float));
        float verified[DRAFTS * VOCAB];
        CHECK_OK(kvc_lm_forward(m.lm, plain, tokens, PROMPT, expected, PROMPT, KVC_LM_IMPORTANCE));
        for (size_t i = 0; i < keep; i++) {
            CHECK_OK(kvc_lm_forward(m.lm, plain, tokens + PROMPT + i, 1, expected + (PROMPT + i) * VOCAB, 1, KVC_LM_IMPORTANCE));
        }
        CHECK_OK(kvc_lm_forward(m.lm, spec_cache, tokens, PROMPT, NULL, 0, KVC_LM_IMPORTANCE));
        CHECK_OK(kvc_lm_forward(m.lm, spec_cache, tokens + PROMPT, DRAFTS, verified, DRAFTS,
                                KVC_LM_IMPORTANCE | KVC_LM_VERIFY));
        CHECK(kvc_model_verifying(spec_cache));
        CHECK(same_bits(verified, expected + PROMPT * VOCAB, keep * VOCAB));
        CHECK_OK(kvc_lm_keep(m.lm, spec_cache, keep));
        CHECK(!kvc_model_verifying(spec_cache));
        CHECK(test_models_equal(plain, spec_cache));
        kvc_model_free(plain);
        kvc_model_free(spec_cache);
        free(expected);
    }
    free_model(&m);
}

TEST(a_verify_takes_more_drafts_one_call_at_a_time_as_a_draft_model_decodes_them) {
    test_model m;
    CHECK_OK(make_model(GGML_Q8_0, 0, 11, &m, NULL, 0));
    enum { PROMPT = 70, DRAFTS = 6 };
    uint32_t tokens[PROMPT + DRAFTS];
    tokens_of(tokens, PROMPT + DRAFTS, 12);
    for (size_t keep = 0; keep <= DRAFTS; keep += 3) {
        kvc_model *plain = make_cache(KVC_MODE_F32), *drafted = make_cache(KVC_MODE_F32);
        float one[VOCAB], expected[VOCAB];
        CHECK_OK(kvc_lm_forward(m.lm, plain, tokens, PROMPT + keep, NULL, 0, 0));
        CHECK_OK(kvc_lm_forward(m.lm, drafted, tokens, PROMPT, NULL, 0, 0));
        /* Two drafts, then one at a time: each call's logits are plain decoding's. */
        CHECK_OK(kvc_lm_forward(m.lm, drafted, tokens + PROMPT, 2, NULL, 0, KVC_LM_VERIFY));
        for (size_t i = 2; i < DRAFTS; i++) {
            CHECK_OK(kvc_lm_forward(m.lm, drafted, tokens + PROMPT + i, 1, one, 1, KVC_LM_VERIFY));
            kvc_model *check = make_cache(KVC_MODE_F32);
            CHECK_OK(kvc_lm_forward(m.lm, check, tokens, PROMPT + i + 1, expected, 1, 0));
            CHECK(same_bits(one, expected, VOCAB));
            kvc_model_free(check);
        }
        CHECK(kvc_layer_draft_len(kvc_model_layer(drafted, 0)) == DRAFTS);
        /* Importance is held for one verify call only; a plain pass waits for keep. */
        CHECK_STATUS(kvc_lm_forward(m.lm, drafted, tokens, 1, NULL, 0, KVC_LM_VERIFY | KVC_LM_IMPORTANCE), KVC_E_VERIFYING);
        CHECK_STATUS(kvc_lm_forward(m.lm, drafted, tokens, 1, NULL, 0, 0), KVC_E_VERIFYING);
        CHECK_OK(kvc_lm_keep(m.lm, drafted, keep));
        CHECK(test_models_equal(plain, drafted));
        kvc_model_free(plain);
        kvc_model_free(drafted);
    }
    free_model(&m);
}

TEST(forward_refuses_bad_arguments_and_changes_nothing) {
    test_model m;
    CHECK_OK(make_model(GGML_Q8_0, 0, 11, &m, NULL, 0));
    kvc_model *cache = make_cache(KVC_MODE_Q8);
    uint32_t tokens[4] = {1, 2, 3, 4};
    float logits[4 * VOCAB];
    CHECK_OK(kvc_lm_forward(m.lm, cache, tokens, 4, logits, 1, 0));
    const uint32_t bad[2] = {5, VOCAB};
    CHECK_MODEL_REFUSED(cache, kvc_lm_forward(m.lm, cache, bad, 2, logits, 1, 0), KVC_E_TOKEN);
    CHECK_MODEL_REFUSED(cache, kvc_lm_forward(m.lm, cache, tokens, 0, logits, 0, 0), KVC_E_LENGTH);
    CHECK_MODEL_REFUSED(cache, kvc_lm_forward(m.lm, cache, tokens, 2, logits, 3, 0), KVC_E_LENGTH);
    CHECK_MODEL_REFUSED(cache, kvc_lm_forward(m.lm, cache, tokens, 2, NULL, 1, 0), KVC_E_NULL_POINTER);
    CHECK_MODEL_REFUSED(cache, kvc_lm_forward(m.lm, cache, tokens, 2, logits, 1, 8), KVC_E_LENGTH);
    CHECK_MODEL_REFUSED(cache, kvc_lm_keep(m.lm, cache, 1), KVC_E_NOT_VERIFYING);
    /* A model without per-layer embeddings keeps no table outside, and takes no rows for one. */
    const uint8_t rows[8] = {0};
    CHECK_MODEL_REFUSED(cache, kvc_lm_forward_rows(m.lm, cache, tokens, 2, rows, logits, 1, 0), KVC_E_KIND);
    CHECK(kvc_lm_keep_per_layer_outside(m.lm) == KVC_E_KIND && kvc_lm_keep_per_layer_outside(NULL) == KVC_E_NULL_POINTER);
    uint64_t offset = 1, bytes = 1;
    kvc_lm_per_layer_outside_range(m.lm, &offset, &bytes);
    CHECK(offset == 0 && bytes == 0 && kvc_lm_per_layer_row_bytes(m.lm) == 0 && kvc_lm_per_layer_dim(m.lm) == 0);
    /* A cache of another geometry, and one whose layers stand apart. */
    kvc_layer *other_layers[LAYERS];
    for (size_t l = 0; l < LAYERS; l++) CHECK_OK(kvc_layer_create(KV_HEADS, HEAD_DIM * 2, KVC_MODE_Q8, &other_layers[l]));
    kvc_model *other;
    CHECK_OK(kvc_model_create(other_layers, LAYERS, &other));
    CHECK_MODEL_REFUSED(other, kvc_lm_forward(m.lm, other, tokens, 2, logits, 1, 0), KVC_E_LAYERS);
    float kv[KV_HEADS * HEAD_DIM] = {0};
    CHECK_OK(kvc_layer_append(kvc_model_layer(cache, 0), kv, kv, NULL));
    CHECK_MODEL_REFUSED(cache, kvc_lm_forward(m.lm, cache, tokens, 2, logits, 1, 0), KVC_E_LAYERS);
    kvc_model_free(other);
    kvc_model_free(cache);
    free_model(&m);
}

static struct {
    test_model *m;
    kvc_model *cache;
    const uint32_t *tokens;
    size_t n;
    uint32_t flags;
    float *logits;
} oom;

static kvc_status forward_call(void *ctx) {
    (void)ctx;
    return kvc_lm_forward(oom.m->lm, oom.cache, oom.tokens, oom.n, oom.logits, 1, oom.flags);
}

TEST(a_forward_pass_out_of_memory_leaves_the_cache_as_it_was) {
    test_model m;
    CHECK_OK(make_model(GGML_Q8_0, 0, 13, &m, NULL, 0));
    enum { PROMPT = 70, N = 9 };
    uint32_t tokens[PROMPT + N];
    tokens_of(tokens, PROMPT + N, 14);
    float logits[VOCAB];
    for (int verify = 0; verify < 2; verify++) {
        kvc_model *cache = make_cache(KVC_MODE_Q8);
        CHECK_OK(kvc_lm_forward(m.lm, cache, tokens, PROMPT, logits, 1, 0));
        CHECK_OK(test_fault_install());
        long calls = 0;
        for (long fail_at = 1;; fail_at++) {
            test_state **before = test_model_state_take(cache);
            oom.m = &m, oom.cache = cache, oom.tokens = tokens + PROMPT, oom.n = N, oom.logits = logits;
            oom.flags = verify ? KVC_LM_VERIFY : 0;
            test_fault_arm(fail_at, 0);
            const kvc_status status = forward_call(NULL);
            test_fault_arm(0, 0);
            const int same = status == KVC_OK || test_model_state_matches(cache, before);
            test_model_state_free(before);
            CHECK(status == KVC_OK || status == KVC_E_NOMEM);
            CHECK(same);
            if (status == KVC_OK) {
                calls = fail_at;
                break;
            }
        }
        CHECK(calls > 1); /* some allocation was failed on the way */
        test_fault_remove();
        kvc_model_free(cache);
    }
    free_model(&m);
}

/* ---- weights packed for the kernels ---- */

TEST(packed_weights_give_the_logits_and_digest_of_the_files_layout) {
    enum { N = 23 };
    uint32_t tokens[N];
    tokens_of(tokens, N, 16);
    float *plain = test_alloc(N * VOCAB * sizeof(float)), *packed = test_alloc(N * VOCAB * sizeof(float));
    for (int tied = 0; tied < 2; tied++) {
        test_model file, m;
        CHECK_OK(make_model(GGML_Q8_0, tied, 15, &file, NULL, 0));
        CHECK_OK(make_model(GGML_Q8_0, tied, 15, &m, NULL, 0));
        const size_t bytes = kvc_lm_weights_bytes(m.lm);
        const uint64_t whole = kvc_lm_digest(m.lm, 0, bytes, 3), part = kvc_lm_digest(m.lm, 7, bytes - 20, 3);
        CHECK(whole == kvc_digest(kvc_lm_weights(m.lm), bytes, 3));
        CHECK_OK(kvc_lm_pack_weights(m.lm));
        CHECK_OK(kvc_lm_pack_weights(m.lm)); /* a second call does nothing */
        CHECK(memcmp(kvc_lm_weights(m.lm), kvc_lm_weights(file.lm), bytes) != 0);
        CHECK(kvc_lm_digest(m.lm, 0, bytes, 3) == whole);
        CHECK(kvc_lm_digest(m.lm, 7, bytes - 20, 3) == part);
        for (size_t offset = 0; offset < bytes; offset += bytes / 7 + 13) {
            const size_t n = (bytes - offset) / 3 + 1;
            CHECK(kvc_lm_digest(m.lm, offset, n, 5) == kvc_digest(kvc_lm_weights(file.lm) + offset, n, 5));
        }
        CHECK(kvc_lm_digest(m.lm, bytes, 1, 0) == 0); /* past the region */
        CHECK(run(&file, KVC_MODE_F32, tokens, N, N, 0, plain, NULL));
        CHECK(run(&m, KVC_MODE_F32, tokens, N, N, 0, packed, NULL));
        CHECK(same_bits(plain, packed, N * VOCAB));
        CHECK(run(&m, KVC_MODE_F32, tokens, N, 1, 0, packed, NULL));
        CHECK(same_bits(plain, packed, N * VOCAB));
        free_model(&file), free_model(&m);
    }
    CHECK_STATUS(kvc_lm_pack_weights(NULL), KVC_E_NULL_POINTER);
    free(plain), free(packed);
}

TEST(packing_out_of_memory_leaves_the_files_layout_to_run) {
    test_model file, m;
    CHECK_OK(make_model(GGML_Q8_0, 1, 17, &file, NULL, 0));
    CHECK_OK(make_model(GGML_Q8_0, 1, 17, &m, NULL, 0));
    const size_t bytes = kvc_lm_weights_bytes(m.lm);
    CHECK_OK(test_fault_install());
    test_fault_arm(1, 0);
    CHECK_STATUS(kvc_lm_pack_weights(m.lm), KVC_E_NOMEM);
    test_fault_arm(0, 0);
    test_fault_remove();
    CHECK(memcmp(kvc_lm_weights(m.lm), kvc_lm_weights(file.lm), bytes) == 0);
    enum { N = 5 };
    uint32_t tokens[N];
    tokens_of(tokens, N, 18);
    float plain[N * VOCAB], after[N * VOCAB];
    CHECK(run(&file, KVC_MODE_F32, tokens, N, N, 0, plain, NULL));
    CHECK(run(&m, KVC_MODE_F32, tokens, N, N, 0, after, NULL));
    CHECK(same_bits(plain, after, N * VOCAB));
    CHECK_OK(kvc_lm_pack_weights(m.lm)); /* it can be tried again */
    CHECK(run(&m, KVC_MODE_F32, tokens, N, N, 0, after, NULL));
    CHECK(same_bits(plain, after, N * VOCAB));
    free_model(&file), free_model(&m);
}

/* ---- embeddings ---- */

/* A model of the small geometry whose file says `pooling` and (bidirectional)
 * that its attention is not causal, with a rank head when asked. */
static kvc_status make_embedding_model(const char *pooling, int bidirectional, int rank_head, test_model *out) {
    const gb_llama_spec saved = spec;
    spec.pooling = pooling, spec.bidirectional = bidirectional;
    gb_llama m;
    gb_llama_tensors(&m, GGML_Q8_0, 1);
    if (rank_head) gb_llama_rank_head(&m);
    out->file = gb_llama_build(&spec, &m);
    spec = saved;
    out->lm = NULL;
    kvc_gguf *gguf;
    kvc_status status = kvc_gguf_parse(out->file.bytes, out->file.len, &gguf, NULL);
    if (status == KVC_OK) status = kvc_lm_create(gguf, &out->lm, NULL, 0);
    if (status == KVC_OK) status = kvc_lm_alloc_weights(out->lm);
    if (status == KVC_OK) {
        test_rng rng = test_rng_new(21);
        for (size_t t = 0; t < kvc_gguf_tensor_count(gguf); t++) fill_tensor(kvc_lm_weights(out->lm), gguf, t, &rng);
    }
    if (gguf) kvc_gguf_free(gguf);
    return status;
}

/* Three texts of 1, 17 and 40 tokens end to end. */
enum { TEXTS = 3, TEXT_TOKENS = 58 };
static const uint32_t text_lengths[TEXTS] = {1, 17, 40};

TEST(an_embedding_model_says_its_pooling_direction_and_width) {
    test_model m;
    CHECK_OK(make_embedding_model("mean", 1, 0, &m));
    CHECK(kvc_lm_pooling(m.lm) == KVC_POOLING_MEAN && kvc_lm_causal(m.lm) == 0);
    CHECK(kvc_lm_embedding_dim(m.lm) == DIM && kvc_lm_rank_outputs(m.lm) == 0);
    free_model(&m);
    CHECK_OK(make_embedding_model("rank", 0, 1, &m));
    CHECK(kvc_lm_pooling(m.lm) == KVC_POOLING_RANK && kvc_lm_causal(m.lm) == 1 && kvc_lm_rank_outputs(m.lm) == 1);
    free_model(&m);
    CHECK_OK(make_model(GGML_Q8_0, 0, 7, &m, NULL, 0)); /* a model that generates */
    CHECK(kvc_lm_pooling(m.lm) == KVC_POOLING_NONE && kvc_lm_causal(m.lm) == 1);
    CHECK(kvc_lm_pooling(NULL) == KVC_POOLING_NONE && kvc_lm_embedding_dim(NULL) == 0);
    free_model(&m);
}

/* 1 if each text's vectors (pooling's) are the same bits embedded alone as
 * among the others. */
static int each_text_as_alone(test_model *m, const uint32_t *tokens, kvc_pooling pooling, size_t width) {
    const int per_token = pooling == KVC_POOLING_NONE;
    float *together = test_alloc(TEXT_TOKENS * width * sizeof(float)), *alone = test_alloc(TEXT_TOKENS * width * sizeof(float));
    int ok = kvc_lm_embed(m->lm, tokens, text_lengths, TEXTS, pooling, together) == KVC_OK;
    for (size_t j = 0, start = 0; j < TEXTS && ok; start += text_lengths[j++]) {
        ok = kvc_lm_embed(m->lm, tokens + start, &text_lengths[j], 1, pooling, alone) == KVC_OK &&
             same_bits(alone, together + (per_token ? start : j) * width, (per_token ? text_lengths[j] : 1) * width);
        if (!ok) printf("  pooling %d: text %zu differs\n", (int)pooling, j);
    }
    free(together), free(alone);
    return ok;
}

TEST(a_text_gets_the_same_embedding_alone_and_among_others_on_any_number_of_threads) {
    uint32_t tokens[TEXT_TOKENS];
    tokens_of(tokens, TEXT_TOKENS, 22);
    for (int bidirectional = 0; bidirectional < 2; bidirectional++) {
        test_model m;
        CHECK_OK(make_embedding_model("mean", bidirectional, 1, &m));
        for (int p = KVC_POOLING_NONE; p <= KVC_POOLING_RANK; p++)
            CHECK(each_text_as_alone(&m, tokens, (kvc_pooling)p, p == KVC_POOLING_RANK ? 1 : DIM));
        float *one = test_alloc(TEXT_TOKENS * DIM * sizeof(float)), *many = test_alloc(TEXT_TOKENS * DIM * sizeof(float));
        CHECK_OK(kvc_lm_embed(m.lm, tokens, text_lengths, TEXTS, KVC_POOLING_NONE, one));
        size_t min_work;
        if (three_threads(&min_work)) {
            CHECK_OK(kvc_lm_embed(m.lm, tokens, text_lengths, TEXTS, KVC_POOLING_NONE, many));
            one_thread(min_work);
            CHECK(same_bits(one, many, TEXT_TOKENS * DIM));
        }
        free(one), free(many);
        free_model(&m);
    }
}

TEST(a_causal_model_pools_what_its_tokens_saw_and_an_encoder_what_its_whole_text_says) {
    /* The first token's row and the text's last token change the first
     * token's row in an encoder alone; pooling reads the rows NONE gives. */
    uint32_t tokens[40], changed[40];
    const uint32_t n = 40;
    tokens_of(tokens, n, 23);
    memcpy(changed, tokens, sizeof tokens);
    changed[n - 1] = (tokens[n - 1] + 1) % VOCAB;
    float rows[40 * DIM], other[40 * DIM], pooled[3][DIM];
    for (int bidirectional = 0; bidirectional < 2; bidirectional++) {
        test_model m;
        CHECK_OK(make_embedding_model("mean", bidirectional, 0, &m));
        CHECK_OK(kvc_lm_embed(m.lm, tokens, &n, 1, KVC_POOLING_NONE, rows));
        CHECK_OK(kvc_lm_embed(m.lm, changed, &n, 1, KVC_POOLING_NONE, other));
        CHECK(same_bits(rows, other, DIM) == !bidirectional);
        CHECK_OK(kvc_lm_embed(m.lm, tokens, &n, 1, KVC_POOLING_MEAN, pooled[0]));
        CHECK_OK(kvc_lm_embed(m.lm, tokens, &n, 1, KVC_POOLING_CLS, pooled[1]));
        CHECK_OK(kvc_lm_embed(m.lm, tokens, &n, 1, KVC_POOLING_LAST, pooled[2]));
        CHECK(same_bits(pooled[1], rows, DIM) && same_bits(pooled[2], rows + (n - 1) * DIM, DIM));
        for (size_t c = 0; c < DIM; c++) {
            double sum = 0;
            for (size_t t = 0; t < n; t++) sum += rows[t * DIM + c];
            CHECK(fabs(pooled[0][c] - sum / n) <= 1e-6 * (1 + fabs(sum / n)));
        }
        free_model(&m);
    }
}

TEST(embed_refuses_bad_arguments_and_changes_nothing) {
    test_model m;
    CHECK_OK(make_embedding_model("mean", 1, 0, &m));
    uint32_t tokens[TEXT_TOKENS];
    tokens_of(tokens, TEXT_TOKENS, 24);
    float out[TEXT_TOKENS * DIM], before[TEXT_TOKENS * DIM];
    test_rng rng = test_rng_new(24);
    test_fill_normal(&rng, out, TEXT_TOKENS * DIM);
    memcpy(before, out, sizeof out);
    const uint32_t empty[2] = {3, 0}, too_long[1] = {CONTEXT + 1};
    CHECK_STATUS(kvc_lm_embed(m.lm, tokens, text_lengths, 0, KVC_POOLING_MEAN, out), KVC_E_LENGTH);
    CHECK_STATUS(kvc_lm_embed(m.lm, tokens, empty, 2, KVC_POOLING_MEAN, out), KVC_E_LENGTH);
    uint32_t *long_text = test_alloc((CONTEXT + 1) * sizeof(uint32_t));
    memset(long_text, 0, (CONTEXT + 1) * sizeof(uint32_t));
    CHECK_STATUS(kvc_lm_embed(m.lm, long_text, too_long, 1, KVC_POOLING_MEAN, out), KVC_E_LENGTH);
    free(long_text);
    tokens[5] = VOCAB;
    CHECK_STATUS(kvc_lm_embed(m.lm, tokens, text_lengths, TEXTS, KVC_POOLING_MEAN, out), KVC_E_TOKEN);
    tokens[5] = 0;
    CHECK_STATUS(kvc_lm_embed(m.lm, tokens, text_lengths, TEXTS, KVC_POOLING_RANK, out), KVC_E_KIND); /* no rank head */
    CHECK_STATUS(kvc_lm_embed(m.lm, tokens, text_lengths, TEXTS, (kvc_pooling)5, out), KVC_E_KIND);
    CHECK_STATUS(kvc_lm_embed(m.lm, NULL, text_lengths, TEXTS, KVC_POOLING_MEAN, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_lm_embed(m.lm, tokens, NULL, TEXTS, KVC_POOLING_MEAN, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_lm_embed(NULL, tokens, text_lengths, TEXTS, KVC_POOLING_MEAN, out), KVC_E_NULL_POINTER);
    CHECK(same_bits(out, before, TEXT_TOKENS * DIM));
    /* Out of memory at each allocation in turn: refused whole, out untouched. */
    CHECK_OK(test_fault_install());
    kvc_status status = KVC_E_NOMEM;
    long fail_at = 1;
    for (; status == KVC_E_NOMEM; fail_at++) {
        test_fault_arm(fail_at, 0);
        status = kvc_lm_embed(m.lm, tokens, text_lengths, TEXTS, KVC_POOLING_MEAN, out);
        test_fault_arm(0, 0);
        if (status == KVC_E_NOMEM) CHECK(same_bits(out, before, TEXT_TOKENS * DIM));
    }
    test_fault_remove();
    CHECK_OK(status);
    CHECK(fail_at > 2);
    free_model(&m);
}

RUN_TESTS(CASE(create_reads_the_shape_and_binds_every_tensor_of_the_file),
          CASE(alloc_weights_gives_a_region_of_more_than_2_gib_on_a_fresh_heap),
          CASE(alloc_weights_gives_a_region_of_more_than_2_gib_after_the_heap_refused_a_growth),
          CASE(create_refuses_what_it_cannot_run_and_says_what),
          CASE(rope_turns_the_first_rope_dims_channels_of_a_head_scaled_and_leaves_the_rest),
          CASE(gelu_is_the_tanh_form_at_the_input_rounded_to_f16_rounded_to_f16_and_exact_past_ten),
          CASE(tied_embeddings_are_read_as_the_output),
          CASE(a_token_gets_the_same_logits_alone_in_a_batch_and_in_chunks_in_every_mode),
          CASE(embeddings_in_place_of_tokens_give_the_logits_and_rows_of_the_tokens_they_embed),
          CASE(a_prefill_longer_than_a_batch_goes_in_chunks_and_gives_the_logits_asked_for),
          CASE(logits_do_not_depend_on_the_number_of_threads),
          CASE(a_profile_times_each_operation_of_the_passes_made_while_it_is_on),
          CASE(a_verify_kept_or_rejected_leaves_the_cache_and_imp_as_plain_decoding),
          CASE(a_verify_takes_more_drafts_one_call_at_a_time_as_a_draft_model_decodes_them),
          CASE(forward_refuses_bad_arguments_and_changes_nothing),
          CASE(a_forward_pass_out_of_memory_leaves_the_cache_as_it_was),
          CASE(packed_weights_give_the_logits_and_digest_of_the_files_layout),
          CASE(packing_out_of_memory_leaves_the_files_layout_to_run),
          CASE(an_embedding_model_says_its_pooling_direction_and_width),
          CASE(a_text_gets_the_same_embedding_alone_and_among_others_on_any_number_of_threads),
          CASE(a_causal_model_pools_what_its_tokens_saw_and_an_encoder_what_its_whole_text_says),
          CASE(embed_refuses_bad_arguments_and_changes_nothing))

// llama.cpp's mtmd on one prompt with images, for the bench
// (tests/runtimes/mtmd-builds.mjs builds it against each CPU build of
// llama.cpp that scripts/toolchain.mjs ensureMtmdBuilds makes):
//
//   mtmd-next CPU_BACKEND MODEL MMPROJ PROMPT THREADS FLASH REPEATS OUT IMAGE...
//
// CPU_BACKEND: the ggml CPU backend library to load (one build's); FLASH 1
// or 0: the encoder's flash attention (the language model runs without it,
// its cache f32, as tests/runtimes/llamacpp-native.mjs runs llama.cpp);
// each image chunk is encoded REPEATS times, the fastest timed.  Writes the
// next token's probabilities after the prompt (the softmax of its logits,
// n_vocab f32) to OUT and prints one JSON line: the build's CPU features,
// the prompt's tokens, and per image chunk its tokens, its encode ms and
// the ms its rows took the language model; prepareMs, mtmd_tokenize's
// (which preprocesses every image).  Errors: a line on stderr, exit 1.
#include "ggml-backend.h"
#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static void quiet(ggml_log_level, const char *, void *) {}

static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static int fail(const char *what) {
    fprintf(stderr, "mtmd-next: %s\n", what);
    return 1;
}

static void append(std::string &list, const char *format, double value) {
    char buf[64];
    snprintf(buf, sizeof buf, format, value);
    if (!list.empty()) list += ",";
    list += buf;
}

int main(int argc, char **argv) {
    if (argc < 10) {
        fprintf(stderr, "usage: mtmd-next CPU_BACKEND MODEL MMPROJ PROMPT THREADS FLASH REPEATS OUT IMAGE...\n");
        return 2;
    }
    const char *backend = argv[1], *model_path = argv[2], *projector_path = argv[3], *prompt = argv[4], *out_path = argv[8];
    const int threads = atoi(argv[5]), flash = atoi(argv[6]), repeats = atoi(argv[7]);
    if (threads < 1 || repeats < 1) return fail("THREADS and REPEATS are counts of at least 1");
    if (!getenv("MTMD_NEXT_LOG")) {
        llama_log_set(quiet, nullptr);
        mtmd_helper_log_set(quiet, nullptr);
    }
    if (!ggml_backend_load(backend)) return fail("the CPU backend did not load");
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) return fail("the model did not load");
    const int32_t batch = 8192;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = batch;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    llama_context *lctx = llama_init_from_model(model, cp);
    if (!lctx) return fail("the context did not start");

    mtmd_context_params mparams = mtmd_context_params_default();
    mparams.use_gpu = false;
    mparams.n_threads = threads;
    mparams.print_timings = false;
    mparams.warmup = false;
    mparams.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    mtmd_context *ctx = mtmd_init_from_file(projector_path, model, mparams);
    if (!ctx) return fail("the projector did not load");

    std::vector<const mtmd_bitmap *> bitmaps;
    for (int i = 9; i < argc; i++) {
        mtmd_helper_bitmap_wrapper image = mtmd_helper_bitmap_init_from_file(ctx, argv[i], false, mtmd_helper_init_opt_default());
        if (!image.bitmap) return fail("an image did not load");
        bitmaps.push_back(image.bitmap);
    }
    mtmd_input_text text = {prompt, strlen(prompt), true, true};
    mtmd_input_chunks *chunks = mtmd_input_chunks_init();
    const double prepare_start = now_ms();
    if (mtmd_tokenize(ctx, chunks, &text, bitmaps.data(), bitmaps.size()) != 0) return fail("mtmd_tokenize failed");
    const double prepare_ms = now_ms() - prepare_start;

    llama_pos n_past = 0;
    size_t tokens = 0;
    std::string image_tokens, encode_ms, decode_ms;
    const size_t n = mtmd_input_chunks_size(chunks);
    for (size_t i = 0; i < n; i++) {
        const mtmd_input_chunk *chunk = mtmd_input_chunks_get(chunks, i);
        tokens += mtmd_input_chunk_get_n_tokens(chunk);
        if (mtmd_input_chunk_get_type(chunk) != MTMD_INPUT_CHUNK_TYPE_IMAGE) {
            if (mtmd_helper_eval_chunk_single(ctx, lctx, chunk, n_past, 0, batch, i + 1 == n, &n_past) != 0) return fail("a text chunk failed");
            continue;
        }
        double fastest = INFINITY;
        for (int r = 0; r < repeats; r++) {
            const double start = now_ms();
            if (mtmd_encode_chunk(ctx, chunk) != 0) return fail("an image chunk did not encode");
            fastest = std::fmin(fastest, now_ms() - start);
        }
        const double start = now_ms();
        if (mtmd_helper_decode_image_chunk(ctx, lctx, chunk, mtmd_get_output_embd(ctx), n_past, 0, batch, &n_past, nullptr, nullptr) != 0)
            return fail("an image chunk's rows failed");
        append(image_tokens, "%.0f", (double)mtmd_input_chunk_get_n_tokens(chunk));
        append(encode_ms, "%.1f", fastest);
        append(decode_ms, "%.1f", now_ms() - start);
    }

    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    const float *logits = llama_get_logits_ith(lctx, -1);
    if (!logits) return fail("no logits");
    float max = -INFINITY;
    for (int i = 0; i < n_vocab; i++) max = std::fmax(max, logits[i]);
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += std::exp((double)logits[i] - max);
    std::vector<float> probs(n_vocab);
    for (int i = 0; i < n_vocab; i++) probs[i] = (float)(std::exp((double)logits[i] - max) / sum);
    FILE *out = fopen(out_path, "wb");
    if (!out) return fail("OUT cannot be written");
    const bool written = fwrite(probs.data(), sizeof(float), probs.size(), out) == probs.size();
    if (fclose(out) != 0 || !written) return fail("OUT was not written whole");

    printf("{\"system\":\"%s\",\"tokens\":%zu,\"prepareMs\":%.1f,\"imageTokens\":[%s],\"encodeMs\":[%s],\"decodeMs\":[%s]}\n",
           llama_print_system_info(), tokens, prepare_ms, image_tokens.c_str(), encode_ms.c_str(), decode_ms.c_str());
    mtmd_input_chunks_free(chunks);
    for (const mtmd_bitmap *bitmap : bitmaps) mtmd_bitmap_free(const_cast<mtmd_bitmap *>(bitmap));
    mtmd_free(ctx);
    llama_free(lctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

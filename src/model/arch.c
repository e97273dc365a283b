/*
 * arch.c -- the architectures the runner reads, one descriptor each (as
 * llama.cpp's llama-arch.cpp): what tells its block from llama's.  The
 * tensor names are GGUF's and the same for all of them (lm.c); an
 * architecture adds tensors (biases, q/k norms) and says how RoPE pairs
 * channels (llama.cpp's LLAMA_ROPE_TYPE_NORM for llama, NEOX for qwen2/3).
 */
#include <string.h>

#include "model.h"

static const kvc_arch archs[] = {
    {"llama", KVC_ROPE_ADJACENT, 0},
    {"qwen2", KVC_ROPE_HALVES, KVC_ARCH_QKV_BIAS},
    {"qwen3", KVC_ROPE_HALVES, KVC_ARCH_QK_NORM},
};

const kvc_arch *kvc_arch_of(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        if (strlen(archs[i].name) == len && memcmp(archs[i].name, name, len) == 0) return &archs[i];
    }
    return NULL;
}

const kvc_arch *kvc_archs(size_t *count) {
    *count = sizeof archs / sizeof archs[0];
    return archs;
}

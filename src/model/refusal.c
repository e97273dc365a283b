/*
 * refusal.c -- what the readers of a model file (lm.c, vision.c) say when
 * they refuse one: a sentence for the caller, cut to its buffer, and the
 * ones for a tensor of a type the weight table does not know and for a
 * block count the file cannot hold.
 */
#include <stdarg.h>
#include <stdio.h>

#include "model.h"

kvc_status kvc_refuse(const kvc_says *says, kvc_status status, const char *format, ...) {
    if (says->message && says->message_len) {
        va_list args;
        va_start(args, format);
        vsnprintf(says->message, says->message_len, format, args);
        va_end(args);
    }
    return status;
}

kvc_status kvc_refuse_block_count(const kvc_says *says, const kvc_gguf *gguf, const char *key, size_t blocks) {
    const size_t tensors = kvc_gguf_tensor_count(gguf);
    if (blocks <= tensors / 6) return KVC_OK;
    return kvc_refuse(says, KVC_E_MODEL_FILE, "metadata %s is %zu, and the file holds %zu tensors: not enough for them", key,
                      blocks, tensors);
}

const kvc_weight_type *kvc_tensor_type(const kvc_says *says, const char *name, uint32_t id) {
    const kvc_weight_type *type = kvc_weight_type_of(id);
    if (type) return type;
    char list[256];
    kvc_weight_type_list(list, sizeof list);
    const char *type_name = kvc_ggml_type_name(id);
    if (type_name) kvc_refuse(says, KVC_E_WEIGHT_TYPE, "tensor %s has type %s; this runner reads %s", name, type_name, list);
    else kvc_refuse(says, KVC_E_WEIGHT_TYPE, "tensor %s has type %u, which ggml does not define; this runner reads %s", name, id, list);
    return NULL;
}

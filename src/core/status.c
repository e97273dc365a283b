/* status.c -- status names and messages, the names of modes and components,
 * the header's constants by index, and build facts. */
#include "internal.h"

/* Every mode's name, in kvc_mode order, separated by SEP. */
#define MODE_NAMES(NAME, SEP)                                                                    \
    NAME("f32") SEP NAME("q8") SEP NAME("q8k") SEP NAME("q8v") SEP NAME("q4") SEP NAME("q4k")    \
        SEP NAME("q4v") SEP NAME("q8k+q4v") SEP NAME("q4k+q8v")
#define ITSELF(x) x
#define COMMA ,

static const char *const mode_names[] = {MODE_NAMES(ITSELF, COMMA)};
_Static_assert(sizeof mode_names / sizeof mode_names[0] == KVC_MODE_COUNT, "a name for every kvc_mode");

/* Every status: its enumerator and its message. */
#define STATUSES(X)                                                                                                            \
    X(KVC_OK, "ok")                                                                                                            \
    X(KVC_E_NULL_POINTER, "a required pointer is NULL")                                                                        \
    X(KVC_E_MODE, "mode is not one of " MODE_NAMES(ITSELF, ", "))                                                              \
    X(KVC_E_NUM_KV_HEADS, "num_kv_heads is 0 or above the maximum")                                                            \
    X(KVC_E_HEAD_DIM, "head_dim is 0 or above the maximum")                                                                    \
    X(KVC_E_KV_HEAD, "kv_head is not below num_kv_heads")                                                                      \
    X(KVC_E_LENGTH, "a buffer length does not match the call")                                                                 \
    X(KVC_E_NONFINITE_KEY, "a key is NaN or infinite")                                                                         \
    X(KVC_E_NONFINITE_VALUE, "a value is NaN or infinite")                                                                     \
    X(KVC_E_NONFINITE_QUERY, "a query element is NaN or infinite")                                                             \
    X(KVC_E_PROBS, "a probability is negative, NaN or infinite")                                                               \
    X(KVC_E_TOO_LONG, "seq_len would exceed the maximum number of positions")                                                  \
    X(KVC_E_NOMEM, "out of memory")                                                                                            \
    X(KVC_E_KIND, "the call is not for this kind of layer (rows or a recurrent state)")                                                   \
    X(KVC_E_VERIFYING, "not allowed during a speculative verify")                                                              \
    X(KVC_E_NOT_VERIFYING, "no speculative verify has begun")                                                                  \
    X(KVC_E_ACCEPT, "accept count exceeds the draft positions, or layers disagree on them")                                    \
    X(KVC_E_NUM_HEADS, "num_heads is 0 or above the maximum")                                                                  \
    X(KVC_E_NUM_FEATURES, "num_features is 0, above the maximum, or odd for phases")                                           \
    X(KVC_E_VALUE_DIM, "value_dim is 0 or above the maximum")                                                                  \
    X(KVC_E_PHASE_MASS, "phase_mass is negative, NaN or infinite")                                                             \
    X(KVC_E_NONFINITE_DECAY, "a decay is NaN or infinite")                                                                     \
    X(KVC_E_LAYERS, "layers are missing, repeated, in another model, not aligned, or shared from no earlier layer of rows")                                           \
    X(KVC_E_SNAPSHOT_MAGIC, "not a snapshot of this kind (wrong magic bytes)")                                                 \
    X(KVC_E_SNAPSHOT_VERSION, "a snapshot format version this library does not read")                                          \
    X(KVC_E_SNAPSHOT_TRUNCATED, "the snapshot is truncated")                                                                   \
    X(KVC_E_SNAPSHOT_CHECKSUM, "the snapshot's checksum does not match: it was changed")                                       \
    X(KVC_E_SNAPSHOT_CORRUPT, "the snapshot holds counts or values no cache can hold")                                         \
    X(KVC_E_SNAPSHOT_TOO_LARGE, "the snapshot's geometry is larger than its bytes could carry")                                \
    X(KVC_E_BUDGET, "budget is 0 or smaller than sinks + recent")                                                              \
    X(KVC_E_THREADS, "threads could not be started, or their count is out of range")                                           \
    X(KVC_E_PREFIX, "the cache does not fit the prefix cache (other geometry, mode or residual window, or evicted positions)") \
    X(KVC_E_RESIDUAL, "residual rows out of range, or set on a layer that holds positions")                                    \
    X(KVC_E_GGUF_MAGIC, "not a GGUF file (wrong magic bytes)")                                                                 \
    X(KVC_E_GGUF_VERSION, "a GGUF version this library does not read (not 1 to 3, or big-endian)")                             \
    X(KVC_E_GGUF_TRUNCATED, "the GGUF header is truncated")                                                                    \
    X(KVC_E_GGUF_CORRUPT, "the GGUF header holds fields no valid file has")                                                    \
    X(KVC_E_GGUF_TOO_LARGE, "the GGUF header's counts or sizes exceed the reader's limits")                                    \
    X(KVC_E_GGUF_INDEX, "no such GGUF metadata entry, value, element or tensor")                                               \
    X(KVC_E_GGUF_TYPE, "the GGUF value is not of the type read (or out of its range)")                                         \
    X(KVC_E_WEIGHT_TYPE, "a tensor type this library does not convert")                                                        \
    X(KVC_E_ARCH, "the model's architecture is not one this runner reads")                                                     \
    X(KVC_E_MODEL_FILE, "the model file's metadata or tensors are missing or unusable")                                        \
    X(KVC_E_TOKEN, "a token id is not below the vocabulary's size")                                                            \
    X(KVC_E_WINDOW, "a window out of range, or a truncation past the rows a window layer still holds")                        \
    X(KVC_E_CONV, "a convolution's channels or taps, or a delta rule's state, out of range")                                    \
    X(KVC_E_NONFINITE_INPUT, "a recurrent step's input, weight or gate is NaN or infinite")

const char *kvc_status_name(kvc_status status) {
    switch (status) {
#define MESSAGE(code, message) \
    case code: return message;
        STATUSES(MESSAGE)
#undef MESSAGE
    }
    return "unknown status";
}

const char *kvc_status_symbol(kvc_status status) {
    switch (status) {
#define SYMBOL(code, message) \
    case code: return #code;
        STATUSES(SYMBOL)
#undef SYMBOL
    }
    return NULL;
}

const char *kvc_mode_name(kvc_mode mode) {
    return (unsigned)mode < KVC_MODE_COUNT ? mode_names[mode] : NULL;
}

const char *kvc_component_name(kvc_component component) {
    const kvc_component_traits *traits = kvc_component_traits_of(component);
    return traits ? traits->name : NULL;
}

#define CONSTANT(macro) {#macro, macro}
static const struct {
    const char *name;
    uint32_t value;
} constants[] = {
    CONSTANT(KVC_Q8_WINDOW),        CONSTANT(KVC_MAX_KV_HEADS),         CONSTANT(KVC_MAX_HEAD_DIM),
    CONSTANT(KVC_MAX_POSITIONS),    CONSTANT(KVC_MAX_THREADS),          CONSTANT(KVC_MODE_COUNT),
    CONSTANT(KVC_Q4_RESIDUAL_ROWS), CONSTANT(KVC_Q4_MAX_RESIDUAL_ROWS), CONSTANT(KVC_Q4_ROLLBACK_ROWS),
    CONSTANT(KVC_KIND_LINEAR),      CONSTANT(KVC_KIND_WINDOW),          CONSTANT(KVC_LM_IMPORTANCE),        CONSTANT(KVC_LM_VERIFY),
    CONSTANT(KVC_GGUF_UINT8),       CONSTANT(KVC_GGUF_INT8),            CONSTANT(KVC_GGUF_UINT16),
    CONSTANT(KVC_GGUF_INT16),       CONSTANT(KVC_GGUF_UINT32),          CONSTANT(KVC_GGUF_INT32),
    CONSTANT(KVC_GGUF_FLOAT32),     CONSTANT(KVC_GGUF_BOOL),            CONSTANT(KVC_GGUF_STRING),
    CONSTANT(KVC_GGUF_ARRAY),       CONSTANT(KVC_GGUF_UINT64),          CONSTANT(KVC_GGUF_INT64),
    CONSTANT(KVC_GGUF_FLOAT64),     CONSTANT(KVC_LM_BATCH),             CONSTANT(KVC_KIND_CONV),
    CONSTANT(KVC_KIND_DELTA),       CONSTANT(KVC_MAX_CHANNELS),         CONSTANT(KVC_MAX_CONV_KERNEL),
    CONSTANT(KVC_MAX_STEP_TOKENS),  CONSTANT(KVC_KIND_SHARED),          CONSTANT(KVC_LM_SPAN),
    CONSTANT(KVC_KIND_MAMBA2),
    CONSTANT(KVC_KIND_NONE),
    CONSTANT(KVC_KIND_ATTN_MAMBA2),
    CONSTANT(KVC_PROFILE_EMBED),
    CONSTANT(KVC_PROFILE_NORM),
    CONSTANT(KVC_PROFILE_QUANTIZE),
    CONSTANT(KVC_PROFILE_QKV),
    CONSTANT(KVC_PROFILE_ROPE),
    CONSTANT(KVC_PROFILE_APPEND),
    CONSTANT(KVC_PROFILE_ATTEND),
    CONSTANT(KVC_PROFILE_WO),
    CONSTANT(KVC_PROFILE_RECURRENT),
    CONSTANT(KVC_PROFILE_GATE_UP),
    CONSTANT(KVC_PROFILE_ACTIVATION),
    CONSTANT(KVC_PROFILE_DOWN),
    CONSTANT(KVC_PROFILE_RESIDUAL),
    CONSTANT(KVC_PROFILE_LOGITS),
    CONSTANT(KVC_PROFILE_POOL_WAIT),
    CONSTANT(KVC_PROFILE_OPS),
};
#define CONSTANT_COUNT (sizeof constants / sizeof constants[0])

const char *kvc_constant_name(size_t index) {
    return index < CONSTANT_COUNT ? constants[index].name : NULL;
}

uint32_t kvc_constant_value(size_t index) {
    return index < CONSTANT_COUNT ? constants[index].value : 0;
}

const char *kvc_version(void) {
    return KVC_VERSION_STRING;
}

const char *kvc_kernel_isa(void) {
    return kvc_kernels_active()->isa;
}

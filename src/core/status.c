/* status.c -- status names and build facts. */
#include "internal.h"

const char *kvc_status_name(kvc_status status) {
    switch (status) {
    case KVC_OK: return "ok";
    case KVC_E_NULL_POINTER: return "a required pointer is NULL";
    case KVC_E_MODE: return "mode is not a kvc_mode";
    case KVC_E_NUM_KV_HEADS: return "num_kv_heads is 0 or above the maximum";
    case KVC_E_HEAD_DIM: return "head_dim is 0 or above the maximum";
    case KVC_E_KV_HEAD: return "kv_head is not below num_kv_heads";
    case KVC_E_LENGTH: return "a buffer length does not match the call";
    case KVC_E_NONFINITE_KEY: return "a key is NaN or infinite";
    case KVC_E_NONFINITE_VALUE: return "a value is NaN or infinite";
    case KVC_E_NONFINITE_QUERY: return "a query element is NaN or infinite";
    case KVC_E_PROBS: return "a probability is negative, NaN or infinite";
    case KVC_E_TOO_LONG: return "seq_len would exceed the maximum number of positions";
    case KVC_E_NOMEM: return "out of memory";
    case KVC_E_KIND: return "the call is not for this kind of layer (full or linear)";
    case KVC_E_VERIFYING: return "not allowed during a speculative verify";
    case KVC_E_NOT_VERIFYING: return "no speculative verify has begun";
    case KVC_E_ACCEPT: return "accept count exceeds the draft positions, or layers disagree on them";
    case KVC_E_NUM_HEADS: return "num_heads is 0 or above the maximum";
    case KVC_E_NUM_FEATURES: return "num_features is 0, above the maximum, or odd for phases";
    case KVC_E_VALUE_DIM: return "value_dim is 0 or above the maximum";
    case KVC_E_PHASE_MASS: return "phase_mass is negative, NaN or infinite";
    case KVC_E_NONFINITE_DECAY: return "a decay is NaN or infinite";
    case KVC_E_LAYERS: return "layers are missing, repeated, in another model or not aligned";
    case KVC_E_SNAPSHOT_MAGIC: return "not a snapshot of this kind (wrong magic bytes)";
    case KVC_E_SNAPSHOT_VERSION: return "a snapshot format version this library does not read";
    case KVC_E_SNAPSHOT_TRUNCATED: return "the snapshot is truncated";
    case KVC_E_SNAPSHOT_CHECKSUM: return "the snapshot's checksum does not match: it was changed";
    case KVC_E_SNAPSHOT_CORRUPT: return "the snapshot holds counts or values no cache can hold";
    case KVC_E_SNAPSHOT_TOO_LARGE: return "the snapshot's geometry is larger than its bytes could carry";
    case KVC_E_BUDGET: return "budget is 0 or smaller than sinks + recent";
    case KVC_E_THREADS: return "threads could not be started, or their count is out of range";
    case KVC_E_PREFIX: return "the cache does not fit the prefix cache (other geometry, mode or residual window, or evicted positions)";
    case KVC_E_RESIDUAL: return "residual rows out of range, or set on a layer that holds positions";
    case KVC_E_GGUF_MAGIC: return "not a GGUF file (wrong magic bytes)";
    case KVC_E_GGUF_VERSION: return "a GGUF version this library does not read (not 1 to 3, or big-endian)";
    case KVC_E_GGUF_TRUNCATED: return "the GGUF header is truncated";
    case KVC_E_GGUF_CORRUPT: return "the GGUF header holds fields no valid file has";
    case KVC_E_GGUF_TOO_LARGE: return "the GGUF header's counts or sizes exceed the reader's limits";
    case KVC_E_GGUF_INDEX: return "no such GGUF metadata entry, value, element or tensor";
    case KVC_E_GGUF_TYPE: return "the GGUF value is not of the type read (or out of its range)";
    case KVC_E_WEIGHT_TYPE: return "a tensor type this library does not convert";
    case KVC_E_ARCH: return "the model's architecture is not one this runner reads";
    case KVC_E_MODEL_FILE: return "the model file's metadata or tensors are missing or unusable";
    case KVC_E_TOKEN: return "a token id is not below the vocabulary's size";
    }
    return "unknown status";
}

const char *kvc_version(void) {
    return KVC_VERSION_STRING;
}

const char *kvc_kernel_isa(void) {
    return kvc_kernels_active()->isa;
}

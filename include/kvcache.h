/*
 * kvcache.h -- the KV cache of one transformer layer.
 *
 * A kvc_layer stores the keys and values of num_kv_heads attention heads,
 * head-major (each head owns contiguous rows of head_dim floats), in f32 or in
 * a compact int8 form, and runs attention over them.  It is the C core of the
 * kvcache-wasm npm package and builds natively too.
 *
 * Conventions
 *  - Every function that can fail returns a kvc_status; KVC_OK is 0.  Turn a
 *    status into text with kvc_status_name().  On any error nothing observable
 *    changes: no row is stored or dropped, seq_len, imp and memory_bytes stay.
 *  - The library never aborts, never prints, and never reads past the lengths
 *    it is given.  All allocation goes through one hook (kvc_set_allocator).
 *  - Units: lengths and counts are in elements unless the name says bytes;
 *    positions count tokens appended (dead heads included).
 *  - Threads: functions taking a `const kvc_layer *` only read the layer and
 *    may run concurrently on the same layer; the others need exclusive use.
 *    The library's own threads (kvc_set_threads) are another matter: they
 *    split one call's work and never change its result.
 */
#ifndef KVCACHE_H
#define KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVC_VERSION_MAJOR 0
#define KVC_VERSION_MINOR 1
#define KVC_VERSION_PATCH 0
#define KVC_VERSION_STRING "0.1.0"

/* The q8 window W: rows at positions < W stay f32; the per-channel field is
 * frozen from them when position W is appended (see kvc_mode). */
#define KVC_Q8_WINDOW 64

/* Geometry and length limits, checked by kvc_layer_create / append. */
#define KVC_MAX_KV_HEADS 4096
#define KVC_MAX_HEAD_DIM 4096
#define KVC_MAX_POSITIONS 0x7fffffffu
/* The most threads a call runs on, the calling thread included
 * (kvc_set_threads, and the loader's workers in WebAssembly). */
#define KVC_MAX_THREADS 64

/* Storage of keys (K) and values (V), chosen per component: f32, q8 or q4.
 *
 * A quantized component stores row r of a head as integer codes plus one f32
 * scale s, read back as x[j] = r[j] * s * c[j], where c is the head's
 * per-channel field (length head_dim).  The field is frozen once, when
 * position KVC_Q8_WINDOW is appended, as the RMS of each channel over the
 * head's rows at positions 0..W-1 (all ones for a head that stored none of
 * them), floored at 1e-30 and at 2^-6 of the head's largest c.  x / c
 * saturates at +-2^127, so every finite row gets finite codes and reads back
 * finite unless it lies within half a step of +-FLT_MAX.  Rows at positions
 * < W stay f32 for good; a truncation back to seq_len <= W unfreezes the
 * field.
 *
 * q8: codes -127..127, one byte each (a row: 4 + d bytes).
 * q4: codes -7..7, two per byte, with one f32 scale s per row and a 2-bit
 * shift k per group of 16 channels: channel j of group g reads back as
 * (code[j] * 2^k_g) * (s) * c[j] -- a group of small values steps finer than
 * the row's largest allows (s / 8 is the finest).  A row is 4 + ceil(d / 64)
 * + ceil(d / 2) bytes (docs/snapshot-format.md has the layout).  Every row
 * from W on gets its codes when it is appended, and the newest R rows (the
 * residual window, kvc_layer_set_residual_rows, KVC_Q4_RESIDUAL_ROWS by
 * default) are also kept in f32 and read from there by attention: a row is
 * read through its four bits only once R newer rows follow it (KIVI).  The
 * f32 copies of KVC_Q4_ROLLBACK_ROWS more rows are kept so that a truncation
 * can bring rows back into the window exactly (kvc_layer_exact_rollback).
 * Attention reads 4-bit rows as the int8 rows of their codes << k (scale
 * s / 8), through the q8 kernels: the same exactness between builds and
 * thread counts. */
typedef enum kvc_component {
    KVC_COMPONENT_F32 = 0,
    KVC_COMPONENT_Q8 = 1,
    KVC_COMPONENT_Q4 = 2
} kvc_component;
#define KVC_COMPONENT_COUNT 3

/* A layer's mode: the storage of its keys and of its values.  The first four
 * values are the modes of every earlier version (and their snapshots). */
typedef enum kvc_mode {
    KVC_MODE_F32 = 0,    /* K f32,  V f32  */
    KVC_MODE_Q8 = 1,     /* K q8,   V q8   */
    KVC_MODE_Q8K = 2,    /* K q8,   V f32  */
    KVC_MODE_Q8V = 3,    /* K f32,  V q8   */
    KVC_MODE_Q4 = 4,     /* K q4,   V q4   */
    KVC_MODE_Q4K = 5,    /* K q4,   V f32  */
    KVC_MODE_Q4V = 6,    /* K f32,  V q4   */
    KVC_MODE_Q8K_Q4V = 7, /* K q8,  V q4   */
    KVC_MODE_Q4K_Q8V = 8  /* K q4,  V q8   */
} kvc_mode;
#define KVC_MODE_COUNT 9

/* kvc_mode_component():
 * How `mode` stores keys (is_values 0) or values (1); KVC_COMPONENT_F32 for
 * a value that is not a kvc_mode. */
kvc_component kvc_mode_component(kvc_mode mode, int is_values);

/* kvc_mode_name(), kvc_component_name():
 * @return : the name of a mode ("f32", "q8", "q8k", "q8v", "q4", "q4k",
 *           "q4v", "q8k+q4v", "q4k+q8v", in kvc_mode order) or of a
 *           component ("f32", "q8", "q4"), or NULL for a value not in the
 *           enum. */
const char *kvc_mode_name(kvc_mode mode);
const char *kvc_component_name(kvc_component component);

/* kvc_component_keeps_window():
 * @return : 1 if the component keeps its newest rows in f32 beside their
 *           codes and reads them from there (a residual window: q4, sized
 *           by kvc_layer_set_residual_rows), 0 if not or for a value not in
 *           the enum. */
int kvc_component_keeps_window(kvc_component component);

/* Residual window of q4 components: the newest rows kept in f32. */
#define KVC_Q4_RESIDUAL_ROWS 64
#define KVC_Q4_MAX_RESIDUAL_ROWS 4096
/* f32 copies kept beyond the residual window, for exact truncation. */
#define KVC_Q4_ROLLBACK_ROWS 64

/* A layer is full attention (rows of keys and values), sliding-window
 * attention (rows, of which each query sees the newest `window` positions:
 * kvc_layer_create_window), recurrent: a fixed-size state instead of rows,
 * the seed's generic linear attention (f64), a short convolution (LFM2's) or
 * a gated delta rule with its convolution in front (Qwen3.5's Gated
 * DeltaNet) or a Mamba-2 selective scan with its convolution in front
 * (Granite 4.0-H's, Nemotron-H's, Falcon-H1's; kvc_layer_create_conv,
 * kvc_layer_create_delta, kvc_layer_create_mamba2), or shared: no
 * rows of its own, it reads an earlier layer's of its model (Gemma 4's
 * shared-KV blocks; kvc_layer_create_shared), or none: it holds nothing
 * and takes no positions (a block without a mixer, Nemotron-H's MLP-only
 * blocks; kvc_layer_create_none).  A layer may hold both: full attention's
 * rows and a Mamba-2 state side by side (Falcon-H1's blocks;
 * kvc_layer_create_attn_mamba2). */
typedef enum kvc_kind {
    KVC_KIND_FULL = 0,
    KVC_KIND_LINEAR = 1,
    KVC_KIND_WINDOW = 2,
    KVC_KIND_CONV = 3,
    KVC_KIND_DELTA = 4,
    KVC_KIND_SHARED = 5,
    KVC_KIND_MAMBA2 = 6,
    KVC_KIND_NONE = 7,
    KVC_KIND_ATTN_MAMBA2 = 8
} kvc_kind;

/* Limits of the recurrent kinds: a convolution's channels and taps, a delta
 * layer's state (value_heads x value_dim x key_dim floats), the tokens of
 * one step call. */
#define KVC_MAX_CHANNELS 65536
#define KVC_MAX_CONV_KERNEL 16
#define KVC_MAX_DELTA_STATE ((size_t)1 << 26)
#define KVC_MAX_STEP_TOKENS 4096

/* Status codes.  The values are stable: they cross the JS boundary. */
typedef enum kvc_status {
    KVC_OK = 0,
    KVC_E_NULL_POINTER = 1,     /* a required pointer argument is NULL */
    KVC_E_MODE = 2,             /* mode is not a kvc_mode */
    KVC_E_NUM_KV_HEADS = 3,     /* num_kv_heads is 0 or above KVC_MAX_KV_HEADS */
    KVC_E_HEAD_DIM = 4,         /* head_dim (or d) is 0 or above KVC_MAX_HEAD_DIM */
    KVC_E_KV_HEAD = 5,          /* kv_head >= num_kv_heads */
    KVC_E_LENGTH = 6,           /* a buffer length does not match what the call needs */
    KVC_E_NONFINITE_KEY = 7,    /* a key of a live head is NaN or +-Inf */
    KVC_E_NONFINITE_VALUE = 8,  /* a value of a live head is NaN or +-Inf */
    KVC_E_NONFINITE_QUERY = 9,  /* a query element is NaN or +-Inf */
    KVC_E_PROBS = 10,           /* a probability is negative, NaN or +-Inf */
    KVC_E_TOO_LONG = 11,        /* seq_len would exceed KVC_MAX_POSITIONS */
    KVC_E_NOMEM = 12,           /* an allocation failed; nothing was changed */
    KVC_E_KIND = 13,            /* the call is not for this kind of layer (rows of a linear
                                   layer, steps of a full one, rolling back a linear state) */
    KVC_E_VERIFYING = 14,       /* not allowed during a speculative verify */
    KVC_E_NOT_VERIFYING = 15,   /* accept without begin_verify */
    KVC_E_ACCEPT = 16,          /* accept(j): j exceeds the draft positions, or the layers
                                   of a model hold different numbers of them */
    KVC_E_NUM_HEADS = 17,       /* num_heads (linear) is 0 or above KVC_MAX_KV_HEADS */
    KVC_E_NUM_FEATURES = 18,    /* num_features is 0, above KVC_MAX_HEAD_DIM, or odd
                                   for the vmf_phase feature map */
    KVC_E_VALUE_DIM = 19,       /* value_dim is 0 or above KVC_MAX_HEAD_DIM */
    KVC_E_PHASE_MASS = 20,      /* phase_mass is negative, NaN or infinite */
    KVC_E_NONFINITE_DECAY = 21, /* a decay is NaN or +-Inf */
    KVC_E_LAYERS = 22,          /* model layers: none, repeated, already in a model, at
                                   different position counts, or a shared layer whose owner
                                   is not an earlier layer of rows */
    KVC_E_SNAPSHOT_MAGIC = 23,  /* not a snapshot of this kind (wrong magic bytes) */
    KVC_E_SNAPSHOT_VERSION = 24,/* a snapshot format version this library does not read */
    KVC_E_SNAPSHOT_TRUNCATED = 25, /* the snapshot ends before its contents do */
    KVC_E_SNAPSHOT_CHECKSUM = 26,  /* the checksum does not match: bytes were changed */
    KVC_E_SNAPSHOT_CORRUPT = 27,   /* counts or values that no cache can hold */
    KVC_E_SNAPSHOT_TOO_LARGE = 28, /* geometry or counts larger than the snapshot could carry */
    KVC_E_BUDGET = 29,          /* eviction: budget 0, or sinks + recent above it */
    KVC_E_THREADS = 30,         /* kvc_set_threads: a count out of range, or threads that
                                   could not be started */
    KVC_E_PREFIX = 31,          /* prefix cache: a cache whose layers differ from its
                                   entries' (count, head count, head_dim, mode, residual
                                   window), or that has evicted positions (its rows no
                                   longer follow tokens) */
    KVC_E_RESIDUAL = 32,        /* residual rows above KVC_Q4_MAX_RESIDUAL_ROWS, or set on a
                                   layer that holds positions */
    KVC_E_GGUF_MAGIC = 33,      /* not a GGUF file (its first bytes are not "GGUF") */
    KVC_E_GGUF_VERSION = 34,    /* a GGUF version other than 1, 2, 3 (or a big-endian file) */
    KVC_E_GGUF_TRUNCATED = 35,  /* the bytes end before the GGUF header does */
    KVC_E_GGUF_CORRUPT = 36,    /* a GGUF header no valid file has (unknown value type,
                                   dims, duplicate or overlapping tensors, alignment, ...) */
    KVC_E_GGUF_TOO_LARGE = 37,  /* GGUF counts or sizes beyond the reader's limits
                                   (KVC_GGUF_MAX_*) */
    KVC_E_GGUF_INDEX = 38,      /* no such metadata entry, value, element or tensor */
    KVC_E_GGUF_TYPE = 39,       /* a GGUF value read as a type it is not (or an integer
                                   outside the range read) */
    KVC_E_WEIGHT_TYPE = 40,     /* a ggml tensor type this library does not read */
    KVC_E_ARCH = 41,            /* a model of an architecture the runner does not read */
    KVC_E_MODEL_FILE = 42,      /* a model file's metadata or tensors are missing or unusable */
    KVC_E_TOKEN = 43,           /* a token id at or above the vocabulary's size */
    KVC_E_WINDOW = 44,          /* a window of 0 or above KVC_MAX_POSITIONS, or a truncation
                                   of a window layer back past the rows it still holds */
    KVC_E_CONV = 45,            /* a convolution's channels (0 or above KVC_MAX_CHANNELS) or
                                   taps (below 2 or above KVC_MAX_CONV_KERNEL), or a delta
                                   state above KVC_MAX_DELTA_STATE */
    KVC_E_NONFINITE_INPUT = 46  /* a recurrent step's input, weight or gate is NaN or +-Inf
                                   (or its eps is not a positive number) */
} kvc_status;

/* kvc_status_name():
 * @return : a static, NUL-terminated description of `status` ("out of
 *           memory", ...); "unknown status" for a value not in kvc_status. */
const char *kvc_status_name(kvc_status status);

/* kvc_digest():
 * XXH64 (xxHash's 64-bit digest, as its specification defines it) of the
 * `n` bytes at `data`, with `seed`: chaining a second region with the first
 * one's digest as its seed digests both.  The same value in every build and
 * on every host.  What it is for: telling a changed copy of a file from the
 * one stored (a model store checks its copy's tensor data at every load) --
 * not a cryptographic hash, it finds damage, not forgery.  NULL data counts
 * as no bytes. */
uint64_t kvc_digest(const void *data, size_t n, uint64_t seed);

/* Names and values for bindings.
 *
 * A binding in another language (the JS package) takes the names and limits
 * below from the library when it loads, instead of writing them out again:
 * they then cannot drift from this header.
 *
 * kvc_status_symbol():
 * @return : the C name of `status` ("KVC_E_NOMEM"), or NULL for a value not
 *           in kvc_status. */
const char *kvc_status_symbol(kvc_status status);

/* kvc_constant_name(), kvc_constant_value():
 * The header's limits, sizes and codes by index 0, 1, ...: the name of the
 * macro or enumerator ("KVC_MAX_KV_HEADS") and its value.  Those listed:
 * KVC_Q8_WINDOW, KVC_MAX_KV_HEADS, KVC_MAX_HEAD_DIM, KVC_MAX_POSITIONS,
 * KVC_MAX_THREADS, KVC_MODE_COUNT, KVC_Q4_RESIDUAL_ROWS,
 * KVC_Q4_MAX_RESIDUAL_ROWS, KVC_Q4_ROLLBACK_ROWS, KVC_KIND_LINEAR,
 * KVC_KIND_WINDOW, KVC_KIND_CONV, KVC_KIND_DELTA, KVC_KIND_SHARED,
 * KVC_KIND_MAMBA2,
 * KVC_KIND_NONE, KVC_KIND_ATTN_MAMBA2,
 * KVC_LM_IMPORTANCE, KVC_LM_VERIFY, every kvc_gguf_type (KVC_GGUF_UINT8
 * .. KVC_GGUF_FLOAT64) and every kvc_profile_op; their order is not part
 * of the API.
 * @return : the name, or NULL past the last; the value, or 0 past the last. */
const char *kvc_constant_name(size_t index);
uint32_t kvc_constant_value(size_t index);

/* kvc_mode_of():
 * Sets *mode to the mode that stores keys as `keys` and values as `values`.
 * @return : KVC_OK, KVC_E_NULL_POINTER, or KVC_E_MODE when either is not a
 *           kvc_component (*mode unchanged). */
kvc_status kvc_mode_of(kvc_component keys, kvc_component values, kvc_mode *mode);

/* kvc_version():
 * @return : KVC_VERSION_STRING of the compiled library. */
const char *kvc_version(void);

/* kvc_kernel_isa():
 * @return : the name of the kernel set this build runs: "wasm-relaxed-simd"
 *           (the relaxed-SIMD module: fused multiply-adds in the f32 dot
 *           products and weighted sums), "wasm-simd128" or "scalar".  Lets a
 *           test or a user check which is in use. */
const char *kvc_kernel_isa(void);

/* Threads.
 *
 * A layer's big calls split into tasks -- each KV head's rows in segments of
 * 1024, whose partial softmaxes merge in a fixed order -- that run on the
 * calling thread and a pool of threads: kvc_layer_attend_heads, the
 * attend calls of one head (attend, attend_group, attend_causal),
 * kvc_attention_head, and kvc_layer_append_n (quantization per head and
 * component).  The split does not depend on the number of threads, so
 * every result -- outputs, probabilities, rows, snapshot bytes -- is the
 * same bit for bit with 1 thread or 64.  Small calls (under about 2^17
 * multiply-adds) run on the calling thread alone, as does a call made while
 * another one uses the pool, and, for a while, every call after the pool
 * threads took little of the last ones' work (another process holding
 * their cores).  Pool threads never allocate: the calling
 * thread prepares all the memory a call needs before it starts them.
 *
 * kvc_set_threads():
 * Natively: makes calls run on `count` threads, the caller and count - 1
 * pthreads started here (1, the default, starts none and stops any).  Idle
 * pool threads poll briefly, then sleep.  Call it while no other call of
 * the library runs; it is not itself thread-safe.  In WebAssembly the
 * package's loader starts the threads (workers sharing the module's memory,
 * `init({ threads })`), and this accepts only 1, which changes nothing.
 * @return : KVC_OK, or KVC_E_THREADS: count is 0 or above 64, or a thread
 *           could not be started (then no pool thread runs). */
kvc_status kvc_set_threads(size_t count);

/* kvc_thread_count():
 * @return : the threads calls run on now: 1 + the pool threads running. */
size_t kvc_thread_count(void);

/* What a profile times: the operations of a forward pass (kvc_lm_forward),
 * each on the calling thread, its wait for pool threads apart. */
typedef enum kvc_profile_op {
    KVC_PROFILE_EMBED = 0,      /* token embeddings and RoPE tables */
    KVC_PROFILE_NORM = 1,       /* RMSNorms: of the blocks, per head (qwen3), of the output */
    KVC_PROFILE_QUANTIZE = 2,   /* activations coded for the weight products */
    KVC_PROFILE_QKV = 3,        /* the q, k, v products */
    KVC_PROFILE_ROPE = 4,       /* biases, RoPE, the gate of gated attention */
    KVC_PROFILE_APPEND = 5,     /* keys and values into the layer */
    KVC_PROFILE_ATTEND = 6,     /* the attention over the layer's rows */
    KVC_PROFILE_WO = 7,         /* the attention's output product */
    KVC_PROFILE_RECURRENT = 8,  /* a recurrent layer's step, its own products included */
    KVC_PROFILE_GATE_UP = 9,    /* the FFN's gate and up products */
    KVC_PROFILE_ACTIVATION = 10,/* SwiGLU / GeGLU */
    KVC_PROFILE_DOWN = 11,      /* the FFN's down product */
    KVC_PROFILE_RESIDUAL = 12,  /* the residual additions */
    KVC_PROFILE_LOGITS = 13,    /* the output product */
    KVC_PROFILE_POOL_WAIT = 14, /* the calling thread waiting for pool threads to finish a job */
    KVC_PROFILE_OPS = 15
} kvc_profile_op;

/* kvc_profile_start():
 * From now on, the time each operation takes on the calling thread is
 * added to ms[op], in milliseconds, after ms is set to zeros; the
 * operations exclude the wait for pool threads, which is an operation of
 * its own, so that their sum is the time of the calls profiled.  The
 * clock is read twice an operation (in WebAssembly, the loader's
 * performance.now, whose resolution a browser may coarsen).  ms must stay
 * valid until kvc_profile_stop.  Not thread-safe: one thread calls the
 * library while a profile is on.
 * @return : KVC_OK, KVC_E_NULL_POINTER or KVC_E_LENGTH (count is not
 *           KVC_PROFILE_OPS). */
kvc_status kvc_profile_start(double *ms, size_t count);

/* kvc_profile_stop(): no more timing; ms keeps the totals. */
void kvc_profile_stop(void);

/* Allocation hook.  realloc must behave like C realloc (keep the old block on
 * failure); free must accept NULL.  `user` is passed back to every call. */
typedef struct kvc_allocator {
    void *(*malloc_fn)(void *user, size_t bytes);
    void *(*realloc_fn)(void *user, void *block, size_t bytes);
    void (*free_fn)(void *user, void *block);
    void *user;
} kvc_allocator;

/* kvc_set_allocator():
 * Routes every later allocation of the library through `allocator` (copied);
 * NULL restores the C library's malloc/realloc/free (in wasm, a block of a
 * GiB or more first grows the heap's free end in steps below 2 GiB, which
 * emscripten's malloc refuses at once -- also after it has refused a growth,
 * when it would ask for the whole block).  Process-wide: call it before any
 * layer exists, never while one allocated by another hook lives.
 * @return : KVC_OK, or KVC_E_NULL_POINTER if a function pointer is NULL. */
kvc_status kvc_set_allocator(const kvc_allocator *allocator);

/* kvc_attention_head():
 * Single-query softmax attention over one head's slices, all in f32, in
 * segments of 1024 rows (s = 0, 1, ...; the last one shorter):
 *   z_p = (q . keys[p]) / sqrt(d);  m_s = max of z over segment s;
 *   e_p = exp(z_p - m_s);  l_s = sum of e over s (four interleaved partial
 *   sums);  o_s = sum_p e_p * values[p] over s (row order);
 *   w_s = exp(m_s - M) / sum_s' exp(m_s' - M) l_s'  (M = max m_s, sums in
 *   segment order);  out = sum_s w_s o_s;  pi_p = e_p * w_s,
 * exp being the library's own (within 2.5 ulp of e^x, the same bits on
 * every build).  With one segment (n <= 1024) that is e_p * (1 / sum e).
 * The f32 branch of kvc_layer_attend runs this very routine on the head's
 * rows, so the two are bit-for-bit equal.
 * `q` [d], `keys` and `values` [n x d] row-major; `out` receives d floats;
 * `probs` (may be NULL) receives the n softmax weights.  n == 0 gives zeros.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_HEAD_DIM (d out of range),
 *           KVC_E_NONFINITE_QUERY, or KVC_E_NOMEM (the call's workspace). */
kvc_status kvc_attention_head(const float *q, const float *keys, const float *values,
                              size_t n, size_t d, float *out, float *probs);

/* ------------------------------------------------------------------------ */
/* One layer's cache                                                         */
/* ------------------------------------------------------------------------ */

typedef struct kvc_layer kvc_layer;

/* kvc_layer_create():
 * Creates an empty cache of `num_kv_heads` heads of `head_dim` channels.
 * On success *out owns the layer: release it with kvc_layer_free().
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_NUM_KV_HEADS, KVC_E_HEAD_DIM,
 *           KVC_E_MODE or KVC_E_NOMEM; on error *out is set to NULL. */
kvc_status kvc_layer_create(size_t num_kv_heads, size_t head_dim, kvc_mode mode,
                            kvc_layer **out);

/* kvc_layer_create_window():
 * A sliding-window layer (Gemma 3's local layers): rows as a full layer's,
 * in every mode, but the query at position p attends positions p - window
 * + 1 .. p only (attend, attend_group and attend_heads: the newest position
 * held; attend_causal: each query its own).  The layer lets go of the rows
 * no later query can see: after an append at first position P (and an
 * accept of j drafts, as j single appends would) it keeps the positions
 * from floor((P - (window - 1) - rollback) / 64) * 64 on, compacting its
 * rows once a page (64 positions) has slid out, so it holds at most window
 * - 1 + rollback + 64 positions besides those of the append itself (and a
 * verify's drafts, which slide nothing).  Its results are every full
 * layer's promises within the window: the same bits at any thread count, a
 * verify's accept(j) as j plain appends (rows, memory_bytes, snapshots); an
 * append_n of n positions keeps the rows its first position needs, so until
 * the next append it may hold more than n single appends would.
 * truncate_last(n) is exact -- attention as if the positions had never
 * come -- while the rows the new newest position's window needs are all
 * held: always for n <= rollback (KVC_E_WINDOW past that, see
 * kvc_layer_exact_rollback); the rows held may then differ from a layer
 * that never took them until the window passes them.  A window layer bounds
 * itself: kvc_layer_evict and kvc_layer_set_max_rows refuse it
 * (KVC_E_KIND).
 * @return : as kvc_layer_create, or KVC_E_WINDOW (window 0 or above
 *           KVC_MAX_POSITIONS, rollback above KVC_MAX_POSITIONS). */
kvc_status kvc_layer_create_window(size_t num_kv_heads, size_t head_dim, kvc_mode mode,
                                   size_t window, size_t rollback, kvc_layer **out);

/* The window of a window layer (0 for other kinds and NULL), and the
 * positions it keeps besides for truncation. */
size_t kvc_layer_window(const kvc_layer *layer);
size_t kvc_layer_window_rollback(const kvc_layer *layer);

/* kvc_layer_create_shared():
 * A shared layer (Gemma 4's shared-KV blocks, whose queries attend over the
 * keys and values of an earlier block): it holds nothing and names layer
 * `owner` of the model it joins, whose rows a forward pass reads in its
 * place.  kvc_model_create takes it only after its owner, a full or window
 * layer of the same model (KVC_E_LAYERS otherwise).  In a model it costs no
 * memory (kvc_layer_memory_bytes 0), its positions are its owner's, and
 * every model call treats the owner once: truncation, clear, verify,
 * eviction and forks leave the shared layer as it is; a clone's shared
 * layer reads the clone's owner; a snapshot holds its kind and owner.
 * Calls on rows (append, attend, truncate_last, head_keys, evict, ...)
 * refuse it with KVC_E_KIND and change nothing; alone (in no model) it may
 * be cloned, serialized and freed.  On success *out owns the layer.
 * @return : KVC_OK, KVC_E_NULL_POINTER or KVC_E_NOMEM (*out set to NULL). */
kvc_status kvc_layer_create_shared(size_t owner, kvc_layer **out);

/* kvc_layer_owner():
 * @return : the index of the layer a shared layer reads, or SIZE_MAX for
 *           any other kind and for NULL. */
size_t kvc_layer_owner(const kvc_layer *layer);

/* kvc_layer_create_none():
 * A layer that holds nothing and takes no positions, for a block of a
 * model that keeps nothing between tokens (Nemotron-H's MLP-only blocks),
 * so that a model's cache still has a layer a block.  In a model it costs
 * no memory (kvc_layer_memory_bytes 0), it takes no positions
 * (kvc_model_seq_len and kvc_model_create's alignment pass it by, as any
 * draft count), and every model call leaves it as it is:
 * truncation, clear, verify and accept, eviction, forks; a snapshot holds
 * its kind alone.  Calls on rows or a state (append, attend, truncate_last,
 * the recurrent steps, ...) refuse it with KVC_E_KIND and change nothing.
 * On success *out owns the layer.
 * @return : KVC_OK, KVC_E_NULL_POINTER or KVC_E_NOMEM (*out set to NULL). */
kvc_status kvc_layer_create_none(kvc_layer **out);

/* kvc_layer_free(): releases `layer` and everything it holds.  NULL is a no-op. */
void kvc_layer_free(kvc_layer *layer);

/* Pages and sharing.
 *
 * A layer keeps each head's rows -- and its per-position importance,
 * positions and alive bits -- in pages of 64 positions' worth (64 rows of a
 * store; the first page of a quantized store holds the f32 rows below
 * KVC_Q8_WINDOW, from which the field freezes), with a reference count per
 * page.  kvc_layer_clone makes a fork that shares every page with the
 * original: O(pages) bookkeeping, no row copied.  The first write of either
 * into a shared page copies that page (its holder's rows of it) and writes
 * the copy: an append into a partly filled last page, imp updates, the rows
 * an eviction moves, a field that freezes.  A truncation copies nothing (its
 * next append does).  So a fork behaves in every respect as a deep copy --
 * rows, results, rollback, snapshots (self-contained), eviction, max_rows --
 * and out of memory may now also meet a write into a shared page: the call
 * then fails with KVC_E_NOMEM and changes nothing, as any other.  Reference
 * counts are atomic: layers that share pages may be used from different
 * threads, each by one at a time.  kvc_layer_memory_bytes counts what a
 * layer holds, shared or not; kvc_layer_shared_bytes the part of it in
 * shared pages; kvc_memory_stats every page once. */

/* kvc_layer_clone():
 * A fork (see "Pages and sharing"): the clone and the original evolve
 * independently, as a deep copy would (fork a conversation), sharing pages
 * until either writes into one.  On success *out owns the copy.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_VERIFYING or KVC_E_NOMEM
 *           (*out set to NULL). */
kvc_status kvc_layer_clone(const kvc_layer *layer, kvc_layer **out);

/* kvc_layer_append():
 * Appends one position.  `k`, `v`: [num_kv_heads x head_dim] f32.  `alive`
 * (NULL = all alive): one byte per head; a zero byte stores nothing for that
 * head, and its slices of k and v are not read.  seq_len grows by one and the
 * importance vector gains a 0 slot whatever the mask.  In a q8 mode, the
 * append of position KVC_Q8_WINDOW freezes the field (see kvc_mode).
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND (a linear layer),
 *           KVC_E_NONFINITE_KEY, KVC_E_NONFINITE_VALUE, KVC_E_TOO_LONG or
 *           KVC_E_NOMEM. */
kvc_status kvc_layer_append(kvc_layer *layer, const float *k, const float *v,
                            const uint8_t *alive);

/* kvc_layer_append_n():
 * Appends n positions at once (prefill), identical in effect to n calls of
 * kvc_layer_append.  `k`, `v`: [n x num_kv_heads x head_dim]; `alive`
 * (NULL = all alive): [n x num_kv_heads].  All or nothing: every live
 * element is checked before anything is stored.
 * @return : as kvc_layer_append. */
kvc_status kvc_layer_append_n(kvc_layer *layer, size_t n, const float *k, const float *v,
                              const uint8_t *alive);

/* kvc_layer_attend():
 * Attention of query `q` [head_dim] over the rows of `kv_head`.  `out`
 * receives head_dim floats; `probs` (may be NULL) receives one softmax
 * weight per stored row of the head, in position order (see
 * kvc_layer_head_positions).  A head with no rows gives zeros.
 *  - f32 keys and values: exactly kvc_attention_head over the head's rows.
 *  - quantized keys: q~ = q * c_K once, held as two i16 code vectors with
 *    a scale each, its codes and those of what they leave (within about
 *    2^-24 max|q~| a channel; one vector's 2^-17 alone can exceed the 1e-3
 *    the design allows when q~ has outlier channels and attention is peaky);
 *    z_p = s_p * <q~, r_p> / sqrt(d) for a quantized row, the dots exact in
 *    i32; the f32 dot for a row at a position < W.
 *  - quantized values: a segment's o_s = c_V * sum_{quantized rows}
 *    (e_p s_p) r_p + sum_{f32 rows} e_p v_p.
 * Rows are taken in segments of 1024 as kvc_attention_head says, on the
 * pool's threads when there are several (kvc_set_threads).
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND, KVC_E_KV_HEAD,
 *           KVC_E_NONFINITE_QUERY, or KVC_E_NOMEM (the call's one workspace:
 *           query codes, partial results and a scratch per thread; a head
 *           with no rows allocates nothing). */
kvc_status kvc_layer_attend(const kvc_layer *layer, const float *q, size_t kv_head,
                            float *out, float *probs);

/* kvc_layer_truncate_last():
 * Rewinds the last n positions (all when n >= the next position): the next
 * position goes back by n, and every slot at or after it goes -- every
 * store of every head loses exactly its own rows at those positions and
 * imp loses the slots.  Until a layer evicts, that is its last min(n,
 * seq_len) slots; after an eviction, positions already evicted are simply
 * not there to drop.  A q8 field unfreezes when the next position falls to
 * KVC_Q8_WINDOW or below.  Keeps the allocation (no reallocation).  During
 * a verify, use kvc_layer_accept.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND (a linear layer),
 *           KVC_E_VERIFYING or KVC_E_WINDOW (a window layer that no longer
 *           holds the rows the new newest position sees:
 *           kvc_layer_create_window); never KVC_E_NOMEM (a truncation
 *           writes into no page, shared or not). */
kvc_status kvc_layer_truncate_last(kvc_layer *layer, size_t n);

/* kvc_layer_clear():
 * Empties the cache (rows, imp, field; a linear layer's state and steps)
 * keeping geometry and mode, and ends a speculative verify.  Keeps the
 * allocation; free the layer to release it.  NULL is a no-op. */
void kvc_layer_clear(kvc_layer *layer);

/* kvc_layer_accumulate_imp():
 * imp[p] += probs[p] for every position p < seq_len: the cumulative
 * attention mass per position that drives eviction (callers sum the
 * per-position probabilities over heads).  `n` must equal seq_len.
 * During a speculative verify, add the probabilities of the queries that
 * accept keeps, after accept: imp then ends bit-identical to plain decoding.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND, KVC_E_LENGTH,
 *           KVC_E_PROBS (a negative or non-finite value; imp is left
 *           unchanged), or KVC_E_NOMEM (a copy of the imp pages a fork
 *           shares: see "Pages and sharing"). */
kvc_status kvc_layer_accumulate_imp(kvc_layer *layer, const float *probs, size_t n);

/* kvc_layer_accumulate_imp_head():
 * Adds one head's row probabilities (as kvc_layer_attend gives them) at that
 * head's positions.  `n` must equal kvc_layer_head_len(layer, kv_head).
 * @return : as kvc_layer_accumulate_imp, or KVC_E_KV_HEAD. */
kvc_status kvc_layer_accumulate_imp_head(kvc_layer *layer, size_t kv_head,
                                         const float *probs, size_t n);

/* kvc_layer_imp():
 * Copies the importance vector (seq_len floats) into `dst`.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND, or KVC_E_LENGTH
 *           (dst_len < seq_len). */
kvc_status kvc_layer_imp(const kvc_layer *layer, float *dst, size_t dst_len);

/* kvc_layer_head_keys() / kvc_layer_head_values():
 * Copies the head's rows, [head_len x head_dim] f32 in position order, into
 * `dst`; a quantized row is dequantized (r[j] * s * c[j]).
 * @return : KVC_OK, KVC_E_NULL_POINTER (dst may be NULL only when the head is
 *           empty), KVC_E_KIND, KVC_E_KV_HEAD, or KVC_E_LENGTH (dst_len too
 *           small). */
kvc_status kvc_layer_head_keys(const kvc_layer *layer, size_t kv_head, float *dst,
                               size_t dst_len);
kvc_status kvc_layer_head_values(const kvc_layer *layer, size_t kv_head, float *dst,
                                 size_t dst_len);

/* kvc_layer_head_positions():
 * Copies the position of each stored row of the head (head_len values,
 * ascending) into `dst`.
 * @return : as kvc_layer_head_keys. */
kvc_status kvc_layer_head_positions(const kvc_layer *layer, size_t kv_head, uint32_t *dst,
                                    size_t dst_len);

/* kvc_layer_attend_group():
 * The G query heads that share `kv_head` (grouped-query attention), in one
 * pass over its rows: each key and value row is read once for the group.
 * `q` [G x head_dim] (query g at q + g * head_dim), `out` [G x head_dim],
 * `probs` (may be NULL) [G x head_len(kv_head)].  Each query's result is
 * bit-for-bit kvc_layer_attend's.
 * @return : as kvc_layer_attend, or KVC_E_LENGTH for G = 0 or above
 *           KVC_MAX_KV_HEADS. */
kvc_status kvc_layer_attend_group(const kvc_layer *layer, const float *q, size_t G,
                                  size_t kv_head, float *out, float *probs);

/* kvc_layer_attend_heads():
 * A whole layer's attention in one call: `num_query_heads` = G x
 * num_kv_heads queries [num_query_heads x head_dim], query head i served
 * by KV head i / G (the grouping llama-style models use); out
 * [num_query_heads x head_dim].  `probs` (may be NULL): [num_query_heads x
 * seq_len], row i holding query i's weights at the positions its KV head
 * stored and 0 elsewhere, ready to sum for kvc_layer_accumulate_imp.
 * Each query's result is bit-for-bit kvc_layer_attend's.
 * @return : as kvc_layer_attend, or KVC_E_NUM_HEADS when num_query_heads is
 *           not a positive multiple of num_kv_heads. */
kvc_status kvc_layer_attend_heads(const kvc_layer *layer, const float *q, size_t num_query_heads,
                                  float *out, float *probs);

/* kvc_layer_attend_causal():
 * m queries at once, the speculative-verify and chunked-prefill shape: query
 * i (`q` + i * head_dim) sees the first seq_len - m + i + 1 slots (positions
 * 0 .. seq_len - m + i until the layer evicts: the last m slots are the m
 * newest positions, and query i sees the older ones and its own).  Its output
 * (`out` + i * head_dim) and probabilities are bit-for-bit what
 * kvc_layer_attend gives on this layer truncated to seq_len - m + i + 1
 * positions.  `probs` (may be NULL): [m x head_len(kv_head)], row i holding
 * query i's weights over the rows it sees, then zeros for the rows it does
 * not.  1 <= m <= seq_len.
 * @return : as kvc_layer_attend, or KVC_E_LENGTH for m out of range. */
kvc_status kvc_layer_attend_causal(const kvc_layer *layer, const float *q, size_t m,
                                   size_t kv_head, float *out, float *probs);

/* kvc_layer_attend_span():
 * kvc_layer_attend_causal for m queries that see each other whole (Gemma's
 * image tokens, which attend both ways inside the image): query i sees
 * every slot (a window layer: every slot from its window's start on), its
 * output and probabilities bit-for-bit kvc_layer_attend's on the whole
 * layer (on a window layer, from query i's window start).  `probs` as
 * attend_causal's.  1 <= m <= seq_len.
 * @return : as kvc_layer_attend_causal. */
kvc_status kvc_layer_attend_span(const kvc_layer *layer, const float *q, size_t m, size_t kv_head, float *out,
                                 float *probs);

/* kvc_layer_attend_ranges():
 * m queries at once over the m newest slots, each over a range of them of
 * its own: query i (`q` + i * head_dim) sees the slots seq_len - m +
 * first[i] .. seq_len - m + end[i] - 1 (first[i] <= end[i] <= m; an empty
 * range gives zeros).  The shape of an embedding model's pass over many
 * texts at once, each text's tokens seeing their own text only: both ways
 * (bidirectional), up to themselves (causal), or within a window around
 * themselves (EmbeddingGemma's symmetric one).  Query i's output and
 * probabilities are bit-for-bit kvc_layer_attend's on a layer holding
 * exactly the rows of its range (a quantized layer's as it held them when
 * the range's last slot came), at any thread count.  `probs` (may be
 * NULL): [m x head_len(kv_head)], row i holding query i's weights over its
 * range and zeros elsewhere.  1 <= m <= seq_len.
 * @return : as kvc_layer_attend_causal, or KVC_E_NULL_POINTER without
 *           first or end, or KVC_E_LENGTH for a range out of order or past m. */
kvc_status kvc_layer_attend_ranges(const kvc_layer *layer, const float *q, size_t m, size_t kv_head,
                                   const uint32_t *first, const uint32_t *end, float *out, float *probs);

/* Accessors.  They never fail: a NULL layer or an out-of-range head reads 0,
 * and so does a full-layer accessor of a linear layer. */
size_t kvc_layer_num_kv_heads(const kvc_layer *layer);
size_t kvc_layer_head_dim(const kvc_layer *layer);
kvc_mode kvc_layer_mode(const kvc_layer *layer);
size_t kvc_layer_seq_len(const kvc_layer *layer);
/* Rows stored for `kv_head` (0 for a head that was never alive). */
size_t kvc_layer_head_len(const kvc_layer *layer, size_t kv_head);
/* 1 while the field is frozen (seq_len > KVC_Q8_WINDOW with a quantized component). */
int kvc_layer_field_frozen(const kvc_layer *layer);

/* kvc_layer_memory_bytes():
 * Bytes of data the cache holds, exactly (H heads, d = head_dim,
 * L = seq_len, n_h = rows of head h, w_h = of them at positions < W):
 *   L * (8 + ceil(H / 8))                      importance, position, alive map
 * + per f32 component: sum_h n_h * d * 4
 * + per q8 component:  sum_h (w_h * d * 4 + (n_h - w_h) * (d + 4))
 *                      + (field frozen ? H * d * 4 : 0)
 * + per q4 component:  sum_h (w_h * d * 4 + (n_h - w_h) * (ceil(d / 2) + 4)
 *                             + r_h * d * 4)  + (field frozen ? H * d * 4 : 0)
 * where r_h is the rows of head h's residual window, read from their f32
 * copies: min(n_h - w_h, R) for R residual rows (fewer only after a
 * truncation deeper than kvc_layer_exact_rollback or an eviction that kept
 * older rows).  The f32 copies kept for exact truncation (at most
 * KVC_Q4_ROLLBACK_ROWS + 63 per head and component) are counted, like free
 * capacity, by kvc_layer_capacity_bytes only.  The same formula in every
 * mode for the shared parts; free capacity and fixed bookkeeping are not
 * counted (see kvc_layer_capacity_bytes). */
size_t kvc_layer_memory_bytes(const kvc_layer *layer);

/* kvc_layer_shared_bytes():
 * The part of kvc_layer_memory_bytes held in pages another layer (a fork,
 * or the layer it was forked from) holds too; 0 for a linear layer. */
size_t kvc_layer_shared_bytes(const kvc_layer *layer);

/* kvc_layer_capacity_bytes():
 * Every byte the layer has allocated, reserved capacity, bookkeeping and
 * the pages it shares included; always >= kvc_layer_memory_bytes. */
size_t kvc_layer_capacity_bytes(const kvc_layer *layer);

/* kvc_layer_bytes_for():
 * What kvc_layer_memory_bytes says of a layer of this geometry and mode,
 * with the default residual window, once `positions` positions are
 * appended with every head alive: what a cache for a given context will
 * take, known before it is filled (a model loader checks that it fits).
 * @return : the bytes (SIZE_MAX when they pass this build's address space),
 *           or 0 for a geometry or mode no layer takes. */
size_t kvc_layer_bytes_for(size_t num_kv_heads, size_t head_dim, kvc_mode mode, size_t positions);

/* What every live layer holds, counting each page once. */
typedef struct kvc_memory_usage {
    size_t cache_bytes; /* the sum of kvc_layer_memory_bytes over every live layer
                           (models' included), but a shared page's bytes once, at
                           the most rows any of its holders keeps in it */
    size_t layers;      /* live layers */
    size_t pages;       /* live pages: 0 once every layer is freed */
} kvc_memory_usage;

/* kvc_memory_stats():
 * Fills *usage (NULL: a no-op).  It reads every live layer: call it while
 * no other thread changes one. */
void kvc_memory_stats(kvc_memory_usage *usage);

/* kvc_layer_describe():
 * Writes a one-line, NUL-terminated description ("kvc_layer{kind=full
 * window=0 mode=q8 num_kv_heads=8 head_dim=128 seq_len=4096 ...}") into buf, truncated to buf_len - 1 characters.
 * @return : the length the full description needs, excluding the NUL (as
 *           snprintf); 0 when layer is NULL. */
size_t kvc_layer_describe(const kvc_layer *layer, char *buf, size_t buf_len);

/* ------------------------------------------------------------------------ */
/* Eviction: bounding a layer                                                */
/* ------------------------------------------------------------------------ */

/* A layer holds its positions in order, one slot each: seq_len counts the
 * slots, and attend's probs and imp are per slot.  Until a layer evicts,
 * slot s holds position s; afterwards kvc_layer_positions says which
 * absolute positions remain, and kvc_layer_next_position is the absolute
 * position the next append gets (for RoPE).  Memory formula: each slot also
 * costs 4 bytes for its position (see kvc_layer_memory_bytes). */

/* kvc_layer_positions():
 * Copies the absolute position of each slot (seq_len values, increasing).
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND or KVC_E_LENGTH. */
kvc_status kvc_layer_positions(const kvc_layer *layer, uint32_t *dst, size_t dst_len);

/* The absolute position the next append gets: positions appended, minus
 * those truncated or rejected (0 for NULL or a linear layer). */
size_t kvc_layer_next_position(const kvc_layer *layer);

/* kvc_layer_evict():
 * Keeps at most `budget` positions: the first `sinks`, the `recent` newest,
 * and between them the highest importance (kvc_layer_accumulate_imp), ties
 * to the older; in their order, every head and store alike.  In place and
 * O(rows): kept rows move down, quantized rows keep their codes and scales,
 * the field stays.  Nothing happens when seq_len <= budget.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND, KVC_E_BUDGET (budget 0,
 *           or sinks + recent > budget), KVC_E_VERIFYING, or KVC_E_NOMEM
 *           (a scratch of 5 bytes per position; nothing changed). */
kvc_status kvc_layer_evict(kvc_layer *layer, size_t budget, size_t sinks, size_t recent);

/* kvc_layer_slide_window(): a sliding window with sinks: kvc_layer_evict(
 * layer, window, sinks, window - sinks).  @return : as kvc_layer_evict. */
kvc_status kvc_layer_slide_window(kvc_layer *layer, size_t window, size_t sinks);

/* kvc_layer_eviction_plan():
 * The absolute positions kvc_layer_evict would keep (*count of them, at most
 * budget, increasing) into `kept`, without evicting.
 * @return : as kvc_layer_evict (no KVC_E_VERIFYING), or KVC_E_LENGTH when
 *           kept_len < min(seq_len, budget). */
kvc_status kvc_layer_eviction_plan(const kvc_layer *layer, size_t budget, size_t sinks,
                                   size_t recent, uint32_t *kept, size_t kept_len, size_t *count);

/* kvc_layer_set_max_rows():
 * Bounds the layer: an append of n positions that would take it past
 * max_rows first evicts down to max_rows - n with this policy (the new
 * positions are always kept).  A verify's drafts go past it, and accept(j)
 * with j > 0 then evicts down to max_rows, keeping the j accepted positions
 * (recent = max(recent, j)) and the sinks room allowing; accept(0) and
 * reject leave the layer exactly as before the verify.  So a layer within
 * max_rows holds at most max_rows + drafts rows.  max_rows 0 turns it off.  Appends of more than max_rows positions at once outside a
 * verify fail with KVC_E_LENGTH.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND or KVC_E_BUDGET (as
 *           kvc_layer_evict, or max_rows above KVC_MAX_POSITIONS). */
kvc_status kvc_layer_set_max_rows(kvc_layer *layer, size_t max_rows, size_t sinks, size_t recent);

/* kvc_layer_set_residual_rows():
 * The residual window of the layer's q4 components (see kvc_mode): the
 * newest `rows` rows of each head are read in f32 (0: every row from W on
 * through its codes).  Set before the first append; kept by clear, clone
 * and snapshots; no effect on a layer without q4 components.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND (linear layer) or
 *           KVC_E_RESIDUAL (rows > KVC_Q4_MAX_RESIDUAL_ROWS, or seq_len > 0). */
kvc_status kvc_layer_set_residual_rows(kvc_layer *layer, size_t rows);
size_t kvc_layer_residual_rows(const kvc_layer *layer);

/* kvc_layer_exact_rollback():
 * The largest n for which kvc_layer_truncate_last(layer, n) leaves the
 * layer bit for bit as if the n positions had never been appended (rows,
 * results, memory_bytes, snapshots).  SIZE_MAX for a full layer without q4
 * components.  A window layer: the largest n whose truncation it takes
 * (results as if never appended; see kvc_layer_create_window), at least
 * its rollback, and at most what its q4 components allow.  With q4, a truncation that brings rows back into the
 * residual window needs their f32 copies: after appends the layer keeps
 * those of KVC_Q4_ROLLBACK_ROWS rows beyond the window, so then this is at
 * least KVC_Q4_ROLLBACK_ROWS (SIZE_MAX while every row has its copy); a
 * truncation uses up what it takes, each append after it gives one back,
 * and an eviction or a restored
 * snapshot (which keeps the window's copies only) may leave 0.  A deeper
 * truncation is still safe: rows that come back into the window without a
 * copy are read through their codes until newer rows push them out.  A
 * speculative verify is always exact: while it is open no f32 copy is let
 * go (the drafts move the window, and rejecting them moves it back).  0 for
 * a linear layer. */
size_t kvc_layer_exact_rollback(const kvc_layer *layer);

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                 */
/* ------------------------------------------------------------------------ */

/* A snapshot is a layer's or a model's whole state as bytes (format:
 * docs/snapshot-format.md): little-endian, versioned, CRC-32-checked, the
 * same bytes from every build.  A restored cache is bit-identical: rows,
 * scales, field, imp, positions, alive map, linear state, eviction policy.
 * Not during a verify (accept or reject first). */

/* kvc_layer_snapshot_size(): bytes kvc_layer_serialize writes (0 for NULL or
 * while verifying). */
size_t kvc_layer_snapshot_size(const kvc_layer *layer);

/* kvc_layer_serialize():
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_VERIFYING, or KVC_E_LENGTH
 *           (dst_len < kvc_layer_snapshot_size). */
kvc_status kvc_layer_serialize(const kvc_layer *layer, uint8_t *dst, size_t dst_len);

/* kvc_layer_deserialize():
 * A new layer from a snapshot; on success *out owns it.  Every byte is
 * checked; nothing is allocated before the counts are known to fit the
 * snapshot, and nothing leaks on refusal.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_SNAPSHOT_MAGIC,
 *           KVC_E_SNAPSHOT_VERSION, KVC_E_SNAPSHOT_TRUNCATED,
 *           KVC_E_SNAPSHOT_CHECKSUM, KVC_E_SNAPSHOT_CORRUPT,
 *           KVC_E_SNAPSHOT_TOO_LARGE or KVC_E_NOMEM; *out NULL on error. */
kvc_status kvc_layer_deserialize(const uint8_t *src, size_t len, kvc_layer **out);

/* ------------------------------------------------------------------------ */
/* Linear-attention layers                                                   */
/* ------------------------------------------------------------------------ */

/* A linear layer keeps, instead of rows, a fixed-size recurrent state
 * S[head][feature][value_dim] in f64 (linear_state).  One step, per head h:
 *   S[h][f][:] <- decay[h][f] * S[h][f][:] + phi_k[h][f] * v[h][:]   (every f)
 *   out[h][:]   = sum_f phi_q[h][f] * S[h][f][:]   (after the update, f in order)
 * in f64, the output rounded to f32.  Its seq_len stays 0 (it holds no rows);
 * kvc_layer_steps counts the steps instead.  It cannot be truncated: a
 * speculative verify (kvc_layer_begin_verify) is how it rolls back. */

/* kvc_layer_create_linear():
 * Creates a linear layer with a zero state of num_heads x num_features x
 * value_dim f64.  `phase_mass` >= 0 sets m = 1 / (1 + phase_mass) of the
 * vmf_phase feature map (0 is the default).  On success *out owns the layer.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_NUM_HEADS, KVC_E_NUM_FEATURES,
 *           KVC_E_VALUE_DIM, KVC_E_PHASE_MASS or KVC_E_NOMEM. */
kvc_status kvc_layer_create_linear(size_t num_heads, size_t num_features, size_t value_dim,
                                   double phase_mass, kvc_layer **out);

/* kvc_layer_linear_step():
 * One step of every head.  `decay`, `phi_k`, `phi_q`: [num_heads x
 * num_features] (decay may be NULL: all ones); `v`: [num_heads x value_dim];
 * `out` receives [num_heads x value_dim].  During a verify the step is
 * tentative: it goes to linear_scratch and the state is untouched.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND (a full layer),
 *           KVC_E_NONFINITE_DECAY, KVC_E_NONFINITE_KEY (phi_k),
 *           KVC_E_NONFINITE_QUERY (phi_q), KVC_E_NONFINITE_VALUE (v),
 *           KVC_E_TOO_LONG, or KVC_E_NOMEM (a tentative step's snapshot). */
kvc_status kvc_layer_linear_step(kvc_layer *layer, const float *decay, const float *phi_k,
                                 const float *phi_q, const float *v, float *out);

/* kvc_layer_linear_step_phase():
 * kvc_layer_linear_step with the vmf_phase feature map: from phases
 * `theta_k`, `theta_q` [num_heads x P], P = num_features / 2,
 *   phi(theta) = [cos(m theta_1..P), sin(m theta_1..P)],  m = 1/(1 + phase_mass),
 * computed in f64.  The phases must be finite.
 * @return : as kvc_layer_linear_step (KVC_E_NONFINITE_KEY / _QUERY for the
 *           phases), or KVC_E_NUM_FEATURES when num_features is odd. */
kvc_status kvc_layer_linear_step_phase(kvc_layer *layer, const float *decay,
                                       const float *theta_k, const float *theta_q,
                                       const float *v, float *out);

/* kvc_layer_linear_state():
 * Copies the committed state, num_heads x num_features x value_dim f64.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND or KVC_E_LENGTH. */
kvc_status kvc_layer_linear_state(const kvc_layer *layer, double *dst, size_t dst_len);

/* kvc_layer_linear_scratch():
 * Copies the tentative states of a verify, one per tentative step in order
 * ([tentative x state size] f64; empty outside a verify).
 * @return : as kvc_layer_linear_state. */
kvc_status kvc_layer_linear_scratch(const kvc_layer *layer, double *dst, size_t dst_len);

/* Linear accessors; 0 for a full layer (and kvc_layer_kind says which);
 * value_dim and steps are also a delta layer's, steps a conv layer's. */
kvc_kind kvc_layer_kind(const kvc_layer *layer);
size_t kvc_layer_num_heads(const kvc_layer *layer);
size_t kvc_layer_num_features(const kvc_layer *layer);
size_t kvc_layer_value_dim(const kvc_layer *layer);
double kvc_layer_phase_mass(const kvc_layer *layer);
/* Steps taken, tentative ones included. */
size_t kvc_layer_steps(const kvc_layer *layer);

/* ------------------------------------------------------------------------ */
/* Recurrent layers: short convolutions, gated delta rules, Mamba-2        */
/* ------------------------------------------------------------------------ */

/* A conv, delta or Mamba-2 layer keeps an f32 state instead of rows (what llama.cpp
 * keeps): its seq_len stays 0 and kvc_layer_steps counts the positions it
 * took.  A step call takes T tokens at once; every call writes a second
 * state of the same length (the lane), never the state itself, so that:
 *   - during a verify, the drafts step the lane in turn, each draft's
 *     inputs are kept and the state after every fourth draft is copied
 *     aside: kvc_layer_accept(j) of all of them swaps the lane in, of none
 *     changes nothing, and of some takes the copy at or below j and steps
 *     it again to j from the kept inputs (at most three steps of the scan
 *     alone, the drafts' own bits; it allocates nothing);
 *   - outside one, the state before the last call is kept until the next:
 *     kvc_layer_truncate_last(layer, n) with n the last call's T takes the
 *     call back (any other n: KVC_E_KIND), so that a model's forward pass
 *     stays all or nothing.
 * Heads run on the thread pool, each over the call's tokens in order: the
 * same bits at any thread count. */

/* kvc_layer_create_conv():
 * A short convolution of `channels` channels and `kernel` taps (LFM2's
 * shortconv, L_cache = kernel): its state is the last kernel - 1 inputs of
 * each channel, zero at first.  On success *out owns the layer.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_CONV or KVC_E_NOMEM. */
kvc_status kvc_layer_create_conv(size_t channels, size_t kernel, kvc_layer **out);

/* kvc_layer_create_delta():
 * A gated delta rule (Qwen3.5's Gated DeltaNet) of `value_heads` heads of
 * value_dim values reading `key_heads` heads of key_dim keys and queries
 * (value head h reads key head h mod key_heads; value_heads a multiple of
 * key_heads), with a convolution of `kernel` taps in front over its
 * channels: q (key_heads x key_dim), k (the same), v (value_heads x
 * value_dim), in that order.  The state: the convolution's, then per value
 * head a key_dim x value_dim matrix, zero at first.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_NUM_HEADS, KVC_E_NUM_FEATURES
 *           (key_dim), KVC_E_VALUE_DIM, KVC_E_CONV or KVC_E_NOMEM. */
kvc_status kvc_layer_create_delta(size_t key_heads, size_t value_heads, size_t key_dim, size_t value_dim,
                                  size_t kernel, kvc_layer **out);

/* kvc_layer_create_mamba2():
 * A Mamba-2 selective scan (llama.cpp's ssm_scan with a scalar decay per
 * head) of `heads` heads of head_dim values reading `groups` groups of B and
 * C of state_size values each (head h reads group h / (heads / groups);
 * heads a multiple of groups), with a convolution of `kernel` taps in front
 * over its channels: x (heads x head_dim), B (groups x state_size), C (the
 * same), in that order.  The state: the convolution's, then per head a
 * state_size x head_dim matrix, zero at first.  Its geometry reads as a
 * delta layer's: key_heads the groups, value_heads the heads, key_dim the
 * state size, value_dim head_dim.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_NUM_HEADS, KVC_E_NUM_FEATURES
 *           (state_size), KVC_E_VALUE_DIM (head_dim), KVC_E_CONV or
 *           KVC_E_NOMEM. */
kvc_status kvc_layer_create_mamba2(size_t heads, size_t head_dim, size_t groups, size_t state_size, size_t kernel,
                                   kvc_layer **out);

/* kvc_layer_create_attn_mamba2():
 * A layer that holds both (Falcon-H1's blocks, where attention and a Mamba-2
 * mixer read the same input): the rows of a full layer (num_kv_heads,
 * head_dim, mode: as kvc_layer_create) and the state of a Mamba-2 layer
 * (heads, ssm_head_dim, groups, state_size, kernel: as
 * kvc_layer_create_mamba2).  Appends, attention and every call on rows go
 * to the rows; kvc_layer_mamba2_n steps the state; every call on the
 * layer reaches both, all or nothing:
 *   - clone: the rows shared page by page (a fork), the state copied;
 *     clear, free, memory_bytes, capacity_bytes: the sum of both;
 *   - a verify: the drafts are rows appended and steps taken;
 *     kvc_layer_draft_len is the fewer of the two, and accept(j) keeps j
 *     of each;
 *   - kvc_layer_truncate_last(layer, n): only n = 0 or the state's last
 *     call (as a Mamba-2 layer), which takes back those rows and that call;
 *     any other n: KVC_E_KIND, nothing changes.  kvc_layer_exact_rollback
 *     is at most that call's steps;
 *   - a snapshot holds the rows, then the state;
 *   - no eviction (kvc_layer_evict, kvc_layer_set_max_rows: KVC_E_KIND).
 * Its positions are its rows' next position and its state's steps; a model
 * is aligned (kvc_model_serialize, kvc_model_create) only when they agree,
 * and kvc_layer_steps counts the state's.  A prefix cache holds it as it
 * holds a recurrent layer: an entry matches whole.
 * @return : as kvc_layer_create, then as kvc_layer_create_mamba2. */
kvc_status kvc_layer_create_attn_mamba2(size_t num_kv_heads, size_t head_dim, kvc_mode mode, size_t heads,
                                        size_t ssm_head_dim, size_t groups, size_t state_size, size_t kernel,
                                        kvc_layer **out);

/* kvc_layer_conv_n():
 * T tokens through a conv layer: x [T x channels] the inputs, `weights`
 * [channels x kernel] the taps (w[c][kernel - 1] meets the newest input),
 * y [T x channels] receives
 *   y[t][c] = sum_k in[t + k][c] * w[c][k],  in = (the kept inputs, x)
 * the taps summed in order.  No bias, no activation: the caller's.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND (another kind),
 *           KVC_E_LENGTH (T is 0 or above KVC_MAX_STEP_TOKENS),
 *           KVC_E_NONFINITE_INPUT, KVC_E_TOO_LONG or KVC_E_NOMEM; nothing
 *           changes on error. */
kvc_status kvc_layer_conv_n(kvc_layer *layer, size_t T, const float *x, const float *weights, float *y);

/* kvc_layer_delta_n():
 * T tokens through a delta layer.  qkv [T x channels]: the projections
 * before the convolution; conv_weights [channels x kernel]; alpha, beta
 * [T x value_heads]: each head's decay (exp of its gate) and write
 * strength; eps: the L2 norm's floor.  Per token: the convolution, SiLU on
 * every channel, each key head of q and k times 1 / max(|.|, eps) (the
 * squares summed in double) and q times 1 / sqrt(key_dim); then per value
 * head h, S its matrix (row i paired with k[i]):
 *   S <- alpha S;  d = beta (v - S^T k);  S += k d^T;  out[t][h] = S^T q
 * every sum in key order, from 0 (the same bits in every kernel set).
 * out [T x value_heads x value_dim].
 * @return : as kvc_layer_conv_n. */
kvc_status kvc_layer_delta_n(kvc_layer *layer, size_t T, const float *qkv, const float *conv_weights,
                             const float *alpha, const float *beta, float eps, float *out);

/* kvc_layer_mamba2_n():
 * T tokens through a Mamba-2 layer.  xbc [T x channels]: x, B and C before
 * the convolution; conv_weights [channels x kernel]; conv_bias [channels]
 * (NULL: none); dt [T x heads] each head's time step before its bias;
 * dt_bias, a (A, negative: the converter's -exp(A_log)), d (the skip)
 * [heads] each.  Per token: the convolution, the bias, SiLU on every
 * channel; then per head h, g its group, S its matrix (row i paired with
 * B[i] and C[i]):
 *   dt' = softplus(dt + dt_bias)  (x itself above 20, as ggml's);
 *   S <- exp(dt' a) S + B (dt' x)^T;  out[t][h] = S^T C + d x
 * the sum in state order, from 0 (the same bits in every kernel set).  No
 * gate and no norm: the caller's (silu(z) and the grouped RMSNorm).
 * out [T x heads x head_dim].
 * @return : as kvc_layer_conv_n. */
kvc_status kvc_layer_mamba2_n(kvc_layer *layer, size_t T, const float *xbc, const float *conv_weights,
                              const float *conv_bias, const float *dt, const float *dt_bias, const float *a,
                              const float *d, float *out);

/* kvc_layer_recurrent_state():
 * Copies the committed state of a conv, delta or Mamba-2 layer (kvc_layer_state_len
 * floats: the convolution's newest inputs, oldest first, [kernel - 1 x
 * channels]; then each (value) head's [key_dim x value_dim]).
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND or KVC_E_LENGTH. */
kvc_status kvc_layer_recurrent_state(const kvc_layer *layer, float *dst, size_t dst_len);

/* Geometry of a conv, delta or Mamba-2 layer (0 for other kinds and NULL). */
size_t kvc_layer_state_len(const kvc_layer *layer);
size_t kvc_layer_channels(const kvc_layer *layer);
size_t kvc_layer_conv_kernel(const kvc_layer *layer);
size_t kvc_layer_key_heads(const kvc_layer *layer);
size_t kvc_layer_value_heads(const kvc_layer *layer);
size_t kvc_layer_key_dim(const kvc_layer *layer);
/* (A delta or Mamba-2 layer's value_dim is kvc_layer_value_dim's, as a linear layer's.) */

/* ------------------------------------------------------------------------ */
/* Speculative verify                                                        */
/* ------------------------------------------------------------------------ */

/* A verify lets a layer take k draft positions and then keep the first j of
 * them, exactly as if only those had ever been appended: a full layer
 * appends draft rows as usual, a linear layer steps tentatively (one state
 * snapshot per step in linear_scratch).  accept(j) drops the last k - j rows
 * (as kvc_layer_truncate_last: imp slots and the q8 field follow) or commits
 * the snapshot of step j.  Its cost does not grow with the context: a
 * bookkeeping pass over the k - j dropped positions, or one state copy.
 * While a layer verifies, truncate_last and clone are refused
 * (KVC_E_VERIFYING); clear ends the verify. */

/* kvc_layer_begin_verify():
 * @return : KVC_OK, KVC_E_NULL_POINTER, or KVC_E_VERIFYING (already). */
kvc_status kvc_layer_begin_verify(kvc_layer *layer);

/* kvc_layer_accept():
 * Keeps the first j draft positions and ends the verify; j = 0 rejects all.
 * With max_rows set, j > 0 then evicts back to it (kvc_layer_set_max_rows).
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_NOT_VERIFYING, KVC_E_ACCEPT (j
 *           above the draft positions), or KVC_E_NOMEM (the scratch of that
 *           eviction; j = 0 never allocates); nothing changes on error. */
kvc_status kvc_layer_accept(kvc_layer *layer, size_t j);

/* 1 while the layer verifies. */
int kvc_layer_verifying(const kvc_layer *layer);
/* Draft positions since begin_verify (rows or tentative steps); 0 otherwise. */
size_t kvc_layer_draft_len(const kvc_layer *layer);

/* ------------------------------------------------------------------------ */
/* A model's cache: its layers, full and linear                              */
/* ------------------------------------------------------------------------ */

typedef struct kvc_model kvc_model;

/* kvc_model_create():
 * Makes a model of `num_layers` layers, taking ownership of them on success
 * (they are then freed with the model, and kvc_layer_free ignores them).
 * They must be distinct, in no other model, not verifying, and at the same
 * position count (seq_len for full layers, steps for linear ones; a shared
 * layer has none of its own; a layer holding rows and a state: both, equal), and a shared layer's owner must be an earlier
 * layer of the list, full or window (kvc_layer_create_shared).
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_LAYERS, KVC_E_VERIFYING or
 *           KVC_E_NOMEM; on error the caller still owns the layers. */
kvc_status kvc_model_create(kvc_layer *const *layers, size_t num_layers, kvc_model **out);

/* kvc_model_free(): frees the model and its layers.  NULL is a no-op. */
void kvc_model_free(kvc_model *model);

/* kvc_model_clone(): a fork of every layer (kvc_layer_clone).
 * O(pages), no row copied.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_VERIFYING or KVC_E_NOMEM. */
kvc_status kvc_model_clone(const kvc_model *model, kvc_model **out);

/* kvc_model_layer(): layer i, owned by the model (NULL when i is out of range).
 * Use it like any layer, but do not free it. */
kvc_layer *kvc_model_layer(const kvc_model *model, size_t i);
size_t kvc_model_num_layers(const kvc_model *model);
/* Positions every layer has taken in: the least next position (full
 * layers; their seq_len until they evict) or steps (linear); a shared
 * layer's are its owner's, a none layer takes none (0 when every layer is
 * a none layer). */
size_t kvc_model_seq_len(const kvc_model *model);
/* Sums over the layers (a shared layer's memory is 0: its owner counts it). */
size_t kvc_model_memory_bytes(const kvc_model *model);
size_t kvc_model_shared_bytes(const kvc_model *model);
size_t kvc_model_capacity_bytes(const kvc_model *model);

/* kvc_model_truncate_last(): rewinds every layer by n positions (each
 * layer's next position goes back by n, whatever each has evicted).
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND (the model has a linear
 *           layer: roll back with a verify instead), KVC_E_VERIFYING or
 *           KVC_E_WINDOW (a window layer would refuse it); all or nothing. */
kvc_status kvc_model_truncate_last(kvc_model *model, size_t n);

/* kvc_model_clear(): clears every layer (ending a verify).  NULL is a no-op. */
void kvc_model_clear(kvc_model *model);

/* kvc_model_begin_verify(): begins a verify in every layer, or in none.
 * @return : KVC_OK, KVC_E_NULL_POINTER or KVC_E_VERIFYING. */
kvc_status kvc_model_begin_verify(kvc_model *model);

/* kvc_model_accept(): accept(j) in every layer, or in none: every layer must
 * verify and hold the same number k >= j of draft positions (a shared
 * layer's are its owner's: it holds none itself).
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_NOT_VERIFYING, KVC_E_ACCEPT or
 *           KVC_E_NOMEM (as kvc_layer_accept). */
kvc_status kvc_model_accept(kvc_model *model, size_t j);

/* 1 while the model's layers verify. */
int kvc_model_verifying(const kvc_model *model);

/* kvc_model_draft_len():
 * @return : the draft positions a verifying model holds (kvc_layer_draft_len
 *           of its first layer that takes positions: not a shared or none
 *           layer), 0 when it does not verify, has no such layer, or is NULL. */
size_t kvc_model_draft_len(const kvc_model *model);

/* kvc_model_evict(): kvc_layer_evict on every full layer, each by its own
 * importance (linear layers hold no rows), all or none.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_BUDGET, KVC_E_VERIFYING or
 *           KVC_E_NOMEM. */
kvc_status kvc_model_evict(kvc_model *model, size_t budget, size_t sinks, size_t recent);

/* ------------------------------------------------------------------------ */
/* Prefix caches: model caches kept under their tokens, found by prefix      */
/* ------------------------------------------------------------------------ */

/* A prefix cache keeps forks of model caches (kvc_model_clone: they share
 * pages) under the token sequences they hold, and hands back a fork of the
 * one sharing the longest prefix with a new sequence, truncated to it: a
 * conversation that starts with a system prompt someone already prefilled
 * prefills only the rest, and holds the prompt's pages once.  Entries are
 * full-attention models (no linear or window layers: a match truncates)
 * that never evicted, all of the first entry's geometry and mode -- or
 * hybrids, full layers beside conv and delta layers, whose entries match
 * only whole (a state cannot be cut back: the tokens must start with all
 * of an entry's), which keeps a conversation's state at the turn boundaries
 * it returns to.  When the entries'
 * bytes -- each page counted once, kvc_memory_stats' way -- exceed the
 * budget, the least recently added or matched go.  Not thread-safe: one
 * thread at a time per prefix cache. */
typedef struct kvc_prefix_cache kvc_prefix_cache;

/* kvc_prefix_cache_create(): an empty prefix cache whose entries may hold
 * up to budget_bytes.  On success *out owns it (kvc_prefix_cache_free).
 * @return : KVC_OK, KVC_E_NULL_POINTER or KVC_E_NOMEM (*out NULL). */
kvc_status kvc_prefix_cache_create(size_t budget_bytes, kvc_prefix_cache **out);

/* kvc_prefix_cache_free(): frees the cache and its entries (the pages they
 * share with live caches stay with those).  NULL is a no-op. */
void kvc_prefix_cache_free(kvc_prefix_cache *cache);

/* kvc_prefix_cache_add():
 * Keeps a fork of `model` (the caller keeps its own) under `tokens` [n], the
 * tokens its positions hold: n must equal its seq_len.  An entry of the same
 * tokens is replaced.  Then the budget drops least recently used entries --
 * this one too if it alone exceeds the budget: *kept (may be NULL) says
 * whether it stayed.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_VERIFYING, KVC_E_LENGTH (n is
 *           0 or not seq_len), KVC_E_KIND (a linear or window layer), KVC_E_PREFIX or
 *           KVC_E_NOMEM; nothing changes on error. */
kvc_status kvc_prefix_cache_add(kvc_prefix_cache *cache, const uint32_t *tokens, size_t n,
                                const kvc_model *model, int *kept);

/* kvc_prefix_cache_match():
 * Finds the entry whose tokens share the longest prefix with `tokens` [n]
 * (ties: the most recently used; a hybrid entry shares all its tokens or
 * none).  When that prefix has at least
 * KVC_Q8_WINDOW tokens (the sinks a cache starts from), *length receives it
 * and *out a new model the caller owns: a fork of the entry truncated to
 * those positions; else *length = 0 and *out = NULL (no match).  A match
 * counts as a use.  With q4 components, a truncation deeper than the
 * entry's kvc_layer_exact_rollback leaves some rows of the fork's residual
 * window read through their codes (see kvc_layer_exact_rollback) until
 * newer rows push them out; the attention it gives then differs, within
 * q4's error, from a prefill of those tokens.
 * @return : KVC_OK (match or not), KVC_E_NULL_POINTER or KVC_E_NOMEM. */
kvc_status kvc_prefix_cache_match(kvc_prefix_cache *cache, const uint32_t *tokens, size_t n,
                                  size_t *length, kvc_model **out);

/* kvc_prefix_cache_delete(): drops the entry of exactly `tokens` [n], if
 * any; *deleted (may be NULL) says whether there was one.
 * @return : KVC_OK or KVC_E_NULL_POINTER. */
kvc_status kvc_prefix_cache_delete(kvc_prefix_cache *cache, const uint32_t *tokens, size_t n,
                                   int *deleted);

/* kvc_prefix_cache_clear(): drops every entry.  NULL is a no-op. */
void kvc_prefix_cache_clear(kvc_prefix_cache *cache);

/* Entries held, and their bytes (each page once); 0 for NULL. */
size_t kvc_prefix_cache_size(const kvc_prefix_cache *cache);
size_t kvc_prefix_cache_bytes(const kvc_prefix_cache *cache);

/* Model snapshots: the layers' snapshots in one frame; as the layer ones.
 * kvc_model_serialize also returns KVC_E_LAYERS while the layers have taken
 * in different numbers of positions (a runner between two layers of a
 * step): a reader refuses such a snapshot. */
size_t kvc_model_snapshot_size(const kvc_model *model);
kvc_status kvc_model_serialize(const kvc_model *model, uint8_t *dst, size_t dst_len);
kvc_status kvc_model_deserialize(const uint8_t *src, size_t len, kvc_model **out);

/* A model snapshot read in pieces, as a file or a download gives them,
 * holding at most one layer's bytes besides the layers built so far (no
 * whole copy of the snapshot): the way to restore a large cache from
 * storage.
 *   kvc_model_reader_create(total, &reader);
 *   while (kvc_model_reader_next(reader, &dst, &room) == KVC_OK && room > 0) {
 *       n = up to `room` bytes of the snapshot, copied to dst;
 *       if (kvc_model_reader_wrote(reader, n) != KVC_OK) break;
 *   }
 *   status = kvc_model_reader_finish(reader, &model);
 *   kvc_model_reader_free(reader);
 * It refuses what kvc_model_deserialize refuses, and gives the model only
 * once every byte has come and the snapshot's CRC-32 matched; a damaged
 * byte is reported at the first field or checksum it breaks (so its status
 * may differ from kvc_model_deserialize's for the same bytes). */
typedef struct kvc_model_reader kvc_model_reader;

/* kvc_model_reader_create(): a reader of a snapshot of `total` bytes.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_SNAPSHOT_TRUNCATED (too few
 *           bytes for any snapshot) or KVC_E_NOMEM. */
kvc_status kvc_model_reader_create(size_t total, kvc_model_reader **out);

/* kvc_model_reader_next(): where the next bytes go: *dst, with room for
 * *room of them (the reader's own memory, valid until its next call); *room
 * is 0 once every byte has come.
 * @return : KVC_OK, KVC_E_NULL_POINTER, or the failure that stopped the
 *           reader (then *dst NULL, *room 0). */
kvc_status kvc_model_reader_next(kvc_model_reader *reader, uint8_t **dst, size_t *room);

/* kvc_model_reader_wrote(): n bytes were copied to next()'s *dst.  A frame
 * or field they complete is read then; a failure stops the reader, which
 * then returns it from every call.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_LENGTH (n above the room:
 *           nothing changed), KVC_E_NOMEM or a KVC_E_SNAPSHOT_* status. */
kvc_status kvc_model_reader_wrote(kvc_model_reader *reader, size_t n);

/* kvc_model_reader_finish(): the model, once every byte has come and
 * checked; the caller owns it.  Once only.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_SNAPSHOT_TRUNCATED (bytes
 *           are missing), KVC_E_NOMEM or the failure that stopped it. */
kvc_status kvc_model_reader_finish(kvc_model_reader *reader, kvc_model **out);

/* kvc_model_reader_free(): frees the reader and the layers it built that
 * no model took.  NULL is a no-op. */
void kvc_model_reader_free(kvc_model_reader *reader);

/* ------------------------------------------------------------------------ */
/* GGUF files                                                                */
/* ------------------------------------------------------------------------ */

/* A kvc_gguf is the header of a GGUF file (versions 1 to 3, little-endian):
 * its metadata, its tensors' names, types, dims and places, and where the
 * tensor data starts.  Parsing reads a prefix of the file -- the header
 * alone, never the tensor data -- and keeps a copy of what it needs, so the
 * caller's bytes may go as soon as it returns: a loader streams the file,
 * parses the prefix it has, and puts the tensor data where it wants.
 *
 * The file is hostile until checked.  Every count and length is held to the
 * bytes present and to the limits below before it is looped over, and
 * nothing is allocated until the whole header has been read and found
 * valid (then one block, about the header's size).  A refused header builds
 * nothing; kvc_gguf_explain() says in a sentence what is wrong with it.
 *
 * Values: each metadata entry has a value, and entry i's value is value i.
 * An array of arrays has a value per element too (kvc_gguf_array_item), so
 * every value, however deep, is one index.  A scalar reads as element 0.
 * Strings are bytes as the file has them (UTF-8 by the format, not checked),
 * pointers into the kept copy, not NUL-terminated, valid until
 * kvc_gguf_free.
 *
 * Tensors: dims innermost first, as ggml lists them (dims[0] is a row's
 * length); offsets count from the data start (kvc_gguf_data_offset).  A
 * tensor whose type the weight table has (F32, F16, BF16, Q8_0, Q4_0, Q4_1,
 * Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS) is checked in full: rows a
 * whole number of blocks, bytes without overflow, aligned, inside the data and overlapping
 * no other such tensor.  One of another type is kept with its ggml type id
 * so that a later step can refuse it by name; its name, dims and element
 * count are checked, and its offset is aligned, but its size is unknown
 * here: its bytes are reported as 0, and neither its extent nor overlaps
 * with it are checked. */
typedef struct kvc_gguf kvc_gguf;

/* GGUF metadata value types (the file's ids). */
typedef enum kvc_gguf_type {
    KVC_GGUF_UINT8 = 0,
    KVC_GGUF_INT8 = 1,
    KVC_GGUF_UINT16 = 2,
    KVC_GGUF_INT16 = 3,
    KVC_GGUF_UINT32 = 4,
    KVC_GGUF_INT32 = 5,
    KVC_GGUF_FLOAT32 = 6,
    KVC_GGUF_BOOL = 7,
    KVC_GGUF_STRING = 8,
    KVC_GGUF_ARRAY = 9,
    KVC_GGUF_UINT64 = 10,
    KVC_GGUF_INT64 = 11,
    KVC_GGUF_FLOAT64 = 12
} kvc_gguf_type;

/* The reader's limits.  The header (magic to the last tensor info) may be
 * at most 256 MiB: the largest vocabularies (~260k tokens with scores and
 * merges) take ~10 MiB, and a streaming loader holds the header whole.
 * The counts bound what a header of that size could declare to what real
 * models use, with a wide margin (models have ~50 keys, at most ~50k
 * tensors).  Keys are at most 65535 bytes (the GGUF spec), tensor names at
 * most 63 (ggml's GGML_MAX_NAME of 64 holds the NUL).  Array nesting stops
 * at 8 levels.  Tensors have 1 to 4 dims (ggml's GGML_MAX_DIMS), each >= 1,
 * at most 2^48 elements, and the data at most 2^48 bytes: every count,
 * offset and size exact in a double (JavaScript numbers), far beyond any
 * model file. */
#define KVC_GGUF_MAX_HEADER_BYTES ((size_t)1 << 28)
#define KVC_GGUF_MAX_METADATA ((size_t)1 << 16)
#define KVC_GGUF_MAX_TENSORS ((size_t)1 << 20)
#define KVC_GGUF_MAX_KEY_BYTES 65535
#define KVC_GGUF_MAX_NAME_BYTES 63
#define KVC_GGUF_MAX_NESTING 8
#define KVC_GGUF_MAX_DIMS 4
#define KVC_GGUF_MAX_ELEMENTS ((uint64_t)1 << 48)
#define KVC_GGUF_MAX_DATA_BYTES ((uint64_t)1 << 48)
/* The data alignment when the file has no general.alignment (a u32, a
 * power of two). */
#define KVC_GGUF_DEFAULT_ALIGNMENT 32
/* kvc_gguf_find / kvc_gguf_find_tensor: no such key or tensor. */
#define KVC_GGUF_NONE ((size_t)-1)

/* kvc_gguf_parse():
 * Parses the GGUF header in the first `len` bytes of a file (bytes past the
 * header are not read).  On success *out owns a new kvc_gguf (free it with
 * kvc_gguf_free) and *needed (may be NULL) is 0.  When the header goes on
 * past `len`, the status is KVC_E_GGUF_TRUNCATED and *needed is a length to
 * call again with: at least len + 1, and no more than the header takes
 * (exactly its size once the fields that decide it are in).  A loader
 * holding a growing prefix calls again with max(*needed, 2 * len) or what
 * it has, so that re-parsing stays linear in the header's size.  Checks
 * that need the whole header (duplicate keys and names, overlapping
 * tensors) run once it is all there.
 * @return : KVC_OK, KVC_E_NULL_POINTER (bytes with len > 0, or out),
 *           KVC_E_GGUF_MAGIC, KVC_E_GGUF_VERSION, KVC_E_GGUF_TRUNCATED,
 *           KVC_E_GGUF_CORRUPT, KVC_E_GGUF_TOO_LARGE or KVC_E_NOMEM; *out
 *           is NULL on error. */
kvc_status kvc_gguf_parse(const uint8_t *bytes, size_t len, kvc_gguf **out, size_t *needed);

/* kvc_gguf_explain():
 * Parses as kvc_gguf_parse does (keeping nothing) and writes one sentence,
 * NUL-terminated, saying what is wrong: the field, where it is (the
 * metadata key or tensor name it belongs to, its byte offset) and the
 * value or bound at fault, e.g. "corrupt: tensor blk.0.attn_q.weight has
 * 9 dimensions (1 to 4 allowed)"; "ok" for a header that parses.  At most
 * `size` bytes are written, the sentence cut short when it does not fit
 * (size 0 writes nothing).
 * @return : what kvc_gguf_parse returns for these bytes (KVC_E_NULL_POINTER
 *           also for buf NULL with size > 0). */
kvc_status kvc_gguf_explain(const uint8_t *bytes, size_t len, char *buf, size_t size);

/* kvc_gguf_free(): releases a kvc_gguf and every pointer read from it.
 * NULL is a no-op. */
void kvc_gguf_free(kvc_gguf *gguf);

/* The file's GGUF version (1, 2 or 3); the header's bytes, from the magic to
 * the end of the last tensor info; the data alignment; the byte offset of
 * the tensor data in the file (the header's bytes rounded up to the
 * alignment); the data's bytes: the end of its last tensor rounded up to
 * the alignment (a tensor of an unknown type counts to its start).  The
 * file holds all tensors when it has data_offset + data_bytes bytes (the
 * last tensor's padding aside).  All 0 for NULL. */
uint32_t kvc_gguf_version(const kvc_gguf *gguf);
size_t kvc_gguf_header_bytes(const kvc_gguf *gguf);
uint32_t kvc_gguf_alignment(const kvc_gguf *gguf);
uint64_t kvc_gguf_data_offset(const kvc_gguf *gguf);
uint64_t kvc_gguf_data_bytes(const kvc_gguf *gguf);

/* kvc_gguf_metadata_count(): the metadata entries (0 for NULL). */
size_t kvc_gguf_metadata_count(const kvc_gguf *gguf);

/* kvc_gguf_key():
 * Entry i's key: *key (not NUL-terminated) and *len bytes.
 * @return : KVC_OK, KVC_E_NULL_POINTER or KVC_E_GGUF_INDEX (i >=
 *           kvc_gguf_metadata_count). */
kvc_status kvc_gguf_key(const kvc_gguf *gguf, size_t i, const char **key, size_t *len);

/* kvc_gguf_find():
 * @return : the entry (and value) index of the key of these `len` bytes,
 *           or KVC_GGUF_NONE when there is none (or gguf or key is NULL).
 *           O(log entries). */
size_t kvc_gguf_find(const kvc_gguf *gguf, const char *key, size_t len);

/* kvc_gguf_value():
 * Value v's type; for an array, its elements' type (*item_type) and number
 * (*count); for a scalar, *item_type is its type and *count 1.  Any output
 * may be NULL.
 * @return : KVC_OK, KVC_E_NULL_POINTER (gguf) or KVC_E_GGUF_INDEX (no value
 *           v). */
kvc_status kvc_gguf_value(const kvc_gguf *gguf, size_t v, kvc_gguf_type *type,
                          kvc_gguf_type *item_type, size_t *count);

/* kvc_gguf_number():
 * Element j of value v, a number or bool (j = 0 for a scalar), as a double:
 * exact for every type but u64 and i64 beyond 2^53 (rounded to nearest);
 * a bool is 0 or 1 (any nonzero byte is true).
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_GGUF_INDEX (no value v or
 *           element j) or KVC_E_GGUF_TYPE (a string or an array of them,
 *           or of arrays). */
kvc_status kvc_gguf_number(const kvc_gguf *gguf, size_t v, size_t j, double *out);

/* kvc_gguf_int64(), kvc_gguf_uint64():
 * Element j of value v, an integer (or bool) of any width, exactly.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_GGUF_INDEX, or
 *           KVC_E_GGUF_TYPE (not an integer type, or a value outside
 *           int64 / uint64: a negative one for uint64, a u64 above
 *           INT64_MAX for int64). */
kvc_status kvc_gguf_int64(const kvc_gguf *gguf, size_t v, size_t j, int64_t *out);
kvc_status kvc_gguf_uint64(const kvc_gguf *gguf, size_t v, size_t j, uint64_t *out);

/* kvc_gguf_string():
 * Element j of value v, a string or an array of strings: *str (not
 * NUL-terminated) and *len bytes.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_GGUF_INDEX or
 *           KVC_E_GGUF_TYPE (not a string). */
kvc_status kvc_gguf_string(const kvc_gguf *gguf, size_t v, size_t j, const char **str,
                           size_t *len);

/* kvc_gguf_raw():
 * The elements of value v, a number or bool or an array of them, as the
 * file stores them: *bytes bytes of little-endian numbers (count x the
 * type's size), at *data -- not aligned to the type's size (memcpy them).
 * One call reads a 128k-entry array.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_GGUF_INDEX or
 *           KVC_E_GGUF_TYPE (strings, arrays of strings or of arrays). */
kvc_status kvc_gguf_raw(const kvc_gguf *gguf, size_t v, const uint8_t **data, size_t *bytes);

/* kvc_gguf_array_item():
 * The value index (*item) of element j of value v, an array of arrays.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_GGUF_INDEX or
 *           KVC_E_GGUF_TYPE (not an array of arrays). */
kvc_status kvc_gguf_array_item(const kvc_gguf *gguf, size_t v, size_t j, size_t *item);

/* kvc_gguf_tensor_count(): the tensors (0 for NULL). */
size_t kvc_gguf_tensor_count(const kvc_gguf *gguf);

/* kvc_gguf_tensor():
 * Tensor t, in the file's order: its name (*name, not NUL-terminated,
 * *name_len bytes), ggml type id (*type), number of dims (*n_dims, 1 to 4)
 * and dims (dims[0 .. n_dims), innermost first; dims needs room for
 * KVC_GGUF_MAX_DIMS), its data's byte offset from kvc_gguf_data_offset
 * (*offset) and bytes (*bytes: 0 when the weight table does not know the
 * type).  Any output may be NULL.
 * @return : KVC_OK, KVC_E_NULL_POINTER (gguf) or KVC_E_GGUF_INDEX (t >=
 *           kvc_gguf_tensor_count). */
kvc_status kvc_gguf_tensor(const kvc_gguf *gguf, size_t t, const char **name, size_t *name_len,
                           uint32_t *type, size_t *n_dims, uint64_t *dims, uint64_t *offset,
                           uint64_t *bytes);

/* kvc_gguf_tensor_type_name():
 * @return : ggml's name of tensor t's type ("Q4_K"; also for types the
 *           weight table does not have), or NULL for an id ggml does not
 *           define, for t out of range or gguf NULL. */
const char *kvc_gguf_tensor_type_name(const kvc_gguf *gguf, size_t t);

/* kvc_gguf_find_tensor():
 * @return : the index of the tensor named by these `len` bytes, or
 *           KVC_GGUF_NONE (also for NULL arguments).  O(log tensors). */
size_t kvc_gguf_find_tensor(const kvc_gguf *gguf, const char *name, size_t len);

/* kvc_weight_dequantize():
 * The f32 values of elements [first, first + count) of a tensor of ggml
 * type `type` whose data starts at `src` (row after row, each a whole number
 * of the type's blocks, as a GGUF file lays them out): ggml's dequantize
 * arithmetic, value for value.  `src` must hold every block those elements
 * lie in; `dst` receives count floats.
 * @return : KVC_OK, KVC_E_NULL_POINTER (src or dst with count > 0) or
 *           KVC_E_WEIGHT_TYPE (a type the weight table does not have). */
kvc_status kvc_weight_dequantize(uint32_t type, const uint8_t *src, size_t first, size_t count,
                                 float *dst);

/* ------------------------------------------------------------------------ */
/* The model runner: a GGUF language model on a model cache                 */
/* ------------------------------------------------------------------------ */

/* A language model read from a GGUF file (kvc_gguf_parse): its architecture
 * (llama, qwen2, qwen3, gemma3, smollm3 or phi3), hyperparameters and
 * tensors, the weights left in their GGUF encoding (F32, F16, BF16, Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS) in one region
 * that holds the file's tensor data byte for byte (until kvc_lm_pack_weights
 * packs Q8_0's and Q4_K's matrices in place).  Its forward pass runs on a kvc_model
 * of its geometry: the cache holds the keys and values, in any mode.  RoPE
 * turns the first rope.dimension_count channels of a head (all when absent), by
 * rope_freqs.weight's factors when the file has them, else by LongRoPE's
 * (phi3): rope_factors_long.weight when context_length passes
 * rope.scaling.original_context_length, else rope_factors_short.weight --
 * llama.cpp's choice for a context of the model's full length. */
typedef struct kvc_lm kvc_lm;

/* kvc_lm_create():
 * Reads the architecture and hyperparameters from `gguf`'s metadata and
 * checks every tensor the architecture uses (present, its shape, a
 * supported type).  The weights region (kvc_lm_weights_bytes: the file's
 * tensor data, kvc_gguf_data_bytes) is not allocated yet: the caller checks
 * that the model and its cache fit, then kvc_lm_alloc_weights, then writes
 * the file's bytes from kvc_gguf_data_offset on into kvc_lm_weights (any
 * bytes are valid weights).  `gguf` may be freed afterwards.  On a refusal `message`
 * (may be NULL; message_len bytes, NUL-terminated, cut to fit) says what is
 * wrong, naming the key, the tensor, its type and what is supported.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_ARCH (an architecture this
 *           runner does not read), KVC_E_MODEL_FILE (missing or unusable
 *           metadata, a tensor missing or of the wrong shape),
 *           KVC_E_WEIGHT_TYPE (a tensor of a type it does not read) or
 *           KVC_E_NOMEM; nothing is created. */
kvc_status kvc_lm_create(const kvc_gguf *gguf, kvc_lm **out, char *message, size_t message_len);
/* kvc_lm_free(): frees the model (its weights and scratch).  NULL is a no-op. */
void kvc_lm_free(kvc_lm *lm);

/* kvc_lm_alloc_weights():
 * Allocates the weights region (once; a second call does nothing).
 * @return : KVC_OK, KVC_E_NULL_POINTER or KVC_E_NOMEM (it does not fit the
 *           memory: the model is as it was, still without weights). */
kvc_status kvc_lm_alloc_weights(kvc_lm *lm);
/* The weights region the caller fills (NULL before kvc_lm_alloc_weights),
 * and its size: kvc_gguf_data_bytes of the file (SIZE_MAX when that is more
 * than this build's address space). */
uint8_t *kvc_lm_weights(kvc_lm *lm);
size_t kvc_lm_weights_bytes(const kvc_lm *lm);
/* kvc_lm_pack_weights():
 * Once the weights region holds the file's bytes: packs, in place, every
 * matrix of a type that has a layout for the kernels (Q8_0's four rows
 * interleaved), so that the products read one load for several rows.  The
 * results are the same bits packed or not; only the speed differs.  The
 * weights region no longer holds the file's bytes afterwards: digest it
 * with kvc_lm_digest.  A second call does nothing.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND (no weights region yet)
 *           or KVC_E_NOMEM (its few rows of scratch did not fit: nothing is
 *           packed, and the model runs as well from the file's layout). */
kvc_status kvc_lm_pack_weights(kvc_lm *lm);
/* kvc_lm_digest():
 * kvc_digest of bytes [offset, offset + n) of the file's tensor data as the
 * weights region holds it (past a per-layer table that stays outside, its
 * offsets moved down by the table's bytes: the region's own offsets),
 * whether kvc_lm_pack_weights has run or not: the same value either way.
 * 0 for a NULL model, a model without weights, or a range past the region. */
uint64_t kvc_lm_digest(const kvc_lm *lm, size_t offset, size_t n, uint64_t seed);
/* The scratch a forward pass has allocated so far (it grows with the batch
 * and, with importance, the context), and the verify's held importance. */
size_t kvc_lm_scratch_bytes(const kvc_lm *lm);

/* The model's shape; 0 (NULL) for a NULL model.  head_dim is per head
 * (qwen3: not dim / num_heads); the cache needs num_layers full layers of
 * num_kv_heads x head_dim. */
const char *kvc_lm_architecture(const kvc_lm *lm);
size_t kvc_lm_num_layers(const kvc_lm *lm);
size_t kvc_lm_dim(const kvc_lm *lm);
size_t kvc_lm_num_heads(const kvc_lm *lm);
size_t kvc_lm_num_kv_heads(const kvc_lm *lm);
size_t kvc_lm_head_dim(const kvc_lm *lm);
size_t kvc_lm_ffn_dim(const kvc_lm *lm);
size_t kvc_lm_vocab_size(const kvc_lm *lm);
size_t kvc_lm_context_length(const kvc_lm *lm);
float kvc_lm_rms_eps(const kvc_lm *lm);
float kvc_lm_rope_base(const kvc_lm *lm);
/* The window of layer `layer`'s attention (attention.sliding_window, for
 * the layers the architecture windows), 0 for a global layer (and NULL or
 * a layer out of range): kvc_lm_forward takes a cache whose layer is a
 * window layer of that window (kvc_layer_create_window) exactly there. */
size_t kvc_lm_layer_window(const kvc_lm *lm, size_t layer);

/* The kind of layer `layer` (KVC_KIND_FULL for NULL or a layer out of
 * range): kvc_lm_forward takes a cache whose layer is of this kind --
 * full, window (kvc_lm_layer_window), shared (gemma4's shared-KV blocks:
 * kvc_layer_create_shared of kvc_lm_layer_owner), or a recurrent layer of
 * the shape below: KVC_KIND_CONV (lfm2) or KVC_KIND_DELTA (qwen35). */
kvc_kind kvc_lm_layer_kind(const kvc_lm *lm, size_t layer);

/* A layer's attention: its head size and KV heads (a full or window layer
 * of the cache has them; a shared one attends over its owner's), 0 for a
 * recurrent layer, NULL or a layer out of range.  gemma4's window and
 * global layers differ in head size. */
size_t kvc_lm_layer_head_dim(const kvc_lm *lm, size_t layer);
size_t kvc_lm_layer_kv_heads(const kvc_lm *lm, size_t layer);

/* The layer a shared layer attends over (an earlier full or window layer);
 * SIZE_MAX for any other layer, NULL or a layer out of range. */
size_t kvc_lm_layer_owner(const kvc_lm *lm, size_t layer);

/* The width of each block's slice of a token's per-layer input (gemma4's
 * per-layer embeddings, embedding_length_per_layer_input); 0 without them
 * or for NULL. */
size_t kvc_lm_per_layer_dim(const kvc_lm *lm);

/* The shape of the model's recurrent layers (each 0 for a model without
 * them, or NULL). A conv layer (lfm2) is kvc_layer_create_conv's channels
 * and kernel; a delta layer (qwen35) kvc_layer_create_delta's kernel, key
 * heads, value heads, key dim and value dim, its channels the convolved
 * queries, keys and values (2 key_heads key_dim + value_heads value_dim).
 * State length is the floats of one layer's state (kvc_layer_state_len). */
size_t kvc_lm_recurrent_channels(const kvc_lm *lm);
size_t kvc_lm_recurrent_kernel(const kvc_lm *lm);
size_t kvc_lm_recurrent_key_heads(const kvc_lm *lm);
size_t kvc_lm_recurrent_value_heads(const kvc_lm *lm);
size_t kvc_lm_recurrent_key_dim(const kvc_lm *lm);
size_t kvc_lm_recurrent_value_dim(const kvc_lm *lm);
size_t kvc_lm_recurrent_state_len(const kvc_lm *lm);

/* Tokens a forward pass computes at once: a longer prefill goes through in
 * chunks of this many, and a verify holds at most this many. */
#define KVC_LM_BATCH 512

/* kvc_lm_forward() flags. */
#define KVC_LM_IMPORTANCE 1u /* add each token's attention (summed over the query heads) to its layer's imp */
#define KVC_LM_VERIFY 2u     /* a speculative verify: begin one on the cache; kvc_lm_keep ends it */
#define KVC_LM_SPAN 4u       /* the call's inputs (at most KVC_LM_BATCH, not a verify) attend each other both
                                ways (kvc_layer_attend_span): Gemma 3's image tokens */

/* kvc_lm_forward():
 * Runs tokens [n] through the model at the cache's next position on, their
 * keys and values appended to every layer of `cache`, and writes the logits
 * of the last `logit_rows` tokens, [logit_rows x vocab_size], to `logits`.
 * A token's logits are the same bits alone or in a batch, on any number of
 * threads.  KVC_LM_IMPORTANCE adds, token by token in order, the attention it
 * gave every slot (summed over its query heads in order) to imp -- what
 * eviction reads.  KVC_LM_VERIFY begins a verify on the cache (n <=
 * KVC_LM_BATCH tokens: the pending one and its drafts) and holds the
 * importance until kvc_lm_keep -- or, on a cache that verifies already
 * (without KVC_LM_IMPORTANCE then), takes n more drafts into it, up to
 * KVC_LM_BATCH in all: a draft model decodes its drafts one by one inside
 * one verify, and kvc_lm_keep keeps those the target model accepted.  A
 * failed verify ends rejected, drafts before the call too.  A failure appends nothing: the rows of the
 * call go again (a q4 component's rows back past kvc_layer_exact_rollback
 * read through their codes), though imp may keep attention the call gave to
 * older positions.
 * @return : KVC_OK, KVC_E_NULL_POINTER (also: the weights are not allocated),
 *           KVC_E_LENGTH (n = 0, logit_rows > n,
 *           unknown flags, a verify of more than KVC_LM_BATCH tokens),
 *           KVC_E_LAYERS (the cache is not of the model's geometry, or its
 *           layers stand at different positions), KVC_E_VERIFYING (the
 *           cache verifies, and the call is not a verify without importance),
 *           KVC_E_TOKEN (an id >= vocab_size), KVC_E_TOO_LONG,
 *           KVC_E_NONFINITE_KEY / _VALUE / _QUERY (the weights computed NaN or
 *           infinity) or KVC_E_NOMEM. */
kvc_status kvc_lm_forward(kvc_lm *lm, kvc_model *cache, const uint32_t *tokens, size_t n, float *logits,
                          size_t logit_rows, uint32_t flags);

/* kvc_lm_forward_rows():
 * kvc_lm_forward for a model whose per-layer embeddings stay outside its
 * weights (kvc_lm_keep_per_layer_outside): `rows` holds the n tokens' rows of
 * the table, in order, kvc_lm_per_layer_row_bytes each, as they are in the
 * file.  A model whose table is inside takes rows NULL (and reads its own).
 * @return : as kvc_lm_forward; KVC_E_NULL_POINTER also for rows NULL where
 *           the table is outside, KVC_E_KIND for rows where it is inside. */
kvc_status kvc_lm_forward_rows(kvc_lm *lm, kvc_model *cache, const uint32_t *tokens, size_t n, const uint8_t *rows,
                               float *logits, size_t logit_rows, uint32_t flags);

/* kvc_lm_forward_input():
 * kvc_lm_forward_rows with more said of the inputs.  Exactly one of
 * `tokens` (n ids) and `embeddings` is given: embeddings [n x kvc_lm_dim]
 * f32 are rows of the model's embeddings -- an image's, from its encoder
 * (kvc_vision_encode) -- in place of token ids, each going into the first
 * block as it is (no embedding scale); a model with per-layer embeddings
 * gives them token 0's per-layer input (llama.cpp's gemma4 does), so where
 * the table stays outside, `rows` holds token 0's row n times.
 * `positions` (may be NULL: the cache's next positions) gives each input's
 * RoPE position as 4 coordinates (t, y, x, e), [n x 4]: a model with
 * multimodal RoPE (rope.dimension_sections, qwen35) turns each pair of
 * channels by the coordinate its section says -- an image's tokens at
 * (p, p + row, p + column, 0), text at (p, p, p, 0) -- and any other model
 * by t.  The cache's rows still go at its next positions.
 * @return : as kvc_lm_forward_rows (KVC_E_TOKEN for tokens only);
 *           KVC_E_NULL_POINTER for neither tokens nor embeddings, KVC_E_KIND
 *           for both; a non-finite embedding fails as KVC_E_NONFINITE_KEY,
 *           _VALUE or _QUERY. */
kvc_status kvc_lm_forward_input(kvc_lm *lm, kvc_model *cache, const uint32_t *tokens, const float *embeddings, size_t n,
                                const uint32_t *positions, const uint8_t *rows, float *logits, size_t logit_rows,
                                uint32_t flags);

/* kvc_lm_keep_per_layer_outside():
 * Leaves the per-layer embeddings (gemma4's per_layer_token_embd: a row of
 * kvc_lm_per_layer_row_bytes a token, billions of values, each read only for
 * its token) out of the weights region, before kvc_lm_alloc_weights: the
 * region is then the file's tensor data without the table's bytes
 * (kvc_lm_per_layer_outside_range), the tensors after it moved down by
 * them, and every forward pass takes its tokens' rows (kvc_lm_forward_rows).
 * A file whose tensor data passes the address space (wasm32: 4 GiB) may fit
 * it without the table: kvc_lm_weights_bytes then says.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_KIND (the model has no such
 *           table, or its weights are allocated already). */
kvc_status kvc_lm_keep_per_layer_outside(kvc_lm *lm);

/* The bytes of a token's row of the per-layer embeddings (0 without them or
 * for NULL); and where the table lies in the file's tensor data (from
 * kvc_gguf_data_offset) while it stays outside: *offset and *bytes, both 0
 * when it is inside or absent. */
size_t kvc_lm_per_layer_row_bytes(const kvc_lm *lm);
void kvc_lm_per_layer_outside_range(const kvc_lm *lm, uint64_t *offset, uint64_t *bytes);

/* kvc_lm_keep():
 * Ends the verify a KVC_LM_VERIFY forward began: keeps its first n tokens
 * (kvc_model_accept) and adds their held importance, each kept token's at
 * the positions it saw that the cache still holds.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_NOT_VERIFYING, KVC_E_ACCEPT
 *           (n above the verify's tokens) or KVC_E_NOMEM. */
kvc_status kvc_lm_keep(kvc_lm *lm, kvc_model *cache, size_t n);

/* ---- embeddings and reranking ---- */

/* How an embedding model makes one vector of a text's tokens: GGUF's
 * <arch>.pooling_type, numbered as llama.cpp numbers it.  NONE: a vector
 * per token; MEAN: their mean; CLS: the first token's; LAST: the last
 * token's; RANK: a reranker's scores of the text (a query and a document
 * formatted into one), its classification head on the CLS token (the last
 * one for qwen3) -- kvc_lm_rank_outputs of them. */
typedef enum kvc_pooling {
    KVC_POOLING_NONE = 0,
    KVC_POOLING_MEAN = 1,
    KVC_POOLING_CLS = 2,
    KVC_POOLING_LAST = 3,
    KVC_POOLING_RANK = 4
} kvc_pooling;

/* The file's pooling: KVC_POOLING_NONE for a model without one (a model
 * that generates) and for NULL. */
kvc_pooling kvc_lm_pooling(const kvc_lm *lm);
/* 1 when the model's attention is causal (every model that generates, and
 * qwen3's embedding models), 0 for an encoder's both ways (gemma-embedding,
 * or as <arch>.attention.causal says); 0 for NULL. */
int kvc_lm_causal(const kvc_lm *lm);
/* The size of a pooled embedding: the model's dim, or what its dense layers
 * give (0 for NULL). */
size_t kvc_lm_embedding_dim(const kvc_lm *lm);
/* The scores RANK pooling gives a text: the rows of the file's cls.output
 * (<arch>.classifier.output_labels; 1 without them), 0 for a model without
 * cls.output or NULL. */
size_t kvc_lm_rank_outputs(const kvc_lm *lm);

/* kvc_lm_embed():
 * The embeddings of `count` texts given end to end in `tokens` (text j: the
 * next lengths[j] >= 1 tokens), computed in one pass of the weights, each
 * text attending to itself alone, from position 0 (causal or both ways as
 * kvc_lm_causal says; a window layer over its window, symmetric for an
 * encoder; lfm2's convolutions over the text's inputs, centred for an
 * encoder), then pooled as `pooling` says and through the file's dense
 * layers.  out: [count x kvc_lm_embedding_dim] (MEAN, CLS, LAST), [sum of
 * lengths x kvc_lm_embedding_dim] (NONE), or [count x kvc_lm_rank_outputs]
 * (RANK), not normalised.  A text's values are the same bits alone or
 * among any others, on any number of threads.  The pass holds a block's
 * rows in a layer of its own, freed after the block: nothing of a text is
 * kept after the call (the
 * model's scratch grows to the pass's tokens and stays, as after a forward
 * pass; kvc_lm_scratch_bytes).
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_LENGTH (count 0, a text of 0
 *           tokens or longer than kvc_lm_context_length, or more than
 *           KVC_MAX_POSITIONS tokens in all), KVC_E_TOKEN, KVC_E_KIND (a
 *           pooling out of range, RANK without cls.output, or a model whose
 *           layers a text cannot have alone: delta, shared, per-layer
 *           embeddings outside the weights), or KVC_E_NOMEM; out untouched
 *           on error. */
kvc_status kvc_lm_embed(kvc_lm *lm, const uint32_t *tokens, const uint32_t *lengths, size_t count,
                        kvc_pooling pooling, float *out);

/* ---- vision encoders: images in ---- */

/* A kvc_vision is an image encoder read from a projector GGUF file
 * (llama.cpp's mtmd: general.architecture "clip", the vision tower and
 * the projector of a multimodal model, beside its language model's file):
 * the patches of a preprocessed tile through the encoder's blocks, then
 * the projector that makes them rows of the language model's embeddings,
 * computing what llama.cpp's clip graph computes for clip.projector_type
 * "idefics3" (SmolVLM, SmolVLM2), "lfm2" (LFM2-VL), "gemma3", "gemma4v"
 * (Gemma 4) and "qwen3vl_merger" (Qwen3-VL, Qwen3.5; its deepstack
 * features appended to each row).  Like a
 * kvc_lm its weights region is the file's tensor data byte for byte,
 * matrices left in their GGUF encoding (a projector's are never packed). */
typedef struct kvc_vision kvc_vision;

/* kvc_vision_create():
 * Reads the projector type and the encoder's hyperparameters from
 * `gguf`'s metadata and checks every tensor they use (present, its shape,
 * a supported type) and every size (bounded before anything is sized by
 * it).  The weights region is not allocated yet: as kvc_lm_create, the
 * caller then calls kvc_vision_alloc_weights and writes the file's bytes
 * from kvc_gguf_data_offset on into kvc_vision_weights.  `gguf` may be
 * freed afterwards.  On a refusal `message` (may be NULL; message_len
 * bytes, NUL-terminated, cut to fit) says what is wrong.
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_ARCH (not a projector file,
 *           or a projector type this library does not encode),
 *           KVC_E_MODEL_FILE (missing or unusable metadata, a tensor
 *           missing or of the wrong shape), KVC_E_WEIGHT_TYPE or
 *           KVC_E_NOMEM; nothing is created. */
kvc_status kvc_vision_create(const kvc_gguf *gguf, kvc_vision **out, char *message, size_t message_len);
/* kvc_vision_free(): frees the encoder (its weights and scratch).  NULL is a no-op. */
void kvc_vision_free(kvc_vision *vision);

/* kvc_vision_alloc_weights():
 * Allocates the weights region (once; a second call does nothing).
 * @return : KVC_OK, KVC_E_NULL_POINTER or KVC_E_NOMEM (the encoder is as
 *           it was, without weights). */
kvc_status kvc_vision_alloc_weights(kvc_vision *vision);
/* The weights region the caller fills (NULL before
 * kvc_vision_alloc_weights), and its size: kvc_gguf_data_bytes of the file
 * (SIZE_MAX when that is more than this build's address space). */
uint8_t *kvc_vision_weights(kvc_vision *vision);
size_t kvc_vision_weights_bytes(const kvc_vision *vision);

/* clip.projector_type ("idefics3", "lfm2", "gemma3", "gemma4v",
 * "qwen3vl_merger"); NULL for NULL. */
const char *kvc_vision_projector(const kvc_vision *vision);
/* The width of each row encode gives: the language model's embedding
 * width the projector projects to -- with qwen3vl_merger's deepstack, that
 * width times 1 + the deepstack blocks, their features after the row's
 * own, as llama.cpp's clip_n_mmproj_embd (0 for NULL). */
size_t kvc_vision_output_dim(const kvc_vision *vision);
/* The encoder's patch size in pixels and its merge factor (patches merged
 * per side into one row; 1: none); 0 for NULL. */
size_t kvc_vision_patch_size(const kvc_vision *vision);
size_t kvc_vision_merge(const kvc_vision *vision);

/* kvc_vision_tokens():
 * @return : the rows kvc_vision_encode gives for a tile of width x height
 *           pixels, or 0 for a size it cannot take: a side not a whole
 *           number of patches, a grid other than the position table's
 *           (idefics3, gemma3: their image_size square) or wider than its
 *           tables (gemma4v), not whole 2 x 2 blocks (qwen3vl_merger), or
 *           more patches than an encode takes (2^14). */
size_t kvc_vision_tokens(const kvc_vision *vision, size_t width, size_t height);

/* kvc_vision_encode():
 * Encodes one preprocessed tile: `pixels` [height x width x 3], f32 RGB
 * interleaved (llama.cpp's clip_image_f32), already normalised; writes
 * kvc_vision_tokens(width, height) rows of kvc_vision_output_dim floats to
 * `out`, in the order llama.cpp's clip gives them.  The products run on the
 * thread pool, the same bits at any thread count.  The first encode reads
 * a transposed weight (gemma3's projection) into a copy of its own: write
 * the weights before it.
 * @return : KVC_OK, KVC_E_NULL_POINTER (vision, pixels, out, or the
 *           weights not allocated), KVC_E_LENGTH (a size
 *           kvc_vision_tokens refuses) or KVC_E_NOMEM (out untouched). */
kvc_status kvc_vision_encode(kvc_vision *vision, const float *pixels, size_t width, size_t height, float *out);
/* The scratch encodes have allocated so far. */
size_t kvc_vision_scratch_bytes(const kvc_vision *vision);

/* kvc_vision_plan():
 * How an image of width x height pixels goes through the encoder, as
 * llama.cpp's mtmd prepares it for this projector type (resized, tiled,
 * an overview last where the type has one), without encoding anything:
 * out[0] the tiles, out[1] and out[2] the rows and columns of the grid
 * before the overview (0 and 0: none), out[3] 1 when the last tile is the
 * overview, out[4] the rows the encoder gives for all tiles; then per tile
 * 5 words: its width and height in pixels, its rows, and those rows as a
 * grid_x x grid_y grid.  out_len counts out's words (5 + 5 x 64 hold any
 * plan).
 * @return : KVC_OK, KVC_E_NULL_POINTER, KVC_E_LENGTH (a side 0 or above
 *           100000 pixels, more than 2^30 pixels, out_len too small). */
kvc_status kvc_vision_plan(const kvc_vision *vision, size_t width, size_t height, uint32_t *out, size_t out_len);

/* kvc_vision_encode_tile():
 * Tile `tile` of an image's plan (kvc_vision_plan): the image's RGBA bytes
 * [height x width x 4] (alpha dropped) resized, cut and normalised as mtmd
 * does it, then encoded (kvc_vision_encode): the tile's rows x
 * kvc_vision_output_dim floats to `out`.
 * @return : as kvc_vision_encode; KVC_E_LENGTH also for a tile past the
 *           plan or a size kvc_vision_plan refuses, KVC_E_MODEL_FILE for a
 *           projector whose preprocessing and encoder count its rows
 *           apart. */
kvc_status kvc_vision_encode_tile(kvc_vision *vision, const uint8_t *rgba, size_t width, size_t height, size_t tile,
                                  float *out);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_H */

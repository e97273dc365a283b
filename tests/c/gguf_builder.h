/*
 * gguf_builder.h -- GGUF files written by the tests (test_gguf.c) and the
 * fuzz seeds (tests/fuzz/make_seeds.c): a byte builder with the format's
 * fields, a whole file from metadata and tensor infos, and the fixture --
 * every value type, arrays of arrays, tensors of known and unknown types.
 */
#ifndef KVC_GGUF_BUILDER_H
#define KVC_GGUF_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "kvcache.h"

/* The bytes of a file being written, as GGUF `version` (counts and string
 * lengths u32 in version 1, u64 after).  Out of memory exits the program. */
typedef struct gb_file {
    uint8_t *bytes; /* malloc'd: free() it */
    size_t len, cap;
    uint32_t version;
} gb_file;

void gb_bytes(gb_file *b, const void *src, size_t n);
/* x as `bytes` little-endian bytes. */
void gb_le(gb_file *b, uint64_t x, int bytes);
void gb_u32(gb_file *b, uint32_t x);
void gb_u64(gb_file *b, uint64_t x);
void gb_f32(gb_file *b, float f);
void gb_f64(gb_file *b, double f);
void gb_count(gb_file *b, uint64_t x);
void gb_string(gb_file *b, const char *s);
/* A metadata entry's key and value type (its value follows). */
void gb_key(gb_file *b, const char *key, uint32_t type);
/* An array's item type and length (its items follow). */
void gb_array(gb_file *b, uint32_t item_type, uint64_t count);

uint64_t gb_align_up(uint64_t x, uint64_t a);

/* A tensor info to write; offset GB_AUTO: after the previous tensor's data,
 * aligned. */
#define GB_AUTO UINT64_MAX
typedef struct gb_tensor {
    const char *name;
    uint32_t type, n_dims;
    uint64_t dims[KVC_GGUF_MAX_DIMS + 1]; /* one more: a refused count of 5 */
    uint64_t offset;
    uint64_t bytes; /* the data to leave for it (written as a counting pattern) */
} gb_tensor;

/* Writes the metadata entries of a file; @return : how many. */
typedef size_t gb_metadata_fn(gb_file *b);

/* A whole file: header, metadata (and general.alignment when `alignment`
 * is not the default), tensor infos, padding, then the data (none when a
 * tensor lies past 1 MiB: the reader never reads it).  *header_bytes
 * receives where the tensor infos end. */
gb_file gb_build(uint32_t version, gb_metadata_fn *metadata, const gb_tensor *tensors,
                 size_t tensor_count, uint64_t alignment, size_t *header_bytes);

/* ---- the fixture ---- */

#define GB_U64_BIG ((1ull << 60) + 1) /* exact only as an integer: beyond 2^53 */
#define GB_I64_BIG (-(1ll << 62) - 3)
#define GB_SCORES 1000
#define GB_FIXTURE_ENTRIES 22
#define GB_FIXTURE_TENSORS 6

/* Element i of the fixture's f32 array a.scores. */
float gb_score(size_t i);
/* Its metadata: general.architecture "llama", t.<type> of each scalar type,
 * a.u8, a.scores, a.str, a.empty, a.i64, a.nested [[1, 2], [-3]] of i16,
 * a.deep [[["x"]]]. */
size_t gb_every_type(gb_file *b);
/* Its tensors: F32 8 x 3, Q8_0 64 x 2, Q4_K 256, F16 5, then two types the
 * weight table lacks: IQ2_XXS (ggml's 16) and 4 (a removed ggml type). */
extern const gb_tensor gb_fixture_tensors[GB_FIXTURE_TENSORS];
gb_file gb_fixture(uint32_t version, uint64_t alignment, size_t *header_bytes);

/* ---- a small llama model (test_lm.c, the fuzz seeds) ---- */

enum { GB_DIM = 64, GB_LAYERS = 2, GB_HEADS = 4, GB_KV_HEADS = 2, GB_HEAD_DIM = 16, GB_FFN = 128, GB_VOCAB = 96,
       GB_CONTEXT = 2048 };

/* What its metadata says. */
typedef struct gb_llama_spec {
    const char *arch;    /* general.architecture, and its keys' prefix */
    int omit_head_count; /* leave <arch>.attention.head_count out */
    uint32_t block_count; /* <arch>.block_count to say (0: GB_LAYERS) */
    uint32_t head_count;  /* <arch>.attention.head_count to say (0: GB_HEADS) */
    uint32_t key_length;  /* <arch>.attention.key_length to say (0: none) */
    const char *pooling;  /* <arch>.pooling_type to say: "mean", "cls", "last" or "rank" (NULL: none) */
    int bidirectional;    /* say <arch>.attention.causal false */
} gb_llama_spec;

/* Its tensor infos (a test may change them before building). */
typedef struct gb_llama {
    gb_tensor t[2 + 9 * GB_LAYERS + 2];
    char names[9 * GB_LAYERS][32];
    size_t count;
} gb_llama;

/* The tensors of the model: matrices in `matrix_type` (F32 = 0 or Q8_0 = 8),
 * vectors F32; `tied`: no output.weight. */
void gb_llama_tensors(gb_llama *m, uint32_t matrix_type, int tied);
/* A reranker's head: cls.output.weight, one row (one label). */
void gb_llama_rank_head(gb_llama *m);
/* The file, GGUF v3 (its data a counting pattern, as gb_build's). */
gb_file gb_llama_build(const gb_llama_spec *spec, const gb_llama *m);

/* ---- a small projector (test_vision.c, the fuzz seeds): a vision encoder
 * as llama.cpp's converter names it (general.architecture "clip") ---- */

enum { GB_F32 = 0, GB_F16 = 1, GB_Q8_0 = 8 };

typedef struct gb_projector {
    const char *arch, *projector;  /* general.architecture, clip.projector_type */
    uint32_t dim, ffn, layers, heads, image_size, patch, merge;
    uint32_t side;        /* the position table's grid: side x side patches */
    uint32_t hidden;      /* lfm2's MLP */
    uint32_t out;         /* the projector's output width */
    uint32_t matrix_type, patch_type; /* GB_F32, GB_F16 or GB_Q8_0; the patch kernel F32 or F16 */
    int swapped_ffn;      /* ffn_up and ffn_down under each other's names (an older converter) */
    const char *drop;     /* a tensor to leave out (NULL: none) */
    const char *narrow;   /* a tensor to write a row short */
    uint32_t block_count; /* clip.vision.block_count to say (0: layers) */
    int omit_merge;       /* leave clip.vision.projector.scale_factor out */
    uint32_t out_scale;   /* gemma4v: each block's out_scale.weight of this many values (0: none) */
} gb_projector;

/* The small geometry of `projector` ("idefics3", "lfm2", "gemma3",
 * "gemma4v", "qwen3vl_merger"): dim
 * 64, 4 heads, FFN 128, 2 blocks, patches of 4, matrices of `matrix_type`. */
gb_projector gb_projector_spec(const char *projector, uint32_t matrix_type);
/* A reranker's head: cls.output.weight, one row (one label). */
void gb_llama_rank_head(gb_llama *m);
/* The file, GGUF v3 (its data a counting pattern, as gb_build's). */
gb_file gb_projector_build(const gb_projector *spec);

#endif /* KVC_GGUF_BUILDER_H */

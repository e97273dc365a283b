/*
 * matmul.c -- products of weights with activations, on the thread pool.
 *
 * The activations are coded once per encoding their weights read (q8 blocks
 * of 32 or 256, or f32), on the calling thread; then every weight's rows go
 * to the pool as one contiguous range per thread, in tasks of
 * KVC_MATMUL_ROWS that take the ranges in turn (task t: range t mod ranges),
 * so that each thread, claiming tasks in order, streams a range of its own
 * (two threads reading alternate 32-row chunks of one range decoded no
 * faster than one, measured here), and the small tasks still let a thread
 * that is done take the rest of a late one's range.  A weight kernel
 * computes each (row, token) the same way whatever rows and tokens a call holds
 * (kernels/weights.h), so which thread takes which chunk, how many threads
 * there are and how many tokens the pass carries change no bit of a result.
 */
#include "../core/internal.h"
#include "model.h"

/* Rows of a weight per task: a few microseconds of work at decode, small
 * beside the matrices (the smallest a model multiplies has hundreds of rows);
 * whole tiles of any packed layout (weights.h: 4 rows). */
#define KVC_MATMUL_ROWS 32

size_t kvc_matmul_codes_bytes(const kvc_weight_type *type, size_t n, size_t T) {
    const kvc_act_encoding *encoding = kvc_act_encoding_of(type->act);
    return T * (n / encoding->block_values) * encoding->block_bytes;
}

typedef struct matmul_job {
    size_t count;
    const kvc_product *products;
    size_t T;
    size_t cols;
    const uint8_t *codes[KVC_ACT_KINDS]; /* the activations in each encoding in use */
    size_t code_stride[KVC_ACT_KINDS];
    size_t first_task[5];                /* product p's tasks start here; [count] = all */
    size_t ranges;                       /* contiguous ranges of rows a product is split in */
    size_t range_rows[4];                /* rows of product p's ranges */
    kvc_weight_set set;
} matmul_job;

static void matmul_task(void *context, size_t task, size_t thread) {
    (void)thread;
    const matmul_job *job = context;
    size_t p = 0;
    while (task >= job->first_task[p + 1]) p++;
    const kvc_product *product = &job->products[p];
    const kvc_tensor *w = product->w;
    const size_t local = task - job->first_task[p], range = local % job->ranges;
    const size_t r0 = range * job->range_rows[p] + (local / job->ranges) * KVC_MATMUL_ROWS;
    size_t end = (range + 1) * job->range_rows[p];
    if (end > w->rows) end = w->rows;
    if (r0 >= end) return;
    const size_t rows = end - r0 < KVC_MATMUL_ROWS ? end - r0 : KVC_MATMUL_ROWS;
    const kvc_act_kind act = w->type->act;
    kvc_gemm_fn *gemm = w->packing ? w->packing->gemm[job->set] : w->type->gemm[job->set];
    gemm(job->cols, rows, job->T, w->data + r0 * w->row_bytes, w->row_bytes, job->codes[act], job->code_stride[act],
         product->y + r0, product->y_stride);
}

void kvc_matmul(kvc_profile_op op, size_t count, const kvc_product *products, const float *x, size_t T,
                uint8_t *codes) {
    matmul_job job = {.count = count, .products = products, .T = T, .cols = products[0].w->cols,
                      .set = kvc_weight_set_active(), .ranges = kvc_pool_threads()};
    uint64_t work = 0;
    for (size_t p = 0; p < count; p++) {
        const kvc_tensor *w = products[p].w;
        const kvc_act_kind act = w->type->act;
        if (!job.codes[act]) {
            const kvc_act_encoding *encoding = kvc_act_encoding_of(act);
            const size_t stride = (job.cols / encoding->block_values) * encoding->block_bytes;
            for (size_t t = 0; t < T; t++) encoding->quantize[job.set](job.cols, x + t * job.cols, codes + t * stride);
            job.codes[act] = codes;
            job.code_stride[act] = stride;
            codes += T * stride;
            kvc_profile_mark(KVC_PROFILE_QUANTIZE);
        }
        /* Ranges of whole tiles of a packed layout: a chunk begins at a tile
         * (KVC_MATMUL_ROWS is a multiple of every layout's rows). */
        const size_t tile = w->packing ? w->packing->rows : 1, tiles = (w->rows + tile - 1) / tile;
        job.range_rows[p] = (tiles + job.ranges - 1) / job.ranges * tile;
        job.first_task[p + 1] = job.first_task[p] + job.ranges * ((job.range_rows[p] + KVC_MATMUL_ROWS - 1) / KVC_MATMUL_ROWS);
        work += (uint64_t)w->rows * job.cols * T;
    }
    kvc_pool_run(matmul_task, &job, job.first_task[count], kvc_pool_threads(), work);
    kvc_profile_mark(op);
}

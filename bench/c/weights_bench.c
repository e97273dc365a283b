/*
 * weights_bench.c -- the weight gemms on one thread, in the wasm build they
 * are compiled into (SIMD128 under Node 20, relaxed SIMD under Node 22):
 *   decode (T = 1): GB/s of weight bytes read, streaming through copies of
 *     the matrix that together exceed the last-level cache ("stream"), and
 *     on one matrix that stays in cache ("hot"); beside the floor, the
 *     project's read probe (src/wasm/probe.c) over the same bytes, timed
 *     in turn with each gemm;
 *   prefill (T = 16): multiply-adds per second, streaming;
 * and beside them the arithmetic floor: multiply-adds per second of the best
 * loop of the integer multiply-add the products are made of, on operands in
 * L1 with nothing decoded or scaled -- SIMD128's i32x4.dot_i16x8_s, and in
 * the relaxed build the k-quants' chain (two i16x8.relaxed_dot_i8x16_i7x16_s
 * added, then widened by i32x4.dot_i16x8_s) -- at the register tile each
 * phase allows: 4 rows x 1 token at decode, 2 rows x 4 tokens at prefill.
 * One line per type and shape:  weights-bench.js [rows:n[:TYPE] ...]
 * (default 2048:2048 576:1536, every type).  Best of ROUNDS runs each, in
 * the process's CPU time (Node's process.cpuUsage).
 */
#include <emscripten.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/weights.h"
#include "mac_floor.h"

#define ROUNDS 9
#define STREAM_BYTES (192u << 20) /* six times a 32 MiB L3 */
#define PREFILL_T 16

float kvc_wasm_read_probe(const float *data, size_t count);

static unsigned state = 12345;
static unsigned next_random(void) {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
}
static float uniform(void) { return (float)next_random() / 16777216.0f * 2.0f - 1.0f; }

/* IEEE half of a value in [2^-10, 2) or its negative: a normal scale. */
static uint16_t sane_half(void) {
    return (uint16_t)((next_random() & 0x8000u) | ((5 + next_random() % 11) << 10) | (next_random() & 0x3ff));
}

/* A valid row: random codes, normal f16 scales (no subnormal floats, which
 * some CPUs multiply slowly), normal float weights. */
static void fill_row(const kvc_weight_type *type, size_t n, uint8_t *row) {
    const size_t nb = n / type->block_values;
    for (size_t i = 0; i < nb * type->block_bytes; i++) row[i] = (uint8_t)next_random();
    for (size_t b = 0; b < nb; b++) {
        uint8_t *block = row + b * type->block_bytes;
        uint16_t halves[2] = {sane_half(), sane_half()};
        switch (type->ggml_id) {
        case 0: { const float v = uniform(); memcpy(block, &v, 4); break; }
        case 1: case 30: memcpy(block, &halves[0], 2); if (type->ggml_id == 30) block[1] = (uint8_t)(0x3c + next_random() % 4); break;
        case 14: memcpy(block + 208, &halves[0], 2); break;
        case 10: memcpy(block + 80, halves, 4); break;
        case 11: memcpy(block + 108, &halves[0], 2); break;
        case 3: case 7: case 12: case 13: memcpy(block, halves, 4); break;
        default: memcpy(block, &halves[0], 2); break;
        }
    }
}

typedef struct shape {
    size_t rows, n;
    char type[16]; /* "" for every type */
} shape;

/* The process's CPU time in ms: on a machine other work shares, the time
 * this thread ran, not the time it waited for a core (the wall clock's). */
EM_JS(double, cpu_ms, (void), {
    const used = process.cpuUsage();
    return (used.user + used.system) / 1000;
});

static double best_ms(void (*run)(void *), void *ctx) {
    double best = 1e30;
    for (int round = 0; round <= ROUNDS; round++) {
        const double t0 = cpu_ms();
        run(ctx);
        const double t = cpu_ms() - t0;
        if (round > 0 && t < best) best = t;
    }
    return best;
}

typedef struct job {
    const kvc_weight_type *type;
    kvc_gemm_fn *gemm;
    size_t n, rows, T, row_bytes, xa_stride, copies, matrix_bytes;
    const uint8_t *w, *xa;
    float *y;
    volatile float sink;
} job;

/* Every copy once (or the first one `copies` times). */
static void run_stream(void *ctx) {
    job *j = ctx;
    for (size_t c = 0; c < j->copies; c++) {
        j->gemm(j->n, j->rows, j->T, j->w + c * j->matrix_bytes, j->row_bytes, j->xa, j->xa_stride, j->y, j->rows);
    }
    j->sink = j->y[0];
}

static void run_hot(void *ctx) {
    job *j = ctx;
    for (size_t c = 0; c < j->copies; c++) {
        j->gemm(j->n, j->rows, j->T, j->w, j->row_bytes, j->xa, j->xa_stride, j->y, j->rows);
    }
    j->sink = j->y[0];
}

static void run_probe(void *ctx) {
    job *j = ctx;
    j->sink = kvc_wasm_read_probe((const float *)j->w, j->copies * j->matrix_bytes / 4 / 16 * 16);
}

/* Multiply-adds per second (G) of each floor loop, measured once. */
typedef struct floors {
    double i16_decode, i16_prefill, i8_decode, i8_prefill; /* the i8 pair 0 without relaxed SIMD */
} floors;

static floors measure_floors(void) {
    static floors measured;
    static int done;
    if (done) return measured;
    mac_floor_job *f = malloc(sizeof *f);
    if (!f) return measured;
    for (size_t r = 0; r < 4; r++) {
        for (size_t k = 0; k < MAC_FLOOR_K; k++) {
            f->w16[r][k] = (int16_t)(next_random() % 64), f->a16[r][k] = (int16_t)(next_random() % 255) - 127;
            f->w8[r][k] = (int8_t)f->w16[r][k], f->a8[r][k] = (int8_t)f->a16[r][k];
        }
    }
    /* Each loop makes 4 (decode) or 2 x 4 (prefill) dots of MAC_FLOOR_K values MAC_FLOOR_REPS times. */
    const double macs = (double)MAC_FLOOR_REPS * MAC_FLOOR_K * 4 / 1e6;
    measured.i16_decode = macs / best_ms(mac_floor_i16_decode, f);
    measured.i16_prefill = 2 * macs / best_ms(mac_floor_i16_prefill, f);
    if (mac_floor_i8_decode) {
        measured.i8_decode = macs / best_ms(mac_floor_i8_decode, f);
        measured.i8_prefill = 2 * macs / best_ms(mac_floor_i8_prefill, f);
    }
    free(f);
    done = 1;
    return measured;
}

/* packing: the layout the runner packs the type into at load (the matrix
 * packed before it is copied), or NULL for the file's. */
static int bench(const kvc_weight_type *type, const kvc_weight_packing *packing, shape s, uint8_t *buffer) {
    const kvc_weight_set set = kvc_weight_set_active();
    const kvc_act_encoding *e = kvc_act_encoding_of(type->act);
    job j = {type, packing ? packing->gemm[set] : type->gemm[set], s.n, s.rows, 1, 0, 0, 0, 0, buffer, NULL, NULL, 0.0f};
    j.row_bytes = s.n / type->block_values * type->block_bytes;
    j.matrix_bytes = j.row_bytes * s.rows;
    j.copies = STREAM_BYTES / j.matrix_bytes;
    j.xa_stride = s.n / e->block_values * e->block_bytes;
    float *x = malloc(PREFILL_T * s.n * sizeof(float));
    uint8_t *xa = malloc(PREFILL_T * j.xa_stride);
    j.y = malloc(PREFILL_T * s.rows * sizeof(float));
    if (!x || !xa || !j.y) return 1;
    for (size_t i = 0; i < PREFILL_T * s.n; i++) x[i] = uniform();
    for (size_t t = 0; t < PREFILL_T; t++) e->quantize[set](s.n, x + t * s.n, xa + t * j.xa_stride);
    j.xa = xa;
    for (size_t r = 0; r < s.rows; r++) fill_row(type, s.n, buffer + r * j.row_bytes);
    if (packing) {
        uint8_t *scratch = malloc(packing->rows * j.row_bytes);
        if (!scratch) return 1;
        for (size_t r = 0; r + packing->rows <= s.rows; r += packing->rows) packing->pack(s.n, j.row_bytes, buffer + r * j.row_bytes, scratch);
        free(scratch);
    }
    for (size_t c = 1; c < j.copies; c++) memcpy(buffer + c * j.matrix_bytes, buffer, j.matrix_bytes);

    const double bytes = (double)j.copies * (double)j.matrix_bytes;
    /* The probe and the gemm in turn, each at its best. */
    const double probe = best_ms(run_probe, &j);
    const double stream = best_ms(run_stream, &j);
    const double hot = best_ms(run_hot, &j);
    j.T = PREFILL_T;
    j.copies = j.copies / 8 ? j.copies / 8 : 1;
    const double prefill = best_ms(run_stream, &j);
    const double macs = (double)j.copies * (double)PREFILL_T * (double)s.n * (double)s.rows;
    const floors f = measure_floors();
    printf("{\"type\":\"%s\",\"layout\":\"%s\",\"set\":\"%s\",\"rows\":%zu,\"n\":%zu,\"floor_gbs\":%.2f,\"decode_gbs\":%.2f,"
           "\"decode_hot_gbs\":%.2f,\"prefill_gmacs\":%.2f,\"floor_i16_decode_gmacs\":%.2f,"
           "\"floor_i16_prefill_gmacs\":%.2f,\"floor_i8_decode_gmacs\":%.2f,\"floor_i8_prefill_gmacs\":%.2f}\n",
           type->name, packing ? packing->name : "file", kvc_weight_set_name(set), s.rows, s.n, bytes / probe / 1e6, bytes / stream / 1e6,
           bytes / hot / 1e6, macs / prefill / 1e6, f.i16_decode, f.i16_prefill, f.i8_decode, f.i8_prefill);
    fflush(stdout);
    free(x), free(xa), free(j.y);
    return 0;
}

/* Exported as "main" by name: clang 15+ would call main(argc, argv)
 * __main_argc_argv, which emcc 3.1.6 never calls (the relaxed build). */
__attribute__((export_name("main"), used)) int kvc_weights_bench_main(int argc, char **argv) {
    shape shapes[8] = {{2048, 2048, ""}, {576, 1536, ""}};
    size_t count = 2;
    if (argc > 1) {
        count = 0;
        for (int i = 1; i < argc && count < 8; i++) {
            shape *s = &shapes[count++];
            s->type[0] = '\0';
            if (sscanf(argv[i], "%zu:%zu:%15s", &s->rows, &s->n, s->type) < 2) return 1;
        }
    }
    uint8_t *buffer = malloc(STREAM_BYTES + 64);
    if (!buffer) return 1;
    size_t type_count;
    const kvc_weight_type *types = kvc_weight_types(&type_count);
    for (size_t s = 0; s < count; s++) {
        for (size_t t = 0; t < type_count; t++) {
            if (shapes[s].type[0] && strcmp(shapes[s].type, types[t].name) != 0) continue;
            if (shapes[s].n % types[t].block_values) continue;
            /* The file's layout, then (the line the runner's rate is) the packed one. */
            if (bench(&types[t], NULL, shapes[s], buffer) != 0) return 1;
            if (types[t].packing && bench(&types[t], types[t].packing, shapes[s], buffer) != 0) return 1;
        }
    }
    free(buffer);
    return 0;
}

/*
 * ops_format.h -- how fuzz_ops reads its input; make_seeds.c writes seeds in
 * the same format.
 *
 * Every read past the end of the input gives 0, so any byte string is an
 * input and libFuzzer can cut one anywhere.
 *
 * World header
 *   count byte: 1 + b % FUZZ_MAX_LAYERS layers, then per layer a kind byte k:
 *     k % 10 <  9: a full layer in mode k % 10 (kvc_mode), then an H byte
 *                 (1 + b % FUZZ_MAX_H) and a d byte (1 + b % FUZZ_MAX_D; lowered
 *                 so that H * d <= FUZZ_MAX_HD);
 *     k % 10 == 9: a linear layer, then bytes for heads (1 + b % FUZZ_MAX_LINEAR_H),
 *                 features (1 + b % FUZZ_MAX_F), value_dim (1 + b % FUZZ_MAX_DV)
 *                 and phase_mass (fuzz_phase_masses[b % 5]).
 *
 * Operations, until the input ends
 *   opcode byte o: the operation is (o & 0x7f) % FUZZ_OP_COUNT.  With o & 0x80
 *     a fault byte f follows: the (1 + f % 8)-th allocation of the call fails
 *     (and every later one when f & 0x80).
 *   target byte: the layer, t % count (model operations ignore it).
 *   Then the operation's own bytes, listed with each FUZZ_OP_ below; "values"
 *   is a value block.
 *
 * Value block (fuzz_fill)
 *   style byte s, s % 8 a fuzz_values kind (its bytes below), s / 8 a
 *   parameter; then an injection byte i: with i & 1, a u16 index and a
 *   palette byte follow, and that palette value replaces element index % n.
 */
#ifndef KVC_FUZZ_OPS_FORMAT_H
#define KVC_FUZZ_OPS_FORMAT_H

#define FUZZ_MAX_LAYERS 3
#define FUZZ_MAX_H 8
#define FUZZ_MAX_D 64
#define FUZZ_MAX_HD 256
#define FUZZ_MAX_LINEAR_H 4
#define FUZZ_MAX_F 16
#define FUZZ_MAX_DV 16
/* Appends and linear steps past this many positions are skipped: one input
 * stays fast, and the q8 window (64) is still crossed well inside it. */
#define FUZZ_MAX_POSITIONS 300

enum fuzz_op {
    FUZZ_OP_APPEND,            /* mask byte, values k, values v, null byte (b % 16: 1 k NULL, 2 v NULL) */
    FUZZ_OP_APPEND_N,          /* n byte (b % 80), then as FUZZ_OP_APPEND */
    FUZZ_OP_ATTEND,            /* head byte (b % (H + 1)), values q, probs byte (b & 1: NULL) */
    FUZZ_OP_ATTEND_GROUP,      /* G byte (b % 5), head byte, values q, probs byte */
    FUZZ_OP_ATTEND_HEADS,      /* shape byte (G = 1 + b % 3 per KV head; b % 8: 7 one more, 6 none),
                                  values q, probs byte */
    FUZZ_OP_ATTEND_CAUSAL,     /* m byte (b % min(seq_len + 2, 18)), head byte, values q, probs byte */
    FUZZ_OP_TRUNCATE,          /* n byte (255: SIZE_MAX, else b % 96) */
    FUZZ_OP_ACCUMULATE_IMP,    /* length byte (b % 8: 0 one more, 1 one less), values */
    FUZZ_OP_ACCUMULATE_IMP_HEAD, /* head byte, length byte, values */
    FUZZ_OP_CLONE,             /* -- */
    FUZZ_OP_CLEAR,             /* -- */
    FUZZ_OP_SNAPSHOT,          /* variant byte (b & 1: flip a byte, b & 2: cut the end; either: u16 where) */
    FUZZ_OP_EVICT,             /* budget (b % 80), sinks (b % 16), recent (b % 40) bytes */
    FUZZ_OP_SLIDE_WINDOW,      /* window (b % 80), sinks (b % 16) bytes */
    FUZZ_OP_EVICTION_PLAN,     /* budget, sinks, recent bytes (as FUZZ_OP_EVICT), kept byte
                                  (b % 4: 0 one short, 1 NULL count) */
    FUZZ_OP_SET_MAX_ROWS,      /* max byte (255: above KVC_MAX_POSITIONS, else b % 100), sinks
                                  (b % 16), recent (b % 40) bytes */
    FUZZ_OP_BEGIN_VERIFY,      /* -- */
    FUZZ_OP_ACCEPT,            /* j byte (255: SIZE_MAX, else b % 10) */
    FUZZ_OP_LINEAR_STEP,       /* decay byte (b & 1: NULL), [values decay], values phi_k, phi_q, v */
    FUZZ_OP_LINEAR_STEP_PHASE, /* as FUZZ_OP_LINEAR_STEP, phases for phi_k and phi_q */
    FUZZ_OP_MODEL_CREATE,      /* variant byte (b % 4: all, a repeated layer, none, a NULL layer) */
    FUZZ_OP_MODEL_TRUNCATE,    /* n byte, as FUZZ_OP_TRUNCATE */
    FUZZ_OP_MODEL_CLEAR,       /* -- */
    FUZZ_OP_MODEL_BEGIN_VERIFY,/* -- */
    FUZZ_OP_MODEL_ACCEPT,      /* j byte, as FUZZ_OP_ACCEPT */
    FUZZ_OP_MODEL_EVICT,       /* budget, sinks, recent bytes, as FUZZ_OP_EVICT */
    FUZZ_OP_MODEL_CLONE,       /* -- */
    FUZZ_OP_MODEL_SNAPSHOT,    /* variant byte, as FUZZ_OP_SNAPSHOT */
    FUZZ_OP_RESET,             /* a new world header */
    FUZZ_OP_CREATE_INVALID,    /* which byte (b % 16): a refused create or attention_head (15:
                                  every call on NULL); 4 and 14 read one more byte (a mode, a
                                  palette value) */
    FUZZ_OP_FORK,              /* variant byte (b % 3: keep a fork beside the layer, swap the
                                  two (not in a model), drop the fork) */
    FUZZ_OP_COUNT
};

/* Mask byte of an append: how alive is given (b % 4), b / 4 a parameter. */
enum fuzz_mask {
    FUZZ_MASK_NULL,   /* every head alive */
    FUZZ_MASK_ALL,    /* every byte 1 + b / 4 (any nonzero byte means alive) */
    FUZZ_MASK_RANDOM, /* a seed byte: each head dead with probability (b / 4 % 4) / 4 */
    FUZZ_MASK_BYTES   /* n x H bytes from the input */
};

enum fuzz_values {
    FUZZ_VALUES_NORMAL,  /* seed byte: N(0, 1) times 2^(s / 8 - 16) */
    FUZZ_VALUES_UNIT,    /* seed byte: uniform in [0, 1) */
    FUZZ_VALUES_INTS,    /* seed byte: integers in [-8, 8] */
    FUZZ_VALUES_CONST,   /* palette byte: every element */
    FUZZ_VALUES_PALETTE, /* a palette byte per element */
    FUZZ_VALUES_RAW,     /* four bytes per element: the f32 bits, little-endian */
    FUZZ_VALUES_ZERO,    /* -- */
    FUZZ_VALUES_WIDE,    /* seed byte: N(0, 1) times a power of ten in 1e-20..1e20 per element */
    FUZZ_VALUES_COUNT
};

/* phase_mass of a linear layer, by index. */
#define FUZZ_PHASE_MASSES {0.0, 0.25, 1.0, 3.5, 1e6}

#endif /* KVC_FUZZ_OPS_FORMAT_H */

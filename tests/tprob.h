/* One attention problem for the tests: a case description (shape, dtype, layout,
 * strides, mask, positions, dropout), its poisoned buffers and params, and the checked
 * calls: run forward/backward, require OK, inputs untouched, no byte written outside the
 * output elements, every output element written and finite, and agreement with the
 * float64 reference (ref64) within the tolerance rule stated in tprob.c. */
#ifndef DATTN_TESTS_TPROB_H
#define DATTN_TESTS_TPROB_H

#include "dattn.h"
#include "tutil.h"

/* Mask patterns (padded layout). */
enum {
    MK_NONE,   /* mask.data = NULL */
    MK_ONES,   /* explicit all-token mask */
    MK_RIGHT,  /* tokens then padding */
    MK_LEFT,   /* padding then tokens */
    MK_HOLES,  /* random holes */
    MK_EMPTY,  /* sequence 0 has no token at all; the others right-padded */
    MK_SINGLE, /* one token per sequence, anywhere */
    MK_MIXED,  /* sequence b gets pattern (b % 6) + MK_RIGHT..: right, left, holes,
                  empty, single, ones */
    MK_COUNT
};

/* Memory layouts of the tensors (see tprob.c). */
enum {
    LY_CONTIG, /* [B,L,H,D] / [T,H,D] contiguous, one buffer per tensor */
    LY_FUSED,  /* q,k,v (and dq,dk,dv) views of one [B,L,3,H,D] buffer; pk/pq of one
                  [H,2S,2,D]; out and dout transposed [B,H,L,D] */
    LY_TRANS,  /* everything [B,H,L,D] ([H,T,D] packed); pk/pq shared by every head
                  (head stride 0) */
    LY_PADDED, /* padded strides in every dimension and a 1-element lead offset */
    LY_COUNT
};

typedef struct tcase {
    int32_t dtype, layout, pos_att, pb, M, padrows;
    int64_t B, L, H, D;
    int mask;            /* MK_* (padded layout) */
    int variant;         /* LY_* */
    float dropout;
    double amp;          /* inputs uniform in (-amp, amp); 0 = 2.0 */
    int bwd;             /* also run and check the backward */
    int rows;            /* forward check: 0 = every row; > 0 = that many sampled rows */
    int32_t threads;     /* num_threads */
    int no_lse;          /* forward with lse.data = NULL (no backward then) */
    const int64_t *lens; /* packed: the B sequence lengths (NULL: random, some empty) */
} tcase;

struct tprob;
/* Optional way to run a call elsewhere (the CUDA tests): given the host problem P (its
 * outputs poisoned, its params P->p pointing into the host arenas P->ar[]), run the
 * forward (is_bwd = 0) or backward on the device and leave in every host arena exactly
 * the bytes the device buffers hold afterwards (copy whole arenas both ways: that keeps
 * the gap and poison checks meaningful). tprob_locate() maps a params pointer to its
 * arena and offset. The runner allocates and poisons the device workspace itself. */
typedef dattn_status (*tprob_runner)(struct tprob *P, int is_bwd, void *ctx);

typedef struct tprob {
    tcase c;
    char name[256];
    dattn_params p;
    int32_t S;
    int64_t T;           /* packed: total tokens */
    int64_t ntok;        /* B*L or T */
    int32_t *cu;         /* packed: cu_seqlens (owned) */
    int32_t *cu_snap;
    int64_t *lens;       /* per sequence (padded: L) */
    tarena ar[16];
    size_t need[16];
    int nar;
    tarena ws;
    tview q, k, v, pk, pq, mask, out, lse, dout, dq, dk, dv, dpk, dpq;
    double worst_fwd, worst_lse, worst_bwd[5]; /* largest error / tolerance seen */
    int dv_p1;           /* the last backward computed dv with P rounded once to the storage
                            dtype (DATTN_CUDA_BWD=tc3p): its dv bound adds that rounding
                            (TOL_B_DV_P1, tprob_dv_p1_extra); set by the runner */
    double worst_dv_fp32p; /* dv_p1: largest error / (the dv bound without that term) */
    const char *tag;     /* appended to messages (e.g. the CPU kernel family) */
    tprob_runner runner; /* NULL: dattn_fwd / dattn_bwd on the host */
    void *runner_ctx;
    /* cached reference results (the inputs never change after tprob_init) */
    double *rf[4];       /* full forward: out, mag, smag, lse */
    double *rb[15];      /* backward: value, mag, smag for dq, dk, dv, dpk, dpq */
} tprob;

/* Builds the problem (fresh random inputs from r). */
void tprob_init(tprob *P, const tcase *c, trng *r);
void tprob_free(tprob *P);

/* Runs the forward with every check; returns 1 when all passed. `check_ref` 0 skips the
 * reference comparison (used when only bitwise comparisons follow). */
int tprob_fwd(tprob *P, int check_ref);
/* Runs the backward (on the library's own out/lse) with every check. */
int tprob_bwd(tprob *P, int check_ref);

/* Arena index holding host pointer ptr (and its byte offset there), or -1. */
int tprob_locate(const tprob *P, const void *ptr, size_t *off);

/* Raw bytes of the outputs, for bitwise comparisons (caller frees). */
unsigned char *tprob_fwd_bits(const tprob *P, size_t *n);
unsigned char *tprob_bwd_bits(const tprob *P, size_t *n);
/* The same for a subset of the gradients: bit 0 dq, 1 dk, 2 dv, 3 dpk, 4 dpq. */
unsigned char *tprob_bwd_bits_of(const tprob *P, unsigned which, size_t *n);

/* The tolerance rule (documented and justified at the top of test_sweep.c): the largest
 * |got - ref| allowed for one element of out (TOL_KIND_OUT), dv (TOL_KIND_DV) or
 * dq/dk/dpk/dpq (TOL_KIND_DS) with float64 value ref and magnitudes mag, smag (ref64.h),
 * L the (max) sequence length; and for one lse. */
#define TOL_A 1.0       /* x eps(dtype) * |ref|: twice the half-ulp rounding of the result */
#define TOL_B_OUT 0.5   /* x eps(dtype) * mag: intermediates held in the storage dtype (the
                           worst case of one rounding of each p, u = eps / 2 per term) */
#define TOL_B_OUT_DROP 0.5 /* out with dropout: the worst case of one rounding of each kept
                              p / (1 - p) to the storage dtype (u = eps / 2 per term) */
#define TOL_B_DV 0.125  /* dv */
#define TOL_B_DV_P1 0.5 /* dv from P rounded once to the storage dtype (tc3p), added to the
                           dv bound: u = eps / 2 per term p_ij kd_ij |dout_i| (see
                           tprob_dv_p1_extra) */
#define TOL_B_DS 0.5    /* dq, dk, dpk, dpq: out re-read in the storage dtype for D_i */
#define TOL_F32 4.0     /* x max(1, sqrt(L / 512)) * eps(fp32) * smag: fp32 rounding floor */
#define TOL_UNDERFLOW 0x1p-124 /* 4 * FLT_MIN per summed term (x max(1, L)): fp32
                                  subnormal / flush-to-zero effects */
#define TOL_LSE 32.0    /* x eps(fp32) * (1 + |lse|) * max(1, sqrt(L / 512)) */
double tprob_fp32_floor(int64_t L); /* TOL_F32 * max(1, sqrt(L / 512)) */
enum { TOL_KIND_OUT, TOL_KIND_DV, TOL_KIND_DS, TOL_KIND_OUT_DROP };
double tprob_bound(int32_t dtype, int64_t L, int kind, double ref, double mag, double smag);
double tprob_bound_lse(int64_t L, double ref);
/* What rounding each p_ij kd_ij of a dv sum once to the storage dtype adds to the dv bound
 * (kernels that feed P . dout to the tensor cores in the storage dtype, as FlashAttention
 * and transformers' eager path do; dattn's default splits P into hi + lo parts instead).
 * Round to nearest: |fl(x) - x| <= u |x| for |x| >= nmin (the smallest normal), and <= the
 * half spacing of the subnormals u nmin = tiny / 2 below it, u = eps / 2. Summed over the
 * terms of dv_jd = sum_i fl(p_ij kd_ij) dout_id:
 *   extra = TOL_B_DV_P1 eps mag + tiny / 2 * sdout,
 * mag = sum_i p_ij kd_ij |dout_id| (ref64: the dv magnitude), sdout = sum_i |dout_id| over
 * every row i of the sequence (a bound on the sum over the subnormal terms). Derived, not
 * fitted; the kernel's fp32 p differs from the float64 one by what the fp32 floor of the
 * dv bound already covers. */
double tprob_dv_p1_extra(int32_t dtype, double mag, double sdout);
/* sdout for every element of dv ([tokens][H][D], the dv / dout element order): caller frees. */
double *tprob_dv_p1_sdout(const tprob *P);

const char *tu_mask_name(int m);
const char *tu_variant_name(int v);

/* A v3-base-like case: c2p|p2c, pb 256, M 512, HF padded rows, padded contiguous, no
 * mask, backward on. */
tcase tprob_case_v3(int32_t dtype, int64_t B, int64_t L, int64_t H, int64_t D);

/* Dropout mask read-back: shape_inputs sets k_j = k_0 (per b, h), v_j = e_j, dout_i = e_i
 * (needs D >= L); check_masks reads the forward (which = 0, from out) or backward (1,
 * from dv) mask back, compares it with dattn_dropout_keep (a value farther than
 * unclear_tol from 0 or 1 fails) and checks the keep rate; bits/nbits (optional) collect
 * the mask. keep_rate_ok: kept/n within 5 standard deviations of 1 - p. */
void tprob_dropout_shape_inputs(tprob *P);
void tprob_dropout_check_masks(tprob *P, int which, double unclear_tol, unsigned char *bits, long *nbits);
int tprob_keep_rate_ok(long kept, long n, double p);

#endif

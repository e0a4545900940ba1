/* The CPU backend's internal interface: the plan of a call (tile sizes, packed position
 * tables), the per-(sequence, head) "pair" buffers, the per-thread tiles, and the table
 * of kernel functions that each instruction-set family (kern_portable.c, kern_avx2.c,
 * kern_avx512.c, all stamped out of kern.h) provides.
 *
 * Layout conventions (every fp32 buffer below is 64-byte aligned):
 *   Dp      = D rounded up to 16; rows of Q, V, O, dQ, dK, dV tiles are Dp floats long,
 *             zero-padded past D.
 *   bn = 64 keys per key tile, bm = 64 query rows per row block.
 *   kt      [nt][D][bn]  K^T per key tile (zero past the sequence end)
 *   slots   a pair of length n sees r = i - j in [-(n-1), n-1], i.e. slots
 *           [slot(-(n-1)), slot(n-1)] (slot() is monotone in r). The p2c table of a pair
 *           is P[j][t - tlo_p] = k_j . pq[t] for those slots, Wp (multiple of 16) floats
 *           a row; the c2p table of a row block is C[ii][t - tlo_c] = q_i . pk[t] for the
 *           block's slots [slot(i0 - (n-1)), slot(i0 + mb - 1)].
 */
#ifndef DATTN_CPU_H
#define DATTN_CPU_H

#include "common.h"

#define DATTN_CPU_BM 64
#define DATTN_CPU_BN 64

typedef struct cpu_plan {
    const dattn_call *c;
    const dattn_slotmap *sm;
    int64_t L;        /* longest sequence of the call (max_len) */
    int64_t D, Dp;
    int64_t S2;       /* 2S: rows of pk/pq */
    int64_t W2;       /* row length of the transposed tables pkt/pqt: round16(2S) + 16 */
    int64_t bm, bn;
    float c2;         /* log2(e) / scale: scores are kept in the base-2 domain */
    float inv_scale;
    const int32_t *sneg; /* [2L + bn + 16]: sneg[u] = slot(L-1-u); slot(i-j) = sneg[j-i+L-1] */
    const int32_t *spos; /* [2L + bm + 16]: spos[x] = slot(x-(L-1)); slot(i-j) = spos[i-j+L-1] */
    int monotone;        /* slot(r) non-decreasing over the r the call sees (every sane
                            configuration; not e.g. position_buckets 64 with M = 16) */
    int32_t smin, smax;  /* min / max slot over r in [-(L-1), L-1] */
    int unit_steps;      /* monotone, and slot(r+1) - slot(r) <= 1 for every such r */
    const float *pkt, *pqt; /* [H][D][W2]: pk^T, pq^T (zero past 2S) */
    const float *pkn, *pqn; /* [H][2S][Dp]: pk, pq in fp32 (backward) */
} cpu_plan;

typedef struct cpu_pair {
    int64_t b, h;
    int64_t n, npad, nt;  /* sequence length, rounded up to bn, key tiles */
    int32_t tlo_p;        /* first slot of the p2c table */
    int64_t Wreal_p;      /* slots it covers */
    int64_t Wp;           /* its row length (Wreal_p rounded up to 16) */
    int any_masked;       /* some key of the sequence is padding */
    float *kt;            /* [nt][D][bn] */
    float *v;             /* [npad][Dp] */
    float *kbias;         /* [npad]: 0 for a valid key, -inf for padding / past n */
    float *psp, *psn;     /* [npad]: P[j][sat_pos], P[j][sat_neg] (0 without p2c) + kbias */
    float *ptab;          /* [npad][Wp] (+16 floats) (p2c only) */
    unsigned char *tany;  /* [nt]: key tile has a valid key */
    /* backward */
    float *kn;            /* [npad][Dp] K */
    float *vt;            /* [nt][D][bn] V^T */
    float *gp;            /* [npad][Wp]: sum of ds over the (i, j) with slot(i - j) = t */
    float *gsp, *gsn;     /* [npad]: the saturated tiles' part of gp[j][sat_pos / sat_neg],
                             kept contiguous and added into gp at the end of the pair */
    float *dk, *dv;       /* [npad][Dp] */
} cpu_pair;

/* Per-thread tiles. */
typedef struct cpu_tbuf {
    float *q;      /* [bm][Dp] */
    float *ctab;   /* [bm][W2] c2p table of the row block */
    float *s;      /* [bm][bn] scores / probabilities */
    float *o;      /* [bm][Dp] output accumulator */
    float *m, *rmax, *alpha, *ref, *crp, *crn, *zero; /* [bm] */
    float *lvec;   /* [bm][16] per-row partial sums of the softmax denominator */
    float *keep;   /* [bm][bn] dropout multipliers */
    float *vsum;   /* [Dp] */
    unsigned char *valid; /* [bm] query row validity */
    /* backward */
    float *dout;   /* [bm][Dp] */
    float *dp;     /* [bm][bn] */
    float *dq;     /* [bm][Dp] */
    float *gc;     /* [bm][W2] */
    float *di, *lse2; /* [bm] */
} cpu_tbuf;

typedef struct dattn_cpu_kernels {
    const char *name;
    /* Forward, phase 1: packs key tile jt of the pair (K^T, V, key bias) and computes
     * its rows of the p2c table. */
    void (*fwd_tile)(const cpu_plan *pl, cpu_pair *pr, int64_t jt);
    /* Forward, phase 2: row block rb of the pair, written to out / lse. */
    void (*fwd_rows)(const cpu_plan *pl, const cpu_pair *pr, int64_t rb, cpu_tbuf *tb);
    /* Backward of one pair: packs it, writes dq, dk, dv rows and the pair's fp32
     * partial dpk / dpq ([2S][Dp] each, NULL when the term is off). */
    void (*bwd_pair)(const cpu_plan *pl, cpu_pair *pr, cpu_tbuf *tb, float *dpk_part,
                     float *dpq_part);
} dattn_cpu_kernels;

extern const dattn_cpu_kernels dattn_cpu_kernels_portable;
#if defined(__x86_64__) || defined(_M_X64)
#define DATTN_CPU_X86 1
extern const dattn_cpu_kernels dattn_cpu_kernels_avx2;
extern const dattn_cpu_kernels dattn_cpu_kernels_avx512;
#endif

/* The family in use (resolved on first use from DATTN_CPU_ISA, else the best one). */
const dattn_cpu_kernels *dattn_cpu_kernels_active(void);

/* ---- plan.c ---- */
typedef struct dattn_arena dattn_arena;
/* Lays out the call's shared tables in `a` (counting only, when a->base is NULL). */
void dattn_cpu_plan_layout(cpu_plan *pl, const dattn_call *c, const dattn_slotmap *sm,
                           dattn_arena *a, int bwd);
void dattn_cpu_plan_fill(cpu_plan *pl, int nthreads);
/* Buffers of one pair sized for the longest sequence of the call. */
void dattn_cpu_pair_layout(const cpu_plan *pl, cpu_pair *pr, dattn_arena *a, int bwd);
/* Points the pair at sequence b, head h (length, p2c slot range, mask facts). */
void dattn_cpu_pair_set(const cpu_plan *pl, cpu_pair *pr, int64_t b, int64_t h);
void dattn_cpu_tbuf_layout(const cpu_plan *pl, cpu_tbuf *tb, dattn_arena *a, int bwd);
int dattn_cpu_threads(const dattn_call *c);
/* 64-byte aligned host memory (free with free()). */
void *dattn_cpu_alloc(size_t bytes);

/* ---- small shared helpers ---- */

static inline int64_t dattn_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* slot(r) of any r. */
static inline int32_t dattn_cpu_slot(const cpu_plan *pl, int64_t r)
{
    return dattn_slotmap_get(pl->sm, r);
}

/* A slot range covering slot(r) for every r in [ra, rb] (ra <= rb, both inside
 * [-(L-1), L-1]): exact when the map is monotone, else the call's whole range. */
static inline void dattn_cpu_slot_range(const cpu_plan *pl, int64_t ra, int64_t rb, int32_t *lo,
                                        int32_t *hi)
{
    if (pl->monotone) {
        *lo = dattn_slotmap_get(pl->sm, ra);
        *hi = dattn_slotmap_get(pl->sm, rb);
    } else {
        *lo = pl->smin;
        *hi = pl->smax;
    }
}

/* 64-byte aligned bump allocation out of a byte range (sizes rounded to 64). With
 * base == NULL it only counts (used = bytes needed). */
struct dattn_arena {
    char *base;
    size_t used;
};

static inline void *dattn_arena_take(dattn_arena *a, size_t bytes)
{
    size_t n = (bytes + 63) & ~(size_t)63;
    size_t off = a->used;
    a->used += n;
    return a->base ? (void *)(a->base + off) : NULL;
}

#endif

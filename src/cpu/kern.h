/* The CPU kernels of dattn, written once over a small vector layer and stamped out per
 * instruction-set family by kern_portable.c, kern_avx2.c and kern_avx512.c.
 *
 * The including file defines, before including this one:
 *   ISA_NAME, ISA_SUFFIX "portable" | "avx2" | "avx512", and the same as a bare token
 *   KERNELS             the name of the exported dattn_cpu_kernels object
 *   VL, MR, NV          vector length (floats), GEMM micro-tile rows, micro-tile vectors
 *   vf, vi              float / int32 vector types
 *   vzero vset1 vload vstore vadd vsub vmul vfma vmax vhmax vhsum vexp2
 *   vloadi vseti vaddi vsubi vmulloi vlanes vgather_n vpermv vtranspose
 *   cvt_load cvt_store  dtype <-> fp32 rows
 *   HAVE_SEGADD + segadd_asc vrev vrevi vmaxi0 (optional: vector slot sums, backward)
 *
 * What is computed and how (see also NOTES.md, "CPU kernels"):
 *
 * Forward, per (sequence b, head h) pair — phase 1, per key tile of bn = 64 keys: K^T and
 * V are packed in fp32, the key padding mask becomes an additive bias (0 / -inf), and the
 * tile's rows of the p2c table P[j][t] = k_j . pq[t] are computed with the GEMM micro-
 * kernel. Phase 2, per row block of bm = 64 query rows: the block's c2p table
 * C[i][t] = q_i . pk[t] (only the slots its rows can see), then for every key tile, in
 * order: the score tile S = bias + Q K^T, where the bias is chosen by tile class —
 *   saturated (every r = i - j of the tile >= R, or every r <= -R): c2p is one value per
 *     row (C[i][sat]) and p2c one value per column (P[j][sat]); the GEMM starts its
 *     accumulators at row value + column vector, no gather at all;
 *   band (some |r| < R): a bias tile C[i][slot(i-j)] + P[j][slot(i-j)] is built first —
 *     by window loads and lane permutes when the slot map is monotone with unit steps
 *     (band_bias_perm), else by gathers (band_bias) — and the GEMM starts from it;
 * the GEMM epilogue scales to base 2 and records row maxima; then the online softmax
 * (running max m, sum l, rescale factor alpha per row) and O = alpha O + P V. Nothing of
 * size L x L ever exists.
 *
 * Backward, per pair (one work item): see bwd_pair below and NOTES.md.
 *
 * Every sum has a fixed order that depends only on the shape (GEMM: k ascending in
 * blocks of 256; tiles in key order), never on threads, so results are bitwise
 * identical for any thread count.
 */

#include "cpu.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KCAT2(a, b) a##_##b
#define KCAT(a, b) KCAT2(a, b)

#define LOG2E_F 1.44269504088896340736f
#define LN2_D 0.69314718055994530942

#if defined(__GNUC__)
#define KINLINE static inline __attribute__((always_inline))
#define KUNROLL _Pragma("GCC unroll 16")
#else
#define KINLINE static inline
#define KUNROLL
#endif

static inline int64_t kmin(int64_t a, int64_t b) { return a < b ? a : b; }

/* =============================================================== GEMM micro-kernel
 * C[mr x nv*VL] = init + sum_k A(i, k) B[k][:], A(i, k) = A[i*ars + k*aks].
 * init: zero, the current C, the current C times rs[i], or rs[i] + cv[:].
 * Optional epilogue (last K block only): C *= scale, and rmax[i] = max(rmax[i], max of
 * the stored row) — the score GEMM hands the softmax its scaled scores and row maxima.
 * With an epilogue whose bias_last is set, an INIT_LOAD / INIT_ROWCOL init is added
 * after the K sum instead of before it (the GEMM must then be one K block): the score
 * GEMM's init is the c2p + p2c bias, often 10x larger than the partial sums of q.k, and
 * starting the sum from it rounds all D steps at the bias's magnitude (fp32 backward
 * scores ~10 ulps off on large biases; NOTES.md, "CPU score accuracy"). */
enum { INIT_ZERO = 0, INIT_LOAD = 1, INIT_SCALE = 2, INIT_ROWCOL = 3 };

typedef struct gepi {
    float scale; /* multiply the result (1 = no) */
    float *rmax; /* running row maxima of the result, or NULL */
    int bias_last; /* add the LOAD / ROWCOL init after the K sum (one K block only) */
} gepi;

KINLINE void ukr(const int mr, const int nv, int64_t K, const float *A, int64_t ars, int64_t aks,
                 const float *B, int64_t ldb, float *C, int64_t ldc, const int init,
                 const float *rs, const float *cv, const gepi *ep)
{
    vf acc[MR][NV];
    const int late = ep && ep->bias_last && (init == INIT_LOAD || init == INIT_ROWCOL);
    KUNROLL for (int r = 0; r < mr; r++) {
        KUNROLL for (int v = 0; v < nv; v++) {
            if (init == INIT_ZERO || late) acc[r][v] = vzero();
            else if (init == INIT_LOAD) acc[r][v] = vload(C + r * ldc + v * VL);
            else if (init == INIT_SCALE) acc[r][v] = vmul(vload(C + r * ldc + v * VL), vset1(rs[r]));
            else acc[r][v] = vadd(vset1(rs[r]), vload(cv + v * VL));
        }
    }
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        const float *a = A + k * aks;
        vf bv[NV];
        KUNROLL for (int v = 0; v < nv; v++) bv[v] = vload(b + v * VL);
        KUNROLL for (int r = 0; r < mr; r++) {
            vf av = vset1(a[r * ars]);
            KUNROLL for (int v = 0; v < nv; v++) acc[r][v] = vfma(av, bv[v], acc[r][v]);
        }
    }
    if (late) {
        KUNROLL for (int r = 0; r < mr; r++) {
            KUNROLL for (int v = 0; v < nv; v++) {
                if (init == INIT_LOAD) acc[r][v] = vadd(acc[r][v], vload(C + r * ldc + v * VL));
                else acc[r][v] = vadd(acc[r][v], vadd(vset1(rs[r]), vload(cv + v * VL)));
            }
        }
    }
    if (ep) {
        const vf sc = vset1(ep->scale);
        KUNROLL for (int r = 0; r < mr; r++) {
            KUNROLL for (int v = 0; v < nv; v++) acc[r][v] = vmul(acc[r][v], sc);
        }
        if (ep->rmax) {
            KUNROLL for (int r = 0; r < mr; r++) {
                vf m = acc[r][0];
                KUNROLL for (int v = 1; v < nv; v++) m = vmax(m, acc[r][v]);
                float x = vhmax(m);
                if (x > ep->rmax[r]) ep->rmax[r] = x;
            }
        }
    }
    KUNROLL for (int r = 0; r < mr; r++) {
        KUNROLL for (int v = 0; v < nv; v++) vstore(C + r * ldc + v * VL, acc[r][v]);
    }
}

/* One specialization per (mr, nv, init). */
#define UKR_ARGS                                                                               \
    int64_t K, const float *A, int64_t ars, int64_t aks, const float *B, int64_t ldb, float *C, \
        int64_t ldc, const float *rs, const float *cv, const gepi *ep
#define UKR_PASS K, A, ars, aks, B, ldb, C, ldc

static void ukr_dispatch(int mr, int nv, int init, UKR_ARGS)
{
    /* mr in 1..MR, nv in 1..NV: the switch instantiates every combination. */
#define UKR_CASE(m, v)                                                                         \
    case (m) * 16 + (v):                                                                       \
        switch (init) {                                                                        \
        case INIT_ZERO: ukr(m, v, UKR_PASS, INIT_ZERO, rs, cv, ep); return;                    \
        case INIT_LOAD: ukr(m, v, UKR_PASS, INIT_LOAD, rs, cv, ep); return;                    \
        case INIT_SCALE: ukr(m, v, UKR_PASS, INIT_SCALE, rs, cv, ep); return;                  \
        default: ukr(m, v, UKR_PASS, INIT_ROWCOL, rs, cv, ep); return;                         \
        }
#define UKR_ROW(m) UKR_CASE(m, 1) UKR_CASE_NV2(m) UKR_CASE_NV3(m) UKR_CASE_NV4(m)
#if NV >= 2
#define UKR_CASE_NV2(m) UKR_CASE(m, 2)
#else
#define UKR_CASE_NV2(m)
#endif
#if NV >= 3
#define UKR_CASE_NV3(m) UKR_CASE(m, 3)
#else
#define UKR_CASE_NV3(m)
#endif
#if NV >= 4
#define UKR_CASE_NV4(m) UKR_CASE(m, 4)
#else
#define UKR_CASE_NV4(m)
#endif
    switch (mr * 16 + nv) {
        UKR_ROW(1)
#if MR >= 2
        UKR_ROW(2)
#endif
#if MR >= 3
        UKR_ROW(3)
#endif
#if MR >= 4
        UKR_ROW(4)
#endif
#if MR >= 5
        UKR_ROW(5)
#endif
#if MR >= 6
        UKR_ROW(6)
#endif
    default: break;
    }
#undef UKR_CASE
#undef UKR_ROW
#undef UKR_CASE_NV2
#undef UKR_CASE_NV3
#undef UKR_CASE_NV4
}

/* C[M x N] = init + A(M x K) B(K x N) [epilogue]; N a multiple of VL. K is summed in
 * blocks of KC in ascending order (a fixed order: results depend on the shape only). */
#define GEMM_KC 256
static void gemm_ep(int64_t M, int64_t N, int64_t K, const float *A, int64_t ars, int64_t aks,
                    const float *B, int64_t ldb, float *C, int64_t ldc, int init, const float *rs,
                    const float *cv, const gepi *ep)
{
    int64_t k0 = 0;
    do {
        int64_t kc = kmin(GEMM_KC, K - k0);
        int in = k0 == 0 ? init : INIT_LOAD;
        int last = k0 + kc >= K;
        for (int64_t j = 0; j < N; j += NV * VL) {
            int nv = (int)kmin(NV, (N - j) / VL);
            for (int64_t i = 0; i < M; i += MR) {
                int mr = (int)kmin(MR, M - i);
                gepi e, *pe = NULL;
                if (ep && last) {
                    e.scale = ep->scale;
                    e.rmax = ep->rmax ? ep->rmax + i : NULL;
                    e.bias_last = ep->bias_last && k0 == 0;
                    pe = &e;
                }
                ukr_dispatch(mr, nv, in, kc, A + i * ars + k0 * aks, ars, aks, B + k0 * ldb + j,
                             ldb, C + i * ldc + j, ldc, rs ? rs + i : NULL, cv ? cv + j : NULL, pe);
            }
        }
        k0 += kc;
    } while (k0 < K);
}

static void gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t ars, int64_t aks,
                 const float *B, int64_t ldb, float *C, int64_t ldc, int init, const float *rs,
                 const float *cv)
{
    gemm_ep(M, N, K, A, ars, aks, B, ldb, C, ldc, init, rs, cv, NULL);
}

/* =============================================================== packing */

/* Key tile jt of the pair: K^T (and K, V^T for the backward), V, key bias, any-valid. */
static void pack_keys(const cpu_plan *pl, cpu_pair *pr, int64_t jt, int bwd, float *row)
{
    const dattn_call *c = pl->c;
    const dattn_params *p = c->p;
    const size_t es = dattn_dtype_size(p->dtype);
    const int64_t D = pl->D, Dp = pl->Dp, bn = pl->bn, j0 = jt * bn;
    const int64_t nb = kmin(bn, pr->n - j0);
    float *kt = pr->kt + jt * D * bn;
    float *vt = bwd ? pr->vt + jt * D * bn : NULL;
    int any = 0;
    for (int64_t jj = 0; jj < bn; jj++) {
        int64_t j = j0 + jj;
        if (jj < nb) {
            cvt_load(row, dattn_ptr(&p->k, dattn_row_off(c, &p->k, pr->b, j, pr->h), es), p->dtype, D);
            for (int64_t d = 0; d < D; d++) kt[d * bn + jj] = row[d];
            if (bwd) {
                memcpy(pr->kn + j * Dp, row, sizeof(float) * (size_t)D);
                memset(pr->kn + j * Dp + D, 0, sizeof(float) * (size_t)(Dp - D));
            }
            float *vr = bwd ? row : pr->v + j * Dp;
            cvt_load(vr, dattn_ptr(&p->v, dattn_row_off(c, &p->v, pr->b, j, pr->h), es), p->dtype, D);
            if (bwd) {
                for (int64_t d = 0; d < D; d++) vt[d * bn + jj] = row[d];
            } else {
                memset(vr + D, 0, sizeof(float) * (size_t)(Dp - D));
            }
            int ok = dattn_valid(c, pr->b, j);
            pr->kbias[j] = ok ? 0.0f : -INFINITY;
            any |= ok;
        } else {
            for (int64_t d = 0; d < D; d++) kt[d * bn + jj] = 0.0f;
            if (bwd) {
                for (int64_t d = 0; d < D; d++) vt[d * bn + jj] = 0.0f;
                memset(pr->kn + j * Dp, 0, sizeof(float) * (size_t)Dp);
            } else {
                memset(pr->v + j * Dp, 0, sizeof(float) * (size_t)Dp);
            }
            pr->kbias[j] = -INFINITY;
        }
    }
    pr->tany[jt] = (unsigned char)any;
}

/* Rows of the p2c table for key tile jt — only the slots its keys can see,
 * [slot(-(j0 + nb - 1)), slot(n - 1 - j0)], stored within the row — and the saturated
 * columns + key bias. */
static void p2c_rows(const cpu_plan *pl, cpu_pair *pr, int64_t jt)
{
    const dattn_call *c = pl->c;
    const int64_t bn = pl->bn, j0 = jt * bn, nb = kmin(bn, pr->n - j0);
    const dattn_slotmap *sm = pl->sm;
    if (c->p2c) {
        const float *pqt = pl->pqt + pr->h * pl->D * pl->W2;
        int32_t lo, hi;
        dattn_cpu_slot_range(pl, -(j0 + nb - 1), pr->n - 1 - j0, &lo, &hi);
        const int64_t N = dattn_round_up(hi - lo + 1, 16);
        int64_t off = lo - pr->tlo_p;
        if (off + N > pr->Wp) off = pr->Wp - N; /* stay inside the row */
        gemm(nb, N, pl->D, pr->kt + jt * pl->D * bn, 1, bn, pqt + pr->tlo_p + off, pl->W2,
             pr->ptab + j0 * pr->Wp + off, pr->Wp, INIT_ZERO, NULL, NULL);
        /* the band bias reads up to 15 floats past the last row */
        if (j0 + nb == pr->n) memset(pr->ptab + pr->n * pr->Wp, 0, sizeof(float) * 16);
        int64_t tp = sm->sat_pos - pr->tlo_p, tn = sm->sat_neg - pr->tlo_p;
        int okp = tp >= off && tp < off + N, okn = tn >= off && tn < off + N;
        for (int64_t jj = 0; jj < bn; jj++) {
            int64_t j = j0 + jj;
            float pp = 0.0f, pn = 0.0f;
            if (jj < nb) {
                if (okp) pp = pr->ptab[j * pr->Wp + tp];
                if (okn) pn = pr->ptab[j * pr->Wp + tn];
            }
            pr->psp[j] = pp + pr->kbias[j];
            pr->psn[j] = pn + pr->kbias[j];
        }
    } else {
        for (int64_t jj = 0; jj < bn; jj++) pr->psp[j0 + jj] = pr->psn[j0 + jj] = pr->kbias[j0 + jj];
    }
}

static void KCAT(fwd_tile, ISA_SUFFIX)(const cpu_plan *pl, cpu_pair *pr, int64_t jt)
{
    float row[256];
    pack_keys(pl, pr, jt, 0, row);
    p2c_rows(pl, pr, jt);
}

/* =============================================================== score tiles */

/* Row-block facts shared by the forward and the backward. */
typedef struct rowblk {
    int64_t i0, mb;
    int32_t tlo_c; /* first slot of the c2p table */
    int64_t Wc;    /* its row length (multiple of 16) */
    int64_t Wreal; /* slots it really covers */
    int nvalid;
} rowblk;

static void rowblk_init(const cpu_plan *pl, const cpu_pair *pr, int64_t rb, rowblk *rk,
                        cpu_tbuf *tb)
{
    const dattn_call *c = pl->c;
    rk->i0 = rb * pl->bm;
    rk->mb = kmin(pl->bm, pr->n - rk->i0);
    int32_t thi;
    dattn_cpu_slot_range(pl, rk->i0 - (pr->n - 1), rk->i0 + rk->mb - 1, &rk->tlo_c, &thi);
    rk->Wreal = thi - rk->tlo_c + 1;
    rk->Wc = dattn_round_up(rk->Wreal, 16);
    rk->nvalid = 0;
    for (int64_t ii = 0; ii < rk->mb; ii++) {
        int ok = dattn_valid(c, pr->b, rk->i0 + ii);
        tb->valid[ii] = (unsigned char)ok;
        rk->nvalid += ok;
    }
}

/* Loads the block's query rows (zeros for padded rows) and computes its c2p table. */
static void rowblk_q(const cpu_plan *pl, const cpu_pair *pr, const rowblk *rk, cpu_tbuf *tb)
{
    const dattn_call *c = pl->c;
    const dattn_params *p = c->p;
    const size_t es = dattn_dtype_size(p->dtype);
    const int64_t D = pl->D, Dp = pl->Dp;
    for (int64_t ii = 0; ii < rk->mb; ii++) {
        float *q = tb->q + ii * Dp;
        if (tb->valid[ii]) {
            cvt_load(q, dattn_ptr(&p->q, dattn_row_off(c, &p->q, pr->b, rk->i0 + ii, pr->h), es),
                     p->dtype, D);
            memset(q + D, 0, sizeof(float) * (size_t)(Dp - D));
        } else {
            memset(q, 0, sizeof(float) * (size_t)Dp);
        }
    }
    if (c->c2p) {
        const float *pkt = pl->pkt + pr->h * D * pl->W2;
        gemm(rk->mb, rk->Wc, D, tb->q, Dp, 1, pkt + rk->tlo_c, pl->W2, tb->ctab, rk->Wc,
             INIT_ZERO, NULL, NULL);
        int64_t tp = pl->sm->sat_pos - rk->tlo_c, tn = pl->sm->sat_neg - rk->tlo_c;
        int okp = tp >= 0 && tp < rk->Wreal, okn = tn >= 0 && tn < rk->Wreal;
        for (int64_t ii = 0; ii < rk->mb; ii++) {
            tb->crp[ii] = okp ? tb->ctab[ii * rk->Wc + tp] : 0.0f;
            tb->crn[ii] = okn ? tb->ctab[ii * rk->Wc + tn] : 0.0f;
        }
    }
}

/* Tile class of rows [i0, i0+mb) x keys [j0, j0+nb): 1 = every r >= R (saturated
 * positive), -1 = every r <= -R, 0 = band. */
static int tile_class(const cpu_plan *pl, int64_t i0, int64_t mb, int64_t j0, int64_t nb)
{
    int64_t rmin = i0 - (j0 + nb - 1), rmax = i0 + mb - 1 - j0;
    if (rmin >= pl->sm->R) return 1;
    if (rmax <= -(int64_t)pl->sm->R) return -1;
    return 0;
}

/* Band tile bias into S: C[ii][slot] + P[j][slot] + kbias[j]; -inf past the sequence. */
static void band_bias(const cpu_plan *pl, const cpu_pair *pr, const rowblk *rk, const cpu_tbuf *tb,
                      int64_t j0, int64_t nb, float *S)
{
    const dattn_call *c = pl->c;
    const int64_t bn = pl->bn, L = pl->L;
    const vi lanes_wp = vmulloi(vlanes(), vseti((int32_t)pr->Wp));
    const vi vtc = vseti(-rk->tlo_c), vtp = vseti(-pr->tlo_p);
    for (int64_t ii = 0; ii < rk->mb; ii++) {
        const int64_t i = rk->i0 + ii;
        const int32_t *sl = pl->sneg + (j0 - i + L - 1);
        float *s = S + ii * bn;
        const float *crow = tb->ctab + ii * rk->Wc;
        for (int64_t jj = 0; jj < bn; jj += VL) {
            if (jj >= nb) {
                vstore(s + jj, vset1(-INFINITY));
                continue;
            }
            int cnt = (int)kmin(VL, nb - jj);
            vi idx = vloadi(sl + jj);
            vf val = vload(pr->kbias + j0 + jj);
            if (c->c2p) val = vadd(val, vgather_n(crow, vaddi(idx, vtc), cnt));
            if (c->p2c)
                val = vadd(val, vgather_n(pr->ptab + (j0 + jj) * pr->Wp,
                                          vaddi(vaddi(idx, vtp), lanes_wp), cnt));
            vstore(s + jj, val);
        }
    }
}

/* Band tile bias without gathers (needs unit slot steps): 16 consecutive keys of a row
 * see 16 consecutive r, hence at most 16 consecutive slots: one contiguous load of the
 * row's c2p table and a lane permute. p2c the same way along a column (16 consecutive
 * rows of one key read one window of that key's p2c row), then a register transpose. */
static void band_bias_perm(const cpu_plan *pl, const cpu_pair *pr, const rowblk *rk,
                           const cpu_tbuf *tb, int64_t j0, int64_t nb, float *S)
{
    const dattn_call *c = pl->c;
    const int64_t bn = pl->bn, L = pl->L, Wp = pr->Wp;
    for (int64_t ii = 0; ii < rk->mb; ii++) {
        const int64_t i = rk->i0 + ii;
        const int32_t *sl = pl->sneg + (j0 - i + L - 1);
        float *s = S + ii * bn;
        const float *crow = tb->ctab + ii * rk->Wc;
        for (int64_t jj = 0; jj < bn; jj += VL) {
            if (jj >= nb) {
                vstore(s + jj, vset1(-INFINITY));
                continue;
            }
            vf val = vload(pr->kbias + j0 + jj);
            if (c->c2p) {
                int32_t lo = sl[jj + VL - 1];
                if (lo < rk->tlo_c) lo = rk->tlo_c; /* lanes past the sequence end */
                vi idx = vsubi(vloadi(sl + jj), vseti(lo));
                val = vadd(val, vpermv(idx, vload(crow + (lo - rk->tlo_c))));
            }
            vstore(s + jj, val);
        }
    }
    if (!c->p2c) return;
    for (int64_t ig = 0; ig < rk->mb; ig += VL) {
        const int64_t rows = kmin(VL, rk->mb - ig);
        for (int64_t jg = 0; jg < nb; jg += VL) {
            vf col[VL];
            for (int k = 0; k < VL; k++) {
                const int64_t j = j0 + jg + k;
                if (jg + k >= nb) {
                    col[k] = vzero();
                    continue;
                }
                const int32_t *sp = pl->spos + (rk->i0 + ig - j + L - 1);
                const int32_t lo = sp[0];
                vi idx = vsubi(vloadi(sp), vseti(lo));
                col[k] = vpermv(idx, vload(pr->ptab + j * Wp + (lo - pr->tlo_p)));
            }
            vtranspose(col);
            for (int64_t m = 0; m < rows; m++) {
                float *s = S + (ig + m) * bn + jg;
                vstore(s, vadd(vload(s), col[m]));
            }
        }
    }
}

/* S = (bias + Q K^T) * c2 for rows of the block x key tile jt (scores in base-2 units);
 * with rmax != NULL also the running row maxima. */
static void score_tile(const cpu_plan *pl, const cpu_pair *pr, const rowblk *rk, cpu_tbuf *tb,
                       int64_t jt, int *cls_out, float *rmax)
{
    gepi ep = {pl->c2, rmax, 1};
    const dattn_call *c = pl->c;
    const int64_t bn = pl->bn, j0 = jt * bn, nb = kmin(bn, pr->n - j0);
    const float *kt = pr->kt + jt * pl->D * bn;
    int cls = tile_class(pl, rk->i0, rk->mb, j0, nb);
    *cls_out = cls;
    if (!c->c2p && !c->p2c) {
        if (pr->any_masked || nb < bn)
            gemm_ep(rk->mb, bn, pl->D, tb->q, pl->Dp, 1, kt, bn, tb->s, bn, INIT_ROWCOL, tb->zero,
                    pr->kbias + j0, &ep);
        else
            gemm_ep(rk->mb, bn, pl->D, tb->q, pl->Dp, 1, kt, bn, tb->s, bn, INIT_ZERO, NULL, NULL, &ep);
    } else if (cls != 0) {
        const float *rows = !c->c2p ? tb->zero : cls > 0 ? tb->crp : tb->crn;
        const float *cols = cls > 0 ? pr->psp + j0 : pr->psn + j0;
        gemm_ep(rk->mb, bn, pl->D, tb->q, pl->Dp, 1, kt, bn, tb->s, bn, INIT_ROWCOL, rows, cols, &ep);
    } else {
        if (pl->unit_steps) band_bias_perm(pl, pr, rk, tb, j0, nb, tb->s);
        else band_bias(pl, pr, rk, tb, j0, nb, tb->s);
        gemm_ep(rk->mb, bn, pl->D, tb->q, pl->Dp, 1, kt, bn, tb->s, bn, INIT_LOAD, NULL, NULL, &ep);
    }
}

/* Dropout multipliers of the tile: 1 kept, 0 dropped (keys past nb: 0). */
static void keep_tile(const cpu_plan *pl, const cpu_pair *pr, const rowblk *rk, int64_t j0,
                      int64_t nb, float *keep)
{
    const dattn_call *c = pl->c;
    const uint64_t seed = c->p->dropout_seed, off = c->p->dropout_offset;
    const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32) ^ (uint32_t)(off >> 32);
    const uint32_t bh = (uint32_t)(pr->b * c->H + pr->h), thr = c->drop_threshold;
    const int64_t bn = pl->bn;
    for (int64_t ii = 0; ii < rk->mb; ii++) {
        const int64_t i = rk->i0 + ii;
        float *kr = keep + ii * bn;
        /* one Philox call per 8 keys (counter j >> 3): 16-bit half (j & 1) of word (j >> 1) & 3 */
        uint32_t r[4] = {0, 0, 0, 0};
        for (int64_t jj = 0; jj < bn; jj++) {
            const int64_t j = j0 + jj;
            if (jj >= nb) {
                kr[jj] = 0.0f;
                continue;
            }
            if (jj == 0 || (j & 7) == 0)
                dattn_philox4x32((uint32_t)(j >> 3), (uint32_t)i, bh, (uint32_t)off, k0, k1, r);
            kr[jj] = ((r[(j >> 1) & 3] >> (16 * (j & 1))) & 0xFFFFu) >= thr ? 1.0f : 0.0f;
        }
    }
}

/* =============================================================== forward, phase 2 */

static void KCAT(fwd_rows, ISA_SUFFIX)(const cpu_plan *pl, const cpu_pair *pr, int64_t rb, cpu_tbuf *tb)
{
    const dattn_call *c = pl->c;
    const dattn_params *p = c->p;
    const size_t es = dattn_dtype_size(p->dtype);
    const int64_t D = pl->D, Dp = pl->Dp, bn = pl->bn, bm = pl->bm, n = pr->n;
    const int drop = c->drop_threshold != 0;
    rowblk rk;
    rowblk_init(pl, pr, rb, &rk, tb);
    float *lse = (float *)p->lse.data;

    if (rk.nvalid > 0) {
        rowblk_q(pl, pr, &rk, tb);
        for (int64_t ii = 0; ii < bm; ii++) tb->m[ii] = -INFINITY;
        for (int64_t x = 0; x < rk.mb * VL; x += VL) vstore(tb->lvec + x, vzero());
        int first = 1;
        for (int64_t jt = 0; jt < pr->nt; jt++) {
            if (!pr->tany[jt]) continue;
            const int64_t j0 = jt * bn, nb = kmin(bn, n - j0);
            int cls;
            for (int64_t ii = 0; ii < bm; ii += VL) vstore(tb->rmax + ii, vset1(-INFINITY));
            score_tile(pl, pr, &rk, tb, jt, &cls, tb->rmax);
            /* online softmax in base 2: new maxima and rescale factors, VL rows at a time
             * (a row whose maximum is still -inf has only -inf scores: any finite
             * reference gives it p = 0 and alpha = 0) */
            for (int64_t ii = 0; ii < bm; ii += VL) {
                vf mo = vload(tb->m + ii), mn = vmax(mo, vload(tb->rmax + ii));
                vf ref = vmax(mn, vset1(-FLT_MAX));
                vstore(tb->alpha + ii, vexp2(vsub(mo, ref)));
                vstore(tb->ref + ii, ref);
                vstore(tb->m + ii, mn);
            }
            for (int64_t ii = 0; ii < rk.mb; ii++) {
                float *s = tb->s + ii * bn;
                const vf mv = vset1(tb->ref[ii]);
                vf sum = vzero();
                for (int64_t jj = 0; jj < bn; jj += VL) {
                    vf e = vexp2(vsub(vload(s + jj), mv));
                    vstore(s + jj, e);
                    sum = vadd(sum, e);
                }
                float *lv = tb->lvec + ii * VL;
                vstore(lv, vfma(vload(lv), vset1(tb->alpha[ii]), sum));
            }
            if (drop) {
                keep_tile(pl, pr, &rk, j0, nb, tb->keep);
                for (int64_t x = 0; x < rk.mb * bn; x += VL)
                    vstore(tb->s + x, vmul(vload(tb->s + x), vload(tb->keep + x)));
            }
            gemm(rk.mb, Dp, nb, tb->s, bn, 1, pr->v + j0 * Dp, Dp, tb->o, Dp,
                 first ? INIT_ZERO : INIT_SCALE, tb->alpha, NULL);
            first = 0;
        }
        for (int64_t ii = 0; ii < rk.mb; ii++) {
            if (!tb->valid[ii]) continue;
            const int64_t i = rk.i0 + ii;
            float *o = tb->o + ii * Dp;
            float l = vhsum(vload(tb->lvec + ii * VL));
            float f = (drop ? c->drop_scale : 1.0f) / l;
            vf fv = vset1(f);
            for (int64_t d = 0; d < Dp; d += VL) vstore(o + d, vmul(vload(o + d), fv));
            cvt_store((char *)p->out.data + dattn_row_off(c, &p->out, pr->b, i, pr->h) * (int64_t)es,
                      o, p->dtype, D);
            if (lse)
                lse[dattn_lse_off(c, pr->b, pr->h, i)] =
                    (float)((double)tb->m[ii] * LN2_D + log((double)l));
        }
    }
    if (rk.nvalid == rk.mb) return;

    /* Padded query rows: the mean of v over all n keys (HF), or zeros. */
    const int hf = p->padded_rows == DATTN_PADROWS_HF;
    int have_mean = 0;
    for (int64_t ii = 0; ii < rk.mb; ii++) {
        if (tb->valid[ii]) continue;
        const int64_t i = rk.i0 + ii;
        float *o = tb->o + ii * Dp;
        for (int64_t d = 0; d < Dp; d += VL) vstore(o + d, vzero());
        if (hf && n > 0) {
            const float f = (drop ? c->drop_scale : 1.0f) / (float)n;
            if (drop) {
                for (int64_t j0 = 0; j0 < n; j0 += bn) {
                    const int64_t nb = kmin(bn, n - j0);
                    rowblk one = rk;
                    one.i0 = i;
                    one.mb = 1;
                    keep_tile(pl, pr, &one, j0, nb, tb->keep);
                    for (int64_t jj = 0; jj < nb; jj++)
                        if (tb->keep[jj] != 0.0f)
                            for (int64_t d = 0; d < Dp; d += VL)
                                vstore(o + d, vadd(vload(o + d), vload(pr->v + (j0 + jj) * Dp + d)));
                }
                vf fv = vset1(f);
                for (int64_t d = 0; d < Dp; d += VL) vstore(o + d, vmul(vload(o + d), fv));
            } else {
                if (!have_mean) {
                    for (int64_t d = 0; d < Dp; d += VL) vstore(tb->vsum + d, vzero());
                    for (int64_t j = 0; j < n; j++)
                        for (int64_t d = 0; d < Dp; d += VL)
                            vstore(tb->vsum + d, vadd(vload(tb->vsum + d), vload(pr->v + j * Dp + d)));
                    vf fv = vset1(f);
                    for (int64_t d = 0; d < Dp; d += VL) vstore(tb->vsum + d, vmul(vload(tb->vsum + d), fv));
                    have_mean = 1;
                }
                memcpy(o, tb->vsum, sizeof(float) * (size_t)Dp);
            }
        }
        cvt_store((char *)p->out.data + dattn_row_off(c, &p->out, pr->b, i, pr->h) * (int64_t)es, o,
                  p->dtype, D);
        if (lse) lse[dattn_lse_off(c, pr->b, pr->h, i)] = hf ? logf((float)n) : -INFINITY;
    }
}

/* =============================================================== backward */

/* ds of a tile scattered into the slot-indexed sums gc (rows of the block) and gp (keys). */
static void scatter_ds(const cpu_plan *pl, cpu_pair *pr, const rowblk *rk, cpu_tbuf *tb,
                       int64_t j0, int64_t nb, int cls, const float *ds)
{
    const dattn_call *c = pl->c;
    const int64_t bn = pl->bn, L = pl->L, Wp = pr->Wp, Wc = rk->Wc;
    if (cls != 0) {
        const int32_t sat = cls > 0 ? pl->sm->sat_pos : pl->sm->sat_neg;
        if (c->c2p) {
            float *g = tb->gc + (sat - rk->tlo_c);
            for (int64_t ii = 0; ii < rk->mb; ii++) {
                vf acc = vzero();
                for (int64_t jj = 0; jj < bn; jj += VL) acc = vadd(acc, vload(ds + ii * bn + jj));
                g[ii * Wc] += vhsum(acc);
            }
        }
        if (c->p2c) {
            float *g = (cls > 0 ? pr->gsp : pr->gsn) + j0;
            for (int64_t jj = 0; jj < bn; jj += VL) {
                vf acc = vload(g + jj);
                for (int64_t ii = 0; ii < rk->mb; ii++) acc = vadd(acc, vload(ds + ii * bn + jj));
                vstore(g + jj, acc);
            }
        }
        return;
    }
#ifdef HAVE_SEGADD
    if (pl->unit_steps) {
        /* c2p: along a row, 16 keys hit at most 16 consecutive slots (descending) */
        if (c->c2p) {
            for (int64_t ii = 0; ii < rk->mb; ii++) {
                const int64_t i = rk->i0 + ii;
                const int32_t *sl = pl->sneg + (j0 - i + L - 1);
                for (int64_t jj = 0; jj < nb; jj += VL) {
                    int32_t lo = sl[jj + VL - 1];
                    if (lo < rk->tlo_c) lo = rk->tlo_c; /* lanes past the end carry ds = 0 */
                    vi o = vmaxi0(vsubi(vloadi(sl + jj), vseti(lo)));
                    segadd_asc(tb->gc + ii * Wc + (lo - rk->tlo_c), vrevi(o), vrev(vload(ds + ii * bn + jj)));
                }
            }
        }
        /* p2c: along a column, 16 rows hit at most 16 consecutive slots (ascending) */
        if (c->p2c) {
            for (int64_t ig = 0; ig < rk->mb; ig += VL) {
                for (int64_t jg = 0; jg < nb; jg += VL) {
                    vf col[VL];
                    for (int k = 0; k < VL; k++)
                        col[k] = ig + k < rk->mb ? vload(ds + (ig + k) * bn + jg) : vzero();
                    vtranspose(col);
                    for (int k = 0; k < VL && jg + k < nb; k++) {
                        const int64_t j = j0 + jg + k;
                        const int32_t *sp = pl->spos + (rk->i0 + ig - j + L - 1);
                        const int32_t lo = sp[0];
                        segadd_asc(pr->gp + j * Wp + (lo - pr->tlo_p), vsubi(vloadi(sp), vseti(lo)), col[k]);
                    }
                }
            }
        }
        return;
    }
#endif
    for (int64_t ii = 0; ii < rk->mb; ii++) {
        const int64_t i = rk->i0 + ii;
        const int32_t *sl = pl->sneg + (j0 - i + L - 1);
        const float *d = ds + ii * bn;
        if (c->c2p) {
            float *gr = tb->gc + ii * Wc;
            for (int64_t jj = 0; jj < nb; jj++) gr[sl[jj] - rk->tlo_c] += d[jj];
        }
        if (c->p2c) {
            for (int64_t jj = 0; jj < nb; jj++) pr->gp[(j0 + jj) * Wp + (sl[jj] - pr->tlo_p)] += d[jj];
        }
    }
}

static void KCAT(bwd_pair, ISA_SUFFIX)(const cpu_plan *pl, cpu_pair *pr, cpu_tbuf *tb,
                                       float *dpk_part, float *dpq_part)
{
    const dattn_call *c = pl->c;
    const dattn_params *p = c->p;
    const size_t es = dattn_dtype_size(p->dtype);
    const int64_t D = pl->D, Dp = pl->Dp, bn = pl->bn, bm = pl->bm, n = pr->n;
    const int drop = c->drop_threshold != 0;
    const float dscale = drop ? c->drop_scale : 1.0f;
    const float *lse = (const float *)p->lse.data;
    float row[256];

    for (int64_t jt = 0; jt < pr->nt; jt++) {
        pack_keys(pl, pr, jt, 1, row);
        p2c_rows(pl, pr, jt);
    }
    memset(pr->dk, 0, sizeof(float) * (size_t)(pr->npad * Dp));
    memset(pr->dv, 0, sizeof(float) * (size_t)(pr->npad * Dp));
    if (c->p2c) {
        memset(pr->gp, 0, sizeof(float) * (size_t)(pr->npad * pr->Wp));
        memset(pr->gsp, 0, sizeof(float) * (size_t)pr->npad);
        memset(pr->gsn, 0, sizeof(float) * (size_t)pr->npad);
    }
    /* only the call's slots [smin, smax] are ever touched (reduce_tables zeroes the rest) */
    const size_t part_off = (size_t)(pl->smin * Dp), part_len = (size_t)((pl->smax - pl->smin + 1) * Dp);
    if (dpk_part) memset(dpk_part + part_off, 0, sizeof(float) * part_len);
    if (dpq_part) memset(dpq_part + part_off, 0, sizeof(float) * part_len);

    const vf vis = vset1(pl->inv_scale);
    const int64_t nrb = (n + bm - 1) / bm;
    for (int64_t rb = 0; rb < nrb; rb++) {
        rowblk rk;
        rowblk_init(pl, pr, rb, &rk, tb);
        for (int64_t d = 0; d < rk.mb * Dp; d += VL) vstore(tb->dq + d, vzero());
        if (rk.nvalid > 0) {
            rowblk_q(pl, pr, &rk, tb);
            for (int64_t ii = 0; ii < rk.mb; ii++) {
                const int64_t i = rk.i0 + ii;
                float *dout = tb->dout + ii * Dp;
                if (!tb->valid[ii]) {
                    memset(dout, 0, sizeof(float) * (size_t)Dp);
                    tb->di[ii] = 0.0f;
                    tb->lse2[ii] = INFINITY;
                    continue;
                }
                cvt_load(dout, dattn_ptr(&p->dout, dattn_row_off(c, &p->dout, pr->b, i, pr->h), es),
                         p->dtype, D);
                memset(dout + D, 0, sizeof(float) * (size_t)(Dp - D));
                cvt_load(row, dattn_ptr(&p->out, dattn_row_off(c, &p->out, pr->b, i, pr->h), es),
                         p->dtype, D);
                float di = 0.0f;
                for (int64_t d = 0; d < D; d++) di += dout[d] * row[d];
                tb->di[ii] = di;
                tb->lse2[ii] = (float)((double)lse[dattn_lse_off(c, pr->b, pr->h, i)] / LN2_D);
            }
            if (c->c2p) memset(tb->gc, 0, sizeof(float) * (size_t)(rk.mb * rk.Wc));
            for (int64_t jt = 0; jt < pr->nt; jt++) {
                if (!pr->tany[jt]) continue;
                const int64_t j0 = jt * bn, nb = kmin(bn, n - j0);
                int cls;
                score_tile(pl, pr, &rk, tb, jt, &cls, NULL);
                    /* dP = dO V^T */
                gemm(rk.mb, bn, D, tb->dout, Dp, 1, pr->vt + jt * D * bn, bn, tb->dp, bn, INIT_ZERO,
                     NULL, NULL);
                if (drop) keep_tile(pl, pr, &rk, j0, nb, tb->keep);
                for (int64_t ii = 0; ii < rk.mb; ii++) {
                    float *s = tb->s + ii * bn, *dp = tb->dp + ii * bn;
                    if (!tb->valid[ii]) {
                        for (int64_t jj = 0; jj < bn; jj += VL) {
                            vstore(s + jj, vzero());
                            vstore(dp + jj, vzero());
                        }
                        continue;
                    }
                    const vf l2 = vset1(tb->lse2[ii]), di = vset1(tb->di[ii]);
                    const vf ks = vset1(dscale);
                    for (int64_t jj = 0; jj < bn; jj += VL) {
                        vf pv = vexp2(vsub(vload(s + jj), l2));
                        vf dpv = vload(dp + jj);
                        if (drop) {
                            vf kp = vmul(vload(tb->keep + ii * bn + jj), ks);
                            dpv = vmul(dpv, kp);
                            vstore(s + jj, vmul(pv, kp));
                        } else {
                            vstore(s + jj, pv);
                        }
                        vstore(dp + jj, vmul(vmul(pv, vsub(dpv, di)), vis));
                    }
                }
                /* dV += P^T dO, dK += dS^T Q, dQ += dS K */
                gemm(nb, Dp, rk.mb, tb->s, 1, bn, tb->dout, Dp, pr->dv + j0 * Dp, Dp, INIT_LOAD, NULL, NULL);
                gemm(nb, Dp, rk.mb, tb->dp, 1, bn, tb->q, Dp, pr->dk + j0 * Dp, Dp, INIT_LOAD, NULL, NULL);
                gemm(rk.mb, Dp, nb, tb->dp, bn, 1, pr->kn + j0 * Dp, Dp, tb->dq, Dp, INIT_LOAD, NULL, NULL);
                if (c->c2p || c->p2c) scatter_ds(pl, pr, &rk, tb, j0, nb, cls, tb->dp);
            }
            if (c->c2p) {
                const float *pkn = pl->pkn + (pr->h * pl->S2 + rk.tlo_c) * Dp;
                gemm(rk.mb, Dp, rk.Wreal, tb->gc, rk.Wc, 1, pkn, Dp, tb->dq, Dp, INIT_LOAD, NULL, NULL);
                gemm(rk.Wreal, Dp, rk.mb, tb->gc, 1, rk.Wc, tb->q, Dp, dpk_part + rk.tlo_c * Dp, Dp,
                     INIT_LOAD, NULL, NULL);
            }
        }
        for (int64_t ii = 0; ii < rk.mb; ii++)
            cvt_store((char *)p->dq.data + dattn_row_off(c, &p->dq, pr->b, rk.i0 + ii, pr->h) * (int64_t)es,
                      tb->dq + ii * Dp, p->dtype, D);
    }

    /* HF padded query rows: uniform probabilities 1/n over all keys -> dv only. */
    if (p->padded_rows == DATTN_PADROWS_HF && n > 0) {
        const float f = dscale / (float)n;
        int have = 0;
        for (int64_t d = 0; d < Dp; d += VL) vstore(tb->vsum + d, vzero());
        for (int64_t i = 0; i < n; i++) {
            if (dattn_valid(c, pr->b, i)) continue;
            cvt_load(row, dattn_ptr(&p->dout, dattn_row_off(c, &p->dout, pr->b, i, pr->h), es),
                     p->dtype, D);
            memset(row + D, 0, sizeof(float) * (size_t)(Dp - D));
            if (!drop) {
                for (int64_t d = 0; d < Dp; d += VL) vstore(tb->vsum + d, vadd(vload(tb->vsum + d), vload(row + d)));
                have = 1;
                continue;
            }
            const vf fv = vset1(f);
            for (int64_t j0 = 0; j0 < n; j0 += bn) {
                const int64_t nb = kmin(bn, n - j0);
                rowblk one;
                one.i0 = i;
                one.mb = 1;
                keep_tile(pl, pr, &one, j0, nb, tb->keep);
                for (int64_t jj = 0; jj < nb; jj++)
                    if (tb->keep[jj] != 0.0f)
                        for (int64_t d = 0; d < Dp; d += VL) {
                            float *dv = pr->dv + (j0 + jj) * Dp + d;
                            vstore(dv, vfma(fv, vload(row + d), vload(dv)));
                        }
            }
        }
        if (have) {
            const vf fv = vset1(f);
            for (int64_t d = 0; d < Dp; d += VL) vstore(tb->vsum + d, vmul(vload(tb->vsum + d), fv));
            for (int64_t j = 0; j < n; j++)
                for (int64_t d = 0; d < Dp; d += VL) {
                    float *dv = pr->dv + j * Dp + d;
                    vstore(dv, vadd(vload(dv), vload(tb->vsum + d)));
                }
        }
    }

    if (c->p2c && n > 0) {
        const int64_t Wreal = pr->Wreal_p;
        const int64_t tp = pl->sm->sat_pos - pr->tlo_p, tn = pl->sm->sat_neg - pr->tlo_p;
        for (int64_t j = 0; j < n; j++) { /* saturated tiles only exist when in range */
            if (tp >= 0 && tp < Wreal) pr->gp[j * pr->Wp + tp] += pr->gsp[j];
            if (tn >= 0 && tn < Wreal) pr->gp[j * pr->Wp + tn] += pr->gsn[j];
        }
        const float *pqn = pl->pqn + (pr->h * pl->S2 + pr->tlo_p) * Dp;
        gemm(n, Dp, Wreal, pr->gp, pr->Wp, 1, pqn, Dp, pr->dk, Dp, INIT_LOAD, NULL, NULL);
        gemm(Wreal, Dp, n, pr->gp, 1, pr->Wp, pr->kn, Dp, dpq_part + pr->tlo_p * Dp, Dp, INIT_LOAD,
             NULL, NULL);
    }
    for (int64_t j = 0; j < n; j++) {
        cvt_store((char *)p->dk.data + dattn_row_off(c, &p->dk, pr->b, j, pr->h) * (int64_t)es,
                  pr->dk + j * Dp, p->dtype, D);
        cvt_store((char *)p->dv.data + dattn_row_off(c, &p->dv, pr->b, j, pr->h) * (int64_t)es,
                  pr->dv + j * Dp, p->dtype, D);
    }
}

const dattn_cpu_kernels KERNELS = {
    ISA_NAME,
    KCAT(fwd_tile, ISA_SUFFIX),
    KCAT(fwd_rows, ISA_SUFFIX),
    KCAT(bwd_pair, ISA_SUFFIX),
};

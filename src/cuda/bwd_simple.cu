/* dattn backward, simple CUDA kernels (first version: correctness and determinism first).
 * Any dtype (fp32 arithmetic throughout), any head dim up to 256, any strides the forward
 * accepts, padded (any mask, HF / ZERO padded rows) and packed layouts, dropout.
 *
 * With g_ij = p_ij (keep_ij dp_ij - D_i) / scale (SPEC.md "Backward"; keep_ij = 1/(1-p)
 * or 0 under dropout, else 1) the work is split into five kernels, stream-ordered:
 *
 *   1. di      D_i = dout_i . out_i (out re-read in the storage dtype, as the CPU backend)
 *              for every row; one warp per row -> workspace.
 *   2. dq      one warp per query row, 32-key chunks of K and V staged in shared memory
 *              (fp32), one lane per key recomputes s_ij, p_ij = exp(s_ij / scale - lse_i),
 *              dp_ij and g_ij; each lane owns D/32 columns of
 *              dq_i = sum_j g_ij (k_j + [c2p] pk[slot(i-j)]).
 *              With c2p it also writes the row sums of g_ij over the saturated distances
 *              (r = i - j >= R and r <= -R, where slot is the constant sat_pos / sat_neg).
 *   3. dkdv    one warp per key, 32-query chunks of Q, dout, lse, D staged in shared
 *              memory, one lane per query: dk_j = sum_i g_ij (q_i + [p2c] pq[slot]),
 *              dv_j = sum_i p_ij keep_ij dout_i, plus the uniform average of HF padded
 *              rows (keep_ij / n, their only gradient). With p2c it writes the column sums
 *              of g_ij over the saturated distances.
 *   4. diag    the table gradients, one warp per (sequence, head, slot t): every distance
 *              r with |r| < R and slot(r) = t, in increasing r, walks its diagonal
 *              (i, i - r), recomputing g_ij cooperatively (lanes split D), and adds
 *              g_ij q_i to dpk[t] and g_ij k_j to dpq[t]; the saturated slots then add
 *              sum_i rowsum_i q_i and sum_j colsum_j k_j. A warp walks the sequences of
 *              its group (sgb contiguous groups of the B, sgb = min(B, 132 / H)) in b
 *              order; the result is a per-(group, head) fp32 partial [2S][D] in the
 *              workspace, written in full (zeros where no pair maps).
 *   5. reduce  dpk[h, t] = sum over the groups (in order) of the partials, converted to
 *              the storage dtype.
 *
 * Determinism: every output element and every workspace element has exactly one writer,
 * and every sum runs in a fixed order (lanes' shuffles in a fixed tree, chunks in a fixed
 * order, diagonals in increasing r, sequences in b order, groups in order): no atomics anywhere, bitwise
 * identical results run to run.
 *
 * Workspace (launch.cu, dattn_cuda_bwd_workspace), in floats, rows = B*H*L (padded) or
 * H*T (packed): D_i rows, [c2p] 2 rows, [p2c] 2 rows, [c2p] B*H*2S*D, [p2c] B*H*2S*D;
 * i.e. O(B*H*(5 L + 4 S D)) floats.
 */
#include "bwd_di.cuh"
#include "common.cuh"

#include <cuda_runtime.h>

#define BWD_ROWS 8   /* rows (warps) per block */
#define BWD_KC 32    /* keys / queries per chunk */
#define BWD_NU 8     /* columns per lane: D <= 256 */

DATTN_DEV int row_valid(const dattn_fwd_args &a, const uint8_t *mrow, int i)
{
    return !mrow || mrow[(int64_t)i * a.m_sl] != 0;
}

/* ------------------------------------------------------------------ 1. D_i */

template <int DT>
DATTN_DEV void bwd_di_body(const dattn_bwd_args &A)
{
    const dattn_fwd_args &a = A.f;
    const int lane = threadIdx.x & 31;
    const int b = blockIdx.z, h = blockIdx.y, i = blockIdx.x * BWD_ROWS + (threadIdx.x >> 5);
    int tok0, len;
    dev_seq(a, b, tok0, len);
    if (i >= len) return;
    const int64_t oo = (int64_t)b * a.o_sb + (int64_t)(tok0 + i) * a.o_sl + (int64_t)h * a.o_sh;
    const int64_t go = (int64_t)b * A.do_sb + (int64_t)(tok0 + i) * A.do_sl + (int64_t)h * A.do_sh;
    float s = 0.f;
    for (int d = lane; d < a.D; d += 32) s = fmaf(ld_el<DT>(A.dout, go + d), ld_el<DT>(a.out, oo + d), s);
    s = warp_sum(s);
    if (lane == 0) A.di[ws_row(A, b, h, tok0, i)] = s;
}

/* ------------------------------------------------------------------ 2. dq */

template <int DT>
DATTN_DEV void bwd_dq_body(const dattn_bwd_args &A)
{
    const dattn_fwd_args &a = A.f;
    extern __shared__ __align__(16) float sm[];
    const int D = a.D, DP = a.D + 1;
    float *qs = sm;                      /* [ROWS][D] */
    float *gs = qs + BWD_ROWS * D;       /* [ROWS][D] dout rows */
    float *ks = gs + BWD_ROWS * D;       /* [KC][DP] */
    float *vs = ks + BWD_KC * DP;        /* [KC][DP] */
    uint16_t *stab = (uint16_t *)(vs + BWD_KC * DP);
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * BWD_ROWS;
    int tok0, len;
    dev_seq(a, b, tok0, len);
    if (i0 >= len) return;
    const int64_t qo = (int64_t)b * a.q_sb + (int64_t)tok0 * a.q_sl + (int64_t)h * a.q_sh;
    const int64_t ko = (int64_t)b * a.k_sb + (int64_t)tok0 * a.k_sl + (int64_t)h * a.k_sh;
    const int64_t vo = (int64_t)b * a.v_sb + (int64_t)tok0 * a.v_sl + (int64_t)h * a.v_sh;
    const int64_t go = (int64_t)b * A.do_sb + (int64_t)tok0 * A.do_sl + (int64_t)h * A.do_sh;
    const int64_t pko = (int64_t)h * a.pk_sh, pqo = (int64_t)h * a.pq_sh;
    const uint8_t *mrow = a.mask ? a.mask + (int64_t)b * a.m_sb : (const uint8_t *)0;

    if (a.c2p | a.p2c)
        for (int t = tid; t < 2 * a.nlog; t += blockDim.x) stab[t] = a.tab[t];
    for (int t = tid; t < BWD_ROWS * D; t += blockDim.x) {
        const int r = t / D, d = t % D, i = i0 + r;
        qs[t] = i < len ? ld_el<DT>(a.q, qo + (int64_t)i * a.q_sl + d) : 0.f;
        gs[t] = i < len ? ld_el<DT>(A.dout, go + (int64_t)i * A.do_sl + d) : 0.f;
    }
    const int i = i0 + w;
    const int rv = i < len && row_valid(a, mrow, i);
    float lse_i = 0.f, di = 0.f;
    if (rv) {
        lse_i = a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + i) * a.l_sl];
        di = A.di[ws_row(A, b, h, tok0, i)];
    }
    float acc[BWD_NU];
#pragma unroll
    for (int u = 0; u < BWD_NU; u++) acc[u] = 0.f;
    float gp = 0.f, gn = 0.f;
    const float *q = qs + w * D, *dout = gs + w * D;
    __syncthreads();

    for (int n0 = 0; n0 < len; n0 += BWD_KC) {
        for (int t = tid; t < BWD_KC * D; t += blockDim.x) {
            const int jj = t / D, d = t % D, j = n0 + jj;
            ks[jj * DP + d] = j < len ? ld_el<DT>(a.k, ko + (int64_t)j * a.k_sl + d) : 0.f;
            vs[jj * DP + d] = j < len ? ld_el<DT>(a.v, vo + (int64_t)j * a.v_sl + d) : 0.f;
        }
        __syncthreads();
        if (rv) {
            const int j = n0 + lane;
            float g = 0.f;
            int slot = 0;
            if (j < len && row_valid(a, mrow, j)) {
                const float *kr = ks + lane * DP, *vr = vs + lane * DP;
                float s = 0.f;
                for (int d = 0; d < D; d++) s = fmaf(q[d], kr[d], s);
                if (a.c2p | a.p2c) {
                    slot = dev_slot(a, stab, i - j);
                    if (a.c2p) {
                        const int64_t po = pko + (int64_t)slot * a.pk_ss;
                        float t = 0.f;
                        for (int d = 0; d < D; d++) t = fmaf(q[d], ld_el<DT>(a.pk, po + d), t);
                        s += t;
                    }
                    if (a.p2c) {
                        const int64_t po = pqo + (int64_t)slot * a.pq_ss;
                        float t = 0.f;
                        for (int d = 0; d < D; d++) t = fmaf(kr[d], ld_el<DT>(a.pq, po + d), t);
                        s += t;
                    }
                }
                const float p = expf(s * A.inv_scale - lse_i);
                float dp = 0.f;
                for (int d = 0; d < D; d++) dp = fmaf(dout[d], vr[d], dp);
                const float keep = a.drop_thr ? (dev_keep(a, b, h, i, j) ? a.drop_scale : 0.f) : 1.f;
                dp *= keep;
                g = p * (dp - di) * A.inv_scale;
                const int r = i - j;
                if (r >= a.R) gp += g;
                else if (r <= -a.R) gn += g;
            }
            for (int jj = 0; jj < BWD_KC; jj++) {
                const float gj = __shfl_sync(0xffffffffu, g, jj);
                const int tj = __shfl_sync(0xffffffffu, slot, jj);
                if (gj != 0.f) {
                    const float *kr = ks + jj * DP;
#pragma unroll
                    for (int u = 0; u < BWD_NU; u++)
                        if (lane + 32 * u < D) acc[u] = fmaf(gj, kr[lane + 32 * u], acc[u]);
                    if (a.c2p) {
                        const int64_t po = pko + (int64_t)tj * a.pk_ss;
#pragma unroll
                        for (int u = 0; u < BWD_NU; u++)
                            if (lane + 32 * u < D) acc[u] = fmaf(gj, ld_el<DT>(a.pk, po + lane + 32 * u), acc[u]);
                    }
                }
            }
        }
        __syncthreads();
    }

    if (i >= len) return;
    const int64_t oo = (int64_t)b * A.dq_sb + (int64_t)(tok0 + i) * A.dq_sl + (int64_t)h * A.dq_sh;
#pragma unroll
    for (int u = 0; u < BWD_NU; u++)
        if (lane + 32 * u < D) st_el<DT>(A.dq, oo + lane + 32 * u, acc[u]);
    if (A.rsat) {
        gp = warp_sum(gp);
        gn = warp_sum(gn);
        if (lane == 0) {
            const int64_t ro = 2 * ws_row(A, b, h, tok0, i);
            A.rsat[ro] = gp;
            A.rsat[ro + 1] = gn;
        }
    }
}

/* ------------------------------------------------------------------ 3. dk, dv */

template <int DT>
DATTN_DEV void bwd_dkdv_body(const dattn_bwd_args &A)
{
    const dattn_fwd_args &a = A.f;
    extern __shared__ __align__(16) float sm[];
    const int D = a.D, DP = a.D + 1;
    float *kw = sm;                      /* [ROWS][D] the block's keys */
    float *vw = kw + BWD_ROWS * D;       /* [ROWS][D] */
    float *qc = vw + BWD_ROWS * D;       /* [KC][DP] query chunk */
    float *gc = qc + BWD_KC * DP;        /* [KC][DP] dout chunk */
    float *lc = gc + BWD_KC * DP;        /* [KC] lse */
    float *dc = lc + BWD_KC;             /* [KC] D_i */
    int *sc = (int *)(dc + BWD_KC);      /* [KC] 1 valid row, 2 padded row, 0 none */
    uint16_t *stab = (uint16_t *)(sc + BWD_KC);
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int b = blockIdx.z, h = blockIdx.y, j0 = blockIdx.x * BWD_ROWS;
    int tok0, len;
    dev_seq(a, b, tok0, len);
    if (j0 >= len) return;
    const int64_t qo = (int64_t)b * a.q_sb + (int64_t)tok0 * a.q_sl + (int64_t)h * a.q_sh;
    const int64_t ko = (int64_t)b * a.k_sb + (int64_t)tok0 * a.k_sl + (int64_t)h * a.k_sh;
    const int64_t vo = (int64_t)b * a.v_sb + (int64_t)tok0 * a.v_sl + (int64_t)h * a.v_sh;
    const int64_t go = (int64_t)b * A.do_sb + (int64_t)tok0 * A.do_sl + (int64_t)h * A.do_sh;
    const int64_t pko = (int64_t)h * a.pk_sh, pqo = (int64_t)h * a.pq_sh;
    const uint8_t *mrow = a.mask ? a.mask + (int64_t)b * a.m_sb : (const uint8_t *)0;

    if (a.c2p | a.p2c)
        for (int t = tid; t < 2 * a.nlog; t += blockDim.x) stab[t] = a.tab[t];
    for (int t = tid; t < BWD_ROWS * D; t += blockDim.x) {
        const int r = t / D, d = t % D, j = j0 + r;
        kw[t] = j < len ? ld_el<DT>(a.k, ko + (int64_t)j * a.k_sl + d) : 0.f;
        vw[t] = j < len ? ld_el<DT>(a.v, vo + (int64_t)j * a.v_sl + d) : 0.f;
    }
    const int j = j0 + w;
    const int jin = j < len, kv = jin && row_valid(a, mrow, j);
    /* an HF padded row gives every key keep_ij / n (CPU: ds_drop / (float)n) */
    const float fpad = (a.drop_thr ? a.drop_scale : 1.f) / (float)len;
    float acck[BWD_NU], accv[BWD_NU];
#pragma unroll
    for (int u = 0; u < BWD_NU; u++) acck[u] = accv[u] = 0.f;
    float cp = 0.f, cn = 0.f;
    const float *kr = kw + w * D, *vr = vw + w * D;

    for (int m0 = 0; m0 < len; m0 += BWD_KC) {
        __syncthreads(); /* the previous chunk is consumed (first pass: kw, vw, stab written) */
        for (int t = tid; t < BWD_KC * D; t += blockDim.x) {
            const int ii = t / D, d = t % D, i = m0 + ii;
            qc[ii * DP + d] = i < len ? ld_el<DT>(a.q, qo + (int64_t)i * a.q_sl + d) : 0.f;
            gc[ii * DP + d] = i < len ? ld_el<DT>(A.dout, go + (int64_t)i * A.do_sl + d) : 0.f;
        }
        for (int t = tid; t < BWD_KC; t += blockDim.x) {
            const int i = m0 + t;
            const int st = i >= len ? 0 : row_valid(a, mrow, i) ? 1 : 2;
            sc[t] = st;
            lc[t] = st == 1 ? a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + i) * a.l_sl] : 0.f;
            dc[t] = st == 1 ? A.di[ws_row(A, b, h, tok0, i)] : 0.f;
        }
        __syncthreads();
        if (jin) {
            const int i = m0 + lane, st = sc[lane];
            float g = 0.f, pv = 0.f;
            int slot = 0;
            if (st == 1 && kv) {
                const float *qr = qc + lane * DP, *gr = gc + lane * DP;
                float s = 0.f;
                for (int d = 0; d < D; d++) s = fmaf(qr[d], kr[d], s);
                if (a.c2p | a.p2c) {
                    slot = dev_slot(a, stab, i - j);
                    if (a.c2p) {
                        const int64_t po = pko + (int64_t)slot * a.pk_ss;
                        float t = 0.f;
                        for (int d = 0; d < D; d++) t = fmaf(qr[d], ld_el<DT>(a.pk, po + d), t);
                        s += t;
                    }
                    if (a.p2c) {
                        const int64_t po = pqo + (int64_t)slot * a.pq_ss;
                        float t = 0.f;
                        for (int d = 0; d < D; d++) t = fmaf(kr[d], ld_el<DT>(a.pq, po + d), t);
                        s += t;
                    }
                }
                const float p = expf(s * A.inv_scale - lc[lane]);
                float dp = 0.f;
                for (int d = 0; d < D; d++) dp = fmaf(gr[d], vr[d], dp);
                const float keep = a.drop_thr ? (dev_keep(a, b, h, i, j) ? a.drop_scale : 0.f) : 1.f;
                dp *= keep;
                g = p * (dp - dc[lane]) * A.inv_scale;
                pv = p * keep;
                const int r = i - j;
                if (r >= a.R) cp += g;
                else if (r <= -a.R) cn += g;
            } else if (st == 2 && a.hf) {
                pv = (!a.drop_thr || dev_keep(a, b, h, i, j)) ? fpad : 0.f;
            }
            for (int ii = 0; ii < BWD_KC; ii++) {
                const float gi = __shfl_sync(0xffffffffu, g, ii);
                const float pvi = __shfl_sync(0xffffffffu, pv, ii);
                const int ti = __shfl_sync(0xffffffffu, slot, ii);
                if (gi != 0.f) {
                    const float *qr = qc + ii * DP;
#pragma unroll
                    for (int u = 0; u < BWD_NU; u++)
                        if (lane + 32 * u < D) acck[u] = fmaf(gi, qr[lane + 32 * u], acck[u]);
                    if (a.p2c) {
                        const int64_t po = pqo + (int64_t)ti * a.pq_ss;
#pragma unroll
                        for (int u = 0; u < BWD_NU; u++)
                            if (lane + 32 * u < D) acck[u] = fmaf(gi, ld_el<DT>(a.pq, po + lane + 32 * u), acck[u]);
                    }
                }
                if (pvi != 0.f) {
                    const float *gr = gc + ii * DP;
#pragma unroll
                    for (int u = 0; u < BWD_NU; u++)
                        if (lane + 32 * u < D) accv[u] = fmaf(pvi, gr[lane + 32 * u], accv[u]);
                }
            }
        }
    }

    if (!jin) return;
    const int64_t oko = (int64_t)b * A.dk_sb + (int64_t)(tok0 + j) * A.dk_sl + (int64_t)h * A.dk_sh;
    const int64_t ovo = (int64_t)b * A.dv_sb + (int64_t)(tok0 + j) * A.dv_sl + (int64_t)h * A.dv_sh;
#pragma unroll
    for (int u = 0; u < BWD_NU; u++)
        if (lane + 32 * u < D) {
            st_el<DT>(A.dk, oko + lane + 32 * u, acck[u]);
            st_el<DT>(A.dv, ovo + lane + 32 * u, accv[u]);
        }
    if (A.csat) {
        cp = warp_sum(cp);
        cn = warp_sum(cn);
        if (lane == 0) {
            const int64_t ro = 2 * ws_row(A, b, h, tok0, j);
            A.csat[ro] = cp;
            A.csat[ro + 1] = cn;
        }
    }
}

/* ------------------------------------------------------------------ 4. table partials */

template <int DT>
DATTN_DEV void bwd_diag_body(const dattn_bwd_args &A)
{
    const dattn_fwd_args &a = A.f;
    __shared__ uint16_t stab[DATTN_CUDA_TAB_MAX];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int grp = blockIdx.z, h = blockIdx.y, t = blockIdx.x * BWD_ROWS + w;
    const int D = a.D, S2 = 2 * a.S;
    for (int x = tid; x < 2 * a.nlog; x += blockDim.x) stab[x] = a.tab[x];
    __syncthreads();
    if (t >= S2) return;
    float pkr[BWD_NU], pqr[BWD_NU], acck[BWD_NU], accq[BWD_NU];
#pragma unroll
    for (int u = 0; u < BWD_NU; u++) {
        const int d = lane + 32 * u;
        pkr[u] = (a.c2p && d < D) ? ld_el<DT>(a.pk, (int64_t)h * a.pk_sh + (int64_t)t * a.pk_ss + d) : 0.f;
        pqr[u] = (a.p2c && d < D) ? ld_el<DT>(a.pq, (int64_t)h * a.pq_sh + (int64_t)t * a.pq_ss + d) : 0.f;
        acck[u] = accq[u] = 0.f;
    }
    /* the sequences of group grp (a contiguous share of the B), in b order */
    const int b0 = (int)((int64_t)a.B * grp / gridDim.z), b1 = (int)((int64_t)a.B * (grp + 1) / gridDim.z);
    for (int b = b0; b < b1; b++) {
    int tok0, len;
    dev_seq(a, b, tok0, len);
    const int64_t qo = (int64_t)b * a.q_sb + (int64_t)tok0 * a.q_sl + (int64_t)h * a.q_sh;
    const int64_t ko = (int64_t)b * a.k_sb + (int64_t)tok0 * a.k_sl + (int64_t)h * a.k_sh;
    const int64_t vo = (int64_t)b * a.v_sb + (int64_t)tok0 * a.v_sl + (int64_t)h * a.v_sh;
    const int64_t go = (int64_t)b * A.do_sb + (int64_t)tok0 * A.do_sl + (int64_t)h * A.do_sh;
    const uint8_t *mrow = a.mask ? a.mask + (int64_t)b * a.m_sb : (const uint8_t *)0;
    const int n = len;
    if (n > 0) {
        /* band distances: |r| < R and |r| < n */
        const int rb = min(a.R - 1, n - 1);
        for (int rbase = -rb; rbase <= rb; rbase += 32) {
            const int rl = rbase + lane;
            uint32_t bal = __ballot_sync(0xffffffffu, rl <= rb && dev_slot(a, stab, rl) == t);
            while (bal) {
                const int r = rbase + __ffs(bal) - 1;
                bal &= bal - 1;
                const int ilo = max(0, r), ihi = min(n, n + r);
                for (int i = ilo; i < ihi; i++) {
                    const int j = i - r;
                    if (mrow && (mrow[(int64_t)i * a.m_sl] == 0 || mrow[(int64_t)j * a.m_sl] == 0)) continue;
                    float qv[BWD_NU], kv[BWD_NU];
                    float sqk = 0.f, sc2 = 0.f, sp2 = 0.f, sdv = 0.f;
#pragma unroll
                    for (int u = 0; u < BWD_NU; u++) {
                        const int d = lane + 32 * u;
                        qv[u] = kv[u] = 0.f;
                        if (d < D) {
                            qv[u] = ld_el<DT>(a.q, qo + (int64_t)i * a.q_sl + d);
                            kv[u] = ld_el<DT>(a.k, ko + (int64_t)j * a.k_sl + d);
                            const float vv = ld_el<DT>(a.v, vo + (int64_t)j * a.v_sl + d);
                            const float gv = ld_el<DT>(A.dout, go + (int64_t)i * A.do_sl + d);
                            sqk = fmaf(qv[u], kv[u], sqk);
                            sc2 = fmaf(qv[u], pkr[u], sc2);
                            sp2 = fmaf(kv[u], pqr[u], sp2);
                            sdv = fmaf(gv, vv, sdv);
                        }
                    }
                    float s = warp_sum(sqk);
                    if (a.c2p) s += warp_sum(sc2);
                    if (a.p2c) s += warp_sum(sp2);
                    float dp = warp_sum(sdv);
                    const float lse_i = a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + i) * a.l_sl];
                    const float di = A.di[ws_row(A, b, h, tok0, i)];
                    const float p = expf(s * A.inv_scale - lse_i);
                    const float keep = a.drop_thr ? (dev_keep(a, b, h, i, j) ? a.drop_scale : 0.f) : 1.f;
                    dp *= keep;
                    const float g = p * (dp - di) * A.inv_scale;
#pragma unroll
                    for (int u = 0; u < BWD_NU; u++) {
                        acck[u] = fmaf(g, qv[u], acck[u]);
                        accq[u] = fmaf(g, kv[u], accq[u]);
                    }
                }
            }
        }
        /* saturated distances (|r| >= R): slot sat_pos / sat_neg for every such pair, so
         * their sums factor through the row / column sums of kernels 2 and 3 */
        if (n > a.R && (t == a.sat_pos || t == a.sat_neg)) {
            const int side = t == a.sat_pos ? 0 : 1;
            for (int i = 0; i < n; i++) {
                const int64_t ro = 2 * ws_row(A, b, h, tok0, i) + side;
                if (a.c2p) {
                    const float gr = A.rsat[ro];
                    if (gr != 0.f) {
#pragma unroll
                        for (int u = 0; u < BWD_NU; u++)
                            if (lane + 32 * u < D)
                                acck[u] = fmaf(gr, ld_el<DT>(a.q, qo + (int64_t)i * a.q_sl + lane + 32 * u), acck[u]);
                    }
                }
                if (a.p2c) {
                    const float gc = A.csat[ro];
                    if (gc != 0.f) {
#pragma unroll
                        for (int u = 0; u < BWD_NU; u++)
                            if (lane + 32 * u < D)
                                accq[u] = fmaf(gc, ld_el<DT>(a.k, ko + (int64_t)i * a.k_sl + lane + 32 * u), accq[u]);
                    }
                }
            }
        }
    }
    } /* sequences of the group */
    const int64_t po = (((int64_t)grp * a.H + h) * S2 + t) * D;
#pragma unroll
    for (int u = 0; u < BWD_NU; u++) {
        const int d = lane + 32 * u;
        if (d < D) {
            if (a.c2p) A.ppk[po + d] = acck[u];
            if (a.p2c) A.ppq[po + d] = accq[u];
        }
    }
}

/* ------------------------------------------------------------------ 5. reduce */

template <int DT>
DATTN_DEV void bwd_reduce_body(const dattn_bwd_args &A)
{
    const dattn_fwd_args &a = A.f;
    const int t = blockIdx.x, h = blockIdx.y, S2 = 2 * a.S;
    for (int d = threadIdx.x; d < a.D; d += blockDim.x) {
        if (a.c2p) {
            float s = 0.f;
            for (int g = 0; g < A.sgb; g++) s += A.ppk[(((int64_t)g * a.H + h) * S2 + t) * a.D + d];
            st_el<DT>(A.dpk, (int64_t)h * A.dpk_sh + (int64_t)t * A.dpk_ss + d, s);
        }
        if (a.p2c) {
            float s = 0.f;
            for (int g = 0; g < A.sgb; g++) s += A.ppq[(((int64_t)g * a.H + h) * S2 + t) * a.D + d];
            st_el<DT>(A.dpq, (int64_t)h * A.dpq_sh + (int64_t)t * A.dpq_ss + d, s);
        }
    }
}

/* ------------------------------------------------------------------ kernels, launcher */

#define BWD_KERNELS(SUF, DT)                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * BWD_ROWS, 1)                             \
        dattn_bwd_di_##SUF(const __grid_constant__ dattn_bwd_args A) { bwd_di_body<DT>(A); }   \
    extern "C" __global__ void __launch_bounds__(32 * BWD_ROWS, 1)                             \
        dattn_bwd_dq_##SUF(const __grid_constant__ dattn_bwd_args A) { bwd_dq_body<DT>(A); }   \
    extern "C" __global__ void __launch_bounds__(32 * BWD_ROWS, 1)                             \
        dattn_bwd_dkdv_##SUF(const __grid_constant__ dattn_bwd_args A) { bwd_dkdv_body<DT>(A); } \
    extern "C" __global__ void __launch_bounds__(32 * BWD_ROWS, 1)                             \
        dattn_bwd_diag_##SUF(const __grid_constant__ dattn_bwd_args A) { bwd_diag_body<DT>(A); } \
    extern "C" __global__ void __launch_bounds__(128)                                         \
        dattn_bwd_reduce_##SUF(const __grid_constant__ dattn_bwd_args A) { bwd_reduce_body<DT>(A); }
BWD_KERNELS(f32, 0)
BWD_KERNELS(f16, 1)
BWD_KERNELS(bf16, 2)

#define BWD_DI_ROWS(SUF, DT)                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * DI_WPB)                                 \
        dattn_bwd_di_rows_##SUF(const __grid_constant__ dattn_bwd_args A)                  \
    {                                                                                          \
        bwd_di_rows_body<DT>(A, (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z);            \
    }
BWD_DI_ROWS(f16, 1)
BWD_DI_ROWS(bf16, 2)

extern "C" size_t dattn_bwd_dq_smem(int D)
{
    return sizeof(float) * (size_t)(2 * BWD_ROWS * D + 2 * BWD_KC * (D + 1)) + 2 * DATTN_CUDA_TAB_MAX;
}

extern "C" size_t dattn_bwd_dkdv_smem(int D)
{
    return sizeof(float) * (size_t)(2 * BWD_ROWS * D + 2 * BWD_KC * (D + 1) + 3 * BWD_KC) +
           2 * DATTN_CUDA_TAB_MAX;
}

/* Kernel 1 alone (the tensor-core backward's D_i): fp16 / bf16 (the tensor-core path's
 * dtypes) through the many-rows-per-warp kernel, the same bits as kernel 1's. */
extern "C" cudaError_t dattn_launch_bwd_di(const dattn_bwd_args *A, int dtype, cudaStream_t stream)
{
    typedef void (*kfn)(dattn_bwd_args);
    const dattn_fwd_args &a = A->f;
    if (a.L == 0 || a.B == 0) return cudaSuccess;
    if (dtype != 0 && a.D <= 32 * DI_NM) {
        const kfn di = dtype == 1 ? dattn_bwd_di_rows_f16 : dattn_bwd_di_rows_bf16;
        const unsigned gx = (unsigned)((a.L + DI_NR * DI_WPB - 1) / (DI_NR * DI_WPB));
        di<<<dim3(gx, (unsigned)a.H, (unsigned)a.B), 32 * DI_WPB, 0, stream>>>(*A);
        return cudaGetLastError();
    }
    const kfn di = dtype == 0 ? dattn_bwd_di_f32 : dtype == 1 ? dattn_bwd_di_f16 : dattn_bwd_di_bf16;
    const unsigned gx = (unsigned)((a.L + BWD_ROWS - 1) / BWD_ROWS);
    di<<<dim3(gx, (unsigned)a.H, (unsigned)a.B), 32 * BWD_ROWS, 0, stream>>>(*A);
    return cudaGetLastError();
}

/* Launches kernels 1-5 on `stream` for a validated call (grid extents > 0 checked here). */
extern "C" cudaError_t dattn_launch_bwd_simple(const dattn_bwd_args *A, int dtype, cudaStream_t stream)
{
    typedef void (*kfn)(dattn_bwd_args);
    const kfn di = dtype == 0 ? dattn_bwd_di_f32 : dtype == 1 ? dattn_bwd_di_f16 : dattn_bwd_di_bf16;
    const kfn dq = dtype == 0 ? dattn_bwd_dq_f32 : dtype == 1 ? dattn_bwd_dq_f16 : dattn_bwd_dq_bf16;
    const kfn dkdv = dtype == 0 ? dattn_bwd_dkdv_f32 : dtype == 1 ? dattn_bwd_dkdv_f16 : dattn_bwd_dkdv_bf16;
    const kfn diag = dtype == 0 ? dattn_bwd_diag_f32 : dtype == 1 ? dattn_bwd_diag_f16 : dattn_bwd_diag_bf16;
    const kfn red = dtype == 0 ? dattn_bwd_reduce_f32 : dtype == 1 ? dattn_bwd_reduce_f16 : dattn_bwd_reduce_bf16;
    const dattn_fwd_args &a = A->f;
    const int pos = a.c2p | a.p2c;
    cudaError_t e;
    const size_t sq = dattn_bwd_dq_smem(a.D), skv = dattn_bwd_dkdv_smem(a.D);
    if ((e = cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sq)) != cudaSuccess)
        return e;
    if ((e = cudaFuncSetAttribute(dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)skv)) != cudaSuccess)
        return e;
    const unsigned gx = (unsigned)((a.L + BWD_ROWS - 1) / BWD_ROWS);
    if (gx > 0 && a.B > 0) {
        const dim3 grid(gx, (unsigned)a.H, (unsigned)a.B);
        di<<<grid, 32 * BWD_ROWS, 0, stream>>>(*A);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
        dq<<<grid, 32 * BWD_ROWS, sq, stream>>>(*A);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
        dkdv<<<grid, 32 * BWD_ROWS, skv, stream>>>(*A);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    if (pos) {
        if (a.B > 0) {
            const dim3 grid((unsigned)((2 * a.S + BWD_ROWS - 1) / BWD_ROWS), (unsigned)a.H, (unsigned)A->sgb);
            diag<<<grid, 32 * BWD_ROWS, 0, stream>>>(*A);
            if ((e = cudaGetLastError()) != cudaSuccess) return e;
        }
        red<<<dim3((unsigned)(2 * a.S), (unsigned)a.H), 128, 0, stream>>>(*A);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    return cudaSuccess;
}

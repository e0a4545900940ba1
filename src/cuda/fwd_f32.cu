/* dattn forward, register-tiled fp32 kernel (IEEE fp32 on the CUDA cores: FFMA, no TF32)
 * for sm_80+, D in {32, 64, 128}, 16-byte aligned rows. It replaces the simple kernel
 * (one warp per query row) for fp32 inputs; other head dims and unaligned tensors keep
 * the simple kernel, and DATTN_CUDA_FWD=simple forces it (tests, A/B benchmarks).
 *
 * Structure: an SGEMM micro-kernel inside a FlashAttention loop. A CTA of 256 threads
 * owns BM = 64 query rows of one (sequence, head) and walks key tiles of BN = 64. Thread
 * (tx, ty) = (tid % 16, tid / 16) owns the 4 x 4 score block rows ty + 16 a, keys
 * tx + 16 b (a, b < 4): per 4 head dims it loads 4 + 4 float4 from shared memory (the A
 * rows are one broadcast address per quarter warp, the B rows 8 consecutive rows at a
 * pitch of D + 4 floats: conflict-free) and issues 64 FFMA. Row statistics are reduced
 * over the 16 lanes sharing ty (xor shuffles 1, 2, 4, 8); the per-thread row sums are
 * reduced once at the end. P goes through shared memory transposed and row-permuted
 * (P^T[j][4 ty + a]) so that P*V reads one float4 of P and D/64 float4 of V (float2 at
 * D = 32) per key for 16 (32) FFMA. Every sum runs in a fixed order: deterministic.
 *
 * Position terms, per (query tile, key tile) class (tile_class of fwd_sm80.cuh, here with
 * BM = BN = 64):
 *   SATP / SATN  c2p is the per-row constant q_i . pk[sat] (computed once per CTA), p2c the
 *          per-column constant k_j . pq[sat] (computed per tile from the K tile in shared
 *          memory, 4 threads per key): no gather, no workspace.
 *   BAND   c2p: a ring G[i][r & 127] = q_i . pk[slot(r)] over the tile window's 127 values
 *          of r = i - j. Consecutive band tiles move the window down by BN, so a tile
 *          computes only its 64 new values of r (Q . pk[slots of the new r]^T, register-
 *          tiled like Q K^T; the first band tile of a CTA computes two chunks): c2p costs
 *          one Q K^T per band tile. The ring is in r, not in slots, so any slot map works
 *          (no monotonicity needed). Read skewed: c2p(i, j) = G[i][(i - j) & 127]; pitch
 *          143 (15 mod 32) makes those reads conflict-free.
 *          p2c: H[jl][u] = k_jl . pq[slot(rlo + u)] over the 128 window positions
 *          (K . pq_window^T, 4 x 8 per thread), read skewed: p2c(i, j) = H[j - n0][i - j -
 *          rlo], pitch 131 (3 mod 32): conflict-free. Cost 2x Q K^T per band tile.
 *   PLAIN  no position term.
 * The pk rows of the new r values and the pq window rows are gathered by slot (dev_slot,
 * the compact log-zone table in shared memory) with cp.async.
 *
 * Shared memory (floats, DP = D + 4): Q [64][DP], K [64][DP], VQ [128][DP] (the pq window
 * during the p2c GEMM, then the V tile), X (the pk rows of the c2p chunk, then H [64][131],
 * then P^T [64][68]), G [64][143], saturated constants, the pq[sat] rows, the slot table.
 * D = 64: 143 KB; D = 128: 204 KB (an H100/H200 fits it, an A100's 163 KB does not: the
 * simple kernel runs there); D = 32: 107 KB.
 *
 * Pipeline per key tile n: [wait K(n) (+ pk / pq rows for band tiles)] -> band: c2p chunk,
 * p2c GEMM, then V(n) is issued into VQ; other tiles: V(n) issued at once -> S = Q K^T +
 * position terms, mask, online softmax (exp2, log2(e)/scale folded), dropout -> P^T to
 * shared memory, K(n+1) issued -> wait V(n) -> O += P V -> pk / pq rows of n+1 issued.
 * Key tiles outside [first valid key, last valid key] are skipped (keyrange prologue);
 * padded query rows are written from the V-mean workspace (HF) or zero; HF padded rows
 * under dropout are left to dattn_fwd_padrows_drop (launch.cu), as on the tensor-core path.
 */
#include "common.cuh"

#include <cuda_runtime.h>

#define F32_BM 64  /* query rows per CTA */
#define F32_BN 64  /* keys per tile */
#define F32_NT 256 /* threads */
#define F32_NU 128 /* window positions (127 used) and c2p ring columns (r & 127) */
#define F32_GP 143 /* c2p ring pitch: 15 mod 32 */
#define F32_HP 131 /* p2c tile pitch: 3 mod 32 */
#define F32_PP 68  /* P^T pitch */

enum { F32_PLAIN = 0, F32_SATP = 1, F32_SATN = 2, F32_BAND = 3 };

template <int D>
struct f32_geom {
    static constexpr int DP = D + 4; /* row pitch of the D-wide tiles (16-byte chunks: 1 mod 8) */
    static constexpr int XS0 = F32_BN * DP > F32_BN * F32_HP ? F32_BN * DP : F32_BN * F32_HP;
    static constexpr int XS = XS0 > F32_BN * F32_PP ? XS0 : F32_BN * F32_PP;
    static constexpr int OFF_Q = 0;
    static constexpr int OFF_K = OFF_Q + F32_BM * DP;
    static constexpr int OFF_VQ = OFF_K + F32_BN * DP;
    static constexpr int OFF_X = OFF_VQ + F32_NU * DP;
    static constexpr int OFF_G = OFF_X + XS;
    static constexpr int OFF_CS = OFF_G + F32_BM * F32_GP; /* [2][BM] q_i . pk[sat_pos | sat_neg] */
    static constexpr int OFF_PS = OFF_CS + 2 * F32_BM;    /* [BN] k_j . pq[sat] of the tile */
    static constexpr int OFF_SR = OFF_PS + F32_BN;        /* [2][D] pq[sat_pos], pq[sat_neg] */
    static constexpr int OFF_TAB = OFF_SR + 2 * D;        /* uint16 slot table */
    static constexpr int FLOATS = OFF_TAB + DATTN_CUDA_TAB_MAX / 2;
    static constexpr int SMEM = FLOATS * 4;
    static_assert(D == 32 || D == 64 || D == 128, "head dim");
    static_assert(DP % 8 == 4 && F32_PP % 8 == 4, "16-byte chunk pitch 1 mod 8 (odd)");
    static_assert(F32_GP % 32 == 15 && F32_HP % 32 == 3 && F32_HP >= F32_BM + F32_BN - 1, "skew pitches");
    static_assert(F32_NU >= F32_BM + F32_BN - 1 && (F32_NU & (F32_NU - 1)) == 0, "ring");
    static_assert(OFF_X % 4 == 0 && OFF_G % 4 == 0 && OFF_SR % 4 == 0 && OFF_TAB % 4 == 0, "alignment");
};

DATTN_DEV float f32_ninf(void) { return __int_as_float(0xff800000); }

DATTN_DEV int f32_class(const dattn_fwd_args &a, int use_pos, int m0, int n0)
{
    if (!use_pos) return F32_PLAIN;
    if (m0 - n0 - F32_BN + 1 >= a.R) return F32_SATP;
    if (m0 - n0 + F32_BM - 1 <= -a.R) return F32_SATN;
    return F32_BAND;
}

/* 64 rows first.. of a [len]-row tensor (row stride sl) into dst (pitch DP); rows past len
 * are zero-filled. */
template <int D>
DATTN_DEV void f32_ld_tile(float *dst, const float *base, int64_t sl, int first, int len)
{
    constexpr int CPR = D / 4, DP = D + 4;
#pragma unroll
    for (int it = 0; it < 64 * CPR / F32_NT; it++) {
        const int idx = threadIdx.x + it * F32_NT, r = idx / CPR, ch = idx % CPR, i = first + r;
        const int ok = i < len;
        cp_async16(smem_u32(dst + r * DP + 4 * ch), base + (int64_t)(ok ? i : 0) * sl + 4 * ch, ok ? 16 : 0);
    }
}

/* Rows u < n of a position table (pk or pq of this head): row u = tab[slot(r0 + u)]. */
template <int D>
DATTN_DEV void f32_ld_pos(float *dst, int n, const float *tabh, int64_t ss, const dattn_fwd_args &a,
                          const uint16_t *stab, int r0)
{
    constexpr int CPR = D / 4, DP = D + 4;
    for (int idx = threadIdx.x; idx < n * CPR; idx += F32_NT) {
        const int u = idx / CPR, ch = idx % CPR;
        const int slot = dev_slot(a, stab, r0 + u);
        cp_async16(smem_u32(dst + u * DP + 4 * ch), tabh + (int64_t)slot * ss + 4 * ch, 16);
    }
}

/* acc[i][j] += A[ta + 16 i] . B[tb + 16 j] over D (rows at pitch DP), d in order. */
template <int D, int NA, int NB>
DATTN_DEV void f32_mm(float (&acc)[NA][NB], const float *A, const float *B, int ta, int tb)
{
    constexpr int DP = D + 4;
#pragma unroll 4
    for (int d = 0; d < D; d += 4) {
        float4 x[NA], y[NB];
#pragma unroll
        for (int i = 0; i < NA; i++) x[i] = *(const float4 *)(A + (ta + 16 * i) * DP + d);
#pragma unroll
        for (int j = 0; j < NB; j++) y[j] = *(const float4 *)(B + (tb + 16 * j) * DP + d);
#pragma unroll
        for (int i = 0; i < NA; i++)
#pragma unroll
            for (int j = 0; j < NB; j++) {
                acc[i][j] = fmaf(x[i].x, y[j].x, acc[i][j]);
                acc[i][j] = fmaf(x[i].y, y[j].y, acc[i][j]);
                acc[i][j] = fmaf(x[i].z, y[j].z, acc[i][j]);
                acc[i][j] = fmaf(x[i].w, y[j].w, acc[i][j]);
            }
    }
}

/* c2p ring chunk: G[i][(r0 + t) & 127] = q_i . pk[slot(r0 + t)], t < 64, from the pk rows in X. */
template <int D>
DATTN_DEV void f32_c2p_chunk(float *G, const float *Q, const float *X, int tx, int ty, int r0)
{
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.f;
    f32_mm<D, 4, 4>(acc, Q, X, ty, tx);
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) G[(ty + 16 * i) * F32_GP + ((r0 + tx + 16 * j) & (F32_NU - 1))] = acc[i][j];
}

template <int D>
DATTN_DEV void fwd_f32_body(const dattn_fwd_args &a)
{
    typedef f32_geom<D> G;
    constexpr int DP = G::DP;
    constexpr int NO = D / 16; /* output columns per thread */
    extern __shared__ __align__(16) float smf[];
    float *sQ = smf + G::OFF_Q, *sK = smf + G::OFF_K, *sVQ = smf + G::OFF_VQ, *sX = smf + G::OFF_X;
    float *sG = smf + G::OFF_G, *sCS = smf + G::OFF_CS, *sPS = smf + G::OFF_PS, *sSR = smf + G::OFF_SR;
    uint16_t *stab = (uint16_t *)(smf + G::OFF_TAB);
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int b = blockIdx.z, h = blockIdx.y, m0 = blockIdx.x * F32_BM;
    int tok0, len;
    dev_seq(a, b, tok0, len);
    if (m0 >= len) return;

    const float *qb = (const float *)a.q + (int64_t)b * a.q_sb + (int64_t)tok0 * a.q_sl + (int64_t)h * a.q_sh;
    const float *kb = (const float *)a.k + (int64_t)b * a.k_sb + (int64_t)tok0 * a.k_sl + (int64_t)h * a.k_sh;
    const float *vb = (const float *)a.v + (int64_t)b * a.v_sb + (int64_t)tok0 * a.v_sl + (int64_t)h * a.v_sh;
    const float *pkh = a.c2p ? (const float *)a.pk + (int64_t)h * a.pk_sh : (const float *)0;
    const float *pqh = a.p2c ? (const float *)a.pq + (int64_t)h * a.pq_sh : (const float *)0;
    const uint8_t *mrow = a.mask ? a.mask + (int64_t)b * a.m_sb : (const uint8_t *)0;
    const int use_pos = a.c2p | a.p2c;

    if (use_pos)
        for (int t = tid; t < 2 * a.nlog; t += F32_NT) stab[t] = a.tab[t];
    if (a.p2c)
        for (int t = tid; t < 2 * D; t += F32_NT)
            sSR[t] = pqh[(int64_t)(t < D ? a.sat_pos : a.sat_neg) * a.pq_ss + t % D];
    int myvalid = 0;
    if (tid < F32_BM) {
        const int i = m0 + tid;
        myvalid = i < len && (!mrow || mrow[(int64_t)i * a.m_sl] != 0);
    }
    const int anyv = __syncthreads_or(myvalid); /* also publishes stab, sSR */

    int kv_lo = 0, kv_hi = len;
    if (a.kvr) {
        kv_lo = a.kvr[2 * b];
        kv_hi = a.kvr[2 * b + 1];
    }
    const int n_begin = kv_lo / F32_BN;
    const int n_end = (anyv && kv_hi > kv_lo) ? (kv_hi + F32_BN - 1) / F32_BN : n_begin;

    /* Q, and the K side of the first key tile */
    f32_ld_tile<D>(sQ, qb, a.q_sl, m0, len);
    if (n_begin < n_end) {
        const int n0 = n_begin * F32_BN;
        f32_ld_tile<D>(sK, kb, a.k_sl, n0, len);
        if (f32_class(a, use_pos, m0, n0) == F32_BAND) {
            if (a.c2p) f32_ld_pos<D>(sX, F32_BN, pkh, a.pk_ss, a, stab, m0 - n0 - F32_BN + 1);
            if (a.p2c) f32_ld_pos<D>(sVQ, F32_NU, pqh, a.pq_ss, a, stab, m0 - n0 - F32_BN + 1);
        }
    }
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    /* c2p of saturated tiles: q_i . pk[sat_pos], q_i . pk[sat_neg] */
    if (a.c2p && tid < 2 * F32_BM) {
        const int r = tid & (F32_BM - 1), side = tid / F32_BM;
        const float *pr = pkh + (int64_t)(side ? a.sat_neg : a.sat_pos) * a.pk_ss;
        float s = 0.f;
        for (int d = 0; d < D; d++) s = fmaf(sQ[r * DP + d], pr[d], s);
        sCS[side * F32_BM + r] = s;
    }
    __syncthreads();

    float o[4][NO];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int e = 0; e < NO; e++) o[i][e] = 0.f;
    float mrun[4], lrun[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        mrun[i] = f32_ninf();
        lrun[i] = 0.f;
    }
    const float sl2 = a.sl2;
    const uint32_t bh = (uint32_t)b * (uint32_t)a.H + (uint32_t)h;
    int ring_ok = 0;

    for (int n = n_begin; n < n_end; n++) {
        const int n0 = n * F32_BN, rlo = m0 - n0 - F32_BN + 1;
        const int cls = f32_class(a, use_pos, m0, n0);
        if (n > n_begin) { /* K(n) and the position rows of a band tile n landed */
            cp_async_wait_all();
            __syncthreads();
        }
        if (cls == F32_BAND) {
            if (a.c2p) {
                f32_c2p_chunk<D>(sG, sQ, sX, tx, ty, rlo);
                if (!ring_ok) { /* first band tile: the upper 63 values of r as well */
                    __syncthreads();
                    f32_ld_pos<D>(sX, F32_BN, pkh, a.pk_ss, a, stab, rlo + F32_BN);
                    cp_async_commit();
                    cp_async_wait_all();
                    __syncthreads();
                    f32_c2p_chunk<D>(sG, sQ, sX, tx, ty, rlo + F32_BN);
                }
            }
            ring_ok = 1;
            __syncthreads(); /* ring written; the pk rows in X are dead */
            if (a.p2c) {
                float acc[4][8];
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[i][j] = 0.f;
                f32_mm<D, 4, 8>(acc, sK, sVQ, ty, tx);
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 8; j++) sX[(ty + 16 * i) * F32_HP + tx + 16 * j] = acc[i][j];
            }
            __syncthreads(); /* H visible; the pq window in VQ is dead */
            f32_ld_tile<D>(sVQ, vb, a.v_sl, n0, len);
            cp_async_commit();
        } else {
            ring_ok = 0;
            f32_ld_tile<D>(sVQ, vb, a.v_sl, n0, len);
            cp_async_commit();
            if (cls != F32_PLAIN && a.p2c) {
                /* p2c of a saturated tile: k_j . pq[sat], 4 threads per key */
                const int j = tid >> 2, part = tid & 3;
                const float *kr = sK + j * DP + part * (D / 4);
                const float *pr = sSR + (cls == F32_SATN ? D : 0) + part * (D / 4);
                float s = 0.f;
#pragma unroll
                for (int d = 0; d < D / 4; d++) s = fmaf(kr[d], pr[d], s);
                s += __shfl_xor_sync(0xffffffffu, s, 1);
                s += __shfl_xor_sync(0xffffffffu, s, 2);
                if (part == 0) sPS[j] = s;
                __syncthreads();
            }
        }

        /* scores: position terms first, then q . k */
        float s[4][4];
        if (cls == F32_BAND && a.c2p) {
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    s[i][j] = sG[(ty + 16 * i) * F32_GP + ((m0 - n0 + ty + 16 * i - tx - 16 * j) & (F32_NU - 1))];
        } else if (cls != F32_BAND && cls != F32_PLAIN && a.c2p) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float c = sCS[(cls == F32_SATN ? F32_BM : 0) + ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 4; j++) s[i][j] = c;
            }
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) s[i][j] = 0.f;
        }
        if (cls == F32_BAND && a.p2c) {
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    s[i][j] += sX[(tx + 16 * j) * F32_HP + ty + 16 * i - tx - 16 * j + F32_BN - 1];
        } else if (cls != F32_BAND && cls != F32_PLAIN && a.p2c) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float c = sPS[tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 4; i++) s[i][j] += c;
            }
        }
        f32_mm<D, 4, 4>(s, sQ, sK, ty, tx);

        /* key validity (padding mask, end of the sequence), log2-domain scores */
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int jj = n0 + tx + 16 * j;
            const int kv = jj < len && (!mrow || mrow[(int64_t)jj * a.m_sl] != 0);
#pragma unroll
            for (int i = 0; i < 4; i++) s[i][j] = kv ? s[i][j] * sl2 : f32_ninf();
        }

        /* online softmax: row max over the 16 lanes of the row */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float mx = fmaxf(fmaxf(s[i][0], s[i][1]), fmaxf(s[i][2], s[i][3]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
            const float mnew = fmaxf(mrun[i], mx);
            const float muse = mnew == f32_ninf() ? 0.f : mnew;
            const float alpha = ex2f(mrun[i] - muse);
            mrun[i] = mnew;
            float ls = 0.f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                s[i][j] = ex2f(s[i][j] - muse);
                ls += s[i][j];
            }
            lrun[i] = fmaf(lrun[i], alpha, ls);
#pragma unroll
            for (int e = 0; e < NO; e++) o[i][e] *= alpha;
        }

        /* dropout: the row sums above ran over every probability; P*V takes the kept ones.
         * One Philox call decides 8 keys of a row (counter j >> 3). Thread tx of a 16-lane row
         * group makes the calls of key block tx >> 1 (keys n0 + 8 (tx >> 1) .. + 7) for its rows
         * 2 (tx & 1), 2 (tx & 1) + 1 (byte 0, 1 of kw). Key tx + 16 j of row a is bit tx & 7 of
         * byte a & 1 of lane 2 ((tx >> 3) + 2 j) + (a >> 1) of the same row group. */
        if (a.drop_thr) {
            uint32_t kw = 0;
#pragma unroll 1
            for (int u = 0; u < 2; u++) {
                uint32_t o0, o1, o2, o3;
                const uint32_t i = (uint32_t)(m0 + ty + 16 * (2 * (tx & 1) + u));
                dev_philox((uint32_t)(n0 >> 3) + (uint32_t)(tx >> 1), i, bh, a.drop_c3, a.drop_k0, a.drop_k1,
                           o0, o1, o2, o3);
                kw |= dev_keep8(o0, o1, o2, o3, a.drop_thr) << (8 * u);
            }
            const int lane = tid & 31;
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int src = (lane & 16) | (2 * ((tx >> 3) + 2 * j) + hr);
                    const uint32_t w = __shfl_sync(0xffffffffu, kw, src);
#pragma unroll
                    for (int u = 0; u < 2; u++)
                        if (!((w >> (8 * u + (tx & 7))) & 1u)) s[2 * hr + u][j] = 0.f;
                }
        }

        __syncthreads(); /* every thread is done with K and X (H / pk rows) */
#pragma unroll
        for (int j = 0; j < 4; j++)
            *(float4 *)(sX + (tx + 16 * j) * F32_PP + 4 * ty) = make_float4(s[0][j], s[1][j], s[2][j], s[3][j]);
        if (n + 1 < n_end) {
            f32_ld_tile<D>(sK, kb, a.k_sl, n0 + F32_BN, len);
            cp_async_commit();
            cp_async_wait_1(); /* V(n) landed; K(n+1) may still fly */
        } else {
            cp_async_wait_all();
        }
        __syncthreads();

        /* O += P V */
#pragma unroll 4
        for (int j = 0; j < F32_BN; j++) {
            const float4 p = *(const float4 *)(sX + j * F32_PP + 4 * ty);
            const float pa[4] = {p.x, p.y, p.z, p.w};
            if (D == 32) {
                const float2 v = *(const float2 *)(sVQ + j * DP + 2 * tx);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    o[i][0] = fmaf(pa[i], v.x, o[i][0]);
                    o[i][1] = fmaf(pa[i], v.y, o[i][1]);
                }
            } else {
#pragma unroll
                for (int c = 0; c < NO / 4; c++) {
                    const float4 v = *(const float4 *)(sVQ + j * DP + 64 * c + 4 * tx);
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        o[i][4 * c] = fmaf(pa[i], v.x, o[i][4 * c]);
                        o[i][4 * c + 1] = fmaf(pa[i], v.y, o[i][4 * c + 1]);
                        o[i][4 * c + 2] = fmaf(pa[i], v.z, o[i][4 * c + 2]);
                        o[i][4 * c + 3] = fmaf(pa[i], v.w, o[i][4 * c + 3]);
                    }
                }
            }
        }

        /* the position rows of the next tile, when it is a band tile (X and VQ are free
         * once every thread is done with P*V) */
        if (n + 1 < n_end && f32_class(a, use_pos, m0, n0 + F32_BN) == F32_BAND) {
            __syncthreads();
            const int rn = rlo - F32_BN;
            if (a.c2p) f32_ld_pos<D>(sX, F32_BN, pkh, a.pk_ss, a, stab, rn);
            if (a.p2c) f32_ld_pos<D>(sVQ, F32_NU, pqh, a.pq_ss, a, stab, rn);
            cp_async_commit();
        }
    }

    /* epilogue: normalize, padded rows, lse */
    const float *vm = (a.hf && a.vmean) ? a.vmean + ((int64_t)b * a.H + h) * D : (const float *)0;
    const float dsc = a.drop_thr ? a.drop_scale : 1.f;
    const int padfix = a.drop_thr && a.hf && mrow; /* dattn_fwd_padrows_drop writes those rows */
    float *ob = (float *)a.out + (int64_t)b * a.o_sb + (int64_t)tok0 * a.o_sl + (int64_t)h * a.o_sh;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float l = lrun[i];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        l += __shfl_xor_sync(0xffffffffu, l, 4);
        l += __shfl_xor_sync(0xffffffffu, l, 8);
        const int row = m0 + ty + 16 * i;
        if (row >= len) continue;
        const int pad = mrow && mrow[(int64_t)row * a.m_sl] == 0;
        const float inv = l > 0.f ? dsc / l : 0.f;
        float *orow = ob + (int64_t)row * a.o_sl;
        if (!(padfix && pad)) {
            if (D == 32) {
                float2 x;
                x.x = pad ? (vm ? vm[2 * tx] : 0.f) : o[i][0] * inv;
                x.y = pad ? (vm ? vm[2 * tx + 1] : 0.f) : o[i][1] * inv;
                *(float2 *)(orow + 2 * tx) = x;
            } else {
#pragma unroll
                for (int c = 0; c < NO / 4; c++) {
                    const int col = 64 * c + 4 * tx;
                    float4 x;
                    x.x = pad ? (vm ? vm[col] : 0.f) : o[i][4 * c] * inv;
                    x.y = pad ? (vm ? vm[col + 1] : 0.f) : o[i][4 * c + 1] * inv;
                    x.z = pad ? (vm ? vm[col + 2] : 0.f) : o[i][4 * c + 2] * inv;
                    x.w = pad ? (vm ? vm[col + 3] : 0.f) : o[i][4 * c + 3] * inv;
                    *(float4 *)(orow + col) = x;
                }
            }
        }
        if (a.lse && tx == 0)
            a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + row) * a.l_sl] =
                pad ? (a.hf ? a.logL : f32_ninf()) : (mrun[i] + lg2f(l)) * 0.69314718055994531f;
    }
}

#define F32_KERNEL(D)                                                                          \
    extern "C" __global__ void __launch_bounds__(F32_NT, 1)                                    \
        dattn_fwd_f32_d##D(const __grid_constant__ dattn_fwd_args a)                           \
    {                                                                                          \
        fwd_f32_body<D>(a);                                                                    \
    }
F32_KERNEL(32)
F32_KERNEL(64)
F32_KERNEL(128)

/* Shared memory of the fp32 tiled kernel for head dim D, 0 if it has no instance. */
extern "C" int dattn_f32_smem(int D)
{
    return D == 32 ? f32_geom<32>::SMEM : D == 64 ? f32_geom<64>::SMEM : D == 128 ? f32_geom<128>::SMEM : 0;
}

extern "C" int dattn_f32_rows(void) { return F32_BM; }

extern "C" cudaError_t dattn_launch_fwd_f32(const dattn_fwd_args *a, int grid_x, int grid_y, int grid_z,
                                            cudaStream_t stream)
{
    void (*k)(dattn_fwd_args) = a->D == 32 ? dattn_fwd_f32_d32 : a->D == 64 ? dattn_fwd_f32_d64 : dattn_fwd_f32_d128;
    const int smem = dattn_f32_smem(a->D);
    cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    k<<<dim3(grid_x, grid_y, grid_z), F32_NT, smem, stream>>>(*a);
    return cudaGetLastError();
}

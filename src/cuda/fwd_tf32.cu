/* dattn forward, TF32 tensor-core kernel for fp32 inputs in DATTN_MATH_TF32 mode (sm_80+),
 * D in {32, 64, 128}, 16-byte aligned rows. Every product Q.K^T, P.V, Q.pk^T (c2p) and
 * K.pq^T (p2c) runs on mma.sync.m16n8k8 with tf32 operands and fp32 accumulation; the
 * softmax, the accumulators, the sums of the score terms and the saturated-tile constants
 * are fp32. Operands are rounded to tf32 with cvt.rna (round to nearest) before they reach
 * the tensor core (feeding raw fp32 would truncate: twice the error, and biased). IEEE mode
 * never comes here (fwd_f32.cu is unchanged); launch.cu routes, and falls back to the IEEE
 * kernels where this one does not apply (other D, unaligned rows, too little shared memory).
 *
 * Geometry: a CTA of 8 warps owns BM = 64 query rows of one (sequence, head) and walks key
 * tiles of BN = 64. Warp w = (rs, kh) = (w & 3, w >> 2) owns rows 16 rs .. +15 and keys
 * 32 kh .. +31 of every tile: two warps share a row strip and split its keys, each with its
 * own online softmax (running max, sum, O accumulator) over its key halves; the two are
 * merged once at the end (flash-decoding style, fixed order: deterministic). Eight warps
 * per SM at one CTA per SM (the shared memory below), no per-tile cross-warp softmax.
 *
 * Operand paths (all fragments from shared memory, conflict-free):
 *   - tiles (K, V, pk / pq rows) arrive by cp.async into rows of pitch DP = D + 4 floats
 *     (DP % 32 == 4); the thread that issued a 16-byte chunk rounds it to tf32 in place once
 *     it has landed (its own cp.async writes are visible to it after the wait), before the
 *     barrier that publishes the tile: one cvt per element per CTA instead of one per warp.
 *   - Q fragments stay in registers for the whole loop (ldmatrix from the staged tile, then
 *     cvt.rna in registers); Q, K, pk, pq are B / A operands with k along the row:
 *     ldmatrix (.b16 x4) of fp32 rows returns exactly the tf32 fragment (register m of lane
 *     l = word l%4 of row l/4 of matrix m), two k-steps per instruction; with a row pitch of
 *     16 mod 128 bytes the 8 rows of each matrix hit 8 distinct 16-byte bank groups.
 *   - P.V: the k index of P's A fragment is permuted so that the score accumulator (lane
 *     holds keys 2c, 2c+1 of each 8-key block) is the A operand with no shuffle: A's k = c
 *     is key 2c, k = c + 4 is key 2c + 1; V's B fragment then is V[2c][g], V[2c+1][g]
 *     (plain 32-bit LDS; banks 8c + g and 8c + 4 + g with DP % 32 == 4: conflict-free).
 *     P is rounded to tf32 and the row sums run over the rounded values (the weights P.V
 *     uses), so the output is a convex combination of the (tf32) rows of V.
 *
 * Position terms per (query tile, key tile) class (f32_class of fwd_f32.cu):
 *   SATP / SATN  c2p = per-row constant q_i . pk[sat] (fp32 FMA on the raw inputs, once per
 *          CTA), p2c = per-key constant k_j . pq[sat] (fp32 FMA from the tf32 K tile, per
 *          tile): no per-element work, no workspace.
 *   BAND   c2p: a ring G[i][(r - 1) & 127] = q_i . pk[slot(r)] (fp32 results of tf32 MMAs)
 *          over the window's 127 values of r = i - j; consecutive band tiles move the
 *          window down by 64, so a tile computes only the 64 new r values (Q . pk[new]^T:
 *          the cost of one Q K^T), the first band tile of a run two chunks. Read skewed,
 *          LDS.32 (2-way bank conflicts: unavoidable for a skewed read of the mma layout).
 *          p2c: a pq ring in r (row (r & 127), the 64 new rows per band tile) and, per
 *          16-key sub-block, H = K_sub . pq[80 window rows]^T (the parallelogram of the
 *          sub-block: 80/64 the cost of its Q K^T share), stored skewed into a [64][72]
 *          p2c tile in the score layout and read back with LDS.64.
 *          Rings in r, not slots: any slot map works (no monotonicity needed).
 *   PLAIN  no term.
 * MMA work per tile in units of one 64 x 64 x D product: plain / saturated 2, band 4.25
 * (+1 for the first band tile of a CTA's run).
 *
 * Shared memory (floats; DP = D + 4): K [64][DP], V [64][DP], pq ring [128][DP], pk chunk X
 * [64][DP], p2c tile T [64][72], c2p ring G [64][136] (the Q tile is staged there first),
 * saturated constants, pq[sat] rows, the slot table. D = 32: 100 KB (two CTAs per SM on an
 * H100/H200), D = 64: 140 KB, D = 128: 221 KB (H100/H200 only; an A100 takes the IEEE
 * fallback). After the loop the pq ring holds the merge area of the two key halves.
 *
 * Per key tile n (barriers: plain 2, saturated with p2c 3, band 3, first band tile 5):
 *   wait K side of n, round my chunks -> bar -> V(n) issued -> [band: c2p chunk (first:
 *   load + round + second chunk), p2c -> bar] [saturated p2c: constants -> bar] -> scores
 *   (position terms as the C input of Q K^T), mask, online softmax, P rounded, dropout ->
 *   wait V(n), round my chunks -> bar -> K side of n+1 issued -> O += P V.
 * Key tiles outside the sequence's valid key range are skipped (kvr prologue); padded rows
 * are written from the V-mean workspace (HF) or zero; HF padded rows under dropout are left
 * to dattn_fwd_padrows_drop (launch.cu), as on the other tiled paths.
 */
#include "common.cuh"

#include <cuda_runtime.h>

#define T32_BM 64  /* query rows per CTA */
#define T32_BN 64  /* keys per tile */
#define T32_NT 256 /* threads */
#define T32_NU 128 /* ring rows / columns (r & 127); the window has 127 values of r */
#define T32_GP 136 /* c2p ring pitch: 8 mod 32 (conflict-free STS.64 of the chunk) */
#define T32_TP 72  /* p2c tile pitch: 8 mod 32 (conflict-free LDS.64 in the score layout) */

enum { T32_PLAIN = 0, T32_SATP = 1, T32_SATN = 2, T32_BAND = 3 };

template <int D>
struct t32_geom {
    static constexpr int DP = D + 4;  /* row pitch of the D-wide tiles */
    static constexpr int CPR = D / 4; /* 16-byte chunks per row */
    static constexpr int KS = D / 8;  /* k-steps over D */
    static constexpr int OFF_K = 0;
    static constexpr int OFF_V = OFF_K + T32_BN * DP;
    static constexpr int OFF_PQ = OFF_V + T32_BN * DP;   /* pq ring; merge area after the loop */
    static constexpr int OFF_X = OFF_PQ + T32_NU * DP;   /* pk rows of a c2p chunk */
    static constexpr int OFF_T = OFF_X + T32_BN * DP;    /* p2c tile */
    static constexpr int OFF_G = OFF_T + T32_BM * T32_TP; /* c2p ring; Q staging first */
    static constexpr int OFF_CS = OFF_G + T32_BM * T32_GP; /* [2][BM] q_i . pk[sat_pos | sat_neg] */
    static constexpr int OFF_PS = OFF_CS + 2 * T32_BM;   /* [BN] k_j . pq[sat] of the tile */
    static constexpr int OFF_SR = OFF_PS + T32_BN;       /* [2][D] pq[sat_pos], pq[sat_neg] */
    static constexpr int OFF_TAB = OFF_SR + 2 * D;       /* uint16 slot table */
    static constexpr int FLOATS = OFF_TAB + DATTN_CUDA_TAB_MAX / 2;
    static constexpr int SMEM = FLOATS * 4;
    static constexpr int MGL = D / 2 + 4; /* merge words per lane: o, m[2], l[2] */
    static_assert(D == 32 || D == 64 || D == 128, "head dim");
    static_assert(DP % 32 == 4, "row pitch: 16 mod 128 bytes (ldmatrix, V fragments)");
    static_assert(T32_GP % 32 == 8 && T32_TP % 32 == 8 && T32_TP >= T32_BN, "skew pitches");
    static_assert(T32_GP >= DP && T32_GP >= T32_NU, "Q staging and the ring fit the c2p rows");
    static_assert(4 * 32 * MGL <= T32_NU * DP, "merge area inside the pq ring");
    static_assert(T32_NU >= T32_BM + T32_BN - 1 && (T32_NU & (T32_NU - 1)) == 0, "ring");
    static_assert(T32_BN * CPR % T32_NT == 0, "tile loader");
    static_assert(OFF_V % 4 == 0 && OFF_PQ % 4 == 0 && OFF_X % 4 == 0 && OFF_T % 4 == 0 &&
                      OFF_G % 4 == 0 && OFF_PS % 4 == 0 && OFF_SR % 4 == 0 && OFF_TAB % 4 == 0,
                  "16-byte aligned regions");
};

DATTN_DEV float t32_ninf(void) { return __int_as_float(0xff800000); }

DATTN_DEV int t32_class(const dattn_fwd_args &a, int use_pos, int m0, int n0)
{
    if (!use_pos) return T32_PLAIN;
    if (m0 - n0 - T32_BN + 1 >= a.R) return T32_SATP;
    if (m0 - n0 + T32_BM - 1 <= -a.R) return T32_SATN;
    return T32_BAND;
}

/* Four floats of shared memory rounded to tf32 in place. */
DATTN_DEV void t32_round4(float *p)
{
    float4 x = *(const float4 *)p;
    x.x = __uint_as_float(tf32_rna(x.x));
    x.y = __uint_as_float(tf32_rna(x.y));
    x.z = __uint_as_float(tf32_rna(x.z));
    x.w = __uint_as_float(tf32_rna(x.w));
    *(float4 *)p = x;
}

/* MODE 0: issue cp.async of rows first .. first + 63 of a [len]-row tensor (row stride sl)
 * into dst (pitch DP), rows past len zero-filled; MODE 1: round the chunks this thread
 * issued to tf32 in place (after its wait). */
template <int D, int MODE>
DATTN_DEV void t32_tile(float *dst, const float *base, int64_t sl, int first, int len)
{
    typedef t32_geom<D> G;
#pragma unroll
    for (int it = 0; it < T32_BN * G::CPR / T32_NT; it++) {
        const int idx = threadIdx.x + it * T32_NT, r = idx / G::CPR, ch = idx % G::CPR;
        float *p = dst + r * G::DP + 4 * ch;
        if (MODE == 0) {
            const int i = first + r, ok = i < len;
            cp_async16(smem_u32(p), base + (int64_t)(ok ? i : 0) * sl + 4 * ch, ok ? 16 : 0);
        } else {
            t32_round4(p);
        }
    }
}

/* Position rows u < n (n = 64 or 128): row u = tab[slot(r0 + u)], stored at row u
 * (RING 0) or at ring row (r0 + u) & 127 (RING 1). MODE as t32_tile. */
template <int D, int MODE, int RING>
DATTN_DEV void t32_pos(float *dst, int n, const float *tabh, int64_t ss, const dattn_fwd_args &a,
                       const uint16_t *stab, int r0)
{
    typedef t32_geom<D> G;
    for (int idx = threadIdx.x; idx < n * G::CPR; idx += T32_NT) {
        const int u = idx / G::CPR, ch = idx % G::CPR;
        float *p = dst + (RING ? ((r0 + u) & (T32_NU - 1)) : u) * G::DP + 4 * ch;
        if (MODE == 0) {
            const int slot = dev_slot(a, stab, r0 + u);
            cp_async16(smem_u32(p), tabh + (int64_t)slot * ss + 4 * ch, 16);
        } else {
            t32_round4(p);
        }
    }
}

/* Per-CTA facts. */
typedef struct t32_cta {
    const float *kb, *vb, *pkh, *pqh;
    const uint16_t *stab;
    float *smf;
    int m0, len, use_pos;
} t32_cta;

/* The K side of key tile n: K, and for a band tile the pk rows of its c2p chunk (r = rlo ..
 * rlo + 63) and the new pq ring rows (those 64, or the whole window when the previous tile
 * was not a band tile). MODE as t32_tile; the rounding pass (1) must see the ring_ok of the
 * issue (0). */
template <int D, int MODE>
DATTN_DEV void t32_kside(const dattn_fwd_args &a, const t32_cta &t, int n, int ring_ok)
{
    typedef t32_geom<D> G;
    const int n0 = n * T32_BN;
    t32_tile<D, MODE>(t.smf + G::OFF_K, t.kb, a.k_sl, n0, t.len);
    if (t32_class(a, t.use_pos, t.m0, n0) == T32_BAND) {
        const int rlo = t.m0 - n0 - T32_BN + 1;
        if (a.c2p) t32_pos<D, MODE, 0>(t.smf + G::OFF_X, T32_BN, t.pkh, a.pk_ss, a, t.stab, rlo);
        if (a.p2c) t32_pos<D, MODE, 1>(t.smf + G::OFF_PQ, ring_ok ? T32_BN : T32_NU, t.pqh, a.pq_ss, a, t.stab, rlo);
    }
}

/* c2p ring chunk: G[i][(r - 1) & 127] = q_i . pk[slot(r)] for r = r0 + 32 kh .. + 31 and the
 * warp's 16 rows, from the pk rows (r0 + u at row u) in X. r0 = 1 mod 64, so every chunk
 * column pair is (even, odd) inside one 64-column half. */
template <int D>
DATTN_DEV void t32_c2p_chunk(float *sG, const float *sX, const uint32_t (&qf)[D / 8][4], int rs, int kh,
                             int lane, int r0)
{
    typedef t32_geom<D> G;
    const int g = lane >> 2, c = lane & 3;
    float acc[4][4];
#pragma unroll
    for (int nb = 0; nb < 4; nb++) acc[nb][0] = acc[nb][1] = acc[nb][2] = acc[nb][3] = 0.f;
#pragma unroll
    for (int j = 0; j < D / 16; j++)
#pragma unroll
        for (int nb = 0; nb < 4; nb++) {
            uint32_t r[4];
            ldsm_x4(r, smem_u32(sX + (32 * kh + 8 * nb + (lane & 7)) * G::DP + 4 * (4 * j + (lane >> 3))));
            mma1688_tf32(acc[nb], qf[2 * j], r[0], r[1]);
            mma1688_tf32(acc[nb], qf[2 * j + 1], r[2], r[3]);
        }
#pragma unroll
    for (int nb = 0; nb < 4; nb++) {
        const int col = ((r0 - 1) & (T32_NU - 1)) + 32 * kh + 8 * nb + 2 * c;
        *(float2 *)(sG + (16 * rs + g) * T32_GP + col) = make_float2(acc[nb][0], acc[nb][1]);
        *(float2 *)(sG + (16 * rs + g + 8) * T32_GP + col) = make_float2(acc[nb][2], acc[nb][3]);
    }
}

template <int D>
DATTN_DEV void fwd_tf32_body(const dattn_fwd_args &a)
{
    typedef t32_geom<D> G;
    constexpr int DP = G::DP, KS = G::KS, DB = D / 8;
    extern __shared__ __align__(16) float smf[];
    float *sK = smf + G::OFF_K, *sV = smf + G::OFF_V, *sPQ = smf + G::OFF_PQ, *sX = smf + G::OFF_X;
    float *sT = smf + G::OFF_T, *sG = smf + G::OFF_G, *sCS = smf + G::OFF_CS, *sPS = smf + G::OFF_PS;
    float *sSR = smf + G::OFF_SR;
    uint16_t *stab = (uint16_t *)(smf + G::OFF_TAB);
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
    const int rs = w & 3, kh = w >> 2;
    const int b = blockIdx.z, h = blockIdx.y, m0 = blockIdx.x * T32_BM;
    int tok0, len;
    dev_seq(a, b, tok0, len);
    if (m0 >= len) return;

    t32_cta t;
    t.kb = (const float *)a.k + (int64_t)b * a.k_sb + (int64_t)tok0 * a.k_sl + (int64_t)h * a.k_sh;
    t.vb = (const float *)a.v + (int64_t)b * a.v_sb + (int64_t)tok0 * a.v_sl + (int64_t)h * a.v_sh;
    t.pkh = a.c2p ? (const float *)a.pk + (int64_t)h * a.pk_sh : (const float *)0;
    t.pqh = a.p2c ? (const float *)a.pq + (int64_t)h * a.pq_sh : (const float *)0;
    t.stab = stab;
    t.smf = smf;
    t.m0 = m0;
    t.len = len;
    t.use_pos = a.c2p | a.p2c;
    const float *qb = (const float *)a.q + (int64_t)b * a.q_sb + (int64_t)tok0 * a.q_sl + (int64_t)h * a.q_sh;
    const uint8_t *mrow = a.mask ? a.mask + (int64_t)b * a.m_sb : (const uint8_t *)0;

    if (t.use_pos)
        for (int i = tid; i < 2 * a.nlog; i += T32_NT) stab[i] = a.tab[i];
    if (a.p2c)
        for (int i = tid; i < 2 * D; i += T32_NT)
            sSR[i] = t.pqh[(int64_t)(i < D ? a.sat_pos : a.sat_neg) * a.pq_ss + i % D];
    int myvalid = 0;
    if (tid < T32_BM) {
        const int i = m0 + tid;
        myvalid = i < len && (!mrow || mrow[(int64_t)i * a.m_sl] != 0);
    }
    const int anyv = __syncthreads_or(myvalid); /* also publishes stab, sSR */

    int kv_lo = 0, kv_hi = len;
    if (a.kvr) {
        kv_lo = a.kvr[2 * b];
        kv_hi = a.kvr[2 * b + 1];
    }
    const int n_begin = kv_lo / T32_BN;
    const int n_end = (anyv && kv_hi > kv_lo) ? (kv_hi + T32_BN - 1) / T32_BN : n_begin;

    /* Q (staged raw in the c2p ring's rows) and the K side of the first key tile */
    t32_tile<D, 0>(sG, qb, a.q_sl, m0, len);
    int ring_ok = 0;
    if (n_begin < n_end) t32_kside<D, 0>(a, t, n_begin, ring_ok);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    /* Q fragments of the warp's strip, rounded to tf32, for the whole loop */
    uint32_t qf[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
        uint32_t r[4];
        ldsm_x4(r, smem_u32(sG + (16 * rs + (lane & 7) + 8 * ((lane >> 3) & 1)) * DP + 4 * (2 * ks + (lane >> 4))));
#pragma unroll
        for (int x = 0; x < 4; x++) qf[ks][x] = tf32_rna(__uint_as_float(r[x]));
    }
    /* c2p of saturated tiles: q_i . pk[sat_pos], q_i . pk[sat_neg] (fp32, raw inputs) */
    if (a.c2p && tid < 2 * T32_BM) {
        const int r = tid & (T32_BM - 1), side = tid / T32_BM;
        const float *pr = t.pkh + (int64_t)(side ? a.sat_neg : a.sat_pos) * a.pk_ss;
        float s = 0.f;
        for (int d = 0; d < D; d++) s = fmaf(sG[r * DP + d], pr[d], s);
        sCS[side * T32_BM + r] = s;
    }
    /* (the first writes of G come after the loop's first barrier: every warp has its Q
     * fragments and the constants above by then) */

    float o[DB][4];
#pragma unroll
    for (int db = 0; db < DB; db++) o[db][0] = o[db][1] = o[db][2] = o[db][3] = 0.f;
    float mrun[2] = {t32_ninf(), t32_ninf()}, lrun[2] = {0.f, 0.f};
    const float sl2 = a.sl2;
    const uint32_t bh = (uint32_t)b * (uint32_t)a.H + (uint32_t)h;
    const int row0 = 16 * rs + g; /* local rows row0, row0 + 8 */

    for (int n = n_begin; n < n_end; n++) {
        const int n0 = n * T32_BN, rlo = m0 - n0 - T32_BN + 1;
        const int cls = t32_class(a, t.use_pos, m0, n0);
        /* key validity of the warp's 32 keys (the load is in flight during the products) */
        const int kj = n0 + 32 * kh + lane;
        const int mk = mrow ? (kj < len ? mrow[(int64_t)kj * a.m_sl] : 0) : 1;
        cp_async_wait_all(); /* the K side of tile n */
        t32_kside<D, 1>(a, t, n, ring_ok);
        __syncthreads();     /* K side visible; every warp is done with V(n - 1) */
        t32_tile<D, 0>(sV, t.vb, a.v_sl, n0, len);
        cp_async_commit();

        if (cls == T32_BAND) {
            if (a.c2p) {
                t32_c2p_chunk<D>(sG, sX, qf, rs, kh, lane, rlo);
                if (!ring_ok) { /* first band tile: the upper 63 values of r as well */
                    __syncthreads();
                    t32_pos<D, 0, 0>(sX, T32_BN, t.pkh, a.pk_ss, a, stab, rlo + T32_BN);
                    cp_async_commit();
                    cp_async_wait_all();
                    t32_pos<D, 1, 0>(sX, T32_BN, t.pkh, a.pk_ss, a, stab, rlo + T32_BN);
                    __syncthreads();
                    t32_c2p_chunk<D>(sG, sX, qf, rs, kh, lane, rlo + T32_BN);
                }
            }
            if (a.p2c) {
                /* sub-block sb = keys 16 sb .. +15, window positions u0 .. u0 + 79 (r = rlo + u):
                 * warp w takes 5 of its 10 n8 blocks */
                const int sb = w & 3, hb0 = 5 * (w >> 2), u0 = 48 - 16 * sb;
                float acc[5][4];
#pragma unroll
                for (int q = 0; q < 5; q++) acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0.f;
#pragma unroll
                for (int j = 0; j < D / 16; j++) {
                    uint32_t ka[2][4];
#pragma unroll
                    for (int q = 0; q < 2; q++)
                        ldsm_x4(ka[q], smem_u32(sK + (16 * sb + (lane & 7) + 8 * ((lane >> 3) & 1)) * DP +
                                                4 * (2 * (2 * j + q) + (lane >> 4))));
#pragma unroll
                    for (int q = 0; q < 5; q++) {
                        const int row = (rlo + u0 + 8 * (hb0 + q) + (lane & 7)) & (T32_NU - 1);
                        uint32_t r[4];
                        ldsm_x4(r, smem_u32(sPQ + row * DP + 4 * (4 * j + (lane >> 3))));
                        mma1688_tf32(acc[q], ka[0], r[0], r[1]);
                        mma1688_tf32(acc[q], ka[1], r[2], r[3]);
                    }
                }
                /* element (key 16 sb + g (+8), window u) belongs to row i = u + key - 63 */
#pragma unroll
                for (int q = 0; q < 5; q++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int il = 8 * (hb0 + q) + 2 * c + g + (e & 1) + 8 * (e >> 1) - 15;
                        if ((unsigned)il < (unsigned)T32_BM) sT[il * T32_TP + 16 * sb + g + 8 * (e >> 1)] = acc[q][e];
                    }
            }
            __syncthreads(); /* c2p ring and p2c tile visible */
            ring_ok = 1;
        } else {
            ring_ok = 0;
            if (cls != T32_PLAIN && a.p2c) {
                /* p2c of a saturated tile: k_j . pq[sat], 4 threads per key */
                const int j = tid >> 2, part = tid & 3;
                const float *kr = sK + j * DP + part * (D / 4);
                const float *pr = sSR + (cls == T32_SATN ? D : 0) + part * (D / 4);
                float s = 0.f;
#pragma unroll
                for (int d = 0; d < D / 4; d++) s = fmaf(kr[d], pr[d], s);
                s += __shfl_xor_sync(0xffffffffu, s, 1);
                s += __shfl_xor_sync(0xffffffffu, s, 2);
                if (part == 0) sPS[j] = s;
                __syncthreads();
            }
        }

        /* scores: the position terms are the C input of Q K^T */
        float s[4][4];
        if (cls == T32_BAND && a.c2p) {
            const int cb = m0 - n0 - 1 + row0 - 32 * kh - 2 * c; /* (r - 1) of element (0, 0) */
#pragma unroll
            for (int nb = 0; nb < 4; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[nb][e] = sG[(row0 + 8 * (e >> 1)) * T32_GP +
                                  ((cb + 8 * (e >> 1) - 8 * nb - (e & 1)) & (T32_NU - 1))];
        } else if (cls != T32_PLAIN && a.c2p) {
            const float *cs = sCS + (cls == T32_SATN ? T32_BM : 0) + row0;
            const float c0 = cs[0], c8 = cs[8];
#pragma unroll
            for (int nb = 0; nb < 4; nb++) {
                s[nb][0] = s[nb][1] = c0;
                s[nb][2] = s[nb][3] = c8;
            }
        } else {
#pragma unroll
            for (int nb = 0; nb < 4; nb++) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
        }
        if (cls == T32_BAND && a.p2c) {
#pragma unroll
            for (int nb = 0; nb < 4; nb++) {
                const float2 x = *(const float2 *)(sT + row0 * T32_TP + 32 * kh + 8 * nb + 2 * c);
                const float2 y = *(const float2 *)(sT + (row0 + 8) * T32_TP + 32 * kh + 8 * nb + 2 * c);
                s[nb][0] += x.x;
                s[nb][1] += x.y;
                s[nb][2] += y.x;
                s[nb][3] += y.y;
            }
        } else if (cls != T32_PLAIN && a.p2c) {
#pragma unroll
            for (int nb = 0; nb < 4; nb++) {
                const float2 x = *(const float2 *)(sPS + 32 * kh + 8 * nb + 2 * c);
                s[nb][0] += x.x;
                s[nb][1] += x.y;
                s[nb][2] += x.x;
                s[nb][3] += x.y;
            }
        }
#pragma unroll
        for (int j = 0; j < D / 16; j++)
#pragma unroll
            for (int nb = 0; nb < 4; nb++) {
                uint32_t r[4];
                ldsm_x4(r, smem_u32(sK + (32 * kh + 8 * nb + (lane & 7)) * DP + 4 * (4 * j + (lane >> 3))));
                mma1688_tf32(s[nb], qf[2 * j], r[0], r[1]);
                mma1688_tf32(s[nb], qf[2 * j + 1], r[2], r[3]);
            }

        /* key validity (mask, end of the sequence), log2-domain scores */
        const uint32_t vbits = __ballot_sync(0xffffffffu, mk != 0 && kj < len);
#pragma unroll
        for (int nb = 0; nb < 4; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[nb][e] = ((vbits >> (8 * nb + 2 * c + (e & 1))) & 1u) ? s[nb][e] * sl2 : t32_ninf();

        /* online softmax over the warp's keys: rows g, g + 8 of the strip, reduced over the quad */
        float mx[2] = {t32_ninf(), t32_ninf()};
#pragma unroll
        for (int nb = 0; nb < 4; nb++) {
            mx[0] = fmaxf(mx[0], fmaxf(s[nb][0], s[nb][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[nb][2], s[nb][3]));
        }
        float muse[2], alpha[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float mnew = fmaxf(mrun[r], mx[r]);
            muse[r] = mnew == t32_ninf() ? 0.f : mnew;
            alpha[r] = ex2f(mrun[r] - muse[r]);
            mrun[r] = mnew;
            lrun[r] *= alpha[r];
        }
        if (!__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) {
#pragma unroll
            for (int db = 0; db < DB; db++) {
                o[db][0] *= alpha[0];
                o[db][1] *= alpha[0];
                o[db][2] *= alpha[1];
                o[db][3] *= alpha[1];
            }
        }
#pragma unroll
        for (int nb = 0; nb < 4; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[nb][e] = __uint_as_float(tf32_rna(ex2f(s[nb][e] - muse[e >> 1])));
                lrun[e >> 1] += s[nb][e];
            }

        /* dropout: the row sums above ran over every probability; P V takes the kept ones.
         * One Philox call decides the 8 keys of an n8 block of one row (counter j >> 3): the
         * lane quad g holds them (keys 2c, 2c + 1) for rows row0 and row0 + 8, 2 x 4 calls of
         * which lane c makes the two of row row0 + 8 (c & 1), blocks 2 t + (c >> 1), t = 0, 1
         * (byte t of kw); four shuffles gather them. */
        if (a.drop_thr) {
            uint32_t kw = 0;
#pragma unroll 1
            for (int t = 0; t < 2; t++) {
                uint32_t o0, o1, o2, o3;
                const uint32_t jb = (uint32_t)(n0 + 32 * kh) / 8u + (uint32_t)(2 * t + (c >> 1));
                dev_philox(jb, (uint32_t)(m0 + row0 + 8 * (c & 1)), bh, a.drop_c3, a.drop_k0, a.drop_k1,
                           o0, o1, o2, o3);
                kw |= dev_keep8(o0, o1, o2, o3, a.drop_thr) << (8 * t);
            }
#pragma unroll
            for (int sl = 0; sl < 4; sl++) {
                const uint32_t w = __shfl_sync(0xffffffffu, kw, (lane & ~3) | sl) >> (2 * c);
#pragma unroll
                for (int t = 0; t < 2; t++) {
                    const int r = sl & 1, nb = 2 * t + (sl >> 1);
                    if (!((w >> (8 * t)) & 1u)) s[nb][2 * r] = 0.f;
                    if (!((w >> (8 * t + 1)) & 1u)) s[nb][2 * r + 1] = 0.f;
                }
            }
        }

        cp_async_wait_all(); /* V(n) */
        t32_tile<D, 1>(sV, t.vb, a.v_sl, n0, len);
        __syncthreads(); /* V visible; every warp is done with K, X, T, G reads and the pq ring */
        if (n + 1 < n_end) {
            t32_kside<D, 0>(a, t, n + 1, ring_ok);
            cp_async_commit();
        }

        /* O += P V: P's k index permuted (k = c: key 2c, k = c + 4: key 2c + 1) */
#pragma unroll
        for (int kb = 0; kb < 4; kb++) {
            const uint32_t pa[4] = {__float_as_uint(s[kb][0]), __float_as_uint(s[kb][2]),
                                    __float_as_uint(s[kb][1]), __float_as_uint(s[kb][3])};
            const float *vr = sV + (32 * kh + 8 * kb + 2 * c) * DP + g;
#pragma unroll
            for (int db = 0; db < DB; db++)
                mma1688_tf32(o[db], pa, __float_as_uint(vr[8 * db]), __float_as_uint(vr[DP + 8 * db]));
        }
    }

    /* merge the two key halves of each strip (half 1 -> shared memory -> half 0), then
     * normalize, padded rows, lse */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        lrun[r] += __shfl_xor_sync(0xffffffffu, lrun[r], 1);
        lrun[r] += __shfl_xor_sync(0xffffffffu, lrun[r], 2);
    }
    __syncthreads(); /* every warp is done with the pq ring (the merge area) */
    float *mg = sPQ + rs * 32 * G::MGL;
    if (kh) {
#pragma unroll
        for (int db = 0; db < DB; db++)
#pragma unroll
            for (int e = 0; e < 4; e++) mg[(4 * db + e) * 32 + lane] = o[db][e];
        mg[(D / 2) * 32 + lane] = mrun[0];
        mg[(D / 2 + 1) * 32 + lane] = mrun[1];
        mg[(D / 2 + 2) * 32 + lane] = lrun[0];
        mg[(D / 2 + 3) * 32 + lane] = lrun[1];
    }
    __syncthreads();
    if (kh) return;
    float f0[2], f1[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const float m1 = mg[(D / 2 + r) * 32 + lane], l1 = mg[(D / 2 + 2 + r) * 32 + lane];
        const float mm = fmaxf(mrun[r], m1);
        const float mu = mm == t32_ninf() ? 0.f : mm;
        f0[r] = ex2f(mrun[r] - mu);
        f1[r] = ex2f(m1 - mu);
        lrun[r] = lrun[r] * f0[r] + l1 * f1[r];
        mrun[r] = mm;
    }
#pragma unroll
    for (int db = 0; db < DB; db++)
#pragma unroll
        for (int e = 0; e < 4; e++) o[db][e] = o[db][e] * f0[e >> 1] + mg[(4 * db + e) * 32 + lane] * f1[e >> 1];

    const float *vm = (a.hf && a.vmean) ? a.vmean + ((int64_t)b * a.H + h) * D : (const float *)0;
    const float dsc = a.drop_thr ? a.drop_scale : 1.f;
    const int padfix = a.drop_thr && a.hf && mrow; /* dattn_fwd_padrows_drop writes those rows */
    float *ob = (float *)a.out + (int64_t)b * a.o_sb + (int64_t)tok0 * a.o_sl + (int64_t)h * a.o_sh;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = m0 + row0 + 8 * r;
        if (row >= len) continue;
        const int pad = mrow && mrow[(int64_t)row * a.m_sl] == 0;
        const float inv = lrun[r] > 0.f ? dsc / lrun[r] : 0.f;
        float *orow = ob + (int64_t)row * a.o_sl;
        if (!(padfix && pad)) {
#pragma unroll
            for (int db = 0; db < DB; db++) {
                const int col = 8 * db + 2 * c;
                float2 x;
                x.x = pad ? (vm ? vm[col] : 0.f) : o[db][2 * r] * inv;
                x.y = pad ? (vm ? vm[col + 1] : 0.f) : o[db][2 * r + 1] * inv;
                *(float2 *)(orow + col) = x;
            }
        }
        if (a.lse && c == 0)
            a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + row) * a.l_sl] =
                pad ? (a.hf ? a.logL : t32_ninf()) : (mrun[r] + lg2f(lrun[r])) * 0.69314718055994531f;
    }
}

#define T32_KERNEL(D)                                                                          \
    extern "C" __global__ void __launch_bounds__(T32_NT, 1)                                    \
        dattn_fwd_tf32_d##D(const __grid_constant__ dattn_fwd_args a)                          \
    {                                                                                          \
        fwd_tf32_body<D>(a);                                                                   \
    }
T32_KERNEL(32)
T32_KERNEL(64)
T32_KERNEL(128)

/* Shared memory of the TF32 kernel for head dim D, 0 if it has no instance. */
extern "C" int dattn_tf32_smem(int D)
{
    return D == 32 ? t32_geom<32>::SMEM : D == 64 ? t32_geom<64>::SMEM : D == 128 ? t32_geom<128>::SMEM : 0;
}

extern "C" int dattn_tf32_rows(void) { return T32_BM; }

extern "C" cudaError_t dattn_launch_fwd_tf32(const dattn_fwd_args *a, int grid_x, int grid_y, int grid_z,
                                             cudaStream_t stream)
{
    void (*k)(dattn_fwd_args) = a->D == 32 ? dattn_fwd_tf32_d32 : a->D == 64 ? dattn_fwd_tf32_d64 : dattn_fwd_tf32_d128;
    const int smem = dattn_tf32_smem(a->D);
    cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    k<<<dim3(grid_x, grid_y, grid_z), T32_NT, smem, stream>>>(*a);
    return cudaGetLastError();
}

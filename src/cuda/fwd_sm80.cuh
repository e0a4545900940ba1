/* dattn forward, tensor-core kernel for sm_80 and newer (fp16 / bf16, fp32 accumulate).
 *
 * FlashAttention-2 structure: a CTA owns BM = 16*NW query rows of one (sequence, head)
 * and walks the key tiles of BN keys; each warp owns 16 rows. Q fragments stay in
 * registers; K and V tiles arrive through cp.async into a two-stage, XOR-swizzled buffer;
 * scores, the online softmax (exp2 with log2(e)/scale folded into one FFMA) and the
 * P*V product stay in registers (the fp32 score fragment becomes the A operand of P*V).
 *
 * The position terms. Every (query tile, key tile) pair is classified once (uniform over
 * the CTA) by its range of r = i - j:
 *   PLAIN  no position term is on;
 *   SATP / SATN  every r of the tile is >= R (<= -R): the slot is the constant
 *          sat_pos (sat_neg), so c2p is a per-row constant (computed once per CTA, added
 *          into the exp2 FFMA's addend, no per-element work) and p2c a per-column
 *          constant (k_j . pq[sat], a prologue kernel writes it to the workspace; it is
 *          the C input of the first Q*K^T MMA, again no per-element work);
 *   BAND   otherwise. The CTA's r window has BM + BN - 1 values; the slots of those r
 *          form a contiguous, monotone range. The pk / pq rows of that range live in a
 *          shared-memory ring of RC = BM + 2*BN rows indexed by slot % RC: consecutive
 *          band tiles move the window down by BN slots, so a tile loads only the new rows
 *          (prefetched with the K/V tile). A per-tile table T[u] gives the swizzled ring
 *          address of window position u, so ldmatrix gathers pk/pq rows for any slot map
 *          (linear or log zone) with one LDS + one LOP per 8 rows.
 *          c2p: each warp computes G = Q_w (16 x D) . pk[window of BN + 16]^T with MMA
 *          and reads it back skewed: c2p(i, j) = G[i][i - j + BN - 1].
 *          p2c: the CTA computes, per 16-key sub-block, K_sub (16 x D) . pq[window of
 *          BM + 16]^T (split across warps) and stores it skewed into a shared [BM][BN]
 *          fp32 tile that each warp reads back in its score layout.
 *          Cost per band tile: (BN + 16)/BN and (BM + 16)/BM times the Q*K^T MMA work,
 *          instead of 2x for full rectangles; no [B, H, L, 2S] tables in device memory.
 * Key tiles before the first / after the last valid key of a sequence are skipped; a CTA
 * whose rows are all padding runs no tile. Padded query rows (mask 0) are written from
 * the workspace mean of V (HF) or zero.
 */
#ifndef DATTN_CUDA_FWD_SM80_CUH
#define DATTN_CUDA_FWD_SM80_CUH

#include "common.cuh"

#define DATTN_ALIGN128(x) (((x) + 127) / 128 * 128)

/* Tile geometry of one kernel configuration (host and device). */
template <int D, int NW, int BN>
struct fwd_geom {
    static constexpr int BM = 16 * NW;       /* query rows per CTA */
    static constexpr int NTHR = 32 * NW;
    static constexpr int RB = 2 * D;         /* bytes per row of a tile */
    static constexpr int CPR = D / 8;        /* 16-byte chunks per row */
    static constexpr int KS = D / 16;        /* k-steps over D */
    static constexpr int NB = BN / 8;        /* n8 blocks of a score row */
    static constexpr int DB = D / 8;         /* n8 blocks of an output row */
    static constexpr int NG = BN + 16;       /* c2p window per warp */
    static constexpr int PC = NG + 8;        /* c2p skew buffer pitch (floats) */
    static constexpr int PP = BN + 8;        /* p2c tile pitch (floats) */
    static constexpr int NWIN = BM + BN - 1; /* r values of a tile */
    static constexpr int NT = BM + BN;       /* window table entries */
    static constexpr int RC = BM + 2 * BN;   /* ring rows */
    static constexpr int NSB = BN / 16;      /* 16-key sub-blocks of a key tile */
    static constexpr int PARTS = NW / NSB;   /* warps per sub-block (p2c) */
    static constexpr int NBH = (BM + 16) / 8; /* p2c window n8 blocks per sub-block */
    static constexpr int NBP = (NBH + PARTS - 1) / PARTS;
    static constexpr int STG = DATTN_ALIGN128(2 * BN * RB + NT * 4 + BN * 4);
    static constexpr int OFF_Q = 0;
    static constexpr int OFF_ST = DATTN_ALIGN128(BM * RB);
    static constexpr int OFF_RK = OFF_ST + 2 * STG;
    static constexpr int OFF_RQ = OFF_RK + DATTN_ALIGN128(RC * RB);
    static constexpr int OFF_SC = OFF_RQ + DATTN_ALIGN128(RC * RB);
    static constexpr int OFF_SP = OFF_SC + DATTN_ALIGN128(NW * 16 * PC * 4);
    static constexpr int OFF_TAB = OFF_SP + DATTN_ALIGN128(BM * PP * 4);
    static constexpr int SMEM = OFF_TAB + DATTN_ALIGN128(DATTN_CUDA_TAB_MAX * 2);
    static_assert(D == 32 || D == 64 || D == 128, "head dim");
    static_assert(BN % 16 == 0 && BN <= 64, "key tile");
    static_assert(NW % NSB == 0 && PARTS >= 1, "p2c work split");
    static_assert(PC % 16 == 8 && PP % 16 == 8, "skew buffer pitch (bank conflicts)");
    static_assert(CPR % 4 == 0, "ldmatrix.x4 over four chunks");
};

enum { DATTN_CLS_PLAIN = 0, DATTN_CLS_SATP = 1, DATTN_CLS_SATN = 2, DATTN_CLS_BAND = 3 };

/* XOR swizzle of 16-byte chunks: the 8 rows an ldmatrix reads hit 8 distinct bank groups. */
template <int D>
DATTN_DEV int swz_key(int row)
{
    return D >= 64 ? (row & 7) : ((row >> 1) & 3);
}

template <int D>
DATTN_DEV uint32_t swz(int row, int ch)
{
    return (uint32_t)(row * (2 * D) + ((ch ^ swz_key<D>(row)) << 4));
}

DATTN_DEV float neg_inf(void) { return __int_as_float(0xff800000); }

/* Per-CTA constants shared by the loader and the compute step. */
typedef struct fwd_cta {
    const uint16_t *kb, *vb, *pkh, *pqh;
    const uint8_t *mrow;
    const float *kpsb; /* kps plane pair of this (b, h), indexed by key position */
    const uint16_t *stab;
    char *smem;
    int m0, len, b, h, tok0, use_pos;
} fwd_cta;

template <int D, int NW, int BN>
DATTN_DEV int tile_class(const dattn_fwd_args &a, const fwd_cta &t, int n0)
{
    typedef fwd_geom<D, NW, BN> G;
    if (!t.use_pos) return DATTN_CLS_PLAIN;
    const int rlo = t.m0 - n0 - BN + 1, rhi = t.m0 - n0 + G::BM - 1;
    if (rlo >= a.R) return DATTN_CLS_SATP;
    if (rhi <= -a.R) return DATTN_CLS_SATN;
    return DATTN_CLS_BAND;
}

/* Issues the copies of key tile n into stage st (K, V, ring rows or saturated p2c
 * constants), writes its window table, prefetches its mask bytes into mk0/mk1. */
template <int D, int NW, int BN>
DATTN_DEV void fwd_load_tile(const dattn_fwd_args &a, const fwd_cta &t, int n, int st,
                             int &ring_lo, int &ring_ok, int &mk0, int &mk1)
{
    typedef fwd_geom<D, NW, BN> G;
    const int tid = threadIdx.x, lane = tid & 31;
    const int n0 = n * BN;
    char *base = t.smem + G::OFF_ST + st * G::STG;
    const uint32_t sK = smem_u32(base), sV = sK + BN * G::RB;
#pragma unroll
    for (int it = 0; it < (BN * G::CPR + G::NTHR - 1) / G::NTHR; it++) {
        const int idx = tid + it * G::NTHR;
        if (idx < BN * G::CPR) {
            const int row = idx / G::CPR, ch = idx % G::CPR, j = n0 + row;
            const int ok = j < t.len;
            const int64_t jj = ok ? j : 0;
            const uint32_t off = swz<D>(row, ch);
            cp_async16(sK + off, t.kb + jj * a.k_sl + ch * 8, ok ? 16 : 0);
            cp_async16(sV + off, t.vb + jj * a.v_sl + ch * 8, ok ? 16 : 0);
        }
    }
    if (t.mrow) {
        const int j0 = n0 + lane, j1 = n0 + 32 + lane;
        mk0 = (lane < BN && j0 < t.len) ? t.mrow[(int64_t)j0 * a.m_sl] : 0;
        mk1 = (BN > 32 && j1 < t.len) ? t.mrow[(int64_t)j1 * a.m_sl] : 0;
    }
    const int cls = tile_class<D, NW, BN>(a, t, n0);
    if (cls == DATTN_CLS_BAND) {
        int *sT = (int *)(base + 2 * BN * G::RB);
        const int rlo = t.m0 - n0 - BN + 1;
        for (int u = tid; u < G::NT; u += G::NTHR) {
            const int uu = u < G::NWIN ? u : G::NWIN - 1;
            const int row = dev_slot(a, t.stab, rlo + uu) % G::RC;
            sT[u] = row * G::RB + (swz_key<D>(row) << 4);
        }
        const int slo = dev_slot(a, t.stab, rlo), shi = dev_slot(a, t.stab, rlo + G::NWIN - 1);
        const int top = ring_ok ? min(shi, ring_lo - 1) : shi;
        const int nrows = top - slo + 1;
        const uint32_t rk = smem_u32(t.smem + G::OFF_RK), rq = smem_u32(t.smem + G::OFF_RQ);
        for (int idx = tid; idx < nrows * G::CPR; idx += G::NTHR) {
            const int s = slo + idx / G::CPR, ch = idx % G::CPR;
            const uint32_t off = swz<D>(s % G::RC, ch);
            if (a.c2p) cp_async16(rk + off, t.pkh + (int64_t)s * a.pk_ss + ch * 8, 16);
            if (a.p2c) cp_async16(rq + off, t.pqh + (int64_t)s * a.pq_ss + ch * 8, 16);
        }
        ring_lo = slo;
        ring_ok = 1;
    } else {
        ring_ok = 0;
        if (cls != DATTN_CLS_PLAIN && a.p2c) {
            const float *src = t.kpsb + (cls == DATTN_CLS_SATN ? a.kps_ld : 0) + n0;
            const uint32_t sps = smem_u32(base + 2 * BN * G::RB + G::NT * 4);
            for (int j = tid; j < BN; j += G::NTHR) {
                const int ok = n0 + j < t.len;
                cp_async4(sps + j * 4, src + (ok ? j : 0), ok ? 4 : 0);
            }
        }
    }
}

template <int D, int NW, int BN, int BF>
DATTN_DEV void fwd_sm80_body(const dattn_fwd_args &a)
{
    typedef fwd_geom<D, NW, BN> G;
    extern __shared__ __align__(128) char smem[];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
    const int b = blockIdx.z, h = blockIdx.y, m0 = blockIdx.x * G::BM;
    int tok0, len;
    dev_seq(a, b, tok0, len);
    if (m0 >= len) return;

    fwd_cta t;
    t.kb = (const uint16_t *)a.k + (int64_t)b * a.k_sb + (int64_t)tok0 * a.k_sl + (int64_t)h * a.k_sh;
    t.vb = (const uint16_t *)a.v + (int64_t)b * a.v_sb + (int64_t)tok0 * a.v_sl + (int64_t)h * a.v_sh;
    t.pkh = a.c2p ? (const uint16_t *)a.pk + (int64_t)h * a.pk_sh : (const uint16_t *)0;
    t.pqh = a.p2c ? (const uint16_t *)a.pq + (int64_t)h * a.pq_sh : (const uint16_t *)0;
    t.mrow = a.mask ? a.mask + (int64_t)b * a.m_sb : (const uint8_t *)0;
    t.kpsb = a.kps ? (a.packed ? a.kps + (int64_t)h * 2 * a.kps_ld + tok0
                               : a.kps + ((int64_t)b * a.H + h) * 2 * a.kps_ld)
                   : (const float *)0;
    uint16_t *stab = (uint16_t *)(smem + G::OFF_TAB);
    t.stab = stab;
    t.smem = smem;
    t.m0 = m0;
    t.len = len;
    t.b = b;
    t.h = h;
    t.tok0 = tok0;
    t.use_pos = a.c2p | a.p2c;
    const uint16_t *qb =
        (const uint16_t *)a.q + (int64_t)b * a.q_sb + (int64_t)tok0 * a.q_sl + (int64_t)h * a.q_sh;

    if (t.use_pos)
        for (int i = tid; i < 2 * a.nlog; i += G::NTHR) stab[i] = a.tab[i];
    int myvalid = 0;
    if (tid < G::BM) {
        const int i = m0 + tid;
        myvalid = i < len && (!t.mrow || t.mrow[(int64_t)i * a.m_sl] != 0);
    }
    const int anyv = __syncthreads_or(myvalid); /* also publishes stab */

    int kv_lo = 0, kv_hi = len;
    if (a.kvr) {
        kv_lo = a.kvr[2 * b];
        kv_hi = a.kvr[2 * b + 1];
    }
    const int n_begin = kv_lo / BN;
    const int n_end = (anyv && kv_hi > kv_lo) ? (kv_hi + BN - 1) / BN : n_begin;

    /* Q tile and the first key tile. */
    const uint32_t sQ = smem_u32(smem + G::OFF_Q);
#pragma unroll
    for (int it = 0; it < (G::BM * G::CPR + G::NTHR - 1) / G::NTHR; it++) {
        const int idx = tid + it * G::NTHR;
        if (idx < G::BM * G::CPR) {
            const int row = idx / G::CPR, ch = idx % G::CPR, i = m0 + row;
            const int ok = i < len;
            cp_async16(sQ + swz<D>(row, ch), qb + (int64_t)(ok ? i : 0) * a.q_sl + ch * 8, ok ? 16 : 0);
        }
    }
    int ring_lo = 0, ring_ok = 0, mk0n = 0, mk1n = 0;
    if (n_begin < n_end) fwd_load_tile<D, NW, BN>(a, t, n_begin, n_begin & 1, ring_lo, ring_ok, mk0n, mk1n);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    uint32_t qf[G::KS][4];
#pragma unroll
    for (int ks = 0; ks < G::KS; ks++)
        ldsm_x4(qf[ks], sQ + swz<D>(16 * w + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * ks + (lane >> 4)));

    /* c2p of saturated tiles: q_i . pk[sat_pos / sat_neg] for rows g and g+8. */
    float csp[2] = {0.f, 0.f}, csn[2] = {0.f, 0.f};
    if (a.c2p) {
        const int rr = lane & 15, half = lane >> 4;
        float sp = 0.f, sn = 0.f;
        const uint16_t *pp = t.pkh + (int64_t)a.sat_pos * a.pk_ss, *pn = t.pkh + (int64_t)a.sat_neg * a.pk_ss;
        for (int d = half * (D / 2); d < (half + 1) * (D / 2); d++) {
            const uint16_t qv = *(const uint16_t *)(smem + G::OFF_Q + swz<D>(16 * w + rr, d >> 3) + (d & 7) * 2);
            const float qf32 = h2f<BF>(qv);
            sp = fmaf(qf32, h2f<BF>(pp[d]), sp);
            sn = fmaf(qf32, h2f<BF>(pn[d]), sn);
        }
        sp += __shfl_xor_sync(0xffffffffu, sp, 16);
        sn += __shfl_xor_sync(0xffffffffu, sn, 16);
        csp[0] = __shfl_sync(0xffffffffu, sp, g);
        csp[1] = __shfl_sync(0xffffffffu, sp, g + 8);
        csn[0] = __shfl_sync(0xffffffffu, sn, g);
        csn[1] = __shfl_sync(0xffffffffu, sn, g + 8);
    }

    float o[G::DB][4];
#pragma unroll
    for (int db = 0; db < G::DB; db++) o[db][0] = o[db][1] = o[db][2] = o[db][3] = 0.f;
    float mrun[2] = {neg_inf(), neg_inf()}, lrun[2] = {0.f, 0.f};
    const float sl2 = a.sl2;
    const uint32_t rk = smem_u32(smem + G::OFF_RK), rq = smem_u32(smem + G::OFF_RQ);
    float *scw = (float *)(smem + G::OFF_SC) + w * 16 * G::PC;
    float *spb = (float *)(smem + G::OFF_SP);

    for (int n = n_begin; n < n_end; n++) {
        const int st = n & 1;
        const int mk0 = mk0n, mk1 = mk1n;
        if (n > n_begin) {
            cp_async_wait_all();
            __syncthreads();
        }
        if (n + 1 < n_end) {
            fwd_load_tile<D, NW, BN>(a, t, n + 1, st ^ 1, ring_lo, ring_ok, mk0n, mk1n);
            cp_async_commit();
        }
        const int n0 = n * BN;
        char *base = smem + G::OFF_ST + st * G::STG;
        const uint32_t sK = smem_u32(base), sV = sK + BN * G::RB;
        const int *sT = (const int *)(base + 2 * BN * G::RB);
        const int cls = tile_class<D, NW, BN>(a, t, n0);

        float s[G::NB][4];
        if (cls == DATTN_CLS_BAND && a.c2p) {
            /* G = Q_w . pk[window]^T, then the skewed read c2p(i, j) = G[i][i - j + BN - 1]. */
            float ga[G::NG / 8][4];
#pragma unroll
            for (int gb = 0; gb < G::NG / 8; gb++) {
                ga[gb][0] = ga[gb][1] = ga[gb][2] = ga[gb][3] = 0.f;
                const uint32_t tu = (uint32_t)sT[16 * w + 8 * gb + (lane & 7)];
#pragma unroll
                for (int kc = 0; kc < G::CPR; kc += 4) {
                    uint32_t r[4];
                    ldsm_x4(r, rk + (tu ^ (uint32_t)((kc + (lane >> 3)) << 4)));
                    mma16816_acc<BF>(ga[gb], qf[kc / 2], r[0], r[1]);
                    mma16816_acc<BF>(ga[gb], qf[kc / 2 + 1], r[2], r[3]);
                }
            }
#pragma unroll
            for (int gb = 0; gb < G::NG / 8; gb++) {
                *(float2 *)(scw + g * G::PC + 8 * gb + 2 * c) = make_float2(ga[gb][0], ga[gb][1]);
                *(float2 *)(scw + (g + 8) * G::PC + 8 * gb + 2 * c) = make_float2(ga[gb][2], ga[gb][3]);
            }
            __syncwarp();
            const float *rd = scw + g * G::PC + g - 2 * c + BN - 1;
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
                s[nb][0] = rd[-8 * nb];
                s[nb][1] = rd[-8 * nb - 1];
                s[nb][2] = rd[8 * G::PC + 8 - 8 * nb];
                s[nb][3] = rd[8 * G::PC + 7 - 8 * nb];
            }
        } else if (cls != DATTN_CLS_BAND && cls != DATTN_CLS_PLAIN && a.p2c) {
            /* saturated: p2c is k_j . pq[sat], a per-column constant */
            const float *sps = (const float *)(base + 2 * BN * G::RB + G::NT * 4);
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
                const float2 x = *(const float2 *)(sps + 8 * nb + 2 * c);
                s[nb][0] = x.x;
                s[nb][1] = x.y;
                s[nb][2] = x.x;
                s[nb][3] = x.y;
            }
        } else {
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
        }

        if (cls == DATTN_CLS_BAND && a.p2c) {
            /* H_sb = K_sub . pq[window]^T, stored skewed: p2c(i, 16 sb + jl) = H[jl][i - jl + 15]. */
            const int sb = w / G::PARTS, part = w % G::PARTS;
            uint32_t ka[G::KS][4];
#pragma unroll
            for (int ks = 0; ks < G::KS; ks++)
                ldsm_x4(ka[ks], sK + swz<D>(16 * sb + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * ks + (lane >> 4)));
            const int u0 = BN - 16 * (sb + 1);
#pragma unroll
            for (int hl = 0; hl < G::NBP; hl++) {
                const int hb = part * G::NBP + hl;
                if (hb < G::NBH) {
                    float ha[4] = {0.f, 0.f, 0.f, 0.f};
                    const uint32_t tu = (uint32_t)sT[u0 + 8 * hb + (lane & 7)];
#pragma unroll
                    for (int kc = 0; kc < G::CPR; kc += 4) {
                        uint32_t r[4];
                        ldsm_x4(r, rq + (tu ^ (uint32_t)((kc + (lane >> 3)) << 4)));
                        mma16816_acc<BF>(ha, ka[kc / 2], r[0], r[1]);
                        mma16816_acc<BF>(ha, ka[kc / 2 + 1], r[2], r[3]);
                    }
                    const int ii = 8 * hb + 2 * c + g - 15, jj = 16 * sb + g;
                    if ((unsigned)ii < (unsigned)G::BM) spb[ii * G::PP + jj] = ha[0];
                    if ((unsigned)(ii + 1) < (unsigned)G::BM) spb[(ii + 1) * G::PP + jj] = ha[1];
                    if ((unsigned)(ii + 8) < (unsigned)G::BM) spb[(ii + 8) * G::PP + jj + 8] = ha[2];
                    if ((unsigned)(ii + 9) < (unsigned)G::BM) spb[(ii + 9) * G::PP + jj + 8] = ha[3];
                }
            }
        }

        /* S += Q K^T */
#pragma unroll
        for (int kc = 0; kc < G::CPR; kc += 4) {
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
                uint32_t r[4];
                ldsm_x4(r, sK + swz<D>(8 * nb + (lane & 7), kc + (lane >> 3)));
                mma16816_acc<BF>(s[nb], qf[kc / 2], r[0], r[1]);
                mma16816_acc<BF>(s[nb], qf[kc / 2 + 1], r[2], r[3]);
            }
        }

        if (cls == DATTN_CLS_BAND && a.p2c) {
            __syncthreads();
            const float *rp = spb + (16 * w + g) * G::PP + 2 * c;
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
                const float2 x = *(const float2 *)(rp + 8 * nb);
                const float2 y = *(const float2 *)(rp + 8 * G::PP + 8 * nb);
                s[nb][0] += x.x;
                s[nb][1] += x.y;
                s[nb][2] += y.x;
                s[nb][3] += y.y;
            }
        }

        /* key validity: padding mask and the end of the sequence */
        uint64_t vbits;
        if (t.mrow) {
            const uint32_t lo = __ballot_sync(0xffffffffu, mk0 != 0);
            const uint32_t hi = __ballot_sync(0xffffffffu, mk1 != 0);
            vbits = (uint64_t)lo | ((uint64_t)hi << 32);
        } else {
            const int lim = len - n0;
            vbits = lim >= 64 ? ~0ull : ((1ull << lim) - 1ull);
        }
        const uint64_t full_mask = ~0ull >> (64 - BN);
        if ((vbits & full_mask) != full_mask) {
            const uint64_t vs = vbits >> (2 * c);
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (!((vs >> (8 * nb + (e & 1))) & 1ull)) s[nb][e] = neg_inf();
            }
        }

        /* online softmax (log2 domain) */
        float radd[2] = {0.f, 0.f};
        if (a.c2p && cls == DATTN_CLS_SATP) {
            radd[0] = csp[0] * sl2;
            radd[1] = csp[1] * sl2;
        } else if (a.c2p && cls == DATTN_CLS_SATN) {
            radd[0] = csn[0] * sl2;
            radd[1] = csn[1] * sl2;
        }
        float mx[2] = {neg_inf(), neg_inf()};
#pragma unroll
        for (int nb = 0; nb < G::NB; nb++) {
            mx[0] = fmaxf(mx[0], fmaxf(s[nb][0], s[nb][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[nb][2], s[nb][3]));
        }
        float bias[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float mnew = fmaxf(mrun[r], fmaf(mx[r], sl2, radd[r]));
            const float muse = mnew == neg_inf() ? 0.f : mnew;
            const float alpha = ex2f(mrun[r] - muse);
            mrun[r] = mnew;
            bias[r] = radd[r] - muse;
            lrun[r] *= alpha;
#pragma unroll
            for (int db = 0; db < G::DB; db++) {
                o[db][2 * r] *= alpha;
                o[db][2 * r + 1] *= alpha;
            }
        }
#pragma unroll
        for (int nb = 0; nb < G::NB; nb++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[nb][e] = ex2f(fmaf(s[nb][e], sl2, bias[e >> 1]));
                lrun[e >> 1] += s[nb][e];
            }
        }

        /* O += P V */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t pa[4];
            pa[0] = pack2<BF>(s[2 * kk][0], s[2 * kk][1]);
            pa[1] = pack2<BF>(s[2 * kk][2], s[2 * kk][3]);
            pa[2] = pack2<BF>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pa[3] = pack2<BF>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int dp = 0; dp < G::DB; dp += 2) {
                uint32_t r[4];
                ldsm_x4_trans(r, sV + swz<D>(16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8, dp + (lane >> 4)));
                mma16816_acc<BF>(o[dp], pa, r[0], r[1]);
                mma16816_acc<BF>(o[dp + 1], pa, r[2], r[3]);
            }
        }
    }

    /* epilogue: normalize, padded rows, stage through shared memory, 16-byte stores */
    float lse_r[2];
    int pad_r[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        lrun[r] += __shfl_xor_sync(0xffffffffu, lrun[r], 1);
        lrun[r] += __shfl_xor_sync(0xffffffffu, lrun[r], 2);
        const int i = m0 + 16 * w + g + 8 * r;
        pad_r[r] = i < len && t.mrow && t.mrow[(int64_t)i * a.m_sl] == 0;
        const float inv = lrun[r] > 0.f ? 1.f / lrun[r] : 0.f;
#pragma unroll
        for (int db = 0; db < G::DB; db++) {
            o[db][2 * r] *= inv;
            o[db][2 * r + 1] *= inv;
        }
        lse_r[r] = pad_r[r] ? (a.hf ? a.logL : neg_inf()) : (mrun[r] + lg2f(lrun[r])) * 0.69314718055994531f;
    }
    const float *vm = (a.hf && a.vmean) ? a.vmean + ((int64_t)b * a.H + h) * D : (const float *)0;
    __syncwarp();
#pragma unroll
    for (int db = 0; db < G::DB; db++) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float x0 = o[db][2 * r], x1 = o[db][2 * r + 1];
            if (pad_r[r]) {
                x0 = vm ? vm[8 * db + 2 * c] : 0.f;
                x1 = vm ? vm[8 * db + 2 * c + 1] : 0.f;
            }
            *(uint32_t *)(smem + G::OFF_Q + swz<D>(16 * w + g + 8 * r, db) + 4 * c) = pack2<BF>(x0, x1);
        }
    }
    __syncwarp();
    uint16_t *ob = (uint16_t *)a.out + (int64_t)b * a.o_sb + (int64_t)tok0 * a.o_sl + (int64_t)h * a.o_sh;
#pragma unroll
    for (int it = 0; it < 16 * G::CPR / 32; it++) {
        const int idx = lane + 32 * it, row = idx / G::CPR, ch = idx % G::CPR;
        const int i = m0 + 16 * w + row;
        if (i < len)
            *(uint4 *)(ob + (int64_t)i * a.o_sl + ch * 8) =
                *(const uint4 *)(smem + G::OFF_Q + swz<D>(16 * w + row, ch));
    }
    if (a.lse && c == 0) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int i = m0 + 16 * w + g + 8 * r;
            if (i < len)
                a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + i) * a.l_sl] = lse_r[r];
        }
    }
}

#endif

/* Warp-specialized Hopper forward ("ws", issue 6): head dim 64, fp16 / bf16, sm_90a only, the
 * padded layout (any mask, either padded-row mode: the *_mask kernels) or the packed one (the
 * *_packed kernels), without dropout, c2p and p2c both on or both off (launch.cu routes every
 * other call to the wgmma forward of fwd_sm80.cuh). The structure was measured
 * as bench/proto_ws_fwd.cu first (NOTES.md, "A warp-specialized forward core"); the position
 * terms are the ws backward's dq kernel's (bwd_ws_d64_sm90.cu, whose score is this score), with
 * the window products and gathers of ws_band.cuh.
 *
 *   O = softmax(s) V, lse = log sum_j exp(s_ij), s_ij = (q_i . k_j + q_i . pk[slot(i - j)] +
 *   k_j . pq[slot(i - j)]) / scale (SPEC.md)
 *
 * One CTA per 128 query rows of one (sequence, head), 384 threads (setmaxnreg 40 / 232, the
 * mask and KC kernels 56 / 224, PS 64 / 216; PS: persistent CTAs, one per SM, over those units):
 *   warpgroup 0, the producer: lane 0 of its warp 0 loads Q once and the K / V tiles of 64 keys
 *     into FWS_NST stages by TMA (64-row boxes, 128-byte swizzle; rows past L arrive as zeros);
 *     with position terms its 128 threads also stage, per tile, the ring blocks of pk and pq
 *     rows the band tiles read (ld.global -> st.shared -> fence.proxy.async; block a holds the
 *     table rows of r = m0 - 64 a + t + 65, t = 0..63, in ring slot a % FWS_NR) and warp 0 the
 *     tile's saturated column constants (the kps planes of the prologue: k_j . pq[sat_neg],
 *     k_j . pq[sat_pos]). Stage barriers: full (lane 0's expect-tx arrival, with position terms
 *     the producer's 128 arrivals), empty (the 256 consumer threads' arrivals).
 *   warpgroups 1, 2, the consumers (64 rows each): per tile S = Q K^T by wgmma (m64n64k16 x 4),
 *     plus per zone of the warpgroup's rows: plain (no position terms), saturated (every pair at
 *     r <= -R or r >= R: a row constant q_i . pk[sat], computed once from Q and entering the
 *     softmax's per-row offset, plus the column constant), band (the window products G = Q . pk ring and H = K . pq ring, gathered into
 *     the tile through the shared fp32 tile D); the online softmax in registers; O += P V with
 *     P as the register A operand. Per tile j: softmax of s_j -> wait for P V_{j-1} (release its
 *     stage) -> rescale O -> issue s_{j+1}'s products, then P_j V_j -> wait for the products
 *     (a plain or saturated tile j + 1: P_j V_j stays in flight through its softmax; a band
 *     tile: its H product is committed after P_j V_j, so both are waited for). The last tile is
 *     peeled (commit groups under a branch made ptxas serialize the wgmma: NOTES).
 * The stage count FWS_NST and the ring's FWS_NR = FWS_NST + 2 blocks go together: tile j's fill
 * (after the empty wait for tile j - FWS_NST) writes block j + 2 over block j + 2 - FWS_NR, last
 * read by tile j - FWS_NST. */
#include "common.cuh"
#include "sm90.cuh"
#include "tma.cuh"
#include "ws_band.cuh"

#include <cuda_runtime.h>

#define FWS_NST 4             /* K / V stages (the prototype: 4 beat 3 by 1-3 %, 2 was 30-45 % slower) */
#define FWS_NR (FWS_NST + 2)  /* ring blocks per table */

typedef struct dattn_fws_maps {
    CUtensorMap q, k, v;
    CUtensorMap pe, qe;         /* (TE kernels) the expanded tables of pk and pq (common.cuh) */
    int32_t qrf, krf, vrf, erf; /* rows-first flags (tma.cuh) */
    int32_t eoff;               /* (TE) E's row of r = 0 */
} dattn_fws_maps;

/* Shared memory (offsets from a 1024-byte-aligned base): Q [128][64]; K, V [FWS_NST][64][64];
 * the rings RR (pk rows), RC (pq rows) [FWS_NR][64][64] (16-bit, 128-byte swizzled: sm90.cuh's
 * layout); D per consumer warpgroup [64][WS_DP] fp32; CF [FWS_NST][2 sides][64] fp32 column
 * constants (side 0: k . pq[sat_neg], side 1: k . pq[sat_pos]); the barriers (Q's, full and
 * empty per stage); MK (mask kernels) [FWS_NST] x 64 key biases (0 valid, -inf masked or past L)
 * and word 64 a flag (nonzero: some key of the tile has -inf). */
enum {
    FWS_Q = 0,
    FWS_K = 16384,
    FWS_V = FWS_K + 8192 * FWS_NST,
    FWS_RR = FWS_V + 8192 * FWS_NST,
    FWS_RC = FWS_RR + 8192 * FWS_NR,
    FWS_D = FWS_RC + 8192 * FWS_NR,
    FWS_CF = FWS_D + 2 * 64 * WS_DP * 4,
    FWS_BAR = FWS_CF + 512 * FWS_NST,
    FWS_MK = FWS_BAR + 128, /* (mask kernels) [FWS_NST][64 + 4] fp32 key biases (0 / -inf) and a tile flag */
    FWS_SMEM = FWS_MK + 512 * FWS_NST + 1024,
    /* (KC kernels) the column constants' B operand: one K-major [64 keys][64] bf16 tile whose k16
     * slice s is stage s's (k 16 s: hi, 16 s + 1: lo, the rest zeros) */
    FWS_KC = (FWS_MK + 512 * FWS_NST + 1023) / 1024 * 1024,
    FWS_SMEM_KC = FWS_KC + 8192 + 1024
};

/* One tile's online softmax for a consumer thread (rows g, g + 8 of its warp's 16, columns 8 nb
 * + 2 c (+ 1)): with u = sa (the score without a saturated tile's row constant) and ro the rows'
 * constant in log2 units (0 off a saturated tile), the rows' new max mx = max(mx, max_j u sl2 +
 * ro) (over the quad by shuffles), P = exp2(u sl2 + ro - mx) as wgmma A operands pf, the running
 * sums ls (the thread's own columns; the quad's are added at the end); then, once the previous
 * tile's P V is done (the wait: o is its accumulator, pf its operand), O rescaled by exp2(old max
 * - new max). MSK: rows may have no valid key yet (mx = -inf). */
template <int BF, int MSK>
DATTN_DEV void fws_softmax(float (&sa)[8][4], float (&o)[8][4], uint32_t (&pf)[4][4], float (&mx)[2], float (&ls)[2],
                           const float (&ro)[2], float sl2)
{
    float alpha[2];
    for (int i = 0; i < 2; i++) {
        float t = fmaxf(sa[0][2 * i], sa[0][2 * i + 1]);
        for (int nb = 1; nb < 8; nb++) t = fmaxf(t, fmaxf(sa[nb][2 * i], sa[nb][2 * i + 1]));
        float m = fmaxf(mx[i], fmaf(t, sl2, ro[i]));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        /* (mask kernels: a row whose keys so far are all masked keeps mx = -inf; its exponents
         * then use 0, so that alpha and P are 0, not NaN) */
        const float mu = MSK && m == __int_as_float(0xff800000) ? 0.f : m;
        alpha[i] = ex2f(mx[i] - mu);
        mx[i] = m;
        const float off = ro[i] - mu;
        float sum = 0.f;
        for (int nb = 0; nb < 8; nb++)
            for (int e = 0; e < 2; e++) {
                const float p = ex2f(fmaf(sa[nb][2 * i + e], sl2, off));
                sa[nb][2 * i + e] = p;
                sum += p;
            }
        ls[i] = ls[i] * alpha[i] + sum;
    }
    wgmma_wait<0>();
    reg_fence(o);
    for (int nb = 0; nb < 8; nb++) {
        o[nb][0] *= alpha[0];
        o[nb][1] *= alpha[0];
        o[nb][2] *= alpha[1];
        o[nb][3] *= alpha[1];
        pf[nb >> 1][2 * (nb & 1)] = pack2<BF>(sa[nb][0], sa[nb][1]);
        pf[nb >> 1][2 * (nb & 1) + 1] = pack2<BF>(sa[nb][2], sa[nb][3]);
    }
}

/* What a consumer warpgroup's score step reads: its descriptors (sm90.cuh: Q's rows K-major, K
 * stage 0 K-major, V stage 0 MN-major, the rings' slot 0 K-major), D, its rows' saturated
 * constants rc[side][row] and its first row rb0 */
struct fws_ctx {
    uint64_t dQ, dK0, dV0, dRR, dRC;
    float *dg;
    const char *cf0; /* CF, stage 0 */
    const char *mk0; /* MK, stage 0 (mask kernels) */
    uint64_t dKC;    /* (KC kernels) the constants' tile, K-major */
    uint32_t ones[4]; /* (KC kernels) the A operand of ones: k 0, 1 of every row (bf16) */
    float rc[2][2]; /* the rows' saturated constants times sl2 (log2 units) */
    int rb0, cw, rl0, c, L, R, j0;
    int rb; /* (PS) the unit's first ring block (the ring's blocks count on across units) */
};

/* s of tile jn (stage s1) into sn: S = Q K^T and the zone's position terms, a saturated tile's
 * row constants apart (ro: times sl2, for fws_softmax; 0 on other tiles); PV: with P_j V_j
 * (stage sv) issued after the score products (o its accumulator, pf its operand), in flight
 * at the return unless tile jn is a band tile. Columns past L (MSK: and masked keys) get -inf. */
template <int BF, int POS, int MSK, int KC, int GR, int PS, int PV>
DATTN_DEV void fws_score(float (&sn)[8][4], float (&ro)[2], float (&o)[8][4], const uint32_t (&pf)[4][4], float (&gk)[8][4],
                         const fws_ctx &x, int jn, int s1, int sv)
{
    ro[0] = ro[1] = 0.f;
    const int n0 = 64 * jn;
    const uint64_t dK = desc_add(x.dK0, 8192u * s1), dV = desc_add(x.dV0, 8192u * sv);
    const int rmin = x.rb0 - (n0 + 63), rmax = x.rb0 + 63 - n0;
    const int zone = !POS ? 0 : rmin >= x.R ? 2 : rmax <= -x.R ? 1 : 3; /* 3: band */
    if (POS && zone == 3) {
        /* ring blocks of the window's columns u = 0..63 / 64..127 (u = row - column + 63) */
        const int rb = PS ? x.rb : 0;
        const uint32_t ra0 = 8192u * (uint32_t)((rb + jn + 2 - x.cw) % FWS_NR), ra1 = 8192u * (uint32_t)((rb + jn + 1 - x.cw) % FWS_NR);
        const uint64_t dR0 = desc_add(x.dRR, ra0), dR1 = desc_add(x.dRR, ra1), dC0 = desc_add(x.dRC, ra0),
                       dC1 = desc_add(x.dRC, ra1);
        float gw[2][8][4];
        const int rl0 = ws_opaque(x.rl0), c = ws_opaque(x.c);
        /* (GR: the window's second half, ring block jn + 1 - cw, was the previous tile's first
         * half when that tile was a band tile too: its G kept in gk, not computed again) */
        if (GR && !(jn > x.j0 && rmin + 64 < x.R)) {
            /* (the warpgroup's first band tile: that half's G by itself, a group of its own;
             * nothing else is in flight here) */
            wgmma_fence();
            for (int ks = 0; ks < 4; ks++) wgmma_ss<64, BF, 0, 0>(gk, desc_add(x.dQ, 32 * ks), desc_add(dR1, 32 * ks), ks > 0);
            wgmma_commit();
            wgmma_wait<0>();
            reg_fence(gk);
        }
        __syncwarp(); /* the lanes' reads of D (the last band tile's second ws_add_d) before G's stores */
        wgmma_fence();
        for (int ks = 0; ks < 4; ks++) wgmma_ss<64, BF, 0, 0>(sn, desc_add(x.dQ, 32 * ks), desc_add(dK, 32 * ks), ks > 0);
        if (GR) {
            for (int ks = 0; ks < 4; ks++) wgmma_ss<64, BF, 0, 0>(gw[0], desc_add(x.dQ, 32 * ks), desc_add(dR0, 32 * ks), ks > 0);
        } else {
            ws_window_products<BF>(gw, x.dQ, dR0, dR1);
        }
        wgmma_commit();
        if (PV) {
            for (int kk = 0; kk < 4; kk++) wgmma_rs<64, BF, 1>(o, pf[kk], desc_add(dV, 2048 * kk), 1);
            wgmma_commit();
            wgmma_wait<1>();
        } else {
            wgmma_wait<0>();
        }
        reg_fence(sn);
        reg_fence(gw[0]);
        reg_fence(gw[1]);
        ws_gather_g2(x.dg, gw[0], GR ? gk : gw[1], rl0, c);
        if (GR)
            for (int nb = 0; nb < 8; nb++)
                for (int e = 0; e < 4; e++) gk[nb][e] = gw[0][nb][e];
        __syncwarp();
        wgmma_fence();
        ws_window_products<BF>(gw, dK, dC0, dC1);
        wgmma_commit();
        ws_add_d(sn, x.dg, rl0, c);
        wgmma_wait<0>();
        reg_fence(gw[0]);
        reg_fence(gw[1]);
        if (PV) reg_fence(o);
        bar_sync_named(1 + x.cw, 128); /* every warp's G reads done */
        ws_gather_h<0>(x.dg, gw, rl0, c);
        bar_sync_named(1 + x.cw, 128);
        ws_add_d(sn, x.dg, rl0, c);
    } else {
        wgmma_fence();
        /* (KC: with position terms every tile off the band is saturated; its column constants
         * as one bf16 k16 step, ones x the stage's (hi, lo) pairs, first: the ones' registers
         * then need no fence of their own between the steps) */
        if (POS && KC) wgmma_rs<64, 1, 0>(sn, x.ones, desc_add(x.dKC, 32 * s1), 0);
        for (int ks = 0; ks < 4; ks++)
            wgmma_ss<64, BF, 0, 0>(sn, desc_add(x.dQ, 32 * ks), desc_add(dK, 32 * ks), (POS && KC) || ks > 0);
        wgmma_commit();
        if (PV) {
            for (int kk = 0; kk < 4; kk++) wgmma_rs<64, BF, 1>(o, pf[kk], desc_add(dV, 2048 * kk), 1);
            wgmma_commit();
            wgmma_wait<1>();
        } else {
            wgmma_wait<0>();
        }
        reg_fence(sn);
        if (POS && (zone == 1 || zone == 2)) {
            /* the column constants here (KC: in the product above), the row constants (x.rc:
             * already times sl2) in the softmax */
            const float *cf = (const float *)(x.cf0 + 512 * s1) + 64 * (zone - 1);
            ro[0] = zone == 1 ? x.rc[0][0] : x.rc[1][0];
            ro[1] = zone == 1 ? x.rc[0][1] : x.rc[1][1];
            for (int nb = 0; nb < 8 && !KC; nb++) {
                const float2 cv = *(const float2 *)(cf + 8 * nb + 2 * x.c);
                sn[nb][0] += cv.x;
                sn[nb][1] += cv.y;
                sn[nb][2] += cv.x;
                sn[nb][3] += cv.y;
            }
        }
    }
    if (MSK) {
        /* the producer's key biases (past L included), when the tile has a -inf one */
        const float *mk = (const float *)(x.mk0 + 512 * s1);
        if (((const int *)mk)[64])
            for (int nb = 0; nb < 8; nb++) {
                const float2 kb = *(const float2 *)(mk + 8 * nb + 2 * x.c);
                sn[nb][0] += kb.x;
                sn[nb][1] += kb.y;
                sn[nb][2] += kb.x;
                sn[nb][3] += kb.y;
            }
    } else if (n0 + 64 > x.L) {
        for (int nb = 0; nb < 8; nb++)
            for (int e = 0; e < 4; e++)
                if (n0 + 8 * nb + 2 * x.c + (e & 1) >= x.L) sn[nb][e] = __int_as_float(0xff800000);
    }
}

/* A CTA's unit: rows m0 .. m0 + 127 of head h of sequence b (PS: unit un, mb fastest; else the
 * CTA's own), key tiles j0 .. j1 - 1 (mask kernels: those holding the sequence's valid keys,
 * from the prologue's key range; none valid: tile 0 alone, whose rows are all padded); PK
 * (packed): the sequence's length into L, its first token into tok0 (else L stays the call's,
 * tok0 0) */
template <int MSK, int PS, int PK>
DATTN_DEV void fws_unit(const dattn_fwd_args &a, int un, int nmb, int &m0, int &h, int &b, int &j0, int &j1, int &L, int &tok0)
{
    m0 = 128 * (PS ? un % nmb : (int)blockIdx.x);
    h = PS ? (un / nmb) % a.H : (int)blockIdx.y;
    b = PS ? un / (nmb * a.H) : (int)blockIdx.z;
    if (PK) {
        /* (packed: the sequence's first token and length; L of the call is the longest) */
        tok0 = a.cu[b];
        L = a.cu[b + 1] - tok0;
    }
    j0 = 0;
    j1 = (L + 63) / 64;
    if (MSK && a.kvr) {
        j0 = a.kvr[2 * b] / 64;
        j1 = (a.kvr[2 * b + 1] + 63) / 64;
        if (j1 <= j0) j0 = 0, j1 = 1;
    }
}

template <int BF, int POS, int MSK, int KC, int GR, int PS, int PK, int TE>
DATTN_DEV void fws_body(const dattn_fwd_args &a, const dattn_fws_maps &M)
{
    extern __shared__ __align__(1024) char smem_raw[];
    const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
    char *smem = smem_raw + (base - raw);
    const uint32_t qbar = base + FWS_BAR, full0 = qbar + 8, empty0 = full0 + 8 * FWS_NST, qempty = empty0 + 8 * FWS_NST;
    /* (wg through a shuffle: warp-uniform to the compiler, descriptors in uniform registers) */
    const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), warp = (tid >> 5) & 3, lane = tid & 31;
    int L = a.L, tok0 = 0;
    const int R = POS ? a.R : 0;
    /* the unit (fws_unit; PS: the CTA runs units un = blockIdx.x, + gridDim.x, ... of nun, and
     * the stages count on across them (tg0: the unit's first tile), the ring blocks too, two
     * more per unit (rb: see the producer); uc: units done by the CTA); stages and parities
     * count from j0 */
    const int nmb = (a.L + 127) / 128, nun = PS ? nmb * a.H * a.B : 1;
    int un = PS ? (int)blockIdx.x : 0, m0, h, b, j0, j1;
    fws_unit<MSK, PS, PK>(a, un, nmb, m0, h, b, j0, j1, L, tok0);
    /* (packed: the grid's row blocks run to the longest sequence; the CTA's whole block past
     * this one's length has nothing to do) */
    if (PK && m0 >= L) return;
    int nj = j1 - j0, tg0 = 0, uc = 0;
    if (tid == 0) {
        mbar_init(qbar, 1);
        for (int s = 0; s < FWS_NST; s++) {
            mbar_init(full0 + 8 * s, POS && !TE ? 128 : POS || MSK ? 32 : 1);
            mbar_init(empty0 + 8 * s, 256);
        }
        if (PS) mbar_init(qempty, 256);
        mbar_init_fence();
    }
    __syncthreads();
    /* the register split: more for the producer of the mask kernels (the keys' biases), KC (the
     * pairs) and PS (the units: 56 spills), fewer for the consumers. setmaxnreg.inc waits until
     * the CTA's pool (384 threads x 168, the launch allocation) holds what it asks for, so a
     * split over the pool hangs the consumers at their first instruction: wsp's first split,
     * 64 / 224, was 1024 registers over, and it hung on the H200 (gpu-2026-12-02-wsvar) */
    constexpr int NREG_P = PS ? 64 : MSK || KC ? 56 : 40, NREG_C = PS ? 216 : MSK || KC ? 224 : 232;
    static_assert(128 * NREG_P + 256 * NREG_C <= 384 * 168, "fws: the register split exceeds the CTA's pool");
    /* the ring rows a producer thread has in flight (of its 4 per block and table): all 4 in the
     * KC kernels (56 registers), 2 elsewhere (4 spill in the 56-register MSK and 64-register PS
     * producers, whose other state is larger) */
    constexpr int FWS_RPI = KC ? 4 : 2;
    if (wg == 0) {
        setmaxnreg_dec<NREG_P>();
        /* (without position terms warp 0 alone: lane 0 the copies, with a mask its 32 lanes the
         * biases; TE: warp 0 too, the ring blocks coming by TMA; idle warps polling the barriers
         * would take issue slots from the consumers) */
        if ((!POS || TE) && warp != 0) return;
        const int one = warp == 0 && lane == 0;
        int rb = 0;
        for (;;) {
            if (warp == 0) {
                /* (PS: Q's buffer once both consumer warpgroups' last score products of the CTA's
                 * previous unit are done) */
                if (PS && uc > 0) mbar_wait(qempty, (uint32_t)(uc - 1) & 1u);
                mbar_arrive_expect_tx_if(one, qbar, 2 * 64 * 128);
                for (int half = 0; half < 2; half++)
                    tma_load_rows_if(one, base + FWS_Q + 8192 * half, &M.q, qbar, M.qrf, h, tok0 + m0 + 64 * half, PK ? 0 : b);
            }
            const uint16_t *tpk = (const uint16_t *)a.pk + (int64_t)h * a.pk_sh, *tpq = (const uint16_t *)a.pq + (int64_t)h * a.pq_sh;
            /* (the kps planes exist when some tile may be saturated: R < L) */
            const float *kp = !POS || !a.kps ? nullptr
                              : PK ? a.kps + (int64_t)h * 2 * a.kps_ld + tok0
                                   : a.kps + ((int64_t)b * a.H + h) * 2 * a.kps_ld;
            for (int j = j0; j < j1; j++) {
                const int t = tg0 + j - j0, s = t % FWS_NST;
                if (t >= FWS_NST) mbar_wait(empty0 + 8 * s, (uint32_t)(t / FWS_NST - 1) & 1u);
                if ((POS || MSK) && warp == 0) {
                    /* (position terms, masks: the copies first, so that they fly while the constants,
                     * key biases and ring rows load; every producer thread arrives after its stores) */
                    mbar_expect_tx_if(one, full0 + 8 * s, 2 * 64 * 128);
                    tma_load_rows_if(one, base + FWS_K + 8192 * s, &M.k, full0 + 8 * s, M.krf, h, tok0 + 64 * j, PK ? 0 : b);
                    tma_load_rows_if(one, base + FWS_V + 8192 * s, &M.v, full0 + 8 * s, M.vrf, h, tok0 + 64 * j, PK ? 0 : b);
                }
                if (POS && KC) {
                    /* (KC) the tile's (hi, lo) pairs of its saturated side (at most one side per tile:
                     * warpgroup 1's rows have the larger r) into slice s of the constants' tile, row
                     * = key, k 16 s (+ 1): lane l keys 2 l, 2 l + 1 (0 past L) */
                    if (t == 0) {
                        const uint4 zero = {0u, 0u, 0u, 0u};
                        for (int i = tid; i < 512; i += TE ? 32 : 128) *(uint4 *)(smem + FWS_KC + 16 * i) = zero;
                        bar_sync_named(3, TE ? 32 : 128); /* (the producer's threads: the zeros before warp 0's pairs) */
                    }
                    const int n0 = 64 * j, pos = m0 + 64 - (n0 + 63) >= R, neg = m0 + 63 - n0 <= -R;
                    if (warp == 0 && kp && (pos || neg))
                        for (int e = 0; e < 2; e++) {
                            const int key = 2 * lane + e, col = n0 + key;
                            const uint32_t w = col < L ? ((const uint32_t *)kp)[(neg ? a.kps_ld : 0) + col] : 0u;
                            *(uint32_t *)(smem + FWS_KC + key * 128 + (((2 * s) ^ (key & 7)) << 4)) = w;
                        }
                }
                if (POS) {
                    if (!KC && warp == 0 && kp) {
                        float *cf = (float *)(smem + FWS_CF + 512 * s);
                        for (int e = 0; e < 2; e++) {
                            const int col = 64 * j + 2 * lane + e, ok = col < L;
                            cf[2 * lane + e] = ok ? kp[a.kps_ld + col] : 0.f; /* side 0: sat_neg */
                            cf[64 + 2 * lane + e] = ok ? kp[col] : 0.f;       /* side 1: sat_pos */
                        }
                    }
                    /* (PS, a unit after the CTA's first: the ring's blocks rb + 0 .. 2 are the previous
                     * unit's blocks nj - 4 .. nj - 2 (modulo FWS_NR), last read by its tile nj - 2,
                     * blocks rb + 3 .. 5 its blocks nj - 1 .. nj + 1, read by its last tile nj - 1
                     * (global tile tg0 - 1); the stage waits above cover tiles up to t - FWS_NST only) */
                    if (PS && uc > 0 && j - j0 < 3) {
                        const int tw = tg0 - (j == j0 ? 2 : 1);
                        if (tw >= 0) mbar_wait(empty0 + 8 * (tw % FWS_NST), (uint32_t)(tw / FWS_NST) & 1u);
                    }
                    /* the ring blocks first needed by tile j (blocks j0 .. j0 + 2 at the first tile, then
                     * block j + 2), each only if a tile a - 2 .. a that reads it is a band tile */
                    for (int ab = j == j0 ? j : j + 2; ab <= j + 2; ab++) {
                        int need = 0;
                        for (int jj = ab - 2; jj <= ab; jj++) need |= jj >= j0 && jj < j1 && ws_is_band<0>(m0, 128, 64 * jj, R);
                        if (!need) continue;
                        if constexpr (TE) {
                            /* (TE) the block's 64 rows r = m0 - 64 ab + 65 .. + 128 of both expanded
                             * tables, two bulk copies on the stage's full barrier */
                            if (warp == 0) {
                                const uint32_t o = 8192u * (uint32_t)((rb + ab) % FWS_NR);
                                const int row = m0 - 64 * ab + 65 + M.eoff;
                                mbar_expect_tx_if(one, full0 + 8 * s, 2 * 8192);
                                tma_load_rows_if(one, base + FWS_RR + o, &M.pe, full0 + 8 * s, M.erf, h, row, 0);
                                tma_load_rows_if(one, base + FWS_RC + o, &M.qe, full0 + 8 * s, M.erf, h, row, 0);
                            }
                            continue;
                        }
                        const int ch = tid & 7;
#pragma unroll 1
                        for (int i = 0; i < 4; i += FWS_RPI) { /* (FWS_RPI rows' loads in flight) */
                            uint4 vr[FWS_RPI], vc[FWS_RPI];
#pragma unroll
                            for (int k = 0; k < FWS_RPI; k++) {
                                const int sl = dev_slot(a, a.tab, m0 - 64 * ab + (tid >> 3) + 16 * (i + k) + 65);
                                vr[k] = *(const uint4 *)(tpk + sl * a.pk_ss + 8 * ch);
                                vc[k] = *(const uint4 *)(tpq + sl * a.pq_ss + 8 * ch);
                            }
#pragma unroll
                            for (int k = 0; k < FWS_RPI; k++) {
                                const int tr = (tid >> 3) + 16 * (i + k);
                                const uint32_t o = 8192u * (uint32_t)((rb + ab) % FWS_NR) + (uint32_t)(tr * 128 + ((ch ^ (tr & 7)) << 4));
                                *(uint4 *)(smem + FWS_RR + o) = vr[k];
                                *(uint4 *)(smem + FWS_RC + o) = vc[k];
                            }
                        }
                    }
                    fence_proxy_async(); /* (the ring rows are read by wgmma: the async proxy) */
                }
                if (MSK && warp == 0) {
                    /* the tile's key biases: lane l takes keys 2 l, 2 l + 1 (-inf masked or past L) */
                    float *mk = (float *)(smem + FWS_MK + 512 * s);
                    int bad = 0;
                    for (int e = 0; e < 2; e++) {
                        const int col = 64 * j + 2 * lane + e;
                        const int ok = col < L && a.mask[(int64_t)b * a.m_sb + (int64_t)col * a.m_sl] != 0;
                        bad |= !ok;
                        mk[2 * lane + e] = ok ? 0.f : __int_as_float(0xff800000);
                    }
                    bad = __any_sync(0xffffffffu, bad);
                    if (lane == 0) ((int *)mk)[64] = bad;
                }
                if (POS || MSK) {
                    mbar_arrive(full0 + 8 * s);
                } else {
                    mbar_arrive_expect_tx_if(one, full0 + 8 * s, 2 * 64 * 128);
                    tma_load_rows_if(one, base + FWS_K + 8192 * s, &M.k, full0 + 8 * s, M.krf, h, tok0 + 64 * j, PK ? 0 : b);
                    tma_load_rows_if(one, base + FWS_V + 8192 * s, &M.v, full0 + 8 * s, M.vrf, h, tok0 + 64 * j, PK ? 0 : b);
                }
            }
            if (!PS) break;
            tg0 += nj;
            rb += nj + 2;
            uc++;
            if ((un += (int)gridDim.x) >= nun) break;
            fws_unit<MSK, PS, PK>(a, un, nmb, m0, h, b, j0, j1, L, tok0);
            nj = j1 - j0;
        }
        return;
    }
    setmaxnreg_inc<NREG_C>();
    /* consumers: warpgroup cw owns rows m0 + 64 cw .. + 63; thread rows 16 warp + g (+ 8),
     * columns 8 nb + 2 c (+ 1) of a tile */
    fws_ctx x;
    x.cw = wg - 1;
    x.rl0 = 16 * warp + (lane >> 2);
    x.c = lane & 3;
    x.R = R;
    x.rb = 0;
    x.dQ = desc_kmajor(base + FWS_Q, 128, 64 * x.cw, 0);
    x.dK0 = desc_kmajor(base + FWS_K, 64, 0, 0);
    x.dV0 = desc_mnmajor(base + FWS_V, 64, 0);
    x.dRR = desc_kmajor(base + FWS_RR, 64, 0, 0);
    x.dRC = desc_kmajor(base + FWS_RC, 64, 0, 0);
    x.dg = (float *)(smem + FWS_D + 64 * WS_DP * 4 * x.cw);
    x.cf0 = smem + FWS_CF;
    x.mk0 = smem + FWS_MK;
    x.dKC = desc_kmajor(base + FWS_KC, 64, 0, 0);
    {
        const uint32_t one2 = x.c == 0 ? 0x3F803F80u : 0u; /* bf16 1.0, 1.0 at k 0, 1 */
        x.ones[0] = x.ones[1] = one2;
        x.ones[2] = x.ones[3] = 0u;
    }
    for (;;) {
        x.rb0 = m0 + 64 * x.cw;
        x.j0 = j0;
        x.L = L;
        mbar_wait(qbar, (uint32_t)uc & 1u);
        for (int sd = 0; sd < 2; sd++) x.rc[sd][0] = x.rc[sd][1] = 0.f;
        if (POS && R < L) {
            /* the rows' saturated constants q_i . pk[sat_neg] (side 0), q_i . pk[sat_pos] (side 1):
             * lane c of the quad sums d = 16 c .. 16 c + 15, the quad adds the four parts */
            const uint16_t *t0 = (const uint16_t *)a.pk + (int64_t)h * a.pk_sh + (int64_t)a.sat_neg * a.pk_ss,
                           *t1 = (const uint16_t *)a.pk + (int64_t)h * a.pk_sh + (int64_t)a.sat_pos * a.pk_ss;
            for (int i = 0; i < 2; i++) {
                const int row = 64 * x.cw + x.rl0 + 8 * i;
                float s0 = 0.f, s1 = 0.f;
                for (int dd = 0; dd < 16; dd++) {
                    const int d = 16 * x.c + dd;
                    const float q = h2f<BF>(*(const uint16_t *)(smem + FWS_Q + row * 128 + (((d >> 3) ^ (row & 7)) << 4) + (d & 7) * 2));
                    s0 = fmaf(q, h2f<BF>(t0[d]), s0);
                    s1 = fmaf(q, h2f<BF>(t1[d]), s1);
                }
                s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
                s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
                s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
                s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
                x.rc[0][i] = s0 * a.sl2;
                x.rc[1][i] = s1 * a.sl2;
            }
        }
        float o[8][4], sa[8][4];
        for (int nb = 0; nb < 8; nb++) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.f;
        float mx[2] = {__int_as_float(0xff800000), __int_as_float(0xff800000)}, ls[2] = {0.f, 0.f}; /* the rows' running max (log2 units) and sum */
        float ro[2]; /* the current tile's row constants (fws_score) */
        float gk[8][4]; /* (GR) the last band tile's G of its window's first half */
        mbar_wait(full0 + 8 * (tg0 % FWS_NST), (uint32_t)(tg0 / FWS_NST) & 1u);
        {
            const uint32_t pz[4][4] = {{0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}};
            fws_score<BF, POS, MSK, KC, GR, PS, 0>(sa, ro, o, pz, gk, x, j0, tg0 % FWS_NST, 0);
        }
        /* tiles j0 .. j1 - 2 (g = tg0 + t: their stage and parity count) issue the next tile's
         * products; the last one, peeled, does not */
        for (int t = 0; t < nj - 1; t++) {
            const int g = tg0 + t;
            uint32_t pf[4][4];
            fws_softmax<BF, MSK>(sa, o, pf, mx, ls, ro, a.sl2);
            if (t > 0) mbar_arrive(empty0 + 8 * ((g - 1) % FWS_NST));
            const int s1 = (g + 1) % FWS_NST;
            mbar_wait(full0 + 8 * s1, (uint32_t)((g + 1) / FWS_NST) & 1u);
            float sn[8][4];
            fws_score<BF, POS, MSK, KC, GR, PS, 1>(sn, ro, o, pf, gk, x, j0 + t + 1, s1, g % FWS_NST);
            for (int nb = 0; nb < 8; nb++)
                for (int e = 0; e < 4; e++) sa[nb][e] = sn[nb][e];
        }
        /* (PS: the unit's last score products are done: Q's buffer is free for the next unit) */
        if (PS) mbar_arrive(qempty);
        {
            const int g = tg0 + nj - 1;
            uint32_t pf[4][4];
            fws_softmax<BF, MSK>(sa, o, pf, mx, ls, ro, a.sl2);
            if (nj > 1) mbar_arrive(empty0 + 8 * ((g - 1) % FWS_NST));
            const uint64_t dV = desc_add(x.dV0, 8192u * (g % FWS_NST));
            wgmma_fence();
            for (int kk = 0; kk < 4; kk++) wgmma_rs<64, BF, 1>(o, pf[kk], desc_add(dV, 2048 * kk), 1);
            wgmma_commit();
        }
        wgmma_wait<0>();
        reg_fence(o);
        mbar_arrive(empty0 + 8 * ((tg0 + nj - 1) % FWS_NST));
        for (int i = 0; i < 2; i++) {
            ls[i] += __shfl_xor_sync(0xffffffffu, ls[i], 1);
            ls[i] += __shfl_xor_sync(0xffffffffu, ls[i], 2);
        }
        for (int i = 0; i < 2; i++) {
            const int row = x.rb0 + x.rl0 + 8 * i;
            if (row >= L) continue;
            /* (mask kernels: a padded row (mask 0) gets SPEC's padded-row output: HF the mean of V
             * over the L keys (the prologue's vmean) with lse log L, ZERO zeros with lse -inf) */
            const int pad = MSK && a.mask[(int64_t)b * a.m_sb + (int64_t)row * a.m_sl] == 0;
            const float inv = 1.f / ls[i];
            const float *vm = a.hf && a.vmean ? a.vmean + ((int64_t)b * a.H + h) * 64 + 2 * x.c : nullptr;
            uint16_t *op = (uint16_t *)a.out + (int64_t)b * a.o_sb + (int64_t)(tok0 + row) * a.o_sl + (int64_t)h * a.o_sh + 2 * x.c;
            for (int nb = 0; nb < 8; nb++) {
                float v0 = o[nb][2 * i] * inv, v1 = o[nb][2 * i + 1] * inv;
                if (pad) {
                    v0 = vm ? vm[8 * nb] : 0.f;
                    v1 = vm ? vm[8 * nb + 1] : 0.f;
                }
                *(uint32_t *)(op + 8 * nb) = pack2<BF>(v0, v1);
            }
            if (a.lse && x.c == 0)
                a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + row) * a.l_sl] =
                    pad ? (a.hf ? a.logL : __int_as_float(0xff800000)) : (mx[i] + lg2f(ls[i])) * 0.69314718055994531f;
        }
        if (!PS) break;
        tg0 += nj;
        x.rb += nj + 2;
        uc++;
        if ((un += (int)gridDim.x) >= nun) break;
        fws_unit<MSK, PS, PK>(a, un, nmb, m0, h, b, j0, j1, L, tok0);
        nj = j1 - j0;
    }
}

#define FWS_KERNEL_TE(DT, BF, POS, MSK, KC, GR, PS, PK, TE, SUF)                               \
    extern "C" __global__ void __launch_bounds__(384, 1)                                           \
        dattn_fwd_ws_##DT##_d64_pos##POS##SUF(const __grid_constant__ dattn_fwd_args a,              \
                                              const __grid_constant__ dattn_fws_maps M)             \
    {                                                                                              \
        fws_body<BF, POS, MSK, KC, GR, PS, PK, TE>(a, M);                                          \
    }
#define FWS_KERNEL(DT, BF, POS, MSK, KC, GR, PS, PK, SUF) FWS_KERNEL_TE(DT, BF, POS, MSK, KC, GR, PS, PK, 0, SUF)
FWS_KERNEL(f16, 0, 0, 0, 0, 0, 0, 0, )
FWS_KERNEL(f16, 0, 1, 0, 0, 0, 0, 0, )
FWS_KERNEL(bf16, 1, 0, 0, 0, 0, 0, 0, )
FWS_KERNEL(bf16, 1, 1, 0, 0, 0, 0, 0, )
FWS_KERNEL(f16, 0, 0, 1, 0, 0, 0, 0, _mask)
FWS_KERNEL(f16, 0, 1, 1, 0, 0, 0, 0, _mask)
FWS_KERNEL(bf16, 1, 0, 1, 0, 0, 0, 0, _mask)
FWS_KERNEL(bf16, 1, 1, 1, 0, 0, 0, 0, _mask)
/* (DATTN_CUDA_FWD=wsk, to be measured: a saturated tile's column constants through the score
 * product; the kps planes as (hi, lo) pairs) */
FWS_KERNEL(f16, 0, 1, 0, 1, 0, 0, 0, _kc)
FWS_KERNEL(bf16, 1, 1, 0, 1, 0, 0, 0, _kc)
FWS_KERNEL(f16, 0, 1, 1, 1, 0, 0, 0, _mask_kc)
FWS_KERNEL(bf16, 1, 1, 1, 1, 0, 0, 0, _mask_kc)
/* (DATTN_CUDA_FWD=wsg / wskg, to be measured: a band tile's G of its window's second half kept
 * from the previous band tile) */
FWS_KERNEL(f16, 0, 1, 0, 0, 1, 0, 0, _gr)
FWS_KERNEL(bf16, 1, 1, 0, 0, 1, 0, 0, _gr)
FWS_KERNEL(f16, 0, 1, 0, 1, 1, 0, 0, _kc_gr)
FWS_KERNEL(bf16, 1, 1, 0, 1, 1, 0, 0, _kc_gr)
/* (wskgt, the default's form on the padded unmasked calls with position terms: wskg with the ring
 * blocks by TMA from the expanded tables, FWS_VAR_TE in common.cuh) */
FWS_KERNEL_TE(f16, 0, 1, 0, 1, 1, 0, 0, 1, _kc_gr_te)
FWS_KERNEL_TE(bf16, 1, 1, 0, 1, 1, 0, 0, 1, _kc_gr_te)

/* The expanded tables (FWS_VAR_TE): e[t][h][u][0..63] = (t ? pq : pk)[h][slot(u - off)], u < rows;
 * grid (ceil(rows / 32), H, 2), 256 threads (ws_expand_chunk, ws_band.cuh) */
extern "C" __global__ void __launch_bounds__(256) dattn_fwd_ws_expand(const __grid_constant__ dattn_fwd_args a,
                                                                      uint16_t *e, int rows, int off)
{
    ws_expand_chunk<0>(a, e, rows, off);
}
/* (DATTN_CUDA_FWD=wsp, to be measured: persistent CTAs, one per SM, over the units; the
 * producer stages the next unit's Q, first K / V tiles and ring blocks while the consumers end
 * the current one. Not with GR: at the consumers' 224 registers ptxas serializes its wgmma,
 * C7512, and the producer's loop needs 64) */
FWS_KERNEL(f16, 0, 0, 0, 0, 0, 1, 0, _ps)
FWS_KERNEL(bf16, 1, 0, 0, 0, 0, 1, 0, _ps)
FWS_KERNEL(f16, 0, 1, 0, 0, 0, 1, 0, _ps)
FWS_KERNEL(bf16, 1, 1, 0, 0, 0, 1, 0, _ps)
/* packed (cu_seqlens; no mask): the default's for such calls once measured (DATTN_CUDA_FWD=ws
 * pins them now) */
FWS_KERNEL(f16, 0, 0, 0, 0, 0, 0, 1, _packed)
FWS_KERNEL(f16, 0, 1, 0, 0, 0, 0, 1, _packed)
FWS_KERNEL(bf16, 1, 0, 0, 0, 0, 0, 1, _packed)
FWS_KERNEL(bf16, 1, 1, 0, 0, 0, 0, 1, _packed)
/* packed with KC (wsk / wskg pinned: a packed call rounds as the padded call with its mask, the
 * *_mask_kc kernels, does; packed == padded bitwise) */
FWS_KERNEL(f16, 0, 1, 0, 1, 0, 0, 1, _packed_kc)
FWS_KERNEL(bf16, 1, 1, 0, 1, 0, 0, 1, _packed_kc)

/* The variant bits a call takes of var: PS padded unmasked calls only (and then neither KC nor
 * GR), KC with position terms (padded or packed), GR with position terms, padded, unmasked, TE
 * with KC and GR (dattn_fws_te, common.cuh: launch.cu's layout_ws sizes its expanded tables by it). */
static void fws_pick(const dattn_fwd_args *a, int var, int *ps, int *kc, int *gr, int *te)
{
    *ps = !a->packed && (var & FWS_VAR_PS) && !a->mask;
    *kc = !*ps && (var & FWS_VAR_KC) && a->c2p;
    *gr = !a->packed && !*ps && (var & FWS_VAR_GR) && a->c2p && !a->mask;
    *te = dattn_fws_te(var, a->packed != 0, a->mask != nullptr, a->c2p != 0); /* (= TE && KC && GR) */
}

/* Whether the kernel dattn_launch_fwd_ws takes for (a, var) reads the kps planes as bf16 (hi,
 * lo) pairs (the KC kernels) rather than fp32 sums. */
extern "C" int dattn_fwd_ws_kps_hl(const dattn_fwd_args *a, int var)
{
    int ps, kc, gr, te;
    fws_pick(a, var, &ps, &kc, &gr, &te);
    return kc;
}

/* The forward on this path (after the prologue's kps planes when R < L, fp32 sums, or with
 * FWS_VAR_KC in var: bf16 (hi, lo) pairs for the KC kernels; its vmean with a mask and HF padded
 * rows); var: FWS_VAR_* bits (common.cuh), a variant a call cannot take ignored; T: the packed
 * layout's rows (tokens; unused padded); nsm: the device's SMs (the persistent grid). dry: only the checks and the maps, nothing launched.
 * Returns cudaErrorNotSupported, having launched nothing, for a call outside the path (dropout,
 * packed with a mask or without cu_seqlens, D other than 64, one position term alone, no kps
 * planes where tiles may be saturated, no vmean for HF padded rows) or a tensor TMA cannot map
 * (tma.cuh). */
extern "C" cudaError_t dattn_launch_fwd_ws(const dattn_fwd_args *a, int bf, int var, int64_t T, int nsm, int dry,
                                           cudaStream_t stream)
{
    dattn_fws_maps M;
    int rf[3] = {0, 0, 0};
    /* (the maps: [B][L][H][64] padded, [1][T][H][64] packed; a dimension of one element has
     * stride 0 in the argument block, its map needs a stride that nests: 64 for the heads, H x
     * the heads' for the rows) */
    const int64_t outer = a->packed ? 1 : a->B, rows = a->packed ? T : a->L;
    const int64_t qh = a->H > 1 ? a->q_sh : 64, kh = a->H > 1 ? a->k_sh : 64, vh = a->H > 1 ? a->v_sh : 64;
    const int64_t ql = rows > 1 ? a->q_sl : a->H * qh, kl = rows > 1 ? a->k_sl : a->H * kh, vl = rows > 1 ? a->v_sl : a->H * vh;
    if (a->B < 1 || a->L < 1 || a->H < 1 || rows < 0 || a->D != 64 || (a->packed && (!a->cu || a->mask)) || a->drop_thr ||
        a->c2p != a->p2c || (a->c2p && a->R < a->L && !dry && !a->kps) || (a->mask && a->hf && !dry && !a->vmean) ||
        a->B > 65535 || a->H > 65535)
        return cudaErrorNotSupported;
    if (rows == 0) return cudaSuccess; /* (packed, every sequence empty: no output) */
    if (dattn_tma_rows_map(&M.q, &rf[0], a->q, outer, rows, a->H, a->q_sb, ql, qh, 64) != cudaSuccess ||
        dattn_tma_rows_map(&M.k, &rf[1], a->k, outer, rows, a->H, a->k_sb, kl, kh, 64) != cudaSuccess ||
        dattn_tma_rows_map(&M.v, &rf[2], a->v, outer, rows, a->H, a->v_sb, vl, vh, 64) != cudaSuccess)
        return cudaErrorNotSupported;
    if (dry) return cudaSuccess;
    M.qrf = rf[0];
    M.krf = rf[1];
    M.vrf = rf[2];
    typedef void (*kfn)(dattn_fwd_args, dattn_fws_maps);
    /* [mask][bf16][position terms] */
    static const kfn kt[2][2][2] = {{{dattn_fwd_ws_f16_d64_pos0, dattn_fwd_ws_f16_d64_pos1},
                                     {dattn_fwd_ws_bf16_d64_pos0, dattn_fwd_ws_bf16_d64_pos1}},
                                    {{dattn_fwd_ws_f16_d64_pos0_mask, dattn_fwd_ws_f16_d64_pos1_mask},
                                     {dattn_fwd_ws_bf16_d64_pos0_mask, dattn_fwd_ws_bf16_d64_pos1_mask}}};
    /* [mask][bf16] (kc: position terms) */
    static const kfn kk[2][2] = {{dattn_fwd_ws_f16_d64_pos1_kc, dattn_fwd_ws_bf16_d64_pos1_kc},
                                 {dattn_fwd_ws_f16_d64_pos1_mask_kc, dattn_fwd_ws_bf16_d64_pos1_mask_kc}};
    /* [kc][bf16] (gr: position terms, no mask) */
    static const kfn kg[2][2] = {{dattn_fwd_ws_f16_d64_pos1_gr, dattn_fwd_ws_bf16_d64_pos1_gr},
                                 {dattn_fwd_ws_f16_d64_pos1_kc_gr, dattn_fwd_ws_bf16_d64_pos1_kc_gr}};
    /* [bf16][position terms] (packed); [bf16] (packed, kc: position terms) */
    static const kfn kpk[2][2] = {{dattn_fwd_ws_f16_d64_pos0_packed, dattn_fwd_ws_f16_d64_pos1_packed},
                                  {dattn_fwd_ws_bf16_d64_pos0_packed, dattn_fwd_ws_bf16_d64_pos1_packed}};
    static const kfn kpkc[2] = {dattn_fwd_ws_f16_d64_pos1_packed_kc, dattn_fwd_ws_bf16_d64_pos1_packed_kc};
    /* [position terms][bf16] (persistent: no mask, no kc, no gr) */
    static const kfn kq[2][2] = {{dattn_fwd_ws_f16_d64_pos0_ps, dattn_fwd_ws_bf16_d64_pos0_ps},
                                 {dattn_fwd_ws_f16_d64_pos1_ps, dattn_fwd_ws_bf16_d64_pos1_ps}};
    int withps, withkc, withgr, withte;
    fws_pick(a, var, &withps, &withkc, &withgr, &withte);
    /* (TE: from the expanded tables in the workspace, which launch.cu's layout_ws sizes for the
     * calls that take TE under the default's or DATTN_CUDA_FWD's variant) */
    const int erows = withte ? dattn_fws_exp_rows(a->R, a->L) : 0, eoff = withte ? dattn_fws_exp_off(a->R, a->L) : 0;
    if (withte) {
        int erf = 0;
        if (!a->pexp || dattn_tma_rows_map(&M.pe, &erf, a->pexp, 1, erows, a->H, 0, 64, (int64_t)erows * 64, 64) != cudaSuccess ||
            dattn_tma_rows_map(&M.qe, &erf, a->pexp + (int64_t)a->H * erows * 64, 1, erows, a->H, 0, 64, (int64_t)erows * 64, 64) !=
                cudaSuccess)
            return cudaErrorNotSupported;
        M.erf = erf;
        M.eoff = eoff;
    }
    static const kfn kte[2] = {dattn_fwd_ws_f16_d64_pos1_kc_gr_te, dattn_fwd_ws_bf16_d64_pos1_kc_gr_te};
    const kfn k = withte ? kte[bf != 0]
                  : a->packed ? (withkc ? kpkc[bf != 0] : kpk[bf != 0][a->c2p != 0])
                  : withps ? kq[a->c2p != 0][bf != 0]
                  : withgr ? kg[withkc][bf != 0]
                  : withkc ? kk[a->mask != nullptr][bf != 0]
                           : kt[a->mask != nullptr][bf != 0][a->c2p != 0];
    const int smem = withkc ? FWS_SMEM_KC : FWS_SMEM;
    const int64_t units = (int64_t)((a->L + 127) / 128) * a->H * a->B;
    dim3 grid((unsigned)((a->L + 127) / 128), (unsigned)a->H, (unsigned)a->B);
    cudaError_t e;
    if (withps) {
        /* one CTA per SM (215 KB of shared memory each), at most one per unit */
        if (units > INT32_MAX || nsm < 1) return cudaErrorNotSupported;
        grid = dim3((unsigned)(units < nsm ? units : nsm), 1u, 1u);
    }
    if ((e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)) != cudaSuccess) return e;
    if (withte) {
        const dim3 eg((unsigned)((erows + 31) / 32), (unsigned)a->H, 2u);
        dattn_fwd_ws_expand<<<eg, 256, 0, stream>>>(*a, a->pexp, erows, eoff);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    k<<<grid, 384, smem, stream>>>(*a, M);
    return cudaGetLastError();
}

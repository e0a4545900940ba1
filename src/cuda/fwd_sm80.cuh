/* dattn forward, tensor-core kernel for sm_80 and newer (fp16 / bf16, fp32 accumulate).
 *
 * FlashAttention-2 structure: a CTA owns BM = 16*MS*NW query rows of one (sequence, head)
 * and walks the key tiles of BN keys; each warp owns MS strips of 16 rows (every K / V
 * fragment loaded by ldmatrix feeds MS MMAs). Q fragments stay in registers; K and V
 * tiles arrive through cp.async into XOR-swizzled single buffers, FA2's pipeline: the V
 * load of tile n overlaps Q*K^T and the softmax of tile n, the K-side load of tile n+1
 * overlaps P*V of tile n. Scores, the online softmax (exp2 with log2(e)/scale folded into
 * one FFMA) and P*V stay in registers (the fp32 score fragment becomes the A operand).
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
 *          shared-memory ring of RC = BM + BN rows indexed by slot % RC: consecutive
 *          band tiles move the window down by BN slots, so a tile loads only the new rows
 *          (with the K tile, once the previous tile's window is dead). A per-tile table T[u] gives the swizzled ring
 *          address of window position u, so ldmatrix gathers pk/pq rows for any slot map
 *          (linear or log zone) with one LDS + one LOP per 8 rows.
 *          c2p: each warp computes G = Q_w (16 x D) . pk[window of BN + 16]^T with MMA
 *          and reads it back skewed through a per-warp scratch: c2p(i, j) =
 *          G[i][i - j + BN - 1]; the result is the C input of the first Q*K^T MMA.
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
#define DATTN_ALIGN_V90(x, v90) ((v90) ? ((x) + 1023) / 1024 * 1024 : (x))

/* The Hopper variant of the body (V90 = 1) needs the wgmma layer: only translation units
 * that define DATTN_FWD_SM90 (built for sm_90a alone) include it and may instantiate it. */
#ifdef DATTN_FWD_SM90
#include "sm90.cuh"
#define DATTN_FWD_SM90_ONLY(...) __VA_ARGS__
#define DATTN_FWD_HAVE_SM90 1
#else
#define DATTN_FWD_SM90_ONLY(...)
#define DATTN_FWD_HAVE_SM90 0
#endif

/* Band-tile variants (compile-time, for A/B runs). Both default to 0, the v1 path: on the
 * H200 the two reworks measured 8-19% SLOWER than v1 on every shape (2026-11-30,
 * bench/results/gpu-2026-11-30-final/ab; NOTES.md "Band-tile rework"), so they stay
 * off until someone finds out why:
 *   DATTN_FWD_C2P_SHFL  1: c2p skew through quad shuffles from the MMA registers (no
 *                       scratch, pk fragments shared by a warp's strips); 0: the v1 path
 *                       (per-strip window, skew through a per-warp smem scratch).
 *   DATTN_FWD_P2C_SWZ   1: p2c tile columns XOR-swizzled by row bit 2 (conflict-free skewed
 *                       stores); 0: plain rows (2-way conflicts on the stores). */
#ifndef DATTN_FWD_C2P_SHFL
#define DATTN_FWD_C2P_SHFL 0
#endif
#ifndef DATTN_FWD_P2C_SWZ
#define DATTN_FWD_P2C_SWZ 0
#endif

/* Tile geometry of one kernel configuration (host and device). V90 = 1: the Hopper
 * variant (fwd_sm90.cuh): Q K^T and P V run on wgmma, which reads the K and V tiles
 * through 128-byte-swizzle descriptors, so those tiles start on 1024-byte boundaries and
 * the dynamic shared memory gets 1 KB of slack to align its base. */
template <int D, int NW, int MS, int BN, int V90 = 0, int LN = 0, int OG = 0>
struct fwd_geom {
    static constexpr int BM = 16 * MS * NW;  /* query rows per CTA */
    static constexpr int WR = 16 * MS;       /* query rows per warp */
    static constexpr int NTHR = 32 * NW;
    static constexpr int RB = 2 * D;         /* bytes per row of a tile */
    static constexpr int CPR = D / 8;        /* 16-byte chunks per row */
    static constexpr int KS = D / 16;        /* k-steps over D */
    static constexpr int NB = BN / 8;        /* n8 blocks of a score row */
    static constexpr int DB = D / 8;         /* n8 blocks of an output row */
    static constexpr int NG = BN + 16;       /* c2p window per strip */
    static constexpr int PC = NG + 8;        /* c2p scratch pitch (floats) */
    /* p2c tile pitch (floats); the wgmma variant at BN = 128 widens it so that the c2p
     * scratch fits in each warp's own rows (shared memory) */
    static constexpr int PP = (V90 && BN > 64) ? NG + 8 : BN + 8;
    static constexpr int NWIN = BM + BN - 1; /* r values of a tile */
    static constexpr int NT = BM + BN;       /* window table entries */
    static constexpr int RC = BM + BN;       /* ring rows */
    static constexpr int NSB = BN / 16;      /* 16-key sub-blocks of a key tile */
    static constexpr int PARTS = NW / NSB;   /* warps per sub-block (p2c) */
    static constexpr int NBH = (BM + 16) / 8; /* p2c window n8 blocks per sub-block */
    static constexpr int NBP = (NBH + PARTS - 1) / PARTS;
    /* c2p scratch inside the warp's own rows of the p2c tile when it fits there */
    static constexpr int SC_ALIAS = DATTN_FWD_C2P_SHFL || MS * PP >= PC;
    static constexpr int A_BYTES = BM * RB > BM * PP * 4 ? BM * RB : BM * PP * 4;
    static constexpr int OFF_A = 0; /* Q tile, then p2c tile (+ c2p scratch), then output */
    static constexpr int OFF_SC = DATTN_ALIGN128(A_BYTES);
    static constexpr int OFF_K =
        DATTN_ALIGN_V90(OFF_SC + (SC_ALIAS ? 0 : DATTN_ALIGN128(NW * 16 * PC * 4)), V90);
    static constexpr int OFF_V = DATTN_ALIGN_V90(OFF_K + BN * RB, V90);
    /* OG only: the saturated p2c operands of the tensor-core init (fwd_sm80_body's OG), BN rows
     * of 128 bytes in the 128-byte swizzle (one 1024-byte atom per 8 rows): k16 position 0 is
     * the B block (row = key: its bf16 (hi, lo) pair at k 0, 1), positions 1 and 3 two copies
     * of the A block ("ones": 1 at k 0, 1 of every row), the rest zero; strip ms reads A at
     * position 2 ms + 1 (distinct operands: with one, ptxas merges the two strips' identical
     * wgmma into one plus a wait and 32 register moves) */
    static constexpr int OFF_OG = OFF_V + BN * RB;
    static constexpr int OFF_T = OFF_V + BN * RB + (OG ? BN * 128 : 0);
    static constexpr int OFF_PS = OFF_T + DATTN_ALIGN128(NT * 4);
    /* saturated p2c constants: BN floats; the lean loop (LN) MS x 2 BN (per strip, each key
     * pair twice: one 16-byte load per score block); none with OG (the OG block above) */
    static constexpr int OFF_RK = OFF_PS + (OG ? 0 : DATTN_ALIGN128(BN * 4 * (LN ? 2 * MS : 1)));
    static constexpr int OFF_RQ = OFF_RK + RC * RB;
    static constexpr int OFF_CS = OFF_RQ + RC * RB; /* saturated c2p row constants [2][BM] */
    static constexpr int OFF_TAB = OFF_CS + DATTN_ALIGN128(2 * BM * 4);
    static constexpr int SMEM = OFF_TAB + DATTN_ALIGN128(DATTN_CUDA_TAB_MAX * 2) + (V90 ? 1024 : 0);
    static_assert(D == 32 || D == 64 || D == 128, "head dim");
    static_assert(BN % 16 == 0 && (BN <= 64 || (V90 && BN == 128)), "key tile");
    static_assert(MS == 1 || MS == 2, "strips per warp");
    static_assert(NW % NSB == 0 && PARTS >= 1, "p2c work split");
    static_assert(PC % 16 == 8 && PP % 16 == 8, "skew buffer pitch (bank conflicts)");
    static_assert(CPR % 4 == 0, "ldmatrix.x4 over four chunks");
    static_assert((BN * RB) % 128 == 0 && (RC * RB) % 128 == 0, "alignment");
    static_assert(!OG || (V90 && LN && D == 64 && BN == 64 && OFF_OG % 1024 == 0),
                  "OG: the one-warpgroup lean wgmma kernel, its OG block on a swizzle-atom boundary");
    /* OG's 8 KB (less the LN constants' 1 KB) still fit two CTAs per SM on sm_90 (228 KB per SM,
     * 1 KB reserved per CTA): 2 x (115456 + 1024) <= 233472 */
    static_assert(!OG || 2 * (SMEM + 1024) <= 233472, "OG: two CTAs per SM");
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

/* Byte offset of chunk ch of row r in a K / V tile (BN rows). The wgmma variant at D > 64
 * stores the tile as 64-column panels of 128-byte rows (sm90.cuh's layout, what its
 * descriptors address); at D <= 64, and on the mma.sync path, it is swz. */
template <int D, int BN, int V90>
DATTN_DEV uint32_t kv_swz(int row, int ch)
{
    if (V90 && D > 64) return (uint32_t)((ch >> 3) * BN * 128 + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
    return swz<D>(row, ch);
}

DATTN_DEV float neg_inf(void) { return __int_as_float(0xff800000); }

/* Per-CTA constants shared by the loader and the compute step. */
typedef struct fwd_cta {
    const uint16_t *kb, *vb, *pkh, *pqh;
    const uint8_t *mrow;
    const float *kpsb; /* kps plane pair of this (b, h), indexed by key position */
    const uint16_t *stab;
    char *smem;
    int m0, len, use_pos;
    /* LN (lean loop) only: this thread's K / V source of key tile 0 (row tid / CPR, chunk
     * tid % CPR) and its byte offset in the K / V tile (the same in both) */
    const uint16_t *kthr, *vthr;
    uint32_t kvoff;
    /* SP (lean saturated path) only: the key (in its tile) whose saturated p2c constant this
     * thread copies, and the byte offset of its first copy in the constants' area */
    int psj;
    uint32_t psoff;
} fwd_cta;

template <int D, int NW, int MS, int BN, int V90>
DATTN_DEV int tile_class(const dattn_fwd_args &a, const fwd_cta &t, int n0)
{
    typedef fwd_geom<D, NW, MS, BN, V90> G;
    if (!t.use_pos) return DATTN_CLS_PLAIN;
    const int rlo = t.m0 - n0 - BN + 1, rhi = t.m0 - n0 + G::BM - 1;
    if (rlo >= a.R) return DATTN_CLS_SATP;
    if (rhi <= -a.R) return DATTN_CLS_SATN;
    return DATTN_CLS_BAND;
}

/* V tile n. */
/* LN: one K or V tile through the per-thread source pointer thr (fwd_cta.kthr / vthr): row
 * row0 + it * RPI of tile n0 is thr + (n0 + it * RPI) * sl, its shared-memory chunk kvoff + it
 * * RPI * (row pitch) (RPI % 8 == 0 keeps the swizzle key). A fully valid tile (all but the
 * last of a sequence) loads with no bounds check; the last one as the generic loader does
 * (rows past the end zero-filled from the tile's first row). */
template <int D, int NW, int MS, int BN, int V90>
DATTN_DEV void fwd_load_tile_ln(uint32_t sdst, const uint16_t *thr, int64_t sl, int n0, int len)
{
    typedef fwd_geom<D, NW, MS, BN, V90> G;
    constexpr int RPI = G::NTHR / G::CPR;              /* rows per pass */
    constexpr int PITCH = (V90 && D > 64) ? 128 : 2 * D; /* bytes per row (kv_swz) */
    static_assert(G::NTHR % G::CPR == 0 && RPI % 8 == 0 && BN % RPI == 0, "lean K / V loader geometry");
    const uint16_t *src = thr + (int64_t)n0 * sl;
    if (n0 + BN <= len) {
#pragma unroll
        for (int it = 0; it < BN / RPI; it++) cp_async16(sdst + it * RPI * PITCH, src + (int64_t)(it * RPI) * sl, 16);
    } else {
        const int row0 = (int)threadIdx.x / G::CPR;
#pragma unroll
        for (int it = 0; it < BN / RPI; it++) {
            const int ok = n0 + row0 + it * RPI < len;
            cp_async16(sdst + it * RPI * PITCH, ok ? src + (int64_t)(it * RPI) * sl : thr - (int64_t)row0 * sl, ok ? 16 : 0);
        }
    }
}

/* The same, given this thread's source of tile n0 itself (src = thr + n0 * sl: SP keeps it as a
 * running pointer for the K tile, no 64-bit multiply per tile). */
template <int D, int NW, int MS, int BN, int V90>
DATTN_DEV void fwd_load_tile_at(uint32_t sdst, const uint16_t *src, int64_t sl, int n0, int len)
{
    typedef fwd_geom<D, NW, MS, BN, V90> G;
    constexpr int RPI = G::NTHR / G::CPR;
    constexpr int PITCH = (V90 && D > 64) ? 128 : 2 * D;
    if (n0 + BN <= len) {
#pragma unroll
        for (int it = 0; it < BN / RPI; it++) cp_async16(sdst + it * RPI * PITCH, src + (int64_t)(it * RPI) * sl, 16);
    } else {
        const int row0 = (int)threadIdx.x / G::CPR;
        const uint16_t *z = src - (int64_t)(n0 + row0) * sl; /* row 0: a valid address, nothing read */
#pragma unroll
        for (int it = 0; it < BN / RPI; it++) {
            const int ok = n0 + row0 + it * RPI < len;
            cp_async16(sdst + it * RPI * PITCH, ok ? src + (int64_t)(it * RPI) * sl : z, ok ? 16 : 0);
        }
    }
}

template <int D, int NW, int MS, int BN, int V90, int LN = 0>
DATTN_DEV void fwd_load_v(const dattn_fwd_args &a, const fwd_cta &t, int n)
{
    typedef fwd_geom<D, NW, MS, BN, V90, LN> G;
    const int n0 = n * BN;
    const uint32_t sV = smem_u32(t.smem + G::OFF_V);
    if constexpr (LN) fwd_load_tile_ln<D, NW, MS, BN, V90>(sV + t.kvoff, t.vthr, a.v_sl, n0, t.len);
#pragma unroll
    for (int it = 0; it < (LN ? 0 : (BN * G::CPR + G::NTHR - 1) / G::NTHR); it++) {
        const int idx = threadIdx.x + it * G::NTHR;
        if (idx < BN * G::CPR) {
            const int row = idx / G::CPR, ch = idx % G::CPR, j = n0 + row;
            const int ok = j < t.len;
            cp_async16(sV + kv_swz<D, BN, V90>(row, ch), t.vb + (int64_t)(ok ? j : 0) * a.v_sl + ch * 8, ok ? 16 : 0);
        }
    }
}

/* The K side of key tile n: K, the window table and new ring rows (band) or the
 * saturated p2c constants, and (registers) its mask bytes. */
template <int D, int NW, int MS, int BN, int V90, int LN = 0, int SP = 0, int RL = 0, int OG = 0>
DATTN_DEV void fwd_load_k(const dattn_fwd_args &a, const fwd_cta &t, int n, int &ring_lo,
                          int &ring_ok, int &mk0, int &mk1, int &mk2, int &mk3, int *cls_out = 0)
{
    typedef fwd_geom<D, NW, MS, BN, V90, LN, OG> G;
    const int tid = threadIdx.x, lane = tid & 31;
    const int n0 = n * BN;
    const uint32_t sK = smem_u32(t.smem + G::OFF_K);
    /* SP: the caller loads the K tile itself (fwd_load_tile_ln / fwd_load_tile_at), ahead of
     * the P V wgmma; this loads the rest while it runs */
    if constexpr (LN && !SP) fwd_load_tile_ln<D, NW, MS, BN, V90>(sK + t.kvoff, t.kthr, a.k_sl, n0, t.len);
#pragma unroll
    for (int it = 0; it < (LN ? 0 : (BN * G::CPR + G::NTHR - 1) / G::NTHR); it++) {
        const int idx = tid + it * G::NTHR;
        if (idx < BN * G::CPR) {
            const int row = idx / G::CPR, ch = idx % G::CPR, j = n0 + row;
            const int ok = j < t.len;
            cp_async16(sK + kv_swz<D, BN, V90>(row, ch), t.kb + (int64_t)(ok ? j : 0) * a.k_sl + ch * 8, ok ? 16 : 0);
        }
    }
    if (t.mrow) {
        const int j0 = n0 + lane, j1 = n0 + 32 + lane;
        mk0 = (lane < BN && j0 < t.len) ? t.mrow[(int64_t)j0 * a.m_sl] : 0;
        mk1 = (BN > 32 && j1 < t.len) ? t.mrow[(int64_t)j1 * a.m_sl] : 0;
        if (BN > 64) { /* keys 64 .. 127 (the wgmma variant's 128-key tiles) */
            const int j2 = n0 + 64 + lane, j3 = n0 + 96 + lane;
            mk2 = j2 < t.len ? t.mrow[(int64_t)j2 * a.m_sl] : 0;
            mk3 = j3 < t.len ? t.mrow[(int64_t)j3 * a.m_sl] : 0;
        }
    }
    const int cls = tile_class<D, NW, MS, BN, V90>(a, t, n0);
    if (cls_out) *cls_out = cls;
    if (cls == DATTN_CLS_BAND) {
        int *sT = (int *)(t.smem + G::OFF_T);
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
        if constexpr (RL) {
            /* RL (the first key tile of a BE kernel: the whole window, up to NT rows of pk and
             * of pq): the same rows to the same places, each thread chunk ch = tid % CPR of rows
             * slo + tid / CPR + RPI it through running source pointers and a running ring offset
             * (RPI % 8 == 0 and RC % 8 == 0 keep the swizzle key; one wrap test) */
            constexpr int RPI = G::NTHR / G::CPR;
            static_assert(G::NTHR % G::CPR == 0 && RPI % 8 == 0 && G::RC % 8 == 0 && G::RC >= RPI, "RL: ring row stride");
            const int ch = tid % G::CPR;
            int s = slo + tid / G::CPR;
            if (s <= top) {
                uint32_t off = swz<D>(s % G::RC, ch);
                const uint16_t *pk = a.c2p ? t.pkh + (int64_t)s * a.pk_ss + ch * 8 : t.pkh;
                const uint16_t *pq = a.p2c ? t.pqh + (int64_t)s * a.pq_ss + ch * 8 : t.pqh;
                const int64_t pks = a.c2p ? RPI * a.pk_ss : 0, pqs = a.p2c ? RPI * a.pq_ss : 0;
                for (; s <= top; s += RPI) {
                    if (a.c2p) cp_async16(rk + off, pk, 16);
                    if (a.p2c) cp_async16(rq + off, pq, 16);
                    pk += pks;
                    pq += pqs;
                    off += RPI * G::RB;
                    if (off >= (uint32_t)(G::RC * G::RB)) off -= G::RC * G::RB;
                }
            }
        }
        for (int idx = tid; idx < (RL ? 0 : nrows * G::CPR); idx += G::NTHR) {
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
            const uint32_t sps = smem_u32(t.smem + G::OFF_PS);
            if constexpr (OG) {
                /* OG: the 4-byte (hi, lo) pair of key tid (the kps planes hold pairs for an OG
                 * kernel, launch.cu) to k 0, 1 of B row tid: the first bytes of its swizzled
                 * chunk 0 (the rest of the block stays zero) */
                if (tid < BN) {
                    const int ok = n0 + tid < t.len;
                    cp_async4(smem_u32(t.smem + G::OFF_OG) + 128 * tid + ((tid & 7) << 4), src + (ok ? tid : 0), ok ? 4 : 0);
                }
            } else if constexpr (SP) {
                /* the first strip copy of the LN layout below (fwd_sm80_body's SP init reads it
                 * for every strip): with NTHR == 2 BN, thread tid writes slot tid, key t.psj; no
                 * bounds check on a full tile */
                static_assert(LN && G::NTHR == 2 * BN, "SP: saturated p2c constant copy");
                const int ok = n0 + BN <= t.len || n0 + t.psj < t.len;
                cp_async4(sps + t.psoff, src + (ok ? t.psj : 0), ok ? 4 : 0);
            } else if constexpr (LN) {
                /* slot q of strip copy q / (2 BN): key 2 (q' >> 2) + (q' & 1), q' = q % (2 BN), so
                 * that the 16 bytes at 16 (4 nb + c) hold keys 8 nb + 2c, + 1, 8 nb + 2c, + 1 */
#pragma unroll
                for (int it = 0; it < (2 * MS * BN + G::NTHR - 1) / G::NTHR; it++) {
                    const int q = tid + it * G::NTHR;
                    if (2 * MS * BN % G::NTHR == 0 || q < 2 * MS * BN) {
                        const int qq = q % (2 * BN), j = 2 * (qq >> 2) + (qq & 1);
                        const int ok = n0 + j < t.len;
                        cp_async4(sps + q * 4, src + (ok ? j : 0), ok ? 4 : 0);
                    }
                }
            }
            if constexpr (!SP && !OG)
                for (int j = tid; j < (LN ? 0 : BN); j += G::NTHR) {
                    const int ok = n0 + j < t.len;
                    cp_async4(sps + j * 4, src + (ok ? j : 0), ok ? 4 : 0);
                }
        }
    }
}

/* BP: the band tile's two window products as software-pipelined streams of n8 window
 * blocks. Each block is the same HMMA chain as in the plain code (k-steps 0 .. KS-1 in
 * order into one zeroed accumulator), stored to the same place, so the results are the
 * same bit for bit; only the instruction order changes: the blocks run in groups with
 * independent accumulators (their HMMA chains interleave), group q + 1's window-table
 * entries are loaded before group q's MMAs, and the streams are unrolled (table / store
 * offsets are immediates, bounds checks only where a store can leave the tile). So the
 * LDS -> LDSM -> HMMA -> store chain is paid once per group instead of once per block.
 * (Double-buffered fragments, i.e. group q + 1's ldmatrix before group q's stores, spill
 * at 255 registers for any group size >= 3 of p2c: ptxas -v, 2 CTAs/SM.)
 * DATTN_FWD_BPG: p2c blocks per group (6: 3 groups of the NBH = 18 window blocks; 2..6
 * build without spills). */
#ifndef DATTN_FWD_BPG
#define DATTN_FWD_BPG 6
#endif
/* BK's p2c group size: 6 spills there (ptxas, 16 bytes: BK keeps the P fragments and O live
 * across the band loader); groups of 5 (5, 5, 5, 3) do not */
#ifndef DATTN_FWD_BPG_K
#define DATTN_FWD_BPG_K 5
#endif

/* p2c: H_sb = K_sub . pq[window]^T of the warp's 16-key sub-block (PARTS == 1: all NBH window
 * blocks), stored skewed into the p2c tile: p2c(i, 16 sb + jl) = H[jl][i - jl + 15]. */
template <int D, int NW, int MS, int BN, int BF, int V90, int LN, int P = DATTN_FWD_BPG>
DATTN_DEV void fwd_band_p2c_bp(const uint32_t (&ka)[D / 16][4], const int *sTu, uint32_t rq, float *spb, int sb,
                               int lane, int bar = 0)
{
    typedef fwd_geom<D, NW, MS, BN, V90, LN> G;
    constexpr int NH = G::NBH, NQ = (NH + P - 1) / P, CK = G::CPR / 4;
    static_assert(G::PARTS == 1 && !DATTN_FWD_P2C_SWZ, "BP: one warp per sub-block, plain p2c rows");
    const int g = lane >> 2, c = lane & 3;
    const int *tb = sTu + (lane & 7);
    const uint32_t xk = (uint32_t)(lane >> 3) << 4; /* chunk kc + lane / 8 (kc = 4 k): ^ (64 k) */
    /* block hb's first store: row ii = 8 hb + q, column 16 sb + g */
    const int q = 2 * c + g - 15;
    const int sp = q * G::PP + 16 * sb + g;
    uint32_t fr[P][CK][4], tu[P];
#pragma unroll
    for (int p = 0; p < P; p++)
        if (p < NH) tu[p] = (uint32_t)tb[8 * p];
#pragma unroll
    for (int p = 0; p < P; p++)
        if (p < NH)
#pragma unroll
            for (int k = 0; k < CK; k++) ldsm_x4(fr[p][k], rq + (tu[p] ^ (xk + (uint32_t)(64 * k))));
#pragma unroll
    for (int gq = 0; gq < NQ; gq++) {
        if (gq)
#pragma unroll
            for (int p = 0; p < P; p++)
                if (gq * P + p < NH)
#pragma unroll
                    for (int k = 0; k < CK; k++) ldsm_x4(fr[p][k], rq + (tu[p] ^ (xk + (uint32_t)(64 * k))));
#pragma unroll
        for (int p = 0; p < P; p++)
            if ((gq + 1) * P + p < NH) tu[p] = (uint32_t)tb[8 * ((gq + 1) * P + p)];
        float ha[P][4];
#pragma unroll
        for (int p = 0; p < P; p++) ha[p][0] = ha[p][1] = ha[p][2] = ha[p][3] = 0.f;
#pragma unroll
        for (int k = 0; k < CK; k++) {
#pragma unroll
            for (int p = 0; p < P; p++)
                if (gq * P + p < NH) mma16816_acc<BF>(ha[p], ka[2 * k], fr[p][k][0], fr[p][k][1]);
#pragma unroll
            for (int p = 0; p < P; p++)
                if (gq * P + p < NH) mma16816_acc<BF>(ha[p], ka[2 * k + 1], fr[p][k][2], fr[p][k][3]);
        }
        /* bar (BE): the c2p scratch lives in the p2c tile, so every warp must be done with it
         * before the first store: the caller's barrier, moved after the first group's
         * products (which read only the K tile and the pq ring) */
        if (gq == 0 && bar) __syncthreads();
#pragma unroll
        for (int p = 0; p < P; p++) {
            const int hb = gq * P + p;
            if (hb < NH) {
                const int d = sp + 8 * hb * G::PP;
                /* rows ii + {0, 1, 8, 9}, ii = 8 hb + q, q in [-15, 7]: all inside [0, BM) when
                 * 8 hb >= 15 and 8 hb + 16 < BM (no check); the edge blocks check each row */
                const bool in = 8 * hb >= 15 && 8 * hb + 16 < G::BM;
                const int ii = 8 * hb + q;
                if (in || (unsigned)ii < (unsigned)G::BM) spb[d] = ha[p][0];
                if (in || (unsigned)(ii + 1) < (unsigned)G::BM) spb[d + G::PP] = ha[p][1];
                if (in || (unsigned)(ii + 8) < (unsigned)G::BM) spb[d + 8 * G::PP + 8] = ha[p][2];
                if (in || (unsigned)(ii + 9) < (unsigned)G::BM) spb[d + 9 * G::PP + 8] = ha[p][3];
            }
        }
    }
}

/* c2p: per strip ms, G = Q_strip . pk[window]^T (NG / 8 window blocks from row wr0 + 16 ms),
 * stored to the warp's scratch and read back skewed: c2p(i, j) = G[i][i - j + BN - 1] (into
 * s[ms]). Groups of NG / 16 blocks (two per strip, as the plain code's halves); the next
 * group's window-table entries are loaded before this group's MMAs, and the next strip's
 * first fragments (ring reads, not the scratch) before this strip's stores and skewed
 * reads. */
template <int D, int NW, int MS, int BN, int BF, int V90, int LN>
DATTN_DEV void fwd_band_c2p_bp(float (&s)[MS][BN / 8][4], const uint32_t (&qf)[MS][D / 16][4], const int *sTw,
                               uint32_t rk, float *scw, int lane)
{
    typedef fwd_geom<D, NW, MS, BN, V90, LN> G;
    constexpr int P = G::NG / 16, GPS = 2, NQ = MS * GPS, CK = G::CPR / 4;
    static_assert(G::NG % 16 == 0, "c2p window blocks in two groups per strip");
    const int g = lane >> 2, c = lane & 3;
    const int *tb = sTw + (lane & 7); /* + 16 ms + 8 gb */
    const uint32_t xk = (uint32_t)(lane >> 3) << 4;
    float *sw = scw + g * G::PC + 2 * c;
    uint32_t fr[P][CK][4], tu[P];
#pragma unroll
    for (int p = 0; p < P; p++) tu[p] = (uint32_t)tb[8 * p];
#pragma unroll
    for (int p = 0; p < P; p++)
#pragma unroll
        for (int k = 0; k < CK; k++) ldsm_x4(fr[p][k], rk + (tu[p] ^ (xk + (uint32_t)(64 * k))));
#pragma unroll
    for (int gq = 0; gq < NQ; gq++) {
        const int ms = gq / GPS, gh = gq % GPS;
        const int ms1 = (gq + 1) / GPS, gh1 = (gq + 1) % GPS; /* the next group */
        if (gh)
#pragma unroll
            for (int p = 0; p < P; p++)
#pragma unroll
                for (int k = 0; k < CK; k++) ldsm_x4(fr[p][k], rk + (tu[p] ^ (xk + (uint32_t)(64 * k))));
        if (gq + 1 < NQ)
#pragma unroll
            for (int p = 0; p < P; p++) tu[p] = (uint32_t)tb[16 * ms1 + 8 * (gh1 * P + p)];
        float ga[P][4];
#pragma unroll
        for (int p = 0; p < P; p++) ga[p][0] = ga[p][1] = ga[p][2] = ga[p][3] = 0.f;
#pragma unroll
        for (int k = 0; k < CK; k++) {
#pragma unroll
            for (int p = 0; p < P; p++) mma16816_acc<BF>(ga[p], qf[ms][2 * k], fr[p][k][0], fr[p][k][1]);
#pragma unroll
            for (int p = 0; p < P; p++) mma16816_acc<BF>(ga[p], qf[ms][2 * k + 1], fr[p][k][2], fr[p][k][3]);
        }
        /* the next strip's first group: before this strip's skewed reads */
        if (gq + 1 < NQ && gh1 == 0)
#pragma unroll
            for (int p = 0; p < P; p++)
#pragma unroll
                for (int k = 0; k < CK; k++) ldsm_x4(fr[p][k], rk + (tu[p] ^ (xk + (uint32_t)(64 * k))));
        /* the previous strip's skewed reads are done (its __syncwarp below) before these stores */
#pragma unroll
        for (int p = 0; p < P; p++) {
            const int gb = gh * P + p;
            *(float2 *)(sw + 8 * gb) = make_float2(ga[p][0], ga[p][1]);
            *(float2 *)(sw + 8 * G::PC + 8 * gb) = make_float2(ga[p][2], ga[p][3]);
        }
        if (gh == GPS - 1) {
            __syncwarp();
            const float *rd = scw + g * G::PC + g - 2 * c + BN - 1;
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
                s[ms][nb][0] = rd[-8 * nb];
                s[ms][nb][1] = rd[-8 * nb - 1];
                s[ms][nb][2] = rd[8 * G::PC + 8 - 8 * nb];
                s[ms][nb][3] = rd[8 * G::PC + 7 - 8 * nb];
            }
            if (ms + 1 < MS) __syncwarp(); /* strip ms's reads of the scratch are done */
        }
    }
}

/* OV (wgmma variant only): 1 = the K side of tile n + 1 is loaded as soon as every warp is
 * done with tile n's K side (after its score product and band code, one more barrier), so
 * the load overlaps the softmax and P V of tile n instead of P V alone; 0 = after the V
 * barrier (the mma.sync kernel's order).
 * BP (wgmma variant with LN, one warpgroup): the band tile's G / H products as the
 * software-pipelined streams above (fwd_band_c2p_bp / fwd_band_p2c_bp): the same HMMAs in
 * the same order per block, the same stores, so the same results bit for bit.
 * SP (with LN, OV = 0): the tile loop ordered for saturated / plain tiles (NOTES.md "Saturated
 * tiles: where the +25% goes"): their score wgmma issued before the V load; after the V barrier
 * the next K tile, then P V, then the rest of the next K side (mask bytes, class, band window
 * table / ring rows, saturated p2c constants) while P V runs; the tile class carried from the
 * loader; one copy of the saturated p2c constants per tile; the saturated c2p row constants
 * read at the tile start, and per CTA computed only when one of its tiles is saturated. The
 * same operations in the same order, so the same results bit for bit.
 * BE (with BP, OV = 0, SP = 0; NOTES.md "sm90w1e"): BP with less waiting and integer work
 * around the band products: the barrier that protects the c2p scratch (it lives in the p2c
 * tile) moved into fwd_band_p2c_bp after the first group's products; the first key tile's
 * ring rows (the whole window) copied through running pointers (fwd_load_k's RL); the
 * saturated c2p row constants computed per CTA only when one of its tiles is saturated (SP's
 * code). The same operations in the same order, so the same results bit for bit.
 * BK (with BE): when the next key tile is a band tile, its K side (window table, ring rows) is
 * loaded after the P V wgmma is issued, while it runs (SP's order, for band tiles only; plain
 * and saturated tiles keep BP's); the p2c groups are 5 blocks (registers). Bitwise BE's. */
template <int D, int NW, int MS, int BN, int BF, int V90 = 0, int OV = 0, int LN = 0, int BP = 0, int SP = 0,
          int BE = 0, int BK = 0, int OG = 0>
DATTN_DEV void fwd_sm80_body(const dattn_fwd_args &a)
{
    typedef fwd_geom<D, NW, MS, BN, V90, LN, OG> G;
    static_assert(!LN || V90, "the lean loop (LN) is a variant of the wgmma kernel");
    static_assert(!SP || (LN && !OV), "the lean saturated path (SP) is a variant of the lean loop (LN), "
                                      "K side loaded after the V barrier");
    static_assert(!BE || (BP && !SP && !OV), "BE is a variant of the pipelined band products (BP)");
    static_assert(!BK || BE, "BK is a variant of BE");
    static_assert(!OG || (BP && !SP && !OV && !BK), "OG is a variant of the pipelined band products (BP), with or without BE");
    static_assert(!BP || (LN && !DATTN_FWD_C2P_SHFL && G::PARTS == 1),
                  "the pipelined band products (BP) are a variant of the lean wgmma kernel, one "
                  "warp per 16-key sub-block");
    static_assert(!V90 || (DATTN_FWD_HAVE_SM90 &&
                           ((NW == 8 && MS == 1 &&
                             ((D == 64 && (BN == 64 || BN == 128)) || (D == 128 && BN == 64))) ||
                            (NW == 4 && MS == 2 && D == 64 && BN == 64))),
                  "the wgmma variant: two warpgroups of one 16-row strip per warp (D = 64 with "
                  "BN = 64 | 128, D = 128 with BN = 64), or one warpgroup of two strips per warp "
                  "(D = 64, BN = 64: the mma.sync kernel's geometry, two CTAs per SM)");
    extern __shared__ __align__(128) char smem_raw[];
    /* V90: the swizzle atoms of the K / V tiles must sit on 1024-byte boundaries */
    char *smem = V90 ? smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u) : smem_raw;
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
    t.use_pos = a.c2p | a.p2c;
    t.kthr = t.kb + (int64_t)(tid / G::CPR) * a.k_sl + (tid % G::CPR) * 8;
    t.vthr = t.vb + (int64_t)(tid / G::CPR) * a.v_sl + (tid % G::CPR) * 8;
    t.kvoff = kv_swz<D, BN, V90>(tid / G::CPR, tid % G::CPR);
    t.psj = 2 * ((tid % (2 * BN)) >> 2) + (tid & 1);
    t.psoff = 4u * (uint32_t)tid;
    const uint16_t *qb =
        (const uint16_t *)a.q + (int64_t)b * a.q_sb + (int64_t)tok0 * a.q_sl + (int64_t)h * a.q_sh;

    if (t.use_pos)
        for (int i = tid; i < 2 * a.nlog; i += G::NTHR) stab[i] = a.tab[i];
    /* OG: the A ("ones") and B blocks of the saturated p2c init (fwd_geom::OFF_OG): every chunk
     * of every row zero, but for the bf16 pair (1, 1) at k 0, 1 of the A copies (chunks 2, 6);
     * the loader writes only the first 4 bytes of B's chunk 0 (published by the barrier
     * below) */
    if (OG && a.p2c)
        for (int q = tid; q < 8 * BN; q += G::NTHR) {
            const int row = q >> 3, ch = q & 7;
            uint4 z;
            z.x = (ch & 3) == 2 ? 0x3F803F80u : 0u; /* bf16 (1, 1) */
            z.y = z.z = z.w = 0u;
            *(uint4 *)(smem + G::OFF_OG + 128 * row + ((ch ^ (row & 7)) << 4)) = z;
        }
    int myvalid = 0;
    for (int r = tid; r < G::BM; r += G::NTHR) {
        const int i = m0 + r;
        myvalid |= i < len && (!t.mrow || t.mrow[(int64_t)i * a.m_sl] != 0);
    }
    const int anyv = __syncthreads_or(myvalid); /* also publishes stab */

    int kv_lo = 0, kv_hi = len;
    if (a.kvr) {
        kv_lo = a.kvr[2 * b];
        kv_hi = a.kvr[2 * b + 1];
    }
    const int n_begin = kv_lo / BN;
    const int n_end = (anyv && kv_hi > kv_lo) ? (kv_hi + BN - 1) / BN : n_begin;

    /* Q tile and the K side of the first key tile. */
    const uint32_t sA = smem_u32(smem + G::OFF_A);
#pragma unroll
    for (int it = 0; it < (G::BM * G::CPR + G::NTHR - 1) / G::NTHR; it++) {
        const int idx = tid + it * G::NTHR;
        if (idx < G::BM * G::CPR) {
            const int row = idx / G::CPR, ch = idx % G::CPR, i = m0 + row;
            const int ok = i < len;
            cp_async16(sA + swz<D>(row, ch), qb + (int64_t)(ok ? i : 0) * a.q_sl + ch * 8, ok ? 16 : 0);
        }
    }
    int ring_lo = 0, ring_ok = 0, mk0n = 0, mk1n = 0, mk2n = 0, mk3n = 0;
    int clsn = 0; /* SP: the class of the next key tile, from its loader */
    if (n_begin < n_end) {
        if constexpr (SP) fwd_load_tile_ln<D, NW, MS, BN, V90>(smem_u32(smem + G::OFF_K) + t.kvoff, t.kthr, a.k_sl, n_begin * BN, len);
        fwd_load_k<D, NW, MS, BN, V90, LN, SP, BE, OG>(a, t, n_begin, ring_lo, ring_ok, mk0n, mk1n, mk2n, mk3n,
                                                   SP ? &clsn : (int *)0);
    }
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    const int wr0 = G::WR * w; /* first row of this warp in the tile */
    uint32_t qf[MS][G::KS][4];
#pragma unroll
    for (int ms = 0; ms < MS; ms++)
#pragma unroll
        for (int ks = 0; ks < G::KS; ks++)
            ldsm_x4(qf[ms][ks], sA + swz<D>(wr0 + 16 * ms + (lane & 7) + ((lane >> 3) & 1) * 8,
                                            2 * ks + (lane >> 4)));

    /* c2p of saturated tiles: q_i . pk[sat_pos / sat_neg] for the warp's rows, kept in
     * shared memory (registers are the scarce resource) */
    float *scs = (float *)(smem + G::OFF_CS);
    /* SP: only when a tile of this CTA is saturated (tile_class: rlo = m0 - n0 - BN + 1 is
     * largest at n_begin, rhi = m0 - n0 + BM - 1 smallest at n_end - 1); the two pk rows are
     * read with 16-byte loads issued together, the sums are the same fmaf chains in the same
     * order */
    if constexpr (SP || BE) {
        const int sat_any = n_begin < n_end && (m0 - n_begin * BN - BN + 1 >= a.R || m0 - (n_end - 1) * BN + G::BM - 1 <= -a.R);
        if (a.c2p && sat_any) {
            const int rr = lane & 15, half = lane >> 4;
            constexpr int NC = D / 16; /* 16-byte chunks of half a row */
            const uint4 *pp = (const uint4 *)(t.pkh + (int64_t)a.sat_pos * a.pk_ss + half * (D / 2));
            const uint4 *pn = (const uint4 *)(t.pkh + (int64_t)a.sat_neg * a.pk_ss + half * (D / 2));
            uint4 xp[NC], xn[NC];
#pragma unroll
            for (int i = 0; i < NC; i++) {
                xp[i] = pp[i];
                xn[i] = pn[i];
            }
#pragma unroll
            for (int ms = 0; ms < MS; ms++) {
                float sp = 0.f, sn = 0.f;
#pragma unroll
                for (int i = 0; i < NC; i++) {
                    const uint4 qv = *(const uint4 *)(smem + G::OFF_A + swz<D>(wr0 + 16 * ms + rr, half * NC + i));
                    const uint32_t qw[4] = {qv.x, qv.y, qv.z, qv.w}, pw[4] = {xp[i].x, xp[i].y, xp[i].z, xp[i].w},
                                   nw[4] = {xn[i].x, xn[i].y, xn[i].z, xn[i].w};
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        const float qx = h2f<BF>((uint16_t)(qw[e >> 1] >> (16 * (e & 1))));
                        sp = fmaf(qx, h2f<BF>((uint16_t)(pw[e >> 1] >> (16 * (e & 1)))), sp);
                        sn = fmaf(qx, h2f<BF>((uint16_t)(nw[e >> 1] >> (16 * (e & 1)))), sn);
                    }
                }
                sp += __shfl_xor_sync(0xffffffffu, sp, 16);
                sn += __shfl_xor_sync(0xffffffffu, sn, 16);
                if (!half) {
                    scs[wr0 + 16 * ms + rr] = sp * a.sl2;
                    scs[G::BM + wr0 + 16 * ms + rr] = sn * a.sl2;
                }
            }
            __syncwarp();
        }
    } else if (a.c2p) {
        const int rr = lane & 15, half = lane >> 4;
        const uint16_t *pp = t.pkh + (int64_t)a.sat_pos * a.pk_ss, *pn = t.pkh + (int64_t)a.sat_neg * a.pk_ss;
#pragma unroll
        for (int ms = 0; ms < MS; ms++) {
            float sp = 0.f, sn = 0.f;
            for (int d = half * (D / 2); d < (half + 1) * (D / 2); d++) {
                const uint16_t qv = *(const uint16_t *)(smem + G::OFF_A + swz<D>(wr0 + 16 * ms + rr, d >> 3) + (d & 7) * 2);
                const float qx = h2f<BF>(qv);
                sp = fmaf(qx, h2f<BF>(pp[d]), sp);
                sn = fmaf(qx, h2f<BF>(pn[d]), sn);
            }
            sp += __shfl_xor_sync(0xffffffffu, sp, 16);
            sn += __shfl_xor_sync(0xffffffffu, sn, 16);
            if (!half) {
                scs[wr0 + 16 * ms + rr] = sp * a.sl2;
                scs[G::BM + wr0 + 16 * ms + rr] = sn * a.sl2;
            }
        }
        __syncwarp();
    }

    float o[MS][G::DB][4];
#pragma unroll
    for (int ms = 0; ms < MS; ms++)
#pragma unroll
        for (int db = 0; db < G::DB; db++) o[ms][db][0] = o[ms][db][1] = o[ms][db][2] = o[ms][db][3] = 0.f;
    float mrun[MS][2], lrun[MS][2];
#pragma unroll
    for (int ms = 0; ms < MS; ms++) {
        mrun[ms][0] = mrun[ms][1] = neg_inf();
        lrun[ms][0] = lrun[ms][1] = 0.f;
    }
    const float sl2 = a.sl2;
    const uint32_t rk = smem_u32(smem + G::OFF_RK), rq = smem_u32(smem + G::OFF_RQ);
    const uint32_t sK = smem_u32(smem + G::OFF_K), sV = smem_u32(smem + G::OFF_V);
    const int *sT = (const int *)(smem + G::OFF_T);
    const float *sps = (const float *)(smem + G::OFF_PS);
    float *spb = (float *)(smem + G::OFF_A);
#if DATTN_FWD_HAVE_SM90
    /* LN: the descriptors of k-step 0 of the K / V tiles; the others differ by a constant */
    const uint64_t dK0 = V90 ? desc_kmajor(sK, BN, 0, 0) : 0, dV0 = V90 ? desc_mnmajor(sV, BN, 0) : 0;
#endif
#if !DATTN_FWD_C2P_SHFL
    float *scw = G::SC_ALIAS ? spb + wr0 * G::PP : (float *)(smem + G::OFF_SC) + w * 16 * G::PC;
#endif

    /* SP: this thread's K source of key tile n + 1 */
    const uint16_t *knext = SP ? t.kthr + (int64_t)(n_begin + 1) * BN * a.k_sl : (const uint16_t *)0;
    for (int n = n_begin; n < n_end; n++) {
        const int mk0 = mk0n, mk1 = mk1n, mk2 = mk2n, mk3 = mk3n;
        /* K side of tile n landed; every warp is done with tile n-1 (V buffer free) */
        cp_async_wait_all();
        if constexpr (V90) DATTN_FWD_SM90_ONLY(fence_proxy_async()); /* K: cp.async -> wgmma */
        __syncthreads();
        if constexpr (!SP) {
            fwd_load_v<D, NW, MS, BN, V90, LN>(a, t, n);
            cp_async_commit();
        }
        const int n0 = n * BN;
        const int cls = SP ? clsn : tile_class<D, NW, MS, BN, V90>(a, t, n0);

        float s[MS][G::NB][4];
        /* SP: a saturated or plain tile issues its score product first (accumulators from the
         * p2c constants or none) and loads V while it runs; a band tile loads V first, as
         * before (its accumulator init, the c2p window product, is long). The saturated c2p
         * row constants of the tile are read here, far ahead of the softmax. */
        const int early = SP && cls != DATTN_CLS_BAND;
        float rsat[MS][2];
        if constexpr (SP) {
            const int satc = a.c2p && (cls == DATTN_CLS_SATP || cls == DATTN_CLS_SATN);
            const float *cs = scs + (cls == DATTN_CLS_SATN ? G::BM : 0) + wr0 + g;
#pragma unroll
            for (int ms = 0; ms < MS; ms++) {
                rsat[ms][0] = satc ? cs[16 * ms] : 0.f;
                rsat[ms][1] = satc ? cs[16 * ms + 8] : 0.f;
            }
            if (!early) {
                fwd_load_v<D, NW, MS, BN, V90, LN>(a, t, n);
                cp_async_commit();
            }
        }
#if DATTN_FWD_C2P_SHFL
        if (cls == DATTN_CLS_BAND && a.c2p) {
            /* G_ms = Q_strip . pk[window]^T per strip, window position u = 8 b + col from
             * the strip's first row (strip ms starts 16 ms = 2 blocks after strip 0, so one
             * pk fragment of warp block B feeds strip 0's block B and strip 1's block B - 2).
             * c2p(i, j) = G[i][i - j + BN - 1]: for score element (g, 8 nb + 2c + e) that is
             * column 8 (NB-1-nb) + t, t = 7 + g - 2c - e in [0, 14], held by lane
             * 4 g + ((t & 7) >> 1) of the same quad (row g + 8: one block later). Each lane
             * (as a source) knows which destination reads it, so it selects the block
             * (t >> 3) and the element (t & 1) itself; one shuffle per score element. */
            const int odd = g & 1;
            const int hi0 = 2 * c + (odd ^ 1) <= g; /* t = p0 + 8 hi0, e = 0 */
            const int hi1 = 2 * c + odd < g;        /* e = 1 */
            const int src0 = 4 * g + (((7 + g - 2 * c) & 7) >> 1);
            const int src1 = 4 * g + (((6 + g - 2 * c) & 7) >> 1);
            constexpr int NBS = G::NB + 2;            /* G blocks per strip */
            constexpr int NBW = NBS + 2 * (MS - 1);   /* pk blocks per warp */
            float ga[MS][NBS][4];
            float y[MS][NBS][4]; /* per block, the element this lane sends for e = 0 / 1 */
#pragma unroll
            for (int B = 0; B < NBW; B++) {
                const uint32_t tu = (uint32_t)sT[wr0 + 8 * B + (lane & 7)];
                uint32_t r[G::CPR / 4][4];
#pragma unroll
                for (int kc = 0; kc < G::CPR; kc += 4)
                    ldsm_x4(r[kc / 4], rk + (tu ^ (uint32_t)((kc + (lane >> 3)) << 4)));
#pragma unroll
                for (int ms = 0; ms < MS; ms++) {
                    const int bl = B - 2 * ms;
                    if (bl < 0 || bl >= NBS) continue;
                    ga[ms][bl][0] = ga[ms][bl][1] = ga[ms][bl][2] = ga[ms][bl][3] = 0.f;
#pragma unroll
                    for (int kc = 0; kc < G::CPR; kc += 4) {
                        mma16816_acc<BF>(ga[ms][bl], qf[ms][kc / 2], r[kc / 4][0], r[kc / 4][1]);
                        mma16816_acc<BF>(ga[ms][bl], qf[ms][kc / 2 + 1], r[kc / 4][2], r[kc / 4][3]);
                    }
                    y[ms][bl][0] = odd ? ga[ms][bl][0] : ga[ms][bl][1];
                    y[ms][bl][1] = odd ? ga[ms][bl][1] : ga[ms][bl][0];
                    y[ms][bl][2] = odd ? ga[ms][bl][2] : ga[ms][bl][3];
                    y[ms][bl][3] = odd ? ga[ms][bl][3] : ga[ms][bl][2];
                    /* blocks NB-1-nb .. NB+1-nb complete: emit score block nb */
                    if (bl >= 2) {
                        const int nb = G::NB + 1 - bl;
                        const float v0 = hi0 ? y[ms][G::NB - nb][0] : y[ms][G::NB - 1 - nb][0];
                        const float v1 = hi1 ? y[ms][G::NB - nb][1] : y[ms][G::NB - 1 - nb][1];
                        const float v2 = hi0 ? y[ms][G::NB + 1 - nb][2] : y[ms][G::NB - nb][2];
                        const float v3 = hi1 ? y[ms][G::NB + 1 - nb][3] : y[ms][G::NB - nb][3];
                        s[ms][nb][0] = __shfl_sync(0xffffffffu, v0, src0);
                        s[ms][nb][1] = __shfl_sync(0xffffffffu, v1, src1);
                        s[ms][nb][2] = __shfl_sync(0xffffffffu, v2, src0);
                        s[ms][nb][3] = __shfl_sync(0xffffffffu, v3, src1);
                    }
                }
            }
        } else
#else
        if (BP && cls == DATTN_CLS_BAND && a.c2p) {
            fwd_band_c2p_bp<D, NW, MS, BN, BF, V90, LN>(s, qf, sT + wr0, rk, scw, lane);
        } else if (cls == DATTN_CLS_BAND && a.c2p) {
            /* per strip: G = Q_strip . pk[window]^T, skewed read c2p(i, j) = G[i][i - j + BN - 1] */
#pragma unroll
            for (int ms = 0; ms < MS; ms++) {
                if (ms) __syncwarp(); /* strip 0's reads of the scratch are done */
#pragma unroll
                for (int gh = 0; gh < 2; gh++) { /* two halves: fewer live registers */
                    float ga[G::NG / 16][4];
#pragma unroll
                    for (int gl = 0; gl < G::NG / 16; gl++) {
                        const int gb = gh * (G::NG / 16) + gl;
                        ga[gl][0] = ga[gl][1] = ga[gl][2] = ga[gl][3] = 0.f;
                        const uint32_t tu = (uint32_t)sT[wr0 + 16 * ms + 8 * gb + (lane & 7)];
#pragma unroll
                        for (int kc = 0; kc < G::CPR; kc += 4) {
                            uint32_t r[4];
                            ldsm_x4(r, rk + (tu ^ (uint32_t)((kc + (lane >> 3)) << 4)));
                            mma16816_acc<BF>(ga[gl], qf[ms][kc / 2], r[0], r[1]);
                            mma16816_acc<BF>(ga[gl], qf[ms][kc / 2 + 1], r[2], r[3]);
                        }
                    }
#pragma unroll
                    for (int gl = 0; gl < G::NG / 16; gl++) {
                        const int gb = gh * (G::NG / 16) + gl;
                        *(float2 *)(scw + g * G::PC + 8 * gb + 2 * c) = make_float2(ga[gl][0], ga[gl][1]);
                        *(float2 *)(scw + (g + 8) * G::PC + 8 * gb + 2 * c) = make_float2(ga[gl][2], ga[gl][3]);
                    }
                }
                __syncwarp();
                const float *rd = scw + g * G::PC + g - 2 * c + BN - 1;
#pragma unroll
                for (int nb = 0; nb < G::NB; nb++) {
                    s[ms][nb][0] = rd[-8 * nb];
                    s[ms][nb][1] = rd[-8 * nb - 1];
                    s[ms][nb][2] = rd[8 * G::PC + 8 - 8 * nb];
                    s[ms][nb][3] = rd[8 * G::PC + 7 - 8 * nb];
                }
            }
        } else
#endif
        if (OG && cls != DATTN_CLS_BAND && cls != DATTN_CLS_PLAIN && a.p2c) {
            /* OG: the saturated p2c constants enter through the score product (below) */
        } else if (LN && cls != DATTN_CLS_BAND && cls != DATTN_CLS_PLAIN && a.p2c) {
            /* saturated: p2c is k_j . pq[sat], a per-column constant; one 16-byte load per
             * score block straight into the accumulators (the loader's duplicated layout, one
             * copy per strip: no register moves) */
#pragma unroll
            for (int ms = 0; ms < MS; ms++)
#pragma unroll
                for (int nb = 0; nb < G::NB; nb++) {
                    /* SP: every strip from the first strip copy (the only one its loader writes) */
                    const float4 x = SP ? lds128_sep(smem_u32(sps + 16 * nb + 4 * c))
                                        : *(const float4 *)(sps + ms * 2 * BN + 16 * nb + 4 * c);
                    s[ms][nb][0] = x.x;
                    s[ms][nb][1] = x.y;
                    s[ms][nb][2] = x.z;
                    s[ms][nb][3] = x.w;
                }
        } else if (cls != DATTN_CLS_BAND && cls != DATTN_CLS_PLAIN && a.p2c) {
            /* saturated: p2c is k_j . pq[sat], a per-column constant */
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
                const float2 x = *(const float2 *)(sps + 8 * nb + 2 * c);
#pragma unroll
                for (int ms = 0; ms < MS; ms++) {
                    s[ms][nb][0] = x.x;
                    s[ms][nb][1] = x.y;
                    s[ms][nb][2] = x.x;
                    s[ms][nb][3] = x.y;
                }
            }
        } else if (!LN) {
#pragma unroll
            for (int ms = 0; ms < MS; ms++)
#pragma unroll
                for (int nb = 0; nb < G::NB; nb++) s[ms][nb][0] = s[ms][nb][1] = s[ms][nb][2] = s[ms][nb][3] = 0.f;
        }

        if constexpr (V90) {
            /* S += Q K^T on wgmma (m64n64k16 x D/16, Q from registers: qf is the A fragment of
             * the warp's 16 rows, K a K-major descriptor), asynchronous: it runs while the
             * band code below computes the p2c tile; s is not touched until the wait. */
#if DATTN_FWD_HAVE_SM90
            /* LN: no zero fill above; the first k-step ignores the accumulators (scale-d 0)
             * unless they hold a bias (band c2p values, saturated p2c constants) */
            const int sacc = !LN || (cls == DATTN_CLS_BAND ? a.c2p : cls != DATTN_CLS_PLAIN && a.p2c);
            /* OG: a saturated tile's accumulators start from ones . B (one bf16 k16 step, scale-d
             * 0): B row j holds the (hi, lo) bf16 pair of k_j . pq[sat] at k 0, 1, the ones block
             * 1 at k 0, 1 of every row and zero elsewhere, so every row gets hi_j + lo_j */
            const int og = OG && cls != DATTN_CLS_BAND && cls != DATTN_CLS_PLAIN && a.p2c;
            wgmma_fence();
            /* OG: two copies of the issue sequence, so that each is straight-line wgmma code (a
             * conditional wgmma inside one sequence makes ptxas inject warpgroup.arrive at the
             * joins, on every tile) */
            if (OG && og) {
#pragma unroll
                for (int ms = 0; ms < MS; ms++) {
                    wgmma_ss<BN, 1, 0, 0>(s[ms], desc_add(dK0, (uint32_t)(G::OFF_OG - G::OFF_K + 64 * ms + 32)),
                                          desc_add(dK0, (uint32_t)(G::OFF_OG - G::OFF_K)), 0);
#pragma unroll
                    for (int ks = 0; ks < G::KS; ks++)
                        wgmma_rs<BN, BF, 0>(s[ms], qf[ms][ks], desc_add(dK0, (uint32_t)((ks >> 2) * BN * 128 + (ks & 3) * 32)), 1);
                    wgmma_commit();
                    reg_fence(s[ms]);
                }
            } else {
#pragma unroll
                for (int ms = 0; ms < MS; ms++) {
                    /* one commit group per strip: strip 0's softmax starts while strip 1's
                     * product is still in flight (wait<MS - 1 - ms> below) */
#pragma unroll
                    for (int ks = 0; ks < G::KS; ks++)
                        wgmma_rs<BN, BF, 0>(s[ms], qf[ms][ks],
                                            LN ? desc_add(dK0, (uint32_t)((ks >> 2) * BN * 128 + (ks & 3) * 32))
                                               : desc_kmajor(sK, BN, 0, ks),
                                            ks ? 1 : sacc);
                    wgmma_commit();
                    reg_fence(s[ms]);
                }
            }
#endif
        }
        if constexpr (SP) {
            if (early) {
                fwd_load_v<D, NW, MS, BN, V90, LN>(a, t, n);
                cp_async_commit();
            }
        }

        if (cls == DATTN_CLS_BAND && a.p2c) {
            /* the c2p scratch may live in the p2c tile: every warp must be done with it */
            /* BE: this barrier is in fwd_band_p2c_bp, after its first group's products */
            if (!BE && !DATTN_FWD_C2P_SHFL && G::SC_ALIAS && a.c2p) __syncthreads();
            /* H_sb = K_sub . pq[window]^T, stored skewed: p2c(i, 16 sb + jl) = H[jl][i - jl + 15]. */
            const int sb = w / G::PARTS, part = w % G::PARTS;
            uint32_t ka[G::KS][4];
#pragma unroll
            for (int ks = 0; ks < G::KS; ks++)
                ldsm_x4(ka[ks], sK + kv_swz<D, BN, V90>(16 * sb + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * ks + (lane >> 4)));
            const int u0 = BN - 16 * (sb + 1);
            if constexpr (BP)
                fwd_band_p2c_bp<D, NW, MS, BN, BF, V90, LN, BK ? DATTN_FWD_BPG_K : DATTN_FWD_BPG>(ka, sT + u0, rq, spb, sb, lane,
                                                            BE && !DATTN_FWD_C2P_SHFL && G::SC_ALIAS && a.c2p);
#pragma unroll 1
            for (int hl = 0; hl < (BP ? 0 : G::NBP); hl++) {
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
                    /* column swizzle: col ^ 8 * bit 2 of the row (see the read below); bit 2
                     * of ii is that of 2c + g + 1 (8 hb - 16 keeps bits 0..2), g < 8 */
                    const int x0 = DATTN_FWD_P2C_SWZ ? 8 * (((2 * c + g + 1) >> 2) & 1) : 0;
                    const int x1 = DATTN_FWD_P2C_SWZ ? 8 * (((2 * c + g + 2) >> 2) & 1) : 0;
                    if ((unsigned)ii < (unsigned)G::BM) spb[ii * G::PP + jj + x0] = ha[0];
                    if ((unsigned)(ii + 1) < (unsigned)G::BM) spb[(ii + 1) * G::PP + jj + x1] = ha[1];
                    if ((unsigned)(ii + 8) < (unsigned)G::BM) spb[(ii + 8) * G::PP + jj + 8 - x0] = ha[2];
                    if ((unsigned)(ii + 9) < (unsigned)G::BM) spb[(ii + 9) * G::PP + jj + 8 - x1] = ha[3];
                }
            }
        }

        /* S += Q K^T: each K fragment feeds MS strips */
#pragma unroll
        for (int kc = 0; kc < (V90 ? 0 : G::CPR); kc += 4) {
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
                uint32_t r[4];
                ldsm_x4(r, sK + swz<D>(8 * nb + (lane & 7), kc + (lane >> 3)));
#pragma unroll
                for (int ms = 0; ms < MS; ms++) {
                    mma16816_acc<BF>(s[ms][nb], qf[ms][kc / 2], r[0], r[1]);
                    mma16816_acc<BF>(s[ms][nb], qf[ms][kc / 2 + 1], r[2], r[3]);
                }
            }
        }

        if (cls == DATTN_CLS_BAND && a.p2c) {
            __syncthreads();
            if constexpr (V90) DATTN_FWD_SM90_ONLY(wgmma_wait<0>(); for (int ms_ = 0; ms_ < MS; ms_++) reg_fence(s[ms_]));
#pragma unroll
            for (int ms = 0; ms < MS; ms++) {
                /* rows wr0 + 16 ms + g (+8) have bit 2 = bit 2 of g: column 8 nb + 2c is
                 * stored at 8 (nb ^ that bit) + 2c */
                const int xr = DATTN_FWD_P2C_SWZ ? 8 * ((g >> 2) & 1) : 0;
                const float *rp = spb + (wr0 + 16 * ms + g) * G::PP + 2 * c;
                const float *rpe = rp + xr, *rpo = rp - xr;
#pragma unroll
                for (int nb = 0; nb < G::NB; nb++) {
                    const float *rq_ = ((nb & 1) ? rpo : rpe) + 8 * nb;
                    const float2 x = *(const float2 *)rq_;
                    const float2 y = *(const float2 *)(rq_ + 8 * G::PP);
                    s[ms][nb][0] += x.x;
                    s[ms][nb][1] += x.y;
                    s[ms][nb][2] += y.x;
                    s[ms][nb][3] += y.y;
                }
            }
        }

        /* V90: the wait for the score product is in the softmax loop, per strip (OV: here) */
        if constexpr (V90 && OV) {
#if DATTN_FWD_HAVE_SM90
            wgmma_wait<0>();
#pragma unroll
            for (int ms = 0; ms < MS; ms++) reg_fence(s[ms]);
#endif
            /* every warp is done with K, the window table, the ring and the saturated p2c
             * constants of tile n (wgmma reads of K waited above): load tile n + 1's */
            __syncthreads();
            if (n + 1 < n_end) fwd_load_k<D, NW, MS, BN, V90, LN, SP, 0, OG>(a, t, n + 1, ring_lo, ring_ok, mk0n, mk1n, mk2n, mk3n);
            cp_async_commit(); /* possibly empty: the V wait below counts one group after V's */
        }

        /* key validity: padding mask and the end of the sequence */
        uint64_t vbits, vbits2 = ~0ull; /* keys 0 .. 63, 64 .. 127 (BN = 128 only) */
        if (t.mrow) {
            const uint32_t lo = __ballot_sync(0xffffffffu, mk0 != 0);
            const uint32_t hi = __ballot_sync(0xffffffffu, mk1 != 0);
            vbits = (uint64_t)lo | ((uint64_t)hi << 32);
            if (BN > 64) {
                const uint32_t lo2 = __ballot_sync(0xffffffffu, mk2 != 0);
                const uint32_t hi2 = __ballot_sync(0xffffffffu, mk3 != 0);
                vbits2 = (uint64_t)lo2 | ((uint64_t)hi2 << 32);
            }
        } else {
            const int lim = len - n0;
            vbits = lim >= 64 ? ~0ull : ((1ull << lim) - 1ull);
            if (BN > 64) vbits2 = lim >= 128 ? ~0ull : lim <= 64 ? 0ull : ((1ull << (lim - 64)) - 1ull);
        }
        const uint64_t full_mask = BN > 64 ? ~0ull : ~0ull >> (64 - (BN > 64 ? 64 : BN));
        const int part_tile = (vbits & full_mask) != full_mask || (BN > 64 && vbits2 != ~0ull);
        if (!V90 && part_tile) {
            const uint64_t vs = vbits >> (2 * c), vs2 = vbits2 >> (2 * c);
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (!(((nb < 8 ? vs : vs2) >> (8 * (nb & 7) + (e & 1))) & 1ull)) {
#pragma unroll
                        for (int ms = 0; ms < MS; ms++) s[ms][nb][e] = neg_inf();
                    }
        }

        /* online softmax (log2 domain) */
#pragma unroll
        for (int ms = 0; ms < MS; ms++) {
            if constexpr (V90) {
                /* strip ms's score product (its own commit group) has landed; then the
                 * key-validity mask of that strip */
#if DATTN_FWD_HAVE_SM90
                if (MS == 2 && ms == 0) wgmma_wait<1>();
                else wgmma_wait<0>();
                reg_fence(s[ms]);
#endif
                if (part_tile) {
                    const uint64_t vs = vbits >> (2 * c), vs2 = vbits2 >> (2 * c);
#pragma unroll
                    for (int nb = 0; nb < G::NB; nb++)
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            if (!(((nb < 8 ? vs : vs2) >> (8 * (nb & 7) + (e & 1))) & 1ull)) s[ms][nb][e] = neg_inf();
                }
            }
            float radd[2] = {0.f, 0.f};
            if (SP) {
                radd[0] = rsat[ms][0];
                radd[1] = rsat[ms][1];
            } else if (a.c2p && (cls == DATTN_CLS_SATP || cls == DATTN_CLS_SATN)) {
                const float *cs = scs + (cls == DATTN_CLS_SATN ? G::BM : 0) + wr0 + 16 * ms + g;
                radd[0] = cs[0];
                radd[1] = cs[8];
            }
            float mx[2] = {neg_inf(), neg_inf()};
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
                mx[0] = fmaxf(mx[0], fmaxf(s[ms][nb][0], s[ms][nb][1]));
                mx[1] = fmaxf(mx[1], fmaxf(s[ms][nb][2], s[ms][nb][3]));
            }
            float bias[2], alpha[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                const float mnew = fmaxf(mrun[ms][r], fmaf(mx[r], sl2, radd[r]));
                const float muse = mnew == neg_inf() ? 0.f : mnew;
                alpha[r] = ex2f(mrun[ms][r] - muse);
                mrun[ms][r] = mnew;
                bias[r] = radd[r] - muse;
                lrun[ms][r] *= alpha[r];
            }
            /* the running max rarely moves after the first tiles: skip the rescale then */
            if (!__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) {
#pragma unroll
                for (int db = 0; db < G::DB; db++) {
                    o[ms][db][0] *= alpha[0];
                    o[ms][db][1] *= alpha[0];
                    o[ms][db][2] *= alpha[1];
                    o[ms][db][3] *= alpha[1];
                }
            }
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    s[ms][nb][e] = ex2f(fmaf(s[ms][nb][e], sl2, bias[e >> 1]));
                    lrun[ms][e >> 1] += s[ms][nb][e];
                }
            }
        }

        /* dropout: the row sums above ran over every probability; P*V takes the kept ones.
         * Element (ms, nb, e) is row wr0 + 16 ms + g + 8 (e >> 1), key 8 nb + 2 c + (e & 1).
         * One Philox call (counter j >> 3) gives the keep bits of the eight keys 8 nb + 0..7 of
         * one row (bit j & 7: 16-bit half j & 1 of word (j >> 1) & 3): the lane quad g holds
         * them for rows g and g + 8, 2 NB calls per ms, so lane c makes the NB / 2 calls of row
         * g + 8 (c & 1), blocks nb = 2 t + (c >> 1) (byte t & 3 of a word per four t), and the
         * quad gathers them by four shuffles per word (every bit of every call used: a quarter
         * of the calls of one call per row and block). The calls run in a rolled loop (few
         * live registers), then the bits are applied. */
        if (a.drop_thr) {
            static_assert(G::NB % 2 == 0, "dropout: key blocks in pairs");
            const uint32_t bh = (uint32_t)b * (uint32_t)a.H + (uint32_t)h;
            uint32_t kb[MS][2];
#pragma unroll
            for (int ms = 0; ms < MS; ms++) {
                const uint32_t i = (uint32_t)(m0 + wr0 + 16 * ms + g + 8 * (c & 1));
                kb[ms][0] = kb[ms][1] = 0; /* rows g, g + 8: bits 2 nb, 2 nb + 1 */
#pragma unroll
                for (int h4 = 0; h4 < (G::NB / 2 + 3) / 4; h4++) {
                    uint32_t W = 0; /* byte q: call t = 4 h4 + q */
#pragma unroll 1
                    for (int q = 0; q < 4 && 4 * h4 + q < G::NB / 2; q++) {
                        const uint32_t jb = (uint32_t)n0 / 8u + (uint32_t)(2 * (4 * h4 + q) + (c >> 1));
                        uint32_t o0, o1, o2, o3;
                        dev_philox(jb, i, bh, a.drop_c3, a.drop_k0, a.drop_k1, o0, o1, o2, o3);
                        W |= dev_keep8(o0, o1, o2, o3, a.drop_thr) << (8 * q);
                    }
#pragma unroll
                    for (int sl = 0; sl < 4; sl++) {
                        const uint32_t Ws = __shfl_sync(0xffffffffu, W, (lane & ~3) | sl) >> (2 * c);
#pragma unroll
                        for (int q = 0; q < 4 && 4 * h4 + q < G::NB / 2; q++) {
                            const int nb = 2 * (4 * h4 + q) + (sl >> 1);
                            kb[ms][sl & 1] |= ((Ws >> (8 * q)) & 3u) << (2 * nb);
                        }
                    }
                }
            }
#pragma unroll
            for (int ms = 0; ms < MS; ms++)
#pragma unroll
                for (int nb = 0; nb < G::NB; nb++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (!((kb[ms][e >> 1] >> (2 * nb + (e & 1))) & 1u)) s[ms][nb][e] = 0.f;
        }

        /* V landed; every warp is done with K, the window table and the ring */
        if constexpr (V90 && OV) cp_async_wait_1(); /* V of tile n; tile n + 1's K side may fly */
        else cp_async_wait_all();
        if constexpr (V90) DATTN_FWD_SM90_ONLY(fence_proxy_async()); /* V: cp.async -> wgmma */
        __syncthreads();
        /* BK: when tile n + 1 is a band tile its K side (window table, ring rows: the long one)
         * is loaded after the P V wgmma is issued (below), while it runs; other tiles keep this
         * order */
        const int kafter = BK && n + 1 < n_end && tile_class<D, NW, MS, BN, V90>(a, t, n0 + BN) == DATTN_CLS_BAND;
        /* SP: after the P V wgmma is issued (below), so that it runs during the load */
        if (!(V90 && OV) && !SP && n + 1 < n_end && !kafter) {
            fwd_load_k<D, NW, MS, BN, V90, LN, SP, 0, OG>(a, t, n + 1, ring_lo, ring_ok, mk0n, mk1n, mk2n, mk3n);
            cp_async_commit();
        }

        if constexpr (V90) {
            /* O += P V on wgmma (m64n64k16 x BN/16): P packed from the score accumulators
             * is the A fragment, V an MN-major (transposed) descriptor. Waited here: the V
             * buffer is reloaded after the next barrier and o is rescaled by the next
             * softmax. */
#if DATTN_FWD_HAVE_SM90
            /* SP: the K tile of tile n + 1 first (as early as the other variants load it), the
             * rest of its K side after P V is issued */
            if (SP && n + 1 < n_end) fwd_load_tile_at<D, NW, MS, BN, V90>(sK + t.kvoff, knext, a.k_sl, n0 + BN, len);
            uint32_t pa[MS][BN / 16][4];
#pragma unroll
            for (int ms = 0; ms < MS; ms++)
#pragma unroll
                for (int kk = 0; kk < BN / 16; kk++) {
                    pa[ms][kk][0] = pack2<BF>(s[ms][2 * kk][0], s[ms][2 * kk][1]);
                    pa[ms][kk][1] = pack2<BF>(s[ms][2 * kk][2], s[ms][2 * kk][3]);
                    pa[ms][kk][2] = pack2<BF>(s[ms][2 * kk + 1][0], s[ms][2 * kk + 1][1]);
                    pa[ms][kk][3] = pack2<BF>(s[ms][2 * kk + 1][2], s[ms][2 * kk + 1][3]);
                }
            wgmma_fence();
#pragma unroll
            for (int ms = 0; ms < MS; ms++)
#pragma unroll
                for (int kk = 0; kk < BN / 16; kk++)
                    wgmma_rs<D, BF, 1>(o[ms], pa[ms][kk], LN ? desc_add(dV0, (uint32_t)(kk * 2048)) : desc_mnmajor(sV, BN, kk), 1);
            wgmma_commit();
            /* SP: the rest of tile n + 1's K side (mask bytes, class, window table / ring rows or
             * saturated constants) while P V runs: every warp is done with tile n's (barrier
             * above), and P V reads only V and the P registers; one commit group with the K tile */
            if (SP && n + 1 < n_end) {
                fwd_load_k<D, NW, MS, BN, V90, LN, SP, 0, OG>(a, t, n + 1, ring_lo, ring_ok, mk0n, mk1n, mk2n, mk3n, &clsn);
                cp_async_commit();
            }
            /* BK: the same for a band tile n + 1 (every warp is done with tile n's K tile, window
             * table and ring: the V barrier above; P V reads V and the P registers only) */
            if (BK && kafter) {
                fwd_load_k<D, NW, MS, BN, V90, LN, SP, 0, OG>(a, t, n + 1, ring_lo, ring_ok, mk0n, mk1n, mk2n, mk3n);
                cp_async_commit();
            }
            wgmma_wait<0>();
#pragma unroll
            for (int ms = 0; ms < MS; ms++) reg_fence(o[ms]);
            /* BK: P's registers are read by the wgmma until the wait; keep them live to here */
            if constexpr (BK)
#pragma unroll
                for (int ms = 0; ms < MS; ms++) reg_fence(pa[ms]);
#endif
            if (SP) knext += (int64_t)BN * a.k_sl;
        }
        /* O += P V: each V fragment feeds MS strips */
#pragma unroll
        for (int kk = 0; kk < (V90 ? 0 : BN / 16); kk++) {
            uint32_t pa[MS][4];
#pragma unroll
            for (int ms = 0; ms < MS; ms++) {
                pa[ms][0] = pack2<BF>(s[ms][2 * kk][0], s[ms][2 * kk][1]);
                pa[ms][1] = pack2<BF>(s[ms][2 * kk][2], s[ms][2 * kk][3]);
                pa[ms][2] = pack2<BF>(s[ms][2 * kk + 1][0], s[ms][2 * kk + 1][1]);
                pa[ms][3] = pack2<BF>(s[ms][2 * kk + 1][2], s[ms][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < G::DB; dp += 2) {
                uint32_t r[4];
                ldsm_x4_trans(r, sV + swz<D>(16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8, dp + (lane >> 4)));
#pragma unroll
                for (int ms = 0; ms < MS; ms++) {
                    mma16816_acc<BF>(o[ms][dp], pa[ms], r[0], r[1]);
                    mma16816_acc<BF>(o[ms][dp + 1], pa[ms], r[2], r[3]);
                }
            }
        }
    }

    /* epilogue: normalize, padded rows, stage through shared memory, 16-byte stores */
    const float *vm = (a.hf && a.vmean) ? a.vmean + ((int64_t)b * a.H + h) * D : (const float *)0;
    const float dsc = a.drop_thr ? a.drop_scale : 1.f;
    /* HF padded rows under dropout are written by a separate kernel (their mean depends on
     * the row's mask); this kernel leaves them alone */
    const int padfix = a.drop_thr && a.hf && t.mrow;
    __syncthreads(); /* every warp is done with the p2c tile (it becomes the staging area) */
#pragma unroll
    for (int ms = 0; ms < MS; ms++) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            lrun[ms][r] += __shfl_xor_sync(0xffffffffu, lrun[ms][r], 1);
            lrun[ms][r] += __shfl_xor_sync(0xffffffffu, lrun[ms][r], 2);
            const int row = wr0 + 16 * ms + g + 8 * r, i = m0 + row;
            const int pad = i < len && t.mrow && t.mrow[(int64_t)i * a.m_sl] == 0;
            const float inv = lrun[ms][r] > 0.f ? dsc / lrun[ms][r] : 0.f;
#pragma unroll
            for (int db = 0; db < G::DB; db++) {
                float x0 = o[ms][db][2 * r] * inv, x1 = o[ms][db][2 * r + 1] * inv;
                if (pad) {
                    x0 = vm ? vm[8 * db + 2 * c] : 0.f;
                    x1 = vm ? vm[8 * db + 2 * c + 1] : 0.f;
                }
                *(uint32_t *)(smem + G::OFF_A + swz<D>(row, db) + 4 * c) = pack2<BF>(x0, x1);
            }
            if (a.lse && c == 0 && i < len)
                a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + i) * a.l_sl] =
                    pad ? (a.hf ? a.logL : neg_inf()) : (mrun[ms][r] + lg2f(lrun[ms][r])) * 0.69314718055994531f;
        }
    }
    __syncwarp();
    uint16_t *ob = (uint16_t *)a.out + (int64_t)b * a.o_sb + (int64_t)tok0 * a.o_sl + (int64_t)h * a.o_sh;
#pragma unroll
    for (int it = 0; it < G::WR * G::CPR / 32; it++) {
        const int idx = lane + 32 * it, row = idx / G::CPR, ch = idx % G::CPR;
        const int i = m0 + wr0 + row;
        if (i < len && !(padfix && t.mrow[(int64_t)i * a.m_sl] == 0))
            *(uint4 *)(ob + (int64_t)i * a.o_sl + ch * 8) =
                *(const uint4 *)(smem + G::OFF_A + swz<D>(wr0 + row, ch));
    }
}

#endif

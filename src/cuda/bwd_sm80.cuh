/* dattn backward, tensor-core kernels for sm_80 and newer (fp16 / bf16, fp32 accumulate).
 *
 * Two kernels with one body (template flag KV), FlashAttention-2 structure without
 * atomics: a CTA owns BM = 64 "row" tokens of one (sequence, head) (4 warps x 16 rows) and
 * walks the "column" tiles of BN tokens, recomputing the scores with both position terms
 * on chip exactly as the forward does (fwd_sm80.cuh: band tiles through a pk / pq ring and
 * skewed reads, saturated tiles as per-row / per-column constants).
 *
 *   KV = 0 (dq kernel)   rows = queries i, columns = keys j.
 *        X = Q, Y = K, Z = dO (row operand of dP), W = V; row-side table TR = pk (c2p),
 *        column-side table TC = pq (p2c).  dQ = dS K + C PK,  dpk partial = C^T Q.
 *   KV = 1 (dkdv kernel) rows = keys j, columns = queries i (everything transposed).
 *        X = K, Y = Q, Z = V, W = dO; TR = pq (p2c), TC = pk (c2p).
 *        dK = dS^T Q + C' PQ, dV = P^T dO,  dpq partial = C'^T K.
 *        In the row frame r' = row - col = j - i, and slot(i - j) = slot(-r') is
 *        non-increasing in r'; the ring / window code wants a non-decreasing map, so the
 *        kernel works with the reflected slot s' = 2S - 1 - slot(-r') (table row 2S-1-s').
 *
 * C (per CTA, shared memory, [BM][2S] fp16/bf16): C[x][t] = sum of ds over the columns y of
 * row x whose real slot slot(i - j) is t (band tiles scatter ds by slot, log-zone
 * collisions serialized over the 4 lanes of a row in a fixed order; saturated tiles sum
 * their rows in fp32 registers, added to the saturated slots at the end). Then the
 * row-side table's gradient part of dX is one MMA C . TR (instead of a skewed MMA per
 * tile) and the table gradient of the row block is C^T . X, written as an fp32 partial
 * [row block][2S][D] (only the slot range the block touches); a reduce kernel sums the
 * partials in row-block order (bitwise deterministic, one writer per cell).
 *
 * tc3 (template flag V3, bwd_tc3_d64.cu; the D = 64 default, DATTN_CUDA_BWD=tc2 pins round 2):
 * C is a sliding window of CW row-frame slots instead of all 2S. The slot map is monotone in
 * the row frame and each band tile's window lies below the previous one, so a 16-slot block
 * above the next band tile's window is final: bwd_v3_flush does its dX += C . TR (TR rows
 * still in the ring) and its partial, then zeroes the columns for the lower slots that reuse
 * them. Saturated-tile row sums become fp32 rank-1 terms. With BN = 32 the CTA needs ~103 KB:
 * two CTAs per SM. Every flush adds its blocks to dX in descending slot order, so the blocks
 * reach dX in one descending sequence whichever flush (in-loop or the end phase) takes each:
 * the order of the nonzero terms of dX does not depend on how many column tiles follow the
 * last valid one (padded == packed bitwise: masked tiles and blocks only add exact zeros).
 *
 * tc3b (V3 = 2, bwd_tc3b_d64.cu, the D = 64 default since 2026-11-30; DATTN_CUDA_BWD=tc3b): tc3 with a lean tile loop and
 * bitwise the same results: per-thread loader pointers and unguarded full tiles
 * (bwd_load2_ln), Y / W prefetch in both kernels, one fslot per window-table entry, the
 * saturated column-side rows staged once per row block (OFF_TS, fp32), the dropout test
 * hoisted out of the P / dS loop, and (dq kernel) dP before the saturated-constant barrier.
 *
 * tc3p (V3 = 3, bwd_tc3p_d64.cu, opt-in DATTN_CUDA_BWD=tc3p): tc3b whose dkdv kernel rounds P
 * once to the storage dtype for dV (one MMA per fragment; tc3b's hi + lo parts keep dV at
 * fp32-P accuracy with two). dQ, dK and the table gradients are bitwise tc3b's; dV is what
 * FlashAttention and transformers' eager path compute (P in the storage dtype times dO).
 *
 * tc3k (V3 = 5, bwd_tc3k_d64.cu, opt-in DATTN_CUDA_BWD=tc3k): tc3b with the saturated column
 * constants summed by all four warps (16-deep FFMA chains + two xor shuffles, fixed order:
 * deterministic, not bitwise tc3b) and, in the dkdv kernel, the column facts' raw lse / D_i
 * prefetched by cp.async with the next tile's Q / dO (OFF_CR).
 *
 * tc3s (V3 = 4, bwd_tc3s_d64.cu, opt-in DATTN_CUDA_BWD=tc3s): tc3b whose band tiles in the
 * log zone (the `serial` ones) scatter ds into C by runs of equal slots (bwd_scatter_runs:
 * fp32 run sums, one read-modify-write of C per run, all lanes at once) instead of four
 * serial passes; deterministic, not bitwise tc3b (C is rounded once per run).
 *
 * tc3c (V3 = 6, bwd_tc3c_d64.cu, DATTN_CUDA_BWD=tc3c, the previous default): tc3s and tc3k
 * together (the run-sum scatter, the four-warp saturated constants, the prefetched column
 * facts).
 *
 * tc3d (V3 = 7, bwd_tc3d_d64.cu, DATTN_CUDA_BWD=tc3d, the previous default): tc3c whose P / dS loop drops the
 * per-element tests where no element needs one (no mask; dq kernel: a full column tile): the
 * invalid rows / columns are folded into the exponent's additive term as lse = +inf (p =
 * exp2(-inf) = +0, the value tc3c selects), radd - lse is formed once per row and tile in the
 * dq kernel; bitwise tc3c.
 *
 * tc3e (V3 = 8, bwd_tc3e_d64.cu, DATTN_CUDA_BWD=tc3e, the previous default): tc3d whose dq kernel compiles
 * the column-tile body twice, for band tiles and for the others (plain / saturated), so that
 * those run none of the band path's tests and branches (its dkdv kernel is tc3d's: two bodies
 * spill it). Switched by the preprocessor (DATTN_BWD_TILE_CLASSES), not by V3 alone: see the
 * tile loop. Bitwise tc3d.
 *
 * tc3g (bwd_tc3g_d64.cu, DATTN_CUDA_BWD=tc3g, the default): tc3f (V3 = 9) whose dq kernel computes
 * D_i = dO_i . O_i of its rows in the row-block prologue (DATTN_BWD_DI_FUSED) and stores it for
 * the dkdv kernel (tc3f's, launched after it): no separate D_i launch. Bitwise tc3f.
 *
 * tc3t (bwd_tc3t_d64.cu, DATTN_CUDA_BWD=tc3t, opt-in, sm_90): tc3g's two kernels whose full
 * column tiles after a row block's first arrive by TMA (DATTN_BWD_TMA: two bulk tensor copies
 * per tile issued by one lane, mbarrier waits; tma.cuh). Bitwise tc3g; measured 1-5% slower
 * than tc3g (NOTES "tc3t: the backward's Y / W tiles by TMA, measured").
 *
 * ds enters the MMAs unscaled (p (dp - D)), the 1/scale goes on at the end (FA2 does the
 * same: fp16 keeps more of a small ds that way).
 *
 * Dropout: keep_ij / (1 - p) (bwd_keep_bits, the forward's Philox mask regenerated) scales
 * dp before ds = p (keep dp - D) and p in dV = (P keep)^T dO (HF padded rows: keep / len).
 *
 * Not covered here (launch.cu routes them to bwd_simple.cu): fp32, D not in {64, 128},
 * dropout at D = 128, 2S > 512, non-monotone slot maps, unaligned rows.
 */
#ifndef DATTN_CUDA_BWD_SM80_CUH
#define DATTN_CUDA_BWD_SM80_CUH

#include "fwd_sm80.cuh"
#include "tma.cuh"

#define DATTN_BWD_TC_SMAX 256 /* largest att span S on this path: C is [BM][2S + 8] */

template <bool B> struct dattn_bool_c { static constexpr bool value = B; };
template <int I> struct dattn_int_c { static constexpr int value = I; };
/* the tile classes a column-tile body is compiled for (tc3e, DATTN_BWD_TILE_CLASSES): band,
 * not band (plain or saturated, tested at run time) */
enum { BWD_KC_BAND = 1, BWD_KC_NOBAND = 2 };
#ifndef DATTN_BWD_TILE_CLASSES
#define DATTN_BWD_TILE_CLASSES 0
#endif
/* tc3g (bwd_tc3g_d64.cu): tc3f whose dq kernel computes D_i of its rows itself (no separate
 * D_i launch); a preprocessor switch like DATTN_BWD_TILE_CLASSES (V3 stays 9: everything
 * else is tc3f's code) */
#ifndef DATTN_BWD_DI_FUSED
#define DATTN_BWD_DI_FUSED 0
#endif
/* tc3t (bwd_tc3t_d64.cu): tc3g (both kernels) whose prefetch of a full column tile's Y / W is
 * two bulk tensor copies issued by one thread (tma.cuh) instead of four cp.async per thread; a
 * preprocessor switch like the two above (V3 stays 9) */
#ifndef DATTN_BWD_TMA
#define DATTN_BWD_TMA 0
#endif

template <int D, int BN, int V3 = 0>
struct bwd_geom {
    static constexpr int NW = 4;
    static constexpr int BM = 64;
    static constexpr int NTHR = 32 * NW;
    static constexpr int RB = 2 * D;
    static constexpr int CPR = D / 8;
    static constexpr int KS = D / 16;
    static constexpr int NB = BN / 8;
    static constexpr int DB = D / 8;
    static constexpr int NG = BN + 16;
    static constexpr int PC = NG + 8;
    static constexpr int PP = BN + 8;
    static constexpr int NWIN = BM + BN - 1;
    static constexpr int NT = BM + BN;
    /* ring rows; tc3 (V3): >= the first band tile's rows [slo, shi | 15] (NWIN + 15) */
    static constexpr int RC = V3 ? (BM + BN - 1 + 15 + 15) / 16 * 16 : BM + BN;
    /* tc3: columns of the sliding C window (fslot s lives in column s % CW); the live
     * 16-slot blocks [slo & ~15, roundup16(shi + 1)) of a band tile span <= NWIN + 16 */
    static constexpr int CW = (BM + BN - 1 + 15 + 15) / 16 * 16;
    static constexpr int NSB = BN / 16;
    static constexpr int PARTS = NW / NSB;
    static constexpr int NBH = (BM + 16) / 8;
    static constexpr int NBP = (NBH + PARTS - 1) / PARTS;
    static constexpr int ZREG = D <= 64; /* dP row operand kept in registers */
    static constexpr int XREG = D <= 64; /* score row operand kept in registers */
    static constexpr int OFF_X = 0;
    static constexpr int OFF_Z = OFF_X + BM * RB;
    static constexpr int OFF_Y = OFF_Z + BM * RB;
    static constexpr int OFF_W = OFF_Y + BN * RB; /* Y, W of even tiles; odd: + YWB */
    static constexpr int YWB = 2 * BN * RB;                          /* one Y + W buffer */
    static constexpr int OFF_SP = OFF_Y + 2 * YWB;                   /* col-side skew tile */
    static constexpr int OFF_SC = OFF_SP + DATTN_ALIGN128(BM * PP * 4); /* row-side scratch */
    static constexpr int OFF_T = OFF_SC + DATTN_ALIGN128(NW * 16 * PC * 4);
    static constexpr int OFF_SL = OFF_T + DATTN_ALIGN128(NT * 4);
    static constexpr int OFF_PS = OFF_SL + DATTN_ALIGN128(NT * 4);
    static constexpr int OFF_CL = OFF_PS + DATTN_ALIGN128(BN * 4);  /* column lse2 (KV) */
    static constexpr int OFF_CD = OFF_CL + DATTN_ALIGN128(BN * 4);  /* column D (KV) */
    static constexpr int OFF_CF = OFF_CD + DATTN_ALIGN128(BN * 4);  /* column flags (KV) */
    static constexpr int OFF_KB = OFF_CF + DATTN_ALIGN128(BN * 4);  /* dropout keep bits */
    static constexpr int OFF_UR = OFF_KB + DATTN_ALIGN128(NTHR * 4); /* partial's written range */
    /* tc3t: in the same 128 bytes, after the int words sur[0..4]: the Y / W buffers' mbarriers
     * (two 8-byte words), then the row block's Y and W sources for the cp.async loads (tile 0,
     * a partial last tile; two pointers), read by every thread where it loads instead of two
     * 64-bit pointers held across the tiles, and the dropout counter word bh (an int; its
     * Philox product, hoisted out of the tile loop, spilled the dkdv kernel) */
    static constexpr int OFF_MB = OFF_UR + 64;
    static constexpr int OFF_MC = OFF_UR + 80;
    static constexpr int OFF_RK = OFF_UR + 128;
    static constexpr int OFF_RQ = OFF_RK + RC * RB;
    static constexpr int OFF_CS = OFF_RQ + RC * RB;
    static constexpr int OFF_TAB = OFF_CS + DATTN_ALIGN128(2 * BM * 4);
    /* tc3b (V3 == 2, the lean tile loop): the column-side table's two saturated rows as
     * fp32 [2][D] (sat_hi, sat_lo), read by the saturated column constants of every tile */
    static constexpr int OFF_TS = OFF_TAB + DATTN_ALIGN128(DATTN_CUDA_TAB_MAX * 2);
    /* tc3k (V3 == 5): the raw lse / D_i of the dkdv kernel's next column tile, [2][BN] fp32
     * (cp.async with the tile's Q / dO; lane y of warp 0 copies and reads column y) */
    static constexpr int OFF_CR = OFF_TS + (V3 >= 2 ? DATTN_ALIGN128(2 * D * 4) : 0);
    /* tc3s (V3 == 4): the window slots sSl in reverse order (bwd_scatter_runs) */
    static constexpr int OFF_SR = OFF_CR + (V3 >= 5 ? DATTN_ALIGN128(2 * BN * 4) : 0);
    /* tc3f (V3 == 9): the dkdv kernel's saturated-tile row sums of ds, [NTHR] float4 per
     * thread (rs_hi[0..1], rs_lo[0..1]), out of the registers of the tile loop */
    static constexpr int OFF_RA = OFF_SR + (V3 == 4 || V3 >= 6 ? DATTN_ALIGN128(NT * 4) : 0);
    static constexpr int OFF_C = OFF_RA + (V3 >= 9 ? DATTN_ALIGN128(NTHR * 16) : 0);
    static constexpr int SMEM_FIXED = OFF_C;
    static_assert(D == 64 || D == 128, "head dim");
    static_assert(BN == 32 || BN == 64, "column tile");
    static_assert(NW % NSB == 0, "col-side split");
    static_assert(PC % 16 == 8 && PP % 16 == 8, "pitch");
    static_assert(RC >= 64, "the end phase stages 64 table rows in the ring");
    static_assert(!V3 || (RC >= NWIN + 15 && CW % 16 == 0 && CW >= NWIN + 15), "tc3 window");
};

/* tc3f: threadIdx.x through a volatile read (ptx.cuh tid_x_volatile), so that ptxas recomputes
 * what a row block derives from it where it is used instead of hoisting it out of the
 * row-block loop into a register held across the tiles (the values it spilled in tc3f's dkdv
 * kernel) */
DATTN_DEV int bwd_tid_remat() { return (int)tid_x_volatile(); }

/* C pitch (elements) for att span S: (2S + 8) * 2 bytes = 16 mod 128 when S % 16 == 0 */
DATTN_DEV int bwd_cpitch(int S) { return 2 * S + 8; }

/* Real slot range touched by row block m0 (rows m0..m0+63; columns 0..len-1). */
DATTN_DEV void bwd_tc_range(const dattn_fwd_args &a, const uint16_t *tab, int KV, int m0, int len,
                            int &tlo, int &thi)
{
    int rmin, rmax;
    if (!KV) {
        rmin = m0 - (len - 1);
        rmax = m0 + 63;
    } else {
        rmin = -(m0 + 63);
        rmax = len - 1 - m0;
    }
    tlo = dev_slot(a, tab, rmin);
    thi = dev_slot(a, tab, rmax);
}

/* row-frame slot (what the ring is indexed by) of row-frame distance rr = row - col */
template <int KV>
DATTN_DEV int bwd_fslot(const dattn_fwd_args &a, const uint16_t *tab, int rr)
{
    return KV ? 2 * a.S - 1 - dev_slot(a, tab, -rr) : dev_slot(a, tab, rr);
}

template <int KV>
DATTN_DEV int bwd_rslot(const dattn_fwd_args &a, const uint16_t *tab, int rr)
{
    return KV ? dev_slot(a, tab, -rr) : dev_slot(a, tab, rr);
}

/* The two A fragments (k chunks kc..kc+3) of a warp's 16-row strip: from registers, or
 * from the swizzled tile at sbase (rows wr0..wr0+15) when registers are short (D = 128). */
template <int D, int REG, int NK>
DATTN_DEV void bwd_afrag(uint32_t (&o)[2][4], const uint32_t (&f)[NK][4], uint32_t sbase, int wr0, int kc)
{
    const int lane = threadIdx.x & 31;
    if (REG) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            o[0][e] = f[REG ? kc / 2 : 0][e];
            o[1][e] = f[REG ? kc / 2 + 1 : 0][e];
        }
    } else {
        ldsm_x4(o[0], sbase + swz<D>(wr0 + (lane & 7) + ((lane >> 3) & 1) * 8, kc + (lane >> 4)));
        ldsm_x4(o[1], sbase + swz<D>(wr0 + (lane & 7) + ((lane >> 3) & 1) * 8, kc + 2 + (lane >> 4)));
    }
}

template <int BN> struct bwd_vtype { typedef uint64_t T; };
template <> struct bwd_vtype<32> { typedef uint32_t T; };

/* Dropout keep bits of a warp's 16 x (8 NB) score block (dattn.h DROPOUT; the mask of
 * dev_keep / the forward, counter (j >> 3, i, b H + h, c3), bit j & 7 of dev_keep8). Bit
 * r * 2 NB + 2 nb + (e & 1) of the result is element (nb, e) of the lane's fragment (row
 * g + 8 r, column 8 nb + 2 c + (e & 1)). xr0: in-sequence position of the warp's first
 * row (a multiple of 16), y0: of the tile's first column (a multiple of 8).
 * One Philox call yields 8 consecutive j, so lanes share calls and gather bytes:
 *   KV = 0 (rows i, columns j): the quad g (lanes c = 0..3) holds the 8 keys of a block for
 *     rows g, g + 8: 2 NB calls, lane c makes those of row g + 8 (c & 1), blocks
 *     2 t + (c >> 1) (byte t); four shuffles gather them;
 *   KV = 1 (rows j, columns i): the 8 lanes g = 0..7 of one c hold the 8 keys j = xr0 +
 *     8 r + g of a column i: 4 NB calls (one per result bit k), lane g makes k = 8 t + g
 *     (byte t, bit g' of it is lane g''s bit); eight shuffles gather them.
 * Every lane makes NB / 2 Philox calls (rolled loop: few live registers). */
template <int NB, int KV>
DATTN_DEV uint32_t bwd_keep_bits(const dattn_fwd_args &a, uint32_t bh, int xr0, int y0)
{
    static_assert(4 * NB <= 32 && NB % 2 == 0, "keep bits");
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    uint32_t W = 0;
#pragma unroll 1
    for (int t = 0; t < NB / 2; t++) {
        uint32_t jb, i;
        if (!KV) {
            i = (uint32_t)(xr0 + g + 8 * (c & 1));
            jb = (uint32_t)(y0 >> 3) + (uint32_t)(2 * t + (c >> 1));
        } else {
            const int k = 8 * t + g, r = k / (2 * NB), nb = (k % (2 * NB)) >> 1;
            jb = (uint32_t)(xr0 >> 3) + (uint32_t)r;
            i = (uint32_t)(y0 + 8 * nb + 2 * c + (k & 1));
        }
        uint32_t o0, o1, o2, o3;
        dev_philox(jb, i, bh, a.drop_c3, a.drop_k0, a.drop_k1, o0, o1, o2, o3);
        W |= dev_keep8(o0, o1, o2, o3, a.drop_thr) << (8 * t);
    }
    uint32_t res = 0;
    if (!KV) {
        /* byte t of lane sl of the quad: row g + 8 (sl & 1), block 2 t + (sl >> 1); this
         * lane's keys are its bits 2 c, 2 c + 1 */
#pragma unroll
        for (int sl = 0; sl < 4; sl++) {
            const uint32_t Ws = __shfl_sync(0xffffffffu, W, (lane & ~3) | sl) >> (2 * c);
#pragma unroll
            for (int t = 0; t < NB / 2; t++) {
                const int r = sl & 1, nb = 2 * t + (sl >> 1);
                res |= ((Ws >> (8 * t)) & 3u) << (r * 2 * NB + 2 * nb);
            }
        }
    } else {
        /* byte t of lane g = sl of this c: result bit k = 8 t + sl; this lane's row is bit g */
        const uint32_t m = NB == 8 ? 0x01010101u : (NB == 6 ? 0x010101u : (NB == 4 ? 0x0101u : 0x01u));
#pragma unroll
        for (int sl = 0; sl < 8; sl++) {
            const uint32_t Ws = __shfl_sync(0xffffffffu, W, (sl << 2) | c) >> g;
            res |= (Ws & m) << sl;
        }
    }
    return res;
}

/* cp.async of the Y and W rows n0 .. n0 + BN - 1 (zeros past len) into the buffer at sY
 * (W right after Y); not committed. */
template <int D, int BN>
DATTN_DEV void bwd_load_yw(uint32_t sY, const uint16_t *yb, int64_t y_sl, const uint16_t *wb, int64_t w_sl,
                           int n0, int len)
{
    constexpr int CPR = D / 8, NTHR = 128;
    const uint32_t sW = sY + BN * 2 * D;
    for (int idx = threadIdx.x; idx < BN * CPR; idx += NTHR) {
        const int row = idx / CPR, ch = idx % CPR, y = n0 + row;
        const int ok = y < len;
        cp_async16(sY + swz<D>(row, ch), yb + (int64_t)(ok ? y : 0) * y_sl + ch * 8, ok ? 16 : 0);
        cp_async16(sW + swz<D>(row, ch), wb + (int64_t)(ok ? y : 0) * w_sl + ch * 8, ok ? 16 : 0);
    }
}

/* tc3b (lean loop): ROWS rows n0 .. n0 + ROWS - 1 of two tensors through this thread's
 * source pointers (p0 / p1: row tid / CPR, chunk tid % CPR of row 0 of the sequence) and its
 * chunk offset off = swz(tid / CPR, tid % CPR) in the destination tiles s0 / s1: pass it is row
 * tid / CPR + 16 it, i.e. source + 16 it rows, destination + 16 it row pitches (16 % 8 == 0
 * keeps the swizzle key). The same chunks at the same places as bwd_load_yw; a fully valid
 * tile (n0 + ROWS <= len) loads with no bounds check, the last one zero-fills rows >= len
 * (source: row 0, 0 bytes read). Not committed. */
template <int D, int ROWS>
DATTN_DEV void bwd_load2_ln(uint32_t s0, const uint16_t *p0, int64_t sl0, uint32_t s1, const uint16_t *p1,
                            int64_t sl1, uint32_t off, int n0, int len)
{
    constexpr int CPR = D / 8, NTHR = 128, RPI = NTHR / CPR, RB = 2 * D;
    static_assert(NTHR % CPR == 0 && RPI % 8 == 0 && ROWS % RPI == 0, "lean loader geometry");
    const uint16_t *a0 = p0 + (int64_t)n0 * sl0, *a1 = p1 + (int64_t)n0 * sl1;
    s0 += off;
    s1 += off;
    if (n0 + ROWS <= len) {
#pragma unroll
        for (int it = 0; it < ROWS / RPI; it++) {
            cp_async16(s0 + it * RPI * RB, a0 + (int64_t)(it * RPI) * sl0, 16);
            cp_async16(s1 + it * RPI * RB, a1 + (int64_t)(it * RPI) * sl1, 16);
        }
    } else {
        const int row0 = (int)threadIdx.x / CPR;
#pragma unroll
        for (int it = 0; it < ROWS / RPI; it++) {
            const int ok = n0 + row0 + it * RPI < len;
            cp_async16(s0 + it * RPI * RB, ok ? a0 + (int64_t)(it * RPI) * sl0 : p0 - (int64_t)row0 * sl0, ok ? 16 : 0);
            cp_async16(s1 + it * RPI * RB, ok ? a1 + (int64_t)(it * RPI) * sl1 : p1 - (int64_t)row0 * sl1, ok ? 16 : 0);
        }
    }
}

/* tc3s (V3 == 4): the scatter of a warp's ds (16 rows x BN = 32 columns, mma fragments s) into
 * C on a band tile that reaches the log zone or the saturated slots, without serial passes.
 * The slot of column y of row xl is sSl[xl - y + BN - 1], non-increasing in y, so the columns
 * of a row that share a slot form runs of consecutive columns. ds goes through the warp's
 * scratch sd (fp32; the row-side skew scratch, free after S), mirrored so that lane (xr =
 * lane & 15, hh = lane >> 4) holds row xr's columns 15, 14, .., 0 (hh = 0) or 16, 17, .., 31
 * (hh = 1) as v[0..15], counted from the middle of the row outwards; sSr (the window slots in
 * reverse) gives the right half its slots in the same order. Each lane sums its runs from the
 * outside in (v[k] = v[k] + v[k + 1] while position k + 1 has k's slot), so a run's sum ends
 * at its position nearest the middle; a run across the middle (v[0] of both halves) is added
 * into the left half's v[0] (left part + right part) and written by the left half alone.
 * Then that position of each run (and only it) adds its run's sum to C: one fp16
 * read-modify-write per run, every lane at once (the runs of a row hold distinct slots: no
 * two lanes write one cell). The order of the additions depends only on the slots and the
 * column positions (padded == packed and run to run bitwise); it is not tc3b's order (fewer
 * roundings of C). */
template <int BN, int BF>
DATTN_DEV void bwd_scatter_runs(const float (&s)[BN / 8][4], float *sd, const int *sSl, const int *sSr, uint16_t *sC,
                                int CPT, int wr0, int lane)
{
    static_assert(BN == 32, "two lanes per row, 16 columns each");
    constexpr int SDP = 40; /* scratch pitch (floats): conflict-free float2 stores */
    constexpr int SCG = 8;  /* positions per group of C loads (registers: the dkdv kernel) */
    const int g = lane >> 2, c = lane & 3;
    __syncwarp(); /* the warp's reads of its scratch (the skewed S) are done */
    /* column y at scratch position 15 - y (y < 16) or y */
#pragma unroll
    for (int nb = 0; nb < BN / 8; nb++) {
        const int p = nb < 2 ? 14 - 8 * nb - 2 * c : 8 * nb + 2 * c;
        *(float2 *)(sd + g * SDP + p) = nb < 2 ? make_float2(s[nb][1], s[nb][0]) : make_float2(s[nb][0], s[nb][1]);
        *(float2 *)(sd + (g + 8) * SDP + p) = nb < 2 ? make_float2(s[nb][3], s[nb][2]) : make_float2(s[nb][2], s[nb][3]);
    }
    __syncwarp();
    const int xr = lane & 15, hh = lane >> 4, xl = wr0 + xr;
    float v[16];
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const float4 f = *(const float4 *)(sd + xr * SDP + 16 * hh + 4 * q);
        v[4 * q] = f.x;
        v[4 * q + 1] = f.y;
        v[4 * q + 2] = f.z;
        v[4 * q + 3] = f.w;
    }
    /* slots of positions k: column 15 - k (window entry xl + 16 + k) or column 16 + k (entry
     * xl + 15 - k = NT - 1 - (80 - xl + k) for BM 64, BN 32) */
    const int *ts = hh ? sSr + (BN + 48 - xl) : sSl + (xl + 16);
    int t[16];
#pragma unroll
    for (int k = 0; k < 16; k++) t[k] = ts[k];
    /* run sums towards the middle */
#pragma unroll
    for (int k = 14; k >= 0; k--)
        if (t[k] == t[k + 1]) v[k] = v[k] + v[k + 1];
    /* columns 15 and 16 in one run: the left half writes it, with the right half's part */
    const int to = __shfl_xor_sync(0xffffffffu, t[0], 16);
    const float vo = __shfl_xor_sync(0xffffffffu, v[0], 16);
    const int link = t[0] == to;
    if (link && !hh) v[0] = v[0] + vo;
    /* the position of each run nearest the middle: C += the run's sum (a group's loads
     * before its stores: the cells are distinct) */
    uint16_t *cr = sC + xl * CPT;
#pragma unroll
    for (int k0 = 0; k0 < 16; k0 += SCG) {
        float old[SCG];
#pragma unroll
        for (int k = k0; k < k0 + SCG; k++)
            if (k ? t[k] != t[k - 1] : !(link && hh)) old[k - k0] = h2f<BF>(cr[t[k]]);
#pragma unroll
        for (int k = k0; k < k0 + SCG; k++)
            if (k ? t[k] != t[k - 1] : !(link && hh)) cr[t[k]] = f2h<BF>(old[k - k0] + v[k]);
    }
}

/* tc3 (V3): flush the row-frame slot blocks [blo, bhi) (multiples of 16) of the sliding C
 * window: dX += C . TR (blocks in descending order: see the top comment) and partial (+)= C^T X (stored where the CTA's partial has not been
 * written yet, added elsewhere; real slot = KV ? 2S - 1 - fslot : fslot), then zero their C
 * columns for the lower slots that reuse them. Blocks outside [sclo, stop] were never
 * scattered: they are zero (their C columns may belong to live slots, so they are not
 * read): no dX, zeros to the partial. fromring: the TR rows are in the ring (in-loop
 * flush: the blocks lie in the ring's valid rows); else each 64-slot chunk is staged. */
template <int D, int BN, int BF, int KV, int V3 = 1>
DATTN_DEV void bwd_v3_flush(const dattn_bwd_args &A, int h, float (&dx)[D / 8][4], int blo, int bhi,
                            int fromring, int sclo, int stop, const uint16_t *trh, int64_t tr_ss)
{
    typedef bwd_geom<D, BN, V3> G; /* (tc3b: C lies 512 bytes further) */
    const dattn_fwd_args &a = A.f;
    extern __shared__ __align__(128) char smem[];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
    const int S2 = 2 * a.S, CPT = G::CW + 8, wr0 = 16 * w;
    const uint32_t sCa = smem_u32(smem + G::OFF_C), rk = smem_u32(smem + G::OFF_RK);
    const uint32_t sX = smem_u32(smem + G::OFF_X);
    const float isc = A.inv_scale;
    float *part = (KV ? A.ppq : A.ppk) + ((int64_t)h * gridDim.x + blockIdx.x) * (int64_t)S2 * D;
    const volatile int *sur = (const volatile int *)(smem + G::OFF_UR);
    const int ulo = sur[0], uhi = sur[1];
    /* the partial's cells of block s0 that this lane owns: rows s0 + g, s0 + g + 8 (real slots
     * reflected in the dkdv kernel), columns 8 (DBW w + j) + 2 c, j < DBW */
    constexpr int DBW = G::DB / G::NW;
    static_assert(G::DB % G::NW == 0 && DBW % 2 == 0, "flush partial: n8 pairs per warp");
    auto cells = [&](int s0, float2 *&p0, float2 *&p1) {
        const int f0 = s0 + g, f1 = s0 + g + 8;
        const int tr0 = KV ? S2 - 1 - f0 : f0, tr1 = KV ? S2 - 1 - f1 : f1;
        p0 = (float2 *)(part + (int64_t)tr0 * D + 8 * DBW * w + 2 * c);
        p1 = (float2 *)(part + (int64_t)tr1 * D + 8 * DBW * w + 2 * c);
    };
    auto fresh_of = [&](int s0) {
        const int r0 = KV ? S2 - 16 - s0 : s0; /* real start of the block */
        return r0 < ulo || r0 >= uhi;
    };
    /* The old values of the first chunk's first two blocks (an in-loop flush has one or two)
     * are loaded here, before the barrier and the dX products, so that their L2 round trip
     * runs under those (loaded after the products, it was ~9% of the kernels' samples at B32
     * L512: NOTES "Flush balanced") */
    float2 pre[2][2][DBW];
    {
        const int c0 = max(bhi - 64, blo);
#pragma unroll
        for (int bb = 0; bb < 2; bb++) {
            const int s0 = c0 + 16 * bb;
            if (s0 < bhi && !fresh_of(s0)) {
                float2 *p0, *p1;
                cells(s0, p0, p1);
#pragma unroll
                for (int j = 0; j < DBW; j++) pre[bb][0][j] = p0[4 * j], pre[bb][1][j] = p1[4 * j];
            }
        }
    }
#pragma unroll 1
    for (int t1 = bhi; t1 > blo; t1 -= 64) {
        const int t0 = max(t1 - 64, blo);
        __syncthreads(); /* C complete; (staging) the ring is free */
        if (!fromring) {
            for (int idx = tid; idx < (t1 - t0) * G::CPR; idx += G::NTHR) {
                const int sl = t0 + idx / G::CPR, ch = idx % G::CPR;
                const int real = KV ? S2 - 1 - sl : sl;
                cp_async16(rk + swz<D>(sl % G::RC, ch), trh + (int64_t)real * tr_ss + ch * 8, 16);
            }
            cp_async_commit();
            cp_async_wait_all();
            __syncthreads();
        }
        /* dX += C . TR (every warp its 16 rows), blocks in descending order */
#pragma unroll 1
        for (int s0 = t1 - 16; s0 >= t0; s0 -= 16) {
            if (s0 < sclo || s0 > stop) continue;
            uint32_t ca[4];
            ldsm_x4(ca, sCa + (uint32_t)(((wr0 + (lane & 7) + ((lane >> 3) & 1) * 8) * CPT + s0 % G::CW + 8 * (lane >> 4)) * 2));
#pragma unroll
            for (int dq2 = 0; dq2 < G::DB; dq2 += 2) {
                uint32_t r[4];
                ldsm_x4_trans(r, rk + swz<D>((s0 + (lane & 7) + ((lane >> 3) & 1) * 8) % G::RC, dq2 + (lane >> 4)));
                mma16816_acc<BF>(dx[dq2], ca, r[0], r[1]);
                mma16816_acc<BF>(dx[dq2 + 1], ca, r[2], r[3]);
            }
        }
        /* partial (+)= C^T X: every warp takes its DBW n8 columns (a quarter of D) of every
         * block of the chunk, so that the four warps share the work whatever the number of
         * blocks (one warp per block left three of four waiting at the barrier below when a
         * band tile flushed its usual one or two blocks: NOTES "Flush balanced"). A cell
         * (slot, d) is always this lane's of warp d / (8 DBW), and its value is the same
         * HMMA chain over kk as before (bitwise). */
#pragma unroll 1
        for (int s0 = t0; s0 < t1; s0 += 16) {
            const int fresh = fresh_of(s0);
            float2 *p0, *p1;
            cells(s0, p0, p1);
            float2 o0[DBW], o1[DBW];
            if (!fresh) {
                const int bb = t1 == bhi ? (s0 - t0) >> 4 : 2; /* prefetched above: 0, 1 */
#pragma unroll
                for (int j = 0; j < DBW; j++) {
                    if (bb < 2) o0[j] = bb ? pre[1][0][j] : pre[0][0][j], o1[j] = bb ? pre[1][1][j] : pre[0][1][j];
                    else o0[j] = p0[4 * j], o1[j] = p1[4 * j];
                }
            }
            float acc[DBW][4];
#pragma unroll
            for (int j = 0; j < DBW; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
            if (s0 >= sclo && s0 <= stop) {
#pragma unroll
                for (int kk = 0; kk < G::BM / 16; kk++) {
                    uint32_t ca[4];
                    const int mi = lane >> 3;
                    ldsm_x4_trans(ca, sCa + (uint32_t)(((16 * kk + (lane & 7) + ((mi >> 1) & 1) * 8) * CPT + s0 % G::CW + (mi & 1) * 8) * 2));
#pragma unroll
                    for (int j = 0; j < DBW; j += 2) {
                        uint32_t r[4];
                        ldsm_x4_trans(r, sX + swz<D>(16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8, DBW * w + j + (lane >> 4)));
                        mma16816_acc<BF>(acc[j], ca, r[0], r[1]);
                        mma16816_acc<BF>(acc[j + 1], ca, r[2], r[3]);
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < DBW; j++) {
                float2 v0 = make_float2(acc[j][0] * isc, acc[j][1] * isc);
                float2 v1 = make_float2(acc[j][2] * isc, acc[j][3] * isc);
                if (!fresh) {
                    v0.x += o0[j].x, v0.y += o0[j].y;
                    v1.x += o1[j].x, v1.y += o1[j].y;
                }
                p0[4 * j] = v0;
                p1[4 * j] = v1;
            }
        }
        __syncthreads(); /* every warp has read the chunk's C columns */
#pragma unroll 1
        for (int s0 = t0; s0 < t1; s0 += 16) {
            if (s0 < sclo || s0 > stop) continue;
            for (int idx = tid; idx < G::BM * 8; idx += G::NTHR)
                ((uint32_t *)(smem + G::OFF_C))[((idx >> 3) * CPT + s0 % G::CW) / 2 + (idx & 7)] = 0u;
        }
    }
}

/* One row block (m0, 64 rows) of sequence b, head h. Its table gradient goes into the
 * CTA's fp32 partial [2S][D]; shared int pair OFF_UR = [lo, hi): the 16-slot blocks of it
 * already written by earlier row blocks of this CTA (stored there, added elsewhere; the
 * range of every row block holds slot(0), so the union stays an interval). */
template <int D, int BN, int BF, int KV, int V3>
DATTN_DEV void bwd_sm80_unit(const dattn_bwd_args &A, const dattn_bwd_maps *T, int b, int h, int m0)
{
    typedef bwd_geom<D, BN, V3> G;
    /* tc3b (V3 == 2): the lean tile loop, the same arithmetic as tc3 (bitwise) */
    constexpr int LN = V3 >= 2;
    /* tc3p (V3 == 3): tc3b with P rounded once to the storage dtype for dV */
    constexpr int P1 = V3 == 3;
    /* tc3k (V3 == 5): tc3b with the saturated column constants on all four warps */
    constexpr int SK = V3 == 5 || V3 == 6 || V3 == 7 || V3 == 8 || V3 == 9;
    /* tc3s (V3 == 4): the run-sum scatter of log-zone band tiles; tc3c (V3 == 6): tc3s + tc3k */
    constexpr int RS = V3 == 4 || V3 == 6 || V3 == 7 || V3 == 8 || V3 == 9;
    /* tc3d (V3 == 7): tc3c with the lean P / dS loop (bitwise tc3c) */
    constexpr int LP = V3 == 7 || V3 == 8 || V3 == 9;
    /* tc3e (V3 == 8): tc3d with the column-tile body compiled per tile class (bitwise tc3d) */
    constexpr int CS = V3 == 8 || V3 == 9;
    /* tc3f (V3 == 9): tc3e whose dkdv kernel takes the two bodies too (bitwise tc3e) */
    /* tc3t (DATTN_BWD_TMA, V3 == 9, sm_90): full column tiles after the first come by TMA */
    constexpr int TM = DATTN_BWD_TMA;
    static_assert(!TM || (V3 == 9 && D == 64), "tc3t: tc3f's loop, 128-byte rows");
    static_assert(!TM || (G::OFF_MC + 20 <= G::OFF_RK && G::OFF_MC % 8 == 0), "tc3t words");
    static_assert(!TM || (G::OFF_Y % 1024 == 0 && G::YWB % 1024 == 0 && BN * G::RB % 1024 == 0),
                  "tc3t: every Y / W tile on a 1024-byte boundary (the 128-byte swizzle's atom)");
    const dattn_fwd_args &a = A.f;
    extern __shared__ __align__(128) char smem[];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
    int tok0, len;
    dev_seq(a, b, tok0, len);
    if (m0 >= len) return;
    const int S2 = 2 * a.S, CPT = V3 ? G::CW + 8 : bwd_cpitch(a.S);
    const int rowpos = KV ? a.p2c : a.c2p; /* row-side term (and table gradient) */
    const int colpos = KV ? a.c2p : a.p2c;
    const int use_pos = a.c2p | a.p2c;

    const uint16_t *qb = (const uint16_t *)a.q + (int64_t)b * a.q_sb + (int64_t)tok0 * a.q_sl + (int64_t)h * a.q_sh;
    const uint16_t *kb = (const uint16_t *)a.k + (int64_t)b * a.k_sb + (int64_t)tok0 * a.k_sl + (int64_t)h * a.k_sh;
    const uint16_t *vb = (const uint16_t *)a.v + (int64_t)b * a.v_sb + (int64_t)tok0 * a.v_sl + (int64_t)h * a.v_sh;
    const uint16_t *gb = (const uint16_t *)A.dout + (int64_t)b * A.do_sb + (int64_t)tok0 * A.do_sl + (int64_t)h * A.do_sh;
    const uint16_t *xb = KV ? kb : qb, *yb = KV ? qb : kb, *zb = KV ? vb : gb, *wb = KV ? gb : vb;
    const int64_t x_sl = KV ? a.k_sl : a.q_sl, y_sl = KV ? a.q_sl : a.k_sl;
    const int64_t z_sl = KV ? a.v_sl : A.do_sl, w_sl = KV ? A.do_sl : a.v_sl;
    const uint16_t *pkh = a.c2p ? (const uint16_t *)a.pk + (int64_t)h * a.pk_sh : (const uint16_t *)0;
    const uint16_t *pqh = a.p2c ? (const uint16_t *)a.pq + (int64_t)h * a.pq_sh : (const uint16_t *)0;
    if (TM && tid == 0) {
        /* tc3t: the row block's words (OFF_MC), and its two barriers afresh: every phase of the
         * previous row block's was completed and waited for before the barriers that end it,
         * so the k-th copy pair of a buffer in this row block completes phase k (parity k & 1;
         * the tile loop derives k from the tile index) */
        ((const uint16_t **)(smem + G::OFF_MC))[0] = yb;
        ((const uint16_t **)(smem + G::OFF_MC))[1] = wb;
        ((int *)(smem + G::OFF_MC))[4] = (int)((uint32_t)b * (uint32_t)a.H + (uint32_t)h); /* bh, below */
        for (int j = 0; j < 2; j++) {
            mbar_inval(smem_u32(smem + G::OFF_MB + 8 * j));
            mbar_init(smem_u32(smem + G::OFF_MB + 8 * j), 1);
        }
        mbar_init_fence();
    }
    const uint16_t *trh = KV ? pqh : pkh, *tch = KV ? pkh : pqh;
    const int64_t tr_ss = KV ? a.pq_ss : a.pk_ss, tc_ss = KV ? a.pk_ss : a.pq_ss;
    const uint8_t *mrow = a.mask ? a.mask + (int64_t)b * a.m_sb : (const uint8_t *)0;
    const float L2E = 1.4426950408889634f;

    /* the log-zone slot table; tc3 (V3): copied once per CTA by bwd_sm80_body (the same for
     * every row block; per row block the copy from the parameter bank cost ~1% at B32 L512);
     * the round-2 kernels copy it here (moved, the D = 128 dkdv kernel spills 4 bytes) */
    uint16_t *stab = (uint16_t *)(smem + G::OFF_TAB);
    if (!V3 && use_pos)
        for (int i = tid; i < 2 * a.nlog; i += G::NTHR) stab[i] = a.tab[i];
    uint16_t *sC = (uint16_t *)(smem + G::OFF_C);
    if (rowpos)
        for (int i = tid; i < G::BM * CPT / 2; i += G::NTHR) ((uint32_t *)sC)[i] = 0u;
    /* tc3b: the column-side table's saturated rows (sat_hi, sat_lo of the column frame) as
     * fp32, once per row block (h2f is exact: the same values the tiles converted) */
    if constexpr (LN) {
        static_assert(G::NTHR == 2 * D, "one thread per saturated-row element");
        const int st = tid < D ? (KV ? a.sat_neg : a.sat_pos) : (KV ? a.sat_pos : a.sat_neg);
        const int td = V3 == 9 ? bwd_tid_remat() % D : tid % D; /* (tc3f: see bwd_tid_remat) */
        if (colpos) ((float *)(smem + G::OFF_TS))[tid] = h2f<BF>(tch[(int64_t)st * tc_ss + td]);
    }
    /* tc3b: this thread's chunk (row lrow + 16 it, chunk lch) of every 64-byte-row tile */
    const int lrow = tid / G::CPR, lch = tid % G::CPR;
    const uint32_t lnoff = swz<D>(lrow, lch);

    /* X and Z tiles */
    const uint32_t sX = smem_u32(smem + G::OFF_X), sZ = smem_u32(smem + G::OFF_Z);
    if constexpr (LN)
        bwd_load2_ln<D, G::BM>(sX, xb + (int64_t)lrow * x_sl + lch * 8, x_sl, sZ, zb + (int64_t)lrow * z_sl + lch * 8,
                               z_sl, lnoff, m0, len);
    for (int idx = tid; idx < (LN ? 0 : G::BM * G::CPR); idx += G::NTHR) {
        const int row = idx / G::CPR, ch = idx % G::CPR, x = m0 + row;
        const int ok = x < len;
        cp_async16(sX + swz<D>(row, ch), xb + (int64_t)(ok ? x : 0) * x_sl + ch * 8, ok ? 16 : 0);
        cp_async16(sZ + swz<D>(row, ch), zb + (int64_t)(ok ? x : 0) * z_sl + ch * 8, ok ? 16 : 0);
    }
    cp_async_commit();
    const int wr0 = 16 * w;
    /* tc3g (DATTN_BWD_DI_FUSED, dq kernel): D_i = dO_i . O_i of the block's rows computed here,
     * not by the separate pass (bwd_simple.cu's bwd_di_rows_body): warp w takes rows wr0 + j,
     * j < 16, lane l the elements l and l + 32, as that pass's warps take theirs (fmaf(dO[l],
     * O[l], 0), then fmaf(dO[l + 32], O[l + 32], .), then the xor butterfly's additions), so D
     * has the same bits. The O elements are loaded here, while X / Z land (zeros past len, the
     * sums not stored), dO is read from Z below the row-side constants (the loads' latency
     * hides behind them). Every row < len (masked ones too) is stored, as that pass does: the
     * dkdv kernel, launched after this one, reads D of its column tiles from the workspace. */
    constexpr int DIF = DATTN_BWD_DI_FUSED && !KV;
    constexpr int DIR = G::BM / G::NW; /* rows per warp */
    uint16_t dio[DIF ? DIR : 1][2];
    if constexpr (DIF) {
        static_assert(!DIF || D == 64, "fused D_i: two elements per lane");
        const int nv = len - (m0 + wr0); /* rows of the warp below len (may be <= 0) */
        const uint16_t *orow = (const uint16_t *)a.out + (int64_t)b * a.o_sb + (int64_t)h * a.o_sh +
                               (int64_t)(tok0 + (nv > 0 ? m0 + wr0 : 0)) * a.o_sl + lane;
#pragma unroll
        for (int j = 0; j < DIR; j++) {
            dio[j][0] = j < nv ? orow[0] : (uint16_t)0;
            dio[j][1] = j < nv ? orow[32] : (uint16_t)0;
            orow += a.o_sl;
        }
    }
    cp_async_wait_all();
    __syncthreads();

    /* per-row facts (dq: lse, D, validity of the query rows) */
    float rl2[2] = {0.f, 0.f}, rdi[2] = {0.f, 0.f};
    int rok[2] = {0, 0};
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int x = m0 + wr0 + g + 8 * r;
        rok[r] = x < len && (!mrow || mrow[(int64_t)x * a.m_sl] != 0);
        if (!KV) {
            if (rok[r]) {
                rl2[r] = a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + x) * a.l_sl] * L2E;
                if (!DIF) rdi[r] = A.di[ws_row(A, b, h, tok0, x)]; /* (tc3g: below) */
            } else {
                rl2[r] = __int_as_float(0x7f800000); /* p = 0 */
            }
        }
    }
    const int anyrow = __syncthreads_or(rok[0] | rok[1]);

    /* X fragments in registers (dq kernel, D = 64); the dkdv kernel needs them for dV */
    constexpr int XR = G::XREG && !KV;
    uint32_t xf[XR ? G::KS : 1][4];
#pragma unroll
    for (int ks = 0; ks < (XR ? G::KS : 1); ks++)
        ldsm_x4(xf[ks], sX + swz<D>(wr0 + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * ks + (lane >> 4)));
    constexpr int ZR = G::ZREG && !KV; /* the dkdv kernel needs the registers for dV */
    uint32_t zf[ZR ? G::KS : 1][4];
    if (ZR) {
#pragma unroll
        for (int ks = 0; ks < (ZR ? G::KS : 1); ks++)
            ldsm_x4(zf[ks], sZ + swz<D>(wr0 + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * ks + (lane >> 4)));
    }

    /* saturated row-side constants: row . TR[real sat slot of the row-frame sides] * sl2 */
    const int sat_hi = KV ? a.sat_neg : a.sat_pos; /* real slot where r' >= R */
    const int sat_lo = KV ? a.sat_pos : a.sat_neg; /* real slot where r' <= -R */
    float *scs = (float *)(smem + G::OFF_CS);
    if (rowpos) {
        const int rr = lane & 15, half = lane >> 4;
        const uint16_t *pp = trh + (int64_t)sat_hi * tr_ss, *pn = trh + (int64_t)sat_lo * tr_ss;
        float sp = 0.f, sn = 0.f;
        for (int d = half * (D / 2); d < (half + 1) * (D / 2); d++) {
            const uint16_t qv = *(const uint16_t *)(smem + G::OFF_X + swz<D>(wr0 + rr, d >> 3) + (d & 7) * 2);
            const float qx = h2f<BF>(qv);
            sp = fmaf(qx, h2f<BF>(pp[d]), sp);
            sn = fmaf(qx, h2f<BF>(pn[d]), sn);
        }
        sp += __shfl_xor_sync(0xffffffffu, sp, 16);
        sn += __shfl_xor_sync(0xffffffffu, sn, 16);
        if (!half) {
            scs[wr0 + rr] = sp * a.sl2;
            scs[G::BM + wr0 + rr] = sn * a.sl2;
        }
        __syncwarp();
    }

    /* tc3g: the 16 row sums of the warp, folded: every butterfly stage pairs rows, each lane
     * keeps one row of a pair (bit o of the lane: the odd one) and sends the other, so stage
     * o = 16, 8, 4, 2 takes 8, 4, 2, 1 shuffles instead of 16 each; stage 1 is the plain xor
     * step. A lane adds exactly the two values its butterfly lane would (its own partial and
     * lane ^ o's, of the same row), so every row's sum has the butterfly's bits. Lane l ends
     * with row 8 b1 + 4 b2 + 2 b3 + b4 (b_k: bit k of l), and lane l ^ 1 with the same. */
    if constexpr (DIF) {
        static_assert(!DIF || DIR == 16, "fused D_i: 16 rows per warp (four folded stages)");
        float v[DIR];
        const char *zr = smem + G::OFF_Z + (lane & 7) * 2;
#pragma unroll
        for (int j = 0; j < DIR; j++) {
            const float z0 = h2f<BF>(*(const uint16_t *)(zr + swz<D>(wr0 + j, lane >> 3)));
            const float z1 = h2f<BF>(*(const uint16_t *)(zr + swz<D>(wr0 + j, (lane + 32) >> 3)));
            v[j] = fmaf(z1, h2f<BF>(dio[j][1]), fmaf(z0, h2f<BF>(dio[j][0]), 0.f));
        }
        auto fold = [&](const int o, const int k) { /* v[k] = the kept row of v[2k], v[2k + 1] */
            const bool hi = (lane & o) != 0;
            const float keep = hi ? v[2 * k + 1] : v[2 * k], send = hi ? v[2 * k] : v[2 * k + 1];
            v[k] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        };
#pragma unroll
        for (int k = 0; k < 8; k++) fold(16, k);
#pragma unroll
        for (int k = 0; k < 4; k++) fold(8, k);
#pragma unroll
        for (int k = 0; k < 2; k++) fold(4, k);
        fold(2, 0);
        v[0] += __shfl_xor_sync(0xffffffffu, v[0], 1);
        const int myrow = ((lane >> 1) & 1) * 8 + ((lane >> 2) & 1) * 4 + ((lane >> 3) & 1) * 2 + ((lane >> 4) & 1);
        if (!(lane & 1) && m0 + wr0 + myrow < len) A.di[ws_row(A, b, h, tok0, m0 + wr0 + myrow)] = v[0];
        /* the lane holding row g (g < 8: bit 3 of the row is 0) and row g + 8 (lane + 2) */
        const int src = ((g & 1) << 4) | ((g & 2) << 2) | (g & 4);
        const float d0 = __shfl_sync(0xffffffffu, v[0], src), d1 = __shfl_sync(0xffffffffu, v[0], src + 2);
        rdi[0] = rok[0] ? d0 : 0.f; /* (the D_i tc3f reads for its valid rows, 0 elsewhere) */
        rdi[1] = rok[1] ? d1 : 0.f;
    }

    float dx[G::DB][4], dv[KV ? G::DB : 1][4];
#pragma unroll
    for (int db = 0; db < G::DB; db++) dx[db][0] = dx[db][1] = dx[db][2] = dx[db][3] = 0.f;
#pragma unroll
    for (int db = 0; db < (KV ? G::DB : 1); db++) dv[db][0] = dv[db][1] = dv[db][2] = dv[db][3] = 0.f;
    float rs_hi[2] = {0.f, 0.f}, rs_lo[2] = {0.f, 0.f}; /* saturated-tile row sums of ds */
    /* tc3f (V3 == 9), dkdv kernel: the row sums live in shared memory during the tile loop
     * (this thread's float4 at OFF_RA; the same additions in the same order: bitwise) */
    constexpr int RSS = V3 == 9 && KV;
    float4 *sra = (float4 *)(smem + G::OFF_RA) + tid;
    if constexpr (RSS) *sra = make_float4(0.f, 0.f, 0.f, 0.f);

    const float sl2 = a.sl2;
    const uint32_t rk = smem_u32(smem + G::OFF_RK), rq = smem_u32(smem + G::OFF_RQ);
    const uint32_t sY0 = smem_u32(smem + G::OFF_Y);
    int *sT = (int *)(smem + G::OFF_T);
    int *sSl = (int *)(smem + G::OFF_SL);
    float *sps = (float *)(smem + G::OFF_PS);
    float *scl = (float *)(smem + G::OFF_CL);
    float *scd = (float *)(smem + G::OFF_CD);
    int *scf = (int *)(smem + G::OFF_CF);
    volatile uint32_t *skb = (volatile uint32_t *)(smem + G::OFF_KB);
    float *spb = (float *)(smem + G::OFF_SP);
    float *scw = (float *)(smem + G::OFF_SC) + w * 16 * G::PC;
    const float fpad = 1.f / (float)len;
    /* dropout on this path at D = 64 only (at D = 128 the dkdv kernel, already at 255
     * registers, spills with it; launch.cu sends D = 128 dropout calls to bwd_simple.cu) */
    constexpr int DROP = D <= 64;
    const uint32_t bh = (uint32_t)b * (uint32_t)a.H + (uint32_t)h;

    int ring_lo = 0, ring_ok = 0;
    /* tc3: C blocks at row-frame slots >= ftop are flushed; rows <= rtop were loaded into
     * the ring by the first band tile; sc_any: a band tile ran (scattered into C) */
    int ftop = 0, rtop = -1, sc_any = 0;
    if (V3 && rowpos) {
        int t_lo, t_hi;
        bwd_tc_range(a, stab, KV, m0, len, t_lo, t_hi);
        ftop = ((KV ? S2 - 1 - t_lo : t_hi) | 15) + 1;
    }
    /* double-buffered Y, W (prefetch of the next tile) in the dq kernel; the dkdv kernel
     * sits at the 255-register limit and spills with the moving buffer base */
    constexpr int PF = !KV || LN; /* (tc3b: both kernels, 254 registers or fewer) */
    const int n_end = (KV || anyrow) ? (len + BN - 1) / BN : 0;
    /* tc3b: this thread's Y / W sources of column tile 0 (bwd_load2_ln); tc3t: from the row
     * block's sources in shared memory where they are used (stored above, before the barriers
     * of the tile loop) */
    const uint16_t *const ythr0 = yb + (int64_t)lrow * y_sl + lch * 8, *const wthr0 = wb + (int64_t)lrow * w_sl + lch * 8;
    const uint16_t *const *ywsrc = (const uint16_t *const *)(smem + G::OFF_MC);
    auto ythr = [&]() { return TM ? ywsrc[0] + (int64_t)lrow * y_sl + lch * 8 : ythr0; };
    auto wthr = [&]() { return TM ? ywsrc[1] + (int64_t)lrow * w_sl + lch * 8 : wthr0; };
    /* tc3k, dkdv kernel: the raw lse / D_i of column tile n0c (lanes y < BN of warp 0, column
     * n0c + y; zeros past len), cp.async with the tile's Q / dO: the tile's column facts then
     * come from shared memory instead of an L2 round trip while the other warps wait */
    constexpr int CFP = SK && KV;
    const uint32_t scr = smem_u32(smem + G::OFF_CR);
    auto cfetch = [&](const int n0c) {
        if (tid < BN) {
            const int i = n0c + tid, ok = i < len, ii = ok ? i : 0;
            cp_async4(scr + 4 * tid, a.lse + (int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + ii) * a.l_sl,
                      ok ? 4 : 0);
            cp_async4(scr + 4 * (BN + tid), A.di + ws_row(A, b, h, tok0, ii), ok ? 4 : 0);
        }
    };
    for (int n = 0; n < n_end; n++) {
        const int n0 = n * BN;
        /* Y, W of tile n: buffer n & 1 (tile n + 1's copies start once tile n's landed) */
        const uint32_t sY = sY0 + (uint32_t)((PF ? n & 1 : 0) * G::YWB), sW = sY + BN * G::RB;
        __syncthreads(); /* the previous tile is consumed */
        /* ---- loads: Y, W (first tile; later ones were prefetched), the window tables and
         * new ring rows (band) */
        /* tc3t: a full next tile by TMA, issued here (its buffer's last readers, tile n - 1,
         * passed the barrier above; the copies are waited for at tile n + 1's middle, so they
         * have a whole tile to land, while a cp.async prefetch, waited for by this tile's
         * cp.async.wait_all, can only start after it): lane 0 of warp 0 announces 2 x BN rows
         * of 128 bytes on the buffer's barrier and issues the two copies (rows tok0 + n0 + BN ..
         * of head h), predicated in the instructions rather than behind a lane branch, with the
         * map addresses taken from the parameters (measured cheaper than a thread-0 branch with
         * operands from shared memory; NOTES "tc3t ... measured"). The proxy fence orders the
         * buffer's cp.async writes (the tile-0 load, a partial tile of the previous row block)
         * before them: only the first copies into each buffer of a row block (n < 2) follow
         * such writes. */
        if (TM && w == 0 && n + 1 < n_end && n0 + 2 * BN <= len) {
            const int j = (n + 1) & 1, one = lane == 0;
            const uint32_t bar = smem_u32(smem + G::OFF_MB + 8 * j), dst = sY0 + (uint32_t)(j * G::YWB);
            const int row = tok0 + n0 + BN, outer = a.packed ? 0 : b;
            if (n < 2) tma_fence_proxy_async();
            mbar_arrive_expect_tx_if(one, bar, 2 * BN * G::RB);
            tma_load_rows_if(one, dst, &T->y, bar, T->yrf, h, row, outer);
            tma_load_rows_if(one, dst + BN * G::RB, &T->w, bar, T->wrf, h, row, outer);
        }
        if (!PF || n == 0) {
            if constexpr (LN) bwd_load2_ln<D, BN>(sY, ythr(), y_sl, sW, wthr(), w_sl, lnoff, n0, len);
            else bwd_load_yw<D, BN>(sY, yb, y_sl, wb, w_sl, n0, len);
            if constexpr (CFP) cfetch(n0);
        }
        const int rlo = m0 - n0 - BN + 1; /* smallest row-frame r' of the tile */
        int cls_a = DATTN_CLS_PLAIN;
        if (use_pos) {
            cls_a = DATTN_CLS_BAND;
            if (rlo >= a.R) cls_a = DATTN_CLS_SATP;
            if (m0 - n0 + G::BM - 1 <= -a.R) cls_a = DATTN_CLS_SATN;
        }
#if DATTN_BWD_TILE_CLASSES
        /* tc3e (DATTN_BWD_TILE_CLASSES, set by bwd_tc3e_d64.cu): in the dq kernel the rest of
         * the tile is one body for band tiles (KC BAND) and one for the others (NOBAND: plain
         * or saturated, tested at run time as before; the calls are below the body), so that a
         * plain or saturated tile runs none of the band path's tests and branches (window
         * tables and ring rows, band products, the band S / dP order, scatter, in-loop flush).
         * A preprocessor switch, not a template flag: the lambda alone changes ptxas's
         * register allocation (it took tc3d's dq kernel from 249 to 255 registers before the
         * Philox rework), so the other variants keep the plain loop. (The body keeps the
         * loop's indentation, so that its history stays readable.) */
        static_assert(CS, "DATTN_BWD_TILE_CLASSES is tc3e's / tc3f's (V3 == 8 / 9)");
        auto tile = [&](auto kcl) {
        constexpr int KC = decltype(kcl)::value;
        const int cls = KC == BWD_KC_BAND ? (int)DATTN_CLS_BAND
                      : cls_a == DATTN_CLS_PLAIN ? (int)DATTN_CLS_PLAIN
                      : cls_a == DATTN_CLS_SATN ? (int)DATTN_CLS_SATN : (int)DATTN_CLS_SATP;
#else
        static_assert(!CS, "tc3e needs DATTN_BWD_TILE_CLASSES");
        const int cls = cls_a;
#endif
        if constexpr (LN) {
            if (cls == DATTN_CLS_BAND) {
                /* tc3b: one fslot per entry (the table store may alias stab: the compiler
                 * could not share it between sT and sSl); RC == CW */
                static_assert(!LN || (G::RC == G::CW && G::NT <= G::NTHR && G::RC % 8 == 0), "tc3b window tables");
                if (tid < G::NT) {
                    const int uu = tid < G::NWIN ? tid : G::NWIN - 1;
                    const int row = bwd_fslot<KV>(a, stab, rlo + uu) % G::RC;
                    sT[tid] = row * G::RB + (swz_key<D>(row) << 4);
                    sSl[tid] = row;
                    if constexpr (RS) ((int *)(smem + G::OFF_SR))[G::NT - 1 - tid] = row;
                }
                const int slo = bwd_fslot<KV>(a, stab, rlo), shi = bwd_fslot<KV>(a, stab, rlo + G::NWIN - 1);
                const int top = ring_ok ? min(shi, ring_lo - 1) : min(shi | 15, S2 - 1);
                if (!ring_ok) rtop = top, sc_any = 1;
                /* new ring rows slo + lrow + 16 k <= top: ring row (s % RC) advances by 16 (wraps
                 * at RC), its swizzle key s & 7 stays; real row s or 2S - 1 - s */
                int sr = slo + lrow;
                if (sr <= top) {
                    int rr = sr % G::RC;
                    const uint32_t kx = (uint32_t)((lch ^ (sr & 7)) << 4);
                    const int real = KV ? S2 - 1 - sr : sr;
                    const uint16_t *pr = rowpos ? trh + (int64_t)real * tr_ss + lch * 8 : trh;
                    const uint16_t *pc = colpos ? tch + (int64_t)real * tc_ss + lch * 8 : tch;
                    const int64_t dr = (KV ? -16 : 16) * tr_ss, dc = (KV ? -16 : 16) * tc_ss;
#pragma unroll 1
                    for (;;) {
                        const uint32_t off = (uint32_t)(rr * G::RB) + kx;
                        if (rowpos) cp_async16(rk + off, pr, 16);
                        if (colpos) cp_async16(rq + off, pc, 16);
                        sr += 16;
                        if (sr > top) break;
                        if (rowpos) pr += dr;
                        if (colpos) pc += dc;
                        rr = rr + 16 >= G::RC ? rr + 16 - G::RC : rr + 16;
                    }
                }
                ring_lo = slo;
                ring_ok = 1;
            } else {
                ring_ok = 0;
            }
        } else if (cls == DATTN_CLS_BAND) {
            for (int u = tid; u < G::NT; u += G::NTHR) {
                const int uu = u < G::NWIN ? u : G::NWIN - 1;
                const int row = bwd_fslot<KV>(a, stab, rlo + uu) % G::RC;
                sT[u] = row * G::RB + (swz_key<D>(row) << 4);
                /* C column: the real slot, or (tc3) the row-frame slot mod CW */
                sSl[u] = V3 ? bwd_fslot<KV>(a, stab, rlo + uu) % G::CW : bwd_rslot<KV>(a, stab, rlo + uu);
            }
            const int slo = bwd_fslot<KV>(a, stab, rlo), shi = bwd_fslot<KV>(a, stab, rlo + G::NWIN - 1);
            /* tc3: the first band tile also loads up to the end of shi's 16-slot block (the
             * in-loop flush reads those rows from the ring) */
            const int top = ring_ok ? min(shi, ring_lo - 1) : V3 ? min(shi | 15, S2 - 1) : shi;
            if (V3 && !ring_ok) rtop = top, sc_any = 1;
            const int nrows = top - slo + 1;
            for (int idx = tid; idx < nrows * G::CPR; idx += G::NTHR) {
                const int s = slo + idx / G::CPR, ch = idx % G::CPR;
                const int real = KV ? S2 - 1 - s : s;
                const uint32_t off = swz<D>(s % G::RC, ch);
                if (rowpos) cp_async16(rk + off, trh + (int64_t)real * tr_ss + ch * 8, 16);
                if (colpos) cp_async16(rq + off, tch + (int64_t)real * tc_ss + ch * 8, 16);
            }
            ring_lo = slo;
            ring_ok = 1;
        } else {
            ring_ok = 0;
        }
        /* dropout keep bits of the warp's block (while the loads fly) */
        /* (parked in shared memory: a register held across S and dP spills the dkdv kernel) */
        if (DROP && a.drop_thr)
            skb[tid] = bwd_keep_bits<G::NB, KV>(a, TM ? (uint32_t)((const int *)(smem + G::OFF_MC))[4] : bh, m0 + wr0, n0);
        if (KV && !CFP) {
            /* column facts (tc3b: one pass, y = tid < BN) */
            auto colfact = [&](const int y) {
                const int i = n0 + y;
                int f = 0;
                float l2 = __int_as_float(0x7f800000), dd = 0.f;
                if (i < len) {
                    if (!mrow || mrow[(int64_t)i * a.m_sl] != 0) {
                        f = 1;
                        l2 = a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + i) * a.l_sl] * L2E;
                        dd = A.di[ws_row(A, b, h, tok0, i)];
                    } else if (a.hf) {
                        f = 2;
                    }
                }
                scf[y] = f;
                scl[y] = l2;
                scd[y] = dd;
            };
            if constexpr (LN) {
                if (tid < BN) colfact(tid);
            } else {
                for (int y = tid; y < BN; y += G::NTHR) colfact(y);
            }
        }
        /* column validity bits (dq: the keys' mask; KV: rows carry the key mask) */
        uint64_t vbits;
        if (!KV && mrow) {
            const int j0 = n0 + lane, j1 = n0 + 32 + lane;
            const int mk0 = (lane < BN && j0 < len) ? mrow[(int64_t)j0 * a.m_sl] : 0;
            const int mk1 = (BN > 32 && j1 < len) ? mrow[(int64_t)j1 * a.m_sl] : 0;
            const uint32_t lo = __ballot_sync(0xffffffffu, mk0 != 0);
            const uint32_t hi = __ballot_sync(0xffffffffu, mk1 != 0);
            vbits = (uint64_t)lo | ((uint64_t)hi << 32);
        } else {
            const int lim = len - n0;
            vbits = lim >= 64 ? ~0ull : ((1ull << lim) - 1ull);
        }
        /* tc3k, dkdv kernel: the column flags (the mask byte is still a load, issued before the
         * wait) */
        int cff = 0;
        if (CFP && tid < BN) {
            const int i = n0 + tid;
            if (i < len) cff = (!mrow || mrow[(int64_t)i * a.m_sl] != 0) ? 1 : a.hf ? 2 : 0;
        }
        cp_async_commit();
        cp_async_wait_all();
        /* tc3t: a full tile after the first came by the bulk copies issued at the previous tile's
         * start; tiles 1, 2, 3, 4, ... of the row block are the copy pairs 0, 0, 1, 1, ... of
         * buffers 1, 0, 1, 0, ...: pair (n - 1) / 2 of its buffer, completing the phase of that
         * parity */
        if (TM && n > 0 && n0 + BN <= len) mbar_wait(smem_u32(smem + G::OFF_MB + 8 * (n & 1)), (uint32_t)((n - 1) >> 1) & 1u);
        if (CFP && tid < BN) {
            /* the raw lse / D_i this lane copied (its own cp.async, complete after its wait):
             * the same column facts as tc3b's, bit for bit (lse * log2 e rounded once) */
            const float *cr = (const float *)(smem + G::OFF_CR);
            scf[tid] = cff;
            scl[tid] = cff == 1 ? cr[tid] * L2E : __int_as_float(0x7f800000);
            scd[tid] = cff == 1 ? cr[BN + tid] : 0.f;
        }
        __syncthreads();
        /* prefetch tile n + 1's Y, W into the other buffer (tile n - 1's, consumed) */
        if (PF && n + 1 < n_end) {
            const uint32_t sYn = sY0 + (uint32_t)(((n + 1) & 1) * G::YWB);
            if (TM && n0 + 2 * BN <= len) {
                /* (tc3t: a full next tile is on its way since this tile's start, above) */
            } else if constexpr (LN) {
                bwd_load2_ln<D, BN>(sYn, ythr(), y_sl, sYn + BN * G::RB, wthr(), w_sl, lnoff, n0 + BN, len);
            } else {
                bwd_load_yw<D, BN>(sYn, yb, y_sl, wb, w_sl, n0 + BN, len);
            }
            /* (tc3k: the lanes that read this tile's raw facts above overwrite them) */
            if constexpr (CFP) cfetch(n0 + BN);
            cp_async_commit();
        }

        /* dP = Z W^T (independent of S: the tc3b dq kernel computes it on saturated and plain
         * tiles while warp 0 sums the saturated column constants, before their barrier; in
         * the dkdv kernel the longer live range of dp spills) */
        constexpr int DPE = LN && !KV;
        float dp[G::NB][4];
        auto dpmma = [&]() {
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) dp[nb][0] = dp[nb][1] = dp[nb][2] = dp[nb][3] = 0.f;
#pragma unroll
            for (int kc = 0; kc < G::CPR; kc += 4) {
                uint32_t za[2][4];
                bwd_afrag<D, ZR>(za, zf, sZ, wr0, kc);
#pragma unroll
                for (int nb = 0; nb < G::NB; nb++) {
                    uint32_t r[4];
                    ldsm_x4(r, sW + swz<D>(8 * nb + (lane & 7), kc + (lane >> 3)));
                    mma16816_acc<BF>(dp[nb], za[0], r[0], r[1]);
                    mma16816_acc<BF>(dp[nb], za[1], r[2], r[3]);
                }
            }
        };
        /* saturated column constants: y . TC[real sat slot] */
        if (cls != DATTN_CLS_BAND && cls != DATTN_CLS_PLAIN && colpos) {
            /* (tc3b: the fp32 copy of the row in shared memory, one pass) */
            const float *prf = (const float *)(smem + G::OFF_TS) + (cls == DATTN_CLS_SATP ? 0 : D);
            if constexpr (SK) {
                /* tc3k: all four warps. Column y = 8 w + (lane & 7), d quarter q = lane >> 3
                 * (D / 32 16-byte chunks of the swizzled Y row: the 8 lanes of a phase read 8
                 * rows at distinct swizzled chunks, and one broadcast of the fp32 row), one
                 * (D / 4)-deep FFMA chain per lane; the quarters are summed by two xor shuffles:
                 * every lane of the column gets (a_q + a_q^1) + (a_q^2 + a_q^3), the same bits
                 * for every q (fp32 addition commutes), and the lane of quarter 0 stores it */
                static_assert(!SK || (BN == 8 * G::NW && D % 32 == 0), "tc3k column split");
                const int y = 8 * w + (lane & 7), q = lane >> 3;
                const char *yrow = smem + G::OFF_Y + (PF ? n & 1 : 0) * G::YWB;
                float acc = 0.f;
#pragma unroll
                for (int k = 0; k < D / 32; k++) {
                    const int ch = (D / 32) * q + k;
                    const uint4 u = *(const uint4 *)(yrow + swz<D>(y, ch));
                    const float4 t0 = *(const float4 *)(prf + 8 * ch), t1 = *(const float4 *)(prf + 8 * ch + 4);
                    acc = fmaf(h2f<BF>((uint16_t)u.x), t0.x, acc);
                    acc = fmaf(h2f<BF>((uint16_t)(u.x >> 16)), t0.y, acc);
                    acc = fmaf(h2f<BF>((uint16_t)u.y), t0.z, acc);
                    acc = fmaf(h2f<BF>((uint16_t)(u.y >> 16)), t0.w, acc);
                    acc = fmaf(h2f<BF>((uint16_t)u.z), t1.x, acc);
                    acc = fmaf(h2f<BF>((uint16_t)(u.z >> 16)), t1.y, acc);
                    acc = fmaf(h2f<BF>((uint16_t)u.w), t1.z, acc);
                    acc = fmaf(h2f<BF>((uint16_t)(u.w >> 16)), t1.w, acc);
                }
                acc += __shfl_xor_sync(0xffffffffu, acc, 8);
                acc += __shfl_xor_sync(0xffffffffu, acc, 16);
                if (q == 0) sps[y] = acc;
            } else {
                const int st = cls == DATTN_CLS_SATP ? sat_hi : sat_lo;
                const uint16_t *pr = tch + (int64_t)st * tc_ss;
                for (int y = tid; y < BN; y += (LN ? 2 * BN : G::NTHR)) {
                    float acc = 0.f;
                    for (int d = 0; d < D; d++) {
                        const uint16_t v = *(const uint16_t *)(smem + G::OFF_Y + (PF ? n & 1 : 0) * G::YWB + swz<D>(y, d >> 3) + (d & 7) * 2);
                        acc = fmaf(h2f<BF>(v), LN ? prf[d] : h2f<BF>(pr[d]), acc);
                    }
                    sps[y] = acc;
                }
            }
            if constexpr (DPE) dpmma();
            __syncthreads();
        } else if (DPE && cls != DATTN_CLS_BAND) {
            dpmma();
        }

        /* ---- S (row frame) */
        float s[G::NB][4];
        if (cls == DATTN_CLS_BAND && rowpos) {
#pragma unroll
            for (int gh = 0; gh < 2; gh++) {
                float ga[G::NG / 16][4];
#pragma unroll
                for (int gl = 0; gl < G::NG / 16; gl++) {
                    const int gbk = gh * (G::NG / 16) + gl;
                    ga[gl][0] = ga[gl][1] = ga[gl][2] = ga[gl][3] = 0.f;
                    const uint32_t tu = (uint32_t)sT[wr0 + 8 * gbk + (lane & 7)];
#pragma unroll
                    for (int kc = 0; kc < G::CPR; kc += 4) {
                        uint32_t r[4], xa[2][4];
                        bwd_afrag<D, XR>(xa, xf, sX, wr0, kc);
                        ldsm_x4(r, rk + (tu ^ (uint32_t)((kc + (lane >> 3)) << 4)));
                        mma16816_acc<BF>(ga[gl], xa[0], r[0], r[1]);
                        mma16816_acc<BF>(ga[gl], xa[1], r[2], r[3]);
                    }
                }
#pragma unroll
                for (int gl = 0; gl < G::NG / 16; gl++) {
                    const int gbk = gh * (G::NG / 16) + gl;
                    *(float2 *)(scw + g * G::PC + 8 * gbk + 2 * c) = make_float2(ga[gl][0], ga[gl][1]);
                    *(float2 *)(scw + (g + 8) * G::PC + 8 * gbk + 2 * c) = make_float2(ga[gl][2], ga[gl][3]);
                }
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
        } else if (cls != DATTN_CLS_BAND && cls != DATTN_CLS_PLAIN && colpos) {
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

        if (cls == DATTN_CLS_BAND && colpos) {
            const int sb = w / G::PARTS, part = w % G::PARTS;
            uint32_t ka[G::KS][4];
#pragma unroll
            for (int ks = 0; ks < G::KS; ks++)
                ldsm_x4(ka[ks], sY + swz<D>(16 * sb + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * ks + (lane >> 4)));
            const int u0 = BN - 16 * (sb + 1);
#pragma unroll 1
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

        /* S += X Y^T */
#pragma unroll
        for (int kc = 0; kc < G::CPR; kc += 4) {
            uint32_t xa[2][4];
            bwd_afrag<D, XR>(xa, xf, sX, wr0, kc);
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
                uint32_t r[4];
                ldsm_x4(r, sY + swz<D>(8 * nb + (lane & 7), kc + (lane >> 3)));
                mma16816_acc<BF>(s[nb], xa[0], r[0], r[1]);
                mma16816_acc<BF>(s[nb], xa[1], r[2], r[3]);
            }
        }
        if (cls == DATTN_CLS_BAND && colpos) {
            __syncthreads();
            const float *rp = spb + (wr0 + g) * G::PP + 2 * c;
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

        /* ---- dP = Z W^T (tc3b dq kernel: done above on saturated and plain tiles) */
        if constexpr (DPE) {
            if (cls == DATTN_CLS_BAND) dpmma();
        } else {
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) dp[nb][0] = dp[nb][1] = dp[nb][2] = dp[nb][3] = 0.f;
#pragma unroll
            for (int kc = 0; kc < G::CPR; kc += 4) {
                uint32_t za[2][4];
                bwd_afrag<D, ZR>(za, zf, sZ, wr0, kc);
#pragma unroll
                for (int nb = 0; nb < G::NB; nb++) {
                    uint32_t r[4];
                    ldsm_x4(r, sW + swz<D>(8 * nb + (lane & 7), kc + (lane >> 3)));
                    mma16816_acc<BF>(dp[nb], za[0], r[0], r[1]);
                    mma16816_acc<BF>(dp[nb], za[1], r[2], r[3]);
                }
            }
        }

        /* ---- P, dS (in s), P for dV (in dp) */
        float radd[2] = {0.f, 0.f};
        if (rowpos && (cls == DATTN_CLS_SATP || cls == DATTN_CLS_SATN)) {
            const float *cs = scs + (cls == DATTN_CLS_SATN ? G::BM : 0) + wr0 + g;
            radd[0] = cs[0];
            radd[1] = cs[8];
        }
        /* (32 bits when they suffice: BN = 32 runs at the register limit) */
        const typename bwd_vtype<BN>::T vs = (typename bwd_vtype<BN>::T)(vbits >> (2 * c));
        if constexpr (!LN) {
            const uint32_t kfu = __float_as_uint(DROP && a.drop_thr ? a.drop_scale : 1.f);
#pragma unroll
            for (int nb = 0; nb < G::NB; nb++) {
                const uint32_t kbt = DROP && a.drop_thr ? skb[tid] >> (2 * nb) : 0xffffffffu;
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int r = e >> 1, y = 8 * nb + 2 * c + (e & 1);
                    const int cv = (int)((vs >> (8 * nb + (e & 1))) & 1u);
                    /* keep_ij / (1 - p) under dropout (0 where dropped), else exactly 1 */
                    const float kf = __uint_as_float(((kbt >> (r * 2 * G::NB + (e & 1))) & 1u) * kfu);
                    float p, dsv, pv;
                    if (!KV) {
                        p = cv ? ex2f(fmaf(s[nb][e], sl2, radd[r] - rl2[r])) : 0.f;
                        dsv = p * (dp[nb][e] * kf - rdi[r]);
                        pv = 0.f;
                    } else {
                        const int f = scf[y];
                        p = (f == 1 && rok[r]) ? ex2f(fmaf(s[nb][e], sl2, radd[r] - scl[y])) : 0.f;
                        dsv = p * (dp[nb][e] * kf - scd[y]);
                        pv = (f == 2 ? fpad : p) * kf;
                    }
                    s[nb][e] = dsv;
                    dp[nb][e] = pv;
                }
            }
        } else {
            /* tc3b: the same loop with the dropout test hoisted: without dropout kf == 1.0f
             * exactly, so dp kf - D == dp - D and pv == p bit for bit */
            auto pds = [&](auto kon, auto lean) {
                constexpr bool KON = decltype(kon)::value;
                /* tc3d: LEAN, the loop without per-element tests (see below) */
                constexpr bool LEAN = LP && decltype(lean)::value;
                const uint32_t kfu = __float_as_uint(KON ? a.drop_scale : 1.f);
                /* tc3d: the rows' additive term, once per tile: dq kernel radd - lse (the same
                 * FADD tc3c makes per element), dkdv kernel radd, or -inf on an invalid row */
                float rt[2];
#pragma unroll
                for (int r = 0; r < 2; r++)
                    rt[r] = !LP ? 0.f : !KV ? radd[r] - rl2[r] : rok[r] ? radd[r] : __int_as_float(0xff800000);
#pragma unroll
                for (int nb = 0; nb < G::NB; nb++) {
                    const uint32_t kbt = KON ? skb[tid] >> (2 * nb) : 0xffffffffu;
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int r = e >> 1, y = 8 * nb + 2 * c + (e & 1);
                        const int cv = (int)((vs >> (8 * nb + (e & 1))) & 1u);
                        /* keep_ij / (1 - p) under dropout (0 where dropped), else exactly 1 */
                        const float kf = __uint_as_float(((kbt >> (r * 2 * G::NB + (e & 1))) & 1u) * kfu);
                        float p, dsv, pv;
                        if (!KV) {
                            if (LEAN) p = ex2f(fmaf(s[nb][e], sl2, rt[r]));
                            else p = cv ? ex2f(fmaf(s[nb][e], sl2, LP ? rt[r] : radd[r] - rl2[r])) : 0.f;
                            dsv = p * (dp[nb][e] * kf - rdi[r]);
                            pv = 0.f;
                        } else if (LEAN) {
                            p = ex2f(fmaf(s[nb][e], sl2, rt[r] - scl[y]));
                            dsv = p * (dp[nb][e] * kf - scd[y]);
                            pv = p * kf;
                        } else {
                            const int f = scf[y];
                            p = (f == 1 && rok[r]) ? ex2f(fmaf(s[nb][e], sl2, radd[r] - scl[y])) : 0.f;
                            dsv = p * (dp[nb][e] * kf - scd[y]);
                            pv = (f == 2 ? fpad : p) * kf;
                        }
                        s[nb][e] = dsv;
                        dp[nb][e] = pv;
                    }
                }
            };
            /* tc3d (LP): the lean loop (LEAN) when no element needs a test: without a mask the
             * invalid elements are the rows / columns past len, whose operands were zero-filled
             * (finite scores), so folding their validity into the exponent's additive term
             * (+inf lse: p = exp2(-inf) = +0, what tc3c selects) gives tc3c's bits. dq kernel:
             * a full column tile (every cv is 1), radd - lse (+inf on invalid rows) per row,
             * once per tile. dkdv kernel: scl is +inf on the columns past len (f == 0) and the
             * rows' validity goes into rt = -inf, so rt - scl = -inf there; without a mask
             * there is no f == 2 column (the HF 1 / len branch), so pv = p kf. With a mask the
             * tested loop runs (masked positions may hold any values: no fold) */
            if constexpr (LP) {
                const int lean = !mrow && (KV || n0 + BN <= len);
                if (DROP && a.drop_thr) {
                    if (lean) pds(dattn_bool_c<true>(), dattn_bool_c<true>());
                    else pds(dattn_bool_c<true>(), dattn_bool_c<false>());
                } else {
                    if (lean) pds(dattn_bool_c<false>(), dattn_bool_c<true>());
                    else pds(dattn_bool_c<false>(), dattn_bool_c<false>());
                }
            } else {
                if (DROP && a.drop_thr) pds(dattn_bool_c<true>(), dattn_bool_c<false>());
                else pds(dattn_bool_c<false>(), dattn_bool_c<false>());
            }
        }

        /* ---- dX += dS Y;  dV += P W (KV) */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t pa[4];
            pa[0] = pack2<BF>(s[2 * kk][0], s[2 * kk][1]);
            pa[1] = pack2<BF>(s[2 * kk][2], s[2 * kk][3]);
            pa[2] = pack2<BF>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pa[3] = pack2<BF>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int dq2 = 0; dq2 < G::DB; dq2 += 2) {
                uint32_t r[4];
                ldsm_x4_trans(r, sY + swz<D>(16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8, dq2 + (lane >> 4)));
                mma16816_acc<BF>(dx[dq2], pa, r[0], r[1]);
                mma16816_acc<BF>(dx[dq2 + 1], pa, r[2], r[3]);
            }
            if (KV) {
                /* P as hi + lo storage-dtype parts: dv as accurate as with fp32 P (the P
                 * rounding alone would use more than the tests' dv bound). Each W fragment
                 * is loaded once for both parts: ptxas merges the second ldmatrix of the
                 * same address (8 per tile, not 16, in the SASS of tc3 / tc3b).
                 * tc3p (P1): the hi part alone, i.e. P rounded once to the storage dtype,
                 * as FlashAttention and transformers' eager path compute P V */
#pragma unroll
                for (int part = 0; part < (P1 ? 1 : 2); part++) {
                    uint32_t pp[4];
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        const float *pe = dp[2 * kk + (q >> 1)] + 2 * (q & 1);
                        const uint16_t h0 = f2h<BF>(pe[0]), h1 = f2h<BF>(pe[1]);
                        pp[q] = part ? pack2<BF>(pe[0] - h2f<BF>(h0), pe[1] - h2f<BF>(h1))
                                     : ((uint32_t)h0 | ((uint32_t)h1 << 16));
                    }
#pragma unroll
                    for (int dq2 = 0; dq2 < G::DB; dq2 += 2) {
                        uint32_t r[4];
                        ldsm_x4_trans(r, sW + swz<D>(16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8, dq2 + (lane >> 4)));
                        mma16816_acc<BF>(dv[KV ? dq2 : 0], pp, r[0], r[1]);
                        mma16816_acc<BF>(dv[KV ? dq2 + 1 : 0], pp, r[2], r[3]);
                    }
                }
            }
        }

        /* ---- table-gradient bookkeeping of the row-side term */
        if (rowpos) {
            if (cls == DATTN_CLS_SATP || cls == DATTN_CLS_SATN) {
                if constexpr (RSS) {
                    float4 ra = *sra;
#pragma unroll
                    for (int nb = 0; nb < G::NB; nb++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            if (cls == DATTN_CLS_SATP) (e >> 1 ? ra.y : ra.x) += s[nb][e];
                            else (e >> 1 ? ra.w : ra.z) += s[nb][e];
                        }
                    *sra = ra;
                } else {
#pragma unroll
                for (int nb = 0; nb < G::NB; nb++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        if (cls == DATTN_CLS_SATP) rs_hi[e >> 1] += s[nb][e];
                        else rs_lo[e >> 1] += s[nb][e];
                    }
                }
            } else if (cls == DATTN_CLS_BAND) {
                /* scatter ds into C by real slot; log-zone tiles may map two columns of a
                 * row to one slot: the 4 lanes of a row then take turns (fixed order) */
                const int rhi = m0 - n0 + G::BM - 1;
                const int serial = !(rlo >= -a.lin && rhi <= a.lin);
                /* tc3s: no serial passes (bwd_scatter_runs); linear-zone tiles as before */
                if constexpr (RS) {
                    if (serial) bwd_scatter_runs<BN, BF>(s, scw, sSl, (const int *)(smem + G::OFF_SR), sC, CPT, wr0, lane);
                }
                /* tc3 (V3): a tile strictly inside the linear zone (|r| < lin: slot(r) = r + S,
                 * one slot per column of a row, and no slot that any other tile of the row
                 * block reaches: the log zone's slots lie beyond, the saturated slot too; at
                 * |r| = lin it can be the saturated slot, when position_buckets <= 0) meets
                 * zeroed C cells, each once: it stores ds + 0 (the value 0 + ds of the
                 * read-modify-write, -0 included) without reading C (NOTES "Flush balanced") */
                if (V3 && rlo > -a.lin && rhi < a.lin) {
#pragma unroll
                    for (int nb = 0; nb < G::NB; nb++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const int xl = wr0 + g + 8 * (e >> 1), yl = 8 * nb + 2 * c + (e & 1);
                            sC[xl * CPT + sSl[xl - yl + BN - 1]] = f2h<BF>(0.f + s[nb][e]);
                        }
                }
#pragma unroll 1
                for (int cc = 0; cc < (RS && serial ? 0 : (V3 && rlo > -a.lin && rhi < a.lin) ? 0 : 4); cc++) {
                    if (!serial || c == cc) {
#pragma unroll
                        for (int nb = 0; nb < G::NB; nb++)
#pragma unroll
                            for (int e = 0; e < 4; e++) {
                                const int xl = wr0 + g + 8 * (e >> 1), yl = 8 * nb + 2 * c + (e & 1);
                                const int t = sSl[xl - yl + BN - 1];
                                uint16_t *cp = sC + xl * CPT + t;
                                *cp = f2h<BF>(h2f<BF>(*cp) + s[nb][e]);
                            }
                    }
                    if (!serial) break;
                    __syncwarp();
                }
            }
        }
        /* tc3: when the next tile is a band tile too, the 16-slot blocks above its window
         * are final: flush them while their TR rows are still in the ring */
        if (V3 && rowpos && cls == DATTN_CLS_BAND) {
            const int rln = rlo - BN;
            if (n + 1 < n_end && rln < a.R && m0 - n0 - BN + G::BM - 1 > -a.R) {
                const int nf = (bwd_fslot<KV>(a, stab, rln + G::NWIN - 1) | 15) + 1;
                if (nf < ftop) {
                    bwd_v3_flush<D, BN, BF, KV, V3>(A, h, dx, nf, ftop, 1, ring_lo & ~15, rtop, trh, tr_ss);
                    ftop = nf;
                }
            }
        }
#if DATTN_BWD_TILE_CLASSES
        };
        /* (the dkdv kernel is tc3d's: with two bodies ptxas spills it, 8-24 bytes at 255
         * registers, NOTES.md) */
        static_assert(!KV || V3 == 9, "tc3e's dkdv kernel is tc3d's (bwd_sm80_inst.cuh)");
        if (cls_a == DATTN_CLS_BAND) tile(dattn_int_c<BWD_KC_BAND>());
        else tile(dattn_int_c<BWD_KC_NOBAND>());
#endif
    }

    /* ---- end of the row block */
    const float isc = A.inv_scale;
    int tlo = 0, thi = -1;
    if (V3 && rowpos) {
        bwd_tc_range(a, stab, KV, m0, len, tlo, thi);
        const int flo = KV ? S2 - 1 - thi : tlo;
        bwd_v3_flush<D, BN, BF, KV, V3>(A, h, dx, flo & ~15, ftop, 0, sc_any ? (ring_lo & ~15) : S2, sc_any ? rtop : -1,
                                    trh, tr_ss);
        /* saturated-tile row sums (fp32, outside C): dX += rs TR[sat], partial[sat] += rs^T X */
        if constexpr (RSS) {
            const float4 ra = *sra;
            rs_hi[0] = ra.x, rs_hi[1] = ra.y, rs_lo[0] = ra.z, rs_lo[1] = ra.w;
        }
        __syncthreads(); /* (scs: the tiles' reads of the saturated constants are done) */
#pragma unroll
        for (int r = 0; r < 2; r++) {
            rs_hi[r] += __shfl_xor_sync(0xffffffffu, rs_hi[r], 1);
            rs_hi[r] += __shfl_xor_sync(0xffffffffu, rs_hi[r], 2);
            rs_lo[r] += __shfl_xor_sync(0xffffffffu, rs_lo[r], 1);
            rs_lo[r] += __shfl_xor_sync(0xffffffffu, rs_lo[r], 2);
            if (c == 0) {
                scs[wr0 + g + 8 * r] = rs_hi[r];
                scs[G::BM + wr0 + g + 8 * r] = rs_lo[r];
            }
        }
#pragma unroll
        for (int db = 0; db < G::DB; db++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int d = 8 * db + 2 * c + e;
                const float th = h2f<BF>(trh[(int64_t)sat_hi * tr_ss + d]), tl = h2f<BF>(trh[(int64_t)sat_lo * tr_ss + d]);
#pragma unroll
                for (int r = 0; r < 2; r++) dx[db][2 * r + e] = fmaf(rs_hi[r], th, fmaf(rs_lo[r], tl, dx[db][2 * r + e]));
            }
        __syncthreads(); /* the flush's partial writes and scs */
        float *part = (KV ? A.ppq : A.ppk) + ((int64_t)h * gridDim.x + blockIdx.x) * (int64_t)S2 * D;
        for (int idx = tid; idx < 2 * D; idx += G::NTHR) {
            const int which = idx / D, d = idx % D, st = which ? sat_lo : sat_hi;
            if (st < tlo || st > thi) continue; /* no saturated tile on that side */
            const int same = sat_lo == sat_hi; /* (a degenerate map: one cell, one writer) */
            if (which && same) continue;
            float acc = 0.f;
            for (int x = 0; x < G::BM; x++) {
                const uint16_t xv = *(const uint16_t *)(smem + G::OFF_X + swz<D>(x, d >> 3) + (d & 7) * 2);
                const float rsx = scs[which * G::BM + x] + (same ? scs[G::BM + x] : 0.f);
                acc = fmaf(rsx, h2f<BF>(xv), acc);
            }
            part[(int64_t)st * D + d] += acc * isc;
        }
        __syncthreads(); /* every thread has read the old range */
        int *sur = (int *)(smem + G::OFF_UR);
        if (tid == 0) {
            sur[0] = min(sur[0], tlo & ~15);
            sur[1] = max(sur[1], (thi & ~15) + 16);
        }
    } else if (rowpos) {
        bwd_tc_range(a, stab, KV, m0, len, tlo, thi);
        /* saturated-tile row sums into C */
#pragma unroll
        for (int r = 0; r < 2; r++) {
            rs_hi[r] += __shfl_xor_sync(0xffffffffu, rs_hi[r], 1);
            rs_hi[r] += __shfl_xor_sync(0xffffffffu, rs_hi[r], 2);
            rs_lo[r] += __shfl_xor_sync(0xffffffffu, rs_lo[r], 1);
            rs_lo[r] += __shfl_xor_sync(0xffffffffu, rs_lo[r], 2);
            if (c == 0) {
                uint16_t *cr = sC + (wr0 + g + 8 * r) * CPT;
                if (rs_hi[r] != 0.f) cr[sat_hi] = f2h<BF>(h2f<BF>(cr[sat_hi]) + rs_hi[r]);
                if (rs_lo[r] != 0.f) cr[sat_lo] = f2h<BF>(h2f<BF>(cr[sat_lo]) + rs_lo[r]);
            }
        }
        __syncthreads();
        /* dX += C . TR over 64-slot chunks staged in the ring buffer */
        const uint32_t sCa = smem_u32(sC);
        for (int t0 = tlo & ~63; t0 <= thi; t0 += 64) {
            __syncthreads();
            for (int idx = tid; idx < 64 * G::CPR; idx += G::NTHR) {
                const int row = idx / G::CPR, ch = idx % G::CPR, t = t0 + row;
                const int ok = t < S2;
                cp_async16(rk + swz<D>(row, ch), trh + (int64_t)(ok ? t : 0) * tr_ss + ch * 8, ok ? 16 : 0);
            }
            cp_async_commit();
            cp_async_wait_all();
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                if (t0 + 16 * kk >= S2) break;
                uint32_t ca[4];
                ldsm_x4(ca, sCa + (uint32_t)(((wr0 + (lane & 7) + ((lane >> 3) & 1) * 8) * CPT + t0 + 16 * kk + 8 * (lane >> 4)) * 2));
#pragma unroll
                for (int dq2 = 0; dq2 < G::DB; dq2 += 2) {
                    uint32_t r[4];
                    ldsm_x4_trans(r, rk + swz<D>(16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8, dq2 + (lane >> 4)));
                    mma16816_acc<BF>(dx[dq2], ca, r[0], r[1]);
                    mma16816_acc<BF>(dx[dq2 + 1], ca, r[2], r[3]);
                }
            }
        }
        /* partial = C^T X for the slot blocks of 16 that the row block touches */
        float *part = (KV ? A.ppq : A.ppk) + ((int64_t)h * gridDim.x + blockIdx.x) * (int64_t)S2 * D;
        int *sur = (int *)(smem + G::OFF_UR);
        const int ulo = sur[0], uhi = sur[1];
        for (int t0 = (tlo & ~15) + 16 * w; t0 <= thi; t0 += 16 * G::NW) {
            const int fresh = t0 < ulo || t0 >= uhi; /* first writer of the block: store */
            float acc[G::DB][4];
#pragma unroll
            for (int db = 0; db < G::DB; db++) acc[db][0] = acc[db][1] = acc[db][2] = acc[db][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < G::BM / 16; kk++) {
                uint32_t ca[4];
                const int mi = lane >> 3;
                ldsm_x4_trans(ca, sCa + (uint32_t)(((16 * kk + (lane & 7) + ((mi >> 1) & 1) * 8) * CPT + t0 + (mi & 1) * 8) * 2));
#pragma unroll
                for (int dq2 = 0; dq2 < G::DB; dq2 += 2) {
                    uint32_t r[4];
                    ldsm_x4_trans(r, sX + swz<D>(16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8, dq2 + (lane >> 4)));
                    mma16816_acc<BF>(acc[dq2], ca, r[0], r[1]);
                    mma16816_acc<BF>(acc[dq2 + 1], ca, r[2], r[3]);
                }
            }
#pragma unroll
            for (int db = 0; db < G::DB; db++) {
                const int t = t0 + g;
                float2 *p0 = (float2 *)(part + (int64_t)t * D + 8 * db + 2 * c);
                float2 *p1 = (float2 *)(part + (int64_t)(t + 8) * D + 8 * db + 2 * c);
                float2 v0 = make_float2(acc[db][0] * isc, acc[db][1] * isc);
                float2 v1 = make_float2(acc[db][2] * isc, acc[db][3] * isc);
                if (t < S2) {
                    if (!fresh) v0.x += p0->x, v0.y += p0->y;
                    *p0 = v0;
                }
                if (t + 8 < S2) {
                    if (!fresh) v1.x += p1->x, v1.y += p1->y;
                    *p1 = v1;
                }
            }
        }
        __syncthreads(); /* every thread has read the old range */
        if (tid == 0) {
            sur[0] = min(ulo, tlo & ~15);
            sur[1] = max(uhi, (thi & ~15) + 16);
        }
    }

    /* ---- dX (and dV) out */
    uint16_t *ob = KV ? (uint16_t *)A.dk + (int64_t)b * A.dk_sb + (int64_t)tok0 * A.dk_sl + (int64_t)h * A.dk_sh
                      : (uint16_t *)A.dq + (int64_t)b * A.dq_sb + (int64_t)tok0 * A.dq_sl + (int64_t)h * A.dq_sh;
    const int64_t o_sl = KV ? A.dk_sl : A.dq_sl;
    uint16_t *vo = KV ? (uint16_t *)A.dv + (int64_t)b * A.dv_sb + (int64_t)tok0 * A.dv_sl + (int64_t)h * A.dv_sh
                      : (uint16_t *)0;
    /* (tc3f: the row of this thread recomputed here, see bwd_tid_remat) */
    const int xt = V3 == 9 ? (bwd_tid_remat() >> 5) * 16 + ((bwd_tid_remat() & 31) >> 2) : wr0 + g;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int x = m0 + xt + 8 * r;
        if (x >= len) continue;
#pragma unroll
        for (int db = 0; db < G::DB; db++) {
            *(uint32_t *)(ob + (int64_t)x * o_sl + 8 * db + 2 * c) =
                pack2<BF>(dx[db][2 * r] * isc, dx[db][2 * r + 1] * isc);
            if (KV)
                *(uint32_t *)(vo + (int64_t)x * A.dv_sl + 8 * db + 2 * c) =
                    pack2<BF>(dv[KV ? db : 0][2 * r], dv[KV ? db : 0][2 * r + 1]);
        }
    }
}

/* The kernel: CTA (grp, h) runs the row blocks u0 .. u1-1 of head h (u = b * nblk + rb, a
 * contiguous, balanced share of the B * nblk row blocks over gridDim.x groups) and sums
 * their table gradients into one fp32 partial [2S][D] (its own: one writer, fixed order),
 * then records the written 16-slot range [lo, hi) for the reduce. */
template <int D, int BN, int BF, int KV, int V3>
DATTN_DEV void bwd_sm80_body(const dattn_bwd_args &A, const dattn_bwd_maps *T)
{
    typedef bwd_geom<D, BN, V3> G;
    const dattn_fwd_args &a = A.f;
    extern __shared__ __align__(128) char smem[];
    const int h = blockIdx.y, grp = blockIdx.x, NG = gridDim.x;
    const int nblk = (a.L + 63) / 64;
    const int U = a.B * nblk;
    const int u0 = (int)((int64_t)U * grp / NG), u1 = (int)((int64_t)U * (grp + 1) / NG);
    volatile int *sur = (volatile int *)(smem + G::OFF_UR);
    if (threadIdx.x == 0) {
        sur[0] = 2 * a.S; /* nothing written yet */
        sur[1] = 0;
        sur[2] = u0; /* the loop counter lives here: no register held across a row block */
        sur[3] = u1;
        if (V3 == 9) sur[4] = nblk; /* (tc3f, below) */
    }
    /* tc3f (V3 == 9): nor the row block count, and the counter is re-read for its increment
     * (with both kernels' tile bodies per class, ptxas spilled exactly these two values of
     * the dkdv kernel, held across a row block) */
    constexpr int UR = V3 == 9;
    if (DATTN_BWD_TMA && threadIdx.x == 0) {
        /* tc3t: the Y / W buffers' barriers (one arrival: the issuing lane's expect-tx; each row
         * block invalidates and initialises them again); the 128-byte swizzle of the copies is
         * that of swz<64> only on 1024-byte aligned buffers (OFF_Y and YWB are multiples of
         * 1024 from the base) */
        if (!KV && (smem_u32(smem) & 1023u)) __trap(); /* (the dkdv kernel's base is the same:
                                                         * no static shared memory in either; the
                                                         * check there spills it) */
        for (int j = 0; j < 2; j++) mbar_init(smem_u32(smem + G::OFF_MB + 8 * j), 1); /* (see the unit) */
    }
    if (V3 && (a.c2p | a.p2c)) /* tc3: the slot table of every row block (bwd_sm80_unit's stab) */
        for (int i = threadIdx.x; i < 2 * a.nlog; i += G::NTHR) ((uint16_t *)(smem + G::OFF_TAB))[i] = a.tab[i];
#pragma unroll 1
    for (;;) {
        __syncthreads(); /* the previous row block is done with shared memory and its partial */
        const int u = sur[2];
        if (u >= sur[3]) break;
        const int nb = UR ? sur[4] : nblk;
        bwd_sm80_unit<D, BN, BF, KV, V3>(A, T, u / nb, h, (u % nb) * 64);
        __syncthreads();
        if (threadIdx.x == 0) sur[2] = (UR ? sur[2] : u) + 1;
    }
    if ((KV ? a.p2c : a.c2p) && threadIdx.x == 0) {
        int32_t *rg = A.tcr + ((int64_t)(KV ? a.H : 0) + h) * 2 * NG + 2 * grp;
        rg[0] = sur[0];
        rg[1] = sur[1];
    }
}

#endif

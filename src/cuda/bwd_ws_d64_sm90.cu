/* Warp-specialized Hopper backward ("ws", issue 6): head dim 64, fp16 / bf16, sm_90a only,
 * padded layout (any mask) and packed (cu_seqlens on the device: WS_UNIT), dropout, c2p and p2c
 * both on or both off. launch.cu routes every other call to the tensor-core kernels
 * (bwd_sm80.cuh). The structure was measured as
 * bench/proto_ws_bwd.cu first (NOTES.md "Band tiles in the warp-specialized prototype", "Band
 * table gradients by bulk reductions"); this is that kernel pair made a library path:
 * persistent groups, any L, bf16, the library's slot map, strides and workspace.
 *
 * Masks (padded layout, any pattern; SPEC "Mask and padded rows"; the *_mask kernels, template
 * flag MSK: calls without a mask run kernels without this code, whose registers it would cost
 * ~4 %, NOTES): masked keys and padded query rows get P = 0 (dq kernel: the producer's key
 * validity and a tile flag choosing the masked body; padded query rows lse = +inf; dkdv kernel:
 * the rows' validity, queries' lse = +inf), and HF padded rows add their uniform softmax's dv
 * term (1 / L) sum_i dout_i, the same for every key row < L, from a small pre-pass
 * (dattn_bwd_ws_hfv) in the dkdv kernel's epilogue.
 *
 * Dropout (the *_drop kernels, template flag DRP; setmaxnreg 56 / 224): the producer's four warps
 * compute each tile's keep bits (the forward's Philox mask, dattn.h DROPOUT) into one 32-bit word
 * per consumer thread (ws_keep_words), staged with the tile (warp 0 issues the tile's copies
 * first, its arrival follows the keep words); the consumers scale dP and the P of dV by keep /
 * (1 - p). HF padded rows' dv term then depends on every key's keep bit, so the dkdv kernel
 * computes it in its tiles instead of the hfv pre-pass: the producer marks HF padded query
 * columns (MK: 1 / L, else -1; the tile flag), whose elements get P = 1 / L for keys < L, dS = 0.
 *
 *   dq kernel (KV = 0):   rows = queries, columns = keys. X = Q, Z = dO, Y = K, W = V; row-side
 *                         table TR = pk (c2p), column-side TC = pq (p2c).
 *                         dQ = scale (dS K + dS_band . pk[slot] + rank-1 saturated terms).
 *   dkdv kernel (KV = 1): rows = keys, columns = queries (transposed); X = K, Z = V, Y = Q,
 *                         W = dO; TR = pq, TC = pk. dK likewise, dV = P^T dO.
 * (P = exp(s - lse), dP = dO V^T, dS = P (dP - D_i), s = (q.k + c2p + p2c) / scale.)
 *
 * Grid (G, H), 384 threads, one CTA per SM: CTA (g, h) walks a contiguous share of head h's
 * B * ceil(L / 128) row blocks of 128 rows in order (the same split for a given call, so every
 * sum has one order: bitwise deterministic). Three warpgroups (setmaxnreg 40 / 232, the mask
 * kernels 56 / 224: the persistent producer needs more than the prototype's 24):
 *   warpgroup 0, the producer: its warp 0 loads X and Z of a row block by TMA (64-row boxes;
 *     rows past L arrive as zeros) once the consumers released the previous one (xempty), and
 *     the Y / W tiles of 64 columns into two stages; the tile's column facts (dkdv kernel: lse *
 *     log2 e and D_i of the query columns; +inf / 0 past L); with position terms the column
 *     constants of the saturated sides and, by all 128 threads, the rings of table rows of the
 *     band tiles (ld.global -> st.shared -> fence.proxy.async). Stage barriers: full (lane 0's
 *     expect-tx arrival plus the other writers' arrivals), empty (256 consumer arrivals).
 *   warpgroups 1, 2, the consumers (64 rows each): per tile S = X Y^T and dP = Z W^T by wgmma,
 *     P and dS in registers, dX += dS Y (dV += P W) with dS / P as register A operands; tiles
 *     are classified per warpgroup: plain (no position terms), saturated (a row constant plus
 *     a column constant; the rows' dS sums give rank-1 dX terms and the saturated slots' table
 *     gradients), band (window products G = X . TR window, H = Y . TC window from the rings,
 *     gathered through a shared fp32 tile D; dX += C . TR window with C the skewed dS; the
 *     band pairs' table gradient E = C^T X staged in shared memory and added by bulk
 *     reductions (the TMA unit; one per 64-row block of the frame and run of consecutive band
 *     tiles, the previous tile's C half kept in S) into the warpgroup's own partial in the row
 *     frame r' = row - column, waited for before the next band tile reuses the buffers).
 * The last column tile of the dq kernel masks keys past L (-inf); the dkdv kernel's row block
 * that crosses L zeroes the P / dS of its keys past L (their rows of X are zeros anyway).
 *
 * Before, in one launch (dattn_bwd_ws_pre2 by whole token rows where heads are contiguous and H
 * <= 16, else dattn_bwd_ws_pre): D_i and the saturated planes (q_i . pk[sat] and k_j . pq[sat],
 * fp32, into the rsat / csat workspace rows). After: the table
 * reduce (two launches: the groups' row-frame partials summed per row r', in place, then per
 * table, slot and d the row sums over the slot's r range (the map is monotone) plus the
 * saturated partials, in a fixed order, into dpk / dpq).
 *
 * Workspace per table (launch.cu, bwd layout): [H][G][2 warpgroups][NK][64 t][64 d] fp32
 * row-frame blocks (block kb holds r' = 64 (kb - nkh) + t - 63, element (t, d) at float 64 t + 4
 * ((d >> 2) ^ (t & 7)) + (d & 3): the staging layout, whose float2 stores are conflict-free),
 * then [H][G][8 consumer warps][2 sides][64] saturated partials; nkh = min(ceil(R / 64),
 * 2 floor((L - 1) / 128) + 1) (ws_nkh_of), NK = 2 nkh + 2. Each CTA zeroes its own blocks
 * first. */
#include "../internal.h" /* (DATTN_WS_UB_MAX) */
#include "bwd_di.cuh"
#include "common.cuh"
#include "sm90.cuh"
#include "tma.cuh"
#include "ws_band.cuh"

#include <cuda_runtime.h>
#include <type_traits> /* (std::integral_constant: the band E step's two bodies) */

/* the four tensors' maps (tma.cuh: 64-row boxes of one head) and their rows-first flags */
typedef struct dattn_ws_maps {
    CUtensorMap q, k, v, o; /* o: dout */
    CUtensorMap er, ec;     /* (te) the expanded tables of the row side and the column side, the
                               kernel's sign (common.cuh, dattn_bwd_args.pexp) */
    int32_t qrf, krf, vrf, orf;
    int32_t te, erf, eoff;  /* te: the ring blocks by TMA from er / ec (eoff: their row of r = 0) */
    int32_t ub[DATTN_WS_UB_MAX]; /* CTA grp runs the head's row blocks [ub[grp], ub[grp + 1])
                                    (dattn_ws_unit_bounds: contiguous, balanced by cost) */
} dattn_ws_maps;

#define WS_L2E 1.4426950408889634f

/* Shared memory (offsets from a 1024-byte-aligned base):
 *   X, Z [128][64]; Y, W [2 stages][64][64] (16-bit, 128-byte swizzled, sm90.cuh's layout);
 *   RR, RC: rings of 4 blocks of 64 table rows (the same layout): block a holds the rows of r =
 *     sgn (m0 - 64 a + t + 65), t = 0..63 (sgn 1 in the dq kernel, -1 in the dkdv kernel), of
 *     the row-side table (RR) and the column-side one (RC), in ring slot a % 4;
 *   C: per consumer warpgroup the skewed dS of a band tile, C[row][u] = dS[row][row - u + 63],
 *     MN-major (16-bit [128 u][64 rows], 128-byte swizzled), zero where no column maps;
 *   D: per consumer warpgroup [64][72] fp32, the band tile's gathered window products;
 *   CF: the column facts [2 stages][4][64] fp32 (dkdv kernel: lse * log2 e and D_i, +inf / 0
 *     for invalid queries; with position terms the column plane of each saturated side); the
 *     barriers; MK (mask kernels, dq kernel): [2 stages][128] fp32, the keys' validity (1 / 0)
 *     and word 64 a tile flag (nonzero: some key of the tile is invalid); KB (dropout kernels);
 *   S: per consumer warpgroup C's half u 0..63 of the last band tile when the next tile is a
 *     band tile too (the E step: both tiles' terms of one row-frame block in one reduction). */
enum {
    WS_X = 0,
    WS_Z = 16384,
    WS_Y = 32768,
    WS_W = 49152,
    WS_RR = 65536,
    WS_RC = WS_RR + 32768,
    WS_C = WS_RC + 32768,
    WS_D = WS_C + 32768,
    WS_CF = WS_D + 2 * 64 * WS_DP * 4,
    WS_BAR = WS_CF + 2048,
    WS_MK = WS_BAR + 64,
    WS_KB = WS_MK + 1024, /* (dropout kernels) [2 stages][256] 32-bit keep words (ws_keep_words) */
    WS_S = (WS_KB + 2048 + 1023) & ~1023, /* per consumer warpgroup C's half u 0..63 carried (the E steps) */
    WS_SMEM = WS_S + 2 * 8192
};

/* the row-frame blocks' offset nkh of a call with length L and slot-map reach R (host and
 * device: the kernels' frame, the workspace size, the reduce's grid). A band tile at (rb0, n0)
 * adds into blocks kb, kb + 1, kb = (rb0 - n0) / 64 + nkh, so the frame holds every band tile
 * when nkh >= |rb0 - n0| / 64 for all of them: a band tile has 64 |delta| - 63 < R (delta <=
 * ceil(R / 64)), and rb0 <= 128 floor((L - 1) / 128) + 64 (m0 128-aligned below L, the second
 * warpgroup's rows past L included), n0 = 64 j < L (no more than that). Packed calls: L is
 * max_seqlen. (The bound was ceil(L / 64) + 1: at L 512 two of the 18 blocks were never added
 * into, yet zeroed and read by the reduce.) */
static __host__ __device__ __forceinline__ int ws_nkh_of(int L, int R)
{
    const int r = (int)(((int64_t)R + 63) / 64), l = L >= 1 ? 2 * ((L - 1) / 128) + 1 : 1;
    return r < l ? r : l;
}

DATTN_DEV int ws_nkh(const dattn_fwd_args &a) { return ws_nkh_of(a.L, a.R); }

/* Whether a warpgroup tile of the ws kernels can lie in a saturated zone (every pair |r| >= R)
 * in this call: rows rb0 = m0 + 64 cw (m0 128-aligned, < L: rb0 up to 128 floor((L - 1) / 128)
 * + 64, past L for the last unit's second warpgroup) and columns n0 = 64 j < L, so the largest
 * |r| a whole tile can keep is E - 63 with E = 128 floor((L - 1) / 128) + 64, in both kernels and
 * on both sides. Packed calls: L is max_seqlen, an upper bound of every sequence's (E grows with
 * L). Without position terms: none. */
static __host__ __device__ __forceinline__ int ws_any_saturated(const dattn_fwd_args &a)
{
    return a.c2p && a.L >= 1 && 128 * ((a.L - 1) / 128) + 1 >= a.R;
}

/* One tile's P and dS from sa = X Y^T (with a band tile's terms already added) and dp = Z W^T
 * of a warpgroup (a thread's elements: rows g, g + 8 of its warp's 16, columns 8 nb + 2 c + (e &
 * 1)), packed as wgmma A operands af (dS) and pf (P, dkdv kernel). Z: 0 no constant terms, 1 / 2
 * every pair on the saturated zone's negative / positive side (rc: the rows' constants, cf[128 +
 * 64 side + col] the columns'; rs gathers the rows' dS sums per side). MK 1: elements at or past
 * the limit lim have P = 0 (dq kernel: columns (keys) >= lim; dkdv kernel: rows (keys) >= lim,
 * warpgroup rows); MK 2 (mask kernels): invalid keys have P = 0 (dq kernel: columns with mkv[col]
 * == 0; dkdv kernel: rows with rv[i] == 0). cb: a band tile's C tile (dS stored skewed), else
 * null. */
template <int BF, int KV, int Z, int MK, int DRP>
DATTN_DEV void ws_tile_ds(const float (&sa)[8][4], const float (&dp)[8][4], const float *cf, const float (&rl2)[2],
                          const float (&rd)[2], const float (&rc)[2][2], float (&rs)[2][2], uint32_t (&af)[4][4],
                          uint32_t (&pf)[4][4], int rl0, int c2, float sl2, char *cb, int lim, const int (&rv)[2],
                          const float *mkv, uint32_t kw, float ksc)
{
    /* the C stores: pair (row, 8 nb + c2 + (e & 1)) goes to u = row - column + 63 = U0 - 8 nb; C is
     * MN-major (u's line of 64 rows is 128 bytes, chunk (row >> 3) ^ (u & 7)): a base minus 1024 nb */
    int cbo[4] = {0, 0, 0, 0};
    if (cb)
        for (int e = 0; e < 4; e++) {
            const int rl = rl0 + 8 * (e >> 1), u0 = rl + 63 - c2 - (e & 1);
            cbo[e] = u0 * 128 + (((rl >> 3) ^ (u0 & 7)) << 4) + (rl & 7) * 2;
        }
#pragma unroll
    for (int nb = 0; nb < 8; nb++) {
        float ds[4], pp[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int col = 8 * nb + c2 + (e & 1);
            const float l2 = KV ? cf[col] : rl2[e >> 1], d = KV ? cf[64 + col] : rd[e >> 1];
            float sc = sa[nb][e];
            if constexpr (Z == 1 || Z == 2) sc += rc[Z - 1][e >> 1] + cf[128 + 64 * (Z - 1) + col];
            pp[e] = ex2f(fmaf(sc, sl2, -l2));
            if constexpr (MK == 1) pp[e] = (KV ? rl0 + 8 * (e >> 1) : col) < lim ? pp[e] : 0.f;
            if constexpr (MK == 2) pp[e] = (KV ? rv[e >> 1] != 0 : mkv[col] != 0.f) ? pp[e] : 0.f;
            if constexpr (DRP) {
                /* keep_ij / (1 - p) (0 where dropped) scales dP and the P of dV */
                const float kf = (kw >> (16 * (e >> 1) + 2 * nb + (e & 1))) & 1u ? ksc : 0.f;
                ds[e] = pp[e] * (dp[nb][e] * kf - d);
                pp[e] *= kf;
                if constexpr (MK == 2 && KV) {
                    /* an HF padded query column (mkv[col] = 1 / L, else -1): P = 1 / L for every key
                     * < L (masked ones included), dS = 0 */
                    const float hp = mkv[col];
                    if (hp >= 0.f) {
                        ds[e] = 0.f;
                        pp[e] = rl0 + 8 * (e >> 1) < lim ? hp * kf : 0.f;
                    }
                }
            } else {
                ds[e] = pp[e] * (dp[nb][e] - d);
            }
            if constexpr (Z == 1 || Z == 2) rs[Z - 1][e >> 1] += ds[e];
        }
        af[nb >> 1][2 * (nb & 1)] = pack2<BF>(ds[0], ds[1]);
        af[nb >> 1][2 * (nb & 1) + 1] = pack2<BF>(ds[2], ds[3]);
        if constexpr (KV) {
            pf[nb >> 1][2 * (nb & 1)] = pack2<BF>(pp[0], pp[1]);
            pf[nb >> 1][2 * (nb & 1) + 1] = pack2<BF>(pp[2], pp[3]);
        }
        if (cb)
            for (int e = 0; e < 4; e++) *(uint16_t *)(cb + cbo[e] - 1024 * nb) = f2h<BF>(ds[e]);
    }
}

/* the same with the tile's mask choice made once per tile (a uniform branch; MSK: the mask
 * kernels' validity test) */
template <int BF, int KV, int Z, int MSK, int DRP>
DATTN_DEV void ws_tile_ds_mk(int mk, const float (&sa)[8][4], const float (&dp)[8][4], const float *cf,
                             const float (&rl2)[2], const float (&rd)[2], const float (&rc)[2][2], float (&rs)[2][2],
                             uint32_t (&af)[4][4], uint32_t (&pf)[4][4], int rl0, int c2, float sl2, char *cb, int lim,
                             const int (&rv)[2], const float *mkv, uint32_t kw, float ksc)
{
    if (mk)
        ws_tile_ds<BF, KV, Z, MSK ? 2 : 1, DRP>(sa, dp, cf, rl2, rd, rc, rs, af, pf, rl0, c2, sl2, cb, lim, rv, mkv, kw, ksc);
    else ws_tile_ds<BF, KV, Z, 0, DRP>(sa, dp, cf, rl2, rd, rc, rs, af, pf, rl0, c2, sl2, cb, lim, rv, mkv, kw, ksc);
}

/* Dropout (DRP kernels): the keep bits of a tile, by the producer's 128 threads (8 Philox calls
 * each: dattn.h DROPOUT, counter (j >> 3, i, b H + h, c3) for query i, key j, bit j & 7 of
 * dev_keep8), into one 32-bit word per consumer thread (kb[128 cw + tw]): bit 16 hr + 2 nb + lo
 * is the thread's element (row rl0 + 8 hr, column 8 nb + 2 c + lo), i.e. ws_tile_ds's (nb, e)
 * with e = 2 hr + lo. dq kernel (rows are queries): thread p computes row p's 8 calls (key groups
 * n0 / 8 + nb) and writes the 16-bit halves of the 4 words of its row (c = 0..3). dkdv kernel
 * (rows are keys, 8 per call): thread p = (cw, warp, hr, c, half) computes the 8 calls of the key
 * group of rows 64 cw + 16 warp + 8 hr, queries 8 nb + 2 c + lo (nb in its half), and writes one
 * byte of each of the 8 words of lanes 4 g + c. */
template <int KV>
DATTN_DEV void ws_keep_words(const dattn_fwd_args &a, char *kb, uint32_t bh, int m0, int n0, int p)
{
    if constexpr (!KV) {
        const uint32_t i = (uint32_t)(m0 + p);
        uint32_t hw[4] = {0u, 0u, 0u, 0u};
#pragma unroll 1
        for (int nb = 0; nb < 8; nb++) {
            uint32_t o0, o1, o2, o3;
            dev_philox((uint32_t)(n0 >> 3) + (uint32_t)nb, i, bh, a.drop_c3, a.drop_k0, a.drop_k1, o0, o1, o2, o3);
            const uint32_t k8 = dev_keep8(o0, o1, o2, o3, a.drop_thr);
            for (int c = 0; c < 4; c++) hw[c] |= ((k8 >> (2 * c)) & 3u) << (2 * nb);
        }
        /* row p = 64 cw + 16 warp + 8 hr + g: word 128 cw + 32 warp + 4 g + c, half hr */
        const int w0 = 128 * (p >> 6) + 32 * ((p >> 4) & 3) + 4 * (p & 7), hr = (p >> 3) & 1;
        for (int c = 0; c < 4; c++) *(uint16_t *)(kb + 4 * (w0 + c) + 2 * hr) = (uint16_t)hw[c];
    } else {
        const int cw = p >> 6, warp = (p >> 4) & 3, hr = (p >> 3) & 1, c = (p >> 1) & 3, half = p & 1;
        const uint32_t jg = (uint32_t)((m0 + 64 * cw + 16 * warp + 8 * hr) >> 3);
        uint32_t by[2] = {0u, 0u}; /* byte g & 3 of by[g >> 2]: lane 4 g + c */
#pragma unroll 1
        for (int q = 0; q < 8; q++) {
            const int nb = 4 * half + (q >> 1), lo = q & 1;
            uint32_t o0, o1, o2, o3;
            dev_philox(jg, (uint32_t)(n0 + 8 * nb + 2 * c + lo), bh, a.drop_c3, a.drop_k0, a.drop_k1, o0, o1, o2, o3);
            const uint32_t k8 = dev_keep8(o0, o1, o2, o3, a.drop_thr);
            for (int g = 0; g < 8; g++) by[g >> 2] |= ((k8 >> g) & 1u) << (8 * (g & 3) + q);
        }
        /* bit q = 2 (nb - 4 half) + lo of byte 2 hr + half of word 128 cw + 32 warp + 4 g + c */
        for (int g = 0; g < 8; g++)
            kb[4 * (128 * cw + 32 * warp + 4 * g + c) + 2 * hr + half] = (char)(by[g >> 2] >> (8 * (g & 3)));
    }
}

/* sa = X Y^T, dp = Z W^T over the tile (K = 64) */
template <int BF>
DATTN_DEV void ws_s_dp_products(float (&sa)[8][4], float (&dp)[8][4], uint64_t dx, uint64_t dy, uint64_t dz, uint64_t dw)
{
    for (int ks = 0; ks < 4; ks++) wgmma_ss<64, BF, 0, 0>(sa, desc_add(dx, 32 * ks), desc_add(dy, 32 * ks), ks > 0);
    for (int ks = 0; ks < 4; ks++) wgmma_ss<64, BF, 0, 0>(dp, desc_add(dz, 32 * ks), desc_add(dw, 32 * ks), ks > 0);
}

/* At a band tile's start (while its first products run): the previous band tile's bulk
 * reductions complete (they read D and C, and a later one may add into the same row-frame block:
 * waiting for completion orders them), then C's zeros again (it may have staged E's half e0) */
DATTN_DEV void ws_band_reuse(char *cb, int tw, int cw)
{
    if (tw == 0) bulk_wait_all();
    bar_sync_named(1 + cw, 128);
    const uint4 zero = {0u, 0u, 0u, 0u};
    for (int i = 0; i < 8; i++) *(uint4 *)(cb + 16 * (tw + 128 * i)) = zero;
}

template <int BF, int KV, int MSK, int DRP, int PK>
DATTN_DEV void ws_body(const dattn_bwd_args &A, const dattn_ws_maps &M)
{
    const dattn_fwd_args &a = A.f;
    extern __shared__ __align__(1024) char smem_raw[];
    const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
    char *smem = smem_raw + (base - raw);
    const uint32_t xfull = base + WS_BAR, xempty = base + WS_BAR + 8, full0 = base + WS_BAR + 16,
                   empty0 = base + WS_BAR + 32;
    /* (wg through a shuffle: warp-uniform to the compiler, so that the descriptors built from it
     * stay in uniform registers) */
    const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), warp = (tid >> 5) & 3, lane = tid & 31;
    const int grp = blockIdx.x, NG = gridDim.x, h = blockIdx.y;
    /* (row blocks u0 .. u1 - 1 of the head: formed after the register split, in each branch) */
#define WS_UNITS                                                                                   \
    const int L0 = a.L, nt0 = (L0 + 63) / 64, nblk = (L0 + 127) / 128;                            \
    const int u0 = M.ub[grp], u1 = M.ub[grp + 1];                                                 \
    const int R = pos ? a.R : 0
    /* unit u = row block m0 = 128 (u % nblk) of sequence b = u / nblk (nblk from L, packed: the
     * longest sequence). The packed kernels (PK; no mask) skip a sequence's blocks at or past
     * its length in the producer and the consumers alike (ui, the index of the block among those
     * run, drives the xfull / xempty parities), and take per block tok0, the sequence's first
     * token (padded: 0), and L, its length (padded: a.L); nt: its column tiles. Rows [L, ...) of
     * a packed block's boxes are the next sequence's tokens (finite), which the limits below
     * treat as the padded layout's zeros past L: P = 0, never stored. (Padded calls run kernels
     * without this code: with it inside, the padded backward at B2 L8192 measured ~1 % slower,
     * NOTES "Call 1".) */
#define WS_UNIT                                                                                    \
    const int b = u / nblk, m0 = (u % nblk) * 128;                                                 \
    int tok0 = 0, L = L0, nt = nt0;                                                                \
    if (PK) {                                                                                      \
        dev_seq(a, b, tok0, L);                                                                    \
        if (m0 >= L) continue;                                                                     \
        nt = (L + 63) / 64;                                                                        \
    }                                                                                              \
    const int tb = PK ? 0 : b, ui = PK ? nu : u - u0;                                              \
    (void)tb
    /* row (b, i) of the workspace row arrays (ws_row, the layout fixed by PK) */
#define WS_ROW(i_) ws_row_of<PK>(A, b, h, tok0, (i_))
    const int pos = a.c2p; /* (c2p == p2c on this path) */
    /* the rings from the expanded tables (not in the mask + dropout kernels: there ptxas spills
     * 16 bytes with the branch in; the launcher leaves te 0 for them) */
    const int te = MSK && DRP ? 0 : M.te;
    /* (the pointers below are formed where they are used, from the parameters: nothing held in
     * the consumers' registers across the tile loop) tables: row side TR (dq kernel pk, dkdv
     * kernel pq), column side TC; saturated planes [row][2 sides] (rsat: q . pk[sat], csat: k .
     * pq[sat]) of the rows' side and the columns' side */
#define WS_TR ((const uint16_t *)(KV ? a.pq : a.pk) + (int64_t)h * (KV ? a.pq_sh : a.pk_sh))
#define WS_TC ((const uint16_t *)(KV ? a.pk : a.pq) + (int64_t)h * (KV ? a.pk_sh : a.pq_sh))
#define WS_TRS (KV ? a.pq_ss : a.pk_ss)
#define WS_TCS (KV ? a.pk_ss : a.pq_ss)
#define WS_RPLANE (KV ? A.csat : A.rsat)
#define WS_CPLANE (KV ? A.rsat : A.csat)
    if (tid == 0) {
        mbar_init(xfull, 1);
        mbar_init(xempty, 256);
        for (int s = 0; s < 2; s++) {
            /* arrivals: lane 0 (with the copies' bytes); with column facts its warp's 32 lanes; with
             * position terms the producer's 128 threads (the ring rows; from the expanded tables,
             * M.te, warp 0 alone) */
            mbar_init(full0 + 8 * s, DRP || (pos && !te) ? 128 : pos || KV ? 32 : 1);
            mbar_init(empty0 + 8 * s, 256);
        }
        mbar_init_fence();
    }
    __syncthreads();
    /* (the split must fit the CTA's pool of 384 x 168 registers, or setmaxnreg.inc waits forever) */
    constexpr int NREG_P = MSK || DRP ? 56 : 40, NREG_C = MSK || DRP ? 224 : 232;
    static_assert(128 * NREG_P + 256 * NREG_C <= 384 * 168, "bws: the register split exceeds the CTA's pool");
    if (wg == 0) {
        setmaxnreg_dec<NREG_P>();
        if (warp != 0 && (!pos || te) && !DRP) return;
        const int one = warp == 0 && lane == 0;
        WS_UNITS;
        const CUtensorMap *mx = KV ? &M.k : &M.q, *mz = KV ? &M.v : &M.o, *my = KV ? &M.q : &M.k, *mw = KV ? &M.o : &M.v;
        const int xrf = KV ? M.krf : M.qrf, zrf = KV ? M.vrf : M.orf, yrf = KV ? M.qrf : M.krf, wrf = KV ? M.orf : M.vrf;
        const uint16_t *tr = WS_TR, *tcol = WS_TC;
        const int64_t trs = WS_TRS, tcs = WS_TCS;
        const float *cplane = WS_CPLANE;
        int tcount = 0, nu = 0;
        for (int u = u0; u < u1; u++) {
            WS_UNIT;
            if (ui > 0) mbar_wait(xempty, (uint32_t)(ui - 1) & 1u); /* the previous block's X, Z, rings read */
            nu++;
            if (warp == 0) {
                mbar_arrive_expect_tx_if(one, xfull, 4 * 64 * 128);
                for (int half = 0; half < 2; half++) {
                    tma_load_rows_if(one, base + WS_X + 8192 * half, mx, xfull, xrf, h, tok0 + m0 + 64 * half, tb);
                    tma_load_rows_if(one, base + WS_Z + 8192 * half, mz, xfull, zrf, h, tok0 + m0 + 64 * half, tb);
                }
            }
            for (int j = 0; j < nt; j++, tcount++) {
                const int s = tcount & 1;
                /* the tile's column facts (warp 0; lane l takes columns 2 l, 2 l + 1; +inf / 0 past
                 * L or masked), loaded before the stage's empty wait so that their latency runs
                 * during it: stored after it, they used to delay the stage's arrival and copies,
                 * and the consumers waited on that (NOTES "What the ncu profile says about the
                 * backward at B8 L2048"). Not in the mask + dropout kernels: there ptxas spills 8
                 * bytes with the values held across the wait, so they load after it as before. */
                constexpr int PF = !(MSK && DRP);
                /* column e's facts: validity, lse * log2 e, D_i (dkdv kernel), the two planes */
                struct facts { int ok; float l, d, p0, p1; };
                auto col_facts = [&](int e) {
                    facts f = {0, 0.f, 0.f, 0.f, 0.f};
                    const int col = 64 * j + 2 * lane + e;
                    f.ok = col < L && (!MSK || a.mask[(int64_t)b * a.m_sb + (int64_t)col * a.m_sl] != 0);
                    const int64_t wr = WS_ROW(f.ok ? col : 0);
                    if (KV) {
                        f.l = f.ok ? a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + col) * a.l_sl] * WS_L2E
                                   : __int_as_float(0x7f800000);
                        f.d = f.ok ? A.di[wr] : 0.f;
                    }
                    if (pos && cplane) {
                        f.p0 = f.ok ? cplane[2 * wr] : 0.f;
                        f.p1 = f.ok ? cplane[2 * wr + 1] : 0.f;
                    }
                    return f;
                };
                facts pre[2] = {{0, 0.f, 0.f, 0.f, 0.f}, {0, 0.f, 0.f, 0.f, 0.f}};
                if (PF && warp == 0) pre[0] = col_facts(0), pre[1] = col_facts(1);
                if (tcount >= 2) mbar_wait(empty0 + 8 * s, (uint32_t)((tcount >> 1) - 1) & 1u);
                float *cf = (float *)(smem + WS_CF + 1024 * s);
                if (DRP && warp == 0) {
                    /* (dropout kernels: the copies first, the thread's arrival after its keep words) */
                    mbar_expect_tx_if(one, full0 + 8 * s, 2 * 64 * 128);
                    tma_load_rows_if(one, base + WS_Y + 8192 * s, my, full0 + 8 * s, yrf, h, tok0 + 64 * j, tb);
                    tma_load_rows_if(one, base + WS_W + 8192 * s, mw, full0 + 8 * s, wrf, h, tok0 + 64 * j, tb);
                }
                if (warp == 0) {
                    int bad = 0;
                    for (int e = 0; e < 2; e++) {
                        const facts f = PF ? pre[e] : col_facts(e);
                        const int col = 64 * j + 2 * lane + e, ok = f.ok;
                        if constexpr (MSK && !KV) {
                            bad |= !ok;
                            ((float *)(smem + WS_MK + 512 * s))[2 * lane + e] = ok ? 1.f : 0.f;
                        }
                        if constexpr (MSK && DRP && KV) {
                            /* (dropout: HF padded query columns in the tile, ws_tile_ds; the flag) */
                            const int hp = a.hf && col < L && !ok;
                            bad |= hp;
                            ((float *)(smem + WS_MK + 512 * s))[2 * lane + e] = hp ? 1.f / (float)L : -1.f;
                        }
                        if (KV) {
                            cf[2 * lane + e] = f.l;
                            cf[64 + 2 * lane + e] = f.d;
                        }
                        if (pos) {
                            cf[128 + 2 * lane + e] = f.p0;
                            cf[192 + 2 * lane + e] = f.p1;
                        }
                    }
                    if constexpr (MSK && (!KV || DRP)) {
                        /* (dq kernel: an invalid key; dkdv kernel with dropout: an HF padded query) */
                        bad = __any_sync(0xffffffffu, bad);
                        if (lane == 0) ((int *)(smem + WS_MK + 512 * s))[64] = bad;
                    }
                }
                if (pos) {
                    /* the ring blocks first needed by tile j (blocks 0 .. 2 at tile 0, then block j +
                     * 2), each only if a tile a - 2 .. a that reads it is a band tile; the slot it
                     * overwrites was last read by tile j - 2 (the stage's empty wait) or by the
                     * previous row block (xempty) */
                    for (int ab = j ? j + 2 : 0; ab <= j + 2; ab++) {
                        int need = 0;
                        for (int jj = ab - 2; jj <= ab; jj++) need |= jj >= 0 && jj < nt && ws_is_band<KV>(m0, 128, 64 * jj, R);
                        if (!need) continue;
                        if (te) {
                            /* (te) the block's 64 rows of both expanded tables, two bulk copies on
                             * the stage's full barrier (the rows x = m0 - 64 ab + 65 + t of the
                             * kernel's sign) */
                            if (warp == 0) {
                                const uint32_t o = 8192u * (uint32_t)(ab & 3);
                                const int row = m0 - 64 * ab + 65 + M.eoff;
                                mbar_expect_tx_if(one, full0 + 8 * s, 2 * 8192);
                                tma_load_rows_if(one, base + WS_RR + o, &M.er, full0 + 8 * s, M.erf, h, row, 0);
                                tma_load_rows_if(one, base + WS_RC + o, &M.ec, full0 + 8 * s, M.erf, h, row, 0);
                            }
                            continue;
                        }
                        const int ch = tid & 7;
#pragma unroll 1
                        for (int i = 0; i < 4; i++) { /* (rolled: the producer's 40 registers) */
                            const int t = (tid >> 3) + 16 * i;
                            int r = m0 - 64 * ab + t + 65;
                            r = KV ? -r : r;
                            const int sl = dev_slot(a, a.tab, r);
                            const uint4 vr = *(const uint4 *)(tr + sl * trs + 8 * ch), vc = *(const uint4 *)(tcol + sl * tcs + 8 * ch);
                            const uint32_t o = 8192u * (uint32_t)(ab & 3) + (uint32_t)(t * 128 + ((ch ^ (t & 7)) << 4));
                            *(uint4 *)(smem + WS_RR + o) = vr;
                            *(uint4 *)(smem + WS_RC + o) = vc;
                        }
                    }
                    fence_proxy_async(); /* (the ring rows are read by wgmma: the async proxy) */
                }
                if constexpr (DRP) ws_keep_words<KV>(a, smem + WS_KB + 1024 * s, (uint32_t)(b * a.H + h), m0, 64 * j, tid);
                mbar_arrive_expect_tx_if(pos || DRP || (KV && warp == 0) || one, full0 + 8 * s, one && !DRP ? 2 * 64 * 128 : 0);
                if (!DRP && warp == 0) {
                    tma_load_rows_if(one, base + WS_Y + 8192 * s, my, full0 + 8 * s, yrf, h, tok0 + 64 * j, tb);
                    tma_load_rows_if(one, base + WS_W + 8192 * s, mw, full0 + 8 * s, wrf, h, tok0 + 64 * j, tb);
                }
            }
        }
        return;
    }
    setmaxnreg_inc<NREG_C>();
    WS_UNITS;
    /* consumers: warpgroup cw owns rows m0 + 64 cw .. + 63; thread rows 16 warp + g (+ 8) */
    const int cw = wg - 1, tw = tid - 128 * wg, g = lane >> 2, c_ = lane & 3, rl0_ = 16 * warp + g, c = c_, rl0 = rl0_;
    char *cb = smem + WS_C + 16384 * cw;
    float *dg = (float *)(smem + WS_D + 64 * WS_DP * 4 * cw);
    const int nkh = pos ? ws_nkh(a) : 0, NK = 2 * nkh + 2;
#define WS_FPART ((KV ? A.ppq : A.ppk) + (((int64_t)h * NG + grp) * 2 + cw) * NK * 4096)
    if (pos) {
        /* this warpgroup's row-frame blocks start at zero (generic stores, then ordered before the
         * bulk reductions by the async-proxy fence and the band tiles' barriers); C's zeros */
        const float4 z4 = make_float4(0.f, 0.f, 0.f, 0.f);
        float *fpart = WS_FPART;
        for (int i = tw; i < NK * 1024; i += 128) ((float4 *)fpart)[i] = z4;
        tma_fence_proxy_async_global();
        const uint4 zero = {0u, 0u, 0u, 0u};
        for (int i = 0; i < 8; i++) *(uint4 *)(cb + 16 * (tw + 128 * i)) = zero;
        bar_sync_named(1 + cw, 128);
    }
    /* descriptor bases (sm90.cuh): K-major X, Z (the warpgroup's rows), Y, W (stage 0), the rings
     * (slot 0); MN-major Y, W (stage 0), the row-side ring, C; C K-major, X MN-major (E) */
    const uint64_t dX = desc_kmajor(base + WS_X, 128, 64 * cw, 0), dZ = desc_kmajor(base + WS_Z, 128, 64 * cw, 0);
    const uint64_t dY0 = desc_kmajor(base + WS_Y, 64, 0, 0), dW0 = desc_kmajor(base + WS_W, 64, 0, 0);
    const uint64_t dRR = desc_kmajor(base + WS_RR, 64, 0, 0), dRC = desc_kmajor(base + WS_RC, 64, 0, 0);
    const uint64_t dYm0 = desc_mnmajor(base + WS_Y, 64, 0), dWm0 = desc_mnmajor(base + WS_W, 64, 0);
    const uint64_t dRRm = desc_mnmajor(base + WS_RR, 64, 0), dCm = desc_mnmajor(smem_u32(cb), 64, 0);
    const uint64_t dCk = desc_kmajor(smem_u32(cb), 128, 0, 0), dXm = desc_mnmajor(base + WS_X + 8192 * cw, 64, 0);
    const uint64_t dSk = desc_kmajor(base + WS_S + 8192 * cw, 128, 0, 0); /* (S: C's carried half) */
    /* the saturated slots' table gradient of this warp: [2 sides][64], lane l owns d 2 l, 2 l + 1 */
#define WS_SP ((KV ? A.ppq : A.ppk) + (int64_t)a.H * NG * 2 * NK * 4096 + (((int64_t)h * NG + grp) * 8 + 4 * cw + warp) * 128)
    if (pos)
        for (int sd = 0; sd < 2; sd++) *(float2 *)(WS_SP + 64 * sd + 2 * lane) = make_float2(0.f, 0.f);
    /* whether a tile of the call can be saturated (the launcher's ws_any_saturated: it passes the
     * planes only then). Without, rs stays 0 and the row block's saturated work (the rs sums,
     * their dX and table-gradient terms) would add zeros: skipped; the partial stays 0. */
    const int sat = pos && WS_RPLANE != nullptr;
    int tcount = 0, nu = 0;
    for (int u = u0; u < u1; u++) {
        WS_UNIT;
        const int rb0 = m0 + 64 * cw;
        float rl2[2] = {0.f, 0.f}, rd[2] = {0.f, 0.f}, rc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
        float rs[2][2] = {{0.f, 0.f}, {0.f, 0.f}}; /* [side][row] */
        int rv[2]; /* (mask kernels) the rows' validity: inside L, not masked */
        for (int i = 0; i < 2; i++) {
            const int row = rb0 + rl0 + 8 * i;
            const int ok = row < L && (!MSK || a.mask[(int64_t)b * a.m_sb + (int64_t)row * a.m_sl] != 0);
            rv[i] = ok;
            const int64_t wr = WS_ROW(ok ? row : 0);
            if (!KV) {
                rl2[i] = ok ? a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + row) * a.l_sl] * WS_L2E
                            : __int_as_float(0x7f800000); /* p = 0 */
                rd[i] = ok ? A.di[wr] : 0.f;
            }
            if (sat) {
                rc[0][i] = ok ? WS_RPLANE[2 * wr] : 0.f;
                rc[1][i] = ok ? WS_RPLANE[2 * wr + 1] : 0.f;
            }
        }
        int mrow = 0; /* (mask kernels, dkdv kernel) an invalid key row in the warp */
        if constexpr (MSK && KV) mrow = __any_sync(0xffffffffu, !rv[0] || !rv[1]);
        float dx[8][4], dv[8][4]; /* (dv: dkdv kernel only) */
        for (int nb = 0; nb < 8; nb++) {
            dx[nb][0] = dx[nb][1] = dx[nb][2] = dx[nb][3] = 0.f;
            dv[nb][0] = dv[nb][1] = dv[nb][2] = dv[nb][3] = 0.f;
        }
        mbar_wait(xfull, (uint32_t)ui & 1u);
        nu++;
        for (int j = 0; j < nt; j++, tcount++) {
            const int s = tcount & 1;
            const uint64_t dY = desc_add(dY0, 8192u * s), dW = desc_add(dW0, 8192u * s);
            const uint64_t dYm = desc_add(dYm0, 8192u * s), dWm = desc_add(dWm0, 8192u * s);
            mbar_wait(full0 + 8 * s, (uint32_t)(tcount >> 1) & 1u);
            /* (mask kernels: dq kernel, the producer's flag of the tile's keys; dkdv kernel, the
             * warp's rows) */
            const int n0 = 64 * j, lim = KV ? L - rb0 : L - n0,
                      mk = MSK ? (KV ? mrow | (DRP ? ((const int *)(smem + WS_MK + 512 * s))[64] : 0)
                                     : ((const int *)(smem + WS_MK + 512 * s))[64])
                               : lim < 64;
            const int rmin = KV ? n0 - (rb0 + 63) : rb0 - (n0 + 63), rmax = KV ? n0 + 63 - rb0 : rb0 + 63 - n0;
            const int zone = !pos ? 0 : rmin >= R ? 2 : rmax <= -R ? 1 : 3; /* 3: band */
            /* ring blocks of the window's columns u = 0..63 / 64..127 (u = row - column + 63) */
            const uint32_t ra0 = 8192u * (uint32_t)((j + 2 - cw) & 3), ra1 = 8192u * (uint32_t)((j + 1 - cw) & 3);
            const uint64_t dR0 = desc_add(dRR, ra0), dR1 = desc_add(dRR, ra1), dC0 = desc_add(dRC, ra0), dC1 = desc_add(dRC, ra1);
            const uint64_t dR0m = desc_add(dRRm, ra0), dR1m = desc_add(dRRm, ra1);
            const float *cf = (const float *)(smem + WS_CF + 1024 * s), *mkv = (const float *)(smem + WS_MK + 512 * s);
            const uint32_t kw = DRP ? ((const uint32_t *)(smem + WS_KB + 1024 * s))[tid - 128] : 0u;
            uint32_t af[4][4], pf[4][4]; /* dS (and P, dkdv kernel) as A operands, columns 16 kk .. + 15 */
            float sa[8][4], dp[8][4];
            if (zone == 3) {
                /* a band tile: every pair's c2p + p2c from two window products, gathered through D */
                if constexpr (!KV) {
                    /* (dq kernel) S, dP and the row side's G in one group, H in flight while G is added */
                    float gw[2][8][4];
                    const int rl0 = ws_opaque(rl0_), c = ws_opaque(c_);
                    wgmma_fence();
                    ws_s_dp_products<BF>(sa, dp, dX, dY, dZ, dW);
                    ws_window_products<BF>(gw, dX, dR0, dR1);
                    wgmma_commit();
                    ws_band_reuse(cb, tw, cw);
                    wgmma_wait<0>();
                    reg_fence(sa);
                    reg_fence(dp);
                    reg_fence(gw[0]);
                    reg_fence(gw[1]);
                    ws_gather_g2(dg, gw[0], gw[1], rl0, c);
                    __syncwarp();
                    wgmma_fence();
                    ws_window_products<BF>(gw, dY, dC0, dC1);
                    wgmma_commit();
                    ws_add_d(sa, dg, rl0, c);
                    wgmma_wait<0>();
                    reg_fence(gw[0]);
                    reg_fence(gw[1]);
                    bar_sync_named(1 + cw, 128); /* every warp's G reads done */
                    ws_gather_h<0>(dg, gw, rl0, c);
                    bar_sync_named(1 + cw, 128);
                    ws_add_d(sa, dg, rl0, c);
                } else { /* (dkdv kernel, whose dV registers leave no room for the fused order) G, H, then S and dP */
                    float gw[2][8][4];
                    const int rl0 = ws_opaque(rl0_), c = ws_opaque(c_);
                    wgmma_fence();
                    ws_window_products<BF>(gw, dX, dR0, dR1);
                    wgmma_commit();
                    ws_band_reuse(cb, tw, cw);
                    wgmma_wait<0>();
                    reg_fence(gw[0]);
                    reg_fence(gw[1]);
                    ws_gather_g2(dg, gw[0], gw[1], rl0, c);
                    wgmma_fence();
                    ws_window_products<BF>(gw, dY, dC0, dC1);
                    wgmma_commit();
                    wgmma_wait<0>();
                    reg_fence(gw[0]);
                    reg_fence(gw[1]);
                    bar_sync_named(1 + cw, 128); /* every warp's G stores done */
                    /* (the mask + dropout entries keep the two-store form: the one-store one spills 8 bytes there) */
                    if constexpr (MSK && DRP) ws_gather_h_pred<1>(dg, gw, rl0, c);
                    else ws_gather_h<1>(dg, gw, rl0, c);
                    bar_sync_named(1 + cw, 128);
                    wgmma_fence();
                    ws_s_dp_products<BF>(sa, dp, dX, dY, dZ, dW);
                    wgmma_commit();
                    wgmma_wait<0>();
                    reg_fence(sa);
                    reg_fence(dp);
                    ws_add_d(sa, dg, rl0, c);
                }
                ws_tile_ds_mk<BF, KV, 0, MSK, DRP>(mk, sa, dp, cf, rl2, rd, rc, rs, af, pf, rl0, 2 * c, a.sl2, cb, lim, rv, mkv, kw, a.drop_scale);
                fence_proxy_async(); /* (C is read by wgmma) */
                bar_sync_named(1 + cw, 128);
                /* the band pairs' table gradient over the window, E[u][d] = sum_row C[row][u] X[row][d],
                 * by halves: u 0..63 for the row-frame block kb, u 64..127 for kb + 1. The next column
                 * tile's kb is this one's kb - 1: when it is a band tile too (nx), its half u 64..127
                 * lands in this tile's block kb, element for element (the same rows X; t = u - 64
                 * there, u here). So this tile's C half u 0..63 is kept (in S) and that block's
                 * gradient ec = S^T X + C[64..127]^T X is formed by the next tile (car: the previous
                 * tile was a band tile), one bulk reduction per block and run of band tiles instead
                 * of two (NOTES "The band reductions' traffic"); e0, the half u 0..63 of the run's
                 * last tile, goes out by itself, from a group of its own. (Each wgmma group with its
                 * wait in one branch, straight-line: accumulators in flight across a branch made
                 * ptxas inject warpgroup.arrive and spill.) */
                const int nx = j + 1 < nt && ws_is_band<KV>(rb0, 64, n0 + 64, R), car = j > 0 && ws_is_band<KV>(rb0, 64, n0 - 64, R);
                float ec[8][4];
                auto dx_ec = [&](auto CAR) {
                    constexpr int car_ = decltype(CAR)::value;
                    wgmma_fence();
                    for (int kk = 0; kk < 4; kk++) wgmma_rs<64, BF, 1>(dx, af[kk], desc_add(dYm, 2048 * kk), 1);
                    /* dX += C . TR window (the band's c2p / p2c gradient of the rows) */
                    for (int kk = 0; kk < 8; kk++)
                        wgmma_ss<64, BF, 1, 1>(dx, desc_add(dCm, 2048 * kk), desc_add(kk < 4 ? dR0m : dR1m, 2048 * (kk & 3)), 1);
                    if constexpr (KV)
                        for (int kk = 0; kk < 4; kk++) wgmma_rs<64, BF, 1>(dv, pf[kk], desc_add(dWm, 2048 * kk), 1);
                    if constexpr (car_)
                        for (int ks = 0; ks < 4; ks++) wgmma_ss<64, BF, 0, 1>(ec, desc_add(dSk, 32 * ks), desc_add(dXm, 2048 * ks), ks > 0);
                    for (int ks = 0; ks < 4; ks++)
                        wgmma_ss<64, BF, 0, 1>(ec, desc_add(dCk, 8192 + 32 * ks), desc_add(dXm, 2048 * ks), car_ || ks > 0);
                    wgmma_commit();
                    wgmma_wait<0>();
                    reg_fence(dx);
                    if constexpr (KV) reg_fence(dv);
                    reg_fence(ec);
                };
                if (car) dx_ec(std::integral_constant<int, 1>());
                else dx_ec(std::integral_constant<int, 0>());
                /* E times 1 / scale staged as fp32 [64][64] blocks: ec in D (free since the barrier
                 * after the P / dS pass); after every warp's wgmma reads of C and S, C's half u 0..63
                 * into S (nx) or e0 in C; one thread adds them into the row-frame blocks kb + 1, kb */
                auto stage = [&](float *st, const float (&e)[8][4]) {
                    for (int nb = 0; nb < 8; nb++)
                        for (int i = 0; i < 2; i++) {
                            const int t = rl0 + 8 * i;
                            *(float2 *)(st + 64 * t + 4 * ((2 * nb + (c >> 1)) ^ (t & 7)) + 2 * (c & 1)) =
                                make_float2(e[nb][2 * i] * A.inv_scale, e[nb][2 * i + 1] * A.inv_scale);
                        }
                };
                stage(dg, ec);
                if (nx) {
                    bar_sync_named(1 + cw, 128);
                    for (int i = 0; i < 4; i++)
                        *(uint4 *)(smem + WS_S + 8192 * cw + 16 * (tw + 128 * i)) = *(const uint4 *)(cb + 16 * (tw + 128 * i));
                } else {
                    float e0[8][4];
                    wgmma_fence();
                    for (int ks = 0; ks < 4; ks++) wgmma_ss<64, BF, 0, 1>(e0, desc_add(dCk, 32 * ks), desc_add(dXm, 2048 * ks), ks > 0);
                    wgmma_commit();
                    wgmma_wait<0>();
                    reg_fence(e0);
                    bar_sync_named(1 + cw, 128);
                    stage((float *)cb, e0);
                }
                fence_proxy_async(); /* (read by the bulk reductions and, S, by wgmma: the async proxy) */
                bar_sync_named(1 + cw, 128);
                if (tw == 0) {
                    float *fpart = WS_FPART;
                    const int64_t kb = ((rb0 - n0) >> 6) + nkh;
                    bulk_reduce_add_f32(fpart + (kb + 1) * 4096, smem_u32(dg), 16384);
                    if (!nx) bulk_reduce_add_f32(fpart + kb * 4096, smem_u32(cb), 16384);
                    bulk_commit();
                }
            } else {
                wgmma_fence();
                ws_s_dp_products<BF>(sa, dp, dX, dY, dZ, dW);
                wgmma_commit();
                wgmma_wait<0>();
                reg_fence(sa);
                reg_fence(dp);
                /* (the zone is uniform over the warpgroup: one specialized body per zone) */
                if (zone == 0)
                    ws_tile_ds_mk<BF, KV, 0, MSK, DRP>(mk, sa, dp, cf, rl2, rd, rc, rs, af, pf, rl0, 2 * c, a.sl2, nullptr, lim, rv, mkv, kw, a.drop_scale);
                else if (zone == 1)
                    ws_tile_ds_mk<BF, KV, 1, MSK, DRP>(mk, sa, dp, cf, rl2, rd, rc, rs, af, pf, rl0, 2 * c, a.sl2, nullptr, lim, rv, mkv, kw, a.drop_scale);
                else
                    ws_tile_ds_mk<BF, KV, 2, MSK, DRP>(mk, sa, dp, cf, rl2, rd, rc, rs, af, pf, rl0, 2 * c, a.sl2, nullptr, lim, rv, mkv, kw, a.drop_scale);
                wgmma_fence();
                for (int kk = 0; kk < 4; kk++) wgmma_rs<64, BF, 1>(dx, af[kk], desc_add(dYm, 2048 * kk), 1);
                if constexpr (KV)
                    for (int kk = 0; kk < 4; kk++) wgmma_rs<64, BF, 1>(dv, pf[kk], desc_add(dWm, 2048 * kk), 1);
                wgmma_commit();
                wgmma_wait<0>();
                reg_fence(dx);
                if constexpr (KV) reg_fence(dv);
            }
            mbar_arrive(empty0 + 8 * s); /* the stage is free (its reads completed at the wait above) */
        }
        /* The row block's end. Only the saturated rows' dX-gradient sums read X (shared memory), so
         * they come first and the consumers then release X, Z and the rings (xempty), letting the
         * producer's copies of the next block's X and Z start; the work with global-memory latency
         * (the saturated table rows' dX terms, the saturated partials' read-modify-write, the dX /
         * dV stores) runs while those copies are in flight. The same operations in the same order
         * per value as before: the same bits. */
        float sacc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
        if (sat) {
            /* the rows' dS sums over the saturated zone (the quad's four lanes hold parts of each) */
            for (int sd = 0; sd < 2; sd++)
                for (int i = 0; i < 2; i++) {
                    rs[sd][i] += __shfl_xor_sync(0xffffffffu, rs[sd][i], 1);
                    rs[sd][i] += __shfl_xor_sync(0xffffffffu, rs[sd][i], 2);
                }
            /* the saturated slots' table gradient of the warp's 16 rows: lane l, columns 2 l, 2 l +
             * 1, rows in order (row rr's sums come from lane 4 (rr & 7), half rr >> 3) */
            for (int rr = 0; rr < 16; rr++) {
                const int row = 64 * cw + 16 * warp + rr;
                const float s0 = __shfl_sync(0xffffffffu, rr < 8 ? rs[0][0] : rs[0][1], 4 * (rr & 7));
                const float s1 = __shfl_sync(0xffffffffu, rr < 8 ? rs[1][0] : rs[1][1], 4 * (rr & 7));
                for (int e = 0; e < 2; e++) {
                    const int d = 2 * lane + e;
                    const float x = h2f<BF>(*(const uint16_t *)(smem + WS_X + row * 128 + (((d >> 3) ^ (row & 7)) << 4) + (d & 7) * 2));
                    sacc[0][e] = fmaf(s0, x, sacc[0][e]);
                    sacc[1][e] = fmaf(s1, x, sacc[1][e]);
                }
            }
        }
        mbar_arrive(xempty); /* this row block's X, Z and ring reads are done */
        if (sat) {
            /* dX += rs . TR[sat side] (side 0: r <= -R, slot sat_neg; side 1: sat_pos) */
            const uint16_t *t0 = WS_TR + (int64_t)a.sat_neg * WS_TRS, *t1 = WS_TR + (int64_t)a.sat_pos * WS_TRS;
            for (int nb = 0; nb < 8; nb++)
                for (int e = 0; e < 4; e++) {
                    const int d = 8 * nb + 2 * c + (e & 1);
                    dx[nb][e] += rs[0][e >> 1] * h2f<BF>(t0[d]) + rs[1][e >> 1] * h2f<BF>(t1[d]);
                }
            /* added to the warp's saturated partial (times 1 / scale; its only writer) */
            for (int sd = 0; sd < 2; sd++) {
                float2 *q = (float2 *)(WS_SP + 64 * sd + 2 * lane);
                const float2 o = *q;
                *q = make_float2(fmaf(sacc[sd][0], A.inv_scale, o.x), fmaf(sacc[sd][1], A.inv_scale, o.y));
            }
        }
        uint16_t *ox = (uint16_t *)(KV ? A.dk : A.dq);
        const int64_t osb = KV ? A.dk_sb : A.dq_sb, osl = KV ? A.dk_sl : A.dq_sl, osh = KV ? A.dk_sh : A.dq_sh;
        for (int i = 0; i < 2; i++) {
            const int row = rb0 + rl0 + 8 * i;
            if (row >= L) continue;
            uint16_t *o = ox + (int64_t)b * osb + (int64_t)(tok0 + row) * osl + (int64_t)h * osh + 2 * c;
            uint16_t *ov = KV ? (uint16_t *)A.dv + (int64_t)b * A.dv_sb + (int64_t)(tok0 + row) * A.dv_sl + (int64_t)h * A.dv_sh + 2 * c
                              : nullptr;
            /* (HF padded rows: their dv term, the same for every key row) */
            for (int nb = 0; nb < 8; nb++) {
                *(uint32_t *)(o + 8 * nb) = pack2<BF>(dx[nb][2 * i] * A.inv_scale, dx[nb][2 * i + 1] * A.inv_scale);
                if constexpr (KV && MSK) {
                    float v0 = dv[nb][2 * i], v1 = dv[nb][2 * i + 1];
                    if (A.hfv && !DRP) { /* (with dropout: in the tiles) */
                        const float *hv = A.hfv + ((int64_t)b * a.H + h) * 64 + 2 * c + 8 * nb;
                        v0 += hv[0], v1 += hv[1];
                    }
                    *(uint32_t *)(ov + 8 * nb) = pack2<BF>(v0, v1);
                } else if constexpr (KV) {
                    *(uint32_t *)(ov + 8 * nb) = pack2<BF>(dv[nb][2 * i], dv[nb][2 * i + 1]);
                }
            }
        }
    }
    if (pos && tw == 0) bulk_wait_all(); /* (their sources: this CTA's shared memory) */
#undef WS_TR
#undef WS_TC
#undef WS_TRS
#undef WS_TCS
#undef WS_RPLANE
#undef WS_CPLANE
#undef WS_FPART
#undef WS_SP
#undef WS_UNITS
#undef WS_UNIT
#undef WS_ROW
}

#define WS_KERNEL(DT, BF, KV, MSK, DRP, PK, SUF)                                                   \
    extern "C" __global__ void __launch_bounds__(384, 1)                                           \
        dattn_bwd_ws_##DT##_d64_kv##KV##SUF(const __grid_constant__ dattn_bwd_args A,                \
                                            const __grid_constant__ dattn_ws_maps M)                \
    {                                                                                              \
        ws_body<BF, KV, MSK, DRP, PK>(A, M);                                                       \
    }
WS_KERNEL(f16, 0, 0, 0, 0, 0, )
WS_KERNEL(f16, 0, 1, 0, 0, 0, )
WS_KERNEL(bf16, 1, 0, 0, 0, 0, )
WS_KERNEL(bf16, 1, 1, 0, 0, 0, )
WS_KERNEL(f16, 0, 0, 1, 0, 0, _mask)
WS_KERNEL(f16, 0, 1, 1, 0, 0, _mask)
WS_KERNEL(bf16, 1, 0, 1, 0, 0, _mask)
WS_KERNEL(bf16, 1, 1, 1, 0, 0, _mask)
WS_KERNEL(f16, 0, 0, 0, 1, 0, _drop)
WS_KERNEL(f16, 0, 1, 0, 1, 0, _drop)
WS_KERNEL(bf16, 1, 0, 0, 1, 0, _drop)
WS_KERNEL(bf16, 1, 1, 0, 1, 0, _drop)
WS_KERNEL(f16, 0, 0, 1, 1, 0, _mask_drop)
WS_KERNEL(f16, 0, 1, 1, 1, 0, _mask_drop)
WS_KERNEL(bf16, 1, 0, 1, 1, 0, _mask_drop)
WS_KERNEL(bf16, 1, 1, 1, 1, 0, _mask_drop)
/* packed (cu_seqlens; no mask) */
WS_KERNEL(f16, 0, 0, 0, 0, 1, _packed)
WS_KERNEL(f16, 0, 1, 0, 0, 1, _packed)
WS_KERNEL(bf16, 1, 0, 0, 0, 1, _packed)
WS_KERNEL(bf16, 1, 1, 0, 0, 1, _packed)
WS_KERNEL(f16, 0, 0, 0, 1, 1, _packed_drop)
WS_KERNEL(f16, 0, 1, 0, 1, 1, _packed_drop)
WS_KERNEL(bf16, 1, 0, 0, 1, 1, _packed_drop)
WS_KERNEL(bf16, 1, 1, 0, 1, 1, _packed_drop)

/* The saturated planes: rsat[row][side] = q_row . pk[sat slot of side], csat[row][side] = k_row .
 * pq[...] (fp32 sums of the 16-bit products, d in order); side 0 = r <= -R (sat_neg), 1 = r >=
 * R (sat_pos). One thread per (b, h, row); rows at ws_row (padded (b H + h) L + row, packed h T +
 * tok0 + row). The four table rows in shared memory as floats, a thread's row in 16-byte loads
 * (the rows are 16-byte aligned on this path: its TMA maps), all eight before the sums (the same
 * products in the same order as one element at a time: the same bits; one 2-byte load per
 * element took 155 us a call at 16K tokens x 12 heads, NOTES "The saturated planes"). */
template <int BF>
DATTN_DEV void ws_planes_body(const dattn_bwd_args &A, int bx, int h, int b)
{
    const dattn_fwd_args &a = A.f;
    __shared__ float ts[2][2][64]; /* [which: pk, pq][side][d] */
    const int row = bx * 128 + (int)threadIdx.x;
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
        const int w = i >> 7, side = (i >> 6) & 1, d = i & 63;
        const uint16_t *t = (const uint16_t *)(w ? a.pq : a.pk) + (int64_t)h * (w ? a.pq_sh : a.pk_sh);
        ts[w][side][d] = h2f<BF>(t[(int64_t)(side ? a.sat_pos : a.sat_neg) * (w ? a.pq_ss : a.pk_ss) + d]);
    }
    __syncthreads();
    int tok0, len;
    dev_seq(a, b, tok0, len);
    if (row >= len) return;
    const int64_t wr = ws_row(A, b, h, tok0, row);
    for (int which = 0; which < 2; which++) {
        const uint16_t *x = (const uint16_t *)(which ? a.k : a.q) + (int64_t)b * (which ? a.k_sb : a.q_sb) +
                            (int64_t)(tok0 + row) * (which ? a.k_sl : a.q_sl) + (int64_t)h * (which ? a.k_sh : a.q_sh);
        uint4 xv[8];
#pragma unroll
        for (int ch = 0; ch < 8; ch++) xv[ch] = *(const uint4 *)(x + 8 * ch);
        float s0 = 0.f, s1 = 0.f;
#pragma unroll
        for (int ch = 0; ch < 8; ch++) {
            const uint32_t wv[4] = {xv[ch].x, xv[ch].y, xv[ch].z, xv[ch].w};
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const float xd = h2f<BF>((uint16_t)(wv[e >> 1] >> (16 * (e & 1))));
                s0 = fmaf(xd, ts[which][0][8 * ch + e], s0);
                s1 = fmaf(xd, ts[which][1][8 * ch + e], s1);
            }
        }
        float *pl = which ? A.csat : A.rsat;
        pl[2 * wr] = s0;
        pl[2 * wr + 1] = s1;
    }
}

/* The pre-pass: D_i (bwd_di.cuh's rows body: DI_WPB warps of DI_NR rows a block, 128 threads)
 * and, with position terms, the planes (128 rows a block) in one launch, 1-D grid: blocks [0, nd)
 * D_i, block nd + x the planes' block x. Apart, the two passes each left DRAM half idle (ncu at
 * B8 L2048, H100: D_i 36 us at 44 %, the planes 29 us at 54 %) and paid a launch each. The same
 * bodies as before, so the same bits. */
/* blocks per (b, h) of the pre-pass's D_i part and planes part (host and device) */
static __host__ __device__ __forceinline__ int ws_pre_gd(int L) { return (L + DI_NR * DI_WPB - 1) / (DI_NR * DI_WPB); }
static __host__ __device__ __forceinline__ int ws_pre_gp(int L) { return (L + 127) / 128; }

template <int BF>
DATTN_DEV void ws_pre_body(const dattn_bwd_args &A)
{
    const dattn_fwd_args &a = A.f;
    const int gd = ws_pre_gd(a.L), nd = gd * a.H * a.B;
    int x = (int)blockIdx.x;
    if (x < nd) {
        bwd_di_rows_body<BF ? 2 : 1>(A, x % gd, (x / gd) % a.H, x / gd / a.H);
        return;
    }
    x -= nd;
    const int gp = ws_pre_gp(a.L);
    ws_planes_body<BF>(A, x % gp, (x / gp) % a.H, x / gp / a.H);
}

/* blocks of the pre-pass (ws_pre_body): D_i's, then the planes' when pos */
static int64_t ws_pre_blocks(const dattn_fwd_args &a, int pos)
{
    return ((int64_t)ws_pre_gd(a.L) + (pos ? ws_pre_gp(a.L) : 0)) * a.H * a.B;
}

static_assert(32 * DI_WPB == 128, "bws: the pre-pass's D_i blocks and planes blocks share one block size");

extern "C" __global__ void __launch_bounds__(128) dattn_bwd_ws_pre_f16(const __grid_constant__ dattn_bwd_args A)
{
    ws_pre_body<0>(A);
}

extern "C" __global__ void __launch_bounds__(128) dattn_bwd_ws_pre_bf16(const __grid_constant__ dattn_bwd_args A)
{
    ws_pre_body<1>(A);
}

/* The pre-pass by token rows (ws_pre2; the launcher's choice where it can: H <= 16, every head
 * of a row of dout, out, q and k contiguous (head stride 64) and 16-byte aligned). A warp reads
 * whole token rows, all heads, of the four tensors (lane l: the 16-byte chunks l, l + 32, ...,
 * chunk c = 8 elements of head c >> 3), each lane's partial sums over its 8 elements, then a
 * butterfly over the 8 lanes of a head: D_i and, with position terms, the four planes (the
 * saturated rows of pk, pq of every head in shared memory as floats). A fixed order (not
 * ws_pre's): deterministic, and the same values up to rounding. WS_P2_RPW rows per warp, 4 warps
 * a block. Measured at 16K tokens x 12 heads (H100, NOTES "pre3 and the merge"): ~50 us a call
 * against ws_pre's ~55-61 us (one head of 8-32 rows a block), for 100 MB read: still far from
 * bandwidth, bound by latency (the table prologue, one row's loads in flight per warp). */
#define WS_P2_RPW 8

template <int BF, int POS>
DATTN_DEV void ws_pre2_body(const dattn_bwd_args &A)
{
    const dattn_fwd_args &a = A.f;
    /* [which: pk, pq][h][side][64]: d = 8 j + 4 f + t at 32 f + 4 j + t, so that the 8 lanes of a
     * head (chunks j = 0..7) read half f of their chunks as one conflict-free 128-byte row of
     * 16-byte loads (in d order, 32 scalar loads a round with 8-way bank conflicts: 54 us by ncu;
     * this order ~51 us in a profiler trace, so the conflicts were a small part) */
    __shared__ float4 ts4[2][16][2][16]; /* (float4: 16-byte aligned) */
    float(*ts)[16][2][64] = reinterpret_cast<float(*)[16][2][64]>(&ts4[0][0][0][0]);
    const int H = a.H, nch = 8 * H, lane = threadIdx.x & 31;
    if (POS) {
        for (int i = threadIdx.x; i < 2 * H * 128; i += blockDim.x) {
            const int w = i / (H * 128), h = (i >> 7) % H, side = (i >> 6) & 1, d = i & 63;
            const uint16_t *t = (const uint16_t *)(w ? a.pq : a.pk) + (int64_t)h * (w ? a.pq_sh : a.pk_sh);
            ts[w][h][side][32 * ((d >> 2) & 1) + 4 * (d >> 3) + (d & 3)] = h2f<BF>(t[(int64_t)(side ? a.sat_pos : a.sat_neg) * (w ? a.pq_ss : a.pk_ss) + d]);
        }
        __syncthreads();
    }
    const int64_t NR = a.packed ? A.T : (int64_t)a.B * a.L;
    const int64_t r0 = ((int64_t)blockIdx.x * 4 + (threadIdx.x >> 5)) * WS_P2_RPW;
    for (int64_t r = r0; r < r0 + WS_P2_RPW && r < NR; r++) {
        /* (padded: row i of sequence b; packed: token r, the strides' b part 0) */
        const int64_t b = a.packed ? 0 : r / a.L, i = a.packed ? r : r % a.L;
        const uint16_t *pg = (const uint16_t *)A.dout + b * A.do_sb + i * A.do_sl;
        const uint16_t *po = (const uint16_t *)a.out + b * a.o_sb + i * a.o_sl;
        const uint16_t *pq = (const uint16_t *)a.q + b * a.q_sb + i * a.q_sl;
        const uint16_t *pk = (const uint16_t *)a.k + b * a.k_sb + i * a.k_sl;
        uint4 xg[4], xo[4], xq[4], xk[4];
        const uint4 z = {0u, 0u, 0u, 0u};
#pragma unroll
        for (int m = 0; m < 4; m++) {
            const int c = lane + 32 * m, ok = c < nch;
            xg[m] = ok ? *(const uint4 *)(pg + 8 * c) : z;
            xo[m] = ok ? *(const uint4 *)(po + 8 * c) : z;
            xq[m] = POS && ok ? *(const uint4 *)(pq + 8 * c) : z;
            xk[m] = POS && ok ? *(const uint4 *)(pk + 8 * c) : z;
        }
#pragma unroll
        for (int m = 0; m < 4; m++) {
            if (32 * m >= nch) break;
            const int c = lane + 32 * m, h = c >> 3 < H ? c >> 3 : H - 1, d0 = 8 * (c & 7);
            const uint32_t g[4] = {xg[m].x, xg[m].y, xg[m].z, xg[m].w}, o[4] = {xo[m].x, xo[m].y, xo[m].z, xo[m].w};
            const uint32_t qv[4] = {xq[m].x, xq[m].y, xq[m].z, xq[m].w}, kv[4] = {xk[m].x, xk[m].y, xk[m].z, xk[m].w};
            float sd = 0.f, sr0 = 0.f, sr1 = 0.f, sc0 = 0.f, sc1 = 0.f;
            float tr0[8], tr1[8], tc0[8], tc1[8]; /* the tables' d0 .. d0 + 7 (POS) */
            if (POS)
                for (int f = 0; f < 2; f++) {
                    const int o4 = 32 * f + d0 / 2; /* (d0 / 2 = 4 j) */
                    *(float4 *)(tr0 + 4 * f) = *(const float4 *)&ts[0][h][0][o4];
                    *(float4 *)(tr1 + 4 * f) = *(const float4 *)&ts[0][h][1][o4];
                    *(float4 *)(tc0 + 4 * f) = *(const float4 *)&ts[1][h][0][o4];
                    *(float4 *)(tc1 + 4 * f) = *(const float4 *)&ts[1][h][1][o4];
                }
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const int sh = 16 * (e & 1);
                sd = fmaf(h2f<BF>((uint16_t)(g[e >> 1] >> sh)), h2f<BF>((uint16_t)(o[e >> 1] >> sh)), sd);
                if (POS) {
                    const float xq_ = h2f<BF>((uint16_t)(qv[e >> 1] >> sh)), xk_ = h2f<BF>((uint16_t)(kv[e >> 1] >> sh));
                    sr0 = fmaf(xq_, tr0[e], sr0);
                    sr1 = fmaf(xq_, tr1[e], sr1);
                    sc0 = fmaf(xk_, tc0[e], sc0);
                    sc1 = fmaf(xk_, tc1[e], sc1);
                }
            }
#pragma unroll
            for (int x = 1; x < 8; x <<= 1) {
                sd += __shfl_xor_sync(0xffffffffu, sd, x);
                if (POS) {
                    sr0 += __shfl_xor_sync(0xffffffffu, sr0, x);
                    sr1 += __shfl_xor_sync(0xffffffffu, sr1, x);
                    sc0 += __shfl_xor_sync(0xffffffffu, sc0, x);
                    sc1 += __shfl_xor_sync(0xffffffffu, sc1, x);
                }
            }
            if ((lane & 7) == 0 && c < nch) {
                const int64_t wr = a.packed ? (int64_t)h * A.T + i : (b * H + h) * a.L + i;
                A.di[wr] = sd;
                if (POS) {
                    *(float2 *)(A.rsat + 2 * wr) = make_float2(sr0, sr1);
                    *(float2 *)(A.csat + 2 * wr) = make_float2(sc0, sc1);
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) dattn_bwd_ws_pre2_f16(const __grid_constant__ dattn_bwd_args A)
{
    if (A.f.c2p && A.rsat) ws_pre2_body<0, 1>(A);
    else ws_pre2_body<0, 0>(A);
}

extern "C" __global__ void __launch_bounds__(128) dattn_bwd_ws_pre2_bf16(const __grid_constant__ dattn_bwd_args A)
{
    if (A.f.c2p && A.rsat) ws_pre2_body<1, 1>(A);
    else ws_pre2_body<1, 0>(A);
}

/* whether ws_pre2 can serve the call: H <= 16 (its shared tables), and dout, out, q, k (the
 * latter two with position terms) with contiguous heads (stride 64) whose rows start 16-byte
 * aligned */
static int ws_pre2_ok(const dattn_bwd_args *A)
{
    const dattn_fwd_args &a = A->f;
    auto rows16 = [](const void *p, int64_t sb, int64_t sl, int64_t sh) {
        return ((uintptr_t)p & 15u) == 0 && sb % 8 == 0 && sl % 8 == 0 && sh == 64;
    };
    return a.H >= 1 && a.H <= 16 && rows16(A->dout, A->do_sb, A->do_sl, A->do_sh) &&
           rows16(a.out, a.o_sb, a.o_sl, a.o_sh) &&
           (!a.c2p || (rows16(a.q, a.q_sb, a.q_sl, a.q_sh) && rows16(a.k, a.k_sb, a.k_sl, a.k_sh)));
}

/* hfv[b][h][d] = (1 / L) x the sum of dout[b, i, h, d] over the padded query rows i < L (mask 0),
 * i ascending: HF padded rows' softmax is uniform over all L keys, so each key row's dv gets
 * this; one thread per d, block (h, b) */
template <int BF>
DATTN_DEV void ws_hfv_body(const dattn_bwd_args &A)
{
    const dattn_fwd_args &a = A.f;
    const int d = threadIdx.x, h = blockIdx.x, b = blockIdx.y;
    const uint16_t *o = (const uint16_t *)A.dout + (int64_t)b * A.do_sb + (int64_t)h * A.do_sh + d;
    float s = 0.f;
    for (int i = 0; i < a.L; i++)
        if (a.mask[(int64_t)b * a.m_sb + (int64_t)i * a.m_sl] == 0) s += h2f<BF>(o[(int64_t)i * A.do_sl]);
    A.hfv[((int64_t)b * a.H + h) * 64 + d] = s / (float)a.L;
}

extern "C" __global__ void __launch_bounds__(64) dattn_bwd_ws_hfv_f16(const __grid_constant__ dattn_bwd_args A)
{
    ws_hfv_body<0>(A);
}

extern "C" __global__ void __launch_bounds__(64) dattn_bwd_ws_hfv_bf16(const __grid_constant__ dattn_bwd_args A)
{
    ws_hfv_body<1>(A);
}

/* The table reduce, in two launches (ncu put the one-launch form, 12,288 blocks of 512 threads
 * each running two binary searches and an integer division per item, at 236 us a call, issue
 * bound with DRAM at 14 %: NOTES, "Call 4"):
 *
 * 1. ws_rowsum: per table, head and row r' of the frame, the sum of the 2 G warpgroup partials
 *    (p ascending) into partial 0's row, in place: one thread per float4 of a row, its 2 G loads
 *    independent; the only reader of each float4 is the thread that writes it. This pass reads
 *    every partial once: the reduce's bandwidth floor (call 5: ~40 us at 3.8 TB/s). One more
 *    block per (head, table), the grid's first (x 0, so that it is issued in the first wave,
 *    not in the last: no change within ncu's spread, gpu-2026-12-07-s39), sums the 8 G saturated
 *    partials of each side the same way.
 * 2. ws_slotsum: per table, slot t and head, one warp (lanes: d = 2 lane, 2 lane + 1) finds the
 *    slot's r range [r0, r1) and sums the row sums over it in eight interleaved chains
 *    (r0 + 8 k + j, combined pairwise), plus pass 1's saturated sum when t is a saturated slot.
 *    The range: a near slot's one r checked against its two neighbours, a log slot's found in
 *    its side's log zone (2 rounds of 32 lanes' tests), else in the whole frame (3 rounds:
 *    ws_slot_range). The two saturated slots (the longest ranges: ~70 r at v3) get a block of
 *    their own each, the grid's last two: warp w sums chain w, warp 0 combines the eight as one
 *    warp would (the same bits). This pass is latency-bound: its longest warps set its time;
 *    call 5's version (binary searches, 4 chains, the 8 G saturated partials summed here one
 *    load at a time) took ~34 us, call 6's (one warp per slot, the whole frame searched)
 *    ~23.5 us.
 * Fixed orders: bitwise deterministic. The rows pass 2 reads were written by pass 1 just before
 * (in L2). */

/* r0 = the first r in [lo, hi) whose slot is >= t and r1 = the first whose slot is > t (hi if
 * none), by a warp: each round the 32 lanes test the last r of 32 equal chunks of the open range
 * and the ballot keeps the chunk of the first hit (the map is non-decreasing in r, so the
 * tests are monotone): ~1,150 r in 3 rounds of independent loads. Warp-uniform results. */
DATTN_DEV void ws_slot_range(const dattn_fwd_args &a, int lo, int hi, int t, int lane, int &r0, int &r1)
{
    int l0 = lo, u0 = hi, l1 = lo, u1 = hi; /* the answer of search k is in [lk, uk] */
    while (l0 < u0 || l1 < u1) {
        const int s0 = (u0 - l0 + 31) >> 5, s1 = (u1 - l1 + 31) >> 5;
        const int x0 = l0 + (lane + 1) * s0 - 1, x1 = l1 + (lane + 1) * s1 - 1;
        const bool p0 = l0 < u0 && (x0 >= u0 || dev_slot(a, a.tab, x0) >= t);
        const bool p1 = l1 < u1 && (x1 >= u1 || dev_slot(a, a.tab, x1) > t);
        const unsigned m0 = __ballot_sync(0xffffffffu, p0), m1 = __ballot_sync(0xffffffffu, p1);
        if (l0 < u0) {
            if (!m0) l0 = u0;
            else {
                const int j = __ffs(m0) - 1, xe = l0 + (j + 1) * s0 - 1;
                l0 += j * s0;
                u0 = xe < u0 ? xe : u0;
            }
        }
        if (l1 < u1) {
            if (!m1) l1 = u1;
            else {
                const int j = __ffs(m1) - 1, xe = l1 + (j + 1) * s1 - 1;
                l1 += j * s1;
                u1 = xe < u1 ? xe : u1;
            }
        }
    }
    r0 = l0;
    r1 = l1;
}

/* grid (1 + NK 4, H, 2 tables), 256 threads; block x 0 sums the saturated partials of the 8 G
 * consumer warps (k ascending) into warp 0's, in place */
DATTN_DEV void ws_rowsum_body(const dattn_bwd_args &A)
{
    const dattn_fwd_args &a = A.f;
    const int NG = A.tcg, NK = 2 * ws_nkh(a) + 2, h = blockIdx.y;
    if (blockIdx.x == 0) {
        if (threadIdx.x >= 128) return;
        float *sp = (blockIdx.z ? A.ppq : A.ppk) + (int64_t)a.H * NG * 2 * NK * 4096 + (int64_t)h * NG * 8 * 128 +
                    threadIdx.x;
        const int nk = NG * 8;
        float s = sp[0];
        int k = 1;
        for (; k + 8 <= nk; k += 8) {
            float u[8];
#pragma unroll
            for (int j = 0; j < 8; j++) u[j] = sp[(int64_t)(k + j) * 128];
#pragma unroll
            for (int j = 0; j < 8; j++) s += u[j];
        }
        for (; k < nk; k++) s += sp[(int64_t)k * 128];
        sp[0] = s;
        return;
    }
    const int i = (blockIdx.x - 1) * 256 + threadIdx.x; /* float4 index in one partial (NK 1024 of them) */
    float4 *part = (float4 *)((blockIdx.z ? A.ppq : A.ppk) + (int64_t)h * NG * 2 * NK * 4096) + i;
    const int64_t ps = (int64_t)NK * 1024, np = 2 * NG;
    float4 s = part[0];
    int p = 1;
    for (; p + 4 <= np; p += 4) {
        const float4 u0 = part[p * ps], u1 = part[(p + 1) * ps], u2 = part[(p + 2) * ps], u3 = part[(p + 3) * ps];
        s.x += u0.x; s.y += u0.y; s.z += u0.z; s.w += u0.w;
        s.x += u1.x; s.y += u1.y; s.z += u1.z; s.w += u1.w;
        s.x += u2.x; s.y += u2.y; s.z += u2.z; s.w += u2.w;
        s.x += u3.x; s.y += u3.y; s.z += u3.z; s.w += u3.w;
    }
    for (; p < np; p++) {
        const float4 u = part[p * ps];
        s.x += u.x; s.y += u.y; s.z += u.z; s.w += u.w;
    }
    part[0] = s;
}

extern "C" __global__ void __launch_bounds__(256) dattn_bwd_ws_rowsum(const __grid_constant__ dattn_bwd_args A)
{
    ws_rowsum_body(A);
}

/* d, d + 1 of frame row qq's sum (pass 1's rows, in the staging layout's swizzle; d even) */
DATTN_DEV float2 ws_row_sum(const float *rs, int qq, int d)
{
    return *(const float2 *)(rs + 64 * qq + 4 * ((d >> 2) ^ (qq & 7)) + (d & 3));
}

/* Slot t's r range [r0, r1) within [lo, hi) (ws_slot_range's answer, with the same rows), its
 * bracket narrowed first by the map's zones, each step checked against the map itself (it is
 * non-decreasing in r: slot(x) < t puts r0 past x, slot(y) > t puts r1 at or before y):
 * - a near slot (t - S within +-lin) whose two neighbours map elsewhere is its one r, no search;
 * - otherwise the bracket shrinks to (lin, R] or [-R, -lin] where those ends allow it (a log
 *   slot, a saturated one: ~380-450 r at v3 S 256 R 512, 2 rounds of tests instead of 3). */
DATTN_DEV void ws_slot_bracket(const dattn_fwd_args &a, int lo, int hi, int t, int lane, int &r0, int &r1)
{
    const int rn = t - a.S;
    if (rn >= -a.lin && rn <= a.lin && dev_slot(a, a.tab, rn) == t && dev_slot(a, a.tab, rn - 1) != t &&
        dev_slot(a, a.tab, rn + 1) != t) {
        r0 = rn >= lo && rn < hi ? rn : lo;
        r1 = rn >= lo && rn < hi ? rn + 1 : lo;
        return;
    }
    /* lower ends, the larger first: slot(x) < t means r0 > x */
    if (dev_slot(a, a.tab, a.lin) < t) lo = lo > a.lin + 1 ? lo : a.lin + 1;
    else if (dev_slot(a, a.tab, -a.R) < t) lo = lo > 1 - a.R ? lo : 1 - a.R;
    /* upper ends, the smaller first: slot(y) > t means r1 <= y */
    if (dev_slot(a, a.tab, -a.lin) > t) hi = hi < 1 - a.lin ? hi : 1 - a.lin;
    else if (dev_slot(a, a.tab, a.R) > t) hi = hi < a.R + 1 ? hi : a.R + 1;
    if (lo > hi) lo = hi;
    ws_slot_range(a, lo, hi, t, lane, r0, r1);
}

/* dp[h][t][d] (dq kernel's table when KV = 0: dpk; else dpq); grid (ceil(2S / 8) + 2, H,
 * 2 tables), 256 threads: block x < ceil(2S / 8): warp w the slot 8 x + w (the saturated slots
 * skipped); the last two blocks: slot sat_neg, sat_pos, warp w summing its chain w */
template <int DT, int KV>
DATTN_DEV void ws_slotsum_body(const dattn_bwd_args &A)
{
    const dattn_fwd_args &a = A.f;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, sb = (int)blockIdx.x - (2 * a.S + 7) / 8;
    const int t = sb >= 0 ? (sb ? a.sat_pos : a.sat_neg) : (int)blockIdx.x * 8 + w;
    const int h = blockIdx.y, d = 2 * lane, NG = A.tcg;
    if (sb < 0 && (t >= 2 * a.S || t == a.sat_pos || t == a.sat_neg)) return;
    const int nkh = ws_nkh(a), NK = 2 * nkh + 2;
    /* real r covered by the frame: r' = 64 (kb - nkh) + tt - 63 in [-64 nkh - 63, 64 nkh + 64] */
    const int f0 = -64 * nkh - 63, f1 = 64 * nkh + 64;
    const int rlo = KV ? -f1 : f0, rhi = KV ? -f0 : f1; /* real r range */
    int r0, r1;
    ws_slot_bracket(a, rlo, rhi + 1, t, lane, r0, r1);
    /* partial 0's rows hold the row sums (pass 1); row qq = r' + 63 + 64 nkh, r' = KV ? -r : r */
    const float *rs = (KV ? A.ppq : A.ppk) + (int64_t)h * NG * 2 * NK * 4096;
    float2 c[8];
#pragma unroll
    for (int j = 0; j < 8; j++) c[j] = make_float2(0.f, 0.f);
    const int qs = KV ? -1 : 1, qa = (KV ? -r0 : r0) + 63 + 64 * nkh; /* row of r0, its step per r */
    if (sb >= 0) {
        /* chain w: rows r0 + w + 8 k, k ascending, as c[w] below */
        __shared__ float2 red[8][32];
        int r = r0 + w;
        for (; r + 56 < r1; r += 64) {
            float2 u[8];
#pragma unroll
            for (int k = 0; k < 8; k++) u[k] = ws_row_sum(rs, qa + qs * (r - r0 + 8 * k), d);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                c[0].x += u[k].x;
                c[0].y += u[k].y;
            }
        }
        for (; r < r1; r += 8) {
            const float2 u = ws_row_sum(rs, qa + qs * (r - r0), d);
            c[0].x += u.x;
            c[0].y += u.y;
        }
        red[w][lane] = c[0];
        __syncthreads();
        if (w) return;
#pragma unroll
        for (int j = 0; j < 8; j++) c[j] = red[j][lane];
    } else {
        int r = r0;
        for (; r + 8 <= r1; r += 8) {
            float2 u[8];
#pragma unroll
            for (int j = 0; j < 8; j++) u[j] = ws_row_sum(rs, qa + qs * (r - r0 + j), d);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                c[j].x += u[j].x;
                c[j].y += u[j].y;
            }
        }
#pragma unroll
        for (int j = 0; j < 7; j++)
            if (r + j < r1) {
                const float2 u = ws_row_sum(rs, qa + qs * (r - r0 + j), d);
                c[j].x += u.x;
                c[j].y += u.y;
            }
    }
    float s0 = ((c[0].x + c[1].x) + (c[2].x + c[3].x)) + ((c[4].x + c[5].x) + (c[6].x + c[7].x));
    float s1 = ((c[0].y + c[1].y) + (c[2].y + c[3].y)) + ((c[4].y + c[5].y) + (c[6].y + c[7].y));
    if (sb >= 0) {
        /* the saturated partials' sum of side sb (pass 1's block x 0; only these blocks take a
         * saturated slot) */
        const float *sp = (KV ? A.ppq : A.ppk) + (int64_t)a.H * NG * 2 * NK * 4096 + (int64_t)h * NG * 8 * 128;
        const float2 u = *(const float2 *)(sp + 64 * sb + d);
        s0 += u.x;
        s1 += u.y;
    }
    if (KV) {
        st_el<DT>(A.dpq, (int64_t)h * A.dpq_sh + (int64_t)t * A.dpq_ss + d, s0);
        st_el<DT>(A.dpq, (int64_t)h * A.dpq_sh + (int64_t)t * A.dpq_ss + d + 1, s1);
    } else {
        st_el<DT>(A.dpk, (int64_t)h * A.dpk_sh + (int64_t)t * A.dpk_ss + d, s0);
        st_el<DT>(A.dpk, (int64_t)h * A.dpk_sh + (int64_t)t * A.dpk_ss + d + 1, s1);
    }
}

/* both tables in one launch: blockIdx.z 0 dpk, 1 dpq */
extern "C" __global__ void __launch_bounds__(256) dattn_bwd_ws_slotsum_f16(const __grid_constant__ dattn_bwd_args A)
{
    if (blockIdx.z == 0) ws_slotsum_body<1, 0>(A);
    else ws_slotsum_body<1, 1>(A);
}

extern "C" __global__ void __launch_bounds__(256) dattn_bwd_ws_slotsum_bf16(const __grid_constant__ dattn_bwd_args A)
{
    if (blockIdx.z == 0) ws_slotsum_body<2, 0>(A);
    else ws_slotsum_body<2, 1>(A);
}

/* Floats of one table's partials (launch.cu's workspace layout): H G (2 NK 4096 + 8 128). */
extern "C" size_t dattn_bwd_ws_part_floats(int H, int G, int L, int R)
{
    return (size_t)H * (size_t)G * ((size_t)2 * (2 * ws_nkh_of(L, R) + 2) * 4096 + 8 * 128);
}

/* The expanded tables (dattn_bwd_args.pexp; DATTN_CUDA_BWD=wsr goes without): e[z][h][u][0..63], z = 2 sg + t, =
 * (t ? pq : pk)[h][slot(sg ? off - u : u - off)], u < rows (sign 0 the dq kernel's rings, r = x,
 * sign 1 the dkdv kernel's, r = -x); grid (ceil(rows / 32), H, 4), 256 threads (ws_expand_chunk,
 * ws_band.cuh) */
extern "C" __global__ void __launch_bounds__(256) dattn_bwd_ws_expand(const __grid_constant__ dattn_fwd_args a,
                                                                      uint16_t *e, int rows, int off)
{
    ws_expand_chunk<1>(a, e, rows, off);
}

/* The whole backward on this path (A->tcg = G groups per head; A->di, rsat, csat, ppk, ppq in the
 * workspace): D_i, the planes, the dq kernel, the dkdv kernel, the table reduce. Returns
 * cudaErrorNotSupported, having launched nothing, for a call outside the path (no rows, D other
 * than 64, one position term alone, HF padded rows without their pre-pass) or a tensor that
 * cannot be mapped (tma.cuh). */
extern "C" cudaError_t dattn_launch_bwd_ws(const dattn_bwd_args *A0, int bf, cudaStream_t stream)
{
    /* The planes enter saturated tiles only. When the call has none (ws_any_saturated), the
     * kernels get no planes (rsat = csat = NULL): the pre-pass computes D_i alone (it reads dout
     * and out, not q and k) and the kernels read none. */
    dattn_bwd_args Ab = *A0;
    if (!ws_any_saturated(A0->f)) Ab.rsat = Ab.csat = nullptr;
    const dattn_bwd_args *A = &Ab;
    const dattn_fwd_args &a = A->f;
    dattn_ws_maps M;
    int rf[4] = {0, 0, 0, 0};
    /* (the maps: [B][L][H][64] padded, [1][T][H][64] packed) */
    const int64_t outer = a.packed ? 1 : a.B, rows = a.packed ? A->T : a.L;
    if (a.B < 1 || a.L < 1 || rows < 1 || A->tcg < 1 || a.D != 64 || a.c2p != a.p2c ||
        (a.mask && a.hf && !a.drop_thr && !A->hfv) ||
        dattn_tma_rows_map(&M.q, &rf[0], a.q, outer, rows, a.H, a.q_sb, a.q_sl, a.q_sh, 64) != cudaSuccess ||
        dattn_tma_rows_map(&M.k, &rf[1], a.k, outer, rows, a.H, a.k_sb, a.k_sl, a.k_sh, 64) != cudaSuccess ||
        dattn_tma_rows_map(&M.v, &rf[2], a.v, outer, rows, a.H, a.v_sb, a.v_sl, a.v_sh, 64) != cudaSuccess ||
        dattn_tma_rows_map(&M.o, &rf[3], A->dout, outer, rows, a.H, A->do_sb, A->do_sl, A->do_sh, 64) != cudaSuccess)
        return cudaErrorNotSupported;
    M.qrf = rf[0];
    M.krf = rf[1];
    M.vrf = rf[2];
    M.orf = rf[3];
    /* each CTA's row blocks: by cost with position terms in the padded layout; packed calls (the
     * sequences' lengths are on the device) and calls without them, by count */
    {
        const int ur = dattn_ws_unit_bounds(a.B, a.L, a.c2p && !a.packed ? a.R : 0, A->tcg, M.ub);
        if (ur == -2) return cudaErrorMemoryAllocation;
        if (ur != 0) return cudaErrorNotSupported;
    }
    /* (te: the rings from the expanded tables, with position terms and the workspace's tables) */
    const int te = a.c2p && A->pexp && !(a.mask && a.drop_thr), erows = te ? dattn_fws_exp_rows(a.R, a.L) : 0;
    CUtensorMap em[4];
    M.te = te;
    M.erf = 0;
    M.eoff = te ? dattn_fws_exp_off(a.R, a.L) : 0;
    for (int z = 0; z < 4 && te; z++)
        if (dattn_tma_rows_map(&em[z], &M.erf, A->pexp + (int64_t)z * a.H * erows * 64, 1, erows, a.H, 0, 64,
                               (int64_t)erows * 64, 64) != cudaSuccess)
            return cudaErrorNotSupported;
    cudaError_t e;
    {
        /* D_i and the planes (ws_pre2_body by token rows where it can, else ws_pre_body) */
        if (ws_pre2_ok(A)) {
            const int64_t nr = a.packed ? A->T : (int64_t)a.B * a.L, nb = (nr + 4 * WS_P2_RPW - 1) / (4 * WS_P2_RPW);
            if (nb > 0x7fffffff) return cudaErrorNotSupported;
            if (bf) dattn_bwd_ws_pre2_bf16<<<(unsigned)nb, 128, 0, stream>>>(*A);
            else dattn_bwd_ws_pre2_f16<<<(unsigned)nb, 128, 0, stream>>>(*A);
        } else {
            const int64_t nb = ws_pre_blocks(a, a.c2p && A->rsat);
            if (nb > 0x7fffffff) return cudaErrorNotSupported;
            if (bf) dattn_bwd_ws_pre_bf16<<<(unsigned)nb, 128, 0, stream>>>(*A);
            else dattn_bwd_ws_pre_f16<<<(unsigned)nb, 128, 0, stream>>>(*A);
        }
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    if (a.mask && a.hf && !a.drop_thr) {
        const dim3 hg((unsigned)a.H, (unsigned)a.B);
        if (bf) dattn_bwd_ws_hfv_bf16<<<hg, 64, 0, stream>>>(*A);
        else dattn_bwd_ws_hfv_f16<<<hg, 64, 0, stream>>>(*A);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    if (te) {
        const dim3 eg((unsigned)((erows + 31) / 32), (unsigned)a.H, 4u);
        dattn_bwd_ws_expand<<<eg, 256, 0, stream>>>(a, A->pexp, erows, M.eoff);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    typedef void (*kfn)(dattn_bwd_args, dattn_ws_maps);
    /* [dropout][mask][bf16][kernel] */
    static const kfn kt[2][2][2][2] = {
        {{{dattn_bwd_ws_f16_d64_kv0, dattn_bwd_ws_f16_d64_kv1}, {dattn_bwd_ws_bf16_d64_kv0, dattn_bwd_ws_bf16_d64_kv1}},
         {{dattn_bwd_ws_f16_d64_kv0_mask, dattn_bwd_ws_f16_d64_kv1_mask},
          {dattn_bwd_ws_bf16_d64_kv0_mask, dattn_bwd_ws_bf16_d64_kv1_mask}}},
        {{{dattn_bwd_ws_f16_d64_kv0_drop, dattn_bwd_ws_f16_d64_kv1_drop},
          {dattn_bwd_ws_bf16_d64_kv0_drop, dattn_bwd_ws_bf16_d64_kv1_drop}},
         {{dattn_bwd_ws_f16_d64_kv0_mask_drop, dattn_bwd_ws_f16_d64_kv1_mask_drop},
          {dattn_bwd_ws_bf16_d64_kv0_mask_drop, dattn_bwd_ws_bf16_d64_kv1_mask_drop}}}};
    /* [dropout][bf16][kernel] (packed calls have no mask) */
    static const kfn kp[2][2][2] = {
        {{dattn_bwd_ws_f16_d64_kv0_packed, dattn_bwd_ws_f16_d64_kv1_packed},
         {dattn_bwd_ws_bf16_d64_kv0_packed, dattn_bwd_ws_bf16_d64_kv1_packed}},
        {{dattn_bwd_ws_f16_d64_kv0_packed_drop, dattn_bwd_ws_f16_d64_kv1_packed_drop},
         {dattn_bwd_ws_bf16_d64_kv0_packed_drop, dattn_bwd_ws_bf16_d64_kv1_packed_drop}}};
    const kfn *ks = a.packed ? kp[a.drop_thr != 0][bf != 0] : kt[a.drop_thr != 0][a.mask != nullptr][bf != 0];
    const dim3 kg((unsigned)A->tcg, (unsigned)a.H);
    for (int which = 0; which < 2; which++) {
        const kfn k = ks[which];
        if (te) { /* (the row side, the column side: dq kernel pk, pq of sign 0; dkdv kernel pq, pk of sign 1) */
            M.er = em[which ? 3 : 0];
            M.ec = em[which ? 2 : 1];
        }
        if ((e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, WS_SMEM)) != cudaSuccess) return e;
        k<<<kg, 384, WS_SMEM, stream>>>(*A, M);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    if (!a.c2p) return cudaSuccess;
    const int NK = 2 * ws_nkh_of(a.L, a.R) + 2;
    dattn_bwd_ws_rowsum<<<dim3((unsigned)(1 + 4 * NK), (unsigned)a.H, 2u), 256, 0, stream>>>(*A);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    const dim3 grid((unsigned)((2 * a.S + 7) / 8 + 2), (unsigned)a.H, 2u);
    if (bf) dattn_bwd_ws_slotsum_bf16<<<grid, 256, 0, stream>>>(*A);
    else dattn_bwd_ws_slotsum_f16<<<grid, 256, 0, stream>>>(*A);
    return cudaGetLastError();
}

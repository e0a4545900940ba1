/* Prototype (bench only, not part of the library): DeBERTa's attention backward in the
 * warp-specialized Hopper structure that NOTES.md ("Where the session of 2026-12-01 01:19-04:19
 * left things", "Band tiles in the warp-specialized prototype") proposes, to measure it before a
 * library variant. Two kernels, as the library's backward (bwd_sm80.cuh) has them:
 *   dq kernel (KV = 0):   dQ = scale dS (K + pk[slot]), dS = P (dP - D), P = exp(s - lse), dP = dO V^T
 *   dkdv kernel (KV = 1): dK = scale dS^T (Q + pq[slot]), dV = P^T dO (the same S, P, dP, dS)
 * In the frame of a kernel, X / Z are its row operands (dq: Q, dO; dkdv: K, V) and Y / W its
 * column operands (dq: K, V; dkdv: Q, dO); the row-side table TR is the one multiplied by the
 * row operand (dq: pk, c2p; dkdv: pq, p2c), the column-side table TC the other.
 *
 * One CTA per 128 rows of one (sequence, head), three warpgroups (setmaxnreg 24 / 240):
 *   warpgroup 0, the producer: its warp 0 loads X and Z of the block once and the Y / W tiles
 *     of 64 columns into two stages by TMA (src/cuda/tma.cuh; lane 0 issues, predicated), and
 *     the tile's column facts (dkdv kernel: lse * log2 e and D; with position terms the
 *     saturated column constants); with position terms its 128 threads also fill the rings of
 *     table rows (below). Each stage has a full mbarrier (lane 0's arrival with the copies'
 *     expect-tx, plus the other threads' arrivals releasing their stores) and an empty one (256
 *     consumer arrivals);
 *   warpgroups 1 and 2, the consumers (64 rows each): per tile the products X Y^T and Z W^T by
 *     wgmma from shared memory (m64n64k16, src/cuda/sm90.cuh), P and dS in registers, then
 *     dX += dS Y (and dV += P W) by wgmma with dS (P) as the register A operand, and release the
 *     stage.
 * fp16, D = 64, padded [B][L][H][64] tensors, L a multiple of 128, no mask, no dropout.
 *
 * Position terms (R > 0): c2p + p2c with a slot map that saturates at R (slot 0 for r <= -R,
 * the last slot for r >= R; R = 512 for v3's S = 256 log-bucket table). Per warpgroup tile:
 *   saturated tiles (all 64 x 64 pairs on one side): a row constant (X . TR[sat], the rps /
 *     cps planes) plus a column constant; the rows' dS sums per side give the rank-1 dX terms
 *     and the table gradients at the two saturated slots (per-warp partials, summed on the
 *     host: deterministic);
 *   band tiles (every other tile): window products over u = row - column + 63 in [0, 128):
 *     G[row][u] = X_row . TR[slot(r(u))] and H[col][u] = Y_col . TC[slot(r(u))] (wgmma, the
 *     table rows from a ring of 4 blocks of 64 rows that the producer fills, block a holding r =
 *     sgn (m0 - 64 a + t + 65)), gathered through a shared-memory tile D into the scores; the
 *     rows' gradient dX += C . TR window, C[row][u] = dS[row][row - u + 63] (MN-major), and
 *     the band pairs' table gradients from E = C^T X per band tile, staged in shared memory
 *     and added to a row-frame partial per warpgroup by the TMA unit's bulk reductions (one
 *     thread issues them; PROTO_BAND_FLUSH below has the other forms measured; NOTES.md).
 *
 *   proto_ws_bwd --check           both kernels against a float64 reference of the full function
 *                                   on the host: B2 L256 H2 without position terms, B1 L512 H2
 *                                   and B2 L384 H1 with a log-bucket table saturating at R = 100
 *                                   (dpk / dpq: the whole tables)
 *                                   (exit 1 on a mismatch, 77 without a compute capability 9.0
 *                                   GPU)
 *   proto_ws_bwd --bench B L [N [R]]  N (default 20) timed launches of each kernel at H 12, R
 *                                   default 512 (0: no position terms; R: the log-bucket table
 *                                   of position_buckets R / 2, max position R: v3's at 512)
 *                                   (cudaEvent; ncu names: dattn_proto_ws_dq, dattn_proto_ws_dkdv)
 * Built by `make CUDA=1 tests-build` as build/bench/proto_ws_bwd; scripts/gpu_check.sh runs
 * --check; scripts/gpu_proto.sh measures it against the library and flash. The host emulation
 * builds it too (sh tests/emu/build.sh DIR: DIR/proto_ws_bwd --check). Measured:
 * bench/results/gpu-2026-12-01-wsdq/ (the dq kernel alone), gpu-2026-12-01-wsband/. */
#include "sm90.cuh"
/* the band tile's order: fused (S, dP and G in one group, then H) or lean (G, H, then S and
 * dP); 0: lean in both kernels, 1: fused in both (the dkdv kernel then spills 48 bytes), 2
 * (default): fused in the dq kernel, lean in the dkdv kernel (NOTES.md, calls 54-56) */
#ifndef PROTO_BAND_FUSED
#define PROTO_BAND_FUSED 2
#endif
/* the band pairs' table gradients: PROTO_BAND_FLUSH 2 (default) E staged in shared memory and
 * added by bulk asynchronous reductions (the TMA unit) into a partial per warpgroup in the row
 * frame r' = row - column, its slots summed afterwards (here on the host); 1: a deterministic
 * flush by the consumer threads into a partial table per warpgroup (runs of equal slots summed
 * first); 0: fp32 atomics into PROTO_BAND_COPIES copies (1: one shared table; 0: E computed,
 * the atomics left out, a cost split for the bench: --check then fails dPK / dPQ) */
#ifndef PROTO_BAND_FLUSH
#define PROTO_BAND_FLUSH 2
#endif
#ifndef PROTO_BAND_COPIES
#define PROTO_BAND_COPIES 32
#endif
#include "tma.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsm90.h" /* tests/: tsm90_need (the sm_90 gate, exit 77) and CK (a failing CUDA call exits) */

struct proto_maps {
    CUtensorMap q, k, v, o; /* o: dO */
    int rf;                 /* rows-first flag (the same for all four: one layout) */
};

struct proto_args {
    const float *lse, *di; /* [B][H][L]: natural-log lse, D_i = dO_i . O_i */
    uint16_t *dq, *dk, *dv; /* [B][L][H][64] */
    /* Position terms (R = 0: none). The slot map slotmap[r + L - 1] = slot(r) for |r| < L, and
     * the tables pk, pq [H][ns][64]; the map saturates at R: slot(r) = sat slot for |r| >= R on
     * each side (side 0: r <= -R, side 1: r >= R).
     * Saturated tiles (all pairs of a warpgroup's 64 x 64 tile on one side) take the terms as a
     * row plus a column constant: planes [B][H][2][L] fp32 rps = q_i . pk[sat side] (c2p), cps =
     * k_j . pq[sat side] (p2c); tk / tq = the pk / pq rows [H][2][64] of the two sides' slots;
     * dtab[KV]: per CTA and consumer warp [8][2][64] fp32 partials of dpk (dq kernel) / dpq
     * (dkdv kernel) at those slots, from the saturated tiles' pairs.
     * Band tiles (every other tile) gather every pair's terms from window products. */
    const int *slotmap;
    const uint16_t *pk, *pq;
    int ns;
    const float *rps, *cps;
    const uint16_t *tk, *tq;
    float *dtab[2];
    /* dband[KV]: the band tiles' pairs' table gradients (dq kernel: dpk, dkdv kernel: dpq), fp32,
     * summed on the host: PROTO_BAND_FLUSH 2, [CTA][2 warpgroups][2 nkh + 2 blocks][64 t][64 d]
     * in the row frame (block kb holds r' = row - column = 64 (kb - nkh) + t - 63; within a
     * block element (t, d) at float 64 t + 4 ((d >> 2) ^ (t & 7)) + (d & 3)), one issuing thread
     * per warpgroup (deterministic); PROTO_BAND_FLUSH 1, [CTA][2 warpgroups][ns][64] partial tables with one
     * writer each (deterministic); 0, [PROTO_BAND_COPIES][H][ns][64] tables added to by fp32
     * atomics, the copy of a warpgroup ((CTA without the head) * 2 + cw modulo the copies). The
     * saturated tiles' go to dtab */
    float *dband[2];
    int nkh; /* PROTO_BAND_FLUSH 2: the row-frame blocks' offset, (R + 63) / 64 */
    int B, L, H, R;
    float scale, sl2; /* 1 / sqrt(64 f), scale * log2(e) */
};

/* Shared memory (offsets from a 1024-byte-aligned base):
 *   X, Z [128][64]; Y, W [2 stages][64][64] (fp16, 128-byte swizzled, sm90.cuh's layout);
 *   RR, RC: rings of 4 blocks of 64 table rows (fp16 [64][64] each, the same layout): the
 *     window rows of the row-side table (dq kernel pk, dkdv kernel pq) and of the column-side
 *     one; block a holds the rows of r = sgn (m0 - 64 a + t + 65), t = 0..63 (sgn = 1 in the dq
 *     kernel, -1 in the dkdv kernel, whose rows are keys), in ring slot a % 4;
 *   C: per consumer warpgroup, the skewed dS of a band tile, C[row][u] = dS[row][row - u + 63],
 *     stored MN-major (fp16 [128 u][64 rows], 128-byte swizzled: the A operand of C . window
 *     transposed), zero where no column maps;
 *   D: per consumer warpgroup, [64][72] fp32: a band tile's gathered window products;
 *   CF: the column facts [2 stages][4][64] fp32 (lse * log2 e and D: dkdv kernel; the column
 *     plane of each saturated side: with position terms); the barriers. */
enum {
    P_X = 0,
    P_Z = 16384,
    P_Y = 32768,
    P_W = 49152,
    P_RR = 65536,
    P_RC = P_RR + 32768,
    P_C = P_RC + 32768,
    P_D = P_C + 32768,
    D_PITCH = 72, /* floats: the gather's stores 2-way, its 64-bit reads conflict-free */
    P_CF = P_D + 2 * 64 * D_PITCH * 4,
    P_BAR = P_CF + 2048,
    P_SMEM = P_BAR + 64 + 1024
};

/* x, opaque to the compiler where this runs: the band tile's per-thread address bases pass
 * through it each tile, so that the 64-element gathers' addresses and predicates are derived
 * there instead of being hoisted out of the tile loop into ~200 live registers (spills) */
__device__ __forceinline__ int opaque(int x)
{
    asm volatile("" : "+r"(x));
    return x;
}

/* One tile's P and dS from the products sa = X Y^T and dp = Z W^T of a warpgroup (a thread's
 * elements: rows g, g + 8 of its warp's 16, columns 8 nb + 2 c + (e & 1)), packed as wgmma A
 * operands af (dS) and pf (P, dkdv kernel). Z, the tile's class: 0 no position term (or sa
 * already holds them: a band tile, whose dS also goes to the skewed C tile at cb, a shared
 * address), 1 all pairs on the saturated zone's negative side, 2 all on the positive side.
 * rl0 = 16 warp + g, c2 = 2 c. rc: the rows' saturated constants, cf[128 + 64 side + col] the
 * columns'; rs gathers the rows' dS sums per side. */
template <int KV, int Z>
__device__ __forceinline__ void tile_ds(const float (&sa)[8][4], const float (&dp)[8][4], const float *cf,
                                        const float (&rl2)[2], const float (&rd)[2], const float (&rc)[2][2],
                                        float (&rs)[2][2], uint32_t (&af)[4][4], uint32_t (&pf)[4][4], int rl0,
                                        int c2, float sl2, char *cb)
{
    /* the C stores (band tiles): pair (row, 8 nb + c2 + (e & 1)) goes to u = row - column + 63
     * = U0 - 8 nb, U0 = row + 63 - c2 - (e & 1); C is MN-major (u's line of 64 rows is 128
     * bytes, 16-byte chunk (row >> 3) ^ (u & 7)), so for a thread and e the address is a base
     * minus 1024 nb */
    int cbo[4] = {0, 0, 0, 0};
    if (cb)
        for (int e = 0; e < 4; e++) {
            const int rl = rl0 + 8 * (e >> 1), u0 = rl + 63 - c2 - (e & 1);
            cbo[e] = u0 * 128 + (((rl >> 3) ^ (u0 & 7)) << 4) + (rl & 7) * 2;
        }
    for (int nb = 0; nb < 8; nb++) {
        float ds[4], pp[4];
        for (int e = 0; e < 4; e++) {
            const int col = 8 * nb + c2 + (e & 1);
            const float l2 = KV ? cf[col] : rl2[e >> 1], d = KV ? cf[64 + col] : rd[e >> 1];
            float sc = sa[nb][e];
            if constexpr (Z == 1 || Z == 2) sc += rc[Z - 1][e >> 1] + cf[128 + 64 * (Z - 1) + col];
            pp[e] = ex2f(fmaf(sc, sl2, -l2));
            ds[e] = pp[e] * (dp[nb][e] - d);
            if constexpr (Z == 1 || Z == 2) rs[Z - 1][e >> 1] += ds[e];
        }
        af[nb >> 1][2 * (nb & 1)] = pack2<0>(ds[0], ds[1]);
        af[nb >> 1][2 * (nb & 1) + 1] = pack2<0>(ds[2], ds[3]);
        if constexpr (KV) {
            pf[nb >> 1][2 * (nb & 1)] = pack2<0>(pp[0], pp[1]);
            pf[nb >> 1][2 * (nb & 1) + 1] = pack2<0>(pp[2], pp[3]);
        }
        if (cb)
            for (int e = 0; e < 4; e++) *(uint16_t *)(cb + cbo[e] - 1024 * nb) = f2h<0>(ds[e]);
    }
}

/* The band tile's pieces (a warpgroup's view; its thread rows rl0, rl0 + 8, columns 8 nb + 2 c
 * + (e & 1); dg: the warpgroup's D tile [64][D_PITCH] fp32). */
/* gw = A . ring blocks: the window products of both halves (u 0..63, 64..127), K = 64 */
__device__ __forceinline__ void window_products(float (&gw)[2][8][4], uint64_t da, uint64_t db0, uint64_t db1)
{
    for (int ks = 0; ks < 4; ks++) {
        wgmma_ss<64, 0, 0, 0>(gw[0], desc_add(da, 32 * ks), desc_add(db0, 32 * ks), ks > 0);
        wgmma_ss<64, 0, 0, 0>(gw[1], desc_add(da, 32 * ks), desc_add(db1, 32 * ks), ks > 0);
    }
}

/* sa = X Y^T, dp = Z W^T over the tile (K = 64) */
__device__ __forceinline__ void s_dp_products(float (&sa)[8][4], float (&dp)[8][4], uint64_t dx, uint64_t dy, uint64_t dz,
                                              uint64_t dw)
{
    for (int ks = 0; ks < 4; ks++) wgmma_ss<64, 0, 0, 0>(sa, desc_add(dx, 32 * ks), desc_add(dy, 32 * ks), ks > 0);
    for (int ks = 0; ks < 4; ks++) wgmma_ss<64, 0, 0, 0>(dp, desc_add(dz, 32 * ks), desc_add(dw, 32 * ks), ks > 0);
}

/* D[row][col] = G[row][row - col + 63] (the warp's own rows) */
__device__ __forceinline__ void gather_g(float *dg, const float (&gw)[2][8][4], int rl0, int c)
{
    _Pragma("unroll") for (int hh = 0; hh < 2; hh++)
        _Pragma("unroll") for (int nb = 0; nb < 8; nb++)
            _Pragma("unroll") for (int e = 0; e < 4; e++) {
                const int rl = rl0 + 8 * (e >> 1), col = rl - (64 * hh + 8 * nb + 2 * c + (e & 1)) + 63;
                if ((unsigned)col < 64u) dg[rl * D_PITCH + col] = gw[hh][nb][e];
            }
}

/* D[row][col] = (ADD: +=) H[col][row - col + 63] (any warp's rows; each element has one writer) */
template <int ADD>
__device__ __forceinline__ void gather_h(float *dg, const float (&gw)[2][8][4], int rl0, int c)
{
    _Pragma("unroll") for (int hh = 0; hh < 2; hh++)
        _Pragma("unroll") for (int nb = 0; nb < 8; nb++)
            _Pragma("unroll") for (int e = 0; e < 4; e++) {
                const int cl = rl0 + 8 * (e >> 1), rl = 64 * hh + 8 * nb + 2 * c + (e & 1) + cl - 63;
                if ((unsigned)rl < 64u) {
                    if (ADD) dg[rl * D_PITCH + cl] += gw[hh][nb][e];
                    else dg[rl * D_PITCH + cl] = gw[hh][nb][e];
                }
            }
}

/* sa += D (the thread's own elements) */
__device__ __forceinline__ void add_d(float (&sa)[8][4], const float *dg, int rl0, int c)
{
    for (int nb = 0; nb < 8; nb++)
        for (int i = 0; i < 2; i++) {
            const float2 v = *(const float2 *)(dg + (rl0 + 8 * i) * D_PITCH + 8 * nb + 2 * c);
            sa[nb][2 * i] += v.x;
            sa[nb][2 * i + 1] += v.y;
        }
}

/* At a band tile's start (PROTO_BAND_FLUSH 2, while its first products run): the previous band
 * tile's bulk reductions complete (they read D and C; and two of them add into the same
 * row-frame block, so waiting for completion orders them: deterministic sums), then C's zeros
 * again (its half 1 staged E) */
__device__ __forceinline__ void band_reuse(char *cb, int tw, int cw)
{
    if constexpr (PROTO_BAND_FLUSH == 2) {
        if (tw == 0) bulk_wait_all();
        bar_sync_named(1 + cw, 128);
        const uint4 zero = {0u, 0u, 0u, 0u};
        for (int i = 0; i < 8; i++) *(uint4 *)(cb + 16 * (tw + 128 * i)) = zero;
    }
}

/* Whether any pair of the tile rows [m0, m0 + rows) x columns [n0, n0 + 64) lies in the band
 * |r| < R (r = i - j; the dkdv kernel's rows are keys: r = column - row). */
template <int KV>
__device__ __forceinline__ int is_band(int m0, int rows, int n0, int R)
{
    const int rmin = KV ? n0 - (m0 + rows - 1) : m0 - (n0 + 63), rmax = KV ? n0 + 63 - m0 : m0 + rows - 1 - n0;
    return !(rmin >= R || rmax <= -R);
}

template <int KV>
__device__ __forceinline__ void proto_ws_body(const proto_maps &M, const proto_args &A)
{
    extern __shared__ __align__(1024) char smem_raw[];
    const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
    char *smem = smem_raw + (base - raw);
    const uint32_t xbar = base + P_BAR, full0 = base + P_BAR + 8, empty0 = base + P_BAR + 24;
    /* (wg through a shuffle: warp-uniform to the compiler, so that the descriptors built from it
     * stay in uniform registers) */
    const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), warp = (tid >> 5) & 3, lane = tid & 31;
    const int m0 = blockIdx.x * 128, h = blockIdx.y, b = blockIdx.z, nt = A.L / 64;
    const CUtensorMap *mx = KV ? &M.k : &M.q, *mz = KV ? &M.v : &M.o, *my = KV ? &M.q : &M.k, *mw = KV ? &M.o : &M.v;
    if (tid == 0) {
        mbar_init(xbar, 1);
        for (int s = 0; s < 2; s++) {
            /* arrivals: lane 0 (with the copies' bytes); with column facts its warp's 32 lanes
             * (releasing their stores); with position terms the producer's 128 threads (the
             * ring rows) */
            mbar_init(full0 + 8 * s, A.R ? 128 : KV ? 32 : 1);
            mbar_init(empty0 + 8 * s, 256);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (wg == 0) {
        setmaxnreg_dec<24>();
        if (warp != 0 && !A.R) return;
        /* producer: lane 0 of warp 0 issues the copies, predicated (the warp stays converged) */
        const int one = warp == 0 && lane == 0;
        if (warp == 0) {
            mbar_arrive_expect_tx_if(one, xbar, 4 * 64 * 128);
            for (int half = 0; half < 2; half++) {
                tma_load_rows_if(one, base + P_X + 8192 * half, mx, xbar, M.rf, h, m0 + 64 * half, b);
                tma_load_rows_if(one, base + P_Z + 8192 * half, mz, xbar, M.rf, h, m0 + 64 * half, b);
            }
        }
        for (int j = 0; j < nt; j++) {
            const int s = j & 1;
            if (j >= 2) mbar_wait(empty0 + 8 * s, (uint32_t)((j >> 1) - 1) & 1u);
            float *cf = (float *)(smem + P_CF + 1024 * s);
            if (warp == 0) {
                /* the tile's column facts: lane l takes columns 2 l, 2 l + 1 */
                const int64_t at = ((int64_t)b * A.H + h) * A.L + 64 * j + 2 * lane;
                if (KV)
                    for (int e = 0; e < 2; e++) {
                        cf[2 * lane + e] = A.lse[at + e] * 1.4426950408889634f;
                        cf[64 + 2 * lane + e] = A.di[at + e];
                    }
                if (A.R) { /* the column plane of each side (dq kernel: cps, dkdv kernel: rps) */
                    const float *pl = (KV ? A.rps : A.cps) + (((int64_t)b * A.H + h) * 2) * A.L + 64 * j + 2 * lane;
                    for (int e = 0; e < 2; e++) {
                        cf[128 + 2 * lane + e] = pl[e];
                        cf[192 + 2 * lane + e] = pl[A.L + e];
                    }
                }
            }
            if (A.R) {
                /* the ring blocks first needed by tile j (blocks 0 .. 2 at tile 0, then block
                 * j + 2), each only if one of the tiles a - 2 .. a that read it is a band tile;
                 * the slot it overwrites was last read by tile j - 2 (the stage's empty wait) */
                for (int a = j ? j + 2 : 0; a <= j + 2; a++) {
                    int need = 0;
                    for (int jj = a - 2; jj <= a; jj++) need |= jj >= 0 && jj < nt && is_band<KV>(m0, 128, 64 * jj, A.R);
                    if (!need) continue;
                    /* thread tid: chunk tid & 7 of rows (tid >> 3) + 16 i, i = 0..3, of both tables
                     * (row side: dq kernel pk, dkdv kernel pq) */
                    const int ch = tid & 7;
                    const uint16_t *tr = (KV ? A.pq : A.pk) + (int64_t)h * A.ns * 64 + 8 * ch;
                    const uint16_t *tc = (KV ? A.pk : A.pq) + (int64_t)h * A.ns * 64 + 8 * ch;
                    _Pragma("unroll") for (int i = 0; i < 4; i++) {
                        const int t = (tid >> 3) + 16 * i;
                        int r = m0 - 64 * a + t + 65;
                        r = KV ? -r : r;
                        r = r < 1 - A.L ? 1 - A.L : r > A.L - 1 ? A.L - 1 : r; /* (rows no pair reads) */
                        const int64_t sl = (int64_t)A.slotmap[r + A.L - 1] * 64;
                        const uint4 vr = *(const uint4 *)(tr + sl), vc = *(const uint4 *)(tc + sl);
                        const uint32_t o = 8192u * (uint32_t)(a & 3) + (uint32_t)(t * 128 + ((ch ^ (t & 7)) << 4));
                        *(uint4 *)(smem + P_RR + o) = vr;
                        *(uint4 *)(smem + P_RC + o) = vc;
                    }
                }
                fence_proxy_async(); /* (the ring rows are read by wgmma: the async proxy) */
            }
            /* (with facts or ring rows every thread arrives, releasing its stores; lane 0 with
             * the bytes) */
            mbar_arrive_expect_tx_if(A.R || (KV && warp == 0) || one, full0 + 8 * s, one ? 2 * 64 * 128 : 0);
            if (warp == 0) {
                tma_load_rows_if(one, base + P_Y + 8192 * s, my, full0 + 8 * s, M.rf, h, 64 * j, b);
                tma_load_rows_if(one, base + P_W + 8192 * s, mw, full0 + 8 * s, M.rf, h, 64 * j, b);
            }
        }
        return;
    }
    setmaxnreg_inc<240>();
    /* consumers: warpgroup cw owns rows m0 + 64 cw .. + 63; thread rows 16 warp + g (+ 8) */
    const int cw = wg - 1, g = lane >> 2, c_ = lane & 3, rl0_ = 16 * warp + g, c = c_, rl0 = rl0_;
    float rl2[2] = {0.f, 0.f}, rd[2] = {0.f, 0.f}; /* dq kernel: the rows' facts */
    if (!KV)
        for (int i = 0; i < 2; i++) {
            const int row = m0 + 64 * cw + rl0 + 8 * i;
            const int64_t at = ((int64_t)b * A.H + h) * A.L + row;
            rl2[i] = A.lse[at] * 1.4426950408889634f;
            rd[i] = A.di[at];
        }
    /* the rows' saturated constants (dq kernel: rps, dkdv kernel: cps) and their dS sums */
    float rc[2][2] = {{0.f, 0.f}, {0.f, 0.f}}, rs[2][2] = {{0.f, 0.f}, {0.f, 0.f}}; /* [side][row] */
    const int rb0 = m0 + 64 * cw; /* the warpgroup's first row */
    char *cb = smem + P_C + 16384 * cw;
    float *dg = (float *)(smem + P_D + 64 * D_PITCH * 4 * cw);
    if (A.R) {
        for (int i = 0; i < 2; i++) {
            const float *pl = (KV ? A.cps : A.rps) + (((int64_t)b * A.H + h) * 2) * A.L + rb0 + rl0 + 8 * i;
            rc[0][i] = pl[0];
            rc[1][i] = pl[A.L];
        }
        /* the C tile's zeros (u outside row .. row + 63); band tiles write the rest */
        const uint4 zero = {0u, 0u, 0u, 0u};
        for (int i = 0; i < 8; i++) *(uint4 *)(cb + 16 * (tid - 128 * wg + 128 * i)) = zero;
    }
    float dx[8][4], dv[8][4]; /* (dv: dkdv kernel only) */
    for (int nb = 0; nb < 8; nb++) {
        dx[nb][0] = dx[nb][1] = dx[nb][2] = dx[nb][3] = 0.f;
        dv[nb][0] = dv[nb][1] = dv[nb][2] = dv[nb][3] = 0.f;
    }
    /* descriptor bases (sm90.cuh): K-major X, Z (the warpgroup's rows), Y, W (stage 0), the rings
     * (slot 0); MN-major Y, W (stage 0), the row-side ring, C */
    const uint64_t dX = desc_kmajor(base + P_X, 128, 64 * cw, 0), dZ = desc_kmajor(base + P_Z, 128, 64 * cw, 0);
    const uint64_t dY0 = desc_kmajor(base + P_Y, 64, 0, 0), dW0 = desc_kmajor(base + P_W, 64, 0, 0);
    const uint64_t dRR = desc_kmajor(base + P_RR, 64, 0, 0), dRC = desc_kmajor(base + P_RC, 64, 0, 0);
    const uint64_t dYm0 = desc_mnmajor(base + P_Y, 64, 0), dWm0 = desc_mnmajor(base + P_W, 64, 0);
    const uint64_t dRRm = desc_mnmajor(base + P_RR, 64, 0), dCm = desc_mnmajor(smem_u32(cb), 64, 0);
    const uint64_t dCk = desc_kmajor(smem_u32(cb), 128, 0, 0), dXm = desc_mnmajor(base + P_X + 8192 * cw, 64, 0);
    mbar_wait(xbar, 0);
    for (int j = 0; j < nt; j++) {
        const int s = j & 1;
        /* the tile's descriptors: a stage's / ring slot's base plus k-step immediates */
        const uint64_t dY = desc_add(dY0, 8192u * s), dW = desc_add(dW0, 8192u * s);
        const uint64_t dYm = desc_add(dYm0, 8192u * s), dWm = desc_add(dWm0, 8192u * s);
        mbar_wait(full0 + 8 * s, (uint32_t)(j >> 1) & 1u);
        /* the warpgroup's tile against the position zones */
        const int n0 = 64 * j;
        const int rmin = KV ? n0 - (rb0 + 63) : rb0 - (n0 + 63), rmax = KV ? n0 + 63 - rb0 : rb0 + 63 - n0;
        const int zone = !A.R ? 0 : rmin >= A.R ? 2 : rmax <= -A.R ? 1 : 3; /* 3: band */
        /* ring blocks of the window's columns u = 0..63 / 64..127 (u = row - column + 63) */
        const uint32_t ra0 = 8192u * (uint32_t)((j + 2 - cw) & 3), ra1 = 8192u * (uint32_t)((j + 1 - cw) & 3);
        const uint64_t dR0 = desc_add(dRR, ra0), dR1 = desc_add(dRR, ra1), dC0 = desc_add(dRC, ra0), dC1 = desc_add(dRC, ra1);
        const uint64_t dR0m = desc_add(dRRm, ra0), dR1m = desc_add(dRRm, ra1);
        const float *cf = (const float *)(smem + P_CF + 1024 * s);
        uint32_t af[4][4], pf[4][4]; /* dS (and P, dkdv kernel) as A operands, columns 16 kk .. + 15 */
        float sa[8][4], dp[8][4];
        if (zone == 3) {
            /* a band tile: every pair's c2p + p2c from two window products, gathered through D */
            if constexpr (PROTO_BAND_FUSED == 1 || (PROTO_BAND_FUSED == 2 && !KV)) {
                /* S, dP with G in one group, H in flight while G is added */
                float gw[2][8][4];
                const int rl0 = opaque(rl0_), c = opaque(c_);
                /* S, dP and the row side's G[row][u] = X_row . TR[slot(r(u))] in one group */
                wgmma_fence();
                s_dp_products(sa, dp, dX, dY, dZ, dW);
                window_products(gw, dX, dR0, dR1);
                wgmma_commit();
                band_reuse(cb, tid - 128 * wg, cw);
                wgmma_wait<0>();
                reg_fence(sa);
                reg_fence(dp);
                reg_fence(gw[0]);
                reg_fence(gw[1]);
                gather_g(dg, gw, rl0, c);
                __syncwarp();
                /* the column side's H[col][u] = Y_col . TC[slot(r(u))], in flight while G is added */
                wgmma_fence();
                window_products(gw, dY, dC0, dC1);
                wgmma_commit();
                add_d(sa, dg, rl0, c);
                wgmma_wait<0>();
                reg_fence(gw[0]);
                reg_fence(gw[1]);
                bar_sync_named(1 + cw, 128); /* every warp's G reads done */
                gather_h<0>(dg, gw, rl0, c);
                bar_sync_named(1 + cw, 128);
                add_d(sa, dg, rl0, c);
            } else { /* G, H, then S and dP: three round trips, at most 64 accumulators of them live */
                float gw[2][8][4];
                const int rl0 = opaque(rl0_), c = opaque(c_);
                /* the row side's G[row][u] = X_row . TR[slot(r(u))] */
                wgmma_fence();
                window_products(gw, dX, dR0, dR1);
                wgmma_commit();
                band_reuse(cb, tid - 128 * wg, cw);
                wgmma_wait<0>();
                reg_fence(gw[0]);
                reg_fence(gw[1]);
                gather_g(dg, gw, rl0, c);
                /* the column side's H[col][u] = Y_col . TC[slot(r(u))] */
                wgmma_fence();
                window_products(gw, dY, dC0, dC1);
                wgmma_commit();
                wgmma_wait<0>();
                reg_fence(gw[0]);
                reg_fence(gw[1]);
                bar_sync_named(1 + cw, 128); /* every warp's G stores done */
                gather_h<1>(dg, gw, rl0, c);
                bar_sync_named(1 + cw, 128);
                wgmma_fence();
                s_dp_products(sa, dp, dX, dY, dZ, dW);
                wgmma_commit();
                wgmma_wait<0>();
                reg_fence(sa);
                reg_fence(dp);
                add_d(sa, dg, rl0, c);
            }
            tile_ds<KV, 0>(sa, dp, cf, rl2, rd, rc, rs, af, pf, rl0, 2 * c, A.sl2, cb);
            fence_proxy_async(); /* (C is read by wgmma) */
            bar_sync_named(1 + cw, 128);
            wgmma_fence();
            for (int kk = 0; kk < 4; kk++) wgmma_rs<64, 0, 1>(dx, af[kk], desc_add(dYm, 2048 * kk), 1);
            /* dX += C . TR window (the band's c2p / p2c gradient of the rows) */
            for (int kk = 0; kk < 8; kk++)
                wgmma_ss<64, 0, 1, 1>(dx, desc_add(dCm, 2048 * kk),
                                      desc_add(kk < 4 ? dR0m : dR1m, 2048 * (kk & 3)), 1);
            if constexpr (KV)
                for (int kk = 0; kk < 4; kk++) wgmma_rs<64, 0, 1>(dv, pf[kk], desc_add(dWm, 2048 * kk), 1);
            /* the band pairs' table gradient over the window: E[u][d] = sum_row C[row][u] X[row][d]
             * (A = C read K-major: C's u-lines of 64 rows; B = the warpgroup's X rows MN-major) */
            float eg[2][8][4];
            for (int hh = 0; hh < 2; hh++)
                for (int ks = 0; ks < 4; ks++)
                    wgmma_ss<64, 0, 0, 1>(eg[hh], desc_add(dCk, 8192 * hh + 32 * ks), desc_add(dXm, 2048 * ks), ks > 0);
            wgmma_commit();
            wgmma_wait<0>();
            reg_fence(dx);
            if constexpr (KV) reg_fence(dv);
            reg_fence(eg[0]);
            reg_fence(eg[1]);
            /* E's rows u = 64 hh + 16 warp + g (+ 8) are r = sgn (rb0 - n0 + u - 63) */
            if constexpr (PROTO_BAND_FLUSH == 2) {
                /* E (times scale) staged as two fp32 [64][64] blocks, swizzled (the float2 stores
                 * conflict-free), half 0 in D (free since the barrier after tile_ds), half 1 in C
                 * (after every warp's final wgmma has read it); one thread adds both to the
                 * warpgroup's row-frame partial by bulk reductions; the next band tile waits for
                 * them (band_reuse) before it writes D or C */
                const int tw = tid - 128 * wg;
                const int64_t blk =
                    ((int64_t)(blockIdx.x + gridDim.x * (blockIdx.y + (int64_t)gridDim.y * blockIdx.z)) * 2 + cw) *
                        (2 * A.nkh + 2) + ((rb0 - n0) >> 6) + A.nkh;
                for (int hh = 0; hh < 2; hh++) {
                    float *st = hh ? (float *)cb : dg;
                    if (hh) bar_sync_named(1 + cw, 128);
                    for (int nb = 0; nb < 8; nb++)
                        for (int i = 0; i < 2; i++) {
                            const int t = rl0 + 8 * i;
                            *(float2 *)(st + 64 * t + 4 * ((2 * nb + (c >> 1)) ^ (t & 7)) + 2 * (c & 1)) =
                                make_float2(eg[hh][nb][2 * i] * A.scale, eg[hh][nb][2 * i + 1] * A.scale);
                        }
                }
                fence_proxy_async(); /* (read by the bulk reductions: the async proxy) */
                bar_sync_named(1 + cw, 128);
                if (tw == 0) {
                    bulk_reduce_add_f32(A.dband[KV] + blk * 4096, smem_u32(dg), 16384);
                    bulk_reduce_add_f32(A.dband[KV] + (blk + 1) * 4096, smem_u32(cb), 16384);
                    bulk_commit();
                }
            }
            if constexpr (PROTO_BAND_FLUSH == 1) {
                /* deterministic: each half staged in D, then per 8-row group and 4 d columns one
                 * thread sums the runs of equal slots that start in its group and adds each run to
                 * the warpgroup's own partial table (no other writer) */
                const int tw = tid - 128 * wg, q = tw >> 4, k4 = 4 * (tw & 15);
                float *part = A.dband[KV] +
                              ((int64_t)((blockIdx.x + gridDim.x * (blockIdx.y + (int64_t)gridDim.y * blockIdx.z)) * 2 + cw) *
                               A.ns) * 64 + k4;
                auto slot_at = [&](int hh, int t) {
                    int r = rb0 - n0 + 64 * hh + t - 63;
                    r = KV ? -r : r;
                    r = r < 1 - A.L ? 1 - A.L : r > A.L - 1 ? A.L - 1 : r; /* (u = 127: no pair, E = 0) */
                    return A.slotmap[r + A.L - 1];
                };
                for (int hh = 0; hh < 2; hh++) {
                    for (int nb = 0; nb < 8; nb++)
                        for (int i = 0; i < 2; i++)
                            *(float2 *)(dg + (rl0 + 8 * i) * D_PITCH + 8 * nb + 2 * c) =
                                make_float2(eg[hh][nb][2 * i], eg[hh][nb][2 * i + 1]);
                    bar_sync_named(1 + cw, 128);
                    int t = 8 * q, sl = slot_at(hh, t);
                    if (q > 0) /* a run continuing from the group above is that group's */
                        for (const int prev = slot_at(hh, t - 1); t < 8 * q + 8 && sl == prev;)
                            sl = ++t < 64 ? slot_at(hh, t) : -1;
                    while (t < 8 * q + 8) {
                        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
                        const int run = sl;
                        for (; t < 64 && sl == run; sl = ++t < 64 ? slot_at(hh, t) : -1) {
                            const float4 v = *(const float4 *)(dg + t * D_PITCH + k4);
                            acc.x += v.x;
                            acc.y += v.y;
                            acc.z += v.z;
                            acc.w += v.w;
                        }
                        float4 *dst = (float4 *)(part + (int64_t)run * 64);
                        float4 o = *dst;
                        o.x += acc.x * A.scale;
                        o.y += acc.y * A.scale;
                        o.z += acc.z * A.scale;
                        o.w += acc.w * A.scale;
                        *dst = o;
                    }
                    bar_sync_named(1 + cw, 128); /* D is free again */
                }
            }
            if constexpr (PROTO_BAND_FLUSH == 0 && PROTO_BAND_COPIES > 0)
            for (int hh = 0; hh < 2; hh++)
                for (int i = 0; i < 2; i++) {
                    int r = rb0 - n0 + 64 * hh + rl0 + 8 * i - 63;
                    r = KV ? -r : r;
                    r = r < 1 - A.L ? 1 - A.L : r > A.L - 1 ? A.L - 1 : r; /* (u = 127: no pair, E = 0) */
                    const int copy = (int)(((blockIdx.x + gridDim.x * blockIdx.z) * 2 + cw) % PROTO_BAND_COPIES);
                    float *dst = A.dband[KV] + (((int64_t)copy * A.H + h) * A.ns + A.slotmap[r + A.L - 1]) * 64 + 2 * c;
                    for (int nb = 0; nb < 8; nb++) {
                        atomicAdd(dst + 8 * nb, eg[hh][nb][2 * i] * A.scale);
                        atomicAdd(dst + 8 * nb + 1, eg[hh][nb][2 * i + 1] * A.scale);
                    }
                }
        } else {
            wgmma_fence();
            s_dp_products(sa, dp, dX, dY, dZ, dW);
            wgmma_commit();
            wgmma_wait<0>();
            reg_fence(sa);
            reg_fence(dp);
            /* (the zone is uniform over the warpgroup: one specialized body per zone, so that a
             * tile without position terms runs the plain softmax-gradient code) */
            if (zone == 0)
                tile_ds<KV, 0>(sa, dp, cf, rl2, rd, rc, rs, af, pf, rl0, 2 * c, A.sl2, nullptr);
            else if (zone == 1)
                tile_ds<KV, 1>(sa, dp, cf, rl2, rd, rc, rs, af, pf, rl0, 2 * c, A.sl2, nullptr);
            else
                tile_ds<KV, 2>(sa, dp, cf, rl2, rd, rc, rs, af, pf, rl0, 2 * c, A.sl2, nullptr);
            wgmma_fence();
            for (int kk = 0; kk < 4; kk++) wgmma_rs<64, 0, 1>(dx, af[kk], desc_add(dYm, 2048 * kk), 1);
            if constexpr (KV)
                for (int kk = 0; kk < 4; kk++) wgmma_rs<64, 0, 1>(dv, pf[kk], desc_add(dWm, 2048 * kk), 1);
            wgmma_commit();
            wgmma_wait<0>();
            reg_fence(dx);
            if constexpr (KV) reg_fence(dv);
        }
        mbar_arrive(empty0 + 8 * s); /* the stage is free (its reads completed at the wait above) */
    }
    if (PROTO_BAND_FLUSH == 2 && A.R && tid - 128 * wg == 0) bulk_wait_all(); /* (their sources: this CTA's shared memory) */
    if (A.R) {
        /* the rows' dS sums over the saturated zone (the quad's four lanes hold parts of each) */
        for (int sd = 0; sd < 2; sd++)
            for (int i = 0; i < 2; i++) {
                rs[sd][i] += __shfl_xor_sync(0xffffffffu, rs[sd][i], 1);
                rs[sd][i] += __shfl_xor_sync(0xffffffffu, rs[sd][i], 2);
            }
        /* dX += rs . T[sat side] (dq kernel: pk rows, dkdv kernel: pq rows) */
        const uint16_t *tr = (KV ? A.tq : A.tk) + (int64_t)h * 128;
        for (int nb = 0; nb < 8; nb++)
            for (int e = 0; e < 4; e++) {
                const int d = 8 * nb + 2 * c + (e & 1);
                dx[nb][e] += rs[0][e >> 1] * h2f<0>(tr[d]) + rs[1][e >> 1] * h2f<0>(tr[64 + d]);
            }
        /* the table gradient's partial of the warp's 16 rows: lane l, columns 2 l, 2 l + 1,
         * rows in order (row rr's sums come from lane 4 (rr & 7), half rr >> 3) */
        float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
        for (int rr = 0; rr < 16; rr++) {
            const int row = 64 * cw + 16 * warp + rr;
            const float s0 = __shfl_sync(0xffffffffu, rr < 8 ? rs[0][0] : rs[0][1], 4 * (rr & 7));
            const float s1 = __shfl_sync(0xffffffffu, rr < 8 ? rs[1][0] : rs[1][1], 4 * (rr & 7));
            for (int e = 0; e < 2; e++) {
                const int d = 2 * lane + e;
                const float x = h2f<0>(*(const uint16_t *)(smem + P_X + row * 128 + (((d >> 3) ^ (row & 7)) << 4) + (d & 7) * 2));
                acc[0][e] = fmaf(s0, x, acc[0][e]);
                acc[1][e] = fmaf(s1, x, acc[1][e]);
            }
        }
        const int64_t cta = blockIdx.x + (int64_t)gridDim.x * (blockIdx.y + (int64_t)gridDim.y * blockIdx.z);
        float *part = A.dtab[KV] + ((cta * 8 + 4 * cw + warp) * 2) * 64;
        for (int sd = 0; sd < 2; sd++)
            for (int e = 0; e < 2; e++) part[64 * sd + 2 * lane + e] = acc[sd][e] * A.scale;
    }
    uint16_t *ox = KV ? A.dk : A.dq;
    for (int nb = 0; nb < 8; nb++)
        for (int e = 0; e < 4; e++) {
            const int row = m0 + 64 * cw + 16 * warp + g + 8 * (e >> 1), d = 8 * nb + 2 * c + (e & 1);
            const int64_t at = (((int64_t)b * A.L + row) * A.H + h) * 64 + d;
            ox[at] = f2h<0>(dx[nb][e] * A.scale);
            if constexpr (KV) A.dv[at] = f2h<0>(dv[nb][e]);
        }
}

extern "C" __global__ void __launch_bounds__(384, 1)
    dattn_proto_ws_dq(const __grid_constant__ proto_maps M, const __grid_constant__ proto_args A)
{
    proto_ws_body<0>(M, A);
}

extern "C" __global__ void __launch_bounds__(384, 1)
    dattn_proto_ws_dkdv(const __grid_constant__ proto_maps M, const __grid_constant__ proto_args A)
{
    proto_ws_body<1>(M, A);
}

static uint16_t to_h(float f)
{
    _Float16 x = (_Float16)f;
    uint16_t r;
    memcpy(&r, &x, 2);
    return r;
}

static float from_h(uint16_t u)
{
    _Float16 x;
    memcpy(&x, &u, 2);
    return (float)x;
}

/* one gradient against its float64 reference: every element within 1e-2 of the largest
 * |reference| (fp16 inputs, fp16 P / dS operands and outputs, fp32 accumulation) */
static int check_one(const char *name, const uint16_t *dev, const double *ref, size_t n)
{
    uint16_t *h = (uint16_t *)malloc(n * 2);
    CK(cudaMemcpy(h, dev, n * 2, cudaMemcpyDeviceToHost));
    double mref = 0, merr = 0;
    for (size_t i = 0; i < n; i++) mref = fmax(mref, fabs(ref[i]));
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)from_h(h[i]) - ref[i]);
        merr = fmax(merr, err);
        if (!(err <= 1e-2 * mref)) { /* (NaN: the poison, fails too) */
            if (bad < 4) printf("  %s[%zu] = %g, want %g\n", name, i, (double)from_h(h[i]), ref[i]);
            bad++;
        }
    }
    printf("%s proto_ws_bwd check %s: max |err| %.3g of max |%s| %.3g, %d of %zu outside 1e-2 of it\n",
           bad ? "FAIL" : "ok  ", name, merr, name, mref, bad, n);
    free(h);
    return bad != 0;
}

static int n_pass, n_fail; /* --check: gradients within the bound, and not */

/* Sum of the CTAs' table-gradient partials ([cta][8 warps][2 sides][64]) per head, in double. */
static void sum_parts(const float *dev, int ncta, int gx, int H, double *out /* [H][2][64] */)
{
    float *h = (float *)malloc((size_t)ncta * 8 * 128 * 4);
    CK(cudaMemcpy(h, dev, (size_t)ncta * 8 * 128 * 4, cudaMemcpyDeviceToHost));
    memset(out, 0, (size_t)H * 128 * sizeof(double));
    for (int cta = 0; cta < ncta; cta++)
        for (int w = 0; w < 8; w++)
            for (int i = 0; i < 128; i++) out[(size_t)((cta / gx) % H) * 128 + i] += h[((size_t)cta * 8 + w) * 128 + i];
    free(h);
}

/* the same check on a table gradient summed on the host */
static int check_tab(const char *name, const double *got, const double *ref, size_t n)
{
    double mref = 0, merr = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) mref = fmax(mref, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        const double err = fabs(got[i] - ref[i]);
        merr = fmax(merr, err);
        if (!(err <= 1e-2 * mref)) {
            if (bad < 4) printf("  %s[%zu] = %g, want %g\n", name, i, got[i], ref[i]);
            bad++;
        }
    }
    printf("%s proto_ws_bwd check %s: max |err| %.3g of max |%s| %.3g, %d of %zu outside 1e-2 of it\n",
           bad ? "FAIL" : "ok  ", name, merr, name, mref, bad, n);
    return bad != 0;
}

/* DeBERTa's log-bucket slot (SPEC.md: position_buckets pb, max position mp), in float32 as
 * transformers evaluates it (the prototype needs a valid map, not the library's bit-exact one:
 * the kernels and the reference use the same map) */
static int slot_of(int r, int pb, int mp)
{
    const int mid = pb / 2, a = (r > -mid && r < mid) ? mid - 1 : abs(r);
    int bucket = r;
    if (a > mid) {
        const float den = (float)log((double)(mp - 1) / mid);
        const int lp = (int)ceilf(logf((float)a / (float)mid) / den * (float)(mid - 1)) + mid;
        bucket = r < 0 ? -lp : lp;
    }
    const int sl = bucket + pb;
    return sl < 0 ? 0 : sl > 2 * pb - 1 ? 2 * pb - 1 : sl;
}

/* random inputs; lse and D from a float64 forward on the host with the reference gradients when
 * `check` (else plausible values: the bench only times). R > 0: c2p and p2c (scale 1 / sqrt(3 *
 * 64)) with a log-bucket table saturating at R, and their table gradients. */
static int run(int B, int L, int H, int R, int check, int reps)
{
    /* R > 0: position terms with the log-bucket table of position_buckets R / 2, max position
     * R (v3's for R 512), whose saturation distance is R */
    const int pb = R / 2, ns = R ? 2 * pb : 2;
    if (R) {
        int rs = 0; /* the map's saturation distance */
        for (int r = 1; r < 4 * R + 8; r++)
            if (slot_of(r, pb, R) != ns - 1 || slot_of(-r, pb, R) != 0) rs = r + 1;
        if (rs != R) {
            fprintf(stderr, "proto_ws_bwd: the table of R %d saturates at %d\n", R, rs);
            return 1;
        }
    }
    const size_t n = (size_t)B * L * H * 64, nr = (size_t)B * H * L;
    uint16_t *hq = (uint16_t *)malloc(n * 2), *hk = (uint16_t *)malloc(n * 2), *hv = (uint16_t *)malloc(n * 2),
             *ho = (uint16_t *)malloc(n * 2);
    float *hl = (float *)malloc(nr * 4), *hd = (float *)malloc(nr * 4);
    const unsigned seed = 20261201u + (unsigned)L;
    srand(seed);
    printf("proto_ws_bwd: B%d L%d H%d R%d, seed %u\n", B, L, H, R, seed);
    for (size_t i = 0; i < n; i++) {
        hq[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
        hk[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
        hv[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
        ho[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
    }
    const double scale = R ? 1.0 / sqrt(192.0) : 1.0 / 8.0;
    /* the tables pk / pq [H][ns][64], the slot map of r = -(L - 1) .. L - 1, the saturated
     * slots' rows [H][2][64] (side 0: slot 0, side 1: slot ns - 1) and the planes [B][H][2][L] */
    const size_t ntab = (size_t)H * ns * 64, nt = (size_t)H * 128, np = (size_t)B * H * 2 * L;
    uint16_t *hpk = (uint16_t *)malloc(ntab * 2), *hpq = (uint16_t *)malloc(ntab * 2);
    int *hsm = (int *)malloc((size_t)(2 * L - 1) * sizeof(int));
    for (size_t i = 0; i < ntab; i++) {
        hpk[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
        hpq[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
    }
    for (int r = 1 - L; r < L; r++) hsm[r + L - 1] = R ? slot_of(r, pb, R) : 0;
    uint16_t *htk = (uint16_t *)malloc(nt * 2), *htq = (uint16_t *)malloc(nt * 2);
    float *hrp = (float *)calloc(np, 4), *hcp = (float *)calloc(np, 4);
    for (int h = 0; h < H; h++)
        for (int sd = 0; sd < 2; sd++)
            for (int d = 0; d < 64; d++) {
                htk[(size_t)h * 128 + 64 * sd + d] = hpk[((size_t)h * ns + (sd ? ns - 1 : 0)) * 64 + d];
                htq[(size_t)h * 128 + 64 * sd + d] = hpq[((size_t)h * ns + (sd ? ns - 1 : 0)) * 64 + d];
            }
    auto tab = [&](const uint16_t *t, int h, int r, int d) {
        return (double)from_h(t[((size_t)h * ns + hsm[r + L - 1]) * 64 + d]);
    };
    auto el = [&](const uint16_t *t, int b, int i, int h, int d) { return (double)from_h(t[(((size_t)b * L + i) * H + h) * 64 + d]); };
    auto tb = [&](const uint16_t *t, int h, int sd, int d) { return (double)from_h(t[(size_t)h * 128 + 64 * sd + d]); };
    if (R)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int sd = 0; sd < 2; sd++)
                    for (int i = 0; i < L; i++) {
                        double cq = 0, ck = 0;
                        for (int d = 0; d < 64; d++) {
                            cq += el(hq, b, i, h, d) * tb(htk, h, sd, d);
                            ck += el(hk, b, i, h, d) * tb(htq, h, sd, d);
                        }
                        hrp[(((size_t)b * H + h) * 2 + sd) * L + i] = (float)cq;
                        hcp[(((size_t)b * H + h) * 2 + sd) * L + i] = (float)ck;
                    }
    double *rdq = 0, *rdk = 0, *rdv = 0, *rpk = 0, *rpq = 0;
    if (check) {
        /* float64 reference: S, lse, P, O, D, dP, dS, then dQ, dK, dV per (b, h) */
        rdq = (double *)calloc(n, sizeof(double));
        rdk = (double *)calloc(n, sizeof(double));
        rdv = (double *)calloc(n, sizeof(double));
        rpk = (double *)calloc(ntab, sizeof(double));
        rpq = (double *)calloc(ntab, sizeof(double));
        double *p = (double *)malloc((size_t)L * L * sizeof(double));
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                auto idx = [&](int i, int d) { return (((size_t)b * L + i) * H + h) * 64 + d; };
                auto at = [&](const uint16_t *t, int i, int d) { return (double)from_h(t[idx(i, d)]); };
                for (int i = 0; i < L; i++) {
                    double mx = -1e300;
                    for (int j = 0; j < L; j++) {
                        double s = 0;
                        for (int d = 0; d < 64; d++) s += at(hq, i, d) * at(hk, j, d);
                        if (R) /* c2p + p2c */
                            for (int d = 0; d < 64; d++) s += at(hq, i, d) * tab(hpk, h, i - j, d) + at(hk, j, d) * tab(hpq, h, i - j, d);
                        p[(size_t)i * L + j] = s * scale;
                        mx = fmax(mx, s * scale);
                    }
                    double z = 0;
                    for (int j = 0; j < L; j++) z += exp(p[(size_t)i * L + j] - mx);
                    const double lse = mx + log(z);
                    hl[((size_t)b * H + h) * L + i] = (float)lse;
                    for (int j = 0; j < L; j++) p[(size_t)i * L + j] = exp(p[(size_t)i * L + j] - lse);
                    double di = 0;
                    for (int d = 0; d < 64; d++) {
                        double o = 0;
                        for (int j = 0; j < L; j++) o += p[(size_t)i * L + j] * at(hv, j, d);
                        di += o * at(ho, i, d);
                    }
                    hd[((size_t)b * H + h) * L + i] = (float)di;
                    for (int j = 0; j < L; j++) {
                        const double pij = p[(size_t)i * L + j];
                        double dp = 0;
                        for (int d = 0; d < 64; d++) dp += at(ho, i, d) * at(hv, j, d);
                        const double ds = pij * (dp - di);
                        for (int d = 0; d < 64; d++) {
                            rdq[idx(i, d)] += ds * (at(hk, j, d) + (R ? tab(hpk, h, i - j, d) : 0.0)) * scale;
                            rdk[idx(j, d)] += ds * (at(hq, i, d) + (R ? tab(hpq, h, i - j, d) : 0.0)) * scale;
                            rdv[idx(j, d)] += pij * at(ho, i, d);
                            if (R) {
                                const size_t t = ((size_t)h * ns + hsm[i - j + L - 1]) * 64 + d;
                                rpk[t] += ds * at(hq, i, d) * scale;
                                rpq[t] += ds * at(hk, j, d) * scale;
                            }
                        }
                    }
                }
            }
        free(p);
    } else {
        for (size_t i = 0; i < nr; i++) hl[i] = logf((float)L) + 0.5f, hd[i] = 0.01f;
    }
    uint16_t *dq_, *dk_, *dv_, *do_, *gq, *gk, *gv;
    float *dl, *dd, *drp, *dcp, *dtq, *dtk2;
    uint16_t *dtk, *dtq16;
    const dim3 grid((unsigned)(L / 128), (unsigned)H, (unsigned)B);
    const int ncta = (int)(grid.x * grid.y * grid.z);
    uint16_t *dpk, *dpq;
    int *dsm;
    CK(cudaMalloc((void **)&dpk, ntab * 2));
    CK(cudaMalloc((void **)&dpq, ntab * 2));
    CK(cudaMalloc((void **)&dsm, (size_t)(2 * L - 1) * sizeof(int)));
    CK(cudaMemcpy(dpk, hpk, ntab * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpq, hpq, ntab * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dsm, hsm, (size_t)(2 * L - 1) * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&drp, np * 4));
    CK(cudaMalloc((void **)&dcp, np * 4));
    CK(cudaMalloc((void **)&dtk, nt * 2));
    CK(cudaMalloc((void **)&dtq16, nt * 2));
    CK(cudaMalloc((void **)&dtq, (size_t)ncta * 8 * 128 * 4));
    CK(cudaMalloc((void **)&dtk2, (size_t)ncta * 8 * 128 * 4));
    CK(cudaMemcpy(drp, hrp, np * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dcp, hcp, np * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dtk, htk, nt * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dtq16, htq, nt * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(dtq, 0xFF, (size_t)ncta * 8 * 128 * 4));
    float *dbk, *dbq; /* the band pairs' dpk / dpq (atomics: zeroed) */
    /* bulk reductions: row-frame blocks per (CTA, warpgroup); flush: a partial table per (CTA,
     * warpgroup); atomics: the copies */
    const int nkh = (R + 63) / 64, nblk = 2 * nkh + 2;
    const size_t nband = PROTO_BAND_FLUSH == 2 ? (size_t)ncta * 2 * nblk * 4096
                         : (PROTO_BAND_FLUSH ? (size_t)ncta * 2 : (size_t)(PROTO_BAND_COPIES > 0 ? PROTO_BAND_COPIES : 1) * H) * (ntab / H);
    CK(cudaMalloc((void **)&dbk, nband * 4));
    CK(cudaMalloc((void **)&dbq, nband * 4));
    CK(cudaMemset(dbk, 0, nband * 4));
    CK(cudaMemset(dbq, 0, nband * 4));
    CK(cudaMemset(dtk2, 0xFF, (size_t)ncta * 8 * 128 * 4));
    CK(cudaMalloc((void **)&dq_, n * 2));
    CK(cudaMalloc((void **)&dk_, n * 2));
    CK(cudaMalloc((void **)&dv_, n * 2));
    CK(cudaMalloc((void **)&do_, n * 2));
    CK(cudaMalloc((void **)&gq, n * 2));
    CK(cudaMalloc((void **)&gk, n * 2));
    CK(cudaMalloc((void **)&gv, n * 2));
    CK(cudaMalloc((void **)&dl, nr * 4));
    CK(cudaMalloc((void **)&dd, nr * 4));
    CK(cudaMemcpy(dq_, hq, n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dk_, hk, n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv_, hv, n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(do_, ho, n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dl, hl, nr * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dd, hd, nr * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(gq, 0xFF, n * 2)); /* poisoned */
    CK(cudaMemset(gk, 0xFF, n * 2));
    CK(cudaMemset(gv, 0xFF, n * 2));
    proto_maps M;
    int rf = 0;
    const int64_t os = (int64_t)L * H * 64, rs = (int64_t)H * 64, hs = 64;
    CK(dattn_tma_rows_map(&M.q, &rf, dq_, B, L, H, os, rs, hs, 64));
    CK(dattn_tma_rows_map(&M.k, &rf, dk_, B, L, H, os, rs, hs, 64));
    CK(dattn_tma_rows_map(&M.v, &rf, dv_, B, L, H, os, rs, hs, 64));
    CK(dattn_tma_rows_map(&M.o, &rf, do_, B, L, H, os, rs, hs, 64));
    M.rf = rf;
    proto_args a;
    a.lse = dl;
    a.di = dd;
    a.dq = gq;
    a.dk = gk;
    a.dv = gv;
    a.slotmap = dsm;
    a.pk = dpk;
    a.pq = dpq;
    a.ns = ns;
    a.rps = drp;
    a.cps = dcp;
    a.tk = dtk;
    a.tq = dtq16;
    a.dtab[0] = dtq; /* dpk partials (dq kernel) */
    a.dtab[1] = dtk2; /* dpq partials (dkdv kernel) */
    a.dband[0] = dbk;
    a.dband[1] = dbq;
    a.nkh = nkh;
    a.R = R;
    a.B = B;
    a.L = L;
    a.H = H;
    a.scale = (float)scale;
    a.sl2 = (float)(scale * 1.4426950408889634);
    typedef void (*kfn)(proto_maps, proto_args);
    const kfn kern[2] = {dattn_proto_ws_dq, dattn_proto_ws_dkdv};
    const char *kname[2] = {"dq", "dkdv"};
    for (int k = 0; k < 2; k++) {
        const kfn kf = kern[k];
        CK(cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize, P_SMEM));
        kf<<<grid, 384, P_SMEM, 0>>>(M, a);
        CK(cudaGetLastError());
    }
    CK(cudaDeviceSynchronize());
    int bad = 0;
    if (check) {
        int nbad = check_one("dQ", gq, rdq, n) + check_one("dK", gk, rdk, n) + check_one("dV", gv, rdv, n), ncase = 3;
        if (R) {
            /* the saturated tiles' partials (slots 0 and ns - 1) plus the band tiles' sums */
            double *sat = (double *)malloc(nt * sizeof(double)), *got = (double *)malloc(ntab * sizeof(double));
            float *band = (float *)malloc(nband * 4);
            size_t nfar = 0; /* bulk reductions: nonzero sums outside -L < r < L */
            for (int k = 0; k < 2; k++) {
                sum_parts(k ? dtk2 : dtq, ncta, (int)grid.x, H, sat);
                CK(cudaMemcpy(band, k ? dbq : dbk, nband * 4, cudaMemcpyDeviceToHost));
                /* copies of [ns][64] per head: flush, copy = (CTA) * 2 + cw with the head at (CTA /
                 * grid.x) % H; atomics, copy = c * H + h */
                const size_t per = ntab / H, ncopy = nband / per;
                for (size_t t = 0; t < ntab; t++) got[t] = 0;
                if (PROTO_BAND_FLUSH == 2) /* the row-frame blocks: r' = 64 (kb - nkh) + t - 63, r = sgn r' */
                    for (size_t cp = 0; cp < (size_t)ncta * 2; cp++)
                        for (int kb = 0; kb < nblk; kb++)
                            for (int t = 0; t < 64; t++) {
                                const int rf = 64 * (kb - nkh) + t - 63, r = k ? -rf : rf;
                                const float *bk = band + (cp * nblk + kb) * 4096;
                                for (int d = 0; d < 64; d++) {
                                    const float v = bk[64 * t + 4 * ((d >> 2) ^ (t & 7)) + (d & 3)];
                                    if (r <= -L || r >= L) { /* no pair: must stay zero */
                                        if (v != 0.f) nfar++;
                                        continue;
                                    }
                                    got[((cp / 2 / grid.x) % H * ns + hsm[r + L - 1]) * 64 + d] += v;
                                }
                            }
                for (size_t cp = 0; PROTO_BAND_FLUSH != 2 && cp < ncopy; cp++) {
                    const size_t hh = PROTO_BAND_FLUSH ? (cp / 2 / grid.x) % H : cp % H;
                    for (size_t t = 0; t < per; t++) got[hh * per + t] += band[cp * per + t];
                }
                for (int hh = 0; hh < H; hh++)
                    for (int d = 0; d < 64; d++) {
                        got[((size_t)hh * ns) * 64 + d] += sat[(size_t)hh * 128 + d];
                        got[((size_t)hh * ns + ns - 1) * 64 + d] += sat[(size_t)hh * 128 + 64 + d];
                    }
                const int tbad = check_tab(k ? "dPQ" : "dPK", got, k ? rpq : rpk, ntab);
                if (nfar) printf("FAIL proto_ws_bwd check %s: %zu nonzero row-frame sums at |r| >= L\n", k ? "dPQ" : "dPK", nfar);
                nbad += tbad || nfar;
                nfar = 0;
            }
            ncase += 2;
            free(sat);
            free(got);
            free(band);
        }
        n_pass += ncase - nbad;
        n_fail += nbad;
        bad = nbad;
        free(rpk);
        free(rpq);
        free(rdq);
        free(rdk);
        free(rdv);
    }
#ifndef DATTN_EMU_CUDA_RUNTIME_H
    if (reps > 0) {
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        for (int k = 0; k < 2; k++) {
            CK(cudaEventRecord(e0));
            const kfn kf = kern[k];
            for (int r = 0; r < reps; r++) kf<<<grid, 384, P_SMEM, 0>>>(M, a);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            /* products: dq kernel S, dP, dQ; dkdv kernel S, dP, dK, dV */
            const double t = ms / reps, flop = (k ? 4.0 : 3.0) * 2.0 * B * H * (double)L * L * 64;
            printf("proto_ws_bwd %s B%d L%d H%d R%d: %.4f ms per call (%d calls), %.1f TFLOP/s on its %d products\n",
                   kname[k], B, L, H, R, t, reps, flop / t / 1e9, k ? 4 : 3);
        }
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
    }
#else
    (void)reps;
    (void)kname;
#endif
    cudaFree(dq_);
    cudaFree(dk_);
    cudaFree(dv_);
    cudaFree(do_);
    cudaFree(gq);
    cudaFree(gk);
    cudaFree(gv);
    cudaFree(dl);
    cudaFree(dd);
    cudaFree(dpk);
    cudaFree(dpq);
    cudaFree(dsm);
    cudaFree(drp);
    cudaFree(dcp);
    cudaFree(dtk);
    cudaFree(dtq16);
    cudaFree(dtq);
    cudaFree(dtk2);
    cudaFree(dbk);
    cudaFree(dbq);
    free(hpk);
    free(hpq);
    free(hsm);
    free(htk);
    free(htq);
    free(hrp);
    free(hcp);
    free(hq);
    free(hk);
    free(hv);
    free(ho);
    free(hl);
    free(hd);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (tsm90_need("proto_ws_bwd")) return 77;
    /* --check: the core alone (L 256), then with position terms saturating at R = 100 (L 512 /
     * 384: saturated tiles on both sides, band tiles straddling R and inside it) */
    if (argc >= 2 && !strcmp(argv[1], "--check")) {
        run(2, 256, 2, 0, 1, 0); /* (two sequences: the maps' outer coordinate, the planes' batch) */
        run(1, 512, 2, 100, 1, 0);
        run(2, 384, 1, 100, 1, 0);
        printf("%d passed, %d failed\n", n_pass, n_fail);
        return n_fail ? 1 : 0;
    }
    if (argc >= 4 && !strcmp(argv[1], "--bench"))
        return run(atoi(argv[2]), atoi(argv[3]), 12, argc >= 6 ? atoi(argv[5]) : 512, 0, argc >= 5 ? atoi(argv[4]) : 20);
    fprintf(stderr, "usage: proto_ws_bwd --check | --bench B L [N [R]]   (R: the log-bucket table saturating at R, 0 = no position terms; default 512)\n");
    return 2;
}

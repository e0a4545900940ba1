/* The band tile's window products and gathers, shared by the warp-specialized Hopper kernels
 * (bwd_ws_d64_sm90.cu's dq / dkdv kernels, fwd_ws_d64_sm90.cu's forward): a consumer warpgroup
 * of 64 rows against a tile of 64 columns, with the rows of the two tables (pk, pq) for the
 * tile's relative positions r = row - column staged in shared memory as ring blocks of 64
 * table rows (u = row - column + 63 in 0..126 spans two blocks: u 0..63, 64..127). The window
 * products G = rows . ring (the row side's table) and H = columns . ring (the column side's)
 * are gathered into the tile's layout through a shared fp32 tile D (pitch WS_DP floats). The
 * ring blocks may come by TMA from per-call expanded tables (ws_expand_chunk writes them). */
#ifndef DATTN_CUDA_WS_BAND_CUH
#define DATTN_CUDA_WS_BAND_CUH

#include "common.cuh"
#include "sm90.cuh"

enum { WS_DP = 72 /* D's pitch in floats: the gathers' stores 2-way, its 64-bit reads conflict-free */ };

/* x, opaque to the compiler: the band tile's per-thread address bases pass through it each tile
 * (else ~200 hoisted addresses / predicates spill) */
DATTN_DEV int ws_opaque(int x)
{
    asm volatile("" : "+r"(x));
    return x;
}

/* gw = A . ring blocks: the window products of both halves (u 0..63, 64..127), K = 64 */
template <int BF>
DATTN_DEV void ws_window_products(float (&gw)[2][8][4], uint64_t da, uint64_t db0, uint64_t db1)
{
    for (int ks = 0; ks < 4; ks++) {
        wgmma_ss<64, BF, 0, 0>(gw[0], desc_add(da, 32 * ks), desc_add(db0, 32 * ks), ks > 0);
        wgmma_ss<64, BF, 0, 0>(gw[1], desc_add(da, 32 * ks), desc_add(db1, 32 * ks), ks > 0);
    }
}

/* D[row][col] = G[row][row - col + 63] (the warp's own rows; G's halves u 0..63 in g0, 64..127 in g1).
 * Of an element's two candidates (g0's and g1's, same row, columns 64 apart) exactly one lands
 * in 0..63: d = row - (8 nb + 2 c + e&1) in -63..63 takes g1 at column d - 1 when d >= 1, else g0
 * at d + 63. One full-warp store per element (the lanes' choices differ) rather than two stores
 * of half a warp each: half the shared-memory wavefronts, the same bits. */
DATTN_DEV void ws_gather_g2(float *dg, const float (&g0)[8][4], const float (&g1)[8][4], int rl0, int c)
{
    /* per row half h: x = row - 2 c and the address of D[row][63 - 2 c]; an element's address is
     * then one select of a base and an immediate */
    const int x0 = rl0 - 2 * c;
    float *const a0 = dg + rl0 * (WS_DP + 1) + 63 - 2 * c;
#pragma unroll
    for (int nb = 0; nb < 8; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int h = e >> 1, k = 8 * nb + (e & 1), hi = x0 + 8 * h > k; /* d = x - k >= 1 */
            float *const a = a0 + 8 * h * (WS_DP + 1) - (hi ? 64 : 0);
            a[-k] = hi ? g1[nb][e] : g0[nb][e];
        }
}

/* D[row][col] = (ADD: +=) H[col][row - col + 63] (any warp's rows; each element has one writer).
 * As in ws_gather_g2, one of an element's two candidates lands in 0..63: k = 8 nb + 2 c + e&1 and
 * the column cl give row k + cl - 63 (half 0) when k + cl >= 63, else k + cl + 1 (half 1). */
template <int ADD>
DATTN_DEV void ws_gather_h(float *dg, const float (&gw)[2][8][4], int rl0, int c)
{
    /* per column half h: y = column + 2 c and the address of D[column + 2 c + 1][column] */
    const int y0 = rl0 + 2 * c;
    float *const a0 = dg + rl0 + (y0 + 1) * WS_DP;
#pragma unroll
    for (int nb = 0; nb < 8; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int h = e >> 1, k = 8 * nb + (e & 1), lo = y0 + 8 * h + k >= 63; /* half 0's row in 0..63 */
            float *const a = a0 + 8 * h * (WS_DP + 1) - (lo ? 64 * WS_DP : 0);
            const float v = lo ? gw[0][nb][e] : gw[1][nb][e];
            if (ADD) a[k * WS_DP] += v;
            else a[k * WS_DP] = v;
        }
}

/* ws_gather_h as two predicated stores per element, one per half: the dkdv kernel's mask + dropout
 * entries keep this form (with ws_gather_h<1> they spill 8 bytes under ptxas); every other entry
 * takes the one-store forms above */
template <int ADD>
DATTN_DEV void ws_gather_h_pred(float *dg, const float (&gw)[2][8][4], int rl0, int c)
{
#pragma unroll
    for (int hh = 0; hh < 2; hh++)
#pragma unroll
        for (int nb = 0; nb < 8; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int cl = rl0 + 8 * (e >> 1), rl = 64 * hh + 8 * nb + 2 * c + (e & 1) + cl - 63;
                if ((unsigned)rl < 64u) {
                    if (ADD) dg[rl * WS_DP + cl] += gw[hh][nb][e];
                    else dg[rl * WS_DP + cl] = gw[hh][nb][e];
                }
            }
}

/* sa += D (the thread's own elements) */
DATTN_DEV void ws_add_d(float (&sa)[8][4], const float *dg, int rl0, int c)
{
    for (int nb = 0; nb < 8; nb++)
        for (int i = 0; i < 2; i++) {
            const float2 v = *(const float2 *)(dg + (rl0 + 8 * i) * WS_DP + 8 * nb + 2 * c);
            sa[nb][2 * i] += v.x;
            sa[nb][2 * i + 1] += v.y;
        }
}

/* One 16-byte chunk of a ws kernel's per-call expanded tables (the forward's TE, the backward's
 * rings): e[z][h][u][8 ch .. 8 ch + 7] = (z & 1 ? pq : pk)[h][slot(r)], r = u - off, or off - u for
 * z >= 2 when NEG (the backward's second sign); u < rows. Grid (ceil(rows / 32), H, 2 or 4 tables),
 * 256 threads: thread x takes row 32 blockIdx.x + x / 8, chunk x % 8. */
template <int NEG>
DATTN_DEV void ws_expand_chunk(const dattn_fwd_args &a, uint16_t *e, int rows, int off)
{
    const int u = (int)blockIdx.x * 32 + (int)(threadIdx.x >> 3), ch = threadIdx.x & 7, h = blockIdx.y;
    const int z = blockIdx.z, t = z & 1;
    if (u >= rows) return;
    const int sl = dev_slot(a, a.tab, NEG && z >> 1 ? off - u : u - off);
    const uint16_t *src = (const uint16_t *)(t ? a.pq : a.pk) + (int64_t)h * (t ? a.pq_sh : a.pk_sh) +
                          (int64_t)sl * (t ? a.pq_ss : a.pk_ss) + 8 * ch;
    *(uint4 *)(e + (((int64_t)z * a.H + h) * rows + u) * 64 + 8 * ch) = *(const uint4 *)src;
}

/* Whether any pair of rows [m0, m0 + rows) x columns [n0, n0 + 64) lies in the band |r| < R
 * (r = i - j; the dkdv kernel's rows are keys: r = column - row). */
template <int KV>
DATTN_DEV int ws_is_band(int m0, int rows, int n0, int R)
{
    const int rmin = KV ? n0 - (m0 + rows - 1) : m0 - (n0 + 63), rmax = KV ? n0 + 63 - m0 : m0 + rows - 1 - n0;
    return !(rmin >= R || rmax <= -R);
}

#endif

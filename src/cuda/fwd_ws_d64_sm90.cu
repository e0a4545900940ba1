/* Warp-specialized Hopper forward ("ws", issue 6): head dim 64, fp16 / bf16, sm_90a only, the
 * padded layout without a mask and without dropout, c2p and p2c both on or both off (launch.cu
 * routes every other call to the wgmma forward of fwd_sm80.cuh). The structure was measured
 * as bench/proto_ws_fwd.cu first (NOTES.md, "A warp-specialized forward core"); the position
 * terms are the ws backward's dq kernel's (bwd_ws_d64_sm90.cu, whose score is this score), with
 * the window products and gathers of ws_band.cuh.
 *
 *   O = softmax(s) V, lse = log sum_j exp(s_ij), s_ij = (q_i . k_j + q_i . pk[slot(i - j)] +
 *   k_j . pq[slot(i - j)]) / scale (SPEC.md)
 *
 * One CTA per 128 query rows of one (sequence, head), 384 threads (setmaxnreg 40 / 232):
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
    int32_t qrf, krf, vrf; /* rows-first flags (tma.cuh) */
} dattn_fws_maps;

/* Shared memory (offsets from a 1024-byte-aligned base): Q [128][64]; K, V [FWS_NST][64][64];
 * the rings RR (pk rows), RC (pq rows) [FWS_NR][64][64] (16-bit, 128-byte swizzled: sm90.cuh's
 * layout); D per consumer warpgroup [64][WS_DP] fp32; CF [FWS_NST][2 sides][64] fp32 column
 * constants (side 0: k . pq[sat_neg], side 1: k . pq[sat_pos]); the barriers (Q's, full and
 * empty per stage). */
enum {
    FWS_Q = 0,
    FWS_K = 16384,
    FWS_V = FWS_K + 8192 * FWS_NST,
    FWS_RR = FWS_V + 8192 * FWS_NST,
    FWS_RC = FWS_RR + 8192 * FWS_NR,
    FWS_D = FWS_RC + 8192 * FWS_NR,
    FWS_CF = FWS_D + 2 * 64 * WS_DP * 4,
    FWS_BAR = FWS_CF + 512 * FWS_NST,
    FWS_SMEM = FWS_BAR + 8 + 16 * FWS_NST + 1024
};

/* One tile's online softmax for a consumer thread (rows g, g + 8 of its warp's 16, columns 8 nb
 * + 2 c (+ 1)): with u = sa (the score without a saturated tile's row constant) and ro the rows'
 * constant in log2 units (0 off a saturated tile), the rows' new max mx = max(mx, max_j u sl2 +
 * ro) (over the quad by shuffles), P = exp2(u sl2 + ro - mx) as wgmma A operands pf, the running
 * sums ls (the thread's own columns; the quad's are added at the end); then, once the previous
 * tile's P V is done (the wait: o is its accumulator, pf its operand), O rescaled by exp2(old max
 * - new max). */
template <int BF>
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
        alpha[i] = ex2f(mx[i] - m);
        mx[i] = m;
        const float off = ro[i] - m;
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
    float rc[2][2]; /* the rows' saturated constants times sl2 (log2 units) */
    int rb0, cw, rl0, c, L, R;
};

/* s of tile jn (stage s1) into sn: S = Q K^T and the zone's position terms, a saturated tile's
 * row constants apart (ro: times sl2, for fws_softmax; 0 on other tiles); PV: with P_j V_j
 * (stage sv) issued after the score products (o its accumulator, pf its operand), in flight
 * at the return unless tile jn is a band tile. Columns past L get -inf. */
template <int BF, int POS, int PV>
DATTN_DEV void fws_score(float (&sn)[8][4], float (&ro)[2], float (&o)[8][4], const uint32_t (&pf)[4][4], const fws_ctx &x,
                         int jn, int s1, int sv)
{
    ro[0] = ro[1] = 0.f;
    const int n0 = 64 * jn;
    const uint64_t dK = desc_add(x.dK0, 8192u * s1), dV = desc_add(x.dV0, 8192u * sv);
    const int rmin = x.rb0 - (n0 + 63), rmax = x.rb0 + 63 - n0;
    const int zone = !POS ? 0 : rmin >= x.R ? 2 : rmax <= -x.R ? 1 : 3; /* 3: band */
    if (POS && zone == 3) {
        /* ring blocks of the window's columns u = 0..63 / 64..127 (u = row - column + 63) */
        const uint32_t ra0 = 8192u * (uint32_t)((jn + 2 - x.cw) % FWS_NR), ra1 = 8192u * (uint32_t)((jn + 1 - x.cw) % FWS_NR);
        const uint64_t dR0 = desc_add(x.dRR, ra0), dR1 = desc_add(x.dRR, ra1), dC0 = desc_add(x.dRC, ra0),
                       dC1 = desc_add(x.dRC, ra1);
        float gw[2][8][4];
        const int rl0 = ws_opaque(x.rl0), c = ws_opaque(x.c);
        __syncwarp(); /* the lanes' reads of D (the last band tile's second ws_add_d) before G's stores */
        wgmma_fence();
        for (int ks = 0; ks < 4; ks++) wgmma_ss<64, BF, 0, 0>(sn, desc_add(x.dQ, 32 * ks), desc_add(dK, 32 * ks), ks > 0);
        ws_window_products<BF>(gw, x.dQ, dR0, dR1);
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
        ws_gather_g(x.dg, gw, rl0, c);
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
        for (int ks = 0; ks < 4; ks++) wgmma_ss<64, BF, 0, 0>(sn, desc_add(x.dQ, 32 * ks), desc_add(dK, 32 * ks), ks > 0);
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
            /* the column constants here, the row constants (x.rc: already times sl2) in the softmax */
            const float *cf = (const float *)(x.cf0 + 512 * s1) + 64 * (zone - 1);
            ro[0] = zone == 1 ? x.rc[0][0] : x.rc[1][0];
            ro[1] = zone == 1 ? x.rc[0][1] : x.rc[1][1];
            for (int nb = 0; nb < 8; nb++) {
                const float2 cv = *(const float2 *)(cf + 8 * nb + 2 * x.c);
                sn[nb][0] += cv.x;
                sn[nb][1] += cv.y;
                sn[nb][2] += cv.x;
                sn[nb][3] += cv.y;
            }
        }
    }
    if (n0 + 64 > x.L)
        for (int nb = 0; nb < 8; nb++)
            for (int e = 0; e < 4; e++)
                if (n0 + 8 * nb + 2 * x.c + (e & 1) >= x.L) sn[nb][e] = __int_as_float(0xff800000);
}

template <int BF, int POS>
DATTN_DEV void fws_body(const dattn_fwd_args &a, const dattn_fws_maps &M)
{
    extern __shared__ __align__(1024) char smem_raw[];
    const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
    char *smem = smem_raw + (base - raw);
    const uint32_t qbar = base + FWS_BAR, full0 = qbar + 8, empty0 = full0 + 8 * FWS_NST;
    /* (wg through a shuffle: warp-uniform to the compiler, descriptors in uniform registers) */
    const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), warp = (tid >> 5) & 3, lane = tid & 31;
    const int m0 = (int)blockIdx.x * 128, h = (int)blockIdx.y, b = (int)blockIdx.z, L = a.L, nt = (L + 63) / 64;
    const int R = POS ? a.R : 0;
    if (tid == 0) {
        mbar_init(qbar, 1);
        for (int s = 0; s < FWS_NST; s++) {
            mbar_init(full0 + 8 * s, POS ? 128 : 1);
            mbar_init(empty0 + 8 * s, 256);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (wg == 0) {
        setmaxnreg_dec<40>();
        if (!POS && warp != 0) return;
        const int one = warp == 0 && lane == 0;
        if (warp == 0) {
            mbar_arrive_expect_tx_if(one, qbar, 2 * 64 * 128);
            for (int half = 0; half < 2; half++)
                tma_load_rows_if(one, base + FWS_Q + 8192 * half, &M.q, qbar, M.qrf, h, m0 + 64 * half, b);
        }
        const uint16_t *tpk = (const uint16_t *)a.pk + (int64_t)h * a.pk_sh, *tpq = (const uint16_t *)a.pq + (int64_t)h * a.pq_sh;
        /* (the kps planes exist when some tile may be saturated: R < L) */
        const float *kp = POS && a.kps ? a.kps + ((int64_t)b * a.H + h) * 2 * a.kps_ld : nullptr;
        for (int j = 0; j < nt; j++) {
            const int s = j % FWS_NST;
            if (j >= FWS_NST) mbar_wait(empty0 + 8 * s, (uint32_t)(j / FWS_NST - 1) & 1u);
            if (POS && warp == 0) {
                /* (position terms: the copies first, so that they fly while the constants and ring
                 * rows load; every producer thread arrives after its stores) */
                mbar_expect_tx_if(one, full0 + 8 * s, 2 * 64 * 128);
                tma_load_rows_if(one, base + FWS_K + 8192 * s, &M.k, full0 + 8 * s, M.krf, h, 64 * j, b);
                tma_load_rows_if(one, base + FWS_V + 8192 * s, &M.v, full0 + 8 * s, M.vrf, h, 64 * j, b);
            }
            if (POS) {
                if (warp == 0 && kp) {
                    float *cf = (float *)(smem + FWS_CF + 512 * s);
                    for (int e = 0; e < 2; e++) {
                        const int col = 64 * j + 2 * lane + e, ok = col < L;
                        cf[2 * lane + e] = ok ? kp[a.kps_ld + col] : 0.f; /* side 0: sat_neg */
                        cf[64 + 2 * lane + e] = ok ? kp[col] : 0.f;       /* side 1: sat_pos */
                    }
                }
                /* the ring blocks first needed by tile j (blocks 0 .. 2 at tile 0, then block j + 2),
                 * each only if a tile a - 2 .. a that reads it is a band tile */
                for (int ab = j ? j + 2 : 0; ab <= j + 2; ab++) {
                    int need = 0;
                    for (int jj = ab - 2; jj <= ab; jj++) need |= jj >= 0 && jj < nt && ws_is_band<0>(m0, 128, 64 * jj, R);
                    if (!need) continue;
                    const int ch = tid & 7;
#pragma unroll 1
                    for (int i = 0; i < 4; i += 2) { /* (two rows' loads in flight: the producer's 40 registers) */
                        uint4 vr[2], vc[2];
                        for (int k = 0; k < 2; k++) {
                            const int sl = dev_slot(a, a.tab, m0 - 64 * ab + (tid >> 3) + 16 * (i + k) + 65);
                            vr[k] = *(const uint4 *)(tpk + sl * a.pk_ss + 8 * ch);
                            vc[k] = *(const uint4 *)(tpq + sl * a.pq_ss + 8 * ch);
                        }
                        for (int k = 0; k < 2; k++) {
                            const int t = (tid >> 3) + 16 * (i + k);
                            const uint32_t o = 8192u * (uint32_t)(ab % FWS_NR) + (uint32_t)(t * 128 + ((ch ^ (t & 7)) << 4));
                            *(uint4 *)(smem + FWS_RR + o) = vr[k];
                            *(uint4 *)(smem + FWS_RC + o) = vc[k];
                        }
                    }
                }
                fence_proxy_async(); /* (the ring rows are read by wgmma: the async proxy) */
            }
            if (POS) {
                mbar_arrive(full0 + 8 * s);
            } else {
                mbar_arrive_expect_tx_if(one, full0 + 8 * s, 2 * 64 * 128);
                tma_load_rows_if(one, base + FWS_K + 8192 * s, &M.k, full0 + 8 * s, M.krf, h, 64 * j, b);
                tma_load_rows_if(one, base + FWS_V + 8192 * s, &M.v, full0 + 8 * s, M.vrf, h, 64 * j, b);
            }
        }
        return;
    }
    setmaxnreg_inc<232>();
    /* consumers: warpgroup cw owns rows m0 + 64 cw .. + 63; thread rows 16 warp + g (+ 8),
     * columns 8 nb + 2 c (+ 1) of a tile */
    fws_ctx x;
    x.cw = wg - 1;
    x.rl0 = 16 * warp + (lane >> 2);
    x.c = lane & 3;
    x.rb0 = m0 + 64 * x.cw;
    x.L = L;
    x.R = R;
    x.dQ = desc_kmajor(base + FWS_Q, 128, 64 * x.cw, 0);
    x.dK0 = desc_kmajor(base + FWS_K, 64, 0, 0);
    x.dV0 = desc_mnmajor(base + FWS_V, 64, 0);
    x.dRR = desc_kmajor(base + FWS_RR, 64, 0, 0);
    x.dRC = desc_kmajor(base + FWS_RC, 64, 0, 0);
    x.dg = (float *)(smem + FWS_D + 64 * WS_DP * 4 * x.cw);
    x.cf0 = smem + FWS_CF;
    mbar_wait(qbar, 0);
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
    mbar_wait(full0, 0);
    {
        const uint32_t pz[4][4] = {{0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}};
        fws_score<BF, POS, 0>(sa, ro, o, pz, x, 0, 0, 0);
    }
    /* tiles 0 .. nt - 2 issue the next tile's products; the last one, peeled, does not */
    for (int j = 0; j < nt - 1; j++) {
        uint32_t pf[4][4];
        fws_softmax<BF>(sa, o, pf, mx, ls, ro, a.sl2);
        if (j > 0) mbar_arrive(empty0 + 8 * ((j - 1) % FWS_NST));
        const int s1 = (j + 1) % FWS_NST;
        mbar_wait(full0 + 8 * s1, (uint32_t)((j + 1) / FWS_NST) & 1u);
        float sn[8][4];
        fws_score<BF, POS, 1>(sn, ro, o, pf, x, j + 1, s1, j % FWS_NST);
        for (int nb = 0; nb < 8; nb++)
            for (int e = 0; e < 4; e++) sa[nb][e] = sn[nb][e];
    }
    {
        uint32_t pf[4][4];
        fws_softmax<BF>(sa, o, pf, mx, ls, ro, a.sl2);
        if (nt > 1) mbar_arrive(empty0 + 8 * ((nt - 2) % FWS_NST));
        const uint64_t dV = desc_add(x.dV0, 8192u * ((nt - 1) % FWS_NST));
        wgmma_fence();
        for (int kk = 0; kk < 4; kk++) wgmma_rs<64, BF, 1>(o, pf[kk], desc_add(dV, 2048 * kk), 1);
        wgmma_commit();
    }
    wgmma_wait<0>();
    reg_fence(o);
    mbar_arrive(empty0 + 8 * ((nt - 1) % FWS_NST));
    for (int i = 0; i < 2; i++) {
        ls[i] += __shfl_xor_sync(0xffffffffu, ls[i], 1);
        ls[i] += __shfl_xor_sync(0xffffffffu, ls[i], 2);
    }
    for (int i = 0; i < 2; i++) {
        const int row = x.rb0 + x.rl0 + 8 * i;
        if (row >= L) continue;
        const float inv = 1.f / ls[i];
        uint16_t *op = (uint16_t *)a.out + (int64_t)b * a.o_sb + (int64_t)row * a.o_sl + (int64_t)h * a.o_sh + 2 * x.c;
        for (int nb = 0; nb < 8; nb++) *(uint32_t *)(op + 8 * nb) = pack2<BF>(o[nb][2 * i] * inv, o[nb][2 * i + 1] * inv);
        if (a.lse && x.c == 0)
            a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)row * a.l_sl] = (mx[i] + lg2f(ls[i])) * 0.69314718055994531f;
    }
}

#define FWS_KERNEL(DT, BF, POS)                                                                    \
    extern "C" __global__ void __launch_bounds__(384, 1)                                           \
        dattn_fwd_ws_##DT##_d64_pos##POS(const __grid_constant__ dattn_fwd_args a,                   \
                                         const __grid_constant__ dattn_fws_maps M)                  \
    {                                                                                              \
        fws_body<BF, POS>(a, M);                                                                   \
    }
FWS_KERNEL(f16, 0, 0)
FWS_KERNEL(f16, 0, 1)
FWS_KERNEL(bf16, 1, 0)
FWS_KERNEL(bf16, 1, 1)

/* The forward on this path (after the prologue's kps planes when R < L). dry: only the checks
 * and the maps, nothing launched. Returns cudaErrorNotSupported, having launched nothing, for a
 * call outside the path (packed, a mask, dropout, D other than 64, one position term alone, no
 * kps planes where tiles may be saturated) or a tensor TMA cannot map (tma.cuh). */
extern "C" cudaError_t dattn_launch_fwd_ws(const dattn_fwd_args *a, int bf, int dry, cudaStream_t stream)
{
    dattn_fws_maps M;
    int rf[3] = {0, 0, 0};
    /* (a dimension of one element has stride 0 in the argument block; its map needs a stride
     * that nests: 64 for the heads, H x the heads' for the rows) */
    const int64_t qh = a->H > 1 ? a->q_sh : 64, kh = a->H > 1 ? a->k_sh : 64, vh = a->H > 1 ? a->v_sh : 64;
    const int64_t ql = a->L > 1 ? a->q_sl : a->H * qh, kl = a->L > 1 ? a->k_sl : a->H * kh, vl = a->L > 1 ? a->v_sl : a->H * vh;
    if (a->B < 1 || a->L < 1 || a->H < 1 || a->D != 64 || a->packed || a->mask || a->drop_thr || a->c2p != a->p2c ||
        (a->c2p && a->R < a->L && !dry && !a->kps) || a->B > 65535 || a->H > 65535 ||
        dattn_tma_rows_map(&M.q, &rf[0], a->q, a->B, a->L, a->H, a->q_sb, ql, qh, 64) != cudaSuccess ||
        dattn_tma_rows_map(&M.k, &rf[1], a->k, a->B, a->L, a->H, a->k_sb, kl, kh, 64) != cudaSuccess ||
        dattn_tma_rows_map(&M.v, &rf[2], a->v, a->B, a->L, a->H, a->v_sb, vl, vh, 64) != cudaSuccess)
        return cudaErrorNotSupported;
    if (dry) return cudaSuccess;
    M.qrf = rf[0];
    M.krf = rf[1];
    M.vrf = rf[2];
    typedef void (*kfn)(dattn_fwd_args, dattn_fws_maps);
    static const kfn kt[2][2] = {{dattn_fwd_ws_f16_d64_pos0, dattn_fwd_ws_f16_d64_pos1},
                                 {dattn_fwd_ws_bf16_d64_pos0, dattn_fwd_ws_bf16_d64_pos1}};
    const kfn k = kt[bf != 0][a->c2p != 0];
    cudaError_t e;
    if ((e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, FWS_SMEM)) != cudaSuccess) return e;
    k<<<dim3((unsigned)((a->L + 127) / 128), (unsigned)a->H, (unsigned)a->B), 384, FWS_SMEM, stream>>>(*a, M);
    return cudaGetLastError();
}

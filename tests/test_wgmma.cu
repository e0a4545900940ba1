/* GPU unit test of the Hopper wgmma layer (src/cuda/sm90.cuh): the descriptors, the
 * swizzled shared-memory tiles, the register fragments and the fences that the sm_90a
 * forward kernel uses, isolated from everything else in the kernel.
 *
 * A CTA of two warpgroups (256 threads, 128 rows, warpgroup g owns rows 64 g .. 64 g + 63,
 * as in the kernel) runs one of three products through exactly the kernel's functions:
 *   ss  S[128][N] = C + Q[128][D] K[N][D]^T   Q and K both K-major descriptors; the
 *       accumulators start from C loaded in the documented accumulator layout and the
 *       first step uses scale-d = 1 (how the band tiles' c2p / p2c bias enters);
 *   rs  S[128][N] = Q K^T                     Q from registers (ldmatrix fragments, as
 *       the kernel's band code holds them), accumulators poisoned with NaN and the first
 *       step uses scale-d = 0 (it must ignore them);
 *   pv  O[128][D] = P[128][N] V[N][D]         P given as fp32 in the accumulator layout,
 *       packed to f16/bf16 A fragments exactly as the kernel packs its probabilities;
 *       V an MN-major (transposed) descriptor, D = 128 uses two 64-column panels (LBO).
 * for D in {64, 128}, N (keys) in {64, 128}, fp16 and bf16. Tiles arrive by cp.async
 * (then wait, fence.proxy.async, barrier), as in the kernel. The result is compared with
 * a float64 host reference of the same rounded inputs; a wrong element is reported with
 * the position of the reference element it matches, if any (a descriptor or fragment
 * mix-up shows as a permutation).
 *
 * Exit 77 (skipped) without a compute capability 9.0 GPU. Build: make CUDA=1 tests-build
 * (nvcc, -gencode arch=compute_90a,code=sm_90a).
 */
#include "../src/cuda/sm90.cuh"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"

enum { MODE_SS = 0, MODE_RS = 1, MODE_PV = 2 };

#include "tsm90.h"

/* Copies a [rows][cols] 16-bit matrix (row-major in global memory) into a swizzled tile. */
DATTN_DEV void load_tile(uint32_t tile, const uint16_t *src, int rows, int cols)
{
    const int cpr = cols / 8;
    for (int idx = threadIdx.x; idx < rows * cpr; idx += blockDim.x) {
        const int r = idx / cpr, ch = idx % cpr;
        cp_async16(tile + sw128_off(rows, r, ch), src + (size_t)r * cols + ch * 8, 16);
    }
}

/* MODE_SS / MODE_RS: a = Q [128][D], b = K [N][D], c = C [128][N] (ss only), out [128][N].
 * MODE_PV: a = unused, b = V [N][D], c = P [128][N] (fp32), out [128][D]. */
template <int MODE, int D, int N, int BF>
__global__ void __launch_bounds__(256, 1)
    test_kernel(const uint16_t *a, const uint16_t *b, const float *c, float *out)
{
    extern __shared__ __align__(1024) char smem_raw[];
    const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const uint32_t sA = base, sB = base + 128 * D * 2;
    const int tid = threadIdx.x, wg = tid >> 7, w = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, cc = lane & 3;
    const int row0 = 64 * wg + 16 * w; /* first row of this warp */

    if (MODE != MODE_PV) load_tile(sA, a, 128, D);
    load_tile(sB, b, N, D);
    cp_async_commit();
    cp_async_wait_all();
    fence_proxy_async();
    __syncthreads();

    if constexpr (MODE == MODE_SS || MODE == MODE_RS) {
        float s[N / 8][4];
#pragma unroll
        for (int nb = 0; nb < N / 8; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[nb][e] = MODE == MODE_SS ? c[(size_t)(row0 + g + 8 * (e >> 1)) * N + 8 * nb + 2 * cc + (e & 1)]
                                           : __int_as_float(0x7fc00000);
        uint32_t qf[D / 16][4];
        if (MODE == MODE_RS) {
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++)
                ldsm_x4(qf[ks], sA + sw128_off(128, row0 + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * ks + (lane >> 4)));
        }
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            const uint64_t db = desc_kmajor(sB, N, 0, ks);
            if (MODE == MODE_SS) wgmma_ss<N, BF, 0, 0>(s, desc_kmajor(sA, 128, 64 * wg, ks), db, 1);
            else wgmma_rs<N, BF, 0>(s, qf[ks], db, ks > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(s);
#pragma unroll
        for (int nb = 0; nb < N / 8; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                out[(size_t)(row0 + g + 8 * (e >> 1)) * N + 8 * nb + 2 * cc + (e & 1)] = s[nb][e];
    } else {
        float p[N / 8][4];
#pragma unroll
        for (int nb = 0; nb < N / 8; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) p[nb][e] = c[(size_t)(row0 + g + 8 * (e >> 1)) * N + 8 * nb + 2 * cc + (e & 1)];
        float o[D / 8][4];
#pragma unroll
        for (int db = 0; db < D / 8; db++) o[db][0] = o[db][1] = o[db][2] = o[db][3] = 0.f;
        uint32_t pa[N / 16][4];
#pragma unroll
        for (int kk = 0; kk < N / 16; kk++) {
            pa[kk][0] = pack2<BF>(p[2 * kk][0], p[2 * kk][1]);
            pa[kk][1] = pack2<BF>(p[2 * kk][2], p[2 * kk][3]);
            pa[kk][2] = pack2<BF>(p[2 * kk + 1][0], p[2 * kk + 1][1]);
            pa[kk][3] = pack2<BF>(p[2 * kk + 1][2], p[2 * kk + 1][3]);
        }
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < N / 16; kk++) wgmma_rs<D, BF, 1>(o, pa[kk], desc_mnmajor(sB, N, kk), 1);
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(o);
#pragma unroll
        for (int db = 0; db < D / 8; db++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                out[(size_t)(row0 + g + 8 * (e >> 1)) * D + 8 * db + 2 * cc + (e & 1)] = o[db][e];
    }
}

static uint64_t rng = 88172645463325252ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
}

static double rnd(int bf, double x) { return bf ? th_round_bf16(x) : th_round_f16(x); }
static uint16_t enc(int bf, double x) { return bf ? th_double_to_bf16(x) : th_double_to_f16(x); }

static int n_pass, n_fail;

template <int MODE, int D, int N, int BF>
static void run(void)
{
    const char *mname = MODE == MODE_SS ? "ss" : MODE == MODE_RS ? "rs" : "pv";
    const int M = 128, NOUT = MODE == MODE_PV ? D : N;
    const size_t na = (size_t)M * D, nb = (size_t)N * D, nc = (size_t)M * N, no = (size_t)M * NOUT;
    double *A = (double *)malloc(na * 8), *Bm = (double *)malloc(nb * 8), *C = (double *)malloc(nc * 8);
    uint16_t *ha = (uint16_t *)malloc(na * 2), *hb = (uint16_t *)malloc(nb * 2);
    float *hc = (float *)malloc(nc * 4), *ho = (float *)malloc(no * 4);
    double *ref = (double *)malloc(no * 8), *mag = (double *)malloc(no * 8);
    for (size_t i = 0; i < na; i++) {
        A[i] = rnd(BF, 2.0 * urand());
        ha[i] = enc(BF, A[i]);
    }
    for (size_t i = 0; i < nb; i++) {
        Bm[i] = rnd(BF, 2.0 * urand());
        hb[i] = enc(BF, Bm[i]);
    }
    for (size_t i = 0; i < nc; i++) {
        hc[i] = (float)(MODE == MODE_PV ? 0.5 * (urand() + 1.0) : 8.0 * urand());
        C[i] = MODE == MODE_PV ? rnd(BF, (double)hc[i]) : (double)hc[i];
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < NOUT; j++) {
            double s = MODE == MODE_SS ? C[(size_t)i * N + j] : 0.0, m = fabs(s);
            if (MODE == MODE_PV)
                for (int k = 0; k < N; k++) {
                    s += C[(size_t)i * N + k] * Bm[(size_t)k * D + j];
                    m += fabs(C[(size_t)i * N + k] * Bm[(size_t)k * D + j]);
                }
            else
                for (int k = 0; k < D; k++) {
                    s += A[(size_t)i * D + k] * Bm[(size_t)j * D + k];
                    m += fabs(A[(size_t)i * D + k] * Bm[(size_t)j * D + k]);
                }
            ref[(size_t)i * NOUT + j] = s;
            mag[(size_t)i * NOUT + j] = m;
        }
    uint16_t *da, *dbp;
    float *dc, *dout;
    CK(cudaMalloc(&da, na * 2));
    CK(cudaMalloc(&dbp, nb * 2));
    CK(cudaMalloc(&dc, nc * 4));
    CK(cudaMalloc(&dout, no * 4));
    CK(cudaMemcpy(da, ha, na * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dbp, hb, nb * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, hc, nc * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(dout, 0xFF, no * 4));
    const int smem = 1024 + 128 * D * 2 + N * D * 2;
    CK(cudaFuncSetAttribute(test_kernel<MODE, D, N, BF>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    test_kernel<MODE, D, N, BF><<<1, 256, smem>>>(da, dbp, dc, dout);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(ho, dout, no * 4, cudaMemcpyDeviceToHost));
    long bad = 0;
    double worst = 0.0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < NOUT; j++) {
            const size_t k = (size_t)i * NOUT + j;
            const double tol = 1e-4 * mag[k] + 1e-5, err = fabs((double)ho[k] - ref[k]);
            if (err / (mag[k] + 1e-30) > worst || err != err) worst = err != err ? INFINITY : err / (mag[k] + 1e-30);
            if (!(err <= tol)) {
                if (bad < 4) {
                    int fi = -1, fj = -1;
                    for (int i2 = 0; i2 < M && fi < 0; i2++)
                        for (int j2 = 0; j2 < NOUT; j2++)
                            if (fabs((double)ho[k] - ref[(size_t)i2 * NOUT + j2]) <= 1e-4 * mag[(size_t)i2 * NOUT + j2] + 1e-5) {
                                fi = i2;
                                fj = j2;
                                break;
                            }
                    printf("  %s D=%d N=%d %s: out[%d][%d] = %.6g, ref %.6g", mname, D, N, BF ? "bf16" : "f16", i, j,
                           (double)ho[k], ref[k]);
                    if (fi >= 0) printf(" (= ref[%d][%d])\n", fi, fj);
                    else printf(" (matches no reference element)\n");
                }
                bad++;
            }
        }
    if (bad) {
        printf("FAIL wgmma %s D=%d N=%d %s: %ld of %ld elements wrong\n", mname, D, N, BF ? "bf16" : "f16", bad,
               (long)no);
        n_fail++;
    } else {
        printf("ok   wgmma %s D=%d N=%d %s (max rel err %.2g)\n", mname, D, N, BF ? "bf16" : "f16", worst);
        n_pass++;
    }
    cudaFree(da);
    cudaFree(dbp);
    cudaFree(dc);
    cudaFree(dout);
    free(A);
    free(Bm);
    free(C);
    free(ha);
    free(hb);
    free(hc);
    free(ho);
    free(ref);
    free(mag);
}

template <int MODE, int D, int N>
static void run_dt(void)
{
    run<MODE, D, N, 0>();
    run<MODE, D, N, 1>();
}

template <int MODE>
static void run_mode(void)
{
    run_dt<MODE, 64, 64>();
    run_dt<MODE, 64, 128>();
    run_dt<MODE, 128, 64>();
    run_dt<MODE, 128, 128>();
}

int main(void)
{
    if (tsm90_need("wgmma")) return 77;
    run_mode<MODE_SS>();
    run_mode<MODE_RS>();
    run_mode<MODE_PV>();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}

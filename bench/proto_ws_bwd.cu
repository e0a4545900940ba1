/* Prototype (bench only, not part of the library): the attention core's backward without
 * position terms in the warp-specialized Hopper structure that NOTES.md ("Where the session of
 * 2026-12-01 01:19-04:19 left things") proposes, to measure its rate before the position terms
 * are ported. Two kernels, as the library's backward (bwd_sm80.cuh) has them:
 *   dq kernel (KV = 0):   dQ = scale dS K, dS = P (dP - D), P = exp(scale Q K^T - lse), dP = dO V^T
 *   dkdv kernel (KV = 1): dK = scale dS^T Q, dV = P^T dO (the same S, P, dP, dS, transposed)
 * In the frame of a kernel, X / Z are its row operands (dq: Q, dO; dkdv: K, V) and Y / W its
 * column operands (dq: K, V; dkdv: Q, dO).
 *
 * One CTA per 128 rows of one (sequence, head), three warpgroups:
 *   warpgroup 0, the producer: its warp 0 loads X and Z of the block once and the Y / W tiles
 *     of 64 columns into two stages by TMA (src/cuda/tma.cuh; lane 0 issues, predicated), and
 *     (dkdv kernel) the tile's column facts lse * log2 e and D with its 32 lanes; each stage has
 *     a full mbarrier (lane 0's arrival with the copies' expect-tx; dkdv kernel: 32 arrivals,
 *     releasing the lanes' fact stores) and an empty one (256 consumer arrivals);
 *   warpgroups 1 and 2, the consumers (64 rows each): per tile the products X Y^T and Z W^T by
 *     wgmma from shared memory (m64n64k16, src/cuda/sm90.cuh), P and dS in registers, then
 *     dX += dS Y (and dV += P W) by wgmma with dS (P) as the register A operand, and release the
 *     stage.
 * fp16, D = 64, padded [B][L][H][64] tensors, L a multiple of 128, no mask, no dropout.
 *
 *   proto_ws_bwd --check           B1 L256 H2, both kernels, against a float64 reference on the
 *                                   host (exit 1 on a mismatch, 77 without a compute capability
 *                                   9.0 GPU)
 *   proto_ws_bwd --bench B L [N]   N (default 20) timed launches of each kernel at H 12
 *                                   (cudaEvent; ncu names: dattn_proto_ws_dq, dattn_proto_ws_dkdv)
 * Built by `make CUDA=1 tests-build` as build/bench/proto_ws_bwd; scripts/gpu_check.sh runs
 * --check. The host emulation builds it too (sh tests/emu/build.sh DIR: DIR/proto_ws_bwd
 * --check). Measured: bench/results/gpu-2026-12-01-wsdq/ (the dq kernel, when this file was
 * bench/proto_ws_dq.cu). */
#include "sm90.cuh"
#include "tma.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCK(x)                                                                                 \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

struct proto_maps {
    CUtensorMap q, k, v, o; /* o: dO */
    int rf;                 /* rows-first flag (the same for all four: one layout) */
};

struct proto_args {
    const float *lse, *di; /* [B][H][L]: natural-log lse, D_i = dO_i . O_i */
    uint16_t *dq, *dk, *dv; /* [B][L][H][64] */
    int B, L, H;
    float scale, sl2; /* 1 / sqrt(64), scale * log2(e) */
};

/* shared memory (offsets from a 1024-byte-aligned base): X, Z [128][64]; Y, W [2 stages][64][64];
 * the column facts [2 stages][2][64] fp32 (dkdv kernel); the barriers */
enum {
    P_X = 0,
    P_Z = 16384,
    P_Y = 32768,
    P_W = 49152,
    P_CF = 65536,
    P_BAR = P_CF + 1024,
    P_SMEM = P_BAR + 64 + 1024
};

template <int KV>
__device__ __forceinline__ void proto_ws_body(const proto_maps &M, const proto_args &A)
{
    extern __shared__ __align__(1024) char smem_raw[];
    const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
    char *smem = smem_raw + (base - raw);
    const uint32_t xbar = base + P_BAR, full0 = base + P_BAR + 8, empty0 = base + P_BAR + 24;
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const int m0 = blockIdx.x * 128, h = blockIdx.y, b = blockIdx.z, nt = A.L / 64;
    const CUtensorMap *mx = KV ? &M.k : &M.q, *mz = KV ? &M.v : &M.o, *my = KV ? &M.q : &M.k, *mw = KV ? &M.o : &M.v;
    if (tid == 0) {
        mbar_init(xbar, 1);
        for (int s = 0; s < 2; s++) {
            mbar_init(full0 + 8 * s, KV ? 32 : 1); /* (dkdv: every producer lane's fact stores) */
            mbar_init(empty0 + 8 * s, 256);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (wg == 0) {
        /* producer: lane 0 issues the copies, predicated (the warp stays converged) */
        if (warp == 0) {
            const int one = lane == 0;
            mbar_arrive_expect_tx_if(one, xbar, 4 * 64 * 128);
            for (int half = 0; half < 2; half++) {
                tma_load_rows_if(one, base + P_X + 8192 * half, mx, xbar, M.rf, h, m0 + 64 * half, b);
                tma_load_rows_if(one, base + P_Z + 8192 * half, mz, xbar, M.rf, h, m0 + 64 * half, b);
            }
            for (int j = 0; j < nt; j++) {
                const int s = j & 1;
                if (j >= 2) mbar_wait(empty0 + 8 * s, (uint32_t)((j >> 1) - 1) & 1u);
                if (KV) { /* the tile's column facts: lane l takes columns 2 l, 2 l + 1 */
                    float *cf = (float *)(smem + P_CF + 512 * s);
                    const int64_t at = ((int64_t)b * A.H + h) * A.L + 64 * j + 2 * lane;
                    for (int e = 0; e < 2; e++) {
                        cf[2 * lane + e] = A.lse[at + e] * 1.4426950408889634f;
                        cf[64 + 2 * lane + e] = A.di[at + e];
                    }
                }
                /* (dkdv: every lane arrives, releasing its fact stores; lane 0 with the bytes) */
                mbar_arrive_expect_tx_if(KV || one, full0 + 8 * s, one ? 2 * 64 * 128 : 0);
                tma_load_rows_if(one, base + P_Y + 8192 * s, my, full0 + 8 * s, M.rf, h, 64 * j, b);
                tma_load_rows_if(one, base + P_W + 8192 * s, mw, full0 + 8 * s, M.rf, h, 64 * j, b);
            }
        }
        return;
    }
    /* consumers: warpgroup cw owns rows m0 + 64 cw .. + 63; thread rows 16 warp + g (+ 8) */
    const int cw = wg - 1, g = lane >> 2, c = lane & 3;
    float rl2[2] = {0.f, 0.f}, rd[2] = {0.f, 0.f}; /* dq kernel: the rows' facts */
    if (!KV)
        for (int i = 0; i < 2; i++) {
            const int row = m0 + 64 * cw + 16 * warp + g + 8 * i;
            const int64_t at = ((int64_t)b * A.H + h) * A.L + row;
            rl2[i] = A.lse[at] * 1.4426950408889634f;
            rd[i] = A.di[at];
        }
    float dx[8][4], dv[8][4]; /* (dv: dkdv kernel only) */
    for (int nb = 0; nb < 8; nb++) {
        dx[nb][0] = dx[nb][1] = dx[nb][2] = dx[nb][3] = 0.f;
        dv[nb][0] = dv[nb][1] = dv[nb][2] = dv[nb][3] = 0.f;
    }
    mbar_wait(xbar, 0);
    for (int j = 0; j < nt; j++) {
        const int s = j & 1;
        const uint32_t sy = base + P_Y + 8192 * s, sw = base + P_W + 8192 * s;
        mbar_wait(full0 + 8 * s, (uint32_t)(j >> 1) & 1u);
        float sa[8][4], dp[8][4];
        wgmma_fence();
        for (int ks = 0; ks < 4; ks++)
            wgmma_ss<64, 0, 0, 0>(sa, desc_kmajor(base + P_X, 128, 64 * cw, ks), desc_kmajor(sy, 64, 0, ks), ks > 0);
        for (int ks = 0; ks < 4; ks++)
            wgmma_ss<64, 0, 0, 0>(dp, desc_kmajor(base + P_Z, 128, 64 * cw, ks), desc_kmajor(sw, 64, 0, ks), ks > 0);
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(sa);
        reg_fence(dp);
        /* dS (and P, dkdv kernel) as A operands over the tile's columns 16 kk .. 16 kk + 15 */
        uint32_t af[4][4], pf[4][4];
        const float *cf = (const float *)(smem + P_CF + 512 * s);
        for (int nb = 0; nb < 8; nb++) {
            float ds[4], pp[4];
            for (int e = 0; e < 4; e++) {
                const int col = 8 * nb + 2 * c + (e & 1);
                const float l2 = KV ? cf[col] : rl2[e >> 1], d = KV ? cf[64 + col] : rd[e >> 1];
                pp[e] = ex2f(fmaf(sa[nb][e], A.sl2, -l2));
                ds[e] = pp[e] * (dp[nb][e] - d);
            }
            af[nb >> 1][2 * (nb & 1)] = pack2<0>(ds[0], ds[1]);
            af[nb >> 1][2 * (nb & 1) + 1] = pack2<0>(ds[2], ds[3]);
            if constexpr (KV) {
                pf[nb >> 1][2 * (nb & 1)] = pack2<0>(pp[0], pp[1]);
                pf[nb >> 1][2 * (nb & 1) + 1] = pack2<0>(pp[2], pp[3]);
            }
        }
        wgmma_fence();
        for (int kk = 0; kk < 4; kk++) wgmma_rs<64, 0, 1>(dx, af[kk], desc_mnmajor(sy, 64, kk), 1);
        if constexpr (KV)
            for (int kk = 0; kk < 4; kk++) wgmma_rs<64, 0, 1>(dv, pf[kk], desc_mnmajor(sw, 64, kk), 1);
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(dx);
        if constexpr (KV) reg_fence(dv);
        mbar_arrive(empty0 + 8 * s); /* the stage is free (its reads completed at the wait above) */
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
    PCK(cudaMemcpy(h, dev, n * 2, cudaMemcpyDeviceToHost));
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

/* random inputs; lse and D from a float64 forward on the host with the reference gradients when
 * `check` (else plausible values: the bench only times) */
static int run(int B, int L, int H, int check, int reps)
{
    const size_t n = (size_t)B * L * H * 64, nr = (size_t)B * H * L;
    uint16_t *hq = (uint16_t *)malloc(n * 2), *hk = (uint16_t *)malloc(n * 2), *hv = (uint16_t *)malloc(n * 2),
             *ho = (uint16_t *)malloc(n * 2);
    float *hl = (float *)malloc(nr * 4), *hd = (float *)malloc(nr * 4);
    const unsigned seed = 20261201u + (unsigned)L;
    srand(seed);
    printf("proto_ws_bwd: B%d L%d H%d, seed %u\n", B, L, H, seed);
    for (size_t i = 0; i < n; i++) {
        hq[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
        hk[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
        hv[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
        ho[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
    }
    const double scale = 1.0 / 8.0;
    double *rdq = 0, *rdk = 0, *rdv = 0;
    if (check) {
        /* float64 reference: S, lse, P, O, D, dP, dS, then dQ, dK, dV per (b, h) */
        rdq = (double *)calloc(n, sizeof(double));
        rdk = (double *)calloc(n, sizeof(double));
        rdv = (double *)calloc(n, sizeof(double));
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
                            rdq[idx(i, d)] += ds * at(hk, j, d) * scale;
                            rdk[idx(j, d)] += ds * at(hq, i, d) * scale;
                            rdv[idx(j, d)] += pij * at(ho, i, d);
                        }
                    }
                }
            }
        free(p);
    } else {
        for (size_t i = 0; i < nr; i++) hl[i] = logf((float)L) + 0.5f, hd[i] = 0.01f;
    }
    uint16_t *dq_, *dk_, *dv_, *do_, *gq, *gk, *gv;
    float *dl, *dd;
    PCK(cudaMalloc((void **)&dq_, n * 2));
    PCK(cudaMalloc((void **)&dk_, n * 2));
    PCK(cudaMalloc((void **)&dv_, n * 2));
    PCK(cudaMalloc((void **)&do_, n * 2));
    PCK(cudaMalloc((void **)&gq, n * 2));
    PCK(cudaMalloc((void **)&gk, n * 2));
    PCK(cudaMalloc((void **)&gv, n * 2));
    PCK(cudaMalloc((void **)&dl, nr * 4));
    PCK(cudaMalloc((void **)&dd, nr * 4));
    PCK(cudaMemcpy(dq_, hq, n * 2, cudaMemcpyHostToDevice));
    PCK(cudaMemcpy(dk_, hk, n * 2, cudaMemcpyHostToDevice));
    PCK(cudaMemcpy(dv_, hv, n * 2, cudaMemcpyHostToDevice));
    PCK(cudaMemcpy(do_, ho, n * 2, cudaMemcpyHostToDevice));
    PCK(cudaMemcpy(dl, hl, nr * 4, cudaMemcpyHostToDevice));
    PCK(cudaMemcpy(dd, hd, nr * 4, cudaMemcpyHostToDevice));
    PCK(cudaMemset(gq, 0xFF, n * 2)); /* poisoned */
    PCK(cudaMemset(gk, 0xFF, n * 2));
    PCK(cudaMemset(gv, 0xFF, n * 2));
    proto_maps M;
    int rf = 0;
    const int64_t os = (int64_t)L * H * 64, rs = (int64_t)H * 64, hs = 64;
    PCK(dattn_tma_rows_map(&M.q, &rf, dq_, B, L, H, os, rs, hs, 64));
    PCK(dattn_tma_rows_map(&M.k, &rf, dk_, B, L, H, os, rs, hs, 64));
    PCK(dattn_tma_rows_map(&M.v, &rf, dv_, B, L, H, os, rs, hs, 64));
    PCK(dattn_tma_rows_map(&M.o, &rf, do_, B, L, H, os, rs, hs, 64));
    M.rf = rf;
    proto_args a;
    a.lse = dl;
    a.di = dd;
    a.dq = gq;
    a.dk = gk;
    a.dv = gv;
    a.B = B;
    a.L = L;
    a.H = H;
    a.scale = (float)scale;
    a.sl2 = (float)(scale * 1.4426950408889634);
    typedef void (*kfn)(proto_maps, proto_args);
    const kfn kern[2] = {dattn_proto_ws_dq, dattn_proto_ws_dkdv};
    const char *kname[2] = {"dq", "dkdv"};
    const dim3 grid((unsigned)(L / 128), (unsigned)H, (unsigned)B);
    for (int k = 0; k < 2; k++) {
        const kfn kf = kern[k];
        PCK(cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize, P_SMEM));
        kf<<<grid, 384, P_SMEM, 0>>>(M, a);
        PCK(cudaGetLastError());
    }
    PCK(cudaDeviceSynchronize());
    int bad = 0;
    if (check) {
        const int nbad = check_one("dQ", gq, rdq, n) + check_one("dK", gk, rdk, n) + check_one("dV", gv, rdv, n);
        printf("%d passed, %d failed\n", 3 - nbad, nbad);
        bad = nbad;
        free(rdq);
        free(rdk);
        free(rdv);
    }
#ifndef DATTN_EMU_CUDA_RUNTIME_H
    if (reps > 0) {
        cudaEvent_t e0, e1;
        PCK(cudaEventCreate(&e0));
        PCK(cudaEventCreate(&e1));
        for (int k = 0; k < 2; k++) {
            PCK(cudaEventRecord(e0));
            const kfn kf = kern[k];
            for (int r = 0; r < reps; r++) kf<<<grid, 384, P_SMEM, 0>>>(M, a);
            PCK(cudaEventRecord(e1));
            PCK(cudaEventSynchronize(e1));
            float ms = 0;
            PCK(cudaEventElapsedTime(&ms, e0, e1));
            /* products: dq kernel S, dP, dQ; dkdv kernel S, dP, dK, dV */
            const double t = ms / reps, flop = (k ? 4.0 : 3.0) * 2.0 * B * H * (double)L * L * 64;
            printf("proto_ws_bwd %s B%d L%d H%d: %.4f ms per call (%d calls), %.1f TFLOP/s on its %d products\n",
                   kname[k], B, L, H, t, reps, flop / t / 1e9, k ? 4 : 3);
        }
        PCK(cudaEventDestroy(e0));
        PCK(cudaEventDestroy(e1));
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
    int ndev = 0, major = 0, minor = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("proto_ws_bwd: no CUDA device: skipped\n");
        return 77;
    }
    PCK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    PCK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    if (major != 9 || minor != 0) {
        printf("proto_ws_bwd: compute capability %d.%d, the prototype needs 9.0 (sm_90a): skipped\n", major, minor);
        return 77;
    }
    if (argc >= 2 && !strcmp(argv[1], "--check")) return run(1, 256, 2, 1, 0);
    if (argc >= 4 && !strcmp(argv[1], "--bench")) return run(atoi(argv[2]), atoi(argv[3]), 12, 0, argc >= 5 ? atoi(argv[4]) : 20);
    fprintf(stderr, "usage: proto_ws_bwd --check | --bench B L [N]\n");
    return 2;
}

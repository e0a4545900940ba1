/* Prototype (bench only, not part of the library): the attention core's dq kernel without
 * position terms in the warp-specialized Hopper structure that NOTES.md ("Where the session of
 * 2026-12-01 01:19-04:19 left things") proposes for the backward, to measure its rate before the
 * position terms are ported. dQ = scale * dS K, dS = P * (dP - D), P = exp(scale Q K^T - lse),
 * dP = dO V^T: the work of the library's dq kernel (bwd_sm80.cuh, KV = 0) without c2p / p2c.
 *
 * One CTA per 128 query rows of one (sequence, head), three warpgroups:
 *   warpgroup 0, the producer: lane 0 of its warp 0 loads Q and dO of the block once and the
 *     K / V tiles of 64 keys into two stages, by TMA (src/cuda/tma.cuh), each stage guarded by
 *     a "full" mbarrier (expect-tx) and an "empty" one (the consumers' 256 arrivals);
 *   warpgroups 1 and 2, the consumers (64 rows each): per key tile S = Q K^T and dP = dO V^T by
 *     wgmma from shared memory (m64n64k16, src/cuda/sm90.cuh), P and dS in registers, dQ += dS K
 *     by wgmma with dS as the register A operand, then release the stage.
 * fp16, D = 64, padded [B][L][H][64] tensors, L a multiple of 128, no mask, no dropout.
 *
 *   proto_ws_dq --check           B1 L256 H2 against a float64 reference on the host (exit 1 on
 *                                  a mismatch, 77 without a compute capability 9.0 GPU)
 *   proto_ws_dq --bench B L [N]   N (default 20) timed launches at H 12 (cudaEvent; ncu gives
 *                                  the kernel duration: kernel name dattn_proto_ws_dq)
 * Built by `make CUDA=1 tests-build` as build/bench/proto_ws_dq; scripts/gpu_check.sh runs
 * --check. The host emulation builds it too (sh tests/emu/build.sh DIR: DIR/proto_ws_dq --check).
 * Measured: bench/results/gpu-2026-12-01-wsdq/. */
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
    uint16_t *dq;          /* [B][L][H][64] */
    int B, L, H;
    float scale, sl2; /* 1 / sqrt(64), scale * log2(e) */
};

/* shared memory (offsets from a 1024-byte-aligned base): Q, dO [128][64]; K, V [2 stages][64][64];
 * the barriers */
enum { P_Q = 0, P_DO = 16384, P_K = 32768, P_V = 49152, P_BAR = 65536, P_SMEM = P_BAR + 64 + 1024 };

extern "C" __global__ void __launch_bounds__(384, 1)
    dattn_proto_ws_dq(const __grid_constant__ proto_maps M, const __grid_constant__ proto_args A)
{
    extern __shared__ __align__(1024) char smem_raw[];
    const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
    const uint32_t qbar = base + P_BAR, full0 = base + P_BAR + 8, empty0 = base + P_BAR + 24;
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const int m0 = blockIdx.x * 128, h = blockIdx.y, b = blockIdx.z, nt = A.L / 64;
    if (tid == 0) {
        mbar_init(qbar, 1);
        for (int s = 0; s < 2; s++) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, 256);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (wg == 0) {
        /* producer: one lane issues, predicated (the warp stays converged) */
        if (warp == 0) {
            const int one = lane == 0;
            mbar_arrive_expect_tx_if(one, qbar, 4 * 64 * 128);
            for (int half = 0; half < 2; half++) {
                tma_load_rows_if(one, base + P_Q + 8192 * half, &M.q, qbar, M.rf, h, m0 + 64 * half, b);
                tma_load_rows_if(one, base + P_DO + 8192 * half, &M.o, qbar, M.rf, h, m0 + 64 * half, b);
            }
            for (int j = 0; j < nt; j++) {
                const int s = j & 1;
                if (j >= 2) mbar_wait(empty0 + 8 * s, (uint32_t)((j >> 1) - 1) & 1u);
                mbar_arrive_expect_tx_if(one, full0 + 8 * s, 2 * 64 * 128);
                tma_load_rows_if(one, base + P_K + 8192 * s, &M.k, full0 + 8 * s, M.rf, h, 64 * j, b);
                tma_load_rows_if(one, base + P_V + 8192 * s, &M.v, full0 + 8 * s, M.rf, h, 64 * j, b);
            }
        }
        return;
    }
    /* consumers: warpgroup cw owns rows m0 + 64 cw .. + 63; thread rows r0 = 16 warp + g, r0 + 8 */
    const int cw = wg - 1, g = lane >> 2, c = lane & 3;
    float lse2[2], dd[2];
    for (int i = 0; i < 2; i++) {
        const int row = m0 + 64 * cw + 16 * warp + g + 8 * i;
        const int64_t at = ((int64_t)b * A.H + h) * A.L + row;
        lse2[i] = A.lse[at] * 1.4426950408889634f;
        dd[i] = A.di[at];
    }
    float dq[8][4];
    for (int nb = 0; nb < 8; nb++) dq[nb][0] = dq[nb][1] = dq[nb][2] = dq[nb][3] = 0.f;
    mbar_wait(qbar, 0);
    for (int j = 0; j < nt; j++) {
        const int s = j & 1;
        const uint32_t sk = base + P_K + 8192 * s, sv = base + P_V + 8192 * s;
        mbar_wait(full0 + 8 * s, (uint32_t)(j >> 1) & 1u);
        float sa[8][4], dp[8][4];
        wgmma_fence();
        for (int ks = 0; ks < 4; ks++)
            wgmma_ss<64, 0, 0, 0>(sa, desc_kmajor(base + P_Q, 128, 64 * cw, ks), desc_kmajor(sk, 64, 0, ks), ks > 0);
        for (int ks = 0; ks < 4; ks++)
            wgmma_ss<64, 0, 0, 0>(dp, desc_kmajor(base + P_DO, 128, 64 * cw, ks), desc_kmajor(sv, 64, 0, ks), ks > 0);
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(sa);
        reg_fence(dp);
        uint32_t af[4][4]; /* dS as the A operand of dQ += dS K: keys 16 kk .. 16 kk + 15 */
        for (int nb = 0; nb < 8; nb++) {
            float ds[4];
            for (int e = 0; e < 4; e++) {
                const float p = ex2f(fmaf(sa[nb][e], A.sl2, -lse2[e >> 1]));
                ds[e] = p * (dp[nb][e] - dd[e >> 1]);
            }
            af[nb >> 1][2 * (nb & 1)] = pack2<0>(ds[0], ds[1]);
            af[nb >> 1][2 * (nb & 1) + 1] = pack2<0>(ds[2], ds[3]);
        }
        wgmma_fence();
        for (int kk = 0; kk < 4; kk++) wgmma_rs<64, 0, 1>(dq, af[kk], desc_mnmajor(sk, 64, kk), 1);
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(dq);
        mbar_arrive_expect_tx_if(1, empty0 + 8 * s, 0); /* the stage is free (reads complete) */
    }
    for (int nb = 0; nb < 8; nb++)
        for (int e = 0; e < 4; e++) {
            const int row = m0 + 64 * cw + 16 * warp + g + 8 * (e >> 1), d = 8 * nb + 2 * c + (e & 1);
            const float v = dq[nb][e] * A.scale;
            ((uint16_t *)A.dq)[(((int64_t)b * A.L + row) * A.H + h) * 64 + d] = f2h<0>(v);
        }
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

/* random inputs; lse and D from a float64 forward on the host when `ref` (else plausible values:
 * the bench only times) */
static int run(int B, int L, int H, int check, int reps)
{
    const size_t n = (size_t)B * L * H * 64, nr = (size_t)B * H * L;
    uint16_t *hq = (uint16_t *)malloc(n * 2), *hk = (uint16_t *)malloc(n * 2), *hv = (uint16_t *)malloc(n * 2),
             *ho = (uint16_t *)malloc(n * 2), *hdq = (uint16_t *)malloc(n * 2);
    float *hl = (float *)malloc(nr * 4), *hd = (float *)malloc(nr * 4);
    const unsigned seed = 20261201u + (unsigned)L;
    srand(seed);
    printf("proto_ws_dq: B%d L%d H%d, seed %u\n", B, L, H, seed);
    for (size_t i = 0; i < n; i++) {
        hq[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
        hk[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
        hv[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
        ho[i] = to_h((float)rand() / RAND_MAX * 2.f - 1.f);
    }
    const double scale = 1.0 / 8.0;
    double *rdq = 0;
    if (check) {
        /* float64 reference: S, lse, P, O, D, dP, dS, dQ per (b, h) */
        rdq = (double *)calloc(n, sizeof(double));
        double *p = (double *)malloc((size_t)L * L * sizeof(double));
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                auto at = [&](const uint16_t *t, int i, int d) {
                    return (double)from_h(t[(((size_t)b * L + i) * H + h) * 64 + d]);
                };
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
                        double dp = 0;
                        for (int d = 0; d < 64; d++) dp += at(ho, i, d) * at(hv, j, d);
                        const double ds = p[(size_t)i * L + j] * (dp - di);
                        for (int d = 0; d < 64; d++) rdq[(((size_t)b * L + i) * H + h) * 64 + d] += ds * at(hk, j, d) * scale;
                    }
                }
            }
        free(p);
    } else {
        for (size_t i = 0; i < nr; i++) hl[i] = logf((float)L) + 0.5f, hd[i] = 0.01f;
    }
    uint16_t *dq_, *dk_, *dv_, *do_, *ddq;
    float *dl, *dd;
    PCK(cudaMalloc((void **)&dq_, n * 2));
    PCK(cudaMalloc((void **)&dk_, n * 2));
    PCK(cudaMalloc((void **)&dv_, n * 2));
    PCK(cudaMalloc((void **)&do_, n * 2));
    PCK(cudaMalloc((void **)&ddq, n * 2));
    PCK(cudaMalloc((void **)&dl, nr * 4));
    PCK(cudaMalloc((void **)&dd, nr * 4));
    PCK(cudaMemcpy(dq_, hq, n * 2, cudaMemcpyHostToDevice));
    PCK(cudaMemcpy(dk_, hk, n * 2, cudaMemcpyHostToDevice));
    PCK(cudaMemcpy(dv_, hv, n * 2, cudaMemcpyHostToDevice));
    PCK(cudaMemcpy(do_, ho, n * 2, cudaMemcpyHostToDevice));
    PCK(cudaMemcpy(dl, hl, nr * 4, cudaMemcpyHostToDevice));
    PCK(cudaMemcpy(dd, hd, nr * 4, cudaMemcpyHostToDevice));
    PCK(cudaMemset(ddq, 0xFF, n * 2)); /* poisoned */
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
    a.dq = ddq;
    a.B = B;
    a.L = L;
    a.H = H;
    a.scale = (float)scale;
    a.sl2 = (float)(scale * 1.4426950408889634);
    PCK(cudaFuncSetAttribute(dattn_proto_ws_dq, cudaFuncAttributeMaxDynamicSharedMemorySize, P_SMEM));
    const dim3 grid((unsigned)(L / 128), (unsigned)H, (unsigned)B);
    dattn_proto_ws_dq<<<grid, 384, P_SMEM, 0>>>(M, a);
    PCK(cudaGetLastError());
    PCK(cudaDeviceSynchronize());
    int bad = 0;
    if (check) {
        PCK(cudaMemcpy(hdq, ddq, n * 2, cudaMemcpyDeviceToHost));
        double mref = 0, merr = 0;
        for (size_t i = 0; i < n; i++) mref = fmax(mref, fabs(rdq[i]));
        for (size_t i = 0; i < n; i++) {
            const double err = fabs((double)from_h(hdq[i]) - rdq[i]);
            merr = fmax(merr, err);
            /* fp16 inputs, fp16 dS and output, fp32 accumulation: 1e-2 of the largest |dQ| */
            if (!(err <= 1e-2 * mref)) {
                if (bad < 4) printf("  dq[%zu] = %g, want %g\n", i, (double)from_h(hdq[i]), rdq[i]);
                bad++;
            }
        }
        printf("%s proto_ws_dq check: max |err| %.3g of max |dQ| %.3g, %d of %zu outside 1e-2 of it\n",
               bad ? "FAIL" : "ok  ", merr, mref, bad, n);
        free(rdq);
    }
#ifndef DATTN_EMU_CUDA_RUNTIME_H
    if (reps > 0) {
        cudaEvent_t e0, e1;
        PCK(cudaEventCreate(&e0));
        PCK(cudaEventCreate(&e1));
        PCK(cudaEventRecord(e0));
        for (int r = 0; r < reps; r++) dattn_proto_ws_dq<<<grid, 384, P_SMEM, 0>>>(M, a);
        PCK(cudaEventRecord(e1));
        PCK(cudaEventSynchronize(e1));
        float ms = 0;
        PCK(cudaEventElapsedTime(&ms, e0, e1));
        const double t = ms / reps, flop = 3.0 * 2.0 * B * H * (double)L * L * 64; /* S, dP, dQ */
        printf("proto_ws_dq B%d L%d H%d: %.4f ms per call (%d calls), %.1f TFLOP/s on its three products\n", B, L,
               H, t, reps, flop / t / 1e9);
    }
#else
    (void)reps;
#endif
    cudaFree(dq_);
    cudaFree(dk_);
    cudaFree(dv_);
    cudaFree(do_);
    cudaFree(ddq);
    cudaFree(dl);
    cudaFree(dd);
    free(hq);
    free(hk);
    free(hv);
    free(ho);
    free(hdq);
    free(hl);
    free(hd);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    int ndev = 0, major = 0, minor = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("proto_ws_dq: no CUDA device: skipped\n");
        return 77;
    }
    PCK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    PCK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    if (major != 9 || minor != 0) {
        printf("proto_ws_dq: compute capability %d.%d, the prototype needs 9.0 (sm_90a): skipped\n", major, minor);
        return 77;
    }
    if (argc >= 2 && !strcmp(argv[1], "--check")) return run(1, 256, 2, 1, 0);
    if (argc >= 4 && !strcmp(argv[1], "--bench")) return run(atoi(argv[2]), atoi(argv[3]), 12, 0, argc >= 5 ? atoi(argv[4]) : 20);
    fprintf(stderr, "usage: proto_ws_dq --check | --bench B L [N]\n");
    return 2;
}

/* Prototype (bench only, not part of the library): the forward's plain tile (no position terms)
 * in the warp-specialized Hopper structure of the ws backward (bwd_ws_d64_sm90.cu), to measure
 * what a ws forward's core reaches against the library's forward (sm90w1g, not specialized) and
 * torch's flash / cuDNN attention before the position terms are ported into it (issue 6: a
 * Hopper forward faster than plain attention; NOTES.md, "A warp-specialized forward core").
 *
 *   O = softmax(Q K^T / sqrt(64)) V,   lse = log sum_j exp(q_i . k_j / sqrt(64))
 *
 * One CTA per 128 query rows of one (sequence, head), three warpgroups (setmaxnreg 24 / 240):
 *   warpgroup 0, the producer: lane 0 of its warp 0 loads the Q block once and the K / V tiles
 *     of 64 keys into NST stages by TMA (src/cuda/tma.cuh: 64-row boxes, 128-byte swizzle); a
 *     stage's full mbarrier takes lane 0's arrival with the copies' bytes, its empty mbarrier
 *     the 256 consumer threads' arrivals;
 *   warpgroups 1 and 2, the consumers (64 rows each): per tile S = Q K^T by wgmma from shared
 *     memory (m64n64k16 x 4), the online softmax in registers (rows g, g + 8 of each warp's 16:
 *     max and sum over the quad by shuffles), O += P V by wgmma with P as the register A operand
 *     and V MN-major. Order per tile j: softmax of S_j in place -> wait for P V_{j-1} (release
 *     its stage) -> rescale O -> issue S_{j+1} = Q K_{j+1}^T, then P_j V_j (two commit groups)
 *     -> wait for S_{j+1} only: tile j + 1's softmax runs while P_j V_j is in flight, and each
 *     warpgroup's softmax while the other's products run.
 * fp16, D = 64, padded [B][L][H][64] tensors, L a multiple of 128, no mask, no dropout.
 *
 *   proto_ws_fwd --check          O and lse against a float64 reference on the host (B2 L256
 *                                  H2, B1 L384 H3; exit 1 on a mismatch, 77 without a compute
 *                                  capability 9.0 GPU)
 *   proto_ws_fwd --bench B L [N]  N (default 50) timed launches at H 12 (cudaEvent; ncu name
 *                                  dattn_proto_ws_fwd), TFLOP/s = 4 B H L^2 64 / t
 * Built by `make CUDA=1 tests-build` as build/bench/proto_ws_fwd; scripts/gpu_check.sh runs
 * --check (and racecheck / synccheck on it); the host emulation builds it too (sh
 * tests/emu/build.sh DIR, or EMU_PROTOS_ONLY=1: DIR/proto_ws_fwd --check). */
#include "sm90.cuh"
#include "tma.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"  /* tests/: the fp16 codecs of the tests */
#include "tsm90.h" /* tests/: tsm90_need (the sm_90 gate, exit 77) and CK (a failing CUDA call exits) */

#ifndef PROTO_FWD_NST
#define PROTO_FWD_NST 4 /* K / V stages (call 10: 4 beat 3 by 1-3 % and 6; 2 is 30-45 % slower) */
#endif

struct proto_fwd_maps {
    CUtensorMap q, k, v;
    int rf; /* rows-first flag (one layout for the three) */
};

struct proto_fwd_args {
    uint16_t *o; /* [B][L][H][64] */
    float *lse;  /* [B][H][L], natural log */
    int B, L, H;
    float sl2; /* log2(e) / sqrt(64) */
};

/* Shared memory (offsets from a 1024-byte-aligned base): Q [128][64]; K, V [NST][64][64] (fp16,
 * 128-byte swizzled: sm90.cuh's layout); the barriers (Q's, then full / empty per stage). */
enum {
    F_Q = 0,
    F_K = 16384,
    F_V = F_K + 8192 * PROTO_FWD_NST,
    F_BAR = F_V + 8192 * PROTO_FWD_NST,
    F_SMEM = F_BAR + 8 + 16 * PROTO_FWD_NST + 1024
};

/* One tile's online softmax for a consumer thread (rows g, g + 8 of its warp's 16; columns 8 nb
 * + 2 c (+ 1)): the rows' new max mx (log2 units, over the quad by shuffles), P = exp2(S sl2 -
 * mx) as wgmma A operands pf, the running sums ls (the thread's own columns; the quad's are added
 * at the end); then, once the previous tile's P V is done (wait: o is its accumulator, pf its
 * operand), O rescaled by exp2(old max - new max). */
__device__ __forceinline__ void fwd_softmax_step(float (&sa)[8][4], float (&o)[8][4], uint32_t (&pf)[4][4],
                                                 float (&mx)[2], float (&ls)[2], float sl2)
{
    float alpha[2];
    for (int i = 0; i < 2; i++) {
        float m = mx[i];
        for (int nb = 0; nb < 8; nb++) m = fmaxf(m, fmaxf(sa[nb][2 * i], sa[nb][2 * i + 1]) * sl2);
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        alpha[i] = ex2f(mx[i] - m);
        mx[i] = m;
        float sum = 0.f;
        for (int nb = 0; nb < 8; nb++)
            for (int e = 0; e < 2; e++) {
                const float p = ex2f(fmaf(sa[nb][2 * i + e], sl2, -m));
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
        pf[nb >> 1][2 * (nb & 1)] = pack2<0>(sa[nb][0], sa[nb][1]);
        pf[nb >> 1][2 * (nb & 1) + 1] = pack2<0>(sa[nb][2], sa[nb][3]);
    }
}

extern "C" __global__ void __launch_bounds__(384, 1)
    dattn_proto_ws_fwd(const __grid_constant__ proto_fwd_maps M, const __grid_constant__ proto_fwd_args A)
{
    extern __shared__ __align__(1024) char smem_raw[];
    const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
    const uint32_t qbar = base + F_BAR, full0 = qbar + 8, empty0 = full0 + 8 * PROTO_FWD_NST;
    const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), warp = (tid >> 5) & 3, lane = tid & 31;
    const int m0 = blockIdx.x * 128, h = blockIdx.y, b = blockIdx.z, nt = A.L / 64;
    if (tid == 0) {
        mbar_init(qbar, 1);
        for (int s = 0; s < PROTO_FWD_NST; s++) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, 256);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (wg == 0) {
        setmaxnreg_dec<24>();
        if (warp != 0) return;
        const int one = lane == 0;
        mbar_arrive_expect_tx_if(one, qbar, 2 * 64 * 128);
        for (int half = 0; half < 2; half++)
            tma_load_rows_if(one, base + F_Q + 8192 * half, &M.q, qbar, M.rf, h, m0 + 64 * half, b);
        for (int j = 0; j < nt; j++) {
            const int s = j % PROTO_FWD_NST;
            if (j >= PROTO_FWD_NST) mbar_wait(empty0 + 8 * s, (uint32_t)(j / PROTO_FWD_NST - 1) & 1u);
            mbar_arrive_expect_tx_if(one, full0 + 8 * s, 2 * 64 * 128);
            tma_load_rows_if(one, base + F_K + 8192 * s, &M.k, full0 + 8 * s, M.rf, h, 64 * j, b);
            tma_load_rows_if(one, base + F_V + 8192 * s, &M.v, full0 + 8 * s, M.rf, h, 64 * j, b);
        }
        return;
    }
    setmaxnreg_inc<240>();
    /* consumers: warpgroup cw owns rows m0 + 64 cw .. + 63; thread rows 16 warp + g (+ 8),
     * columns 8 nb + 2 c (+ 1) of a tile */
    const int cw = wg - 1, g = lane >> 2, c = lane & 3;
    const uint64_t dQ = desc_kmajor(base + F_Q, 128, 64 * cw, 0);
    const uint64_t dK0 = desc_kmajor(base + F_K, 64, 0, 0), dV0 = desc_mnmajor(base + F_V, 64, 0);
    float o[8][4], sa[8][4], sn[8][4];
    for (int nb = 0; nb < 8; nb++) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.f;
    float mx[2] = {-INFINITY, -INFINITY}, ls[2] = {0.f, 0.f}; /* the rows' running max (log2 units) and sum */
    mbar_wait(qbar, 0);
    mbar_wait(full0, 0);
    wgmma_fence();
    for (int ks = 0; ks < 4; ks++) wgmma_ss<64, 0, 0, 0>(sa, desc_add(dQ, 32 * ks), desc_add(dK0, 32 * ks), ks > 0);
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(sa);
    /* tiles 0 .. nt - 2 issue the next tile's S; the last one, peeled, does not (no branch around
     * the commit groups: ptxas then keeps the wgmma pipelined) */
    for (int j = 0; j < nt - 1; j++) {
        uint32_t pf[4][4];
        fwd_softmax_step(sa, o, pf, mx, ls, A.sl2);
        if (j > 0) mbar_arrive(empty0 + 8 * ((j - 1) % PROTO_FWD_NST));
        const int s = j % PROTO_FWD_NST, s1 = (j + 1) % PROTO_FWD_NST;
        mbar_wait(full0 + 8 * s1, (uint32_t)((j + 1) / PROTO_FWD_NST) & 1u);
        wgmma_fence();
        const uint64_t dK = desc_add(dK0, 8192u * s1), dV = desc_add(dV0, 8192u * s);
        for (int ks = 0; ks < 4; ks++) wgmma_ss<64, 0, 0, 0>(sn, desc_add(dQ, 32 * ks), desc_add(dK, 32 * ks), ks > 0);
        wgmma_commit();
        for (int kk = 0; kk < 4; kk++) wgmma_rs<64, 0, 1>(o, pf[kk], desc_add(dV, 2048 * kk), 1);
        wgmma_commit();
        wgmma_wait<1>();
        reg_fence(sn);
        for (int nb = 0; nb < 8; nb++)
            for (int e = 0; e < 4; e++) sa[nb][e] = sn[nb][e];
    }
    {
        uint32_t pf[4][4];
        fwd_softmax_step(sa, o, pf, mx, ls, A.sl2);
        if (nt > 1) mbar_arrive(empty0 + 8 * ((nt - 2) % PROTO_FWD_NST));
        const uint64_t dV = desc_add(dV0, 8192u * ((nt - 1) % PROTO_FWD_NST));
        wgmma_fence();
        for (int kk = 0; kk < 4; kk++) wgmma_rs<64, 0, 1>(o, pf[kk], desc_add(dV, 2048 * kk), 1);
        wgmma_commit();
    }
    wgmma_wait<0>();
    reg_fence(o);
    mbar_arrive(empty0 + 8 * ((nt - 1) % PROTO_FWD_NST));
    for (int i = 0; i < 2; i++) {
        ls[i] += __shfl_xor_sync(0xffffffffu, ls[i], 1);
        ls[i] += __shfl_xor_sync(0xffffffffu, ls[i], 2);
    }
    for (int nb = 0; nb < 8; nb++)
        for (int e = 0; e < 4; e++) {
            const int row = m0 + 64 * cw + 16 * warp + g + 8 * (e >> 1), d = 8 * nb + 2 * c + (e & 1);
            A.o[(((int64_t)b * A.L + row) * A.H + h) * 64 + d] = f2h<0>(o[nb][e] / ls[e >> 1]);
        }
    if (c == 0)
        for (int i = 0; i < 2; i++) {
            const int row = m0 + 64 * cw + 16 * warp + g + 8 * i;
            A.lse[((int64_t)b * A.H + h) * A.L + row] = (mx[i] + log2f(ls[i])) * 0.69314718055994531f;
        }
}

static int n_pass, n_fail;

/* one configuration: random fp16 inputs (seeded, printed), the kernel, the float64 reference
 * (check), or reps timed launches */
static int run(int B, int L, int H, int check, int reps)
{
    const unsigned seed = 20261202u + (unsigned)(B * 131 + L * 7 + H);
    printf("proto_ws_fwd: B%d L%d H%d, seed %u\n", B, L, H, seed);
    if (L % 128) {
        fprintf(stderr, "proto_ws_fwd: L must be a multiple of 128\n");
        return 2;
    }
    srand(seed);
    const size_t n = (size_t)B * L * H * 64, nr = (size_t)B * H * L;
    uint16_t *hq = (uint16_t *)malloc(n * 2), *hk = (uint16_t *)malloc(n * 2), *hv = (uint16_t *)malloc(n * 2);
    uint16_t *ho = (uint16_t *)malloc(n * 2);
    float *hl = (float *)malloc(nr * 4);
    for (size_t i = 0; i < n; i++) {
        /* q, k scaled so that the rows' scores spread over several units (a peaked softmax) */
        hq[i] = th_double_to_f16(2.f * ((float)rand() / RAND_MAX - 0.5f) * 1.5f);
        hk[i] = th_double_to_f16(2.f * ((float)rand() / RAND_MAX - 0.5f) * 1.5f);
        hv[i] = th_double_to_f16(2.f * ((float)rand() / RAND_MAX - 0.5f));
    }
    uint16_t *dq, *dk, *dv, *dout;
    float *dl;
    CK(cudaMalloc((void **)&dq, n * 2));
    CK(cudaMalloc((void **)&dk, n * 2));
    CK(cudaMalloc((void **)&dv, n * 2));
    CK(cudaMalloc((void **)&dout, n * 2));
    CK(cudaMalloc((void **)&dl, nr * 4));
    CK(cudaMemcpy(dq, hq, n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dk, hk, n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv, hv, n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(dout, 0xFF, n * 2)); /* poisoned */
    CK(cudaMemset(dl, 0xFF, nr * 4));
    proto_fwd_maps M;
    int rf = 0;
    const int64_t os = (int64_t)L * H * 64, rs = (int64_t)H * 64, hs = 64;
    CK(dattn_tma_rows_map(&M.q, &rf, dq, B, L, H, os, rs, hs, 64));
    CK(dattn_tma_rows_map(&M.k, &rf, dk, B, L, H, os, rs, hs, 64));
    CK(dattn_tma_rows_map(&M.v, &rf, dv, B, L, H, os, rs, hs, 64));
    M.rf = rf;
    proto_fwd_args a;
    a.o = dout;
    a.lse = dl;
    a.B = B;
    a.L = L;
    a.H = H;
    a.sl2 = (float)(1.4426950408889634 / 8.0);
    const dim3 grid((unsigned)(L / 128), (unsigned)H, (unsigned)B);
    CK(cudaFuncSetAttribute(dattn_proto_ws_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, F_SMEM));
    dattn_proto_ws_fwd<<<grid, 384, F_SMEM, 0>>>(M, a);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    int bad = 0;
    if (check) {
        CK(cudaMemcpy(ho, dout, n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hl, dl, nr * 4, cudaMemcpyDeviceToHost));
        double *p = (double *)malloc((size_t)L * sizeof(double)), omax = 0.0, oerr = 0.0, lerr = 0.0;
        size_t nbad_o = 0, nbad_l = 0;
        /* bounds: O within 4e-3 of max |O| (fp16 P and output, fp32 accumulation); lse within 1e-4
         * relative plus 1e-4 */
        double *ref = (double *)malloc(n * sizeof(double)), *lref = (double *)malloc(nr * sizeof(double));
        for (int bb = 0; bb < B; bb++)
            for (int hh = 0; hh < H; hh++)
                for (int i = 0; i < L; i++) {
                    const uint16_t *qi = hq + (((size_t)bb * L + i) * H + hh) * 64;
                    double m = -INFINITY, sum = 0.0;
                    for (int j = 0; j < L; j++) {
                        const uint16_t *kj = hk + (((size_t)bb * L + j) * H + hh) * 64;
                        double sc = 0.0;
                        for (int d = 0; d < 64; d++) sc += th_f16_to_double(qi[d]) * th_f16_to_double(kj[d]);
                        p[j] = sc / 8.0;
                        m = p[j] > m ? p[j] : m;
                    }
                    for (int j = 0; j < L; j++) sum += (p[j] = exp(p[j] - m));
                    lref[((size_t)bb * H + hh) * L + i] = m + log(sum);
                    for (int d = 0; d < 64; d++) {
                        double acc = 0.0;
                        for (int j = 0; j < L; j++) acc += p[j] * th_f16_to_double(hv[(((size_t)bb * L + j) * H + hh) * 64 + d]);
                        const double r = acc / sum;
                        ref[(((size_t)bb * L + i) * H + hh) * 64 + d] = r;
                        omax = fabs(r) > omax ? fabs(r) : omax;
                    }
                }
        for (size_t i = 0; i < n; i++) {
            const double e = fabs(th_f16_to_double(ho[i]) - ref[i]);
            if (!(e <= 4e-3 * omax)) nbad_o++;
            oerr = e > oerr || e != e ? e : oerr;
        }
        for (size_t i = 0; i < nr; i++) {
            const double e = fabs((double)hl[i] - lref[i]);
            if (!(e <= 1e-4 * fabs(lref[i]) + 1e-4)) nbad_l++;
            lerr = e > lerr || e != e ? e : lerr;
        }
        printf("  O: %zu of %zu elements out of bounds (max err %.3g, bound %.3g); lse: %zu of %zu (max err %.3g)\n",
               nbad_o, n, oerr, 4e-3 * omax, nbad_l, nr, lerr);
        bad = (nbad_o != 0) + (nbad_l != 0);
        n_pass += 2 - bad;
        n_fail += bad;
        free(p);
        free(ref);
        free(lref);
    }
#ifndef DATTN_EMU_CUDA_RUNTIME_H
    if (reps > 0) {
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        for (int w = 0; w < 3; w++) dattn_proto_ws_fwd<<<grid, 384, F_SMEM, 0>>>(M, a);
        CK(cudaEventRecord(e0));
        for (int r = 0; r < reps; r++) dattn_proto_ws_fwd<<<grid, 384, F_SMEM, 0>>>(M, a);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        const double t = ms / reps, flop = 4.0 * B * H * (double)L * L * 64;
        printf("proto_ws_fwd B%d L%d H%d NST%d: %.4f ms per call (%d calls), %.1f TFLOP/s\n", B, L, H, PROTO_FWD_NST, t,
               reps, flop / t / 1e9);
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
    }
#else
    (void)reps;
#endif
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dout);
    cudaFree(dl);
    free(hq);
    free(hk);
    free(hv);
    free(ho);
    free(hl);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (tsm90_need("proto_ws_fwd")) return 77;
    if (argc >= 2 && !strcmp(argv[1], "--check")) {
        run(2, 256, 2, 1, 0);
        run(1, 384, 3, 1, 0);
        printf("%d passed, %d failed\n", n_pass, n_fail);
        return n_fail ? 1 : 0;
    }
    if (argc >= 4 && !strcmp(argv[1], "--bench")) return run(atoi(argv[2]), atoi(argv[3]), 12, 0, argc >= 5 ? atoi(argv[4]) : 50);
    fprintf(stderr, "usage: proto_ws_fwd --check | --bench B L [N]\n");
    return 2;
}

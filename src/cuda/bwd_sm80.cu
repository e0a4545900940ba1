/* Tensor-core backward: the deterministic reduce of the table-gradient partials and the
 * launcher of the whole backward on this path (bwd_sm80.cuh has the design). */
#include "bwd_sm80.cuh"

#include <cuda_runtime.h>

/* dp[h, t, :] = sum over the CTAs (row-block groups) of head h, in group order, of the fp32
 * partials whose recorded 16-slot range [lo, hi) holds t; zeros elsewhere. The groups are
 * read TC_RED_BATCH at a time (every load of a batch in flight before its adds: two round
 * trips per batch, the ranges then the partials; one group at a time made this pass
 * latency-bound, 41 us per layer at B4 L2048 H12, 34 with batches of 8; H12 has 22 groups per
 * head) and added in group order: the same sum as one group at a time. Batches of 32
 * measured 70 us: ptxas then interleaves most partial loads with the adds (register budget),
 * one round trip each. */
#define TC_RED_BATCH 8
template <int DT, int KV>
DATTN_DEV void bwd_tc_reduce_body(const dattn_bwd_args &A)
{
    const dattn_fwd_args &a = A.f;
    const int t = blockIdx.x, h = blockIdx.y, S2 = 2 * a.S, D = a.D, NG = A.tcg;
    const float *part = KV ? A.ppq : A.ppk;
    const int32_t *rg = A.tcr + ((int64_t)(KV ? a.H : 0) + h) * 2 * NG;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float s = 0.f;
        for (int g0 = 0; g0 < NG; g0 += TC_RED_BATCH) {
            float v[TC_RED_BATCH];
            int lo[TC_RED_BATCH], hi[TC_RED_BATCH];
            bool in[TC_RED_BATCH];
#pragma unroll
            for (int k = 0; k < TC_RED_BATCH; k++) { /* the ranges first, all loads unconditional */
                const int grp = g0 + k < NG ? g0 + k : NG - 1;
                lo[k] = rg[2 * grp];
                hi[k] = rg[2 * grp + 1];
            }
#pragma unroll
            for (int k = 0; k < TC_RED_BATCH; k++) {
                const int grp = g0 + k;
                in[k] = (grp < NG) & (t >= lo[k]) & (t < hi[k]);
                v[k] = in[k] ? part[(((int64_t)h * NG + grp) * S2 + t) * D + d] : 0.f;
            }
#pragma unroll
            for (int k = 0; k < TC_RED_BATCH; k++)
                if (in[k]) s += v[k];
        }
        if (KV) st_el<DT>(A.dpq, (int64_t)h * A.dpq_sh + (int64_t)t * A.dpq_ss + d, s);
        else st_el<DT>(A.dpk, (int64_t)h * A.dpk_sh + (int64_t)t * A.dpk_ss + d, s);
    }
}

/* Both tables' reduces in one launch: blockIdx.z = 0 reduces dpk (when c2p is on), the last z
 * dpq (when p2c is on); grid z = c2p + p2c. One launch per backward instead of two (the host
 * cost of a launch is what bounds small training steps); each block runs the same body as a
 * separate reduce did, so the bits are the same. */
#define BWD_RED(SUF, DT)                                                                       \
    extern "C" __global__ void __launch_bounds__(128)                                         \
        dattn_bwd_tc_reduce_##SUF(const __grid_constant__ dattn_bwd_args A)                     \
    {                                                                                          \
        if (A.f.c2p && blockIdx.z == 0) bwd_tc_reduce_body<DT, 0>(A);                           \
        else bwd_tc_reduce_body<DT, 1>(A);                                                     \
    }
BWD_RED(f16, 1)
BWD_RED(bf16, 2)

extern "C" size_t dattn_bwd_sm80_smem_d64(int S);
extern "C" size_t dattn_bwd_sm80_smem_d128(int S);
extern "C" cudaError_t dattn_launch_bwd_sm80_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" cudaError_t dattn_launch_bwd_sm80_d128(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" size_t dattn_bwd_tc3_smem_d64(int S);
extern "C" cudaError_t dattn_launch_bwd_tc3_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" size_t dattn_bwd_tc3b_smem_d64(int S);
extern "C" cudaError_t dattn_launch_bwd_tc3b_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" size_t dattn_bwd_tc3p_smem_d64(int S);
extern "C" cudaError_t dattn_launch_bwd_tc3p_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" size_t dattn_bwd_tc3k_smem_d64(int S);
extern "C" cudaError_t dattn_launch_bwd_tc3k_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" size_t dattn_bwd_tc3s_smem_d64(int S);
extern "C" size_t dattn_bwd_tc3c_smem_d64(int S);
extern "C" cudaError_t dattn_launch_bwd_tc3c_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" size_t dattn_bwd_tc3d_smem_d64(int S);
extern "C" size_t dattn_bwd_tc3e_smem_d64(int S);
extern "C" size_t dattn_bwd_tc3f_smem_d64(int S);
extern "C" cudaError_t dattn_launch_bwd_tc3f_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" size_t dattn_bwd_tc3g_smem_d64(int S);
extern "C" cudaError_t dattn_launch_bwd_tc3g_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" size_t dattn_bwd_tc3t_smem_d64(int S);
extern "C" cudaError_t dattn_launch_bwd_tc3t_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" cudaError_t dattn_launch_bwd_tc3e_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" cudaError_t dattn_launch_bwd_tc3d_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" cudaError_t dattn_launch_bwd_tc3s_d64(const dattn_bwd_args *A, int bf, int which, cudaStream_t stream);
extern "C" cudaError_t dattn_launch_bwd_di(const dattn_bwd_args *A, int dtype, cudaStream_t stream);

/* Shared memory the tensor-core backward needs for head dim D and att span S (0: no
 * such kernel). */
extern "C" size_t dattn_bwd_sm80_smem(int D, int S)
{
    if (D == 64) return dattn_bwd_sm80_smem_d64(S);
    if (D == 128) return dattn_bwd_sm80_smem_d128(S);
    return 0;
}

/* The same for the round-3 kernels (v3 1: tc3, bwd_tc3_d64.cu; 2: tc3b, its lean tile loop,
 * bwd_tc3b_d64.cu; 3: tc3p, tc3b with P rounded once for dV, bwd_tc3p_d64.cu; 4: tc3s, tc3b
 * with the run-sum scatter, bwd_tc3s_d64.cu; 5: tc3k, tc3b with the saturated column constants
 * on four warps, bwd_tc3k_d64.cu; 6: tc3c, tc3s + tc3k, bwd_tc3c_d64.cu; 7: tc3d, tc3c with
 * the lean P / dS loop, bwd_tc3d_d64.cu; 8: tc3e, tc3d whose dq kernel compiles the tile body
 * per tile class, bwd_tc3e_d64.cu, with tc3d's dkdv kernel; 9: tc3f, tc3e whose dkdv kernel
 * does the same, bwd_tc3f_d64.cu; 10: tc3g, tc3f whose dq kernel computes D_i,
 * bwd_tc3g_d64.cu, with tc3f's dkdv kernel; 11: tc3t, tc3g whose column tiles come by TMA,
 * bwd_tc3t_d64.cu, both kernels; 0: none at this head dim). */
extern "C" size_t dattn_bwd_tc3_smem(int D, int S, int v3)
{
    if (D != 64) return 0;
    if (v3 == 10 || v3 == 11) { /* tc3g's dq kernel, tc3f's dkdv kernel (the same geometry);
                                  * tc3t's kernels, or those two where it cannot map a tensor */
        const size_t g = dattn_bwd_tc3g_smem_d64(S), f = dattn_bwd_tc3f_smem_d64(S);
        const size_t t = v3 == 11 ? dattn_bwd_tc3t_smem_d64(S) : 0, m = g > f ? g : f;
        return t > m ? t : m;
    }
    return v3 == 9 ? dattn_bwd_tc3f_smem_d64(S) : v3 == 8 ? dattn_bwd_tc3e_smem_d64(S) : v3 == 7 ? dattn_bwd_tc3d_smem_d64(S) : v3 == 6 ? dattn_bwd_tc3c_smem_d64(S) : v3 == 5 ? dattn_bwd_tc3k_smem_d64(S) : v3 == 4 ? dattn_bwd_tc3s_smem_d64(S)
        : v3 == 3 ? dattn_bwd_tc3p_smem_d64(S) : v3 >= 2 ? dattn_bwd_tc3b_smem_d64(S)
        : dattn_bwd_tc3_smem_d64(S);
}

/* D_i, the dq kernel, the dkdv kernel (tc3: 1 the round-3 ones, 2 their lean-loop variant
 * tc3b, 3 tc3b with P rounded once for dV, tc3p, 4 tc3b with the run-sum scatter, tc3s,
 * 5 tc3k, 6 tc3c, 7 tc3d, 8 tc3e, 9 tc3f, 10 tc3g, 11 tc3t), the table reduces; all on `stream`.
 * tc3t: each kernel whose two tensors its launcher cannot map (tma.cuh: a stride or base off
 * 16 bytes) is tc3g's / tc3f's instead, the same results bit for bit (its dq kernel stores
 * D_i as tc3g's does).
 * tc3g: no D_i launch, its dq kernel (launched first, as every variant's) stores D_i of
 * every row before the dkdv kernel, which reads it, starts (stream order): three launches
 * per call with position terms instead of four. */
extern "C" cudaError_t dattn_launch_bwd_sm80(const dattn_bwd_args *A, int bf, int tc3, cudaStream_t stream)
{
    const dattn_fwd_args &a = A->f;
    cudaError_t e;
    if (a.B == 0 || a.L == 0) {
        /* nothing but (zero) table gradients */
    } else {
        if (tc3 != 10 && tc3 != 11 && (e = dattn_launch_bwd_di(A, bf ? 2 : 1, stream)) != cudaSuccess) return e;
        for (int which = 0; which < 2; which++) { /* the dq kernel first (tc3g: it writes D_i) */
            /* (tc3e: its dq kernel and tc3d's dkdv kernel; tc3g: its dq kernel and tc3f's
             * dkdv kernel) */
            e = tc3 == 11 ? dattn_launch_bwd_tc3t_d64(A, bf, which, stream) : cudaErrorNotSupported;
            if (e == cudaErrorNotSupported) /* (tc3t: a tensor it cannot map, or not tc3t) */
                e = tc3 >= 10 ? (which ? dattn_launch_bwd_tc3f_d64(A, bf, which, stream)
                                   : dattn_launch_bwd_tc3g_d64(A, bf, which, stream))
                : tc3 == 9 ? dattn_launch_bwd_tc3f_d64(A, bf, which, stream)
                : tc3 == 8 ? (which ? dattn_launch_bwd_tc3d_d64(A, bf, which, stream)
                                  : dattn_launch_bwd_tc3e_d64(A, bf, which, stream))
                : tc3 == 7 ? dattn_launch_bwd_tc3d_d64(A, bf, which, stream)
                : tc3 == 6 ? dattn_launch_bwd_tc3c_d64(A, bf, which, stream)
                : tc3 == 5 ? dattn_launch_bwd_tc3k_d64(A, bf, which, stream)
                : tc3 == 4 ? dattn_launch_bwd_tc3s_d64(A, bf, which, stream)
                : tc3 == 3 ? dattn_launch_bwd_tc3p_d64(A, bf, which, stream)
                : tc3 >= 2 ? dattn_launch_bwd_tc3b_d64(A, bf, which, stream)
                : tc3 ? dattn_launch_bwd_tc3_d64(A, bf, which, stream)
                : a.D == 64 ? dattn_launch_bwd_sm80_d64(A, bf, which, stream)
                            : dattn_launch_bwd_sm80_d128(A, bf, which, stream);
            if (e != cudaSuccess) return e;
        }
    }
    const unsigned nz = (unsigned)((a.c2p ? 1 : 0) + (a.p2c ? 1 : 0));
    if (nz == 0) return cudaSuccess;
    const dim3 grid((unsigned)(2 * a.S), (unsigned)a.H, nz);
    const unsigned nt = (unsigned)(a.D < 128 ? a.D : 128);
    if (bf) dattn_bwd_tc_reduce_bf16<<<grid, nt, 0, stream>>>(*A);
    else dattn_bwd_tc_reduce_f16<<<grid, nt, 0, stream>>>(*A);
    return cudaGetLastError();
}

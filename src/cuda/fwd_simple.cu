/* dattn forward, simple CUDA kernel: any dtype (fp32 in IEEE arithmetic), any head dim
 * up to 256, any strides (last dim contiguous). One warp per query row, 32-key chunks of
 * K and V staged in shared memory as fp32, one lane per key for the scores (q.k + c2p +
 * p2c, each a length-D fp32 dot product), online softmax, each lane owning D/32 output
 * columns for P*V. It is the path for fp32 inputs, for head dims without a tensor-core
 * instance and for tensors whose rows are not 16-byte aligned; it is also the readable
 * reference the tensor-core kernel is compared with in the GPU tests.
 * Dropout (a.drop_thr != 0): the row sum l runs over every probability, P*V over the kept
 * ones, and the result is scaled by 1/(1-p) (as the CPU backend); HF padded rows are
 * computed here, per row, as the kept-mask mean of v over all len keys. */
#include "common.cuh"

#include <cuda_runtime.h>

#define SIMPLE_ROWS 8  /* query rows (warps) per block */
#define SIMPLE_KC 32   /* keys per chunk */
#define SIMPLE_DMAX 256

template <int DT>
DATTN_DEV void fwd_simple_body(const dattn_fwd_args &a)
{
    extern __shared__ __align__(16) float sm[];
    const int D = a.D, DP = a.D + 1;
    float *qs = sm;                         /* [ROWS][D] */
    float *ks = qs + SIMPLE_ROWS * D;       /* [KC][DP] */
    float *vs = ks + SIMPLE_KC * DP;        /* [KC][DP] */
    uint16_t *stab = (uint16_t *)(vs + SIMPLE_KC * DP);
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * SIMPLE_ROWS;
    int tok0, len;
    dev_seq(a, b, tok0, len);
    if (i0 >= len) return;
    const int64_t qo = (int64_t)b * a.q_sb + (int64_t)tok0 * a.q_sl + (int64_t)h * a.q_sh;
    const int64_t ko = (int64_t)b * a.k_sb + (int64_t)tok0 * a.k_sl + (int64_t)h * a.k_sh;
    const int64_t vo = (int64_t)b * a.v_sb + (int64_t)tok0 * a.v_sl + (int64_t)h * a.v_sh;
    const uint8_t *mrow = a.mask ? a.mask + (int64_t)b * a.m_sb : (const uint8_t *)0;

    if (a.c2p | a.p2c)
        for (int t = tid; t < 2 * a.nlog; t += blockDim.x) stab[t] = a.tab[t];
    for (int t = tid; t < SIMPLE_ROWS * D; t += blockDim.x) {
        const int r = t / D, d = t % D, i = i0 + r;
        qs[t] = i < len ? ld_el<DT>(a.q, qo + (int64_t)i * a.q_sl + d) : 0.f;
    }
    const int i = i0 + w;
    const int rv = i < len && (!mrow || mrow[(int64_t)i * a.m_sl] != 0);
    /* an HF padded row under dropout: its own kept-mask mean over all len keys */
    const int pdrop = !rv && i < len && a.hf && a.drop_thr != 0;
    int kv_lo = 0, kv_hi = len;
    if (a.kvr && !(a.hf && a.drop_thr != 0)) { /* padded rows need every key then */
        kv_lo = a.kvr[2 * b];
        kv_hi = a.kvr[2 * b + 1];
    }
    kv_lo = kv_lo / SIMPLE_KC * SIMPLE_KC;
    float acc[SIMPLE_DMAX / 32];
#pragma unroll
    for (int t = 0; t < SIMPLE_DMAX / 32; t++) acc[t] = 0.f;
    float m = __int_as_float(0xff800000), l = 0.f;
    const float *q = qs + w * D;
    __syncthreads();

    for (int n0 = kv_lo; n0 < kv_hi; n0 += SIMPLE_KC) {
        for (int t = tid; t < SIMPLE_KC * D; t += blockDim.x) {
            const int jj = t / D, d = t % D, j = n0 + jj;
            ks[jj * DP + d] = j < len ? ld_el<DT>(a.k, ko + (int64_t)j * a.k_sl + d) : 0.f;
            vs[jj * DP + d] = j < len ? ld_el<DT>(a.v, vo + (int64_t)j * a.v_sl + d) : 0.f;
        }
        __syncthreads();
        if (rv) {
            const int j = n0 + lane;
            const int kvalid = j < kv_hi && j < len && (!mrow || mrow[(int64_t)j * a.m_sl] != 0);
            float x = __int_as_float(0xff800000);
            if (kvalid) {
                const float *kr = ks + lane * DP;
                float s = 0.f;
                for (int d = 0; d < D; d++) s = fmaf(q[d], kr[d], s);
                if (a.c2p | a.p2c) {
                    const int slot = dev_slot(a, stab, i - j);
                    if (a.c2p) {
                        const int64_t po = (int64_t)h * a.pk_sh + (int64_t)slot * a.pk_ss;
                        float t = 0.f;
                        for (int d = 0; d < D; d++) t = fmaf(q[d], ld_el<DT>(a.pk, po + d), t);
                        s += t;
                    }
                    if (a.p2c) {
                        const int64_t po = (int64_t)h * a.pq_sh + (int64_t)slot * a.pq_ss;
                        float t = 0.f;
                        for (int d = 0; d < D; d++) t = fmaf(kr[d], ld_el<DT>(a.pq, po + d), t);
                        s += t;
                    }
                }
                x = s * a.sl2;
            }
            float cm = x;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, o));
            const float mnew = fmaxf(m, cm);
            const float muse = mnew == __int_as_float(0xff800000) ? 0.f : mnew;
            const float alpha = exp2f(m - muse);
            float p = exp2f(x - muse);
            float ps = p;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
            l = l * alpha + ps;
            m = mnew;
            if (a.drop_thr && kvalid && !dev_keep(a, b, h, i, j)) p = 0.f; /* after the sum */
#pragma unroll
            for (int t = 0; t < SIMPLE_DMAX / 32; t++) acc[t] *= alpha;
            for (int jj = 0; jj < SIMPLE_KC; jj++) {
                const float pj = __shfl_sync(0xffffffffu, p, jj);
                if (pj != 0.f) {
#pragma unroll
                    for (int t = 0; t < SIMPLE_DMAX / 32; t++)
                        if (lane + 32 * t < D) acc[t] = fmaf(pj, vs[jj * DP + lane + 32 * t], acc[t]);
                }
            }
        } else if (pdrop) {
            const int j = n0 + lane;
            uint32_t kb = __ballot_sync(0xffffffffu, j < len && dev_keep(a, b, h, i, j));
            while (kb) {
                const int jj = __ffs(kb) - 1;
                kb &= kb - 1;
#pragma unroll
                for (int t = 0; t < SIMPLE_DMAX / 32; t++)
                    if (lane + 32 * t < D) acc[t] += vs[jj * DP + lane + 32 * t];
            }
        }
        __syncthreads();
    }

    if (i >= len) return;
    const int64_t oo = (int64_t)b * a.o_sb + (int64_t)(tok0 + i) * a.o_sl + (int64_t)h * a.o_sh;
    const float *vm = (a.hf && a.vmean) ? a.vmean + ((int64_t)b * a.H + h) * D : (const float *)0;
    const float dsc = a.drop_thr ? a.drop_scale : 1.f;
    const float inv = l > 0.f ? dsc / l : 0.f;
    const float pinv = dsc / (float)len; /* HF padded row under dropout */
#pragma unroll
    for (int t = 0; t < SIMPLE_DMAX / 32; t++) {
        const int d = lane + 32 * t;
        if (d < D)
            st_el<DT>(a.out, oo + d, rv ? acc[t] * inv : pdrop ? acc[t] * pinv : (vm ? vm[d] : 0.f));
    }
    if (a.lse && lane == 0)
        a.lse[(int64_t)b * a.l_sb + (int64_t)h * a.l_sh + (int64_t)(tok0 + i) * a.l_sl] =
            rv ? (m + log2f(l)) * 0.69314718055994531f : (a.hf ? a.logL : __int_as_float(0xff800000));
}

#define SIMPLE_KERNEL(NAME, DT)                                                                \
    extern "C" __global__ void __launch_bounds__(32 * SIMPLE_ROWS)                            \
        NAME(const __grid_constant__ dattn_fwd_args a)                                         \
    {                                                                                          \
        fwd_simple_body<DT>(a);                                                                \
    }
SIMPLE_KERNEL(dattn_fwd_simple_f32, 0)
SIMPLE_KERNEL(dattn_fwd_simple_f16, 1)
SIMPLE_KERNEL(dattn_fwd_simple_bf16, 2)

/* HF padded rows under dropout on the tensor-core path (that kernel leaves them
 * unwritten): one warp per row, the kept-mask mean of v over all len keys, summed in key
 * order as the simple kernel does. Launched only for padded calls with a mask. */
template <int DT>
DATTN_DEV void padrows_drop_body(const dattn_fwd_args &a)
{
    const int lane = threadIdx.x & 31;
    const int b = blockIdx.z, h = blockIdx.y, i = blockIdx.x * SIMPLE_ROWS + (threadIdx.x >> 5);
    int tok0, len;
    dev_seq(a, b, tok0, len);
    if (i >= len || a.mask[(int64_t)b * a.m_sb + (int64_t)i * a.m_sl] != 0) return;
    const int64_t vo = (int64_t)b * a.v_sb + (int64_t)tok0 * a.v_sl + (int64_t)h * a.v_sh;
    float acc[SIMPLE_DMAX / 32];
#pragma unroll
    for (int t = 0; t < SIMPLE_DMAX / 32; t++) acc[t] = 0.f;
    for (int j0 = 0; j0 < len; j0 += 32) {
        const int j = j0 + lane;
        uint32_t kb = __ballot_sync(0xffffffffu, j < len && dev_keep(a, b, h, i, j));
        while (kb) {
            const int jj = __ffs(kb) - 1;
            kb &= kb - 1;
            const int64_t ro = vo + (int64_t)(j0 + jj) * a.v_sl;
#pragma unroll
            for (int t = 0; t < SIMPLE_DMAX / 32; t++)
                if (lane + 32 * t < a.D) acc[t] += ld_el<DT>(a.v, ro + lane + 32 * t);
        }
    }
    const float pinv = a.drop_scale / (float)len;
    const int64_t oo = (int64_t)b * a.o_sb + (int64_t)(tok0 + i) * a.o_sl + (int64_t)h * a.o_sh;
#pragma unroll
    for (int t = 0; t < SIMPLE_DMAX / 32; t++)
        if (lane + 32 * t < a.D) st_el<DT>(a.out, oo + lane + 32 * t, acc[t] * pinv);
}

#define PADDROP_KERNEL(NAME, DT)                                                               \
    extern "C" __global__ void __launch_bounds__(32 * SIMPLE_ROWS)                            \
        NAME(const __grid_constant__ dattn_fwd_args a)                                         \
    {                                                                                          \
        padrows_drop_body<DT>(a);                                                              \
    }
PADDROP_KERNEL(dattn_fwd_padrows_drop_f32, 0)
PADDROP_KERNEL(dattn_fwd_padrows_drop_f16, 1)
PADDROP_KERNEL(dattn_fwd_padrows_drop_bf16, 2)

extern "C" cudaError_t dattn_launch_fwd_padrows_drop(const dattn_fwd_args *a, int dtype, int grid_x,
                                                     int grid_y, int grid_z, cudaStream_t stream)
{
    void (*k)(dattn_fwd_args) = dtype == 0   ? dattn_fwd_padrows_drop_f32
                                : dtype == 1 ? dattn_fwd_padrows_drop_f16
                                             : dattn_fwd_padrows_drop_bf16;
    k<<<dim3(grid_x, grid_y, grid_z), 32 * SIMPLE_ROWS, 0, stream>>>(*a);
    return cudaGetLastError();
}

extern "C" size_t dattn_simple_smem(int D)
{
    return sizeof(float) * (size_t)(SIMPLE_ROWS * D + 2 * SIMPLE_KC * (D + 1)) +
           2 * DATTN_CUDA_TAB_MAX;
}

extern "C" int dattn_simple_rows(void) { return SIMPLE_ROWS; }

extern "C" cudaError_t dattn_launch_fwd_simple(const dattn_fwd_args *a, int dtype, int grid_x,
                                               int grid_y, int grid_z, cudaStream_t stream)
{
    void (*k)(dattn_fwd_args) = dtype == 0   ? dattn_fwd_simple_f32
                                : dtype == 1 ? dattn_fwd_simple_f16
                                             : dattn_fwd_simple_bf16;
    const size_t smem = dattn_simple_smem(a->D);
    cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    k<<<dim3(grid_x, grid_y, grid_z), 32 * SIMPLE_ROWS, smem, stream>>>(*a);
    return cudaGetLastError();
}

/* ------------------------------------------------------------------ prologue kernels */

/* First valid key and last valid key + 1 of each sequence of a padded call with a mask
 * ({0, 0} when it has none). */
extern "C" __global__ void dattn_fwd_keyrange(const __grid_constant__ dattn_fwd_args a, int32_t *kvr)
{
    __shared__ int slo[32], shi[32];
    const int b = blockIdx.x;
    int lo = 0x7fffffff, hi = -1;
    for (int j = threadIdx.x; j < a.L; j += blockDim.x)
        if (a.mask[(int64_t)b * a.m_sb + (int64_t)j * a.m_sl]) {
            lo = min(lo, j);
            hi = max(hi, j);
        }
    lo = __reduce_min_sync(0xffffffffu, lo);
    hi = __reduce_max_sync(0xffffffffu, hi);
    const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if ((threadIdx.x & 31) == 0) {
        slo[w] = lo;
        shi[w] = hi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int t = 1; t < nw; t++) {
            lo = min(lo, slo[t]);
            hi = max(hi, shi[t]);
        }
        kvr[2 * b] = hi < 0 ? 0 : lo;
        kvr[2 * b + 1] = hi + 1;
    }
}

/* Mean of v over all L keys of each (sequence, head): the output of HF padded rows. The
 * sum runs in a fixed order (deterministic). */
template <int DT>
DATTN_DEV void vmean_body(const dattn_fwd_args &a, float *vmean)
{
    __shared__ float red[256];
    const int bh = blockIdx.x, b = bh / a.H, h = bh % a.H, D = a.D;
    const int G = 256 / D, grp = threadIdx.x / D, d = threadIdx.x % D;
    float s = 0.f;
    if (grp < G) {
        const int64_t vo = (int64_t)b * a.v_sb + (int64_t)h * a.v_sh + d;
        for (int j = grp; j < a.L; j += G) s += ld_el<DT>(a.v, vo + (int64_t)j * a.v_sl);
    }
    red[threadIdx.x] = s;
    __syncthreads();
    if ((int)threadIdx.x < D) {
        float t = 0.f;
        for (int q = 0; q < G; q++) t += red[q * D + threadIdx.x];
        vmean[(int64_t)bh * D + threadIdx.x] = t * (1.0f / (float)a.L);
    }
}

extern "C" __global__ void __launch_bounds__(256) dattn_fwd_vmean_f32(const __grid_constant__ dattn_fwd_args a, float *vm) { vmean_body<0>(a, vm); }
extern "C" __global__ void __launch_bounds__(256) dattn_fwd_vmean_f16(const __grid_constant__ dattn_fwd_args a, float *vm) { vmean_body<1>(a, vm); }
extern "C" __global__ void __launch_bounds__(256) dattn_fwd_vmean_bf16(const __grid_constant__ dattn_fwd_args a, float *vm) { vmean_body<2>(a, vm); }

/* p2c of saturated tiles: kps[plane(b, h)][side][j] = k_j . pq[h][sat_pos | sat_neg] (fp32).
 * One thread per key row; rows are 16-byte aligned (the tensor-core path's condition).
 * HL (for the OG kernels, sm90w1g): the same sum c as a bf16 pair in the same 4 bytes, hi =
 * bf16(c) in the low half, lo = bf16(c - hi) in the high half (hi + lo = c to ~2^-16
 * relative; bf16 for both dtypes: its range is fp32's, so no c overflows it; lo = 0 when hi
 * is not finite). */
template <int BF, int HL = 0>
DATTN_DEV void kps_body(const dattn_fwd_args &a, float *kps, int64_t nrows)
{
    __shared__ float pqs[2][128];
    const int h = blockIdx.y, D = a.D;
    for (int t = threadIdx.x; t < 2 * D; t += blockDim.x) {
        const int side = t / D, d = t % D;
        const int slot = side ? a.sat_neg : a.sat_pos;
        pqs[side][d] = h2f<BF>(((const uint16_t *)a.pq)[(int64_t)h * a.pq_sh + (int64_t)slot * a.pq_ss + d]);
    }
    __syncthreads();
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nrows) return;
    int64_t ko, po;
    if (a.packed) {
        ko = t * a.k_sl + (int64_t)h * a.k_sh;
        po = (int64_t)h * 2 * a.kps_ld + t;
    } else {
        const int64_t b = t / a.L, j = t % a.L;
        ko = b * a.k_sb + j * a.k_sl + (int64_t)h * a.k_sh;
        po = (b * a.H + h) * 2 * a.kps_ld + j;
    }
    const uint16_t *kr = (const uint16_t *)a.k + ko;
    float sp = 0.f, sn = 0.f;
    for (int ch = 0; ch < D / 8; ch++) {
        const uint4 x = *(const uint4 *)(kr + ch * 8);
        const uint32_t wv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const float kv = h2f<BF>((uint16_t)(wv[e >> 1] >> (16 * (e & 1))));
            sp = fmaf(kv, pqs[0][ch * 8 + e], sp);
            sn = fmaf(kv, pqs[1][ch * 8 + e], sn);
        }
    }
    if constexpr (HL) {
        const uint16_t hp = f2h<1>(sp), hn = f2h<1>(sn);
        const float rp = h2f<1>(hp), rn = h2f<1>(hn);
        const uint16_t lp = (hp & 0x7F80u) != 0x7F80u ? f2h<1>(sp - rp) : (uint16_t)0;
        const uint16_t ln = (hn & 0x7F80u) != 0x7F80u ? f2h<1>(sn - rn) : (uint16_t)0;
        ((uint32_t *)kps)[po] = (uint32_t)hp | ((uint32_t)lp << 16);
        ((uint32_t *)kps)[po + a.kps_ld] = (uint32_t)hn | ((uint32_t)ln << 16);
    } else {
        kps[po] = sp;
        kps[po + a.kps_ld] = sn;
    }
}

extern "C" __global__ void __launch_bounds__(128) dattn_fwd_kps_f16(const __grid_constant__ dattn_fwd_args a, float *kps, int64_t n) { kps_body<0>(a, kps, n); }
extern "C" __global__ void __launch_bounds__(128) dattn_fwd_kps_bf16(const __grid_constant__ dattn_fwd_args a, float *kps, int64_t n) { kps_body<1>(a, kps, n); }
extern "C" __global__ void __launch_bounds__(128) dattn_fwd_kps_hl_f16(const __grid_constant__ dattn_fwd_args a, float *kps, int64_t n) { kps_body<0, 1>(a, kps, n); }
extern "C" __global__ void __launch_bounds__(128) dattn_fwd_kps_hl_bf16(const __grid_constant__ dattn_fwd_args a, float *kps, int64_t n) { kps_body<1, 1>(a, kps, n); }

/* kps_hl: the kps planes as bf16 (hi, lo) pairs (the OG kernels, sm90w1g) instead of fp32 */
extern "C" cudaError_t dattn_launch_fwd_prep(const dattn_fwd_args *a, int dtype, int32_t *kvr,
                                             float *vmean, float *kps, int kps_hl, cudaStream_t stream)
{
    if (kvr) dattn_fwd_keyrange<<<a->B, 256, 0, stream>>>(*a, kvr);
    if (vmean) {
        void (*k)(dattn_fwd_args, float *) = dtype == 0   ? dattn_fwd_vmean_f32
                                             : dtype == 1 ? dattn_fwd_vmean_f16
                                                          : dattn_fwd_vmean_bf16;
        k<<<a->B * a->H, 256, 0, stream>>>(*a, vmean);
    }
    if (kps) {
        const int64_t nrows = a->packed ? a->kps_ld : (int64_t)a->B * a->L;
        const int64_t nblk = (nrows + 127) / 128;
        if (nblk > 0) {
            void (*k)(dattn_fwd_args, float *, int64_t) = kps_hl ? (dtype == 2 ? dattn_fwd_kps_hl_bf16 : dattn_fwd_kps_hl_f16)
                                                                 : (dtype == 2 ? dattn_fwd_kps_bf16 : dattn_fwd_kps_f16);
            k<<<dim3((unsigned)nblk, a->H), 128, 0, stream>>>(*a, kps, nrows);
        }
    }
    return cudaGetLastError();
}

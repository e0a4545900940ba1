/* Stamps out the tensor-core backward kernels of head dim DATTN_BWD_D (bwd_sm80.cuh) and
 * their host launcher dattn_launch_bwd_<PFX>_d<D>. Included by bwd_sm80_d64.cu /
 * bwd_sm80_d128.cu / bwd_tc3_d64.cu (one translation unit per variant keeps the build
 * parallel). DATTN_BWD_V3 = 1 (tc3): the sliding C window, two CTAs per SM; PFX tc3.
 * DATTN_BWD_V3 = 2 (tc3b, bwd_tc3b_d64.cu): tc3 with the lean tile loop; PFX tc3b.
 * DATTN_BWD_V3 = 3 (tc3p, bwd_tc3p_d64.cu): tc3b with P rounded once for dV; PFX tc3p.
 * DATTN_BWD_V3 = 5 (tc3k, bwd_tc3k_d64.cu): tc3b with the saturated column constants on
 * all four warps; PFX tc3k.
 * DATTN_BWD_V3 = 6 (tc3c, bwd_tc3c_d64.cu): tc3s and tc3k together; PFX tc3c.
 * DATTN_BWD_V3 = 7 (tc3d, bwd_tc3d_d64.cu): tc3c with the lean P / dS loop; PFX tc3d.
 * DATTN_BWD_V3 = 8 (tc3e, bwd_tc3e_d64.cu, with DATTN_BWD_TILE_CLASSES): tc3d whose dq kernel
 * compiles the tile body per tile class (band / the others); PFX tc3e; dq kernels only (the
 * dkdv kernel is tc3d's).
 * DATTN_BWD_V3 = 9 (tc3f, bwd_tc3f_d64.cu, with DATTN_BWD_TILE_CLASSES): tc3e whose dkdv kernel
 * compiles the tile body per tile class too; PFX tc3f.
 * DATTN_BWD_V3 = 9 with DATTN_BWD_DI_FUSED (tc3g, bwd_tc3g_d64.cu): tc3f whose dq kernel computes
 * D_i of its rows (no D_i pass); PFX tc3g; dq kernels only (the dkdv kernel is tc3f's).
 * DATTN_BWD_V3 = 9 with DATTN_BWD_DI_FUSED and DATTN_BWD_TMA (tc3t, bwd_tc3t_d64.cu): tc3g whose
 * full column tiles after the first are loaded by TMA; PFX tc3t; both kernels (each takes its
 * two tensor maps as a second parameter; its launcher builds them and returns
 * cudaErrorNotSupported when a tensor cannot be mapped).
 * DATTN_BWD_V3 = 4 (tc3s, bwd_tc3s_d64.cu): tc3b with the run-sum scatter; PFX tc3s. */
#include "bwd_sm80.cuh"

#include <cuda_runtime.h>

#ifndef DATTN_BWD_V3
#define DATTN_BWD_V3 0
#endif
/* every round-3 variant: two CTAs (8 warps) per SM */
#define DATTN_BWD_MINB (DATTN_BWD_V3 ? 2 : 1)
#ifndef DATTN_BWD_DI_FUSED
#define DATTN_BWD_DI_FUSED 0
#endif
#ifndef DATTN_BWD_TMA
#define DATTN_BWD_TMA 0
#endif
#if DATTN_BWD_TMA
#define DATTN_BWD_PFX tc3t
#elif DATTN_BWD_V3 == 9 && DATTN_BWD_DI_FUSED
#define DATTN_BWD_PFX tc3g
#elif DATTN_BWD_V3 == 9
#define DATTN_BWD_PFX tc3f
#elif DATTN_BWD_V3 == 8
#define DATTN_BWD_PFX tc3e
#elif DATTN_BWD_V3 == 7
#define DATTN_BWD_PFX tc3d
#elif DATTN_BWD_V3 == 6
#define DATTN_BWD_PFX tc3c
#elif DATTN_BWD_V3 == 5
#define DATTN_BWD_PFX tc3k
#elif DATTN_BWD_V3 == 4
#define DATTN_BWD_PFX tc3s
#elif DATTN_BWD_V3 == 3
#define DATTN_BWD_PFX tc3p
#elif DATTN_BWD_V3 == 2
#define DATTN_BWD_PFX tc3b
#elif DATTN_BWD_V3
#define DATTN_BWD_PFX tc3
#else
#define DATTN_BWD_PFX sm80
#endif

#define DATTN_BWD_CAT2(a, b) a##b
#define DATTN_BWD_CAT(a, b) DATTN_BWD_CAT2(a, b)
#define DATTN_BWD_CAT3(a, b, c) DATTN_BWD_CAT(DATTN_BWD_CAT(a, b), c)

/* tc3t: the kernel's tensor maps, a second __grid_constant__ parameter */
#if DATTN_BWD_TMA
#define DATTN_BWD_MAPS_PARAM , const __grid_constant__ dattn_bwd_maps T
#define DATTN_BWD_MAPS &T
#else
#define DATTN_BWD_MAPS_PARAM
#define DATTN_BWD_MAPS nullptr
#endif

#define DATTN_BWD_KERNEL(...) DATTN_BWD_KERNEL2(__VA_ARGS__)
#define DATTN_BWD_KERNEL2(PFX, D, BN, DT, BF, KV, V3, MINB)                                    \
    extern "C" __global__ void __launch_bounds__(128, MINB)                                    \
        dattn_bwd_##PFX##_##DT##_d##D##_kv##KV(const __grid_constant__ dattn_bwd_args A DATTN_BWD_MAPS_PARAM) \
    {                                                                                          \
        DATTN_BWD_ARCH_BODY(bwd_sm80_body<D, BN, BF, KV, V3>(A, DATTN_BWD_MAPS));              \
    }

/* Only sm_90 runs these kernels (launch.cu routes every other arch to the simple
 * backward); other targets compile a trapping stub. */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define DATTN_BWD_ARCH_BODY(...) __VA_ARGS__
#else
#define DATTN_BWD_ARCH_BODY(...) __trap()
#endif

/* (tc3e, DATTN_BWD_TILE_CLASSES: the dq kernels only; its dkdv kernel is tc3d's, launched by
 * bwd_sm80.cu; tc3g: the same, its dkdv kernel is tc3f's; tc3t: both, tc3f's dkdv kernel with
 * the TMA loads) */
#define DATTN_BWD_HAS_KV1 (!DATTN_BWD_TILE_CLASSES || (DATTN_BWD_V3 == 9 && !DATTN_BWD_DI_FUSED) || DATTN_BWD_TMA)
DATTN_BWD_KERNEL(DATTN_BWD_PFX, DATTN_BWD_D, DATTN_BWD_BN, f16, 0, 0, DATTN_BWD_V3, DATTN_BWD_MINB)
#if DATTN_BWD_HAS_KV1
DATTN_BWD_KERNEL(DATTN_BWD_PFX, DATTN_BWD_D, DATTN_BWD_BN, f16, 0, 1, DATTN_BWD_V3, DATTN_BWD_MINB)
#endif
DATTN_BWD_KERNEL(DATTN_BWD_PFX, DATTN_BWD_D, DATTN_BWD_BN, bf16, 1, 0, DATTN_BWD_V3, DATTN_BWD_MINB)
#if DATTN_BWD_HAS_KV1
DATTN_BWD_KERNEL(DATTN_BWD_PFX, DATTN_BWD_D, DATTN_BWD_BN, bf16, 1, 1, DATTN_BWD_V3, DATTN_BWD_MINB)
#endif

#define DATTN_BWD_K(DT, KV) \
    DATTN_BWD_CAT(DATTN_BWD_CAT3(DATTN_BWD_CAT3(dattn_bwd_, DATTN_BWD_PFX, _##DT##_d), DATTN_BWD_D, _kv), KV)

/* Shared memory of one CTA for att span S (tc3: the C window does not depend on S). */
extern "C" size_t DATTN_BWD_CAT(DATTN_BWD_CAT3(dattn_bwd_, DATTN_BWD_PFX, _smem_d), DATTN_BWD_D)(int S)
{
    typedef bwd_geom<DATTN_BWD_D, DATTN_BWD_BN, DATTN_BWD_V3> G;
    const size_t cols = DATTN_BWD_V3 ? (size_t)G::CW + 8 : (size_t)(2 * S + 8);
    return (size_t)G::SMEM_FIXED + (size_t)G::BM * cols * 2;
}

/* dq kernel (which = 0) or dkdv kernel (which = 1), grid (A->tcg, H): CTA (g, h) runs a
 * contiguous share of head h's B * ceil(L / 64) row blocks (bwd_sm80_body). */
extern "C" cudaError_t DATTN_BWD_CAT(DATTN_BWD_CAT3(dattn_launch_bwd_, DATTN_BWD_PFX, _d), DATTN_BWD_D)(
    const dattn_bwd_args *A, int bf, int which, cudaStream_t stream)
{
#if DATTN_BWD_TMA
    typedef void (*kfn)(dattn_bwd_args, dattn_bwd_maps);
    /* the maps of this kernel's Y and W (dq kernel: K, V; dkdv kernel: Q, dO): boxes of BN rows
     * of one head (rows: L per sequence padded, the T tokens packed) */
    const dattn_fwd_args &a = A->f;
    const int64_t outer = a.packed ? 1 : a.B, rows = a.packed ? A->T : a.L;
    const void *yp = which ? a.q : a.k, *wp = which ? A->dout : a.v;
    const int64_t y_sb = which ? a.q_sb : a.k_sb, y_sl = which ? a.q_sl : a.k_sl, y_sh = which ? a.q_sh : a.k_sh;
    const int64_t w_sb = which ? A->do_sb : a.v_sb, w_sl = which ? A->do_sl : a.v_sl, w_sh = which ? A->do_sh : a.v_sh;
    dattn_bwd_maps maps;
    int yrf = 0, wrf = 0;
    if (DATTN_BWD_D != 64 || a.D != 64 ||
        dattn_tma_rows_map(&maps.y, &yrf, yp, outer, rows, a.H, y_sb, y_sl, y_sh, DATTN_BWD_BN) != cudaSuccess ||
        dattn_tma_rows_map(&maps.w, &wrf, wp, outer, rows, a.H, w_sb, w_sl, w_sh, DATTN_BWD_BN) != cudaSuccess)
        return cudaErrorNotSupported; /* (the caller takes tc3g's kernel instead) */
    maps.yrf = yrf;
    maps.wrf = wrf;
#else
    typedef void (*kfn)(dattn_bwd_args);
#endif
#if DATTN_BWD_TILE_CLASSES && (DATTN_BWD_V3 == 8 || DATTN_BWD_DI_FUSED) && !DATTN_BWD_TMA
    if (which) return cudaErrorInvalidValue; /* (tc3e, tc3g: no dkdv kernel of their own) */
    const kfn k = bf ? DATTN_BWD_K(bf16, 0) : DATTN_BWD_K(f16, 0);
#else
    const kfn k = bf ? (which ? DATTN_BWD_K(bf16, 1) : DATTN_BWD_K(bf16, 0))
                     : (which ? DATTN_BWD_K(f16, 1) : DATTN_BWD_K(f16, 0));
#endif
    const size_t smem = DATTN_BWD_CAT(DATTN_BWD_CAT3(dattn_bwd_, DATTN_BWD_PFX, _smem_d), DATTN_BWD_D)(A->f.S);
    cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
#if DATTN_BWD_V3
    /* the whole unified L1 as shared memory, so that two CTAs fit */
    e = cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
    if (e != cudaSuccess) return e;
#endif
    const dim3 grid((unsigned)A->tcg, (unsigned)A->f.H);
#if DATTN_BWD_TMA
    k<<<grid, 128, smem, stream>>>(*A, maps);
#else
    k<<<grid, 128, smem, stream>>>(*A);
#endif
    return cudaGetLastError();
}

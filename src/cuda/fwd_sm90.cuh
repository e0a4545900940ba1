/* dattn forward on Hopper (sm_90a): the tensor-core body of fwd_sm80.cuh with V90 = 1.
 *
 * What changes against the sm_80 kernel (everything else -- tile classes, the band
 * machinery for c2p / p2c, the saturated constants, masks, dropout, padded rows, packed
 * sequences, the epilogue -- is the same code):
 *   - CTA = two warpgroups (8 warps x one 16-row strip, BM = 128); BN = 128 or 64 keys at
 *     D = 64, 64 at D = 128 (shared memory); or (D = 64, DATTN_CUDA_FWD=sm90w1 / sm90w1ov)
 *     one warpgroup of 4 warps x two 16-row strips (BM = 128, BN = 64, the mma.sync
 *     kernel's geometry, two CTAs per SM: one CTA's softmax overlaps the other's wgmma);
 *     each strip is its own m64 product and commit group (strip 0's softmax runs while
 *     strip 1's S is in flight); OV bit 0 loads the next K side during the softmax, bit 1
 *     takes the lean loop (fwd_sm80_body's LN: hoisted K / V source pointers, no zero fill
 *     of the score accumulators, p2c constants loaded straight into them, precomputed
 *     wgmma descriptors), bit 2 the pipelined band products (BP), bit 3 the saturated /
 *     plain tile order (SP: S before the V load, P V before the rest of the next K side),
 *     bit 4 (with bit 2) BE: the band tile's c2p-scratch barrier after the first p2c
 *     group's products, the first key tile's ring rows through running pointers, the
 *     saturated c2p row constants only in CTAs with a saturated tile; bit 5 (with bit 4) BK:
 *     a band tile's K side (window table, ring rows) loaded while P V runs; bit 6 (with
 *     bits 1, 2, without 0, 3, 4) OG: a saturated tile's p2c column constants enter through one
 *     more (bf16) k16 step of the score product, ones x their (hi, lo) pairs, instead of
 *     being loaded into the accumulators;
 *   - S = Q K^T is wgmma.m64n64k16 (x D/16) per warpgroup with Q from registers (the
 *     mma.m16n8k16 A fragments the band code holds anyway) and K read through a K-major
 *     128-byte-swizzle descriptor -- no ldmatrix for K, 4 instructions instead of 32 HMMA
 *     + 16 LDSM per warp; it is issued asynchronously right after the score accumulators
 *     are initialised (band c2p values / saturated p2c constants / zero) and runs while
 *     the band code computes the p2c tile;
 *   - O += P V is wgmma.m64n64k16 (x BN/16) with P from registers (packed from the score
 *     accumulators, the same A fragment as mma.sync) and V through an MN-major
 *     (transposed) descriptor -- no ldmatrix.trans;
 *   - the K / V tiles start on 1024-byte boundaries (the swizzle atoms) and at D = 128 are
 *     stored as two 64-column panels (kv_swz); cp.async writes are published to wgmma by
 *     fence.proxy.async before the barriers.
 * The layouts are those of sm90.cuh (checked on the GPU by tests/test_wgmma.cu). */
#ifndef DATTN_CUDA_FWD_SM90_CUH
#define DATTN_CUDA_FWD_SM90_CUH

#define DATTN_FWD_SM90 1
#include "fwd_sm80.cuh"

#include <cuda_runtime.h>

/* one translation unit per head dim (fwd_d64_sm90.cu, fwd_d128_sm90.cu) enables its own */
#define DATTN_FWD90_IF_64(...)
#define DATTN_FWD90_IF_128(...)

#define DATTN_BF90_f16 0
#define DATTN_BF90_bf16 1

#define DATTN_FWD90_DEFINE(D, DT, NW, MS, BN, OV)                                                \
    extern "C" __global__ void __launch_bounds__(32 * NW, NW == 4 ? 2 : 1)                     \
        dattn_fwd_sm90_d##D##_##DT##_n##BN##_w##NW##o##OV(const __grid_constant__ dattn_fwd_args a)  \
    {                                                                                          \
        fwd_sm80_body<D, NW, MS, BN, DATTN_BF90_##DT, 1, (OV & 1), ((OV >> 1) & 1), ((OV >> 2) & 1), ((OV >> 3) & 1), ((OV >> 4) & 1), ((OV >> 5) & 1), ((OV >> 6) & 1)>(a); \
    }                                                                                          \
    extern "C" cudaError_t dattn_launch_fwd_sm90_d##D##_##DT##_n##BN##_w##NW##o##OV(                         \
        const dattn_fwd_args *a, int grid_x, int grid_y, int grid_z, cudaStream_t stream)      \
    {                                                                                          \
        typedef fwd_geom<D, NW, MS, BN, 1, ((OV >> 1) & 1), ((OV >> 6) & 1)> G;                                                  \
        cudaError_t e = cudaFuncSetAttribute(dattn_fwd_sm90_d##D##_##DT##_n##BN##_w##NW##o##OV,               \
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,      \
                                             G::SMEM);                                         \
        if (e != cudaSuccess) return e;                                                        \
        dattn_fwd_sm90_d##D##_##DT##_n##BN##_w##NW##o##OV<<<dim3(grid_x, grid_y, grid_z), G::NTHR, G::SMEM,   \
                                             stream>>>(*a);                                    \
        return cudaGetLastError();                                                             \
    }                                                                                          \
    extern "C" int dattn_smem_fwd_sm90_d##D##_##DT##_n##BN##_w##NW##o##OV(void) { return fwd_geom<D, NW, MS, BN, 1, ((OV >> 1) & 1), ((OV >> 6) & 1)>::SMEM; }

#endif

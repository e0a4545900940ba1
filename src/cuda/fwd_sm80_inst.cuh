/* Stamps out the kernels of instances.def whose head dim is DATTN_INST_D, with their
 * host launchers. Included by fwd_sm80_d32.cu / _d64.cu / _d128.cu (one translation unit
 * per head dim keeps the build parallel). */
#include "fwd_sm80.cuh"

#include <cuda_runtime.h>

#define DATTN_BF_f16 0
#define DATTN_BF_bf16 1

template <int D, int NW, int MS, int BN, int BF, int ON>
DATTN_DEV void fwd_sm80_entry(const dattn_fwd_args &a)
{
    if constexpr (ON) fwd_sm80_body<D, NW, MS, BN, BF>(a);
    else __trap();
}

/* BIG configurations need sm_90's shared memory; elsewhere their body compiles to a trap
 * (the launcher never selects them there). */
#define DATTN_FWD_DEFINE(D, DT, NW, MS, BN, BIG)                                                   \
    extern "C" __global__ void __launch_bounds__(32 * NW, 1)                                  \
        dattn_fwd_sm80_d##D##_##DT##_w##NW##s##MS##n##BN(const __grid_constant__ dattn_fwd_args a)     \
    {                                                                                          \
        fwd_sm80_entry<D, NW, MS, BN, DATTN_BF_##DT, (!BIG || DATTN_ARCH_BIG_OK)>(a);              \
    }                                                                                          \
    extern "C" cudaError_t dattn_launch_fwd_sm80_d##D##_##DT##_w##NW##s##MS##n##BN(                    \
        const dattn_fwd_args *a, int grid_x, int grid_y, int grid_z, cudaStream_t stream)      \
    {                                                                                          \
        typedef fwd_geom<D, NW, MS, BN> G;                                                         \
        cudaError_t e = cudaFuncSetAttribute(dattn_fwd_sm80_d##D##_##DT##_w##NW##s##MS##n##BN,         \
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,      \
                                             G::SMEM);                                         \
        if (e != cudaSuccess) return e;                                                        \
        dattn_fwd_sm80_d##D##_##DT##_w##NW##s##MS##n##BN<<<dim3(grid_x, grid_y, grid_z), G::NTHR,      \
                                                     G::SMEM, stream>>>(*a);                   \
        return cudaGetLastError();                                                             \
    }                                                                                          \
    extern "C" int dattn_smem_fwd_sm80_d##D##_##DT##_w##NW##s##MS##n##BN(void)                         \
    {                                                                                          \
        return fwd_geom<D, NW, MS, BN>::SMEM;                                                      \
    }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define DATTN_ARCH_BIG_OK 0
#else
#define DATTN_ARCH_BIG_OK 1
#endif

#define DATTN_FWD_IF_32(...)
#define DATTN_FWD_IF_64(...)
#define DATTN_FWD_IF_128(...)

/* Tensor-core backward, round 3: tc3g whose column tiles come by TMA (tc3t, opt-in
 * DATTN_CUDA_BWD=tc3t), head dim 64, sm_90: bwd_sm80.cuh with V3 = 9 (tc3f),
 * DATTN_BWD_DI_FUSED (its dq kernel computes D_i, as tc3g's) and DATTN_BWD_TMA. Both kernels
 * are stamped here (tc3f's dkdv kernel with the TMA loads). The prefetch of a full column
 * tile's Y / W (dq kernel: K, V; dkdv kernel: Q, dO) is one mbarrier expect-tx and two bulk
 * tensor copies issued by thread 0 (tma.cuh) instead of four cp.async per thread with their
 * 64-bit address arithmetic (~43 instructions per warp and step, NOTES "The nopos backward
 * core against flash"); the first tile of a row block and a partial last one keep the cp.async
 * loader. The same bytes land at the same places (the 128-byte swizzle is swz<64>): bitwise
 * tc3g. */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 32
#define DATTN_BWD_V3 9
#define DATTN_BWD_TILE_CLASSES 1
#define DATTN_BWD_DI_FUSED 1
#define DATTN_BWD_TMA 1
#include "bwd_sm80_inst.cuh"

/* Tensor-core backward, round 3 (tc3), head dim 64: the sliding C window (bwd_sm80.cuh,
 * bwd_v3_flush), BN 32, ~103 KB of shared memory: two CTAs (8 warps) per SM. The D = 64
 * default since its H200 run (1.3-1.6x the sm80 kernels); DATTN_CUDA_BWD=tc2 pins those
 * (launch.cu). */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 32
#define DATTN_BWD_V3 1
#include "bwd_sm80_inst.cuh"

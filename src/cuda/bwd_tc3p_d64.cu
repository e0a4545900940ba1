/* Tensor-core backward, tc3b with P rounded once for dV (tc3p, opt-in: DATTN_CUDA_BWD=tc3p),
 * head dim 64: the lean-loop round-3 kernels (bwd_sm80.cuh template flag V3 = 3) whose dkdv
 * kernel computes dV = P^T dO with P rounded once to the storage dtype (one MMA per fragment
 * instead of tc3b's hi + lo pair), as FlashAttention and transformers' eager path do. dQ, dK,
 * dpk, dpq bitwise the same as tc3b; dV within the P-rounding bound of tests/test_cuda_bwd.c. */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 32
#define DATTN_BWD_V3 3
#include "bwd_sm80_inst.cuh"

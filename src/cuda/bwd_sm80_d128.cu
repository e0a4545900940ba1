/* Tensor-core backward kernels, head dim 128 (bwd_sm80.cuh). */
#define DATTN_BWD_D 128
#define DATTN_BWD_BN 32
#include "bwd_sm80_inst.cuh"

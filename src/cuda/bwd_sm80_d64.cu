/* Tensor-core backward kernels, head dim 64 (bwd_sm80.cuh). */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 64
#include "bwd_sm80_inst.cuh"

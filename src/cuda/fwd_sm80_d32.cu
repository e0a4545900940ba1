/* Tensor-core forward kernels with head dim 32 (see fwd_sm80.cuh, instances.def). */
#include "fwd_sm80_inst.cuh"

#undef DATTN_FWD_IF_32
#define DATTN_FWD_IF_32(...) DATTN_FWD_DEFINE(__VA_ARGS__)
#define X(D, DT, NW, MS, BN, BIG) DATTN_FWD_IF_##D(D, DT, NW, MS, BN, BIG)
#include "instances.def"
#undef X

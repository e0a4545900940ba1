/* Tensor-core forward kernels with head dim 64 (see fwd_sm80.cuh, instances.def). */
#include "fwd_sm80_inst.cuh"

#undef DATTN_FWD_IF_64
#define DATTN_FWD_IF_64(...) DATTN_FWD_DEFINE(__VA_ARGS__)
#define X(D, DT, NW, MS, BN, BIG) DATTN_FWD_IF_##D(D, DT, NW, MS, BN, BIG)
#include "instances.def"
#undef X

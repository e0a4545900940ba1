/* Hopper (sm_90a) forward kernels with head dim 128 (fwd_sm90.cuh, instances_sm90.def).
 * Named *_sm90.cu: the Makefile builds it for sm_90a alone. */
#include "fwd_sm90.cuh"

#undef DATTN_FWD90_IF_128
#define DATTN_FWD90_IF_128(...) DATTN_FWD90_DEFINE(__VA_ARGS__)
#define Y(D, DT, NW, MS, BN, OV) DATTN_FWD90_IF_##D(D, DT, NW, MS, BN, OV)
#include "instances_sm90.def"
#undef Y

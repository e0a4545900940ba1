/* Tensor-core backward, round 3, lean tile loop + run-sum scatter + four-warp saturated
 * constants (tc3c, the D = 64 default; DATTN_CUDA_BWD=tc3c names it, =tc3b pins the previous
 * default), head dim 64: bwd_sm80.cuh template flag V3 = 6 = tc3s (V3 = 4) and tc3k (V3 = 5)
 * together. Deterministic; not bitwise tc3b. */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 32
#define DATTN_BWD_V3 6
#include "bwd_sm80_inst.cuh"

/* Tensor-core backward, round 3: tc3c with the lean P / dS loop (tc3d, the D = 64
 * default since bench/results/gpu-2026-11-30-tc3d: 1.04-1.11x tc3c), head dim 64: bwd_sm80.cuh template flag V3 = 7 = tc3c (V3 = 6) + the
 * validity of the rows / columns past len folded into lse = +inf when there is no mask (no
 * per-element tests), radd - lse once per row and tile in the dq kernel. Bitwise tc3c. */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 32
#define DATTN_BWD_V3 7
#include "bwd_sm80_inst.cuh"

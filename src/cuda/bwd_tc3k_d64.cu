/* Tensor-core backward, tc3b with the saturated column constants on all four warps (tc3k,
 * opt-in: DATTN_CUDA_BWD=tc3k), head dim 64: bwd_sm80.cuh template flag V3 = 5. Each warp
 * sums a quarter of d for 8 of the tile's columns and two xor shuffles add the quarters in a
 * fixed order (deterministic; not bitwise tc3b: the summation order of those constants
 * differs). In the dkdv kernel the column facts' raw lse / D_i of tile n + 1 are copied by
 * cp.async with its Q / dO (OFF_CR), so warp 0 reads them from shared memory at tile n + 1
 * instead of an L2 round trip while warps 1-3 wait (the facts are bit for bit tc3b's).
 * Everything else is tc3b's code. */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 32
#define DATTN_BWD_V3 5
#include "bwd_sm80_inst.cuh"

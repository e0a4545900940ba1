/* Tensor-core backward, round 3: tc3d with the column-tile body compiled per tile class (tc3e,
 * the D = 64 default from bench/results/gpu-2026-11-30-tc3e, 1.01-1.04x tc3d, until tc3f), head dim 64: bwd_sm80.cuh template flag V3 = 8 = tc3d (V3 = 7)
 * + the column-tile body compiled twice, for band tiles and for the others (plain /
 * saturated), chosen per tile (uniform), so that plain and saturated tiles run none of the
 * band path's tests and branches (the dq kernels only: tc3e's dkdv kernel is tc3d's, two
 * bodies spill it). DATTN_BWD_TILE_CLASSES switches the lambda in (bwd_sm80.cuh's tile
 * loop). Bitwise tc3d. */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 32
#define DATTN_BWD_V3 8
#define DATTN_BWD_TILE_CLASSES 1
#include "bwd_sm80_inst.cuh"

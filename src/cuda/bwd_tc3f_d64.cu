/* Tensor-core backward, round 3: tc3e with the dkdv kernel's column-tile body compiled per
 * tile class too (tc3f, the D = 64 default since bench/results/gpu-2026-11-30-tc3f: 1.005-1.018x
 * tc3e), head dim 64: bwd_sm80.cuh template flag
 * V3 = 9 = tc3e (V3 = 8) whose dkdv kernel (kv1) also runs band tiles and plain / saturated
 * tiles through two bodies (DATTN_BWD_TILE_CLASSES). Bitwise tc3e. */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 32
#define DATTN_BWD_V3 9
#define DATTN_BWD_TILE_CLASSES 1
#include "bwd_sm80_inst.cuh"

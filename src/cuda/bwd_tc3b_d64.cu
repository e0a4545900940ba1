/* Tensor-core backward, round 3 with the lean tile loop (tc3b, opt-in: DATTN_CUDA_BWD=tc3b),
 * head dim 64: tc3's kernels (bwd_sm80.cuh template flag V3 = 2) with per-thread loader
 * pointers, unguarded full-tile loads, one window-table pass, the saturated column rows
 * staged once per row block and the dropout test hoisted; bitwise the same results as tc3. */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 32
#define DATTN_BWD_V3 2
#include "bwd_sm80_inst.cuh"

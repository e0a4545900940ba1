/* Tensor-core backward, round 3, lean tile loop + run-sum scatter (tc3s, opt-in:
 * DATTN_CUDA_BWD=tc3s), head dim 64: tc3b's kernels (bwd_sm80.cuh template flag V3 = 4) whose
 * band tiles in the log zone scatter ds into C by runs of equal slots (bwd_scatter_runs: fp32
 * run sums, one read-modify-write of C per run) instead of four serial passes. Deterministic;
 * not bitwise tc3b (fewer fp16 roundings of C). */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 32
#define DATTN_BWD_V3 4
#include "bwd_sm80_inst.cuh"

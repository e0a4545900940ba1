/* Tensor-core backward, round 3: tc3f whose dq kernel computes D_i = rowsum(dO * O) of its
 * rows in its prologue (tc3g, opt-in DATTN_CUDA_BWD=tc3g), head dim 64: bwd_sm80.cuh with
 * V3 = 9 (tc3f) and DATTN_BWD_DI_FUSED. The separate D_i launch (bwd_simple.cu
 * dattn_bwd_di_rows_*) goes away: one launch fewer per backward call, the host cost that
 * bounds small training steps. Only the dq kernels are stamped here; the dkdv kernel is
 * tc3f's, launched after this dq kernel (it reads D of every query row from the workspace).
 * Bitwise tc3f: the same D (the same fmaf chain and butterfly per row), the rest tc3f's code. */
#define DATTN_BWD_D 64
#define DATTN_BWD_BN 32
#define DATTN_BWD_V3 9
#define DATTN_BWD_TILE_CLASSES 1
#define DATTN_BWD_DI_FUSED 1
#include "bwd_sm80_inst.cuh"

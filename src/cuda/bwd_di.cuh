/* D_i = dout_i . out_i by rows, shared by the tensor-core backward's own D_i kernel
 * (bwd_simple.cu, dattn_bwd_di_rows_*) and the Hopper ws backward's pre-pass, which runs it in
 * one launch with the saturated planes (bwd_ws_d64_sm90.cu): the same body, the same bits. */
#ifndef DATTN_CUDA_BWD_DI_CUH
#define DATTN_CUDA_BWD_DI_CUH

#include "common.cuh"

DATTN_DEV float warp_sum(float x)
{
    /* xor butterfly: every lane ends with the same bits (fp addition is commutative) */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* D_i for the tensor-core backward: the same arithmetic per row as bwd_di_body (lane l sums
 * d = l, l + 32, ... with the same fmaf chain, then the same butterfly), so the same bits, but
 * each warp takes DI_NR rows and issues every load of them before the first sum: the one-row
 * warps of bwd_di_body have four loads in flight and exit, which made this pass ~30 us per
 * layer at B4 L2048 H12 (a quarter of it is memory time). D <= 32 * DI_NM. */
#define DI_NR 8 /* rows per warp */
#define DI_NM 4 /* elements per lane and row: D <= 128 */
#define DI_WPB 4 /* warps per block */
/* block (bx, h, b): rows (bx DI_WPB + warp) DI_NR .. + DI_NR - 1 of sequence b, head h */
template <int DT>
DATTN_DEV void bwd_di_rows_body(const dattn_bwd_args &A, int bx, int h, int b)
{
    const dattn_fwd_args &a = A.f;
    const int lane = threadIdx.x & 31;
    const int i0 = (bx * DI_WPB + (int)(threadIdx.x >> 5)) * DI_NR;
    int tok0, len;
    dev_seq(a, b, tok0, len);
    if (i0 >= len) return;
    float x[DI_NR][DI_NM], y[DI_NR][DI_NM];
#pragma unroll
    for (int r = 0; r < DI_NR; r++) {
        const int i = i0 + r < len ? i0 + r : i0; /* past len: a valid row, its sum not stored */
        const int64_t oo = (int64_t)b * a.o_sb + (int64_t)(tok0 + i) * a.o_sl + (int64_t)h * a.o_sh;
        const int64_t go = (int64_t)b * A.do_sb + (int64_t)(tok0 + i) * A.do_sl + (int64_t)h * A.do_sh;
#pragma unroll
        for (int m = 0; m < DI_NM; m++) {
            const int d = lane + 32 * m;
            x[r][m] = d < a.D ? ld_el<DT>(A.dout, go + d) : 0.f;
            y[r][m] = d < a.D ? ld_el<DT>(a.out, oo + d) : 0.f;
        }
    }
#pragma unroll
    for (int r = 0; r < DI_NR; r++) {
        float s = 0.f;
#pragma unroll
        for (int m = 0; m < DI_NM; m++)
            if (lane + 32 * m < a.D) s = fmaf(x[r][m], y[r][m], s);
        s = warp_sum(s);
        if (lane == 0 && i0 + r < len) A.di[ws_row(A, b, h, tok0, i0 + r)] = s;
    }
}

#endif

/* GPU unit test of the TMA layer (src/cuda/tma.cuh): tensor maps of 64-column row tiles,
 * bulk tensor loads completing on an mbarrier, the 128-byte swizzle of the tiles, and the
 * zeros of out-of-bounds rows, isolated from the kernels (which do not use it yet: NOTES
 * "Plan: the backward's Y / W tiles by TMA").
 *
 * One CTA loads a list of boxes (ROWS rows of one head, 64 columns) one after another through
 * one mbarrier, so its phase parity alternates (0, 1, 0, ...), into a 1024-byte-aligned shared
 * tile, and copies every tile's bytes out. The host checks each 16-byte chunk against the
 * source tensor at the place the 128-byte swizzle gives (= sm90.cuh's sw128_off and swz<64> of
 * the sm80 / backward kernels), zeros for rows past the tensor's rows; the output is poisoned
 * first. Layouts: a
 * padded [B][L][H][64] tensor, the K slice of a fused [B][L][3][H][64] QKV tensor (row stride
 * 3 H 64), a head-major [B][H][L][64] tensor (the map's rows-first order), a packed [T][H][64]
 * tensor; boxes at the start, in the middle and across the end.
 * Also the map builder's refusals (a stride or base not a multiple of 16 bytes).
 *
 * Exit 77 (skipped) without a compute capability 9.0 GPU. Build: make CUDA=1 tests-build. */
#include "../src/cuda/sm90.cuh"
#include "../src/cuda/tma.cuh"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsm90.h"

static int n_pass, n_fail;

/* coords[4 t .. 4 t + 3] = (head, row0, outer, unused) of box t */
template <int ROWS>
__global__ void __launch_bounds__(128) tma_kernel(const __grid_constant__ CUtensorMap map, int rows_first,
                                                  const int *coords, int nt, uint16_t *out)
{
    extern __shared__ __align__(1024) char smem_raw[];
    __shared__ __align__(8) uint64_t bar_mem;
    const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
    const uint32_t bar = smem_u32(&bar_mem);
    const char *tile = smem_raw + (base - raw);
    if (threadIdx.x == 0) {
        mbar_init(bar, 1);
        mbar_init_fence();
    }
    __syncthreads();
    for (int t = 0; t < nt; t++) {
        if (threadIdx.x == 0) {
            fence_proxy_async(); /* the previous tile's generic reads before the async overwrite */
            mbar_arrive_expect_tx(bar, ROWS * 128);
            tma_load_rows(base, &map, bar, rows_first, coords[4 * t], coords[4 * t + 1], coords[4 * t + 2]);
        }
        mbar_wait(bar, (uint32_t)(t & 1));
        for (int i = threadIdx.x; i < ROWS * 8; i += blockDim.x)
            ((uint4 *)(out + (size_t)t * ROWS * 64))[i] = ((const uint4 *)tile)[i];
        __syncthreads(); /* the tile is read before the next box overwrites it */
    }
}

/* Where the 128-byte swizzle puts 16-byte chunk ch (< 8) of row r of a 64-column tile: row r
 * at r * 128, the chunk at (ch ^ (r & 7)) * 16 (CU_TENSOR_MAP_SWIZZLE_128B on a 1024-byte-aligned
 * tile). Written out here on the host side (sw128_off is a device function: a host call of it
 * compiles to a stub that exits) and equal to sw128_off and swz<64> for ch < 8, which the
 * kernels read with. */
static uint32_t swizzled_chunk(int r, int ch)
{
    return (uint32_t)(r * 128 + ((ch ^ (r & 7)) << 4));
}

/* One layout: src holds outer x rows x heads x 64 elements at the given element strides (from
 * base element `off`); boxes at (head, row0, outer). */
template <int ROWS>
static void run(const char *name, int64_t outer, int64_t rows, int64_t heads, int64_t os, int64_t rs, int64_t hs,
                int64_t off, const int *boxes, int nb)
{
    printf("     tma %s: %d boxes of %d rows\n", name, nb, ROWS);
    const int64_t span = off + (outer - 1) * os + (rows - 1) * rs + (heads - 1) * hs + 64;
    uint16_t *h = (uint16_t *)malloc((size_t)span * 2);
    for (int64_t i = 0; i < span; i++) h[i] = (uint16_t)(rand() & 0xFFFF);
    uint16_t *d = 0, *dout = 0;
    int *dc = 0;
    CK(cudaMalloc(&d, (size_t)span * 2));
    CK(cudaMemcpy(d, h, (size_t)span * 2, cudaMemcpyHostToDevice));
    CUtensorMap map;
    int rows_first = -1;
    const cudaError_t e = dattn_tma_rows_map(&map, &rows_first, d + off, outer, rows, heads, os, rs, hs, ROWS);
    if (e != cudaSuccess) {
        printf("FAIL tma %s: dattn_tma_rows_map: %s\n", name, cudaGetErrorString(e));
        n_fail++;
        cudaFree(d);
        free(h);
        return;
    }
    const size_t nout = (size_t)nb * ROWS * 64;
    CK(cudaMalloc(&dout, nout * 2));
    CK(cudaMemset(dout, 0xFF, nout * 2));
    CK(cudaMalloc(&dc, (size_t)nb * 4 * sizeof(int)));
    CK(cudaMemcpy(dc, boxes, (size_t)nb * 4 * sizeof(int), cudaMemcpyHostToDevice));
    const int smem = ROWS * 128 + 1024;
    CK(cudaFuncSetAttribute(tma_kernel<ROWS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    tma_kernel<ROWS><<<1, 128, smem>>>(map, rows_first, dc, nb, dout);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    uint16_t *o = (uint16_t *)malloc(nout * 2);
    CK(cudaMemcpy(o, dout, nout * 2, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int t = 0; t < nb; t++) {
        const int hh = boxes[4 * t], row0 = boxes[4 * t + 1], b = boxes[4 * t + 2];
        for (int r = 0; r < ROWS; r++)
            for (int ch = 0; ch < 8; ch++) {
                const uint16_t *got = o + (size_t)t * ROWS * 64 + swizzled_chunk(r, ch) / 2;
                const int64_t row = row0 + r;
                for (int k = 0; k < 8; k++) {
                    const uint16_t want =
                        row < rows ? h[off + b * os + row * rs + hh * hs + ch * 8 + k] : (uint16_t)0;
                    if (got[k] != want) {
                        if (bad < 4)
                            printf("  %s box %d (head %d, row %d, outer %d): row %d chunk %d element %d = 0x%04x, "
                                   "want 0x%04x\n",
                                   name, t, hh, row0, b, r, ch, k, got[k], want);
                        bad++;
                    }
                }
            }
    }
    if (bad) {
        printf("FAIL tma %s: %ld of %ld elements wrong\n", name, bad, (long)nout);
        n_fail++;
    } else {
        printf("ok   tma %s (%d boxes of %d rows, %s)\n", name, nb, ROWS, rows_first ? "rows first" : "heads first");
        n_pass++;
    }
    cudaFree(d);
    cudaFree(dout);
    cudaFree(dc);
    free(h);
    free(o);
}

/* The map builder refuses what the hardware cannot map (cp.async path instead). */
static void refusals(void)
{
    uint16_t *d = 0;
    CK(cudaMalloc(&d, 1 << 20));
    CUtensorMap map;
    int rf = 0;
    const struct {
        const char *what;
        const void *base;
        int64_t rs, hs;
    } c[] = {{"row stride of 8 bytes past a multiple of 16", d, 12 * 64 + 4, 64},
             {"head stride not a multiple of 8 elements", d, 12 * 64, 60},
             {"base 2 bytes past a 16-byte boundary", d + 1, 12 * 64, 64}};
    for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) {
        const cudaError_t e = dattn_tma_rows_map(&map, &rf, c[i].base, 1, 100, 12, 0, c[i].rs, c[i].hs, 32);
        if (e == cudaErrorInvalidValue) {
            printf("ok   tma refuses: %s\n", c[i].what);
            n_pass++;
        } else {
            printf("FAIL tma refuses: %s: got %s\n", c[i].what, cudaGetErrorString(e));
            n_fail++;
        }
    }
    cudaFree(d);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0); /* every line out before a failing call's exit */
    if (tsm90_need("TMA")) return 77;
    const unsigned seed = 20261201u;
    srand(seed);
    printf("test_tma: seed %u\n", seed);
    /* padded [B = 2][L = 100][H = 3][64]: boxes at the start, inside, across L (rows 100.. zero) */
    const int pb[] = {0, 0, 0, 0, 2, 32, 1, 0, 1, 80, 1, 0, 2, 96, 0, 0, 0, 64, 1, 0};
    run<32>("padded B2 L100 H3", 2, 100, 3, 100 * 3 * 64, 3 * 64, 64, 0, pb, 5);
    /* the K slice of a fused [B][L][3][H = 4][64] QKV tensor (row stride 3 H 64) */
    const int qb[] = {3, 0, 1, 0, 0, 48, 0, 0, 1, 112, 1, 0};
    run<32>("fused QKV, K slice, B2 L129 H4", 2, 129, 4, 129 * 3 * 4 * 64, 3 * 4 * 64, 64, 4 * 64, qb, 3);
    /* head-major [B = 2][H = 3][L = 70][64] (q.transpose(1, 2).contiguous()): rows first */
    const int hb[] = {2, 0, 1, 0, 0, 40, 0, 0, 1, 64, 1, 0};
    run<32>("head-major B2 H3 L70", 2, 70, 3, 3 * 70 * 64, 64, 70 * 64, 0, hb, 3);
    /* packed [T = 150][H = 2][64] (outer 1): a box across T */
    const int kb[] = {1, 0, 0, 0, 0, 120, 0, 0, 1, 140, 0, 0};
    run<32>("packed T150 H2", 1, 150, 2, 0, 2 * 64, 64, 0, kb, 3);
    /* 64-row boxes (the forward's key tiles) */
    const int fb[] = {0, 0, 0, 0, 2, 64, 1, 0, 1, 60, 0, 0};
    run<64>("padded B2 L100 H3, 64-row boxes", 2, 100, 3, 100 * 3 * 64, 3 * 64, 64, 0, fb, 3);
    refusals();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}

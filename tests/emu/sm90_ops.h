/* Host emulation of the wgmma instructions of src/cuda/sm90.cuh (tests/emu/build.sh
 * appends this to the descriptor part of the real header, so the kernels' descriptor
 * construction and tile layouts are what gets tested).
 *
 * The operands are read through an independent decoding of the matrix descriptor, written
 * from the PTX ISA's canonical layouts (in 16-bit elements, T = 8):
 *   K-major, 128-byte swizzle:  ((8,m),(T,2k)):((8T,SBO),(1,T))
 *   MN-major, 128-byte swizzle: ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))
 * followed by the 128-byte swizzle on the final shared-memory address (bits 4-6 ^= bits
 * 7-9). Register fragments as documented in sm90.cuh: a warp's accumulator rows are
 * 16 (warp % 4) + g (+ 8), its A fragment is that of mma.m16n8k16. The product is exact
 * in double, rounded once to float; it happens at issue (fences and waits are no-ops, as
 * cp.async is immediate in this emulation). */

static inline float emu_desc_el(uint64_t desc, int mn_major, int mn, int k, int bf)
{
    const uint32_t start = (uint32_t)(desc & 0x3FFF) << 4;
    const uint32_t lbo = (uint32_t)((desc >> 16) & 0x3FFF) << 4;
    const uint32_t sbo = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    if (((desc >> 62) & 3) != 1 || ((desc >> 49) & 7) != 0)
        emu_fail("emulated wgmma: only 128-byte swizzle with base offset 0 is modelled");
    uint32_t off;
    if (!mn_major) off = (uint32_t)((mn & 7) * 128 + (mn >> 3) * sbo + k * 2);
    else off = (uint32_t)((mn & 63) * 2 + (mn >> 6) * lbo + (k & 7) * 128 + (k >> 3) * sbo);
    uint32_t addr = start + off;
    addr ^= ((addr >> 7) & 7) << 4;
    uint16_t v;
    memcpy(&v, emu_smem_base() + addr, 2);
    return emu_h16(v, bf);
}

/* one m64nNk16 step for the calling lane: A[16][16] is its warp's slice of A */
template <int N, int BF, int TB>
static inline void emu_wgmma_lane(float (&d)[N / 8][4], const float (&A)[16][16], uint64_t db, int scale_d)
{
    const int l = emu_lane(), g = l >> 2, cc = l & 3;
    for (int nb = 0; nb < N / 8; nb++)
        for (int e = 0; e < 4; e++) {
            const int r = g + 8 * (e >> 1), n = 8 * nb + 2 * cc + (e & 1);
            double s = scale_d ? (double)d[nb][e] : 0.0;
            for (int k = 0; k < 16; k++) s += (double)A[r][k] * (double)emu_desc_el(db, TB, n, k, BF);
            d[nb][e] = (float)s;
        }
}

template <int N, int BF, int TA, int TB>
DATTN_DEV void wgmma_ss(float (&d)[N / 8][4], uint64_t da, uint64_t db, int scale_d)
{
    static_assert(N == 64 || N == 128, "wgmma N");
    emu_warp_op(nullptr, 0, 100300 + N + 1000 * BF + 10 * TA + TB); /* converged warp */
    const int m0 = 16 * ((threadIdx.x >> 5) & 3);
    float A[16][16];
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) A[r][k] = emu_desc_el(da, TA, m0 + r, k, BF);
    emu_wgmma_lane<N, BF, TB>(d, A, db, scale_d);
}

template <int N, int BF, int TB>
DATTN_DEV void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t db, int scale_d)
{
    static_assert(N == 64 || N == 128, "wgmma N");
    const uint32_t w[4] = {a[0], a[1], a[2], a[3]};
    const uint32_t *all = emu_warp_op(w, 4, 100500 + N + 1000 * BF + TB);
    float A[16][16];
    for (int l = 0; l < 32; l++) {
        const uint32_t *x = all + 16 * l;
        const int g = l >> 2, cc = l & 3;
        for (int h = 0; h < 2; h++) {
            A[g][2 * cc + h] = emu_h16((uint16_t)(x[0] >> (16 * h)), BF);
            A[g + 8][2 * cc + h] = emu_h16((uint16_t)(x[1] >> (16 * h)), BF);
            A[g][2 * cc + 8 + h] = emu_h16((uint16_t)(x[2] >> (16 * h)), BF);
            A[g + 8][2 * cc + 8 + h] = emu_h16((uint16_t)(x[3] >> (16 * h)), BF);
        }
    }
    emu_wgmma_lane<N, BF, TB>(d, A, db, scale_d);
}

DATTN_DEV void wgmma_fence(void) {}
DATTN_DEV void wgmma_commit(void) {}
template <int N>
DATTN_DEV void wgmma_wait(void) {}
DATTN_DEV void fence_proxy_async(void) {}
/* register budgets are not modelled */
template <int N>
DATTN_DEV void setmaxnreg_dec(void) {}
template <int N>
DATTN_DEV void setmaxnreg_inc(void) {}

template <int R, int C>
DATTN_DEV void reg_fence(float (&)[R][C]) {}
template <int R, int C>
DATTN_DEV void reg_fence(uint32_t (&)[R][C]) {}

#endif

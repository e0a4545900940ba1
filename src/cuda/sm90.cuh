/* Hopper (sm_90a) inline-PTX wrappers: wgmma.mma_async, its shared-memory matrix
 * descriptors, the wgmma fences, and the proxy fence between cp.async / st.shared
 * writes and wgmma reads. Include only from translation units built for sm_90a
 * (the *_sm90.cu files of src/cuda, tests/test_wgmma.cu).
 *
 * Shared-memory tiles (what every descriptor below assumes). A tile holds `rows` rows of
 * a 16-bit matrix whose contiguous dimension has 64 * P elements, stored as P panels of
 * 64 elements (128 bytes) per row:
 *     byte offset of 16-byte chunk ch (elements 8 ch .. 8 ch + 7) of row r
 *         = (ch >> 3) * rows * 128 + r * 128 + (((ch & 7) ^ (r & 7)) << 4)   [sw128_off]
 * and the tile base is 1024-byte aligned. Within a panel that is the PTX ISA's 128-byte
 * swizzle (Swizzle<3,4,3>: address bits 4-6 ^= bits 7-9) over 8-row x 128-byte atoms,
 * and for D = 64 it is exactly the sm80 kernels' swz<64>() (16-byte chunk ^ (row & 7)).
 *
 * Descriptor (PTX ISA, "Matrix Descriptor Format"): bits 0-13 start address >> 4,
 * 16-29 leading-dimension byte offset (LBO) >> 4, 32-45 stride-dimension byte offset
 * (SBO) >> 4, 49-51 base offset (0: the swizzle atoms start on 1024-byte boundaries),
 * 62-63 swizzle mode (1 = 128-byte).
 *   K-major operand (A = Q, B = K of S = Q K^T: the reduction dim is the contiguous
 *   one). Canonical layout ((8,m),(T,2k)):((8T,SBO),(1,T)), T = 8 elements: 8 rows at
 *   128 bytes, groups of 8 rows at SBO = 1024; LBO unused for swizzled K-major (encoded
 *   1). One k16 step reads 32 bytes of each row: step ks starts at panel ks >> 2, byte
 *   32 (ks & 3) of row r0 [desc_kmajor]. The hardware applies the XOR on the final
 *   address bits, so a start 32 / 64 / 96 bytes into the atom addresses the same
 *   swizzled chunks the loaders wrote.
 *   MN-major operand (B = V of O = P V: N = head dim is the contiguous one; trans-b = 1).
 *   Canonical layout ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)): 64 N-elements per 128-byte
 *   row, further 64-column panels at LBO = rows * 128, groups of 8 K-rows (keys) at
 *   SBO = 1024. k16 step kk starts at key 16 kk: byte 2048 kk [desc_mnmajor].
 *
 * Register fragments (PTX ISA, wgmma .m64nNk16; warp w = (thread / 32) % 4 of the
 * warpgroup owns rows 16 w .. 16 w + 15, lane = 4 g + c):
 *   accumulator D (f32): d[nb][e] = (row 16 w + g + 8 (e >> 1), col 8 nb + 2 c + (e & 1)),
 *     i.e. N / 8 mma.m16n8 C fragments side by side (float d[N / 8][4] below);
 *   A from registers (f16/bf16): the mma.m16n8k16 A fragment of the warp's 16 rows
 *     (a0 = (g, 2c..2c+1), a1 = (g+8, 2c..), a2 = (g, 2c+8..), a3 = (g+8, 2c+8..)),
 *     so Q fragments loaded by ldmatrix and P packed from the score accumulators feed
 *     wgmma exactly as they feed mma.sync.
 * tests/test_wgmma.cu checks all of this on the GPU through these same functions.
 *
 * Ordering rules the callers follow:
 *   - wgmma_fence() before the first wgmma of a batch whose accumulator or A registers
 *     were written by ordinary instructions (and after any such write);
 *   - shared memory written by cp.async or st.shared is made visible to wgmma (the
 *     async proxy) by fence_proxy_async() in each writing thread after its writes have
 *     completed (cp.async.wait), then a barrier;
 *   - wgmma_commit() closes a group; wgmma_wait<n>() waits until at most n groups are
 *     pending; accumulators and A registers of pending groups are not touched, and a
 *     buffer read by a pending wgmma is not overwritten;
 *   - reg_fence() keeps the compiler from moving accesses of accumulator registers
 *     across the asynchronous region (as CUTLASS's warpgroup_fence_operand). */
#ifndef DATTN_CUDA_SM90_CUH
#define DATTN_CUDA_SM90_CUH

#include "ptx.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "sm90.cuh: wgmma needs -gencode=arch=compute_90a,code=sm_90a"
#endif

DATTN_DEV uint64_t sm90_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo & 0x3FFFFu) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}

/* Byte offset of 16-byte chunk ch of row r in a swizzled tile of `rows` rows. */
DATTN_DEV uint32_t sw128_off(int rows, int r, int ch)
{
    return (uint32_t)((ch >> 3) * rows * 128 + r * 128 + (((ch & 7) ^ (r & 7)) << 4));
}

/* K-major operand: rows r0 .. r0 + 63 (A) or r0 .. r0 + N - 1 (B), r0 % 8 == 0, k16 step ks. */
DATTN_DEV uint64_t desc_kmajor(uint32_t tile, int rows, int r0, int ks)
{
    return sm90_desc(tile + (uint32_t)((ks >> 2) * rows * 128 + r0 * 128 + (ks & 3) * 32), 16, 1024);
}

/* MN-major operand (trans = 1): K rows (keys) 16 kk .. 16 kk + 15 of a tile of `rows` rows. */
DATTN_DEV uint64_t desc_mnmajor(uint32_t tile, int rows, int kk)
{
    return sm90_desc(tile + (uint32_t)(kk * 2048), (uint32_t)(rows * 128), 1024);
}

/* The descriptor of address addr + off from that of addr (off % 16 == 0; every shared-memory
 * address is < 2^18, so the 14-bit start-address field does not carry): one 32-bit add. */
DATTN_DEV uint64_t desc_add(uint64_t d, uint32_t off)
{
    return (d & 0xFFFFFFFF00000000ull) | (uint32_t)((uint32_t)d + (off >> 4));
}

/* ---- the instructions (tests/emu/build.sh replaces everything from this line on by the
 * host emulation in tests/emu/sm90_ops.h, which reads the operands through its own
 * decoding of the descriptors). Generated shapes: N = 64, 128; f16, bf16. TA / TB: 1 =
 * the operand is MN-major in shared memory (transposed), 0 = K-major. */

DATTN_DEV void wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

DATTN_DEV void wgmma_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

template <int N>
DATTN_DEV void wgmma_wait(void)
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

DATTN_DEV void fence_proxy_async(void) { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* Warp specialization's register split (all threads of a warpgroup execute it, converged):
 * the warpgroup's per-thread register budget drops to / rises to N (a multiple of 8, 24..256);
 * ptxas allocates the code after it within N. */
template <int N>
DATTN_DEV void setmaxnreg_dec(void)
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

template <int N>
DATTN_DEV void setmaxnreg_inc(void)
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

template <int R, int C>
DATTN_DEV void reg_fence(float (&d)[R][C])
{
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int j = 0; j < C; j++) asm volatile("" : "+f"(d[i][j])::"memory");
}

template <int R, int C>
DATTN_DEV void reg_fence(uint32_t (&d)[R][C])
{
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int j = 0; j < C; j++) asm volatile("" : "+r"(d[i][j])::"memory");
}

/* The accumulator operand lists of m64n64 (32 floats per thread: rows 0-7 of d) and m64n128
 * (64: rows 0-15), one row of four floats at a time. */
#define DATTN_WGMMA_ROW(d, i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define DATTN_WGMMA_ACC32(d) \
    DATTN_WGMMA_ROW(d, 0), DATTN_WGMMA_ROW(d, 1), DATTN_WGMMA_ROW(d, 2), DATTN_WGMMA_ROW(d, 3), \
    DATTN_WGMMA_ROW(d, 4), DATTN_WGMMA_ROW(d, 5), DATTN_WGMMA_ROW(d, 6), DATTN_WGMMA_ROW(d, 7)
#define DATTN_WGMMA_ACC64(d) \
    DATTN_WGMMA_ACC32(d), \
    DATTN_WGMMA_ROW(d, 8), DATTN_WGMMA_ROW(d, 9), DATTN_WGMMA_ROW(d, 10), DATTN_WGMMA_ROW(d, 11), \
    DATTN_WGMMA_ROW(d, 12), DATTN_WGMMA_ROW(d, 13), DATTN_WGMMA_ROW(d, 14), DATTN_WGMMA_ROW(d, 15)

/* One m64nNk16 pair of wrappers for dtype DT (f16 | bf16): wgmma_ss_nN_DT (A and B from
 * shared-memory descriptors) and wgmma_rs_nN_DT (A from registers: the mma.m16n8k16 A
 * fragment of the warp's 16 rows; B from a descriptor). NA = accumulator floats per thread
 * (N / 2), REGS its "{%0,...}" list; the operand numbers after it follow from NA. */
#define DATTN_WGMMA_PAIR(N, DT, NA, REGS, PSS, TSS, PRS, TRS)                                   \
    template <int TA, int TB>                                                                 \
    DATTN_DEV void wgmma_ss_n##N##_##DT(float (&d)[N / 8][4], uint64_t da, uint64_t db, int scale_d) \
    {                                                                                         \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PSS ", 0;\n"                          \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #DT "." #DT " " REGS     \
                     TSS ";\n}\n"                                                              \
                     : DATTN_WGMMA_ACC##NA(d)                                                  \
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));                      \
    }                                                                                         \
    template <int TB>                                                                         \
    DATTN_DEV void wgmma_rs_n##N##_##DT(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t db, \
                                       int scale_d)                                           \
    {                                                                                         \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PRS ", 0;\n"                          \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #DT "." #DT " " REGS     \
                     TRS ";\n}\n"                                                              \
                     : DATTN_WGMMA_ACC##NA(d)                                                  \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB)); \
    }

#define DATTN_WGMMA_REGS32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
#define DATTN_WGMMA_REGS64 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
DATTN_WGMMA_PAIR(64, f16, 32, DATTN_WGMMA_REGS32, "%34", "%32, %33, p, 1, 1, %35, %36", "%37",
                 "{%32, %33, %34, %35}, %36, p, 1, 1, %38")
DATTN_WGMMA_PAIR(64, bf16, 32, DATTN_WGMMA_REGS32, "%34", "%32, %33, p, 1, 1, %35, %36", "%37",
                 "{%32, %33, %34, %35}, %36, p, 1, 1, %38")
DATTN_WGMMA_PAIR(128, f16, 64, DATTN_WGMMA_REGS64, "%66", "%64, %65, p, 1, 1, %67, %68", "%69",
                 "{%64, %65, %66, %67}, %68, p, 1, 1, %70")
DATTN_WGMMA_PAIR(128, bf16, 64, DATTN_WGMMA_REGS64, "%66", "%64, %65, p, 1, 1, %67, %68", "%69",
                 "{%64, %65, %66, %67}, %68, p, 1, 1, %70")

/* D (+)= A B over one k16 step for a warpgroup; scale_d = 0 ignores D's old value. */
template <int N, int BF, int TA, int TB>
DATTN_DEV void wgmma_ss(float (&d)[N / 8][4], uint64_t da, uint64_t db, int scale_d)
{
    static_assert(N == 64 || N == 128, "wgmma N");
    if constexpr (N == 64) {
        if constexpr (BF) wgmma_ss_n64_bf16<TA, TB>(d, da, db, scale_d);
        else wgmma_ss_n64_f16<TA, TB>(d, da, db, scale_d);
    } else {
        if constexpr (BF) wgmma_ss_n128_bf16<TA, TB>(d, da, db, scale_d);
        else wgmma_ss_n128_f16<TA, TB>(d, da, db, scale_d);
    }
}

template <int N, int BF, int TB>
DATTN_DEV void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t db, int scale_d)
{
    static_assert(N == 64 || N == 128, "wgmma N");
    if constexpr (N == 64) {
        if constexpr (BF) wgmma_rs_n64_bf16<TB>(d, a, db, scale_d);
        else wgmma_rs_n64_f16<TB>(d, a, db, scale_d);
    } else {
        if constexpr (BF) wgmma_rs_n128_bf16<TB>(d, a, db, scale_d);
        else wgmma_rs_n128_f16<TB>(d, a, db, scale_d);
    }
}

#endif

/* Inline-PTX wrappers used by the CUDA kernels (sm_80 and newer).
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16 with .row.col, lane = 4*g + c):
 *   A 16x16: a0 = (row g,   k 2c..2c+1)   a1 = (row g+8, k 2c..2c+1)
 *            a2 = (row g,   k 2c+8..+9)   a3 = (row g+8, k 2c+8..+9)
 *   B 16x8:  b0 = (k 2c..2c+1, n g)       b1 = (k 2c+8..+9, n g)
 *   C 16x8:  c0 = (g, 2c) c1 = (g, 2c+1) c2 = (g+8, 2c) c3 = (g+8, 2c+1)
 * ldmatrix.x4: lanes 8m..8m+7 give the row addresses of matrix m; register m of lane l
 * holds (row l/4, cols 2(l%4), 2(l%4)+1) of matrix m (.trans: rows and cols swapped).
 * Read as 32-bit data (8 rows of four fp32), register m of lane l is element (row l/4,
 * word l%4): exactly the tf32 fragments below when the k index runs along the row.
 *
 * mma.m16n8k8 .tf32 (.row.col, lane = 4*g + c; operands are .b32 holding tf32 values):
 *   A 16x8:  a0 = (row g, k c)  a1 = (row g+8, k c)  a2 = (row g, k c+4)  a3 = (row g+8, k c+4)
 *   B 8x8:   b0 = (k c, n g)    b1 = (k c+4, n g)
 *   C 16x8:  as m16n8k16. */
#ifndef DATTN_CUDA_PTX_CUH
#define DATTN_CUDA_PTX_CUH

#include <stdint.h>

#define DATTN_DEV static __device__ __forceinline__

/* threadIdx.x by a volatile asm: not hoisted out of loops nor merged with other reads, so
 * that values derived from it are recomputed where used instead of held in registers */
DATTN_DEV uint32_t tid_x_volatile()
{
    uint32_t t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t;
}

DATTN_DEV uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* D = A * B + C, fp32 accumulate; BF = 1: bf16 operands, else fp16. */
template <int BF>
DATTN_DEV void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                        const float (&c)[4])
{
    if (BF) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1),
                       "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1),
                       "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
    }
}

/* d += A * B with tf32 operands (sm_80+), fp32 accumulate. The operands must already be
 * tf32 values (tf32_rna below): the tensor core reads only their upper 19 bits. */
DATTN_DEV void mma1688_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* float -> tf32 (an fp32 bit pattern with the low 13 mantissa bits zero), round to
 * nearest, ties away from zero (cvt.rna: the only rounding cvt offers for tf32 on sm_80). */
DATTN_DEV uint32_t tf32_rna(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

/* Accumulating form: d += A * B. */
template <int BF>
DATTN_DEV void mma16816_acc(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    mma16816<BF>(d, a, b0, b1, d);
}

DATTN_DEV void ldsm_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

DATTN_DEV void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* 16-byte shared-memory load that neither the compiler nor ptxas merges with another load of
 * the same address (volatile asm of a volatile ld, ordered like ldsm_x4 by the same barriers):
 * fwd_sm80.cuh's SP saturated init reads the same p2c constants into each strip's own
 * accumulators, with no register moves. */
DATTN_DEV float4 lds128_sep(uint32_t saddr)
{
    float4 v;
    asm volatile("ld.volatile.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(saddr));
    return v;
}

/* 16-byte global -> shared copy; src_bytes = 0 fills zeros and reads nothing. */
DATTN_DEV void cp_async16(uint32_t saddr, const void *gptr, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(gptr),
                 "r"(src_bytes));
}

DATTN_DEV void cp_async4(uint32_t saddr, const void *gptr, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(saddr), "l"(gptr),
                 "r"(src_bytes));
}

DATTN_DEV void cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }

DATTN_DEV void cp_async_wait_all(void) { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

/* Waits until at most one committed group (the newest) is still in flight. */
DATTN_DEV void cp_async_wait_1(void) { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

/* Named barrier `id` (1..15; 0 is __syncthreads') over `n` threads (a multiple of 32), e.g.
 * one warpgroup's 128: the threads of the other warpgroups go on. */
DATTN_DEV void bar_sync_named(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }

DATTN_DEV float ex2f(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

DATTN_DEV float lg2f(float x)
{
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Two floats -> packed pair (lo in the low half), round to nearest even. */
template <int BF>
DATTN_DEV uint32_t pack2(float lo, float hi)
{
    uint32_t r;
    if (BF)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* One 16-bit storage element -> float. */
template <int BF>
DATTN_DEV float h2f(uint16_t x)
{
    if (BF) return __uint_as_float((uint32_t)x << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(x));
    return f;
}

template <int BF>
DATTN_DEV uint16_t f2h(float f)
{
    uint16_t r;
    if (BF)
        asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(f));
    else
        asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(f));
    return r;
}

#endif

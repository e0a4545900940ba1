/* Host emulation of src/cuda/ptx.cuh (the build script puts it in its place): the same
 * functions, warp collectives on the emulated threads of cuda_runtime.h. mma and ldmatrix
 * follow the fragment layouts documented in src/cuda/ptx.cuh (PTX ISA), the tf32 mma and
 * cvt.rna.tf32 included; cp.async copies at once (so the emulation cannot catch a missing
 * wait). */
#ifndef DATTN_CUDA_PTX_CUH
#define DATTN_CUDA_PTX_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#define DATTN_DEV static inline

char *emu_smem_base(void);

/* (the real one is a volatile asm read of %tid.x: a register-allocation device only) */
DATTN_DEV uint32_t tid_x_volatile() { return threadIdx.x; }

DATTN_DEV uint32_t smem_u32(const void *p)
{
    return (uint32_t)((const char *)p - emu_smem_base());
}

static inline float emu_h16(uint16_t x, int bf)
{
    if (bf) return __uint_as_float((uint32_t)x << 16);
    _Float16 h;
    memcpy(&h, &x, 2);
    return (float)h;
}

static inline uint16_t emu_f16(float f, int bf)
{
    if (bf) {
        uint32_t x = __float_as_uint(f);
        if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
        x += 0x7fffu + ((x >> 16) & 1);
        return (uint16_t)(x >> 16);
    }
    _Float16 h = (_Float16)f;
    uint16_t r;
    memcpy(&r, &h, 2);
    return r;
}

template <int BF>
DATTN_DEV void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                        const float (&c)[4])
{
    uint32_t w[10] = {a[0], a[1], a[2], a[3], b0, b1, __float_as_uint(c[0]), __float_as_uint(c[1]),
                      __float_as_uint(c[2]), __float_as_uint(c[3])};
    const uint32_t *all = emu_warp_op(w, 10, 100000 + BF);
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const uint32_t *x = all + 16 * l;
        const int g = l >> 2, cc = l & 3;
        for (int h = 0; h < 2; h++) {
            A[g][2 * cc + h] = emu_h16((uint16_t)(x[0] >> (16 * h)), BF);
            A[g + 8][2 * cc + h] = emu_h16((uint16_t)(x[1] >> (16 * h)), BF);
            A[g][2 * cc + 8 + h] = emu_h16((uint16_t)(x[2] >> (16 * h)), BF);
            A[g + 8][2 * cc + 8 + h] = emu_h16((uint16_t)(x[3] >> (16 * h)), BF);
            B[2 * cc + h][g] = emu_h16((uint16_t)(x[4] >> (16 * h)), BF);
            B[2 * cc + 8 + h][g] = emu_h16((uint16_t)(x[5] >> (16 * h)), BF);
        }
    }
    const int l = emu_lane(), g = l >> 2, cc = l & 3;
    const int rr[4] = {g, g, g + 8, g + 8}, nn[4] = {2 * cc, 2 * cc + 1, 2 * cc, 2 * cc + 1};
    float out[4];
    for (int e = 0; e < 4; e++) {
        double s = (double)__uint_as_float(w[6 + e]);
        for (int k = 0; k < 16; k++) s += (double)A[rr[e]][k] * (double)B[k][nn[e]];
        out[e] = (float)s;
    }
    for (int e = 0; e < 4; e++) d[e] = out[e];
}

template <int BF>
DATTN_DEV void mma16816_acc(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    const float c[4] = {d[0], d[1], d[2], d[3]};
    mma16816<BF>(d, a, b0, b1, c);
}

/* cvt.rna.tf32.f32: round to nearest, ties away from zero, on the low 13 mantissa bits
 * (an integer add of half a tf32 ulp, then a mask: carries into the exponent as the
 * hardware's does); Inf / NaN unchanged. */
static inline uint32_t emu_tf32(uint32_t x)
{
    if ((x & 0x7f800000u) == 0x7f800000u) return x;
    return (x + 0x1000u) & 0xffffe000u;
}

DATTN_DEV uint32_t tf32_rna(float x) { return emu_tf32(__float_as_uint(x)); }

/* mma.m16n8k8 tf32 (fragments as in src/cuda/ptx.cuh). Each operand is rounded to tf32
 * first (round to nearest, as cvt.rna; the kernels feed cvt.rna results, which this leaves
 * unchanged); products exact in double, summed with the accumulator, rounded once. */
DATTN_DEV void mma1688_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    uint32_t w[10] = {a[0], a[1], a[2], a[3], b0, b1, __float_as_uint(d[0]), __float_as_uint(d[1]),
                      __float_as_uint(d[2]), __float_as_uint(d[3])};
    const uint32_t *all = emu_warp_op(w, 10, 100020);
    double A[16][8], B[8][8];
    for (int l = 0; l < 32; l++) {
        const uint32_t *x = all + 16 * l;
        const int g = l >> 2, cc = l & 3;
        A[g][cc] = __uint_as_float(emu_tf32(x[0]));
        A[g + 8][cc] = __uint_as_float(emu_tf32(x[1]));
        A[g][cc + 4] = __uint_as_float(emu_tf32(x[2]));
        A[g + 8][cc + 4] = __uint_as_float(emu_tf32(x[3]));
        B[cc][g] = __uint_as_float(emu_tf32(x[4]));
        B[cc + 4][g] = __uint_as_float(emu_tf32(x[5]));
    }
    const int l = emu_lane(), g = l >> 2, cc = l & 3;
    const int rr[4] = {g, g, g + 8, g + 8}, nn[4] = {2 * cc, 2 * cc + 1, 2 * cc, 2 * cc + 1};
    float out[4];
    for (int e = 0; e < 4; e++) {
        double s = (double)__uint_as_float(w[6 + e]);
        for (int k = 0; k < 8; k++) s += A[rr[e]][k] * B[k][nn[e]];
        out[e] = (float)s;
    }
    for (int e = 0; e < 4; e++) d[e] = out[e];
}

static inline void emu_ldsm(uint32_t (&r)[4], uint32_t addr, int trans)
{
    const uint32_t *all = emu_warp_op(&addr, 1, 100010 + trans);
    const char *base = emu_smem_base();
    const int l = emu_lane();
    for (int m = 0; m < 4; m++) {
        if (!trans) {
            memcpy(&r[m], base + all[16 * (8 * m + (l >> 2))] + 4 * (l & 3), 4);
        } else {
            uint16_t lo, hi;
            memcpy(&lo, base + all[16 * (8 * m + 2 * (l & 3))] + 2 * (l >> 2), 2);
            memcpy(&hi, base + all[16 * (8 * m + 2 * (l & 3) + 1)] + 2 * (l >> 2), 2);
            r[m] = (uint32_t)lo | ((uint32_t)hi << 16);
        }
    }
}

DATTN_DEV void ldsm_x4(uint32_t (&r)[4], uint32_t addr) { emu_ldsm(r, addr, 0); }
DATTN_DEV void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) { emu_ldsm(r, addr, 1); }

/* 16-byte shared-memory load (src/cuda/ptx.cuh: never merged with another of the same address) */
DATTN_DEV float4 lds128_sep(uint32_t saddr)
{
    float4 v;
    memcpy(&v, emu_smem_base() + saddr, sizeof v);
    return v;
}

DATTN_DEV void cp_async16(uint32_t saddr, const void *gptr, int src_bytes)
{
    char *dst = emu_smem_base() + saddr;
    if (src_bytes) memcpy(dst, gptr, (size_t)src_bytes);
    memset(dst + src_bytes, 0, (size_t)(16 - src_bytes));
}

DATTN_DEV void cp_async4(uint32_t saddr, const void *gptr, int src_bytes)
{
    char *dst = emu_smem_base() + saddr;
    if (src_bytes) memcpy(dst, gptr, (size_t)src_bytes);
    memset(dst + src_bytes, 0, (size_t)(4 - src_bytes));
}

DATTN_DEV void cp_async_commit(void) {}
DATTN_DEV void cp_async_wait_all(void) {}
DATTN_DEV void cp_async_wait_1(void) {}

/* named barrier: releases when n threads arrived at barrier id (emu.cpp) */
DATTN_DEV void bar_sync_named(int id, int n) { emu_named_bar(id, n, __LINE__); }

DATTN_DEV float ex2f(float x) { return exp2f(x); }
DATTN_DEV float lg2f(float x) { return log2f(x); }

template <int BF>
DATTN_DEV uint32_t pack2(float lo, float hi)
{
    return (uint32_t)emu_f16(lo, BF) | ((uint32_t)emu_f16(hi, BF) << 16);
}

template <int BF>
DATTN_DEV float h2f(uint16_t x)
{
    return emu_h16(x, BF);
}

template <int BF>
DATTN_DEV uint16_t f2h(float f)
{
    return emu_f16(f, BF);
}

#endif

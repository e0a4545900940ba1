/* Shared helpers of the CPU backend: dtype conversion and tensor addressing. */
#ifndef DATTN_CPU_COMMON_H
#define DATTN_CPU_COMMON_H

#include "../internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- fp16 / bf16 <-> fp32, round to nearest even, NaN preserved ---- */

static inline float dattn_h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalize */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while ((man & 0x400u) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t dattn_f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (ax < 0x33000000u) return (uint16_t)sign; /* < 2^-25: rounds to 0 */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14 .. 24: value = m * 2^(e-150) -> units of 2^-24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax + 0xc8000fffu + ((ax >> 13) & 1); /* rebias (-112 << 23) and round */
    return (uint16_t)(sign | (r >> 13));
}

static inline float dattn_bf2f(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t dattn_f2bf(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* n contiguous elements of `dtype` at src -> fp32 dst. */
static inline void dattn_load_row(float *dst, const void *src, int32_t dtype, int64_t n)
{
    if (dtype == DATTN_F32) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
    } else if (dtype == DATTN_F16) {
        const uint16_t *s = (const uint16_t *)src;
        for (int64_t d = 0; d < n; d++) dst[d] = dattn_h2f(s[d]);
    } else {
        const uint16_t *s = (const uint16_t *)src;
        for (int64_t d = 0; d < n; d++) dst[d] = dattn_bf2f(s[d]);
    }
}

/* n fp32 values -> contiguous `dtype` at dst. */
static inline void dattn_store_row(void *dst, const float *src, int32_t dtype, int64_t n)
{
    if (dtype == DATTN_F32) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
    } else if (dtype == DATTN_F16) {
        uint16_t *o = (uint16_t *)dst;
        for (int64_t d = 0; d < n; d++) o[d] = dattn_f2h(src[d]);
    } else {
        uint16_t *o = (uint16_t *)dst;
        for (int64_t d = 0; d < n; d++) o[d] = dattn_f2bf(src[d]);
    }
}

/* ---- addressing of [B,L,H,D] / [T,H,D] tensors and of lse ---- */

/* Element offset of row (sequence b, position i, head h) of a q-like tensor. */
static inline int64_t dattn_row_off(const dattn_call *c, const dattn_tensor *t, int64_t b,
                                    int64_t i, int64_t h)
{
    if (c->packed) return ((int64_t)c->p->cu_seqlens[b] + i) * t->stride[0] + h * t->stride[1];
    return b * t->stride[0] + i * t->stride[1] + h * t->stride[2];
}

static inline int64_t dattn_lse_off(const dattn_call *c, int64_t b, int64_t h, int64_t i)
{
    const dattn_tensor *t = &c->p->lse;
    if (c->packed) return h * t->stride[0] + ((int64_t)c->p->cu_seqlens[b] + i) * t->stride[1];
    return b * t->stride[0] + h * t->stride[1] + i * t->stride[2];
}

/* Length of sequence b (packed) or L (padded). */
static inline int64_t dattn_seq_len(const dattn_call *c, int64_t b)
{
    if (c->packed) return (int64_t)c->p->cu_seqlens[b + 1] - c->p->cu_seqlens[b];
    return c->L;
}

/* Key/query validity of position i of sequence b (padded mask; packed: always). */
static inline int dattn_valid(const dattn_call *c, int64_t b, int64_t i)
{
    const dattn_tensor *m = &c->p->mask;
    if (c->packed || !m->data) return 1;
    return ((const uint8_t *)m->data)[b * m->stride[0] + i * m->stride[1]] != 0;
}

static inline const char *dattn_ptr(const dattn_tensor *t, int64_t off, size_t es)
{
    return (const char *)t->data + off * (int64_t)es;
}

#endif

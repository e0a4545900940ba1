/* CPU kernels, portable family: plain C11 "vectors" of 8 floats (the compiler maps them
 * to whatever SIMD the build targets), a 4 x 8 GEMM micro-tile. Runs on any CPU. */
#include "common.h"

#define ISA_NAME "portable"
#define ISA_SUFFIX portable
#define KERNELS dattn_cpu_kernels_portable
#define VL 8
#define MR 4
#define NV 1

typedef struct vf {
    float f[VL];
} vf;
typedef struct vi {
    int32_t i[VL];
} vi;

#define VMAP(expr)                                                                             \
    vf r;                                                                                      \
    for (int l = 0; l < VL; l++) r.f[l] = (expr);                                              \
    return r

static inline vf vzero(void) { VMAP(0.0f); }
static inline vf vset1(float x) { VMAP(x); }
static inline vf vload(const float *p) { VMAP(p[l]); }
static inline void vstore(float *p, vf x)
{
    for (int l = 0; l < VL; l++) p[l] = x.f[l];
}
static inline vf vadd(vf a, vf b) { VMAP(a.f[l] + b.f[l]); }
static inline vf vsub(vf a, vf b) { VMAP(a.f[l] - b.f[l]); }
static inline vf vmul(vf a, vf b) { VMAP(a.f[l] * b.f[l]); }
static inline vf vfma(vf a, vf b, vf c) { VMAP(a.f[l] * b.f[l] + c.f[l]); }
static inline vf vmax(vf a, vf b) { VMAP(a.f[l] > b.f[l] ? a.f[l] : b.f[l]); }
static inline float vhmax(vf a)
{
    float m = a.f[0];
    for (int l = 1; l < VL; l++) m = a.f[l] > m ? a.f[l] : m;
    return m;
}
static inline float vhsum(vf a)
{
    float s = 0.0f;
    for (int l = 0; l < VL; l++) s += a.f[l];
    return s;
}

/* 2^x for x <= ~0, the same polynomial as the SIMD families; < 2^-126 flushes to 0. */
static inline float exp2_1(float x)
{
    if (!(x > -127.0f)) return 0.0f;
    float n = nearbyintf(x);
    float f = x - n;
    float p = 1.5353362e-4f;
    p = p * f + 1.3398875e-3f;
    p = p * f + 9.6184369e-3f;
    p = p * f + 5.5503324e-2f;
    p = p * f + 2.4022648e-1f;
    p = p * f + 6.9314718e-1f;
    p = p * f + 1.0f;
    int32_t e = (int32_t)n;
    if (e < -126) return 0.0f;
    uint32_t bits = (uint32_t)(e + 127) << 23;
    float s;
    memcpy(&s, &bits, 4);
    return p * s;
}
static inline vf vexp2(vf x) { VMAP(exp2_1(x.f[l])); }

static inline vi vloadi(const int32_t *p)
{
    vi r;
    for (int l = 0; l < VL; l++) r.i[l] = p[l];
    return r;
}
static inline vi vseti(int32_t x)
{
    vi r;
    for (int l = 0; l < VL; l++) r.i[l] = x;
    return r;
}
static inline vi vaddi(vi a, vi b)
{
    vi r;
    for (int l = 0; l < VL; l++) r.i[l] = a.i[l] + b.i[l];
    return r;
}
static inline vi vmulloi(vi a, vi b)
{
    vi r;
    for (int l = 0; l < VL; l++) r.i[l] = a.i[l] * b.i[l];
    return r;
}
static inline vi vlanes(void)
{
    vi r;
    for (int l = 0; l < VL; l++) r.i[l] = l;
    return r;
}
static inline vf vgather_n(const float *base, vi idx, int cnt) { VMAP(l < cnt ? base[idx.i[l]] : 0.0f); }

static inline vi vsubi(vi a, vi b)
{
    vi r;
    for (int l = 0; l < VL; l++) r.i[l] = a.i[l] - b.i[l];
    return r;
}
static inline vf vpermv(vi idx, vf x) { VMAP(x.f[idx.i[l] & (VL - 1)]); }
static inline void vtranspose(vf r[VL])
{
    for (int a = 0; a < VL; a++)
        for (int b = a + 1; b < VL; b++) {
            float t = r[a].f[b];
            r[a].f[b] = r[b].f[a];
            r[b].f[a] = t;
        }
}

static void cvt_load(float *dst, const void *src, int32_t dtype, int64_t n)
{
    dattn_load_row(dst, src, dtype, n);
}
static void cvt_store(void *dst, const float *src, int32_t dtype, int64_t n)
{
    dattn_store_row(dst, src, dtype, n);
}

#include "kern.h"

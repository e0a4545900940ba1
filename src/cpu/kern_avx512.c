/* CPU kernels, AVX-512 family (F/BW/VL/DQ + FMA + F16C): 16-lane vectors, a 6 x 64
 * GEMM micro-tile (24 zmm accumulators). Compiled with the AVX-512 flags (Makefile);
 * only ever called after the runtime check in isa.c. */
#include <immintrin.h>

#include "common.h"

#define ISA_NAME "avx512"
#define ISA_SUFFIX avx512
#define KERNELS dattn_cpu_kernels_avx512
#define VL 16
#define MR 6
#define NV 4

typedef __m512 vf;
typedef __m512i vi;

static inline vf vzero(void) { return _mm512_setzero_ps(); }
static inline vf vset1(float x) { return _mm512_set1_ps(x); }
static inline vf vload(const float *p) { return _mm512_loadu_ps(p); }
static inline void vstore(float *p, vf x) { _mm512_storeu_ps(p, x); }
static inline vf vadd(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vsub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vfma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline vf vmax(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline float vhmax(vf a) { return _mm512_reduce_max_ps(a); }
static inline float vhsum(vf a) { return _mm512_reduce_add_ps(a); }

/* 2^x for x <= ~0: x = n + f, |f| <= 1/2, 2^f by a degree-6 polynomial (max relative
 * error 1.6 ulp), times 2^n by scalef. x <= -200 (and -inf) gives exactly 0. */
static inline vf vexp2(vf x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-200.0f));
    vf n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf f = _mm512_sub_ps(x, n);
    vf p = _mm512_set1_ps(1.5353362e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3398875e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6184369e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5503324e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022648e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static inline vi vloadi(const int32_t *p) { return _mm512_loadu_si512((const void *)p); }
static inline vi vseti(int32_t x) { return _mm512_set1_epi32(x); }
static inline vi vaddi(vi a, vi b) { return _mm512_add_epi32(a, b); }
static inline vi vmulloi(vi a, vi b) { return _mm512_mullo_epi32(a, b); }
static inline vi vlanes(void)
{
    return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
/* base[idx[l]] for lanes l < cnt, 0 elsewhere (no load outside those lanes). */
static inline vf vgather_n(const float *base, vi idx, int cnt)
{
    __mmask16 m = cnt >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cnt) - 1u);
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, base, 4);
}

static inline vi vsubi(vi a, vi b) { return _mm512_sub_epi32(a, b); }
/* x[idx[l] & 15] in lane l */
static inline vf vpermv(vi idx, vf x) { return _mm512_permutexvar_ps(idx, x); }

/* In-place transpose of a 16 x 16 block held as 16 row vectors. */
static inline void vtranspose(vf r[16])
{
    vf t[16];
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    /* r[4k + c], 128-bit lane L = column 4L + c of rows 4k .. 4k+3 */
    for (int k = 0; k < 4; k++) {
        r[4 * k + 0] = _mm512_shuffle_ps(t[4 * k + 0], t[4 * k + 2], 0x44);
        r[4 * k + 1] = _mm512_shuffle_ps(t[4 * k + 0], t[4 * k + 2], 0xEE);
        r[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
        r[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
    }
    /* 4 x 4 transpose of the 128-bit blocks, for each c */
    for (int c = 0; c < 4; c++) {
        vf P = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44);
        vf Q = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xEE);
        vf R = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44);
        vf T = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xEE);
        t[c] = _mm512_shuffle_f32x4(P, R, 0x88);
        t[4 + c] = _mm512_shuffle_f32x4(P, R, 0xDD);
        t[8 + c] = _mm512_shuffle_f32x4(Q, T, 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(Q, T, 0xDD);
    }
    for (int k = 0; k < 16; k++) r[k] = t[k];
}

/* Segmented scatter-add for the backward's slot sums (HAVE_SEGADD): dst[o_k] += d_k for
 * 16 lanes whose bins o are non-decreasing with steps of 0 or 1 from o_0 = 0. A
 * segmented suffix scan (log steps, adds only inside a run of equal bins) leaves each
 * run's sum in its first lane; compressing those lanes gives the bins in order. Every
 * bin's value is a sum of its own lanes only (no differences of prefix sums). */
#define HAVE_SEGADD 1
static inline void segadd_asc(float *dst, vi o, vf d)
{
    const __m512i sent = _mm512_set1_epi32(-1), zi = _mm512_setzero_si512();
#define SEG_STEP(sh)                                                                           \
    do {                                                                                       \
        __m512i so = _mm512_alignr_epi32(sent, o, sh);                                         \
        __m512 sd = _mm512_castsi512_ps(_mm512_alignr_epi32(zi, _mm512_castps_si512(d), sh));  \
        d = _mm512_mask_add_ps(d, _mm512_cmpeq_epi32_mask(o, so), d, sd);                      \
    } while (0)
    SEG_STEP(1);
    SEG_STEP(2);
    SEG_STEP(4);
    SEG_STEP(8);
#undef SEG_STEP
    __mmask16 head = _mm512_cmpneq_epi32_mask(o, _mm512_alignr_epi32(o, sent, 15));
    _mm512_storeu_ps(dst, _mm512_add_ps(_mm512_loadu_ps(dst), _mm512_maskz_compress_ps(head, d)));
}
static inline vf vrev(vf x)
{
    return _mm512_permutexvar_ps(_mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), x);
}
static inline vi vrevi(vi x)
{
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), x);
}
static inline vi vmaxi0(vi x) { return _mm512_max_epi32(x, _mm512_setzero_si512()); }

/* dtype rows <-> fp32 */
static void cvt_load(float *dst, const void *src, int32_t dtype, int64_t n)
{
    if (dtype == DATTN_F32) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
        return;
    }
    const uint16_t *s = (const uint16_t *)src;
    int64_t d = 0;
    if (dtype == DATTN_F16) {
        for (; d + 16 <= n; d += 16)
            _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + d))));
        for (; d < n; d++) dst[d] = dattn_h2f(s[d]);
    } else {
        for (; d + 16 <= n; d += 16) {
            __m512i x = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + d)));
            _mm512_storeu_ps(dst + d, _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)));
        }
        for (; d < n; d++) dst[d] = dattn_bf2f(s[d]);
    }
}

static void cvt_store(void *dst, const float *src, int32_t dtype, int64_t n)
{
    if (dtype == DATTN_F32) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
        return;
    }
    uint16_t *o = (uint16_t *)dst;
    int64_t d = 0;
    if (dtype == DATTN_F16) {
        for (; d + 16 <= n; d += 16)
            _mm256_storeu_si256((__m256i *)(o + d),
                                _mm512_cvtps_ph(_mm512_loadu_ps(src + d), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        for (; d < n; d++) o[d] = dattn_f2h(src[d]);
    } else {
        for (; d + 16 <= n; d += 16) {
            /* round to nearest even; NaN -> quiet NaN */
            __m512i x = _mm512_castps_si512(_mm512_loadu_ps(src + d));
            __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
            __m512i r = _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb);
            __m512i ax = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
            __mmask16 nan = _mm512_cmpgt_epi32_mask(ax, _mm512_set1_epi32(0x7f800000));
            __m512i q = _mm512_or_si512(x, _mm512_set1_epi32(0x400000));
            r = _mm512_mask_mov_epi32(r, nan, q);
            _mm256_storeu_si256((__m256i *)(o + d), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
        }
        for (; d < n; d++) o[d] = dattn_f2bf(src[d]);
    }
}

#include "kern.h"

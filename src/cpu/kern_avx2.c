/* CPU kernels, AVX2 family (AVX2 + FMA + F16C): 8-lane vectors, a 6 x 16 GEMM micro-tile
 * (12 ymm accumulators). Compiled with the AVX2 flags (Makefile); only ever called after
 * the runtime check in isa.c. */
#include <immintrin.h>

#include "common.h"

#define ISA_NAME "avx2"
#define ISA_SUFFIX avx2
#define KERNELS dattn_cpu_kernels_avx2
#define VL 8
#define MR 6
#define NV 2

typedef __m256 vf;
typedef __m256i vi;

static inline vf vzero(void) { return _mm256_setzero_ps(); }
static inline vf vset1(float x) { return _mm256_set1_ps(x); }
static inline vf vload(const float *p) { return _mm256_loadu_ps(p); }
static inline void vstore(float *p, vf x) { _mm256_storeu_ps(p, x); }
static inline vf vadd(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vsub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vfma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf vmax(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline float vhmax(vf a)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
static inline float vhsum(vf a)
{
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

/* 2^x for x <= ~0 (see kern_avx512.c); below 2^-126 the result is flushed to 0. */
static inline vf vexp2(vf x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-200.0f));
    vf n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf f = _mm256_sub_ps(x, n);
    vf p = _mm256_set1_ps(1.5353362e-4f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3398875e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6184369e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5503324e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022648e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_max_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(-127));
    e = _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline vi vloadi(const int32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline vi vseti(int32_t x) { return _mm256_set1_epi32(x); }
static inline vi vaddi(vi a, vi b) { return _mm256_add_epi32(a, b); }
static inline vi vmulloi(vi a, vi b) { return _mm256_mullo_epi32(a, b); }
static inline vi vlanes(void) { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
static inline vf vgather_n(const float *base, vi idx, int cnt)
{
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt), vlanes());
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, idx, _mm256_castsi256_ps(m), 4);
}

static inline vi vsubi(vi a, vi b) { return _mm256_sub_epi32(a, b); }
static inline vf vpermv(vi idx, vf x) { return _mm256_permutevar8x32_ps(x, idx); }

/* In-place transpose of an 8 x 8 block held as 8 row vectors. */
static inline void vtranspose(vf r[8])
{
    vf t[8];
    for (int k = 0; k < 4; k++) {
        t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 2; k++) {
        r[4 * k + 0] = _mm256_shuffle_ps(t[4 * k + 0], t[4 * k + 2], 0x44);
        r[4 * k + 1] = _mm256_shuffle_ps(t[4 * k + 0], t[4 * k + 2], 0xEE);
        r[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
        r[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        t[c] = _mm256_permute2f128_ps(r[c], r[4 + c], 0x20);
        t[4 + c] = _mm256_permute2f128_ps(r[c], r[4 + c], 0x31);
    }
    for (int k = 0; k < 8; k++) r[k] = t[k];
}

static void cvt_load(float *dst, const void *src, int32_t dtype, int64_t n)
{
    if (dtype == DATTN_F32) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
        return;
    }
    const uint16_t *s = (const uint16_t *)src;
    int64_t d = 0;
    if (dtype == DATTN_F16) {
        for (; d + 8 <= n; d += 8)
            _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + d))));
        for (; d < n; d++) dst[d] = dattn_h2f(s[d]);
    } else {
        for (; d + 8 <= n; d += 8) {
            __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + d)));
            _mm256_storeu_ps(dst + d, _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)));
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
        for (; d + 8 <= n; d += 8)
            _mm_storeu_si128((__m128i *)(o + d),
                             _mm256_cvtps_ph(_mm256_loadu_ps(src + d), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; d < n; d++) o[d] = dtype == DATTN_F16 ? dattn_f2h(src[d]) : dattn_f2bf(src[d]);
}

#include "kern.h"

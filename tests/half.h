/* fp16 / bf16 <-> double, for the tests only (written from IEEE 754 binary16 and the
 * bfloat16 definition, independent of the library's conversions).
 *
 * Decoding is exact. Encoding rounds to nearest, ties to even, overflows to infinity
 * and keeps NaN a NaN. test_api checks both on every one of the 65536 bit patterns. */
#ifndef DATTN_TESTS_HALF_H
#define DATTN_TESTS_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline double th_f16_to_double(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = ldexp((double)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexp((double)(1024 + m), e - 25);
    return s ? -v : v;
}

static inline double th_bf16_to_double(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return (double)f;
}

/* x rounded to a binary format with `prec` significant bits, smallest normal exponent
 * emin (value 2^emin) and largest finite value maxv; ties to even. */
static inline double th_round_fmt(double x, int prec, int emin, double maxv)
{
    if (isnan(x) || isinf(x) || x == 0.0) return x;
    double a = fabs(x);
    int E;
    frexp(a, &E); /* a in [2^(E-1), 2^E) */
    int qe = (E - 1 >= emin ? E - 1 : emin) - (prec - 1); /* exponent of one ulp */
    double r = ldexp(nearbyint(ldexp(a, -qe)), qe);         /* default mode: RNE */
    if (r > maxv) {
        /* Past the largest finite value: infinity when at or above the halfway point
         * to the next (virtual) binade step, which RNE above already decided. */
        r = INFINITY;
    }
    return x < 0 ? -r : r;
}

static inline double th_round_f16(double x) { return th_round_fmt(x, 11, -14, 65504.0); }
static inline double th_round_bf16(double x)
{
    return th_round_fmt(x, 8, -126, 3.38953138925153547590e38);
}

static inline uint16_t th_double_to_f16(double x)
{
    if (isnan(x)) return 0x7E00;
    double r = th_round_f16(x);
    uint16_t s = signbit(r) ? 0x8000 : 0;
    double a = fabs(r);
    if (isinf(a)) return s | 0x7C00;
    if (a < ldexp(1.0, -14)) return s | (uint16_t)ldexp(a, 24);
    int E;
    frexp(a, &E);
    int e = E - 1 + 15;
    uint16_t m = (uint16_t)(ldexp(a, 11 - E) - 1024.0);
    return s | (uint16_t)(e << 10) | m;
}

static inline uint16_t th_double_to_bf16(double x)
{
    if (isnan(x)) return 0x7FC0;
    float f = (float)th_round_bf16(x); /* exact in float */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

#endif

/* The warp-specialized CUDA backward's work split (src/cuda/bwd_ws_d64_sm90.cu): which row
 * blocks of a head each of its G CTAs runs. Host code in plain C, so that the CPU tests check
 * it. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* A unit is one 128-row block of one sequence (b-major: u = b * nblk + m). With position
 * terms its two 64-row warpgroup tiles walk every 64-key tile of the sequence, and a band
 * tile (one with a relative position in (-R, R), ws_is_band) costs ~3x a saturated one
 * (NOTES, "the backward's tile costs split from committed figures": ~4.1x and ~1.3x a plain
 * tile), so a middle block of a long sequence costs up to ~1.3x an end block. The weights
 * (DATTN_WS_W_*, internal.h) are per 64-row tile, and per unit for its start and end work. */

/* floor(x / 64) for any sign */
static int64_t fdiv64(int64_t x) { return x >= 0 ? x / 64 : -((-x + 63) / 64); }

/* band tiles among key tiles j in [0, nt) for the 64 rows from r0: 64 j > r0 - 63 - R and
 * 64 j < r0 + 63 + R */
static int64_t band_tiles(int64_t r0, int64_t nt, int64_t R)
{
    int64_t lo = fdiv64(r0 - 63 - R) + 1, hi = fdiv64(r0 + 62 + R);
    if (lo < 0) lo = 0;
    if (hi > nt - 1) hi = nt - 1;
    return hi >= lo ? hi - lo + 1 : 0;
}

int64_t dattn_ws_unit_cost(int64_t m, int64_t L, int64_t R)
{
    const int64_t nt = (L + 63) / 64;
    int64_t c = DATTN_WS_W_UNIT;
    for (int w = 0; w < 2; w++) {
        const int64_t r0 = 128 * m + 64 * w;
        if (r0 >= L) break;
        const int64_t nb = R >= 1 ? band_tiles(r0, nt, R) : 0;
        c += DATTN_WS_W_BAND * nb + DATTN_WS_W_SAT * (nt - nb);
    }
    return c;
}

/* prefix cost of units [0, k): whole sequences, then a prefix of one (pre[m]: blocks [0, m)) */
static int64_t prefix(const int64_t *pre, int64_t nblk, int64_t k)
{
    return (k / nblk) * pre[nblk] + pre[k % nblk];
}

/* Greedy split under a bound T: each range as long as its cost stays <= T, but leaving one
 * unit at least for every later range. Fills ub[0..G]; 1 when it reaches U. (It stays ahead
 * of any split with ranges of cost <= T and at least one unit each, so it succeeds whenever
 * such a split exists.) */
static int greedy(const int64_t *pre, int64_t nblk, int64_t U, int G, int64_t T, int32_t *ub)
{
    int64_t s = 0;
    ub[0] = 0;
    for (int g = 0; g < G; g++) {
        const int64_t cap = U - (G - 1 - g), base = prefix(pre, nblk, s);
        int64_t lo = s, hi = cap; /* the largest e in [s, cap] with cost(s, e) <= T */
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo + 1) / 2;
            if (prefix(pre, nblk, mid) - base <= T) lo = mid;
            else hi = mid - 1;
        }
        if (lo == s) return 0; /* (T below one unit's cost) */
        s = lo;
        ub[g + 1] = (int32_t)s;
    }
    return s == U;
}

/* The last split, per thread: training repeats one shape for every layer and step. */
static _Thread_local struct {
    int64_t B, L, R;
    int G;
    int32_t ub[DATTN_WS_UB_MAX];
} g_last;

int dattn_ws_unit_bounds(int64_t B, int64_t L, int64_t R, int G, int32_t *ub)
{
    if (B < 1 || L < 1 || G < 1 || G > DATTN_WS_UB_MAX - 1) return -1;
    const int64_t nblk = (L + 127) / 128, U = B * nblk;
    if (U > INT32_MAX || G > U) return -1;
    if (g_last.G == G && g_last.B == B && g_last.L == L && g_last.R == R) {
        memcpy(ub, g_last.ub, sizeof(int32_t) * (size_t)(G + 1));
        return 0;
    }
    for (int g = 0; g <= G; g++) ub[g] = (int32_t)(U * g / G); /* equal unit counts */
    if (R >= 1) {
        int64_t buf[513], *pre = nblk < 513 ? buf : malloc(sizeof(int64_t) * (size_t)(nblk + 1));
        if (!pre) return -2;
        int64_t cmax = 0;
        pre[0] = 0;
        for (int64_t m = 0; m < nblk; m++) {
            const int64_t c = dattn_ws_unit_cost(m, L, R);
            pre[m + 1] = pre[m] + c;
            if (c > cmax) cmax = c;
        }
        /* the smallest bound the greedy split meets, between the largest unit and the
         * equal-count split's most expensive range (a split of that bound exists) */
        int64_t lo = cmax, hi = 0;
        for (int g = 0; g < G; g++) {
            const int64_t c = prefix(pre, nblk, ub[g + 1]) - prefix(pre, nblk, ub[g]);
            if (c > hi) hi = c;
        }
        int32_t try_ub[DATTN_WS_UB_MAX]; /* (a failed try leaves it partly written) */
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (greedy(pre, nblk, U, G, mid, try_ub)) hi = mid;
            else lo = mid + 1;
        }
        if (greedy(pre, nblk, U, G, lo, try_ub)) memcpy(ub, try_ub, sizeof(int32_t) * (size_t)(G + 1));
        if (pre != buf) free(pre);
    }
    memcpy(g_last.ub, ub, sizeof(int32_t) * (size_t)(G + 1));
    g_last.B = B;
    g_last.L = L;
    g_last.R = R;
    g_last.G = G;
    return 0;
}

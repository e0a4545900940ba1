/* ubal's model figures (NOTES "ubal"): for a shape, the most expensive CTA range of the split
 * dattn_ws_unit_bounds returns, over that of the equal-count split, with the ranges' costs taken
 * from tile costs that are NOT the split's own weights (the fit of NOTES "the backward's tile
 * costs split from committed figures": band 4.1, saturated 1.3 plain tiles, 1.0 a block; and a
 * second set, band 3.1, saturated 1.0, 2.0 a block). Build against a library with ws_units.c
 * (branch ubal), from the repository root:
 *   cc -std=c11 -Iinclude -Isrc bench/results/host-2026-12-07-ubalmodel/model.c build-cpu/libdattn.a -fopenmp -lm -o /tmp/model && /tmp/model */
#include "internal.h"

#include <stdio.h>

static double cost(int64_t m, int64_t L, int64_t R, const double w[3])
{
    double c = w[2];
    for (int k = 0; k < 2; k++) {
        const int64_t r0 = 128 * m + 64 * k;
        if (r0 >= L) break;
        for (int64_t n0 = 0; n0 < L; n0 += 64)
            c += !(r0 - (n0 + 63) >= R || r0 + 63 - n0 <= -R) ? w[0] : w[1];
    }
    return c;
}

static double worst(const int32_t *ub, int G, int64_t L, int64_t R, const double w[3])
{
    const int64_t nblk = (L + 127) / 128;
    double mx = 0;
    for (int g = 0; g < G; g++) {
        double c = 0;
        for (int64_t u = ub[g]; u < ub[g + 1]; u++) c += cost(u % nblk, L, R, w);
        if (c > mx) mx = c;
    }
    return mx;
}

int main(void)
{
    static const int64_t sh[][2] = {{32, 512}, {8, 2048}, {2, 8192}, {4, 2048}, {8, 512}, {16, 1024}, {4, 4096}, {1, 8192}};
    static const double ws[2][3] = {{4.1, 1.3, 1.0}, {3.1, 1.0, 2.0}};
    const int64_t R = 512; /* v3 (position_buckets 256, max_relative_positions 512), L >= 512 */
    printf("H 12 (G = min(11, U)), R 512: most expensive range, cost split / equal counts\n");
    for (int k = 0; k < 8; k++) {
        const int64_t B = sh[k][0], L = sh[k][1], U = B * ((L + 127) / 128);
        const int G = U < 11 ? (int)U : 11;
        int32_t ub[DATTN_WS_UB_MAX], eq[DATTN_WS_UB_MAX];
        if (dattn_ws_unit_bounds(B, L, R, G, ub) != 0) return 1;
        for (int g = 0; g <= G; g++) eq[g] = (int32_t)(U * g / G);
        printf("B %2lld L %4lld:", (long long)B, (long long)L);
        for (int s = 0; s < 2; s++) {
            const double a = worst(ub, G, L, R, ws[s]), e = worst(eq, G, L, R, ws[s]);
            double tot = 0;
            for (int64_t u = 0; u < U; u++) tot += cost(u % ((L + 127) / 128), L, R, ws[s]);
            printf("  costs %.1f/%.1f/%.1f: split %.4f (equal counts %.4f of the mean)", ws[s][0], ws[s][1], ws[s][2], a / e,
                   e / (tot / G));
        }
        printf("\n");
    }
    return 0;
}

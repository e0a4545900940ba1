/* Distinct table slots per band tile (64 rows x 64 keys, offset d = m0 - n0, the ws kernels'
 * warpgroup tile; band per ws_is_band's rule), for v3's slot map (position_buckets 256,
 * max_relative_positions 512). A tile whose slot span is <= 64 could take its window
 * products from one 64-row block of the table instead of two blocks of the r window.
 *   gcc -O1 -Isrc -Iinclude bench/results/host-2026-12-06-slotspan/slotspan.c src/buckets.c -lm -o /tmp/slotspan && /tmp/slotspan */
#include "internal.h"
#include <stdio.h>

/* (buckets.c's two error hooks, without the rest of the library) */
dattn_status dattn_set_error(dattn_status s, const char *f, ...) { (void)f; return s; }
void dattn_clear_error(void) {}

int main(void)
{
    dattn_slotmap m;
    if (dattn_slotmap_build(&m, 256, 512, 100000) != DATTN_OK) return 1;
    const int R = m.R;
    for (int L = 512; L <= 8192; L *= 4) {
        long nb = 0, n64 = 0, n32 = 0;
        double sum = 0;
        for (int m0 = 0; m0 < L; m0 += 64)
            for (int n0 = 0; n0 < L; n0 += 64) {
                const int d = m0 - n0, rmin = d - 63, rmax = d + 63;
                if (rmin >= R || rmax <= -R) continue;
                nb++;
                int lo = 1 << 30, hi = -(1 << 30);
                for (int r = rmin; r <= rmax; r++) {
                    const int rr = r < -R ? -R : r > R ? R : r, s = m.tab[rr + R];
                    if (s < lo) lo = s;
                    if (s > hi) hi = s;
                }
                const int span = hi - lo + 1;
                sum += span;
                n64 += span <= 64;
                n32 += span <= 32;
            }
        printf("L %d band tiles %ld: slot span <=64: %.1f%%, <=32: %.1f%%, mean span %.1f\n", L, nb,
               100.0 * n64 / nb, 100.0 * n32 / nb, sum / nb);
    }
    dattn_slotmap_free(&m);
    return 0;
}

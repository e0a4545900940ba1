/* 1. The band share of the ws kernels' warpgroup tiles (64 rows x 64 keys, offset d = m0 - n0,
 *    ws_is_band's rule: band unless rmin >= R or rmax <= -R) for the slot-map reaches R of the
 *    bench's three configurations with position terms (satmost: 8 buckets, M 16; band256: no
 *    buckets, S 256; default: 256 buckets, M 512), R from dattn_slotmap_build.
 * 2. Distinct table slots per band tile for v3's slot map (the default). A tile whose slot span
 *    is <= 64 could take its window products from one 64-row block of the table instead of two
 *    blocks of the r window.
 *   gcc -O1 -Isrc -Iinclude bench/results/host-2026-12-06-slotspan/slotspan.c src/buckets.c -lm -o /tmp/slotspan && /tmp/slotspan */
#include "internal.h"
#include <stdio.h>

/* (buckets.c's two error hooks, without the rest of the library) */
dattn_status dattn_set_error(dattn_status s, const char *f, ...) { (void)f; return s; }
void dattn_clear_error(void) {}

/* ws_is_band's rule for a warpgroup tile of 64 rows at offset d = m0 - n0 from its 64 keys */
static int is_band(int d, int R) { return !(d - 63 >= R || d + 63 <= -R); }

int main(void)
{
    const int cfg[3][2] = {{8, 16}, {0, 256}, {256, 512}};
    const char *name[3] = {"satmost", "band256", "default"};
    int Rc[3];
    for (int c = 0; c < 3; c++) {
        dattn_slotmap mc;
        if (dattn_slotmap_build(&mc, cfg[c][0], cfg[c][1], 100000) != DATTN_OK) return 1;
        Rc[c] = mc.R;
        dattn_slotmap_free(&mc);
    }
    for (int L = 512; L <= 8192; L *= 4) {
        printf("band share L %d:", L);
        for (int c = 0; c < 3; c++) {
            long nb = 0, n = 0;
            for (int m0 = 0; m0 < L; m0 += 64)
                for (int n0 = 0; n0 < L; n0 += 64) n++, nb += is_band(m0 - n0, Rc[c]);
            printf(" %s (R %d) %.1f%%", name[c], Rc[c], 100.0 * nb / n);
        }
        printf("\n");
    }
    dattn_slotmap m;
    if (dattn_slotmap_build(&m, 256, 512, 100000) != DATTN_OK) return 1;
    const int R = m.R;
    for (int L = 512; L <= 8192; L *= 4) {
        long nb = 0, n64 = 0, n32 = 0;
        double sum = 0;
        for (int m0 = 0; m0 < L; m0 += 64)
            for (int n0 = 0; n0 < L; n0 += 64) {
                const int d = m0 - n0, rmin = d - 63, rmax = d + 63;
                if (!is_band(d, R)) continue;
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

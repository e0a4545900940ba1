/* The row blocks each of a head's 11 CTAs runs at the A/B's three shapes (position_buckets 256,
 * max_relative_positions 512, as bench/gpu_prof_target.py's calls; R from the library's slot
 * map for rows up to L - 1, as a call builds it), from the library's own dattn_ws_unit_bounds, next to the
 * equal counts (U g / G) main had before. NOTES ("ubal: prediction against outcome") quotes it.
 * Build and run from the repository root (machine c-kernels, no GPU; libdattn.a as `make` built
 * it there, with the CUDA objects, hence cudart):
 *   gcc -std=c11 -Isrc -Iinclude bench/results/gpu-2026-12-07-s41/split/split.c build/libdattn.a \
 *       -fopenmp -L/usr/local/cuda/lib64 -lcudart -lstdc++ -lm -ldl -lpthread -o /tmp/split
 *   LD_LIBRARY_PATH=/usr/local/cuda/lib64 /tmp/split > bench/results/gpu-2026-12-07-s41/split/split.txt */
#include <stdio.h>
#include "internal.h"
int main(void)
{
    const int sh[3][2] = {{32, 512}, {8, 2048}, {2, 8192}}, G = 11;
    for (int s = 0; s < 3; s++) {
        int32_t ub[DATTN_WS_UB_MAX];
        dattn_slotmap m;
        if (dattn_slotmap_build(&m, 256, 512, sh[s][1] - 1) != DATTN_OK) return 1;
        const int64_t R = m.R;
        dattn_slotmap_free(&m);
        const int64_t U = (int64_t)sh[s][0] * ((sh[s][1] + 127) / 128);
        const int r = dattn_ws_unit_bounds(sh[s][0], sh[s][1], R, G, ub);
        printf("B%d L%d (U %lld, R %lld) rc %d\n  by cost:      ", sh[s][0], sh[s][1], (long long)U, (long long)R, r);
        for (int g = 0; g < G; g++) printf(" %d", ub[g + 1] - ub[g]);
        printf("\n  equal counts: ");
        for (int g = 0; g < G; g++) printf(" %lld", (long long)(U * (g + 1) / G - U * g / G));
        printf("\n");
    }
    return 0;
}

/* CPU forward: orchestration (the kernels are in kern.h).
 *
 * Pairs (sequence, head) are processed in waves; a wave holds as many pairs as fit in
 * FWD_WAVE_BYTES of packed buffers (at least one). Per wave, phase 1 runs in parallel
 * over (pair, key tile) — packing K^T, V, the key bias and the p2c table rows — and
 * phase 2 in parallel over (pair, row block of 64 query rows), each writing its own
 * rows of out and lse. Every element is computed by one work item with a fixed
 * summation order, so the thread count changes nothing in the results.
 *
 * Workspace (caller's): the packed position tables of the call and the wave buffers.
 * Per thread (malloc'd before anything is written): the row-block tiles, ~200 KB. */
#include "cpu.h"

#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define FWD_WAVE_BYTES ((size_t)16 << 20)

static size_t pair_bytes(const cpu_plan *pl)
{
    dattn_arena a = {NULL, 0};
    cpu_pair pr;
    dattn_cpu_pair_layout(pl, &pr, &a, 0);
    return a.used;
}

static int64_t wave_pairs(const cpu_plan *pl)
{
    const int64_t pairs = pl->c->B * pl->c->H;
    size_t per = pair_bytes(pl);
    int64_t w = (int64_t)(FWD_WAVE_BYTES / (per > 0 ? per : 1));
    if (w < 1) w = 1;
    if (w > pairs) w = pairs;
    return w;
}

size_t dattn_cpu_fwd_workspace(const dattn_call *c)
{
    cpu_plan pl;
    dattn_arena a = {NULL, 0};
    dattn_cpu_plan_layout(&pl, c, NULL, &a, 0);
    return a.used + (size_t)wave_pairs(&pl) * pair_bytes(&pl);
}

dattn_status dattn_cpu_fwd(const dattn_call *c, const dattn_slotmap *sm)
{
    const dattn_cpu_kernels *kr = dattn_cpu_kernels_active();
    if (!kr) return DATTN_UNSUPPORTED; /* error set by dattn_cpu_kernels_active */
    const int64_t pairs = c->B * c->H;
    int nt = dattn_cpu_threads(c);

    cpu_plan pl;
    dattn_arena ws = {(char *)c->p->workspace, 0};
    dattn_cpu_plan_layout(&pl, c, sm, &ws, 0);
    const int64_t W = wave_pairs(&pl);

    /* Per-thread tiles and the wave's item table, before anything is written. */
    cpu_tbuf tbm;
    dattn_arena cnt = {NULL, 0};
    dattn_cpu_tbuf_layout(&pl, &tbm, &cnt, 0);
    const size_t tbytes = cnt.used;
    char *tmem = dattn_cpu_alloc(tbytes * (size_t)nt);
    cpu_tbuf *tb = calloc((size_t)nt, sizeof *tb);
    cpu_pair *pr = calloc((size_t)(W > 0 ? W : 1), sizeof *pr);
    int64_t *kofs = calloc((size_t)(W + 1), sizeof *kofs);
    int64_t *rofs = calloc((size_t)(W + 1), sizeof *rofs);
    if (!tmem || !tb || !pr || !kofs || !rofs) {
        free(tmem);
        free(tb);
        free(pr);
        free(kofs);
        free(rofs);
        return dattn_set_error(DATTN_INTERNAL, "out of host memory for CPU tiles");
    }
    for (int t = 0; t < nt; t++) {
        dattn_arena a = {tmem + (size_t)t * tbytes, 0};
        dattn_cpu_tbuf_layout(&pl, &tb[t], &a, 0);
    }
    for (int64_t w = 0; w < W; w++) dattn_cpu_pair_layout(&pl, &pr[w], &ws, 0);
    dattn_cpu_plan_fill(&pl, nt);

    for (int64_t p0 = 0; p0 < pairs; p0 += W) {
        const int64_t np = W < pairs - p0 ? W : pairs - p0;
        for (int64_t w = 0; w < np; w++) {
            dattn_cpu_pair_set(&pl, &pr[w], (p0 + w) / c->H, (p0 + w) % c->H);
            kofs[w + 1] = kofs[w] + pr[w].nt;
            rofs[w + 1] = rofs[w] + (pr[w].n + pl.bm - 1) / pl.bm;
        }
        const int64_t nk = kofs[np], nr = rofs[np];
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
#endif
        {
            int t = 0;
#ifdef _OPENMP
            t = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
#endif
            for (int64_t it = 0; it < nk; it++) {
                int64_t w = 0;
                while (kofs[w + 1] <= it) w++;
                kr->fwd_tile(&pl, &pr[w], it - kofs[w]);
            }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
            for (int64_t it = 0; it < nr; it++) {
                int64_t w = 0;
                while (rofs[w + 1] <= it) w++;
                kr->fwd_rows(&pl, &pr[w], it - rofs[w], &tb[t]);
            }
        }
    }
    free(tmem);
    free(tb);
    free(pr);
    free(kofs);
    free(rofs);
    return DATTN_OK;
}

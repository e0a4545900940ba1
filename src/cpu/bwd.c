/* CPU backward: orchestration (the kernels are in kern.h).
 *
 * One work item per (sequence, head) pair, scheduled dynamically over the threads. A
 * pair is processed start to end by one thread, row block after row block in order,
 * accumulating dk, dv and the slot sums of ds in fp32 buffers of its own, and writes
 * its dq, dk, dv rows and a partial dpk / dpq table ([2S][Dp] fp32 each) into the
 * workspace. A second pass sums the partials over the batch, in batch order. Every
 * output element has one writer and a fixed order of summation: the results are
 * bitwise identical run to run and for any thread count.
 *
 * Workspace (caller's): the packed position tables and the partial dpk / dpq tables
 * ([B*H][2S][Dp] fp32 for each term that is on). Per worker thread (malloc'd before
 * anything is written): the pair buffers — K, K^T, V^T, dK, dV (L x Dp each) and the
 * p2c table and its ds sums (L x 2S each: 2 x 16 MiB at L = 8192, the price of computing
 * each k_j . pq[t] once per pair instead of once per score) — and the row-block tiles. */
#include "cpu.h"

#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static size_t part_floats(const cpu_plan *pl) { return (size_t)(pl->S2 * pl->Dp); }

size_t dattn_cpu_bwd_workspace(const dattn_call *c)
{
    cpu_plan pl;
    dattn_arena a = {NULL, 0};
    dattn_cpu_plan_layout(&pl, c, NULL, &a, 1);
    size_t parts = (size_t)(c->B * c->H) * part_floats(&pl) * sizeof(float);
    parts = (parts + 63) & ~(size_t)63;
    return a.used + (size_t)(c->c2p + c->p2c) * parts;
}

/* dst[h] = sum over b of part[b*H + h], in b order, stored in the output dtype; rows
 * (slots) outside [smin, smax] no pair could reach: zeros. */
static void reduce_tables(const cpu_plan *pl, const float *part, const dattn_tensor *dst, int nt)
{
    const dattn_call *c = pl->c;
    const size_t es = dattn_dtype_size(c->p->dtype);
    const int64_t rows = pl->S2, D = pl->D, Dp = pl->Dp, per = rows * Dp;
    (void)nt;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
    for (int64_t hr = 0; hr < c->H * rows; hr++) {
        int64_t h = hr / rows, r = hr % rows;
        float acc[256];
        for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
        for (int64_t b = 0; b < c->B && r >= pl->smin && r <= pl->smax; b++) {
            const float *src = part + (b * c->H + h) * per + r * Dp;
            for (int64_t d = 0; d < D; d++) acc[d] += src[d];
        }
        dattn_store_row((char *)dst->data + (h * dst->stride[0] + r * dst->stride[1]) * (int64_t)es,
                        acc, c->p->dtype, D);
    }
}

dattn_status dattn_cpu_bwd(const dattn_call *c, const dattn_slotmap *sm)
{
    const dattn_cpu_kernels *kr = dattn_cpu_kernels_active();
    if (!kr) return DATTN_UNSUPPORTED;
    const int64_t pairs = c->B * c->H;
    const int nt = dattn_cpu_threads(c);
    int nw = nt;
    if (nw > pairs) nw = pairs > 0 ? (int)pairs : 1;

    cpu_plan pl;
    dattn_arena ws = {(char *)c->p->workspace, 0};
    dattn_cpu_plan_layout(&pl, c, sm, &ws, 1);
    const size_t pf = part_floats(&pl);
    size_t parts = ((size_t)pairs * pf * sizeof(float) + 63) & ~(size_t)63;
    float *dpk_part = c->c2p ? (float *)dattn_arena_take(&ws, parts) : NULL;
    float *dpq_part = c->p2c ? (float *)dattn_arena_take(&ws, parts) : NULL;

    cpu_pair prm;
    cpu_tbuf tbm;
    dattn_arena cnt = {NULL, 0};
    dattn_cpu_pair_layout(&pl, &prm, &cnt, 1);
    dattn_cpu_tbuf_layout(&pl, &tbm, &cnt, 1);
    const size_t wbytes = cnt.used;
    char *wmem = dattn_cpu_alloc(wbytes * (size_t)nw);
    cpu_pair *pr = calloc((size_t)nw, sizeof *pr);
    cpu_tbuf *tb = calloc((size_t)nw, sizeof *tb);
    if (!wmem || !pr || !tb) {
        free(wmem);
        free(pr);
        free(tb);
        return dattn_set_error(DATTN_INTERNAL, "out of host memory for CPU backward buffers");
    }
    for (int t = 0; t < nw; t++) {
        dattn_arena a = {wmem + (size_t)t * wbytes, 0};
        dattn_cpu_pair_layout(&pl, &pr[t], &a, 1);
        dattn_cpu_tbuf_layout(&pl, &tb[t], &a, 1);
    }
    dattn_cpu_plan_fill(&pl, nt);

#ifdef _OPENMP
#pragma omp parallel for num_threads(nw) schedule(dynamic, 1)
#endif
    for (int64_t bh = 0; bh < pairs; bh++) {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        dattn_cpu_pair_set(&pl, &pr[t], bh / c->H, bh % c->H);
        kr->bwd_pair(&pl, &pr[t], &tb[t], dpk_part ? dpk_part + (size_t)bh * pf : NULL,
                     dpq_part ? dpq_part + (size_t)bh * pf : NULL);
    }
    free(wmem);
    free(pr);
    free(tb);
    if (c->c2p) reduce_tables(&pl, dpk_part, &c->p->dpk, nt);
    if (c->p2c) reduce_tables(&pl, dpq_part, &c->p->dpq, nt);
    return DATTN_OK;
}

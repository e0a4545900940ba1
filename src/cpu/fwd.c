/* CPU forward, portable baseline (v0).
 *
 * One (sequence, head) pair per OpenMP work item, one row at a time: the row's scores
 * in an O(L) buffer, exact softmax, P.V. Every output element is produced by exactly one
 * work item in a fixed order, so results do not depend on the thread count.
 * Memory: per thread K, V (fp32, L x D), pk/pq (2S x D) and one score row. */
#include "common.h"

#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

size_t dattn_cpu_fwd_workspace(const dattn_call *c)
{
    (void)c;
    return 0;
}

const char *dattn_cpu_isa(void) { return "portable"; }

dattn_status dattn_cpu_set_isa(const char *name)
{
    if (!name || !strcmp(name, "auto") || !strcmp(name, "portable")) return DATTN_OK;
    return dattn_set_error(DATTN_UNSUPPORTED, "CPU kernel family '%s' is not built", name);
}

typedef struct fwd_buf {
    float *K, *V, *PK, *PQ, *s, *qi, *acc, *c2p;
    unsigned char *c2p_done;
} fwd_buf;

static void buf_free(fwd_buf *w)
{
    free(w->K);
    free(w->V);
    free(w->PK);
    free(w->PQ);
    free(w->s);
    free(w->qi);
    free(w->acc);
    free(w->c2p);
    free(w->c2p_done);
}

static int buf_alloc(fwd_buf *w, int64_t L, int64_t D, int64_t S2)
{
    memset(w, 0, sizeof *w);
    size_t LD = (size_t)(L > 0 ? L : 1) * (size_t)D;
    w->K = malloc(sizeof(float) * LD);
    w->V = malloc(sizeof(float) * LD);
    w->PK = malloc(sizeof(float) * (size_t)S2 * (size_t)D);
    w->PQ = malloc(sizeof(float) * (size_t)S2 * (size_t)D);
    w->s = malloc(sizeof(float) * (size_t)(L > 0 ? L : 1));
    w->qi = malloc(sizeof(float) * (size_t)D);
    w->acc = malloc(sizeof(float) * (size_t)D);
    w->c2p = malloc(sizeof(float) * (size_t)S2);
    w->c2p_done = malloc((size_t)S2);
    return w->K && w->V && w->PK && w->PQ && w->s && w->qi && w->acc && w->c2p && w->c2p_done;
}

static float dotf(const float *a, const float *b, int64_t n)
{
    float s = 0.0f;
    for (int64_t d = 0; d < n; d++) s += a[d] * b[d];
    return s;
}

/* Loads the 2S x D table of head h into dst (fp32). */
static void load_table(float *dst, const dattn_tensor *t, const dattn_call *c, int64_t h, size_t es)
{
    for (int64_t r = 0; r < 2 * (int64_t)c->S; r++)
        dattn_load_row(dst + r * c->D, dattn_ptr(t, h * t->stride[0] + r * t->stride[1], es),
                       c->p->dtype, c->D);
}

static void fwd_pair(const dattn_call *c, const dattn_slotmap *sm, int64_t b, int64_t h,
                     fwd_buf *w)
{
    const dattn_params *p = c->p;
    const size_t es = dattn_dtype_size(p->dtype);
    const int64_t D = c->D, n = dattn_seq_len(c, b), S2 = 2 * (int64_t)c->S;
    const float inv_scale = 1.0f / c->scale;

    for (int64_t j = 0; j < n; j++) {
        dattn_load_row(w->K + j * D, dattn_ptr(&p->k, dattn_row_off(c, &p->k, b, j, h), es), p->dtype, D);
        dattn_load_row(w->V + j * D, dattn_ptr(&p->v, dattn_row_off(c, &p->v, b, j, h), es), p->dtype, D);
    }
    if (c->c2p) load_table(w->PK, &p->pk, c, h, es);
    if (c->p2c) load_table(w->PQ, &p->pq, c, h, es);

    for (int64_t i = 0; i < n; i++) {
        float *acc = w->acc;
        float lse;
        if (!dattn_valid(c, b, i)) {
            /* Padded query row: uniform over all n keys (HF) or zeros. */
            if (p->padded_rows == DATTN_PADROWS_HF) {
                for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
                for (int64_t j = 0; j < n; j++) {
                    if (!dattn_keep(c, b, h, i, j)) continue;
                    for (int64_t d = 0; d < D; d++) acc[d] += w->V[j * D + d];
                }
                float f = (c->drop_threshold ? c->drop_scale : 1.0f) / (float)n;
                for (int64_t d = 0; d < D; d++) acc[d] *= f;
                lse = logf((float)n);
            } else {
                for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
                lse = -INFINITY;
            }
        } else {
            dattn_load_row(w->qi, dattn_ptr(&p->q, dattn_row_off(c, &p->q, b, i, h), es), p->dtype, D);
            if (c->c2p) memset(w->c2p_done, 0, (size_t)S2);
            float mx = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                if (!dattn_valid(c, b, j)) {
                    w->s[j] = -INFINITY;
                    continue;
                }
                float s = dotf(w->qi, w->K + j * D, D);
                int32_t t = dattn_slotmap_get(sm, i - j);
                if (c->c2p) {
                    if (!w->c2p_done[t]) {
                        w->c2p[t] = dotf(w->qi, w->PK + (int64_t)t * D, D);
                        w->c2p_done[t] = 1;
                    }
                    s += w->c2p[t];
                }
                if (c->p2c) s += dotf(w->K + j * D, w->PQ + (int64_t)t * D, D);
                s *= inv_scale;
                w->s[j] = s;
                if (s > mx) mx = s;
            }
            float sum = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                float e = w->s[j] == -INFINITY ? 0.0f : expf(w->s[j] - mx);
                w->s[j] = e;
                sum += e;
            }
            for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                if (w->s[j] == 0.0f || !dattn_keep(c, b, h, i, j)) continue;
                for (int64_t d = 0; d < D; d++) acc[d] += w->s[j] * w->V[j * D + d];
            }
            float f = (c->drop_threshold ? c->drop_scale : 1.0f) / sum;
            for (int64_t d = 0; d < D; d++) acc[d] *= f;
            lse = mx + logf(sum);
        }
        dattn_store_row((char *)p->out.data + dattn_row_off(c, &p->out, b, i, h) * (int64_t)es, acc,
                        p->dtype, D);
        if (p->lse.data) ((float *)p->lse.data)[dattn_lse_off(c, b, h, i)] = lse;
    }
}

dattn_status dattn_cpu_fwd(const dattn_call *c, const dattn_slotmap *sm)
{
    const int64_t pairs = c->B * c->H;
    int nt = 1;
#ifdef _OPENMP
    nt = c->p->num_threads > 0 ? c->p->num_threads : omp_get_max_threads();
#endif
    if (nt > pairs) nt = pairs > 0 ? (int)pairs : 1;
    /* Per-thread tiles first, so that a failed allocation writes nothing. */
    fwd_buf *w = calloc((size_t)nt, sizeof *w);
    int ok = w != NULL;
    for (int t = 0; ok && t < nt; t++) ok = buf_alloc(&w[t], c->max_len, c->D, 2 * (int64_t)c->S);
    if (!ok) {
        for (int t = 0; w && t < nt; t++) buf_free(&w[t]);
        free(w);
        return dattn_set_error(DATTN_INTERNAL, "out of host memory for CPU tiles");
    }
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
#endif
    for (int64_t bh = 0; bh < pairs; bh++) {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        fwd_pair(c, sm, bh / c->H, bh % c->H, &w[t]);
    }
    for (int t = 0; t < nt; t++) buf_free(&w[t]);
    free(w);
    return DATTN_OK;
}

/* CPU backward, portable baseline (v0).
 *
 * One (sequence, head) pair per work item recomputes its probabilities row by row from
 * the saved lse and accumulates dq, dk, dv in fp32. The table gradients of a pair go to
 * its own fp32 slice of the workspace ([B*H, 2S, D] for dpk and for dpq); a second pass
 * sums the slices over the batch in batch order. Every output element has one writer and
 * a fixed summation order: bitwise identical results for any thread count. */
#include "common.h"

#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static size_t table_floats(const dattn_call *c) { return (size_t)(2 * (int64_t)c->S * c->D); }

size_t dattn_cpu_bwd_workspace(const dattn_call *c)
{
    size_t per = table_floats(c) * sizeof(float);
    size_t n = (size_t)(c->B * c->H) * per;
    return (size_t)(c->c2p + c->p2c) * n;
}

typedef struct bwd_buf {
    float *K, *V, *PK, *PQ, *dK, *dV, *qi, *doi, *oi, *dqi, *c2p;
    unsigned char *c2p_done;
} bwd_buf;

static void buf_free(bwd_buf *w)
{
    free(w->K);
    free(w->V);
    free(w->PK);
    free(w->PQ);
    free(w->dK);
    free(w->dV);
    free(w->qi);
    free(w->doi);
    free(w->oi);
    free(w->dqi);
    free(w->c2p);
    free(w->c2p_done);
}

static int buf_alloc(bwd_buf *w, int64_t L, int64_t D, int64_t S2)
{
    size_t LD = (size_t)(L > 0 ? L : 1) * (size_t)D;
    w->K = malloc(sizeof(float) * LD);
    w->V = malloc(sizeof(float) * LD);
    w->dK = malloc(sizeof(float) * LD);
    w->dV = malloc(sizeof(float) * LD);
    w->PK = malloc(sizeof(float) * (size_t)S2 * (size_t)D);
    w->PQ = malloc(sizeof(float) * (size_t)S2 * (size_t)D);
    w->qi = malloc(sizeof(float) * (size_t)D);
    w->doi = malloc(sizeof(float) * (size_t)D);
    w->oi = malloc(sizeof(float) * (size_t)D);
    w->dqi = malloc(sizeof(float) * (size_t)D);
    w->c2p = malloc(sizeof(float) * (size_t)S2);
    w->c2p_done = malloc((size_t)S2);
    return w->K && w->V && w->dK && w->dV && w->PK && w->PQ && w->qi && w->doi && w->oi &&
           w->dqi && w->c2p && w->c2p_done;
}

static float dotf(const float *a, const float *b, int64_t n)
{
    float s = 0.0f;
    for (int64_t d = 0; d < n; d++) s += a[d] * b[d];
    return s;
}

static void load_table(float *dst, const dattn_tensor *t, const dattn_call *c, int64_t h, size_t es)
{
    for (int64_t r = 0; r < 2 * (int64_t)c->S; r++)
        dattn_load_row(dst + r * c->D, dattn_ptr(t, h * t->stride[0] + r * t->stride[1], es),
                       c->p->dtype, c->D);
}

static void bwd_pair(const dattn_call *c, const dattn_slotmap *sm, int64_t b, int64_t h,
                     bwd_buf *w, float *dpk_part, float *dpq_part)
{
    const dattn_params *p = c->p;
    const size_t es = dattn_dtype_size(p->dtype);
    const int64_t D = c->D, n = dattn_seq_len(c, b), S2 = 2 * (int64_t)c->S;
    const float inv_scale = 1.0f / c->scale;
    const float ds_drop = c->drop_threshold ? c->drop_scale : 1.0f;

    for (int64_t j = 0; j < n; j++) {
        dattn_load_row(w->K + j * D, dattn_ptr(&p->k, dattn_row_off(c, &p->k, b, j, h), es), p->dtype, D);
        dattn_load_row(w->V + j * D, dattn_ptr(&p->v, dattn_row_off(c, &p->v, b, j, h), es), p->dtype, D);
    }
    memset(w->dK, 0, sizeof(float) * (size_t)(n * D));
    memset(w->dV, 0, sizeof(float) * (size_t)(n * D));
    if (c->c2p) {
        load_table(w->PK, &p->pk, c, h, es);
        memset(dpk_part, 0, sizeof(float) * (size_t)(S2 * D));
    }
    if (c->p2c) {
        load_table(w->PQ, &p->pq, c, h, es);
        memset(dpq_part, 0, sizeof(float) * (size_t)(S2 * D));
    }
    const float *lse = (const float *)p->lse.data;

    for (int64_t i = 0; i < n; i++) {
        dattn_load_row(w->doi, dattn_ptr(&p->dout, dattn_row_off(c, &p->dout, b, i, h), es), p->dtype, D);
        for (int64_t d = 0; d < D; d++) w->dqi[d] = 0.0f;
        if (!dattn_valid(c, b, i)) {
            if (p->padded_rows == DATTN_PADROWS_HF) {
                float f = ds_drop / (float)n;
                for (int64_t j = 0; j < n; j++) {
                    if (!dattn_keep(c, b, h, i, j)) continue;
                    for (int64_t d = 0; d < D; d++) w->dV[j * D + d] += f * w->doi[d];
                }
            }
        } else {
            dattn_load_row(w->qi, dattn_ptr(&p->q, dattn_row_off(c, &p->q, b, i, h), es), p->dtype, D);
            dattn_load_row(w->oi, dattn_ptr(&p->out, dattn_row_off(c, &p->out, b, i, h), es), p->dtype, D);
            float Di = dotf(w->doi, w->oi, D);
            float lse_i = lse[dattn_lse_off(c, b, h, i)];
            if (c->c2p) memset(w->c2p_done, 0, (size_t)S2);
            for (int64_t j = 0; j < n; j++) {
                if (!dattn_valid(c, b, j)) continue;
                const float *kj = w->K + j * D;
                float s = dotf(w->qi, kj, D);
                int32_t t = dattn_slotmap_get(sm, i - j);
                if (c->c2p) {
                    if (!w->c2p_done[t]) {
                        w->c2p[t] = dotf(w->qi, w->PK + (int64_t)t * D, D);
                        w->c2p_done[t] = 1;
                    }
                    s += w->c2p[t];
                }
                if (c->p2c) s += dotf(kj, w->PQ + (int64_t)t * D, D);
                float pij = expf(s * inv_scale - lse_i);
                float keep = dattn_keep(c, b, h, i, j) ? ds_drop : 0.0f;
                float dp = dotf(w->doi, w->V + j * D, D) * keep;
                float g = pij * (dp - Di) * inv_scale;
                float pv = pij * keep;
                for (int64_t d = 0; d < D; d++) {
                    w->dV[j * D + d] += pv * w->doi[d];
                    w->dqi[d] += g * kj[d];
                    w->dK[j * D + d] += g * w->qi[d];
                }
                if (c->c2p) {
                    const float *pkt = w->PK + (int64_t)t * D;
                    float *acc = dpk_part + (int64_t)t * D;
                    for (int64_t d = 0; d < D; d++) {
                        w->dqi[d] += g * pkt[d];
                        acc[d] += g * w->qi[d];
                    }
                }
                if (c->p2c) {
                    const float *pqt = w->PQ + (int64_t)t * D;
                    float *acc = dpq_part + (int64_t)t * D;
                    for (int64_t d = 0; d < D; d++) {
                        w->dK[j * D + d] += g * pqt[d];
                        acc[d] += g * kj[d];
                    }
                }
            }
        }
        dattn_store_row((char *)p->dq.data + dattn_row_off(c, &p->dq, b, i, h) * (int64_t)es, w->dqi,
                        p->dtype, D);
    }
    for (int64_t j = 0; j < n; j++) {
        dattn_store_row((char *)p->dk.data + dattn_row_off(c, &p->dk, b, j, h) * (int64_t)es,
                        w->dK + j * D, p->dtype, D);
        dattn_store_row((char *)p->dv.data + dattn_row_off(c, &p->dv, b, j, h) * (int64_t)es,
                        w->dV + j * D, p->dtype, D);
    }
}

/* dst[h] = sum over b of part[b*H + h], in b order, stored in the output dtype. */
static void reduce_tables(const dattn_call *c, const float *part, const dattn_tensor *dst, int nt)
{
    const size_t es = dattn_dtype_size(c->p->dtype);
    const int64_t rows = 2 * (int64_t)c->S, D = c->D, per = rows * D;
    (void)nt;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
    for (int64_t hr = 0; hr < c->H * rows; hr++) {
        int64_t h = hr / rows, r = hr % rows;
        float acc[256];
        for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
        for (int64_t b = 0; b < c->B; b++) {
            const float *src = part + (b * c->H + h) * per + r * D;
            for (int64_t d = 0; d < D; d++) acc[d] += src[d];
        }
        dattn_store_row((char *)dst->data + (h * dst->stride[0] + r * dst->stride[1]) * (int64_t)es,
                        acc, c->p->dtype, D);
    }
}

dattn_status dattn_cpu_bwd(const dattn_call *c, const dattn_slotmap *sm)
{
    const int64_t pairs = c->B * c->H;
    int nt = 1;
#ifdef _OPENMP
    nt = c->p->num_threads > 0 ? c->p->num_threads : omp_get_max_threads();
#endif
    int nw = nt;
    if (nw > pairs) nw = pairs > 0 ? (int)pairs : 1;
    bwd_buf *w = calloc((size_t)nw, sizeof *w);
    int ok = w != NULL;
    for (int t = 0; ok && t < nw; t++) ok = buf_alloc(&w[t], c->max_len, c->D, 2 * (int64_t)c->S);
    if (!ok) {
        for (int t = 0; w && t < nw; t++) buf_free(&w[t]);
        free(w);
        return dattn_set_error(DATTN_INTERNAL, "out of host memory for CPU tiles");
    }
    float *ws = (float *)c->p->workspace;
    const size_t tf = table_floats(c);
    float *dpk_part = c->c2p ? ws : NULL;
    float *dpq_part = c->p2c ? ws + (c->c2p ? (size_t)pairs * tf : 0) : NULL;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nw) schedule(dynamic, 1)
#endif
    for (int64_t bh = 0; bh < pairs; bh++) {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        bwd_pair(c, sm, bh / c->H, bh % c->H, &w[t], dpk_part ? dpk_part + (size_t)bh * tf : NULL,
                 dpq_part ? dpq_part + (size_t)bh * tf : NULL);
    }
    for (int t = 0; t < nw; t++) buf_free(&w[t]);
    free(w);
    if (c->c2p) reduce_tables(c, dpk_part, &c->p->dpk, nt);
    if (c->p2c) reduce_tables(c, dpq_part, &c->p->dpq, nt);
    return DATTN_OK;
}

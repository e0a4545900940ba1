/* float64 reference of ../shared/SPEC.md (tests only). API: ref64.h.
 *
 * Written from SPEC.md and the public header alone, independently of src/cpu: the only
 * library functions used are dattn_slots() (slot of a relative position, the float32
 * formula) and dattn_dropout_keep() (the documented dropout mask). Everything else —
 * reading any dtype through any strides, the mask, packed sequences, padded rows, the
 * softmax, the scale, the backward — is computed here in double, in the most direct way:
 * for every query row, every key of its sequence.
 *
 * Index conventions: b is the batch index (packed: the sequence index), i and j are
 * positions inside the sequence (packed: token cu_seqlens[b] + i), h the head.
 */
#include "ref64.h"

#include "half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ reading inputs */

static double rd(const void *base, int32_t dtype, int64_t off)
{
    switch (dtype) {
    case DATTN_F32: return (double)((const float *)base)[off];
    case DATTN_F16: return th_f16_to_double(((const uint16_t *)base)[off]);
    case DATTN_BF16: return th_bf16_to_double(((const uint16_t *)base)[off]);
    }
    return NAN;
}

static void *xcalloc(size_t n, size_t sz)
{
    void *m = calloc(n ? n : 1, sz ? sz : 1);
    if (!m) {
        fprintf(stderr, "ref64: out of memory (%zu x %zu bytes)\n", n, sz);
        abort();
    }
    return m;
}

typedef struct rctx {
    const dattn_params *p;
    int packed, c2p, p2c, zero_rows;
    int64_t B, L, H, D;
    int32_t S;
    double scale;      /* float32 sqrt(D * f), as transformers computes it */
    int drop;
    double drop_scale; /* 1 / (1 - dropout_p) */
    int64_t maxlen;    /* longest sequence */
    int32_t *slot;     /* slot[r + maxlen - 1], r in [-(maxlen - 1), maxlen - 1] */
} rctx;

static int64_t seq_len(const rctx *c, int64_t b)
{
    return c->packed ? (int64_t)c->p->cu_seqlens[b + 1] - c->p->cu_seqlens[b] : c->L;
}

/* Element offset (in elements) of q/k/v/out/dout (b, position i, h, d). */
static int64_t tok_off(const rctx *c, const dattn_tensor *t, int64_t b, int64_t i, int64_t h,
                       int64_t d)
{
    if (c->packed)
        return ((int64_t)c->p->cu_seqlens[b] + i) * t->stride[0] + h * t->stride[1] +
               d * t->stride[2];
    return b * t->stride[0] + i * t->stride[1] + h * t->stride[2] + d * t->stride[3];
}

/* Index into a natural-layout double array ([B,L,H,D] or [T,H,D]). */
static int64_t nat_off(const rctx *c, int64_t b, int64_t i, int64_t h)
{
    if (c->packed) return (((int64_t)c->p->cu_seqlens[b] + i) * c->H + h) * c->D;
    return ((b * c->L + i) * c->H + h) * c->D;
}

static int64_t nat_lse(const rctx *c, int64_t b, int64_t i, int64_t h)
{
    if (c->packed) {
        int64_t T = c->p->total_tokens;
        return h * T + c->p->cu_seqlens[b] + i;
    }
    return (b * c->H + h) * c->L + i;
}

static int valid_tok(const rctx *c, int64_t b, int64_t i)
{
    if (c->packed || !c->p->mask.data) return 1;
    const uint8_t *m = (const uint8_t *)c->p->mask.data;
    return m[b * c->p->mask.stride[0] + i * c->p->mask.stride[1]] != 0;
}

static void ctx_init(rctx *c, const dattn_params *p)
{
    memset(c, 0, sizeof *c);
    c->p = p;
    c->packed = p->layout == DATTN_LAYOUT_PACKED;
    c->c2p = (p->pos_att & DATTN_POS_C2P) != 0;
    c->p2c = (p->pos_att & DATTN_POS_P2C) != 0;
    c->zero_rows = p->padded_rows == DATTN_PADROWS_ZERO;
    c->B = p->batch;
    c->L = p->seqlen;
    c->H = p->heads;
    c->D = p->head_dim;
    c->S = p->position_buckets > 0 ? p->position_buckets : p->max_relative_positions;
    int f = 1 + c->c2p + c->p2c;
    c->scale = (double)sqrtf((float)c->D * (float)f);
    c->drop = (double)p->dropout_p * 65536.0 >= 1.0; /* dattn.h: threshold 0 = no dropout */
    c->drop_scale = 1.0 / (1.0 - (double)p->dropout_p);
    c->maxlen = 0;
    for (int64_t b = 0; b < c->B; b++)
        if (seq_len(c, b) > c->maxlen) c->maxlen = seq_len(c, b);
    int64_t n = c->maxlen > 0 ? 2 * c->maxlen - 1 : 1;
    c->slot = (int32_t *)xcalloc((size_t)n, sizeof(int32_t));
    if (c->maxlen > 0 &&
        dattn_slots(p->position_buckets, p->max_relative_positions, -(c->maxlen - 1), n,
                    c->slot) != DATTN_OK) {
        fprintf(stderr, "ref64: dattn_slots failed: %s\n", dattn_last_error());
        abort();
    }
}

static void ctx_free(rctx *c) { free(c->slot); }

static int32_t slot_of(const rctx *c, int64_t i, int64_t j)
{
    return c->slot[i - j + c->maxlen - 1];
}

/* One (b, h) slice in double: Q, K, V, (dO) [n][D] and PK, PQ [2S][D]. */
typedef struct rslice {
    int64_t n;
    double *q, *k, *v, *dout, *pk, *pq;
} rslice;

static void load_tok(const rctx *c, const dattn_tensor *t, int64_t b, int64_t h, int64_t n,
                     double *dst)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t d = 0; d < c->D; d++)
            dst[i * c->D + d] = rd(t->data, c->p->dtype, tok_off(c, t, b, i, h, d));
}

static void load_pos(const rctx *c, const dattn_tensor *t, int64_t h, double *dst)
{
    for (int64_t s = 0; s < 2 * (int64_t)c->S; s++)
        for (int64_t d = 0; d < c->D; d++)
            dst[s * c->D + d] =
                rd(t->data, c->p->dtype, h * t->stride[0] + s * t->stride[1] + d * t->stride[2]);
}

static void slice_load(const rctx *c, rslice *s, int64_t b, int64_t h, int with_q, int with_dout)
{
    int64_t n = seq_len(c, b), D = c->D;
    s->n = n;
    s->q = with_q ? (double *)xcalloc((size_t)(n * D), sizeof(double)) : NULL;
    s->k = (double *)xcalloc((size_t)(n * D), sizeof(double));
    s->v = (double *)xcalloc((size_t)(n * D), sizeof(double));
    s->dout = with_dout ? (double *)xcalloc((size_t)(n * D), sizeof(double)) : NULL;
    s->pk = c->c2p ? (double *)xcalloc((size_t)(2 * c->S * D), sizeof(double)) : NULL;
    s->pq = c->p2c ? (double *)xcalloc((size_t)(2 * c->S * D), sizeof(double)) : NULL;
    if (with_q) load_tok(c, &c->p->q, b, h, n, s->q);
    load_tok(c, &c->p->k, b, h, n, s->k);
    load_tok(c, &c->p->v, b, h, n, s->v);
    if (with_dout) load_tok(c, &c->p->dout, b, h, n, s->dout);
    if (c->c2p) load_pos(c, &c->p->pk, h, s->pk);
    if (c->p2c) load_pos(c, &c->p->pq, h, s->pq);
}

static void slice_free(rslice *s)
{
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->dout);
    free(s->pk);
    free(s->pq);
}

static double dot(const double *a, const double *b, int64_t D)
{
    double s = 0.0;
    for (int64_t d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

/* Attention row of query i of (b, h): pr[j] = softmax probability (before dropout),
 * kd[j] = dropout factor (keep / (1 - p), or 1), returns the row's lse. Padded rows:
 * uniform 1/n (HF) or all 0 (ZERO, lse = -inf). `*padded` tells which. */
static double row_probs(const rctx *c, const rslice *s, const double *qi, int64_t b, int64_t h,
                        int64_t i, double *pr, double *kd, double *sc, double *sg, int *padded)
{
    int64_t n = s->n, D = c->D;
    for (int64_t j = 0; j < n; j++)
        kd[j] = c->drop ? (dattn_dropout_keep(c->p->dropout_seed, c->p->dropout_offset,
                                              c->p->dropout_p, b, h, c->H, i, j)
                               ? c->drop_scale
                               : 0.0)
                        : 1.0;
    if (!valid_tok(c, b, i)) {
        *padded = 1;
        for (int64_t j = 0; j < n; j++) {
            pr[j] = c->zero_rows ? 0.0 : 1.0 / (double)n;
            if (sg) sg[j] = 0.0;
        }
        return c->zero_rows ? -INFINITY : log((double)n);
    }
    *padded = 0;
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        if (!valid_tok(c, b, j)) continue;
        const double *kj = s->k + j * D;
        double v = dot(qi, kj, D);
        int32_t t = slot_of(c, i, j);
        if (c->c2p) v += dot(qi, s->pk + (int64_t)t * D, D);
        if (c->p2c) v += dot(kj, s->pq + (int64_t)t * D, D);
        sc[j] = v / c->scale;
        if (sc[j] > mx) mx = sc[j];
        if (sg) {
            double m = 0.0;
            for (int64_t d = 0; d < D; d++) {
                m += fabs(qi[d] * kj[d]);
                if (c->c2p) m += fabs(qi[d] * s->pk[(int64_t)t * D + d]);
                if (c->p2c) m += fabs(kj[d] * s->pq[(int64_t)t * D + d]);
            }
            sg[j] = m / c->scale;
        }
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) {
        pr[j] = valid_tok(c, b, j) ? exp(sc[j] - mx) : 0.0;
        sum += pr[j];
    }
    for (int64_t j = 0; j < n; j++) pr[j] /= sum;
    if (sg) {
        /* first-order relative error factor of p_ij: 1 + sigma_ij + sum_k p_ik sigma_ik */
        double sbar = 0.0;
        for (int64_t j = 0; j < n; j++)
            if (pr[j] > 0.0) sbar += pr[j] * sg[j];
        for (int64_t j = 0; j < n; j++) sg[j] = pr[j] > 0.0 ? 1.0 + sg[j] + sbar : 0.0;
    }
    return mx + log(sum);
}

static void fwd_one(const rctx *c, const rslice *s, const double *qi, int64_t b, int64_t h,
                    int64_t i, double *out_row, double *lse, double *mag_row, double *smag_row,
                    double *pr, double *kd, double *sc, double *sg)
{
    int padded;
    double l = row_probs(c, s, qi, b, h, i, pr, kd, sc, smag_row ? sg : NULL, &padded);
    if (lse) *lse = l;
    for (int64_t d = 0; d < c->D; d++) {
        double o = 0.0, m = 0.0, sm = 0.0;
        for (int64_t j = 0; j < s->n; j++) {
            double w = pr[j] * kd[j];
            o += w * s->v[j * c->D + d];
            m += w * fabs(s->v[j * c->D + d]);
            if (smag_row) sm += w * fabs(s->v[j * c->D + d]) * (padded ? 1.0 : sg[j]);
        }
        if (out_row) out_row[d] = o;
        if (mag_row) mag_row[d] = m;
        if (smag_row) smag_row[d] = sm;
    }
}

static void row_ex(const dattn_params *p, int64_t b, int64_t h, int64_t i, double *out_row,
                   double *lse, double *mag_row, double *smag_row)
{
    rctx c;
    ctx_init(&c, p);
    rslice s;
    slice_load(&c, &s, b, h, 0, 0);
    double *qi = (double *)xcalloc((size_t)c.D, sizeof(double));
    for (int64_t d = 0; d < c.D; d++) qi[d] = rd(p->q.data, p->dtype, tok_off(&c, &p->q, b, i, h, d));
    double *pr = (double *)xcalloc((size_t)s.n, sizeof(double));
    double *kd = (double *)xcalloc((size_t)s.n, sizeof(double));
    double *sc = (double *)xcalloc((size_t)s.n, sizeof(double));
    double *sg = (double *)xcalloc((size_t)s.n, sizeof(double));
    fwd_one(&c, &s, qi, b, h, i, out_row, lse, mag_row, smag_row, pr, kd, sc, sg);
    free(sg);
    free(qi);
    free(pr);
    free(kd);
    free(sc);
    slice_free(&s);
    ctx_free(&c);
}

void ref64_fwd_row(const dattn_params *p, int64_t b, int64_t h, int64_t i, double *out_row,
                   double *lse)
{
    row_ex(p, b, h, i, out_row, lse, NULL, NULL);
}

void ref64_fwd_row_mag(const dattn_params *p, int64_t b, int64_t h, int64_t i, double *out_row,
                       double *lse, double *mag_row, double *smag_row)
{
    row_ex(p, b, h, i, out_row, lse, mag_row, smag_row);
}

void ref64_fwd_mag(const dattn_params *p, double *out, double *lse, double *mag, double *smag)
{
    rctx c;
    ctx_init(&c, p);
    size_t n0 = c.maxlen > 0 ? (size_t)c.maxlen : 1;
    double *pr = (double *)xcalloc(n0, sizeof(double));
    double *kd = (double *)xcalloc(n0, sizeof(double));
    double *sc = (double *)xcalloc(n0, sizeof(double));
    double *sg = (double *)xcalloc(n0, sizeof(double));
    for (int64_t b = 0; b < c.B; b++)
        for (int64_t h = 0; h < c.H; h++) {
            rslice s;
            slice_load(&c, &s, b, h, 1, 0);
            for (int64_t i = 0; i < s.n; i++) {
                int64_t o = nat_off(&c, b, i, h);
                fwd_one(&c, &s, s.q + i * c.D, b, h, i, out ? out + o : NULL,
                        lse ? lse + nat_lse(&c, b, i, h) : NULL, mag ? mag + o : NULL,
                        smag ? smag + o : NULL, pr, kd, sc, sg);
            }
            slice_free(&s);
        }
    free(sg);
    free(pr);
    free(kd);
    free(sc);
    ctx_free(&c);
}

void ref64_fwd(const dattn_params *p, double *out, double *lse)
{
    ref64_fwd_mag(p, out, lse, NULL, NULL);
}

/* ------------------------------------------------------------------ backward */

static void axpy(double *y, double a, const double *x, int64_t D)
{
    for (int64_t d = 0; d < D; d++) y[d] += a * x[d];
}

static void axpy_abs(double *y, double a, const double *x, int64_t D)
{
    for (int64_t d = 0; d < D; d++) y[d] += a * fabs(x[d]);
}

static void zero_grads(const ref64_grads *g, size_t nt, size_t np, int c2p, int p2c)
{
    if (!g) return;
    memset(g->dq, 0, nt * sizeof(double));
    memset(g->dk, 0, nt * sizeof(double));
    memset(g->dv, 0, nt * sizeof(double));
    if (g->dpk && c2p) memset(g->dpk, 0, np * sizeof(double));
    if (g->dpq && p2c) memset(g->dpq, 0, np * sizeof(double));
}

/* Adds the magnitude terms of pair (i, j) with weight w (>= 0) to g. */
static void mag_pair(const rctx *c, const rslice *s, const ref64_grads *g, int64_t b, int64_t h,
                     int64_t i, int64_t j, int32_t t, double w)
{
    int64_t D = c->D, S2 = 2 * (int64_t)c->S;
    const double *qi = s->q + i * D, *kj = s->k + j * D;
    double *mq = g->dq + nat_off(c, b, i, h), *mk = g->dk + nat_off(c, b, j, h);
    axpy_abs(mq, w, kj, D);
    axpy_abs(mk, w, qi, D);
    if (c->c2p) {
        axpy_abs(mq, w, s->pk + t * D, D);
        if (g->dpk) axpy_abs(g->dpk + (h * S2 + t) * D, w, qi, D);
    }
    if (c->p2c) {
        axpy_abs(mk, w, s->pq + t * D, D);
        if (g->dpq) axpy_abs(g->dpq + (h * S2 + t) * D, w, kj, D);
    }
}

void ref64_bwd_mag(const dattn_params *p, double *dq, double *dk, double *dv, double *dpk,
                   double *dpq, const ref64_grads *mag, const ref64_grads *smag)
{
    rctx c;
    ctx_init(&c, p);
    int64_t D = c.D, H = c.H, S2 = 2 * (int64_t)c.S;
    int64_t ntok = c.packed ? p->total_tokens : c.B * c.L;
    size_t nt = (size_t)(ntok * H * D), np = (size_t)(H * S2 * D);
    ref64_grads g = {dq, dk, dv, dpk, dpq};
    zero_grads(&g, nt, np, c.c2p, c.p2c);
    zero_grads(mag, nt, np, c.c2p, c.p2c);
    zero_grads(smag, nt, np, c.c2p, c.p2c);
    int64_t n0 = c.maxlen > 0 ? c.maxlen : 1;
    double *pr = (double *)xcalloc((size_t)n0, sizeof(double));
    double *kd = (double *)xcalloc((size_t)n0, sizeof(double));
    double *sc = (double *)xcalloc((size_t)n0, sizeof(double));
    double *sg = (double *)xcalloc((size_t)n0, sizeof(double));
    double *dp = (double *)xcalloc((size_t)n0, sizeof(double));
    double *dpm = (double *)xcalloc((size_t)n0, sizeof(double));
    for (int64_t b = 0; b < c.B; b++)
        for (int64_t h = 0; h < H; h++) {
            rslice s;
            slice_load(&c, &s, b, h, 1, 1);
            int64_t n = s.n;
            double *gpk = dpk && c.c2p ? dpk + h * S2 * D : NULL;
            double *gpq = dpq && c.p2c ? dpq + h * S2 * D : NULL;
            for (int64_t i = 0; i < n; i++) {
                const double *qi = s.q + i * D, *doi = s.dout + i * D;
                int padded;
                row_probs(&c, &s, qi, b, h, i, pr, kd, sc, smag ? sg : NULL, &padded);
                /* dv: every row, padded rows (HF) included, through its probabilities */
                for (int64_t j = 0; j < n; j++) {
                    double w = pr[j] * kd[j];
                    if (w == 0.0) continue;
                    axpy(dv + nat_off(&c, b, j, h), w, doi, D);
                    if (mag) axpy_abs(mag->dv + nat_off(&c, b, j, h), w, doi, D);
                    if (smag)
                        axpy_abs(smag->dv + nat_off(&c, b, j, h), w * (padded ? 1.0 : sg[j]), doi, D);
                }
                if (padded) continue; /* constant scores: no gradient to q, k, pk, pq */
                /* dp[j] = d(loss)/d(p[j]) = kd[j] * dout_i . v_j;  Di = sum_j p dp */
                double Di = 0.0, Dm = 0.0;
                for (int64_t j = 0; j < n; j++) {
                    const double *vj = s.v + j * D;
                    double a = 0.0, am = 0.0;
                    for (int64_t d = 0; d < D; d++) {
                        a += doi[d] * vj[d];
                        am += fabs(doi[d] * vj[d]);
                    }
                    dp[j] = kd[j] * a;
                    dpm[j] = kd[j] * am;
                    Di += pr[j] * dp[j];
                    Dm += pr[j] * dpm[j]; /* = sum_d |dout_d| * sum_j p kd |v_jd| */
                }
                double *gq = dq + nat_off(&c, b, i, h);
                for (int64_t j = 0; j < n; j++) {
                    if (pr[j] == 0.0) continue; /* masked key */
                    const double *kj = s.k + j * D;
                    double w = pr[j] * (dp[j] - Di) / c.scale;
                    int32_t t = slot_of(&c, i, j);
                    double *gk = dk + nat_off(&c, b, j, h);
                    axpy(gq, w, kj, D);
                    axpy(gk, w, qi, D);
                    if (c.c2p) {
                        axpy(gq, w, s.pk + t * D, D);
                        if (gpk) axpy(gpk + t * D, w, qi, D);
                    }
                    if (c.p2c) {
                        axpy(gk, w, s.pq + t * D, D);
                        if (gpq) axpy(gpq + t * D, w, kj, D);
                    }
                    double wm = pr[j] * (dpm[j] + Dm) / c.scale;
                    if (mag) mag_pair(&c, &s, mag, b, h, i, j, t, wm);
                    if (smag) mag_pair(&c, &s, smag, b, h, i, j, t, wm * sg[j]);
                }
            }
            slice_free(&s);
        }
    free(pr);
    free(kd);
    free(sc);
    free(sg);
    free(dp);
    free(dpm);
    ctx_free(&c);
}

void ref64_bwd(const dattn_params *p, double *dq, double *dk, double *dv, double *dpk,
               double *dpq)
{
    ref64_bwd_mag(p, dq, dk, dv, dpk, dpq, NULL, NULL);
}

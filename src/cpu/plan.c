/* The plan of a CPU call: tile sizes, the position tables packed once per call (pk^T,
 * pq^T, and for the backward pk, pq in fp32), the slot row sneg[], and the layout of
 * the pair buffers and per-thread tiles. The same layout functions size the workspace
 * (arena without memory: they only count) and carve it. */
#include "cpu.h"

#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int64_t plan_W2(const dattn_call *c) { return dattn_round_up(2 * (int64_t)c->S, 16) + 16; }
static int64_t plan_Dp(const dattn_call *c) { return dattn_round_up(c->D, 16); }

#define TAKE(a, type, count) ((type *)dattn_arena_take((a), sizeof(type) * (size_t)(count)))

void dattn_cpu_plan_layout(cpu_plan *pl, const dattn_call *c, const dattn_slotmap *sm,
                           dattn_arena *a, int bwd)
{
    memset(pl, 0, sizeof *pl);
    pl->c = c;
    pl->sm = sm;
    pl->L = c->max_len;
    pl->D = c->D;
    pl->Dp = plan_Dp(c);
    pl->S2 = 2 * (int64_t)c->S;
    pl->W2 = plan_W2(c);
    pl->bm = DATTN_CPU_BM;
    pl->bn = DATTN_CPU_BN;
    pl->c2 = 1.4426950408889634f / c->scale;
    pl->inv_scale = 1.0f / c->scale;
    const int64_t H = c->H;
    pl->sneg = TAKE(a, int32_t, 2 * pl->L + pl->bn + 16);
    pl->spos = TAKE(a, int32_t, 2 * pl->L + pl->bm + 16);
    if (c->c2p) pl->pkt = TAKE(a, float, H * pl->D * pl->W2);
    if (c->p2c) pl->pqt = TAKE(a, float, H * pl->D * pl->W2);
    if (bwd && c->c2p) pl->pkn = TAKE(a, float, H * pl->S2 * pl->Dp);
    if (bwd && c->p2c) pl->pqn = TAKE(a, float, H * pl->S2 * pl->Dp);
}

/* Fills the tables laid out by dattn_cpu_plan_layout. */
void dattn_cpu_plan_fill(cpu_plan *pl, int nthreads)
{
    const dattn_call *c = pl->c;
    const dattn_params *p = c->p;
    const size_t es = dattn_dtype_size(p->dtype);
    int32_t *sneg = (int32_t *)pl->sneg, *spos = (int32_t *)pl->spos;
    for (int64_t u = 0; u < 2 * pl->L + pl->bn + 16; u++) sneg[u] = dattn_slotmap_get(pl->sm, pl->L - 1 - u);
    for (int64_t x = 0; x < 2 * pl->L + pl->bm + 16; x++) spos[x] = dattn_slotmap_get(pl->sm, x - (pl->L - 1));
    /* The permute path of the band bias reads the slots of 16 consecutive r from one
     * 16-float window: it needs steps of at most 1 (true for every transformers
     * configuration with (M - 1) / (position_buckets / 2) >= e, e.g. v2/v3's 256/512). */
    const int64_t rm = pl->L > 0 ? pl->L - 1 : 0;
    pl->monotone = 1;
    pl->smin = pl->smax = dattn_slotmap_get(pl->sm, -rm);
    int maxstep = 0;
    for (int64_t r = -rm; r <= rm; r++) {
        int32_t t = dattn_slotmap_get(pl->sm, r);
        if (t < pl->smin) pl->smin = t;
        if (t > pl->smax) pl->smax = t;
        if (r < rm) {
            int32_t d = dattn_slotmap_get(pl->sm, r + 1) - t;
            if (d < 0) pl->monotone = 0;
            if (d > maxstep) maxstep = d;
        }
    }
    /* also past the sequence ends: lanes there read slots of r in [-(L + 64), L + 80) */
    for (int64_t r = -(pl->L + 64); r < pl->L + 80; r++) {
        if (r >= -rm && r < rm) continue;
        int32_t d = dattn_slotmap_get(pl->sm, r + 1) - dattn_slotmap_get(pl->sm, r);
        if (d < 0) pl->monotone = 0;
        if (d > maxstep) maxstep = d;
    }
    pl->unit_steps = pl->monotone && maxstep <= 1;
    const int64_t H = c->H, D = pl->D, Dp = pl->Dp, S2 = pl->S2, W2 = pl->W2;
    (void)nthreads;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nthreads) schedule(static)
#endif
    for (int64_t ht = 0; ht < 2 * H; ht++) {
        const int64_t h = ht / 2;
        const int which = (int)(ht % 2); /* 0: pk, 1: pq */
        if (which == 0 ? !c->c2p : !c->p2c) continue;
        const dattn_tensor *t = which == 0 ? &p->pk : &p->pq;
        float *tr = (float *)(which == 0 ? pl->pkt : pl->pqt) + h * D * W2;
        float *nat = (float *)(which == 0 ? pl->pkn : pl->pqn);
        if (nat) nat += h * S2 * Dp;
        /* only the slots this call can see; 16 rows at a time so that the transposed
         * writes are contiguous */
        float blk[16][256];
        memset(tr, 0, sizeof(float) * (size_t)(D * W2));
        for (int64_t r0 = pl->smin; r0 <= pl->smax; r0 += 16) {
            const int64_t nr = pl->smax - r0 + 1 < 16 ? pl->smax - r0 + 1 : 16;
            for (int64_t k = 0; k < nr; k++) {
                const int64_t r = r0 + k;
                dattn_load_row(blk[k], dattn_ptr(t, h * t->stride[0] + r * t->stride[1], es), p->dtype, D);
                if (nat) {
                    memcpy(nat + r * Dp, blk[k], sizeof(float) * (size_t)D);
                    memset(nat + r * Dp + D, 0, sizeof(float) * (size_t)(Dp - D));
                }
            }
            for (int64_t d = 0; d < D; d++)
                for (int64_t k = 0; k < nr; k++) tr[d * W2 + r0 + k] = blk[k][d];
        }
    }
}

void dattn_cpu_pair_layout(const cpu_plan *pl, cpu_pair *pr, dattn_arena *a, int bwd)
{
    const dattn_call *c = pl->c;
    memset(pr, 0, sizeof *pr);
    const int64_t npad = dattn_round_up(pl->L, pl->bn), nt = npad / pl->bn;
    const int64_t Wmax = dattn_round_up(pl->S2, 16);
    pr->kt = TAKE(a, float, nt * pl->D * pl->bn);
    if (!bwd) pr->v = TAKE(a, float, npad * pl->Dp);
    pr->kbias = TAKE(a, float, npad);
    pr->psp = TAKE(a, float, npad);
    pr->psn = TAKE(a, float, npad);
    if (c->p2c) pr->ptab = TAKE(a, float, npad * Wmax + 16);
    pr->tany = TAKE(a, unsigned char, nt);
    if (bwd) {
        pr->kn = TAKE(a, float, npad * pl->Dp);
        pr->vt = TAKE(a, float, nt * pl->D * pl->bn);
        if (c->p2c) {
            pr->gp = TAKE(a, float, npad * Wmax + 16);
            pr->gsp = TAKE(a, float, npad);
            pr->gsn = TAKE(a, float, npad);
        }
        pr->dk = TAKE(a, float, npad * pl->Dp);
        pr->dv = TAKE(a, float, npad * pl->Dp);
    }
}

void dattn_cpu_pair_set(const cpu_plan *pl, cpu_pair *pr, int64_t b, int64_t h)
{
    const dattn_call *c = pl->c;
    pr->b = b;
    pr->h = h;
    pr->n = dattn_seq_len(c, b);
    pr->nt = (pr->n + pl->bn - 1) / pl->bn;
    pr->npad = pr->nt * pl->bn;
    int64_t rm = pr->n > 0 ? pr->n - 1 : 0;
    int32_t hi;
    dattn_cpu_slot_range(pl, -rm, rm, &pr->tlo_p, &hi);
    pr->Wreal_p = hi - pr->tlo_p + 1;
    pr->Wp = dattn_round_up(pr->Wreal_p, 16);
    pr->any_masked = 0;
    for (int64_t j = 0; j < pr->n && !pr->any_masked; j++) pr->any_masked = !dattn_valid(c, b, j);
}

void dattn_cpu_tbuf_layout(const cpu_plan *pl, cpu_tbuf *tb, dattn_arena *a, int bwd)
{
    const dattn_call *c = pl->c;
    const int64_t bm = pl->bm, bn = pl->bn, Dp = pl->Dp;
    memset(tb, 0, sizeof *tb);
    tb->q = TAKE(a, float, bm * Dp);
    if (c->c2p) tb->ctab = TAKE(a, float, bm * pl->W2);
    tb->s = TAKE(a, float, bm * bn);
    tb->o = TAKE(a, float, bm * Dp);
    tb->m = TAKE(a, float, bm);
    tb->rmax = TAKE(a, float, bm);
    tb->ref = TAKE(a, float, bm);
    tb->lvec = TAKE(a, float, bm * 16);
    tb->alpha = TAKE(a, float, bm);
    tb->crp = TAKE(a, float, bm);
    tb->crn = TAKE(a, float, bm);
    tb->zero = TAKE(a, float, bm);
    if (c->drop_threshold) tb->keep = TAKE(a, float, bm * bn);
    tb->vsum = TAKE(a, float, Dp);
    tb->valid = TAKE(a, unsigned char, bm);
    if (bwd) {
        tb->dout = TAKE(a, float, bm * Dp);
        tb->dp = TAKE(a, float, bm * bn);
        tb->dq = TAKE(a, float, bm * Dp);
        if (c->c2p) tb->gc = TAKE(a, float, bm * pl->W2);
        tb->di = TAKE(a, float, bm);
        tb->lse2 = TAKE(a, float, bm);
    }
    if (tb->zero) memset(tb->zero, 0, sizeof(float) * (size_t)bm);
    /* the band bias reads up to 15 floats past a row of the c2p table */
    if (tb->ctab) memset(tb->ctab, 0, sizeof(float) * (size_t)(bm * pl->W2));
}

int dattn_cpu_threads(const dattn_call *c)
{
#ifdef _OPENMP
    return c->p->num_threads > 0 ? c->p->num_threads : omp_get_max_threads();
#else
    (void)c;
    return 1;
#endif
}

void *dattn_cpu_alloc(size_t bytes)
{
    size_t n = (bytes + 63) & ~(size_t)63;
    if (n == 0) n = 64;
    return aligned_alloc(64, n);
}
